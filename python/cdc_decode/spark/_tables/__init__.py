"""What :func:`cdc_decode.spark.apply_changes` needs from a table format, behind one seam.

The rules of applying changes (reduce, guard, tombstones, partial images, SCD type 2) are
written once, in :mod:`cdc_decode.spark._apply_rules`; a table format supplies the
operations they end in: whether the table exists, its schema, properties and version,
create and add columns, one ``MERGE`` (with an idempotent-write marker), a ``DELETE``, the
stored marker of an application. :class:`Table` is that seam; :mod:`.delta` is the Delta
Lake one. Every write is retried on the format's write conflicts (a concurrent
``OPTIMIZE``, another writer), bounded, with backoff: the apply rules make a write that is
run again change nothing it already changed.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from .._layout import NO_LAYOUT, Layout
from .._sql import Clause, literal, merge_statement, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField, StructType

__all__ = ["Clause", "Commit", "Table", "literal", "merge_statement", "open_table", "quote"]

LOG = logging.getLogger("cdc_decode.spark.apply")

ATTEMPTS = 6
"""Tries of one write before a conflict is raised (the first and five retries)."""
BACKOFF = 0.25
"""Seconds before the first retry; doubled each time, with up to half again of jitter."""

T = TypeVar("T")


@dataclass
class Commit:
    """What one write did.

    Attributes:
        version: the table's version after the write (the write's own when it committed).
        written: the write committed a version of its own.
        skipped: the table already held this ``(app_id, batch_id)``: nothing was run.
        metrics: the commit's operation metrics, as the format reports them.
        source_rows: a MERGE's source rows (``None``: not reported).
        changed_rows: the target rows a MERGE inserted or updated (``None``: not
            reported).
    """

    version: int | None = None
    written: bool = False
    skipped: bool = False
    metrics: dict[str, str] = field(default_factory=dict)
    source_rows: int | None = None
    changed_rows: int | None = None


class Table:
    """A table of one format, by path or catalog name. Subclasses implement the
    operations; the retry loop and the replay-marker check are shared.

    Attributes:
        spark: the caller's session.
        target: the path or name as given.
        sql_name: the table as SQL names it.
        retries: write conflicts retried so far by this object.
    """

    def __init__(self, spark: SparkSession, target: str) -> None:
        self.spark = spark
        self.target = target
        self.sql_name = target
        self.retries = 0

    # -- reading -----------------------------------------------------------------------

    def exists(self) -> bool:
        raise NotImplementedError

    def schema(self) -> StructType:
        raise NotImplementedError

    def properties(self) -> dict[str, str]:
        raise NotImplementedError

    def version(self) -> int | None:
        raise NotImplementedError

    def txn_version(self, app_id: str) -> int | None:
        """The highest batch id committed for ``app_id`` (``None``: none)."""
        raise NotImplementedError

    def read(self) -> DataFrame:
        raise NotImplementedError

    def column_type(self, data_type: DataType) -> DataType:
        """The type a column of ``data_type`` has once stored (and reads back as): the
        format may store a wider one (Iceberg keeps ``tinyint`` as ``int``)."""
        return data_type

    def refresh(self) -> None:
        """Read the table's current state again (after this object or others wrote)."""

    # -- writing -----------------------------------------------------------------------

    def create(
        self,
        fields: Sequence[StructField],
        properties: Mapping[str, str],
        layout: Layout = NO_LAYOUT,
    ) -> None:
        """Make the table of ``fields`` with ``properties`` and ``layout`` (its clustering
        and partitions, :mod:`.._layout`), or raise before it is made: a layout the
        format cannot make is a ``ValueError`` naming what it can."""
        raise NotImplementedError

    def add_columns(self, fields: Sequence[StructField]) -> None:
        """``ALTER TABLE ... ADD COLUMNS``, each column of its :meth:`column_type`."""
        spec = ", ".join(
            f"{quote(f.name)} {self.column_type(f.dataType).simpleString()}" for f in fields
        )
        self.retrying(
            "add columns",
            lambda: self.spark.sql(f"ALTER TABLE {self.sql_name} ADD COLUMNS ({spec})"),
        )
        self.refresh()

    def set_properties(self, properties: Mapping[str, str]) -> None:
        spec = ", ".join(f"{literal(k)} = {literal(v)}" for k, v in properties.items())
        self.retrying(
            "set properties",
            lambda: self.spark.sql(f"ALTER TABLE {self.sql_name} SET TBLPROPERTIES ({spec})"),
        )
        self.refresh()

    def widen_columns(self, types: Mapping[str, str]) -> None:
        """Change each named column to the wider Spark type (``{"qty": "bigint"}``): a
        change the format makes without rewriting the data, or an error."""
        raise NotImplementedError

    def merge(
        self,
        source: DataFrame | Callable[[], DataFrame],
        on: str,
        clauses: Sequence[Clause],
        txn: tuple[str, int] | None = None,
        *,
        materialized: bool = False,
        rows: int | None = None,
        broadcast: bool = False,
    ) -> Commit:
        """One ``MERGE`` of ``source`` (alias ``s``) into the table (alias ``t``) on the
        SQL condition ``on``, its clauses in order; with ``txn`` (``app_id``,
        ``batch_id``) the replay marker is written with it, and a marker the table
        already holds skips it (:meth:`check_txn`). Retried on conflicts, the marker
        checked again before each try. ``source`` may be a function that makes the frame
        from the table's rows (and holds it): called once per try, and again while another
        writer commits between the start of its read and the ``MERGE``, each such read
        counted in :attr:`retries`. ``materialized``: ``source`` is held in memory
        (persisted and counted) and reads no table: a format need not copy it first;
        ``rows``: how many rows it holds, when counted; ``broadcast``: the MERGE broadcasts
        ``source`` (a frame of few rows), as a hint on it would ask (the formats read a
        source as a new leaf over its rows, which keeps no hint)."""

        def run() -> Commit:
            self.refresh()
            if txn is not None and self.check_txn(*txn):
                return Commit(version=self.version(), skipped=True)
            if not callable(source):
                return self.merge_once(
                    source, on, clauses, txn, materialized=materialized, rows=rows,
                    broadcast=broadcast,
                )  # fmt: skip
            for attempt in range(ATTEMPTS):
                read_at = self.version()
                frame = source()
                self.refresh()
                if self.version() == read_at:
                    return self.merge_once(
                        frame, on, clauses, txn, materialized=materialized, rows=rows,
                        broadcast=broadcast,
                    )  # fmt: skip
                self.retries += 1
                LOG.warning(
                    "MERGE of %s: the table changed while its rows were read, read %d again",
                    self.target,
                    attempt + 1,
                )
                if txn is not None and self.check_txn(*txn):
                    return Commit(version=self.version(), skipped=True)
            raise RuntimeError(
                f"MERGE of {self.target}: the table changed each of the {ATTEMPTS} times its "
                "rows were read (another writer commits to it without pause)"
            )

        return self.retrying("MERGE", run)

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
        """One try of :meth:`merge` on the freshly read table, its marker not yet held:
        the ``MERGE`` with the marker, and the commit it made."""
        raise NotImplementedError

    def delete(self, condition: str) -> int:
        """Delete the rows matching the SQL ``condition``; the rows deleted."""
        raise NotImplementedError

    def size_bytes(self) -> int | None:
        """The table's data size as its own metadata says (no scan of the data), or
        ``None`` where the format does not say it cheaply."""
        return None

    def warm(self) -> Callable[[], None]:
        """Start computing, in the background, the state of the table's current version
        that its next write reads first (where the format has such a step); the write
        waits for it, or computes it itself when the table moved meanwhile. Returns the
        wait for that work to end (it never raises)."""
        return lambda: None

    def serial_session(self, source_bytes: int | None) -> SparkSession | None:
        """A clone of the caller's session that plans without adaptive execution, each
        shuffle in one partition, for steps over this table and a source of
        ``source_bytes`` both too small for adaptive execution to pay for its jobs; else
        (and where the format does not say its size cheaply) ``None``."""
        return None

    # -- shared ------------------------------------------------------------------------

    def clone_session(self) -> SparkSession:
        """A clone of the caller's session: its settings and temporary views, the same
        SparkContext and cache; settings made on it (a write's markers) stay its own."""
        from pyspark.sql import SparkSession

        return SparkSession(self.spark.sparkContext, self.spark._jsparkSession.cloneSession())

    def is_conflict(self, error: BaseException) -> bool:
        """A write conflict that a retry of the same write resolves."""
        return False

    def txn_refused(self) -> str | None:
        """Why this table cannot keep replay markers (``app_id``/``batch_id``) with its
        commits in this session, or ``None`` where it can."""
        return None

    def check_txn(self, app_id: str, batch_id: int) -> bool:
        """Whether ``(app_id, batch_id)`` is already in the table (a replay: skip it).

        Raises:
            ValueError: the table holds a higher batch id for ``app_id``: a new checkpoint
                (batch ids from 0 again) or a second query with the same ``app_id``.
        """
        stored = self.txn_version(app_id)
        if stored is None or batch_id > stored:
            return False
        if batch_id == stored:
            return True
        raise ValueError(
            f"table {self.target} already holds batch {stored} of app_id {app_id!r}; this is "
            f"batch {batch_id}: a new checkpoint (batch ids start at 0 again) or another "
            "query with the same app_id? An app_id belongs to one checkpoint and one target "
            "table: give the new checkpoint a new app_id (nothing was written)"
        )

    def retrying(self, what: str, write: Callable[[], T]) -> T:
        """Run ``write``; on a write conflict wait and run it again, up to
        :data:`ATTEMPTS` times, counting the retries in :attr:`retries`."""
        for attempt in range(ATTEMPTS):
            try:
                return write()
            except Exception as error:
                if not self.is_conflict(error) or attempt == ATTEMPTS - 1:
                    raise
                wait = BACKOFF * 2**attempt * (1 + random.random() / 2)
                self.retries += 1
                LOG.warning(
                    "%s of %s: write conflict (%s), retry %d in %.2f s",
                    what,
                    self.target,
                    type(error).__name__,
                    attempt + 1,
                    wait,
                )
                self.refresh()
                time.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover


