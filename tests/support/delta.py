"""A local Spark session with Delta Lake, for the tests under ``tests/delta/``.

Runs on ``.venv-spark42`` (pyspark 4.2.0 + delta-spark 4.4.0, ``make venv-spark42``) with
the jars ``make delta-jars`` puts in ``.jars-delta/``. Fails, rather than skips, when they
are missing: ``make test-delta`` installs them first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import INTERPRETED, SPARK3

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / (".jars-delta35" if SPARK3 else ".jars-delta")
SPARK_JARS = ROOT / (".jars-spark35" if SPARK3 else ".jars")
"""Spark's Kafka connector (``make jars``, ``make spark35-jars``), for the streaming tests;
its spark-avro is left out (that one is for Spark 4.3)."""


def delta_session(
    warehouse: Path,
    *,
    app: str = "cdc-decode-delta",
    master: str = "local[1]",
    memory: str = "3g",
    interpreted: bool = False,
    **config: str,
) -> object:
    """A ``local[1]`` (or ``master``) SparkSession with Delta Lake and Spark's Kafka source
    (``cdc_spark.local_session(delta=True, kafka=True)`` with the jars of this checkout),
    its Python workers on this interpreter, UTC, two shuffle partitions, ``memory`` for the
    driver (3 GB: one session runs the whole suite; the widest format's table, Tencent DTS,
    peaks at 0.98 GB of a 1 GB heap, and Tencent DTS's SCD2 history after eight other
    tests failed to build its broadcasts in 2 GB), 4 MB memory pages (Spark's default for
    this heap is 64 MB, and each of the SCD2 plan's broadcast joins takes at least one
    page while it is built, however few its rows); ``config``: more settings, as
    ``local_session`` takes them; ``interpreted``: expressions evaluated without code
    generation (:data:`support.INTERPRETED`; the test suites' sessions, not the benchmarks')."""
    if not any(JARS.glob("*.jar")):
        raise RuntimeError(f"no Delta jars in {JARS}: run `make delta-jars`")
    kafka = [j for j in sorted(SPARK_JARS.glob("*.jar")) if not j.name.startswith("spark-avro")]
    if not kafka:
        raise RuntimeError(f"no Kafka connector jars in {SPARK_JARS}: run `make jars`")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from cdc_decode.spark import local_session

    return local_session(
        app,
        master=master,
        delta=True,
        kafka=True,
        jars=[JARS, *kafka],
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="1",
        spark__driver__memory=memory,
        spark__sql__warehouse__dir=str(warehouse),
        spark__databricks__delta__snapshotPartitions="1",
        spark__sql__sources__parallelPartitionDiscovery__parallelism="1",
        spark__buffer__pageSize="4m",
        **(INTERPRETED if interpreted else {}),
        **config,
    )


@pytest.fixture(scope="session")
def delta_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One Delta-enabled SparkSession for the whole run; stopped at the end."""
    session = delta_session(tmp_path_factory.mktemp("warehouse"), interpreted=True)
    yield session
    session.stop()
