"""The Datastream Avro writer: the events of the Datastream JSON writer (same simulated
source, same uuids, timestamps and metadata) as Avro object-container files, one file per
input value, and the events they must decode to.

A file holds consecutive events of one table with one column set (a schema change starts a
new file), at most ``rows_per_message`` of them, in a codec drawn per file (deflate, null,
snappy, zstandard). Payload types are Datastream's for MySQL: integers as ``int``/``long``,
BIGINT UNSIGNED as a ``number`` string, DECIMAL as ``bytes`` with the decimal logical type,
DATE/DATETIME/TIMESTAMP as ``timestamp-micros``, TIME as ``time-interval-micros``, BLOB and
BINARY as lowercase hex text. The expected images follow docs/formats/datastream-avro.md.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
import struct
from decimal import Decimal

import fastavro

from .._values import f32_text
from .datastream_json import DatastreamJsonWriter
from .source import Column, MySQLSource, Value

FORMAT = "datastream-avro"

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_INTS = ("tinyint", "smallint", "mediumint", "int", "year")
_CODECS = (("deflate", 0.5), ("null", 0.2), ("snappy", 0.15), ("zstandard", 0.15))


def avro_type(column: Column) -> object:
    """The Avro type Datastream writes for a MySQL column (always nullable)."""
    kind = column.type
    if kind in _INTS:
        inner: object = "long" if kind == "int" and column.unsigned else "int"
    elif kind == "bigint":
        inner = {"type": "string", "logicalType": "number"} if column.unsigned else "long"
    elif kind == "bit":
        inner = "long"
    elif kind in ("float", "double"):
        inner = kind
    elif kind == "decimal":
        precision = int(column.sql.split("(")[1].split(",")[0])
        inner = {"type": "bytes", "logicalType": "decimal", "precision": precision,
                 "scale": column.scale}  # fmt: skip
    elif kind == "json":
        inner = {"type": "string", "logicalType": "json"}
    elif kind in ("date", "datetime", "timestamp"):
        inner = {"type": "long", "logicalType": "timestamp-micros"}
    elif kind == "time":
        inner = {"type": "long", "logicalType": "time-interval-micros"}
    else:  # character types, and binary ones as hex text
        inner = "string"
    return ["null", inner]


def _micros(column: Column, value) -> int:
    if column.type == "date":
        value = dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    elif value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def avro_value(column: Column, value: Value):
    """The value fastavro writes for a MySQL value."""
    if value is None:
        return None
    kind = column.type
    if kind == "bigint" and column.unsigned:
        return str(value)
    if kind in ("binary", "blob", "geometry"):
        return bytes(value).hex()
    if kind in ("date", "datetime", "timestamp"):
        return _micros(column, value)
    if kind == "time":
        return value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    if kind == "decimal":
        return Decimal(value)
    return value


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded from Avro."""
    if value is None:
        return None
    kind = column.type
    wire = avro_value(column, value)
    if kind == "float":
        (f32,) = struct.unpack("<f", struct.pack("<f", value))
        return f32_text(f32)
    if kind == "double":
        return repr(value)
    if kind == "decimal":
        return format(Decimal(value).quantize(Decimal(1).scaleb(-column.scale)), "f")
    if kind in ("date", "datetime", "timestamp"):
        seconds, micros = divmod(wire, 1_000_000)
        moment = _EPOCH + dt.timedelta(seconds=seconds)
        return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{micros:06d}Z"
    if kind == "time":
        sign = "-" if wire < 0 else ""
        seconds, micros = divmod(abs(wire), 1_000_000)
        return (
            f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micros:06d}"
        )
    return str(wire)


