"""The main job, end to end: a whole database's change stream on a Kafka broker, synced into
one Delta table per source table with no schema written by hand, each table checked equal
to the source.

Run it with ``make demo``, or with a Python that has ``cdc-decode``, ``pyspark==4.2.0``,
``delta-spark==4.4.0`` and ``confluent-kafka``::

    python -m cdc_decode.demo --kafka-jars .jars-kafka [--jars DIR ...] [--formats ...]

For each format (Tencent DTS and Debezium JSON by default) it

1. starts a Kafka broker on loopback (one KRaft node, no Docker), once for all formats;
2. generates a database of ``--tables`` tables with realistic column mixes, transactions
   across tables and DDL mid-stream (:mod:`cdc_decode.generate`), and sends it to a topic
   of three partitions;
3. runs the streaming sync as a user runs it, through the command line
   (``cdc-decode sync --format … --kafka … --topic … --target '<lake>/{db}/{table}'
   --checkpoint … --trigger once --max-offsets N``): micro-batches of ``N`` records, a
   progress line for each, every table created with the wire's types and keys;
4. checks every table against the source's final rows, value by value in its column's type
   (:func:`cdc_decode.generate.truth.differences`), shows each table's columns and types
   and one table's rows;
5. prints the throughput: messages and tables per second of the whole sync, seconds per
   micro-batch, and the Rust core's decode alone (in process, the same messages).

Each stream is generated so that its last change is the moment it is made, as a source
that changed over the past minutes: the progress lines' lag (the wall clock minus the
newest change's time) is then what a catching-up sync shows, shrinking batch by batch.

It exits 1 when a table differs from the source.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

FORMATS = ("tencent-dts", "debezium-json")
SHOWN = 6  # tables listed with their types, per format


def _generate_now(fmt: str, **options: object):
    """``generate(fmt, **options)`` with its last change at about this moment: the same
    stream, its times moved (``generate(start=...)``)."""
    import datetime as dt

    import pyarrow.compute as pc

    from .generate import generate
    from .generate.source import EPOCH

    stream = generate(fmt, **options)
    last = pc.max(stream.expected["event_time"]).as_py()
    if last is None:
        return stream
    return generate(fmt, start=dt.datetime.now(dt.timezone.utc) - (last - EPOCH), **options)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (1 when a table differs from the source)."""
    parser = argparse.ArgumentParser(prog="python -m cdc_decode.demo", description=__doc__)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), metavar="FORMAT",
                        help="Kafka-borne formats to sync (default: %(default)s)")  # fmt: skip
    parser.add_argument("--tables", type=int, default=8, help="tables of the source database")
    parser.add_argument("--messages", type=int, default=1200, help="messages per format")
    parser.add_argument("--max-offsets", type=int, default=450,
                        help="records per micro-batch (default: %(default)s)")  # fmt: skip
    parser.add_argument("--jars", action="append", default=[],
                        help="folders of Delta's and Spark's Kafka connector jars (default: "
                        "from Maven Central)")  # fmt: skip
    parser.add_argument("--kafka-jars", default=".jars-kafka",
                        help="the broker's jars (default: %(default)s)")  # fmt: skip
    parser.add_argument("--out", help="where the lake goes (default: a new temporary folder)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)

    from . import cli
    from . import spark as cdc_spark
    from ._kafka_broker import start_broker
    from .generate.kafka import create_topic, produce
    from .generate.truth import differences

    work = Path(args.out or tempfile.mkdtemp(prefix="cdc-decode-demo-"))
    print("starting a Kafka broker ...", flush=True)
    broker = start_broker(args.kafka_jars)
    print(f"broker at {broker.bootstrap} (pid {broker.pid}); the lake at {work}", flush=True)
    ok = True
    summary: list[str] = []
    spark = None
    try:
        for fmt in args.formats:
            stream = _generate_now(fmt, messages=args.messages, seed=args.seed,
                                   table_count=args.tables)  # fmt: skip
            topic = f"demo-{fmt}"
            create_topic(broker.bootstrap, topic, partitions=3)
            sent = produce(broker.bootstrap, topic, stream, partitions=3)
            print(f"\n== {fmt}: {stream.summary()}; {sent:,} records on topic {topic}", flush=True)
            target = str(work / fmt / "{db}" / "{table}")
            command = ["sync", "--format", fmt, "--kafka", broker.bootstrap, "--topic", topic,
                       "--target", target, "--checkpoint", str(work / "_checkpoints" / fmt),
                       "--trigger", "once", "--max-offsets", str(args.max_offsets),
                       "--master", "local[2]"]  # fmt: skip
            for jars in args.jars:
                command += ["--jars", jars]
            print("$ cdc-decode " + " ".join(_quoted(c) for c in command), flush=True)
            batches = -(-sent // args.max_offsets)
            started = time.perf_counter()
            status = cli.main(command)
            seconds = time.perf_counter() - started
            if status != 0:
                print(f"   the sync stopped with status {status}", flush=True)
                ok = False
                continue
            from pyspark.sql import SparkSession

            spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
            targets = {n: target.format(db=n.split(".")[0], table=n.split(".", 1)[1])
                       for n in stream.final_values}  # fmt: skip
            wrong = differences(spark, stream, fmt, targets, limit=20)
            ok &= not wrong
            for n, name in enumerate(sorted(targets)):
                frame = cdc_spark.current_rows(spark, targets[name])
                rows = frame.count()
                mine = [w for w in wrong if w.startswith(name)]
                state = "equal to the source" if not mine else f"DIFFERS: {mine[0]}"
                print(f"   {targets[name]}: {rows:,} rows, {state}", flush=True)
                if n < SHOWN:
                    types = ", ".join(f"{f.name} {f.dataType.simpleString()}"
                                      for f in frame.schema.fields)  # fmt: skip
                    print(f"      {_short(types, 150)}", flush=True)
            if len(targets) > SHOWN:
                print(f"   ({len(targets) - SHOWN} more tables' types not shown)", flush=True)
            first = sorted(targets)[0]
            key = stream.primary_keys[first]
            print(f"   {first}, the first rows:", flush=True)
            cdc_spark.current_rows(spark, targets[first]).orderBy(*key).show(5, truncate=24)
            verdict = "all tables equal to the source" if not wrong else "SOME TABLES DIFFER"
            rate = f"{len(stream.values) / seconds:,.0f} messages/s"
            summary.append(f"{fmt}: {len(targets)} tables, {len(stream.values):,} messages, "
                           f"{_written(spark, targets):,} rows written in {seconds:.0f} s "
                           f"({rate}, {seconds / batches:.0f} s per micro-batch, local[2]): "
                           f"{verdict}")  # fmt: skip
            summary.append(f"   the Rust core decodes the same messages at "
                           f"{_decode_rate(stream):,.0f} messages/s in process")  # fmt: skip
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    print("\n== summary", flush=True)
    for line in summary:
        print("   " + line, flush=True)
    if not args.out:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def _decode_rate(stream) -> float:
    """Messages per second of ``cdc_decode.decode`` (the Rust core) over the stream's values,
    best of three."""
    import cdc_decode

    keys = stream.message_keys
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        cdc_decode.decode(stream.values, stream.format, keys=keys)
        best = min(best, time.perf_counter() - started)
    return len(stream.values) / best


def _written(spark, targets: dict[str, str]) -> int:
    """Rows the sync inserted, updated and deleted (Delta's operation metrics over every
    table's history)."""
    total = 0
    for target in targets.values():
        for row in spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect():
            metrics = row["operationMetrics"] or {}
            total += sum(int(metrics.get(name, 0)) for name in
                         ("numTargetRowsInserted", "numTargetRowsUpdated",
                          "numTargetRowsDeleted"))  # fmt: skip
    return total


def _quoted(text: str) -> str:
    return f"'{text}'" if any(c in text for c in "{} ") else text


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


if __name__ == "__main__":
    sys.exit(main())
