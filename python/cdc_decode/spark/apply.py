"""Apply one table's change events to a Delta Lake table that mirrors the source.

>>> from cdc_decode import spark as cdc_spark
>>> events = cdc_spark.decode(kafka_df, "tencent-dts", schema="id bigint, name string")
>>> result = cdc_spark.apply_changes(events, "/lake/shop/users")        # SCD type 1
>>> cdc_spark.current_rows(spark, "/lake/shop/users").show()            # the source table
>>> cdc_spark.apply_changes(events, "shop.users_history", scd_type=2)   # every version

Every batch is reduced to one change per key (the last one by ``sequence``, with partial
images folded in) and written with one Delta ``MERGE``. The table keeps, beside the
source's columns, the sequence of the change it holds (``_cdc_sequence``), so a change
that is not newer is ignored: duplicates, reordered deliveries and a replayed micro-batch
leave the table as it was. A delete keeps the row as a tombstone (``_cdc_deleted``), so a
late, older insert cannot bring it back. docs/apply.md gives every rule.

Needs ``delta-spark`` and the Delta jars on the session (Delta 4.4.0 runs on Spark 4.2).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._schema import OPS
from .._typed import AFTER_ABSENT

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ApplyResult", "apply_changes", "current_rows"]

UPSERT_OPS: tuple[str, ...] = ("insert", "read", "update", "update_after")
"""Ops that write a row: its ``after`` image (a ``read`` is a snapshot row)."""

REMOVE_OPS: tuple[str, ...] = ("delete", "update_before")
"""Ops that remove a row: its ``before`` image names the key."""

ROW_OPS = UPSERT_OPS + REMOVE_OPS

SEQUENCE = "_cdc_sequence"
EVENT_TIME = "_cdc_event_time"
DELETED = "_cdc_deleted"
START_SEQUENCE = "_cdc_start_sequence"
END_SEQUENCE = "_cdc_end_sequence"
START_TIME = "_cdc_start_time"
END_TIME = "_cdc_end_time"
CURRENT = "_cdc_current"

SCD1_COLUMNS = (SEQUENCE, EVENT_TIME, DELETED)
"""The bookkeeping columns of a type 1 table, after the source's columns."""

SCD2_COLUMNS = (START_SEQUENCE, END_SEQUENCE, START_TIME, END_TIME, CURRENT, DELETED)
"""The bookkeeping columns of a type 2 table, after the source's columns."""

_KIND = "_kind"  # "u" upsert, "d" delete
_LAST_SEQ = "_last_seq"
_LAST_KIND = "_last_kind"
_LAST_TIME = "_last_time"
_DEL_SEQ = "_del_seq"


@dataclass
class ApplyResult:
    """What one :func:`apply_changes` call did.

    Attributes:
        events: rows in the input.
        changes: row changes among them (``insert``, ``read``, ``update``,
            ``update_before``, ``update_after``, ``delete``).
        keys: distinct keys those changes touched (after folding them per key).
        unkeyed: row changes whose images hold no value for a key column; not applied.
        errors: error rows (``op = "error"``); never applied.
        other: the other events by ``op`` (``begin``, ``commit``, ``heartbeat``, ``ddl``,
            ``truncate``, ``tombstone`` …); never applied.
        ddl: the ``ddl`` statements seen, in sequence order; reported, not applied.
        added_columns: columns this call added to the table (schema evolution).
        created: whether this call created the table.
        version: the Delta table version after the call (``None`` when nothing was
            written).
        metrics: the ``MERGE``'s Delta operation metrics (``numTargetRowsInserted``,
            ``numTargetRowsUpdated``, …), as Delta reports them.
        skipped: ``True`` when Delta already held this ``(app_id, batch_id)`` and skipped
            the write.
    """

    events: int = 0
    changes: int = 0
    keys: int = 0
    unkeyed: int = 0
    errors: int = 0
    other: dict[str, int] = field(default_factory=dict)
    ddl: list[str] = field(default_factory=list)
    added_columns: list[str] = field(default_factory=list)
    created: bool = False
    version: int | None = None
    metrics: dict[str, str] = field(default_factory=dict)
    skipped: bool = False


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _is_path(target: str) -> bool:
    return "/" in target or "\\" in target or ":" in target


