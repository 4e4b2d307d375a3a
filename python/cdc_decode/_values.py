"""How values are written as text in event columns: one renderer per kind of value, shared
by every format of the Python engine and by the generator that predicts its output.

The same rules as the Rust core's ``rust/text.rs`` (written down in docs/formats/, e.g.
datahub-tuple.md, "Rendering values as text", and datastream-avro.md): floats as the
shortest digits that read back, decimals with their scale, dates, times, timestamps and
offsets in ISO-8601, binary values as base64, JSON strings escaped as serde_json escapes
them. The two engines stay independent twins: the parity tests compare their output byte
for byte, so keep the two in step.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from functools import lru_cache

json_string = json.encoder.encode_basestring
"""A JSON string, escaped as serde_json's ``to_string`` escapes it (docs/formats/datahub-blob.md,
"Compact JSON")."""

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")
_MAX_F32_BITS = 0x7F7FFFFF
# Exact arithmetic on the decimal expansion of any float32 (at most ~110 digits).
_EXACT = Context(prec=1000)
_FLOOR = [Context(prec=p, rounding=ROUND_FLOOR) for p in range(1, 10)]
_CEILING = [Context(prec=p, rounding=ROUND_CEILING) for p in range(1, 10)]


def f64_text(value: float) -> str:
    """Python's ``repr(float)``: the shortest digits that read back to the same double."""
    return repr(value)


def _f32_of(bits: int) -> float:
    return _F32.unpack(_U32.pack(bits))[0]


def f32_text(value: float) -> str:
    """The shortest digits that read back (nearest, ties to even) to the same **float32**,
    the closest to the value when several are that short and the one ending in an even
    digit when two are as close (``312985.12`` for ``312985.125``: Ryu's rule, as Python's
    ``repr`` for doubles), in Python's layout (``0.1`` for ``float32(0.1)``, not
    ``0.10000000149011612``).

    Args:
        value: a float32 value, as the Python float pyarrow gives for it.
    """
    if value == 0:  # before the cache, which cannot tell 0.0 from -0.0
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _f32_text(value)


@lru_cache(maxsize=1 << 16)
def _f32_text(value: float) -> str:
    if value != value:
        return "nan"
    if value in (math.inf, -math.inf):
        return "inf" if value > 0 else "-inf"
    (bits,) = _U32.unpack(_F32.pack(value))
    sign = "-" if bits >> 31 else ""
    magnitude = bits & 0x7FFFFFFF
    x = abs(value)
    # The values that read back to x: between the midpoints to its neighbours (exact in a
    # double: a float32 has 24 bits), the midpoints themselves when its mantissa is even.
    below = _f32_of(magnitude - 1)
    above = _f32_of(magnitude + 1) if magnitude < _MAX_F32_BITS else 2.0**128
    low, high = Decimal((below + x) / 2), Decimal((x + above) / 2)
    inclusive = magnitude % 2 == 0
    exact = Decimal(x)

    def reads_back(candidate: Decimal) -> bool:
        if inclusive:
            return low <= candidate <= high
        return low < candidate < high

    for digits in range(1, 10):
        down, up = _FLOOR[digits - 1].plus(exact), _CEILING[digits - 1].plus(exact)
        fits = [c for c in (down, up) if reads_back(c)]
        if len(fits) == 2:  # two shortest candidates: the closer, the even one on a tie
            below, over = _EXACT.subtract(exact, down), _EXACT.subtract(up, exact)
            if below == over:
                fits = [down if down.as_tuple().digits[-1] % 2 == 0 else up]
            else:
                fits = [down if below < over else up]
        if fits:
            return sign + _layout(fits[0])
    return sign + _layout(exact)  # not reached: 9 digits always read back


def _layout(number: Decimal) -> str:
    """Python's ``float.__repr__`` layout of a positive decimal's shortest digits."""
    _, digit_tuple, exponent = number.normalize(_EXACT).as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + exponent  # digits before the decimal point
    if point <= -4 or point > 16:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        power = point - 1
        return f"{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits)) + ".0"
    return digits[:point] + "." + digits[point:]


def decimal_text(value: Decimal) -> str:
    """Plain decimal text with the value's scale (``12.50``, ``-0.05``, ``1200``, ``0``)."""
    return format(value, "f")


def unscaled_decimal_text(unscaled: int, scale: int) -> str:
    """The decimal ``unscaled * 10**-scale`` as :func:`decimal_text` writes it (``scale``
    fraction digits: ``-0.05`` for ``(-5, 2)``)."""
    return format(Decimal(f"{unscaled}E-{scale}"), "f")


