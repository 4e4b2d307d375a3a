"""``cdc_spark.sync``: a generated whole-database stream (``generate(table_count=N)``: DDL
mid-stream, columns added, widened and dropped) synced into one Delta table per source
table, in several batches, each table equal to the source (``Stream.final_values``, each
value in its mapped type; tests/support/sync_truth.py), on Delta 4.4 / Spark 4.2, local[1].
A failing table leaves the others applied; a streaming sync SIGKILLed after some tables of
a micro-batch committed resumes from its checkpoint, every table exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import kill_when
from support.kafka import new_topic, produce

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate
from cdc_decode.generate.truth import differences
from cdc_decode.spark.sync import HELD_FOLDER

SUPPORT = Path(__file__).resolve().parents[1] / "support"
TYPED = ("tencent-dts", "datahub-blob", "debezium-json", "datastream-avro")
UNTYPED = ("tdsql-json", "datastream-json")


def _frame(spark, stream, start: int = 0, stop: int | None = None):
    """Kafka-like rows (``key``, ``value``) of the stream's messages ``[start, stop)``."""
    keys = stream.message_keys or [None] * len(stream.values)
    rows = list(zip(keys, stream.values, strict=True))[start:stop]
    return spark.createDataFrame(rows, "key binary, value binary")


def _options(stream) -> dict:
    if stream.format == "tdsql-json":  # positional images, no key on the wire
        return {"columns": stream.options["columns"], "keys": stream.primary_keys}
    return {}


def _text_differences(spark, stream, targets: dict[str, str]) -> list[str]:
    """Formats without wire types: string columns, equal to the generator's text."""
    out = []
    for name, rows in stream.final_state.items():
        key = stream.primary_keys[name]
        got = {
            tuple(r[k] for k in key): r.asDict()
            for r in cdc_spark.current_rows(spark, targets[name]).collect()
        }
        if got.keys() != rows.keys():
            out.append(f"{name}: keys differ ({len(got)} rows, the source has {len(rows)})")
            continue
        for at, row in rows.items():
            for column, value in row.items():
                if got[at].get(column) != value:
                    out.append(f"{name} {at}: {column} is {got[at].get(column)!r}, want {value!r}")
    return out[:10]


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
    bigint to string, so that table fails, as test_a_failing_table_… shows for another.)"""
    stream = generate(format, messages=120, seed=33, table_count=3)
    target = str(tmp_path / "lake" / "{db}" / "{table}")
    half = len(stream.values) // 2
    options = {"app_id": "sync-test", **_options(stream)}
    first = cdc_spark.sync(_frame(delta_spark, stream, 0, half), format, target, batch_id=0,
                           **options)  # fmt: skip
    second = cdc_spark.sync(_frame(delta_spark, stream, half), format, target, batch_id=1,
                            **options)  # fmt: skip
    for result in (first, second):
        assert result.messages_with_errors == 0, result.errors
        assert not result.failed, [t.error for t in result.failed]
    assert {n for n, t in first.tables.items() if t.created} == set(first.tables)
    targets = {n: t.target for r in (first, second) for n, t in r.tables.items()}
    assert set(stream.final_values) <= set(targets)
    if format in TYPED:
        assert differences(delta_spark, stream, format, targets) == []
        assert all(not t.untyped_columns for t in first.tables.values())
    else:
        assert _text_differences(delta_spark, stream, targets) == []
        assert all(t.untyped_columns for t in first.tables.values())
    again = cdc_spark.sync(_frame(delta_spark, stream, half), format, target, batch_id=1,
                           **options)  # fmt: skip
    assert all(t.skipped and t.skipped.startswith("replay") for t in again.tables.values())
    assert again.rows_written == 0


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
    targets = {n: t.target for n, t in later.tables.items()}
    stream.final_values.pop(victim.name)
    assert differences(delta_spark, stream, format, targets) == []


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
    again = start()
    assert again.wait(900) == 0, (tmp_path / "job.log").read_text()[-3000:]
    runs = [json.loads(p.read_text()) for p in sorted(log.glob("000001-*.json"))]
    replayed = runs[-1]["tables"]
    assert any((t["skipped"] or "").startswith("replay") for t in replayed.values())
    every = [json.loads(p.read_text()) for p in log.glob("*.json")]
    assert [r["messages_with_errors"] for r in every] == [0] * len(every), every
    assert any(r["messages_held"] for r in every)
    targets = {n: str(lake / n.replace(".", "/")) for n in stream.final_values}
    assert differences(delta_spark, stream, format, targets) == []


def test_sync_stream_holds_multi_part_sets_cut_by_a_micro_batch(delta_spark, kafka_broker,
                                                               tmp_path):  # fmt: skip
    """Tencent DTS sets split into parts of at most 512 bytes, read in micro-batches of 5
    records over two partitions, so that nearly every set is cut: each micro-batch holds
    the parts of its open sets in the checkpoint, the next one decodes them with the rest,
    no message is an error, and every table equals the source."""
    format = "tencent-dts"
    stream = generate(format, messages=60, seed=35, table_count=3, max_message_bytes=512)
    topic = new_topic(kafka_broker, partitions=2)
    produce(kafka_broker.bootstrap, topic, stream, partitions=2)
    lake, log, checkpoint = tmp_path / "lake", tmp_path / "log", tmp_path / "checkpoint"
    command = [sys.executable, str(SUPPORT / "sync_job.py"), "--bootstrap", kafka_broker.bootstrap,
               "--topic", topic, "--format", format, "--target", str(lake / "{db}" / "{table}"),
               "--checkpoint", str(checkpoint), "--log", str(log),
               "--warehouse", str(tmp_path / "warehouse"), "--max-offsets", "5"]  # fmt: skip
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1500)
    assert done.returncode == 0, done.stdout.decode(errors="replace")[-3000:]
    runs = [json.loads(p.read_text()) for p in sorted(log.glob("*.json"))]
    assert len(runs) >= 10
    assert [r["messages_with_errors"] for r in runs] == [0] * len(runs), runs
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
    every table equal to the source (Avro in its writer schemas' types)."""
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
                           str(tmp_path / "checkpoint"), "--trigger", "once"])  # fmt: skip
    finally:
        for number, handler in handlers.items():  # the command's Ctrl-C handling
            signals.signal(number, handler)
    assert status == 0
    targets = {n: str(lake / n.replace(".", "/")) for n in stream.final_values}
    if fmt == "datastream-avro":
        assert differences(delta_spark, stream, fmt, targets) == []
    else:
        assert _text_differences(delta_spark, stream, targets) == []
