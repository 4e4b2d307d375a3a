"""The strict reading of JSON shared by the JSON formats (``datahub-blob``, ``tdsql-json``,
``debezium-json``, ``datastream-json``), and the generic field checks.

docs/formats/datahub-blob.md, "JSON accepted" and "Field types", is the contract: strict
UTF-8 without a byte order mark, RFC 8259 grammar, no lone surrogate escapes, at most
``Limits.max_json_depth`` levels of nesting and ``Limits.max_items`` members or items in one
object or array, the first of duplicate keys wins, number tokens kept as
the text that was sent (:class:`Number`), the top value an object (each format checks).
Values render to generic text (:func:`render`) as that page's "Row images" says.
:class:`JsonFormat` is the decoder the four formats derive from: one message, one row or
one error row. The Rust core's counterpart is ``rust/json/``.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

from .._limits import DEFAULT, Limits
from .._values import days_from_civil, json_string, timestamp_text
from ._events import EventSink, Malformed
from ._typed import Hints, Unconvertible, parse_i64

_SIGN = 1 << 63

_INTEGER = re.compile(r"-?[0-9]+\Z")
# A JSON string (valid or not, for the nesting pre-check only) and the brackets left after.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# In a valid JSON text every backslash starts an escape: left to right, these are its escapes.
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_NOT_BRACKET_OR_COMMA = re.compile(r"[^\[\]{},]+")
_DEPTH_STEP = str.maketrans({"[": "\x01", "{": "\x01", "]": "\x02", "}": "\x02"})


class Number(str):
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
    parse_int=Number,
    parse_float=Number,
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


def _widest(text: str, max_items: int) -> str | None:
    """``"array"`` or ``"object"`` when an array or object in ``text`` (a JSON text; commas
    inside strings do not count) has more than ``max_items`` items or members, else None."""
    stack: list[list] = []  # [bracket, commas] of each open container
    for c in _NOT_BRACKET_OR_COMMA.sub("", _STRING.sub("", text)):
        if c == ",":
            if stack:
                stack[-1][1] += 1
                if stack[-1][1] >= max_items:
                    return "object" if stack[-1][0] == "{" else "array"
        elif c in "[{":
            stack.append([c, 0])
        elif stack:
            stack.pop()
    return None


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


def parse(raw: bytes, limits: Limits = DEFAULT) -> object:
    """One message as a JSON value: objects as dicts (first duplicate key wins), number
    tokens as :class:`Number` text.

    Raises:
        Malformed: for anything docs/formats/datahub-blob.md rejects, or a text over
            ``limits.max_json_depth`` or ``limits.max_items`` (checked before parsing).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(f"invalid UTF-8 at byte {exc.start}") from None
    # Cheap bounds first: the nesting cannot exceed the number of opening brackets, nor
    # the items of one container the number of commas plus one.
    max_depth = limits.max_json_depth
    if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
        what = f"JSON nested more than {max_depth} levels deep"
        raise Malformed(limits.over("max_json_depth", what))
    max_items = limits.max_items
    if text.count(",") >= max_items:
        widest = _widest(text, max_items)
        if widest is not None:
            noun = "members" if widest == "object" else "items"
            what = f"an {widest} of more than {max_items:,} {noun}"
            raise Malformed(limits.over("max_items", what))
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        at = len(text[: exc.pos].encode("utf-8"))
        raise Malformed(f"invalid JSON: {exc.msg} at byte {at}") from None
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"invalid JSON: {exc}") from None
    # A lone surrogate can only come from a \u escape.
    if "\\u" in text and _has_lone_surrogate(text):
        raise Malformed("invalid JSON: a \\u escape is a lone surrogate")
    return value


def render(value: object) -> str | None:
    """A JSON value as generic text: a string's text, a number's token as sent,
    ``true``/``false``, ``None`` for null, compact JSON for an object or array."""
    if type(value) is str or type(value) is Number:
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _compact(value)


def _compact(value: object) -> str:
    # Recursion is bounded: parse() rejects anything deeper than Limits.max_json_depth.
    if type(value) is str:
        return json_string(value)
    if type(value) is Number:
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, dict):
        inner = ",".join(f"{json_string(k)}:{_compact(v)}" for k, v in value.items())
        return "{" + inner + "}"
    return "[" + ",".join(_compact(v) for v in value) + "]"


