"""apply_changes against what users write without it, on the same events.

The baseline is the usual hand-written upsert: ``row_number()`` over the key ordered by
sequence (descending) keeps each key's last change, then one plain Delta MERGE per batch
(delete on ``op = 'delete'``, update all, insert all). Both write a fresh Delta table from
the same typed events of one table (as typed ``decode`` gives them: with ``after_absent``,
here empty, every image whole), batch after batch, on ``local[1]``. The contenders take
turns, ``--rounds`` times, each round into fresh tables; the best round of each is
compared, so a burst of other work on a shared machine does not decide the ratio.

    make bench-apply                      # 1,000,000 events in 4 batches, 3 rounds
    python benches/apply_bench.py --events 200000 --batches 4 --rounds 1
    python benches/apply_bench.py --no-after-absent   # events without the after_absent column
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def make_events(
    spark, path: str, events: int, batches: int, keys: int, after_absent: bool = False
) -> None:
    """Typed events of one table (``id bigint, name string, score int, price
    decimal(10,2)``): inserts, then updates of random keys, one in twenty a delete; with
    ``after_absent``, typed mode's column of absent fields (empty: whole images)."""
    from pyspark.sql import functions as F

    i = F.col("id")
    key = (i * 7919) % keys
    op = F.when(i < keys, "insert").when(i % 20 == 0, "delete").otherwise("update")
    image = F.struct(
        key.alias("id"),
        F.concat(F.lit("name-"), (i % 1000).cast("string")).alias("name"),
        (i % 100).cast("int").alias("score"),
        ((i % 10000) / 100).cast("decimal(10,2)").alias("price"),
    )
    df = spark.range(events).select(
        op.alias("op"),
        F.unhex(F.lpad(F.hex(i), 16, "0")).alias("sequence"),
        F.lit(None).cast("timestamp").alias("event_time"),
        F.array(F.lit("id")).alias("primary_key"),
        F.when(op != "insert", image).alias("before"),
        F.when(op != "delete", image).alias("after"),
        # Every batch holds changes of all ages and of every key: event i + keys changes
        # the key event i does, so (i // 3) % batches (3 does not divide keys) sends them
        # to different batches, and each MERGE after the first updates rows. (i % batches
        # or (i // 4) % batches with 100,000 keys would give each batch its own keys.)
        (F.floor(i / 3) % batches).alias("batch"),
    )
    if after_absent:
        absent = F.when(F.col("op") != "delete", F.array().cast("array<string>"))
        df = df.withColumn("after_absent", absent)
    df.write.mode("overwrite").partitionBy("batch").parquet(path)


