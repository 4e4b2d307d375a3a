"""Plan helpers the rules and the table formats share: a column by its exact name, a
frame made a leaf over its cached rows, and what a ``MERGE`` does with a source row. A
leaf beside :mod:`._sql`: it imports nothing of the package but the SQL text helpers."""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ._sql import Clause, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

Func = TypeVar("Func", bound=Callable[..., Any])

INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""Spark's settings for interpreted evaluation (``factoryMode`` is internal to Spark, read
at each expression's evaluator; both are session settings)."""
CODE_CACHE = "spark.sql.codegen.cache.maxEntries"
"""How many compiled classes Spark keeps (keyed by the generated code's text; 100 by
default; a static setting, read once per JVM)."""


def code_cache_entries(spark: SparkSession) -> int:
    """The classes ``spark``'s cache of compiled code keeps (Spark's 100 when unset or
    unreadable)."""
    try:
        return int(spark.conf.get(CODE_CACHE, "100"))
    except Exception:  # noqa: BLE001 - Spark Connect may refuse a static setting
        return 100


def col(name: str, alias: str | None = None) -> Column:
    """A column by its exact name (dots, backquotes and spaces quoted)."""
    from pyspark.sql import functions as F

    return F.col(quote(name) if alias is None else f"{alias}.{quote(name)}")


def detached(frame: DataFrame, session: SparkSession | None = None) -> DataFrame:
    """``frame`` (persisted and counted, or checkpointed) as a frame of ``session`` (by
    default its own) whose plan is one leaf over its rows.

    Each pass of :func:`fill_moves` reads the one before three times, so without this the
    plan of the ``n``-th pass holds ``3**n`` copies of the first (and of the table scan
    with its key list): a chain of a few key changes made a plan of millions of nodes
    that ran a 1 GB driver out of memory. The rows stay those of ``frame``'s cache; a lost
    partition is recomputed from the RDD lineage. The leaf keeps none of the constraints
    the plan it came from would carry into the analysis of a plan that reads it. On Spark
    Connect (no JVM handle) ``frame`` is returned as it is.
    """
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return frame
    from pyspark.sql import DataFrame

    session = session or frame.sparkSession
    rows = jdf.queryExecution().toRdd()
    leaf = session._jsparkSession.internalCreateDataFrame(rows, jdf.schema(), False)
    return DataFrame(leaf, session)


