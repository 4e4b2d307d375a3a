"""apply_changes on real Delta tables (Delta 4.4.0, Spark 4.2, local[1]).

Ground truth: every format's generated stream (with key changes), decoded, delivered in
three batches with late changes and duplicates (tests/support/apply_truth.py
``deliveries``), applied batch after batch, gives exactly the generator's final state;
typed events of every column type give the source's rows; SCD type 2 gives the source's
change log. Then one test per rule of docs/apply.md, on hand-made typed events (more in
test_apply_rules.py).
"""

from __future__ import annotations

import datetime as dt
import json
import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.apply_truth import change_log, deliveries, diff, history_rows, plain, typed_state
from support.apply_truth import final_columns as _final_columns
from support.apply_truth import table_rows as _table_rows

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import FORMATS, generate
from cdc_decode.generate.source import _column_ddl, default_tables

TABLE = "shop.users"  # one table per stream keeps the runs short; it gets an ADD COLUMN
MESSAGES = 400
KEY_CHANGES = 0.2  # of the updated rows, moved to a new key
BATCHES = 3


def _seq(n: int) -> bytes:
    return n.to_bytes(4, "big")


# make test runs four formats' ground truth (DTS, DataHub TUPLE, Debezium decoded on Spark,
# Datastream Avro); the other cases are `long` (make test-long), as are two SCD2 formats.
_IN_MAKE_TEST = ("tencent-dts", "datahub-tuple", "debezium-json", "datastream-avro")
CASES = [
    pytest.param(fmt, connector, marks=() if connector is None and fmt in _IN_MAKE_TEST
                 else pytest.mark.long)
    for fmt, connector in [(fmt, None) for fmt in FORMATS]
    + [("debezium-json", "oracle"), ("debezium-json", "mongodb")]
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "connector"), CASES)
def test_every_format_applied_equals_the_source(delta_spark, tmp_path, fmt, connector):
    """generate (with key changes) -> decode -> three batches, late changes and duplicates
    -> apply_changes batch after batch == final_state. Generic events (text maps, all
    columns string) so partial images keep their absent columns and the values compare
    with the generator's text exactly. debezium-json is decoded on Spark, the others in
    Python; its Oracle and MongoDB connectors' streams are ordered by their own sequence
    keys (SCN, oplog time)."""
    _applied_equals_the_source(delta_spark, tmp_path, fmt, connector)


def _column_types() -> dict[str, list[tuple[str, str]]]:
    """``db.table`` -> ``(column, Spark type)`` of the simulated source, added ones last."""
    columns = {t.qualified: [(c.name, c.spark_type) for c in t.columns] for t in default_tables()}
    for db, table, column, _ in _column_ddl():
        columns[f"{db}.{table}"].append((column.name, column.spark_type))
    return columns


@pytest.mark.parametrize(
    ("fmt", "connector"),
    [("tencent-dts", None), ("datahub-blob", None), ("debezium-json", "mongodb")],
)
def test_typed_events_with_partial_images_equal_the_source(delta_spark, tmp_path, fmt, connector):
    """TYPED events of every column's own type (decimal(20,0), bigint, double, string, ...)
    from streams with partial images (DTS and DataHub minimal row images, MongoDB's partial
    updates, rows from before an ADD COLUMN) and key changes, in three batches with late
    changes: the table holds the rows the events give applied in sequence order, absent
    columns keeping their values (``after_absent``), the keys the source's."""
    _typed_partial(delta_spark, tmp_path, fmt, connector)


def test_a_batch_resolved_first_gives_the_table_one_merge_gives(delta_spark, tmp_path,
                                                                monkeypatch):  # fmt: skip
    """The other way a type 1 batch is written: resolved against the table's rows of its
    keys first, then merged (Delta tables past ``RESOLVE_BYTES``; the tests' small tables
    take one MERGE whose clauses hold the rules). The Tencent DTS stream of the test above
    (partial images, key changes, late changes) gives the same table, the source's."""
    import importlib

    apply_module = importlib.import_module("cdc_decode.spark.apply")
    monkeypatch.setattr(apply_module, "RESOLVE_BYTES", -1)
    resolved = []
    real = apply_module._Call._resolved_merge

    def counted(self, *args, **kwargs):
        resolved.append(True)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(apply_module._Call, "_resolved_merge", counted)
    _typed_partial(delta_spark, tmp_path, "tencent-dts", None)
    assert resolved  # the batches took that way


