"""``cdc_spark.sync(routes=)``: the 16 shards of a sharded Tencent DTS database
(``generate("tencent-dts", shards=16)``: ``shop_00.orders_00`` … ``shop_15.orders_15``,
keys colliding across shards, every fourth shard with one more column, some with a
narrower type) routed into one Delta table, in two batches and the second again (a
replay the table skips): the table equals the union of the shards' final rows, value by
value, each row with its shard's columns in the key. With keys unique across shards
(``route_keys="unique"``, a target function giving the shards one target) the key is the
source key alone. A pair of types that cannot widen fails the target, naming both shards;
an unknown option value is refused before anything is read. Delta 4.4 / Spark 4.2,
local[1]."""

from __future__ import annotations

import re

import pytest
from support.debezium_changes import change_messages
from support.route_truth import DB, TABLE, routed_columns, routed_differences

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate


def _frame(spark, stream, start: int = 0, stop: int | None = None):
    """Kafka-like rows of the stream's messages ``[start, stop)``."""
    rows = [(None, v) for v in stream.values[start:stop]]
    return spark.createDataFrame(rows, "key binary, value binary")


def _events(stream, start: int = 0, stop: int | None = None) -> dict[str, int]:
    """Each table's events in the messages ``[start, stop)`` (a plain decode)."""
    out: dict[str, int] = {}
    for event in cdc_decode.decode(stream.values[start:stop], stream.format).to_pylist():
        if event["source_table"]:
            name = f"{event['source_db']}.{event['source_table']}"
            out[name] = out.get(name, 0) + 1
    return out


def _accounted(result, stream, start: int = 0, stop: int | None = None) -> None:
    """Every message and every shard's every event accounted for, each shard with its
    own events (docs/sync.md, "Every change accounted for"; a table whose only event in
    the batch is DDL is not one of the batch's tables)."""
    assert result.accounted(), result
    assert result.messages == len(stream.values[start:stop])
    want = {n: c for n, c in _events(stream, start, stop).items() if n in result.tables}
    assert {n: t.events for n, t in result.tables.items() if t.events} == want
    for t in result.tables.values():
        assert t.events == t.written + t.errors + sum(t.not_written.values()), t


def test_sixteen_shards_route_into_one_table_equal_to_their_union(delta_spark, tmp_path):
    stream = generate("tencent-dts", messages=200, seed=5, shards=16)
    assert len(stream.final_values) == 16
    target = str(tmp_path / "lake" / "shop" / "orders")
    routes = {"SHOP_*.orders_*": target}  # case-insensitive, as every table pattern
    half = len(stream.values) // 2
    options = {"app_id": "routes-test", "routes": routes}
    first = cdc_spark.sync(_frame(delta_spark, stream, 0, half), "tencent-dts",
                           str(tmp_path / "other" / "{db}" / "{table}"), batch_id=0,
                           **options)  # fmt: skip
    assert not first.failed, [t.error for t in first.failed]
    assert len(first.tables) == 16
    keys = ["id", DB, TABLE]
    for t in first.tables.values():
        assert (t.target, t.routed, t.keys) == (target, True, keys), t
    assert all(t.created for t in first.tables.values())
    assert first.tables["shop_00.orders_00"].apply is first.tables["shop_15.orders_15"].apply
    assert first.rows_written == first.tables["shop_00.orders_00"].rows_written > 0
    assert "16 tables applied into 1 table (1 created," in first.summary()
    _accounted(first, stream, 0, half)
    written = sum(t.written for t in first.tables.values())
    assert written == first.tables["shop_00.orders_00"].apply.applied
    ddl = {n: t.ddl for n, t in first.tables.items() if t.ddl}  # each table its own
    assert ddl and all(f"`{n.split('.')[1]}`" in text for n, ts in ddl.items() for text in ts)

    second = cdc_spark.sync(_frame(delta_spark, stream, half), "tencent-dts", "/unused/{table}",
                            batch_id=1, **options)  # fmt: skip
    assert not second.failed, [t.error for t in second.failed]
    _accounted(second, stream, half)
    assert routed_differences(delta_spark, stream, target) == []
    table = cdc_spark.current_rows(delta_spark, target)
    types = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    want = routed_columns(stream)
    assert {c: types[c] for c in want} == want
    assert (want["qty"], want["amount"]) == ("int", "decimal(12,2)")  # widened
    assert set(types) == {*want, DB, TABLE}
    # Keys collide across shards: shard 0's id 1 and shard 1's id 1 are two rows.
    ones = table.where("id = 1").select(DB).collect()
    assert len(ones) > 1

    version = delta_spark.sql(f"DESCRIBE HISTORY delta.`{target}`").first()["version"]
    again = cdc_spark.sync(_frame(delta_spark, stream, half), "tencent-dts", "/unused/{table}",
                           batch_id=1, **options)  # fmt: skip
    assert all(t.skipped and t.skipped.startswith("replay") for t in again.tables.values())
    assert again.rows_written == 0
    _accounted(again, stream, half)
    assert all(set(t.not_written) <= {"replayed"} for t in again.tables.values())
    assert delta_spark.sql(f"DESCRIBE HISTORY delta.`{target}`").first()["version"] == version
    assert routed_differences(delta_spark, stream, target) == []


