"""Decode CDC messages inside Spark: one ``Decoder`` per partition, via ``mapInArrow``.

>>> from cdc_decode import spark as cdc_spark
>>> events = cdc_spark.decode(kafka_df, "tencent-dts")
>>> events = cdc_spark.decode(tuple_df, "datahub-tuple")   # the records' own columns
>>> accounting = cdc_spark.DecodeAccounting(spark)
>>> events = cdc_spark.decode(kafka_df, "tencent-dts", accounting=accounting)
>>> events.write.parquet("out")                  # an action
>>> accounting.value()                          # the job's totals
{'messages': 10000, 'decoded': 9990, 'events': 98000, 'errors': 10, 'dropped': 0, 'pending': 0}

The decoding runs on the executors in the Python worker that serves ``mapInArrow``; the
executors' Python (``PYSPARK_PYTHON``) must have ``cdc_decode`` and ``pyarrow`` installed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._checks import (
    check_columns,
    check_engine,
    check_format,
    check_mode,
    check_schema_or_tables,
    check_time_zone,
    check_unavailable_value,
)
from .._headers import first_header
from .._limits import Limits, as_limits
from .._schema import RECORD_FORMATS, event_schema

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = [
    "KAFKA_COLUMNS",
    "DecodeAccounting",
    "decode",
    "spark_event_schema",
]

STATS: tuple[str, ...] = ("messages", "decoded", "events", "errors", "dropped", "pending")
"""The counters of ``Decoder.stats()``, which :class:`DecodeAccounting` totals."""

KAFKA_COLUMNS: tuple[str, ...] = ("topic", "partition", "offset", "timestamp")
"""The Kafka source columns kept beside the events by default, where the input has them."""

_PLANS = ("auto", "sql", "arrow")
_SHARD_HEADER = "ShardId"
# datahub-tuple: the meta columns a DataFrame of TUPLE records must have (one of each
# tuple), checked on the driver so the mistake is not found in a failed task.
_TUPLE_REQUIRED = (
    ("_sequence_id_", "_log_file_name_offset_"),
    ("_operation_type_",),
    ("_before_image_",),
    ("_after_image_",),
)


class _LatestPerPartition:
    """The accumulator's arithmetic: a dict ``{(decode call, partition): (attempt, stats)}``
    where a partition reported again by another task attempt (a retry, a recomputation)
    replaces its earlier report instead of adding to it, and the reports of one attempt
    add up: a task that reads several partitions (after a ``coalesce``, which runs them
    one after the other under the task's own partition id) reports once for each.
    ``attempt`` is ``None`` for a key only one report can have (a topic-partition)."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value1: dict, value2: dict) -> dict:  # noqa: N802 (Spark's name)
        for key, (attempt, stats) in value2.items():
            held = value1.get(key)
            if attempt is not None and held is not None and held[0] == attempt:
                stats = {name: held[1][name] + count for name, count in stats.items()}
            value1[key] = (attempt, stats)
        return value1


class DecodeAccounting:
    """What :func:`decode` did over a whole Spark job: the ``Decoder.stats()`` of every
    partition's decoder, added up on the driver.

    Pass it to :func:`decode` (``accounting=``); each partition's decoder reports its
    counts to a Spark accumulator when the partition ends, and :meth:`value` reads the
    totals on the driver after an action. docs/events.md, "Accounting", defines the
    counters; every message has one outcome, so ``messages == decoded + errors + pending``
    holds for the totals as for each decoder.

    Retries and recomputation: Spark adds a transformation's accumulator updates again
    each time a task runs (a retried task, a speculative copy, a stage recomputed after a
    lost executor, a second action on an uncached DataFrame). Here each partition's report
    is kept by ``(decode call, partition)`` and a later task attempt's report of the same
    partition replaces the earlier one, so the totals count every partition once however
    often it ran, and say what its last run did. Failed task attempts report nothing (Spark
    drops their updates). A task that reads several of the decode's partitions (after a
    ``coalesce``: ``apply_changes`` folds a small batch in one task) reports each under its
    own partition id: those reports of one attempt add up.

    Streaming: a streaming query runs the same plan once per micro-batch, and each
    micro-batch's partitions replace the last one's. For per-micro-batch totals call
    :meth:`reset` at the start of ``foreachBatch`` and :meth:`value` after the batch is
    written; for running totals, add the values up on the driver. With :func:`decode`
    each partition's decoder ends with its micro-batch; :func:`decode_stream
    <cdc_decode.spark.decode_stream>` holds Tencent DTS sets across micro-batches, and
    its ``pending`` is then the change in parts held (docs/streaming.md).

    Spark Connect has no accumulators: on a Connect session each partition's decoder
    instead ends its output with one row of counts, which the decode call's
    ``DataFrame.observe`` metrics add up as the action runs and a filter then removes.
    The totals say what the latest action on each decoded DataFrame did (each action
    replaces its observation's metrics); a stage retried within one action can count its
    partitions twice there; streaming DataFrames cannot be observed this way (Spark
    refuses ``Observation`` on them), so ``accounting=`` on Connect is for batch reads.

    Args:
        spark: the SparkSession (its SparkContext holds the accumulator), classic or
            Spark Connect.

    Example:
        >>> accounting = cdc_spark.DecodeAccounting(spark)
        >>> events = cdc_spark.decode(kafka_df, "tencent-dts", accounting=accounting)
        >>> events.write.parquet("out")
        >>> accounting.value()["errors"]
        3
    """

    def __init__(self, spark: Any) -> None:
        self._connect = is_connect(spark)
        if self._connect:
            self._observations: list[Any] = []
        else:
            self._accumulator = spark.sparkContext.accumulator({}, _LatestPerPartition())

    def value(self) -> dict[str, int]:
        """The totals of every partition reported so far (driver only).

        Returns:
            ``{"messages", "decoded", "events", "errors", "dropped", "pending"}``, each
            summed over the partitions; ``pending`` counts the multi-part parts still held
            when a partition ended (0 unless its output was not read to the end).
        """
        totals = dict.fromkeys(STATS, 0)
        if self._connect:
            for observation in self._observations:
                metrics = observation.get
                for name in STATS:
                    totals[name] += metrics.get(name) or 0
            return totals
        for _attempt, stats in self._accumulator.value.values():
            for name in STATS:
                totals[name] += stats[name]
        return totals

    def partitions(self) -> int:
        """How many partitions have reported (driver only)."""
        if self._connect:
            return sum(o.get.get(_PARTITIONS) or 0 for o in self._observations)
        return len(self._accumulator.value)

    def reset(self) -> None:
        """Forgets every report (driver only): for per-micro-batch totals."""
        if self._connect:
            for observation in self._observations:
                _forget(observation)
            return
        self._accumulator.value = {}

    def _reporter(self) -> _Reporter | _Observed:
        """What a decode call's partitions report to: the accumulator and the call (on
        Spark Connect, an observation of that call's output)."""
        if self._connect:
            from pyspark.sql import Observation

            observation = Observation(f"cdc_decode_{uuid.uuid4().hex}")
            self._observations.append(observation)
            return _Observed(observation)

        return _Reporter(self._accumulator, uuid.uuid4().hex)


class _Reporter:
    """The picklable part of a :class:`DecodeAccounting` that one :func:`decode` call
    sends to the executors."""

    def __init__(self, accumulator: Any, call: str) -> None:
        self.accumulator = accumulator
        self.call = call

    def report(self, stats: dict[str, int]) -> None:
        """On an executor: this partition's stats, replacing an earlier run's."""
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else -1
        attempt = context.taskAttemptId() if context is not None else -1
        self.accumulator.add({(self.call, partition): (attempt, {n: stats[n] for n in STATS})})


_STATS_COLUMN = "__cdc_decode_stats"
"""On Spark Connect with ``accounting=``: the column of the one row of counts that ends
each partition's output (null in every event row)."""
_PARTITIONS = "partitions"


def is_connect(spark_or_df: Any) -> bool:
    """Whether a session or DataFrame is Spark Connect's (no SparkContext, no accumulators)."""
    return type(spark_or_df).__module__.startswith("pyspark.sql.connect.")


def _forget(observation: Any) -> None:
    """Clears what an observation has seen; the next action on its DataFrame refills it
    (the Connect client updates the result dict in place)."""
    result = getattr(observation, "_result", None)
    if isinstance(result, dict):
        result.clear()


class _Observed:
    """A decode call's accounting on Spark Connect: its output carries a stats row per
    partition, which :meth:`observe` sums with ``DataFrame.observe`` and filters out."""

    def __init__(self, observation: Any) -> None:
        self.observation = observation

    @staticmethod
    def stats_field() -> Any:
        from pyspark.sql.types import LongType, StructField, StructType

        return StructField(
            _STATS_COLUMN, StructType([StructField(n, LongType(), False) for n in STATS]), True
        )

    def observe(self, mapped: DataFrame) -> DataFrame:
        """The decoded rows, the stats rows summed into the observation and removed."""
        from pyspark.sql import functions as F

        metrics = [F.sum(f"{_STATS_COLUMN}.{n}").alias(n) for n in STATS]
        metrics.append(F.count(_STATS_COLUMN).alias(_PARTITIONS))
        observed = mapped.observe(self.observation, *metrics)
        return observed.where(F.col(_STATS_COLUMN).isNull()).drop(_STATS_COLUMN)


def _with_stats_column(batch: pa.RecordBatch, field: pa.Field) -> pa.RecordBatch:
    """An event batch with the (null) stats column after its columns."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [*batch.columns, pa.nulls(batch.num_rows, field.type)],
        schema=batch.schema.append(field),
    )


def _stats_row(schema: pa.Schema, stats: dict[str, int]) -> pa.RecordBatch:
    """The one row of counts that ends a partition's output: null in every other column
    (a filler value where the column is non-nullable, as ``op`` is)."""
    import pyarrow as pa

    columns = []
    for field in schema:
        if field.name == _STATS_COLUMN:
            columns.append(pa.array([{n: stats[n] for n in STATS}], field.type))
        elif field.nullable:
            columns.append(pa.nulls(1, field.type))
        else:
            columns.append(pa.array([_FILLERS.get(str(field.type))], field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


_FILLERS = {"string": "", "large_string": "", "binary": b"", "large_binary": b"", "bool": False}


def _arrow_schema(schema: Any) -> pa.Schema:
    """A Spark schema as Arrow, timestamps in UTC as the decoder gives them (pyspark 4 asks
    for the time zone, 3.5 has UTC built in)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema)


