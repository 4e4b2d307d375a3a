"""The ``datahub-blob`` format: DataWorks real-time sync to DataHub BLOB topics, JSON.

Every rule here is written down in docs/formats/datahub-blob.md, which the Rust core will
follow too: the JSON accepted (number tokens kept, first duplicate key wins, at most 128
levels of nesting, no lone surrogates), one event per message, value rendering, ``sequence``
and ``event_id``, and the order of the ``metadata`` keys.
"""

from __future__ import annotations

import json
import re
import struct
from itertools import accumulate

from ._events import EventSink

FORMAT = "datahub-blob"

MAX_DEPTH = 128
"""Most levels of nested objects and arrays a message may have (the top object is 1)."""

_SEQUENCE = struct.Struct(">QQ").pack
_SIGN = 1 << 63
_MAX_MS = (2**63 - 1) // 1000  # the largest |milliseconds| whose microseconds fit an i64

# payload.op -> op. UPDATE_AFTER is `update` instead when the message has a before image.
_OPS = {
    "INSERT": "insert",
    "UPDATE_BEFOR": "update_before",
    "UPDATE_BEFORE": "update_before",
    "UPDATE_AFTER": "update_after",
    "DELETE": "delete",
    "TRANSACTION_BEGIN": "begin",
    "TRANSACTION_END": "commit",
    "CREATE": "ddl",
    "ALTER": "ddl",
    "ERASE": "ddl",
    "QUERY": "ddl",
    "RENAME": "ddl",
    "CINDEX": "ddl",
    "DINDEX": "ddl",
    "TRUNCATE": "truncate",
    "MHEARTBEAT": "heartbeat",
    "XACOMMIT": "commit",
    "XAROLLBACK": "rollback",
    "GTID": "other",
}
_BEFORE_HALVES = frozenset(("UPDATE_BEFOR", "UPDATE_BEFORE"))

# Fields with a column (or read for one); anything else an object holds goes to metadata.
_TOP_KNOWN = frozenset(("schema", "payload", "version"))
_SCHEMA_KNOWN = frozenset(("dataColumn", "primaryKey", "source"))
_SOURCE_KNOWN = frozenset(("dbType", "dbVersion", "dbName", "schemaName", "tableName"))
_PAYLOAD_KNOWN = frozenset(("before", "after", "op", "sequenceId", "timestamp", "ddl"))
_TIMESTAMP_KNOWN = frozenset(("eventTime", "systemTime", "checkpointTime"))
_DDL_KNOWN = frozenset(("text", "ddlMeta"))

_INTEGER = re.compile(r"-?[0-9]+\Z")
# A JSON string (valid or not, for the nesting pre-check only) and the brackets left after.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# In a valid JSON text every backslash starts an escape: left to right, these are its escapes.
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = str.maketrans({"[": "\x01", "{": "\x01", "]": "\x02", "}": "\x02"})


class _Malformed(Exception):
    """A message that does not decode; the text says what is wrong and where."""


class _Number(str):
    """A JSON number token, kept as the exact text that was sent."""

    __slots__ = ()


def _first_wins(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj: dict[str, object] = {}
    for key, value in pairs:
        if key not in obj:
            obj[key] = value
    return obj


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_first_wins,
    parse_int=_Number,
    parse_float=_Number,
    parse_constant=_no_constant,
)


# ---------------------------------------------------------------------------------------
# JSON