def test_shards_with_unique_keys_route_by_a_target_function(delta_spark, tmp_path):
    """``route_keys="unique"``: the key is the source key alone; ``metadata_columns``
    still keeps the source table where asked. A target function giving every shard one
    target routes them as ``routes=`` does; ``scd2=`` naming one shard gives the routed
    table one history, every shard's versions in it."""
    stream = generate("tencent-dts", messages=80, seed=6, shards=4, shard_keys="unique")
    target = str(tmp_path / "orders")
    result = cdc_spark.sync(_frame(delta_spark, stream), "tencent-dts",
                            lambda t: target if t.source_table.startswith("orders_") else None,
                            route_keys="unique", metadata_columns=["source_table"],
                            scd2=["shop_01.*"], batch_id=0, app_id="routes-unique")  # fmt: skip
    assert not result.failed, [t.error for t in result.failed]
    assert len(result.tables) == 4
    assert all(t.routed and t.keys == ["id"] for t in result.tables.values())
    _accounted(result, stream)
    assert routed_differences(delta_spark, stream, target, by_shard=False) == []
    columns = cdc_spark.current_rows(delta_spark, target).columns
    assert TABLE in columns and DB not in columns
    assert {t.history_target for t in result.tables.values()} == {target + "_history"}
    history = delta_spark.read.format("delta").load(target + "_history")
    current = history.where("_cdc_current").groupBy(TABLE).count().collect()
    want = {name.split(".")[1]: len(rows) for name, (_, rows) in stream.final_values.items()}
    assert {r[TABLE]: r["count"] for r in current} == want


