"""The Apache Iceberg table of :func:`cdc_decode.spark.apply_changes` (Iceberg 1.12 on
Spark 4.1), named in a catalog of Iceberg's ``SparkCatalog`` (``lake.shop.orders``).

- **Created** with format version 2 and merge-on-read ``MERGE``/``UPDATE``/``DELETE``
  (row-level deletes as position delete files, no data file rewritten per batch), unless
  the catalog's ``table-default.*`` settings say otherwise; an existing table keeps its own
  properties.
- **State** (properties, the current snapshot and its ancestors' summaries) is read from
  the catalog's ``org.apache.iceberg.Table``, refreshed, without a Spark job; the schema
  from Spark. The table's version is its current snapshot's id (what ``VERSION AS OF``
  takes).
- **Replay markers**: each ``MERGE`` runs in a clone of the caller's session whose
  ``spark.sql.iceberg.snapshot-property.*`` settings put ``cdc_decode.txn.<app_id>`` (the
  batch id) and a unique commit id into the snapshot summary of that commit: atomic with
  the data, as Iceberg's Flink sink records its checkpoint id. The stored batch id of an
  ``app_id`` is the newest such summary among the current snapshot's ancestors; snapshots
  removed by ``expire_snapshots`` take their markers with them (a replay of such an old
  batch is then applied again, which the sequence guard makes a no-op).
- **Conflicts**: a commit that fails Iceberg's validation against a concurrent one
  (``ValidationException`` "conflicting", ``CommitFailedException``) is retried by the
  seam; a ``CommitStateUnknownException`` is not (the commit may have happened).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._compat import conf_keys
from .._layout import NO_LAYOUT, Layout
from .._plans import checkpointed, detached, merge_outcome
from . import Clause, Commit, Table, literal, merge_statement, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

ICEBERG_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
ICEBERG_SESSION_CATALOG_CLASS = "org.apache.iceberg.spark.SparkSessionCatalog"
"""Iceberg's wrapper of Spark's session catalog (``spark_catalog``): Iceberg tables and the
session catalog's own (Hive, in-memory) side by side."""
ICEBERG_TABLE_CLASS = "org.apache.iceberg.spark.source.SparkTable"
SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
TXN_PREFIX = "cdc_decode.txn."
"""Snapshot summary key of a replay marker: this prefix and the ``app_id``; the value is
the batch id."""
ACTION = "_cdc_decode_action"
MATCHED = "_cdc_decode_matched"
CLAUSE = "_cdc_decode_clause"
COMMIT_ID = "cdc_decode.commit"
"""Snapshot summary key holding the unique id of one ``MERGE`` of ``apply_changes``."""

DEFAULT_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}
"""The properties of a table ``apply_changes`` creates, each unless the catalog sets a
``table-default.<property>`` of its own. Format 2: readable by every engine that reads
Iceberg row-level deletes today (format 3's deletion vectors need Iceberg 1.8+ readers);
a catalog setting ``table-default.format-version=3`` gets format 3 tables."""

KEY_GROUPED_MERGE = {
    "spark.sql.iceberg.planning.preserve-data-grouping": "true",
    "spark.sql.sources.v2.bucketing.enabled": "true",
    "spark.sql.sources.v2.bucketing.shuffle.enabled": "true",
}
"""The settings of a ``MERGE`` into a table partitioned by buckets of its key: Iceberg
reports the scan's files grouped by bucket, and Spark joins the batch, shuffled into the
same buckets, with the table's rows where they are read (a storage-partitioned join)
instead of shuffling every row of the table. ``...bucketing.shuffle.enabled`` is Spark 4's
(on Spark 3.5 both sides are shuffled, as without it)."""

CONFLICTS = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.ValidationException",
)


