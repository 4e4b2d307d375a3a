"""Typed mode in the Python engine: the text row images a format produces, converted into
structs of the table's columns, by the rules of ``rust/typed/`` (docs/typed.md).

A format passes its rows through :meth:`Typed.convert` with the message's hints:
``Hints(epoch=..., hex=..., columns={name: hint})``, where a column hint is ``"ms"``,
``"us"``, ``"ns"`` (an integer is epoch time in that unit), ``"days"``, ``"hex"``,
``("decimal", scale)`` (base64 of a Connect decimal's unscaled bytes), ``"variable"``
(Debezium's ``VariableScaleDecimal``), ``"time-ms"``, ``"time-us"``, ``"time-ns"`` (an
integer is a time of day in that unit) or ``"base64-text"`` (base64 of UTF-8 text).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from decimal import Decimal
from typing import NamedTuple

import pyarrow as pa

from .._typed import multi_event_schema, typed_event_schema
from .._values import base64_text, days_from_civil, time_text, unscaled_decimal_text

_BEFORE = 13
_AFTER = 14
_SOURCE = (3, 4, 5)  # source_db, source_schema, source_table
MICROS_PER_DAY = 86_400_000_000


class Unconvertible(Exception):
    """A value that does not convert: the message becomes one error row.

    Attributes:
        table: multi-table mode: the table whose value it is (the error row's ``table``
            names it, docs/typed.md); ``None`` with one schema.
    """

    def __init__(self, message: str, table: str | None = None) -> None:
        super().__init__(message)
        self.table = table


class Hints(NamedTuple):
    """What a format knows about one message's values (``rust/typed/mod.rs``'s ``Hints``)."""

    epoch: str | None = None
    hex: bool = False
    columns: dict | None = None


NO_HINTS = Hints()


def type_name(data_type: pa.DataType) -> str:
    """The Spark SQL name of a supported type, as error messages spell it."""
    if pa.types.is_decimal(data_type):
        return f"decimal({data_type.precision},{data_type.scale})"
    if pa.types.is_timestamp(data_type):
        return "timestamp" if data_type.tz else "timestamp_ntz"
    return {
        pa.bool_(): "boolean",
        pa.int8(): "tinyint",
        pa.int16(): "smallint",
        pa.int32(): "int",
        pa.int64(): "bigint",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.string(): "string",
        pa.binary(): "binary",
        pa.date32(): "date",
    }[data_type]


def conversion_error(prefix: str, image: str, column: str, text: str, data_type) -> str:
    """``after.price: cannot convert "abc" to decimal(10,2)`` (JSON-quoted, cut at 64)."""
    shown = text[:64]
    more = "…" if len(shown) < len(text) else ""
    quoted = json.dumps(shown, ensure_ascii=False)
    return f"{prefix}{image}.{column}: cannot convert {quoted}{more} to {type_name(data_type)}"


# --- conversions from text: each returns None when the text does not convert -------------

_I64_TEXT = re.compile(r"-?[0-9]+\Z")
_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,6}))?\Z")
_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "infinity": float("inf")}
_RANGES = {
    pa.int8(): (-(2**7), 2**7 - 1),
    pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
}


def parse_i64(text: str) -> int | None:
    """Integer text ``-?[0-9]+`` within i64; ``None`` otherwise."""
    # Leading zeros are allowed (as Rust's parse allows them); the length check keeps
    # int() away from huge texts.
    if not _I64_TEXT.match(text) or (len(text) > 20 and len(text.lstrip("-").lstrip("0")) > 19):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def parse_int(text: str) -> int | None:
    """:func:`parse_i64`, a leading ``+`` allowed too (as Rust's parse allows it)."""
    if text[:1] == "+":
        return None if text[1:2] == "-" else parse_i64(text[1:])
    return parse_i64(text)


def parse_bool(text: str) -> bool | None:
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    return None


def _split_number(text: str):
    m = _NUMBER.match(text)
    if not m:
        return None
    sign, int_part, frac, exp = m.groups()
    frac = frac or ""
    if not int_part and not frac:
        return None
    return sign == "-", int_part, frac, int(exp) if exp else 0


def parse_float(text: str) -> float | None:
    body = text[1:] if text[:1] in "+-" else text
    special = _SPECIAL.get(body.lower()) if body else None
    if special is not None:
        return -special if text.startswith("-") else special
    if _split_number(text) is None:
        return None
    return float(text)


def parse_decimal(text: str, precision: int, scale: int) -> int | None:
    """Decimal text as the unscaled value at ``scale``, exactly (see rust/typed/parse.rs)."""
    parts = _split_number(text)
    if parts is None:
        return None
    negative, int_part, frac, exponent = parts
    shift = scale - len(frac) + exponent
    digits = int_part + frac
    if shift >= 0:
        if not digits.strip("0"):
            return 0
        digits += "0" * shift
    else:
        keep = max(len(digits) + shift, 0)
        if digits[keep:].strip("0"):
            return None
        digits = digits[:keep]
    significant = digits.lstrip("0")
    if len(significant) > precision:
        return None
    value = int(significant) if significant else 0
    return -value if negative else value


def parse_base64(text: str) -> bytes | None:
    if len(text) % 4:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Canonical only, as base64-simd decodes: unused bits of the last symbol are zero.
    return raw if base64_text(raw) == text else None


def parse_hex(text: str) -> bytes | None:
    if len(text) % 2 or not re.fullmatch(r"[0-9A-Fa-f]*", text):
        return None
    return bytes.fromhex(text)


def _decimal_bytes(text: str, precision: int, scale: int, source_scale: int) -> int | None:
    raw = parse_base64(text)
    if raw is None:
        return parse_decimal(text, precision, scale)
    return _decimal_from_bytes(raw, source_scale, precision, scale)


def _variable_scale(text: str) -> tuple[int, bytes] | None:
    """``{"scale":N,"value":"base64"}``, either order (rust/typed/parse.rs)."""
    if not (text.startswith("{") and text.endswith("}")):
        return None
    first, comma, second = text[1:-1].partition(",")
    if not comma:
        return None
    scale = value = None
    for member in (first, second):
        key, colon, v = member.partition(":")
        if not colon:
            return None
        if key == '"scale"' and scale is None:
            scale = parse_int(v)
            if scale is None or not -(2**31) <= scale < 2**31:
                return None
        elif key == '"value"' and value is None:
            if len(v) < 2 or not (v.startswith('"') and v.endswith('"')):
                return None
            value = parse_base64(v[1:-1])
            if value is None:
                return None
        else:
            return None
    if scale is None or value is None:
        return None
    return scale, value


def _decimal_from_bytes(raw: bytes, source_scale: int, precision: int, scale: int) -> int | None:
    if not 1 <= len(raw) <= 16:
        return None
    unscaled = int.from_bytes(raw, "big", signed=True)
    # 10**38 is the largest power of ten an i128 holds (rust/typed/parse.rs ``rescale``).
    if scale >= source_scale:
        if scale - source_scale > 38:
            return None
        value = unscaled * 10 ** (scale - source_scale)
        if not -(2**127) <= value < 2**127:
            return None
    else:
        if source_scale - scale > 38:
            return 0 if unscaled == 0 else None
        factor = 10 ** (source_scale - scale)
        if unscaled % factor:
            return None
        value = unscaled // factor
    return value if abs(value) < 10**precision else None


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 28
    return 30 if month in (4, 6, 9, 11) else 31


_ISO = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,9}))?)?)?"
    r"(?: ?(Z|[+-][0-9]{2}(?::?[0-9]{2})?))?\Z"
)


