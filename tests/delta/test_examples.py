"""examples/apply_delta.py as a user outside this repository runs it: its own session from
``cdc_spark.local_session(delta=True)`` with no jars given, so Spark fetches Delta from
Maven Central (the package's Ivy settings); the tables it writes equal the source."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "apply_delta.py"

pytestmark = pytest.mark.spark


@pytest.mark.long  # Delta's jars from Maven Central: make test-long
def test_apply_delta_example_runs_with_delta_from_maven_central(tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    run = subprocess.run(
        [sys.executable, EXAMPLE, "--messages", "200", "--tables", "shop.orders",
         "--out", tmp_path],
        env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert "== all tables equal to the source" in lines
    table = f"{tmp_path}/lake/shop/orders:"
    orders = next(line for line in lines if line.strip().startswith(table))
    assert orders.endswith("equal to the source")
    history = next(line for line in lines if "orders_history: SCD type 2" in line)
    assert history.endswith("equal to the source")
    assert (tmp_path / "lake" / "shop" / "orders" / "_delta_log").is_dir()


def test_demo_syncs_a_database_from_the_broker_through_the_command_line(tmp_path):
    """``make demo`` small: a broker, a generated Debezium database on a topic (message keys
    included, as Debezium sends them), ``cdc-decode sync`` in micro-batches, every table
    equal to the source in its wire types, the lag of each progress line seconds or
    minutes (the streams end when they are made)."""
    from support.delta import JARS, SPARK_JARS
    from support.kafka import KAFKA_JARS

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    run = subprocess.run(
        [sys.executable, "-m", "cdc_decode.demo", "--formats", "debezium-json", "--tables", "3",
         "--messages", "150", "--max-offsets", "60", "--jars", str(JARS), "--jars",
         str(SPARK_JARS), "--kafka-jars", str(KAFKA_JARS), "--out", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    out = run.stdout
    assert run.returncode == 0, out[-3000:] + run.stderr[-3000:]
    progress = [line for line in out.splitlines() if line.startswith("batch ")]
    assert len(progress) == 3, out[-3000:]  # 150 records, 60 a micro-batch
    assert any(", lag " in line for line in progress)  # batches with row changes say it
    # The streams end when they are made: a lag of seconds or minutes, not years.
    lags = re.findall(r", lag [\d.,]+ (s|min|h|days)$", "\n".join(progress), re.M)
    assert lags and set(lags) <= {"s", "min"}, progress
    tables = [line for line in out.splitlines() if line.strip().startswith(str(tmp_path))]
    assert tables and all(line.endswith("equal to the source") for line in tables), out[-3000:]
    assert re.search(r" (bigint|int|date|decimal\(\d+,\d+\))[,\n]", out)  # wire types, no DDL
    assert "messages/s in process" in out
    assert "all tables equal to the source" in out
