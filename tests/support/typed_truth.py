"""What typed decoding with the wire's own schema must give for a generated database stream
(``generate(fmt, table_count=N)``): each table's rows, applied from the typed events, equal
to the source's own values (``Stream.final_values``) as each format carries them.

:func:`typed_rows` applies typed events (the ``after`` structs, without the columns
``after_absent`` names); ``expected_value`` and ``same`` (what one source value must become
in the column's mapped Spark type, for one format) are the package's
(:mod:`cdc_decode.generate.truth`), which ``make demo`` checks its tables with too.
"""

from __future__ import annotations

import pyarrow as pa

from cdc_decode.generate.truth import expected_value, same  # noqa: F401

UPSERTS = ("insert", "read", "update", "update_after")
REMOVES = ("delete", "update_before")


def typed_rows(batch: pa.RecordBatch, key: list[str]) -> dict[tuple, dict]:
    """One table's typed events applied in ``sequence`` order: key → row (column → value),
    a partial ``after`` keeping the columns it does not carry."""
    rows = batch.select(["op", "sequence", "before", "after", "after_absent"]).to_pylist()
    rows.sort(key=lambda r: (r["sequence"] is None, r["sequence"] or b""))
    state: dict[tuple, dict] = {}
    for row in rows:
        op = row["op"]
        if op in REMOVES:
            image = row["before"] if row["before"] is not None else row["after"]
            state.pop(tuple(image[k] for k in key), None)
        elif op in UPSERTS:
            absent = set(row["after_absent"] or ())
            after = {k: v for k, v in row["after"].items() if k not in absent}
            keyed = after if all(k in after for k in key) else row["before"]
            at = tuple(keyed[k] for k in key)
            state[at] = {**state.get(at, {}), **after}
    return state