def parse_iso(text: str) -> int | None:
    """ISO-8601 text as microseconds since the epoch (see rust/typed/parse.rs ``parse_iso``)."""
    moment = _iso(text)
    return None if moment is None else moment[0]


def _iso(text: str) -> tuple[int, bool] | None:
    """ISO-8601 text as microseconds since the epoch, and whether it has an offset (or
    ``Z``): without one it is a wall clock."""
    m = _ISO.match(text)
    if not m:
        return None
    year, month, day, hour, minute, second, fraction, offset = m.groups()
    year, month, day = int(year), int(month), int(day)
    if not 1 <= month <= 12 or not 1 <= day <= _days_in_month(year, month):
        return None
    micros = days_from_civil(year, month, day) * MICROS_PER_DAY
    if hour is not None:
        h, mi, s = int(hour), int(minute), int(second or 0)
        if h > 23 or mi > 59 or s > 59:
            return None
        frac = int((fraction or "").ljust(9, "0") or 0) // 1000
        micros += ((h * 60 + mi) * 60 + s) * 1_000_000 + frac
    if offset and offset != "Z":
        digits = offset[1:].replace(":", "")
        if len(digits) not in (2, 4) or (len(offset) == 6 and offset[3] != ":"):
            return None
        hours, minutes = int(digits[:2]), int(digits[2:] or 0)
        if hours > 23 or minutes > 59:
            return None
        total = hours * 60 + minutes
        micros -= (-total if offset[0] == "-" else total) * 60_000_000
    return micros, bool(offset)


