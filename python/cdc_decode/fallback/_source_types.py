"""The mapping of source column types, as each format spells them, to the Spark type typed
mode converts their values to: the Python engine's twin of ``rust/schemas/mapping.rs``
(docs/types.md has the tables, which the tests check both engines against).

A type the mapping does not know is ``None``: reported as unknown, never guessed.
"""

from __future__ import annotations

import re

MAX_PRECISION = 38

DIALECTS = ("mysql", "postgresql", "oracle", "sqlserver", "connect", "avro", "datahub", "arrow")
"""Whose spelling a source type is (``None``: the wire carries no types)."""


def _decimal(p: int, s: int) -> str:
    """``decimal(p,s)`` when Spark holds it, else ``string`` (the exact text)."""
    if 1 <= p <= MAX_PRECISION and 0 <= s <= p:
        return f"decimal({p},{s})"
    return "string"


# Rust's ``char::is_whitespace`` (Unicode White_Space), which ``str.split()`` and
# ``str.strip()`` do not follow exactly (they take U+001C..U+001F too).
_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
_SPACES = re.compile(f"[{re.escape(_SPACE)}]+")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _trim(text: str) -> str:
    return text.strip(_SPACE)


def _words(text: str) -> str:
    return " ".join(w for w in _SPACES.split(text) if w)


def _int(text: str) -> int | None:
    """An argument as Rust's ``str::parse::<i64>`` reads it (after trimming)."""
    return _int_exact(_trim(text))


class _Sql:
    """A SQL type text taken apart (``rust/schemas/mapping.rs``'s ``SqlType``)."""

    __slots__ = ("base", "args", "tail")

    def __init__(self, text: str) -> None:
        lower = _trim(text).translate(_ASCII_LOWER)
        at = lower.find("(")
        head, rest = (lower, "") if at < 0 else (lower[:at], lower[at:])
        args: list[int | None] = []
        tail = rest
        if rest.startswith("("):
            inner = rest[1:]
            quoted = False
            end = None
            for i, c in enumerate(inner):
                if c == "'":
                    quoted = not quoted
                elif c == ")" and not quoted:
                    end = i
                    break
            if end is None:
                end = len(inner)
            args = [_int(a) for a in inner[:end].split(",")]
            tail = inner[end + 1 :]
        self.base = _words(head)
        self.args = args
        self.tail = _words(tail)

    def arg(self, i: int) -> int | None:
        return self.args[i] if i < len(self.args) else None

    def has(self, word: str) -> bool:
        return word in self.tail.split(" ")


_MYSQL_STRING = frozenset(
    "char varchar tinytext text mediumtext longtext nchar nvarchar enum set json long".split()
) | {"national char", "national varchar", "character", "character varying", "long varchar"}
_MYSQL_BINARY = frozenset(
    "binary varbinary tinyblob blob mediumblob longblob geometry point linestring polygon "
    "multipoint multilinestring multipolygon geometrycollection geomcollection".split()
) | {"long varbinary"}


def _mysql(t: _Sql) -> str | None:
    unsigned = t.has("unsigned")
    base = t.base
    if base in ("tinyint", "bool", "boolean"):
        return "smallint" if unsigned else "tinyint"
    if base == "smallint":
        return "int" if unsigned else "smallint"
    if base == "mediumint":
        return "int"
    if base in ("int", "integer"):
        return "bigint" if unsigned else "int"
    if base == "bigint":
        return "decimal(20,0)" if unsigned else "bigint"
    if base == "serial":
        return "decimal(20,0)"
    if base in ("decimal", "numeric", "dec", "fixed"):
        p = t.arg(0)
        s = t.arg(1)
        return _decimal(10 if p is None else p, 0 if s is None else s)
    if base == "float":
        if len(t.args) == 1:
            p = t.arg(0)
            if p is None:
                return None
            return "double" if p > 24 else "float"
        return "float"
    if base in ("double", "double precision", "real"):
        return "double"
    if base == "bit":
        n = t.arg(0)
        return "decimal(20,0)" if (1 if n is None else n) > 63 else "bigint"
    return {
        "year": "int",
        "date": "date",
        "time": "string",
        "datetime": "timestamp_ntz",
        "timestamp": "timestamp",
    }.get(base) or (
        "string" if base in _MYSQL_STRING else "binary" if base in _MYSQL_BINARY else None
    )


_PG_STRING = frozenset(
    "char character varchar text bpchar name citext time timetz interval uuid json jsonb "
    "xml inet cidr macaddr macaddr8 bit varbit tsvector tsquery hstore ltree point line "
    "lseg box path polygon circle int4range int8range numrange tsrange tstzrange daterange "
    "enum".split()
) | {"character varying", "bit varying"}
_PG = {
    **dict.fromkeys(("smallint", "int2", "smallserial", "serial2"), "smallint"),
    **dict.fromkeys(("integer", "int", "int4", "serial", "serial4"), "int"),
    **dict.fromkeys(("bigint", "int8", "bigserial", "serial8", "oid"), "bigint"),
    "real": "float",
    "float4": "float",
    "double precision": "double",
    "float8": "double",
    "money": "decimal(19,2)",
    "boolean": "boolean",
    "bool": "boolean",
    "bytea": "binary",
    "date": "date",
    "timestamptz": "timestamp",
}


