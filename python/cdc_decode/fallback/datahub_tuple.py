"""The ``datahub-tuple`` format: DataWorks real-time sync to DataHub TUPLE topics.

The input is not bytes but record batches of TUPLE records: meta columns
(``_sequence_id_``, ``_operation_type_``, ``_execute_time_``, ``_before_image_``,
``_after_image_``, ``_source_table_``) beside the table's data columns. Every rule is in
docs/formats/datahub-tuple.md, which the Rust core (rust/formats/datahub_tuple.rs) follows
too. Columns are checked and rendered to text column by column (:class:`Records`), then
each record becomes one event or one error row.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

import pyarrow as pa
import pyarrow.types as pt

from .._tuple_format import (
    AFTER_IMAGE,
    BEFORE_IMAGE,
    EXCUTE_TIME,
    EXECUTE_TIME,
    EXPECTED_FLAGS,
    FORMAT,
    HEADS,
    LOG_FILE_NAME_OFFSET,
    MAX_MS,
    META_COLUMNS,
    OPERATION_TYPE,
    SEQUENCE_COLUMNS,
    SEQUENCE_ID,
    SOURCE_TABLE,
    TIME_COLUMNS,
)
from .._values import (
    base64_text,
    date_text,
    decimal_text,
    f32_text,
    f64_text,
    json_string,
    timestamp_text,
)
from . import _schemas
from ._events import EventSink, Malformed
from ._typed import Hints, Unconvertible, parse_i64

_STRING_TYPES = "expected a string type (string, large_string, string_view)"
_SEQUENCE_TYPES = "expected a string or integer type"
_TIME_TYPES = "expected a string, integer or timestamp type"
_DATA_TYPES = (
    "a TUPLE record holds integers, float32/float64, decimals, strings, binaries, bool, "
    "timestamps, dates or nulls; cast the column first"
)

_SEQUENCE = struct.Struct(">QQ").pack
_SIGN = 1 << 63
_INTEGER = re.compile(r"-?[0-9]+\Z")


# Typed mode: an integer TUPLE TIMESTAMP is epoch microseconds.
_HINTS = Hints(epoch="us")


def _is_string(t: pa.DataType) -> bool:
    return pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t)


def _is_binary(t: pa.DataType) -> bool:
    return (
        pt.is_binary(t)
        or pt.is_large_binary(t)
        or pt.is_binary_view(t)
        or pt.is_fixed_size_binary(t)
    )


def _is_decimal(t: pa.DataType) -> bool:
    return pt.is_decimal(t)


def _texts(array: pa.Array) -> list[str | None]:
    """Every value of a column as text, ``None`` for nulls (docs: "Rendering values as
    text"). The type has been checked by :func:`_renderable`."""
    t = array.type
    if pt.is_null(t):
        return [None] * len(array)
    if pt.is_integer(t) or pt.is_boolean(t):
        return array.cast(pa.string()).to_pylist()  # digits; true / false
    if _is_string(t):
        return array.to_pylist()
    if pt.is_timestamp(t):
        unit, zoned = t.unit, t.tz is not None
        values = array.cast(pa.int64()).to_pylist()
        return [None if v is None else timestamp_text(v, unit, zoned) for v in values]
    if pt.is_date32(t):
        days = array.cast(pa.int32()).to_pylist()
        return [None if d is None else date_text(d) for d in days]
    if pt.is_date64(t):
        ms = array.cast(pa.int64()).to_pylist()
        return [None if m is None else date_text(m // 86_400_000) for m in ms]
    render: Callable = (
        f64_text
        if pt.is_float64(t)
        else f32_text
        if pt.is_float32(t)
        else decimal_text
        if _is_decimal(t)
        else base64_text
    )
    return [None if v is None else render(v) for v in array.to_pylist()]


def _renderable(t: pa.DataType) -> bool:
    return (
        pt.is_null(t)
        or pt.is_integer(t)
        or pt.is_boolean(t)
        or pt.is_float32(t)
        or pt.is_float64(t)
        or _is_decimal(t)
        or _is_string(t)
        or _is_binary(t)
        or pt.is_timestamp(t)
        or pt.is_date32(t)
        or pt.is_date64(t)
    )


def _meta_refuses(name: str, t: pa.DataType) -> str | None:
    """``None`` when meta column ``name`` may have type ``t``, else what it expects."""
    if name in SEQUENCE_COLUMNS:
        return None if _is_string(t) or pt.is_integer(t) else _SEQUENCE_TYPES
    if name in TIME_COLUMNS:
        ok = _is_string(t) or pt.is_integer(t) or pt.is_timestamp(t)
        return None if ok else _TIME_TYPES
    return None if _is_string(t) else _STRING_TYPES


def _describe(value: object) -> str:
    if value is None:
        return "null"
    return json_string(value[:40])


def _integer(value: object, column: str) -> int:
    """A sequence id or time: integer text ``-?[0-9]+`` or an integer, within i64."""
    if value is None:
        raise Malformed(f"{column}: expected a 64-bit integer, got null")
    if type(value) is int:
        if -_SIGN <= value < _SIGN:
            return value
        raise Malformed(f"{column}: expected a 64-bit integer, got the number {value}")
    number = parse_i64(value)
    if number is not None:
        return number
    raise Malformed(f"{column}: expected a 64-bit integer, got {_describe(value)}")


_PER_SECOND = {"s": 1_000_000, "ms": 1_000}


class Records:
    """One batch of TUPLE records, checked and rendered column by column.

    Args:
        batch: the records.

    Raises:
        ValueError: a column name given twice, a required meta column missing.
        TypeError: a column of a type the format does not read.
    """

    def __init__(self, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"{FORMAT}: column '{name}' appears twice in the records")
        meta: dict[str, int] = {}
        data: list[int] = []
        for i, (name, column) in enumerate(zip(names, batch.columns, strict=True)):
            t = column.type
            if name in META_COLUMNS:
                expected = _meta_refuses(name, t)  # each type it allows renders too
                if expected is not None:
                    raise TypeError(f"column '{name}' has type {t}: {expected}")
                meta[name] = i
            elif _renderable(t):
                data.append(i)
            else:
                raise TypeError(f"column '{name}' has type {t}: {_DATA_TYPES}")

        def missing(what: str) -> ValueError:
            return ValueError(
                f"{FORMAT}: the records have no {what} column (columns: {', '.join(names)})"
            )

        metadata = []
        if SEQUENCE_ID in meta:
            self.sequence_name = SEQUENCE_ID
            if LOG_FILE_NAME_OFFSET in meta:
                metadata.append(meta[LOG_FILE_NAME_OFFSET])
        elif LOG_FILE_NAME_OFFSET in meta:
            self.sequence_name = LOG_FILE_NAME_OFFSET
        else:
            raise missing(f"{SEQUENCE_ID} (or {LOG_FILE_NAME_OFFSET})")
        for name in (OPERATION_TYPE, BEFORE_IMAGE, AFTER_IMAGE):
            if name not in meta:
                raise missing(name)
        if EXECUTE_TIME in meta:
            self.time_name: str | None = EXECUTE_TIME
            if EXCUTE_TIME in meta:
                metadata.append(meta[EXCUTE_TIME])
        else:
            self.time_name = EXCUTE_TIME if EXCUTE_TIME in meta else None

        self.batch = batch
        self.names = names
        self.sequences = batch.column(meta[self.sequence_name]).to_pylist()
        self.operations = batch.column(meta[OPERATION_TYPE]).to_pylist()
        self.befores = batch.column(meta[BEFORE_IMAGE]).to_pylist()
        self.afters = batch.column(meta[AFTER_IMAGE]).to_pylist()
        self.times: list | None = None
        self.time_unit: str | None = None
        if self.time_name is not None:
            column = batch.column(meta[self.time_name])
            if pt.is_timestamp(column.type):
                self.time_unit = column.type.unit
                column = column.cast(pa.int64())
            self.times = column.to_pylist()
        table = meta.get(SOURCE_TABLE)
        self.tables = None if table is None else batch.column(table).to_pylist()
        self.data_names = [names[i] for i in data]
        # The schema pass: the data columns and their Arrow types (pyarrow's spelling, as
        # the Rust core spells them); a TUPLE topic names no key.
        self.wire = _schemas.typed(
            "arrow", [(names[i], str(batch.column(i).type)) for i in data], None
        )
        columns = [_texts(batch.column(i)) for i in data]
        self.images = list(zip(*columns, strict=True)) if columns else [()] * batch.num_rows
        self.metadata = [(names[i], _texts(batch.column(i))) for i in sorted(metadata)]
        self._all: list[list[str | None]] | None = None

    def record(self, row: int, ordinal: int, sink: EventSink) -> None:
        """Writes record ``row``'s event, or its error row, into ``sink``."""
        try:
            events = sink.convert([self._event(row)], _HINTS)
        except (Malformed, Unconvertible) as exc:
            sink.error(ordinal, self.raw(row), str(exc))
            return
        sink.events(events, ordinal, schemas=self.wire)

    def _event(self, row: int) -> tuple:
        source_op = self.operations[row]
        if source_op not in EXPECTED_FLAGS:
            raise Malformed(f"{OPERATION_TYPE}: expected I, U or D, got {_describe(source_op)}")
        flags = []
        for name, values in ((BEFORE_IMAGE, self.befores), (AFTER_IMAGE, self.afters)):
            flag = values[row]
            if flag != "Y" and flag != "N":
                raise Malformed(f"{name}: expected Y or N, got {_describe(flag)}")
            flags.append(flag)
        head = HEADS.get((source_op, *flags))
        if head is None:
            raise Malformed(
                f"{OPERATION_TYPE}: {source_op} with {BEFORE_IMAGE} {flags[0]} and "
                f"{AFTER_IMAGE} {flags[1]}: {EXPECTED_FLAGS[source_op]}"
            )
        op, half, side = head
        sequence_id = _integer(self.sequences[row], self.sequence_name)
        event_time = self._event_time(row)
        if op == "insert" and sequence_id == -1:
            op = "read"  # a full-sync row

        db = table = None
        if self.tables is not None:
            name = self.tables[row]
            if name:
                db, dot, table = name.partition(".")
                if not dot:
                    db, table = None, name
                db, table = db or None, table or None

        image = list(zip(self.data_names, self.images[row], strict=True))
        before, after = (image, None) if side == "before" else (None, image)
        metadata = [(name, texts[row]) for name, texts in self.metadata if texts[row] is not None]
        return (
            FORMAT, op, source_op, db, None, table, event_time, None, None,
            str(sequence_id) if sequence_id >= 0 else None,
            _SEQUENCE(sequence_id + _SIGN, half),
            f"{sequence_id}:{half}" if sequence_id != -1 else None,
            None, before, after, None, metadata or None, None, None,
        )  # fmt: skip

    def _event_time(self, row: int) -> int | None:
        if self.times is None:
            return None
        value = self.times[row]
        if value is None:
            return None
        name = self.time_name
        unit = self.time_unit
        if unit is not None:  # a timestamp column: its instant
            if unit == "us":
                return value
            if unit == "ns":
                return value // 1000
            micros = value * _PER_SECOND[unit]
            if not -_SIGN <= micros < _SIGN:
                word = "seconds" if unit == "s" else "milliseconds"
                raise Malformed(f"{name}: {value} {word} is out of range")
            return micros
        ms = _integer(value, name)
        if ms == -1:
            return None  # a full-sync row: no time
        if not -MAX_MS <= ms <= MAX_MS:
            raise Malformed(f"{name}: {ms} milliseconds is out of range")
        return ms * 1000

    def raw(self, row: int) -> bytes:
        """An error row's ``raw``: the record as a compact JSON object of column -> text."""
        if self._all is None:
            self._all = [_texts(column) for column in self.batch.columns]
        parts = []
        for name, texts in zip(self.names, self._all, strict=True):
            value = texts[row]
            parts.append(f"{json_string(name)}:{'null' if value is None else json_string(value)}")
        return ("{" + ",".join(parts) + "}").encode("utf-8")


class DatahubTuple:
    """Decodes ``datahub-tuple`` record batches: one event per record. No state."""

    name = FORMAT
    pending = 0
    records = True  # the input is record batches, not binary values

    def decode(self, raw: bytes, key: str | None, ordinal: int, sink: EventSink) -> None:
        """Not used: :class:`~cdc_decode.fallback.PythonDecoder` refuses binary values."""
        raise TypeError(f"{FORMAT} decodes record batches, not binary values")

    def prepare(self, batch: pa.RecordBatch) -> Records:
        """Checks and renders a batch's columns; :meth:`Records.record` then decodes each
        record."""
        return Records(batch)

    def finish(self, sink: EventSink) -> None:
        """End of input: nothing is buffered."""