# The source's time zone (rust/typed/parse.rs, ``from_wall``/``to_wall``): within
# 0001-01-02 and the end of 9999-12-29, what ``datetime`` and jiff both hold a day around.
_ZONE_RANGE = (-62_135_510_400_000_000, 253_402_127_999_999_999)
_UTC = dt.timezone.utc
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)


def _in_zone_range(micros: int) -> bool:
    return _ZONE_RANGE[0] <= micros <= _ZONE_RANGE[1]


def from_wall(zone, wall: int) -> int | None:
    """A wall clock (microseconds read as UTC) as the instant it is in ``zone``: fold 0, so
    a repeated wall time is the earlier instant and a skipped one moves forward by the gap
    (java.time's and jiff's "compatible" rule)."""
    if not _in_zone_range(wall):
        return None
    try:
        local = (_EPOCH_NAIVE + wall * _MICRO).replace(tzinfo=zone)
        instant = (local.astimezone(_UTC) - _EPOCH_UTC) // _MICRO
    except (OverflowError, ValueError):
        return None
    return instant if _in_zone_range(instant) else None


def to_wall(zone, instant: int) -> int | None:
    """An instant as its wall clock in ``zone`` (microseconds read as UTC)."""
    if not _in_zone_range(instant):
        return None
    try:
        local = (_EPOCH_UTC + instant * _MICRO).astimezone(zone)
    except (OverflowError, ValueError):
        return None
    wall = (local.replace(tzinfo=None) - _EPOCH_NAIVE) // _MICRO
    return wall if _in_zone_range(wall) else None


def _epoch_micros(value: int, unit: str) -> int | None:
    if unit == "ms":
        value *= 1000
        return value if -(2**63) <= value < 2**63 else None
    if unit == "us":
        return value
    return value // 1000


def _moment(text: str, hint, hints: Hints) -> tuple[int, bool] | None:
    """A value's microseconds, and whether they are a wall clock (offset-less text, or a
    Debezium timestamp column's epoch number) rather than an instant."""
    value = parse_int(text)
    if value is not None:
        if hint in ("ms", "us", "ns"):
            micros = _epoch_micros(value, hint)
            return None if micros is None else (micros, True)
        micros = _epoch_micros(value, hints.epoch or "ms")
        return None if micros is None else (micros, False)
    moment = _iso(text)
    return None if moment is None else (moment[0], not moment[1])


def parse_timestamp(text: str, hint, hints: Hints, zone=None, ntz: bool = False) -> int | None:
    moment = _moment(text, hint, hints)
    if moment is None:
        return None
    micros, wall = moment
    if zone is not None and wall and not ntz:
        return from_wall(zone, micros)
    if zone is not None and not wall and ntz:
        return to_wall(zone, micros)
    return micros


