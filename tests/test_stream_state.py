"""The DTS streaming state step (``decode_stream``'s ``applyInPandasWithState`` function)
called directly, with a stand-in for Spark's ``GroupState``: what it holds, what it emits
and how it counts, for the cases a live broker makes hard to arrange (offsets that go back
after a topic is made again; a time-out). tests/test_streaming.py runs the same step in
real streaming queries."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode import _proto as pb
from cdc_decode.generate import generate
from cdc_decode.generate.kafka import records
from cdc_decode.spark import stream as stream_module


class State:
    """What ``_Job.run`` uses of Spark's ``GroupState``."""

    def __init__(self, value=None, *, timed_out: bool = False):
        self.value = value
        self.hasTimedOut = timed_out
        self.timeout_ms = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value) -> None:
        self.value = value

    def remove(self) -> None:
        self.value = None

    def setTimeoutDuration(self, ms: int) -> None:
        self.timeout_ms = ms


class Accounting:
    def __init__(self):
        self.reports = []

    def report(self, topic, partition, counts):
        self.reports.append(counts)


def _job(**options):
    base = {
        "format": "tencent-dts",
        "mode": "permissive",
        "engine": "native",
        "value_col": "value",
        "keep": ["topic", "partition", "offset"],
        "has_headers": False,
        "schema": None,
        "tables": None,
        "limits": cdc_decode.Limits(),
        "event_columns": None,
        "reporter": Accounting(),
        "pending_timeout_ms": None,
        "source_time_zone": None,
    }
    base.update(options)
    return stream_module._Job(**base)


