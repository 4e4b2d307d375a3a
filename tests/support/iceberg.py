"""Apache Iceberg for the tests under ``tests/iceberg/``: a local Spark 4.1 session with two
Iceberg catalogs, and the REST catalog server one of them talks to.

Runs on ``.venv-spark41`` (pyspark 4.1.4, ``make venv-spark41``) with the jars ``make
iceberg-jars`` puts in ``.jars-iceberg/`` (Iceberg's Spark runtime, Spark 4.1's Kafka
source) and ``.jars-iceberg-rest/`` (the REST catalog server). Fails, rather than skips,
when they are missing: ``make test-iceberg`` installs them first.

- ``lake``: a Hadoop catalog (tables are folders; no server) in a temporary folder, the
  catalog ``cdc_spark.local_session(iceberg=True, warehouse=...)`` makes.
- ``rest``: a REST catalog (what most production setups use): Iceberg's own REST catalog
  test server (``org.apache.iceberg.rest.RESTCatalogServer``, the main class of the
  apache/iceberg-rest-fixture image), backed by a JDBC catalog on SQLite, run as one
  ``java`` process on a free loopback port (``tools/iceberg-rest/LoopbackRestCatalog.java``
  binds it to 127.0.0.1) and stopped by its PID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cdc_decode._kafka_broker import _java, _stop_pid, free_port
from support import INTERPRETED, SPARK3

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / (".jars-iceberg35" if SPARK3 else ".jars-iceberg")
KAFKA_JARS = (
    [
        j
        for j in sorted((ROOT / ".jars-spark35").glob("*.jar"))
        if not j.name.startswith("spark-avro")
    ]
    if SPARK3
    else []
)
"""Spark's Kafka source where :data:`JARS` lacks it (the 4.1 line's is in .jars-iceberg);
the folder's spark-avro (for the tree race) left out, as support/delta.py leaves it."""
REST_JARS = ROOT / ".jars-iceberg-rest"
REST_MAIN = ROOT / "tools" / "iceberg-rest" / "LoopbackRestCatalog.java"
CATALOGS = ("lake", "rest")
"""The catalogs of :func:`iceberg_session` (Hadoop) and :func:`rest_catalog` (REST)."""


def iceberg_session(
    warehouse: Path,
    *,
    app: str = "cdc-decode-iceberg",
    master: str = "local[1]",
    memory: str = "2g",
    interpreted: bool = False,
) -> object:
    """A ``local[1]`` (or ``master``) SparkSession with Iceberg, its Hadoop catalog ``lake``
    in ``warehouse`` and Spark's Kafka source (``cdc_spark.local_session(iceberg=True,
    kafka=True)`` with the jars of this checkout), its Python workers on this interpreter,
    UTC, two shuffle partitions, ``memory`` for the driver (2 GB, as for Delta: one session
    runs the whole suite; after a full GC it holds 350-665 MB, and Tencent DTS's SCD2 with
    key changes, whose plan has several broadcast joins each with its own memory page, once
    failed to allocate one on a 1 GB heap); ``interpreted``: expressions evaluated without
    code generation (:data:`support.INTERPRETED`; the test suites' sessions, not the
    benchmarks')."""
    if not any(JARS.glob("iceberg-spark-runtime-*.jar")):
        raise RuntimeError(f"no Iceberg runtime in {JARS}: run `make iceberg-jars`")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from cdc_decode.spark import local_session

    return local_session(
        app,
        master=master,
        iceberg=True,
        kafka=True,
        jars=[JARS, *KAFKA_JARS],
        catalog="lake",
        warehouse=warehouse,
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="1",
        spark__driver__memory=memory,
        spark__sql__warehouse__dir=str(warehouse.parent / "spark-warehouse"),
        spark__buffer__pageSize="4m",  # as for Delta (support/delta.py)
        **(INTERPRETED if interpreted else {}),
    )


@dataclass
class RestCatalog:
    """A running REST catalog server.

    Attributes:
        uri: its address (``http://127.0.0.1:<port>``), the Spark catalog's ``uri``.
        pid: the ``java`` process.
        directory: its folder (the SQLite catalog, the warehouse, its log); removed by
            :meth:`stop`.
    """

    uri: str
    pid: int
    directory: Path
    process: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    @property
    def warehouse(self) -> Path:
        return self.directory / "warehouse"

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL) and remove its folder."""
        _stop_pid(self.pid, 15.0)
        if self.process is not None:
            self.process.returncode = self.process.poll()
        shutil.rmtree(self.directory, ignore_errors=True)

    def log_tail(self, lines: int = 30) -> str:
        path = self.directory / "server.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start_rest_catalog(jars: Path = REST_JARS, *, timeout: float = 90.0) -> RestCatalog:
    """Start Iceberg's REST catalog server on a free loopback port, with a SQLite catalog
    and a warehouse in a new temporary folder, and wait until it answers ``GET
    /v1/config``.

    Raises:
        RuntimeError: no jars, or the server did not answer in time (it is stopped then,
            and the message holds its log's last lines).
    """
    if not any(jars.glob("iceberg-open-api-*-test-fixtures.jar")):
        raise RuntimeError(f"no REST catalog server in {jars}: run `make iceberg-jars`")
    folder = Path(tempfile.mkdtemp(prefix="cdc-iceberg-rest-"))
    (folder / "warehouse").mkdir()
    port = free_port()
    env = {
        **os.environ,
        # RESTCatalogServer's backend catalog, from CATALOG_* variables (RCKUtils).
        "CATALOG_WAREHOUSE": str(folder / "warehouse"),
        "CATALOG_URI": f"jdbc:sqlite:{folder / 'catalog.db'}",
        "CATALOG_REST_PORT": str(port),
    }
    with open(folder / "server.log", "wb") as log:
        process = subprocess.Popen(
            [_java(), "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{jars}/*", str(REST_MAIN)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            env=env,
            start_new_session=True,
        )
    server = RestCatalog(f"http://127.0.0.1:{port}", process.pid, folder, process)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            tail = server.log_tail()
            server.stop()
            raise RuntimeError(f"the REST catalog exited with {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"{server.uri}/v1/config", timeout=2) as answer:
                if answer.status == 200:
                    return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            tail = server.log_tail()
            server.stop()
            raise RuntimeError(f"the REST catalog did not answer in {timeout:.0f} s:\n{tail}")
        time.sleep(0.2)


def add_rest_catalog(spark: object, server: RestCatalog, name: str = "rest") -> str:
    """Make the REST catalog ``name`` of ``spark`` the server's (catalogs are settings read
    when first used, so a running session takes them)."""
    from cdc_decode.spark.session import _iceberg_catalog

    for key, value in _iceberg_catalog(name, None, server.uri).items():
        spark.conf.set(key, value)
    return name


@pytest.fixture(scope="session")
def iceberg_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One Iceberg SparkSession for the whole run, its ``rest`` catalog on a REST catalog
    server started for the run; both stopped at the end."""
    session = iceberg_session(tmp_path_factory.mktemp("iceberg") / "lake", interpreted=True)
    server = start_rest_catalog()
    try:
        add_rest_catalog(session, server)
        yield session
    finally:
        session.stop()
        server.stop()


@pytest.fixture(params=CATALOGS)
def catalog(request: pytest.FixtureRequest, iceberg_spark: object) -> str:
    """Each test that takes ``catalog`` runs on the Hadoop catalog and on the REST one."""
    return request.param
