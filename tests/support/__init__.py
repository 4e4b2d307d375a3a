"""Test helpers that start real parts (a Kafka broker, ...): one module each, a fixture
that starts the process and stops it by its PID."""

from collections.abc import Iterator
from contextlib import contextmanager

import pyspark

from cdc_decode.spark._tables.delta import INTERPRETED as _SPARK_INTERPRETED

SPARK3 = pyspark.__version__.startswith("3.")
"""The pyspark 3.5 run (``make test-spark35-tables``): the table-format sessions take the
Scala 2.12 jars of ``make spark35-jars`` (support/delta.py, support/iceberg.py)."""

INTERPRETED = {key.replace(".", "__"): value for key, value in _SPARK_INTERPRETED.items()}
"""Session settings for the table-step suites' own sessions (the library's settings for a
small Delta table's MERGE, as ``local_session`` keywords): Spark evaluates expressions
interpreted instead of compiling generated Java for each plan. Their tables hold a few
hundred rows, and a MERGE of ours compiles about 90 generated classes (about 1 s of a 4 to
8 s call); interpreted, a one-row ``apply_changes`` call into a 1,000-row Delta table took
4.4 to 4.9 s against 6.2 to 8.3 s (the same script, one run after the other). Spark holds
the two evaluations equal by its own tests; the real-database jobs
(``support/real_source.py``) and the examples keep code generation, as users run them (their
MERGEs into small tables are interpreted by the library itself), and
``tests/delta/test_apply.py`` runs a stream with code generation forced everywhere, the
MERGE's included, so the generated path of the rules runs in ``make test`` too."""


@contextmanager
def spark_conf(spark, **settings: str) -> Iterator[None]:
    """``settings`` set in ``spark``'s session for the ``with`` block, then each put back as
    it was (unset where it was not set)."""
    old = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
