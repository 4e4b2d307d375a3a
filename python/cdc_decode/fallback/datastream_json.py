"""The ``datastream-json`` format: one event of a Google Cloud Datastream JSON file.

Every rule here is written down in docs/formats/datastream-json.md, which the Rust core
follows too. The JSON accepted and the field types are datahub-blob's (from
:mod:`._json`).
"""

from __future__ import annotations

import calendar
import re

from . import _schemas
from ._events import Malformed
from ._json import (
    JsonFormat,
    add_unknown,
    integer_field,
    kind_of,
    object_field,
    render,
    string_field,
    string_list,
    unsigned_field,
)
from ._sequence import i64, text, u64
from ._typed import Hints

FORMAT = "datastream-json"

_OPS = {
    "INSERT": "insert",
    "UPDATE": "update",
    "UPDATE-INSERT": "update_after",
    "UPDATE-DELETE": "update_before",
    "DELETE": "delete",
}
_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[ T]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?Z?\Z"
)
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_LSN = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})\Z")
_NAMES = frozenset(
    ("database", "schema", "table", "collection", "object_name", "change_type", "tx_id",
     "primary_keys")
)  # fmt: skip
_TOP = frozenset(("uuid", "read_timestamp", "source_timestamp", "source_metadata", "payload"))
_MAX_MS = (2**63 - 1) // 1000


def _time(value: object, where: str) -> int | None:
    """A time as microseconds: epoch ms, or UTC text."""
    if value is None:
        return None
    if type(value) is str and not value.lstrip("-").isdigit():
        match = _TIME.match(value)
        if match:
            year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
            leap = month == 2 and (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0))
            if (year >= 1 and 1 <= month <= 12 and 1 <= day <= _DAYS[month - 1] + leap and hour < 24
                    and minute < 60 and second < 60):  # fmt: skip
                seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
                fraction = ((match.group(7) or "") + "000000")[:6]
                return seconds * 1_000_000 + int(fraction)
        raise Malformed(f"{where}: expected epoch milliseconds or UTC text, got {kind_of(value)}")
    try:
        ms = integer_field(value, where)
    except Malformed:
        raise Malformed(
            f"{where}: expected epoch milliseconds or UTC text, got {kind_of(value)}"
        ) from None
    if not -_MAX_MS <= ms <= _MAX_MS:
        raise Malformed(f"{where}: {ms} milliseconds is out of range")
    return ms * 1000


def _sort_numbers(sort_keys: object) -> list[int] | None:
    """``sort_keys`` as integers when it is a non-empty array of non-negative number tokens."""
    if not isinstance(sort_keys, list) or not sort_keys:
        return None
    if any(type(k) is str for k in sort_keys):
        return None
    try:
        numbers = [integer_field(k, "sort_keys") for k in sort_keys]
    except Malformed:
        return None
    if None in numbers or any(n < 0 for n in numbers):
        return None
    return numbers


def order(method, change, event_time, sort_numbers, log_file, log_position, scn, rs_id, ssn,
          lsn) -> tuple[str, str | None, bytes | None]:  # fmt: skip
    """``(op, position, sequence)`` of an event by its source (docs: "op", "sequence"); the
    Avro format reads the same fields and shares the rules."""
    method = method or ""
    backfill = "backfill" in method or method == "oracle_dump"
    op = "read" if backfill else _OPS.get(change, "other")
    kind = method.split("-", 1)[0]
    position = sequence = None
    if kind == "mysql":
        if log_file is not None or log_position is not None:
            position = f"{log_file or ''}:{log_position or 0}"
        if event_time is not None:
            sequence = (u64(0 if backfill else 1) + text(log_file or "")
                        + u64(log_position or 0) + i64(event_time))  # fmt: skip
    elif kind == "oracle":
        position = None if scn is None else str(scn)
        if event_time is not None:
            sequence = i64(event_time) + u64(scn or 0) + text(rs_id or "") + u64(ssn or 0)
    elif kind in ("postgres", "postgresql"):
        position = lsn
        halves = _LSN.match(lsn) if lsn is not None else None
        hi, lo = (int(halves.group(1), 16), int(halves.group(2), 16)) if halves else (0, 0)
        if event_time is not None:
            sequence = i64(event_time) + u64(hi) + u64(lo)
    elif kind == "sqlserver":
        position = lsn
        if event_time is not None:
            sequence = i64(event_time) + text(lsn or "")
    elif sort_numbers:
        sequence = u64(*sort_numbers)
    elif event_time is not None:
        sequence = i64(event_time)
    return op, position, sequence


