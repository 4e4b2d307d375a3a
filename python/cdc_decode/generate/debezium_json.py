"""The Debezium writer: a simulated source's records as the Debezium MySQL connector's JSON
converter writes them, one message per changed row, and the events they must decode to.

A stream starts with snapshot rows (``op: "r"``, the snapshot's binlog position), then the
log: ``c``, ``u`` and ``d`` events with the MySQL ``source`` block (``file``, ``pos``,
``row``, ``gtid``, ``server_id``, ``thread`` …), a ``transaction`` block now and then, and
a tombstone (a null value) after some deletes. About a third of the messages carry the
Kafka Connect ``schema``/``payload`` wrapper. DDL goes to the schema-history topic and
heartbeats to their own topic in Debezium, so neither appears here. Images are whole rows
(Debezium sends every column), but for a column added by ``ALTER TABLE`` after the row was
last written: the source keeps no value for it, so the image leaves it out. Values are
encoded as the connector does by default: integers and floats as numbers, DECIMAL as a
string (``decimal.handling.mode=string``), DATE as days, DATETIME as epoch milliseconds,
TIMESTAMP as ISO-8601 text, TIME as microseconds, binary as base64. The expected events
follow docs/formats/debezium-json.md.

The same records can be written as two other connectors write them (``connector=``):

- ``"oracle"``: the Oracle connector's ``source`` block (``db`` the PDB, ``schema`` the
  MySQL database, ``scn``, ``commit_scn``, ``txId``, ``txSeq`` …), the SCN derived from
  the binlog position, so that `sequence` orders the changes by commit SCN, transaction,
  SCN and order in the transaction.
- ``"mongodb"``: each row a document whose ``_id`` is the primary key, written into
  strings as MongoDB Extended JSON (v1 strict, v2 canonical or v2 relaxed, chosen per
  message); inserts carry the document, deletes the pre-image, updates the pre-image and
  either the whole document or only ``updateDescription`` (a partial image); the rows of
  one transaction share one oplog time and are ordered by ``transaction.total_order``.
"""

from __future__ import annotations

import base64
import calendar
import datetime as dt
import json
import random
import struct

from .._values import timestamp_text
from .datahub_blob import Raw, dump_json
from .images import Tables
from .source import Column, Ddl, MySQLSource, Transaction, Value, mysql_text

FORMAT = "debezium-json"
VERSION = "2.7.3.Final"
CONNECTORS = ("mysql", "oracle", "mongodb")
"""The connectors whose messages the writer can write."""
ORACLE_DB = "ORCLPDB1"
_TEMPORAL = ("date", "datetime", "timestamp")
_ESCAPE = json.encoder.encode_basestring

_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "bigint", "year")
_EPOCH = dt.date(1970, 1, 1)


