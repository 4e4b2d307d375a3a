"""The ``datahub-blob`` format: DataWorks real-time sync to DataHub BLOB topics, JSON.

Every rule here is written down in docs/formats/datahub-blob.md, which the Rust core
follows too: one event per message, value rendering, ``sequence`` and ``event_id``, and the
order of the ``metadata`` keys. The JSON accepted (number tokens kept, first duplicate key
wins, at most 128 levels of nesting, no lone surrogates) and the field checks are in
:mod:`._json`, shared with the other JSON formats.
"""

from __future__ import annotations

import struct

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
)
from ._typed import Hints

FORMAT = "datahub-blob"

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


# ---------------------------------------------------------------------------------------
# This format's fields


def _time(value: object, where: str) -> int | None:
    """Epoch milliseconds as microseconds; ``-1`` (and null) is ``None``."""
    ms = integer_field(value, where)
    if ms is None or ms == -1:
        return None
    if not -_MAX_MS <= ms <= _MAX_MS:
        raise Malformed(f"{where}: {ms} milliseconds is out of range")
    return ms * 1000


def _image(side: object, where: str) -> list[tuple[str, str | None]] | None:
    """``payload.before`` / ``payload.after``: its ``dataColumn`` as map entries."""
    side = object_field(side, where)
    if side is None:
        return None
    columns = object_field(side.get("dataColumn"), f"{where}.dataColumn")
    if columns is None:
        return None
    return [(name, render(value)) for name, value in columns.items()]


_HINTS = Hints(epoch="ms")


def _event(message: object) -> tuple:
    """The one event row of a parsed message."""
    if not isinstance(message, dict):
        raise Malformed(f"expected a JSON object, got {kind_of(message)}")
    schema = object_field(message.get("schema"), "schema") or {}
    payload = object_field(message.get("payload"), "payload")
    if payload is None:
        raise Malformed("payload: missing")
    source_op = string_field(payload.get("op"), "payload.op")
    if source_op is None:
        raise Malformed("payload.op: missing")

    source = object_field(schema.get("source"), "schema.source") or {}
    source_db = string_field(source.get("dbName"), "schema.source.dbName")
    source_schema = string_field(source.get("schemaName"), "schema.source.schemaName")
    source_table = string_field(source.get("tableName"), "schema.source.tableName")
    db_type = string_field(source.get("dbType"), "schema.source.dbType")
    db_version = string_field(source.get("dbVersion"), "schema.source.dbVersion")

    primary_key = string_list(schema.get("primaryKey"), "schema.primaryKey")

    timestamp = object_field(payload.get("timestamp"), "payload.timestamp") or {}
    event_time = _time(timestamp.get("eventTime"), "payload.timestamp.eventTime")
    capture_time = _time(timestamp.get("systemTime"), "payload.timestamp.systemTime")
    checkpoint = _time(timestamp.get("checkpointTime"), "payload.timestamp.checkpointTime")

    ddl_obj = object_field(payload.get("ddl"), "payload.ddl") or {}
    ddl = string_field(ddl_obj.get("text"), "payload.ddl.text")
    ddl_meta = string_field(ddl_obj.get("ddlMeta"), "payload.ddl.ddlMeta")

    before = _image(payload.get("before"), "payload.before")
    after = _image(payload.get("after"), "payload.after")

    sequence_id = integer_field(payload.get("sequenceId"), "payload.sequenceId")
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
    add_unknown(metadata, message, _TOP_KNOWN)
    add_unknown(metadata, schema, _SCHEMA_KNOWN)
    add_unknown(metadata, source, _SOURCE_KNOWN)
    add_unknown(metadata, payload, _PAYLOAD_KNOWN)
    add_unknown(metadata, timestamp, _TIMESTAMP_KNOWN)
    add_unknown(metadata, ddl_obj, _DDL_KNOWN)

    return (
        FORMAT, op, source_op, source_db, source_schema, source_table, event_time,
        capture_time, None, position, sequence, event_id, primary_key, before, after, ddl,
        list(metadata.items()) or None, None, None,
    )  # fmt: skip


class DatahubBlob(JsonFormat):
    """Decodes ``datahub-blob`` messages: one JSON object, one event."""

    name = FORMAT

    def _hints(self, message: object) -> Hints:
        """DataHub DATE values are epoch milliseconds."""
        return _HINTS

    def _event(self, message: object) -> tuple:
        return _event(message)

    def _schema(self, message: object, row: tuple, key: str | None) -> tuple | None:
        """``schema.dataColumn`` (DataHub types) and ``schema.primaryKey``; the images'
        column names when ``dataColumn`` is not a list of ``{"name", "type"}`` strings."""
        if row[13] is None and row[14] is None:
            return None
        schema = message.get("schema") or {}
        primary_key = row[12]
        columns = _data_columns(schema.get("dataColumn"))
        if columns is None:
            return _schemas.names(_schemas.image_names(row[13], row[14]), primary_key)
        # A LONG column of MySQL's bigint unsigned holds values no bigint does: the
        # schema widens to what they need.
        return _schemas.widen(_schemas.typed("datahub", columns, primary_key), row[13], row[14])


def _data_columns(columns: object) -> list[tuple[str, str]] | None:
    """``schema.dataColumn`` as (name, type) pairs, when every item has string ``name``
    and ``type``."""
    if not isinstance(columns, list):
        return None
    out = []
    for column in columns:
        name = column.get("name") if isinstance(column, dict) else None
        type_ = column.get("type") if isinstance(column, dict) else None
        if type(name) is not str or type(type_) is not str:
            return None
        out.append((name, type_))
    return out
