"""``cdc_spark.sync(routes=)`` into Iceberg: the 4 shards of a sharded Tencent DTS database
(``generate("tencent-dts", shards=4)``: keys colliding across shards, shard 0 with one more
column, shard 1's ``amount`` and shard 3's ``qty`` narrower) routed into one table of the
Hadoop catalog ``lake``, in two batches and the second again (a replay the table skips: its
marker, the target's, in the snapshot summary): the table equals the union of the shards'
final rows, value by value, each row with its shard's columns in the key. Iceberg 1.12 /
Spark 4.1, local[1]."""

from __future__ import annotations

import pytest
from support.route_truth import DB, TABLE, routed_columns, routed_differences

from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate

pytestmark = pytest.mark.spark


def _frame(spark, stream, start: int = 0, stop: int | None = None):
    """Kafka-like rows of the stream's messages ``[start, stop)``."""
    rows = [(None, v) for v in stream.values[start:stop]]
    return spark.createDataFrame(rows, "key binary, value binary")


def test_four_shards_route_into_one_iceberg_table_equal_to_their_union(iceberg_spark):
    spark = iceberg_spark
    stream = generate("tencent-dts", messages=120, seed=5, shards=4)
    assert len(stream.final_values) == 4
    target = "lake.routes.orders"
    half = len(stream.values) // 2
    options = {"routes": {"shop_*.orders_*": target}, "app_id": "routes-iceberg"}
    results = []
    for batch, (start, stop) in enumerate(((0, half), (half, None))):
        result = cdc_spark.sync(_frame(spark, stream, start, stop), "tencent-dts",
                                "lake.other_{db}.{table}", batch_id=batch,
                                **options)  # fmt: skip
        assert not result.failed, [t.error for t in result.failed]
        assert result.accounted(), result
        assert all(t.target == target and t.routed for t in result.tables.values())
        assert all(t.keys == ["id", DB, TABLE] for t in result.tables.values())
        results.append(result)
    assert results[0].rows_written > 0
    assert routed_differences(spark, stream, target) == []
    types = {f.name: f.dataType.simpleString() for f in spark.table(target).schema.fields}
    want = routed_columns(stream)
    assert {c: types[c] for c in want} == want
    snapshots = spark.sql(f"SELECT count(*) FROM {target}.snapshots").first()[0]
    again = cdc_spark.sync(_frame(spark, stream, half), "tencent-dts", "lake.other_{db}.{table}",
                           batch_id=1, **options)  # fmt: skip
    assert all(t.skipped and t.skipped.startswith("replay") for t in again.tables.values())
    assert again.rows_written == 0 and again.accounted()
    assert spark.sql(f"SELECT count(*) FROM {target}.snapshots").first()[0] == snapshots
    assert routed_differences(spark, stream, target) == []
