"""End-to-end demo: change streams in every format decoded on a local Spark, and the
tables they build.

Run it with ``make demo-formats`` or
``python -m cdc_decode.demo_formats [--messages N] [--formats ...]``. It needs ``pyspark``
(and Java) besides ``cdc_decode``. For each format:

1. generates a stream of the same simulated MySQL server (:mod:`cdc_decode.generate`),
   adds a tombstone and a broken message, and stores it as a Parquet file shaped like
   Spark's Kafka source (Datastream Avro: as files in a ``<db>_<table>/yyyy/mm/dd/hh/mm/``
   tree, the broken one among them);
2. decodes it with :func:`cdc_decode.spark.decode` (the Avro tree with
   :func:`cdc_decode.spark.read_datastream`) and shows some events (in full for the first
   format, briefly for the others);
3. builds the tables (the latest image per primary key, deleted keys dropped) with a
   window over ``sequence`` in Spark SQL, shows ``shop.orders`` and checks every table
   against the source's final state;
4. prints the throughput of the Spark decode and of the in-process decoders.

It ends with a summary: one line per format.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import cdc_decode

TOPIC = "cdc-shop"
START = dt.datetime(2024, 5, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
ORDERS_COLUMNS = ["order_id", "user_id", "amount", "currency", "status", "placed_at"]

# Rows since a key's last delete, their `after` images merged in `sequence` order (a DTS
# update may carry only some columns); a key whose last change is a delete is gone. A
# two-message update (DataHub) counts by its after half.
TABLE_SQL = """
WITH changes AS (
    SELECT concat_ws('.', source_db, source_schema, source_table) AS table, op, sequence,
           transform(primary_key, k -> coalesce(after[k], before[k])) AS pk, after
    FROM events
    WHERE op IN ('insert', 'update', 'update_after', 'delete', 'read')
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


# A broken message per format, put in the middle of its stream.
# (datahub-tuple: a record whose `_operation_type_` is not I/U/D.)
BAD_VALUES = {
    "tencent-dts": b"\x0a\xff\xff not protobuf",
    "datahub-blob": b'{"schema":{},"payload":{"op":"INSERT","sequenceId":"12x"}}',
    "tdsql-json": b'{"eventtypestr":"insert","db":"shop","field":[true]}',
    "datahub-tuple": None,
    "debezium-json": b'{"op":"c","source":{"db":"shop","table":"orders","pos":-1}}',
    "datastream-json": b'{"read_method":"mysql-cdc-binlog","source_timestamp":"soon"}',
    # An Avro file cut short: its header, and no more.
    "datastream-avro": b"Obj\x01\x04\x14avro.codec\x08null",
}


def make_stream(format: str, messages: int, seed: int = 7):
    """A generated stream (:mod:`cdc_decode.generate`) with a tombstone and a bad value
    (a TUPLE topic, whose records are a table: a bad record, no tombstone)."""
    from .generate import generate

    stream = generate(format, messages=messages, seed=seed)
    if format == "datahub-tuple":
        records = stream.values
        middle = records.num_rows // 2
        bad = records.slice(middle, 1).to_pylist()[0]
        bad["_operation_type_"] = "X"
        values = pa.concat_tables(
            [records.slice(0, middle), pa.Table.from_pylist([bad], records.schema),
             records.slice(middle)]
        )  # fmt: skip
    else:
        values = list(stream.values)
        values[len(values) // 2 : len(values) // 2] = [None, BAD_VALUES[format]]
    return values, stream


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


def datastream_tree(values: list[bytes | None], root: Path) -> int:
    """Writes Avro files as Datastream lays them out, ``root/<db>_<table>/yyyy/mm/dd/hh/mm/``
    (the folder named by each file's schema, as Datastream names it; a file that cannot be
    read goes beside the first). Returns the bytes written."""
    import fastavro

    size = 0
    first = None
    for i, value in enumerate(v for v in values if v is not None):
        try:
            table = fastavro.reader(io.BytesIO(value)).writer_schema["name"]
        except Exception:  # the broken file
            table = first or "unknown"
        first = first or table
        minute = START + dt.timedelta(minutes=i // 50)
        folder = root / table / minute.strftime("%Y/%m/%d/%H/%M")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:06d}.avro").write_bytes(value)
        size += len(value)
    return size


def _spark():
    from .spark import local_session

    return local_session(
        "cdc-decode-demo",
        # map_concat while building the table: later images win.
        spark__sql__mapKeyDedupPolicy="LAST_WIN",
    )


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f}/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000, help="stream length")
    parser.add_argument("--engine", default="native", choices=cdc_decode.ENGINES)
    parser.add_argument("--formats", nargs="+", default=list(BAD_VALUES), choices=list(BAD_VALUES))
    args = parser.parse_args(argv)

    spark = _spark()
    summary = []
    try:
        for n, format in enumerate(args.formats):
            summary.append(_demo(spark, format, args.messages, args.engine, detailed=n == 0))
    finally:
        spark.stop()

    print("\n== summary")
    print(f"   {'format':<14}{'messages':>10}{'events':>10}{'Spark msg/s':>13}"
          f"{'native msg/s':>14}{'python msg/s':>14}  tables")  # fmt: skip
    for line in summary:
        print("   " + line[0])
    return 0 if all(ok for _, ok in summary) else 1