def iceberg_catalog(spark: SparkSession, target: str) -> str | None:
    """The name of the Iceberg catalog ``target`` names a table of, or ``None`` (not an
    Iceberg table, or no Iceberg on the session). The catalog is the name's first part
    when that is a configured catalog, else the session's current catalog
    (``spark.sql.defaultCatalog``).

    - In an ``org.apache.iceberg.spark.SparkCatalog`` every table is Iceberg's.
    - In Iceberg's ``SparkSessionCatalog`` (``spark_catalog``), a table that exists is
      Iceberg's when Iceberg loads it (a Delta or Parquet table there is not), and a new
      one is created as Iceberg's.
    """
    jvm = spark._jvm
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        base = jvm.java.lang.Class.forName(ICEBERG_CATALOG_CLASS, False, loader)
        wrapper = jvm.java.lang.Class.forName(ICEBERG_SESSION_CATALOG_CLASS, False, loader)
    except Exception:  # noqa: BLE001 (no Iceberg runtime on the session)
        return None
    parts = _parts(spark, target)
    manager = spark._jsparkSession.sessionState().catalogManager()
    name = parts[0] if len(parts) > 1 and manager.isCatalogRegistered(parts[0]) else None
    if name is None:
        name = manager.currentCatalog().name()
    try:
        plugin = manager.catalog(name)
    except Exception:  # noqa: BLE001 (a catalog that does not load: not ours to say)
        return None
    if base.isInstance(plugin):
        return name
    if not wrapper.isInstance(plugin):
        return None
    ident = _identifier(spark, parts, name)
    loaded = _load_table(plugin, ident)
    if loaded is None:
        return name
    kind = jvm.java.lang.Class.forName(ICEBERG_TABLE_CLASS, False, loader)
    return name if kind.isInstance(loaded) else None


def _load_table(plugin: Any, ident: Any) -> Any:
    """The catalog's table of ``ident``, ``None`` where it has none: ``loadTable`` and its
    ``NoSuchTableException``, as ``TableCatalog.tableExists`` does (a default method of the
    interface, which py4j does not find on Spark 3.5's catalogs)."""
    try:
        return plugin.loadTable(ident)
    except Exception as error:  # py4j's, or pyspark's AnalysisException made of it
        java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
        name = "" if java is None else str(java.getClass().getName())
        # getCondition (pyspark 4) or getErrorClass (3.5; deprecated since 4.0)
        condition = getattr(error, "getCondition", None) or getattr(error, "getErrorClass", None)
        error_class = None if condition is None else condition()
        if "NoSuchTableException" in name or error_class == "TABLE_OR_VIEW_NOT_FOUND":
            return None
        raise


def _parts(spark: SparkSession, target: str) -> list[str]:
    parser = spark._jsparkSession.sessionState().sqlParser()
    parts = parser.parseMultipartIdentifier(target)  # a Scala Seq (2.12 or 2.13: by index)
    return [str(parts.apply(i)) for i in range(parts.length())]


def _identifier(spark: SparkSession, parts: Sequence[str], catalog: str) -> Any:
    """The catalog ``Identifier`` of a table name's ``parts`` in ``catalog``: without the
    catalog's own name, the current namespace before a bare name."""
    jvm = spark._jvm
    manager = spark._jsparkSession.sessionState().catalogManager()
    if parts[0] == catalog and len(parts) > 2:
        parts = parts[1:]
    else:
        parts = [*list(manager.currentNamespace()), *parts][-max(len(parts), 2) :]
    namespace = spark.sparkContext._gateway.new_array(jvm.String, len(parts) - 1)
    for n, part in enumerate(parts[:-1]):
        namespace[n] = part
    return jvm.org.apache.spark.sql.connector.catalog.Identifier.of(namespace, parts[-1])


