"""In-process throughput of the two engines on the same generated stream (`make bench`).

pytest-benchmark times each engine; the summary printed at the end gives messages/s,
rows/s and MB/s per engine and format, and the native/python ratio measured side by side.
Not part of `make test`: speed is shown here, never asserted in tests.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode.generate import generate

MESSAGES = int(os.environ.get("CDC_BENCH_MESSAGES", "5000"))
RESULTS: dict[tuple[str, str], float] = {}


@pytest.fixture(scope="module")
def streams():
    out = {}
    for fmt in cdc_decode.FORMATS:
        stream = generate(fmt, messages=MESSAGES, seed=1)
        out[fmt] = (stream, pa.array(stream.values, pa.binary()))
    return out


@pytest.fixture(scope="module", autouse=True)
def summary(streams):
    yield
    lines = ["", f"{'format':<14}{'engine':<8}{'messages/s':>14}{'rows/s':>14}{'MB/s':>9}"]
    for fmt, (stream, _values) in streams.items():
        for engine in ("native", "python"):
            secs = RESULTS.get((fmt, engine))
            if secs:
                lines.append(
                    f"{fmt:<14}{engine:<8}{stream.messages / secs:>14,.0f}"
                    f"{stream.rows / secs:>14,.0f}{stream.bytes / secs / 1e6:>9.1f}"
                )
        if (fmt, "native") in RESULTS and (fmt, "python") in RESULTS:
            ratio = RESULTS[(fmt, "python")] / RESULTS[(fmt, "native")]
            lines.append(f"{fmt}: native is {ratio:.1f}x the python fallback")
    print("\n".join(lines))


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("fmt", cdc_decode.FORMATS)
def test_decode(benchmark, streams, fmt, engine):
    stream, values = streams[fmt]
    rounds = 10 if engine == "native" else 2
    batch = benchmark.pedantic(
        cdc_decode.decode,
        args=(values, fmt),
        kwargs={"engine": engine},
        rounds=rounds,
        iterations=1,
    )
    assert batch.num_rows == stream.rows
    RESULTS[(fmt, engine)] = benchmark.stats.stats.min