def _demo(spark, format: str, messages: int, engine: str, detailed: bool) -> tuple[str, bool]:
    """One format end to end; returns its summary line and whether its tables matched."""
    from pyspark.sql import functions as F

    from . import spark as cdc_spark

    print(f"\n== 1. a {format} stream: {messages:,} messages (cdc_decode.generate)")
    values, stream = make_stream(format, messages)
    expected = stream.final_state
    workdir = Path(tempfile.mkdtemp(prefix=f"cdc-decode-demo-{format}-"))
    options = {"columns": stream.options["columns"]} if format == "tdsql-json" else {}
    if format == "datahub-tuple":
        # A TUPLE topic read as a table: its columns are the records; `offset` is kept.
        source = workdir / "records.parquet"
        pq.write_table(values.append_column("offset", pa.array(range(len(values)))), source)
        size = values.nbytes
        print(f"   {len(values):,} records of {stream.options['tables'][0]}, written to {source}")
        decoded = cdc_spark.decode(spark.read.parquet(str(source)), format, engine=engine,
                                   keep=["offset"])  # fmt: skip
    elif format == "datastream-avro":
        # Whole files in a Datastream folder tree, each read as one value (binaryFile).
        source = workdir / "datastream"
        size = datastream_tree(values, source)
        files = sum(1 for _ in source.rglob("*.avro"))
        print(f"   {files:,} Avro files, {size / 1e6:.1f} MB, written under {source}/"
              "<db>_<table>/yyyy/mm/dd/hh/mm/")  # fmt: skip
        decoded = cdc_spark.read_datastream(spark, str(source), engine=engine)
    else:
        source = workdir / "kafka.parquet"
        pq.write_table(kafka_table(values), source)
        size = sum(len(v) for v in values if v)
        print(f"   {len(values):,} values, {size / 1e6:.1f} MB, written to {source}")
        kafka = spark.read.parquet(str(source))
        decoded = cdc_spark.decode(kafka, format, engine=engine, **options)

    # Stored once, so the steps below do not decode again (this also warms Spark up).
    decoded.write.mode("overwrite").parquet(str(workdir / "events.parquet"))
    events = spark.read.parquet(str(workdir / "events.parquet"))
    # Timed on a no-op sink: decoding only, nothing stored.
    start = time.perf_counter()
    decoded.write.format("noop").mode("overwrite").save()
    spark_s = time.perf_counter() - start
    rows = events.count()

    # Where an event came from: its Kafka offset, or its file.
    origin = "path" if format == "datastream-avro" else "offset"
    reader = "read_datastream" if format == "datastream-avro" else "decode"
    print(f"\n== 2. {format} change events (cdc_decode.spark.{reader})")
    shown = events.select(origin, "op", "source_table", "tx_id", "event_id", "after").where(
        "op <> 'begin' AND op <> 'commit'"
    )
    shown.show(8 if detailed else 3, truncate=not detailed and 60)
    if detailed:
        events.groupBy("op").count().orderBy("op").show()
    events.where("op = 'error'").select(origin, "error").show(truncate=False)

    print(f"== 3. the tables from {format}: latest image per primary key, deleted keys dropped")
    if events.where("primary_key IS NOT NULL").isEmpty():
        # TDSQL and TUPLE messages name no key columns: the tables' keys, as a user knows them.
        keys = spark.createDataFrame(
            [(*name.split("."), key) for name, key in stream.primary_keys.items()],
            "key_db string, source_table string, key array<string>",
        )
        events = (
            events.join(F.broadcast(keys), ["source_table"], "left")
            .withColumn("primary_key", F.col("key"))
            .withColumn("source_db", F.coalesce("source_db", "key_db"))
            .drop("key", "key_db")
        )
    events.createOrReplaceTempView("events")
    tables = spark.sql(TABLE_SQL)
    if detailed:
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

    print(f"\n== 4. {format} throughput")
    cores = spark.sparkContext.defaultParallelism
    where = "a folder tree of files" if format == "datastream-avro" else "one Kafka partition"
    print(
        f"   Spark mapInArrow ({engine}, local[{cores}], {where}): "
        f"{_rate(len(values), spark_s)} messages {_rate(rows, spark_s)} rows"
    )
    rates = {}
    array = values if format == "datahub-tuple" else pa.array(values, pa.binary())
    for engine_name in cdc_decode.ENGINES:
        # Best of two runs: the first also faults in the memory a long-running process
        # reuses.
        seconds = float("inf")
        for _ in range(2):
            start = time.perf_counter()
            batch = cdc_decode.decode(array, format, engine=engine_name, **options)
            seconds = min(seconds, time.perf_counter() - start)
        rates[engine_name] = len(values) / seconds
        print(
            f"   in-process cdc_decode.decode ({engine_name}): "
            f"{_rate(len(values), seconds)} messages {_rate(batch.num_rows, seconds)} rows"
        )
    line = (
        f"{format:<14}{len(values):>10,}{rows:>10,}{len(values) / spark_s:>13,.0f}"
        f"{rates.get('native', 0):>14,.0f}{rates.get('python', 0):>14,.0f}  "
        f"{'all equal to the source' if ok else 'DIFFER from the source'}"
    )
    return line, ok


if __name__ == "__main__":
    sys.exit(main())