@dataclass(frozen=True)
class _Job:
    """The options of one :func:`decode` call that every partition's decoder shares (plain,
    picklable values: they travel to the executors)."""

    format: str
    mode: str
    engine: str
    schema: pa.Schema | None
    tables: list[tuple[str, pa.Schema]] | None
    limits: Limits
    event_columns: list[str] | None
    source_time_zone: str | None = None
    unavailable_value: str | None = None


def _mapped(df: DataFrame, out_schema: Any, reporter: Any, job: _Job, **options: Any) -> DataFrame:
    """``df.mapInArrow`` of the partition decoder; on Spark Connect with accounting, with
    the stats rows observed and removed (see :class:`DecodeAccounting`)."""
    from pyspark.sql.types import StructType

    if isinstance(reporter, _Observed):
        schema = StructType([*out_schema.fields, reporter.stats_field()])
        fn = _partition_decoder(job, **options, reporter=None, stats_schema=schema)
        return reporter.observe(df.mapInArrow(fn, schema))
    fn = _partition_decoder(job, **options, reporter=reporter)
    return df.mapInArrow(fn, out_schema)


def spark_event_schema(schema: pa.Schema | None = None):
    """The change-event schema as a Spark ``StructType`` (``op`` is non-nullable).

    Args:
        schema: an Arrow event schema (typed mode's, :func:`cdc_decode.typed_event_schema`);
            the generic one when not given.

    Returns:
        A ``pyspark.sql.types.StructType`` with the columns of :func:`cdc_decode.event_schema`
        (``timestamp[us, tz=UTC]`` is ``timestamp``, a typed ``timestamp[us]`` column
        ``timestamp_ntz``).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(
        event_schema() if schema is None else schema, prefer_timestamp_ntz=True
    )


def decode(
    df: DataFrame,
    format: str,
    *,
    value_col: str | None = None,
    keep: Sequence[str] | None = None,
    mode: str = "permissive",
    engine: str = "native",
    columns: Mapping[str, Sequence[str]] | None = None,
    schema: Any = None,
    tables: Mapping[str, Any] | None = None,
    limits: Limits | None = None,
    accounting: DecodeAccounting | None = None,
    event_columns: Sequence[str] | None = None,
    plan: str = "auto",
    source_time_zone: str | None = None,
    unavailable_value: str | None = None,
) -> DataFrame | dict[str | None, DataFrame]:
    """Decode a DataFrame of CDC messages into a DataFrame of change events.

    Each Spark partition is decoded by one :class:`cdc_decode.Decoder`, batch after batch,
    so a multi-part message split over several Arrow batches of a partition is joined.
    Multi-part sets are reassembled per ``topic/partition`` (and per the Kafka header
    ``ShardId`` when the input has a ``headers`` column). ``debezium-json`` reads the
    ``__debezium.oldkey`` header of a key change from that column too (Spark's Kafka
    source gives it with ``includeHeaders``; docs/formats/debezium-json.md). Every output
    row carries the kept input columns of the message it came from; the events of a
    completed multi-part set carry those of its last part.

    ``datahub-tuple`` is different: its input is not a value column but the records
    themselves (docs/formats/datahub-tuple.md). Every column of ``df`` that is not kept
    goes to the decoder as a record's column (the meta columns ``_sequence_id_``,
    ``_operation_type_``, ... and the data columns, whose values fill the row images);
    the kept columns are put beside the events and are not part of the images.

    Args:
        df: the input, for example Spark's Kafka source (``key``, ``value``, ``topic``,
            ``partition``, ``offset``, ``timestamp``, ``timestampType``, ``headers``), or
            for ``datahub-tuple`` a DataFrame of TUPLE records.
        format: one of :data:`cdc_decode.FORMATS`, for example ``"tencent-dts"``.
        value_col: the column holding the messages: ``binary`` or ``string``; ``"value"``
            when not given. A null value (a Kafka tombstone) gives one
            ``op = "tombstone"`` row. Not for ``datahub-tuple``.
        keep: input columns to put before the event columns. Default: whichever of
            ``topic``, ``partition``, ``offset``, ``timestamp`` the input has. For
            ``datahub-tuple``, these are also the columns held back from the records.
        mode: ``"permissive"`` (bad messages become ``op = "error"`` rows),
            ``"dropmalformed"`` (they are dropped) or ``"failfast"`` (the Spark task
            fails with :class:`cdc_decode.DecodeError`).
        engine: ``"native"`` (Rust, the default) or ``"python"`` (the pure-Python
            fallback). Both give equal results.
        columns: ``tdsql-json`` only: ``{"db.table": ["id", "name", ...]}`` names the
            positional values of each table's row images (otherwise keyed ``"0"``, ...).
        schema: typed mode (docs/typed.md): the table's columns as a Spark DDL string
            (``"id bigint, price decimal(10,2), created timestamp"``) or a pyarrow schema;
            ``before`` and ``after`` are then structs of exactly those columns, converted
            in the decoder. A value that does not convert makes its message an error row
            naming the column.
        tables: multi-table typed mode: ``{"shop.orders": ddl, "shop.users": ddl}``. The
            stream is decoded once (one ``mapInArrow`` whose output has a typed struct pair
            per table); each table's DataFrame is a cheap filter and select of it. Persist
            the result or write every table in one ``foreachBatch`` so the decode is not
            recomputed per table (docs/typed.md).
        limits: the resource limits (:class:`cdc_decode.Limits`) of every partition's
            decoder; ``None``: the defaults.
        accounting: a :class:`DecodeAccounting` that totals what every partition's
            decoder did, readable on the driver after an action.
        event_columns: the event columns to return, in this order (default: all of
            them). The others are dropped in the Python worker, before the batch goes back
            to the JVM: Spark copies every column ``mapInArrow`` returns into its rows
            whether a later ``select`` keeps it or not, so naming the columns you use
            (``["op", "source_table", "sequence", "after"]``) saves that copy. Not with
            ``tables=``, whose split needs them all.
        plan: ``datahub-tuple`` only: ``"auto"`` (the default) decodes TUPLE records as
            Spark expressions, with no Python worker, where Spark computes every value
            exactly as the decoder does (docs/formats/datahub-tuple.md, "On Spark"), and
            with the decoder in ``mapInArrow`` otherwise; ``"sql"`` insists on the
            expressions (``ValueError`` saying why they cannot); ``"arrow"`` always runs the
            decoder. The rows are equal either way.
        source_time_zone: typed mode: the source's time zone, an IANA name
            (``"Asia/Shanghai"``): wall clocks the wire sends without an offset are read in
            it for ``timestamp`` columns, instants shown in it for ``timestamp_ntz`` and
            ``date`` columns (docs/typed.md, "The source's time zone"). ``None``: UTC.
        unavailable_value: ``debezium-json`` only: the connector's
            ``unavailable.value.placeholder``, whose columns are left out of the images
            (absent); ``None``: Debezium's default, ``""``: none (docs/formats/debezium-json.md).

    Returns:
        A DataFrame with the kept columns followed by the columns of
        :func:`cdc_decode.event_schema` (see docs/events.md): one row per change event.
        With ``tables=``, a dict: one typed DataFrame per table name, and under ``None``
        the rows no table claims (other tables, control events, error rows) as generic
        events, and under ``"*"`` the one decoded DataFrame they all select from (the
        event columns, ``table``, then ``before_<i>``/``after_<i>`` per table): persist
        that one to decode once for several actions.

    Raises:
        ValueError: the value column is missing or not binary/string, a kept column is
            missing or has the name of an event column, or the format, mode or engine is
            unknown; for ``datahub-tuple``, a ``value_col`` is given or a required meta
            column is not among the columns passed on.

    Example:
        >>> from cdc_decode import spark as cdc_spark
        >>> kafka = (
        ...     spark.readStream.format("kafka")
        ...     .option("kafka.bootstrap.servers", "broker:9092")
        ...     .option("subscribe", "dts-orders")
        ...     .option("includeHeaders", "true")
        ...     .load()
        ... )
        >>> events = cdc_spark.decode(kafka, "tencent-dts")
        >>> events.select("offset", "op", "source_table", "after").writeStream.format(
        ...     "console"
        ... ).start()
    """
    from pyspark.sql.types import StructType

    check_format(format)
    check_mode(mode)
    check_engine(engine)

    if columns is not None:
        # Checked here, on the driver, and passed to the executors as plain lists.
        columns = check_columns(format, columns)
    typed = _Typed(schema, tables)
    event_columns = typed.checked_event_columns(event_columns)
    check_time_zone(source_time_zone, typed.arrow_schema is not None)
    limits = as_limits(limits)
    unavailable_value = check_unavailable_value(format, unavailable_value)
    if accounting is not None and not isinstance(accounting, DecodeAccounting):
        raise TypeError(
            f"accounting must be a cdc_spark.DecodeAccounting, not {type(accounting).__name__}"
        )
    reporter = None if accounting is None else accounting._reporter()
    fields = {f.name: f for f in df.schema.fields}
    if plan not in _PLANS:
        raise ValueError(f"unknown plan {plan!r}: expected one of {', '.join(_PLANS)}")
    if plan != "auto" and format not in RECORD_FORMATS:
        raise ValueError(f"plan={plan!r} is for datahub-tuple; {format} always runs the decoder")
    job = _Job(
        format,
        mode,
        engine,
        typed.schema,
        typed.tables,
        limits,
        event_columns,
        source_time_zone,
        unavailable_value,
    )
    if format in RECORD_FORMATS:
        combined, kept = _decode_records(
            df, job, typed, fields, value_col, keep, reporter=reporter, plan=plan
        )
        return typed.split(combined, kept)
    if value_col is None:
        value_col = "value"
    if value_col not in fields:
        raise ValueError(
            f"value column {value_col!r} is not in the DataFrame (columns: {', '.join(df.columns)})"
        )
    value_type = fields[value_col].dataType
    if value_type.typeName() not in ("binary", "string"):
        raise ValueError(
            f"value column {value_col!r} must be binary or string, not {value_type.simpleString()}"
        )

    keep = _checked_keep(df, fields, keep)
    events = _selected(spark_event_schema(typed.arrow_schema), event_columns)
    has_topic = "topic" in fields and "partition" in fields
    has_headers = "headers" in fields and _is_kafka_headers(fields["headers"].dataType)
    # Only what the workers need crosses to Python: the value, the kept and the key columns.
    needed = [value_col, *keep]
    # failfast names the Kafka record of the first bad message: its offset crosses too.
    located = ("offset",) if mode == "failfast" and "offset" in fields else ()
    for extra in (
        (("topic", "partition") if has_topic else ())
        + (("headers",) if has_headers else ())
        + located
    ):
        if extra not in needed:
            needed.append(extra)

    out_schema = StructType([fields[c] for c in keep] + list(events.fields))
    mapped = _mapped(
        df.select(*needed),
        out_schema,
        reporter,
        job,
        value_col=value_col,
        keep=keep,
        has_topic=has_topic,
        has_headers=has_headers,
        columns=columns,
    )
    return typed.split(mapped, keep)


def _checked_keep(df: DataFrame, fields: dict, keep: Sequence[str] | None) -> list[str]:
    """The kept columns: the Kafka ones the input has by default; checked."""
    keep = [c for c in KAFKA_COLUMNS if c in fields] if keep is None else list(keep)
    if len(set(keep)) != len(keep):
        raise ValueError(f"keep names a column twice: {keep}")
    clashes = [c for c in keep if c in event_schema().names]
    if clashes:
        raise ValueError(
            f"kept column(s) {', '.join(map(repr, clashes))} have the name of an event column; "
            "rename them first (for example withColumnRenamed)"
        )
    missing = [c for c in keep if c not in fields]
    if missing:
        raise ValueError(
            f"kept column(s) {', '.join(map(repr, missing))} not in the DataFrame "
            f"(columns: {', '.join(df.columns)})"
        )
    return keep


def _decode_records(
    df: DataFrame,
    job: _Job,
    typed: _Typed,
    fields: dict,
    value_col: str | None,
    keep: Sequence[str] | None,
    *,
    reporter: _Reporter | None,
    plan: str = "auto",
) -> DataFrame:
    """``datahub-tuple``: the columns not kept are the records; decoded as Spark
    expressions where ``plan`` allows and they are exact, else by the decoder."""
    from pyspark.sql.types import StructType

    format, mode, engine = job.format, job.mode, job.engine

    if value_col is not None:
        raise ValueError(
            f"{format} decodes the records' own columns, not a value column: leave value_col "
            "out, and name the columns to hold back from the records with keep="
        )
    keep = _checked_keep(df, fields, keep)
    records = [c for c in df.columns if c not in keep]
    for names in _TUPLE_REQUIRED:
        if not any(name in records for name in names):
            raise ValueError(
                f"{format}: no {' (or '.join(names)}{')' * (len(names) - 1)} column among "
                f"the records' columns ({', '.join(records)})"
            )
    all_events = spark_event_schema(typed.arrow_schema)
    events = _selected(all_events, job.event_columns)
    if plan != "arrow":
        from .. import _tuple_sql

        why = _sql_refused(engine, typed, reporter, job.source_time_zone)
        if why is None:
            images = None if typed.schema is None else all_events["before"].dataType
            try:
                return _tuple_sql.plan(df, records, keep, mode, images, list(events.fields)), keep
            except _tuple_sql.NotExact as exc:
                why = str(exc)
        if plan == "sql":
            raise ValueError(f"{format}: plan='sql' cannot be exact here: {why}")
    out_schema = StructType([fields[c] for c in keep] + list(events.fields))
    mapped = _mapped(
        df,
        out_schema,
        reporter,
        job,
        value_col=None,
        keep=keep,
        has_topic=False,
        has_headers=False,
        records=records,
    )
    return mapped, keep


def _sql_refused(
    engine: str, typed: _Typed, reporter: _Reporter | None, zone: str | None = None
) -> str | None:
    """Why the options need the decoder itself (``None``: they do not)."""
    if engine != "native":
        return f"engine={engine!r} asks for the decoder"
    if zone is not None:
        return "source_time_zone= converts in the decoder"
    if typed.tables is not None:
        return "tables= splits the decoder's output"
    if reporter is not None:
        return "accounting= counts the decoder's work"
    return None


def _selected(events: Any, names: list[str] | None) -> Any:
    """The Spark event schema, only ``names`` (in that order) when given."""
    from pyspark.sql.types import StructType

    if names is None:
        return events
    by_name = {f.name: f for f in events.fields}
    return StructType([by_name[n] for n in names])


class _Typed:
    """The ``schema=``/``tables=`` options, checked on the driver."""

    def __init__(self, schema: Any, tables: Mapping[str, Any] | None) -> None:
        from .._typed import as_schema, as_tables, multi_event_schema, typed_event_schema

        check_schema_or_tables(schema, tables)
        self.schema = None if schema is None else as_schema(schema)
        self.tables = None if tables is None else as_tables(tables)
        if self.schema is not None:
            self.arrow_schema = typed_event_schema(self.schema)
        elif self.tables is not None:
            self.arrow_schema = multi_event_schema(self.tables)
        else:
            self.arrow_schema = None

    def checked_event_columns(self, names: Sequence[str] | None) -> list[str] | None:
        """``event_columns=``, checked on the driver: event column names, each once."""
        if names is None:
            return None
        if isinstance(names, str | bytes):
            raise TypeError('event_columns must be a list of names such as ["op", "after"]')
        names = list(names)
        if self.tables is not None:
            raise ValueError(
                "event_columns does not combine with tables= (its split needs every column)"
            )
        known = (event_schema() if self.arrow_schema is None else self.arrow_schema).names
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(
                f"event_columns: {', '.join(map(repr, unknown))} not an event column "
                f"(they are {', '.join(known)})"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"event_columns names a column twice: {names}")
        if not names:
            raise ValueError("event_columns is empty: name at least one event column")
        return names

    def split(self, combined: DataFrame, keep: Sequence[str]) -> Any:
        """The decoded DataFrame, or with ``tables=`` one DataFrame per table (and under
        ``None`` the rest, under ``"*"`` the combined one) selected from it."""
        if self.tables is None:
            return combined
        from pyspark.sql import functions as F

        from .._typed import AFTER_ABSENT

        base = [f.name for f in event_schema()]
        out: dict[str | None, DataFrame] = {"*": combined}
        for i, (name, _) in enumerate(self.tables):
            images = {"before": f"before_{i}", "after": f"after_{i}"}
            columns = [*keep, *(F.col(images[c]).alias(c) if c in images else c for c in base)]
            out[name] = combined.where(F.col("table") == name).select(*columns, AFTER_ABSENT)
        out[None] = combined.where(F.col("table").isNull()).select(*keep, *base)
        return out


def _is_kafka_headers(data_type: Any) -> bool:
    from pyspark.sql.types import ArrayType, StructType

    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    names = data_type.elementType.fieldNames()
    return "key" in names and "value" in names


def _partition_decoder(
    job: _Job,
    *,
    value_col: str | None,
    keep: list[str],
    has_topic: bool,
    has_headers: bool,
    records: list[str] | None = None,
    columns: dict[str, list[str]] | None = None,
    reporter: _Reporter | None = None,
    stats_schema: Any = None,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function ``mapInArrow`` runs on the executors, closed over plain values only
    (and the accumulator of ``reporter``, which reports the decoder's stats when the
    partition ends, or when Spark stops reading it early).

    The decoder gets the ``value_col`` column of each batch or, for a format of records
    (``records`` given), the batch's ``records`` columns. With ``stats_schema`` (the output
    schema plus the stats column, Spark Connect's accounting) every batch gets a null stats
    column and the partition ends with one row of the decoder's stats.
    """

    def decode_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import cdc_decode

        decoder = cdc_decode.Decoder(
            job.format,
            mode=job.mode,
            engine=job.engine,
            columns=columns,
            schema=job.schema,
            tables=None if job.tables is None else dict(job.tables),
            limits=job.limits,
            source_time_zone=job.source_time_zone,
            unavailable_value=job.unavailable_value,
        )
        decoded = _decode_batches(
            decoder, batches, keep, value_col, records, has_topic, has_headers, job.event_columns
        )
        if stats_schema is not None:
            # The stats row has the schema of the batches before it (one Arrow stream).
            arrow_schema = _arrow_schema(stats_schema)
            field = arrow_schema.field(_STATS_COLUMN)
            for batch in decoded:
                batch = _with_stats_column(batch, field)
                arrow_schema = batch.schema
                yield batch
            yield _stats_row(arrow_schema, decoder.stats())
            return
        try:
            yield from decoded
        finally:
            if reporter is not None:
                reporter.report(decoder.stats())

    return decode_partition


