"""apply_changes beside other writers and other threads (Delta 4.4.0, Spark 4.2).

- A real ``OPTIMIZE`` commits while an ``apply_changes`` MERGE runs (it starts when the
  MERGE's first job is seen running): the MERGE's commit conflicts, is run again, and the
  table stays equal to the changes applied.
- Another writer changes rows of a batch between ``apply_changes``' read of them and its
  MERGE (a batch resolved against its stored rows first, as on a large table): the MERGE
  fails on them (writing nothing), the batch is read again and applied, and both writers'
  changes are in the table.
- The same for an SCD2 history: the key's versions are read again before its MERGE.
- Tables applied at once from a thread pool in one session, each call with its own
  ``app_id``: every table is right and holds its own replay marker (the markers are
  session settings in Delta; each call sets them in a clone of the session).
"""

from __future__ import annotations

import importlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from support.apply_truth import live, typed_events

from cdc_decode import spark as cdc_spark
from cdc_decode.spark import _apply_rules as rules
from cdc_decode.spark._tables.delta import TXN_APP, TXN_VERSION, DeltaTarget


def _merge_running(spark) -> bool:
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    for i in range(jobs.size()):
        job = jobs.apply(i)
        description = job.description()
        if str(job.status()) == "RUNNING" and description.isDefined():
            if "MERGE operation" in description.get():
                return True
    return False


def test_a_concurrent_optimize_is_retried(delta_spark, tmp_path, monkeypatch):
    # The MERGE writes deletion vectors, as into a table over REWRITE_BYTES: a MERGE that
    # rewrites this small table's files removes the ones OPTIMIZE reads, so OPTIMIZE
    # fails first instead, and the MERGE's retry is what this test is for.
    delta = importlib.import_module("cdc_decode.spark._tables.delta")
    monkeypatch.setattr(delta, "REWRITE_BYTES", 0)
    # OPTIMIZE must commit between the MERGE's read of the table and its commit. The first
    # MERGE's source sleeps in every job that reads it (the held source is read by each of
    # the MERGE's jobs): OPTIMIZE, started when the MERGE's first job is seen running, has
    # its job queued before the MERGE's next one (one core, first in first out), and
    # commits while that one sleeps.
    merge_once = delta.DeltaTarget.merge_once
    attempts: list = []

    def slow_first_merge(self, source, *args, **kwargs):
        attempts.append(1)
        if len(attempts) == 1:

            def slow(batches):
                time.sleep(2)
                yield from batches

            source = source.mapInArrow(slow, source.schema)
        return merge_once(self, source, *args, **kwargs)

    path = str(tmp_path / "t")
    want: dict = {}
    for n in range(6):  # small files for OPTIMIZE to compact
        rows = [("insert", 10 * n + i, None, (10 * n + i, f"r{n}", i)) for i in range(5)]
        cdc_spark.apply_changes(typed_events(delta_spark, rows), path)
        want.update({10 * n + i: (f"r{n}", i) for i in range(5)})
    monkeypatch.setattr(delta.DeltaTarget, "merge_once", slow_first_merge)
    optimized: list = []
    stop = threading.Event()

    def optimize() -> None:
        while not stop.is_set() and not _merge_running(delta_spark):
            time.sleep(0.02)
        if stop.is_set():
            return
        try:
            delta_spark.sql(f"OPTIMIZE delta.`{path}`").collect()
            optimized.append(True)
        except Exception as error:  # the MERGE committed first: OPTIMIZE conflicts
            optimized.append(type(error).__name__)

    other = threading.Thread(target=optimize)
    other.start()
    rows = [("update", 100, None, (k, "u", 0)) for k in range(0, 60, 10)]
    rows += [("insert", 100, None, (1000, "new", 0))]
    try:
        result = cdc_spark.apply_changes(typed_events(delta_spark, rows), path)
    finally:
        stop.set()
        other.join()
    want.update({k: ("u", 0) for k in range(0, 60, 10)})
    want[1000] = ("new", 0)
    assert optimized == [True]
    assert result.retries >= 1, (result, attempts)
    assert len(attempts) == result.retries + 1
    assert live(delta_spark, path) == want
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert "OPTIMIZE" in {row["operation"] for row in history}


