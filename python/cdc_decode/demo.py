"""End-to-end demo: a Tencent DTS stream decoded on a local Spark, and the table it builds.

Run it with ``make demo`` or ``python -m cdc_decode.demo [--messages N]``. It needs
``pyspark`` (and Java) besides ``cdc_decode``:

1. makes a DTS stream for a small ``shop.orders`` table (inserts, updates, deletes, a few
   multi-part envelopes, a tombstone and a broken message) and stores it as a Parquet
   file shaped like Spark's Kafka source;
2. decodes it with :func:`cdc_decode.spark.decode` and shows some events;
3. builds the table (the latest image per primary key, deleted keys dropped) with a window
   over ``sequence`` in Spark SQL, shows it and checks it against the source's own state;
4. prints the throughput of the Spark decode and of the in-process decoders.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import cdc_decode

from . import _proto as pb

FORMAT = "tencent-dts"
TOPIC = "dts-shop"
START = dt.datetime(2024, 5, 1, 10, 0, 0, tzinfo=dt.timezone.utc)
STATUSES = ["new", "paid", "shipped", "delivered", "returned"]

TABLE_SQL = """
WITH changes AS (
    SELECT source_db, source_table, op, sequence,
           transform(primary_key, k -> coalesce(after[k], before[k])) AS pk,
           coalesce(after, before) AS image
    FROM events
    WHERE op IN ('insert', 'update', 'delete', 'read')
), latest AS (
    SELECT *, row_number() OVER (
        PARTITION BY source_db, source_table, pk ORDER BY sequence DESC) AS rn
    FROM changes
)
SELECT CAST(image['id'] AS BIGINT) AS id, image['customer'] AS customer,
       CAST(image['amount'] AS DECIMAL(10, 2)) AS amount, image['status'] AS status
FROM latest
WHERE rn = 1 AND op <> 'delete' AND source_table = 'orders'
ORDER BY id
"""


def _enum(descriptor, name: str) -> int:
    return descriptor.values_by_name[name].number


def _image(row: dict) -> list:
    return [
        pb.Data(dataType=_enum(pb.DataType, "INT64"), sv=str(row["id"])),
        pb.Data(
            dataType=_enum(pb.DataType, "STRING"), charset="utf8mb4", bv=row["customer"].encode()
        ),
        pb.Data(dataType=_enum(pb.DataType, "DECIMAL"), sv=row["amount"]),
        pb.Data(
            dataType=_enum(pb.DataType, "STRING"), charset="utf8mb4", bv=row["status"].encode()
        ),
    ]


def make_stream(messages: int, seed: int = 7) -> tuple[list[bytes | None], dict[int, dict]]:
    """A DTS stream of ``messages`` Kafka values for ``shop.orders``, and the final table.

    Each message is one transaction (BEGIN, one DML event of 1 to 8 rows, COMMIT); about one
    in 200 is split into a multi-part envelope set; one tombstone and one broken value are
    mixed in.
    """
    rng = random.Random(seed)
    table: dict[int, dict] = {}
    next_id = 1
    seq = 0
    values: list[bytes | None] = []
    columns = [
        pb.Column(name="id", originalType="bigint", isKey=True),
        pb.Column(name="customer", originalType="varchar(32)"),
        pb.Column(name="amount", originalType="decimal(10,2)"),
        pb.Column(name="status", originalType="varchar(16)"),
    ]
    while len(values) < messages:
        kind = rng.choices(["INSERT", "UPDATE", "DELETE"], [5, 4, 1])[0]
        if kind != "INSERT" and len(table) < 10:
            kind = "INSERT"
        rows = []
        for _ in range(rng.randint(1, 8)):
            if kind == "INSERT":
                row = {
                    "id": next_id,
                    "customer": f"customer-{rng.randint(1, 500)}",
                    "amount": f"{rng.randint(100, 99999) / 100:.2f}",
                    "status": "new",
                }
                next_id += 1
                table[row["id"]] = row
                rows.append(pb.RowChange(newColumns=_image(row)))
            else:
                key = rng.choice(list(table))
                old = table[key]
                if kind == "UPDATE":
                    new = dict(old, status=rng.choice(STATUSES))
                    table[key] = new
                    rows.append(pb.RowChange(oldColumns=_image(old), newColumns=_image(new)))
                else:
                    del table[key]
                    rows.append(pb.RowChange(oldColumns=_image(old)))
                    if len(table) < 10:
                        break
        xid = f"3E11FA47-71CA-11E1-9E33-C80AA9429562:{len(values) + 1}"
        ts = int(START.timestamp()) + len(values) // 50
        entries = []
        for message_type, event in (
            ("BEGIN", pb.Event(beginEvent={"transactionId": xid, "threadId": 11})),
            (
                "DML",
                pb.Event(
                    dmlEvent=pb.DMLEvent(
                        dmlEventType=_enum(pb.DMLType, kind), columns=columns, rows=rows
                    )
                ),
            ),
            ("COMMIT", pb.Event(commitEvent={"transactionId": xid})),
        ):
            seq += 1
            header = pb.Header(
                version=1,
                sourceType=_enum(pb.SourceType, "MYSQL"),
                messageType=_enum(pb.MessageType, message_type),
                timestamp=ts,
                serverId=1001,
                fileName="mysql-bin.000042",
                position=4 + 200 * seq,
                gtid=xid,
                schemaName="shop" if message_type == "DML" else "",
                tableName="orders" if message_type == "DML" else "",
                seqId=seq,
            )
            entries.append(pb.Entry(header=header, event=event))
        data = pb.Entries(items=entries).SerializeToString()
        if rng.random() < 0.005:
            size = -(-len(data) // 3)
            for index in range(3):
                chunk = data[index * size : (index + 1) * size]
                values.append(
                    pb.Envelope(version=1, total=3, index=index, data=chunk).SerializeToString()
                )
        else:
            values.append(pb.Envelope(version=1, total=1, data=data).SerializeToString())
    values[len(values) // 2 : len(values) // 2] = [None, b"\x0a\xff\xff not protobuf"]
    return values, table


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
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("cdc-decode-demo")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:>12,.0f}/s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=30_000, help="stream length")
    parser.add_argument("--engine", default="native", choices=["native", "python"])
    args = parser.parse_args(argv)

    from . import spark as cdc_spark

    print(f"== 1. a Tencent DTS stream: {args.messages:,} Kafka messages for shop.orders")
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

        print("== 3. the table: latest image per primary key, deleted keys dropped")
        events.createOrReplaceTempView("events")
        orders = spark.sql(TABLE_SQL)
        orders.show(10, truncate=False)
        built = {row.id: row.status for row in orders.select("id", "status").collect()}
        want = {key: row["status"] for key, row in expected.items()}
        verdict = "matches" if built == want else "DOES NOT MATCH"
        print(f"   {len(built):,} rows; the table {verdict} the source's final state")

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
    return 0 if built == want else 1


if __name__ == "__main__":
    sys.exit(main())
