"""Structured Streaming from a real Kafka broker (tests/support/kafka.py): every Kafka-borne
format decoded by a streaming query equals the batch decode; Tencent DTS multi-part sets cut
by micro-batch boundaries are joined, across a stop, a restart and a SIGKILLed driver; bad
records on a live stream are error rows (or, in failfast, stop the query naming the
record). The sink is tests/support/streaming.py's idempotent one (a file per batchId)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.compute as pc
import pytest
from support.jobs import kill_when, wait_for
from support.kafka import new_topic, produce, produce_records, records
from support.streaming import BatchSink, kafka_batch, kafka_source, run

import cdc_decode
from cdc_decode import _proto as pb
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import apply_events, generate
from cdc_decode.generate.kafka import KAFKA_FORMATS

pytestmark = pytest.mark.spark

SUPPORT = Path(__file__).resolve().parent / "support"
ROOT = SUPPORT.parent.parent


def _rows(table) -> list[str]:
    """A table's rows as sorted text: equal lists mean equal multisets of rows."""
    return sorted(map(repr, table.to_pylist()))


def _options(stream) -> dict:
    return {"columns": stream.options["columns"]} if stream.format == "tdsql-json" else {}


def _dts(messages: int, seed: int):
    # 1 KiB parts: a multi-part set (of 2 to 4 parts) every few messages.
    return generate("tencent-dts", messages=messages, seed=seed, max_message_bytes=1024)


def _totals(sink: BatchSink) -> dict[str, int]:
    counts = sink.counts()
    return {k: sum(c[k] for c in counts) for k in cdc_spark.STATS}


def _assert_accounted(sink: BatchSink, messages: int) -> None:
    """Every micro-batch adds up, and so do the sums: nothing lost, nothing twice."""
    for c in sink.counts():
        assert c["messages"] == c["decoded"] + c["errors"] + c["pending"], c
    totals = _totals(sink)
    assert totals["messages"] == messages
    assert totals["messages"] == totals["decoded"] + totals["errors"] + totals["pending"]
    assert totals["pending"] == 0  # every set completed


def _assert_equals_batch(spark, broker, topic, stream, sink) -> None:
    """The streamed rows are the batch decode's; applied, they are the source's tables."""
    streamed = sink.table()
    batch = cdc_spark.decode(
        kafka_batch(spark, broker.bootstrap, topic), stream.format, **_options(stream)
    ).toArrow()
    assert streamed.num_rows == stream.rows
    assert _rows(streamed) == _rows(batch)
    assert streamed.column("error").null_count == streamed.num_rows
    assert apply_events(streamed, primary_keys=stream.primary_keys) == stream.final_state


@pytest.mark.parametrize("format", KAFKA_FORMATS)
def test_stream_equals_batch(spark, kafka_broker, tmp_path, format):
    stream = _dts(240, 5) if format == "tencent-dts" else generate(format, messages=150, seed=5)
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    run(
        spark,
        kafka_broker.bootstrap,
        topic,
        format,
        checkpoint=tmp_path / "checkpoint",
        sink=sink,
        max_offsets=stream.messages // 3 + 1,
        **_options(stream),
    )
    assert len(sink.batches()) == 3
    _assert_equals_batch(spark, kafka_broker, topic, stream, sink)
    _assert_accounted(sink, stream.messages)
    if format == "tencent-dts":  # sets were cut by the micro-batches, and joined
        assert max(c["pending"] for c in sink.counts()) > 0
        # On a batch DataFrame, decode_stream is decode.
        batch = kafka_batch(spark, kafka_broker.bootstrap, topic)
        assert _rows(cdc_spark.decode_stream(batch, format).toArrow()) == _rows(sink.table())


def _a_set(recs, *, start: int = 0, parts: int = 3):
    """``(first, last)`` record indexes of the first multi-part set of at least ``parts``
    parts from ``start`` on."""
    for i in range(start, len(recs)):
        envelope = pb.Envelope.FromString(recs[i][1])
        if envelope.index == 0 and envelope.total >= parts:
            return i, i + envelope.total - 1
    raise AssertionError(f"no multi-part set of {parts} parts")