def kind_of(value: object) -> str:
    if type(value) is Number:
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


def object_field(value: object, where: str) -> dict | None:
    """An object field, or ``None`` for null/absent."""
    if value is None or isinstance(value, dict):
        return value
    raise Malformed(f"{where}: expected an object, got {kind_of(value)}")


def string_field(value: object, where: str) -> str | None:
    if value is None or type(value) is str:
        return value
    raise Malformed(f"{where}: expected a string, got {kind_of(value)}")


def integer_field(value: object, where: str) -> int | None:
    """An integer sent as a number token or a string: ``-?[0-9]+`` within i64."""
    if value is None:
        return None
    if type(value) is Number or type(value) is str:
        number = parse_i64(value)
        if number is not None:
            return number
    raise Malformed(f"{where}: expected a 64-bit integer, got {kind_of(value)}")


def unsigned_field(value: object, where: str) -> int | None:
    """A non-negative integer (a log position or an index), or ``None``."""
    number = integer_field(value, where)
    if number is not None and number < 0:
        raise Malformed(f"{where}: expected a non-negative integer, got {kind_of(value)}")
    return number


def string_list(value: object, where: str) -> list[str] | None:
    """An array of strings (a table's primary key); ``None`` when null, absent or empty."""
    if value is not None and not isinstance(value, list):
        raise Malformed(f"{where}: expected an array, got {kind_of(value)}")
    if not value:
        return None
    items = [string_field(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if None in items:
        raise Malformed(f"{where}: expected strings, got null")
    return items


def add_unknown(metadata: dict[str, str], obj: dict | None, known: frozenset[str]) -> None:
    """Adds the fields of ``obj`` not in ``known`` (those without a column) to ``metadata``,
    rendered, nulls left out; a key already there keeps its value."""
    if obj:
        for key, value in obj.items():
            if key not in known and key not in metadata and value is not None:
                metadata[key] = render(value)


# ---------------------------------------------------------------------------------------
# The decoder of a JSON format


class JsonFormat:
    """What the JSON formats share: one JSON text per message, parsed by :func:`parse`,
    gives one row from ``_event`` (``None`` for a tombstone), or one error row. No state
    between messages."""

    name: str
    pending = 0

    def __init__(self, *, limits: Limits = DEFAULT) -> None:
        self._limits = limits

    def decode(self, raw: bytes, key: str | None, ordinal: int, sink: EventSink) -> None:
        """Decodes one message into ``sink``.

        Args:
            raw: the message bytes (UTF-8 JSON).
            key: unused (no multi-part messages in the JSON formats).
            ordinal: the message's input ordinal.
            sink: where rows go.
        """
        schema = None
        try:
            message = parse(raw, self._limits)
            row = self._event(message)
            if row is not None:
                rows = sink.convert([row], self._hints(message) if sink.typed else None)
                if sink.schema_pass:
                    schema = self._schema(message, row, key)
        except (Malformed, Unconvertible) as exc:
            sink.error(ordinal, raw, str(exc), getattr(exc, "table", None))
            return
        if row is None:
            sink.tombstone(ordinal)
        else:
            sink.events(rows, ordinal, schemas=schema)

    def finish(self, sink: EventSink) -> None:
        """End of input: nothing is buffered."""

    def _event(self, message: object) -> tuple | None:
        raise NotImplementedError

    def _hints(self, message: object) -> Hints | None:
        """Typed mode's hints for a message ``_event`` accepted (docs/typed.md)."""
        return None

    def _schema(self, message: object, row: tuple, key: str | None) -> tuple | None:
        """The schema pass: the wire schema of the row ``_event`` made of a message
        (``._schemas``), ``None`` for a row without one."""
        return None


# ---------------------------------------------------------------------------------------
# MongoDB Extended JSON (v1 strict, v2 relaxed and canonical), as the Debezium MongoDB
# connector writes documents into strings; rust/json/extended.rs.

_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
_NUMBERS = frozenset(("$numberInt", "$numberLong", "$numberDouble", "$numberDecimal"))
_ISO = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(?:(Z)|([+-])([0-9]{2}):?([0-9]{2}))\Z"
)
_DAYS_IN = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _token_integer(value: object) -> int | None:
    """An integer number token (``-?[0-9]+`` within i64)."""
    if type(value) is Number and _INTEGER.match(value):
        number = int(value)
        if -_SIGN <= number < _SIGN:
            return number
    return None


def iso_millis(text: str) -> int | None:
    """``YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM|±HHMM)`` as epoch milliseconds (the fraction
    truncated), for a real date and time; ``None`` otherwise."""
    match = _ISO.match(text)
    if match is None or (match.group(8) is None and match.group(9) is None):
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not 1 <= month <= 12:
        return None
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days_in = 29 if month == 2 and leap else _DAYS_IN[month - 1]
    if not 1 <= day <= days_in or hour > 23 or minute > 59 or second > 59:
        return None
    offset = 0
    if match.group(9) is not None:
        h, m = int(match.group(10)), int(match.group(11))
        if h > 23 or m > 59:
            return None
        offset = h * 60 + m if match.group(9) == "+" else -(h * 60 + m)
    millis = int((match.group(7) or "")[:3].ljust(3, "0"))
    seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
    return (seconds - offset * 60) * 1000 + millis


def _date(value: object) -> str | None:
    if type(value) is Number:
        ms = _token_integer(value)
    elif type(value) is str:
        ms = iso_millis(value)
        if ms is None:
            return value
    elif isinstance(value, dict) and len(value) == 1 and type(value.get("$numberLong")) is str:
        text = value["$numberLong"]
        ms = None
        if _INTEGER.match(text) and -_SIGN <= int(text) < _SIGN:
            ms = int(text)
    else:
        return None
    return None if ms is None else timestamp_text(ms, "ms", True)


def wrapped(value: object) -> tuple[str, bool] | None:
    """A type wrapper's text and whether it is a JSON number; ``None`` for anything else."""
    if not isinstance(value, dict) or not 1 <= len(value) <= 2:
        return None
    (key, inner), *rest = value.items()
    if not rest:
        if key == "$oid":
            return (inner, False) if type(inner) is str else None
        if key in _NUMBERS:
            return (inner, bool(_JSON_NUMBER.match(inner))) if type(inner) is str else None
        if key == "$date":
            text = _date(inner)
            return None if text is None else (text, False)
        if key == "$binary":
            if isinstance(inner, dict) and len(inner) == 2:
                data, kind = inner.get("base64"), inner.get("subType")
                if type(data) is str and type(kind) is str:
                    return data, False
            return None
        if key == "$timestamp":
            if isinstance(inner, dict) and len(inner) == 2 and "t" in inner and "i" in inner:
                t, i = _token_integer(inner["t"]), _token_integer(inner["i"])
                if t is not None and i is not None and t >= 0 and i >= 0:
                    return f"{t}:{i}", False
            return None
        return None
    ((other, second),) = rest
    if {key, other} == {"$binary", "$type"}:
        data, kind = (inner, second) if key == "$binary" else (second, inner)
        if type(data) is str and type(kind) is str:
            return data, False
    return None


def render_extended(value: object) -> str | None:
    """A value's text: a wrapper's value, a string's text, a number's token,
    ``true``/``false``, nested documents and arrays as compact JSON; ``None`` for null."""
    found = wrapped(value)
    if found is not None:
        return found[0]
    if isinstance(value, (dict, list)):
        return _compact_extended(value)
    return render(value)


def _compact_extended(value: object) -> str:
    found = wrapped(value)
    if found is not None:
        return found[0] if found[1] else json_string(found[0])
    if isinstance(value, dict):
        inner = ",".join(f"{json_string(k)}:{_compact_extended(v)}" for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + ",".join(_compact_extended(v) for v in value) + "]"
    return _compact(value)


def extended_object(text: str, where: str, limits: Limits) -> dict:
    """The Extended JSON document in ``text``, parsed (an object)."""
    try:
        value = parse(text.encode("utf-8"), limits)
    except Malformed as exc:
        raise Malformed(f"{where}: {exc}") from None
    if not isinstance(value, dict):
        raise Malformed(f"{where}: expected an object, got {kind_of(value)}")
    return value


def extended_document(text: str, where: str, limits: Limits) -> list:
    """The Extended JSON document in ``text`` as an image: (name, text or None) pairs."""
    return [(k, render_extended(v)) for k, v in extended_object(text, where, limits).items()]
