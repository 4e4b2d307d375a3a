"""Typed DataFrames per table from one pass over a multi-table CDC stream.

Needs Java 17 and a Python with ``cdc-decode`` (its stream generator needs the
``python-engine`` extra) and ``pyspark``; a local Spark, one core is enough:

    pip install 'cdc-decode[python-engine]' 'pyspark[sql]'
    python typed_tables.py [--messages 2000]

In this repository: ``.venv/bin/python examples/typed_tables.py`` after ``make build``.

A DataHub BLOB topic (generated here; in production, Spark's Kafka source) carries five
tables. ``cdc_spark.decode(..., tables=...)`` decodes the stream once, in one
``mapInArrow`` whose output has a typed ``before``/``after`` struct pair per table, and
returns one DataFrame per table selected from it. Persist the shared decode (``"*"``) or
write every table in one ``foreachBatch`` so it is not recomputed per table.
"""

from __future__ import annotations

import argparse

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate

TABLES = {
    "shop.orders": (
        "order_id bigint, user_id decimal(20,0), amount decimal(10,2), currency string, "
        "quantity smallint, discount double, status string, placed_at timestamp"
    ),
    "shop.users": (
        "id decimal(20,0), name string, email string, balance decimal(12,2), "
        "birthday date, created_at timestamp, avatar binary"
    ),
    "inventory.items": "sku string, title string, stock int, price decimal(18,6), image binary",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000, help="stream length")
    args = parser.parse_args(argv)
    spark = cdc_spark.local_session("typed-tables", master="local[1]")
    stream = generate("datahub-blob", messages=args.messages, seed=1)
    kafka = spark.createDataFrame([(v,) for v in stream.values], "value binary")

    frames = cdc_spark.decode(kafka, "datahub-blob", tables=TABLES)
    decoded = frames["*"].persist()  # one decode, however many tables are read below

    for name in TABLES:
        orders = frames[name]
        print(f"== {name}: {orders.count()} events")
        orders.select("op", "event_time", "after").show(3, truncate=False)
    rest = frames[None].groupBy("op").count()
    print("== events of no listed table (control events, other tables, errors):")
    rest.show()

    # Streaming: one foreachBatch writes every table from one decode per micro-batch.
    def write_tables(batch_df, batch_id):
        batch_df.persist()
        for i, name in enumerate(TABLES):
            table = batch_df.where(f"table = '{name}'").select(
                "op", "event_time", "sequence", f"after_{i}.*"
            )
            table.write.format("noop").mode("overwrite").save()  # e.g. .saveAsTable(...)
        batch_df.unpersist()

    write_tables(decoded, 0)
    decoded.unpersist()

    # The same in plain Python, without Spark.
    batches = cdc_decode.decode(stream.values, "datahub-blob", tables=TABLES)
    print({name: batch.num_rows for name, batch in batches.items()})
    spark.stop()


if __name__ == "__main__":
    main()
