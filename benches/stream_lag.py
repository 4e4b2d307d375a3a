"""Commit in the database -> visible in Delta: the lag of the whole chain, under a steady
SQL load.

    .venv-spark42/bin/python benches/stream_lag.py [--rate 5] [--seconds 60]

A real PostgreSQL 15 (tests/support/databases.py), Debezium 3.6.1 in Kafka Connect
standalone, the test broker, and one running query (``processingTime=0``, ``local[1]``):
``decode_stream`` (typed) -> ``foreachBatch`` -> ``apply_changes`` into a Delta table. A
thread inserts ``--rate`` rows a second (one transaction each) for ``--seconds`` seconds and
notes each row's commit time (when ``COMMIT`` returned); the ``foreachBatch`` notes, for the
rows of each micro-batch, the time its Delta commit returned. Each row's lag is the
difference. Prints a Markdown table: rows, micro-batches, median, p90, p99 and max lag, and
the median micro-batch (the part of the lag the query spends applying). ``make
bench-stream`` runs it after benches/stream_bench.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5.0, help="rows a second")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()

    from support.databases import start_postgres
    from support.delta import delta_session

    from cdc_decode import spark as cdc_spark
    from cdc_decode._kafka_broker import start_broker
    from cdc_decode._kafka_connect import postgres_connector, start_connect

    work = Path(tempfile.mkdtemp(prefix="stream-lag-"))
    broker = start_broker(ROOT / ".jars-kafka")
    server = start_postgres()
    connect = None
    spark = None
    try:
        conn = server.connect()
        conn.execute("CREATE TABLE ticks (id int PRIMARY KEY, payload text, n numeric(12,2))")
        config = postgres_connector(
            "lag",
            host="127.0.0.1",
            port=server.port,
            user="postgres",
            database="shop",
            topic_prefix="lag",
        )
        connect = start_connect(
            ROOT / ".jars-connect",
            ROOT / ".debezium",
            broker.bootstrap,
            [config],
            directory=work / "connect",
        )
        spark = delta_session(work / "warehouse", app="stream-lag")
        target = str(work / "ticks")
        visible: dict[int, float] = {}
        batch_seconds: list[float] = []

        def apply(batch, batch_id):
            started = time.time()
            batch = batch.persist()
            try:
                cdc_spark.apply_changes(batch, target, keys=["id"], app_id="lag", batch_id=batch_id)
                ids = [r[0] for r in batch.where("after is not null").select("after.id").collect()]
            finally:
                batch.unpersist()
            now = time.time()
            batch_seconds.append(now - started)
            for i in ids:
                visible.setdefault(i, now)

        kafka = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "lag.public.ticks")
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
        )
        events = cdc_spark.decode_stream(
            kafka, "debezium-json", schema="id int, payload string, n decimal(12,2)"
        )
        query = (
            events.writeStream.option("checkpointLocation", str(work / "checkpoint"))
            .foreachBatch(apply)
            .trigger(processingTime="0 seconds")
            .start()
        )
        # Warm up: the first row makes the table; its micro-batch is not counted.
        conn.execute("INSERT INTO ticks VALUES (0, 'warm-up', 0)")
        deadline = time.monotonic() + 300
        while 0 not in visible and time.monotonic() < deadline:
            time.sleep(0.2)
        committed: dict[int, float] = {}

        def load() -> None:
            step = 1.0 / args.rate
            start = time.monotonic()
            i = 1
            while time.monotonic() - start < args.seconds:
                conn.execute("INSERT INTO ticks VALUES (%s, %s, %s)", (i, f"row {i}", i / 100))
                committed[i] = time.time()
                i += 1
                time.sleep(max(0.0, start + i * step - time.monotonic()))

        loader = threading.Thread(target=load)
        loader.start()
        loader.join()
        deadline = time.monotonic() + 300
        while not committed.keys() <= visible.keys() and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()
        lags = [visible[i] - committed[i] for i in committed if i in visible]
        lost = len(committed) - len(lags)
        rows = cdc_spark.current_rows(spark, target).count()
        print(
            f"\n{len(committed)} rows committed at {args.rate:g}/s for {args.seconds:g} s; "
            f"{rows} rows in Delta (the warm-up row too); {lost} not seen"
        )
        print(
            "| rows | micro-batches | median lag s | p90 s | p99 s | max s | median micro-batch s |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        print(
            f"| {len(lags)} | {len(batch_seconds) - 1} | {statistics.median(lags):.2f} "
            f"| {percentile(lags, 90):.2f} | {percentile(lags, 99):.2f} | {max(lags):.2f} "
            f"| {statistics.median(batch_seconds[1:]):.2f} |"
        )
        return 0 if lost == 0 else 1
    finally:
        if spark is not None:
            spark.stop()
        if connect is not None:
            connect.stop()
        server.stop()
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
