"""apply_changes on real Apache Iceberg tables (Iceberg 1.12.0, Spark 4.1, local[1]), by
catalog name: a Hadoop catalog (``lake``) and a REST catalog server (``rest``).

Ground truth as for Delta (tests/delta/test_apply.py): generated streams (with key
changes), decoded, delivered in three batches with late changes and duplicates
(tests/support/apply_truth.py ``deliveries``), applied batch after batch, give the
generator's final state; typed events with partial images give the source's rows; SCD
type 2 gives the source's change log. Then what is Iceberg's own: the table
``apply_changes`` creates (format 2, merge-on-read: position deletes, no rewrite), the
replay markers in the snapshot summaries, a replayed batch that changes nothing.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.apply_truth import (
    change_log,
    deliveries,
    diff,
    final_columns,
    history_rows,
    live,
    plain,
    table_rows,
    typed_events,
    typed_state,
)

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import FORMATS, generate
from cdc_decode.generate.source import _column_ddl, default_tables

pytestmark = pytest.mark.spark

TABLE = "shop.users"
MESSAGES = 300
KEY_CHANGES = 0.2
BATCHES = 3
_names = itertools.count()


def _target(catalog: str, name: str) -> str:
    """A new table name in ``catalog`` (each test its own table)."""
    return f"{catalog}.t{next(_names)}.{name}"


def _decoded(spark, stream, fmt: str) -> pa.Table:
    """The stream's events of ``TABLE`` (debezium-json decoded on Spark, the others in
    Python)."""
    table = TABLE.split(".")[1]
    if fmt == "debezium-json":
        messages = spark.createDataFrame([(v,) for v in stream.values], "value binary")
        df = cdc_spark.decode(messages.repartition(1), fmt).where(
            f"source_table = '{table}' OR source_table IS NULL"
        )
        return df.toArrow()
    options = {"columns": stream.options["columns"]} if "columns" in stream.options else {}
    events = pa.Table.from_batches([cdc_decode.decode(stream.values, fmt, **options)])
    return events.filter(pc.fill_null(pc.equal(events["source_table"], table), True))


CASES = [(fmt, None) for fmt in FORMATS] + [
    ("debezium-json", "oracle"),
    ("debezium-json", "mongodb"),
]


@pytest.mark.parametrize(("fmt", "connector"), CASES)
def test_every_format_applied_equals_the_source(iceberg_spark, fmt, connector):
    """generate (with key changes) -> decode -> three batches, late changes and duplicates
    -> apply_changes into an Iceberg table batch after batch == final_state (generic
    events: partial images keep their absent columns)."""
    spark = iceberg_spark
    extra = {} if connector is None else {"connector": connector}
    stream = generate(fmt, messages=MESSAGES, seed=7, tables=[TABLE], key_changes=KEY_CHANGES,
                      **extra)  # fmt: skip
    (name,) = stream.final_state
    keys = stream.primary_keys[name]
    columns = final_columns(stream, name)
    ddl = ", ".join(f"`{c}` string" for c in columns)
    events = _decoded(spark, stream, fmt)
    target = _target("lake", "users")
    changes = 0
    seed = sum(map(ord, fmt + (connector or "")))
    for rows in deliveries(events, keys, BATCHES, seed=seed):
        batch = spark.createDataFrame(events.take(rows))
        result = cdc_spark.apply_changes(batch, target, keys=keys, schema=ddl, on_stale="ignore")
        assert result.errors == 0 and result.unkeyed == 0
        changes += result.changes
    assert changes > 20, "the stream has changes to apply"
    want = {
        key: {c: row.get(c) for c in columns}
        for key, row in stream.final_state.get(name, {}).items()
    }
    got = table_rows(spark, target, keys)
    assert not diff(got, want), diff(got, want)
    assert got == want


def _column_types() -> dict[str, list[tuple[str, str]]]:
    columns = {t.qualified: [(c.name, c.spark_type) for c in t.columns] for t in default_tables()}
    for db, table, column, _ in _column_ddl():
        columns[f"{db}.{table}"].append((column.name, column.spark_type))
    return columns


def _typed_events() -> tuple[pa.Table, list[str], dict[str, str]]:
    """Tencent DTS minimal row images of ``TABLE`` with key changes, decoded with every
    column's own type: the events, the keys and the column types."""
    stream = generate("tencent-dts", messages=MESSAGES, seed=7, tables=[TABLE],
                      key_changes=KEY_CHANGES)  # fmt: skip
    (name,) = stream.final_state
    types = dict(_column_types()[TABLE])
    ddl = ", ".join(f"`{c}` {t}" for c, t in types.items())
    decoded = pa.Table.from_batches([cdc_decode.decode(stream.values, "tencent-dts", schema=ddl)])
    events = decoded.filter(pc.fill_null(pc.equal(decoded["source_table"], "users"), True))
    return events, stream.primary_keys[name], types