def _postgresql(text: str) -> str | None:
    trimmed = _trim(text)
    if trimmed.endswith("]") or trimmed.startswith("_"):
        return "string"
    t = _Sql(trimmed)
    zone = "with time zone" in t.tail or t.base.endswith("with time zone")
    base = t.base
    for suffix in (" with time zone", " without time zone"):
        base = base.removesuffix(suffix)
    if base in ("numeric", "decimal"):
        if not t.args:
            return "string"
        p = t.arg(0)
        if p is None:
            return None
        s = t.arg(1)
        return _decimal(p, 0 if s is None else s)
    if base == "float":
        p = t.arg(0)
        return "float" if p is not None and p <= 24 else "double"
    if base == "timestamp":
        return "timestamp" if zone else "timestamp_ntz"
    return _PG.get(base) or ("string" if base in _PG_STRING else None)


_ORACLE_STRING = frozenset(
    "char nchar varchar2 nvarchar2 varchar clob nclob long rowid urowid xmltype json "
    "character".split()
) | {"character varying"}


def _oracle(text: str) -> str | None:
    t = _Sql(text)
    base = t.base
    if base in ("number", "numeric", "decimal", "dec"):
        if not t.args:
            return "string"
        p = t.arg(0)
        p = MAX_PRECISION if p is None else p
        s = t.arg(1) or 0
        return _decimal(p - s, 0) if s < 0 else _decimal(p, s)
    if base in ("integer", "int", "smallint"):
        return "decimal(38,0)"
    if base in ("float", "real", "double precision", "binary_double"):
        return "double"
    if base == "binary_float":
        return "float"
    if base in _ORACLE_STRING:
        return "string"
    if base in ("raw", "long raw", "blob"):
        return "binary"
    if base == "date":
        return "timestamp_ntz"
    if base == "timestamp":
        return "timestamp" if "time zone" in t.tail else "timestamp_ntz"
    if base == "boolean":
        return "boolean"
    if base.startswith("interval"):
        return "string"
    return None


_SQLSERVER = {
    "bit": "boolean",
    "tinyint": "smallint",
    "smallint": "smallint",
    "int": "int",
    "bigint": "bigint",
    "money": "decimal(19,4)",
    "smallmoney": "decimal(10,4)",
    "real": "float",
    "date": "date",
    "datetime": "timestamp_ntz",
    "datetime2": "timestamp_ntz",
    "smalldatetime": "timestamp_ntz",
    "datetimeoffset": "timestamp",
    **dict.fromkeys(
        "char varchar nchar nvarchar text ntext xml uniqueidentifier sysname sql_variant "
        "time".split(),
        "string",
    ),
    **dict.fromkeys(
        "binary varbinary image rowversion timestamp geometry geography hierarchyid".split(),
        "binary",
    ),
}


def _sqlserver(text: str) -> str | None:
    t = _Sql(text)
    if t.base in ("decimal", "numeric"):
        p, s = t.arg(0), t.arg(1)
        return _decimal(18 if p is None else p, 0 if s is None else s)
    if t.base == "float":
        n = t.arg(0)
        return "float" if n is not None and n <= 24 else "double"
    return _SQLSERVER.get(t.base)


_CONNECT_NAMES = {
    "io.debezium.data.VariableScaleDecimal": "string",
    "org.apache.kafka.connect.data.Date": "date",
    "io.debezium.time.Date": "date",
    **dict.fromkeys(
        (
            "org.apache.kafka.connect.data.Timestamp",
            "io.debezium.time.Timestamp",
            "io.debezium.time.MicroTimestamp",
            "io.debezium.time.NanoTimestamp",
        ),
        "timestamp_ntz",
    ),
    "io.debezium.time.ZonedTimestamp": "timestamp",
    **dict.fromkeys(
        (
            "org.apache.kafka.connect.data.Time",
            "io.debezium.time.Time",
            "io.debezium.time.MicroTime",
            "io.debezium.time.NanoTime",
            "io.debezium.time.ZonedTime",
        ),
        "string",
    ),
    "io.debezium.data.Bits": "binary",
    "io.debezium.time.Year": "int",
}
_CONNECT_TYPES = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "float": "float",
    "float32": "float",
    "double": "double",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "binary",
    "array": "string",
    "map": "string",
    "struct": "string",
}
_CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"