def newest_per_key(events, keys=("id",), absent: bool = False):
    """What users write to reduce a batch: each key's newest change by ``sequence``
    (``row_number()`` over the key), with its ``op``, ``sequence`` and its image's columns
    (a delete's image is its ``before``); with ``absent``, its ``after_absent`` too."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    extra = ["after_absent"] if absent else []
    image = F.coalesce(F.col("after"), F.col("before")).alias("image")
    return (
        events.select("op", "sequence", *extra, image)
        .select("op", "sequence", *extra, "image.*")
        .withColumn(
            "_rn", F.row_number().over(Window.partitionBy(*keys).orderBy(F.desc("sequence")))
        )
        .where("_rn = 1")
        .drop("_rn")
    )


def kept(column: str) -> str:
    """The hand-written MERGE's update of ``column`` that keeps the table's value where the
    newest image lacks the column (its ``after_absent``, from ``newest_per_key(...,
    absent=True)``): SQL text over ``t`` and ``s``."""
    return (
        f"CASE WHEN array_contains(s.after_absent, '{column}') THEN t.`{column}` "
        f"ELSE s.`{column}` END"
    )


def plain_merge(table, last, on: str, columns, keep_absent: bool = False) -> None:
    """The plain MERGE users write of :func:`newest_per_key`'s rows (``s``) into ``table``
    (a ``DeltaTable`` aliased ``t``): delete, update every column, insert; with
    ``keep_absent`` (rows of ``newest_per_key(..., absent=True)``) the update keeps the
    columns the image lacks (:func:`kept`)."""
    cols = {c: f"s.`{c}`" for c in columns}
    update = {c: kept(c) for c in columns} if keep_absent else cols
    (
        table.merge(last.alias("s"), on)
        .whenMatchedDelete(condition="s.op = 'delete'")
        .whenMatchedUpdate(set=update)
        .whenNotMatchedInsert(condition="s.op != 'delete'", values=cols)
        .execute()
    )


def upsert_newest(rows, target: str, keys, ddl: str | None = None) -> None:
    """The hand-written pipeline's write of a decoded frame's row changes into the Delta
    table at ``target``: :func:`newest_per_key`, the table made if it does not exist (from
    ``ddl``, else from those rows' columns), then :func:`plain_merge` on ``keys``."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    spark = rows.sparkSession
    rows = rows.where(F.col("op").isin("insert", "read", "update", "delete"))
    last = newest_per_key(rows, keys)
    names = [c for c in last.columns if c not in ("op", "sequence")]
    if not DeltaTable.isDeltaTable(spark, target):
        empty = last.select(*names).limit(0) if ddl is None else spark.createDataFrame([], ddl)
        empty.write.format("delta").save(target)
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
    plain_merge(DeltaTable.forPath(spark, target).alias("t"), last, on, names)


def baseline(spark, events, target: str) -> None:
    """row_number() per key by sequence, then a plain MERGE."""
    from delta.tables import DeltaTable

    last = newest_per_key(events)
    if not DeltaTable.isDeltaTable(spark, target):
        last.where("op != 'delete'").drop("op", "sequence").limit(0).write.format("delta").save(
            target
        )
    columns = ["id", "name", "score", "price"]
    plain_merge(DeltaTable.forPath(spark, target).alias("t"), last, "t.id = s.id", columns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--no-after-absent",
        dest="after_absent",
        action="store_false",
        help="events without typed mode's after_absent column (hand-made typed events)",
    )
    args = parser.parse_args()

    from support.delta import delta_session

    from cdc_decode import spark as cdc_spark

    work = Path(tempfile.mkdtemp(prefix="apply-bench-"))
    try:
        spark = delta_session(work / "warehouse", app="apply-bench")
        source = str(work / "events")
        make_events(spark, source, args.events, args.batches, args.keys, args.after_absent)
        all_events = spark.read.parquet(source)
        batches = [all_events.where(f"batch = {b}").drop("batch") for b in range(args.batches)]
        # Warm the JVM on a small table first, so neither side pays for it.
        cdc_spark.apply_changes(batches[0].limit(1000), str(work / "warm-a"))
        baseline(spark, batches[0].limit(1000), str(work / "warm-b"))

        names = ("apply_changes", "row_number + MERGE")
        timings: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names:
                target = str(work / f"{name.replace(' ', '_')}-{round_}")
                start = time.perf_counter()
                for batch in batches:
                    if name == "apply_changes":
                        # Every batch holds changes of all ages: many keys are stale.
                        cdc_spark.apply_changes(batch, target, on_stale="ignore")
                    else:
                        baseline(spark, batch, target)
                took = time.perf_counter() - start
                timings[name].append(took)
                rows = spark.read.format("delta").load(target)
                live = rows.where("NOT _cdc_deleted") if "_cdc_deleted" in rows.columns else rows
                print(
                    f"round {round_ + 1} {name:>20}: {took:7.1f} s, "
                    f"{args.events / took:>9,.0f} events/s, {live.count():,} live rows",
                    flush=True,
                )
        best = {name: min(t) for name, t in timings.items()}
        for name in names:
            print(
                f"best {name:>20}: {best[name]:7.1f} s, {args.events / best[name]:>9,.0f} events/s"
            )
        ratio = best["row_number + MERGE"] / best["apply_changes"]
        print(
            f"apply_changes / row_number + MERGE: {ratio:.2f}x, best of {args.rounds} "
            f"({args.events:,} events, {args.batches} batches, {args.keys:,} keys, local[1])"
        )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
