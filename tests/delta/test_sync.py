"""``cdc_spark.sync``: a generated whole-database stream (``generate(table_count=N)``: DDL
mid-stream, columns added, widened and dropped) synced into one Delta table per source
table, in several batches, each table equal to the source (``Stream.final_values``, each
value in its mapped type; tests/support/sync_truth.py), on Delta 4.4 / Spark 4.2, local[1].
A failing table leaves the others applied; a streaming sync SIGKILLed after some tables of
a micro-batch committed resumes from its checkpoint, every table exact."""

from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.apply_truth import text_differences
from support.jobs import kill_when
from support.kafka import new_topic, produce
from support.metadata_truth import metadata_differences
from support.sync_job import run_sync

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate
from cdc_decode.generate.truth import differences
from cdc_decode.spark.sync import HELD_FOLDER

SUPPORT = Path(__file__).resolve().parents[1] / "support"
TYPED = ("tencent-dts", "datahub-blob", "debezium-json", "datastream-avro")
UNTYPED = ("tdsql-json", "datastream-json")


def _frame(spark, stream, start: int = 0, stop: int | None = None, kafka: bool = False):
    """Kafka-like rows (``key``, ``value``) of the stream's messages ``[start, stop)``;
    ``kafka``: with Kafka's ``topic``, ``partition`` and ``offset`` too (:func:`_kafka`)."""
    keys = stream.message_keys or [None] * len(stream.values)
    rows = list(zip(keys, stream.values, strict=True))
    if kafka:
        where = _kafka(stream)
        rows = [(*row, *where[i]) for i, row in enumerate(rows)]
        schema = "key binary, value binary, topic string, partition int, offset bigint"
        return spark.createDataFrame(rows[start:stop], schema)
    return spark.createDataFrame(rows[start:stop], "key binary, value binary")


def _kafka(stream) -> dict[int, tuple[str, int, int]]:
    """Each message's Kafka topic, partition and offset, as :func:`_frame` gives them (one
    partition: a Tencent DTS set's parts are one partition's)."""
    return {i: ("dts-shop", 0, 1000 + i) for i in range(len(stream.values))}


METADATA = ("op", "event_time", "capture_time", "position", "tx_id", "source_db",
            "source_schema", "source_table", "kafka_topic", "kafka_partition",
            "kafka_offset")  # fmt: skip


def _options(stream) -> dict:
    if stream.format == "tdsql-json":  # positional images, no key on the wire
        return {"columns": stream.options["columns"], "keys": stream.primary_keys}
    return {}


