"""apply_changes' rules where a production pipeline falls into them, on hand-made events
and real Delta tables (Delta 4.4.0, Spark 4.2, local[1]): each test breaks when its rule
in docs/apply.md is broken.

Situations: late partial images across batches, a key change with minimal images (the
PostgreSQL/Debezium split into a delete and a create at one sequence, in either batch
order), a new checkpoint with an old app_id, stale changes, tombstones purged by a
catch-up batch. Then equal sequences, column names, DDL, conversions, keys, sequence_by,
and a table of the older layout.
"""

from __future__ import annotations

import datetime as dt
import warnings

import pytest
from support.apply_truth import T0, live, seq, typed_events

from cdc_decode import spark as cdc_spark
from cdc_decode.spark.apply import StaleChangesWarning

A = "after_absent"


def _apply(spark, path, rows, **options):
    return cdc_spark.apply_changes(typed_events(spark, rows), path, **options)


# --- late partial images (out of order across batches) ------------------------------------


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_partial_update_before_its_older_insert(delta_spark, tmp_path, scd_type):
    """The partial update (seq 2: name) is applied before the older full insert (seq 1):
    the insert fills the column the update did not carry. SCD2: the current version too."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("update", 2, (1, None, None), (1, "b", None), ["score"])],
           scd_type=scd_type)  # fmt: skip
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 10))], scd_type=scd_type)
    assert live(delta_spark, path) == {1: ("b", 10)}
    if scd_type == 2:
        rows = delta_spark.read.format("delta").load(path).orderBy("_cdc_start_sequence")
        assert [(r["name"], r["score"], r["_cdc_current"]) for r in rows.collect()] == [
            ("a", 10, False),
            ("b", 10, True),
        ]


@pytest.mark.parametrize("scd_type", [1, 2])
def test_two_partial_updates_newer_first(delta_spark, tmp_path, scd_type):
    """Stored (a, 10) at 1; U3 (score 30) applied, then the older U2 (name b): each column
    takes its own newest write."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 10))], scd_type=scd_type)
    _apply(delta_spark, path, [("update", 3, (1, None, None), (1, None, 30), ["name"])],
           scd_type=scd_type)  # fmt: skip
    _apply(delta_spark, path, [("update", 2, (1, None, None), (1, "b", None), ["score"])],
           scd_type=scd_type)  # fmt: skip
    assert live(delta_spark, path) == {1: ("b", 30)}


