"""``cdc_spark.sync`` into Iceberg: a batch whose only event of a table is its ``truncate``
(Debezium's ``op: "t"``) empties the table of the Hadoop catalog ``lake``, beside another
table's row changes, and the batch again is a replay the table skips (docs/sync.md,
"Truncates"). Iceberg 1.12 / Spark 4.1, local[1]."""

from __future__ import annotations

import pytest
from support.debezium_changes import change_messages

from cdc_decode import spark as cdc_spark

pytestmark = pytest.mark.spark


def test_a_truncate_alone_in_a_batch_empties_its_iceberg_table(iceberg_spark):
    spark = iceberg_spark
    options = {"app_id": "truncates-iceberg", "keys": {"truncshop.*": ["id"]}}

    def messages(*changes):  # (table, op, after, position) of database truncshop
        return change_messages(spark, *[("truncshop", *change) for change in changes])

    first = cdc_spark.sync(messages(("orders", "c", {"id": 1, "v": "x"}, 100),
                                    ("orders", "c", {"id": 2, "v": "x"}, 110),
                                    ("users", "c", {"id": 1, "v": "x"}, 120)),
                           "debezium-json", "lake.{db}.{table}", batch_id=0,
                           **options)  # fmt: skip
    assert not first.failed and first.rows_written == 3
    batch = messages(("orders", "t", None, 200), ("users", "c", {"id": 2, "v": "x"}, 210))
    second = cdc_spark.sync(batch, "debezium-json", "lake.{db}.{table}", batch_id=1, **options)
    assert not second.failed, [t.error for t in second.failed]
    assert second.accounted() and "truncate" not in second.unclaimed
    orders = second.tables["truncshop.orders"]
    assert orders.not_written == {"truncate": 1} and orders.apply.truncated
    assert cdc_spark.current_rows(spark, "lake.truncshop.orders").count() == 0
    users = cdc_spark.current_rows(spark, "lake.truncshop.users").collect()
    assert sorted(r["id"] for r in users) == ["1", "2"]
    again = cdc_spark.sync(batch, "debezium-json", "lake.{db}.{table}", batch_id=1, **options)
    assert again.accounted()
    assert again.tables["truncshop.orders"].not_written == {"replayed": 1}
    assert cdc_spark.current_rows(spark, "lake.truncshop.orders").count() == 0
