"""Every format's generated stream, 100,000 row changes of it, applied to Delta equals the source.

For each format the generator writes (and Debezium's Oracle and MongoDB connectors): a
stream of at least ``--changes`` row changes (``insert``/``read``/``update``/
``update_before``/``update_after``/``delete`` events) from the simulated source, with
``--key-changes`` of its updated rows moving to a new key, decoded on Spark by the native
engine (generic events: map images keep a partial image's absent columns absent, and
every column is text, so values compare with the source's exactly), delivered in
``--batches`` batches, and applied with ``apply_changes`` into one Delta table per source
table. Then every table must equal the generator's ``final_state`` row for row, value for
value, and one table applied as SCD type 2 must hold the source's change log
(tests/support/apply_truth.py). The delivery (``apply_truth.deliveries``): the events in
sequence order cut into ``--batches`` consecutive slices, a quarter of them delivered in a
later batch than their slice (late partial images, late deletes and inserts), about one in
ten delivered a second time, each batch shuffled; only a change of a key that a later
update moves is never delivered after that update (docs/apply.md, "Key changes").

    make bench-apply-check                       # every format, 100,000 changes each
    python benches/apply_check.py --changes 5000 --formats tencent-dts datahub-tuple

Prints a line per step and a table per format; exits 1 when any table differs.
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

# Messages per 100,000 row changes, measured on seed 7 (a count that falls short is grown
# and the stream generated again): DTS packs about 5.8 row changes in a message, DataHub
# blob and TDSQL send one event a message among transaction markers and heartbeats,
# Datastream Avro a file of about 2.9. Debezium's Oracle and MongoDB connectors take the
# debezium-json count.
MESSAGES_PER_100K = {
    "tencent-dts": 18_000,
    "datahub-blob": 132_000,
    "tdsql-json": 147_000,
    "datahub-tuple": 100_000,
    "debezium-json": 107_000,
    "datastream-json": 100_500,
    "datastream-avro": 35_200,
}
HISTORY_TABLE = "shop.orders"
"""The table also applied as SCD type 2 (a stream without it: its only table)."""
ROW_OPS = ("insert", "read", "update", "update_before", "update_after", "delete")


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def cases(formats: list[str] | None) -> list[tuple[str, str | None]]:
    from cdc_decode.generate import FORMATS

    every = [(f, None) for f in FORMATS] + [
        ("debezium-json", "oracle"),
        ("debezium-json", "mongodb"),
    ]
    if not formats:
        return every
    return [c for c in every if c[0] in formats or label(*c) in formats]


def label(fmt: str, connector: str | None) -> str:
    return fmt if connector is None else f"{fmt}/{connector}"


def generated(fmt: str, connector: str | None, changes: int, seed: int, key_changes: float):
    """A stream with at least ``changes`` row changes (re-generated larger if short)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from cdc_decode.generate import generate

    extra = {} if connector is None else {"connector": connector}
    extra["key_changes"] = key_changes
    messages = max(100, MESSAGES_PER_100K[fmt] * changes // 100_000)
    while True:
        stream = generate(fmt, messages=messages, seed=seed, **extra)
        got = pc.sum(pc.is_in(stream.expected["op"], value_set=pa.array(ROW_OPS))).as_py() or 0
        if got >= changes:
            return stream, got
        log(f"  {messages:,} messages gave {got:,} row changes; more")
        messages = int(messages * changes / max(got, 1) * 1.02) + 1


def messages_frame(spark, stream):
    """The stream's messages as one ordered partition (a DTS multi-part set must stay in
    order in one partition), or datahub-tuple's records."""
    import pyarrow as pa

    if stream.format == "datahub-tuple":
        return spark.createDataFrame(stream.values).coalesce(1)
    values = pa.table({"value": pa.array(stream.values, pa.binary())})
    return spark.createDataFrame(values).coalesce(1)


def check_format(spark, work: Path, fmt: str, connector: str | None, args) -> dict:
    """Generate, decode, deliver, apply and compare one format; the numbers and the diffs."""
    from pyspark.sql import functions as F
    from support import apply_truth

    from cdc_decode import spark as cdc_spark

    name = label(fmt, connector)
    here = work / name.replace("/", "-")
    start = time.perf_counter()
    stream, changes = generated(fmt, connector, args.changes, args.seed, args.key_changes)
    generate_s = time.perf_counter() - start
    log(
        f"{name}: generated {stream.messages:,} messages, {stream.expected.num_rows:,} events, "
        f"{changes:,} row changes, {len(stream.primary_keys)} tables ({generate_s:.1f} s)"
    )

    start = time.perf_counter()
    options = {"columns": stream.options["columns"]} if "columns" in stream.options else {}
    decoded = cdc_spark.decode(messages_frame(spark, stream), fmt, **options)
    events_path = str(here / "events")
    decoded.select(
        "op",
        "source_table",
        "sequence",
        "event_time",
        "primary_key",
        "ddl",
        "error",
        "before",
        "after",
    ).write.parquet(events_path)
    decode_s = time.perf_counter() - start
    events = spark.read.parquet(events_path)
    counts = {r["op"]: r["count"] for r in events.groupBy("op").count().collect()}
    total = sum(counts.values())
    decoded_changes = sum(n for op, n in counts.items() if op in ROW_OPS)
    log(
        f"{name}: decoded {total:,} events ({decoded_changes:,} row changes, "
        f"{counts.get('error', 0)} errors) on Spark in {decode_s:.1f} s"
    )

    tables = sorted(stream.primary_keys)
    history = HISTORY_TABLE if HISTORY_TABLE in tables else tables[0]
    if connector == "oracle":
        history = next(t for t in tables if t.endswith("." + HISTORY_TABLE))
    mismatches: list[str] = []
    apply_s = scd2_s = 0.0
    applied = 0
    for table in tables:
        short = table.rsplit(".", 1)[-1]
        keys = list(stream.primary_keys[table])
        columns = apply_truth.final_columns(stream, table)
        ddl = ", ".join(f"`{c}` string" for c in columns)
        path = str(here / "lake" / short)
        history_path = str(here / "lake" / f"{short}_history")
        table_events = events.where(
            (F.col("source_table") == short) | F.col("source_table").isNull()
        ).toArrow()
        batches = apply_truth.deliveries(table_events, keys, args.batches, seed=args.seed)
        log(
            f"{name}: {table}: {sum(map(len, batches)):,} deliveries in {args.batches} batches "
            f"({', '.join(f'{len(b):,}' for b in batches)})"
        )
        for b, rows in enumerate(batches):
            mine = spark.createDataFrame(table_events.take(rows))
            begin = time.perf_counter()
            result = cdc_spark.apply_changes(mine, path, keys=keys, schema=ddl, on_stale="ignore")
            apply_s += time.perf_counter() - begin
            applied += result.changes
            if result.errors or result.unkeyed:
                mismatches.append(
                    f"{table} batch {b}: {result.errors} error rows, {result.unkeyed} unkeyed"
                )
            if table == history:
                begin = time.perf_counter()
                cdc_spark.apply_changes(mine, history_path, keys=keys, schema=ddl, scd_type=2)
                scd2_s += time.perf_counter() - begin
        got = apply_truth.table_rows(spark, path, keys)
        want = apply_truth.want_rows(stream, table, columns)
        differs = apply_truth.diff(got, want)
        log(
            f"{name}: {table}: {len(got):,} rows "
            f"{'equal to the source' if not differs else 'MISMATCH: ' + differs}"
        )
        if differs:
            mismatches.append(f"{table}: {differs}")
        if table == history:
            got_h = apply_truth.history_rows(spark, history_path, keys, columns)
            want_h = apply_truth.change_log(stream, table, columns)
            differs = apply_truth.diff(got_h, want_h)
            log(
                f"{name}: {table} SCD type 2: {len(got_h):,} versions "
                f"{'equal to the change log' if not differs else 'MISMATCH: ' + differs}"
            )
            if differs:
                mismatches.append(f"{table} history: {differs}")
    log(
        f"{name}: {total:,} events, {len(tables)} tables: decode {decode_s:.1f} s, apply "
        f"{apply_s:.1f} s, {total / (decode_s + apply_s):,.0f} events/s, SCD2 {scd2_s:.1f} s: "
        f"{'OK' if not mismatches else f'MISMATCH ({len(mismatches)})'}"
    )
    return {
        "format": name,
        "messages": stream.messages,
        "events": total,
        "changes": decoded_changes,
        "tables": len(tables),
        "decode_s": decode_s,
        "apply_s": apply_s,
        "applied": applied,
        "scd2_s": scd2_s,
        "history": history,
        "mismatches": mismatches,
    }


def report(rows: list[dict], args) -> None:
    print()
    print(
        "| format | messages | events | row changes | tables | decode s | apply s "
        "| events/s | SCD2 s | result |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        seconds = r["decode_s"] + r["apply_s"]
        result = "OK" if not r["mismatches"] else f"MISMATCH ({len(r['mismatches'])})"
        print(
            f"| {r['format']} | {r['messages']:,} | {r['events']:,} | {r['changes']:,} "
            f"| {r['tables']} | {r['decode_s']:.1f} | {r['apply_s']:.1f} "
            f"| {r['events'] / seconds:,.0f} | {r['scd2_s']:.1f} | {result} |"
        )
    print(
        f"\nevents/s: the decoded events over decode + apply (SCD type 1, every table, "
        f"{args.batches} batches); SCD2: the history table alone. local[{args.cores}]."
    )
    for r in rows:
        for m in r["mismatches"]:
            print(f"MISMATCH {r['format']}: {m}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=100_000, help="row changes per format")
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument(
        "--key-changes", type=float, default=0.1, help="share of updated rows moved to a new key"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cores", type=int, default=1, help="local[N]")
    parser.add_argument("--memory", default="2g", help="the driver's memory")
    parser.add_argument("--formats", nargs="*", help="formats (or debezium-json/oracle ...)")
    parser.add_argument("--keep", help="keep the work files in this folder")
    args = parser.parse_args()

    from support.delta import delta_session

    chosen = cases(args.formats)
    if not chosen:
        parser.error(f"no format matches {args.formats}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="apply-check-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        spark = delta_session(
            work / "warehouse",
            app="apply-check",
            master=f"local[{args.cores}]",
            memory=args.memory,
        )
        log(f"{len(chosen)} streams, {args.changes:,} row changes each, work in {work}")
        for fmt, connector in chosen:
            rows.append(check_format(spark, work, fmt, connector, args))
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(rows, args)
    return 1 if any(r["mismatches"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
