"""The Datastream writer: a simulated MySQL source's records as the lines of Google Cloud
Datastream JSON files, one event per changed row, and the events they must decode to.

A stream starts with backfill rows (``mysql-backfill-fulldump``, ``sort_keys`` ``[ts, "",
0]``), then CDC events (``mysql-cdc-binlog``): ``INSERT``, ``UPDATE-INSERT`` with the new
row (``UPDATE-DELETE`` with the old row first when the key changes), ``DELETE`` with the
old row and ``is_deleted``. Every event carries the whole row (Datastream reads it so);
a column added after the row was last written has no value in the source and is left
out. Values as Datastream's JSON writes MySQL types: numbers as numbers, DECIMAL as a
number, dates and times as text, BLOB and BINARY as lowercase hex. Timestamps are epoch
milliseconds or, for a third of the events, UTC text. DDL, heartbeats and checkpoints send
nothing. The expected events follow docs/formats/datastream-json.md.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
import uuid as uuids

from .datahub_blob import Raw, dump_json
from .images import Tables
from .source import Column, Ddl, MySQLSource, Transaction, Value, mysql_text

FORMAT = "datastream-json"
STREAM = "projects/demo/locations/asia-east1/streams/shop"

_OPS = {"INSERT": "insert", "UPDATE-INSERT": "update_after", "UPDATE-DELETE": "update_before",
        "DELETE": "delete"}  # fmt: skip
_NUMBERS = ("tinyint", "smallint", "mediumint", "int", "bigint", "year", "float", "double",
            "decimal")  # fmt: skip


def wire(column: Column, value: Value):
    """The JSON value Datastream writes for a MySQL value."""
    if value is None:
        return None
    text = mysql_text(column, value)
    if isinstance(text, bytes):
        return text.hex()
    if column.type in _NUMBERS:
        return Raw(text)
    return text


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded."""
    return wire(column, value)


def _key_str(text: str) -> bytes:
    return text.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x01"


class DatastreamJsonWriter:
    """Turns a :class:`MySQLSource`'s records into Datastream JSON lines and expected events.

    Args:
        source: the simulated server.
        seed: seeds the writer's own choices (uuids, timestamp encoding …).
        snapshot_records: at most this many leading insert-only transactions are backfill.
    """

    format = FORMAT

    def __init__(self, source: MySQLSource, *, seed: int = 0, snapshot_records: int = 3) -> None:
        self.source = source
        self.rng = random.Random(f"datastream-json/{seed}")
        self.tables = Tables()
        self.snapshot_left = snapshot_records
        self.last_ms = 0

    def state(self) -> tuple:
        return self.tables.mark(), self.snapshot_left, self.rng.getstate(), self.last_ms

    def restore(self, state: tuple) -> None:
        mark, self.snapshot_left, rng, self.last_ms = state
        self.tables.rewind(mark)
        self.rng.setstate(rng)

    def _event(self, event, change, row, backfill, ts_ms, position) -> tuple[bytes, list]:
        rng = self.rng
        columns = [c for c in event.columns if c.name in row]
        read_ms = ts_ms + rng.randint(50, 5000)
        file, pos = ("", 0) if backfill else (event.file, position)
        meta = {"table": event.table, "database": event.db,
                "primary_keys": list(event.primary_key), "log_file": file or None,
                "log_position": pos if not backfill else None,
                "change_type": change,
                "is_deleted": change in ("DELETE", "UPDATE-DELETE")}  # fmt: skip
        uuid = str(uuids.UUID(int=rng.getrandbits(128), version=4))
        as_text = rng.random() < 0.3
        source_ts = (
            dt.datetime.fromtimestamp(ts_ms / 1000, dt.timezone.utc).strftime(
                "%Y-%m-%d %H:%M:%S.%f")[:-3] if as_text else Raw(str(ts_ms))
        )  # fmt: skip
        doc = {
            "stream_name": STREAM,
            "read_method": "mysql-backfill-fulldump" if backfill else "mysql-cdc-binlog",
            "object": f"{event.db}_{event.table}", "schema_key": f"{event.db}.{event.table}:1",
            "uuid": uuid, "read_timestamp": Raw(str(read_ms)), "source_timestamp": source_ts,
            "sort_keys": [Raw(str(ts_ms)), file, Raw(str(pos))],
            "source_metadata": meta,
            "payload": {c.name: wire(c, row[c.name]) for c in columns},
        }  # fmt: skip
        op = "read" if backfill else _OPS[change]
        image = [(c.name, render(c, row[c.name])) for c in columns]
        before, after = (image, None) if op in ("delete", "update_before") else (None, image)
        metadata = [("stream_name", STREAM), ("read_method", doc["read_method"]),
                    ("object", doc["object"]), ("schema_key", doc["schema_key"]),
                    ("sort_keys", f'[{ts_ms},{json.dumps(file)},{pos}]')]  # fmt: skip
        metadata += [(k, json.dumps(v) if isinstance(v, bool) else str(v))
                     for k, v in meta.items()
                     if v is not None and k not in ("table", "database", "change_type",
                                                    "primary_keys")]  # fmt: skip
        sequence = (
            struct.pack(">Q", 0 if backfill else 1)
            + _key_str(file)
            + struct.pack(">QQ", pos, ts_ms * 1000 + (1 << 63))
        )
        expected = [
            FORMAT, op, change, event.db, None, event.table, ts_ms * 1000, read_ms * 1000, None,
            f"{file}:{pos}" if not backfill else None, sequence, uuid,
            list(event.primary_key) or None, before, after, None, metadata, None, None,
        ]  # fmt: skip
        return dump_json(doc, json.encoder.encode_basestring).encode("utf-8"), expected

    def _transaction(self, tx: Transaction) -> list[tuple[bytes, list]]:
        if tx.rolled_back or not tx.events:
            return []
        backfill = self.snapshot_left > 0 and all(e.kind == "insert" for e in tx.events)
        self.snapshot_left = self.snapshot_left - 1 if backfill else 0
        out = []
        # The commit's time, for every row; the source's clock never goes back.
        ts_ms = max(self.last_ms + 1, tx.timestamp * 1000 + self.rng.randrange(1000))
        self.last_ms = ts_ms
        for event in tx.events:
            for image in event.rows:
                before, after = self.tables.whole(event, image)
                at = (ts_ms, event.position)
                if event.kind == "insert":
                    out.append(self._event(event, "INSERT", after, backfill, *at))
                elif event.kind == "delete":
                    out.append(self._event(event, "DELETE", before, False, *at))
                else:
                    key = [before.get(c) for c in event.primary_key]
                    if key != [after.get(c) for c in event.primary_key]:
                        out.append(self._event(event, "UPDATE-DELETE", before, False, *at))
                    out.append(self._event(event, "UPDATE-INSERT", after, False, *at))
        return out

    def heartbeat(self, seconds: int) -> tuple[None, list]:
        """Filler: an empty line's place is a null value (a tombstone row)."""
        return None, [FORMAT, "tombstone", *([None] * 17)]

    def messages(self, record) -> list[tuple[bytes | None, list]]:
        """``(value, expected event row)`` of each event one source record becomes."""
        if isinstance(record, Transaction):
            return self._transaction(record)
        if isinstance(record, Ddl):
            self.snapshot_left = 0
        return []