def test_set_split_across_two_micro_batches_and_a_restart(spark, kafka_broker, tmp_path):
    stream = _dts(120, 7)
    recs = records("tencent-dts", stream.values, partitions=2)
    first, last = _a_set(recs)
    cut = first + 2  # parts 0 and 1 in the first micro-batch, the rest in the second
    topic = new_topic(kafka_broker, partitions=2)
    produce_records(kafka_broker.bootstrap, topic, recs[:cut])
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    options = {"checkpoint": tmp_path / "checkpoint", "sink": sink}
    run(spark, kafka_broker.bootstrap, topic, "tencent-dts", **options)
    assert sink.batches() == [0]
    (held,) = sink.counts()
    assert held["pending"] >= 2  # at least the two parts of the cut set are held
    # A new query from the checkpoint: the held parts come back from the state store.
    produce_records(kafka_broker.bootstrap, topic, recs[cut:])
    run(spark, kafka_broker.bootstrap, topic, "tencent-dts", **options)
    assert sink.batches() == [0, 1]
    table = sink.table()
    partition = recs[last][0]
    offset = sum(1 for p, _, _ in recs[:last] if p == partition)  # the last part's offset
    rows = [r for r in table.to_pylist() if r["partition"] == partition and r["offset"] == offset]
    expected = cdc_decode.decode(
        [v for p, v, _ in recs[first : last + 1] if p == partition], "tencent-dts"
    )
    assert len(rows) == expected.num_rows > 0
    assert all(r["error"] is None for r in rows)
    _assert_equals_batch(spark, kafka_broker, topic, stream, sink)
    _assert_accounted(sink, stream.messages)


def test_stop_mid_stream_and_restart(spark, kafka_broker, tmp_path):
    stream = _dts(240, 11)
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    options = {"checkpoint": tmp_path / "checkpoint", "sink": sink, "max_offsets": 40}
    query = run(spark, kafka_broker.bootstrap, topic, "tencent-dts", available_now=False, **options)
    try:
        wait_for(lambda: len(sink.batches()) >= 2, what="two micro-batches")
    finally:
        query.stop()
    stopped_at = len(sink.batches())
    assert stopped_at < 6  # 240 records at 40 a micro-batch: it stopped part-way
    run(spark, kafka_broker.bootstrap, topic, "tencent-dts", **options)
    assert len(sink.batches()) > stopped_at
    _assert_equals_batch(spark, kafka_broker, topic, stream, sink)
    _assert_accounted(sink, stream.messages)


