"""Kafka -> decode_stream -> foreachBatch(apply_changes) -> Delta, against a real broker
(tests/support/kafka.py) on Delta 4.4.0 / Spark 4.2, local[1].

The generated streams go onto 3-partition topics (a DTS multi-part set whole in one
partition); the restart tests read them in small micro-batches, and one cuts a DTS set
between two of them. The Delta table must equal the generator's final_state.json after a plain
run, after a stop and a restart from the checkpoint with more records produced in between,
and after the driver is SIGKILLed between a micro-batch's Delta commit and its checkpoint
commit (so Spark runs that micro-batch again). The decode accounting adds up over all
micro-batches and restarts: messages == decoded + errors + pending, with the sum of
messages equal to the records produced, each counted once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import kill_when, wait_for
from support.kafka import new_topic, produce, produce_records, records
from support.stream_apply import ApplySink, run

from cdc_decode import _proto as pb
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate

TABLE = "shop.users"
SUPPORT = Path(__file__).resolve().parents[1] / "support"


def _stream(format: str, seed: int, *, messages: int = 120):
    if format == "tencent-dts":  # 1 KiB parts: a multi-part set every few messages
        return generate(
            format, messages=messages, seed=seed, max_message_bytes=1024, tables=[TABLE]
        )
    return generate(format, messages=90, seed=seed, tables=[TABLE])


def _columns(stream) -> list[str]:
    columns: dict[str, None] = dict.fromkeys(stream.primary_keys[TABLE])
    for row in stream.final_state.get(TABLE, {}).values():
        columns.update(dict.fromkeys(row))
    return list(columns)


def _sink(spark, tmp_path: Path, stream, **options) -> ApplySink:
    """Generic events (text maps) applied with every column ``string``: the values compare
    with the generator's text exactly, and partial images keep their absent columns."""
    return ApplySink(
        tmp_path / "users",
        tmp_path / "log",
        keys=stream.primary_keys[TABLE],
        schema=", ".join(f"`{c}` string" for c in _columns(stream)),
        accounting=None if spark is None else cdc_spark.DecodeAccounting(spark),
        **options,
    )


def _assert_equals_source(spark, sink: ApplySink, stream) -> None:
    keys = stream.primary_keys[TABLE]
    columns = _columns(stream)
    want = {
        tuple(row[k] for k in keys): {c: row.get(c) for c in columns}
        for row in stream.final_state.get(TABLE, {}).values()
    }
    rows = cdc_spark.current_rows(spark, sink.target).collect()
    got = {tuple(r[k] for k in keys): r.asDict() for r in rows}
    assert len(rows) == len(got)  # one live row per key
    assert got.keys() == want.keys()
    assert got == want


def _assert_accounted(sink: ApplySink, stream) -> None:
    """Every micro-batch adds up, and so do the sums: each record counted once."""
    counts = sink.counts()
    assert [c["batch_id"] for c in counts] == list(range(len(counts)))  # none missing
    for c in counts:
        assert c["messages"] == c["decoded"] + c["errors"] + c["pending"], c
        assert c["errors"] == 0, c
    totals = {k: sum(c[k] for c in counts) for k in ("messages", "decoded", "pending")}
    assert totals["messages"] == stream.messages
    assert totals["pending"] == 0  # every set completed


@pytest.mark.parametrize("format", ["tencent-dts", "debezium-json"])
def test_stream_into_delta_equals_the_source(delta_spark, kafka_broker, tmp_path, format):
    stream = _stream(format, 5)
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    sink = _sink(delta_spark, tmp_path, stream, app_id=f"sync-{topic}")
    checkpoint = tmp_path / "checkpoint"
    run(delta_spark, kafka_broker.bootstrap, topic, format, checkpoint=checkpoint, sink=sink)
    assert sink.batches() == [0]
    _assert_equals_source(delta_spark, sink, stream)
    _assert_accounted(sink, stream)


def _inside_a_set(recs, start: int) -> int:
    """An index from ``start`` on that cuts a multi-part set after its part 0."""
    for i in range(start, len(recs)):
        envelope = pb.Envelope.FromString(recs[i][1])
        if envelope.index == 0 and envelope.total >= 2:
            return i + 1
    raise AssertionError("no multi-part set")


