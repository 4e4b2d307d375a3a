"""``cdc_spark.sync`` into Iceberg tables: a generated whole-database DTS stream (DDL
mid-stream: columns added, widened and dropped) synced into one table per source table of
the Hadoop catalog ``lake`` (``lake.<db>.<table>``), in two batches, each table equal to
the source in its mapped types; the second batch again is a replay every table skips
(its marker in the snapshot summary); the metadata columns asked for by table pattern, each
row's those of its newest change; type mapping rules by table pattern (``tinyint(1)`` as
``boolean``, one table's every column as its text), each table equal to the source in the
rule's types. Iceberg 1.12 / Spark 4.1, local[1]."""

from __future__ import annotations

import copy

import pytest
from support.apply_truth import text_differences
from support.metadata_truth import metadata_differences

from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate
from cdc_decode.generate.truth import differences

pytestmark = pytest.mark.spark


def _frame(spark, stream, start: int = 0, stop: int | None = None):
    """The messages ``[start, stop)`` as Kafka's rows (one partition, offsets from 1000)."""
    keys = stream.message_keys or [None] * len(stream.values)
    pairs = enumerate(zip(keys, stream.values, strict=True))
    rows = [(k, v, "dts-shop", 0, 1000 + i) for i, (k, v) in pairs]
    schema = "key binary, value binary, topic string, partition int, offset bigint"
    return spark.createDataFrame(rows[start:stop], schema)


EVERY = ["op", "event_time", "capture_time", "position", "tx_id", "source_db", "source_schema",
         "source_table", "kafka_topic", "kafka_partition", "kafka_offset"]  # fmt: skip
SOME = ["op", "event_time", "position"]


def _properties(spark, table: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def test_sync_into_iceberg_equals_the_source(iceberg_spark):
    spark = iceberg_spark
    stream = generate("tencent-dts", messages=120, seed=33, table_count=3)
    target = "lake.sync_{db}.{table}"
    half = len(stream.values) // 2
    exact = sorted(stream.final_values)[0]
    made = {"*": {"write.metadata.previous-versions-max": "50", "team": "lake"},
            exact: {"team": "orders"}}  # fmt: skip
    keys = {n: list(k) for n, k in stream.primary_keys.items()}
    layout = {
        "cluster_by": keys,
        "partition_by": {n: [f"bucket(4, {k[0]})"] for n, k in keys.items()},
        "metadata_columns": {exact: EVERY, "*": SOME},
    }
    rules = {"erp.*": ["tinyint1-to-boolean"], "ops.*": ["to-string"]}
    first = cdc_spark.sync(_frame(spark, stream, 0, half), "tencent-dts", target, batch_id=0,
                           app_id="sync-test", on_error="continue", properties=made,
                           type_mapping=rules, **layout)  # fmt: skip
    for n, t in first.tables.items():  # sorted and partitioned by its key
        if not t.error:
            assert _properties(spark, t.target)["sort-order"].startswith(keys[n][0]), n
            rows = spark.sql(f"DESCRIBE TABLE {t.target}").collect()
            spec = [r["data_type"] for r in rows if r["col_name"].startswith("Part ")]
            assert f"bucket(4, {keys[n][0]})" in spec, spec
    props = {n: _properties(spark, t.target) for n, t in first.tables.items() if not t.error}
    assert props and all(p["team"] == ("orders" if n == exact else "lake")
                         for n, p in props.items())  # fmt: skip
    assert all(p["write.metadata.previous-versions-max"] == "50" for p in props.values())
    second = cdc_spark.sync(_frame(spark, stream, half), "tencent-dts", target, batch_id=1,
                            app_id="sync-test", on_error="continue",
                            properties={"*": {"team": "lakehouse"}}, type_mapping=rules,
                            metadata_columns=layout["metadata_columns"])  # fmt: skip
    for t in second.tables.values():  # changed: set again; no longer given: left as it was
        if t.apply is not None:
            props = _properties(spark, t.target)
            assert props["team"] == "lakehouse", props
            assert props["write.metadata.previous-versions-max"] == "50"
    for result in (first, second):
        assert result.messages_with_errors == 0, result.errors
    assert {n for n, t in first.tables.items() if t.created} == set(first.tables)
    assert first.rows_written > 0
    failed = {n: t.error for r in (first, second) for n, t in r.tables.items() if t.error}
    targets = {n: t.target for r in (first, second) for n, t in r.tables.items()}
    assert set(stream.final_values) <= set(targets)
    assert all(t.startswith("lake.sync_") for t in targets.values())
    # What Iceberg cannot promote in place (an integer into a decimal) stops that table
    # with an error naming the column; every other table equals the source.
    for name, error in failed.items():
        assert "Iceberg cannot change it to" in error, (name, error)
    ok = {n: t for n, t in targets.items() if n not in failed}
    assert len(ok) >= 2
    texts = copy.copy(stream)  # to-string: the source's text
    texts.final_state = {n: v for n, v in stream.final_state.items() if n.startswith("ops.")}
    assert texts.final_state and set(texts.final_state) <= set(ok)
    assert text_differences(spark, texts, ok) == []
    for name in texts.final_state:
        fields = spark.table(ok[name]).schema.fields
        assert {f.dataType.simpleString() for f in fields if not f.name.startswith("_cdc_")} == {
            "string"
        }
    synced = copy.copy(stream)
    synced.final_values = {n: v for n, v in stream.final_values.items()
                           if n in ok and n not in texts.final_state}  # fmt: skip
    assert differences(spark, synced, "tencent-dts", ok) == []
    erp = spark.table(ok["erp.orders_000"]).schema
    assert erp["c14_visi"].dataType.simpleString() == "boolean"  # tinyint(1)
    messages = _frame(spark, stream)
    assert exact in ok  # every metadata column on Iceberg
    for names, tables in ((EVERY, {n: t for n, t in ok.items() if n == exact}),
                          (SOME, {n: t for n, t in ok.items() if n != exact})):  # fmt: skip
        assert metadata_differences(spark, messages, stream, tables, names) == []
    assert "_cdc_meta_tx_id" not in spark.table(ok[[n for n in ok if n != exact][0]]).columns
    again = cdc_spark.sync(_frame(spark, stream, half), "tencent-dts", target, batch_id=1,
                           app_id="sync-test", on_error="continue", type_mapping=rules,
                           metadata_columns=layout["metadata_columns"])  # fmt: skip
    assert all(
        t.skipped and t.skipped.startswith("replay") for n, t in again.tables.items() if n in ok
    ), {n: (t.skipped, t.error) for n, t in again.tables.items() if n in ok}
    assert again.rows_written == 0
