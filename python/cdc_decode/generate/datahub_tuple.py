"""The DataHub TUPLE writer: one simulated table's changes as the records DataWorks writes
to a TUPLE topic (an Arrow table: the table's columns plus the meta columns), and the events
they must decode to.

A TUPLE topic maps one source table, with fields fixed when the topic is created: the
table's columns when the stream starts. Only row changes are sent (no DDL, transactions,
heartbeats); an update is a before-image and an after-image record with one
``_sequence_id_``; the first insert-only transactions are full-sync rows (``_sequence_id_``
and ``_execute_time_`` ``-1``). Images are whole rows, as DataWorks (which requires
``binlog_row_image=FULL``) sends them: the writer keeps the rows it has sent and fills the
source's minimal images from them. The expected events are rendered here from what this
writer put in each field, following docs/formats/datahub-tuple.md, never by decoding.
"""

from __future__ import annotations

import base64
import datetime as dt
import random
import re
import struct
from decimal import Decimal

import pyarrow as pa

from .source import Column, MySQLSource, Transaction, Value, mysql_text

FORMAT = "datahub-tuple"
DEFAULT_TABLE = "shop.users"
"""The table a stream simulates when the caller names none: the widest mix of types."""

EXECUTE_TIME = "_execute_time_"
EXCUTE_TIME = "_excute_time_"  # the seed's spelling

_SIGN = 1 << 63
_UTC = dt.timezone.utc
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")


def arrow_type(column: Column) -> pa.DataType:
    """The Arrow type of the TUPLE field DataWorks makes for a MySQL column: the narrowest
    DataHub type that holds it (docs/formats/datahub-tuple.md, "The generator")."""
    kind, unsigned = column.type, column.unsigned
    if column.sql.startswith("tinyint(1)"):
        return pa.bool_()
    if kind == "tinyint":
        return pa.int16() if unsigned else pa.int8()
    if kind == "smallint":
        return pa.int32() if unsigned else pa.int16()
    if kind == "mediumint":
        return pa.int32()
    if kind == "int":
        return pa.int64() if unsigned else pa.int32()
    if kind == "bigint":
        return pa.decimal128(20, 0) if unsigned else pa.int64()
    if kind == "year":
        return pa.int16()
    if kind == "bit":
        return pa.int64()
    if kind == "float":
        return pa.float32()
    if kind == "double":
        return pa.float64()
    if kind == "decimal":
        match = _DECIMAL.match(column.sql)
        precision = int(match.group(1)) if match else 38
        return pa.decimal128(precision, column.scale)
    if kind in ("date", "datetime", "timestamp"):
        return _TIMESTAMP
    if kind in ("binary", "blob", "geometry"):
        return pa.binary()
    return pa.string()  # varchar char enum set json time


def _instant(column: Column, value) -> dt.datetime:
    if column.type == "date":
        return dt.datetime(value.year, value.month, value.day, tzinfo=_UTC)
    if column.type == "timestamp":
        return value.astimezone(_UTC)
    return value.replace(tzinfo=_UTC)  # a DATETIME has no zone: read as UTC


def wire(column: Column, value: Value):
    """The Python value of the TUPLE field, for ``pa.array`` of :func:`arrow_type`."""
    if value is None:
        return None
    t = arrow_type(column)
    if pa.types.is_boolean(t):
        return value != 0
    if pa.types.is_decimal(t) and column.type == "bigint":
        return Decimal(value)
    if pa.types.is_timestamp(t):
        return _instant(column, value)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return mysql_text(column, value)
    return value  # int, float, Decimal


def render(column: Column, value: Value) -> str | None:
    """The generic text the field decodes to, from this writer's own knowledge of it."""
    if value is None:
        return None
    t = arrow_type(column)
    if pa.types.is_boolean(t):
        return "true" if value else "false"
    if pa.types.is_floating(t):
        # The source's floats have at most 6 significant digits, so the shortest text of
        # the float32 (or float64) they become is the decimal Python prints for them.
        return repr(value)
    if pa.types.is_decimal(t):
        return str(value) if column.type == "bigint" else format(value, "f")
    if pa.types.is_timestamp(t):
        moment = _instant(column, value)
        return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"
    if pa.types.is_binary(t):
        return base64.b64encode(mysql_text(column, value)).decode("ascii")
    if pa.types.is_string(t):
        return mysql_text(column, value)
    return str(value)


