"""A real multi-process Spark cluster: a standalone master and two workers, each its own
JVM started from pyspark's jars, whose executors run a packed venv holding only our wheel
and pyarrow (``spark.archives``, ``./environment/bin/python``). ``decode`` (multi-part sets
over four Kafka partitions), ``tables=``, ``read_datastream`` and ``DecodeAccounting`` give
there exactly what they give in local mode.

The wheel is ``$CDC_DECODE_WHEEL`` (``make test`` passes the manylinux2014 x86_64 one from
``make wheel-x86_64``), else one ``maturin build --release`` makes now.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import ROOT
from support.cluster import StandaloneCluster, packed_env
from support.cluster_job import run_jobs, write_inputs

pytestmark = pytest.mark.spark

JOB = Path(__file__).parent / "support" / "cluster_job.py"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    given = os.environ.get("CDC_DECODE_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheel")
    maturin = Path(sys.executable).parent / "maturin"
    subprocess.run(
        [str(maturin), "build", "--release", "--quiet", "--out", str(out)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "PYO3_PYTHON": sys.executable},
    )
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def executor_env(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """The venv of the wheel and pyarrow (this venv's version), and its tar."""
    return packed_env(
        wheel, tmp_path_factory.mktemp("env"), requirements=[f"pyarrow=={pa.__version__}"]
    )


def read(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def test_the_executor_env_is_lean(executor_env):
    """The shipped venv holds the wheel and pyarrow only: the native engine decodes, the
    python engine says which extra to install."""
    venv, _ = executor_env
    python = str(venv / "bin" / "python")
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {p["name"] for p in json.loads(listed.stdout)} - {"pip", "setuptools"}
    assert names == {"cdc-decode", "pyarrow"}
    code = (
        "import cdc_decode\n"
        "print(cdc_decode.decode([b'{}'], 'debezium-json').column('op').to_pylist())\n"
        "cdc_decode.Decoder('tencent-dts', engine='python')\n"
    )
    result = subprocess.run([python, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "['error']"
    assert result.returncode == 1
    assert "pip install 'cdc-decode[python-engine]'" in result.stderr.splitlines()[-1]


def test_a_standalone_cluster_decodes_as_local_mode(spark, executor_env, tmp_path):
    _, env_tar = executor_env
    inputs = tmp_path / "inputs"
    write_inputs(inputs)
    local = tmp_path / "local"
    run_jobs(spark, inputs, local)

    cluster_out = tmp_path / "cluster"
    with StandaloneCluster(workers=2, work=tmp_path / "cluster-work") as cluster:
        env = {
            **os.environ,
            "PYSPARK_PYTHON": "./environment/bin/python",
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        result = subprocess.run(
            [sys.executable, str(JOB), cluster.url, str(env_tar), str(inputs), str(cluster_out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert result.returncode == 0, result.stderr[-5000:] + cluster.logs()
        assert cluster.state()["completedapps"][0]["name"] == "cdc-decode-cluster-test"

    # The tasks ran in two executor processes, on the shipped venv's Python and wheel.
    where = json.loads((cluster_out / "executors.json").read_text())
    assert len({w["pid"] for w in where}) == 2
    for w in where:
        assert w["python"].endswith("/environment/bin/python")
        assert w["cdc_decode"].startswith(w["prefix"])
        assert Path(w["prefix"]).name == "environment"
        assert "pip install 'cdc-decode[python-engine]'" in w["python_engine"]

    names = sorted(p.name for p in local.glob("*.arrow"))
    assert "decode.arrow" in names and "read_datastream.arrow" in names
    assert len([n for n in names if n.startswith("table-")]) >= 3
    assert names == sorted(p.name for p in cluster_out.glob("*.arrow"))
    for name in names:
        want, got = read(local / name), read(cluster_out / name)
        assert want.num_rows > 0, name
        assert got.schema == want.schema, name
        assert got.to_pylist() == want.to_pylist(), name

    totals = json.loads((local / "totals.json").read_text())
    assert json.loads((cluster_out / "totals.json").read_text()) == totals
    assert totals["partitions"] == 4
    decode = totals["decode"]
    assert decode["messages"] == 4 * 300 == decode["decoded"] + decode["errors"]
    assert decode["pending"] == 0