class _Target:
    """A Delta table named by a path or a catalog name."""

    def __init__(self, spark: SparkSession, target: str) -> None:
        self.spark = spark
        self.target = target
        self.is_path = _is_path(target)
        self.sql_name = f"delta.{_quote(target)}" if self.is_path else target

    def exists(self) -> bool:
        from delta.tables import DeltaTable

        if self.is_path:
            return DeltaTable.isDeltaTable(self.spark, self.target)
        return self.spark.catalog.tableExists(self.target)

    def table(self) -> Any:
        from delta.tables import DeltaTable

        if self.is_path:
            return DeltaTable.forPath(self.spark, self.target)
        return DeltaTable.forName(self.spark, self.target)

    def schema(self) -> Any:
        return self.table().toDF().schema

    def create(self, columns: list[Any]) -> None:
        from delta.tables import DeltaTable

        builder = DeltaTable.createIfNotExists(self.spark)
        builder = builder.location(self.target) if self.is_path else builder.tableName(self.target)
        for f in columns:
            builder = builder.addColumn(f.name, f.dataType, nullable=True)
        builder.execute()


def apply_changes(
    events: DataFrame,
    target: str,
    *,
    keys: Sequence[str] | None = None,
    sequence_by: str = "sequence",
    scd_type: int = 1,
    schema: Any = None,
    ignore_null_updates: bool = False,
    tombstone_retention: dt.timedelta | None = None,
    app_id: str | None = None,
    batch_id: int | None = None,
) -> ApplyResult:
    """Apply one table's change events to a Delta table, creating it when absent.

    Works as a batch call and inside ``foreachBatch`` (pass ``batch_id`` and an
    ``app_id`` to also use Delta's idempotent-write markers). Every rule is in
    docs/apply.md; in short:

    - ``insert``, ``read``, ``update`` and ``update_after`` upsert the ``after`` image;
      ``delete`` and ``update_before`` remove the row of the ``before`` image's key; an
      ``update`` whose key changed removes the old key and upserts the new one.
    - Per key, only changes newer (by ``sequence_by``) than the one the table holds are
      applied; deleted rows stay as tombstones (``_cdc_deleted``) so a late, older change
      cannot bring them back. :func:`current_rows` reads the live rows.
    - A column absent from an image keeps the stored value; a null overwrites it. Typed
      events say which columns their ``after`` image lacked in ``after_absent``
      (docs/typed.md); generic images (``map<string, string>``) by their keys. Typed
      frames without an ``after_absent`` column are taken as whole images
      (``ignore_null_updates=True`` makes a null keep the stored value instead).
    - A column of the events that the table lacks is added to it; a column of the table
      that the events lack, or of another type, is a ``ValueError`` naming both.
    - Error rows and non-row events (``begin``, ``commit``, ``ddl`` …) are counted in the
      result, never written; ``ddl`` statements are reported, not applied.

    Args:
        events: one table's change events: ``decode(df, fmt, schema=...)``, one frame of
            ``decode(df, fmt, tables=...)``, or generic events (``after`` a
            ``map<string, string>``) with ``schema=``. It needs ``op``, ``before``,
            ``after`` and the ``sequence_by`` column; ``event_time``, ``primary_key``,
            ``ddl`` are used when present.
        target: a Delta table path (``/lake/users``, ``s3://…``; anything with ``/`` or
            ``:``) or a catalog table name (``shop.users``).
        keys: the key columns; by default the events' ``primary_key``.
        sequence_by: the column ordering the changes (``sequence``: byte-comparable).
        scd_type: ``1`` (the table equals the source) or ``2`` (one row per version, with
            start and end sequence and event time, and a current flag).
        schema: for generic events only: the table's columns (Spark DDL or a pyarrow
            schema); map values are cast to their types with Spark's ``cast``. Without
            it, the existing table's columns are used.
        ignore_null_updates: typed events: a null in an ``after`` image keeps the stored
            value (for sources that send absent columns as nulls). A null can then never
            be written over a value.
        tombstone_retention: type 1: forget tombstones whose delete's event time is this
            much older than the newest event time of the batch. ``None`` (the default)
            keeps them for ever. After that, a late change older than the delete could
            bring the row back.
        app_id: with ``batch_id``: Delta's ``txnAppId``; a batch id Delta already
            committed for this app id is skipped (``ApplyResult.skipped``).
        batch_id: the ``foreachBatch`` batch id (Delta's ``txnVersion``).

    Returns:
        An :class:`ApplyResult` with the counts.

    Raises:
        ValueError: no key columns (none given, none in the events), a key column that is
            not a column of the images, a table column missing from the events or of
            another type, an unknown ``scd_type``, or generic events without a table schema.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType, StructType

    if scd_type not in (1, 2):
        raise ValueError(f"scd_type must be 1 or 2, not {scd_type!r}")
    if (app_id is None) != (batch_id is None):
        raise ValueError("give app_id and batch_id together (Delta's txnAppId/txnVersion)")
    fields = {f.name: f for f in events.schema.fields}
    for needed in ("op", "before", "after", sequence_by):
        if needed not in fields:
            raise ValueError(
                f"the events have no {needed!r} column (columns: {', '.join(events.columns)})"
            )
    spark = events.sparkSession
    table = _Target(spark, target)
    image_type = fields["after"].dataType
    generic = isinstance(image_type, MapType)
    if generic:
        columns = _generic_columns(schema, table, target)
    elif isinstance(image_type, StructType):
        if schema is not None:
            raise ValueError("schema= is for generic events; typed events carry their columns")
        columns = list(image_type.fields)
    else:
        raise ValueError(f"'after' must be a struct or a map, not {image_type.simpleString()}")

    optional = [
        c for c in ("event_time", "primary_key", "ddl", "error", AFTER_ABSENT) if c in fields
    ]
    selected = events.select(
        "op",
        F.col(sequence_by).alias("_seq"),
        (F.col("event_time") if "event_time" in fields else F.lit(None).cast("timestamp")).alias(
            "_time"
        ),
        *[c for c in optional if c != "event_time"],
        "before",
        "after",
    )
    names = [f.name for f in columns]
    keys = _resolve_keys(selected, keys, "primary_key" in fields)
    missing = [k for k in keys if k not in names]
    if missing:
        raise ValueError(
            f"key column(s) {', '.join(map(repr, missing))} are not columns of the images "
            f"({', '.join(names)})"
        )
    image = _Images(columns, keys, generic, absent=not generic and AFTER_ABSENT in fields)
    bookkeeping = SCD1_COLUMNS if scd_type == 1 else SCD2_COLUMNS
    clash = [n for n in names if n in bookkeeping]
    if clash:
        raise ValueError(f"column(s) {', '.join(clash)} clash with the table's own columns")
    if not keys:
        # No row change names a key (none given): count, and write nothing.
        counts = _Counts(selected, image, "ddl" in fields)
        result = counts.result()
        if result.changes:
            raise ValueError(
                "the events name no primary key (primary_key is null): give keys=[...]"
            )
        result.created, result.added_columns = _evolve(table, columns, bookkeeping, scd_type)
        return result
    # The counts are observed as the batch is read once, by the reduction's action.
    counts = _Counts(selected, image, "ddl" in fields, observe=True)
    created, added = _evolve(table, columns, bookkeeping, scd_type)
    entries = _entries(counts.frame, image, ignore_null_updates)
    if scd_type == 1:
        whole = not generic and not ignore_null_updates and not _partial(selected, image)
        result, written = _merge_scd1(
            table, entries, columns, keys, app_id, batch_id, counts, whole
        )
        if written and tombstone_retention is not None:
            newest = counts.newest()
            if newest is not None:
                _expire(table, newest - tombstone_retention)
    else:
        result = _merge_scd2(table, entries, columns, keys, app_id, batch_id, counts)
    result.created, result.added_columns = created, added
    return result


def current_rows(spark: SparkSession, target: str, *, bookkeeping: bool = False) -> DataFrame:
    """The live rows of a table :func:`apply_changes` writes: what the source holds.

    Args:
        spark: the SparkSession.
        target: the table's path or name, as given to :func:`apply_changes`.
        bookkeeping: keep the ``_cdc_*`` columns.

    Returns:
        Type 1: the rows that are not tombstones. Type 2: the current version of each
        key that is not deleted.
    """
    from pyspark.sql import functions as F

    df = _Target(spark, target).table().toDF()
    if CURRENT in df.columns:
        df = df.where(F.col(CURRENT))
    else:
        df = df.where(~F.col(DELETED))
    if bookkeeping:
        return df
    internal = set(SCD1_COLUMNS) | set(SCD2_COLUMNS)
    return df.select(*[_quote(c) for c in df.columns if c not in internal])


def _generic_columns(schema: Any, table: _Target, target: str) -> list[Any]:
    """The table's columns for generic events: ``schema=``, or the existing table's."""
    if schema is not None:
        from .._typed import as_schema
        from .decoding import spark_event_schema

        arrow = as_schema(schema)
        from .._typed import typed_event_schema

        struct = spark_event_schema(typed_event_schema(arrow))["after"].dataType
        return list(struct.fields)
    if not table.exists():
        raise ValueError(
            f"generic events (map images) need schema= to create {target}: the columns and "
            "their types"
        )
    internal = set(SCD1_COLUMNS) | set(SCD2_COLUMNS)
    return [f for f in table.schema().fields if f.name not in internal]


class _Images:
    """Reading the key and value columns out of ``before``/``after`` images.

    ``absent``: typed events with an ``after_absent`` column (the columns each ``after``
    image lacks, docs/typed.md).
    """

    def __init__(
        self, columns: list[Any], keys: list[str], generic: bool, *, absent: bool = False
    ) -> None:
        self.types = {f.name: f.dataType for f in columns}
        self.keys = keys
        self.values = [f.name for f in columns if f.name not in keys]
        self.generic = generic
        self.absent = absent

    def present(self, name: str, ignore_null_updates: bool) -> Column:
        """The ``after`` image carries a value (maybe null) for column ``name``."""
        from pyspark.sql import functions as F

        after = F.col("after")
        if self.generic:
            return F.coalesce(F.map_contains_key(after, name), F.lit(False))
        if ignore_null_updates:
            return after[name].isNotNull()  # an absent column is null too
        if self.absent:
            # A null after_absent with an image (a typed frame made by hand): all present.
            listed = F.coalesce(F.array_contains(F.col(AFTER_ABSENT), name), F.lit(False))
            return after.isNotNull() & ~listed
        return after.isNotNull()

    def get(self, image: str, name: str) -> Column:
        """A column of an image (generic: the map value cast to the column's type)."""
        from pyspark.sql import functions as F

        value = F.col(image)[name]
        return value.cast(self.types[name]) if self.generic else value

    def keyed(self, image: str) -> Column:
        """The image has a value for every key column."""
        from functools import reduce

        return reduce(lambda a, b: a & b, [self.get(image, k).isNotNull() for k in self.keys])

    def moved(self) -> Column:
        """An update whose key changed (both images keyed, some key column differs)."""
        from functools import reduce

        from pyspark.sql import functions as F

        differs = reduce(
            lambda a, b: a | b,
            [~self.get("before", k).eqNullSafe(self.get("after", k)) for k in self.keys],
        )
        return (F.col("op") == "update") & self.keyed("before") & self.keyed("after") & differs


def _resolve_keys(selected: DataFrame, keys: Sequence[str] | str | None, has_pk: bool) -> list[str]:
    """``keys=``, else the first ``primary_key`` a row change names (``[]`` for none)."""
    from pyspark.sql import functions as F

    if isinstance(keys, str):
        return [keys]
    if keys is not None:
        return list(keys)
    if not has_pk:
        return []
    row = (
        selected.where(F.col("op").isin(*ROW_OPS) & F.col("primary_key").isNotNull())
        .select("primary_key")
        .first()
    )
    return list(row[0]) if row is not None and row[0] else []


class _Counts:
    """What the batch holds: events per op, the row changes without a key, the newest
    event time, the ``ddl`` statements.

    ``observe=True``: the counts are taken by ``DataFrame.observe`` on :attr:`frame` while
    the first action over it (the reduction's) reads the batch, so the batch is read once
    and never cached; else by one aggregate when asked.
    """

    def __init__(
        self, selected: DataFrame, image: _Images, has_ddl: bool, *, observe: bool = False
    ) -> None:
        from pyspark.sql import functions as F

        self.selected = selected
        self.has_ddl = has_ddl
        op = F.col("op")
        aggs = [F.count(F.lit(1)).alias("events"), F.max("_time").alias("newest")]
        aggs += [F.count(F.when(op == name, 1)).alias(f"op_{name}") for name in OPS]
        aggs.append(F.count(F.when(~op.isin(*OPS), 1)).alias("unknown"))
        if image.keys:
            # The entries _entries makes: one per row change, one more per moved key.
            no_seq = F.col("_seq").isNull()
            unkeyed = ~(image.keyed("after") | image.keyed("before")) | no_seq
            aggs.append(
                (
                    F.count(F.when(op.isin(*ROW_OPS) & unkeyed, 1))
                    + F.count(F.when(image.moved() & no_seq, 1))
                ).alias("unkeyed")
            )
        self.observation = None
        if observe:
            import uuid

            from pyspark.sql import Observation

            self.observation = Observation(f"cdc_apply_{uuid.uuid4().hex}")
            self.frame = selected.observe(self.observation, *aggs)
        else:
            self.frame = selected
            self._row = selected.agg(*aggs).first().asDict()

    def _values(self) -> dict[str, Any]:
        if self.observation is None:
            return self._row
        return self.observation.get

    def newest(self) -> dt.datetime | None:
        """The newest event time of the batch."""
        return self._values()["newest"]

    def result(self) -> ApplyResult:
        """A new :class:`ApplyResult` with the counts (after the first action over
        :attr:`frame`, when observed)."""
        from pyspark.sql import functions as F

        values = self._values()
        result = ApplyResult(events=values["events"], unkeyed=values.get("unkeyed") or 0)
        for name in OPS:
            n = values[f"op_{name}"]
            if not n:
                continue
            if name in ROW_OPS:
                result.changes += n
            elif name == "error":
                result.errors += n
            else:
                result.other[name] = n
        if values["unknown"]:  # ops outside the vocabulary: hand-made events
            known = ~F.col("op").isin(*OPS)
            for row in self.selected.where(known).groupBy("op").count().collect():
                result.other[row["op"]] = row["count"]
        if self.has_ddl and result.other.get("ddl"):
            result.ddl = [
                r["ddl"]
                for r in self.selected.where(F.col("op") == "ddl").orderBy("_seq").collect()
            ]
        return result


def _evolve(
    table: _Target, columns: list[Any], bookkeeping: Sequence[str], scd_type: int
) -> tuple[bool, list[str]]:
    """Create the table, or add the events' new columns; a table column the events lack,
    or of another type, is an error (never silent loss)."""
    from pyspark.sql.types import BinaryType, BooleanType, StructField, TimestampType

    types = {
        SEQUENCE: BinaryType(),
        EVENT_TIME: TimestampType(),
        DELETED: BooleanType(),
        START_SEQUENCE: BinaryType(),
        END_SEQUENCE: BinaryType(),
        START_TIME: TimestampType(),
        END_TIME: TimestampType(),
        CURRENT: BooleanType(),
    }
    if not table.exists():
        table.create(list(columns) + [StructField(n, types[n]) for n in bookkeeping])
        return True, []
    existing = {f.name: f for f in table.schema().fields}
    have = [n for n in bookkeeping if n in existing]
    if len(have) != len(bookkeeping):
        kind = "type 2 (history)" if scd_type == 2 else "type 1"
        raise ValueError(
            f"table {table.target} was not written as a {kind} table by apply_changes "
            f"(it lacks {', '.join(n for n in bookkeeping if n not in existing)})"
        )
    names = {f.name for f in columns}
    internal = set(SCD1_COLUMNS) | set(SCD2_COLUMNS)
    for name in existing:
        if name in internal:
            continue
        if name not in names:
            raise ValueError(
                f"column {name!r} of table {table.target} is not in the events: dropped or "
                "renamed in the source? Rename or drop it in the table first (nothing was "
                "written)"
            )
    for f in columns:
        if f.name in existing and existing[f.name].dataType != f.dataType:
            raise ValueError(
                f"column {f.name!r} of table {table.target} is "
                f"{existing[f.name].dataType.simpleString()} but the events have "
                f"{f.dataType.simpleString()}: retyped in the source? Change the table first "
                "(nothing was written)"
            )
    added = [f for f in columns if f.name not in existing]
    if added:
        spec = ", ".join(f"{_quote(f.name)} {f.dataType.simpleString()}" for f in added)
        table.spark.sql(f"ALTER TABLE {table.sql_name} ADD COLUMNS ({spec})")
    return False, [f.name for f in added]


def _entries(selected: DataFrame, image: _Images, ignore_null_updates: bool) -> DataFrame:
    """The keyed row changes as entries: the key, ``_kind`` (``u`` upsert, ``d`` delete),
    ``_seq``, ``_time``, every other column's value and ``_p_<i>`` (present). The unkeyed
    ones (counted by :class:`_Counts`) are left out."""
    from functools import reduce

    from pyspark.sql import functions as F

    keys, values, types, get = image.keys, image.values, image.types, image.get
    after_keyed = image.keyed("after")
    before_keyed = image.keyed("before")
    new_key = [
        F.when(after_keyed, get("after", k)).otherwise(get("before", k)).alias(k) for k in keys
    ]
    old_key = [
        F.when(before_keyed, get("before", k)).otherwise(get("after", k)).alias(k) for k in keys
    ]
    payload = [get("after", c).alias(c) for c in values]
    presence = [
        image.present(c, ignore_null_updates).alias(f"_p_{i}") for i, c in enumerate(values)
    ]
    nothing = [F.lit(None).cast(types[c]).alias(c) for c in values]
    absent = [F.lit(False).alias(f"_p_{i}") for i in range(len(values))]
    common = [F.col("_seq"), F.col("_time")]

    upsert = F.struct(*new_key, F.lit("u").alias(_KIND), *common, *payload, *presence)
    remove = F.struct(*old_key, F.lit("d").alias(_KIND), *common, *nothing, *absent)
    moved_from = F.struct(
        *[get("before", k).alias(k) for k in keys],
        F.lit("d").alias(_KIND),
        *common,
        *nothing,
        *absent,
    )
    # Each row change gives one entry, a key-changing update two (the old key's delete
    # first); other events none. One pass over the batch, however many kinds it holds.
    op = F.col("op")
    changes = (
        F.when(op.isin(*UPSERT_OPS) & image.moved(), F.array(moved_from, upsert))
        .when(op.isin(*UPSERT_OPS), F.array(upsert))
        .when(op.isin(*REMOVE_OPS), F.array(remove))
    )
    entries = selected.select(F.inline(changes))
    keyed = reduce(lambda a, b: a & b, [F.col(k).isNotNull() for k in keys])
    return entries.where(keyed & F.col("_seq").isNotNull())


def _partial(selected: DataFrame, image: _Images) -> bool:
    """Some upsert of typed events lacks a column (``after_absent`` not empty): the batch
    needs :func:`_reduced`'s per-column fold. One scan of the batch's ``op`` and
    ``after_absent``, which stops at the first such row; none without an ``after_absent``
    column."""
    from pyspark.sql import functions as F

    if not image.absent:
        return False
    lacking = (
        F.col("op").isin(*UPSERT_OPS)
        & F.col("after").isNotNull()
        & F.coalesce(F.size(AFTER_ABSENT) > 0, F.lit(False))
    )
    return len(selected.where(lacking).select("op").take(1)) > 0


def _reduced(
    entries: DataFrame, columns: list[Any], keys: list[str], whole: bool = False
) -> DataFrame:
    """One row per key: the last change, each column's newest present value (and its
    sequence, ``_s_<i>``) since the batch's last delete of the key.

    ``whole``: every upsert carries every column (typed images whose ``after_absent`` is
    empty or missing, :func:`_partial`), so the last change's image is the row: the
    newest entry of each key, and no ``_s_<i>`` or ``_del_seq`` columns.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    values = [f.name for f in columns if f.name not in keys]
    if whole:
        # A delete's entry carries nulls, so the last change's image is the row: the
        # newest entry of each key. A window sorts once, after the shuffle; an aggregate
        # of a struct holding the binary sequence would sort twice (no hash buffer for it).
        newest = Window.partitionBy(*keys).orderBy(F.col("_seq").desc(), F.col(_KIND).desc())
        return (
            entries.withColumn("_rank", F.row_number().over(newest))
            .where(F.col("_rank") == 1)
            .select(
                *[F.col(k) for k in keys],
                F.col("_seq").alias(_LAST_SEQ),
                F.col(_KIND).alias(_LAST_KIND),
                F.col("_time").alias(_LAST_TIME),
                *[F.col(c) for c in values],
            )
        )
    upsert = F.col(_KIND) == "u"
    aggs = [
        F.max("_seq").alias(_LAST_SEQ),
        F.max_by(_KIND, "_seq").alias(_LAST_KIND),
        F.max_by("_time", "_seq").alias(_LAST_TIME),
        F.max(F.when(F.col(_KIND) == "d", F.col("_seq"))).alias(_DEL_SEQ),
    ]
    for i, c in enumerate(values):
        when = F.when(upsert & F.col(f"_p_{i}"), F.col("_seq"))
        aggs.append(F.max_by(F.col(c), when).alias(c))
        aggs.append(F.max(when).alias(f"_s_{i}"))
    reduced = entries.groupBy(*keys).agg(*aggs)
    # A value older than the batch's last delete of its key died with the row.
    out = [F.col(k) for k in keys] + [
        F.col(n) for n in (_LAST_SEQ, _LAST_KIND, _LAST_TIME, _DEL_SEQ)
    ]
    for i, c in enumerate(values):
        live = F.col(_DEL_SEQ).isNull() | (F.col(f"_s_{i}") > F.col(_DEL_SEQ))
        out.append(F.when(live, F.col(c)).alias(c))
        out.append(F.when(live, F.col(f"_s_{i}")).alias(f"_s_{i}"))
    return reduced.select(*out)


class _Txn:
    """Delta's idempotent-write markers (``txnAppId``/``txnVersion``) around one write."""

    APP = "spark.databricks.delta.write.txnAppId"
    VERSION = "spark.databricks.delta.write.txnVersion"

    def __init__(self, spark: SparkSession, app_id: str | None, batch_id: int | None) -> None:
        self.spark = spark
        self.app_id = app_id
        self.batch_id = batch_id

    def __enter__(self) -> _Txn:
        if self.app_id is not None:
            self.spark.conf.set(self.APP, self.app_id)
            self.spark.conf.set(self.VERSION, str(self.batch_id))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.app_id is not None:
            self.spark.conf.unset(self.APP)
            self.spark.conf.unset(self.VERSION)


def _last_commit(table: _Target) -> tuple[int, str, dict[str, str]]:
    row = table.table().history(1).select("version", "operation", "operationMetrics").first()
    return row["version"], row["operation"], dict(row["operationMetrics"] or {})


def _merge_scd1(
    table: _Target,
    entries: DataFrame,
    columns: list[Any],
    keys: list[str],
    app_id: str | None,
    batch_id: int | None,
    counts: _Counts,
    whole: bool = False,
) -> tuple[ApplyResult, bool]:
    """The reduced changes, persisted (the one read of the batch, which also counts it),
    then one MERGE; the counts, and whether the MERGE wrote."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    values = [f.name for f in columns if f.name not in keys]
    source = _reduced(entries, columns, keys, whole).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        reduced = source.count()
        result = counts.result()
        result.keys = reduced
        if not reduced:
            return result, False
        q = _quote
        t_seq, t_del = f"t.{SEQUENCE}", f"t.{DELETED}"
        reset = f"({t_del} OR s.{_DEL_SEQ} > {t_seq})"
        if whole:
            # The last change is newer than the row (the MERGE's condition) and holds
            # every column: the row becomes its image (nulls for a delete).
            update = {f"t.{q(c)}": F.col(f"s.{q(c)}") for c in values}
        else:
            update = {
                f"t.{q(c)}": F.expr(
                    f"CASE WHEN s._s_{i} > {t_seq} THEN s.{q(c)} WHEN {reset} THEN NULL "
                    f"ELSE t.{q(c)} END"
                )
                for i, c in enumerate(values)
            }
        update[f"t.{SEQUENCE}"] = F.col(f"s.{_LAST_SEQ}")
        update[f"t.{EVENT_TIME}"] = F.col(f"s.{_LAST_TIME}")
        update[f"t.{DELETED}"] = F.expr(f"s.{_LAST_KIND} = 'd'")
        insert = {f"t.{q(c)}": F.col(f"s.{q(c)}") for c in [*keys, *values]}
        insert[f"t.{SEQUENCE}"] = F.col(f"s.{_LAST_SEQ}")
        insert[f"t.{EVENT_TIME}"] = F.col(f"s.{_LAST_TIME}")
        insert[f"t.{DELETED}"] = F.expr(f"s.{_LAST_KIND} = 'd'")
        on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in keys)
        # Delta skips an (app_id, batch_id) it already holds: compare versions only then.
        before_version = _last_commit(table)[0] if app_id is not None else None
        with _Txn(table.spark, app_id, batch_id):
            out = (
                table.table()
                .alias("t")
                .merge(source.alias("s"), on)
                .whenMatchedUpdate(condition=f"s.{_LAST_SEQ} > {t_seq}", set=update)
                .whenNotMatchedInsert(values=insert)
                .execute()
            )
    finally:
        source.unpersist()
    # MERGE returns its row counts; one that changed nothing (a replay without txn
    # markers) may commit nothing, so the history's last commit would be an older one.
    first = out.first() if out is not None else None  # none when Delta skipped the batch
    affected = first.asDict().get("num_affected_rows") if first is not None else None
    version, operation, metrics = _last_commit(table)
    result.version = version
    if app_id is not None and version == before_version:
        result.skipped = True
        return result, False
    if operation != "MERGE" or (app_id is None and affected == 0):
        return result, False
    result.metrics = metrics
    return result, True


def _expire(table: _Target, cutoff: dt.datetime) -> None:
    """Forget tombstones whose delete is older than ``cutoff`` (event time)."""
    from pyspark.sql import functions as F

    table.table().delete(F.col(DELETED) & (F.col(EVENT_TIME) < F.lit(cutoff)))


def _merge_scd2(
    table: _Target,
    entries: DataFrame,
    columns: list[Any],
    keys: list[str],
    app_id: str | None,
    batch_id: int | None,
    counts: _Counts,
) -> ApplyResult:
    """History: one row per change (a delete is a tombstone version). The batch's
    versions join the stored versions of the keys they touch; each key's versions are
    re-chained in sequence order (end = the next version's start) and merged back by
    (key, start sequence)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    values = [f.name for f in columns if f.name not in keys]
    # One entry per (key, sequence): duplicates collapse.
    new = (
        entries.dropDuplicates([*keys, "_seq"])
        .select(
            *keys,
            F.col("_seq").alias(START_SEQUENCE),
            F.col("_time").alias(START_TIME),
            (F.col(_KIND) == "d").alias(DELETED),
            *[F.col(c) for c in values],
            *[F.col(f"_p_{i}") | (F.col(_KIND) == "d") for i in range(len(values))],
            F.lit(True).alias("_new"),
        )
        .toDF(
            *keys,
            START_SEQUENCE,
            START_TIME,
            DELETED,
            *values,
            *[f"_p_{i}" for i in range(len(values))],
            "_new",
        )
    ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        return _write_scd2(table, new, values, keys, app_id, batch_id, counts)
    finally:
        new.unpersist()


def _write_scd2(
    table: _Target,
    new: DataFrame,
    values: list[str],
    keys: list[str],
    app_id: str | None,
    batch_id: int | None,
    counts: _Counts,
) -> ApplyResult:
    """:func:`_merge_scd2`'s MERGE of the batch's versions (``new``, persisted)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    q = _quote
    touched = new.select(*keys).distinct()
    # The one read of the batch (``new`` is persisted as it counts), which also takes the
    # counts.
    keys_touched = touched.count()
    result = counts.result()
    result.keys = keys_touched
    if not keys_touched:
        return result
    stored = table.table().toDF()
    old = stored.join(touched, on=keys, how="left_semi").select(
        *keys,
        START_SEQUENCE,
        START_TIME,
        DELETED,
        *values,
        *[F.lit(True).alias(f"_p_{i}") for i in range(len(values))],
        F.lit(False).alias("_new"),
    )
    # A stored version wins over a new one with the same start (a replayed change).
    versions = old.unionByName(
        new.join(old.select(*keys, START_SEQUENCE), [*keys, START_SEQUENCE], "left_anti")
    )
    order = Window.partitionBy(*keys).orderBy(START_SEQUENCE)
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    filled = [
        F.last(F.when(F.col(f"_p_{i}"), F.struct(F.col(c).alias("v"))), ignorenulls=True)
        .over(upto)["v"]
        .alias(c)
        for i, c in enumerate(values)
    ]
    chained = versions.select(
        *keys,
        START_SEQUENCE,
        START_TIME,
        DELETED,
        *filled,
        F.lead(START_SEQUENCE).over(order).alias(END_SEQUENCE),
        F.lead(START_TIME).over(order).alias(END_TIME),
        "_new",
    ).withColumn(CURRENT, F.col(END_SEQUENCE).isNull() & ~F.col(DELETED))
    before_version = _last_commit(table)[0]
    on = " AND ".join(f"t.{q(k)} = s.{q(k)}" for k in [*keys, START_SEQUENCE])
    every = [*keys, START_SEQUENCE, START_TIME, DELETED, *values, END_SEQUENCE, END_TIME, CURRENT]
    changed = " OR ".join(
        f"NOT (t.{q(c)} <=> s.{q(c)})" for c in [END_SEQUENCE, END_TIME, CURRENT, *values]
    )
    with _Txn(table.spark, app_id, batch_id):
        (
            table.table()
            .alias("t")
            .merge(chained.alias("s"), on)
            .whenMatchedUpdate(
                condition=changed, set={f"t.{q(c)}": F.col(f"s.{q(c)}") for c in every}
            )
            .whenNotMatchedInsert(values={f"t.{q(c)}": F.col(f"s.{q(c)}") for c in every})
            .execute()
        )
    version, operation, metrics = _last_commit(table)
    result.version = version
    if version == before_version or operation != "MERGE":
        result.skipped = app_id is not None
        return result
    result.metrics = metrics
    return result
