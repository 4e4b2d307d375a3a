"""The schema pass in the Python engine: the twin of ``rust/schemas/mod.rs``.

A format reports each event row's wire schema to the sink (:meth:`EventSink.observe`): a
hashable tuple ``(dialect, columns, key)``, ``columns`` a tuple of ``(name, source type,
Spark type)``, ``key`` a tuple of names or ``None``; :func:`aggregate` makes the call's
rows of :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA` of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa

from .._schema import SCHEMA_PASS_SCHEMA
from ._source_types import spark_type

WireSchema = tuple
"""``(dialect or None, ((name, source_type, spark_type), ...), key tuple or None)``."""

_OP, _DB, _SCHEMA, _TABLE, _SEQUENCE, _ERROR = 1, 3, 4, 5, 10, 17


def typed(
    dialect: str, columns: Iterable[tuple[str, str]], key: Iterable[str] | None
) -> WireSchema:
    """Columns with types in ``dialect``, their Spark types mapped."""
    return (
        dialect,
        tuple((name, t, spark_type(dialect, t)) for name, t in columns),
        None if key is None else tuple(key),
    )


def names(columns: Iterable[str], key: Iterable[str] | None) -> WireSchema:
    """Column names only: the wire carries no types."""
    return (
        None,
        tuple((name, None, None) for name in columns),
        None if key is None else tuple(key),
    )


def image_names(*images: list | None) -> list[str]:
    """The column names of images (lists of (name, value)), each once, in order."""
    out: list[str] = []
    seen: set[str] = set()
    for image in images:
        for name, _ in image or ():
            if name not in seen:
                seen.add(name)
                out.append(name)
    return out


def aggregate(
    rows: list[tuple], ordinals: list[int], schemas: list[WireSchema | None]
) -> tuple[pa.RecordBatch, pa.Array]:
    """The schema pass's batch of one call (see ``rust/schemas/mod.rs``, ``aggregate``)."""
    groups: list[dict] = []
    by_key: dict[tuple, int] = {}
    for row, ordinal, schema in zip(rows, ordinals, schemas, strict=True):
        if row[_OP] == "error":
            groups.append(
                {
                    "names": (None, None, None),
                    "schema": None,
                    "events": 0,
                    "first_ordinal": ordinal,
                    "last_ordinal": ordinal,
                    "first_sequence": None,
                    "last_sequence": None,
                    "error": row[_ERROR],
                }
            )
            continue
        if schema is None:
            continue
        names_ = (row[_DB], row[_SCHEMA], row[_TABLE])
        at = by_key.get((names_, schema))
        if at is None:
            at = by_key[(names_, schema)] = len(groups)
            groups.append(
                {
                    "names": names_,
                    "schema": schema,
                    "events": 0,
                    "first_ordinal": ordinal,
                    "last_ordinal": ordinal,
                    "first_sequence": None,
                    "last_sequence": None,
                    "error": None,
                }
            )
        group = groups[at]
        group["events"] += 1
        group["first_ordinal"] = min(group["first_ordinal"], ordinal)
        group["last_ordinal"] = max(group["last_ordinal"], ordinal)
        sequence = row[_SEQUENCE]
        if sequence is not None:
            if group["first_sequence"] is None or sequence < group["first_sequence"]:
                group["first_sequence"] = sequence
            if group["last_sequence"] is None or sequence > group["last_sequence"]:
                group["last_sequence"] = sequence
    # A stable sort by first ordinal, as the Rust core's.
    groups.sort(key=lambda g: g["first_ordinal"])
    columns: dict[str, list] = {f.name: [] for f in SCHEMA_PASS_SCHEMA}
    for g in groups:
        schema = g["schema"]
        for i, name in enumerate(("source_db", "source_schema", "source_table")):
            columns[name].append(g["names"][i])
        if schema is None:
            columns["dialect"].append(None)
            columns["columns"].append(None)
            columns["key"].append(None)
        else:
            dialect, wire_columns, key = schema
            columns["dialect"].append(dialect)
            columns["columns"].append(
                [{"name": n, "source_type": t, "type": s} for n, t, s in wire_columns]
            )
            columns["key"].append(None if key is None else list(key))
        for name in (
            "events",
            "first_ordinal",
            "last_ordinal",
            "first_sequence",
            "last_sequence",
            "error",
        ):
            columns[name].append(g[name])
    arrays = [pa.array(columns[f.name], type=f.type) for f in SCHEMA_PASS_SCHEMA]
    batch = pa.RecordBatch.from_arrays(arrays, schema=SCHEMA_PASS_SCHEMA)
    return batch, pa.array([g["first_ordinal"] for g in groups], type=pa.int64())


