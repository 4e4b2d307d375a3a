"""tests/compare.py, the batch comparison the parity tests and the differential fuzz target
use: NaN equals NaN at any depth, and every other difference still fails."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from compare import assert_same_events

NAN = math.nan


def batch(values) -> pa.RecordBatch:
    image = pa.struct([("x", pa.float64()), ("y", pa.string())])
    return pa.RecordBatch.from_pydict(
        {"after": pa.array(values, image), "error": pa.array([None] * len(values), pa.string())}
    )


def test_nan_equals_nan_inside_a_struct():
    rows = [{"x": NAN, "y": "a"}, None, {"x": 1.5, "y": None}]
    assert not batch(rows).column("after").equals(batch(rows).column("after"))  # Arrow's view
    assert_same_events(batch(rows), batch(rows))


@pytest.mark.parametrize(
    "other",
    [
        [{"x": 1.0, "y": "a"}],  # NaN against a number
        [{"x": NAN, "y": "b"}],  # NaN in both, another field differs
        [None],
        [{"x": None, "y": "a"}],
    ],
)
def test_other_differences_still_fail(other):
    with pytest.raises(AssertionError, match="row 0 after"):
        assert_same_events(batch([{"x": NAN, "y": "a"}]), batch(other))
