"""Apache Iceberg tests: run on .venv-spark41 by `make test-iceberg`, not by the main pytest
run (pyproject.toml's addopts ignore this folder). The ``kafka_broker`` fixture comes from
tests/conftest.py (tests/support/kafka.py), which pytest loads for this folder too."""

from __future__ import annotations

from support.accounting import every_apply_accounted  # noqa: F401 (autouse)
from support.iceberg import catalog, iceberg_spark  # noqa: F401 (the fixtures)


def pytest_configure(config) -> None:
    # pyspark 4.1's DataFrame.collect leaves its socket to the JVM open (as pyspark 3.5's
    # does; make test-spark35 ignores the same warning): not an error here.
    config.addinivalue_line("filterwarnings", "ignore::ResourceWarning")