def _assert_source_rows(spark, target: str, events, keys, types) -> None:
    """The table holds the rows the typed ``events`` leave in the source."""
    want = {
        tuple(plain(v) for v in key): {c: plain(row.get(c)) for c in types}
        for key, row in typed_state(events, keys).items()
    }
    got = {
        tuple(plain(v) for v in key): {c: plain(v) for c, v in row.items()}
        for key, row in table_rows(spark, target, keys).items()
    }
    assert not diff(got, want), diff(got, want)


def test_typed_events_with_partial_images_equal_the_source(iceberg_spark, catalog):
    """Typed events of every column's own type (decimal, bigint, double, timestamps ...)
    from DTS minimal row images (absent columns keep their values) with key changes, three
    batches with late changes: the table holds the source's rows; the second apply into
    the existing table finds its columns' types as Iceberg stores them."""
    spark = iceberg_spark
    events, keys, types = _typed_events()
    assert pc.sum(pc.greater(pc.list_value_length(events["after_absent"]), 0)).as_py() > 0
    target = _target(catalog, "typed")
    for b, rows in enumerate(deliveries(events, keys, BATCHES, seed=11)):
        batch = spark.createDataFrame(events.take(rows))
        result = cdc_spark.apply_changes(batch, target, keys=keys, on_stale="ignore")
        assert result.errors == 0 and result.unkeyed == 0, b
    _assert_source_rows(spark, target, events, keys, types)


def _merge_plans(spark) -> list[str]:
    """The physical plans of the session's SQL executions so far that ran a ``MERGE``
    (Spark's SQL status store, once its listener has seen every event)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    plans = [str(executions.apply(i).physicalPlanDescription()) for i in range(executions.size())]
    return [plan for plan in plans if "MergeRows" in plan]


def test_a_table_bucketed_by_its_key_is_merged_where_its_rows_are_read(iceberg_spark):
    """A table partitioned by ``bucket(n, key)``: each MERGE shuffles the batch into the
    table's buckets and joins it with the rows where they are read (a storage-partitioned
    join, no shuffle of the table; Spark 4: Spark 3.5 shuffles both sides), and the typed
    events with partial images and key changes of the test above give the source's rows."""
    spark = iceberg_spark
    events, keys, types = _typed_events()
    target = _target("lake", "bucketed")
    seen = len(_merge_plans(spark))
    for b, rows in enumerate(deliveries(events, keys, BATCHES, seed=11)):
        batch = spark.createDataFrame(events.take(rows))
        result = cdc_spark.apply_changes(
            batch, target, keys=keys, on_stale="ignore", partition_by=f"bucket(4, {keys[0]})"
        )
        assert result.errors == 0 and result.unkeyed == 0, b
    plans = _merge_plans(spark)[seen:]
    # The first batch creates the table; the two after it merge into its rows.
    assert len(plans) >= 2, len(plans)
    for plan in plans[-2:] if int(spark.version.split(".")[0]) >= 4 else []:
        assert "keygroupedpartitioning" in plan, plan
    _assert_source_rows(spark, target, events, keys, types)


