"""In-process throughput of the two engines on the same generated stream (`make bench`).

pytest-benchmark times each engine; the summary printed at the end gives messages/s,
rows/s and MB/s per engine and stream, and the native/python ratio measured side by side.
Not part of `make test`: speed is shown here, never asserted in tests.

The generator's default stream for every format (all five tables, 9-20 columns), and the
"reference shapes" the speed goals are stated on, from the narrowest table alone
(``shop.order_items``, 8 columns, 9 after its ``ADD COLUMN``): for tencent-dts, messages of
about 2.5 KB holding about 10 events; for datahub-blob, messages of about 700 bytes.
``datahub-tuple`` decodes records, not messages (one event each): its default topic is
``shop.users`` (17 data columns, every DataHub type), and ``shop.order_items`` is the
narrow one; its "bytes" are the Arrow buffers'. The tdsql-json stream is decoded twice:
images keyed by position, and named by ``columns=`` as a consumer who knows its tables does.
``datastream-avro`` decodes whole files (a "message" is a file): the generator's default
files (about 3 events each, mixed codecs, as a quiet table's rotation leaves them), and
files of up to 500 events of one table (``MESSAGES / 25`` of them), the python engine being
fastavro behind the same container reader.

Streams are generated when a benchmark first needs one, so ``-k avro`` runs quickly.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode.generate import FORMATS as generate_formats
from cdc_decode.generate import generate

MESSAGES = int(os.environ.get("CDC_BENCH_MESSAGES", "5000"))
RESULTS: dict[tuple[str, str], float] = {}

REFERENCE = "tencent-dts (2.5 KB / 10 rows)"
"""The label of the tencent-dts reference-shape stream."""

BLOB_REFERENCE = "datahub-blob (700 B)"
"""The label of the datahub-blob reference-shape stream."""
NARROW_TUPLE = "datahub-tuple (order_items)"
TDSQL_NAMED = "tdsql-json (columns=)"
"""The default tdsql-json stream decoded with its column names (images keyed by name)."""

GENERATED = [fmt for fmt in cdc_decode.FORMATS if fmt in generate_formats]

DEBEZIUM = "debezium-json (Flink fixture)"
"""Real Debezium messages beside the generated ones: the 16 events of the shared Flink
PostgreSQL fixture (about 400 bytes each, no wrapper), repeated."""

AVRO_FILES = "datastream-avro (500-event files)"
"""Datastream Avro files as Datastream rotates them: one table, up to 500 events a file."""

STREAMS: dict[str, tuple[str, dict]] = {
    **{fmt: (fmt, {}) for fmt in GENERATED},
    REFERENCE: (
        "tencent-dts",
        {
            "tables": ["shop.order_items"],
            "rows_per_message": 10,
            "message_bytes": 2800,  # the entries budget: values average about 2.5 KB
        },
    ),
    BLOB_REFERENCE: ("datahub-blob", {"tables": ["shop.order_items"]}),
    NARROW_TUPLE: ("datahub-tuple", {"tables": ["shop.order_items"]}),
    TDSQL_NAMED: ("tdsql-json", {}),
    DEBEZIUM: ("debezium-json", {}),
    AVRO_FILES: (
        "datastream-avro",
        {"tables": ["shop.order_items"], "rows_per_message": 500, "messages": MESSAGES // 25},
    ),
}
"""Label -> (format, extra ``generate`` options; ``messages`` replaces :data:`MESSAGES`)."""


def _fixture_stream():
    path = Path(__file__).parents[2] / "shared" / "fixtures" / "debezium"
    lines = (path / "flink-postgres-schema-exclude.jsonl").read_bytes().split(b"\n")
    lines = [line for line in lines if line.strip()]
    values = (lines * (MESSAGES // len(lines) + 1))[:MESSAGES]
    stream = SimpleNamespace(messages=len(values), rows=len(values), bytes=sum(map(len, values)))
    return stream, pa.array(values, pa.binary())


class _Streams(dict):
    """Label -> (format, stream, values), each generated when a benchmark first asks for it:
    ``-k avro`` generates the Avro streams only."""

    def __missing__(self, label: str) -> tuple:
        fmt, options = STREAMS[label]
        if label == DEBEZIUM:
            self[label] = (fmt, *_fixture_stream())
            return self[label]
        options = {"messages": MESSAGES, **options}
        stream = generate(fmt, seed=1, **options)
        values = stream.values  # a Table of records for datahub-tuple
        if not isinstance(values, pa.Table):
            values = pa.array(values, pa.binary())
        self[label] = (fmt, stream, values)
        return self[label]


@pytest.fixture(scope="module")
def streams():
    return _Streams()


@pytest.fixture(scope="module", autouse=True)
def summary(streams):
    yield
    width = max(map(len, streams), default=0) + 2
    lines = [
        "",
        f"{'stream':<{width}}{'bytes/msg':>10}{'events/msg':>11}",
    ]
    for label, (_fmt, stream, _values) in streams.items():
        lines.append(
            f"{label:<{width}}{stream.bytes / stream.messages:>10,.0f}"
            f"{stream.rows / stream.messages:>11.2f}"
        )
    lines += ["", f"{'stream':<{width}}{'engine':<8}{'messages/s':>14}{'rows/s':>14}{'MB/s':>9}"]
    ratios = []
    for label, (_fmt, stream, _values) in streams.items():
        for engine in ("native", "python"):
            secs = RESULTS.get((label, engine))
            if secs:
                lines.append(
                    f"{label:<{width}}{engine:<8}{stream.messages / secs:>14,.0f}"
                    f"{stream.rows / secs:>14,.0f}{stream.bytes / secs / 1e6:>9.1f}"
                )
        if (label, "native") in RESULTS and (label, "python") in RESULTS:
            ratio = RESULTS[(label, "python")] / RESULTS[(label, "native")]
            ratios.append(f"{label}: native is {ratio:.1f}x the python fallback")
    print("\n".join(lines + [""] + ratios))


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("label", list(STREAMS))
def test_decode(benchmark, streams, label, engine):
    fmt, stream, values = streams[label]
    # Steady state, as a long-running executor sees it: the first native rounds fault in
    # the memory that later batches reuse (several times slower), so they are warm-up.
    rounds, warmup = (15, 5) if engine == "native" else (2, 0)
    options = {"columns": stream.options["columns"]} if label == TDSQL_NAMED else {}
    batch = benchmark.pedantic(
        cdc_decode.decode,
        args=(values, fmt),
        kwargs={"engine": engine, **options},
        warmup_rounds=warmup,
        rounds=rounds,
        iterations=1,
    )
    assert batch.num_rows == stream.rows
    RESULTS[(label, engine)] = benchmark.stats.stats.min
