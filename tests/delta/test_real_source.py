"""SQL in, equal tables out: a real PostgreSQL and a real MariaDB, a real Debezium (Kafka
Connect standalone), the test broker, decode_stream and apply_changes into Delta.

A seeded SQL workload (tests/support/real_source.py) runs against each database; every
Delta table must equal ``SELECT *`` of its source table, value by value through the type
mapping of docs/formats/debezium-json.md: after a clean run, after the Spark driver is
SIGKILLed mid-stream (between a micro-batch's Delta commits and its checkpoint) and
restarted, and after Kafka Connect is SIGKILLed and restarted (it sends again what it had
not stored an offset for; the redelivered records change nothing). `make test` runs the
Connect kill on both databases at once; `make test-real-source` runs the driver kill on
both and the Connect kill on each database alone (marked ``long``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.databases import start_mariadb, start_postgres
from support.jobs import kill_when
from support.real_source import (
    MARIADB,
    POSTGRES,
    SyncSink,
    Workload,
    assert_tables_equal,
    run_query,
)
from support.streaming import kafka_source

from cdc_decode._kafka_connect import mariadb_connector, postgres_connector, start_connect
from cdc_decode.generate.truth import parse_time

ROOT = Path(__file__).resolve().parents[2]
CONNECT_JARS = ROOT / ".jars-connect"
PLUGINS = ROOT / ".debezium"
SUPPORT = ROOT / "tests" / "support"


def fence_records(bootstrap: str, topic: str, timeout: float = 1.0) -> list[int]:
    """The ids of every fence row change in ``topic`` so far (redeliveries included)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fence-{time.monotonic()}",
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=5).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        parts = [TopicPartition(topic, p, 0) for p in metadata.partitions]
        consumer.assign(parts)
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p))[1]
            for p in metadata.partitions
        }
        ids, seen = [], dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout + 5
        while any(seen[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            seen[message.partition()] = message.offset() + 1
            if message.value():
                payload = json.loads(message.value())
                payload = payload.get("payload", payload)
                if payload.get("after"):
                    ids.append(payload["after"]["id"])
        return ids
    finally:
        consumer.close()


def wait_fence(bootstrap: str, topic: str, value: int, timeout: float = 120.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ids = fence_records(bootstrap, topic)
        if value in ids:
            return ids
        time.sleep(0.5)
    raise AssertionError(f"fence {value} not in {topic} after {timeout:.0f} s")


def sync_and_compare(spark, broker, pattern, workloads, sink, tmp_path: Path) -> None:
    """Every change in Kafka now applied (a query until done), then every Delta table
    compared with its source table."""
    tables = tuple(t for w in workloads for t in w.tables)
    run_query(
        spark, broker.bootstrap, pattern, tables, checkpoint=tmp_path / "checkpoint", sink=sink
    )
    for workload in workloads:
        assert_tables_equal(spark, workload, sink)


def whole_database_sync(spark, broker, pattern, workloads, tmp_path: Path) -> None:
    """Every table of every topic that matches ``pattern``, by ``cdc_spark.sync_stream``
    alone: tables created with the types and keys of the Connect schemas and the message
    keys (no DDL), the redelivered records included; then each compared with its source
    table."""
    from cdc_decode import spark as cdc_spark

    tables = {t.name: t for w in workloads for t in w.tables}
    lake = SyncSink(tmp_path / "sync-lake", tuple(tables.values()))  # its targets only

    def target(wire) -> str | None:
        name = wire.name.split(".", 1)[1] if wire.source_schema else wire.name
        table = tables.get(name)
        return None if table is None else lake.target(table)

    source = kafka_source(spark, broker.bootstrap, pattern=pattern, max_offsets=400)
    query = cdc_spark.sync_stream(source, "debezium-json", target,
                                  checkpoint=str(tmp_path / "sync-checkpoint"),
                                  trigger={"availableNow": True})  # fmt: skip
    query.awaitTermination()
    for workload in workloads:
        # sync maps Debezium's MicroTime to its wall-clock text (docs/types.md).
        assert_tables_equal(spark, workload, lake, delta={"time": _micros_of_day})


def _micros_of_day(text: str) -> int:
    return parse_time(text) // dt.timedelta(microseconds=1)


def _driver(broker, tmp_path: Path, pattern: str, sink: SyncSink, *extra: str):
    """The query as its own driver process (its own process group: a kill takes its JVM and
    Python workers too), on the same checkpoint as the in-process one, its output in
    driver.log."""
    command = [sys.executable, str(SUPPORT / "real_source.py"), "--bootstrap", broker.bootstrap]
    command += ["--pattern", pattern, "--lake", str(sink.lake)]
    command += ["--checkpoint", str(tmp_path / "checkpoint"), "--log", str(sink.log)]
    command += ["--warehouse", str(tmp_path / "warehouse")]
    with open(tmp_path / "driver.log", "ab") as log:
        return subprocess.Popen(
            [*command, *extra],
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )


def _kill_mid_stream(spark, broker, tmp_path, pattern, sink) -> None:
    """A driver taking micro-batches of at most 40 records, SIGKILLed after its first
    micro-batch's Delta commits and before that micro-batch's checkpoint commit; then the
    test's own driver runs that micro-batch again from the checkpoint (same offsets) and
    finishes the stream (the restart needs a process that is not the killed one, not a new
    JVM)."""
    job = _driver(
        broker, tmp_path, pattern, sink, "--max-offsets", "40", "--pause-first", "--pause", "600"
    )
    applied = kill_when(
        job,
        lambda: sorted(sink.log.glob("*.applied")),
        tmp_path / "driver.log",
        what="a micro-batch's Delta commit",
    )
    killed = int(applied[0].stem)
    commits = tmp_path / "checkpoint" / "commits"
    assert killed not in {int(p.name) for p in commits.iterdir() if p.name.isdigit()}
    # The micro-batch run again holds only changes the tables have (no app_id: no marker
    # skips it): all stale, as meant.
    replay = SyncSink(sink.lake, sink.tables, log=sink.log, on_stale="ignore")
    run_query(
        spark, broker.bootstrap, pattern, POSTGRES + MARIADB,
        checkpoint=tmp_path / "checkpoint", sink=replay,
    )  # fmt: skip


def _connector(kind: str, server, prefix: str, history: Path) -> dict:
    if kind == "postgres":
        return postgres_connector(
            f"{prefix}-pg",
            host="127.0.0.1",
            port=server.port,
            user="postgres",
            database="shop",
            topic_prefix=prefix,
        )
    return mariadb_connector(
        f"{prefix}-maria",
        host="127.0.0.1",
        port=server.port,
        user="cdc",
        password="cdc",
        topic_prefix=prefix,
        history_file=history,
        databases=["shop"],
    )


# Each source: its topic prefix's start, its server, its tables, its topics' database part.
SOURCES = {
    "postgres": ("pg", start_postgres, POSTGRES, "public"),
    "mariadb": ("ma", lambda: start_mariadb(row_image="FULL"), MARIADB, "shop"),
}


def _sources(spark, broker, tmp_path: Path, kill: str, kinds=("postgres", "mariadb")) -> None:
    """The ``kinds`` of database at once: one Kafka Connect with their connectors, one query
    over every table's topic (all sources' tables in one decode), so each kill is tested on
    every source with one set of Spark and Connect starts. ``kill="driver"``: phases 1 and
    2 applied by a Spark driver SIGKILLed mid-stream and restarted. ``kill="connect"``:
    phases 1 and 2 applied clean, each compared, then a phase 3 that Kafka Connect sends
    twice."""
    bootstrap = broker.bootstrap
    prefixes = {kind: f"{SOURCES[kind][0]}{os.getpid()}{kill}" for kind in kinds}
    pattern = "|".join(rf"{prefixes[k]}\.{SOURCES[k][3]}\..*" for k in kinds)
    fences = {prefixes[k]: f"{prefixes[k]}.{SOURCES[k][3]}.fence" for k in kinds}
    servers, workloads, connect = [], {}, None
    try:
        configs, tables = [], ()
        for kind in kinds:
            prefix, launch, schema, _ = SOURCES[kind]
            servers.append(launch())
            workloads[prefixes[kind]] = Workload(servers[-1], schema)
            workloads[prefixes[kind]].setup()  # the snapshot's rows
            workloads[prefixes[kind]].fence(0)
            configs.append(_connector(kind, servers[-1], prefixes[kind], tmp_path / "history.dat"))
            tables += schema
        streamed = iter(range(100, 200))

        def fence(value: int) -> list[list[int]]:
            """A fence row in every source, back when each is in Kafka."""
            for w in workloads.values():
                w.fence(value)
            return [wait_fence(bootstrap, fences[p], value) for p in workloads]

        def start(flush_ms: int):
            """Kafka Connect with both connectors, back when a change made now is in Kafka:
            the snapshots are over (a TRUNCATE or a table-rewriting ALTER during a snapshot
            empties the table in the snapshot's eyes: docs/formats/debezium-json.md)."""
            c = start_connect(
                CONNECT_JARS,
                PLUGINS,
                bootstrap,
                configs,
                directory=tmp_path / "connect",
                offset_flush_ms=flush_ms,
            )
            try:
                fence(next(streamed))
            except BaseException:
                c.stop(remove=False)
                raise
            return c

        def phase(n: int) -> None:
            for w in workloads.values():
                w.phase(n)
            fence(n)

        connect = start(1000)
        sink = SyncSink(tmp_path / "lake", tables, log=tmp_path / "log")
        everything = list(workloads.values())

        phase(1)
        if kill == "driver":
            # The Spark driver SIGKILLed mid-stream (after its first micro-batch's Delta
            # commits), then restarted from its checkpoint: the whole workload, snapshots
            # and streamed changes, in one query's run.
            phase(2)
            _kill_mid_stream(spark, broker, tmp_path, pattern, sink)
            for w in everything:
                assert_tables_equal(spark, w, sink)
            return

        # 1. A clean run: the snapshots, then streamed changes, compared twice.
        sync_and_compare(spark, broker, pattern, everything, sink, tmp_path)
        phase(2)
        sync_and_compare(spark, broker, pattern, everything, sink, tmp_path)

        # 3. Kafka Connect SIGKILLed with changes it sent but had not stored offsets for
        # (stopped cleanly first, so the offsets up to here are stored, then run with a
        # flush interval longer than the test); restarted, it sends them again. The
        # MariaDB connector reads its schema history back from its file.
        connect.stop(remove=False)
        connect = start(600_000)
        phase(3)
        connect.kill()
        connect = start(1000)
        for ids in fence(4):
            assert ids.count(3) >= 2, ids  # phase 3 was delivered twice
        sync_and_compare(spark, broker, pattern, everything, sink, tmp_path)
        # 4. The whole-database sync of the same topics, redeliveries included.
        whole_database_sync(spark, broker, pattern, everything, tmp_path)
    finally:
        for w in workloads.values():
            w.close()
        if connect is not None:
            connect.stop()
        for server in servers:
            server.stop()


@pytest.mark.long
def test_sql_in_equal_tables_out(delta_spark, kafka_broker, tmp_path):
    """Both databases' workloads equal in Delta after the Spark driver applying them is
    SIGKILLed mid-stream and restarted (`make test-real-source`; `make test` kills the
    driver of generated streams: tests/delta/test_stream_apply.py, tests/delta/test_sync.py)."""
    _sources(delta_spark, kafka_broker, tmp_path, kill="driver")


def test_connect_killed_and_restarted(delta_spark, kafka_broker, tmp_path):
    """Both databases' workloads equal in Delta after a clean run, and after Kafka Connect
    is stopped, restarted, SIGKILLed and restarted again, sending again what it had sent
    (one Connect with both connectors, one query over every table); then the same topics
    synced whole by ``sync_stream``, with no DDL, equal too."""
    _sources(delta_spark, kafka_broker, tmp_path, kill="connect")


@pytest.mark.long
@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_connect_killed_and_restarted_alone(delta_spark, kafka_broker, tmp_path, kind):
    """The same for one database at a time (`make test-real-source`)."""
    _sources(delta_spark, kafka_broker, tmp_path, kill="connect", kinds=(kind,))


def test_key_change_moves_toasted_values(delta_spark, kafka_broker, tmp_path):
    """``UPDATE docs SET id = 40 WHERE id = 3`` on a row whose ``body`` and ``blob`` are
    out of line and unchanged: PostgreSQL's connector sends a delete of 3 and a create of 40
    whose ``body`` and ``blob`` are the unavailable-value placeholder. The decoder makes the
    create an update from key 3 (the ``__debezium.oldkey`` header) with those columns
    absent; the Delta row of key 40 must still hold row 3's body and blob, moved with the
    key: ``apply_changes`` fills a moved key's absent columns from the old key's stored
    row."""
    prefix = f"mv{os.getpid()}"
    server = start_postgres()
    workload = Workload(server, POSTGRES)
    connect = None
    try:
        workload.setup()
        workload.fence(0)
        config = postgres_connector(
            f"{prefix}-pg",
            host="127.0.0.1",
            port=server.port,
            user="postgres",
            database="shop",
            topic_prefix=prefix,
        )
        connect = start_connect(
            CONNECT_JARS, PLUGINS, kafka_broker.bootstrap, [config], directory=tmp_path / "connect"
        )
        fence_topic = f"{prefix}.public.fence"
        workload.fence(1)
        wait_fence(kafka_broker.bootstrap, fence_topic, 1)  # the snapshot is over
        sink = SyncSink(tmp_path / "lake", POSTGRES)
        pattern = rf"{prefix}\.public\..*"
        # Row 3 with its body and blob, as the snapshot read them:
        sync_and_compare(delta_spark, kafka_broker, pattern, [workload], sink, tmp_path)
        workload.run("UPDATE public.docs SET title = 'moved', id = 40 WHERE id = 3")
        workload.fence(2)
        wait_fence(kafka_broker.bootstrap, fence_topic, 2)
        sync_and_compare(delta_spark, kafka_broker, pattern, [workload], sink, tmp_path)
    finally:
        workload.close()
        if connect is not None:
            connect.stop()
        server.stop()
