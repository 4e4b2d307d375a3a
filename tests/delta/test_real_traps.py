"""A real Debezium's traps, each seen on the real chain and decoded: PostgreSQL 15 with
Debezium 3.6.1 and MariaDB 10.11 with Debezium 2.6.2's MySQL connector, in Kafka Connect
standalone on the test broker (docs/formats/debezium-json.md, "From a real Debezium").

Here (on .venv-spark42, which has the database clients) rather than in the main run; no
Spark: the records are read back with a Kafka consumer and decoded with cdc_decode, on both
engines.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
from pathlib import Path

import pytest
from support.databases import start_mariadb, start_postgres

import cdc_decode
from cdc_decode._kafka_connect import (
    ConnectError,
    mariadb_connector,
    postgres_connector,
    start_connect,
)

ROOT = Path(__file__).resolve().parents[2]
CONNECT_JARS = ROOT / ".jars-connect"
PLUGINS = ROOT / ".debezium"
ENGINES = ("native", "python")


def read_topic(bootstrap: str, topic: str, *, until, timeout: float = 90.0) -> list:
    """Every record of ``topic`` (values and headers) once ``until(records)`` holds."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"traps-{time.monotonic()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records: list = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.3)
            if message is not None and not message.error():
                records.append((message.value(), message.headers() or []))
            elif message is None and until(records):
                return records
    finally:
        consumer.close()
    raise AssertionError(f"{topic}: {len(records)} records, not done after {timeout:.0f} s")


def decoded(records, engine="native", **options):
    """The records decoded, a record sent again (Kafka Connect delivers at least once: a
    task restarted on a loaded machine sends again what it had not stored an offset for)
    kept once: the first of the rows equal in op, sequence and images."""
    values = [v for v, _ in records]
    batch = cdc_decode.decode(
        values, "debezium-json", headers=[h for _, h in records], engine=engine, **options
    )
    rows = batch.select(["op", "sequence", "before", "after"]).to_pylist()
    seen, keep, again = set(), [], False
    for i, row in enumerate(rows):
        if row["op"] != "tombstone":  # a tombstone goes with the delete before it
            again = repr(row) in seen
            seen.add(repr(row))
        if not again:
            keep.append(i)
    return batch.take(keep)


def ops(records) -> list[str]:
    return decoded(records).column("op").to_pylist()


def has(n_changes: int):
    return lambda records: sum(v is not None for v, _ in records) >= n_changes


NUMBER = decimal.Decimal("12345678901234567890.1234567890")


@pytest.fixture(scope="module")
def postgres(kafka_broker, tmp_path_factory):
    """One PostgreSQL, tables made and filled (the snapshot), three connectors that differ
    in decimal.handling.mode and time.precision.mode, then streamed changes."""
    server = start_postgres()
    conn = server.connect()
    conn.execute(
        "CREATE TABLE t (id int PRIMARY KEY, n numeric(30,10), ts timestamp(6), body text)"
    )
    conn.execute("CREATE TABLE full_image (id int PRIMARY KEY, title text, body text)")
    conn.execute("ALTER TABLE full_image REPLICA IDENTITY FULL")
    conn.execute("INSERT INTO t VALUES (1, %s, '2024-01-02 03:04:05.123456', 'short')", (NUMBER,))
    body = "".join(chr(97 + (i * 7919) % 26) + str(i % 10) for i in range(7000))  # TOASTed
    conn.execute("INSERT INTO full_image VALUES (1, 'a', %s)", (body,))
    modes = [("precise", "adaptive"), ("string", "connect"), ("double", "adaptive")]
    configs = [
        postgres_connector(
            f"trap-{d}",
            host="127.0.0.1",
            port=server.port,
            user="postgres",
            database="shop",
            topic_prefix=f"trap{d}",
            heartbeat_ms=500,
            **{"decimal.handling.mode": d, "time.precision.mode": p},
        )
        for d, p in modes
    ]
    connect = start_connect(
        CONNECT_JARS,
        PLUGINS,
        kafka_broker.bootstrap,
        configs,
        directory=tmp_path_factory.mktemp("connect"),
    )
    try:
        # The snapshot is over when its read events are all there (nothing changes before).
        for d, _ in modes:
            read_topic(kafka_broker.bootstrap, f"trap{d}.public.full_image", until=has(1))
        conn.execute("INSERT INTO t VALUES (2, %s, '2024-05-06 07:08:09.654321', 'b')", (-NUMBER,))
        conn.execute("UPDATE full_image SET title = 'b' WHERE id = 1")  # body unchanged
        conn.execute("DELETE FROM t WHERE id = 2")
        conn.execute("DELETE FROM full_image WHERE id = 1")
        yield {"bootstrap": kafka_broker.bootstrap, "body": body}
    finally:
        conn.close()
        connect.stop()
        server.stop()


