"""Ground truth for routed tables (``sync(routes=)``): a table that many source tables
(the shards of a sharded database, ``generate(fmt, shards=N)``) were applied into must hold
the union of their final rows, each value in the routed table's type (the type every
shard's values fit), and null in the columns its shard does not have."""

from __future__ import annotations

from typing import Any

from cdc_decode.generate import Stream
from cdc_decode.generate.truth import _normal, _want, same

DB = "_cdc_meta_source_db"
TABLE = "_cdc_meta_source_table"


def routed_differences(
    spark: Any, stream: Stream, target: str, *, by_shard: bool = True, limit: int = 10
) -> list[str]:
    """What differs between the routed table ``target`` and the union of the stream's
    tables' final values (empty: equal). ``by_shard``: the table's key holds the source
    database and table (``route_keys="per-table"``); else the source key alone, unique
    across the tables (``"unique"``)."""
    from cdc_decode import spark as cdc_spark

    frame = cdc_spark.current_rows(spark, target)
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    got: dict[tuple, dict] = {}
    for row in frame.collect():
        values = row.asDict()
        at = tuple(_normal(values[k]) for k in ("id",))
        got[((values[DB], values[TABLE]) if by_shard else ()) + at] = values
    out: list[str] = []
    want_rows = sum(len(rows) for _, rows in stream.final_values.values())
    if len(got) != want_rows:
        out.append(f"{target}: {len(got)} rows, the sources have {want_rows}")
    for name, (columns, rows) in sorted(stream.final_values.items()):
        db, table = name.split(".")
        for source_key, row in rows.items():
            keys = zip(stream.primary_keys[name], source_key, strict=True)
            at = tuple(_want(stream.format, columns[k], types[k], v) for k, v in keys)
            at = ((db, table) if by_shard else ()) + at
            have = got.get(at)
            if have is None:
                out.append(f"{name}: key {at} missing")
                continue
            if TABLE in have and have[TABLE] != table:
                out.append(f"{name} {at}: {TABLE} is {have[TABLE]!r}")
            for column, value in row.items():
                want = _want(stream.format, columns[column], types[column], value)
                if not same(want, _normal(have.get(column))):
                    out.append(f"{name} {at}: {column} is {have.get(column)!r}, want {want!r}")
            for column in types:  # the columns of other tables: null in this one's rows
                if column not in row and not column.startswith("_cdc_meta_"):
                    if have.get(column) is not None:
                        out.append(f"{name} {at}: {column} is {have[column]!r}, not null")
        if len(out) >= limit:
            break
    return out[:limit]


def routed_columns(stream: Stream) -> dict[str, str]:
    """The routed table's columns and the type each needs: the widest of the tables'
    (``generate(shards=N)``'s narrow ``qty`` and ``amount`` widen to the others')."""
    from cdc_decode.spark.sync import wider_type

    out: dict[str, str] = {}
    for columns, _ in stream.final_values.values():
        for name, column in columns.items():
            mine = _spark_type(column)
            out[name] = mine if name not in out else wider_type(out[name], mine) or "?"
    return out


def _spark_type(column: Any) -> str:
    """The Spark type docs/types.md maps the shards' MySQL types to."""
    if column.type in ("smallint", "int", "bigint"):
        return column.type
    if column.type == "decimal":
        return column.sql.replace(" ", "")
    if column.type == "datetime":
        return "timestamp_ntz"
    return "string"
