"""Kafka -> decode_stream -> foreachBatch(apply_changes) -> Iceberg, against a real broker
(tests/support/kafka.py) on Iceberg 1.12 / Spark 4.1, local[1].

The driver is SIGKILLed between a micro-batch's Iceberg commit and its checkpoint commit,
so Spark runs that micro-batch again on restart: the replay marker in the snapshot summary
skips it, and the table equals the generator's final state. The DTS stream is split into
1 KiB parts read 24 records a micro-batch, so multi-part sets straddle micro-batches.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.jobs import kill_when
from support.kafka import new_topic, produce
from support.stream_apply import ApplySink

from cdc_decode import spark as cdc_spark
from cdc_decode.generate import generate

pytestmark = pytest.mark.spark

TABLE = "shop.users"
SUPPORT = Path(__file__).resolve().parents[1] / "support"


def _job(broker, topic, tmp_path: Path, sink: ApplySink, warehouse: str, *extra: str):
    """The query as its own driver process in a new process group (a kill takes its JVM
    and Python workers too), on the test session's Hadoop catalog, output in job.log."""
    command = [sys.executable, str(SUPPORT / "stream_apply.py"), "--bootstrap", broker.bootstrap]
    command += ["--topic", topic, "--checkpoint", str(tmp_path / "checkpoint")]
    command += ["--target", sink.target, "--log", str(sink.log), "--max-offsets", "24"]
    command += ["--keys", ",".join(sink.keys), "--schema", sink.schema, "--iceberg"]
    command += ["--warehouse", warehouse, "--app-id", sink.app_id, *extra]
    with open(tmp_path / "job.log", "ab") as log:
        return subprocess.Popen(
            command,
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )


def test_sigkill_after_the_iceberg_commit_and_restart(iceberg_spark, kafka_broker, tmp_path):
    """Micro-batch 1 commits its Iceberg snapshot (the batch id in its summary), then the
    driver dies before Spark records the micro-batch in the checkpoint. The restarted
    query runs micro-batch 1 again: the marker skips it, nothing is written twice, and
    the table equals the source."""
    spark = iceberg_spark
    stream = generate("tencent-dts", messages=60, seed=13, max_message_bytes=1024, tables=[TABLE])
    keys = stream.primary_keys[TABLE]
    columns: dict[str, None] = dict.fromkeys(keys)
    for row in stream.final_state.get(TABLE, {}).values():
        columns.update(dict.fromkeys(row))
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream, partitions=3)
    target = f"lake.k{os.getpid()}.users"
    sink = ApplySink(
        target,
        tmp_path / "log",
        keys=keys,
        schema=", ".join(f"`{c}` string" for c in columns),
        app_id=f"sync-{topic}",
    )
    warehouse = spark.conf.get("spark.sql.catalog.lake.warehouse")
    job = _job(kafka_broker, topic, tmp_path, sink, warehouse, "--pause-at", "1", "--pause", "600")
    applied = sink.log / "000001.applied"
    kill_when(job, applied.exists, tmp_path / "job.log", what="micro-batch 1")
    assert sink.batches() == [0]  # micro-batch 1 reached Iceberg, not the checkpoint
    commits = tmp_path / "checkpoint" / "commits"
    assert sorted(p.name for p in commits.iterdir() if p.name.isdigit()) == ["0"]
    snapshots = spark.sql(f"SELECT summary FROM {target}.snapshots").collect()
    marks = [s["summary"].get(f"cdc_decode.txn.{sink.app_id}") for s in snapshots]
    assert "1" in marks  # micro-batch 1's commit, marked

    again = _job(kafka_broker, topic, tmp_path, sink, warehouse)
    assert again.wait(600) == 0, (tmp_path / "job.log").read_text()[-3000:]
    counts = sink.counts()
    assert len(counts) >= 3  # 60 records at 24 a micro-batch
    assert counts[1]["skipped"]  # the replay of micro-batch 1: already in the table
    assert all(not c["skipped"] for i, c in enumerate(counts) if i != 1)
    assert all(c["errors"] == 0 for c in counts)
    assert sum(c["messages"] for c in counts) == stream.messages
    assert sum(c["pending"] for c in counts) == 0  # every set completed
    snapshots = spark.sql(f"SELECT summary FROM {target}.snapshots").collect()
    marks = [s["summary"].get(f"cdc_decode.txn.{sink.app_id}") for s in snapshots]
    assert marks.count("1") == 1  # micro-batch 1 committed once

    want = {
        tuple(row[k] for k in keys): {c: row.get(c) for c in columns}
        for row in stream.final_state.get(TABLE, {}).values()
    }
    rows = cdc_spark.current_rows(spark, target).collect()
    got = {tuple(r[k] for k in keys): r.asDict() for r in rows}
    assert len(rows) == len(got)  # one live row per key
    assert got == want
