"""End-to-end demo: a Tencent DTS stream decoded on a local Spark, and the table it builds.

Run it with ``make demo`` or ``python -m cdc_decode.demo [--messages N]``. It needs
``pyspark`` (and Java) besides ``cdc_decode``:

1. generates a DTS stream of a simulated MySQL server (:mod:`cdc_decode.generate`), adds a
   tombstone and a broken message, and stores it as a Parquet file shaped like Spark's
   Kafka source;
2. decodes it with :func:`cdc_decode.spark.decode` and shows some events;
3. builds the tables (the latest image per primary key, deleted keys dropped) with a
   window over ``sequence`` in Spark SQL, shows ``shop.orders`` and checks every table
   against the source's final state;
4. prints the throughput of the Spark decode and of the in-process decoders.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import cdc_decode

FORMAT = "tencent-dts"
TOPIC = "dts-shop"
START = dt.datetime(2024, 5, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
ORDERS_COLUMNS = ["order_id", "user_id", "amount", "currency", "status", "placed_at"]

# Rows since a key's last delete, their `after` images merged in `sequence` order (a DTS
# update may carry only some columns); a key whose last change is a delete is gone.
TABLE_SQL = """
WITH changes AS (
    SELECT concat_ws('.', source_db, source_schema, source_table) AS table, op, sequence,
           transform(primary_key, k -> coalesce(after[k], before[k])) AS pk, after
    FROM events
    WHERE op IN ('insert', 'update', 'delete', 'read')
), live AS (
    SELECT *, max(CASE WHEN op = 'delete' THEN sequence END)
              OVER (PARTITION BY table, pk) AS deleted_at
    FROM changes
)
SELECT table, pk,
       aggregate(transform(array_sort(collect_list(struct(sequence, after)),
                     (l, r) -> CASE WHEN l.sequence < r.sequence THEN -1
                                    WHEN l.sequence > r.sequence THEN 1 ELSE 0 END),
                           c -> c.after),
                 CAST(map() AS MAP<STRING, STRING>), (row, image) -> map_concat(row, image))
           AS image
FROM live
WHERE deleted_at IS NULL OR sequence > deleted_at
GROUP BY table, pk
"""


def make_stream(messages: int, seed: int = 7):
    """A generated DTS stream (:mod:`cdc_decode.generate`) with a tombstone and a bad value."""
    from .generate import generate

    stream = generate(FORMAT, messages=messages, seed=seed)
    values = list(stream.values)
    values[len(values) // 2 : len(values) // 2] = [None, b"\x0a\xff\xff not protobuf"]
    return values, stream.final_state


def kafka_table(values: list[bytes | None]) -> pa.Table:
    """The values as Spark's Kafka source would give them (one topic partition)."""
    n = len(values)
    return pa.table(
        {
            "key": pa.nulls(n, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array([TOPIC] * n, pa.string()),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array(
                [START + dt.timedelta(milliseconds=i) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "timestampType": pa.array([0] * n, pa.int32()),
        }
    )


def _spark():
    from .spark import local_session

    return local_session(
        "cdc-decode-demo",
        spark__sql__shuffle__partitions="4",
        # map_concat while building the table: later images win.
        spark__sql__mapKeyDedupPolicy="LAST_WIN",
    )


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f}/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000, help="stream length")
    parser.add_argument("--engine", default="native", choices=["native", "python"])
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from . import spark as cdc_spark

    print(f"== 1. a Tencent DTS stream: {args.messages:,} Kafka messages (cdc_decode.generate)")
    values, expected = make_stream(args.messages)
    workdir = Path(tempfile.mkdtemp(prefix="cdc-decode-demo-"))
    source = workdir / "kafka.parquet"
    pq.write_table(kafka_table(values), source)
    size = sum(len(v) for v in values if v)
    print(f"   {len(values):,} values, {size / 1e6:.1f} MB, written to {source}")

    spark = _spark()
    try:
        kafka = spark.read.parquet(str(source))
        decoded = cdc_spark.decode(kafka, FORMAT, engine=args.engine)

        # Stored once, so the steps below do not decode again (this also warms Spark up).
        decoded.write.mode("overwrite").parquet(str(workdir / "events.parquet"))
        events = spark.read.parquet(str(workdir / "events.parquet"))
        # Timed on a no-op sink: decoding only, nothing stored.
        start = time.perf_counter()
        decoded.write.format("noop").mode("overwrite").save()
        spark_s = time.perf_counter() - start
        rows = events.count()

        print("\n== 2. change events (cdc_decode.spark.decode)")
        events.select("offset", "op", "source_table", "tx_id", "event_id", "after").where(
            "op <> 'begin' AND op <> 'commit'"
        ).show(8, truncate=False)
        events.groupBy("op").count().orderBy("op").show()
        events.where("op = 'error'").select("offset", "error").show(truncate=False)

        print("== 3. the tables: latest image per primary key, deleted keys dropped")
        events.createOrReplaceTempView("events")
        tables = spark.sql(TABLE_SQL)
        tables.where("table = 'shop.orders'").select(
            *[F.col("image")[c].alias(c) for c in ORDERS_COLUMNS]
        ).orderBy(F.col("order_id").cast("bigint")).show(10, truncate=False)
        built: dict[str, dict[tuple, dict]] = {}
        for row in tables.collect():
            built.setdefault(row.table, {})[tuple(row.pk)] = row.image
        for name, want in sorted(expected.items()):
            got = built.get(name, {})
            same = sum(1 for key, row in want.items() if got.get(key) == row)
            keys = "match" if set(got) == set(want) else "DIFFER"
            print(
                f"   {name:<22} {len(got):>6,} rows; keys {keys}; "
                f"{same:,} of {len(want):,} rows equal to the source's final state"
            )
        ok = all(built.get(name, {}) == want for name, want in expected.items())

        print("\n== 4. throughput")
        cores = spark.sparkContext.defaultParallelism
        print(
            f"   Spark mapInArrow ({args.engine}, local[{cores}], one Kafka partition): "
            f"{_rate(len(values), spark_s)} messages {_rate(rows, spark_s)} rows"
        )
    finally:
        spark.stop()

    array = pa.array(values, pa.binary())
    for engine in ("native", "python"):
        start = time.perf_counter()
        try:
            batch = cdc_decode.decode(array, FORMAT, engine=engine)
        except ImportError as exc:  # an engine that is not built or installed
            print(f"   in-process cdc_decode.decode ({engine}): not available ({exc})")
            continue
        seconds = time.perf_counter() - start
        print(
            f"   in-process cdc_decode.decode ({engine}): "
            f"{_rate(len(values), seconds)} messages {_rate(batch.num_rows, seconds)} rows"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