@pytest.mark.parametrize("engine", ENGINES)
def test_postgres_snapshot_then_streaming(postgres, engine):
    """The row there before the connector is a ``read``, then the streamed changes; the
    delete is followed by a Kafka tombstone; the snapshot's sequence is below every
    streamed one."""
    records = read_topic(postgres["bootstrap"], "trapprecise.public.t", until=has(3))
    batch = decoded(records, engine)
    assert batch.column("op").to_pylist() == ["read", "insert", "delete", "tombstone"]
    sequences = batch.column("sequence").to_pylist()
    assert sequences[0] < sequences[1] < sequences[2]
    assert batch.column("tx_id").to_pylist()[0] is not None  # source.txId, also in a snapshot


@pytest.mark.parametrize("engine", ENGINES)
def test_postgres_decimal_handling_modes(postgres, engine):
    """``precise``: exact, typed from the schema's scale; ``string``: the text, exact;
    ``double``: a JSON number rounded to a double."""
    typed = "id int, n decimal(30,10)"
    exact = {}
    for mode in ("precise", "string"):
        records = read_topic(postgres["bootstrap"], f"trap{mode}.public.t", until=has(3))
        after = decoded(records, engine, schema=typed).column("after").to_pylist()
        exact[mode] = [a["n"] for a in after[:2]]
    assert exact["precise"] == exact["string"] == [NUMBER, -NUMBER]
    records = read_topic(postgres["bootstrap"], "trapdouble.public.t", until=has(3))
    rounded = dict(decoded(records, engine).column("after").to_pylist()[0])["n"]
    assert float(rounded) == float(NUMBER) and decimal.Decimal(rounded) != NUMBER


@pytest.mark.parametrize("engine", ENGINES)
def test_postgres_time_precision_modes(postgres, engine):
    """``adaptive``: ``timestamp(6)`` in microseconds (``MicroTimestamp``); ``connect``: in
    milliseconds, the microseconds lost. Typed mode reads the unit from the schema."""
    typed = "id int, ts timestamp_ntz"
    want = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    got = {}
    for mode in ("precise", "string"):  # adaptive, connect
        records = read_topic(postgres["bootstrap"], f"trap{mode}.public.t", until=has(3))
        got[mode] = decoded(records, engine, schema=typed).column("after").to_pylist()[0]["ts"]
    assert got["precise"] == want
    assert got["string"] == want.replace(microsecond=123000)


@pytest.mark.parametrize("engine", ENGINES)
def test_postgres_replica_identity(postgres, engine):
    """``REPLICA IDENTITY FULL``: the update's before image has every column and the
    unchanged TOASTed value is sent (no placeholder); the delete's before has the whole row.
    ``DEFAULT`` (table ``t``): the delete's before has the key, nulls for the rest."""
    records = read_topic(postgres["bootstrap"], "trapprecise.public.full_image", until=has(3))
    rows = decoded(records, engine).select(["op", "before", "after"]).to_pylist()
    assert [r["op"] for r in rows] == ["read", "update", "delete", "tombstone"]
    assert dict(rows[1]["after"])["body"] == postgres["body"]
    assert dict(rows[1]["before"]) == {"id": "1", "title": "a", "body": postgres["body"]}
    assert dict(rows[2]["before"])["body"] == postgres["body"]
    default = read_topic(postgres["bootstrap"], "trapprecise.public.t", until=has(3))
    deleted = decoded(default, engine).select(["op", "before"]).to_pylist()[2]
    assert deleted["op"] == "delete"
    assert dict(deleted["before"]) == {"id": "2", "n": None, "ts": None, "body": None}


@pytest.mark.parametrize("engine", ENGINES)
def test_postgres_heartbeats(postgres, engine):
    records = read_topic(postgres["bootstrap"], "__debezium-heartbeat.trapprecise", until=has(2))
    batch = decoded(records, engine)
    assert set(batch.column("op").to_pylist()) == {"heartbeat"}
    assert None not in batch.column("capture_time").to_pylist()


