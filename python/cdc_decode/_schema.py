"""The change-event schema (docs/events.md) and the format names, shared by both engines."""

from __future__ import annotations

import pyarrow as pa

FORMATS: tuple[str, ...] = (
    "tencent-dts",
    "datahub-blob",
    "tdsql-json",
    "datahub-tuple",
    "debezium-json",
    "datastream-json",
    "datastream-avro",
)
"""The format names ``decode`` accepts."""

RECORD_FORMATS: tuple[str, ...] = ("datahub-tuple",)
"""The formats whose input is records (a pyarrow RecordBatch or Table), not binary values."""

MODES: tuple[str, ...] = ("permissive", "dropmalformed", "failfast")
"""What a decoder does with a message that does not decode (docs/events.md)."""

ENGINES: tuple[str, ...] = ("native", "python")
"""The engines: the Rust core and the pure-Python fallback, equal in output."""

OPS: tuple[str, ...] = (
    "insert",
    "update",
    "update_before",
    "update_after",
    "delete",
    "read",
    "truncate",
    "ddl",
    "begin",
    "commit",
    "rollback",
    "heartbeat",
    "checkpoint",
    "tombstone",
    "error",
    "other",
)
"""The ``op`` vocabulary (docs/events.md): every op a decoder writes."""

_TEXT_MAP = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")

EVENT_SCHEMA = pa.schema(
    [
        pa.field("format", pa.string()),
        pa.field("op", pa.string(), nullable=False),
        pa.field("source_op", pa.string()),
        pa.field("source_db", pa.string()),
        pa.field("source_schema", pa.string()),
        pa.field("source_table", pa.string()),
        pa.field("event_time", _TIMESTAMP),
        pa.field("capture_time", _TIMESTAMP),
        pa.field("tx_id", pa.string()),
        pa.field("position", pa.string()),
        pa.field("sequence", pa.binary()),
        pa.field("event_id", pa.string()),
        pa.field("primary_key", pa.list_(pa.string())),
        pa.field("before", _TEXT_MAP),
        pa.field("after", _TEXT_MAP),
        pa.field("ddl", pa.string()),
        pa.field("metadata", _TEXT_MAP),
        pa.field("error", pa.string()),
        pa.field("raw", pa.binary()),
    ]
)


def event_schema() -> pa.Schema:
    """The output schema of every decoder: one change event per row.

    Returns:
        The pyarrow schema, column order included, that ``decode`` returns in generic mode.
    """
    return EVENT_SCHEMA


_WIRE_COLUMN = pa.struct(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("source_type", pa.string()),
        pa.field("type", pa.string()),
    ]
)

OPEN_PART = "open multi-part set, held for the next micro-batch"
"""The ``error`` of a schema-pass row that names the Kafka record of a part of a Tencent
DTS multi-part set still open at the end of a streamed micro-batch (``<OPEN_PART>: topic t,
partition 0, offset 17``): not an error, held by :func:`cdc_decode.spark.sync_stream`."""

SCHEMA_PASS_SCHEMA = pa.schema(
    [
        pa.field("source_db", pa.string()),
        pa.field("source_schema", pa.string()),
        pa.field("source_table", pa.string()),
        pa.field("dialect", pa.string()),
        pa.field("columns", pa.list_(pa.field("item", _WIRE_COLUMN, nullable=False))),
        pa.field("key", pa.list_(pa.string())),
        pa.field("events", pa.int64(), nullable=False),
        pa.field("first_ordinal", pa.int64(), nullable=False),
        pa.field("last_ordinal", pa.int64(), nullable=False),
        pa.field("first_sequence", pa.binary()),
        pa.field("last_sequence", pa.binary()),
        pa.field("error", pa.string()),
    ]
)
"""The schema pass's rows (docs/schemas.md): one per table and wire schema seen (its
columns with their source and Spark types, its key, how many events and where in the
stream they were), one per message that did not decode (``error``, ``first_ordinal``)."""
