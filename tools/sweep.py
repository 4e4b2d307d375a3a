"""Every format's generated databases over many seeds, each table compared with the
simulated source: a hunt for changes that do not reach their table (docs/sync.md, "Every
change accounted for").

    .venv/bin/python tools/sweep.py --seeds 200                       # decode level
    .venv-spark42/bin/python tools/sweep.py --seeds 10 --sync --jars .jars-delta   # sync

For each format that ``sync`` takes and each seed, the generator's default database (five
tables, every MySQL type family) and a generated one of ``--tables`` tables (DDL
mid-stream, columns added, widened and dropped) are made. Then:

- decode level (the default): the schema pass of both engines types each table, the
  stream is decoded once with ``tables=``, and each table's typed events, applied in
  sequence order, must hold exactly the source's rows: no message an error, no value
  other than the source's as its mapped type holds it (``cdc_decode.generate.truth``);
- ``--sync``: ``cdc_spark.sync`` in two batches into Delta tables on a local Spark 4.2
  (``make venv-spark42 delta-jars``), every table equal to the source and every event
  accounted for.

Prints one line per case that differs, and a table of cases run and found; exits 1 when
any differs. Seeds are ``--first`` .. ``--first + --seeds - 1``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

FORMATS = ("tencent-dts", "datahub-blob", "debezium-json", "datastream-avro", "tdsql-json",
           "datastream-json")  # fmt: skip
TYPED = ("tencent-dts", "datahub-blob", "debezium-json", "datastream-avro")


def _streams(format: str, seed: int, messages: int, tables: int) -> list:
    from cdc_decode.generate import generate

    return [
        ("default", generate(format, messages=messages, seed=seed)),
        (f"{tables} tables", generate(format, messages=messages, seed=seed, table_count=tables)),
    ]


def _decode_level(format: str, stream) -> list[str]:
    """What differs between the typed events of each table and the source (empty: none)."""
    from support.typed_truth import typed_rows

    import cdc_decode
    from cdc_decode.generate.truth import same

    options = {"columns": stream.options["columns"]} if format == "tdsql-json" else {}
    found = []
    schemas = {}
    for engine in ("native", "python"):
        schemas[engine] = cdc_decode.table_schemas(
            stream.values, format, keys=stream.message_keys, engine=engine, **options
        )
    a, b = (schemas[e].batch.drop_columns(["error"]) for e in ("native", "python"))
    if not a.equals(b):
        found.append("the engines' schema passes differ")
    wire = schemas["native"]
    if wire.errors:
        found.append(f"{len(wire.errors)} messages did not parse: {wire.errors[0][1]}")
    unions = {}
    for table in wire:
        columns = {}
        for version in table.versions:
            for column in version.columns:
                known = columns.get(column.name)
                columns[column.name] = column if known is None else _wider(known, column)
        unions[table.name] = columns
    tables = {
        name: ", ".join(f"`{k}` {c.type or 'string'}" for k, c in cols.items())
        for name, cols in unions.items()
    }
    decoded = cdc_decode.decode(stream.values, format, tables=tables, **options)
    for name, batch in decoded.items():
        errors = [e for e in batch.column("error").to_pylist() if e]
        if errors:
            found.append(f"{name}: {len(errors)} error rows, e.g. {errors[0]}")
    typed = all(t.latest.typed for t in wire)  # Debezium's default stream: no Connect schema
    if typed:
        truth = {n: (c, r) for n, (c, r) in stream.final_values.items()}
    else:  # no types on the wire: string columns, the source's text (final_state)
        truth = {n: (None, r) for n, r in stream.final_state.items()}
    for name, (columns, rows) in truth.items():
        key = stream.primary_keys[name]
        if name not in decoded:
            found.append(f"{name}: no events")
            continue
        got = typed_rows(decoded[name], key)
        if len(got) != len(rows):
            found.append(f"{name}: {len(got)} rows, the source has {len(rows)}")
        wire_columns = unions[name]
        for source_key, row in rows.items():
            at = tuple(
                _expected(columns and columns[c], wire_columns[c].type, v, format)
                for c, v in zip(key, source_key, strict=True)
            )
            have = got.get(at)
            if have is None:
                found.append(f"{name}: key {at} missing")
                continue
            for column, value in row.items():
                if column in stream.dropped.get(name, ()):
                    continue  # no longer the source's (Stream.dropped)
                want = _expected(columns and columns[column], wire_columns[column].type, value,
                                 format)  # fmt: skip
                if not same(want, have.get(column)):
                    found.append(f"{name} {at}: {column} is {have.get(column)!r}, want {want!r}")
        if len(found) > 20:
            break
    return found


def _expected(column, spark: str | None, value, format: str):
    from cdc_decode.generate.truth import expected_value

    if spark is None or column is None:
        return None if value is None else str(value)  # the text (a str subclass or not)
    return expected_value(format, column, spark, value)


def _wider(a, b):
    """Of two versions' columns, the later one unless its type is narrower (as sync takes
    the wider of them)."""
    from cdc_decode.spark.sync import wider_type

    if a.type is None or b.type is None:
        return b
    wider = wider_type(a.type, b.type)
    return b if wider is None or wider == b.type else a


def _sync_level(format: str, stream, spark, lake: Path) -> list[str]:
    from cdc_decode import spark as cdc_spark
    from cdc_decode.generate.truth import differences

    keys = stream.message_keys or [None] * len(stream.values)
    rows = list(zip(keys, stream.values, strict=True))
    half = len(rows) // 2
    options = {}
    if format == "tdsql-json":
        options["columns"] = stream.options["columns"]
    if format in ("tdsql-json", "datastream-json") or (
        format == "debezium-json" and stream.message_keys is None
    ):
        options["keys"] = stream.primary_keys
    target = str(lake / "{db}" / "{table}")
    found = []
    results = []
    for part in (rows[:half], rows[half:]):
        df = spark.createDataFrame(part, "key binary, value binary")
        try:
            result = cdc_spark.sync(df, format, target, on_stale="ignore", **options)
        except cdc_spark.SyncError as error:
            result = error.result
            found += [f"{t.name}: {t.error}" for t in result.failed]
        results.append(result)
        if not result.accounted():
            found.append(f"a batch does not account for its events: {result.summary()}")
        if result.messages_with_errors:
            found.append(f"{result.messages_with_errors} bad messages: {result.errors[:2]}")
    targets = {n: t.target for r in results for n, t in r.tables.items() if t.target}
    typed = not any(t.untyped_columns for r in results for t in r.tables.values())
    if format in TYPED and stream.final_values and typed:
        found += differences(spark, stream, format, targets, limit=20)
    else:  # no types on the wire (Debezium without schemas.enable): the source's text
        from support.apply_truth import text_differences

        found += text_differences(spark, stream, targets, limit=20)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--messages", type=int, default=600)
    parser.add_argument("--tables", type=int, default=8, help="tables of the generated database")
    parser.add_argument("--formats", nargs="*", default=list(FORMATS))
    parser.add_argument("--sync", action="store_true", help="through sync into Delta tables")
    parser.add_argument("--jars", action="append", default=[], help="Delta's (and Kafka's) jars")
    args = parser.parse_args()
    spark = None
    if args.sync:
        from support import INTERPRETED

        from cdc_decode.spark import local_session

        # Tables of a few hundred rows: the test suites' settings (tests/support/__init__.py,
        # tests/support/delta.py). One session syncs hundreds of tables and keeps each one's
        # Delta log: with 1 GB and 64 MB pages a broadcast failed after about 40 seeds.
        spark = local_session("cdc-decode-sweep", master="local[2]", delta=True, jars=args.jars,
                              spark__sql__shuffle__partitions="2",
                              spark__databricks__delta__snapshotPartitions="1",
                              spark__driver__memory="3g", spark__buffer__pageSize="4m",
                              **INTERPRETED)  # fmt: skip
    cases = found_cases = 0
    started = time.monotonic()
    for format in args.formats:
        for seed in range(args.first, args.first + args.seeds):
            for what, stream in _streams(format, seed, args.messages, args.tables):
                cases += 1
                if spark is None:
                    found = _decode_level(format, stream)
                else:
                    with tempfile.TemporaryDirectory(prefix="cdc-sweep-") as lake:
                        found = _sync_level(format, stream, spark, Path(lake))
                if found:
                    found_cases += 1
                    print(f"{format} seed {seed} ({what}): {len(found)} differences", flush=True)
                    for line in found[:5]:
                        print(f"    {line}", flush=True)
        print(f"{format}: seeds {args.first}..{args.first + args.seeds - 1} done "
              f"({time.monotonic() - started:.0f} s)", flush=True)  # fmt: skip
    level = "sync into Delta" if spark else "decode"
    print(f"\n{cases} cases ({level}), {found_cases} with differences")
    return 1 if found_cases else 0


if __name__ == "__main__":
    sys.exit(main())
