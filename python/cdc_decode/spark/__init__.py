"""The PySpark layer: one module per job, the public names re-exported here.

>>> from cdc_decode import spark as cdc_spark
>>> events = cdc_spark.decode(kafka_df, "tencent-dts")

- :mod:`cdc_decode.spark.decoding`: ``decode`` (``mapInArrow``), ``DecodeAccounting``,
  ``local_session``.
- :mod:`cdc_decode.spark.datastream`: ``read_datastream`` (batch and streaming) over the
  ``cdc-datastream`` Python data source, for Datastream bucket trees.

The decoding runs on the executors in the Python worker that serves ``mapInArrow``; the
executors' Python (``PYSPARK_PYTHON``) must have ``cdc_decode`` and ``pyarrow`` installed.
"""

from __future__ import annotations

from .datastream import read_datastream
from .decoding import (
    KAFKA_COLUMNS,
    STATS,
    DecodeAccounting,
    decode,
    local_session,
    spark_event_schema,
)

__all__ = [
    "KAFKA_COLUMNS",
    "STATS",
    "DecodeAccounting",
    "decode",
    "local_session",
    "read_datastream",
    "spark_event_schema",
]
