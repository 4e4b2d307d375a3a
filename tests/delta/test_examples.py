"""examples/apply_delta.py as a user outside this repository runs it: its own session from
``cdc_spark.local_session(delta=True)`` with no jars given, so Spark fetches Delta from
Maven Central (the package's Ivy settings); the tables it writes equal the source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "apply_delta.py"

pytestmark = pytest.mark.spark


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
