"""End to end: a real broker -> Spark -> a Delta table that mirrors the source table.

    .venv-spark42/bin/python benches/stream_apply_bench.py [--messages 6000]

Starts a Kafka broker (``.jars-kafka``), puts a generated stream of one table
(``shop.order_items``) on a 3-partition topic per format and runs, one after the other on
the same topic, each into its own Delta table (Delta 4.4 on Spark 4.2, ``local[1]``):

- **ours**: ``decode_stream(source, fmt, schema=...)`` (typed, ``after_absent`` included),
  then ``apply_changes`` in ``foreachBatch`` (``app_id`` and the batch id given; the
  micro-batch is not persisted: the call reads it once);
- **hand-written**: what users write without us: for Debezium Spark's ``from_json`` with
  casts, for Tencent DTS a ``mapInArrow`` over Google's ``protobuf`` classes (the Spark
  race's baselines, benches/spark_race.py), then in ``foreachBatch`` ``row_number()`` over
  the key by sequence and one MERGE (delete, update every column, insert).

Two measures per contender:

1. broker -> Delta events/s: a query (``availableNow``, at most ``--per-trigger`` records a
   micro-batch) over the whole topic, from query start to its end (row changes of the
   stream over seconds);
2. produce -> visible latency: a running query (``processingTime=0``) and a producer that
   sends ``--burst`` records at a time to a topic of its own (the same records for both
   contenders); per burst, the time from the producer's flush to the query's progress
   reporting offsets past them (its ``foreachBatch``, the Delta commit included, done).

Each contender's table is compared with the source's final values, value by value (the
demo's check, ``cdc_decode.generate.truth.differences``): ours must be equal (the run fails
otherwise); the hand-written table's differences are counted and the first printed. Prints a
Markdown table (docs/streaming.md keeps the last run's).
"""

from __future__ import annotations

import argparse
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benches"))

TABLE = "shop.order_items"


def _apply_kwargs() -> dict:
    from cdc_decode import spark as cdc_spark

    params = inspect.signature(cdc_spark.apply_changes).parameters
    return {"on_stale": "ignore"} if "on_stale" in params else {}


def ours(fmt: str, target: str, columns: str, keys: list[str]):
    """decode_stream -> foreachBatch(apply_changes)."""
    from cdc_decode import spark as cdc_spark

    def decode(source):
        return cdc_spark.decode_stream(source, fmt, schema=columns)

    def sink(batch, batch_id):
        # One table: the call reads the micro-batch once (docs/apply.md), unpersisted.
        cdc_spark.apply_changes(
            batch, target, keys=keys, app_id="bench", batch_id=batch_id, **_apply_kwargs()
        )

    return decode, sink


def hand_written(fmt: str, target: str, keys: list[str]):
    """The Spark race's plain decoder -> foreachBatch(row_number() + MERGE)."""
    import spark_race

    baseline = spark_race.BASELINES[fmt]

    def decode(source):
        return baseline(source.select("value"), None)

    def sink(batch, _batch_id):
        from apply_bench import upsert_newest

        upsert_newest(batch, target, keys)

    return decode, sink


def _start(spark, bootstrap, topic, decode, sink, checkpoint, trigger, max_offsets=None):
    from support.streaming import kafka_source

    source = kafka_source(spark, bootstrap, topic, max_offsets=max_offsets)
    return (
        decode(source)
        .writeStream.option("checkpointLocation", checkpoint)
        .foreachBatch(sink)
        .trigger(**trigger)
        .start()
    )


def _offsets(query) -> int:
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return 0
    end = progress["sources"][0]["endOffset"]
    if isinstance(end, str):
        import json

        end = json.loads(end)
    return sum(int(o) for parts in end.values() for o in parts.values())


SAME = "equal to the source"
SHOWN_DIFFERENCES = 100


