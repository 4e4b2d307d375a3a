"""Streaming throughput and latency: a real broker -> Spark (local[1]) -> a sink.

    .venv/bin/python benches/stream_bench.py [--messages 10000] [--per-trigger 5000]

Starts a Kafka broker (``.jars-kafka``), puts generated streams on 3-partition topics and
measures, in one run:

1. broker -> sink events/s: ``decode_stream`` in a query (``availableNow``, at most
   ``--per-trigger`` records a micro-batch) writing each micro-batch to Spark's ``noop``
   sink, from query start to its end;
2. the same records read as one batch (``spark.read.format("kafka")`` -> ``decode`` ->
   ``noop``), and, for Tencent DTS, a streaming ``decode`` without the state (multi-part
   sets cut by a micro-batch become error rows there): what the state costs;
3. produce -> visible latency: a running query (``processingTime=0``) and a producer that
   sends ``--burst`` records at a time; per burst, the time from the producer's flush to
   the ``foreachBatch`` sink having written them;
4. commit -> visible in Delta: benches/stream_lag.py on ``.venv-spark42`` (Delta runs on
   Spark 4.2): a real PostgreSQL under a steady insert load, Debezium, the broker,
   ``decode_stream`` and ``apply_changes``; median and p99 of each row's lag from its
   ``COMMIT`` to its Delta commit (``--lag-rate`` rows/s for ``--lag-seconds`` s; 0 skips).

Prints a Markdown table (docs/streaming.md keeps the last run's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--per-trigger", type=int, default=5_000)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--formats", nargs="*", default=["tencent-dts", "datahub-blob"])
    parser.add_argument("--lag-rate", type=float, default=5.0)
    parser.add_argument("--lag-seconds", type=float, default=60.0)
    args = parser.parse_args()

    from support.streaming import kafka_source

    from cdc_decode import spark as cdc_spark
    from cdc_decode._kafka_broker import start_broker
    from cdc_decode.generate import generate
    from cdc_decode.generate.kafka import create_topic, produce_records, records

    broker = start_broker(ROOT / ".jars-kafka")
    spark = cdc_spark.local_session(
        "stream-bench",
        master="local[1]",
        spark__sql__shuffle__partitions="2",
        spark__driver__memory="2g",
        spark__jars=",".join(str(p) for p in sorted((ROOT / ".jars").glob("*.jar"))),
    )
    work = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    lines = [
        "| format | what | records | events | seconds | events/s |",
        "|---|---|---:|---:|---:|---:|",
    ]
    try:
        for n, format in enumerate(args.formats):
            _throughput(spark, broker, work, f"bench-{n}", format, args, lines)

        # Latency: a running query, bursts of records.
        format = args.formats[0]
        stream = generate(format, messages=args.burst * args.bursts, seed=2)
        topic = "bench-latency"
        create_topic(broker.bootstrap, topic, partitions=3)
        recs = records(format, stream.values, partitions=3)
        seen = {"records": 0}
        lock = threading.Condition()

        def sink(batch, _):
            count = batch.select("partition", "offset").distinct().count()
            with lock:
                seen["records"] += count
                lock.notify_all()

        # Every record gives at least one row here (no multi-part set spans bursts).
        source = kafka_source(spark, broker.bootstrap, topic)
        query = (
            cdc_spark.decode_stream(source, format)
            .writeStream.option("checkpointLocation", str(work / "latency"))
            .foreachBatch(sink)
            .trigger(processingTime="0 seconds")
            .start()
        )
        latencies = []
        try:
            time.sleep(5)
            for i in range(args.bursts):
                burst = recs[i * args.burst : (i + 1) * args.burst]
                target = sum(1 for _, v, _ in burst if _completes(format, v))
                with lock:
                    want = seen["records"] + target
                produce_records(broker.bootstrap, topic, burst)
                flushed = time.perf_counter()
                with lock:
                    lock.wait_for(lambda want=want: seen["records"] >= want, timeout=120)
                latencies.append(time.perf_counter() - flushed)
                time.sleep(0.5)
        finally:
            query.stop()
        latencies.sort()
        print(
            f"\nproduce -> visible, {format}, {args.bursts} bursts of {args.burst} records: "
            f"median {statistics.median(latencies):.2f} s, max {latencies[-1]:.2f} s, "
            f"min {latencies[0]:.2f} s"
        )
    finally:
        spark.stop()
        broker.stop()
    print("\n" + "\n".join(lines))
    print(f"load average at the end: {os.getloadavg()}")
    if args.lag_seconds <= 0:
        return 0
    # 4. Commit -> visible in Delta, in the Delta environment (its own Spark).
    import subprocess

    python = ROOT / ".venv-spark42" / "bin" / "python"
    lag = subprocess.run(
        [str(python), str(ROOT / "benches" / "stream_lag.py")]
        + ["--rate", str(args.lag_rate), "--seconds", str(args.lag_seconds)],
        env={**os.environ, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)},
    )
    print(f"load average at the end: {os.getloadavg()}")
    return lag.returncode


def _throughput(spark, broker, work, topic, format, args, lines) -> None:
    """Rows 1 and 2 of the table for one format."""
    from support.streaming import kafka_batch, kafka_source

    from cdc_decode import spark as cdc_spark
    from cdc_decode.generate import generate
    from cdc_decode.generate.kafka import create_topic, produce

    stream = generate(format, messages=args.messages, seed=1)
    create_topic(broker.bootstrap, topic, partitions=3)
    produce(broker.bootstrap, topic, stream, partitions=3)

    def timed(what, run, events=stream.rows):
        started = time.perf_counter()
        run()
        seconds = time.perf_counter() - started
        lines.append(
            f"| `{format}` | {what} | {stream.messages:,} | {events:,} | "
            f"{seconds:.2f} | {events / seconds:,.0f} |"
        )
        print(lines[-1], flush=True)

    def streaming(fn, name):
        def go():
            source = kafka_source(spark, broker.bootstrap, topic, max_offsets=args.per_trigger)
            query = (
                fn(source, format)
                .writeStream.option("checkpointLocation", str(work / name))
                .foreachBatch(lambda b, _: b.write.format("noop").mode("overwrite").save())
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()

        return go

    def batch():
        source = kafka_batch(spark, broker.bootstrap, topic)
        cdc_spark.decode(source, format).write.format("noop").mode("overwrite").save()

    # Warm-up, each contender once (the JVM's code, the Kafka consumers, the Python
    # workers of each kind), then the timed runs, each from a new checkpoint.
    contenders = [("streaming `decode_stream`", cdc_spark.decode_stream)]
    if format == "tencent-dts":
        contenders.append(("streaming `decode` (no state: cut sets are errors)", cdc_spark.decode))
    batch()
    for n, (_, fn) in enumerate(contenders):
        streaming(fn, f"{topic}-warm-{n}")()
    timed("batch `decode`", batch)
    for n, (what, fn) in enumerate(contenders):
        timed(what, streaming(fn, f"{topic}-timed-{n}"))


def _completes(format: str, value: bytes) -> bool:
    """Whether this record gives rows itself (not a DTS part before a set's last)."""
    if format != "tencent-dts":
        return True
    from cdc_decode import _proto as pb

    envelope = pb.Envelope.FromString(value)
    return envelope.total <= 1 or envelope.index == envelope.total - 1


if __name__ == "__main__":
    sys.exit(main())