def _connect(text: str) -> str | None:
    base, _, logical = text.partition(" ")
    name = logical.split("(")[0]
    if name == _CONNECT_DECIMAL:
        rest = logical[len(_CONNECT_DECIMAL) :]
        if not (rest.startswith("(") and rest.endswith(")")):
            return None
        scale = None
        precision = MAX_PRECISION
        for param in rest[1:-1].split(","):
            key, eq, value = param.partition("=")
            if not eq:
                continue
            if key == "scale":
                scale = _int_exact(value)
            elif key == "connect.decimal.precision":
                precision = _int_exact(value)
                if precision is None:
                    return None
        return None if scale is None else _decimal(precision, scale)
    return _CONNECT_NAMES.get(name) or _CONNECT_TYPES.get(base)


def _int_exact(text: str) -> int | None:
    """Rust's ``str::parse::<i64>``: an optional sign and digits, within i64."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


_AVRO = {
    ("int", "date"): "date",
    **dict.fromkeys(
        (("long", u) for u in ("timestamp-millis", "timestamp-micros", "timestamp-nanos")),
        "timestamp",
    ),
    **dict.fromkeys(
        (
            ("long", u)
            for u in ("local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos")
        ),
        "timestamp_ntz",
    ),
    ("record", "datetime"): "timestamp_ntz",
    ("record", "timestampTz"): "timestamp",
    # Datastream's ``number`` (MySQL ``bigint unsigned``, Oracle ``NUMBER``): widened by the
    # values in _schemas.widen.
    ("string", "number"): "decimal(20,0)",
    ("int", "time-millis"): "string",
    ("long", "time-micros"): "string",
    ("long", "time-interval-micros"): "string",
}
_AVRO_BASE = {
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "bytes": "binary",
    "fixed": "binary",
    "string": "string",
    "enum": "string",
    "array": "string",
    "record": "string",
}


def _avro(text: str) -> str | None:
    base, _, logical = text.partition(" ")
    if base in ("bytes", "fixed") and logical.startswith("decimal("):
        args = logical[len("decimal(") :]
        parsed = None
        if args.endswith(")") and "," in args[:-1]:
            p, s = args[:-1].split(",", 1)
            p, s = _int_exact(_trim(p)), _int_exact(_trim(s))
            if p is not None and s is not None:
                parsed = (p, s)
        if parsed is not None and 1 <= parsed[0] <= 1000 and 0 <= parsed[1] <= parsed[0]:
            return _decimal(*parsed)
        return "binary"
    if logical.startswith("decimal("):
        return _AVRO_BASE.get(base)
    return _AVRO.get((base, logical)) or _AVRO_BASE.get(base)


_DATAHUB = {
    "tinyint": "tinyint",
    "smallint": "smallint",
    "integer": "int",
    "int": "int",
    "bigint": "bigint",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "date": "timestamp",
    "timestamp": "timestamp",
    "bytes": "binary",
}


def _datahub(text: str) -> str | None:
    t = _Sql(text)
    if t.base == "decimal":
        if len(t.args) != 2:
            return "string"
        p, s = t.arg(0), t.arg(1)
        return _decimal(0 if p is None else p, -1 if s is None else s)
    return _DATAHUB.get(t.base)


_ARROW = {
    "int8": "tinyint",
    "int16": "smallint",
    "uint8": "smallint",
    "int32": "int",
    "uint16": "int",
    "int64": "bigint",
    "uint32": "bigint",
    "uint64": "decimal(20,0)",
    "float": "float",
    "double": "double",
    "bool": "boolean",
    "string": "string",
    "large_string": "string",
    "string_view": "string",
    "null": "string",
    "binary": "binary",
    "large_binary": "binary",
    "binary_view": "binary",
    "date32[day]": "date",
    "date64[ms]": "date",
}
_ARROW_DECIMAL = re.compile(r"decimal(?:32|64|128|256)\(([^,]*),(.*)\)\Z")


def _arrow(text: str) -> str | None:
    found = _ARROW.get(text)
    if found is not None:
        return found
    if text.startswith("fixed_size_binary["):
        return "binary"
    if text.startswith("timestamp["):
        return "timestamp" if ", tz=" in text else "timestamp_ntz"
    m = _ARROW_DECIMAL.match(text)
    if m:
        p, s = _int_exact(_trim(m.group(1))), _int_exact(_trim(m.group(2)))
        if p is not None and s is not None:
            return _decimal(p, s)
    return None


_BY_DIALECT = {
    "mysql": lambda text: _mysql(_Sql(text)),
    "postgresql": _postgresql,
    "oracle": _oracle,
    "sqlserver": _sqlserver,
    "connect": _connect,
    "avro": _avro,
    "datahub": _datahub,
    "arrow": _arrow,
}


def spark_type(dialect: str, text: str) -> str | None:
    """The Spark type (a DDL type name) of a column whose source type is ``text`` as
    ``dialect`` spells it, or ``None`` for a type the mapping does not know."""
    return _BY_DIALECT[dialect](text)