def test_a_micro_batch_is_sized_by_its_kafka_offsets(spark, kafka_broker, tmp_path):
    """Spark's Kafka source reports no size, so the optimizer's estimate of a micro-batch is
    its default, larger than any batch; ``apply_changes`` sizes the frame ``foreachBatch``
    hands over by its offset ranges instead (``_plans.batch_bytes``): its records, through
    the decoding (Tencent DTS's sets held across micro-batches in state, a shuffle), at
    ``KAFKA_RECORD_BYTES`` each. A frame that is not a micro-batch keeps the estimate."""
    from cdc_decode.spark import _plans

    stream = _dts(120, 13)
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    seen: list[tuple[int | None, int | None, int]] = []

    def sink(batch, _batch_id):
        seen.append((_plans.kafka_records(batch), _plans.batch_bytes(batch), batch.count()))

    source = kafka_source(spark, kafka_broker.bootstrap, topic, max_offsets=50)
    (
        cdc_spark.decode_stream(source, "tencent-dts")
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .foreachBatch(sink)
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    records = [r for r, _, _ in seen]
    assert len(seen) == 3 and sum(records) == stream.messages  # at most 50 a micro-batch,
    assert all(0 < r <= 50 for r in records), records  # shared among the partitions
    assert [size for _, size, _ in seen] == [r * _plans.KAFKA_RECORD_BYTES for r in records]
    assert sum(rows for _, _, rows in seen) == stream.rows
    local = spark.range(3)
    assert _plans.kafka_records(local) is None
    assert _plans.batch_bytes(local) == _plans.estimated_bytes(local) == 24


def test_a_batch_read_from_column_files_counts_as_its_rows(spark, tmp_path):
    """The optimizer's estimate of a frame that reads Parquet or ORC files is their
    compressed size, several times smaller than the rows (165 to 171 bytes a typed event
    of 12 columns); ``batch_bytes`` multiplies it by ``COLUMNAR_FILE_FACTOR`` there, and
    only there: a JSON file's estimate, rows made on the driver and a plan that also reads
    something else stay as they are."""
    from cdc_decode.spark import _plans

    rows = spark.range(1000).selectExpr("id", "cast(id AS string) AS name")
    for fmt in ("parquet", "orc", "json"):
        rows.write.format(fmt).save(str(tmp_path / fmt))
    factor = _plans.COLUMNAR_FILE_FACTOR
    assert factor > 1
    for fmt in ("parquet", "orc"):
        read = spark.read.format(fmt).load(str(tmp_path / fmt)).where("id > 3")
        assert _plans.batch_bytes(read) == factor * _plans.estimated_bytes(read) > 0, fmt
    text = spark.read.json(str(tmp_path / "json"))
    assert _plans.batch_bytes(text) == _plans.estimated_bytes(text) > 0
    parquet = spark.read.parquet(str(tmp_path / "parquet"))
    mixed = parquet.unionByName(rows)
    assert _plans.batch_bytes(mixed) == _plans.estimated_bytes(mixed)


def _job(broker, topic, tmp_path, *extra: str) -> subprocess.Popen:
    """The query as its own driver process (a new process group, so that a kill takes
    its JVM and Python workers too), its output in ``job.log``."""
    with open(tmp_path / "job.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, str(SUPPORT / "streaming.py"), "--bootstrap", broker.bootstrap]
            + ["--topic", topic, "--checkpoint", str(tmp_path / "checkpoint")]
            + ["--sink", str(tmp_path / "sink"), "--max-offsets", "60", *extra],
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )


def test_sigkill_the_driver_mid_batch_and_restart(spark, kafka_broker, tmp_path):
    stream = _dts(240, 13)
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    sink = BatchSink(tmp_path / "sink")
    job = _job(kafka_broker, topic, tmp_path, "--pause-at", "1", "--pause", "600")
    # Micro-batch 1 has written its rows and not yet its accounting, nor told Spark it is
    # done: kill the driver (its JVM and workers with it) there.
    started = tmp_path / "sink" / "000001.started"
    kill_when(job, started.exists, tmp_path / "job.log", what="micro-batch 1", timeout=240)
    assert sink.batches() == [0]  # batch 1: rows written, accounting not
    assert (tmp_path / "sink" / "000001.arrow").exists()
    again = _job(kafka_broker, topic, tmp_path)
    assert again.wait(600) == 0, (tmp_path / "job.log").read_text()[-3000:]
    assert sink.batches()[:2] == [0, 1] and len(sink.batches()) >= 4
    _assert_equals_batch(spark, kafka_broker, topic, stream, sink)
    _assert_accounted(sink, stream.messages)


def _bad_records(format: str) -> tuple[list, list, list[int]]:
    """``(good records, records with bad ones among them, indexes of the bad ones)``,
    all in partition 0: a corrupt message, a message over the size limit (16 KiB here) and,
    for Tencent DTS, a multi-part set cut short (its parts 0 and 1 of 3, then a new set)."""
    if format == "tencent-dts":
        stream = _dts(150, 17)
        corrupt = b"\x08\x01\x10\x01\x22\xff\xff\xff"  # an Envelope whose data overruns
    else:
        stream = generate(format, messages=60, seed=17)
        corrupt = b'{"payload": {"op": '
    good = records(format, stream.values, partitions=1)
    headers = good[0][2]
    # (the generated DTS stream has its multi-part sets near its start)
    at = 5 if format == "tencent-dts" else 20
    mixed = good[:at] + [(0, corrupt, headers)] + good[at : at + 3]
    bad = [at]
    if format == "tencent-dts":
        first, last = _a_set(good, start=at + 3)
        # Parts 0 and 1 of a set (its last part never comes), then what follows it: the
        # next set's part 0 closes the cut one.
        closer, _ = _a_set(good, start=last + 1, parts=2)
        mixed += good[at + 3 : first] + good[first : first + 2]
        bad += [len(mixed) - 2, len(mixed) - 1]
        mixed += good[last + 1 : closer + 10]
        tail = good[closer + 10 :]
    else:
        mixed += good[at + 3 : 40]
        tail = good[40:]
    mixed.append((0, b"x" * 20_000, headers))
    bad.append(len(mixed) - 1)
    mixed += tail
    return good, mixed, bad


@pytest.mark.parametrize("format", ["tencent-dts", "debezium-json"])
def test_bad_records_on_a_live_stream(spark, kafka_broker, tmp_path, format):
    good, mixed, bad = _bad_records(format)
    topic = new_topic(kafka_broker, partitions=1)
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    limits = cdc_decode.Limits(max_message_bytes=16 * 1024)
    query = run(
        spark,
        kafka_broker.bootstrap,
        topic,
        format,
        checkpoint=tmp_path / "checkpoint",
        sink=sink,
        available_now=False,
        limits=limits,
    )
    try:
        produce_records(kafka_broker.bootstrap, topic, mixed)
        wait_for(lambda: _totals(sink)["messages"] == len(mixed), what="the bad records")
        table = sink.table()
        errors = table.filter(pc.equal(table.column("op"), "error"))
        assert errors.column("offset").to_pylist() == bad
        assert all(e for e in errors.column("error").to_pylist())
        assert "max_message_bytes" in errors.column("error")[-1].as_py()
        assert errors.column("raw").to_pylist() == [mixed[i][1] for i in bad]
        # The query goes on: more records, decoded as they come.
        produce_records(kafka_broker.bootstrap, topic, good[:20])
        wait_for(lambda: _totals(sink)["messages"] == len(mixed) + 20, what="the records after")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    totals = _totals(sink)
    assert totals["errors"] == len(bad)
    assert totals["messages"] == totals["decoded"] + totals["errors"] + totals["pending"]
    good_rows = cdc_decode.decode(
        [v for i, (_, v, _) in enumerate(mixed) if i not in bad] + [v for _, v, _ in good[:20]],
        format,
    )
    if format != "tencent-dts":  # (the DTS set cut short gives its own events nowhere)
        assert sink.table().num_rows == good_rows.num_rows + len(bad)


@pytest.mark.parametrize("format", ["tencent-dts", "debezium-json"])
def test_failfast_stops_naming_topic_partition_offset(spark, kafka_broker, tmp_path, format):
    good, mixed, bad = _bad_records(format)
    topic = new_topic(kafka_broker, partitions=2)
    # Partition 0: good records; partition 1: the mixed ones.
    produce_records(kafka_broker.bootstrap, topic, good[:10])
    produce_records(kafka_broker.bootstrap, topic, [(1, v, h) for _, v, h in mixed])
    sink = BatchSink(tmp_path / "sink")
    from pyspark.errors import StreamingQueryException

    with pytest.raises(StreamingQueryException) as raised:
        run(
            spark,
            kafka_broker.bootstrap,
            topic,
            format,
            checkpoint=tmp_path / "checkpoint",
            sink=sink,
            mode="failfast",
        )
    assert f"topic {topic}, partition 1, offset {bad[0]}: " in str(raised.value)
    assert sink.batches() == []


def _readme_example() -> str:
    """The code between the ``# --- README ---`` marks of examples/kafka_stream.py."""
    text = (ROOT / "examples" / "kafka_stream.py").read_text()
    _, block, _ = text.split("    # --- README ---\n")
    return textwrap.dedent(block)


def test_the_readme_kafka_example_runs(spark, kafka_broker, tmp_path):
    """examples/kafka_stream.py as a user runs it (its own session, the connector from
    .jars), against the broker: every event of the topic lands in its Parquet folders."""
    assert _readme_example() in (ROOT / "README.md").read_text()
    stream = _dts(60, 19)
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker.bootstrap, topic, stream, partitions=2)
    example = ROOT / "examples" / "kafka_stream.py"
    jars = ROOT / ".jars"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    command = [sys.executable, example, kafka_broker.bootstrap, topic, tmp_path, "--jars", jars]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    events = spark.read.parquet(str(tmp_path / "events")).drop("batch_id")
    assert events.count() == stream.rows
    assert events.where("op = 'error'").count() == 0
    assert "Row(op='insert'" in run.stdout


