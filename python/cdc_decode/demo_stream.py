"""``make demo-stream``: a broker, a producer writing a changing database, a streaming query
filling the tables, then the check that they equal the source.

    python -m cdc_decode.demo_stream [--messages 3000] [--jars .jars] [--kafka-jars .jars-kafka]

1. starts a Kafka broker (KRaft, one node, loopback, :mod:`cdc_decode._kafka_broker`);
2. a producer thread sends a generated Tencent DTS stream (multi-part sets included) to a
   3-partition topic in bursts, as a database changes;
3. a Structured Streaming query (``cdc_spark.decode_stream``, ``local[1]``) decodes it and
   a ``foreachBatch`` sink applies each micro-batch's events to the tables; a line per
   micro-batch shows the progress;
4. when the producer is done and the query has caught up, the tables are compared with
   the source's final state.

Needs ``make jars`` (Spark's Kafka connector), ``make jars-kafka`` (the broker) and
``confluent-kafka``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (1 when the tables differ from the source)."""
    parser = argparse.ArgumentParser(prog="python -m cdc_decode.demo_stream")
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--burst", type=int, default=250)
    parser.add_argument("--jars", default=".jars", help="Spark's Kafka connector (make jars)")
    parser.add_argument("--kafka-jars", default=".jars-kafka", help="the broker (make jars-kafka)")
    args = parser.parse_args(argv)

    import pyarrow as pa

    from . import spark as cdc_spark
    from ._kafka_broker import start_broker
    from .generate import apply_events, generate
    from .generate.kafka import create_topic, produce_records, records

    print("starting a Kafka broker ...", flush=True)
    broker = start_broker(args.kafka_jars)
    print(f"broker at {broker.bootstrap} (pid {broker.pid})", flush=True)
    spark = None
    try:
        stream = generate("tencent-dts", messages=args.messages, seed=1, max_message_bytes=4096)
        topic = "dts-demo"
        create_topic(broker.bootstrap, topic, partitions=3)
        recs = records(stream.format, stream.values, partitions=3)
        print(f"source: {stream.summary()}", flush=True)

        spark = cdc_spark.local_session(
            "cdc-decode-demo-stream",
            master="local[1]",
            spark__sql__shuffle__partitions="2",
            spark__jars=",".join(str(p) for p in sorted(Path(args.jars).glob("*.jar"))),
        )
        accounting = cdc_spark.DecodeAccounting(spark)
        seen: list[pa.Table] = []
        totals = dict.fromkeys(cdc_spark.STATS, 0)
        started = time.perf_counter()

        def sink(batch, batch_id):
            accounting.reset()
            table = batch.toArrow()
            seen.append(table)
            for name, value in accounting.value().items():
                totals[name] += value
            tables = apply_events(pa.concat_tables(seen), primary_keys=stream.primary_keys)
            sizes = ", ".join(f"{name} {len(rows)}" for name, rows in sorted(tables.items()))
            print(
                f"  micro-batch {batch_id:3d}: {totals['messages']:6,} records "
                f"{totals['events']:7,} events, {totals['pending']:3} parts held "
                f"| {sizes} ({time.perf_counter() - started:5.1f} s)",
                flush=True,
            )

        source = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .option("maxOffsetsPerTrigger", str(args.burst * 2))
            .load()
        )
        checkpoint = tempfile.mkdtemp(prefix="demo-stream-")
        query = (
            cdc_spark.decode_stream(source, "tencent-dts", accounting=accounting)
            .writeStream.option("checkpointLocation", checkpoint)
            .foreachBatch(sink)
            .trigger(processingTime="1 second")
            .start()
        )

        def producer():
            for at in range(0, len(recs), args.burst):
                produce_records(
                    broker.bootstrap,
                    topic,
                    recs[at : at + args.burst],
                    config={"log_level": 3},  # not the retry notices of a new broker
                )
                time.sleep(0.3)

        thread = threading.Thread(target=producer, daemon=True)
        thread.start()
        thread.join()
        while totals["messages"] < len(recs) and query.isActive:
            time.sleep(0.5)
        query.stop()
        if query.exception() is not None:
            print(f"the query failed: {query.exception()}")
            return 1
        tables = apply_events(pa.concat_tables(seen), primary_keys=stream.primary_keys)
        same = tables == stream.final_state
        print(
            f"{totals['messages']:,} records -> {totals['events']:,} events, "
            f"{totals['errors']} errors, {totals['pending']} parts held; the tables are "
            + ("EQUAL to the source" if same else "NOT equal to the source")
        )
        return 0 if same else 1
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
