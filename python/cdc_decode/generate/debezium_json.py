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
"""

from __future__ import annotations

import base64
import calendar
import datetime as dt
import json
import random
import struct

from .datahub_blob import Raw, _dump
from .images import Tables
from .source import Column, Ddl, MySQLSource, Transaction, Value, mysql_text

FORMAT = "debezium-json"
VERSION = "2.7.3.Final"

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


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded: the string's text or the number's token."""
    return wire(column, value)


def _key_str(text: str) -> bytes:
    return text.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x01"


class DebeziumJsonWriter:
    """Turns a :class:`MySQLSource`'s records into Debezium JSON and expected events.

    Args:
        source: the simulated server.
        seed: seeds the writer's own choices.
        snapshot_records: at most this many leading insert-only transactions are sent as
            snapshot rows.
    """

    format = FORMAT

    def __init__(self, source: MySQLSource, *, seed: int = 0, snapshot_records: int = 3) -> None:
        self.source = source
        self.rng = random.Random(f"debezium-json/{seed}")
        self.tables = Tables()
        self.snapshot_left = snapshot_records
        self.snapshot_at: tuple[str, int] | None = None

    def state(self) -> tuple:
        return self.tables.mark(), self.snapshot_left, self.snapshot_at

    def restore(self, state: tuple) -> None:
        mark, self.snapshot_left, self.snapshot_at = state
        self.tables.rewind(mark)

    def _message(self, op, event, tx, row_no, before, after, snapshot) -> tuple[bytes, list]:
        rng = self.rng
        columns = event.columns
        images = {}
        for name, row in (("before", before), ("after", after)):
            images[name] = None if row is None else {c.name: wire(c, row[c.name]) for c in columns
                                                     if c.name in row}  # fmt: skip
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
            None if before is None else [(c.name, render(c, before[c.name])) for c in columns
                                         if c.name in before],
            None if after is None else [(c.name, render(c, after[c.name])) for c in columns
                                        if c.name in after],
            None, metadata, None, None,
        ]  # fmt: skip
        return _dump(doc, json.encoder.encode_basestring).encode("utf-8"), expected

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
        for event in tx.events:
            for row_no, image in enumerate(event.rows):
                before, after = self.tables.whole(event, image)
                op = "r" if snapshot else {"insert": "c", "update": "u", "delete": "d"}[event.kind]
                # Snapshot rows all carry the snapshot's position, row 0, as Debezium's do.
                row = 0 if snapshot else row_no
                out.append(self._message(op, event, tx, row, before, after, snapshot))
                if op == "d" and self.rng.random() < 0.3:
                    out.append(self.heartbeat(tx.timestamp))
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