def wire(column: Column, value: Value):
    """The JSON value the connector writes for a MySQL value."""
    if value is None:
        return None
    kind = column.type
    if kind in _INTEGERS:
        return Raw(str(value))
    if kind in ("float", "double"):
        return Raw(repr(value))
    if kind == "decimal":
        return format(value, "f")
    if kind == "date":
        return Raw(str((value - _EPOCH).days))
    if kind == "datetime":
        return Raw(str(calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000))
    if kind == "timestamp":
        return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if kind == "time":
        return Raw(str(value // dt.timedelta(microseconds=1)))
    text = mysql_text(column, value)
    if isinstance(text, bytes):
        return base64.b64encode(text).decode("ascii")
    return text  # varchar, char, enum, set, json, bit as text


# --- the Connect schema (schemas.enable), as the MySQL connector writes it ---------------
# With ``connect=True`` (``generate(..., table_count=N)``): every message carries the
# Connect schema of its table, decimals and BIGINT UNSIGNED are Connect ``Decimal`` bytes
# (``decimal.handling.mode=precise``, ``bigint.unsigned.handling.mode=precise``),
# DATETIME(4-6) is ``MicroTimestamp``, BIT(1) a boolean and BIT(n) ``Bits``, geometry a
# ``Geometry`` struct; the defaults of the connector otherwise.


def _unscaled(number: int) -> str:
    """A Connect ``Decimal``'s value: base64 of the unscaled value's two's complement bytes,
    big-endian and minimal (Java's ``BigInteger.toByteArray``)."""
    size = ((number if number >= 0 else ~number).bit_length() + 8) // 8
    return base64.b64encode(number.to_bytes(size, "big", signed=True)).decode("ascii")


def _bits(column: Column) -> int:
    return int(column.sql.split("(")[1].rstrip(")")) if "(" in column.sql else 1


def connect_wire(column: Column, value: Value):
    """The JSON value of a MySQL value under the Connect schema (see above)."""
    if value is None:
        return None
    kind = column.type
    if kind == "decimal":
        return _unscaled(int(value.scaleb(column.scale)))
    if kind == "bigint" and column.unsigned:
        return _unscaled(value)
    if kind == "datetime" and column.fsp > 3:
        return Raw(str(calendar.timegm(value.timetuple()) * 1_000_000 + value.microsecond))
    if kind == "bit":
        bits = _bits(column)
        if bits == 1:
            return bool(value)
        return base64.b64encode(value.to_bytes((bits + 7) // 8, "little")).decode("ascii")
    if kind == "geometry":
        srid = int.from_bytes(value[:4], "little")
        return {"wkb": base64.b64encode(value[4:]).decode("ascii"), "srid": Raw(str(srid))}
    return wire(column, value)


def connect_render(column: Column, value: Value) -> str | None:
    """The generic text of a value written by :func:`connect_wire`."""
    sent = connect_wire(column, value)
    if isinstance(sent, bool):
        return "true" if sent else "false"
    if isinstance(sent, dict):
        return dump_json(sent, _ESCAPE)
    return sent


_CONNECT_INTS = {
    ("tinyint", False): "int16",
    ("tinyint", True): "int16",
    ("smallint", False): "int16",
    ("smallint", True): "int32",
    ("mediumint", False): "int32",
    ("mediumint", True): "int32",
    ("int", False): "int32",
    ("int", True): "int64",
    ("bigint", False): "int64",
}


def connect_field(column: Column, optional: bool = True) -> dict:
    """The Connect schema of a column, as the MySQL connector writes it."""
    kind = column.type
    field: dict = {"type": "string", "optional": optional}
    logical = None
    parameters = None
    if (kind, column.unsigned) in _CONNECT_INTS:
        field["type"] = _CONNECT_INTS[(kind, column.unsigned)]
    elif kind == "bigint" or kind == "decimal":
        field["type"] = "bytes"
        logical = "org.apache.kafka.connect.data.Decimal"
        parameters = {"scale": str(column.scale)}
        if kind == "decimal":
            precision = column.sql.split("(")[1].split(",")[0]
            parameters["connect.decimal.precision"] = precision
    elif kind in ("float", "double"):
        field["type"] = "double"
    elif kind == "date":
        field["type"], logical = "int32", "io.debezium.time.Date"
    elif kind == "datetime":
        field["type"] = "int64"
        logical = (
            "io.debezium.time.MicroTimestamp" if column.fsp > 3 else "io.debezium.time.Timestamp"
        )
    elif kind == "timestamp":
        logical = "io.debezium.time.ZonedTimestamp"
    elif kind == "time":
        field["type"], logical = "int64", "io.debezium.time.MicroTime"
    elif kind == "year":
        field["type"], logical = "int32", "io.debezium.time.Year"
    elif kind == "json":
        logical = "io.debezium.data.Json"
    elif kind in ("enum", "set"):
        logical = "io.debezium.data.Enum" if kind == "enum" else "io.debezium.data.EnumSet"
        allowed = column.sql.split("(", 1)[1].rstrip(")").replace("'", "")
        parameters = {"allowed": allowed}
    elif kind == "bit":
        if _bits(column) == 1:
            field["type"] = "boolean"
        else:
            field["type"], logical = "bytes", "io.debezium.data.Bits"
            parameters = {"length": str(_bits(column))}
    elif kind in ("binary", "blob"):
        field["type"] = "bytes"
    elif kind == "geometry":
        field["type"] = "struct"
        field["fields"] = [
            {"type": "bytes", "optional": False, "field": "wkb"},
            {"type": "int32", "optional": True, "field": "srid"},
        ]
        logical = "io.debezium.data.geometry.Geometry"
    if logical is not None:
        field["name"] = logical
        field["version"] = 1
    if parameters is not None:
        field["parameters"] = parameters
    field["field"] = column.name
    return field


def connect_schema(server: str, event) -> dict:
    """The Connect schema of an envelope of ``event``'s table (its columns now)."""
    value = f"{server}.{event.db}.{event.table}.Value"
    columns = [connect_field(c, c.name not in event.primary_key) for c in event.columns]
    source = [
        {"type": "string", "optional": False, "field": name}
        for name in ("version", "connector", "name")
    ] + [
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "table"},
        {"type": "string", "optional": False, "field": "file"},
        {"type": "int64", "optional": False, "field": "pos"},
        {"type": "int32", "optional": False, "field": "row"},
    ]
    return {
        "type": "struct",
        "fields": [
            {"type": "struct", "fields": columns, "optional": True, "name": value,
             "field": "before"},
            {"type": "struct", "fields": columns, "optional": True, "name": value,
             "field": "after"},
            {"type": "struct", "fields": source, "optional": False,
             "name": "io.debezium.connector.mysql.Source", "field": "source"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        "optional": False,
        "name": f"{server}.{event.db}.{event.table}.Envelope",
        "version": 1,
    }  # fmt: skip


def connect_key(server: str, event, row: dict) -> bytes:
    """The Kafka message key of a row: its key columns, with their Connect schema."""
    columns = [c for c in event.columns if c.name in event.primary_key]
    doc = {
        "schema": {
            "type": "struct",
            "fields": [connect_field(c, False) for c in columns],
            "optional": False,
            "name": f"{server}.{event.db}.{event.table}.Key",
        },
        "payload": {c.name: connect_wire(c, row[c.name]) for c in columns},
    }
    return dump_json(doc, _ESCAPE).encode("utf-8")


_ABSENT = object()
_OP_NAMES = {"r": "read", "c": "insert", "u": "update", "d": "delete"}


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded: the string's text or the number's token."""
    return wire(column, value)


def _key_str(text: str) -> bytes:
    return text.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def _millis(column: Column, value: Value) -> int:
    """A DATE, DATETIME or TIMESTAMP as epoch milliseconds (a DATE at midnight UTC)."""
    if column.type == "date":
        return calendar.timegm(value.timetuple()) * 1000
    if column.type == "timestamp":
        value = value.astimezone(dt.timezone.utc)
    return calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000


def mongo_wire(column: Column, value: Value, mode: str):
    """The Extended JSON the MongoDB connector writes for a value, in ``mode`` (``strict``:
    v1, ``canonical`` and ``relaxed``: v2)."""
    if value is None:
        return None
    kind = column.type
    if kind in _INTEGERS:
        return {"$numberLong": str(value)} if mode == "canonical" else Raw(str(value))
    if kind in ("float", "double"):
        return {"$numberDouble": repr(value)} if mode == "canonical" else Raw(repr(value))
    if kind == "decimal":
        return {"$numberDecimal": format(value, "f")}
    if kind in _TEMPORAL:
        ms = _millis(column, value)
        if mode == "strict":
            return {"$date": Raw(str(ms))}
        if mode == "relaxed" and 0 <= ms < 253402300800000:
            return {"$date": timestamp_text(ms, "ms", True)}
        return {"$date": {"$numberLong": str(ms)}}
    text = wire(column, value)
    if kind in ("binary", "blob", "geometry"):
        if mode == "strict":
            return {"$binary": text, "$type": "00"}
        return {"$binary": {"base64": text, "subType": "00"}}
    return text


def mongo_render(column: Column, value: Value) -> str | None:
    """The text a MongoDB document's value decodes to."""
    if value is not None and column.type in _TEMPORAL:
        return timestamp_text(_millis(column, value), "ms", True)
    return render(column, value)


def _nested(column: Column, value: Value) -> str:
    """A value's text inside a nested document (compact JSON)."""
    text = mongo_render(column, value)
    if text is None:
        return "null"
    if column.type in _INTEGERS or column.type in ("float", "double", "decimal", "time"):
        return text
    return _ESCAPE(text)


def oracle_scn(file: str, position: int) -> int:
    """An SCN for a binlog position: increasing along the log, across files."""
    return int(file.rsplit(".", 1)[1]) * 10**10 + position


def _sent_image(columns: list[Column], row: dict | None, wire=wire) -> dict | None:
    """A row image as the envelope sends it: the wire values of the columns it has."""
    if row is None:
        return None
    return {c.name: wire(c, row[c.name]) for c in columns if c.name in row}


def _decoded_image(columns: list[Column], row: dict | None, render=render) -> list | None:
    """A row image as it decodes: (column, text) of the columns it has."""
    if row is None:
        return None
    return [(c.name, render(c, row[c.name])) for c in columns if c.name in row]


class DebeziumJsonWriter:
    """Turns a :class:`MySQLSource`'s records into Debezium JSON and expected events.

    Args:
        source: the simulated server.
        seed: seeds the writer's own choices.
        snapshot_records: at most this many leading insert-only transactions are sent as
            snapshot rows.
        connector: whose messages to write (:data:`CONNECTORS`).
        connect: the MySQL connector with the Connect schema on every message, and a Kafka
            key per message (:attr:`message_keys`); see :func:`connect_wire`.
    """

    format = FORMAT

    def __init__(
        self,
        source: MySQLSource,
        *,
        seed: int = 0,
        snapshot_records: int = 3,
        connector: str = "mysql",
        connect: bool = False,
    ) -> None:
        if connector not in CONNECTORS:
            raise ValueError(f"unknown connector {connector!r}: one of {', '.join(CONNECTORS)}")
        if connect and connector != "mysql":
            raise ValueError("connect=True writes the MySQL connector's messages only")
        self.source = source
        self.connector = connector
        self.connect = connect
        self.message_keys: list[bytes | None] = []
        self._schemas: dict[tuple, dict] = {}
        self.rng = random.Random(
            f"debezium-json/{seed}" if connector == "mysql" else f"debezium-json/{connector}/{seed}"
        )
        self.tables = Tables()
        self.snapshot_left = snapshot_records
        self.snapshot_at: tuple[str, int] | None = None
        self.oplog = (0, 0)  # MongoDB: the last (seconds, ordinal) written

    @property
    def render(self):
        """The text a value of a column decodes to, for this writer's connector."""
        if self.connect:
            return connect_render
        return mongo_render if self.connector == "mongodb" else render

    def table_name(self, db: str, table: str) -> str:
        """The name events of ``db.table`` are applied under (``apply.table_name``)."""
        return f"{ORACLE_DB}.{db}.{table}" if self.connector == "oracle" else f"{db}.{table}"

    def final_state(self, source: MySQLSource) -> tuple[dict, dict]:
        """``(final state, primary keys)`` as applying this writer's events gives them."""
        state: dict = {}
        keys: dict = {}
        for table in source.tables:
            name = self.table_name(*table.qualified.split(".", 1))
            keys[name] = ["_id"] if self.connector == "mongodb" else list(table.primary_key)
            if not table.rows:
                continue
            columns = {c.name: c for c in table.columns}
            rows = {}
            for row in table.rows.by_key.values():
                image = {name: self.render(columns[name], value) for name, value in row.items()}
                if self.connector == "mongodb":
                    image = {"_id": self._id_text(table.primary_key, columns, row), **image}
                    key = (image["_id"],)
                else:
                    key = tuple(image[c] for c in table.primary_key)
                rows[key] = image
            state[name] = rows
        return state, keys

    def state(self) -> tuple:
        return (self.tables.mark(), self.snapshot_left, self.snapshot_at, self.oplog,
                len(self.message_keys))  # fmt: skip

    def restore(self, state: tuple) -> None:
        mark, self.snapshot_left, self.snapshot_at, self.oplog, keys = state
        self.tables.rewind(mark)
        del self.message_keys[keys:]

    def _message(self, op, event, tx, row_no, before, after, snapshot, order=0):
        if self.connector == "oracle":
            return self._oracle(op, event, tx, order, before, after, snapshot)
        if self.connector == "mongodb":
            return self._mongo(op, event, tx, order, before, after, snapshot)
        return self._mysql(op, event, tx, row_no, before, after, snapshot)

    def _capture(self, ts_ms: int, event, envelope: dict) -> int:
        """Sets the envelope's processing times; returns them in microseconds."""
        rng = self.rng
        capture_ms = max(ts_ms, event.timestamp * 1000) + rng.randint(5, 900)
        envelope["ts_ms"] = capture_ms
        capture_us = capture_ms * 1000
        if rng.random() < 0.3:
            capture_us += rng.randrange(1000)
            envelope["ts_us"] = capture_us
            envelope["ts_ns"] = capture_us * 1000
        return capture_us

    def _wrap(self, envelope: dict, event) -> bytes:
        """The Kafka value: the envelope, in Connect's wrapper now and then."""
        doc = envelope
        pick = self.rng.random()
        if pick < 0.3:
            doc = {"schema": {"type": "struct", "optional": False,
                              "name": f"server1.{event.db}.{event.table}.Envelope"},
                   "payload": envelope}  # fmt: skip
        elif pick < 0.4:
            doc = {"payload": envelope}
        return dump_json(doc, _ESCAPE).encode("utf-8")

    def _oracle(self, op, event, tx, order, before, after, snapshot) -> tuple[bytes, list]:
        columns = event.columns
        images = {"before": _sent_image(columns, before), "after": _sent_image(columns, after)}
        scn = oracle_scn(*self.snapshot_at) if snapshot else oracle_scn(event.file, event.position)
        commit = None if snapshot else oracle_scn(tx.file, tx.commit_position)
        tx_id = None if snapshot else f"{tx.thread_id}.{tx.xid}.1"
        ts_ms = event.timestamp * 1000
        source = {
            "version": VERSION, "connector": "oracle", "name": "server1", "ts_ms": ts_ms,
            "snapshot": "true" if snapshot else "false", "db": ORACLE_DB, "sequence": None,
            "schema": event.db, "table": event.table, "txId": tx_id, "scn": str(scn),
            "commit_scn": None if commit is None else str(commit), "lcr_position": None,
            "rs_id": None if snapshot else f"0x{tx.xid:06x}.{order:08x}.0010",
            "ssn": 0, "redo_thread": 1, "user_name": None if snapshot else "SHOP",
            "txSeq": None if snapshot else order,
        }  # fmt: skip
        envelope = {"before": images["before"], "after": images["after"], "source": source,
                    "op": op}  # fmt: skip
        capture_us = self._capture(ts_ms, event, envelope)
        transaction = None
        if not snapshot and self.rng.random() < 0.4:
            transaction = {"id": tx_id, "total_order": order, "data_collection_order": order}
        envelope["transaction"] = transaction
        metadata = [(k, str(v)) for k, v in source.items()
                    if k not in ("db", "schema", "table") and v is not None]  # fmt: skip
        if transaction:
            metadata += [("total_order", str(order)), ("data_collection_order", str(order))]
        commit_or = scn if commit is None else commit
        sequence = struct.pack(">Q", commit_or) + _key_str(tx_id or "")
        sequence += struct.pack(">QQ", scn, 0 if snapshot else order)
        expected = [
            FORMAT, _OP_NAMES[op], op, ORACLE_DB, event.db, event.table, ts_ms * 1000,
            capture_us, tx_id, str(scn), sequence,
            None if snapshot else f"{commit_or}:{scn}:{order}", None,
            _decoded_image(columns, before), _decoded_image(columns, after),
            None, metadata, None, None,
        ]  # fmt: skip
        return self._wrap(envelope, event), expected

    def _id_wire(self, primary_key, columns: dict, row: dict, mode: str):
        if len(primary_key) == 1:
            return mongo_wire(columns[primary_key[0]], row[primary_key[0]], mode)
        return {c: mongo_wire(columns[c], row[c], mode) for c in primary_key}

    def _id_text(self, primary_key, columns: dict, row: dict) -> str | None:
        if len(primary_key) == 1:
            return mongo_render(columns[primary_key[0]], row[primary_key[0]])
        inner = ",".join(f"{_ESCAPE(c)}:{_nested(columns[c], row[c])}" for c in primary_key)
        return "{" + inner + "}"

    def _mongo(self, op, event, tx, order, before, after, snapshot) -> tuple[bytes, list]:
        rng = self.rng
        columns = {c.name: c for c in event.columns}
        key = event.primary_key
        mode = rng.choice(("strict", "canonical", "relaxed"))

        def document(row: dict, names) -> str:
            doc = {c: mongo_wire(columns[c], row[c], mode) for c in names}
            return dump_json(doc, _ESCAPE)

        def image(row: dict, names, with_id: bool) -> list:
            out = [("_id", self._id_text(key, columns, row))] if with_id else []
            return out + [(c, mongo_render(columns[c], row[c])) for c in names]

        def whole(row: dict) -> tuple[str, list]:
            names = [c.name for c in event.columns if c.name in row]
            doc = {"_id": self._id_wire(key, columns, row, mode),
                   **{c: mongo_wire(columns[c], row[c], mode) for c in names}}  # fmt: skip
            return dump_json(doc, _ESCAPE), image(row, names, True)

        envelope: dict = {"op": op}
        before_image = after_image = None
        if before is not None:
            envelope["before"], before_image = whole(before)
        if after is not None:
            same_key = before is None or all(before[c] == after[c] for c in key)
            if op == "u" and same_key and rng.random() < 0.5:
                # The connector's default capture mode: only what changed (and the nulls,
                # so a column added since the row was written is in the state as null).
                changed = [
                    c.name
                    for c in event.columns
                    if c.name in after
                    and (after[c.name] is None or before.get(c.name, _ABSENT) != after[c.name])
                ]
                envelope["updateDescription"] = {
                    "removedFields": None,
                    "updatedFields": document(after, changed),
                    "truncatedArrays": None,
                }
                after_image = image(after, changed, False)
            else:
                envelope["after"], after_image = whole(after)
                if op == "u":
                    envelope["updateDescription"] = None
        # The oplog time: the rows of one transaction share one entry.
        if snapshot:
            seconds, ordinal = self.oplog = (max(self.oplog[0], event.timestamp), 1)
        elif order <= 1:
            seconds = max(self.oplog[0], event.timestamp)
            ordinal = self.oplog[1] + 1 if seconds == self.oplog[0] else 1
            self.oplog = (seconds, ordinal)
        else:
            seconds, ordinal = self.oplog
        in_tx = not snapshot and sum(len(e.rows) for e in tx.events) > 1
        source = {
            "version": VERSION, "connector": "mongodb", "name": "shop-server",
            "ts_ms": seconds * 1000, "snapshot": "true" if snapshot else "false",
            "db": event.db, "rs": "rs0", "collection": event.table, "ord": ordinal,
            "lsid": None, "txnNumber": tx.xid if in_tx else None,
        }  # fmt: skip
        envelope["source"] = source
        capture_us = self._capture(seconds * 1000, event, envelope)
        transaction = None
        if in_tx:
            transaction = {"id": f"{tx.xid}", "total_order": order,
                           "data_collection_order": order}  # fmt: skip
            envelope["transaction"] = transaction
        metadata = [(k, str(v)) for k, v in source.items()
                    if k not in ("db", "collection") and v is not None]  # fmt: skip
        if transaction:
            metadata += [("total_order", str(order)), ("data_collection_order", str(order))]
        if envelope.get("updateDescription") is not None:
            metadata.append(
                ("updateDescription", dump_json(envelope["updateDescription"], _ESCAPE))
            )
        position = f"{seconds}:{ordinal}"
        event_id = None
        if not snapshot:
            event_id = f"{position}:{order}" if transaction else position
        sequence = struct.pack(">QQQ", seconds * 10**9 + (1 << 63), ordinal,
                               order if transaction else 0)  # fmt: skip
        expected = [
            FORMAT, _OP_NAMES[op], op, event.db, None, event.table, seconds * 1_000_000,
            capture_us, transaction["id"] if transaction else None, position, sequence,
            event_id, ["_id"], before_image, after_image, None, metadata, None, None,
        ]  # fmt: skip
        return self._wrap(envelope, event), expected

    def _mysql(self, op, event, tx, row_no, before, after, snapshot) -> tuple[bytes, list]:
        rng = self.rng
        columns = event.columns
        sent = connect_wire if self.connect else wire
        decoded = connect_render if self.connect else render
        images = {"before": _sent_image(columns, before, sent),
                  "after": _sent_image(columns, after, sent)}  # fmt: skip
        file, pos = self.snapshot_at if snapshot else (event.file, event.position)
        ts_ms = event.timestamp * 1000 if not snapshot else 0
        source = {
            "version": VERSION, "connector": "mysql", "name": "shop-server", "ts_ms": ts_ms,
            "snapshot": "true" if snapshot else "false", "db": event.db, "sequence": None,
            "table": event.table, "server_id": 0 if snapshot else self.source.server_id,
            "gtid": None if snapshot else tx.gtid, "file": file, "pos": pos,
            "row": row_no, "thread": None if snapshot else tx.thread_id, "query": None,
        }  # fmt: skip
        capture_ms = max(ts_ms, event.timestamp * 1000) + rng.randint(5, 900)
        envelope = {"before": images["before"], "after": images["after"], "source": source,
                    "op": op, "ts_ms": capture_ms}  # fmt: skip
        capture_us = capture_ms * 1000
        if rng.random() < 0.3:
            capture_us += rng.randrange(1000)
            envelope["ts_us"] = capture_us
            envelope["ts_ns"] = capture_us * 1000
        transaction = None
        if not snapshot and tx.gtid and rng.random() < 0.4:
            transaction = {"id": tx.gtid, "total_order": row_no + 1,
                           "data_collection_order": row_no + 1}  # fmt: skip
        envelope["transaction"] = transaction
        doc = envelope
        if rng.random() < 0.3:  # schemas.enable=true: Connect's schema beside the payload
            doc = {"schema": {"type": "struct", "optional": False,
                              "name": f"shop-server.{event.db}.{event.table}.Envelope"},
                   "payload": envelope}  # fmt: skip
        if self.connect:
            key = (event.db, event.table, tuple(event.columns))
            schema = self._schemas.get(key)
            if schema is None:
                schema = self._schemas[key] = connect_schema("shop-server", event)
            doc = {"schema": schema, "payload": envelope}
            self.message_keys.append(connect_key("shop-server", event, after or before))

        metadata = [(k, str(v)) for k, v in source.items()
                    if k not in ("db", "table") and v is not None]  # fmt: skip
        if transaction:
            metadata += [("total_order", str(row_no + 1)),
                         ("data_collection_order", str(row_no + 1))]  # fmt: skip
        op_name = {"r": "read", "c": "insert", "u": "update", "d": "delete"}[op]
        tx_id = transaction["id"] if transaction else None if snapshot else tx.gtid
        expected = [
            FORMAT, op_name, op, event.db, None, event.table, ts_ms * 1000, capture_us, tx_id,
            f"{file}:{pos}", _key_str(file) + struct.pack(">QQ", pos, row_no),
            None if snapshot else f"{file}:{pos}:{row_no}", None,
            _decoded_image(columns, before, decoded), _decoded_image(columns, after, decoded),
            None, metadata, None, None,
        ]  # fmt: skip
        return dump_json(doc, json.encoder.encode_basestring).encode("utf-8"), expected

    def _transaction(self, tx: Transaction) -> list[tuple[bytes, list]]:
        if tx.rolled_back or not tx.events:
            return []
        snapshot = self.snapshot_left > 0 and all(e.kind == "insert" for e in tx.events)
        if snapshot:
            self.snapshot_left -= 1
            self.snapshot_at = self.snapshot_at or (tx.file, tx.position)
        else:
            self.snapshot_left = 0
        out = []
        order = 0  # the order of the row in the transaction, from 1
        for event in tx.events:
            for row_no, image in enumerate(event.rows):
                before, after = self.tables.whole(event, image)
                op = "r" if snapshot else {"insert": "c", "update": "u", "delete": "d"}[event.kind]
                # Snapshot rows all carry the snapshot's position, row 0, as Debezium's do.
                row = 0 if snapshot else row_no
                key = event.primary_key
                if op == "u" and any(before[c] != after[c] for c in key):
                    # A primary key update: Debezium sends a delete of the old key and a
                    # create of the new one, both at the row's position.
                    order += 1
                    out.append(self._message("d", event, tx, row, before, None, snapshot, order))
                    if self.rng.random() < 0.3:
                        out.append(self.heartbeat(tx.timestamp))
                    op, before = "c", None
                order += 1
                out.append(self._message(op, event, tx, row, before, after, snapshot, order))
                if op == "d" and self.rng.random() < 0.3:
                    out.append(self.heartbeat(tx.timestamp))
                    if self.connect:  # the tombstone has the deleted row's key
                        self.message_keys.append(self.message_keys[-1])
        return out

    def heartbeat(self, seconds: int) -> tuple[None, list]:
        """A Kafka tombstone: a null value (sent after a delete, and to fill a stream)."""
        return None, [FORMAT, "tombstone", *([None] * 17)]

    def messages(self, record) -> list[tuple[bytes | None, list]]:
        """``(value, expected event row)`` of each message one source record becomes."""
        if isinstance(record, Transaction):
            return self._transaction(record)
        if isinstance(record, Ddl):
            self.snapshot_left = 0
        return []  # DDL, heartbeats and checkpoints go to other topics