def test_rows_changed_after_they_were_read_are_read_again(delta_spark, tmp_path, monkeypatch):
    import importlib

    # The way that reads the rows first: a table past RESOLVE_BYTES (this one is small).
    monkeypatch.setattr(importlib.import_module("cdc_decode.spark.apply"), "RESOLVE_BYTES", -1)
    path = str(tmp_path / "t")
    rows = [("insert", 1, None, (k, "a", 1)) for k in range(4)]
    cdc_spark.apply_changes(typed_events(delta_spark, rows), path)
    resolve = rules.resolve_scd1
    calls = []

    def read_then_another_writer(source, table, keys, clauses):
        rows, resolved = resolve(source, table, keys, clauses)
        rows = rows.localCheckpoint()  # the rows as read now
        calls.append(rows.count())
        if len(calls) == 1:
            # Newer than the batch for key 1 (the batch must lose there), older for key 2
            # (the batch must win), and a key the batch inserts too.
            other = [
                ("update", 9, None, (1, "other", 9)),
                ("update", 3, None, (2, "other", 3)),
                ("insert", 3, None, (7, "other", 3)),
            ]
            monkeypatch.setattr(rules, "resolve_scd1", resolve)
            try:
                cdc_spark.apply_changes(typed_events(delta_spark, other), path)
            finally:
                monkeypatch.setattr(rules, "resolve_scd1", read_then_another_writer)
        return rows, resolved

    monkeypatch.setattr(rules, "resolve_scd1", read_then_another_writer)
    batch = [
        ("update", 5, None, (1, "batch", 5)),
        ("update", 5, None, (2, "batch", 5)),
        ("insert", 5, None, (7, "batch", 5)),
        ("delete", 5, (3, "a", 1), None),
    ]
    result = cdc_spark.apply_changes(typed_events(delta_spark, batch), path, app_id="q", batch_id=0)
    assert len(calls) == 2, calls
    assert result.retries >= 1
    assert live(delta_spark, path) == {
        0: ("a", 1),
        1: ("other", 9),
        2: ("batch", 5),
        7: ("batch", 5),
    }
    assert DeltaTarget(delta_spark, path).txn_version("q") == 0


def test_scd2_versions_changed_after_they_were_read_are_read_again(
    delta_spark, tmp_path, monkeypatch
):
    """SCD2: another writer adds a version of a key between ``apply_changes``' read of the
    key's versions and its MERGE: the versions are read again before the MERGE, and the
    history chains all three versions, one of them current (read once, the batch's
    version was made current beside the other writer's)."""
    path = str(tmp_path / "h")
    first = [("insert", 1, None, (k, "a", 1)) for k in range(3)]
    cdc_spark.apply_changes(typed_events(delta_spark, first), path, scd_type=2)
    stored = rules.stored_key_rows
    calls = []

    def read_then_another_writer(table, keys, wanted):
        rows = stored(table, keys, wanted)
        calls.append(1)
        if len(calls) == 1:
            rows = rows.localCheckpoint()  # the versions as read now
            monkeypatch.setattr(rules, "stored_key_rows", stored)
            try:
                other = [("update", 9, None, (1, "other", 9))]
                cdc_spark.apply_changes(typed_events(delta_spark, other), path, scd_type=2)
            finally:
                monkeypatch.setattr(rules, "stored_key_rows", read_then_another_writer)
        return rows

    monkeypatch.setattr(rules, "stored_key_rows", read_then_another_writer)
    batch = [("update", 5, None, (1, "batch", 5))]
    result = cdc_spark.apply_changes(typed_events(delta_spark, batch), path, scd_type=2)
    assert len(calls) == 2, calls
    assert result.retries >= 1
    history = delta_spark.read.format("delta").load(path).where("id = 1")
    got = sorted(
        (r["name"], r[rules.CURRENT], r[rules.END_SEQUENCE] is None) for r in history.collect()
    )
    assert got == [("a", False, False), ("batch", False, False), ("other", True, True)]


def test_tables_applied_from_threads(delta_spark, tmp_path):
    """Three tables, three micro-batches each, applied at once from a thread pool in one
    session: every table right, every replay marker its own, none left in the session."""
    names = ["a", "b", "c"]

    def batch(name: str, batch_id: int):
        rows = [
            ("insert", batch_id * 10 + i, None, (i + 10 * batch_id, name, batch_id))
            for i in range(3)
        ]  # noqa: E501
        return cdc_spark.apply_changes(
            typed_events(delta_spark, rows),
            str(tmp_path / name),
            app_id=f"sync-{name}",
            batch_id=batch_id,
        )

    with ThreadPoolExecutor(max_workers=3) as pool:
        for batch_id in range(3):
            results = list(pool.map(batch, names, [batch_id] * len(names)))
            assert not any(r.skipped for r in results)
    for name in names:
        got = live(delta_spark, str(tmp_path / name))
        assert got == {i + 10 * b: (name, b) for b in range(3) for i in range(3)}
        table = DeltaTarget(delta_spark, str(tmp_path / name))
        assert table.txn_version(f"sync-{name}") == 2
        others = [n for n in names if n != name]
        assert all(table.txn_version(f"sync-{n}") is None for n in others)
    assert delta_spark.conf.get(TXN_APP, None) is None
    assert delta_spark.conf.get(TXN_VERSION, None) is None