def _depth(text: str) -> int:
    """The deepest nesting of objects and arrays in ``text`` (brackets inside strings do
    not count), without recursion."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).translate(_DEPTH_STEP)
    steps = (1 if c == "\x01" else -1 for c in brackets)
    return max(accumulate(steps), default=0)


def _has_lone_surrogate(text: str) -> bool:
    """True when a ``\\u`` escape of a surrogate in ``text`` (a valid JSON text) is not half
    of a high-low pair. Read off the text, not the parsed value, so that dropped duplicate
    members are checked too."""
    high_ends_at = None  # where the escape after a high surrogate must start
    for match in _ESCAPE.finditer(text):
        unit = match.group(1)
        code = int(unit, 16) if unit else -1
        if high_ends_at is not None:
            if match.start() != high_ends_at or not 0xDC00 <= code <= 0xDFFF:
                return True
            high_ends_at = None
        elif 0xD800 <= code <= 0xDBFF:
            high_ends_at = match.end()
        elif 0xDC00 <= code <= 0xDFFF:
            return True
    return high_ends_at is not None


def parse(raw: bytes) -> object:
    """One message as a JSON value: objects as dicts (first duplicate key wins), number
    tokens as :class:`_Number` text.

    Raises:
        _Malformed: for anything docs/formats/datahub-blob.md rejects.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed(f"invalid UTF-8 at byte {exc.start}") from None
    # Cheap bound first: the nesting cannot exceed the number of opening brackets.
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise _Malformed(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        at = len(text[: exc.pos].encode("utf-8"))
        raise _Malformed(f"invalid JSON: {exc.msg} at byte {at}") from None
    except (ValueError, RecursionError) as exc:
        raise _Malformed(f"invalid JSON: {exc}") from None
    # A lone surrogate can only come from a \u escape.
    if "\\u" in text and _has_lone_surrogate(text):
        raise _Malformed("invalid JSON: a \\u escape is a lone surrogate")
    return value


def render(value: object) -> str | None:
    """A JSON value as generic text: a string's text, a number's token as sent,
    ``true``/``false``, ``None`` for null, compact JSON for an object or array."""
    if type(value) is str or type(value) is _Number:
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _compact(value)


_escape = json.encoder.encode_basestring  # serde_json's escaping (docs: "Nested values")


def _compact(value: object) -> str:
    # Recursion is bounded: parse() rejects anything deeper than MAX_DEPTH.
    if type(value) is str:
        return _escape(value)
    if type(value) is _Number:
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, dict):
        inner = ",".join(f"{_escape(k)}:{_compact(v)}" for k, v in value.items())
        return "{" + inner + "}"
    return "[" + ",".join(_compact(v) for v in value) + "]"


def _kind(value: object) -> str:
    if type(value) is _Number:
        return f"the number {value[:40]}"
    if type(value) is str:
        return f"the string {json.dumps(value[:40], ensure_ascii=False)}"
    if value is None:
        return "null"
    if value is True or value is False:
        return "a boolean"
    return "an object" if isinstance(value, dict) else "an array"


# ---------------------------------------------------------------------------------------
# Fields


def _object(value: object, where: str) -> dict | None:
    """An object field, or ``None`` for null/absent."""
    if value is None or isinstance(value, dict):
        return value
    raise _Malformed(f"{where}: expected an object, got {_kind(value)}")


def _string(value: object, where: str) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Malformed(f"{where}: expected a string, got {_kind(value)}")


def _integer(value: object, where: str) -> int | None:
    """An integer sent as a number token or a string: ``-?[0-9]+`` within i64."""
    if value is None:
        return None
    if (type(value) is _Number or type(value) is str) and _INTEGER.match(value):
        negative = value[0] == "-"
        digits = value[negative:].lstrip("0")
        if len(digits) <= 19:  # int() of a huge token would be slow or refused
            number = -int(digits or "0") if negative else int(digits or "0")
            if -_SIGN <= number < _SIGN:
                return number
    raise _Malformed(f"{where}: expected a 64-bit integer, got {_kind(value)}")


def _unsigned(value: object, where: str) -> int | None:
    """A non-negative integer (a log position or an index), or ``None``."""
    number = _integer(value, where)
    if number is not None and number < 0:
        raise _Malformed(f"{where}: expected a non-negative integer, got {_kind(value)}")
    return number


def _time(value: object, where: str) -> int | None:
    """Epoch milliseconds as microseconds; ``-1`` (and null) is ``None``."""
    ms = _integer(value, where)
    if ms is None or ms == -1:
        return None
    if not -_MAX_MS <= ms <= _MAX_MS:
        raise _Malformed(f"{where}: {ms} milliseconds is out of range")
    return ms * 1000


def _image(side: object, where: str) -> list[tuple[str, str | None]] | None:
    """``payload.before`` / ``payload.after``: its ``dataColumn`` as map entries."""
    side = _object(side, where)
    if side is None:
        return None
    columns = _object(side.get("dataColumn"), f"{where}.dataColumn")
    if columns is None:
        return None
    return [(name, render(value)) for name, value in columns.items()]


def _extra(metadata: dict[str, str], obj: dict | None, known: frozenset[str]) -> None:
    """Adds the fields of ``obj`` that have no column to ``metadata`` (first key wins)."""
    if obj:
        for key, value in obj.items():
            if key not in known and key not in metadata and value is not None:
                metadata[key] = render(value)