def _frame(values: list[bytes], first_offset: int, *, pieces: int = 1) -> pd.DataFrame:
    """The packed rows of one topic-partition: ``pieces`` IPC blobs of the records."""
    rows = []
    step = max(1, -(-len(values) // pieces))
    for at in range(0, len(values), step):
        chunk = values[at : at + step]
        table = pa.table(
            {
                "value": pa.array(chunk, pa.binary()),
                "topic": pa.array(["t"] * len(chunk)),
                "partition": pa.array([0] * len(chunk), pa.int32()),
                "offset": pa.array(
                    range(first_offset + at, first_offset + at + len(chunk)), pa.int64()
                ),
            }
        )
        rows.append(("t", 0, first_offset + at, stream_module._blob(table)))
    return pd.DataFrame(rows, columns=["topic", "partition", "first_offset", "data"])


def _events(outputs) -> pa.Table:
    tables = [stream_module._read_blob(d) for frame in outputs for d in frame["data"]]
    return pa.concat_tables(tables) if tables else None


def _cut_set():
    stream = generate("tencent-dts", messages=80, seed=31, max_message_bytes=1024)
    values = [v for _, v, _ in records("tencent-dts", stream.values, partitions=1)]
    for i, v in enumerate(values):
        envelope = pb.Envelope.FromString(v)
        if i >= 5 and envelope.index == 0 and envelope.total >= 3:
            return values, i, envelope.total
    raise AssertionError("no set of 3 parts")


@pytest.mark.parametrize("pieces", [1, 5, 40])
def test_pieces_decode_as_one_batch(pieces):
    values, first, total = _cut_set()
    job = _job()
    state = State()
    cut = first + 2
    out = list(job.run(("t", 0), iter([_frame(values[:cut], 0, pieces=pieces)]), state))
    assert state.exists and state.get[1] == 2  # the two parts of the cut set, held
    out += list(job.run(("t", 0), iter([_frame(values[cut:], cut, pieces=pieces)]), state))
    assert not state.exists
    events = _events(out)
    expected = cdc_decode.decode(values, "tencent-dts")
    assert events.drop_columns(["topic", "partition", "offset"]).to_pylist() == (
        pa.Table.from_batches([expected]).to_pylist()
    )
    # the set's events carry its last part's offset
    last = first + total - 1
    assert events.column("offset").to_pylist().count(last) > 0
    for counts in job.reporter.reports:
        assert counts["messages"] == counts["decoded"] + counts["errors"] + counts["pending"]


def test_offsets_that_go_back_end_the_held_parts():
    """The held parts' offsets are at or after the new records' (a topic deleted and
    made again, offsets reset): the held parts become error rows at their own offsets, and
    the new records decode on their own."""
    values, first, _ = _cut_set()
    job = _job()
    state = State()
    list(job.run(("t", 0), iter([_frame(values[: first + 2], 0)]), state))
    assert state.get[1] == 2
    again = values[:first]  # the topic again from offset 0, without the cut set
    events = _events(job.run(("t", 0), iter([_frame(again, 0)]), state))
    assert not state.exists
    errors = events.filter(pa.compute.equal(events.column("op"), "error"))
    assert errors.column("offset").to_pylist() == [first, first + 1]
    assert errors.column("raw").to_pylist() == [values[first], values[first + 1]]
    good = events.filter(pa.compute.not_equal(events.column("op"), "error"))
    assert good.num_rows == cdc_decode.decode(again, "tencent-dts").num_rows
    counts = job.reporter.reports[-1]
    assert counts["messages"] == len(again)
    assert counts["pending"] == -2 and counts["errors"] == 2
    assert counts["messages"] == counts["decoded"] + counts["errors"] + counts["pending"]


def test_a_time_out_ends_the_held_parts():
    values, first, _ = _cut_set()
    job = _job(pending_timeout_ms=5000)
    state = State()
    list(job.run(("t", 0), iter([_frame(values[: first + 2], 0)]), state))
    assert state.get[1] == 2 and state.timeout_ms == 5000
    state.hasTimedOut = True
    events = _events(job.run(("t", 0), iter([]), state))
    assert not state.exists
    assert events.column("op").to_pylist() == ["error", "error"]
    assert events.column("offset").to_pylist() == [first, first + 1]
    counts = job.reporter.reports[-1]
    assert counts == {
        "messages": 0,
        "decoded": 0,
        "events": 0,
        "errors": 2,
        "dropped": 0,
        "pending": -2,
    }


def test_failfast_names_the_record_of_an_earlier_piece():
    values, first, _ = _cut_set()
    job = _job(mode="failfast")
    broken = values[:5] + [b"\x08\x01\x10\x01\x22\xff\xff\xff"] + values[5:20]
    with pytest.raises(cdc_decode.DecodeError, match=r"topic t, partition 0, offset 105: "):
        list(job.run(("t", 0), iter([_frame(broken, 100, pieces=4)]), State()))


def test_typed_in_the_source_time_zone():
    """``source_time_zone`` reaches the step's decoder: its rows are the batch decode's
    with the same zone."""
    stream = generate("tencent-dts", messages=60, seed=37, max_message_bytes=1024)
    values = [v for _, v, _ in records("tencent-dts", stream.values, partitions=1)]
    schemas = cdc_decode.table_schemas(values, "tencent-dts")
    # datetime columns as timestamps: their wall clocks are read in the zone
    tables = {
        name: ddl.replace("timestamp_ntz", "timestamp")
        for name, ddl in schemas.ddl(unknown="string").items()
    }
    job = _job(tables=tables, source_time_zone="Asia/Shanghai")
    events = _events(job.run(("t", 0), iter([_frame(values, 0, pieces=3)]), State()))
    rows = list(map(repr, events.drop_columns(["topic", "partition", "offset"]).to_pylist()))

    def decoded(zone):  # repr: typed doubles hold NaN, which is not equal to itself
        batch = cdc_decode.Decoder("tencent-dts", tables=tables, source_time_zone=zone).decode(
            values
        )
        return list(map(repr, batch.to_pylist()))

    assert rows == decoded("Asia/Shanghai")
    assert rows != decoded(None)