def held(frame: DataFrame) -> tuple[DataFrame, int, Callable[[], None]]:
    """``frame`` computed once and held: its rows kept by Spark's block manager (a local,
    eager checkpoint: one action, whose jobs are the plan's own and one that keeps the
    rows), the frame over them (one leaf), how many rows it holds, and the function that
    frees them.

    The rows are counted by ``DataFrame.observe`` during that action, so no second job
    counts them (``persist`` and ``count`` take two more: the count's partial and final
    aggregates). Observations upstream of ``frame`` are taken by the same action. A plan
    the optimizer folds to local data records no metrics: such a frame is counted."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from ._compat import observed

    observation = Observation(f"cdc_rows_{uuid.uuid4().hex}")
    rows, free = checkpointed(frame.observe(observation, F.count(F.lit(1)).alias("rows")))
    found = observed(observation)
    count = int(found["rows"]) if found else rows.count()
    return rows, count, free


def checkpointed(frame: DataFrame) -> tuple[DataFrame, Callable[[], None]]:
    """``frame`` computed once into Spark's block manager (a local, eager checkpoint), and
    the function that frees those rows (else they stay until the garbage collector drops
    the frame)."""
    rows = frame.localCheckpoint(eager=True)

    def free() -> None:
        jdf = getattr(rows, "_jdf", None)
        if jdf is not None:  # Spark Connect frees a checkpoint with its frame
            jdf.queryExecution().logical().rdd().unpersist(False)

    return rows, free


def estimated_bytes(frame: DataFrame) -> int | None:
    """The optimizer's estimate of ``frame``'s size (its plan's statistics: exact for rows
    held in memory or made from local data, the files' size for a scan, Spark's default,
    which is huge, where a source reports none); ``None`` on Spark Connect. No job."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return None
    return int(str(jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


KAFKA_RECORD_BYTES = 1024
"""What :func:`batch_bytes` counts a Kafka record as, where the source reports no size: a
change record of the wire formats is one to a few KiB (the demo's: 2.7 KiB of Tencent
DTS, 4.1 KiB of Debezium JSON), so a micro-batch of 4,096 records counts as 4 MiB."""

_LINEAGE_DEPTH = 32
"""How many RDDs :func:`kafka_records` follows from a micro-batch's to its source's."""


COLUMNAR_FILE_FACTOR = 6
"""What :func:`batch_bytes` multiplies the optimizer's estimate by where the frame reads
column files (Parquet, ORC, Delta), whose estimate is the files' compressed size: a typed
change event of 12 columns is 165 to 171 bytes of Parquet, so a batch counts about as
many bytes an event as a Kafka micro-batch does (:data:`KAFKA_RECORD_BYTES`)."""

_COLUMNAR_FORMATS = frozenset({"ParquetFileFormat", "DeltaParquetFileFormat", "OrcFileFormat"})


def batch_bytes(frame: DataFrame) -> int | None:
    """``frame``'s size: where it is a micro-batch of Spark's Kafka source (whose estimate
    is Spark's default for a source that reports none, larger than any batch), its records
    (:func:`kafka_records`) at :data:`KAFKA_RECORD_BYTES` each; else the optimizer's
    estimate (:func:`estimated_bytes`), times :data:`COLUMNAR_FILE_FACTOR` where every
    file it reads is a column file. ``None`` on Spark Connect. No job."""
    records = kafka_records(frame)
    if records is not None:
        return records * KAFKA_RECORD_BYTES
    size = estimated_bytes(frame)
    if size is not None and _reads_column_files(frame):
        size *= COLUMNAR_FILE_FACTOR
    return size


def _reads_column_files(frame: DataFrame) -> bool:
    """Whether every leaf of ``frame``'s optimized plan reads files of a column format
    (Spark's file relations: Parquet, ORC, Delta's Parquet). A few py4j calls, no job."""
    try:
        leaves = frame._jdf.queryExecution().optimizedPlan().collectLeaves()
        if leaves.size() == 0:
            return False
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            if leaf.getClass().getSimpleName() != "LogicalRelation":
                return False
            relation = leaf.relation()
            if relation.getClass().getSimpleName() != "HadoopFsRelation":
                return False
            if relation.fileFormat().getClass().getSimpleName() not in _COLUMNAR_FORMATS:
                return False
        return True
    except Exception:  # noqa: BLE001 - a py4j error: another Spark's internals
        return False


def kafka_records(frame: DataFrame) -> int | None:
    """How many records ``frame`` reads from Kafka, by the offset ranges of the micro-batch
    it is made from; ``None`` where it is not one (or Spark's internals differ).

    ``foreachBatch`` hands each micro-batch over as a frame whose plan is one leaf, a
    ``LogicalRDD`` over the RDD of the micro-batch's plan; that RDD reads from a
    ``DataSourceRDD`` whose partitions hold Spark's Kafka input partitions, each with its
    offset range, planned when the micro-batch began. Followed through py4j (six calls an
    RDD of the lineage: 63 for a Debezium JSON micro-batch, 93 through Tencent DTS's
    stateful decode, 10 to 54 ms), never a job. The classes are Spark's and its Kafka
    connector's own, so any surprise gives ``None``: the frame then counts as large, as it
    did without this."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return None
    try:
        leaves = jdf.queryExecution().logical().collectLeaves()
        if leaves.size() != 1:
            return None
        leaf = leaves.apply(0)
        if leaf.getClass().getSimpleName() != "LogicalRDD":
            return None
        rdd = leaf.rdd()
        for _ in range(_LINEAGE_DEPTH):
            if rdd.getClass().getSimpleName() == "DataSourceRDD":
                break
            dependencies = rdd.dependencies()
            if dependencies.size() != 1:
                return None
            rdd = dependencies.head().rdd()
        else:
            return None
        records = 0
        for partition in rdd.partitions():
            for kafka in _input_partitions(partition):
                if kafka.getClass().getSimpleName() != "KafkaBatchInputPartition":
                    return None
                records += int(kafka.offsetRange().size())
        return records
    except Exception:  # noqa: BLE001 - a py4j error: another Spark's internals
        return None


def _input_partitions(partition: Any) -> list[Any]:
    """The input partitions a ``DataSourceRDD``'s partition reads: one ``Option`` on Spark
    4, a ``Seq`` on Spark 3.5."""
    from py4j.protocol import Py4JError

    try:
        one = partition.inputPartition()
    except Py4JError:
        many = partition.inputPartitions()
        return [many.apply(i) for i in range(many.size())]
    return [one.get()] if one.isDefined() else []


def row_bytes(frame: DataFrame) -> int | None:
    """Spark's default size of a row of ``frame``'s schema (``StructType.defaultSize``: 8
    bytes a ``bigint``, 20 a string, 100 a binary; what the optimizer assumes of a row it
    has no statistics for); ``None`` on Spark Connect. No job."""
    jdf = getattr(frame, "_jdf", None)
    return None if jdf is None else int(jdf.schema().defaultSize())


def in_session(frame: DataFrame, session: SparkSession) -> DataFrame:
    """``frame``'s plan as a frame of ``session`` (a clone of its own: the same
    SparkContext and cache, so rows ``frame`` holds in memory are read from there), which
    plans and runs it with its own settings. On Spark Connect ``frame`` as it is."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:
        return frame
    import pyspark
    from pyspark.sql import DataFrame

    jvm = session.sparkContext._jvm
    sql = jvm.org.apache.spark.sql
    classes = sql.classic if int(pyspark.__version__.split(".")[0]) >= 4 else sql
    plan = jdf.queryExecution().analyzed()
    return DataFrame(classes.Dataset.ofRows(session._jsparkSession, plan), session)


def merge_outcome(
    clauses: Sequence[Clause], matched: Column, which: Column, fields: Sequence[Any]
) -> tuple[Column, list[Column], Column]:
    """What a ``MERGE`` of ``clauses`` does with a source row (``s``) joined to its table
    row (``t``; ``matched``: there is one): the index of the first clause that holds (null:
    none, ``MERGE``'s rule); given that index as ``which``, each of ``fields``' values in
    the row it writes (a column the clause does not set keeps the table's on an update and
    is null on an insert), and its action (``"u"`` update, ``"i"`` insert)."""
    from pyspark.sql import functions as F

    chosen = None
    for i, clause in enumerate(clauses):
        holds = matched if clause.kind == "update" else ~matched
        if clause.condition is not None:
            holds = holds & F.coalesce(clause.condition, F.lit(False))
        chosen = F.when(holds, F.lit(i)) if chosen is None else chosen.when(holds, F.lit(i))
    out = []
    for f in fields:
        value = None
        for i, clause in enumerate(clauses):
            given = clause.values.get(f.name)
            if given is None:
                given = col(f.name, "t") if clause.kind == "update" else F.lit(None)
            value = F.when(which == i, given) if value is None else value.when(which == i, given)
        out.append(value.cast(f.dataType).alias(f.name))
    kinds = F.create_map(
        *[F.lit(x) for i, c in enumerate(clauses) for x in (i, "u" if c.kind == "update" else "i")]
    )
    return chosen, out, kinds[which]


_CALL_SITES = threading.Lock()
_inside = [0, None]  # calls inside, the setting saved by the first


@contextmanager
def without_call_sites() -> Iterator[None]:
    """PySpark 4 records the Python call site of every column and frame method for its
    error messages (``spark.python.sql.dataFrameDebugging.enabled``): four py4j calls more
    per method, most of the py4j calls of an ``apply_changes`` call (thousands: about a
    second a call). Its plans are the library's own, whose call sites tell a user
    nothing, so they are built without it. The setting is the process's: the first call
    in saves it and the last one out restores it (calls on several threads at once, as
    ``sync``'s, leave it as they found it). Spark 3.5 has no such setting: nothing to do."""
    try:
        from pyspark.errors import utils
    except ImportError:  # pragma: no cover
        yield
        return
    if not hasattr(utils, "_enable_debugging_cache"):
        yield
        return
    with _CALL_SITES:
        if _inside[0] == 0:
            _inside[1] = utils._enable_debugging_cache
        _inside[0] += 1
        utils._enable_debugging_cache = False
    try:
        yield
    finally:
        with _CALL_SITES:
            _inside[0] -= 1
            if _inside[0] == 0:
                utils._enable_debugging_cache = _inside[1]


def built_without_call_sites(func: Func) -> Func:
    """``func`` run inside :func:`without_call_sites` (one frame more for ``warnings``'
    ``stacklevel``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with without_call_sites():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
