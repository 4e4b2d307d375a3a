"""Every ``apply_changes`` of the table suites checked for its accounting.

The fixture :func:`every_apply_accounted` (autouse in ``tests/delta`` and
``tests/iceberg``) wraps ``cdc_spark.apply_changes`` (and the one ``sync`` calls per table):
each call's result must account for every event it was given, ``events == applied +
unkeyed + unsequenced + errors + sum(other)`` (docs/apply.md, "Values that do not
convert"). A change that fell through every count (a key expression that is null, say)
fails the test that made it, whatever the test asserts itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def every_apply_accounted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list]:
    """Wraps ``apply_changes`` for the test; yields the results of its calls."""
    import importlib

    from cdc_decode import spark as cdc_spark

    # The modules by name: the package exports functions of the same names.
    apply_module = importlib.import_module("cdc_decode.spark.apply")
    sync_module = importlib.import_module("cdc_decode.spark.sync")

    real = apply_module.apply_changes
    results: list = []

    def checked(*args, **kwargs):
        result = real(*args, **kwargs)
        assert result.accounted(), f"an apply_changes call lost events: {result}"
        results.append(result)
        return result

    for module in (cdc_spark, apply_module, sync_module):
        monkeypatch.setattr(module, "apply_changes", checked)
    yield results