def test_a_big_tables_merge_gives_the_table_a_small_ones_gives(delta_spark, tmp_path,
                                                               monkeypatch):  # fmt: skip
    """The suite's session evaluates its expressions interpreted (tests/support, to spare
    compiling on tables of a few hundred rows), and so does the MERGE into any table under
    ``INTERPRET_BYTES``, which also rewrites the files it changes (under ``REWRITE_BYTES``)
    and runs without adaptive query execution (under ``SERIAL_BYTES``); users' sessions and
    big tables run Spark's generated code, adaptively, and write deletion vectors. All on
    everywhere, the Tencent DTS stream of the tests above (partial images, key changes,
    late changes) gives the same table, the source's."""
    import importlib

    delta_module = importlib.import_module("cdc_decode.spark._tables.delta")
    monkeypatch.setattr(delta_module, "INTERPRET_BYTES", 0)
    monkeypatch.setattr(delta_module, "REWRITE_BYTES", 0)
    monkeypatch.setattr(delta_module, "SERIAL_BYTES", 0)
    held = {key: delta_spark.conf.get(key) for key in delta_module.INTERPRETED}
    delta_spark.conf.set("spark.sql.codegen.wholeStage", "true")
    delta_spark.conf.set("spark.sql.codegen.factoryMode", "CODEGEN_ONLY")
    try:
        _typed_partial(delta_spark, tmp_path, "tencent-dts", None)
    finally:
        for key, value in held.items():
            delta_spark.conf.set(key, value)
    metrics = [
        row["operationMetrics"]
        for row in delta_spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'users'}`").collect()
        if row["operation"] == "MERGE"
    ]
    assert sum(int(m["numTargetDeletionVectorsAdded"]) for m in metrics) > 0


def test_table_properties_of_the_library_or_not_text_are_refused(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    events = _events(delta_spark, [("insert", 1, None, (1, "a", 1))])
    for bad, message in [
        ({"cdc_decode.keys": "[]"}, "cdc_decode's own"),
        ({"team": ["a"]}, "must be text or a number"),
        ("team=lake", "must be a mapping"),
    ]:
        with pytest.raises(ValueError, match=message):
            cdc_spark.apply_changes(events, path, properties=bad)
    assert not (tmp_path / "t").exists()  # nothing written
    result = cdc_spark.apply_changes(events, path, properties={"team": "lake", "tier": 2})
    assert result.created
    props = {
        r["key"]: r["value"]
        for r in delta_spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    }
    assert props["team"] == "lake" and props["tier"] == "2"


def test_layout_when_the_table_is_made(delta_spark, tmp_path):
    """``cluster_by=`` makes a liquid-clustered table, ``partition_by=`` a partitioned one
    (columns named as the table names them); what Delta cannot make is refused, naming
    what it can, before anything is written."""
    events = _events(
        delta_spark, [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]
    )
    for options, message in [
        ({"partition_by": ["days(score)"]}, "score is int, and days takes a date or a timestamp"),
        ({"partition_by": ["truncate(2, score)"], "cluster_by": "id"}, "either partitioned"),
        ({"partition_by": "name", "cluster_by": "id"}, "either partitioned or clustered"),
        ({"cluster_by": ["nope"]}, "'nope' is not a column of the table"),
        ({"partition_by": ["bucket(id)"]}, "bucket takes a number and a column"),
        ({"partition_by": ["weeks(id)"]}, "weeks is not a partition transform"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            cdc_spark.apply_changes(events, str(tmp_path / "bad"), **options)
    assert not (tmp_path / "bad").exists()
    clustered, parted = str(tmp_path / "clustered"), str(tmp_path / "parted")
    cdc_spark.apply_changes(events, clustered, cluster_by=["ID"])
    cdc_spark.apply_changes(events, parted, partition_by="name")
    detail = {
        path: delta_spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().asDict()
        for path in (clustered, parted)
    }
    assert detail[clustered]["clusteringColumns"] == ["id"]
    assert detail[parted]["partitionColumns"] == ["name"]
    later = _events(delta_spark, [("update", 3, (1, "a", 1), (1, "c", 3))])
    for path in (clustered, parted):
        cdc_spark.apply_changes(later, path, cluster_by=["score"])  # made: kept as it is
        assert _live(delta_spark, path) == {1: ("c", 3), 2: ("b", 2)}
    assert delta_spark.sql(f"DESCRIBE DETAIL delta.`{clustered}`").first()["clusteringColumns"] == [
        "id"
    ]


def test_a_table_of_key_columns_only(delta_spark, tmp_path):
    """A table whose columns are all its key (a link table: ``user_roles(user_id,
    role_id)``): inserts, duplicates, deletes, a key change and a late re-insert, equal to
    the source; then the same through ``sync``."""
    path = str(tmp_path / "t")
    first = [("insert", 1, None, (1,)), ("insert", 1, None, (1,)), ("insert", 2, None, (2,)),
             ("delete", 3, (2,), None), ("insert", 4, None, (3,)), ("update", 5, (3,), (4,)),
             ("insert", 6, None, (5,))]  # fmt: skip
    later = [("insert", 7, None, (2,)), ("delete", 8, (5,), None), ("insert", 2, None, (9,))]
    result = cdc_spark.apply_changes(_events(delta_spark, first, "id:bigint"), path)
    assert result.created
    cdc_spark.apply_changes(_events(delta_spark, later, "id:bigint"), path)
    live = cdc_spark.current_rows(delta_spark, path)
    assert sorted(r["id"] for r in live.collect()) == [1, 2, 4, 9]
    messages = [
        json.dumps({"payload": {"op": op, "ts_ms": ts, "before": b, "after": a, "source": {
            "connector": "mysql", "db": "shop", "table": t, "file": "mysql-bin.000003",
            "pos": 100 * ts, "row": 0, "ts_ms": ts}}}).encode()
        for op, ts, t, b, a in [
            ("c", 1, "user_roles", None, {"user_id": 1, "role_id": 7}),
            ("c", 2, "user_roles", None, {"user_id": 2, "role_id": 7}),
            ("d", 3, "user_roles", {"user_id": 2, "role_id": 7}, None),
        ]
    ]  # fmt: skip
    frame = delta_spark.createDataFrame([(m,) for m in messages], "value binary")
    synced = cdc_spark.sync(frame, "debezium-json", str(tmp_path / "{db}" / "{table}"),
                            keys={"shop.user_roles": ["user_id", "role_id"]})  # fmt: skip
    assert synced.tables["shop.user_roles"].error is None, synced.tables["shop.user_roles"].error
    rows = cdc_spark.current_rows(delta_spark, str(tmp_path / "shop" / "user_roles")).collect()
    assert [(r["user_id"], r["role_id"]) for r in rows] == [("1", "7")]  # no Connect schema


def test_partition_transforms_are_generated_columns(delta_spark, tmp_path):
    """``partition_by=`` with Iceberg's transforms on Delta: a column Delta generates from
    the source column (``_cdc_part_<transform>_<column>``), the table partitioned by it; the
    MERGE leaves it to Delta (a row whose time moves changes partition), and the live rows
    and the columns sync sees hold only the source's."""
    orders = "id:bigint,at:timestamp,name:string"
    day = dt.datetime(2024, 5, 1, 23, 30)
    first = [("insert", 1, None, (1, day, "alpha")), ("insert", 2, None, (2, day, "beta")),
             ("insert", 3, None, (3, day + dt.timedelta(hours=1), "gamma"))]  # fmt: skip
    later = [("update", 4, (1, day, "alpha"), (1, day + dt.timedelta(days=40), "alpha")),
             ("delete", 5, (2, day, "beta"), None)]  # fmt: skip
    transforms = {
        "days(at)": ("_cdc_part_days_at", {"2024-05-02", "2024-06-10"}),
        "months(at)": ("_cdc_part_months_at", {"2024-05", "2024-06"}),
        "hours(at)": ("_cdc_part_hours_at", {"2024-05-02-00", "2024-06-10-23"}),
        "years(at)": ("_cdc_part_years_at", {"2024"}),
        "bucket(4, id)": ("_cdc_part_bucket_id", None),
        "truncate(2, name)": ("_cdc_part_truncate_name", {"al", "ga"}),
    }
    for transform, (column, values) in transforms.items():
        path = str(tmp_path / column)
        for rows in (first, later):
            cdc_spark.apply_changes(_events(delta_spark, rows, orders), path,
                                    partition_by=[transform])  # fmt: skip
        detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
        assert detail["partitionColumns"] == [column], transform
        live = cdc_spark.current_rows(delta_spark, path)
        assert live.columns == ["id", "at", "name"]
        assert {(r["id"], r["at"], r["name"]) for r in live.collect()} == {
            (1, day + dt.timedelta(days=40), "alpha"),
            (3, day + dt.timedelta(hours=1), "gamma"),
        }
        stored = delta_spark.read.format("delta").load(path).where("not _cdc_deleted")
        held = {str(r[column]) for r in stored.collect()}
        if values is not None:  # UTC session: 23:30 plus an hour is the next day
            assert held == values, transform
        else:
            assert held <= {"0", "1", "2", "3"}


def test_a_small_tables_merge_rewrites_its_files(delta_spark, tmp_path):
    """A MERGE into a table under ``REWRITE_BYTES`` writes no deletion vectors: it rewrites
    the files it changes, which on a table this small costs less (docs/apply.md)."""
    path = str(tmp_path / "t")
    first = [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]
    second = [("update", 3, (2, "b", 2), (2, "c", 3)), ("insert", 4, None, (3, "d", 4))]
    for rows in (first, second):
        cdc_spark.apply_changes(_events(delta_spark, rows), path)
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    merges = [r["operationMetrics"] for r in history if r["operation"] == "MERGE"]
    assert len(merges) == 2
    assert all(int(m["numTargetDeletionVectorsAdded"]) == 0 for m in merges)
    assert int(next(iter(merges))["numTargetFilesRemoved"]) > 0  # the newest MERGE's
    assert _live(delta_spark, path) == {1: ("a", 1), 2: ("c", 3), 3: ("d", 4)}


def test_a_small_tables_merge_runs_without_adaptive_execution(delta_spark, tmp_path,
                                                               monkeypatch):  # fmt: skip
    """A MERGE of a held batch into a table under ``SERIAL_BYTES`` runs in a session
    without adaptive query execution, its shuffles one partition each; the caller's
    session keeps its own settings, and a table over the size (``SERIAL_BYTES`` 0 here)
    merges adaptively."""
    from pyspark.sql import SparkSession

    seen = []
    real = SparkSession.sql

    def spied(self, statement, *args, **kwargs):
        if statement.startswith("MERGE INTO"):
            seen.append((self.conf.get("spark.sql.adaptive.enabled"),
                         self.conf.get("spark.sql.shuffle.partitions")))  # fmt: skip
        return real(self, statement, *args, **kwargs)

    monkeypatch.setattr(SparkSession, "sql", spied)
    path = str(tmp_path / "t")
    before = (delta_spark.conf.get("spark.sql.adaptive.enabled"),
              delta_spark.conf.get("spark.sql.shuffle.partitions"))  # fmt: skip
    first = [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]
    second = [("update", 3, (2, "b", 2), (2, "c", 3)), ("delete", 4, (1, "a", 1), None)]
    cdc_spark.apply_changes(_events(delta_spark, first), path)
    import importlib

    monkeypatch.setattr(importlib.import_module("cdc_decode.spark._tables.delta"),
                        "SERIAL_BYTES", 0)  # fmt: skip
    cdc_spark.apply_changes(_events(delta_spark, second), path)
    assert seen == [("false", "1"), before]
    assert (delta_spark.conf.get("spark.sql.adaptive.enabled"),
            delta_spark.conf.get("spark.sql.shuffle.partitions")) == before  # fmt: skip
    assert _live(delta_spark, path) == {2: ("c", 3)}


def _typed_partial(delta_spark, tmp_path, fmt, connector) -> None:
    extra = {} if connector is None else {"connector": connector}
    stream = generate(fmt, messages=MESSAGES, seed=7, tables=[TABLE], key_changes=KEY_CHANGES,
                      **extra)  # fmt: skip
    (name,) = stream.final_state
    keys = stream.primary_keys[name]
    types = dict(_column_types()[TABLE])
    if connector == "mongodb":
        types = {"_id": "string", **{c: "string" for c in types}}  # MongoDB renders as JSON
    ddl = ", ".join(f"`{c}` {t}" for c, t in types.items())
    decoded = pa.Table.from_batches([cdc_decode.decode(stream.values, fmt, schema=ddl)])
    mine = pc.fill_null(pc.equal(decoded["source_table"], TABLE.split(".")[1]), True)
    events = decoded.filter(mine)
    assert pc.sum(pc.greater(pc.list_value_length(events["after_absent"]), 0)).as_py() > 0
    path = str(tmp_path / "users")
    for b, rows in enumerate(deliveries(events, keys, BATCHES, seed=11)):
        batch = delta_spark.createDataFrame(events.take(rows))
        result = cdc_spark.apply_changes(batch, path, keys=keys, on_stale="ignore")
        assert result.errors == 0 and result.unkeyed == 0, b
    want = {
        tuple(plain(v) for v in key): {c: plain(row.get(c)) for c in types}
        for key, row in typed_state(events, keys).items()
    }
    assert len(want) == len(stream.final_state[name])
    got = {
        tuple(plain(v) for v in key): {c: plain(v) for c, v in row.items()}
        for key, row in _table_rows(delta_spark, path, keys).items()
    }
    assert not diff(got, want), diff(got, want)


@pytest.mark.parametrize(
    "fmt",
    ["tencent-dts", pytest.param("datahub-blob", marks=pytest.mark.long),
     pytest.param("debezium-json", marks=pytest.mark.long)],
)  # fmt: skip
def test_scd2_history_equals_the_source_change_log(delta_spark, tmp_path, fmt):
    """generate (with key changes) -> decode -> three batches, late changes and duplicates
    -> apply_changes(scd_type=2): one version per change of the source, chained in sequence
    order, the last one current unless deleted (DTS multi-row events, DataHub's
    before/after halves, Debezium's updates)."""
    stream = generate(fmt, messages=MESSAGES, seed=11, tables=[TABLE], key_changes=KEY_CHANGES)
    keys = stream.primary_keys[TABLE]
    columns = _final_columns(stream, TABLE)
    ddl = ", ".join(f"`{c}` string" for c in columns)
    decoded = pa.Table.from_batches([cdc_decode.decode(stream.values, fmt)])
    mine = pc.fill_null(pc.equal(decoded["source_table"], TABLE.split(".")[1]), True)
    events = decoded.filter(mine)
    path = str(tmp_path / "history")
    changes = 0
    for rows in deliveries(events, keys, BATCHES, seed=5):
        df = delta_spark.createDataFrame(events.take(rows))
        result = cdc_spark.apply_changes(df, path, keys=keys, schema=ddl, scd_type=2)
        assert result.errors == 0
        changes += result.changes
    assert changes > 20
    want = change_log(stream, TABLE, columns)
    got = history_rows(delta_spark, path, keys, columns)
    assert not diff(got, want), diff(got, want)
    assert got == want


def _applied_equals_the_source(delta_spark, tmp_path, fmt, connector) -> None:
    extra = {} if connector is None else {"connector": connector}
    stream = generate(fmt, messages=MESSAGES, seed=7, tables=[TABLE], key_changes=KEY_CHANGES,
                      **extra)  # fmt: skip
    (name,) = stream.final_state  # ORCLPDB1.shop.users for the Oracle connector
    table = TABLE.split(".")[1]
    keys = stream.primary_keys[name]
    columns = _final_columns(stream, name)
    ddl = ", ".join(f"`{c}` string" for c in columns)
    if fmt == "debezium-json":
        messages = delta_spark.createDataFrame([(v,) for v in stream.values], "value binary")
        df = cdc_spark.decode(messages.repartition(1), fmt).where(
            f"source_table = '{table}' OR source_table IS NULL"
        )
        events = df.toArrow()
    else:
        options = {"columns": stream.options["columns"]} if "columns" in stream.options else {}
        decoded = cdc_decode.decode(stream.values, fmt, **options)
        events = pa.Table.from_batches([decoded])
        mine = pc.fill_null(pc.equal(events["source_table"], table), True)
        events = events.filter(mine)
    path = str(tmp_path / "users")
    changes = 0
    seed = sum(map(ord, fmt + (connector or "")))  # each format its own delivery order
    for rows in deliveries(events, keys, BATCHES, seed=seed):
        batch = delta_spark.createDataFrame(events.take(rows))
        result = cdc_spark.apply_changes(batch, path, keys=keys, schema=ddl, on_stale="ignore")
        assert result.errors == 0 and result.unkeyed == 0
        assert result.other.get("ddl", 0) == len(result.ddl)
        changes += result.changes
    assert changes > 20, "the stream has changes to apply"
    want = {
        key: {c: row.get(c) for c in columns}
        for key, row in stream.final_state.get(name, {}).items()
    }
    got = _table_rows(delta_spark, path, keys)
    assert not diff(got, want), diff(got, want)
    assert got == want


def test_the_docs_multi_table_example(delta_spark, tmp_path):
    """docs/apply.md's many-tables pattern as written there: decode once with tables=, then
    each table's frame (with after_absent) applied from a thread pool, each with its own
    app_id. DTS minimal row images keep their absent columns: both tables equal the
    source."""
    from concurrent.futures import ThreadPoolExecutor

    from pyspark.sql import functions as F

    names = ["shop.users", "shop.orders"]
    stream = generate("tencent-dts", messages=300, seed=3, tables=names, key_changes=0.2)
    tables = {
        name: ", ".join(f"`{c}` string" for c in _final_columns(stream, name)) for name in names
    }
    kafka = delta_spark.createDataFrame([(v,) for v in stream.values], "value binary")
    decoded = cdc_spark.decode(kafka.repartition(1), "tencent-dts", tables=tables)["*"]
    lake = tmp_path / "lake"

    def write(batch_df, batch_id):
        batch_df.persist()

        def one(i, name):
            frame = batch_df.where(F.col("table") == name).select(
                "op", "sequence", "event_time", "primary_key", "ddl", "after_absent",
                F.col(f"before_{i}").alias("before"), F.col(f"after_{i}").alias("after"),
            )  # fmt: skip
            return cdc_spark.apply_changes(
                frame, f"{lake}/{name}", app_id=f"sync-{name}", batch_id=batch_id
            )

        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(one, range(len(tables)), tables))
        batch_df.unpersist()
        return results

    results = write(decoded, 0)
    assert all(r.changes > 0 and r.errors == 0 for r in results)
    for name in names:
        # Typed values (a json column sent as bytes is its text): the rows the same typed
        # events give applied in sequence order, with the source's keys.
        keys = stream.primary_keys[name]
        events = pa.Table.from_batches(
            [cdc_decode.decode(stream.values, "tencent-dts", schema=tables[name])]
        )
        events = events.filter(pc.equal(events["source_table"], name.split(".")[1]))
        want = {
            key: {c: row.get(c) for c in _final_columns(stream, name)}
            for key, row in typed_state(events, keys).items()
        }
        assert set(want) == set(stream.final_state[name])
        got = _table_rows(delta_spark, f"{lake}/{name}", keys)
        assert not diff(got, want), (name, diff(got, want))


# --- the rules, on hand-made typed events ----------------------------------------------

EVENTS = (
    "op string, sequence binary, event_time timestamp, primary_key array<string>, "
    "ddl string, error string, before struct<{s}>, after struct<{s}>"
)
USERS = "id:bigint,name:string,score:int"
T0 = dt.datetime(2024, 5, 1, 8, 0, 0)


def _events(spark, rows, columns: str = USERS):
    """Rows of (op, seq, before, after[, ddl]); event time = T0 + seq seconds."""
    full = []
    for row in rows:
        op, seq, before, after = row[:4]
        ddl = row[4] if len(row) > 4 else None
        time = T0 + dt.timedelta(seconds=seq)
        pk = ["id"] if op in cdc_spark.apply.ROW_OPS else None
        full.append((op, _seq(seq), time, pk, ddl, None, before, after))
    return spark.createDataFrame(full, EVENTS.format(s=columns))


def _live(spark, path):
    return {r["id"]: (r["name"], r["score"]) for r in cdc_spark.current_rows(spark, path).collect()}


def test_rules_in_one_batch_then_late_and_replayed(delta_spark, tmp_path):
    """Each key is one rule: duplicates, reordering, a key change, delete then re-insert,
    and (second batch) late changes older than what the table holds."""
    path = str(tmp_path / "t")
    first = [
        # 1: duplicates of an insert and of an update
        ("insert", 1, None, (1, "a", 1)),
        ("insert", 1, None, (1, "a", 1)),
        ("update", 5, (1, "a", 1), (1, "a5", 5)),
        ("update", 5, (1, "a", 1), (1, "a5", 5)),
        # 2: delivered out of order: the update (seq 6) before the insert (seq 2)
        ("update", 6, (2, "b", 2), (2, "b6", 6)),
        ("insert", 2, None, (2, "b", 2)),
        # 3 becomes 30: an update that changes the key
        ("insert", 3, None, (3, "c", 3)),
        ("update", 7, (3, "c", 3), (30, "c7", 7)),
        # 4: delete then re-insert
        ("insert", 4, None, (4, "d", 4)),
        ("delete", 8, (4, "d", 4), None),
        ("insert", 9, None, (4, "d9", 9)),
        # 5: deleted
        ("insert", 10, None, (5, "e", 10)),
        ("delete", 11, (5, "e", 10), None),
        # not row changes
        ("begin", 0, None, None),
        ("commit", 12, None, None),
    ]
    result = cdc_spark.apply_changes(_events(delta_spark, first), path)
    assert result.created
    assert (result.events, result.changes, result.other) == (15, 13, {"begin": 1, "commit": 1})
    assert result.keys == 6  # 1, 2, 3, 30, 4, 5
    assert result.rows_written == 6  # 3 and 5 as tombstones
    want = {1: ("a5", 5), 2: ("b6", 6), 30: ("c7", 7), 4: ("d9", 9)}
    assert _live(delta_spark, path) == want

    late = [
        ("insert", 10, None, (5, "late", 0)),  # older than 5's delete (11): stays deleted
        ("update", 4, (1, "a", 1), (1, "old", 0)),  # older than 1's update (5): ignored
        ("insert", 2, None, (3, "c", 3)),  # older than 3's move away (7): stays gone
        ("delete", 3, (2, "b", 2), None),  # older than 2's update (6): ignored
        ("insert", 20, None, (6, "f", 20)),  # new
    ]
    result = cdc_spark.apply_changes(_events(delta_spark, late), path)
    assert (result.stale, result.rows_written) == (4, 1)
    want[6] = ("f", 20)
    assert _live(delta_spark, path) == want

    # The first batch again, as after a failed micro-batch: nothing changes.
    version = result.version
    cdc_spark.apply_changes(_events(delta_spark, first), path)
    assert _live(delta_spark, path) == want
    tombstones = (
        cdc_spark.current_rows(delta_spark, path, bookkeeping=True).where("_cdc_deleted").count()
    )
    assert tombstones == 0
    table = delta_spark.read.format("delta").load(path)
    assert sorted(r["id"] for r in table.where("_cdc_deleted").collect()) == [3, 5]
    assert version is not None


def test_update_before_after_pairs_and_a_key_change_across_halves(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [
        ("insert", 1, None, (1, "a", 1)),
        ("insert", 2, None, (2, "b", 2)),
        ("update_before", 3, (1, "a", 1), None),
        ("update_after", 4, None, (1, "a4", 4)),
        ("update_before", 5, (2, "b", 2), None),  # the key changes: 2 -> 20
        ("update_after", 6, None, (20, "b6", 6)),
    ]
    cdc_spark.apply_changes(_events(delta_spark, rows), path)
    assert _live(delta_spark, path) == {1: ("a4", 4), 20: ("b6", 6)}


def test_partial_images_generic_absent_keeps_null_overwrites(delta_spark, tmp_path):
    """Generic images (maps) say which columns they carry: an absent one keeps its value,
    an explicit null overwrites. Two partial updates of one key in one batch fold."""
    path = str(tmp_path / "t")
    schema = (
        "op string, sequence binary, primary_key array<string>, "
        "before map<string,string>, after map<string,string>"
    )
    rows = [
        ("insert", _seq(1), ["id"], None, {"id": "1", "name": "a", "score": "1"}),
        ("insert", _seq(2), ["id"], None, {"id": "2", "name": "b", "score": "2"}),
        ("update", _seq(3), ["id"], {"id": "1"}, {"score": "3"}),  # name absent
        ("update", _seq(4), ["id"], {"id": "1"}, {"name": "a4"}),  # score absent
        ("update", _seq(5), ["id"], {"id": "2"}, {"name": None}),  # an explicit null
    ]
    ddl = "id bigint, name string, score int"
    cdc_spark.apply_changes(delta_spark.createDataFrame(rows[:2], schema), path, schema=ddl)
    cdc_spark.apply_changes(delta_spark.createDataFrame(rows[2:], schema), path, schema=ddl)
    assert _live(delta_spark, path) == {1: ("a4", 3), 2: (None, 2)}


TYPED_EVENTS = (
    f"op string, sequence binary, primary_key array<string>, before struct<{USERS}>, "
    f"after struct<{USERS}>, after_absent array<string>"
)


@pytest.mark.parametrize("scd_type", [1, 2])
def test_partial_images_typed_absent_keeps_null_overwrites(delta_spark, tmp_path, scd_type):
    """Typed events say which columns an image lacks in ``after_absent``: an absent one
    keeps its value, an explicit null overwrites. Two partial updates of one key in one
    batch fold; an image whose ``after_absent`` is null carries every column."""
    path = str(tmp_path / "t")
    rows = [
        ("insert", _seq(1), ["id"], None, (1, "a", 1), []),
        ("insert", _seq(2), ["id"], None, (2, "b", 2), []),
        ("insert", _seq(3), ["id"], None, (3, "c", 3), []),
        ("update", _seq(4), ["id"], (1, None, None), (1, None, 4), ["name"]),  # name absent
        ("update", _seq(5), ["id"], (1, None, None), (1, "a5", None), ["score"]),
        ("update", _seq(6), ["id"], (2, None, None), (2, None, None), ["score"]),  # null name
        ("update", _seq(7), ["id"], (3, None, None), (3, None, 7), None),  # made by hand
    ]
    first = cdc_spark.apply_changes(
        delta_spark.createDataFrame(rows[:3], TYPED_EVENTS), path, scd_type=scd_type
    )
    assert first.created
    cdc_spark.apply_changes(delta_spark.createDataFrame(rows[3:], TYPED_EVENTS), path,
                            scd_type=scd_type)  # fmt: skip
    assert _live(delta_spark, path) == {1: ("a5", 4), 2: (None, 2), 3: (None, 7)}
    assert "after_absent" not in cdc_spark.current_rows(delta_spark, path).columns


def test_typed_whole_images_take_the_one_aggregate_path(delta_spark, tmp_path):
    """A typed batch whose images all carry every column (``after_absent`` empty) is
    exact with the whole-image reduction; a partial one is not (docs/apply.md): the
    condition the fold's read counts finds the upsert that lacks a column, and only it."""
    from cdc_decode.spark._apply_rules import Images
    from cdc_decode.spark._apply_rules import lacking as lacks

    whole = [
        ("insert", _seq(1), ["id"], None, (1, "a", 1), []),
        ("delete", _seq(2), ["id"], (1, "a", 1), None, None),
    ]
    lacking = [*whole, ("update", _seq(3), ["id"], (1, None, None), (1, "x", None), ["score"])]
    image = Images([], ["id"], False, absent=True)
    condition = lacks(image)
    assert delta_spark.createDataFrame(whole, TYPED_EVENTS).where(condition).count() == 0
    found = delta_spark.createDataFrame(lacking, TYPED_EVENTS).where(condition).collect()
    assert [r["after_absent"] for r in found] == [["score"]]
    assert lacks(Images([], ["id"], False, absent=False)) is None


def test_typed_nulls_overwrite_unless_ignore_null_updates(delta_spark, tmp_path):
    rows = [("insert", 1, None, (1, "a", 1)), ("update", 2, (1, "a", 1), (1, None, 2))]
    events = _events(delta_spark, rows)
    cdc_spark.apply_changes(events, str(tmp_path / "a"))
    assert _live(delta_spark, str(tmp_path / "a")) == {1: (None, 2)}
    cdc_spark.apply_changes(events, str(tmp_path / "b"), ignore_null_updates=True)
    assert _live(delta_spark, str(tmp_path / "b")) == {1: ("a", 2)}


def test_a_timestamp_ntz_column_added_to_a_table_made_without_one(delta_spark, tmp_path):
    """Delta refuses ``ADD COLUMNS`` of a ``timestamp_ntz`` column to a table without the
    ``timestampNtz`` feature (a MySQL ``datetime`` column added mid-stream); the call turns
    the feature on first, and the column's values land."""
    path = str(tmp_path / "t")
    cdc_spark.apply_changes(_events(delta_spark, [("insert", 1, None, (1, "a", 1))]), path)
    wider = "id:bigint,name:string,score:int,seen:timestamp_ntz"
    seen = dt.datetime(2024, 5, 1, 9, 30, 0, 123456)
    result = cdc_spark.apply_changes(
        _events(delta_spark, [("insert", 2, None, (2, "b", 2, seen))], wider), path
    )
    assert result.added_columns == ["seen"]
    got = {r["id"]: r["seen"] for r in cdc_spark.current_rows(delta_spark, path).collect()}
    assert got == {1: None, 2: seen}


def test_int_to_bigint_widens_on_delta_4_and_is_refused_on_delta_3(delta_spark, tmp_path):
    """``sync`` widens a column whose values outgrew it (docs/sync.md). Delta 4 changes
    ``int`` to ``bigint`` in place; Delta 3.x's type widening stops at ``int``, so the
    change is refused before anything is written (no new version), naming the column and
    Delta 4.0; ``smallint`` to ``int`` works on both."""
    from cdc_decode.spark._tables import open_table
    from cdc_decode.spark._tables.delta import delta_version

    path = str(tmp_path / "t")
    cdc_spark.apply_changes(_events(delta_spark, [("insert", 1, None, (1, "a", 1))]), path)
    table = open_table(delta_spark, path)
    before = table.version()
    if delta_version(delta_spark) >= (4, 0):
        table.widen_columns({"score": "bigint"})
        assert table.schema()["score"].dataType.simpleString() == "bigint"
        return
    with pytest.raises(ValueError, match=r"column score is int, .* needs Delta 4\.0 or later"):
        table.widen_columns({"score": "bigint"})
    assert table.version() == before
    assert table.schema()["score"].dataType.simpleString() == "int"
    small = str(tmp_path / "small")
    rows = [("insert", 1, None, (1, "a", 1))]
    cdc_spark.apply_changes(_events(delta_spark, rows, "id:bigint,name:string,score:smallint"),
                            small)  # fmt: skip
    open_table(delta_spark, small).widen_columns({"score": "int"})
    assert open_table(delta_spark, small).schema()["score"].dataType.simpleString() == "int"


def test_schema_new_column_added_retyped_and_dropped_are_errors(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    cdc_spark.apply_changes(_events(delta_spark, [("insert", 1, None, (1, "a", 1))]), path)
    wider = "id:bigint,name:string,score:int,nickname:string"
    rows = [
        ("ddl", 2, None, None, "ALTER TABLE users ADD COLUMN nickname varchar(32)"),
        ("insert", 3, None, (2, "b", 2, "bee")),
    ]
    result = cdc_spark.apply_changes(_events(delta_spark, rows, wider), path)
    assert result.added_columns == ["nickname"]
    assert result.ddl == ["ALTER TABLE users ADD COLUMN nickname varchar(32)"]
    assert result.other == {"ddl": 1}
    got = {r["id"]: r["nickname"] for r in cdc_spark.current_rows(delta_spark, path).collect()}
    assert got == {1: None, 2: "bee"}

    retyped = "id:bigint,name:string,score:string,nickname:string"
    with pytest.raises(ValueError, match=r"column 'score' of table .*/t is int .* string"):
        cdc_spark.apply_changes(
            _events(delta_spark, [("insert", 4, None, (3, "c", "3", None))], retyped), path
        )
    with pytest.raises(ValueError, match=r"column 'nickname' of table .*/t is not in the events"):
        cdc_spark.apply_changes(_events(delta_spark, [("insert", 4, None, (3, "c", 3))]), path)
    assert sorted(_live(delta_spark, path)) == [1, 2]  # nothing was written


def test_errors_and_unkeyed_rows_are_counted_not_written(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [
        ("insert", 1, None, (1, "a", 1)),
        ("error", 2, None, None),
        ("insert", 3, None, (None, "no key", 3)),
        ("heartbeat", 4, None, None),
    ]
    # By default an error row (a message that did not decode) stops the batch, unwritten.
    with pytest.raises(ValueError, match=r"1 event\(s\) for table .* are error rows"):
        cdc_spark.apply_changes(_events(delta_spark, rows), path)
    assert not (tmp_path / "t").exists()
    result = cdc_spark.apply_changes(_events(delta_spark, rows), path, on_invalid="count")
    assert (result.errors, result.unkeyed, result.other) == (1, 1, {"heartbeat": 1})
    assert (result.events, result.applied) == (4, 1) and result.accounted()
    assert _live(delta_spark, path) == {1: ("a", 1)}
    with pytest.raises(ValueError, match="give keys="):
        events = _events(delta_spark, rows).drop("primary_key")
        cdc_spark.apply_changes(events, str(tmp_path / "u"), on_invalid="count")


def test_tombstones_expire_after_the_retention(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [
        ("insert", 1, None, (1, "a", 1)),
        ("delete", 2, (1, "a", 1), None),
        ("insert", 3, None, (2, "b", 3)),
        ("delete", 3600, (2, "b", 3), None),
    ]
    cdc_spark.apply_changes(
        _events(delta_spark, rows), path, tombstone_retention=dt.timedelta(minutes=30)
    )
    table = delta_spark.read.format("delta").load(path)
    assert [r["id"] for r in table.collect()] == [2]  # 1's tombstone expired, 2's is kept


def test_replayed_micro_batch_with_txn_markers(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    events = _events(delta_spark, [("insert", 1, None, (1, "a", 1))])
    first = cdc_spark.apply_changes(events, path, app_id="q1", batch_id=0)
    again = cdc_spark.apply_changes(events, path, app_id="q1", batch_id=0)
    assert not first.skipped and again.skipped
    assert (first.rows_written, again.rows_written) == (1, 0)
    assert again.version == first.version  # Delta wrote nothing
    assert _live(delta_spark, path) == {1: ("a", 1)}


def test_foreach_batch_streaming(delta_spark, tmp_path):
    """Inside foreachBatch of a streaming query (a file source, two micro-batches)."""
    source = tmp_path / "in"
    path = str(tmp_path / "t")
    schema = EVENTS.format(s=USERS)
    batches = [
        [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))],
        [("update", 3, (1, "a", 1), (1, "a3", 3)), ("delete", 4, (2, "b", 2), None)],
    ]
    results = []

    def write(batch_df, batch_id):
        results.append(
            cdc_spark.apply_changes(batch_df, path, app_id="stream-test", batch_id=batch_id)
        )

    for rows in batches:
        _events(delta_spark, rows).coalesce(1).write.mode("append").parquet(str(source))
    stream = (
        delta_spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    )
    query = (
        stream.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert len(results) >= 1
    assert _live(delta_spark, path) == {1: ("a3", 3)}


def test_scd2_history_with_a_late_change_and_a_catalog_table(delta_spark):
    target = "default.users_history"
    delta_spark.sql(f"DROP TABLE IF EXISTS {target}")
    first = [
        ("insert", 1, None, (1, "a", 1)),
        ("update", 5, (1, "a", 1), (1, "a5", 5)),
        ("insert", 2, None, (2, "b", 2)),
        ("delete", 6, (2, "b", 2), None),
        ("update", 5, (1, "a", 1), (1, "a5", 5)),  # a duplicate
    ]
    cdc_spark.apply_changes(_events(delta_spark, first), target, scd_type=2)
    late = [
        ("update", 3, (1, "a", 1), (1, "a3", 3)),  # belongs between 1 and 5
        ("insert", 7, None, (3, "c", 7)),
    ]
    cdc_spark.apply_changes(_events(delta_spark, late), target, scd_type=2)
    cdc_spark.apply_changes(_events(delta_spark, first), target, scd_type=2)  # replayed

    rows = delta_spark.table(target).orderBy("id", "_cdc_start_sequence").collect()

    def seq(b):
        return None if b is None else int.from_bytes(b, "big")

    history = [
        (
            r["id"],
            r["name"],
            seq(r["_cdc_start_sequence"]),
            seq(r["_cdc_end_sequence"]),
            r["_cdc_current"],
            r["_cdc_deleted"],
        )
        for r in rows
    ]
    assert history == [
        (1, "a", 1, 3, False, False),
        (1, "a3", 3, 5, False, False),
        (1, "a5", 5, None, True, False),
        (2, "b", 2, 6, False, False),
        (2, None, 6, None, False, True),  # the delete ends 2's history
        (3, "c", 7, None, True, False),
    ]
    assert rows[0]["_cdc_end_time"] == T0 + dt.timedelta(seconds=3)
    current = {r["id"]: r["name"] for r in cdc_spark.current_rows(delta_spark, target).collect()}
    assert current == {1: "a5", 3: "c"}
    delta_spark.sql(f"DROP TABLE {target}")


def test_bad_arguments(delta_spark, tmp_path):
    events = _events(delta_spark, [("insert", 1, None, (1, "a", 1))])
    with pytest.raises(ValueError, match="scd_type"):
        cdc_spark.apply_changes(events, str(tmp_path / "t"), scd_type=3)
    with pytest.raises(ValueError, match="key column"):
        cdc_spark.apply_changes(events, str(tmp_path / "t"), keys=["nope"])
    with pytest.raises(ValueError, match="app_id and batch_id"):
        cdc_spark.apply_changes(events, str(tmp_path / "t"), batch_id=1)
    with pytest.raises(ValueError, match="no 'sequence' column"):
        cdc_spark.apply_changes(events.drop("sequence"), str(tmp_path / "t"))
    cdc_spark.apply_changes(events, str(tmp_path / "t"))
    with pytest.raises(ValueError, match="not written as a type 2"):
        cdc_spark.apply_changes(events, str(tmp_path / "t"), scd_type=2)


# --- truncate ------------------------------------------------------------------------------


def _typed(spark, rows):
    from support.apply_truth import typed_events

    return typed_events(spark, rows)


def _truncate_check(spark, path, batches, want, *, scd_type=1):
    results = [
        cdc_spark.apply_changes(_typed(spark, rows), path, scd_type=scd_type) for rows in batches
    ]
    assert _live(spark, path) == want
    for rows in batches:  # the truncate's batch again (no replay markers): no change
        if any(row[0] == "truncate" for row in rows):
            cdc_spark.apply_changes(_typed(spark, rows), path, scd_type=scd_type)
            assert _live(spark, path) == want
    return results


def test_truncate_in_order(delta_spark, tmp_path):
    """A truncate deletes every row older than it, in the batch (whole and partial images)
    and in the table; changes after it apply as to an empty table."""
    path = str(tmp_path / "t")
    first = [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]
    second = [
        ("insert", 3, None, (3, "c", 3)),
        ("truncate", 4, None, None),
        ("insert", 5, None, (2, "b5", 5)),
        ("update", 6, (2, None, None), (2, "b6", None), ["score"]),
    ]
    results = _truncate_check(delta_spark, path, [first, second], {2: ("b6", 5)})
    assert results[1].truncated and results[1].other == {"truncate": 1}
    table = delta_spark.read.format("delta").load(path)
    assert sorted(r["id"] for r in table.where("_cdc_deleted").collect()) == [1]  # 3 never held
    # An older insert of a key the table did not hold at the truncate stays out.
    late = cdc_spark.apply_changes(_typed(delta_spark, [("insert", 3, None, (4, "d", 3))]), path)
    assert (late.stale, late.truncated) == (1, False)
    assert _live(delta_spark, path) == {2: ("b6", 5)}


@pytest.mark.parametrize("whole", [True, False])
def test_truncate_delivered_late(delta_spark, tmp_path, whole):
    """The truncate (seq 10) arrives after newer changes: rows older than it go, a row
    written since keeps the columns written after it (per column); changes older than it,
    late too, are not applied, nor an older insert of a key it would have deleted."""
    path = str(tmp_path / "t")
    first = [
        ("insert", 1, None, (1, "a", 1)),
        ("insert", 2, None, (2, "b", 2)),
        ("insert", 3, None, (3, "c", 3)),
    ]
    second = [("insert", 12, None, (4, "d", 12))]
    if whole:
        second.append(("update", 13, (3, "c", 3), (3, "c13", 13)))
        want3 = ("c13", 13)
    else:
        second.append(("update", 13, (3, None, None), (3, None, 13), ["name"]))
        want3 = (None, 13)  # its name was written at 3, before the truncate
    third = [("insert", 5, None, (5, "e", 5)), ("truncate", 10, None, None)]
    fourth = [
        ("insert", 7, None, (6, "f", 7)),  # not in the table at the truncate
        ("update", 8, (1, "a", 1), (1, "a8", 8)),  # deleted by it: its tombstone's values
        ("insert", 15, None, (7, "g", 15)),
    ]
    want = {3: want3, 4: ("d", 12), 7: ("g", 15)}
    results = _truncate_check(delta_spark, path, [first, second, third, fourth], want)
    assert [r.truncated for r in results] == [False, False, True, False]
    assert results[3].stale == 1  # 6 (1's tombstone took the values it had at 10)
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail["properties"]["cdc_decode.truncateHorizon"] == _seq(10).hex()


def test_truncate_with_replay_markers(delta_spark, tmp_path):
    """A truncate's batch replayed with its (app_id, batch_id) is skipped; the table is
    the same."""
    path = str(tmp_path / "t")
    batches = [
        [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))],
        [("truncate", 3, None, None), ("insert", 4, None, (2, "b4", 4))],
    ]
    for i, rows in enumerate(batches):
        cdc_spark.apply_changes(_typed(delta_spark, rows), path, app_id="q", batch_id=i)
    again = cdc_spark.apply_changes(_typed(delta_spark, batches[1]), path, app_id="q", batch_id=1)
    assert again.skipped
    assert _live(delta_spark, path) == {2: ("b4", 4)}


def test_truncate_closes_scd2_versions(delta_spark, tmp_path):
    """Type 2: a truncate adds a deleted version at its sequence to every key live then
    (closing the version before it), late ones included; a key already deleted gets
    none."""
    path = str(tmp_path / "t")
    first = [
        ("insert", 1, None, (1, "a", 1)),
        ("insert", 2, None, (2, "b", 2)),
        ("delete", 3, (2, "b", 2), None),
    ]
    second = [("truncate", 10, None, None), ("insert", 11, None, (3, "c", 11))]
    late = [
        ("insert", 5, None, (4, "d", 5)),  # a key the table did not hold at the truncate
        ("update", 7, (1, "a", 1), (1, "a7", 7)),
        ("insert", 12, None, (1, "a12", 12)),
    ]
    _truncate_check(
        delta_spark, path, [first, second, late], {3: ("c", 11), 1: ("a12", 12)}, scd_type=2
    )
    rows = delta_spark.read.format("delta").load(path).collect()
    got = sorted(
        (r["id"], int.from_bytes(r["_cdc_start_sequence"], "big"),
         r["_cdc_end_sequence"] and int.from_bytes(r["_cdc_end_sequence"], "big"),
         r["_cdc_deleted"], r["_cdc_current"], r["name"])
        for r in rows
    )  # fmt: skip
    assert got == [
        (1, 1, 7, False, False, "a"),
        (1, 7, 10, False, False, "a7"),
        (1, 10, 12, True, False, None),
        (1, 12, None, False, True, "a12"),
        (2, 2, 3, False, False, "b"),
        (2, 3, None, True, False, None),
        (3, 11, None, False, True, "c"),
        (4, 5, 10, False, False, "d"),
        (4, 10, None, True, False, None),
    ]