def test_a_group_that_cannot_widen_fails_naming_both_shards(delta_spark, tmp_path):
    """One shard's ``qty`` declared ``string`` (``schemas=``), the others' ``int``: the
    target fails before anything is written, each shard's entry with the error; a
    template that gives two tables one target fails the second; unknown option values are
    ``ValueError``s before anything is read."""
    stream = generate("tencent-dts", messages=60, seed=7, shards=4)
    target = str(tmp_path / "orders")
    frame = _frame(delta_spark, stream)
    result = cdc_spark.sync(frame, "tencent-dts", "/unused/{table}",
                            routes={"shop_*.orders_*": target},
                            schemas={"shop_02.orders_02": "qty string"},
                            on_error="continue")  # fmt: skip
    assert len(result.failed) == len(result.tables) == 4
    error = result.tables["shop_00.orders_00"].error
    assert all(t.error == error for t in result.tables.values())
    found = re.search(r"column qty is (\S+) in (\S+) and (\S+) in (\S+), which do not widen "
                      "to one type", error)  # fmt: skip
    assert found, error
    types, shards = {found[1], found[3]}, {found[2], found[4]}
    assert "string" in types and types & {"smallint", "int"}, error
    assert "shop_02.orders_02" in shards and len(shards) == 2, error
    assert all(t.written == 0 and t.not_written for t in result.tables.values())
    assert result.accounted()
    with pytest.raises(Exception, match="(?i)not found|does not exist|not a delta table"):
        delta_spark.read.format("delta").load(target).count()
    with pytest.raises(cdc_spark.SyncError, match="do not widen to one type"):
        cdc_spark.sync(frame, "tencent-dts", "/unused/{table}",
                       routes={"shop_*.orders_*": target},
                       schemas={"shop_02.orders_02": "qty string"})  # fmt: skip
    # A template that gives two tables one target: the second fails, naming the first.
    collided = cdc_spark.sync(frame, "tencent-dts", str(tmp_path / "one"), on_error="continue",
                              include=["shop_00.*", "shop_01.*"])  # fmt: skip
    assert collided.tables["shop_00.orders_00"].error is None
    assert "is also shop_00.orders_00's: give the template {schema}" in (
        collided.tables["shop_01.orders_01"].error
    )
    for bad, match in (
        ({"route_keys": "global"}, "route_keys must be one of 'per-table', 'unique'"),
        ({"routes": {"shop_*.orders_*": 5}}, "must map to a target name or path"),
        ({"routes": ["shop_*"]}, "routes must map table patterns to targets"),
        ({"routes": {"shop_*": "/l/{shard}"}}, r"unknown field \{shard\}"),
    ):
        with pytest.raises(ValueError, match=match):
            cdc_spark.sync(_Unread(frame), "tencent-dts", "/unused/{table}", **bad)


def test_a_truncate_of_one_routed_table_fails_its_target(delta_spark, tmp_path):
    """A ``truncate`` of one shard (Debezium's ``op: "t"``) in a batch with its row changes:
    the routed table holds the other shards' rows too, so the target fails, naming the
    shard, and nothing of the batch is written into it."""
    target = str(tmp_path / "orders")
    options = {"keys": {"shop_*.orders": ["id"]}, "routes": {"shop_*.orders": target}}

    def messages(*changes):  # (db, op, after, position) of table orders
        return change_messages(delta_spark, *[(db, "orders", *rest) for db, *rest in changes])

    first = cdc_spark.sync(messages(("shop_00", "c", {"id": 1, "v": "a"}, 100),
                                    ("shop_01", "c", {"id": 1, "v": "b"}, 200)),
                           "debezium-json", "/unused/{db}", **options)  # fmt: skip
    assert not first.failed and first.rows_written == 2
    second = cdc_spark.sync(messages(("shop_00", "t", None, 300),
                                     ("shop_00", "c", {"id": 3, "v": "d"}, 350),
                                     ("shop_01", "c", {"id": 2, "v": "c"}, 400)),
                            "debezium-json", "/unused/{db}", on_error="continue",
                            **options)  # fmt: skip
    assert len(second.failed) == 2 and second.accounted()
    assert "table shop_00.orders was truncated in this batch" in second.failed[0].error
    rows = cdc_spark.current_rows(delta_spark, target).collect()
    assert sorted((r[DB], r["id"], r["v"]) for r in rows) == [
        ("shop_00", "1", "a"),
        ("shop_01", "1", "b"),
    ]


class _Unread:
    """A DataFrame that fails the test if anything reads it (the options are checked
    first)."""

    def __init__(self, frame) -> None:
        self.columns = frame.columns
        self.sparkSession = frame.sparkSession

    def __getattr__(self, name):
        raise AssertionError(f"the messages were read ({name}) before the options were checked")
