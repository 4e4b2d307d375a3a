"""``cdc_spark.sync`` against the loop users write today, on the same micro-batches.

The input is a generated whole-database stream (``generate(fmt, table_count=N)``: realistic
column mixes, phases of transactions that each touch about half of the tables, DDL
mid-stream), cut into ``--batches`` micro-batches of Kafka-like rows held in memory. Two
contenders take turns on each micro-batch, each into its own fresh Delta tables:

- **sync**: ``cdc_spark.sync(batch, fmt, "<lake>/{db}/{table}", batch_id=i, app_id=…)``:
  the schema pass, one typed decode, the tables applied by a pool of ``--parallelism``
  threads.
- **loop**: what a user writes without it, given the tables' DDL (written for the stream's
  end state: here every column any wire schema had, in its last type) and told which
  tables the micro-batch touches: ``decode(batch, fmt, tables=ddl)``, the combined frame
  persisted, then ``apply_changes`` per table, one after another (``on_ddl="report"``: a
  dropped column keeps its values, as ``sync`` keeps them).
- **floor**: what the table format itself must run, the same decode and persisted frame as
  the loop's, then per table only the cheapest MERGE users write: ``row_number()`` over
  the key by ``sequence``, a plain
  ``MERGE`` (delete, update every column, insert), each table made empty from the DDL
  first; by the same pool of ``--parallelism`` threads as ``sync``. It keeps none of the
  rules (partial images, key changes, tombstones, replay markers), so its tables are not
  the source's: it is the cost under which no correct sync can go, not a contender for
  correctness.

All decode the same rows from the same cached DataFrame; ``local[2]``. Reported: seconds
per micro-batch of each, the tables each touched per second, and the ratios, one run side
by side.

    make bench-sync                                          # 100 tables, 2 micro-batches
    python benches/sync_bench.py --tables 20 --messages 400 --batches 2
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


@contextmanager
def decoded(batch, fmt: str, ddl: dict[str, str]):
    """What a user's loop starts with: ``decode(batch, fmt, tables=ddl)``, the combined frame
    persisted (and counted) while the tables are written; the frames by table."""
    from cdc_decode import spark as cdc_spark

    frames = cdc_spark.decode(batch, fmt, tables=ddl)
    combined = frames["*"].persist()
    try:
        combined.count()
        yield frames
    finally:
        combined.unpersist()


def loop(batch, fmt: str, lake: Path, batch_id: int, ddl: dict[str, str]) -> int:
    """The hand-written sync: decode with ``tables=``, apply each table in turn."""
    from cdc_decode import spark as cdc_spark

    with decoded(batch, fmt, ddl) as frames:
        for name in ddl:
            db, table = name.split(".", 1)
            # on_ddl="report": the stream drops columns, which the loop keeps, as sync does
            cdc_spark.apply_changes(frames[name], str(lake / db / table), on_ddl="report",
                                    app_id=f"loop/{name}", batch_id=batch_id)  # fmt: skip
    return len(ddl)


def floor(
    batch, fmt: str, lake: Path, ddl: dict[str, str], keys: dict[str, list[str]], parallelism: int
) -> int:
    """The table format's own cost: the loop's decode, then per table ``row_number()`` and a
    plain MERGE (``apply_bench.upsert_newest``) into a table made from the DDL,
    ``parallelism`` tables at once."""
    from apply_bench import upsert_newest

    with decoded(batch, fmt, ddl) as frames:

        def one(name: str) -> None:
            db, table = name.split(".", 1)
            upsert_newest(frames[name], str(lake / db / table), keys[name], ddl[name])

        with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(ddl)))) as pool:
            list(pool.map(one, ddl))
    return len(ddl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--format", default="tencent-dts")
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--messages", type=int, default=1500)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "benches"))

    from support.delta import delta_session

    import cdc_decode
    from cdc_decode import spark as cdc_spark
    from cdc_decode.generate import generate

    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    try:
        spark = delta_session(work / "warehouse", app="bench-sync", master=args.master,
                              memory="2g")  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        stream = generate(args.format, messages=args.messages, seed=args.seed,
                          table_count=args.tables)  # fmt: skip
        keys = stream.message_keys or [None] * len(stream.values)
        rows = list(zip(keys, stream.values, strict=True))
        size = -(-len(rows) // args.batches)
        print(f"{args.format}: {len(rows)} messages of {args.tables} tables, "
              f"{args.batches} micro-batches, {args.master}, sync parallelism "
              f"{args.parallelism}", flush=True)  # fmt: skip
        # Warm-up (not timed): both contenders once on a small database of their own, so
        # the JVM's first MERGE (class loading, JIT) is not charged to the first contender.
        small = generate(args.format, messages=60, seed=args.seed + 1, table_count=2)
        small_keys = small.message_keys or [None] * len(small.values)
        warm = spark.createDataFrame(list(zip(small_keys, small.values, strict=True)),
                                     "key binary, value binary")  # fmt: skip
        warm_wire = cdc_decode.table_schemas(small.values, args.format, keys=small.message_keys)
        try:
            cdc_spark.sync(warm, args.format, str(work / "warm-sync" / "{db}" / "{table}"))
            loop(warm, args.format, work / "warm-loop", 0, warm_wire.ddl(unknown="string"))
            floor(warm, args.format, work / "warm-floor", warm_wire.ddl(unknown="string"),
                  small.primary_keys, args.parallelism)  # fmt: skip
        except Exception as error:  # a warm-up only
            print(f"  (warm-up: {type(error).__name__}: {error})"[:300], flush=True)
        print("  (warmed up)", flush=True)
        # The DDL a user of the loop writes by hand, here from the whole stream's wire
        # schemas: every column any version had, in its last (widest) type.
        final = {}
        for t in cdc_decode.table_schemas(stream.values, args.format, keys=stream.message_keys):
            cols = {}
            for version in t.versions:
                for c in version.columns:
                    cols[c.name] = c.type or "string"
            final[t.name] = ", ".join(f"`{n}` {ty}" for n, ty in cols.items())
        names = ("sync", "loop", "floor")
        totals = dict.fromkeys(names, 0.0)
        touched = dict.fromkeys(names, 0)

        def timed(i: int, name: str, run, *run_args) -> None:
            """One contender's turn on micro-batch ``i``: its seconds and tables, or why it
            failed."""
            started = time.monotonic()
            try:
                n = run(*run_args)
            except Exception as error:  # e.g. a retyped column a plain MERGE cannot take
                print(f"  batch {i} {name}: failed: {type(error).__name__}: {error}"[:400])
                totals[name] = float("nan")
                return
            seconds = time.monotonic() - started
            totals[name] += seconds
            touched[name] += n
            print(f"  batch {i} {name}: {seconds:7.1f} s  {n} tables", flush=True)

        for i in range(args.batches):
            part = rows[i * size : (i + 1) * size]
            batch = spark.createDataFrame(part, "key binary, value binary").persist()
            batch.count()
            # The loop's tables: those the micro-batch touches (a user's loop would visit
            # every table; this one is told which), with the DDL written for the end state.
            wire = cdc_decode.table_schemas([v for _, v in part], args.format,
                                            keys=[k for k, _ in part] if stream.message_keys
                                            else None)  # fmt: skip
            ddl = {t.name: final[t.name] for t in wire}
            started = time.monotonic()
            target = str(work / "sync" / "{db}" / "{table}")
            result = cdc_spark.sync(
                batch, args.format, target, batch_id=i, app_id="sync", parallelism=args.parallelism
            )
            seconds = time.monotonic() - started
            totals["sync"] += seconds
            touched["sync"] += len(result.applied)
            print(f"  batch {i} sync: {seconds:7.1f} s  {result.summary()}", flush=True)

            timed(i, "loop", loop, batch, args.format, work / "loop", i, ddl)
            timed(i, "floor", floor, batch, args.format, work / "floor", ddl,
                  stream.primary_keys, args.parallelism)  # fmt: skip
            batch.unpersist()
        print()
        print("| contender | s per micro-batch | tables per s |")
        print("|---|---:|---:|")
        for name in names:
            per = totals[name] / args.batches
            rate = touched[name] / totals[name] if totals[name] else float("nan")
            print(f"| {name} | {per:.1f} | {rate:.2f} |")
        print(f"\nloop / sync: {totals['loop'] / totals['sync']:.2f}x")
        print(f"floor / sync: {totals['floor'] / totals['sync']:.2f}x (1.00x: sync at the table "
              "format's own cost)")  # fmt: skip
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