# --- values wider than the wire's type (rust/schemas/widen.rs) ---------------------------

_MAX_DIGITS = 38
_INTEGERS = {"tinyint": (8, 3), "smallint": (16, 5), "int": (32, 10), "bigint": (64, 20)}
_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?")
_I64_MAX = (1 << 63) - 1


def _holds(spark: str | None) -> tuple | None:
    """``("int", min, max, digits)`` or ``("decimal", whole, scale)``; ``None`` for other
    types."""
    if spark in _INTEGERS:
        bits, digits = _INTEGERS[spark]
        return ("int", -(1 << (bits - 1)), (1 << (bits - 1)) - 1, digits)
    found = re.fullmatch(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)", spark or "")
    if found is None:
        return None
    p, s = int(found.group(1)), int(found.group(2))
    return None if s > p else ("decimal", p - s, s)


def _digits(text: str) -> tuple[int, int, bool, int] | None:
    """Digits before and after the point of a number's text once its exponent is applied
    (leading and trailing zeros aside), whether it is an integer as written, and its value
    when it is one (of at most 38 digits)."""
    found = _NUMBER.fullmatch(text)
    if found is None:
        return None
    sign, whole, fraction, exponent_sign, exponent = found.groups()
    if not whole and not fraction:
        return None
    plain = fraction is None and exponent is None
    shift = 0
    if exponent is not None:
        digits = exponent.lstrip("0")
        # Saturated as the Rust core's i64: a million-digit exponent is just "many".
        shift = _I64_MAX if len(digits) > 19 else min(int(digits or "0"), _I64_MAX)
        shift = -shift if exponent_sign == "-" else shift
    whole = whole.lstrip("0")
    fraction = (fraction or "").rstrip("0")
    value = int(sign + whole) if plain and whole and len(whole) <= 38 else 0
    left, right = len(whole), len(fraction)
    if left == 0:
        zeros = len(fraction) - len(fraction.lstrip("0"))
        if zeros == len(fraction):
            return (0, 0, plain, 0)
        left = -zeros
    return (max(left + shift, 0), max(right - shift, 0), plain, value)


def _need(holds: tuple, text: str) -> tuple[int, int] | None:
    found = _digits(text)
    if found is None:
        return None
    whole, scale, plain, value = found
    if holds[0] == "int":
        if not plain or scale:
            return None
        if whole <= 38 and holds[1] <= value <= holds[2]:
            return None
        return (whole, 0)
    return (whole, scale) if whole > holds[1] or scale > holds[2] else None


def widened(spark: str, need: tuple[int, int]) -> str:
    """The Spark type a column of ``spark`` takes to hold values needing ``need`` (digits
    before and after the point) as well: a wider ``decimal``, ``string`` past 38 digits."""
    holds = _holds(spark)
    if holds is None:
        return spark
    if holds[0] == "int":
        whole, scale = max(holds[3], need[0]), need[1]
    else:
        whole, scale = max(holds[1], need[0]), max(holds[2], need[1])
    return f"decimal({whole + scale},{scale})" if whole + scale <= _MAX_DIGITS else "string"


def widen(schema: WireSchema, *images: list | None) -> WireSchema:
    """``schema`` with each integer and decimal column widened to what the images' values
    need (docs/types.md, "Values wider than the wire's type"); ``schema`` itself when
    every value fits."""
    dialect, columns, key = schema
    checked = {
        name: (i, holds)
        for i, (name, _, spark) in enumerate(columns)
        if (holds := _holds(spark)) is not None
    }
    if not checked:
        return schema
    needs: dict[int, tuple[int, int]] = {}
    for image in images:
        seen: set[str] = set()
        for name, text in image or ():
            if name not in checked or name in seen:
                continue
            seen.add(name)
            at, holds = checked[name]
            need = None if text is None else _need(holds, text)
            if need is not None:
                old = needs.get(at, (0, 0))
                needs[at] = (max(old[0], need[0]), max(old[1], need[1]))
    if not needs:
        return schema
    wider = list(columns)
    for at, need in needs.items():
        name, source_type, spark = wider[at]
        wider[at] = (name, source_type, widened(spark, need))
    return (dialect, tuple(wider), key)
