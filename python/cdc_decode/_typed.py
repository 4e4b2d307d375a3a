"""Typed mode's target schemas: Spark DDL strings parsed into pyarrow schemas, checked,
and the event schemas typed mode returns (docs/typed.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ._schema import EVENT_SCHEMA

TableSchema = Any
"""A pyarrow schema, or a Spark DDL string: ``"id bigint, name string, price decimal(10,2)"``."""

SUPPORTED = (
    "boolean, tinyint, smallint, int, bigint, float, double, "
    "decimal(p,s) with 1 <= p <= 38 and 0 <= s <= p, string, binary, date, timestamp "
    "(timestamp[us, tz=UTC]), timestamp_ntz (timestamp[us])"
)

_SIMPLE = {
    "boolean": pa.bool_(),
    "bool": pa.bool_(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ltz": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([(),:<>])|(\S))")


def _tokens(ddl: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(ddl):
        quoted, word, number, punct, other = m.groups()
        if quoted is not None:
            out.append(("name", quoted[1:-1].replace("``", "`")))
        elif word is not None:
            out.append(("word", word))
        elif number is not None:
            out.append(("number", number))
        elif punct is not None:
            out.append(("punct", punct))
        elif other is not None:
            raise ValueError(
                f"schema {ddl!r}: unexpected character {other!r}; supported types: {SUPPORTED}"
            )
    return out


def parse_ddl(ddl: str) -> pa.Schema:
    """A Spark DDL column list as a pyarrow schema.

    Args:
        ddl: ``"id bigint, name string, price decimal(10,2), created timestamp"``. Types
            (any case): boolean, tinyint, smallint, int/integer, bigint, float, double,
            decimal/dec/numeric[(p[, s])] (``decimal`` alone is ``decimal(10,0)``, as in
            Spark), string, varchar(n), char(n) (both strings), binary, date, timestamp
            (``timestamp[us, tz=UTC]``), timestamp_ltz (the same), timestamp_ntz
            (``timestamp[us]``). Names may be backquoted (``\\`order id\\` int``); ``NOT
            NULL`` and ``COMMENT '…'`` are not accepted.

    Returns:
        The schema, every field nullable.

    Raises:
        ValueError: text that is not such a list, or a type typed mode does not convert to.
    """
    tokens = _tokens(ddl)
    fields = []
    i = 0

    def fail(problem: str) -> ValueError:
        return ValueError(f"schema {ddl!r}: {problem}; supported types: {SUPPORTED}")

    def number() -> int:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] != "number":
            raise fail("expected a number")
        i += 1
        return int(tokens[i - 1][1])

    def punct(char: str) -> bool:
        nonlocal i
        if i < len(tokens) and tokens[i] == ("punct", char):
            i += 1
            return True
        return False

    while i < len(tokens):
        kind, name = tokens[i]
        if kind not in ("name", "word"):
            raise fail(f"expected a column name, got {name!r}")
        i += 1
        punct(":")
        if i >= len(tokens) or tokens[i][0] != "word":
            raise fail(f"column {name!r} has no type")
        type_name = tokens[i][1].lower()
        i += 1
        if type_name in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if punct("("):
                precision = number()
                if punct(","):
                    scale = number()
                if not punct(")"):
                    raise fail("expected ')'")
            if not 1 <= precision <= 38 or scale > precision:
                raise fail(f"column {name!r}: decimal({precision},{scale}) is out of range")
            data_type = pa.decimal128(precision, scale)
        elif type_name in ("varchar", "char"):
            if not (punct("(") and number() >= 0 and punct(")")):
                raise fail(f"column {name!r}: {type_name} needs a length, as {type_name}(n)")
            data_type = pa.string()
        elif type_name in _SIMPLE:
            data_type = _SIMPLE[type_name]
        else:
            raise fail(f"column {name!r} has type {type_name!r}, which typed mode does not read")
        fields.append(pa.field(name, data_type))
        if i < len(tokens) and not punct(","):
            raise fail(f"expected ',' after column {name!r}, got {tokens[i][1]!r}")
    if not fields:
        raise fail("no column")
    return pa.schema(fields)


def _supported(data_type: pa.DataType) -> bool:
    if pa.types.is_decimal128(data_type):
        return 1 <= data_type.precision <= 38 and 0 <= data_type.scale <= data_type.precision
    if pa.types.is_timestamp(data_type):
        return data_type.unit == "us" and data_type.tz in (None, "UTC")
    return data_type in (
        pa.bool_(),
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.float32(),
        pa.float64(),
        pa.string(),
        pa.binary(),
        pa.date32(),
    )


def as_schema(schema: TableSchema, label: str = "schema") -> pa.Schema:
    """A table's columns as a checked pyarrow schema (every field nullable).

    Args:
        schema: a pyarrow schema or a Spark DDL string (:func:`parse_ddl`).
        label: how errors name it (``schema``, ``tables["shop.orders"]``).

    Raises:
        ValueError: a type typed mode does not convert to, a column named twice, or no
            column at all.
        TypeError: neither a schema nor a string.
    """
    if isinstance(schema, str):
        schema = parse_ddl(schema)
    if not isinstance(schema, pa.Schema):
        raise TypeError(f"{label} must be a pyarrow schema or a Spark DDL string")
    if len(schema) == 0:
        # As the DDL "" is: structs of no field hold nothing, and are surely a mistake.
        raise ValueError(f"{label}: no column")
    names = set()
    for field in schema:
        if not _supported(field.type):
            raise ValueError(
                f"{label}: column {field.name!r} has type {field.type}, which typed mode "
                f"does not convert to; supported: {SUPPORTED}"
            )
        if field.name in names:
            raise ValueError(f"{label}: column {field.name!r} is named twice")
        names.add(field.name)
    return pa.schema([pa.field(f.name, f.type) for f in schema])


def as_tables(tables: Mapping[str, TableSchema]) -> list[tuple[str, pa.Schema]]:
    """``tables=`` as (name, checked schema) pairs, in the order given."""
    if not isinstance(tables, Mapping) or not tables:
        raise TypeError('tables must be a non-empty mapping such as {"shop.orders": "id bigint"}')
    out = []
    for name, schema in tables.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"tables: bad table name {name!r}")
        out.append((name, as_schema(schema, f"tables[{name!r}]")))
    return out


AFTER_ABSENT = "after_absent"
"""Typed mode's last column (``list<string>``): the names of the schema's fields, in schema
order, that the row's ``after`` image does not carry; ``[]`` when it carries all of them,
null when the row has no ``after`` image. A column with a null value is carried (an
explicit null); one absent from the image is not (docs/typed.md)."""

AFTER_ABSENT_FIELD = pa.field(AFTER_ABSENT, pa.list_(pa.string()))


def typed_event_schema(schema: pa.Schema) -> pa.Schema:
    """The event schema with ``before`` and ``after`` as structs of ``schema``'s fields,
    then ``after_absent`` (:data:`AFTER_ABSENT`)."""
    struct = pa.struct(list(schema))
    out = EVENT_SCHEMA
    for name in ("before", "after"):
        at = out.get_field_index(name)
        out = out.set(at, pa.field(name, struct))
    return out.append(AFTER_ABSENT_FIELD)


def multi_event_schema(tables: list[tuple[str, pa.Schema]]) -> pa.Schema:
    """What one pass over a multi-table stream returns: the event schema (``before`` and
    ``after`` kept as text maps for rows no table claims), then ``table``, then
    ``before_<i>``/``after_<i>`` structs for the i-th table, then ``after_absent`` (the
    claiming table's fields its ``after`` image does not carry)."""
    fields = list(EVENT_SCHEMA) + [pa.field("table", pa.string())]
    for i, (_, schema) in enumerate(tables):
        struct = pa.struct(list(schema))
        fields += [pa.field(f"before_{i}", struct), pa.field(f"after_{i}", struct)]
    return pa.schema([*fields, AFTER_ABSENT_FIELD])


def split_tables(batch: pa.RecordBatch, tables: Any) -> dict[str | None, pa.RecordBatch]:
    """One multi-table batch as a typed batch per table, and under ``None`` the rows no
    table claims (other tables, control events without a table, error rows) as generic
    events. Each keeps the rows' order.

    Args:
        batch: what a ``Decoder(..., tables=tables)`` returned (:func:`multi_event_schema`).
        tables: the same ``tables`` (a mapping, or (name, schema) pairs).
    """
    import pyarrow.compute as pc

    if isinstance(tables, Mapping):
        tables = as_tables(tables)

    base = [f.name for f in EVENT_SCHEMA]
    events = batch.select(base)
    # Each row's table by its place in `tables`, len(tables) for rows no table claims.
    names = pa.array([name for name, _ in tables], pa.string())
    codes = pc.fill_null(pc.index_in(batch.column("table"), value_set=names), len(tables))
    counts = [0] * (len(tables) + 1)
    for entry in pc.value_counts(codes).to_pylist():
        counts[entry["values"]] = entry["counts"]
    # The rows grouped by table, in order within each (a stable sort): every column is
    # taken once, each table's own structs only at its rows. (A filter per table of the
    # whole batch was quadratic in the number of tables.) No copy when one group is all.
    order = None
    if max(counts) < batch.num_rows:
        order = pc.sort_indices(codes)
        events = events.take(order)

    out: dict[str | None, pa.RecordBatch] = {}
    start = 0
    for i, (name, schema) in enumerate(tables):
        n = counts[i]
        rows = events.slice(start, n)
        at = None if order is None else order.slice(start, n)
        images = {}
        for side, column in (
            ("before", f"before_{i}"),
            ("after", f"after_{i}"),
            (AFTER_ABSENT, AFTER_ABSENT),
        ):
            column = batch.column(column)
            images[side] = column.slice(start, n) if at is None else column.take(at)
        arrays = [images[c] if c in images else rows.column(c) for c in [*base, AFTER_ABSENT]]
        out[name] = pa.RecordBatch.from_arrays(arrays, schema=typed_event_schema(schema))
        start += n
    out[None] = pa.RecordBatch.from_arrays(events.slice(start).columns, schema=EVENT_SCHEMA)
    return out