def test_stop_produce_more_and_restart(delta_spark, kafka_broker, tmp_path):
    """A running query takes the first records in micro-batches of 25, its last one ending
    inside a DTS set; it is stopped, the rest is produced, and a new query from the
    checkpoint applies it, the held parts of that set first."""
    stream = _stream("tencent-dts", 11)
    recs = records("tencent-dts", stream.values, partitions=3)
    cut = _inside_a_set(recs, len(recs) // 3)
    topic = new_topic(kafka_broker, partitions=3)
    produce_records(kafka_broker.bootstrap, topic, recs[:cut])
    sink = _sink(delta_spark, tmp_path, stream, app_id=f"sync-{topic}")
    options = {"checkpoint": tmp_path / "checkpoint", "sink": sink, "max_offsets": 25}
    query = run(
        delta_spark, kafka_broker.bootstrap, topic, "tencent-dts", available_now=False, **options
    )
    try:
        wait_for(lambda: sum(c["messages"] for c in sink.counts()) == cut, what="the first records")
    finally:
        query.stop()
    stopped_at = len(sink.batches())
    assert stopped_at >= 2
    assert sum(c["pending"] for c in sink.counts()) > 0  # the cut set's part(s) held
    produce_records(kafka_broker.bootstrap, topic, recs[cut:])
    run(delta_spark, kafka_broker.bootstrap, topic, "tencent-dts", **options)
    assert len(sink.batches()) > stopped_at
    _assert_equals_source(delta_spark, sink, stream)
    _assert_accounted(sink, stream)


def _job(broker, topic, tmp_path: Path, sink: ApplySink, *extra: str) -> subprocess.Popen:
    """The query as its own driver process (a new process group, so that a kill takes its
    JVM and Python workers too), its output in ``job.log``."""
    command = [sys.executable, str(SUPPORT / "stream_apply.py"), "--bootstrap", broker.bootstrap]
    command += ["--topic", topic, "--checkpoint", str(tmp_path / "checkpoint")]
    command += ["--target", sink.target, "--log", str(sink.log), "--max-offsets", "24"]
    command += ["--keys", ",".join(sink.keys), "--schema", sink.schema]
    command += ["--warehouse", str(tmp_path / "warehouse")]
    if sink.app_id is not None:
        command += ["--app-id", sink.app_id]
    with open(tmp_path / "job.log", "ab") as log:
        return subprocess.Popen(
            [*command, *extra],
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )


def test_sigkill_after_the_delta_commit_and_restart(delta_spark, kafka_broker, tmp_path):
    """Micro-batch 1 commits to Delta, then the driver dies before Spark records the
    micro-batch in the checkpoint: the restarted query runs micro-batch 1 again (same
    offsets, same DTS state). No app id here, so Delta does not skip the replay: the MERGE
    runs again and its sequence guard leaves the table as it was. (With ``app_id``, as in
    the other tests, Delta would skip it: ``ApplyResult.skipped``.)"""
    # 60 messages, their row changes in the first 48 or so (then heartbeats): micro-batch
    # 1 (records 24 to 48) has changes to write.
    stream = _stream("tencent-dts", 13, messages=60)
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    sink = _sink(None, tmp_path, stream)
    job = _job(kafka_broker, topic, tmp_path, sink, "--pause-at", "1", "--pause", "600")
    applied = sink.log / "000001.applied"
    kill_when(job, applied.exists, tmp_path / "job.log", what="micro-batch 1")
    assert sink.batches() == [0]  # micro-batch 1 reached Delta, not the checkpoint
    commits = Path(tmp_path / "checkpoint" / "commits")
    assert sorted(p.name for p in commits.iterdir() if p.name.isdigit()) == ["0"]
    # The restart: this test's driver, from the checkpoint (a process that is not the
    # killed one; it needs no JVM of its own).
    again = _sink(delta_spark, tmp_path, stream, on_stale="ignore")  # the replay: all stale
    run(delta_spark, kafka_broker.bootstrap, topic, "tencent-dts",
        checkpoint=tmp_path / "checkpoint", sink=again, max_offsets=24)  # fmt: skip
    counts = sink.counts()
    assert len(counts) >= 3  # 60 records at 24 a micro-batch
    assert counts[1]["changes"] > 0 and not counts[1]["skipped"]  # micro-batch 1, replayed
    _assert_equals_source(delta_spark, sink, stream)
    _assert_accounted(sink, stream)
