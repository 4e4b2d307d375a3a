"""Shared test setup: where the shared fixtures live, and the engines every test runs on."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ../shared sits beside the checkout, locally and in CI.
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"

ENGINES = ["native", "python"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each test that takes ``engine`` runs once on the Rust core and once on the fallback."""
    return request.param