_HEX = Hints(hex=True)


class DatastreamJson(JsonFormat):
    """Decodes ``datastream-json`` lines: one JSON object, one event."""

    name = FORMAT

    def _hints(self, message: object) -> Hints:
        """MySQL BLOB/BINARY values are hex text."""
        read_method = message.get("read_method")  # checked by _event: a string or absent
        return _HEX if isinstance(read_method, str) and read_method.startswith("mysql") else None

    def _schema(self, message: object, row: tuple, key: str | None) -> tuple | None:
        """The payload's column names and ``primary_keys``: the JSON carries no types."""
        image = row[13] if row[13] is not None else row[14]
        if image is None:
            return None
        return _schemas.names(_schemas.image_names(image), row[12])

    def _event(self, message: object) -> tuple:
        if not isinstance(message, dict):
            raise Malformed(f"expected a JSON object, got {kind_of(message)}")
        get = message.get
        read_method = string_field(get("read_method"), "read_method") or ""
        uuid = string_field(get("uuid"), "uuid")
        capture = _time(get("read_timestamp"), "read_timestamp")
        event_time = _time(get("source_timestamp"), "source_timestamp")
        meta = object_field(get("source_metadata"), "source_metadata") or {}
        payload = object_field(get("payload"), "payload")
        m = meta.get
        change = string_field(m("change_type"), "source_metadata.change_type")
        db = string_field(m("database"), "source_metadata.database")
        schema = string_field(m("schema"), "source_metadata.schema")
        table = string_field(m("table"), "source_metadata.table")
        if table is None:
            table = string_field(m("collection"), "source_metadata.collection")
        if table is None:
            table = string_field(m("object_name"), "source_metadata.object_name")
        tx_id = string_field(m("tx_id"), "source_metadata.tx_id")
        primary_key = string_list(m("primary_keys"), "source_metadata.primary_keys")
        log_file = string_field(m("log_file"), "source_metadata.log_file")
        log_position = unsigned_field(m("log_position"), "source_metadata.log_position")
        scn = unsigned_field(m("scn"), "source_metadata.scn")
        rs_id = string_field(m("rs_id"), "source_metadata.rs_id")
        ssn = unsigned_field(m("ssn"), "source_metadata.ssn")
        lsn = string_field(m("lsn"), "source_metadata.lsn")

        numbers = _sort_numbers(get("sort_keys"))
        op, position, sequence = order(read_method, change, event_time, numbers, log_file,
                                       log_position, scn, rs_id, ssn, lsn)  # fmt: skip
        image = None if payload is None else [(k, render(v)) for k, v in payload.items()]
        before, after = (image, None) if op in ("delete", "update_before") else (None, image)

        metadata: dict[str, str] = {}
        for name in ("stream_name", "read_method", "object", "schema_key", "sort_keys"):
            value = get(name)
            if value is not None:
                metadata[name] = render(value)
        add_unknown(metadata, meta, _NAMES)
        add_unknown(metadata, message, _TOP)
        return (
            FORMAT, op, change, db, schema, table, event_time, capture, tx_id, position,
            sequence, uuid, primary_key, before, after, None, list(metadata.items()) or None,
            None, None,
        )  # fmt: skip
