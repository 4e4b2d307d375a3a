"""Decoded CDC events into AutoCDC tables: ``shop.orders`` as it is now (SCD type 1) and
with its history (SCD type 2), ``shop.order_items`` (two key columns) as it is now.

``spark-pipelines`` runs this file on the client of a Spark Connect session (``spark``
is given); the decoding itself runs on the executors, in ``mapInArrow``. The settings
come from the ``configuration:`` of spark-pipeline.yml.
"""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_decode import spark as cdc_spark

FORMAT = spark.conf.get("cdc_decode.format")  # noqa: F821 (spark-pipelines defines `spark`)
TOPIC = spark.conf.get("cdc_decode.topic")  # noqa: F821
DATABASE = spark.conf.get("cdc_decode.database")  # noqa: F821
TARGETS = f"{spark.conf.get('cdc_decode.catalog')}.{DATABASE}"  # noqa: F821
# Where to keep parquet copies of the targets after each run (an existing database of a
# catalog that writes files, such as `spark_catalog.default`), as tables named
# `<database>_<target>`; empty for none. The in-memory catalog's tables end with its JVM;
# the test reads these copies.
SNAPSHOTS = spark.conf.get("cdc_decode.snapshots", "")  # noqa: F821

# The tables: their key columns and their columns with the types the decoder gives them
# (typed mode, docs/typed.md: `before` and `after` become structs of exactly these columns).
TABLES = {
    "shop.orders": (
        ["order_id"],
        [
            ("order_id", "bigint"),
            ("user_id", "decimal(20,0)"),
            ("amount", "decimal(10,2)"),
            ("currency", "string"),
            ("quantity", "bigint"),
            ("discount", "double"),
            ("note", "string"),
            ("status", "string"),
            ("placed_at", "timestamp"),
            ("ship_window", "string"),
            ("delta", "bigint"),
            ("priority", "bigint"),
            ("coupon", "decimal(8,2)"),  # added by ALTER TABLE in the stream
        ],
    ),
    "shop.order_items": (
        ["order_id", "line_no"],
        [
            ("order_id", "bigint"),
            ("line_no", "bigint"),
            ("sku", "string"),
            ("qty", "bigint"),
            ("unit_price", "decimal(10,4)"),
            ("cost", "bigint"),
            ("weight_g", "bigint"),
            ("gift_wrap", "bigint"),
            ("returned_at", "timestamp"),  # added by ALTER TABLE in the stream
        ],
    ),
}

# The events that change a row; begin, commit, ddl, heartbeat, tombstone and error rows
# never reach a flow. (`update_before` comes only with a key change, which AutoCDC cannot
# express: see docs/autocdc.md.)
ROW_OPS = ["insert", "read", "update", "update_after", "delete"]


def messages() -> DataFrame:
    """The topic as a stream, with the columns of Spark's Kafka source.

    With a broker, read it instead (jars as in `make jars`):
    ``spark.readStream.format("kafka").option("kafka.bootstrap.servers", ...)
    .option("subscribe", ...).load()``.
    """
    return (
        spark.readStream.schema(  # noqa: F821
            "topic string, partition int, offset bigint, timestamp timestamp, value binary"
        )
        .option("maxFilesPerTrigger", 1)
        .parquet(TOPIC)
    )


def changes(table: str) -> DataFrame:
    """One table's row changes: ``op``, ``sequence``, then the table's columns (the
    after image, or the before image of a delete). Only the image's fields: typed events'
    ``after_absent`` (docs/typed.md) is not a column of the source table."""
    _, columns = TABLES[table]
    ddl = ", ".join(f"`{name}` {kind}" for name, kind in columns)
    options = {}
    if FORMAT == "tdsql-json":  # positional images: name them
        options["columns"] = {table: [name for name, _ in columns]}
    # tables= (not schema=): the topic carries five tables, and only this one's images are
    # typed; the other tables' rows are left out, never made error rows.
    events = cdc_spark.decode(messages(), FORMAT, tables={table: ddl}, **options)[table]
    rows = events.where(F.col("op").isin(ROW_OPS) & F.col("error").isNull())
    image = F.when(F.col("op") == "delete", F.col("before")).otherwise(F.col("after"))
    return rows.select("op", "sequence", image.alias("row")).select("op", "sequence", "row.*")


def auto_cdc(table: str, target: str, scd_type: int) -> None:
    """An AutoCDC flow of ``table``'s changes into ``target`` (created here)."""
    keys, _ = TABLES[table]
    dp.create_streaming_table(target)
    dp.create_auto_cdc_flow(
        target=target,
        source=table.replace(".", "_") + "_changes",
        keys=keys,
        sequence_by="sequence",
        apply_as_deletes="op = 'delete'",
        except_column_list=["op", "sequence"],
        stored_as_scd_type=scd_type,
    )


# decode() reads its input's schema, which a pipeline forbids inside a query function
# (ATTEMPT_ANALYSIS_IN_PIPELINE_QUERY_FUNCTION): build the DataFrames here, while the
# definitions load, and let the query functions return them.
for name in TABLES:
    decoded = changes(name)
    dp.temporary_view(lambda decoded=decoded: decoded, name=name.replace(".", "_") + "_changes")

auto_cdc("shop.orders", f"{TARGETS}.orders", 1)
auto_cdc("shop.orders", f"{TARGETS}.orders_history", 2)
auto_cdc("shop.order_items", f"{TARGETS}.order_items", 1)

if SNAPSHOTS:
    for target in ("orders", "orders_history", "order_items"):
        dp.materialized_view(
            lambda target=target: spark.read.table(f"{TARGETS}.{target}"),  # noqa: F821
            name=f"{SNAPSHOTS}.{DATABASE}_{target}",
            format="parquet",
        )
