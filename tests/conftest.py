"""Shared test setup: where the shared fixtures live, and the engines every test runs on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from support.kafka import kafka_broker  # noqa: F401 (a fixture: the real Kafka broker)

from cdc_decode import ENGINES  # the engines every test runs on

ROOT = Path(__file__).resolve().parent.parent
# ../shared sits beside the checkout, locally and in CI.
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"


# Examples per property test: 300 by default (what `make test` runs); `make properties`
# (tools/properties.py, docs/hardening.md) sets CDC_HYPOTHESIS_EXAMPLES for the long runs,
# and CDC_HYPOTHESIS_NO_DATABASE=1 so that the seed alone decides what a run tries (no
# replay of examples saved by earlier runs, nothing written to .hypothesis/).
EXAMPLES = int(os.environ.get("CDC_HYPOTHESIS_EXAMPLES", "300"))
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    **({"database": None} if os.environ.get("CDC_HYPOTHESIS_NO_DATABASE") else {}),
)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each test that takes ``engine`` runs once on the Rust core and once on the fallback."""
    return request.param


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole run (starting the JVM takes seconds).

    Fails, rather than skips, when Java or pyspark is missing: the Spark layer is part of
    what ``make test`` proves. Workers run this interpreter, so they see the same packages.
    """
    import os
    import sys

    import pyspark

    from cdc_decode.spark import local_session

    # Spark's Kafka source and spark-avro (make jars) are Spark 4 builds (Scala 2.13): the
    # streaming tests read a real broker with them; pyspark 3.5 cannot load them at all.
    jars = sorted((ROOT / ".jars").glob("*.jar")) if int(pyspark.__version__[0]) >= 4 else []
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = local_session(
        "cdc-decode-tests",
        master="local[1]",
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="1",
        spark__driver__memory="1g",
        spark__sql__warehouse__dir=str(ROOT / "spark-warehouse"),
        spark__jars=",".join(str(p) for p in jars),
    )
    yield session
    session.stop()