def avro_long(n: int) -> bytes:
    """An Avro ``long`` (or ``int``): zigzag, then a varint."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _zstandard(schema: dict, records: list, sync: bytes, sync_interval: int) -> bytes:
    """The object-container file fastavro writes of ``records``, its blocks compressed
    with zstandard (fastavro writes that codec only with a library this project does not
    install): the same header and the same block boundaries (a block ends once its encoded
    records reach ``sync_interval`` bytes)."""
    import zstandard

    text = json.dumps(
        {k: v for k, v in schema.items() if k not in ("__fastavro_parsed", "__named_schemas")}
    ).encode()
    meta = [(b"avro.schema", text), (b"avro.codec", b"zstandard")]
    out = bytearray(b"Obj\x01" + avro_long(len(meta)))
    for key, value in meta:
        out += avro_long(len(key)) + key + avro_long(len(value)) + value
    out += b"\x00" + sync
    compressor = zstandard.ZstdCompressor()
    block = io.BytesIO()
    count = 0

    def flush() -> None:
        nonlocal block, count
        packed = compressor.compress(block.getvalue())
        out.extend(avro_long(count) + avro_long(len(packed)) + packed + sync)
        block, count = io.BytesIO(), 0

    for record in records:
        fastavro.schemaless_writer(block, schema, record)
        count += 1
        if block.tell() >= sync_interval:
            flush()
    if count:
        flush()
    return bytes(out)


class _Event:
    """One event before it is packed into a file."""

    __slots__ = ("record", "expected", "key", "columns")

    def __init__(self, record: dict, expected: list, key: tuple, columns: list[Column]) -> None:
        self.record = record
        self.expected = expected
        self.key = key
        self.columns = columns


class DatastreamAvroWriter(DatastreamJsonWriter):
    """The JSON writer's events as Avro records (see the module's docstring).

    Args:
        source: the simulated server.
        seed: seeds the writer's choices (as the JSON writer's, so the events are the same).
        rows_per_message: at most this many events in one file.
    """

    format = FORMAT

    def __init__(self, source: MySQLSource, *, seed: int = 0, rows_per_message: int = 10) -> None:
        super().__init__(source, seed=seed)
        self.rows_per_file = max(1, rows_per_message)
        self.file_rng = random.Random(f"datastream-avro/{seed}")

    def _event(self, event, change, row, backfill, ts_ms, position):
        value, expected = super()._event(event, change, row, backfill, ts_ms, position)
        doc = json.loads(value)
        columns = [c for c in event.columns if c.name in row]
        meta = doc["source_metadata"]
        file = meta["log_file"] or ""
        record = {
            "uuid": doc["uuid"],
            "read_timestamp": doc["read_timestamp"],
            "source_timestamp": ts_ms,
            "object": doc["object"],
            "read_method": doc["read_method"],
            "stream_name": doc["stream_name"],
            "schema_key": doc["schema_key"],
            "sort_keys": [ts_ms, file, 0 if backfill else position],
            "source_metadata": meta,
            "payload": {c.name: avro_value(c, row[c.name]) for c in columns},
        }
        image = [(c.name, render(c, row[c.name])) for c in columns]
        expected = list(expected)
        expected[0] = FORMAT
        side = 13 if expected[13] is not None else 14
        expected[side] = image
        key = (event.db, event.table, tuple((c.name, c.sql) for c in columns))
        return _Event(record, expected, key, columns), expected

    def schema(self, event: _Event) -> dict:
        """The file schema of an event's table and columns (fixture files' field order)."""
        db, table, _ = event.key
        nullable_string = ["null", "string"]
        return {
            "type": "record",
            "name": f"{db}_{table}",
            "fields": [
                {"name": "uuid", "type": "string"},
                {"name": "read_timestamp",
                 "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "source_timestamp",
                 "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "object", "type": "string"},
                {"name": "read_method", "type": "string"},
                {"name": "stream_name", "type": "string"},
                {"name": "schema_key", "type": "string"},
                {"name": "sort_keys",
                 "type": {"type": "array", "items": ["string", "long"]}},
                {"name": "source_metadata", "type": {
                    "type": "record", "name": "source_metadata", "fields": [
                        {"name": "table", "type": "string"},
                        {"name": "database", "type": "string"},
                        {"name": "primary_keys", "type": {"type": "array", "items": "string"}},
                        {"name": "log_file", "type": nullable_string},
                        {"name": "log_position", "type": ["null", "long"]},
                        {"name": "change_type", "type": nullable_string},
                        {"name": "is_deleted", "type": ["null", "boolean"]},
                    ]}},
                {"name": "payload", "type": {
                    "type": "record", "name": "payload", "fields": [
                        {"name": c.name, "type": avro_type(c), "default": None}
                        for c in event.columns
                    ]}},
            ],
        }  # fmt: skip

    def file(self, events: list[_Event]) -> bytes:
        """One object-container file of ``events`` (one table, one column set)."""
        rng = self.file_rng
        pick = rng.random()
        codec = _CODECS[-1][0]
        for name, share in _CODECS:
            pick -= share
            if pick < 0:
                codec = name
                break
        schema = fastavro.parse_schema(self.schema(events[0]))
        records = [e.record for e in events]
        sync = rng.randbytes(16)
        sync_interval = rng.choice([1 << 10, 16 << 10])
        if codec == "zstandard":
            return _zstandard(schema, records, sync, sync_interval)
        out = io.BytesIO()
        fastavro.writer(
            out, schema, records, codec=codec, sync_marker=sync, sync_interval=sync_interval
        )
        return out.getvalue()

    def heartbeat(self, seconds: int) -> tuple[None, list]:
        """Filler: a null value (a tombstone row)."""
        return None, [FORMAT, "tombstone", *([None] * 17)]


def write_stream(source: MySQLSource, writer: DatastreamAvroWriter, messages: int):
    """Run ``source`` through ``writer`` until exactly ``messages`` files.

    Returns:
        ``(values, event rows)``.
    """
    files: list[list[_Event]] = []
    current: list[_Event] = []
    while True:
        record = source.next_record()
        saved = (writer.state(), len(files), list(current))
        out = [event for event, _ in writer.messages(record)]
        for event in out:
            if current and (current[0].key != event.key or len(current) >= writer.rows_per_file):
                files.append(current)
                current = []
            current.append(event)
        if len(files) + (1 if current else 0) > messages:
            source.undo_last()
            state, count, current = saved
            writer.restore(state)
            del files[count:]
            break
    source.undo_pending()  # a change drawn ahead of the last record sent was not written
    if current:
        files.append(current)
    values: list[bytes | None] = []
    rows: list[list] = []
    for events in files:
        values.append(writer.file(events))
        rows.extend(e.expected for e in events)
    while len(values) < messages:
        value, row = writer.heartbeat(source.now)
        values.append(value)
        rows.append(row)
    return values, rows