def _event(message: object) -> tuple:
    """The one event row of a parsed message."""
    if not isinstance(message, dict):
        raise _Malformed(f"expected a JSON object, got {_kind(message)}")
    schema = _object(message.get("schema"), "schema") or {}
    payload = _object(message.get("payload"), "payload")
    if payload is None:
        raise _Malformed("payload: missing")
    source_op = _string(payload.get("op"), "payload.op")
    if source_op is None:
        raise _Malformed("payload.op: missing")

    source = _object(schema.get("source"), "schema.source") or {}
    source_db = _string(source.get("dbName"), "schema.source.dbName")
    source_schema = _string(source.get("schemaName"), "schema.source.schemaName")
    source_table = _string(source.get("tableName"), "schema.source.tableName")
    db_type = _string(source.get("dbType"), "schema.source.dbType")
    db_version = _string(source.get("dbVersion"), "schema.source.dbVersion")

    keys = schema.get("primaryKey")
    if keys is not None and not isinstance(keys, list):
        raise _Malformed(f"schema.primaryKey: expected an array, got {_kind(keys)}")
    primary_key = None
    if keys:
        primary_key = [_string(k, f"schema.primaryKey[{i}]") for i, k in enumerate(keys)]
        if None in primary_key:
            raise _Malformed("schema.primaryKey: expected strings, got null")

    timestamp = _object(payload.get("timestamp"), "payload.timestamp") or {}
    event_time = _time(timestamp.get("eventTime"), "payload.timestamp.eventTime")
    capture_time = _time(timestamp.get("systemTime"), "payload.timestamp.systemTime")
    checkpoint = _time(timestamp.get("checkpointTime"), "payload.timestamp.checkpointTime")

    ddl_obj = _object(payload.get("ddl"), "payload.ddl") or {}
    ddl = _string(ddl_obj.get("text"), "payload.ddl.text")
    ddl_meta = _string(ddl_obj.get("ddlMeta"), "payload.ddl.ddlMeta")

    before = _image(payload.get("before"), "payload.before")
    after = _image(payload.get("after"), "payload.after")

    sequence_id = _integer(payload.get("sequenceId"), "payload.sequenceId")
    half = 0 if source_op in _BEFORE_HALVES else 1
    if sequence_id is None:
        sequence = event_id = position = None
    else:
        sequence = _SEQUENCE(sequence_id + _SIGN, half)
        position = str(sequence_id) if sequence_id >= 0 else None
        event_id = f"{sequence_id}:{half}" if sequence_id != -1 else None

    op = _OPS.get(source_op, "other")
    if op == "update_after" and before is not None:
        op = "update"
    elif op == "insert" and sequence_id == -1:
        op = "read"  # a full-sync (snapshot) row

    version = message.get("version")
    metadata: dict[str, str] = {}
    if version is not None:
        metadata["version"] = render(version)
    if db_type is not None:
        metadata["dbType"] = db_type
    if db_version is not None:
        metadata["dbVersion"] = db_version
    if checkpoint is not None:
        metadata["checkpointTime"] = str(checkpoint // 1000)
    if ddl_meta is not None:
        metadata["ddlMeta"] = ddl_meta
    _extra(metadata, message, _TOP_KNOWN)
    _extra(metadata, schema, _SCHEMA_KNOWN)
    _extra(metadata, source, _SOURCE_KNOWN)
    _extra(metadata, payload, _PAYLOAD_KNOWN)
    _extra(metadata, timestamp, _TIMESTAMP_KNOWN)
    _extra(metadata, ddl_obj, _DDL_KNOWN)

    return (
        FORMAT, op, source_op, source_db, source_schema, source_table, event_time,
        capture_time, None, position, sequence, event_id, primary_key, before, after, ddl,
        list(metadata.items()) or None, None, None,
    )  # fmt: skip


class JsonFormat:
    """What the JSON formats share: one JSON text per message, parsed by :func:`parse`,
    gives one row from ``_event`` (``None`` for a tombstone), or one error row. No state
    between messages."""

    name: str
    pending = 0

    def decode(self, raw: bytes, key: str | None, ordinal: int, sink: EventSink) -> None:
        """Decodes one message into ``sink``.

        Args:
            raw: the message bytes (UTF-8 JSON).
            key: unused (no multi-part messages in the JSON formats).
            ordinal: the message's input ordinal.
            sink: where rows go.
        """
        try:
            row = self._event(parse(raw))
        except _Malformed as exc:
            sink.error(ordinal, raw, str(exc))
            return
        if row is None:
            sink.tombstone(ordinal)
        else:
            sink.events([row], ordinal)

    def finish(self, sink: EventSink) -> None:
        """End of input: nothing is buffered."""

    def _event(self, message: object) -> tuple | None:
        raise NotImplementedError


class DatahubBlob(JsonFormat):
    """Decodes ``datahub-blob`` messages: one JSON object, one event."""

    name = FORMAT

    def _event(self, message: object) -> tuple:
        return _event(message)