def test_late_partial_images_column_by_column(delta_spark, tmp_path):
    """Two older changes carrying one column, applied oldest first, after a newer one of
    another column: the column ends with the newer of the two; an older change after a
    delete does not come back; a re-insert after a delete starts from an empty row."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [
        ("update", 5, (1, None, None), (1, None, 50), ["name"]),
        ("insert", 1, None, (2, "x", 1)),
        ("delete", 3, (2, None, None), None),
        ("insert", 4, None, (2, "y", None), ["score"]),
    ])  # fmt: skip
    _apply(delta_spark, path, [("update", 2, (1, None, None), (1, "n2", 2), [])])
    _apply(delta_spark, path, [("update", 3, (1, None, None), (1, "n3", None), ["score"])])
    _apply(delta_spark, path, [("update", 2, (2, None, None), (2, "old", 2), [])])
    assert live(delta_spark, path) == {1: ("n3", 50), 2: ("y", None)}


@pytest.mark.parametrize("stored", [False, True])
def test_a_tombstone_keeps_only_what_followed_the_delete_before_it(delta_spark, tmp_path, stored):
    """One batch folded per column: (insert a, 10 at 1,) delete at 3, re-insert at 4 with
    the name only, delete at 5. The tombstone keeps the re-inserted row's values: the name
    written at 4, and no score, since the score was written before the delete at 3 (the
    batch's delete before its newest one), into a new key or over a stored row."""
    path = str(tmp_path / "t")
    insert = ("insert", 1, None, (1, "a", 10))
    if stored:
        _apply(delta_spark, path, [insert])
    _apply(delta_spark, path, [
        *([] if stored else [insert]),
        ("delete", 3, (1, None, None), None),
        ("insert", 4, None, (1, "c", None), ["score"]),
        ("delete", 5, (1, None, None), None),
    ])  # fmt: skip
    rows = delta_spark.read.format("delta").load(path).collect()
    assert [(r["id"], r["name"], r["score"], r["_cdc_deleted"]) for r in rows] == [
        (1, "c", None, True)
    ]
    assert live(delta_spark, path) == {}


def test_a_batch_lacking_a_column_folds_again_per_column(delta_spark, tmp_path):
    """A batch folds whole images in one pass; when that pass's own read finds an upsert
    lacking a column, nothing is written and the batch is folded again per column, its
    counts taken once. Later batches into the table fold per column from the start."""
    from cdc_decode.spark import apply as apply_module

    path = str(tmp_path / "t")

    def remembered() -> bool:
        return any(target == path for _, target in apply_module._PARTIAL_TABLES)

    first = _apply(delta_spark, path, [("insert", 1, None, (1, "a", 10))])
    assert (first.events, first.applied, first.absent_columns) == (1, 1, [])
    assert not remembered()
    second = _apply(delta_spark, path, [("update", 2, (1, None, None), (1, "b", None), ["score"])])
    assert (second.events, second.applied, second.keys) == (1, 1, 1)
    assert second.absent_columns == ["score"]
    assert second.version == first.version + 1  # one commit: the whole pass wrote nothing
    assert live(delta_spark, path) == {1: ("b", 10)}
    assert remembered()
    third = _apply(delta_spark, path, [("update", 3, (1, None, None), (1, "c", 30))])
    assert (third.events, third.applied, third.absent_columns) == (1, 1, [])
    assert live(delta_spark, path) == {1: ("c", 30)}


@pytest.mark.parametrize(("scd_type", "generic"), [(1, False), (2, False), (1, True)])
def test_metadata_columns_are_the_newest_change_s(delta_spark, tmp_path, scd_type, generic):
    """``metadata_columns=``: a partial update (seq 3, its name only) applied before the
    key's older insert (seq 1) leaves the row the update's op and time, the score the
    insert's; an insert (seq 2) arriving after its key's delete (seq 5) stays out. SCD2:
    each version its own change's, the delete's version the delete's. Generic images take
    them as text that converts back exactly."""
    path = str(tmp_path / "t")
    first = [("update", 3, (1, None, None), (1, "b", None), ["score"]),
             ("delete", 5, (2, None, None), None)]  # fmt: skip
    later = [("insert", 1, None, (1, "a", 10)), ("insert", 2, None, (2, "x", 7))]
    names = ("id", "name", "score")

    def image(values, absent=()):
        if values is None:
            return None
        pairs = zip(names, values, strict=True)
        return {c: None if v is None else str(v) for c, v in pairs if c not in absent}

    def events(rows):
        if not generic:
            return typed_events(delta_spark, rows)
        full = [(op, seq(n), T0 + dt.timedelta(seconds=n), ["id"],
                 before and {"id": str(before[0])}, image(after, rest[0] if rest else ()))
                for op, n, before, after, *rest in rows]  # fmt: skip
        schema = ("op string, sequence binary, event_time timestamp, primary_key array<string>, "
                  "before map<string,string>, after map<string,string>")  # fmt: skip
        return delta_spark.createDataFrame(full, schema)

    options = {"scd_type": scd_type, "metadata_columns": ["op", "event_time"]}
    if generic:
        options["schema"] = "id bigint, name string, score int"
    else:
        with pytest.raises(ValueError, match=r"the events have no 'tx_id' column \(for tx_id\)"):
            cdc_spark.apply_changes(events(first), path, metadata_columns=["op", "tx_id"])
    cdc_spark.apply_changes(events(first), path, **options)
    cdc_spark.apply_changes(events(later), path, **options)
    assert live(delta_spark, path) == {1: ("b", 10)}
    at = {n: T0 + dt.timedelta(seconds=n) for n in range(6)}
    if scd_type == 1:
        [row] = cdc_spark.current_rows(delta_spark, path).collect()
        assert (row["_cdc_meta_op"], row["_cdc_meta_event_time"]) == ("update", at[3])
        return
    versions = delta_spark.read.format("delta").load(path).collect()
    got = sorted((r["id"], bytes(r["_cdc_start_sequence"]), r["_cdc_meta_op"],
                  r["_cdc_meta_event_time"], r["_cdc_deleted"]) for r in versions)  # fmt: skip
    assert got == [
        (1, seq(1), "insert", at[1], False),
        (1, seq(3), "update", at[3], False),
        (2, seq(2), "insert", at[2], False),
        (2, seq(5), "delete", at[5], True),
    ]


# --- key changes -----------------------------------------------------------------------------


@pytest.mark.parametrize("scd_type", [1, 2])
def test_a_key_change_with_minimal_images_keeps_the_row(delta_spark, tmp_path, scd_type):
    """UPDATE t SET id = 2 WHERE id = 1 with minimal row images (before: the key, after:
    the new key): row 2 is row 1's, in one batch (key 3 -> 4) and across batches (1 -> 2)."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 10))], scd_type=scd_type)
    result = _apply(delta_spark, path, [
        ("update", 2, (1, None, None), (2, None, None), ["name", "score"]),
        ("insert", 3, None, (3, "c", 30)),
        ("update", 4, (3, None, None), (3, None, 31), ["name"]),
        ("update", 5, (3, None, None), (4, "d", None), ["score"]),
    ], scd_type=scd_type)  # fmt: skip
    assert result.key_changes == 2
    assert live(delta_spark, path) == {2: ("a", 10), 4: ("d", 31)}


@pytest.mark.parametrize("delete_first", [True, False])
def test_a_key_change_split_into_a_delete_and_a_create(delta_spark, tmp_path, delete_first):
    """PostgreSQL's Debezium connector sends a primary key update as a delete of the old
    key and a create of the new one with the same sequence (LSN), maybe in different
    micro-batches, in either order; the create lacks an unchanged TOASTed column. Given
    the old key in ``before``, the create takes that column from the old row, also when
    the delete was applied first; the old row was updated in the delete's batch."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 10)), ("insert", 2, None, (7, "g", 7))])
    delete = [
        ("update", 3, (1, None, None), (1, "a3", 11), []),
        ("delete", 5, (1, None, None), None),
    ]
    create = [("update", 5, (1, None, None), (2, "b", None), ["score"])]
    for batch in (delete, create) if delete_first else (create, delete):
        _apply(delta_spark, path, batch)
    if delete_first:
        assert live(delta_spark, path) == {2: ("b", 11), 7: ("g", 7)}
    else:  # the create came before the old row's update: it reads the row as it was
        assert live(delta_spark, path) == {2: ("b", 10), 7: ("g", 7)}


def test_a_key_change_does_not_carry_later_changes_of_the_old_key(delta_spark, tmp_path):
    """The documented limit: a change of the old key older than the move, applied after
    the move, reaches the old key's tombstone, not the new key."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 10))])
    _apply(delta_spark, path, [("update", 5, (1, None, None), (2, None, None), ["name", "score"])])
    _apply(delta_spark, path, [("update", 3, (1, None, None), (1, None, 30), ["name"])])
    assert live(delta_spark, path) == {2: ("a", 10)}
    tombstone = delta_spark.read.format("delta").load(path).where("id = 1").first()
    assert (tombstone["_cdc_deleted"], tombstone["score"]) == (True, 30)


# --- replay markers ------------------------------------------------------------------------


def test_a_new_checkpoint_with_an_old_app_id_is_an_error(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    for batch_id, n in enumerate((1, 2, 3)):
        _apply(delta_spark, path, [("insert", n, None, (n, "x", n))], app_id="q", batch_id=batch_id)
    again = _apply(delta_spark, path, [("insert", 9, None, (9, "x", 9))], app_id="q", batch_id=2)
    assert again.skipped and again.events == 0  # a replay of the same id: not even read
    with pytest.raises(ValueError, match=r"t already holds batch 2 of app_id 'q'; this is batch 0"):
        _apply(delta_spark, path, [("insert", 9, None, (9, "x", 9))], app_id="q", batch_id=0)
    fresh = _apply(delta_spark, path, [("insert", 9, None, (9, "x", 9))], app_id="q2", batch_id=0)
    assert not fresh.skipped
    assert sorted(live(delta_spark, path)) == [1, 2, 3, 9]


def _in_group(spark, group: str, run):
    """``run()``'s result and the number of Spark jobs it ran, counted by a job group of
    its own."""
    context = spark.sparkContext
    context.setJobGroup(group, "counted by a test")
    try:
        found = run()
    finally:  # the suite's one session: later tests' jobs join no group
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)
    return found, len(context.statusTracker().getJobIdsForGroup(group))


def test_the_replay_markers_come_from_the_checksum_without_a_job(delta_spark, tmp_path):
    """The markers a call checks come from the version's checksum file, which Delta writes
    with each commit: no Spark job. A table that expires markers
    (``delta.setTransactionRetentionDuration``) is read from the snapshot's state, in jobs,
    with the same answer."""
    from cdc_decode.spark._tables.delta import DeltaTarget

    path = str(tmp_path / "t")
    for batch_id, n in enumerate((1, 2)):
        _apply(delta_spark, path, [("insert", n, None, (n, "x", n))], app_id="q", batch_id=batch_id)
    _apply(delta_spark, path, [("insert", 3, None, (3, "x", 3))], app_id="r", batch_id=7)

    def markers(group: str) -> tuple[tuple[int | None, ...], int]:
        table = DeltaTarget(delta_spark, path)
        apps = ("q", "r", "s")
        return _in_group(delta_spark, group, lambda: tuple(table.txn_version(a) for a in apps))

    assert markers("markers-checksum") == ((1, 7, None), 0)
    delta_spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
        "('delta.setTransactionRetentionDuration' = 'interval 30 days')"
    )
    found, jobs = markers("markers-state")
    assert found == (1, 7, None) and jobs > 0
    again = _apply(delta_spark, path, [("insert", 9, None, (9, "x", 9))], app_id="q", batch_id=1)
    assert again.skipped
    assert sorted(live(delta_spark, path)) == [1, 2, 3]


THREE_CHANGES = [
    ("insert", 1, None, (1, "a", 10)),
    ("insert", 2, None, (2, "b", 20)),
    ("update", 3, (1, None, None), (1, "c", 30)),
]
"""A small batch of typed changes (two inserts, an update of the first key)."""


def test_the_tables_state_is_computed_ahead_in_a_thread(delta_spark, tmp_path, caplog):
    """``warm`` computes the snapshot's state (the jobs a MERGE runs first, to list the
    table's files) in a thread that carries the caller's job group; the snapshot keeps it,
    so asking for it again runs no job. A state that cannot be computed (the log's files
    gone) is only logged: the wait does not raise, and the caller's session stays the
    active one."""
    import logging
    import shutil

    from pyspark.sql import SparkSession

    from cdc_decode.spark._tables.delta import DeltaTarget

    path = str(tmp_path / "t")
    _apply(delta_spark, path, THREE_CHANGES)
    table = DeltaTarget(delta_spark, path)
    assert _in_group(delta_spark, "state-ahead", lambda: table.warm()())[1] > 0
    assert _in_group(delta_spark, "state-again", lambda: table._snapshot().sizeInBytes())[1] == 0
    assert SparkSession.getActiveSession() is delta_spark

    _apply(delta_spark, path, [("delete", 4, (2, None, None), None)])
    gone = DeltaTarget(delta_spark, path)
    gone._snapshot()  # a new version, its state not computed yet
    shutil.rmtree(tmp_path / "t" / "_delta_log")
    with caplog.at_level(logging.DEBUG, logger="cdc_decode.spark.apply"):
        gone.warm()()
    assert any("its state was not computed ahead" in r.getMessage() for r in caplog.records)
    assert SparkSession.getActiveSession() is delta_spark


def _fold_plans(apply_module, monkeypatch) -> list[str]:
    """The physical plans of the folds the calls hold (``held``), in order, as text."""
    real = apply_module.held
    plans: list[str] = []

    def recorded(frame):
        plans.append(frame._jdf.queryExecution().executedPlan().toString())
        return real(frame)

    monkeypatch.setattr(apply_module, "held", recorded)
    return plans


def test_a_small_batch_folds_in_one_task_without_a_shuffle(delta_spark, tmp_path, monkeypatch):
    """A type 1 batch smaller than ``ONE_TASK_BYTES`` by the optimizer's estimate (here
    cached, whose size Spark knows once it is read; rows made from Python objects, as
    ``typed_events`` makes them, have none) is folded in one partition: the plan of the
    fold the call holds has no shuffle (``Exchange``); with the threshold at 0, the same
    batch is shuffled by key. Both tables are the same."""
    import importlib

    apply_module = importlib.import_module("cdc_decode.spark.apply")
    plans = _fold_plans(apply_module, monkeypatch)
    one, shuffled = str(tmp_path / "one"), str(tmp_path / "shuffled")
    events = typed_events(delta_spark, THREE_CHANGES).cache()
    try:
        assert events.count() == 3
        cdc_spark.apply_changes(events, one)
        monkeypatch.setattr(apply_module, "ONE_TASK_BYTES", 0)
        cdc_spark.apply_changes(events, shuffled)
    finally:
        events.unpersist()
    assert len(plans) == 2
    assert "Exchange" not in plans[0], plans[0]
    assert "Exchange" in plans[1], plans[1]
    assert live(delta_spark, one) == live(delta_spark, shuffled) == {1: ("c", 30), 2: ("b", 20)}


def test_a_batch_read_from_parquet_is_sized_by_its_rows_not_its_files(
    delta_spark, tmp_path, monkeypatch
):
    """A batch read from Parquet files counts ``COLUMNAR_FILE_FACTOR`` times the files'
    size (``_plans.batch_bytes``) when the call chooses between one task and a shuffle
    before the fold: with ``ONE_TASK_BYTES`` between the two, the batch is shuffled by key;
    counted by the files' size alone, it is folded in one task. Both tables are the same."""
    import importlib

    apply_module = importlib.import_module("cdc_decode.spark.apply")
    plans_module = importlib.import_module("cdc_decode.spark._plans")
    plans = _fold_plans(apply_module, monkeypatch)
    typed_events(delta_spark, THREE_CHANGES).write.parquet(str(tmp_path / "events"))
    events = delta_spark.read.parquet(str(tmp_path / "events"))
    files = plans_module.estimated_bytes(events)
    factor = plans_module.COLUMNAR_FILE_FACTOR
    monkeypatch.setattr(apply_module, "ONE_TASK_BYTES", files * (factor + 1) // 2)
    monkeypatch.setattr(apply_module, "FOLD_INTERPRET_BYTES", 0)
    rows, files_only = str(tmp_path / "rows"), str(tmp_path / "files")
    cdc_spark.apply_changes(events, rows)
    monkeypatch.setattr(plans_module, "COLUMNAR_FILE_FACTOR", 1)
    cdc_spark.apply_changes(events, files_only)
    assert len(plans) == 2
    assert "Exchange" in plans[0], plans[0]
    assert "Exchange" not in plans[1], plans[1]
    assert live(delta_spark, rows) == live(delta_spark, files_only) == {1: ("c", 30), 2: ("b", 20)}


def test_a_merge_that_writes_deletion_vectors_broadcasts_its_source(
    delta_spark, tmp_path, monkeypatch
):
    """Into a table that writes deletion vectors (here every table: ``REWRITE_BYTES`` 0), the
    MERGE's source, held in memory and small, is broadcast: the view the MERGE reads carries
    Spark's broadcast hint. With ``BROADCAST_SOURCE_ROWS`` at -1 it does not, unless the
    batch is resolved against the table's rows first (a table past ``RESOLVE_BYTES``),
    whose rows are always broadcast. The three tables are the same."""
    import importlib

    apply_module = importlib.import_module("cdc_decode.spark.apply")
    delta_module = importlib.import_module("cdc_decode.spark._tables.delta")
    frame_class = type(delta_spark.range(1))  # Spark 4's classic DataFrame, Spark 3.5's own
    real = frame_class.createOrReplaceTempView
    views: list[str] = []

    def recorded(self, name):
        if name.startswith("_cdc_decode_source_"):
            views.append(self._jdf.queryExecution().analyzed().toString())
        return real(self, name)

    monkeypatch.setattr(frame_class, "createOrReplaceTempView", recorded)
    monkeypatch.setattr(delta_module, "REWRITE_BYTES", 0)
    later = [("update", 4, (2, None, None), (2, "d", 40)), ("insert", 5, None, (3, "e", 50))]
    tables = {}
    for name, hinted in [("held", True), ("plain", False), ("resolved", True)]:
        if name == "plain":
            monkeypatch.setattr(delta_module, "BROADCAST_SOURCE_ROWS", -1)
        if name == "resolved":
            monkeypatch.setattr(apply_module, "RESOLVE_BYTES", -1)
        path = tables[name] = str(tmp_path / name)
        _apply(delta_spark, path, THREE_CHANGES)
        del views[:]
        _apply(delta_spark, path, later)
        assert len(views) == 1, name
        assert ("broadcast" in views[0].lower()) == hinted, (name, views[0])
    expected = {1: ("c", 30), 2: ("d", 40), 3: ("e", 50)}
    assert all(live(delta_spark, path) == expected for path in tables.values())


def test_a_small_tables_history_is_held_without_adaptive_execution(delta_spark, tmp_path,
                                                                   monkeypatch):  # fmt: skip
    """A history (``scd_type=2``) into a Delta table under ``SERIAL_BYTES`` holds its steps
    (the stored versions, the chained ones) in a clone of the session that plans without
    adaptive execution; with the threshold at 0 they are held in the caller's session, which
    plans adaptively. Both tables are the same."""
    import importlib

    apply_module = importlib.import_module("cdc_decode.spark.apply")
    delta_module = importlib.import_module("cdc_decode.spark._tables.delta")
    real = apply_module.in_session
    plans: list[str] = []

    def recorded(frame, session):
        moved = real(frame, session)
        plans.append(moved._jdf.queryExecution().executedPlan().toString())
        return moved

    monkeypatch.setattr(apply_module, "in_session", recorded)
    serial, adaptive = str(tmp_path / "serial"), str(tmp_path / "adaptive")
    events = typed_events(delta_spark, THREE_CHANGES)
    assert delta_spark.conf.get("spark.sql.adaptive.enabled") == "true"
    cdc_spark.apply_changes(events, serial, scd_type=2)
    held_serially = len(plans)
    monkeypatch.setattr(delta_module, "SERIAL_BYTES", 0)
    cdc_spark.apply_changes(events, adaptive, scd_type=2)
    assert held_serially >= 2 and len(plans) == held_serially, plans
    assert delta_spark.conf.get("spark.sql.adaptive.enabled") == "true"  # the caller's own
    # (The batch's versions, held before, are read from their cache as Spark planned them.)
    assert not any(plan.startswith("AdaptiveSparkPlan") for plan in plans), plans
    one = delta_spark.read.format("delta").load(serial)
    other = delta_spark.read.format("delta").load(adaptive)
    assert one.count() == 3
    assert one.exceptAll(other).count() == 0 and other.exceptAll(one).count() == 0


# --- stale changes ---------------------------------------------------------------------------


def test_stale_changes_are_counted_and_a_mostly_stale_batch_warns(delta_spark, tmp_path):
    """A source whose sequence went backwards: every change of an existing key is older
    than the stored row. Counted in ``stale``; a warning, or an error with on_stale."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 100 + i, None, (i, "a", i)) for i in range(12)])
    late = [("update", 50 + i, (i, None, None), (i, "b", i), []) for i in range(12)]
    late.append(("insert", 60, None, (99, "new", 1)))
    with pytest.warns(StaleChangesWarning, match="12 of the 13 keys"):
        result = _apply(delta_spark, path, late)
    assert (result.keys, result.stale) == (13, 12)
    assert live(delta_spark, path)[0] == ("a", 0)
    with pytest.raises(ValueError, match="did the source's sequence go backwards"):
        _apply(delta_spark, path, late, on_stale="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleChangesWarning)
        quiet = _apply(delta_spark, path, late[:3])  # 3 stale keys: below the minimum
    assert quiet.stale == 3


def test_a_new_epoch_of_sequences(delta_spark, tmp_path):
    """docs/apply.md: an epoch byte before the sequence from the start; a new epoch's
    changes are newer than every stored one."""
    from pyspark.sql import functions as F

    path = str(tmp_path / "t")

    def epoch(rows, n):
        events = typed_events(delta_spark, rows)
        return events.withColumn("seq", F.concat(F.lit(bytes([n])), "sequence"))

    cdc_spark.apply_changes(epoch([("insert", 900, None, (1, "a", 1))], 0), path, sequence_by="seq")
    cdc_spark.apply_changes(epoch([("update", 5, None, (1, "b", 2))], 1), path, sequence_by="seq")
    assert live(delta_spark, path) == {1: ("b", 2)}


# --- tombstones ------------------------------------------------------------------------------


def test_a_catch_up_batch_longer_than_the_retention_keeps_deletes(delta_spark, tmp_path):
    """One batch spans two hours, the retention is one: the delete's tombstone is purged,
    and the purge horizon (kept with the table) stops a redelivered older insert from
    bringing the row back. A future-dated event cannot purge what the wall clock would
    keep; a change newer than the horizon for a new key is written."""
    path = str(tmp_path / "t")
    hour = 3600
    rows = [
        ("insert", 1, None, (1, "a", 1)),
        ("delete", 2, (1, None, None), None),
        ("insert", 3, None, (2, "b", 2)),
        ("delete", 2 * hour, (2, None, None), None),
        ("insert", 2 * hour + 1, None, (3, "c", 3)),
    ]
    result = _apply(delta_spark, path, rows, tombstone_retention=dt.timedelta(hours=1))
    assert result.purged == 1
    table = delta_spark.read.format("delta").load(path)
    assert sorted(r["id"] for r in table.collect()) == [2, 3]  # 1's tombstone is gone
    again = _apply(delta_spark, path, [("insert", 1, None, (1, "a", 1))])
    assert again.stale == 1
    _apply(delta_spark, path, [("insert", 2 * hour + 5, None, (4, "d", 4))])
    assert live(delta_spark, path) == {3: ("c", 3), 4: ("d", 4)}

    # A clock 30 years ahead: the cutoff is the wall clock's, not the event's, so the
    # tombstone of a delete made now stays (2's, from 2024, goes).
    future = typed_events(delta_spark, [("insert", 2 * hour + 9, None, (5, "e", 5))])
    from pyspark.sql import functions as F

    future = future.withColumn("event_time", F.lit(dt.datetime(2055, 1, 1)))
    recent = typed_events(delta_spark, [("delete", 2 * hour + 8, (4, None, None), None)])
    recent = recent.withColumn("event_time", F.current_timestamp())
    cdc_spark.apply_changes(
        recent.unionByName(future), path, tombstone_retention=dt.timedelta(hours=1)
    )
    table = delta_spark.read.format("delta").load(path)
    assert sorted(r["id"] for r in table.where("_cdc_deleted").collect()) == [4]


# --- equal sequences -----------------------------------------------------------------------


@pytest.mark.parametrize("typed", [True, False])
def test_equal_sequences_an_upsert_wins_over_a_delete(delta_spark, tmp_path, typed):
    """UPDATE t SET id = id + 1 with one sequence for the whole statement (Datastream
    MySQL): key 2 is deleted (moved to 3) and inserted (moved from 1) at one sequence: it
    stays, in one batch (both paths), across batches, and in SCD2 history."""
    path = str(tmp_path / "t")
    first = [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2))]
    shift = [
        ("delete", 5, (2, None, None), None),
        ("insert", 5, None, (3, "b", 2)),
        ("delete", 5, (1, None, None), None),
        ("insert", 5, None, (2, "a", 1)),
    ]
    options = {} if typed else {"ignore_null_updates": True}  # the per-column path
    _apply(delta_spark, path, first, **options)
    _apply(delta_spark, path, shift, **options)
    assert live(delta_spark, path) == {2: ("a", 1), 3: ("b", 2)}
    across = str(tmp_path / "across")
    _apply(delta_spark, across, first)
    _apply(delta_spark, across, shift[:1])  # 2 deleted at 5
    _apply(delta_spark, across, shift[1:])  # then 2 inserted at 5: the insert wins
    _apply(delta_spark, across, shift[:1])  # and a redelivered delete at 5 changes nothing
    assert live(delta_spark, across) == {2: ("a", 1), 3: ("b", 2)}
    history = str(tmp_path / "history")
    _apply(delta_spark, history, first + shift, scd_type=2)
    versions = delta_spark.read.format("delta").load(history).where("id = 2")
    got = sorted(
        (r["_cdc_start_sequence"], r["name"], r["_cdc_deleted"]) for r in versions.collect()
    )
    assert got == [(seq(2), "b", False), (seq(5), "a", False)]


def test_equal_sequences_two_upserts_decide_the_same_every_time(delta_spark, tmp_path):
    """Two different updates of one key with one sequence (Lindorm in one millisecond):
    the same one wins on both fold paths, whatever the order in the batch."""
    rows = [
        ("update", 4, (1, None, None), (1, "x", 1)),
        ("update", 4, (1, None, None), (1, "y", 2)),
    ]
    got = set()
    for i, order in enumerate((rows, rows[::-1])):
        for options in ({}, {"ignore_null_updates": True}):
            path = str(tmp_path / f"t{i}{len(options)}")
            _apply(delta_spark, path, order, **options)
            got.add(live(delta_spark, path)[1])
    assert len(got) == 1


# --- names, DDL, conversions -----------------------------------------------------------------

GENERIC = (
    "op string, sequence binary, primary_key array<string>, ddl string, "
    "before map<string,string>, after map<string,string>"
)


def _generic(spark, rows):
    full = [
        (op, seq(n), ["id"] if op != "ddl" else None, ddl, before, after)
        for op, n, before, after, *rest in rows
        for ddl in [rest[0] if rest else None]
    ]
    return spark.createDataFrame(full, GENERIC)


def test_column_names_match_ignoring_case(delta_spark, tmp_path):
    """Generic images keyed ``ID``/``Name`` fill the columns ``id``/``name``; image keys
    that are no column are reported; a column no upsert carried is reported; two columns
    that differ only in case are an error."""
    path = str(tmp_path / "t")
    rows = [
        ("insert", 1, None, {"ID": "1", "Name": "a", "score": "1", "extra": "?"}),
        ("update", 2, {"Id": "1"}, {"NAME": "b"}),
    ]
    result = cdc_spark.apply_changes(
        _generic(delta_spark, rows), path, schema="id bigint, name string, score int"
    )
    assert live(delta_spark, path) == {1: ("b", 1)}
    assert result.unknown_columns == ["extra"]
    assert result.absent_columns == []
    later = cdc_spark.apply_changes(_generic(delta_spark, rows[1:]), path)
    assert later.absent_columns == ["score"]
    with pytest.raises(ValueError, match="'id' and 'ID' differ only in case"):
        cdc_spark.apply_changes(_generic(delta_spark, rows), path, schema="id bigint, ID int")


def test_renamed_or_dropped_columns_in_ddl(delta_spark, tmp_path):
    """A ddl event renaming or dropping a column the table has is an error before anything
    is written (on_ddl="raise", the default); other DDL and on_ddl="report" pass."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 1))])
    for statement in (
        "ALTER TABLE `users` RENAME COLUMN `score` TO `points`",
        "ALTER TABLE users CHANGE score points int",
        "ALTER TABLE users DROP COLUMN score",
        'ALTER TABLE "shop"."users" DROP ("SCORE")',
    ):
        rows = [("ddl", 2, None, None, None, statement), ("insert", 3, None, (2, "b", 2))]
        with pytest.raises(ValueError, match=r"column '(score|SCORE)' of table"):
            _apply(delta_spark, path, rows)
    assert sorted(live(delta_spark, path)) == [1]
    rows = [
        ("ddl", 2, None, None, None, "ALTER TABLE users DROP INDEX idx_score, DROP name2"),
        ("ddl", 3, None, None, None, "CREATE INDEX `idx_name` ON `users` (`name`)"),
        ("insert", 4, None, (2, "b", 2)),
    ]
    assert len(_apply(delta_spark, path, rows).ddl) == 2
    rename = [("ddl", 5, None, None, None, "ALTER TABLE users RENAME COLUMN name TO nick")]
    assert _apply(delta_spark, path, rename, on_ddl="report").ddl == [rename[0][5]]


def test_ddl_statements_come_in_sequence_order_from_the_one_read(delta_spark, tmp_path):
    """The ``ddl`` statements of a batch are taken by the read that folds it: each event is
    read once (an unpersisted micro-batch is decoded once), the statements in sequence
    order whatever the batch's order."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    path = str(tmp_path / "t")
    rows = [
        ("ddl", 4, None, None, "CREATE INDEX `b` ON `users` (`name`)"),
        ("insert", 1, None, {"id": "1", "name": "a", "score": "1"}),
        ("ddl", 2, None, None, "CREATE INDEX `a` ON `users` (`score`)"),
        ("update", 3, {"id": "1"}, {"id": "1", "name": "b", "score": "1"}),
    ]
    reads = delta_spark.sparkContext.accumulator(0)

    def counted(op):
        reads.add(1)
        return op

    counting = udf(counted, "string").asNondeterministic()
    events = _generic(delta_spark, rows).withColumn("op", counting(F.col("op")))
    result = cdc_spark.apply_changes(events, path, schema="id bigint, name string, score int")
    assert result.ddl == [rows[2][4], rows[0][4]]
    assert reads.value == len(rows)
    assert live(delta_spark, path) == {1: ("b", 1)}


def test_values_that_do_not_convert_are_counted_not_fatal(delta_spark, tmp_path):
    """Generic images with schema=: a value that does not convert (MySQL's zero date,
    text in a number) is an error naming it by default (on_invalid="raise"), nothing
    written; with on_invalid="count" it is written as null and counted."""
    path = str(tmp_path / "t")
    ddl = "id bigint, name string, score int, born date"
    rows = [
        ("insert", 1, None, {"id": "1", "name": "a", "score": "x1", "born": "0000-00-00"}),
        ("insert", 2, None, {"id": "two", "name": "b", "score": "2", "born": "2024-01-31"}),
    ]
    events = _generic(delta_spark, rows)
    with pytest.raises(ValueError, match=r"value\(s\) of column 'id' do not convert.*'two'"):
        cdc_spark.apply_changes(events, path, schema=ddl)
    result = cdc_spark.apply_changes(events, path, schema=ddl, on_invalid="count")
    assert result.unconverted == {"id": 1, "score": 1, "born": 1}
    assert result.unkeyed == 1
    got = cdc_spark.current_rows(delta_spark, path).collect()
    assert [(r["id"], r["score"], r["born"]) for r in got] == [(1, None, None)]


# --- keys ------------------------------------------------------------------------------------


def test_keys_are_stored_with_the_table_and_checked(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [("insert", 1, None, (1, "a", 1))])
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail["properties"]["cdc_decode.keys"] == '["id"]'
    with pytest.raises(ValueError, match=r"keyed by id .*not name"):
        _apply(delta_spark, path, [("insert", 2, None, (2, "b", 2))], keys=["name"])
    from pyspark.sql import functions as F

    other = typed_events(delta_spark, [("insert", 2, None, (2, "b", 2))])
    other = other.withColumn("primary_key", F.array(F.lit("name")))
    with pytest.raises(ValueError, match=r"primary key is name .*keyed by id"):
        cdc_spark.apply_changes(other, path)
    assert _apply(delta_spark, path, [("insert", 2, None, (2, "b", 2))], keys=["ID"]).keys == 1


# --- sequence_by, names, the table's own columns ---------------------------------------------


def test_sequence_by_integers_and_timestamps(delta_spark, tmp_path):
    """An integer sequence (a Kafka offset) orders as numbers (negative ones first), a
    timestamp as time; text is refused."""
    from pyspark.sql import functions as F

    events = typed_events(
        delta_spark,
        [("insert", 1, None, (1, "a", 1)), ("update", 2, None, (1, "b", 2)),
         ("update", 3, None, (1, "c", 3))],
    )  # fmt: skip
    offset = F.when(F.col("after.name") == "a", -5).when(F.col("after.name") == "b", 9)
    numbered = events.withColumn("offset", offset.otherwise(10).cast("bigint"))
    cdc_spark.apply_changes(numbered.where("after.name != 'b'"), str(tmp_path / "i"),
                            sequence_by="offset")  # fmt: skip
    cdc_spark.apply_changes(numbered.where("after.name = 'b'"), str(tmp_path / "i"),
                            sequence_by="offset")  # fmt: skip
    assert live(delta_spark, str(tmp_path / "i")) == {1: ("c", 3)}
    cdc_spark.apply_changes(events, str(tmp_path / "ts"), sequence_by="event_time")
    assert live(delta_spark, str(tmp_path / "ts")) == {1: ("c", 3)}
    with pytest.raises(ValueError, match="sequence_by column 'text' is string"):
        cdc_spark.apply_changes(
            events.withColumn("text", F.lit("9")), str(tmp_path / "s"), sequence_by="text"
        )


def test_column_names_with_dots_backquotes_and_spaces(delta_spark, tmp_path):
    path = str(tmp_path / "t")
    columns = "`user.id`:bigint,`na``me`:string,`the score`:int"
    schema = (
        f"op string, sequence binary, primary_key array<string>, before struct<{columns}>, "
        f"after struct<{columns}>, after_absent array<string>"
    )
    rows = [
        ("insert", seq(1), ["user.id"], None, (1, "a", 1), []),
        ("update", seq(2), ["user.id"], (1, None, None), (1, None, 2), ["na`me"]),
        ("update", seq(3), ["user.id"], (1, None, None), (2, None, None), ["na`me", "the score"]),
    ]
    cdc_spark.apply_changes(delta_spark.createDataFrame(rows, schema), path)
    got = [tuple(r) for r in cdc_spark.current_rows(delta_spark, path).collect()]
    assert got == [(2, "a", 2)]


def test_the_tables_own_column_names_are_refused(delta_spark, tmp_path):
    rows = [("insert", 1, None, (1, "a", 1))]
    events = typed_events(delta_spark, rows, "id:bigint,name:string,_cdc_current:int")
    with pytest.raises(ValueError, match="_cdc_current clash"):
        cdc_spark.apply_changes(events, str(tmp_path / "t"))
    with pytest.raises(ValueError, match="tombstone_retention is for scd_type=1"):
        _apply(delta_spark, str(tmp_path / "t"), rows, scd_type=2,
               tombstone_retention=dt.timedelta(days=1))  # fmt: skip


def test_a_table_of_the_older_layout_is_brought_up_to_date(delta_spark, tmp_path):
    """A type 1 table written before the per-column sequences (no base, no map, no keys
    property), with a row bootstrapped by hand (null sequence): the first call adds the
    columns and the property; the old rows act as written whole at their sequence."""
    path = str(tmp_path / "t")
    delta_spark.createDataFrame(
        [(1, "a", 1, seq(5), T0, False), (2, "b", 2, None, None, False)],
        "id bigint, name string, score int, _cdc_sequence binary, _cdc_event_time timestamp, "
        "_cdc_deleted boolean",
    ).write.format("delta").save(path)
    result = _apply(delta_spark, path, [
        ("update", 4, (1, None, None), (1, "old", None), ["score"]),
        ("update", 6, (1, None, None), (1, None, 60), ["name"]),
        ("update", 1, (2, None, None), (2, "b1", None), ["score"]),
    ], keys=["id"])  # fmt: skip
    assert result.added_columns == []
    assert live(delta_spark, path) == {1: ("a", 60), 2: ("b1", 2)}
    table = delta_spark.read.format("delta").load(path)
    assert "_cdc_column_sequences" in table.columns
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert detail["properties"]["cdc_decode.keys"] == '["id"]'


def test_unsequenced_rows_and_truncate_are_counted_not_applied(delta_spark, tmp_path):
    from pyspark.sql import functions as F

    events = typed_events(
        delta_spark, [("insert", 1, None, (1, "a", 1)), ("insert", 2, None, (2, "b", 2)),
                      ("truncate", 3, None, None)]
    )  # fmt: skip
    unsequenced = (F.col("after.id") == 2) | (F.col("op") == "truncate")
    events = events.withColumn("sequence", F.when(~unsequenced, F.col("sequence")))
    result = cdc_spark.apply_changes(events, str(tmp_path / "t"))
    assert (result.unsequenced, result.unkeyed, result.other) == (1, 0, {"truncate": 1})
    assert not result.truncated
    assert live(delta_spark, str(tmp_path / "t")) == {1: ("a", 1)}


def test_update_before_and_a_partial_update_after(delta_spark, tmp_path):
    """An update_before removes the row; a partial update_after then starts from an empty
    row, as an insert after a delete does (docs/apply.md)."""
    path = str(tmp_path / "t")
    _apply(delta_spark, path, [
        ("insert", 1, None, (1, "a", 1)),
        ("update_before", 2, (1, "a", 1), None),
        ("update_after", 3, None, (1, "b", None), ["score"]),
    ])  # fmt: skip
    assert live(delta_spark, path) == {1: ("b", None)}


def test_stored_key_rows_of_many_composite_keys(delta_spark):
    """Over 100 composite keys the old keys' rows are read by a join, whose sides share the
    key columns' names (a name with a dot too): the stored rows of exactly those keys."""
    from cdc_decode.spark._apply_rules import stored_key_rows

    rows = delta_spark.createDataFrame(
        [(i, i % 7, f"v{i}") for i in range(500)], "order_id int, `line.no` int, v string"
    )
    wanted = delta_spark.createDataFrame(
        [(i, i % 7) for i in range(0, 500, 2)], "order_id int, `line.no` int"
    )

    class Stored:
        def read(self):
            return rows

    got = stored_key_rows(Stored(), ["order_id", "line.no"], wanted)
    assert got.columns == ["order_id", "line.no", "v"]
    assert sorted(r.order_id for r in got.collect()) == list(range(0, 500, 2))
    few = stored_key_rows(Stored(), ["order_id", "line.no"], wanted.limit(5))
    assert few.count() == 5
