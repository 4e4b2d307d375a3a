"""Comparing two engines' batches: equal in every column, except that the engines may word
an error differently (the ``error`` column must be null in the same rows)."""

from __future__ import annotations

import pyarrow as pa


def assert_same_events(
    native: pa.RecordBatch | pa.Table, python: pa.RecordBatch | pa.Table, limit: int = 5
) -> None:
    """Fail with the first differing cells unless the batches are equal but for error text."""
    assert native.schema.equals(python.schema), f"{native.schema}\n---\n{python.schema}"
    assert native.num_rows == python.num_rows, (native.num_rows, python.num_rows)
    problems = []
    for name in native.schema.names:
        a, b = native.column(name), python.column(name)
        if name == "error":
            a, b = a.is_null(), b.is_null()
        if a.equals(b):
            continue
        got, want = a.to_pylist(), b.to_pylist()
        bad = [i for i in range(len(got)) if got[i] != want[i]]
        for i in bad[:limit]:
            problems.append(f"row {i} {name}: native {got[i]!r} != python {want[i]!r}")
        if not bad:
            problems.append(f"{name}: equal values, different Arrow layout")
    assert not problems, "\n".join(problems)
