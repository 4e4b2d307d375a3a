"""The Spark layer on Spark Connect (tests/support/connect_checks.py), in a pytest process of
its own: pyspark refuses a Connect session in a process that has a classic one.

This process runs the cluster test's jobs on the classic local session; the child starts a
Connect server (its own JVM), runs every public function there, and compares.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT
from support.cluster_job import run_jobs, write_inputs

pytestmark = pytest.mark.spark


def test_every_public_function_on_spark_connect(spark, tmp_path):
    inputs, classic = tmp_path / "inputs", tmp_path / "classic"
    write_inputs(inputs)
    run_jobs(spark, inputs, classic)
    env = {**os.environ, "CDC_CLASSIC_INPUTS": str(inputs), "CDC_CLASSIC_OUT": str(classic)}
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--basetemp", str(tmp_path / "connect"),
            str(ROOT / "tests" / "support" / "connect_checks.py"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-3000:]
    assert " passed" in summary and "skipped" not in summary, summary
