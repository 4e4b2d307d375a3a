"""Ground truth for ``cdc_spark.sync``: every table a generated database stream
(``generate(fmt, table_count=N)``) was synced into must hold exactly the source's rows, each
value as the table's column type carries it (tests/support/typed_truth.py), a widened
column in its wider type."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cdc_decode.generate import Stream
from support.typed_truth import expected_value, same

UTC = dt.timezone.utc


def _normal(value: Any) -> Any:
    """Spark gives ``timestamp`` values as naive datetimes of the session's zone (UTC in
    the tests): the aware expectation's UTC wall clock."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _want(fmt: str, column: Any, spark_type: str, value: Any) -> Any:
    want = expected_value(fmt, column, spark_type, value)
    if isinstance(want, tuple) and len(want) == 2 and want[0] in ("time", "json"):
        return want
    return _normal(want)


def differences(
    spark: Any, stream: Stream, fmt: str, target_of: dict[str, str], limit: int = 10
) -> list[str]:
    """What differs between each synced table and the source's final values (empty: all
    equal). ``target_of``: source table -> its target."""
    from cdc_decode import spark as cdc_spark

    out: list[str] = []
    for name, (columns, rows) in stream.final_values.items():
        target = target_of.get(name)
        if target is None:
            out.append(f"{name}: not synced")
            continue
        frame = cdc_spark.current_rows(spark, target)
        types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        key = stream.primary_keys[name]
        got = {}
        for row in frame.collect():
            values = row.asDict()
            got[tuple(_normal(values[k]) for k in key)] = values
        if len(got) != len(rows):
            out.append(f"{name}: {len(got)} rows, the source has {len(rows)}")
        for source_key, row in rows.items():
            at = tuple(
                _want(fmt, columns[c], types[c], v) for c, v in zip(key, source_key, strict=True)
            )
            have = got.get(at)
            if have is None:
                out.append(f"{name}: key {at} missing")
                continue
            for column, value in row.items():
                if column not in types:
                    out.append(f"{name}: no column {column}")
                    continue
                want = _want(fmt, columns[column], types[column], value)
                if not same(want, _normal(have.get(column))):
                    out.append(f"{name} {at}: {column} is {have.get(column)!r}, want {want!r}")
        if len(out) >= limit:
            break
    return out[:limit]
