"""apply_changes into Apache Iceberg against the MERGE users write, on the same workload.

The workload of ``benches/apply_workload.py`` (a table of ``--rows`` rows, 12 columns,
loaded sorted by key; micro-batches of typed change events touching ``--fraction`` of the
keys: updates, a quarter of them partial images, inserts, deletes, duplicates and late
changes), on Iceberg 1.12 / Spark 4.1 (``.venv-spark41``, ``make iceberg-jars``), in a
Hadoop catalog in a temporary folder. Both contenders read the same event files from disk,
taking turns batch by batch (the order rotates every batch), each on its own table of the
same properties: format 2, ``write.merge.mode``, ``write.update.mode`` and
``write.delete.mode`` merge-on-read (what ``apply_changes`` creates).

- ``apply_changes``: ``cdc_spark.apply_changes(events, "lake.bench.apply")``.
- ``merge``: what users write without it: ``row_number()`` over the key by ``sequence``,
  keep the newest, one SQL ``MERGE INTO`` (delete, update every column, insert).
- ``apply_changes+bucket`` and ``merge+bucket`` (``--bucket N``, 8 by default, 0 leaves
  them out): the same two on tables partitioned by ``bucket(N, id)``
  (``apply_changes(..., partition_by="bucket(N, id)")``; the hand-written MERGE's table
  created so, and its session set for a storage-partitioned join as ``apply_changes``
  sets its ``MERGE``'s: ``KEY_GROUPED_MERGE``).
- ``merge+partial`` (``--partial``; and ``merge+bucket+partial`` with ``--bucket``): the
  hand-written MERGE whose update keeps the columns the newest image lacks (a ``CASE`` per
  column on ``after_absent``), so it reads the table's values as the rules do; checked
  against what its own rules give.

Each final table is checked against a reference computed from the generated changes:
``apply_changes``' against the source's final rows, the hand-written MERGE's against what
its own rules give (a partial image nulls the columns it lacks, a late change overwrites a
newer one); how many of its rows differ from the source is printed too.

    make bench-iceberg
    python benches/iceberg_apply.py --rows 2000000 --fraction 0.01 --batches 5 --warmup 1
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from apply_bench import kept, newest_per_key  # noqa: E402
from apply_workload import (  # noqa: E402
    NAMES,
    Workload,
    _apply_kwargs,
    checksum,
    differences,
    generate,
    reference_checksum,
    workload_arguments,
)
from pyspark.sql import functions as F  # noqa: E402

PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}
SUMMARY = (
    "added-data-files",
    "added-position-delete-files",
    "added-delete-files",
    "deleted-data-files",
    "added-records",
    "added-position-deletes",
)


def _layout(frame, files: int, buckets: int):
    """``frame`` in ``files`` ranges of the key, each sorted; with ``buckets``, grouped by
    Iceberg's bucket of the key (``files / buckets`` ranges each), sorted by key in each."""
    if not buckets:
        return frame.repartitionByRange(files, "id").sortWithinPartitions("id")
    bucket = f"lake.system.bucket({buckets}, id)"
    ranges = max(1, files // buckets)
    return frame.repartitionByRange(buckets * ranges, F.expr(bucket), "id").sortWithinPartitions(
        F.expr(bucket), "id"
    )


class ApplyChanges:
    name = "apply_changes"
    live = "NOT _cdc_deleted"
    reference = "truth"  # the Generated table its final table must equal

    def __init__(self, buckets: int = 0) -> None:
        self.buckets = buckets
        self.options = _apply_kwargs()
        if buckets:
            self.name += "+bucket"
            self.options["partition_by"] = f"bucket({buckets}, id)"

    def build(self, spark, gen, table: str, files: int) -> None:
        from cdc_decode import spark as cdc_spark

        cdc_spark.apply_changes(spark.read.parquet(gen.snapshot), table, **self.options)
        # Written in hash order by the MERGE: rewritten sorted by key, as the other table
        # is loaded (the table's properties and columns stay); a bucketed table's rows
        # sorted by key within each bucket.
        rows = _layout(spark.table(table), files, self.buckets).localCheckpoint()
        rows.writeTo(table).overwritePartitions()

    def apply(self, spark, events, table: str) -> None:
        from cdc_decode import spark as cdc_spark

        cdc_spark.apply_changes(events, table, **self.options)


class HandMerge:
    name = "merge"
    live = None

    def __init__(self, buckets: int = 0, partial: bool = False) -> None:
        self.buckets = buckets
        self.partial = partial
        self.reference = "kept" if partial else "plain"
        if buckets:
            self.name += "+bucket"
        if partial:
            self.name += "+partial"

    def build(self, spark, gen, table: str, files: int) -> None:
        base = spark.read.parquet(gen.base)
        columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in base.schema)
        props = ", ".join(f"'{k}' = '{v}'" for k, v in PROPERTIES.items())
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {table.rsplit('.', 1)[0]}")
        parts = f"PARTITIONED BY (bucket({self.buckets}, id)) " if self.buckets else ""
        spark.sql(f"CREATE TABLE {table} ({columns}) USING iceberg {parts}TBLPROPERTIES ({props})")
        _layout(base, files, self.buckets).writeTo(table).append()

    def apply(self, spark, events, table: str) -> None:
        from support import spark_conf

        from cdc_decode.spark._tables.iceberg import KEY_GROUPED_MERGE

        last = newest_per_key(events, absent=self.partial)
        view = "bench_merge_source"
        last.createOrReplaceTempView(view)
        sets = ", ".join(f"t.`{c}` = {kept(c) if self.partial else f's.`{c}`'}" for c in NAMES)
        names = ", ".join(f"`{c}`" for c in NAMES)
        values = ", ".join(f"s.`{c}`" for c in NAMES)
        settings = KEY_GROUPED_MERGE if self.buckets else {}
        with spark_conf(spark, **settings):  # for this MERGE only
            spark.sql(
                f"MERGE INTO {table} t USING {view} s ON t.id = s.id "
                "WHEN MATCHED AND s.op = 'delete' THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {sets} "
                f"WHEN NOT MATCHED AND s.op != 'delete' THEN INSERT ({names}) VALUES ({values})"
            )