def compared(spark, stream, fmt: str, target: str, ours: bool) -> str:
    """The table against the source's final values, value by value (the demo's check):
    ours through ``current_rows`` (its tombstones left out), the hand-written table as it
    is (its deletes remove rows)."""
    from cdc_decode.generate.truth import differences

    read = None if ours else (lambda s, t: s.read.format("delta").load(t))
    wrong = differences(spark, stream, fmt, {TABLE: target}, limit=SHOWN_DIFFERENCES, read=read)
    if not wrong:
        return SAME
    many = "at least " if len(wrong) >= SHOWN_DIFFERENCES else ""
    return f"{many}{len(wrong)} differences from the source, first: {wrong[0]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=6_000)
    parser.add_argument("--per-trigger", type=int, default=1_000)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--bursts", type=int, default=8)
    parser.add_argument("--formats", nargs="*", default=["debezium-json", "tencent-dts"])
    args = parser.parse_args()

    import spark_race
    from support.delta import delta_session

    from cdc_decode._kafka_broker import start_broker
    from cdc_decode.generate import generate
    from cdc_decode.generate.kafka import create_topic, produce, produce_records, records

    broker = start_broker(ROOT / ".jars-kafka")
    work = Path(tempfile.mkdtemp(prefix="stream-apply-bench-"))
    spark = delta_session(work / "warehouse", app="stream-apply-bench", memory="2g")
    lines = [
        "| format | contender | records | row changes | seconds | events/s | ratio | "
        "produce -> visible, median s | max s | table |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    failed = False
    try:
        for n, fmt in enumerate(args.formats):
            stream = generate(fmt, messages=args.messages, seed=1, tables=[TABLE])
            keys = stream.primary_keys[TABLE]
            topic = f"e2e-{n}"
            create_topic(broker.bootstrap, topic, partitions=3)
            produce(broker.bootstrap, topic, stream, partitions=3)
            bursts = generate(fmt, messages=args.burst * args.bursts, seed=2, tables=[TABLE])
            burst_records = records(fmt, bursts.values, partitions=3)
            rates = {}
            for name in ("ours", "hand-written"):
                target = str(work / f"{fmt}-{name}")

                def make(t, name=name, fmt=fmt, keys=keys):
                    if name == "ours":
                        return ours(fmt, t, spark_race.COLUMNS, keys)
                    return hand_written(fmt, t, keys)

                def drain(table, checkpoint, make=make, topic=topic):
                    """The whole topic into ``table`` by availableNow micro-batches."""
                    decode, sink = make(table)
                    _start(
                        spark,
                        broker.bootstrap,
                        topic,
                        decode,
                        sink,
                        str(work / checkpoint),
                        {"availableNow": True},
                        max_offsets=args.per_trigger,
                    ).awaitTermination()

                # Warm-up: the topic once into a scratch table.
                drain(target + "-warm", f"{fmt}-{name}-w")
                started = time.perf_counter()
                drain(target, f"{fmt}-{name}-c")
                seconds = time.perf_counter() - started
                rates[name] = stream.rows / seconds
                state = compared(spark, stream, fmt, target, ours=name == "ours")
                failed |= name == "ours" and state != SAME

                # Latency: a running query, bursts onto a topic of its own.
                ltopic = f"e2e-{n}-latency-{name}"
                create_topic(broker.bootstrap, ltopic, partitions=3)
                decode, sink = make(target + "-latency")
                query = _start(
                    spark,
                    broker.bootstrap,
                    ltopic,
                    decode,
                    sink,
                    str(work / f"{fmt}-{name}-l"),
                    {"processingTime": "0 seconds"},
                )
                latencies = []
                try:
                    time.sleep(5)
                    sent = 0
                    for i in range(args.bursts):
                        burst = burst_records[i * args.burst : (i + 1) * args.burst]
                        produce_records(broker.bootstrap, ltopic, burst)
                        flushed = time.perf_counter()
                        sent += len(burst)
                        deadline = flushed + 300
                        while _offsets(query) < sent and time.perf_counter() < deadline:
                            time.sleep(0.05)
                        latencies.append(time.perf_counter() - flushed)
                        time.sleep(0.5)
                finally:
                    query.stop()
                latencies.sort()
                ratio = "" if name == "ours" else f"ours {rates['ours'] / rates[name]:.2f}x"
                lines.append(
                    f"| `{fmt}` | {name} | {stream.messages:,} | {stream.rows:,} | "
                    f"{seconds:.1f} | {rates[name]:,.0f} | {ratio} | "
                    f"{statistics.median(latencies):.2f} | {latencies[-1]:.2f} | {state} |"
                )
                print(lines[-1], flush=True)
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("\n" + "\n".join(lines))
    print(f"load average at the end: {os.getloadavg()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
