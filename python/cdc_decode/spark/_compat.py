"""What differs between the Spark and Delta lines the table step runs on (Spark 3.5 with
Delta 3.3, Spark 4.x with Delta 4.x; docs/deploy.md, "What runs where"): one small
function per difference, so that every other module keeps one code path. A leaf: it
imports nothing of the package."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


def to_arrow(frame: DataFrame) -> Any:
    """``frame.toArrow()`` (pyspark 4): the rows as one ``pyarrow.Table``; on 3.5
    :func:`collect_arrow`."""
    from pyspark.sql import DataFrame

    if hasattr(DataFrame, "toArrow"):
        return frame.toArrow()
    return collect_arrow(frame)


def collect_arrow(frame: DataFrame) -> Any:
    """The rows as one ``pyarrow.Table`` from pyspark 3.5's Arrow batches
    (``_collect_as_arrow``, which ``toPandas`` uses)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = frame._collect_as_arrow()
    if batches:
        return pa.Table.from_batches(batches)
    return to_arrow_schema(frame.schema).empty_table()


def merge_counts(result: DataFrame | None) -> dict | None:
    """The counts row of ``DeltaMergeBuilder.execute()`` (``num_affected_rows`` …), or
    ``None``: Delta 3.x's ``execute()`` returns nothing (its SQL ``MERGE`` returns the row
    on both lines)."""
    if result is None:
        return None
    row = result.first()
    return None if row is None else row.asDict()


def observed(observation: Any) -> dict[str, Any] | None:
    """An ``Observation``'s metrics as Python values (``None``: none were recorded, as for
    a plan the optimizer folded away, where 3.5 gives an empty map and 4.x raises).

    pyspark 4's ``Observation.get`` converts the metrics row through Spark's Python row
    serializer; 3.5's hands back py4j objects for arrays and structs, so there the same
    conversion is made here (``PythonSQLUtils.toPyRow``, in Spark since 3.4)."""
    import pyspark
    from pyspark import SparkContext
    from pyspark.serializers import CPickleSerializer
    from pyspark.sql import Row

    try:
        if int(pyspark.__version__.split(".")[0]) >= 4:
            values = observation.get
        else:
            jvm = SparkContext._active_spark_context._jvm  # type: ignore[union-attr]
            utils = getattr(jvm, "org.apache.spark.sql.api.python.PythonSQLUtils")
            row: Row = CPickleSerializer().loads(utils.toPyRow(observation._jo.getRow()))
            values = row.asDict(recursive=False)
    except Exception:  # noqa: BLE001 - no metrics recorded (4.x raises)
        return None
    return values or None


def conf_keys(session: Any) -> list[str]:
    """The names of the settings set in ``session`` (``RuntimeConfig.getAll``, pyspark
    4.0+; on 3.5 the rows of SQL's ``SET``, which lists the same)."""
    conf = session.conf
    if hasattr(type(conf), "getAll"):
        return list(dict(conf.getAll))
    return [str(row[0]) for row in session.sql("SET").collect()]


def jvm_sessions(session: Any) -> Any:
    """The JVM's ``SparkSession`` class of ``session`` (its active-session methods): pyspark
    4 names it by a getter (the classic one); pyspark 3.5, which has none, imports it into
    the gateway's view."""
    classic = getattr(type(session), "_get_j_spark_session_class", None)
    jvm = session._jvm
    return jvm.SparkSession if classic is None else classic(jvm)
