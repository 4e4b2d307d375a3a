"""The Delta Lake table of :func:`cdc_decode.spark.apply_changes` (Delta 4.4 on Spark 4.2).

The table's state (exists, schema, properties, version, the replay markers Delta keeps per
``appId``) is read from one snapshot of its log (``DeltaLog``, through the JVM: the
``SetTransaction`` markers have no public API). Each ``MERGE`` runs in a clone of the
caller's session, so the idempotent-write settings it needs
(``spark.databricks.delta.write.txnAppId``/``txnVersion``, session-wide in Delta) are its
own: calls from several threads of one ``foreachBatch`` do not see each other's. The clone
also tags the commit (``userMetadata``), so the version and metrics reported are the
commit's own, whatever other writers commit meanwhile.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._compat import jvm_sessions, merge_counts
from .._layout import NO_LAYOUT, Layout, Partition
from .._plans import INTERPRETED, code_cache_entries, detached, row_bytes
from . import LOG, Clause, Commit, Table, merge_statement, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

TXN_APP = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
"""Whether a MERGE copies its source first (``auto``: any source not only of Delta tables);
``none`` for a source already held in memory that reads no table (deterministic)."""
TYPE_WIDENING = "delta.enableTypeWidening"
NTZ = "timestampNtz"
RETAINED_TXNS = "delta.setTransactionRetentionDuration"
DELETION_VECTORS = "delta.enableDeletionVectors"
DELETION_VECTORS_DEFAULT = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
"""The session setting for new tables' deletion vectors: when set, :meth:`DeltaTarget.create`
follows it; when unset, tables are created with deletion vectors on."""
INTERPRET_BYTES = 4 * 1024 * 1024
"""A MERGE into a table smaller than this (by its checksum file's size) evaluates its
expressions interpreted: compiling the generated Java of a MERGE of the rules (about 60
classes, compiled again every call when Spark's cache of 100 classes drops them between
calls) costs more than it saves on a table this small; on a bigger one, the interpreted
rewrite of the files it changes costs more (docs/apply.md, "Cost": the two cross at about
3 MB). 0 turns it off."""
KEPT_INTERPRET_BYTES = 1024 * 1024
"""The same, in a session whose cache keeps at least :data:`KEPT_CLASSES` compiled classes
(``local_session``'s 2,000; docs/deploy.md recommends it): a table's code is then compiled
once, not every call."""
KEPT_CLASSES = 1000
"""A cache of this many classes keeps a call's compiled MERGE (about 60 classes) for the
table's next call, beside what else the job compiles in between."""
REWRITE_BYTES = 16 * 1024 * 1024
"""A MERGE into a table smaller than this (by its checksum file's size) rewrites the files
it changes instead of writing deletion vectors beside them, as a table without them would:
on a table this small, rewriting a file costs less than writing its deletion vector and
reading it back on every later scan (docs/apply.md, "Cost"). 0 turns it off."""
SERIAL_BYTES = 4 * 1024 * 1024
"""A MERGE into a table smaller than this (by its checksum file's size), of a source held
in memory that is smaller too (its rows, counted, times Spark's default size of such a
row: :func:`~cdc_decode.spark._plans.row_bytes`), runs without adaptive
query execution, each shuffle in one partition (:data:`SERIAL`): adaptive execution runs a
job per stage and plans the rest of the MERGE again after each, which on a table this
small costs more than what it adapts (about 0.06 s of a 1.3 s call on 20,000 rows;
docs/apply.md, "Small micro-batches, end to end"). 0 turns it off."""
SERIAL = {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1"}
"""The settings of a MERGE of :data:`SERIAL_BYTES` (session settings of its clone)."""
BROADCAST_SOURCE_ROWS = 50_000
"""A MERGE into a table of at least :data:`REWRITE_BYTES` (one that writes deletion
vectors) of a source held in memory of at most this many rows, and of at most
:data:`BROADCAST_SOURCE_BYTES` by Spark's default size of its rows, broadcasts the
source: the MERGE's two inner joins with the table's files (the scan for the files it
touches, the rows its deletion vectors mark) then read the files where they are, where
without it they shuffle the key and the bookkeeping of every row of them (the held
source has no size estimate). -1: never."""
BROADCAST_SOURCE_BYTES = 64 * 1024 * 1024
"""... (:data:`BROADCAST_SOURCE_ROWS`)."""

DV_PERSISTENT = "spark.databricks.delta.merge.deletionVectors.persistent"
"""Delta's session setting (internal, on by default) for whether a MERGE into a table with
deletion vectors enabled writes them."""
TAG = "cdc_decode.apply_changes "
"""The start of the ``userMetadata`` of a commit of ours (then a unique id)."""

NEEDS_COLUMN_MAPPING = set(" ,;{}()\n\t=")
"""Characters Delta accepts in a column name only with column mapping."""
PARTITION_PREFIX = "_cdc_part_"
"""The start of the name of a partition column made for a transform (``partition_by=
["days(created_at)"]``: ``_cdc_part_days_created_at``), a column Delta generates from the
source column on every write (a generated column, ``GENERATED ALWAYS AS``)."""
_TIMES = ("date", "timestamp", "timestamp_ntz")


def is_path(target: str) -> bool:
    return "/" in target or "\\" in target or ":" in target


_PREVIEW_WIDENS = {"tinyint": ("smallint", "int"), "smallint": ("int",)}
"""What Delta 3.x's type widening (a preview there) changes: measured on Delta 3.3.2, which
refuses ``int`` to ``bigint``, ``float`` to ``double``, ``date`` to ``timestamp_ntz`` and
every decimal change (``DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP``)."""


def delta_version(spark: SparkSession) -> tuple[int, int]:
    """The session's Delta Lake release (``io.delta.VERSION`` of its jar), major and minor."""
    text = str(spark._jvm.io.delta.package.VERSION())
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


class DeltaTarget(Table):
    """A Delta table named by a path (anything with ``/`` or ``:``) or a catalog name."""

    def __init__(self, spark: SparkSession, target: str) -> None:
        super().__init__(spark, target)
        self.is_path = is_path(target)
        self.sql_name = f"delta.{quote(target)}" if self.is_path else target
        self._snap: Any = None
        self._props: tuple[Any, dict[str, str]] | None = None
        self._loaded = False

    # -- the snapshot --------------------------------------------------------------------

    def _log(self) -> Any:
        jvm = self.spark._jvm
        session = self.spark._jsparkSession
        delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
        if self.is_path:
            return delta_log.forTable(session, self.target)
        ident = session.sessionState().sqlParser().parseTableIdentifier(self.target)
        return delta_log.forTable(session, ident)

    def refresh(self) -> None:
        self._loaded = False
        self._snap = None

    def _snapshot(self) -> Any:
        """The log's current snapshot (``None`` for no table), read once until
        :meth:`refresh`."""
        if not self._loaded:
            self._loaded = True
            self._snap = None
            if not self.is_path and not self.spark.catalog.tableExists(self.target):
                return None
            log = self._log()
            none = self.spark._jvm.scala.Option.empty()
            snap = log.update(False, none, none)
            if snap.version() >= 0:
                self._snap = snap
        return self._snap

    def _configuration(self, snap: Any) -> dict[str, str]:
        """The snapshot's table properties, read once per snapshot: one py4j call for the
        metadata action's JSON (iterating the Scala map took two calls per entry)."""
        held = self._props
        if held is None or held[0] is not snap:
            metadata = json.loads(snap.metadata().json())["metaData"]
            held = self._props = (snap, dict(metadata.get("configuration") or {}))
        return dict(held[1])

    def exists(self) -> bool:
        return self._snapshot() is not None

    def schema(self) -> StructType:
        """The table's columns but the partition columns Delta generates
        (:data:`PARTITION_PREFIX`): Delta computes them on every write."""
        from pyspark.sql.types import StructType

        struct = StructType.fromJson(json.loads(self._snapshot().schema().json()))
        return StructType([f for f in struct.fields if not _generated(f.name)])

    def properties(self) -> dict[str, str]:
        snap = self._snapshot()
        return {} if snap is None else self._configuration(snap)

    def version(self) -> int | None:
        snap = self._snapshot()
        return None if snap is None else int(snap.version())

    def txn_version(self, app_id: str) -> int | None:
        """The newest batch id the table holds for ``app_id``: from the version's checksum
        file, which lists the markers when Delta computed them with the commit (no job);
        else from the snapshot's state, which Spark computes in jobs over the log (three
        jobs, about 0.4 s a call on a small table in an adaptive session)."""
        snap = self._snapshot()
        if snap is None:
            return None
        listed = self._checksum_txns(snap)
        if listed is not None:
            return listed.get(app_id)
        stored = snap.transactions().get(app_id)  # a Scala Option
        return int(stored.get()) if stored.isDefined() else None

    def _checksum_txns(self, snap: Any) -> dict[str, int] | None:
        """The replay markers the snapshot's checksum file lists (``setTransactions``), or
        ``None`` when it lists none (an older writer, more than Delta keeps there) or the
        table expires markers (``delta.setTransactionRetentionDuration``, which Delta
        applies to the snapshot's markers but not to those of a checksum)."""
        if RETAINED_TXNS in self._configuration(snap):
            return None
        checksum = snap.checksumOpt()
        if not checksum.isDefined():
            return None
        txns = checksum.get().setTransactions()
        if not txns.isDefined():
            return None
        listed = {}
        markers = txns.get().iterator()
        while markers.hasNext():
            marker = markers.next()
            listed[str(marker.appId())] = int(marker.version())
        return listed

    def _delta_table(self, session: SparkSession) -> Any:
        from delta.tables import DeltaTable

        if self.is_path:
            return DeltaTable.forPath(session, self.target)
        return DeltaTable.forName(session, self.target)

    def read(self) -> DataFrame:
        df = self._delta_table(self.spark).toDF()
        generated = [c for c in df.columns if _generated(c)]
        return df.drop(*generated) if generated else df

    # -- writing -------------------------------------------------------------------------

    def is_conflict(self, error: BaseException) -> bool:
        from delta.exceptions import (
            ConcurrentAppendException,
            ConcurrentDeleteDeleteException,
            ConcurrentDeleteReadException,
            ConcurrentTransactionException,
            ConcurrentWriteException,
            DeltaConcurrentModificationException,
            MetadataChangedException,
            ProtocolChangedException,
        )

        return isinstance(
            error,
            (
                DeltaConcurrentModificationException,
                ConcurrentWriteException,
                MetadataChangedException,
                ProtocolChangedException,
                ConcurrentAppendException,
                ConcurrentDeleteReadException,
                ConcurrentDeleteDeleteException,
                ConcurrentTransactionException,
            ),
        )

    def create(
        self,
        fields: Sequence[StructField],
        properties: Mapping[str, str],
        layout: Layout = NO_LAYOUT,
    ) -> None:
        from delta.tables import DeltaTable

        types = {f.name: f.dataType.simpleString() for f in fields}
        generated = [
            (p, partition_column(p), generation(p, types[p.column], self.target))
            for p in layout.partition_by
            if p.transform is not None
        ]
        if layout.partition_by and layout.cluster_by:
            raise ValueError(
                f"table {self.target}: a Delta table is either partitioned or clustered "
                "(liquid clustering), not both: give partition_by= or cluster_by= "
                "(nothing was written)"
            )
        props = dict(properties)
        if self.spark.conf.get(DELETION_VECTORS_DEFAULT, None) is None:
            # A MERGE then marks the replaced rows of a file in a deletion vector instead of
            # copying the file's other rows (docs/apply.md, "Cost").
            props.setdefault(DELETION_VECTORS, "true")
        if any(set(f.name) & NEEDS_COLUMN_MAPPING for f in fields):
            # Names with spaces and the like: Delta stores them only with column mapping.
            props.setdefault("delta.columnMapping.mode", "name")
        builder = DeltaTable.createIfNotExists(self.spark)
        builder = builder.location(self.target) if self.is_path else builder.tableName(self.target)
        for f in fields:
            builder = builder.addColumn(f.name, f.dataType, nullable=True)
        for _, name, (expression, data_type) in generated:
            builder = builder.addColumn(name, data_type, nullable=True,
                                        generatedAlwaysAs=expression)  # fmt: skip
        for key, value in props.items():
            builder = builder.property(key, value)
        if layout.partition_by:
            builder = builder.partitionedBy(
                *[p.column if p.transform is None else partition_column(p)
                  for p in layout.partition_by]
            )  # fmt: skip
        if layout.cluster_by:
            builder = builder.clusterBy(*layout.cluster_by)
        self.retrying("create", builder.execute)
        self.refresh()

    def add_columns(self, fields: Sequence[StructField]) -> None:
        self._support_ntz([f.dataType.simpleString() for f in fields])
        super().add_columns(fields)

    def _support_ntz(self, types: Sequence[str]) -> None:
        """Turns on the ``timestampNtz`` table feature before a ``timestamp_ntz`` column
        joins a table made without one: Delta adds the feature itself when a table is
        created with such a column, but refuses to add the column to a table without it
        (``DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT``)."""
        if any("timestamp_ntz" in t for t in types):
            snap = self._snapshot()
            if snap is not None and not snap.protocol().writerFeatureNames().contains(NTZ):
                self.set_properties({f"delta.feature.{NTZ}": "supported"})

    def widen_columns(self, types: Mapping[str, str]) -> None:
        """Delta's type widening (the ``typeWidening`` table feature, turned on by the
        first widening): ``ALTER TABLE … ALTER COLUMN c TYPE t``, metadata only.

        Raises:
            ValueError: before any change, for a widening the session's Delta cannot make
                (Delta 3.x widens only ``tinyint`` to ``smallint`` to ``int``)."""
        version = delta_version(self.spark)
        if version < (4, 0):
            stored = {f.name.lower(): f.dataType.simpleString() for f in self.schema().fields}
            for name, data_type in types.items():
                old = stored.get(name.lower())
                if not (old in _PREVIEW_WIDENS and data_type in _PREVIEW_WIDENS[old]):
                    raise ValueError(
                        f"table {self.target}: column {name} is {old}, and its values now "
                        f"need {data_type}; Delta {'.'.join(map(str, version))} (this "
                        "session's) widens only tinyint, smallint and int up to int: type "
                        "widening to other types needs Delta 4.0 or later (Spark 4). Nothing "
                        "was written: re-create the table with the wider column, or give "
                        "schemas= the wider type from the start"
                    )
        self._support_ntz(list(types.values()))
        if self.properties().get(TYPE_WIDENING) != "true":
            self.set_properties({TYPE_WIDENING: "true"})
        for name, data_type in types.items():
            statement = f"ALTER TABLE {self.sql_name} ALTER COLUMN {quote(name)} TYPE {data_type}"
            self.retrying("widen a column", lambda s=statement: self.spark.sql(s))
        self.refresh()

    def delete(self, condition: str) -> int:
        def run() -> int:
            row = self._session(None).sql(f"DELETE FROM {self.sql_name} WHERE {condition}").first()
            return int(row[0]) if row is not None and row[0] is not None else 0

        deleted = self.retrying("delete", run)
        self.refresh()
        return deleted

    def _session(self, txn: tuple[str, int] | None, tag: str | None = None) -> SparkSession:
        """A clone of the caller's session (its settings, the same SparkContext and
        cache) holding this write's own txn markers and commit tag."""
        session = self.clone_session()
        if txn is not None:
            session.conf.set(TXN_APP, txn[0])
            session.conf.set(TXN_VERSION, str(txn[1]))
        else:
            session.conf.unset(TXN_APP)
            session.conf.unset(TXN_VERSION)
        if tag is not None:
            session.conf.set(USER_METADATA, tag)
        return session

    def size_bytes(self) -> int | None:
        """The table's bytes from the version's checksum file (``.crc``, which Delta writes
        with every commit): no job. Without one, the snapshot's own sum over its files (a
        Spark job over the log's state, about 1.5 s on a small table)."""
        snap = self._snapshot()
        if snap is None:
            return None
        checksum = snap.checksumOpt()
        if checksum.isDefined():
            return int(checksum.get().tableSizeBytes())
        return int(snap.sizeInBytes())

    def warm(self) -> Callable[[], None]:
        """The snapshot's state (Delta's log replay and its sums, the Spark jobs a MERGE
        runs first, to list the table's files) computed in a thread of its own, in the
        session the MERGE will plan its reads in (:meth:`serial_session` for a small
        table). Delta keeps it with the snapshot, so the MERGE of the same version finds
        it, or waits for it when it is still being computed."""
        snap = self._snapshot()
        if snap is None:
            return lambda: None
        session = self.serial_session(0) or self.spark
        sessions = jvm_sessions(session)

        def compute() -> None:
            try:
                # Delta plans the snapshot's jobs in the thread's active session.
                sessions.setActiveSession(session._jsparkSession)
                try:
                    snap.sizeInBytes()
                finally:
                    sessions.clearActiveSession()
            except Exception as error:  # only a head start: the MERGE computes it again
                LOG.debug("table %s: its state was not computed ahead: %s", self.target, error)

        from pyspark import InheritableThread

        thread = InheritableThread(target=compute, name="cdc-decode-warm", daemon=True)
        thread.start()
        return thread.join

    def serial_session(self, source_bytes: int | None) -> SparkSession | None:
        if SERIAL_BYTES <= 0 or source_bytes is None or source_bytes >= SERIAL_BYTES:
            return None
        size = self.size_bytes() if self.exists() else 0
        if size is None or size >= SERIAL_BYTES:
            return None
        session = self.clone_session()
        for key, value in SERIAL.items():
            session.conf.set(key, value)
        return session

    def _interpret_below(self) -> int:
        """The table size under which its MERGE is interpreted (:data:`INTERPRET_BYTES`, or
        :data:`KEPT_INTERPRET_BYTES` where Spark keeps a call's compiled code)."""
        if code_cache_entries(self.spark) >= KEPT_CLASSES:
            return min(INTERPRET_BYTES, KEPT_INTERPRET_BYTES)
        return INTERPRET_BYTES

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
        from pyspark.sql import functions as F

        before = self.version()
        own = self.spark.conf.get(USER_METADATA, None)
        tag = None if own else f"{TAG}{uuid.uuid4().hex}"
        session = self._session(txn, tag)
        if materialized:
            # Held in memory and reading no table: Delta's copy of it would be a second.
            session.conf.set(MATERIALIZE_SOURCE, "none")
        size = self.size_bytes() if max(INTERPRET_BYTES, REWRITE_BYTES, SERIAL_BYTES) > 0 else None
        if size is not None and size < self._interpret_below():
            for key, value in INTERPRETED.items():
                session.conf.set(key, value)
        if materialized and size is not None and size < SERIAL_BYTES:
            held = row_bytes(source)
            if held is not None and rows is not None and rows * held < SERIAL_BYTES:
                for key, value in SERIAL.items():
                    session.conf.set(key, value)
        if size is not None and size < REWRITE_BYTES:
            session.conf.set(DV_PERSISTENT, "false")
        hinted = broadcast or (materialized and _broadcast(source, rows, size))
        if all(c.sql is not None for c in clauses):
            # The clauses' SQL text: one statement, parsed and planned by the JVM alone.
            view = f"_cdc_decode_source_{uuid.uuid4().hex}"
            frame = detached(source, session)  # a new leaf: the hint goes on it
            (F.broadcast(frame) if hinted else frame).createOrReplaceTempView(view)
            try:
                done = session.sql(merge_statement(self.sql_name, view, on, clauses)).first()
            finally:
                session.catalog.dropTempView(view)
        else:
            source = F.broadcast(source) if hinted else source
            builder = self._delta_table(session).alias("t").merge(source.alias("s"), on)
            for clause in clauses:
                values = {f"t.{quote(k)}": v for k, v in clause.values.items()}
                if clause.kind == "update":
                    builder = builder.whenMatchedUpdate(condition=clause.condition, set=values)
                else:
                    builder = builder.whenNotMatchedInsert(
                        condition=clause.condition, values=values
                    )
            return self._commit(before, tag, txn, merge_counts(builder.execute()))
        return self._commit(before, tag, txn, None if done is None else done.asDict())

    def _commit(
        self,
        before: int | None,
        tag: str | None,
        txn: tuple[str, int] | None,
        counts: dict | None = None,
    ) -> Commit:
        """The commit the MERGE just made: when the table moved by one version and the
        MERGE's result row (``counts``: ``num_affected_rows``, ``num_updated_rows``,
        ``num_deleted_rows``, ``num_inserted_rows``) says it wrote, that version and those
        counts; else found by its tag among the commits after ``before`` (by the newest
        MERGE when the session sets its own ``userMetadata``), from the table's history."""
        self.refresh()
        latest = self.version()
        start = -1 if before is None else before
        if counts and latest == start + 1 and counts.get("num_affected_rows"):
            changed = int(counts.get("num_updated_rows") or 0)
            changed += int(counts.get("num_inserted_rows") or 0)
            metrics = {k: str(v) for k, v in counts.items() if v is not None}
            return Commit(version=latest, written=True, metrics=metrics, changed_rows=changed)
        mine = None
        if latest is not None and latest > start:
            history = self._delta_table(self.spark).history(latest - start)
            rows = history.select("version", "operation", "operationMetrics", "userMetadata")
            for row in sorted(rows.collect(), key=lambda r: r["version"]):
                if row["version"] <= start or row["operation"] != "MERGE":
                    continue
                if tag is None or row["userMetadata"] == tag:
                    mine = row
        if mine is not None:
            metrics = dict(mine["operationMetrics"] or {})
            updated = metrics.get(
                "numTargetRowsMatchedUpdated", metrics.get("numTargetRowsUpdated")
            )
            return Commit(
                version=int(mine["version"]),
                written=True,
                metrics=metrics,
                source_rows=_int(metrics.get("numSourceRows")),
                changed_rows=_int(metrics.get("numTargetRowsInserted", 0)) + _int(updated or 0),
            )
        if txn is not None and self.check_txn(*txn):
            # Delta skipped it: another run committed this batch id in the meantime.
            return Commit(version=latest, skipped=True)
        return Commit(version=latest)


def _broadcast(source: DataFrame, rows: int | None, size: int | None) -> bool:
    """Whether a MERGE broadcasts its held ``source`` of ``rows`` rows into a table of
    ``size`` bytes (:data:`BROADCAST_SOURCE_ROWS`)."""
    if rows is None or rows > BROADCAST_SOURCE_ROWS or size is None or size < REWRITE_BYTES:
        return False
    held = row_bytes(source)
    return held is not None and rows * held <= BROADCAST_SOURCE_BYTES


def _int(text: str | None) -> int | None:
    return None if text is None else int(text)


def partition_column(partition: Partition) -> str:
    """The name of the column Delta generates for a partition transform."""
    return f"{PARTITION_PREFIX}{partition.transform}_{partition.column}"


def _generated(name: str) -> bool:
    return name.startswith(PARTITION_PREFIX)


def generation(partition: Partition, source_type: str, target: str) -> tuple[str, str]:
    """The expression and type of the generated column of an Iceberg-style transform on
    Delta, written as Delta turns filters on the source column into partition filters
    (``CAST(c AS DATE)``, ``YEAR(c)``, ``DATE_FORMAT(c, 'yyyy-MM')``, ``SUBSTRING``).

    Raises:
        ValueError: a time transform of a column that is no date or timestamp, a
            ``truncate`` of one that is no string or integer."""
    column = quote(partition.column)
    transform, width = partition.transform, partition.width
    if transform in ("years", "months", "days", "hours"):
        if source_type not in _TIMES or (transform == "hours" and source_type == "date"):
            raise ValueError(
                f"table {target}: partition_by {partition.sql()}: {partition.column} is "
                f"{source_type}, and {transform} takes a "
                + ("timestamp" if transform == "hours" else "date or a timestamp")
                + " (nothing was written)"
            )
        return {
            "years": (f"YEAR({column})", "int"),
            "months": (f"DATE_FORMAT({column}, 'yyyy-MM')", "string"),
            "days": (f"CAST({column} AS DATE)", "date"),
            "hours": (f"DATE_FORMAT({column}, 'yyyy-MM-dd-HH')", "string"),
        }[transform]
    if transform == "bucket":
        return f"PMOD(HASH({column}), {width})", "int"
    if source_type == "string":
        return f"SUBSTRING({column}, 1, {width})", "string"
    if source_type in ("tinyint", "smallint", "int", "bigint"):
        return f"{column} - PMOD({column}, {width})", source_type
    raise ValueError(
        f"table {target}: partition_by {partition.sql()}: {partition.column} is "
        f"{source_type}, and truncate takes a string or an integer (nothing was written)"
    )
