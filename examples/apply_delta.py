"""Change events into Delta Lake tables, checked against the source.

A generated Tencent DTS stream (five tables of a simulated MySQL server) is decoded on
Spark, and each table's events are applied to a Delta table with ``apply_changes``: type 1
tables equal to the source, and one type 2 table with its history. Exits 1 when a table
differs from the source.

Needs Java 17 and a Python with ``cdc-decode``, ``pyspark==4.2.0`` and
``delta-spark==4.4.0`` (Delta 4.4 runs on Spark 4.2, not 4.3). Delta's jars come from Maven
Central on the first run (``spark.jars.packages``, cached in ``~/.ivy2``), or from a folder
given with ``--jars``:

    pip install 'cdc-decode[python-engine]' 'pyspark[sql]==4.2.0' delta-spark==4.4.0
    python apply_delta.py [--messages 2000] [--tables shop.orders ...] [--jars DIR] [--out DIR]

In this repository ``make demo-delta`` runs it on ``.venv-spark42`` with the jars of
``make delta-jars`` (``--jars .jars-delta``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate

FORMAT = "tencent-dts"
HISTORY = "shop.orders"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000, help="stream length")
    parser.add_argument(
        "--tables", nargs="+", help="some of the five tables (default: all; db.table names)"
    )
    parser.add_argument("--jars", action="append", default=[], help="a folder of Delta's jars")
    parser.add_argument("--out", help="where the tables go (default: a new temporary folder)")
    args = parser.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="cdc-decode-delta-"))
    spark = cdc_spark.local_session(
        "cdc-decode-apply-demo",
        master="local[1]",
        delta=True,
        jars=args.jars,
        spark__sql__shuffle__partitions="2",
        spark__sql__warehouse__dir=str(work / "warehouse"),
    )
    stream = generate(FORMAT, messages=args.messages, seed=7, tables=args.tables)
    kafka = spark.createDataFrame([(v,) for v in stream.values], "value binary").repartition(1)
    events = cdc_spark.decode(kafka, FORMAT).persist()
    print(f"== {FORMAT}: {len(stream.values):,} messages, {events.count():,} events")
    ok = True
    for name, keys in sorted(stream.primary_keys.items()):
        db, table = name.split(".")
        mine = events.where(f"source_table = '{table}' OR source_table IS NULL")
        # Every column the source ever had, as text: the values compare with the source's.
        columns = list(dict.fromkeys(c for r in stream.final_state[name].values() for c in r))
        ddl = ", ".join(f"`{c}` string" for c in columns)
        path = str(work / "lake" / db / table)
        start = time.perf_counter()
        result = cdc_spark.apply_changes(mine, path, keys=keys, schema=ddl)
        seconds = time.perf_counter() - start
        rows = cdc_spark.current_rows(spark, path).collect()
        got = {tuple(r[k] for k in keys): r.asDict() for r in rows}
        want = {k: {c: row.get(c) for c in columns} for k, row in stream.final_state[name].items()}
        equal = got == want
        ok &= equal
        print(
            f"   {path}: {result.changes:,} changes, {len(got):,} rows, "
            f"ddl reported {len(result.ddl)}, {seconds:.1f} s: "
            f"{'equal to the source' if equal else 'DIFFERS from the source'}"
        )
        if name == HISTORY:
            history = str(work / "lake" / db / f"{table}_history")
            cdc_spark.apply_changes(mine, history, keys=keys, schema=ddl, scd_type=2)
            versions = spark.read.format("delta").load(history)
            current = {
                tuple(r[k] for k in keys): r.asDict()
                for r in cdc_spark.current_rows(spark, history).collect()
            }
            print(
                f"   {history}: SCD type 2, {versions.count():,} versions, {len(current):,} "
                f"current: {'equal to the source' if current == want else 'DIFFER'}"
            )
            ok &= current == want
            key = next(iter(sorted(want)))
            versions.where(
                " AND ".join(f"`{k}` = '{v}'" for k, v in zip(keys, key, strict=True))
            ).select(*keys, "status", "_cdc_start_time", "_cdc_end_time", "_cdc_current").orderBy(
                "_cdc_start_sequence"
            ).show(truncate=False)
    print("== all tables equal to the source" if ok else "== some tables DIFFER from the source")
    spark.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
