"""The PySpark layer: one module per job, the public names re-exported here.

>>> from cdc_decode import spark as cdc_spark
>>> events = cdc_spark.decode(kafka_df, "tencent-dts")

- :mod:`cdc_decode.spark.decoding`: ``decode`` (``mapInArrow``), ``DecodeAccounting``.
- :mod:`cdc_decode.spark.session`: ``local_session``, a local SparkSession with Delta Lake,
  Spark's Kafka source or spark-avro (from given jars or from Maven Central).
- :mod:`cdc_decode.spark.datastream`: ``read_datastream`` (batch and streaming) over the
  ``cdc-datastream`` Python data source, for Datastream bucket trees.
- :mod:`cdc_decode.spark.stream`: ``decode_stream``, Structured Streaming from Kafka with
  Tencent DTS multi-part sets joined across micro-batches (keyed state).
- :mod:`cdc_decode.spark.apply`: ``apply_changes`` (events into a Delta table, SCD type 1
  or 2), ``current_rows``, ``ApplyResult``; its rules in :mod:`cdc_decode.spark._apply_rules`,
  the table format behind :mod:`cdc_decode.spark._tables`.
- :mod:`cdc_decode.spark.schemas`: ``table_schemas`` and ``schema_rows``, the schema pass
  (each table's columns, types and key as the wire describes them).
- :mod:`cdc_decode.spark.sync`: ``sync`` and ``sync_stream``, every table of a stream
  into its own Delta table, created and evolved from the wire's schemas.

The decoding runs on the executors in the Python worker that serves ``mapInArrow``; the
executors' Python (``PYSPARK_PYTHON``) must have ``cdc_decode`` and ``pyarrow`` installed.
"""

from __future__ import annotations

from .apply import ApplyResult, StaleChangesWarning, apply_changes, current_rows
from .datastream import read_datastream
from .decoding import (
    KAFKA_COLUMNS,
    STATS,
    DecodeAccounting,
    decode,
    spark_event_schema,
)
from .schemas import schema_rows, table_schemas
from .session import local_session
from .stream import MULTIPART_FORMATS, decode_stream
from .sync import SyncError, SyncResult, TableSync, sync, sync_stream

__all__ = [
    "KAFKA_COLUMNS",
    "MULTIPART_FORMATS",
    "STATS",
    "ApplyResult",
    "DecodeAccounting",
    "StaleChangesWarning",
    "SyncError",
    "SyncResult",
    "TableSync",
    "apply_changes",
    "current_rows",
    "decode",
    "decode_stream",
    "local_session",
    "read_datastream",
    "schema_rows",
    "spark_event_schema",
    "sync",
    "sync_stream",
    "table_schemas",
]
