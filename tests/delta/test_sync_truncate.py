"""``cdc_spark.sync``: a batch whose only event of a table is its ``truncate`` (Debezium's
``op: "t"``; the schema pass lists no such table, it has no row change): the table is
emptied (replay markers, ``include``/``exclude`` and the accounting as for any table), a
truncate of a table never made is counted under ``"truncate of no table"``, and a routed
shard's truncate alone in a batch fails its target as one with row changes does
(docs/sync.md, "Truncates"). Delta 4.4 / Spark 4.2, local[1]."""

from __future__ import annotations

import pytest
from support.debezium_changes import change_messages as _messages

from cdc_decode import spark as cdc_spark
from cdc_decode.spark.sync import NO_TABLE

KEYS = {"keys": {"shop*.*": ["id"]}}  # schemaless Debezium: no key on the wire


def _ids(spark, target: str) -> list[str]:
    return sorted(r["id"] for r in cdc_spark.current_rows(spark, target).collect())


def _accounted(result) -> None:
    assert result.accounted(), result
    assert "truncate" not in result.unclaimed, result.unclaimed


def test_a_truncate_alone_in_a_batch_empties_its_table(delta_spark, tmp_path):
    """Batch 0 makes shop.orders (with its history, ``scd2=``) and shop.users; batch 1
    holds only orders' truncate (and a truncate of shop.gone, never made) beside users' row
    changes: orders is emptied, its history has no live version left, users is applied,
    gone counted under its reason, no table made for it; batch 1 again is a replay every
    table skips. Batch 2 holds only users' truncate (no table of the batch has a row
    change) and gone's, excluded: users is emptied, gone counted as excluded."""
    lake = tmp_path / "lake"
    seen = {}

    def target(table):  # a target function: a truncated table's WireTable has no versions
        seen[table.name] = table
        return str(lake / table.source_db / table.source_table)

    options = {"app_id": "truncates", "scd2": "shop.orders", **KEYS}
    first = cdc_spark.sync(_messages(delta_spark, ("shop", "orders", "c", {"id": 1, "v": "x"}, 100),
                                     ("shop", "orders", "c", {"id": 2, "v": "x"}, 110),
                                     ("shop", "users", "c", {"id": 1, "v": "x"}, 120)),
                           "debezium-json", target, batch_id=0, **options)  # fmt: skip
    assert not first.failed and first.rows_written == 3
    orders, users = str(lake / "shop" / "orders"), str(lake / "shop" / "users")
    assert _ids(delta_spark, orders) == ["1", "2"]

    second_batch = _messages(delta_spark, ("shop", "orders", "t", None, 200),
                             ("shop", "gone", "t", None, 205),
                             ("shop", "users", "c", {"id": 2, "v": "x"}, 210))  # fmt: skip
    second = cdc_spark.sync(second_batch, "debezium-json", target, batch_id=1, **options)
    _accounted(second)
    assert not second.failed, [t.error for t in second.failed]
    assert _ids(delta_spark, orders) == []
    assert _ids(delta_spark, users) == ["1", "2"]
    assert seen["shop.orders"].versions == () and seen["shop.orders"].source_table == "orders"
    t = second.tables["shop.orders"]
    assert (t.target, t.events, t.written, t.error, t.skipped) == (orders, 1, 0, None, None)
    assert t.not_written == {"truncate": 1} and t.apply.truncated and t.keys == ["id"]
    assert t in second.applied and not t.routed
    # Its history (scd2=): every live version closed by the truncate.
    assert t.history.truncated and t.history_target == orders + "_history"
    assert cdc_spark.current_rows(delta_spark, orders + "_history").count() == 0
    gone = second.tables["shop.gone"]
    assert gone.not_written == {NO_TABLE: 1} and gone.apply is None and gone.error is None
    assert gone.skipped.startswith(f"{NO_TABLE}: {lake / 'shop' / 'gone'} does not exist")
    assert not (lake / "shop" / "gone").exists()
    assert second.tables["shop.users"].written == 1

    again = cdc_spark.sync(second_batch, "debezium-json", target, batch_id=1, **options)
    _accounted(again)
    assert again.tables["shop.orders"].not_written == {"replayed": 1}
    assert again.tables["shop.orders"].skipped.startswith("replay")
    assert again.tables["shop.users"].not_written == {"replayed": 1}
    assert again.tables["shop.gone"].not_written == {NO_TABLE: 1}
    assert _ids(delta_spark, orders) == [] and _ids(delta_spark, users) == ["1", "2"]

    # Only truncates in the batch, and a template target this time.
    third = cdc_spark.sync(_messages(delta_spark, ("shop", "users", "t", None, 300),
                                     ("shop", "gone", "t", None, 310)),
                           "debezium-json", str(lake / "{db}" / "{table}"), batch_id=2,
                           exclude="shop.gone", **options)  # fmt: skip
    _accounted(third)
    assert not third.failed, [t.error for t in third.failed]
    assert third.tables["shop.users"].not_written == {"truncate": 1}
    assert third.tables["shop.users"].apply.truncated
    assert third.tables["shop.gone"].not_written == {"excluded": 1}
    assert _ids(delta_spark, users) == []
    # Changes after the truncate apply as to an empty table.
    after = _messages(delta_spark, ("shop", "users", "c", {"id": 5, "v": "x"}, 400))
    fourth = cdc_spark.sync(after, "debezium-json", str(lake / "{db}" / "{table}"),
                            batch_id=3, **options)  # fmt: skip
    _accounted(fourth)
    assert _ids(delta_spark, users) == ["5"]


def test_a_routed_shard_truncated_alone_fails_its_target(delta_spark, tmp_path):
    """A truncate of one shard, its only event in the batch: the routed table holds the
    other shards' rows, so the target fails, naming the shard, alone in the batch and
    beside another shard's row changes alike; nothing of the batch is written into it."""
    target = str(tmp_path / "orders")
    options = {**KEYS, "routes": {"shop_*.orders": target}}
    made = _messages(delta_spark, ("shop_00", "orders", "c", {"id": 1, "v": "x"}, 100),
                     ("shop_01", "orders", "c", {"id": 1, "v": "x"}, 110))  # fmt: skip
    first = cdc_spark.sync(made, "debezium-json", "/unused/{db}", **options)
    assert not first.failed and first.rows_written == 2

    alone = _messages(delta_spark, ("shop_00", "orders", "t", None, 200))
    with pytest.raises(cdc_spark.SyncError, match="shop_00.orders was truncated") as raised:
        cdc_spark.sync(alone, "debezium-json", "/unused/{db}", **options)
    result = raised.value.result
    _accounted(result)
    t = result.tables["shop_00.orders"]
    assert (t.target, t.routed, t.not_written) == (target, True, {"failed": 1})

    beside = _messages(delta_spark, ("shop_00", "orders", "t", None, 300),
                       ("shop_01", "orders", "c", {"id": 2, "v": "x"}, 310))  # fmt: skip
    second = cdc_spark.sync(beside, "debezium-json", "/unused/{db}", on_error="continue",
                            **options)  # fmt: skip
    _accounted(second)
    assert {t.name for t in second.failed} == {"shop_00.orders", "shop_01.orders"}
    assert "table shop_00.orders was truncated in this batch" in second.failed[0].error
    assert all(t.not_written == {"failed": 1} for t in second.tables.values())
    assert _ids(delta_spark, target) == ["1", "1"]
