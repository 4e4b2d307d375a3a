"""Comparing two engines' batches: equal in every column, except that the engines may word
an error differently (the ``error`` column must be null in the same rows). A float NaN
(typed mode converts the text ``NaN``) equals a NaN, which Arrow's ``equals`` does not say."""

from __future__ import annotations

import math

import pyarrow as pa


def same(a, b) -> bool:
    """``a == b`` for Python values of batches, with NaN equal to NaN at any depth."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def has_nan(value) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, dict):
        return any(has_nan(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_nan(v) for v in value)
    return False


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
        bad = [i for i in range(len(got)) if not same(got[i], want[i])]
        for i in bad[:limit]:
            problems.append(f"row {i} {name}: native {got[i]!r} != python {want[i]!r}")
        if not bad and not has_nan(got):  # Arrow's equals calls NaN unequal to NaN
            problems.append(f"{name}: equal values, different Arrow layout")
    assert not problems, "\n".join(problems)
