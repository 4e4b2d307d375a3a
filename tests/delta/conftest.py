"""Delta Lake tests: run on .venv-spark42 by `make test-delta`, not by the main pytest run
(pyproject.toml's addopts ignore this folder). The ``kafka_broker`` fixture comes from
tests/conftest.py (tests/support/kafka.py), which pytest loads for this folder too."""

from __future__ import annotations

from support.accounting import every_apply_accounted  # noqa: F401 (autouse)
from support.delta import delta_spark  # noqa: F401 (the fixture)
