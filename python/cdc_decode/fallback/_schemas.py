"""The schema pass in the Python engine: the twin of ``rust/schemas/mod.rs``.

A format reports each event row's wire schema to the sink (:meth:`EventSink.observe`): a
hashable tuple ``(dialect, columns, key)``, ``columns`` a tuple of ``(name, source type,
Spark type)``, ``key`` a tuple of names or ``None``; :func:`aggregate` makes the call's
rows of :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA` of them.
"""

from __future__ import annotations

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