def test_dropmalformed_drops_and_counts(spark, kafka_broker, tmp_path):
    _, mixed, bad = _bad_records("tencent-dts")
    topic = new_topic(kafka_broker, partitions=1)
    produce_records(kafka_broker.bootstrap, topic, mixed)
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    run(
        spark,
        kafka_broker.bootstrap,
        topic,
        "tencent-dts",
        checkpoint=tmp_path / "checkpoint",
        sink=sink,
        max_offsets=len(mixed) // 2,
        mode="dropmalformed",
        limits=cdc_decode.Limits(max_message_bytes=16 * 1024),
    )
    table = sink.table()
    assert "error" not in table.column("op").to_pylist()
    totals = _totals(sink)
    assert totals["errors"] == totals["dropped"] == len(bad)
    assert totals["messages"] == len(mixed)
    assert totals["messages"] == totals["decoded"] + totals["errors"] + totals["pending"]
    assert table.num_rows == totals["events"]


def test_many_pieces_per_micro_batch(spark, kafka_broker, tmp_path):
    """Each topic-partition's micro-batch comes as many small Arrow blobs (7 records each),
    decoded one after another by one decoder: sets that span blobs are joined, nothing is
    concatenated, the rows equal the batch decode's."""
    stream = _dts(240, 23)
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker.bootstrap, topic, stream, partitions=2)
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    try:
        run(
            spark,
            kafka_broker.bootstrap,
            topic,
            "tencent-dts",
            checkpoint=tmp_path / "checkpoint",
            sink=sink,
            max_offsets=stream.messages // 2 + 1,
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    _assert_equals_batch(spark, kafka_broker, topic, stream, sink)
    _assert_accounted(sink, stream.messages)


def test_pending_timeout_ends_held_parts_as_error_rows(spark, kafka_broker, tmp_path):
    """Parts 0 and 1 of a set whose last part does not come: held, then, once no record of
    their partition came for ``pending_timeout``, error rows at their own offsets; the
    state is cleared (pending back to 0) while the query runs on."""
    import datetime as dt

    stream = _dts(120, 29)
    recs = records("tencent-dts", stream.values, partitions=1)
    first, _ = _a_set(recs, start=3)
    cut = first + 2
    topic = new_topic(kafka_broker, partitions=1)
    produce_records(kafka_broker.bootstrap, topic, recs[:cut])
    sink = BatchSink(tmp_path / "sink", accounting=cdc_spark.DecodeAccounting(spark))
    query = run(
        spark,
        kafka_broker.bootstrap,
        topic,
        "tencent-dts",
        checkpoint=tmp_path / "checkpoint",
        sink=sink,
        available_now=False,
        interval="1 second",
        pending_timeout=dt.timedelta(seconds=3),
    )
    try:
        wait_for(lambda: _totals(sink)["messages"] == cut, what="the cut set")
        wait_for(lambda: _totals(sink)["pending"] == 0, what="the time-out")
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    table = sink.table()
    errors = table.filter(pc.equal(table.column("op"), "error"))
    assert errors.column("offset").to_pylist() == [first, first + 1]
    assert errors.column("raw").to_pylist() == [recs[first][1], recs[first + 1][1]]
    totals = _totals(sink)
    assert totals["messages"] == cut
    assert totals["messages"] == totals["decoded"] + totals["errors"] + totals["pending"]
    assert totals["errors"] == 2


def test_pending_timeout_is_fixed_by_the_checkpoint(spark, kafka_broker, tmp_path):
    """Spark keeps a time-out's timestamp in the state, so a checkpoint written without
    ``pending_timeout`` does not restart with one (docs/streaming.md says so)."""
    import datetime as dt

    from pyspark.errors import StreamingQueryException

    stream = _dts(60, 31)
    topic = new_topic(kafka_broker, partitions=1)
    produce(kafka_broker.bootstrap, topic, stream, partitions=1)
    sink = BatchSink(tmp_path / "sink")
    options = {"checkpoint": tmp_path / "checkpoint", "sink": sink}
    run(spark, kafka_broker.bootstrap, topic, "tencent-dts", **options)
    produce(kafka_broker.bootstrap, topic, stream, partitions=1)
    query = run(
        spark,
        kafka_broker.bootstrap,
        topic,
        "tencent-dts",
        available_now=False,
        interval="1 second",
        pending_timeout=dt.timedelta(minutes=10),
        **options,
    )
    try:
        with pytest.raises(
            StreamingQueryException, match="STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
        ):
            query.awaitTermination(240)
    finally:
        query.stop()
