"""Compiled or interpreted: whether a call on a small table compiles its plans, by what
Spark's cache of compiled code kept of the call before.

Spark compiles the generated Java of a plan's expressions and stages (Janino), and keeps
the classes in a cache of ``spark.sql.codegen.cache.maxEntries`` (100 by default) keyed by
the code's text. An ``apply_changes`` call on a table of a given shape plans the same code
call after call: when the cache keeps it, a later call compiles nothing and runs its
compiled code (on a 20,000-row table taking 1,000 changes a batch, a call took 2.07 s
against 2.71 s interpreted: docs/apply.md, "Cost"); when it does not (a cache smaller than
the classes a job runs between two calls of the table), every call compiles about 60
classes again and runs no faster than interpreted.

So a small table (``_tables.delta.INTERPRET_BYTES``, ``apply.FOLD_INTERPRET_BYTES``) is
interpreted on the process's first call of its shape (the table's format, the SCD type
and the events' schema: the code holds no paths or values, so tables of one schema share
it); from the second call of the shape it is compiled, and a compiled call after a
compiled call that compiled more than :data:`MISSES` classes found its code evicted: the
shape is then interpreted for the next :data:`BACKOFF` calls before it is compiled again.
The classes are counted by the driver's ``CodegenMetrics`` (every query in the process,
so a call beside others may count theirs: the shape then backs off, as before this
policy). A leaf: imports nothing of the package.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

MISSES = 20
"""A compiled call that compiled more classes than this, after a compiled call of its
shape, found its code gone from the cache (a call that keeps it compiles 0 to 2)."""
BACKOFF = 8
"""Calls of a shape interpreted after its compiled code was found evicted."""
SHAPES = 4096
"""Shapes remembered; the oldest is forgotten past this."""


@dataclass
class _Shape:
    calls: int = 0
    compiled: bool = False  # how its last call ran
    backoff: int = 0


_lock = threading.Lock()
_shapes: dict[Hashable, _Shape] = {}


def compiles(shape: Hashable) -> bool:
    """Whether this call of ``shape`` (a table and what plans its call) compiles."""
    with _lock:
        state = _shapes.get(shape)
        if state is None:
            return False
        if state.backoff > 0:
            state.backoff -= 1
            return False
        return True


def ran(shape: Hashable, compiled: bool, classes: int | None) -> None:
    """Record a call of ``shape`` that ran compiled or not and made Spark compile
    ``classes`` classes (``None``: not counted)."""
    with _lock:
        state = _shapes.pop(shape, None) or _Shape()
        _shapes[shape] = state  # the newest last
        if len(_shapes) > SHAPES:
            del _shapes[next(iter(_shapes))]
        if compiled and state.compiled and (classes is None or classes > MISSES):
            state.backoff = BACKOFF
        state.calls += 1
        state.compiled = compiled


def compilations(spark: SparkSession) -> int | None:
    """Classes the driver's JVM has compiled from generated code (the misses of Spark's
    code cache), or ``None`` where that is not known (no JVM gateway)."""
    try:
        metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[attr-defined]
        return int(metrics.METRIC_COMPILATION_TIME().getCount())
    except Exception:  # noqa: BLE001 - Spark Connect, or a JVM without the metric
        return None


def forget() -> None:
    """Forget every shape (tests)."""
    with _lock:
        _shapes.clear()