@pytest.mark.parametrize(
    "format",
    [
        f if f in ("tencent-dts", "tdsql-json") else pytest.param(f, marks=pytest.mark.long)
        for f in TYPED + UNTYPED
    ],
)  # make test syncs a typed and an untyped format; make test-long all six
def test_sync_in_batches_equals_the_source(delta_spark, tmp_path, format):
    """Two batches, then the second again (a replay: every table skips it), no schema
    written by hand where the wire carries types. (Seed 31 changes a column from int to
    bigint unsigned, which DataHub and Datastream Avro type as string: Delta cannot widen
    bigint to string, so that table fails, as test_a_failing_table_… shows for another.)
    Every metadata column is kept, the messages read as from Kafka: each row holds those
    of its newest change, each version of one table's history those of its own change."""
    stream = generate(format, messages=120, seed=33, table_count=3)
    target = str(tmp_path / "lake" / "{db}" / "{table}")
    half = len(stream.values) // 2
    exact = sorted(stream.final_values)[0]
    options = {"app_id": "sync-test", "metadata_columns": METADATA, "scd2": [exact],
               **_options(stream)}  # fmt: skip
    made = {"*": {"delta.appendOnly": "false", "team": "lake"}, exact: {"team": "orders"}}
    clusters = {n: list(k) for n, k in stream.primary_keys.items()}  # each by its key
    first = cdc_spark.sync(_frame(delta_spark, stream, 0, half, kafka=True), format, target,
                           batch_id=0, properties=made, cluster_by=clusters,
                           **options)  # fmt: skip
    for n, t in first.tables.items():
        detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{t.target}`").first()
        assert [c.lower() for c in detail["clusteringColumns"]] == [k.lower() for k in clusters[n]]
    props = {n: _properties(delta_spark, f"delta.`{t.target}`") for n, t in first.tables.items()}
    assert all(p["team"] == ("orders" if n == exact else "lake") for n, p in props.items())
    assert all(p["delta.appendOnly"] == "false" for p in props.values())
    second = cdc_spark.sync(_frame(delta_spark, stream, half, kafka=True), format, target,
                            batch_id=1, properties={"*": {"team": "lakehouse"}},
                            **options)  # fmt: skip
    for result in (first, second):
        assert result.messages_with_errors == 0, result.errors
        assert not result.failed, [t.error for t in result.failed]
    for t in second.tables.values():  # changed: set again; no longer given: left as it was
        props = _properties(delta_spark, f"delta.`{t.target}`")
        assert props["team"] == "lakehouse" and props["delta.appendOnly"] == "false"
    _accounted(first, stream, 0, half)
    _accounted(second, stream, half)
    assert {n for n, t in first.tables.items() if t.created} == set(first.tables)
    targets = {n: t.target for r in (first, second) for n, t in r.tables.items()}
    assert set(stream.final_values) <= set(targets)
    if format in TYPED:
        assert differences(delta_spark, stream, format, targets) == []
        assert all(not t.untyped_columns for t in first.tables.values())
    else:
        assert text_differences(delta_spark, stream, targets) == []
        assert all(t.untyped_columns for t in first.tables.values())
    history = {exact: targets[exact] + "_history"}
    messages = _frame(delta_spark, stream, kafka=True)
    assert metadata_differences(delta_spark, messages, stream, targets, METADATA,
                                history=history) == []  # fmt: skip
    again = cdc_spark.sync(_frame(delta_spark, stream, half, kafka=True), format, target,
                           batch_id=1, **options)  # fmt: skip
    assert all(t.skipped and t.skipped.startswith("replay") for t in again.tables.values())
    assert again.rows_written == 0
    _accounted(again, stream, half)
    assert all(set(t.not_written) <= {"replayed"} for t in again.tables.values())


def _properties(spark, table: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def _accounted(result, stream=None, start: int = 0, stop: int | None = None) -> None:
    """Every message and every table's every event accounted for (docs/sync.md, "Every
    change accounted for"); given the stream, each table's events are the events a plain
    decode of the messages synced gives it (``start``, ``stop``: which messages)."""
    assert result.accounted(), result
    for table in result.tables.values():
        assert table.events == table.written + table.errors + sum(table.not_written.values())
    if stream is not None:
        values = stream.values[start:stop]
        assert result.messages == len(values)
        events = cdc_decode.decode(values, stream.format).to_pylist()
        want: dict[str, int] = {}
        for event in events:
            names = (event["source_db"], event["source_schema"], event["source_table"])
            name = ".".join(p for p in names if p)
            if name in result.tables:
                want[name] = want.get(name, 0) + 1
        assert {n: t.events for n, t in result.tables.items() if t.events} == want


DEFAULT_DATABASE = ("tencent-dts", "datahub-blob", "debezium-json", "datastream-avro",
                    "tdsql-json", "datastream-json")  # fmt: skip


@pytest.mark.parametrize("format", DEFAULT_DATABASE)
def test_the_default_database_syncs_equal_to_the_source(delta_spark, tmp_path, format):
    """Every format's default generated database (its five tables, every MySQL type family:
    ``bigint unsigned`` past 2**63-1 and ``decimal``, ``datetime(6)``, ``json``, ``bit``,
    ``blob``, ``enum``, ``set``, ``time`` …) synced in two batches: every table equal to
    the simulated source, value by value, every event accounted for. DataHub declares
    ``shop.users.account_no`` (``bigint unsigned``) as ``LONG``: the table holds it as
    ``decimal(20,0)``, every value exact. Tencent DTS's (MySQL's own types) is synced with
    type mapping rules (:data:`RULES`), each table equal to the source in the rule's types:
    ``tinyint(1)`` as ``boolean``, ``bigint unsigned`` as ``bigint``, every column of one
    table as its text; rules given the second time for tables that exist change none of
    their columns."""
    stream = generate(format, messages=600, seed=7)
    target = str(tmp_path / "lake" / "{db}" / "{table}")
    half = len(stream.values) // 2
    options = _options(stream)
    if format in ("debezium-json", "datastream-json"):  # no key on the wire
        options.setdefault("keys", stream.primary_keys)
    rules = [{}, {}]
    if format == "tencent-dts":
        rules = [RULES, {**RULES, **LATE_RULES}]
    results = [
        cdc_spark.sync(
            _frame(delta_spark, stream, start, stop), format, target, **options, type_mapping=given
        )
        for (start, stop), given in zip(((0, half), (half, None)), rules, strict=True)
    ]
    for result in results:
        assert result.messages_with_errors == 0, result.errors
        assert not result.failed, [t.error for t in result.failed]
    _accounted(results[0], stream, 0, half)
    _accounted(results[1], stream, half)
    targets = {n: t.target for r in results for n, t in r.tables.items()}
    if format == "tencent-dts":
        _check_rules(delta_spark, stream, results, targets)
        return
    # The default Debezium stream carries no Connect schema: string columns, as TDSQL's.
    if not any(t.untyped_columns for r in results for t in r.tables.values()):
        assert differences(delta_spark, stream, format, targets) == []
    else:
        assert format not in ("tencent-dts", "datahub-blob", "datastream-avro")
        assert text_differences(delta_spark, stream, targets) == []
    if format == "datahub-blob":
        users = cdc_spark.current_rows(delta_spark, targets["shop.users"])
        assert users.schema["account_no"].dataType.simpleString() == "decimal(20,0)"
        assert users.where("account_no > 9223372036854775807").count() > 0


RULES = {
    "shop.order_items": ["tinyint1-to-boolean"],  # gift_wrap tinyint(1), values 0 and 1
    "shop.orders": ["unsigned-to-signed"],  # user_id bigint unsigned, values up to 10**6
    "inventory.warehouses": ["to-string"],
}
LATE_RULES = {  # given once the tables exist: their columns keep their types
    "shop.users": ["unsigned-to-signed"],  # decimal(20,0) cannot hold less: stays
    "inventory.items": ["to-string"],  # int to string is no widening: stays
}


def _check_rules(spark, stream, results, targets) -> None:
    """The default database's Tencent DTS tables synced with :data:`RULES`, then
    :data:`LATE_RULES`: each column of the rule's type, each table equal to the source
    (typed tables by their types, ``to-string``'s by the source's text)."""

    def types(name: str) -> dict[str, str]:
        frame = cdc_spark.current_rows(spark, targets[name])
        return {f.name: f.dataType.simpleString() for f in frame.schema.fields}

    assert all(results[0].tables[n].created for n in LATE_RULES)
    assert types("shop.order_items")["gift_wrap"] == "boolean"
    assert types("shop.orders")["user_id"] == "bigint"
    assert set(types("inventory.warehouses").values()) == {"string"}
    assert types("shop.users")["account_no"] == "decimal(20,0)"  # made before its rule
    assert types("shop.users")["age"] == "smallint"
    assert types("inventory.items")["stock"] == "int"
    assert not any(t.widened_columns for r in results for t in r.tables.values())
    texts = copy.copy(stream)
    texts.final_state = {n: stream.final_state[n] for n in RULES if "to-string" in RULES[n]}
    assert text_differences(spark, texts, targets) == []
    typed = copy.copy(stream)
    typed.final_values = {n: v for n, v in stream.final_values.items()
                          if n not in texts.final_state}  # fmt: skip
    assert differences(spark, typed, "tencent-dts", targets) == []


def test_a_failing_table_leaves_the_others_applied(delta_spark, tmp_path):
    """A table whose column cannot widen (the target holds it as boolean): with
    ``on_error="raise"`` the others are applied and a ``SyncError`` names it; with
    ``"continue"`` it is stopped, and later calls skip it."""
    from pyspark.sql.types import BooleanType, StructField

    format = "datahub-blob"
    stream = generate(format, messages=60, seed=32, table_count=3)
    wire = cdc_decode.table_schemas(stream.values, format)
    victim = next(t for t in wire if any(c.type == "bigint" for c in t.latest.columns
                                         if c.name not in t.latest.key))  # fmt: skip
    column = next(c.name for c in victim.latest.columns
                  if c.type == "bigint" and c.name not in victim.latest.key)  # fmt: skip
    target = str(tmp_path / "lake" / "{db}" / "{table}")
    victim_target = target.format(db=victim.source_db, table=victim.source_table)
    from cdc_decode.spark._tables import open_table

    open_table(delta_spark, victim_target).create([StructField(column, BooleanType())], {})
    df = _frame(delta_spark, stream)
    with pytest.raises(cdc_spark.SyncError, match=victim.name) as raised:
        cdc_spark.sync(df, format, target, batch_id=0, app_id="s")
    failed = raised.value.result.tables[victim.name]
    assert f"column {column} changed from boolean to bigint" in failed.error
    _accounted(raised.value.result, stream)
    assert failed.not_written == {"failed": failed.events} and failed.written == 0
    others = {n: t for n, t in raised.value.result.tables.items() if n != victim.name}
    assert others and all(t.apply is not None and t.rows_written for t in others.values())
    # The batch run again, continuing: the others skip it, the victim is stopped.
    again = cdc_spark.sync(df, format, target, batch_id=0, app_id="s", on_error="continue")
    assert again.tables[victim.name].stopped and again.tables[victim.name].error
    assert all(t.skipped.startswith("replay") for t in again.tables.values()
               if t.name != victim.name)  # fmt: skip
    # A new batch id with the same messages: every key stale (quiet), the victim skipped.
    later = cdc_spark.sync(df, format, target, batch_id=1, app_id="s", on_error="continue",
                           on_stale="ignore")  # fmt: skip
    assert later.tables[victim.name].skipped.startswith("stopped: ValueError")
    assert not later.failed
    _accounted(again, stream)
    _accounted(later, stream)
    assert set(later.tables[victim.name].not_written) == {"stopped"}
    targets = {n: t.target for n, t in later.tables.items()}
    stream.final_values.pop(victim.name)
    assert differences(delta_spark, stream, format, targets) == []


def _blob(table: str, seq: int, op: str, image: dict, names: tuple = ("id", "n")) -> bytes:
    """A DataHub BLOB message of table ``shop.<table>`` (columns ``id``, ``n``: LONG)."""
    columns = [{"name": n, "type": "LONG"} for n in names]
    side = "before" if op == "DELETE" else "after"
    return json.dumps(
        {
            "schema": {
                "dataColumn": columns,
                "primaryKey": ["id"],
                "source": {"dbType": "MySQL", "dbName": "shop", "tableName": table},
            },
            "payload": {
                "op": op,
                "sequenceId": seq,
                side: {"dataColumn": image},
                "timestamp": {"eventTime": 1_700_000_000_000 + seq},
            },
        }  # fmt: skip
    ).encode()


def test_every_way_a_change_misses_its_table_is_counted(delta_spark, tmp_path):
    """Each way an event can fail to reach its table, counted and named, never silent:
    a value that does not convert (the table fails under ``on_invalid="raise"``, naming the
    column and the value; under ``"count"`` the table is applied without it, the error
    counted), a change without a key value, a table left out by ``exclude``, a message that
    does not parse (no table's: a bad message), a replayed batch, a stopped table, a
    table that failed. Every table's events add up."""
    good = [_blob("t", 1, "INSERT", {"id": 1, "n": 5}), _blob("t", 2, "INSERT", {"id": 2, "n": 6})]
    bad = _blob("t", 3, "INSERT", {"id": 3, "n": "abc"})
    unkeyed = _blob("u", 4, "INSERT", {"id": None, "n": 1})
    keyed = _blob("u", 5, "INSERT", {"id": 7, "n": 1})
    left_out = _blob("x", 6, "INSERT", {"id": 1, "n": 1})
    values = [*good, bad, unkeyed, keyed, left_out, b"{not json"]
    df = delta_spark.createDataFrame([(v,) for v in values], "value binary")
    target = str(tmp_path / "lake" / "{db}" / "{table}")
    options = {"exclude": "shop.x", "app_id": "ways"}
    with pytest.raises(cdc_spark.SyncError) as raised:
        cdc_spark.sync(df, "datahub-blob", target, batch_id=0, **options)
    result = raised.value.result
    _accounted(result)
    t, u, x = (result.tables[f"shop.{n}"] for n in "tux")
    assert 'after.n: cannot convert "abc" to bigint' in t.error and t.errors == 1
    assert t.not_written == {"failed": 2} and t.written == 0
    assert u.written == 1 and u.not_written == {"unkeyed": 1} and u.errors == 0
    assert x.not_written == {"excluded": 1}
    assert result.messages == 7 and result.messages_with_errors == 2 and result.decoded == 5
    assert "shop.t 1" in result.summary()
    # Counted instead: t applied without its bad message.
    counted = cdc_spark.sync(df, "datahub-blob", target, batch_id=1, on_invalid="count",
                             **options)  # fmt: skip
    _accounted(counted)
    t = counted.tables["shop.t"]
    assert t.error is None and t.written == 2 and t.errors == 1 and not t.not_written
    assert "cannot convert" in t.error_sample
    assert counted.tables["shop.u"].apply.skipped is False
    assert {r.id for r in cdc_spark.current_rows(delta_spark, t.target).collect()} == {1, 2}
    # The same batch again: every table replayed.
    again = cdc_spark.sync(df, "datahub-blob", target, batch_id=1, on_invalid="count",
                           **options)  # fmt: skip
    _accounted(again)
    assert again.tables["shop.t"].not_written == {"replayed": 2}
    # Failing with on_error="continue": the table is stopped, then skipped as stopped.
    stopped = cdc_spark.sync(df, "datahub-blob", target, batch_id=2, on_error="continue",
                             **options)  # fmt: skip
    _accounted(stopped)
    assert stopped.tables["shop.t"].stopped and stopped.tables["shop.t"].not_written == {
        "failed": 2
    }
    later = cdc_spark.sync(df, "datahub-blob", target, batch_id=3, on_error="continue",
                           on_stale="ignore", **options)  # fmt: skip
    _accounted(later)
    # A stopped table is not decoded typed: its three messages are events, not written.
    assert later.tables["shop.t"].not_written == {"stopped": 3}
    assert later.tables["shop.t"].errors == 0


def test_metadata_columns_refused_before_anything_is_written(delta_spark, tmp_path):
    """``metadata_columns=``: a name that is none (the error lists them), Kafka's without
    Kafka's columns, and a ``type_mapping=`` rule that is none: a ``ValueError`` before
    anything is read. A source column named like a metadata column: its table fails,
    nothing of it written; the others get theirs. A table's metadata column no longer asked
    for: the table fails, naming it."""
    clash = _blob("clash", 1, "INSERT", {"id": 1, "_cdc_meta_op": 5}, ("id", "_cdc_meta_op"))
    fine = _blob("fine", 2, "INSERT", {"id": 1, "n": 2})
    df = delta_spark.createDataFrame([(clash,), (fine,)], "value binary")
    lake = tmp_path / "lake"
    target = str(lake / "{db}" / "{table}")
    with pytest.raises(ValueError, match=r"'commit_lsn' is not a metadata column \(they are op, "
                       r"event_time, .*kafka_offset; True for op, event_time"):  # fmt: skip
        cdc_spark.sync(df, "datahub-blob", target, metadata_columns=["op", "commit_lsn"])
    with pytest.raises(ValueError, match="kafka_offset need Kafka's offset column"):
        cdc_spark.sync(df, "datahub-blob", target, metadata_columns={"shop.*": ["kafka_offset"]})
    with pytest.raises(ValueError, match=r"'tinyint-to-bool' is not a rule \(they are "
                       r"tinyint1-to-boolean, unsigned-to-signed, to-string"):  # fmt: skip
        cdc_spark.sync(df, "datahub-blob", target, type_mapping={"shop.*": ["tinyint-to-bool"]})
    assert not lake.exists()
    with pytest.raises(cdc_spark.SyncError, match="shop.clash") as raised:
        cdc_spark.sync(df, "datahub-blob", target, metadata_columns=True)
    result = raised.value.result
    assert "column(s) _cdc_meta_op start with _cdc_meta_" in result.tables["shop.clash"].error
    assert not (lake / "shop" / "clash").exists()
    _accounted(result)
    [row] = cdc_spark.current_rows(delta_spark, result.tables["shop.fine"].target).collect()
    assert (row["n"], row["_cdc_meta_op"], row["_cdc_meta_position"]) == (2, "insert", "2")
    assert row["_cdc_meta_event_time"] == dt.datetime.fromtimestamp(1_700_000_000.002)
    with pytest.raises(cdc_spark.SyncError, match="has the metadata column '_cdc_meta_op'"):
        cdc_spark.sync(df, "datahub-blob", target, include="shop.fine")


def _markers(lake: Path) -> dict[str, int]:
    """Each table's highest replay marker version in its Delta log: table folder -> version."""
    out: dict[str, int] = {}
    for log in lake.glob("*/*/_delta_log/*.json"):
        for line in log.read_text().splitlines():
            txn = json.loads(line).get("txn")
            if txn is not None:
                name = str(log.parent.parent.relative_to(lake))
                out[name] = max(out.get(name, -1), int(txn["version"]))
    return out


def test_sync_stream_killed_mid_batch_resumes_exactly(delta_spark, kafka_broker, tmp_path):
    """A streaming sync (Kafka, micro-batches of 40 records, one table at a time) is
    SIGKILLed once some table holds micro-batch 1 and the checkpoint does not: the restarted
    query runs micro-batch 1 again, the tables that had committed it skip it (their replay
    markers), the others apply it, and every table equals the source. The Tencent DTS sets
    are split into parts of at most 512 bytes, so micro-batches end inside sets: the parts
    held across the kill are read again, none is lost or applied twice."""
    format = "tencent-dts"
    stream = generate(format, messages=150, seed=33, table_count=4, max_message_bytes=512)
    topic = new_topic(kafka_broker, partitions=1)
    produce(kafka_broker.bootstrap, topic, stream, partitions=1)
    lake, log = tmp_path / "lake", tmp_path / "log"
    command = [sys.executable, str(SUPPORT / "sync_job.py"), "--bootstrap", kafka_broker.bootstrap,
               "--topic", topic, "--format", format, "--target", str(lake / "{db}" / "{table}"),
               "--checkpoint", str(tmp_path / "checkpoint"), "--log", str(log),
               "--warehouse", str(tmp_path / "warehouse"), "--max-offsets", "40"]  # fmt: skip
    commits = tmp_path / "checkpoint" / "commits"

    def start() -> subprocess.Popen:
        with open(tmp_path / "job.log", "ab") as out:
            return subprocess.Popen(command, start_new_session=True, stdout=out,
                                    stderr=subprocess.STDOUT)  # fmt: skip

    job = start()
    kill_when(
        job,
        lambda: any(v >= 1 for v in _markers(lake).values()),
        tmp_path / "job.log",
        what="a table's commit of micro-batch 1",
    )
    assert not (commits / "1").exists()  # micro-batch 1 reached Delta, not the checkpoint
    # The restart: this test's driver, from the checkpoint (a process that is not the
    # killed one; it needs no JVM of its own).
    run_sync(delta_spark, bootstrap=kafka_broker.bootstrap, topic=topic, format=format,
             target=lake / "{db}" / "{table}", checkpoint=tmp_path / "checkpoint",
             log=log)  # fmt: skip
    runs = [json.loads(p.read_text()) for p in sorted(log.glob("000001-*.json"))]
    replayed = runs[-1]["tables"]
    assert any((t["skipped"] or "").startswith("replay") for t in replayed.values())
    every = [json.loads(p.read_text()) for p in log.glob("*.json")]
    assert [r["messages_with_errors"] for r in every] == [0] * len(every), every
    assert all(r["accounted"] for r in every), every
    assert any(r["messages_held"] for r in every)
    targets = {n: str(lake / n.replace(".", "/")) for n in stream.final_values}
    assert differences(delta_spark, stream, format, targets) == []


def test_sync_stream_holds_multi_part_sets_cut_by_a_micro_batch(delta_spark, kafka_broker,
                                                               tmp_path):  # fmt: skip
    """Tencent DTS sets split into parts of at most 512 bytes, read in micro-batches of 5
    records over two partitions, so that nearly every set is cut: each micro-batch holds
    the parts of its open sets in the checkpoint, the next one decodes them with the rest,
    no message is an error, and every table equals the source. (What it asserts needs a
    few micro-batches, each of them cutting sets, not many messages: 30 make six.)"""
    format = "tencent-dts"
    stream = generate(format, messages=30, seed=35, table_count=3, max_message_bytes=512)
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker.bootstrap, topic, stream, partitions=2)
    lake, log, checkpoint = tmp_path / "lake", tmp_path / "log", tmp_path / "checkpoint"
    run_sync(delta_spark, bootstrap=kafka_broker.bootstrap, topic=topic, format=format,
             target=lake / "{db}" / "{table}", checkpoint=checkpoint, log=log,
             max_offsets=5)  # fmt: skip
    runs = [json.loads(p.read_text()) for p in sorted(log.glob("*.json"))]
    assert len(runs) >= 5
    assert [r["messages_with_errors"] for r in runs] == [0] * len(runs), runs
    assert all(r["accounted"] for r in runs), runs
    assert sum(r["messages_held"] > 0 for r in runs) >= len(runs) // 2
    assert runs[-1]["messages_held"] == 0  # the stream ends with whole sets
    targets = {n: str(lake / n.replace(".", "/")) for n in stream.final_values}
    assert differences(delta_spark, stream, format, targets) == []
    # Only the last micro-batch's held parts could still be read again.
    held = sorted(int(p.name) for p in (checkpoint / HELD_FOLDER).iterdir())
    assert held == [] or held[0] >= len(runs) - 2, held


@pytest.mark.parametrize(
    ("old", "new", "wider"),
    [
        ("int", "bigint", "bigint"),
        ("bigint", "int", "bigint"),  # older events of a widened column
        ("tinyint", "smallint", "smallint"),
        ("float", "double", "double"),
        ("decimal(10,2)", "decimal(12,2)", "decimal(12,2)"),
        ("decimal(10,2)", "decimal(10,4)", "decimal(12,4)"),
        ("int", "decimal(12,2)", "decimal(12,2)"),
        ("bigint", "decimal(20,0)", "decimal(20,0)"),
        ("date", "timestamp_ntz", "timestamp_ntz"),
        ("string", "string", "string"),
        ("int", "string", None),
        ("string", "int", None),
        ("boolean", "bigint", None),
        ("decimal(38,0)", "decimal(38,10)", None),
        ("timestamp", "timestamp_ntz", None),
    ],
)
def test_wider_type(old, new, wider):
    from cdc_decode.spark.sync import wider_type

    assert wider_type(old, new) == wider


def test_schema_changes_across_batches(delta_spark, tmp_path):
    """A column widened (smallint to int) and one dropped between two batches: the table
    is widened in place (Delta's type widening), the dropped column keeps its values, and
    the table equals the source."""
    format = "tencent-dts"
    stream = generate(format, messages=120, seed=45, table_count=2)
    target = str(tmp_path / "lake" / "{db}" / "{table}")
    half = len(stream.values) // 2
    first = cdc_spark.sync(_frame(delta_spark, stream, 0, half), format, target)
    second = cdc_spark.sync(_frame(delta_spark, stream, half), format, target)
    assert not first.failed and not second.failed
    _accounted(first, stream, 0, half)
    _accounted(second, stream, half)
    changed = second.tables["crm.orders_001"]
    assert changed.widened_columns == {"c18_sess": ("smallint", "int")}
    assert "c16_acco" in changed.dropped_columns
    table = cdc_spark.current_rows(delta_spark, changed.target)
    assert table.schema["c18_sess"].dataType.simpleString() == "int"
    targets = {n: t.target for r in (first, second) for n, t in r.tables.items()}
    assert differences(delta_spark, stream, format, targets) == []


@pytest.mark.parametrize("fmt", ["datastream-avro", "datastream-json"])
def test_command_line_syncs_a_datastream_bucket(delta_spark, tmp_path, fmt):
    """``cdc-decode sync --datastream`` on a bucket tree (Avro: each file one message; JSON:
    files of 20 lines), ``--trigger once``, on the session at hand (as on spark-submit):
    every table equal to the source (Avro in its writer schemas' types), each row with the
    metadata columns asked for, those of its newest change."""
    import signal as signals

    from cdc_decode import cli
    from cdc_decode.generate.tree import write_files

    stream = generate(fmt, messages=60, seed=41, table_count=3)
    bucket = tmp_path / "bucket"
    values = [v for v in stream.values if v is not None]
    if fmt == "datastream-json":  # files of 20 lines
        values = [b"\n".join(values[i : i + 20]) + b"\n" for i in range(0, len(values), 20)]
    write_files(bucket, values, format=fmt, files_per_minute=20)
    lake = tmp_path / "lake"
    handlers = {s: signals.getsignal(s) for s in (signals.SIGINT, signals.SIGTERM)}
    try:
        status = cli.main(["sync", "--format", fmt, "--datastream", str(bucket),
                           "--target", str(lake / "{db}" / "{table}"), "--checkpoint",
                           str(tmp_path / "checkpoint"), "--trigger", "once",
                           "--properties", '{"*": {"team": "lake"}}', "--cluster-by",
                           json.dumps(stream.primary_keys), "--metadata-columns",
                           "op, event_time,position"])  # fmt: skip
    finally:
        for number, handler in handlers.items():  # the command's Ctrl-C handling
            signals.signal(number, handler)
    assert status == 0
    targets = {n: str(lake / n.replace(".", "/")) for n in stream.final_values}
    for name, table in targets.items():
        assert _properties(delta_spark, f"delta.`{table}`")["team"] == "lake"
        detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
        assert detail["clusteringColumns"] == list(stream.primary_keys[name])
    if fmt == "datastream-avro":
        assert differences(delta_spark, stream, fmt, targets) == []
    else:
        assert text_differences(delta_spark, stream, targets) == []
    names = ["op", "event_time", "position"]
    messages = delta_spark.createDataFrame([(v,) for v in stream.values], "value binary")
    assert metadata_differences(delta_spark, messages, stream, targets, names) == []
