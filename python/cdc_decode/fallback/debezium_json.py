"""The ``debezium-json`` format: Debezium's JSON converter output, and Lindorm's "Debezium
Format V2.0".

Every rule here is written down in docs/formats/debezium-json.md, which the Rust core
follows too. The JSON accepted and the field types are datahub-blob's (the same strict
parse, from :mod:`._json`).
"""

from __future__ import annotations

from ._json import (
    JsonFormat,
    _integer,
    _kind,
    _Malformed,
    _Number,
    _object,
    _string,
    _unsigned,
    render,
)
from ._sequence import i64, text, u64
from ._typed import Hints, parse_int

FORMAT = "debezium-json"

_OPS = {"r": "read", "c": "insert", "u": "update", "d": "delete", "t": "truncate", "m": "other"}
_STATUS = {"BEGIN": "begin", "END": "commit"}
_MAX_US = 2**63 - 1
_TIMES = frozenset(("ts_ms", "ts_us", "ts_ns"))
_NAMES = frozenset(("db", "schema", "namespace", "table", "collection"))
_ENVELOPE = frozenset(
    ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction", "ddl",
     "databaseName", "status", "id")
)  # fmt: skip


def _micros(obj: dict, where: str) -> int | None:
    """``ts_ns`` / 1000, else ``ts_us``, else ``ts_ms`` × 1000 of ``obj``."""
    ns = _integer(obj.get("ts_ns"), f"{where}ts_ns")
    us = _integer(obj.get("ts_us"), f"{where}ts_us")
    ms = _integer(obj.get("ts_ms"), f"{where}ts_ms")
    if ns is not None:
        return ns // 1000 if ns >= 0 else -((-ns) // 1000)
    if us is not None:
        return us
    if ms is not None:
        if abs(ms) > _MAX_US // 1000:
            raise _Malformed(f"{where}ts_ms: {ms} milliseconds is out of range")
        return ms * 1000
    return None


def _nanos(obj: dict) -> int | None:
    """The source time in nanoseconds (already checked as integers)."""
    for name, scale in (("ts_ns", 1), ("ts_us", 1000), ("ts_ms", 1_000_000)):
        value = _integer(obj.get(name), name)
        if value is not None:
            value *= scale
            return value if -(2**63) <= value < 2**63 else None
    return None


def _image(value: object, where: str) -> list | None:
    obj = _object(value, where)
    if obj is None:
        return None
    return [(k, render(v)) for k, v in obj.items()]


_CONNECT_HINTS = {
    "io.debezium.data.VariableScaleDecimal": "variable",
    "io.debezium.time.Date": "days",
    "org.apache.kafka.connect.data.Date": "days",
    "io.debezium.time.Timestamp": "ms",
    "org.apache.kafka.connect.data.Timestamp": "ms",
    "io.debezium.time.MicroTimestamp": "us",
    "io.debezium.time.NanoTimestamp": "ns",
}


def connect_hints(schema: object, payload: object) -> Hints:
    """Typed mode's hints from a message's Connect schema: how each column of the
    ``before``/``after`` structs writes its logical type (docs/typed.md). A ``Decimal`` is
    base64 bytes only where the payload sends it as a string (with the converter's
    ``decimal.format=NUMERIC`` it is a JSON number, read as decimal text)."""

    def sent_as_number(column: str) -> bool:
        for image in ("after", "before"):
            values = payload.get(image) if isinstance(payload, dict) else None
            value = values.get(column) if isinstance(values, dict) else None
            if value is not None:
                return isinstance(value, _Number)
        return False

    columns: dict = {}
    fields = schema.get("fields") if isinstance(schema, dict) else None
    for image in fields if isinstance(fields, list) else ():
        if not isinstance(image, dict) or image.get("field") not in ("before", "after"):
            continue
        inner = image.get("fields")
        for column in inner if isinstance(inner, list) else ():
            if not isinstance(column, dict):
                continue
            name, logical = column.get("field"), column.get("name")
            if not isinstance(name, str) or not isinstance(logical, str):
                continue
            if logical == "org.apache.kafka.connect.data.Decimal":
                parameters = column.get("parameters")
                scale = parameters.get("scale") if isinstance(parameters, dict) else None
                if not isinstance(scale, str) or parse_int(scale) is None or sent_as_number(name):
                    continue
                hint = ("decimal", int(scale))
            elif logical in _CONNECT_HINTS:
                hint = _CONNECT_HINTS[logical]
            else:
                continue
            columns.setdefault(name, hint)
    return Hints(columns=columns)