class IcebergTarget(Table):
    """An Iceberg table named in an Iceberg catalog (``catalog.namespace.table``, or
    ``namespace.table`` in the current catalog)."""

    def __init__(self, spark: SparkSession, target: str, catalog: str) -> None:
        super().__init__(spark, target)
        self.catalog = catalog
        parts = _parts(spark, target)
        self.sql_name = ".".join(quote(p) for p in parts)
        # A bare name's namespace is the current one when the call starts, for all of it.
        self._ident = _identifier(spark, parts, catalog)
        self._state: dict[str, Any] | None = None

    # -- reading -------------------------------------------------------------------------

    def refresh(self) -> None:
        self._state = None

    def _table(self) -> Any:
        """The table's ``org.apache.iceberg.Table`` from the caller's catalog, refreshed
        (``None``: no table). The catalog caches the object its reads use: refreshing it
        here makes Spark's reads see commits made through other sessions and writers."""
        manager = self.spark._jsparkSession.sessionState().catalogManager()
        plugin = manager.catalog(self.catalog)
        loaded = _load_table(plugin, self._ident)
        if loaded is None:
            return None
        table = loaded.table()
        table.refresh()
        return table

    def _load(self) -> dict[str, Any]:
        """The table's state, read once until :meth:`refresh`: whether it exists, its
        properties and its snapshots' ids, parents and summaries, newest first along the
        current snapshot's ancestors (no Spark job: Iceberg's metadata through the
        catalog)."""
        if self._state is None:
            state: dict[str, Any] = {"exists": False, "properties": {}, "snapshot": None}
            table = self._table()
            if table is not None:
                state["exists"] = True
                state["properties"] = dict(table.properties())
                current = table.currentSnapshot()
                state["snapshot"] = None if current is None else int(current.snapshotId())
                state["table"] = table
            self._state = state
        return self._state

    def _ancestors(self) -> Iterator[tuple[int, Any]]:
        """``(snapshot id, summary)`` of the current snapshot and its ancestors, newest
        first, as far as they are kept (``expire_snapshots`` removes old ones)."""
        state = self._load()
        table = state.get("table")
        snapshot = None if table is None else table.currentSnapshot()
        while snapshot is not None:
            yield int(snapshot.snapshotId()), snapshot.summary()
            parent = snapshot.parentId()
            snapshot = None if parent is None else table.snapshot(parent)

    def exists(self) -> bool:
        return self._load()["exists"]

    def schema(self) -> StructType:
        self._load()
        return self.spark.table(self.sql_name).schema

    def properties(self) -> dict[str, str]:
        return dict(self._load()["properties"])

    def version(self) -> int | None:
        return self._load()["snapshot"]

    def txn_refused(self) -> str | None:
        if _session_snapshot_properties(self.spark):
            return None
        return (
            f"replay markers (app_id/batch_id, and so sync_stream) on Iceberg table "
            f"{self.target} need the commit's snapshot properties taken from the session "
            "(spark.sql.iceberg.snapshot-property.*), which Iceberg's runtime reads on Spark "
            f"4.0 or later only; this session runs Spark {self.spark.version}. Nothing was "
            "written: call without app_id and batch_id, or run Spark 4 with Iceberg 1.10+"
        )

    def txn_version(self, app_id: str) -> int | None:
        key = TXN_PREFIX + app_id
        for _, summary in self._ancestors():
            stored = summary.get(key)
            if stored is not None:
                return int(stored)
        return None

    def read(self) -> DataFrame:
        self._load()
        return self.spark.table(self.sql_name)

    # -- writing -------------------------------------------------------------------------

    def is_conflict(self, error: BaseException) -> bool:
        java = getattr(error, "java_exception", None) or getattr(error, "_java_exception", None)
        seen = 0
        while java is not None and seen < 20:
            name = java.getClass().getName()
            if name == CONFLICTS[0]:
                return True
            if name == CONFLICTS[1] and "conflicting" in str(java.getMessage() or ""):
                return True
            java = java.getCause()
            seen += 1
        return False

    def column_type(self, data_type: DataType) -> DataType:
        return stored_type(data_type)

    def create(
        self,
        fields: Sequence[StructField],
        properties: Mapping[str, str],
        layout: Layout = NO_LAYOUT,
    ) -> None:
        defaults = {
            key: value
            for key, value in DEFAULT_PROPERTIES.items()
            if self.spark.conf.get(f"spark.sql.catalog.{self.catalog}.table-default.{key}", None)
            is None
        }
        props = {**defaults, **properties}
        columns = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in fields)
        spec = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in props.items())
        namespace = self.sql_name.rsplit(".", 1)[0]
        self.spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        parts = ", ".join(p.sql() for p in layout.partition_by)
        partitioned = f"PARTITIONED BY ({parts}) " if parts else ""
        self.retrying(
            "create",
            lambda: self.spark.sql(
                f"CREATE TABLE IF NOT EXISTS {self.sql_name} ({columns}) USING iceberg "
                f"{partitioned}TBLPROPERTIES ({spec})"
            ),
        )
        if layout.cluster_by:
            order = ", ".join(quote(c) for c in layout.cluster_by)
            self.retrying(
                "sort order",
                lambda: self.spark.sql(f"ALTER TABLE {self.sql_name} WRITE ORDERED BY {order}"),
            )
        self.refresh()

    def widen_columns(self, types: Mapping[str, str]) -> None:
        """Iceberg's type promotion, a metadata change: ``int`` to ``bigint``, ``float``
        to ``double``, a decimal to more digits at the same scale. Any other change (an
        integer into a decimal, ``date`` to ``timestamp_ntz``, a decimal's scale, which
        Delta's type widening allows) is an error naming the column."""
        from pyspark.sql.types import _parse_datatype_string

        stored = {f.name.lower(): f for f in self.schema().fields}
        for name, text in types.items():
            field = stored.get(name.lower())
            if field is None:
                continue
            new = stored_type(_parse_datatype_string(text))
            if new == field.dataType:
                continue
            if not _promotes(field.dataType, new):
                raise ValueError(
                    f"table {self.target}: column {field.name} is "
                    f"{field.dataType.simpleString()}; Iceberg cannot change it to "
                    f"{new.simpleString()} (it promotes int to bigint, float to double and a "
                    "decimal to more digits at the same scale): re-create the table, or "
                    "change the column yourself and resume"
                )
            statement = (
                f"ALTER TABLE {self.sql_name} ALTER COLUMN {quote(field.name)} "
                f"TYPE {new.simpleString()}"
            )
            self.retrying("widen a column", lambda s=statement: self.spark.sql(s))
        self.refresh()

    def delete(self, condition: str) -> int:
        def run() -> int:
            self.refresh()
            rows = self.read().where(condition).count()
            if rows:
                self.spark.sql(f"DELETE FROM {self.sql_name} WHERE {condition}")
            return rows

        deleted = self.retrying("delete", run)
        self.refresh()
        return deleted

    def _session(self, properties: Mapping[str, str], on: str) -> SparkSession:
        """A clone of the caller's session (its settings, temporary views, the same
        SparkContext) whose commits carry ``properties`` in their snapshot summary, with
        :data:`KEY_GROUPED_MERGE` where the table is partitioned by buckets of the keys
        ``on`` joins."""
        session = self.clone_session()
        for key in conf_keys(session):
            if key.startswith(SNAPSHOT_PROPERTY + "cdc_decode."):
                session.conf.unset(key)
        for key, value in properties.items():
            session.conf.set(SNAPSHOT_PROPERTY + key, value)
        if self._bucketed_by_key(on):
            for key, value in KEY_GROUPED_MERGE.items():
                session.conf.set(key, value)
        return session

    def _bucketed_by_key(self, on: str) -> bool:
        """Whether every partition field of the table is ``bucket(n, key)`` of a key the
        ``MERGE``'s ``on`` (``t.k = s.k AND ...``) joins: then the join can keep the
        table's rows where they are read."""
        table = self._load().get("table")
        if table is None:
            return False
        fields = list(table.spec().fields())
        schema = table.schema()
        for field in fields:
            name = schema.findColumnName(field.sourceId())
            transform = str(field.transform())
            if not transform.startswith("bucket[") or name is None:
                return False
            if f"t.{quote(str(name))} = s.{quote(str(name))}" not in on:
                return False
        return bool(fields)

    def merge_once(
        self,
        source: DataFrame,
        on: str,
        clauses: Sequence[Clause],
        txn: tuple[str, int] | None,
        *,
        materialized: bool = False,
        rows: int | None = None,
        broadcast: bool = False,
    ) -> Commit:
        view = f"_cdc_decode_source_{uuid.uuid4().hex}"
        # Materialized apart from the table it was computed from: a source that reads
        # the MERGE's own target fails analysis (its attributes are taken as the
        # target's).
        if all(c.sql is not None for c in clauses):
            # Clauses with SQL text (the rules, or rows resolved against the table
            # beforehand): the MERGE runs them as they are. A source held in memory is
            # read as it is; another is checkpointed first.
            held, free = (source, None) if materialized else checkpointed(source)
            statement = merge_statement(self.sql_name, view, on, clauses)
        else:
            # Only the rows that change are kept, each with the clause it takes.
            held, free = checkpointed(self._resolve(source, on, clauses))
            every = {f.name: f"s.{quote(f.name)}" for f in self.read().schema.fields}
            resolved = [
                Clause("update", {}, sql=(f"s.{ACTION} = 'u'", every)),
                Clause("insert", {}, sql=(f"s.{ACTION} = 'i'", every)),
            ]
            statement = merge_statement(self.sql_name, view, on, resolved)
        tag = uuid.uuid4().hex
        marks = {COMMIT_ID: tag}
        if txn is not None:
            marks[TXN_PREFIX + txn[0]] = str(txn[1])
        before = self.version()
        session = self._session(marks, on)
        # The rows as a plain relation of the clone: a checkpoint's plan keeps the
        # constraints of the plan it came from (the clauses' expressions), which the
        # MERGE's analysis need not carry along.
        frame = detached(held, session)
        if broadcast:
            from pyspark.sql import functions as F

            frame = F.broadcast(frame)
        frame.createOrReplaceTempView(view)
        try:
            session.sql(statement)
        finally:
            session.catalog.dropTempView(view)
            if free is not None:  # the rows checkpointed here
                free()
        if not _session_snapshot_properties(self.spark):
            return self._commit_after(before)
        return self._commit(tag)

    def _resolve(self, source: DataFrame, on: str, clauses: Sequence[Clause]) -> DataFrame:
        """The rows the ``MERGE`` of ``clauses`` writes, computed by a left join of the
        source (``s``) with the table (``t``): each source row's first clause that holds
        (``MERGE``'s rule), the table row it gives, and :data:`ACTION` (``u``: update,
        ``i``: insert); rows no clause takes are left out. The clauses are Spark columns
        over ``s`` and ``t``; the SQL ``MERGE`` that writes the result names only columns
        (Spark's ``DataFrame.mergeInto`` cannot alias its target as ``t``)."""
        from pyspark.sql import functions as F

        target = self.read()
        table = target.withColumn(MATCHED, F.lit(True)).alias("t")
        joined = source.alias("s").join(table, F.expr(on), "left")
        matched = F.col(f"t.{MATCHED}").isNotNull()
        chosen, out, action = merge_outcome(clauses, matched, F.col(CLAUSE), target.schema.fields)
        joined = joined.withColumn(CLAUSE, chosen).where(F.col(CLAUSE).isNotNull())
        return joined.select(*out, action.alias(ACTION))

    def _commit(self, tag: str) -> Commit:
        """The snapshot the MERGE committed, found by its commit id among the current
        snapshot's ancestors."""
        self.refresh()
        for snapshot_id, summary in self._ancestors():
            if summary.get(COMMIT_ID) != tag:
                continue
            metrics = dict(summary)
            inserted = _int(metrics.get("spark.merge-into.num-target-rows-inserted"))
            updated = _int(metrics.get("spark.merge-into.num-target-rows-updated"))
            changed = None if inserted is None or updated is None else inserted + updated
            return Commit(version=snapshot_id, written=True, metrics=metrics,
                          changed_rows=changed)  # fmt: skip
        return Commit(version=self.version())

    def _commit_after(self, before: int | None) -> Commit:
        """Without a commit id in the summary (Spark 3.5): the snapshot the MERGE made is
        the one child of ``before`` (the current snapshot when it started) on the current
        snapshot's line; none when nothing was committed. With more than one (another
        writer committed meanwhile) the newest is taken, and the MERGE's counts are not
        known (``changed_rows`` is ``None``)."""
        self.refresh()
        after = []
        for snapshot_id, summary in self._ancestors():
            if snapshot_id == before:
                break
            after.append((snapshot_id, dict(summary)))
        if not after:
            return Commit(version=self.version())
        snapshot_id, metrics = after[0]
        # Spark 3.5 puts no MERGE counts in the summary: a merge-on-read MERGE writes each
        # row it inserts or updates once, as a new record (the old one by a position delete).
        changed = _int(metrics.get("added-records")) if len(after) == 1 else None
        return Commit(version=snapshot_id, written=True, metrics=metrics, changed_rows=changed)