@pytest.mark.parametrize("fmt", ["tencent-dts", "debezium-json"])
def test_scd2_history_equals_the_source_change_log(iceberg_spark, fmt):
    """scd_type=2 over three batches with late changes and duplicates: one version per
    change of the source, chained in sequence order, the last one current unless
    deleted."""
    spark = iceberg_spark
    stream = generate(fmt, messages=MESSAGES, seed=11, tables=[TABLE], key_changes=KEY_CHANGES)
    keys = stream.primary_keys[TABLE]
    columns = final_columns(stream, TABLE)
    ddl = ", ".join(f"`{c}` string" for c in columns)
    decoded = pa.Table.from_batches([cdc_decode.decode(stream.values, fmt)])
    events = decoded.filter(pc.fill_null(pc.equal(decoded["source_table"], "users"), True))
    target = _target("lake", "history")
    for rows in deliveries(events, keys, BATCHES, seed=5):
        df = spark.createDataFrame(events.take(rows))
        assert cdc_spark.apply_changes(df, target, keys=keys, schema=ddl, scd_type=2).errors == 0
    want = change_log(stream, TABLE, columns)
    got = history_rows(spark, target, keys, columns)
    assert not diff(got, want), diff(got, want)


def _summary(spark, target: str) -> dict[str, str]:
    """The newest snapshot's summary."""
    return spark.sql(
        f"SELECT summary FROM {target}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()["summary"]


def test_on_spark_3_replay_markers_are_refused_and_counts_come_from_the_snapshot(
    iceberg_spark, catalog
):
    """Spark 3.5's Iceberg runtimes take a commit's snapshot properties from write options
    only, which a SQL MERGE cannot pass: there ``app_id``/``batch_id`` are refused before
    anything is written, naming Spark 4, and a call without them finds its snapshot as the
    one after the table's current one, its rows written from ``added-records``. On Spark 4
    the markers are kept (test_replayed_batch_markers_in_the_snapshot_summary)."""
    from cdc_decode.spark._tables import open_table

    spark = iceberg_spark
    target = _target(catalog, "spark3")
    events = typed_events(spark, [("insert", 1, None, (1, "a", 1)),
                                  ("insert", 2, None, (2, "b", 2))])  # fmt: skip
    if int(spark.version.split(".")[0]) >= 4:
        done = cdc_spark.apply_changes(events, target, app_id="q1", batch_id=0)
        assert done.created and _summary(spark, target)["cdc_decode.txn.q1"] == "0"
        return
    with pytest.raises(ValueError, match=r"replay markers .* Spark 4\.0 or later"):
        cdc_spark.apply_changes(events, target, app_id="q1", batch_id=0)
    assert not spark.catalog.tableExists(target)
    done = cdc_spark.apply_changes(events, target)
    assert done.created and done.rows_written == 2 and done.stale == 0
    # The catalog's current snapshot (a REST catalog of Iceberg 1.10 on Spark 3.5 takes
    # the .snapshots metadata table for a namespace).
    assert done.version == open_table(spark, target).version()
    late = typed_events(spark, [("update", 0, (1, "a", 1), (1, "old", 5)),
                                ("update", 3, (2, "b", 2), (2, "B", 20))])  # fmt: skip
    second = cdc_spark.apply_changes(late, target)
    assert (second.keys, second.stale, second.rows_written) == (2, 1, 1)
    assert live(spark, target) == {1: ("a", 1), 2: ("B", 20)}


def test_replayed_batch_markers_in_the_snapshot_summary(iceberg_spark, catalog):
    """The batch id of an app_id is written in the MERGE's own snapshot summary
    (``cdc_decode.txn.<app_id>``); the same batch again is skipped unread (no new
    snapshot), a lower one is an error, and a replay without app_id changes no row."""
    spark = iceberg_spark
    target = _target(catalog, "replay")
    first = [
        ("insert", 1, None, (1, "a", 1)),
        ("insert", 2, None, (2, "b", 2)),
        ("update", 3, (1, "a", 1), (1, "A", 10)),
        ("delete", 4, (2, "b", 2), None),
    ]
    events = typed_events(spark, first)
    done = cdc_spark.apply_changes(events, target, app_id="q1", batch_id=0)
    assert done.created and not done.skipped and done.stale == 0
    assert done.rows_written == 2  # 1, and 2 as a tombstone
    assert _summary(spark, target)["cdc_decode.txn.q1"] == "0"
    assert done.version == spark.sql(f"SELECT snapshot_id FROM {target}.snapshots "
                                     "ORDER BY committed_at DESC LIMIT 1").first()[0]  # fmt: skip
    assert done.metrics["spark.merge-into.num-target-rows-inserted"] == "2"

    again = cdc_spark.apply_changes(events, target, app_id="q1", batch_id=0)
    assert again.skipped and again.version == done.version
    assert live(spark, target) == {1: ("A", 10)}

    late = typed_events(spark, [("update", 2, (1, "a", 1), (1, "old", 5)),
                                ("insert", 5, None, (3, "c", 3))])  # fmt: skip
    second = cdc_spark.apply_changes(late, target, app_id="q1", batch_id=1)
    assert (second.keys, second.stale) == (2, 1)  # 1's late update is older than seq 3
    assert second.rows_written == 1
    assert live(spark, target) == {1: ("A", 10), 3: ("c", 3)}
    with pytest.raises(ValueError, match="already holds batch 1 of app_id 'q1'"):
        cdc_spark.apply_changes(late, target, app_id="q1", batch_id=0)

    # Without markers: the sequence guard makes the replay change nothing.
    replay = cdc_spark.apply_changes(events, target, on_stale="ignore")
    assert replay.stale == replay.keys == 2 and replay.rows_written == 0
    assert live(spark, target) == {1: ("A", 10), 3: ("c", 3)}
    history = {r["id"]: r["_cdc_deleted"] for r in spark.table(target).collect()}
    assert history == {1: False, 2: True, 3: False}  # 2 stays a tombstone


def test_created_table_is_merge_on_read_format_2(iceberg_spark, catalog):
    """A table apply_changes creates is format 2 with merge-on-read MERGE, UPDATE and
    DELETE: an update of a stored row adds a position delete file and rewrites no data
    file; the keys are a table property; a new column is added (schema evolution)."""
    spark = iceberg_spark
    target = _target(catalog, "mor")
    cdc_spark.apply_changes(
        typed_events(spark, [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]),
        target,
    )
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
    assert props["format-version"] == "2"
    for op in ("merge", "update", "delete"):
        assert props[f"write.{op}.mode"] == "merge-on-read"
    assert props["cdc_decode.keys"] == '["id"]'

    wider = "id:bigint,name:string,score:int,city:string"
    update = typed_events(spark, [("update", 3, (1, "a", 1, None), (1, "a3", 3, "Oslo"))], wider)
    result = cdc_spark.apply_changes(update, target)
    assert result.added_columns == ["city"]
    summary = _summary(spark, target)
    assert summary["added-position-deletes"] == "1"
    assert "deleted-data-files" not in summary
    rows = cdc_spark.current_rows(spark, target).orderBy("id").collect()
    assert [tuple(r) for r in rows] == [(1, "a3", 3, "Oslo"), (2, "b", 2, None)]


def test_tombstones_purged_after_the_retention(iceberg_spark):
    """tombstone_retention deletes old tombstones with an Iceberg DELETE and counts them."""
    import datetime as dt

    spark = iceberg_spark
    target = _target("lake", "purge")
    rows = [
        ("insert", 1, None, (1, "a", 1)),
        ("delete", 2, (1, "a", 1), None),
        ("insert", 3600, None, (2, "b", 2)),
    ]
    result = cdc_spark.apply_changes(
        typed_events(spark, rows), target, tombstone_retention=dt.timedelta(minutes=30)
    )
    assert result.purged == 1
    assert [r["id"] for r in spark.table(target).collect()] == [2]


def test_a_name_outside_an_iceberg_catalog_is_not_taken_for_iceberg(iceberg_spark):
    """Only names in an Iceberg catalog are Iceberg tables; forcing the format on another
    name says what is missing."""
    from cdc_decode.spark._tables import open_table

    assert type(open_table(iceberg_spark, "lake.shop.users")).__name__ == "IcebergTarget"
    assert type(open_table(iceberg_spark, "rest.shop.users")).__name__ == "IcebergTarget"
    assert type(open_table(iceberg_spark, "/tmp/x")).__name__ == "DeltaTarget"
    with pytest.raises(ValueError, match="not a table name in an Iceberg catalog"):
        open_table(iceberg_spark, "default.users", format="iceberg")


def test_iceberg_tables_in_the_session_catalog(iceberg_spark, tmp_path):
    """With Iceberg's SparkSessionCatalog as spark_catalog (as EMR, Glue and Dataproc set it
    up), a new name there is created as an Iceberg table (format 2, merge-on-read) and
    applied to, replay markers included; a Parquet table beside it is not Iceberg's."""
    from cdc_decode.spark._tables import open_table

    spark = iceberg_spark.newSession()  # its own catalogs; the shared SparkContext
    wrapper = "org.apache.iceberg.spark.SparkSessionCatalog"
    spark.conf.set("spark.sql.catalog.spark_catalog", wrapper)
    spark.conf.set("spark.sql.catalog.spark_catalog.type", "hadoop")
    spark.conf.set("spark.sql.catalog.spark_catalog.warehouse", str(tmp_path / "warehouse"))
    # Spark loads spark_catalog by the settings of the thread's active session (in a job,
    # the one session, built with them): this one for the test.
    sessions = spark._jvm.org.apache.spark.sql.SparkSession
    sessions.setActiveSession(spark._jsparkSession)
    try:
        target = f"session{next(_names)}.users"
        assert type(open_table(spark, target)).__name__ == "IcebergTarget"
        rows = [
            ("insert", 1, None, (1, "a", 1)),
            ("insert", 2, None, (2, "b", 2)),
            ("update", 3, (1, "a", 1), (1, "A", 10)),
        ]
        events = typed_events(spark, rows)
        done = cdc_spark.apply_changes(events, target, app_id="q", batch_id=0)
        assert done.created and done.rows_written == 2
        again = cdc_spark.apply_changes(events, target, app_id="q", batch_id=0)
        assert again.skipped and again.version == done.version
        assert live(spark, f"spark_catalog.{target}") == {1: ("A", 10), 2: ("b", 2)}
        props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
        assert props["format-version"] == "2" and props["write.merge.mode"] == "merge-on-read"
        assert (tmp_path / "warehouse" / target.replace(".", "/") / "metadata").is_dir()

        spark.sql(f"CREATE TABLE {target}_parquet (id bigint) USING parquet")
        assert type(open_table(spark, f"{target}_parquet")).__name__ == "DeltaTarget"
    finally:
        sessions.setActiveSession(iceberg_spark._jsparkSession)


def test_truncate_deletes_the_rows_older_than_it(iceberg_spark):
    """A truncate deletes every row older than it, in the batch and in the table (its
    sequence kept as a table property); changes after it apply as to an empty table."""
    spark = iceberg_spark
    target = _target("lake", "truncate")
    first = [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]
    second = [
        ("insert", 3, None, (3, "c", 3)),
        ("truncate", 4, None, None),
        ("insert", 5, None, (2, "b5", 5)),
    ]
    cdc_spark.apply_changes(typed_events(spark, first), target)
    result = cdc_spark.apply_changes(typed_events(spark, second), target)
    assert result.truncated and result.other == {"truncate": 1}
    assert live(spark, target) == {2: ("b5", 5)}
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES {target}").collect()}
    assert props["cdc_decode.truncateHorizon"] == (4).to_bytes(4, "big").hex()
