"""Value rendering shared by the Python decoders: the text of binary values.

The same rules as ``rust/text.rs`` (written down in docs/formats/datahub-tuple.md,
"Rendering values as text"), for every format that carries binary values: ``datahub-tuple``
(Arrow columns) now, Datastream Avro (issue 4) next. Keep the two in step: the parity tests
compare their output byte for byte.
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
