"""The per-column fold in one pass over Arrow, against the fold as Spark runs it.

``apply_changes`` folds a batch with partial images to one row per key in Spark SQL (a
window over the key and one aggregate: ``_apply_rules.fold_columns``). The alternative this
measures: shuffle the entries by key, then fold each partition in one pass over Arrow in
``mapInArrow`` (sort by key and sequence, then per column the newest row that carried it,
with numpy and pyarrow; a Rust fold would cross the same boundary). The batches are those
of ``benches/apply_workload.py`` (typed events, a quarter of the updates partial images),
applied into a Delta table first; each batch's entries (the rows the fold reads) are
captured on the way and then held, taking turns:

- ``entries``: the entries alone (the batch read and its entries built, no shuffle);
- ``shuffle``: the entries shuffled by key, no fold (the least any fold after a shuffle
  can take);
- ``sql fold``: the fold ``apply_changes`` runs;
- ``arrow fold``: the shuffle, then the fold over Arrow.

Each is computed and held as ``apply_changes`` holds its folded rows (``_plans.held``: a
local checkpoint). The two folds' rows are compared; the run fails when they differ.

    python benches/fold_arrow.py --rows 200000 --fraction 0.1   # 20,000 changes a batch
    python benches/fold_arrow.py --rows 20000 --fraction 0.05   # 1,000
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))


def arrow_fold(keys, values, names):
    """The ``mapInArrow`` function of one partition of entries shuffled by ``keys``: the
    rows of ``fold_columns`` (columns ``names``), for a single integer key."""

    def fold(batches):
        tables = [pa.Table.from_batches([b]) for b in batches]
        t = pa.concat_tables(tables) if tables else None
        if t is None or t.num_rows == 0:
            return
        order = [(k, "ascending") for k in keys]
        order += [("_seq", "ascending"), ("_kind", "ascending"), ("_tie", "ascending")]
        t = t.take(pc.sort_indices(t, sort_keys=order))
        n = t.num_rows
        k = t.column(keys[0]).to_numpy(zero_copy_only=False)
        change = np.r_[True, k[1:] != k[:-1]]
        group = np.cumsum(change) - 1
        groups = int(group[-1]) + 1
        ends = np.r_[np.flatnonzero(change)[1:] - 1, n - 1]
        upsert = pc.equal(t.column("_kind"), "u").to_numpy(zero_copy_only=False)
        delete = ~upsert

        def newest(mask):  # per key, the last row where mask holds (-1: none)
            out = np.full(groups, -1, np.int64)
            rows = np.flatnonzero(mask)
            out[group[rows]] = rows
            return out

        def take(column, rows):
            return t.column(column).take(pa.array(rows, mask=rows < 0))

        out = {c: t.column(c).take(pa.array(ends)) for c in keys}
        seq = t.column("_seq")
        out["_last_seq"] = seq.take(pa.array(ends))
        out["_last_kind"] = t.column("_kind").take(pa.array(ends))
        out["_last_time"] = t.column("_time").take(pa.array(ends))
        last_delete = newest(delete)
        out["_del_seq"] = take("_seq", last_delete)
        per_row = last_delete[group]
        newest_delete = seq.take(pa.array(np.where(per_row < 0, 0, per_row)))
        older = pc.less(seq, newest_delete).to_numpy(zero_copy_only=False)
        out["_del_prev"] = take("_seq", newest(delete & older & (per_row >= 0)))
        present = [t.column(f"_p_{i}").to_numpy(zero_copy_only=False) for i in range(len(values))]
        whole = upsert.copy()
        for p in present:
            whole &= p
        out["_full_seq"] = take("_seq", newest(whole))
        moved = newest(pc.is_valid(t.column("_from")).to_numpy(zero_copy_only=False))
        out["_from"] = take("_from", moved)
        out["_move_seq"] = take("_seq", moved)
        for i, c in enumerate(values):
            carried = newest(upsert & present[i])
            out[c] = take(c, carried)
            out[f"_s_{i}"] = take("_seq", carried)
        yield from pa.table({c: out[c] for c in names}).to_batches()

    return fold


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()

    from apply_workload import Workload, generate
    from support.delta import delta_session

    import cdc_decode.spark as cdc_spark
    from cdc_decode.spark import _apply_rules as rules
    from cdc_decode.spark._plans import held

    w = Workload(rows=args.rows, fraction=args.fraction, warmup=1, batches=args.batches)
    work = Path(tempfile.mkdtemp(prefix="fold-arrow-"))
    gen = generate(w, work / "data")
    spark = delta_session(work / "wh", master=f"local[{args.cores}]", memory="6g")
    spark.conf.set("spark.sql.shuffle.partitions", str(args.cores * 2))
    parts = args.cores * 2

    captured = []
    sql_fold = rules.fold_columns

    def capture(entries, keys, values):
        captured.append((entries, keys, values))
        return sql_fold(entries, keys, values)

    rules.fold_columns = capture  # the entries of each call, as the fold reads them
    target = str(work / "table")
    cdc_spark.apply_changes(spark.read.parquet(gen.snapshot), target)
    for batch in gen.batches:
        cdc_spark.apply_changes(spark.read.parquet(batch), target)
    rules.fold_columns = sql_fold
    batches = captured[-args.batches :]

    # The folded rows' schema, known before any fold runs (apply_changes knows it from the
    # table's columns): not planned inside the timed fold over Arrow.
    schemas = {id(e): sql_fold(e, k, v).schema for e, k, v in batches}

    def arrow(entries, keys, values):
        schema = schemas[id(entries)]
        fn = arrow_fold(keys, values, schema.names)
        return entries.repartition(parts, *keys).mapInArrow(fn, schema)

    ways = {
        "entries": lambda e, k, v: e,
        "shuffle": lambda e, k, v: e.repartition(parts, *k),
        "sql fold": sql_fold,
        "arrow fold": arrow,
    }
    arrow(*batches[0]).count()  # the Python workers started
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for entries, keys, values in batches:
            for name, way in ways.items():
                t = time.perf_counter()
                _, _, free = held(way(entries, keys, values))
                seconds[name].append(time.perf_counter() - t)
                free()
    entries = sum(batch[0].count() for batch in batches) / len(batches)
    print(f"{w.describe()}: {entries:,.0f} entries a batch, local[{args.cores}]")
    print("| held | s a batch (median) | mean |\n|---|---:|---:|")
    for name, s in seconds.items():
        print(f"| {name} | {statistics.median(s):.3f} | {sum(s) / len(s):.3f} |")
    differ = sum(
        sql_fold(*b).exceptAll(arrow(*b)).count() + arrow(*b).exceptAll(sql_fold(*b)).count()
        for b in batches
    )
    print("the two folds' rows are equal" if not differ else f"FAILED: {differ} rows differ")
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