def parse_date(text: str, hint, hints: Hints, zone=None) -> int | None:
    value = parse_int(text)
    if value is not None:
        if hint in ("ms", "us", "ns"):
            unit = hint
        elif hint == "days":
            unit = None
        else:
            unit = hints.epoch
        if unit is None:
            micros = value * MICROS_PER_DAY
            if not -(2**63) <= micros < 2**63:
                return None
        else:
            micros = _epoch_micros(value, unit)
            if micros is None:
                return None
            # The message's epoch numbers are instants; a column's are wall clocks.
            if zone is not None and hint not in ("ms", "us", "ns"):
                micros = to_wall(zone, micros)
                if micros is None:
                    return None
    else:
        moment = _iso(text)
        if moment is None:
            return None
        micros, offset = moment
        if zone is not None and offset:
            micros = to_wall(zone, micros)
            if micros is None:
                return None
    if micros % MICROS_PER_DAY:
        return None
    days = micros // MICROS_PER_DAY
    return days if -(2**31) <= days < 2**31 else None


def _converter(data_type: pa.DataType, zone=None):
    """The function turning (text, hint, hints) into the value pyarrow builds from
    (``zone``: the source's time zone, a ``zoneinfo.ZoneInfo``)."""
    if data_type == pa.bool_():
        return lambda text, hint, hints: parse_bool(text)
    if data_type in _RANGES:
        low, high = _RANGES[data_type]

        def integer(text, hint, hints):
            value = parse_int(text)
            return value if value is not None and low <= value <= high else None

        return integer
    if data_type in (pa.float32(), pa.float64()):
        return lambda text, hint, hints: parse_float(text)
    if pa.types.is_decimal(data_type):
        precision, scale = data_type.precision, data_type.scale

        def decimal(text, hint, hints):
            if isinstance(hint, tuple) and hint[0] == "decimal":
                unscaled = _decimal_bytes(text, precision, scale, hint[1])
            elif hint == "variable":
                parts = _variable_scale(text)
                unscaled = (
                    None
                    if parts is None
                    else _decimal_from_bytes(parts[1], parts[0], precision, scale)
                )
            else:
                unscaled = parse_decimal(text, precision, scale)
            if unscaled is None:
                return None
            sign = 1 if unscaled < 0 else 0
            return Decimal((sign, tuple(int(d) for d in str(abs(unscaled))), -scale))

        return decimal
    if data_type == pa.date32():
        return lambda text, hint, hints: parse_date(text, hint, hints, zone)
    if pa.types.is_timestamp(data_type):
        ntz = data_type.tz is None
        return lambda text, hint, hints: parse_timestamp(text, hint, hints, zone, ntz)
    if data_type == pa.binary():

        def binary(text, hint, hints):
            hex_text = hint == "hex" if hint is not None else hints.hex
            return parse_hex(text) if hex_text else parse_base64(text)

        return binary
    return _string


_TIME_HINTS = {"time-ms": (1, 3), "time-us": (1, 6), "time-ns": (1000, 6)}