def _decode_batches(
    decoder: Any,
    batches: Iterator[pa.RecordBatch],
    keep: list[str],
    value_col: str | None,
    records: list[str] | None,
    has_topic: bool,
    has_headers: bool,
    event_columns: list[str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """One partition's batches through its decoder, the kept columns beside the events
    (only ``event_columns`` of them, when given)."""
    import pyarrow as pa

    carry = _Carry(keep)
    start = 0  # ordinal of the current batch's first row
    for batch in batches:
        try:
            if records is not None:
                events, ordinals = decoder.decode_indexed(batch.select(records))
            else:
                keys = _reassembly_keys(batch, has_topic, has_headers)
                headers = _old_key_headers(decoder.format, batch, has_headers)
                events, ordinals = decoder.decode_indexed(
                    batch.column(value_col), keys=keys, headers=headers
                )
        except Exception as exc:
            _raise_located(exc, batch, start)
            raise
        kept = batch.select(keep)
        if events.num_rows:
            yield _join(carry.take(ordinals, kept, start), events, event_columns)
        carry.update(kept, start, ordinals, decoder.stats()["pending"])
        start += batch.num_rows
    events, ordinals = decoder.finish_indexed()
    if events.num_rows:
        empty = pa.RecordBatch.from_pylist([], schema=carry.schema) if carry.schema else None
        yield _join(carry.take(ordinals, empty, start), events, event_columns)


_LOCATION = ("topic", "partition", "offset")


def _raise_located(exc: Exception, batch: pa.RecordBatch, start: int) -> None:
    """A failfast ``DecodeError("message 17: ...")`` raised again naming the Kafka record
    (``topic t, partition 2, offset 4711: message 17: ...``) where the batch has the Kafka
    columns and the message is one of its rows; otherwise nothing (the caller re-raises)."""
    import re

    from .._errors import DecodeError

    if not isinstance(exc, DecodeError):
        return
    found = re.match(r"message (\d+):", str(exc))
    names = [c for c in _LOCATION if c in batch.schema.names]
    if found is None or not names:
        return
    row = int(found.group(1)) - start
    if not 0 <= row < batch.num_rows:
        return
    where = ", ".join(f"{c} {batch.column(c)[row].as_py()}" for c in names)
    raise DecodeError(f"{where}: {exc}") from exc


def _join(
    kept: pa.RecordBatch, events: pa.RecordBatch, event_columns: list[str] | None
) -> pa.RecordBatch:
    """The kept columns, then the event columns (only ``event_columns``, when given)."""
    import pyarrow as pa

    if event_columns is not None:
        events = events.select(event_columns)

    return pa.RecordBatch.from_arrays(
        [*kept.columns, *events.columns],
        schema=pa.schema([*kept.schema, *events.schema]),
    )


class _Carry:
    """The kept columns of input rows from earlier batches that may still give output.

    A row gives output later only while it is a part of an open multi-part set: then the
    decoder reports ``pending > 0``. So this holds nothing (and costs one ``stats()`` call
    per batch) for streams without multi-part messages. While sets are open it holds the
    rows not yet emitted, and drops them all as soon as no set is open.
    """

    def __init__(self, keep: list[str]) -> None:
        self.keep = keep
        self.rows: pa.Table | None = None  # kept columns + "__ordinal", ordinals ascending
        self.schema: pa.Schema | None = None

    def take(self, ordinals: pa.Array, kept: pa.RecordBatch | None, start: int) -> pa.RecordBatch:
        """The kept columns for each output row, in the order of ``ordinals``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if kept is not None:
            self.schema = kept.schema
        if self.rows is None or self.rows.num_rows == 0:
            if kept is None:
                raise RuntimeError("cdc_decode.spark: output rows for unknown input rows")
            # The common case: every output row belongs to this batch.
            index = pc.subtract(ordinals, pa.scalar(start, pa.int64()))
            return kept.take(index)
        old = self.rows
        index = pc.index_in(ordinals, value_set=old.column("__ordinal"))
        if kept is not None and kept.num_rows:
            current = pc.add(
                pc.subtract(ordinals, pa.scalar(start, pa.int64())),
                pa.scalar(old.num_rows, pa.int64()),
            )
            index = pc.if_else(pc.greater_equal(ordinals, start), current, index)
            source = pa.concat_tables(
                [old.drop_columns(["__ordinal"]), pa.Table.from_batches([kept])]
            )
        else:
            source = old.drop_columns(["__ordinal"])
        if index.null_count:
            raise RuntimeError(
                "cdc_decode.spark: the decoder returned rows for input rows it no longer holds"
            )
        taken = source.take(index).combine_chunks()
        return (
            taken.to_batches()[0]
            if taken.num_rows
            else pa.RecordBatch.from_pylist([], schema=taken.schema)
        )

    def update(self, kept: pa.RecordBatch, start: int, emitted: pa.Array, pending: int) -> None:
        """After a batch: keep the rows not yet emitted, while any multi-part set is open."""
        import pyarrow as pa
        import pyarrow.compute as pc

        self.schema = kept.schema
        if pending == 0:
            self.rows = None
            return
        ordinals = pa.array(range(start, start + kept.num_rows), pa.int64())
        current = pa.Table.from_batches([kept]).append_column("__ordinal", ordinals)
        rows = current if self.rows is None else pa.concat_tables([self.rows, current])
        if len(emitted):
            rows = rows.filter(pc.invert(pc.is_in(rows.column("__ordinal"), value_set=emitted)))
        self.rows = rows


def _reassembly_keys(batch: pa.RecordBatch, has_topic: bool, has_headers: bool) -> pa.Array | None:
    """One key per row: ``topic/partition``, plus ``/ShardId`` where the header is present."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    if has_topic:
        parts += [
            batch.column("topic").cast(pa.string()),
            batch.column("partition").cast(pa.string()),
        ]
    if has_headers:
        parts.append(_shard_ids(batch.column("headers")))
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "/", null_handling="skip")


def _shard_ids(headers: pa.Array) -> pa.Array:
    """The first ``ShardId`` header value of each row as text, null where there is none."""
    import pyarrow as pa

    values = first_header(headers, _SHARD_HEADER)
    try:
        return values.cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: still a usable, stable key
        return pa.array(
            [
                None if v is None else v.decode("utf-8", "backslashreplace")
                for v in values.to_pylist()
            ],
            pa.string(),
        )


def _old_key_headers(format: str, batch: pa.RecordBatch, has_headers: bool) -> Any:
    """The Kafka headers for the decoder: ``debezium-json`` reads its key changes'
    ``__debezium.oldkey`` from them; the other formats none (``ShardId`` is a key)."""
    if format != "debezium-json" or not has_headers:
        return None
    return batch.column("headers")