def snapshot_id(spark, table: str) -> int:
    row = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC")
    return row.first()["snapshot_id"]


def summaries(spark, table: str, after: int) -> dict[str, int]:
    """The snapshot summaries' counts of the commits after snapshot ``after``, summed."""
    rows = spark.sql(f"SELECT snapshot_id, summary FROM {table}.snapshots ORDER BY committed_at")
    out: dict[str, int] = {}
    seen = False
    for row in rows.collect():
        if seen:
            for key in SUMMARY:
                out[key] = out.get(key, 0) + int(row["summary"].get(key, 0))
            out["commits"] = out.get("commits", 0) + 1
        seen = seen or row["snapshot_id"] == after
    return out


def run(spark, w: Workload, work: Path, buckets: int, partial: bool = False) -> list[str]:
    started = time.perf_counter()
    gen = generate(w, work / "data")
    print(f"generated {w.describe()}: {sum(gen.events):,} events in "
          f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
    contenders = [ApplyChanges(), HandMerge()]
    if buckets:
        contenders += [ApplyChanges(buckets), HandMerge(buckets)]
    if partial:
        contenders += [HandMerge(partial=True)]
        contenders += [HandMerge(buckets, partial=True)] if buckets else []
    tables = {c.name: f"lake.bench.{c.name.replace('+', '_')}" for c in contenders}
    files = w.files or max(1, w.rows // 31_250)
    for c in contenders:
        t = time.perf_counter()
        c.build(spark, gen, tables[c.name], files)
        print(f"loaded {c.name}: {time.perf_counter() - t:.1f} s", flush=True)
    seconds: dict[str, list[float]] = {c.name: [] for c in contenders}
    start: dict[str, int] = {}
    for b, batch in enumerate(gen.batches):
        measured = b >= w.warmup
        turn = b % len(contenders)
        took = {}
        for c in contenders[turn:] + contenders[:turn]:
            if measured and c.name not in start:
                start[c.name] = snapshot_id(spark, tables[c.name])
            t = time.perf_counter()
            c.apply(spark, spark.read.parquet(batch), tables[c.name])
            took[c.name] = time.perf_counter() - t
            if measured:
                seconds[c.name].append(took[c.name])
        print(f"batch {b + 1}/{len(gen.batches)}{'' if measured else ' (warm-up)'}: "
              + ", ".join(f"{n} {s:.2f} s" for n, s in took.items()), flush=True)  # fmt: skip
    wanted = {"truth"} | {c.reference for c in contenders}
    references = {name: reference_checksum(spark, getattr(gen, name)) for name in wanted}
    events = sum(gen.events[w.warmup :])
    base = sum(seconds["merge"])
    lines = [
        f"**{w.describe()}**, {events:,} events measured, Iceberg format 2, merge-on-read",
        "",
        "| contender | s/batch median | s/batch mean | events/s | vs merge | data files added "
        "| delete files added | data files removed | read s | check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    failed = False
    for c in contenders:
        s = seconds[c.name]
        m = summaries(spark, tables[c.name], start[c.name])
        written = spark.table(tables[c.name])
        n, h, read = checksum(written, c.live)
        ok = (n, h) == references[c.reference]
        failed |= not ok
        note = "equal" if ok else "DIFFERS from its reference"
        if c.reference != "truth" and (n, h) != references["truth"]:
            extra, missing, _, _ = differences(spark, written, c.live, gen.truth, 0)
            note += f"; {max(extra, missing):,} rows differ from the source"
        lines.append(
            f"| `{c.name}` | {statistics.median(s):.2f} | {sum(s) / len(s):.2f} | "
            f"{events / sum(s):,.0f} | {base / sum(s):.2f}x | {m.get('added-data-files', 0):,} "
            f"| {m.get('added-delete-files', 0):,} | {m.get('deleted-data-files', 0):,} | "
            f"{read:.2f} | {note} |"
        )
    return lines + ([""] if not failed else ["", "FAILED: a table differs from its reference"])


SCENARIOS = {
    "uniform-1": (2_000_000, 0.01, "uniform"),
    "recent-0.1": (2_000_000, 0.001, "recent"),
}


def main() -> int:
    parser = workload_arguments(__doc__, SCENARIOS, batches=5, warmup=1)
    parser.add_argument("--bucket", type=int, default=8, help="0: no bucketed tables")
    parser.add_argument(
        "--partial",
        action="store_true",
        help="add merge+partial: the hand-written MERGE keeping the columns an image lacks",
    )
    args = parser.parse_args()

    sys.path.insert(0, str(HERE.parent / "tests"))
    from support.iceberg import iceberg_session

    if args.rows:
        workloads = [Workload(args.rows, args.fraction, args.pattern)]
    else:
        workloads = [Workload(*SCENARIOS[n]) for n in args.scenarios or list(SCENARIOS)]
    work = Path(tempfile.mkdtemp(prefix="iceberg-apply-"))
    failed = False
    try:
        for i, w in enumerate(workloads):
            w.batches, w.warmup = args.batches, args.warmup
            spark = iceberg_session(
                work / f"w{i}" / "lake",
                app="iceberg-apply",
                master=f"local[{args.cores}]",
                memory=args.memory,
            )
            spark.conf.set("spark.sql.shuffle.partitions", str(args.cores * 2))
            lines = run(spark, w, work / f"w{i}", args.bucket, args.partial)
            print("\n".join(lines), flush=True)
            failed |= any(line.startswith("FAILED") for line in lines)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"local[{args.cores}]; load average at the end {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