def open_table(spark: SparkSession, target: str, format: str | None = None) -> Table:
    """The :class:`Table` of ``target`` in ``format`` (``"delta"`` or ``"iceberg"``); by
    default the catalog says: a name in a catalog of Iceberg's ``SparkCatalog`` is an
    Iceberg table, and so is a name in Iceberg's ``SparkSessionCatalog`` (``spark_catalog``)
    unless it names a table Iceberg does not load; anything else (a path, a name in Spark's
    or Delta's session catalog) a Delta one."""
    from .delta import DeltaTarget, is_path

    catalog = None
    if format in (None, "iceberg") and not is_path(target):
        from .iceberg import iceberg_catalog

        catalog = iceberg_catalog(spark, target)
    if format is None:
        format = "delta" if catalog is None else "iceberg"
    if format == "iceberg":
        if catalog is None:
            raise ValueError(
                f"{target!r} is not a table name in an Iceberg catalog of this session (a "
                "catalog whose spark.sql.catalog.<name> is org.apache.iceberg.spark.SparkCatalog"
                ", or an Iceberg table in org.apache.iceberg.spark.SparkSessionCatalog)"
            )
        from .iceberg import IcebergTarget

        return IcebergTarget(spark, target, catalog)
    if format != "delta":
        raise ValueError(f"unknown table format {format!r} (supported: delta, iceberg)")
    return DeltaTarget(spark, target)