class DebeziumJson(JsonFormat):
    """Decodes ``debezium-json`` messages: one JSON object, one row (a tombstone for
    Connect's null payload)."""

    name = FORMAT

    def _hints(self, message: object) -> Hints | None:
        schema = message.get("schema") if isinstance(message, dict) else None
        return None if schema is None else connect_hints(schema, message.get("payload"))

    def _event(self, message: object) -> tuple | None:
        if not isinstance(message, dict):
            raise _Malformed(f"expected a JSON object, got {_kind(message)}")
        if "schema" in message and "payload" in message:
            envelope = _object(message["payload"], "payload")
            if envelope is None:
                return None  # Connect's tombstone
        else:
            envelope = message
        get = envelope.get
        source_op = _string(get("op"), "op")
        ddl = _string(get("ddl"), "ddl")
        status = _string(get("status"), "status")
        source = _object(get("source"), "source") or {}
        transaction = _object(get("transaction"), "transaction") or {}
        before = _image(get("before"), "before")
        after = _image(get("after"), "after")
        capture = _micros(envelope, "")
        event_time = _micros(source, "source.")

        src = source.get
        db = _string(src("db"), "source.db")
        schema = _string(src("schema"), "source.schema")
        if schema is None:
            schema = _string(src("namespace"), "source.namespace")
        table = _string(src("table"), "source.table")
        if table is None:
            table = _string(src("collection"), "source.collection")
        file = _string(src("file"), "source.file")
        pos = _unsigned(src("pos"), "source.pos")
        row_no = _unsigned(src("row"), "source.row")
        lsn = _unsigned(src("lsn"), "source.lsn")
        gtid = _string(src("gtid"), "source.gtid")
        tx_number = _integer(src("txId"), "source.txId")
        tx_id = _string(transaction.get("id"), "transaction.id")
        total = _integer(transaction.get("total_order"), "transaction.total_order")
        collection_order = _integer(
            transaction.get("data_collection_order"), "transaction.data_collection_order"
        )

        if source_op is not None:
            op = _OPS.get(source_op, "other")
        elif ddl is not None:
            op = "ddl"
            db = _string(get("databaseName"), "databaseName")
        elif status is not None:
            op = _STATUS.get(status, "other")
            source_op = status
            tx_id = _string(get("id"), "id")
        elif envelope and set(envelope) <= _TIMES:
            op = "heartbeat"  # the heartbeat topic: {"ts_ms": ...}
        else:
            raise _Malformed("op: missing")
        if tx_id is None:
            tx_id = gtid if gtid is not None else None if tx_number is None else str(tx_number)

        if file is not None:
            position = f"{file}:{pos}" if pos is not None else None
            sequence = text(file) + u64(pos or 0, row_no or 0)
            event_id = f"{file}:{pos or 0}:{row_no or 0}"
        elif lsn is not None:
            position = str(lsn)
            sequence = u64(lsn)
            event_id = str(lsn)
        else:
            position = event_id = None
            nanos = _nanos(source)
            sequence = None if nanos is None else i64(nanos)
        if op == "read":
            event_id = None

        metadata: dict[str, str] = {}
        for name, value in source.items():
            if name not in _NAMES and value is not None and name not in metadata:
                metadata[name] = render(value)
        for name, value in (("total_order", total), ("data_collection_order", collection_order)):
            if value is not None and name not in metadata:
                metadata[name] = str(value)
        for name, value in envelope.items():
            if name not in _ENVELOPE and value is not None and name not in metadata:
                metadata[name] = render(value)

        return (
            FORMAT, op, source_op, db, schema, table, event_time, capture, tx_id, position,
            sequence, event_id, None, before, after, ddl, list(metadata.items()) or None,
            None, None,
        )  # fmt: skip
