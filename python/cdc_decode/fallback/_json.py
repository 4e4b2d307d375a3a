"""The strict reading of JSON shared by the JSON formats (``datahub-blob``, ``tdsql-json``,
``debezium-json``, ``datastream-json``), and the generic field checks.

docs/formats/datahub-blob.md, "JSON accepted" and "Field types", is the contract: strict
UTF-8 without a byte order mark, RFC 8259 grammar, no lone surrogate escapes, at most
:data:`MAX_DEPTH` levels of nesting, the first of duplicate keys wins, number tokens kept as
the text that was sent (:class:`_Number`), the top value an object (each format checks).
Values render to generic text (:func:`render`) as that page's "Row images" says.
:class:`JsonFormat` is the decoder the four formats derive from: one message, one row or
one error row. The Rust core's counterpart is ``rust/json.rs``.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

from ._events import EventSink
from ._typed import Hints, Unconvertible

MAX_DEPTH = 128
"""Most levels of nested objects and arrays a message may have (the top object is 1)."""

_SIGN = 1 << 63

_INTEGER = re.compile(r"-?[0-9]+\Z")
# A JSON string (valid or not, for the nesting pre-check only) and the brackets left after.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# In a valid JSON text every backslash starts an escape: left to right, these are its escapes.
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = str.maketrans({"[": "\x01", "{": "\x01", "]": "\x02", "}": "\x02"})


class _Malformed(Exception):
    """A message that does not decode; the text says what is wrong and where."""


class _Number(str):
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
    parse_int=_Number,
    parse_float=_Number,
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


def parse(raw: bytes) -> object:
    """One message as a JSON value: objects as dicts (first duplicate key wins), number
    tokens as :class:`_Number` text.

    Raises:
        _Malformed: for anything docs/formats/datahub-blob.md rejects.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed(f"invalid UTF-8 at byte {exc.start}") from None
    # Cheap bound first: the nesting cannot exceed the number of opening brackets.
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        raise _Malformed(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        at = len(text[: exc.pos].encode("utf-8"))
        raise _Malformed(f"invalid JSON: {exc.msg} at byte {at}") from None
    except (ValueError, RecursionError) as exc:
        raise _Malformed(f"invalid JSON: {exc}") from None
    # A lone surrogate can only come from a \u escape.
    if "\\u" in text and _has_lone_surrogate(text):
        raise _Malformed("invalid JSON: a \\u escape is a lone surrogate")
    return value


def render(value: object) -> str | None:
    """A JSON value as generic text: a string's text, a number's token as sent,
    ``true``/``false``, ``None`` for null, compact JSON for an object or array."""
    if type(value) is str or type(value) is _Number:
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _compact(value)


_escape = json.encoder.encode_basestring  # serde_json's escaping (docs: "Nested values")


def _compact(value: object) -> str:
    # Recursion is bounded: parse() rejects anything deeper than MAX_DEPTH.
    if type(value) is str:
        return _escape(value)
    if type(value) is _Number:
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, dict):
        inner = ",".join(f"{_escape(k)}:{_compact(v)}" for k, v in value.items())
        return "{" + inner + "}"
    return "[" + ",".join(_compact(v) for v in value) + "]"


def _kind(value: object) -> str:
    if type(value) is _Number:
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


def _object(value: object, where: str) -> dict | None:
    """An object field, or ``None`` for null/absent."""
    if value is None or isinstance(value, dict):
        return value
    raise _Malformed(f"{where}: expected an object, got {_kind(value)}")


def _string(value: object, where: str) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Malformed(f"{where}: expected a string, got {_kind(value)}")


def _integer(value: object, where: str) -> int | None:
    """An integer sent as a number token or a string: ``-?[0-9]+`` within i64."""
    if value is None:
        return None
    if (type(value) is _Number or type(value) is str) and _INTEGER.match(value):
        negative = value[0] == "-"
        digits = value[negative:].lstrip("0")
        if len(digits) <= 19:  # int() of a huge token would be slow or refused
            number = -int(digits or "0") if negative else int(digits or "0")
            if -_SIGN <= number < _SIGN:
                return number
    raise _Malformed(f"{where}: expected a 64-bit integer, got {_kind(value)}")


def _unsigned(value: object, where: str) -> int | None:
    """A non-negative integer (a log position or an index), or ``None``."""
    number = _integer(value, where)
    if number is not None and number < 0:
        raise _Malformed(f"{where}: expected a non-negative integer, got {_kind(value)}")
    return number


# ---------------------------------------------------------------------------------------
# The decoder of a JSON format


class JsonFormat:
    """What the JSON formats share: one JSON text per message, parsed by :func:`parse`,
    gives one row from ``_event`` (``None`` for a tombstone), or one error row. No state
    between messages."""

    name: str
    pending = 0

    def decode(self, raw: bytes, key: str | None, ordinal: int, sink: EventSink) -> None:
        """Decodes one message into ``sink``.

        Args:
            raw: the message bytes (UTF-8 JSON).
            key: unused (no multi-part messages in the JSON formats).
            ordinal: the message's input ordinal.
            sink: where rows go.
        """
        try:
            message = parse(raw)
            row = self._event(message)
            if row is not None:
                rows = sink.convert([row], self._hints(message) if sink.typed else None)
        except (_Malformed, Unconvertible) as exc:
            sink.error(ordinal, raw, str(exc))
            return
        if row is None:
            sink.tombstone(ordinal)
        else:
            sink.events(rows, ordinal)

    def finish(self, sink: EventSink) -> None:
        """End of input: nothing is buffered."""

    def _event(self, message: object) -> tuple | None:
        raise NotImplementedError

    def _hints(self, message: object) -> Hints | None:
        """Typed mode's hints for a message ``_event`` accepted (docs/typed.md)."""
        return None
