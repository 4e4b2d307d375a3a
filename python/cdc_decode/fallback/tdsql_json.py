"""The ``tdsql-json`` format: TencentDB for MariaDB / TDSQL subscription binlog JSON.

Every rule here is written down in docs/formats/tdsql-json.md, which the Rust core follows
too. The JSON accepted and the field types are datahub-blob's (the same strict parse, from
:mod:`._json`); this module reads the TDSQL fields and renders SQL literals.
"""

from __future__ import annotations

import re

from .._limits import DEFAULT, Limits
from . import _schemas
from ._events import Malformed
from ._json import JsonFormat, Number, integer_field, kind_of, render, string_field, unsigned_field
from ._sequence import u64

FORMAT = "tdsql-json"

_MAX_S = (2**63 - 1) // 1_000_000  # the largest |seconds| whose microseconds fit an i64

_OPS = {
    "insert": "insert",
    "update": "update",
    "delete": "delete",
    "gtid": "begin",
    "xid": "commit",
    "query": "ddl",
}

# Fields with a column of their own; every other one goes to metadata.
_KNOWN = frozenset(
    ("eventtypestr", "db", "table", "begintime", "gtid", "event_index", "sub_event_index",
     "where", "field", "sql")
)  # fmt: skip

_NULL = "'##isnull##'"
_UNSIGNED_FORM = re.compile(r"(-[0-9]+) \([0-9]+\)\Z")
_GTID_NUMBER = re.compile(r"[0-9]+\Z")
_POSITION = re.compile(r"(0|[1-9][0-9]*)\Z")  # a position's key: canonical decimal
_QUOTED_ESCAPE = re.compile(r"\\(.)|''", re.DOTALL)
_BACKSLASH = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "r": "\r", "t": "\t", "0": "\0"}


def _unescape(match: re.Match) -> str:
    char = match.group(1)
    if char is None:
        return "'"  # a doubled quote
    return _BACKSLASH.get(char, match.group(0))


def literal(item: object, where: str) -> str | None:
    """One image value: a TDSQL SQL literal as generic text (docs: "Row images")."""
    if type(item) is str:
        if item == _NULL:
            return None
        if len(item) >= 2 and item[0] == "'" and item[-1] == "'":
            inner = item[1:-1]
            return _QUOTED_ESCAPE.sub(_unescape, inner) if "\\" in inner or "''" in inner else inner
        if item[:1] == "-":
            unsigned = _UNSIGNED_FORM.match(item)
            if unsigned:
                return unsigned.group(1)
        return item
    if type(item) is Number:
        return item
    if item is None:
        return None
    raise Malformed(f"{where}: expected a string, got {kind_of(item)}")


def _image(items: object, where: str, names: _Names | None) -> list | None:
    if items is None:
        return None
    if not isinstance(items, list):
        raise Malformed(f"{where}: expected an array, got {kind_of(items)}")
    if not items:
        return None
    named, taken = names if names else ((), frozenset())
    entries = [
        (named[i] if i < len(named) else str(i), literal(item, f"{where}[{i}]"))
        for i, item in enumerate(items)
    ]
    if taken and len(entries) > len(named):
        # A position whose key one of the names is: the first key wins (docs/events.md).
        entries[len(named) :] = [e for e in entries[len(named) :] if e[0] not in taken]
    return entries


_Names = tuple[list[str], frozenset[str]]
"""A table's column names, and those that are also the key of a position past them."""


def _names(table: str, names: list[str]) -> _Names:
    if len(set(names)) != len(names):
        raise ValueError(f"columns[{table!r}] names a column twice")
    taken = frozenset(
        n for n in names if len(n) <= 20 and _POSITION.match(n) and int(n) >= len(names)
    )
    return list(names), taken


def gtid_number(gtid: str) -> int | None:
    """The transaction number of a MySQL (``uuid:N``) or MariaDB (``domain-server-N``)
    GTID, or ``None``."""
    tail = gtid.rpartition(":")[2] if ":" in gtid else gtid.rpartition("-")[2]
    if not _GTID_NUMBER.match(tail):
        return None
    digits = tail.lstrip("0") or "0"
    number = int(digits) if len(digits) <= 20 else 1 << 64
    return number if number < 1 << 64 else None


class TdsqlJson(JsonFormat):
    """Decodes ``tdsql-json`` messages: one JSON object, one event.

    Args:
        columns: ``{"db.table": [column names]}``: names for the positional images.
    """

    name = FORMAT

    def __init__(
        self, columns: dict[str, list[str]] | None = None, *, limits: Limits = DEFAULT
    ) -> None:
        super().__init__(limits=limits)
        self._columns = {table: _names(table, names) for table, names in (columns or {}).items()}

    def _schema(self, message: object, row: tuple, key: str | None) -> tuple | None:
        """The images' keys (positions, or the names of ``columns=``): no types, no key."""
        if row[13] is None and row[14] is None:
            return None
        return _schemas.names(_schemas.image_names(row[13], row[14]), None)

    def _event(self, message: object) -> tuple:
        if not isinstance(message, dict):
            raise Malformed(f"expected a JSON object, got {kind_of(message)}")
        get = message.get
        source_op = string_field(get("eventtypestr"), "eventtypestr")
        if source_op is None:
            raise Malformed("eventtypestr: missing")
        db = string_field(get("db"), "db")
        table = string_field(get("table"), "table")
        gtid = string_field(get("gtid"), "gtid")
        sql = string_field(get("sql"), "sql")
        seconds = integer_field(get("begintime"), "begintime")
        if seconds is not None and not -_MAX_S <= seconds <= _MAX_S:
            raise Malformed(f"begintime: {seconds} seconds is out of range")
        event_index = unsigned_field(get("event_index"), "event_index")
        sub_index = unsigned_field(get("sub_event_index"), "sub_event_index")
        filename = string_field(get("filename"), "filename")
        offset = integer_field(get("orgoffset"), "orgoffset")
        names = self._columns.get(f"{db}.{table}") if db is not None and table is not None else None
        before = _image(get("where"), "where", names)
        after = _image(get("field"), "field", names)

        position = f"{filename}:{offset}" if filename is not None and offset is not None else None
        sequence = event_id = None
        if gtid is not None and event_index is not None:
            event_id = f"{gtid}:{event_index}"
            if sub_index is not None:
                event_id += f":{sub_index}"
            number = gtid_number(gtid)
            if number is not None:
                sequence = u64(number, event_index, sub_index or 0)
        metadata = [(k, render(v)) for k, v in message.items() if k not in _KNOWN and v is not None]
        return (
            FORMAT, _OPS.get(source_op, "other"), source_op, db, None, table,
            None if seconds is None else seconds * 1_000_000, None, gtid, position, sequence,
            event_id, None, before, after, sql, metadata or None, None, None,
        )  # fmt: skip