@pytest.fixture(scope="module")
def mariadb(kafka_broker, tmp_path_factory):
    server = start_mariadb(row_image="FULL")
    conn = server.connect()
    with conn.cursor() as cursor:
        cursor.execute("CREATE TABLE u (id int PRIMARY KEY, big bigint unsigned, bits bit(10))")
        cursor.execute("INSERT INTO u VALUES (0, 0, 0)")  # read by the snapshot
    configs = [
        mariadb_connector(
            f"trap-{mode}",
            host="127.0.0.1",
            port=server.port,
            user="cdc",
            password="cdc",
            topic_prefix=f"trap{mode}",
            history_file=tmp_path_factory.mktemp("history") / "history.dat",
            databases=["shop"],
            server_id=5500 + i,
            **{"bigint.unsigned.handling.mode": mode},
        )
        for i, mode in enumerate(["long", "precise"])
    ]
    connect = start_connect(
        CONNECT_JARS,
        PLUGINS,
        kafka_broker.bootstrap,
        configs,
        directory=tmp_path_factory.mktemp("connect"),
    )
    try:
        for mode in ("long", "precise"):  # the snapshot has read row 0: inserts now stream
            read_topic(kafka_broker.bootstrap, f"trap{mode}.shop.u", until=has(1))
        with conn.cursor() as cursor:
            cursor.execute("INSERT INTO u VALUES (1, 18446744073709551615, 5)")
            cursor.execute("INSERT INTO u VALUES (2, 9223372036854775807, 512)")
        yield {
            "bootstrap": kafka_broker.bootstrap,
            "server": server,
            "connect": connect,
            "history": tmp_path_factory.mktemp("history") / "minimal.dat",
        }
    finally:
        conn.close()
        connect.stop()
        server.stop()


@pytest.mark.parametrize("engine", ENGINES)
def test_mariadb_unsigned_bigint(mariadb, engine):
    """Under the default ``long``, 18446744073709551615 arrives as -1; ``precise`` sends it
    exactly (a ``decimal(20,0)``). BIT(10) arrives little-endian."""
    wrapped = read_topic(mariadb["bootstrap"], "traplong.shop.u", until=has(3))
    batch = decoded(wrapped, engine)
    assert batch.column("op").to_pylist() == ["read", "insert", "insert"]
    after = [dict(a) for a in batch.column("after").to_pylist()[1:]]
    assert [a["big"] for a in after] == ["-1", "9223372036854775807"]
    exact = read_topic(mariadb["bootstrap"], "trapprecise.shop.u", until=has(3))
    typed = decoded(exact, engine, schema="id int, big decimal(20,0), bits binary")
    rows = typed.column("after").to_pylist()[1:]
    assert [r["big"] for r in rows] == [decimal.Decimal(2**64 - 1), decimal.Decimal(2**63 - 1)]
    assert [int.from_bytes(r["bits"], "little") for r in rows] == [5, 512]


def test_mariadb_minimal_row_images_are_refused(mariadb):
    """``binlog_row_image=MINIMAL``: the connector refuses to run (it would need the
    columns a minimal image leaves out), and says so."""
    with mariadb["server"].connect() as conn, conn.cursor() as cursor:
        cursor.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
    config = mariadb_connector(
        "trap-minimal",
        host="127.0.0.1",
        port=mariadb["server"].port,
        user="cdc",
        password="cdc",
        topic_prefix="trapminimal",
        history_file=mariadb["history"],
        server_id=5600,
    )
    mariadb["connect"].add(config)
    with pytest.raises(ConnectError, match="binlog_row_image=FULL"):
        mariadb["connect"].wait_running("trap-minimal")


def test_captured_transaction_metadata(postgres):
    """``provide.transaction.metadata``: BEGIN/END on ``<prefix>.transaction``, END with
    its event count."""
    records = read_topic(postgres["bootstrap"], "trapprecise.transaction", until=has(8))
    batch = decoded(records)
    got = batch.column("op").to_pylist()
    assert got[:2] == ["begin", "commit"] and set(got) == {"begin", "commit"}
    assert json.loads(dict(batch.column("metadata").to_pylist()[1])["event_count"]) >= 1


def test_mariadb_transaction_metadata(mariadb):
    """``provide.transaction.metadata`` on MariaDB: the connector takes MariaDB's GTID event
    as a transaction's start, so each of the two streamed inserts has a BEGIN and an END
    (its event count 1) on ``<prefix>.transaction``, and its change carries the GTID as
    its ``tx_id``."""
    records = read_topic(mariadb["bootstrap"], "traplong.transaction", until=has(4))
    batch = cdc_decode.decode([v for v, _ in records], "debezium-json")
    rows = [r for r in batch.to_pylist() if r["op"] in ("begin", "commit")]
    ends = [r for r in rows if r["op"] == "commit"]
    assert len(ends) >= 2 and {r["op"] for r in rows} == {"begin", "commit"}
    assert {json.loads(dict(r["metadata"])["event_count"]) for r in ends} == {1}
    changes = decoded(read_topic(mariadb["bootstrap"], "traplong.shop.u", until=has(3)))
    inserts = [r for r in changes.to_pylist() if r["op"] == "insert"]
    ids = [r["tx_id"] for r in inserts]
    assert len(set(ids)) == 2 and set(ids) <= {r["tx_id"] for r in ends}, (ids, ends)