def _session_snapshot_properties(spark: SparkSession) -> bool:
    """Whether Iceberg's runtime puts the session's ``spark.sql.iceberg.snapshot-property.*``
    settings into a SQL ``MERGE``'s snapshot summary: its runtimes for Spark 4 do; those for
    Spark 3.5 (1.10 to 1.12, checked) take snapshot properties from write options only,
    which a SQL ``MERGE`` cannot pass."""
    return int(spark.version.split(".")[0]) >= 4


def _promotes(old: DataType, new: DataType) -> bool:
    """Whether Iceberg's schema evolution changes a column of ``old`` to ``new`` in place."""
    from pyspark.sql.types import DecimalType, DoubleType, FloatType, IntegerType, LongType

    if isinstance(old, IntegerType) and isinstance(new, LongType):
        return True
    if isinstance(old, FloatType) and isinstance(new, DoubleType):
        return True
    return (
        isinstance(old, DecimalType)
        and isinstance(new, DecimalType)
        and old.scale == new.scale
        and new.precision >= old.precision
    )


def stored_type(data_type: DataType) -> DataType:
    """The Spark type an Iceberg column of ``data_type`` reads back as: Iceberg has no 1-
    or 2-byte integers (``tinyint``, ``smallint`` are stored as ``int``) and no
    ``char``/``varchar`` (``string``); nested types likewise."""
    from pyspark.sql.types import (
        ArrayType,
        ByteType,
        CharType,
        IntegerType,
        MapType,
        ShortType,
        StringType,
        StructField,
        StructType,
        VarcharType,
    )

    if isinstance(data_type, (ByteType, ShortType)):
        return IntegerType()
    if isinstance(data_type, (CharType, VarcharType)):
        return StringType()
    if isinstance(data_type, ArrayType):
        return ArrayType(stored_type(data_type.elementType), data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(
            stored_type(data_type.keyType),
            stored_type(data_type.valueType),
            data_type.valueContainsNull,
        )
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(f.name, stored_type(f.dataType), f.nullable) for f in data_type.fields]
        )
    return data_type


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)