def _string(text: str, hint, hints: Hints) -> str | None:
    """A string column's value: the text, or under a column hint its converted text
    (``rust/typed/parse.rs``, ``hinted_text``); ``None`` when it does not convert."""
    if hint is None:
        return text
    if hint == "base64-text":
        raw = parse_base64(text)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(hint, tuple) and hint[0] == "decimal":
        raw = parse_base64(text)
        if hint[1] < 0 or not raw:
            return text
        return unscaled_decimal_text(int.from_bytes(raw, "big", signed=True), hint[1])
    if hint == "variable":
        parts = _variable_scale(text)
        if parts is None or parts[0] < 0 or not parts[1]:
            return text
        return unscaled_decimal_text(int.from_bytes(parts[1], "big", signed=True), parts[0])
    if hint in _TIME_HINTS:
        value = parse_int(text)
        if value is None:
            return text
        divisor, digits = _TIME_HINTS[hint]
        return time_text(value // divisor, digits)
    return text


class _Table:
    __slots__ = ("name", "schema", "fields", "prefix", "multi")

    def __init__(self, name: str, schema: pa.Schema, multi: bool, zone=None) -> None:
        self.name = name
        self.schema = schema
        self.fields = [(f.name, f.type, _converter(f.type, zone)) for f in schema]
        self.prefix = f"{name}: " if multi else ""
        self.multi = multi

    def convert(self, image, which: str, hints: Hints) -> dict | None:
        if image is None:
            return None
        values: dict = {}
        for key, text in image:
            values.setdefault(key, text)
        column_hints = hints.columns or {}
        out = {}
        for name, data_type, convert in self.fields:
            text = values.get(name)
            if text is None:
                out[name] = None
                continue
            value = convert(text, column_hints.get(name), hints)
            if value is None:
                raise Unconvertible(
                    conversion_error(self.prefix, which, name, text, data_type),
                    self.name if self.multi else None,
                )
            out[name] = value
        return out

    def absent(self, image) -> list[str] | None:
        """``after_absent``: the fields ``image`` has no entry for (a null value is an
        entry), in schema order; ``None`` without an image."""
        if image is None:
            return None
        keys = {key for key, _ in image}
        return [name for name, _, _ in self.fields if name not in keys]


class Typed:
    """Converts event rows' text images to typed structs.

    Args:
        schema: one checked pyarrow schema for every row, or
        tables: (name, checked schema) pairs; rows are routed by their source names
            (``db.schema.table``, ``db.table``, ``schema.table``, ``table``: the first named).
        zone: the source's time zone (a ``zoneinfo.ZoneInfo``), or ``None`` for UTC.
    """

    def __init__(self, schema: pa.Schema | None = None, tables=None, zone=None) -> None:
        self.multi = tables is not None
        if self.multi:
            self._tables = [_Table(name, s, True, zone) for name, s in tables]
            self._index = {name: i for i, (name, _) in enumerate(tables)}
            self.schema = multi_event_schema(list(tables))
        else:
            self._tables = [_Table("", schema, False, zone)]
            self.schema = typed_event_schema(schema)
        self.width = len(self.schema)

    def _route(self, row: tuple) -> int | None:
        if not self.multi:
            return 0
        db, schema, table = (row[i] for i in _SOURCE)
        if table is None:
            return None
        candidates = []
        if db is not None and schema is not None:
            candidates.append(f"{db}.{schema}.{table}")
        if db is not None:
            candidates.append(f"{db}.{table}")
        if schema is not None:
            candidates.append(f"{schema}.{table}")
        candidates.append(table)
        for name in candidates:
            if name in self._index:
                return self._index[name]
        return None

    def convert(self, rows: list[tuple], hints=None) -> list[tuple]:
        """The rows with typed images.

        Args:
            rows: event rows (tuples in the event schema's order).
            hints: a :class:`Hints` for every row, a list of one per row, or ``None``.

        Raises:
            Unconvertible: the first value that does not convert, named.
        """
        out = []
        for n, row in enumerate(rows):
            row_hints = hints[n] if isinstance(hints, list) else hints
            row_hints = row_hints or NO_HINTS
            t = self._route(row)
            if not self.multi:
                table = self._tables[0]
                before = table.convert(row[_BEFORE], "before", row_hints)
                after = table.convert(row[_AFTER], "after", row_hints)
                absent = table.absent(row[_AFTER])
                out.append((*row[:_BEFORE], before, after, *row[_AFTER + 1 :], absent))
                continue
            # table, before_<i>/after_<i> per table, after_absent
            extra: list = [None] * (2 + 2 * len(self._tables))
            if t is not None:
                table = self._tables[t]
                extra[0] = table.name
                extra[1 + 2 * t] = table.convert(row[_BEFORE], "before", row_hints)
                extra[2 + 2 * t] = table.convert(row[_AFTER], "after", row_hints)
                extra[-1] = table.absent(row[_AFTER])
                row = (*row[:_BEFORE], None, None, *row[_AFTER + 1 :])
            out.append((*row, *extra))
        return out

    def pad(self, row: tuple) -> tuple:
        """An error or tombstone row widened to the typed schema (its last columns null)."""
        return row + (None,) * (self.width - len(row))