def float_json(text: str) -> str:
    """A float's text (:func:`f32_text`, :func:`f64_text`) as a JSON value: a number, or a
    string for ``nan``, ``inf`` and ``-inf``, which JSON has no number for."""
    return f'"{text}"' if text in ("nan", "inf", "-inf") else text


def base64_text(value: bytes) -> str:
    """Standard padded base64."""
    return base64.b64encode(value).decode("ascii")


def date_text(days: int) -> str:
    """The proleptic Gregorian date of ``days`` since 1970-01-01 (``2024-05-01``); years
    outside 0000-9999 get a sign and at least four digits (``-0001-12-31``)."""
    # Howard Hinnant's civil_from_days; // is floor division, as his algorithm needs.
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    if 0 <= year <= 9999:
        return f"{year:04d}-{month:02d}-{day:02d}"
    return f"{'-' if year < 0 else '+'}{abs(year):04d}-{month:02d}-{day:02d}"


def days_from_civil(year: int, month: int, day: int) -> int:
    """The days since 1970-01-01 of a proleptic Gregorian date (:func:`date_text` backwards)."""
    y = year - 1 if month <= 2 else year
    era = y // 400
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


UNITS = {"s": (1, 0), "ms": (1_000, 3), "us": (1_000_000, 6), "ns": (1_000_000_000, 9)}
"""Arrow time unit -> (values per second, fraction digits)."""


def timestamp_text(value: int, unit: str, zoned: bool) -> str:
    """ISO-8601 with the unit's fraction digits (``2024-05-01T10:00:00.123456``), then ``Z``
    for a column with a zone (the value is a UTC instant)."""
    per_second, digits = UNITS[unit]
    seconds, fraction = divmod(value, per_second)
    days, second_of_day = divmod(seconds, 86_400)
    hours, rest = divmod(second_of_day, 3600)
    text = f"{date_text(days)}T{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    if digits:
        text += f".{fraction:0{digits}d}"
    return text + "Z" if zoned else text


INFINITY_MICROS = 9_223_372_036_825_200_000
"""PostgreSQL's ``infinity`` timestamp as Datastream writes it (microseconds)."""
NEG_INFINITY_MICROS = -9_223_372_036_832_400_000
"""PostgreSQL's ``-infinity`` timestamp as Datastream writes it (microseconds)."""


def infinity_text(value: int) -> str | None:
    """``infinity`` or ``-infinity`` for PostgreSQL's infinite timestamps, else ``None``."""
    if value == INFINITY_MICROS:
        return "infinity"
    if value == NEG_INFINITY_MICROS:
        return "-infinity"
    return None


def time_text(value: int, digits: int) -> str:
    """A time of day (or a duration) in milliseconds (``digits`` 3) or microseconds (6):
    ``HH:MM:SS.fff[fff]``, hours past 23 kept, a sign before a negative one."""
    per_second = 1000 if digits == 3 else 1_000_000
    sign = "-" if value < 0 else ""
    seconds, fraction = divmod(abs(value), per_second)
    return (f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            f".{fraction:0{digits}d}")  # fmt: skip


def offset_text(ms: int) -> str:
    """A UTC offset in milliseconds: ``+HH:MM``, then ``:SS`` and ``.fff`` when not zero."""
    sign = "-" if ms < 0 else "+"
    v = abs(ms)
    seconds = v // 1000
    out = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}"
    if v % 60_000:
        out += f":{seconds % 60:02d}"
        if v % 1000:
            out += f".{v % 1000:03d}"
    return out


def datetime_text(days: int, micros: int) -> str:
    """A local date and time of day (microseconds): ``YYYY-MM-DDTHH:MM:SS.ffffff``."""
    return f"{date_text(days)}T{time_text(micros, 6)}"


def offset_timestamp_text(local_micros: int, offset_ms: int) -> str:
    """A local timestamp (microseconds) and its UTC offset: ``...T10:00:00.000000+02:00``."""
    return timestamp_text(local_micros, "us", False) + offset_text(offset_ms)


def interval_text(months: int, hours: int, micros: int) -> str:
    """An interval of months, hours and microseconds in ISO-8601: ``P14MT25H-1.500000S``."""
    sign = "-" if micros < 0 else ""
    seconds, fraction = divmod(abs(micros), 1_000_000)
    return f"P{months}MT{hours}H{sign}{seconds}.{fraction:06d}S"