class DatahubTupleWriter:
    """Turns a one-table :class:`MySQLSource`'s records into TUPLE records and expected
    events.

    Args:
        source: the simulated server; it must hold exactly one table.
        seed: seeds the writer's own choices (the time column's name, the sequence type).
        snapshot_records: at most this many leading insert-only transactions are sent as
            full-sync rows.
    """

    format = FORMAT

    def __init__(self, source: MySQLSource, *, seed: int = 0, snapshot_records: int = 3) -> None:
        if len(source.tables) != 1:
            raise ValueError("a TUPLE topic maps one table: simulate exactly one")
        table = source.tables[0]
        self.table = table
        self.columns: tuple[Column, ...] = tuple(table.columns)  # the topic's fields, fixed
        rng = random.Random(f"datahub-tuple/{seed}")
        self.time_name = rng.choice([EXECUTE_TIME, EXCUTE_TIME])
        self.sequence_type = pa.int64() if rng.random() < 0.2 else pa.string()
        self.sequence_id = source.time_us // 1000 * 1_000_000
        self.snapshot_left = snapshot_records
        self.rows: dict[tuple, dict[str, Value]] = {}  # the whole rows sent, by key

    def schema(self) -> pa.Schema:
        """The topic's schema: the data columns, then the meta columns."""
        return pa.schema(
            [pa.field(c.name, arrow_type(c)) for c in self.columns]
            + [
                pa.field("_sequence_id_", self.sequence_type),
                pa.field("_operation_type_", pa.string()),
                pa.field(self.time_name, pa.int64()),
                pa.field("_before_image_", pa.string()),
                pa.field("_after_image_", pa.string()),
                pa.field("_source_table_", pa.string()),
            ]
        )

    def _key(self, image: dict) -> tuple:
        return tuple(image[name] for name in self.table.primary_key)

    def _record(self, kind: str, sequence_id: int, time_ms: int, row: dict, before: bool):
        """``(TUPLE record values, expected event row, (key, row after or None))``."""
        record = [wire(c, row.get(c.name)) for c in self.columns]
        sequence = str(sequence_id) if pa.types.is_string(self.sequence_type) else sequence_id
        record += [
            sequence,
            kind,
            time_ms,
            "Y" if before else "N",
            "N" if before else "Y",
            self.table.qualified,
        ]
        op = {"I": "insert", "D": "delete"}.get(kind) or (
            "update_before" if before else "update_after"
        )
        if sequence_id == -1:
            op = "read"
        half = 0 if op == "update_before" else 1
        entries = [(c.name, render(c, row.get(c.name))) for c in self.columns]
        event = [
            FORMAT,
            op,
            kind,
            self.table.db,
            None,
            self.table.name,
            None if time_ms == -1 else time_ms * 1000,
            None,
            None,
            str(sequence_id) if sequence_id >= 0 else None,
            struct.pack(">QQ", sequence_id + _SIGN, half),
            None if sequence_id == -1 else f"{sequence_id}:{half}",
            None,
            entries if before else None,
            None if before else entries,
            None,
            None,
            None,
            None,
        ]
        # The state after this record, as applying its event leaves it (docs: apply_events).
        return record, event, (self._key(row), None if before else row)

    def _transaction(self, tx: Transaction) -> list:
        if tx.rolled_back:
            return []
        full_sync = self.snapshot_left > 0 and bool(tx.events)
        full_sync = full_sync and all(e.kind == "insert" for e in tx.events)
        if full_sync:
            self.snapshot_left -= 1
        else:
            self.snapshot_left = 0
        out = []
        for event in tx.events:
            time_ms = -1 if full_sync else event.timestamp * 1000
            for image in event.rows:
                if full_sync:
                    sequence_id = -1
                else:
                    self.sequence_id += 1
                    sequence_id = self.sequence_id
                if event.kind == "insert":
                    row = dict(image.after)
                    self.rows[self._key(row)] = row
                    out.append(self._record("I", sequence_id, time_ms, row, before=False))
                elif event.kind == "delete":
                    row = self.rows.pop(self._key(image.before))
                    out.append(self._record("D", sequence_id, time_ms, row, before=True))
                else:
                    key = self._key(image.before)
                    old = self.rows.pop(key)
                    new = {**old, **image.after}
                    self.rows[self._key(new)] = new  # the key may have changed
                    out.append(self._record("U", sequence_id, time_ms, old, before=True))
                    out.append(self._record("U", sequence_id, time_ms, new, before=False))
        return out

    def records(self, record) -> list:
        """``(TUPLE record values, expected event row, state change)`` of each record one
        source record becomes; the state change is ``(key, whole row)`` for a row that is
        there after it, ``(key, None)`` for one that is gone."""
        if isinstance(record, Transaction):
            return self._transaction(record)
        return []  # DDL, heartbeats and checkpoints: a TUPLE topic gets none of them


def write_stream(source: MySQLSource, writer: DatahubTupleWriter, messages: int):
    """Run ``source`` through ``writer`` until exactly ``messages`` records.

    The last source record may be cut: the stream then ends where a reader of the topic
    up to that offset would stop, and the state says what those records leave.

    Returns:
        ``(records table, event rows, state)``: the state is key -> whole row.
    """
    rows: list[list] = []
    events: list[list] = []
    state: dict[tuple, dict] = {}
    while len(rows) < messages:
        for record, event, (key, row) in writer.records(source.next_record()):
            if len(rows) == messages:
                break
            rows.append(record)
            events.append(event)
            if row is None:
                state.pop(key, None)
            else:
                state[key] = row
    schema = writer.schema()
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in schema]
    table = pa.Table.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, schema, strict=True)],
        schema=schema,
    )
    return table, events, state
