"""Change events into Delta Lake tables, checked against the source.

A generated Tencent DTS stream (five tables of a simulated MySQL server) is decoded on
Spark, and each table's events are applied to a Delta table with ``apply_changes``: type 1
tables equal to the source, and one type 2 table with its history. Run on the Delta
environment (Spark 4.2):

    make demo-delta        # or: .venv-spark42/bin/python examples/apply_delta.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.delta import delta_session  # noqa: E402

from cdc_decode import spark as cdc_spark  # noqa: E402
from cdc_decode.generate import generate  # noqa: E402

FORMAT = "tencent-dts"
HISTORY = "shop.orders"


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="cdc-decode-delta-"))
    spark = delta_session(work / "warehouse", app="cdc-decode-apply-demo")
    stream = generate(FORMAT, messages=2000, seed=7)
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
