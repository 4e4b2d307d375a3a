"""Apply one table's change events to a Delta Lake table that mirrors the source.

>>> from cdc_decode import spark as cdc_spark
>>> events = cdc_spark.decode(kafka_df, "tencent-dts", schema="id bigint, name string")
>>> result = cdc_spark.apply_changes(events, "/lake/shop/users")        # SCD type 1
>>> cdc_spark.current_rows(spark, "/lake/shop/users").show()            # the source table
>>> cdc_spark.apply_changes(events, "shop.users_history", scd_type=2)   # every version

Every batch is reduced to one row per key and written with one ``MERGE``. The table keeps,
beside the source's columns, the sequence of each row's newest change and of each
column's last write, so a change decides exactly what it is newer than: duplicates,
reordered deliveries, late partial images and a replayed micro-batch leave the table equal
to the source. A delete keeps the row as a tombstone, so a late, older insert cannot bring
it back. The rules are in :mod:`._apply_rules`, the table format (Delta) behind
:mod:`._tables`; docs/apply.md gives every rule.

Needs ``delta-spark`` and the Delta jars on the session (Delta 4.4.0 runs on Spark 4.2),
or, for a table of an Iceberg catalog, Iceberg's runtime (1.12 runs on Spark 4.1).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._schema import OPS
from .._typed import AFTER_ABSENT
from . import _apply_rules as rules
from . import _metadata
from . import _rules_sql as rules_sql
from ._apply_rules import ABSENT as ABSENT
from ._apply_rules import BASE_SEQUENCE as BASE_SEQUENCE
from ._apply_rules import COLUMN_SEQUENCES as COLUMN_SEQUENCES
from ._apply_rules import CURRENT as CURRENT
from ._apply_rules import DELETED as DELETED
from ._apply_rules import END_SEQUENCE as END_SEQUENCE
from ._apply_rules import END_TIME as END_TIME
from ._apply_rules import EVENT_TIME as EVENT_TIME
from ._apply_rules import INTERNAL, Images, col
from ._apply_rules import REMOVE_OPS as REMOVE_OPS
from ._apply_rules import ROW_OPS as ROW_OPS
from ._apply_rules import SCD1_COLUMNS as SCD1_COLUMNS
from ._apply_rules import SCD2_COLUMNS as SCD2_COLUMNS
from ._apply_rules import SEQUENCE as SEQUENCE
from ._apply_rules import START_SEQUENCE as START_SEQUENCE
from ._apply_rules import START_TIME as START_TIME
from ._apply_rules import UPSERT_OPS as UPSERT_OPS
from ._layout import NO_LAYOUT, Layout, layout
from ._plans import (
    INTERPRETED,
    batch_bytes,
    built_without_call_sites,
    estimated_bytes,
    held,
    in_session,
)
from ._sql import in_list, literal
from ._tables import Clause, Commit, Table, open_table, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["ApplyResult", "StaleChangesWarning", "apply_changes", "current_rows"]

KEYS_PROPERTY = "cdc_decode.keys"
"""The table property holding the key columns (a JSON list), set when the table is made."""
HORIZON_PROPERTY = "cdc_decode.purgeHorizon"
"""The table property holding the purge horizon: the newest purged delete's sequence
(hex). A key the table does not hold takes no change up to it."""
TRUNCATE_PROPERTY = "cdc_decode.truncateHorizon"
"""The table property holding the newest applied ``truncate``'s sequence (hex): no change
up to it is written (every row of the table was deleted there)."""
PROPERTIES_PROPERTY = "cdc_decode.properties"
"""The table property holding the ``properties=`` last set (JSON), so that they are set
again only when the ones given change (a format may store a value otherwise than given)."""
TRUNCATE_TIME_PROPERTY = "cdc_decode.truncateTime"
"""That ``truncate``'s event time (microseconds since the epoch; absent when unknown)."""

QUERY_ID = "sql.streaming.queryId"
"""The local property Spark sets in a streaming query's ``foreachBatch``: its id, kept in
the checkpoint (a new checkpoint, a new id)."""

BROADCAST_KEYS = 50_000
"""A type 1 batch folded to at most this many keys is resolved against the table's rows of
its keys and broadcast into a MERGE that only sets columns: the table's files are then
joined with it where they are read, and only their keys and bookkeeping are read by the
MERGE (docs/apply.md, "Cost")."""

RESOLVE_BYTES = 256 * 1024 * 1024
"""A batch is resolved that way (:data:`BROADCAST_KEYS`) only on a table of more than this
many bytes; on a smaller one, and on a format that does not say its size (Iceberg), the
rules ride in one ``MERGE``'s clauses (:mod:`._rules_sql`), which reads the table once."""

ONE_TASK_BYTES = 4 * 1024 * 1024
"""A type 1 batch smaller than this (``FOLD_INTERPRET_BYTES``'s measure) is read and folded
in one task (``coalesce(1)``): no shuffle before the fold. 0 turns it off."""
FOLD_INTERPRET_BYTES = 4 * 1024 * 1024
"""A batch smaller than this (by the optimizer's estimate of its rows, column files' at
``_plans.COLUMNAR_FILE_FACTOR`` times their size, or a Kafka micro-batch's records at
``_plans.KAFKA_RECORD_BYTES`` each: ``_plans.batch_bytes``) is
read, folded and counted interpreted, in a clone of the caller's session: compiling the
generated code of the fold's plan costs more than it saves on a streaming micro-batch
(docs/apply.md, "Cost"). 0 turns it off."""
WARM_AHEAD = True
"""The table's state (its files, which a MERGE lists first) is computed in the background
while the batch is read and folded (``Table.warm``). False: the MERGE computes it."""

PARTIAL_TABLES_KEPT = 10_000
"""How many tables :data:`_PARTIAL_TABLES` remembers (forgotten all at once past it)."""

_PARTIAL_TABLES: set[tuple[str, str]] = set()
"""Tables (format, name or path) into which this process applied a batch whose upserts
lacked a column: their batches fold per column from the start, not whole images first."""

STALE_ATTEMPTS = 5
"""How many times a resolved batch is resolved again when another writer changed its rows
between the read and the MERGE."""

STALE_SHARE = 0.5
"""A batch warns (``on_stale``) when more than this share of its keys were stale ..."""
STALE_MINIMUM = 10
"""... and at least this many."""


class StaleChangesWarning(UserWarning):
    """Most of a batch's keys held only changes older than the table's rows: a source
    whose sequence went backwards (failover, ``RESET MASTER``, a re-sync, a new backfill)
    or a replay without ``app_id``. docs/apply.md, "Stale changes"."""


@dataclass
class ApplyResult:
    """What one :func:`apply_changes` call did.

    Attributes:
        events: rows in the input.
        changes: row changes among them (``insert``, ``read``, ``update``,
            ``update_before``, ``update_after``, ``delete``).
        applied: of those, the row changes given to the ``MERGE`` (keyed and sequenced;
            the ``MERGE`` writes what is newer than the table's rows: ``stale`` counts the
            keys it left alone). ``events == applied + unkeyed + unsequenced + errors +
            sum(other.values())``: every event is accounted for (:meth:`accounted`).
        keys: distinct keys those changes touched (rows of the ``MERGE``'s source).
        stale: of those keys, the ones whose changes were all older than what the table
            held (no column written), or older than the purge horizon for a key the
            table does not hold: nothing written for them (type 1; from the ``MERGE``'s
            metrics).
        unkeyed: row changes with a sequence whose images hold no value for a key
            column; not applied.
        unsequenced: row changes without a sequence (``sequence_by`` null); not applied.
        errors: error rows (``op = "error"``: messages that did not decode); never
            applied (``on_invalid="raise"``: an error before anything is written).
        other: the other events by ``op`` (``begin``, ``commit``, ``heartbeat``, ``ddl``,
            ``truncate``, ``tombstone`` …); never applied, but for ``truncate``.
        ddl: the ``ddl`` statements seen, in sequence order; reported, not applied.
        key_changes: updates that moved a row to another key.
        unconverted: generic events: per column, the image values (``after``; ``before``
            for key columns) whose text did not convert to the column's type (written as
            null; ``on_invalid="raise"`` raises instead).
        unknown_columns: generic events: image keys that are no column of the table (even
            ignoring case); their values are not written.
        absent_columns: columns that no upsert of the batch carried (only for batches with
            partial images: a renamed or misspelt column shows here batch after batch).
        added_columns: columns this call added to the table (schema evolution).
        created: whether this call created the table.
        version: the table's version after the call.
        metrics: the ``MERGE``'s Delta operation metrics (``numTargetRowsInserted``,
            ``numTargetRowsUpdated``, …), as Delta reports them; on Iceberg, the summary of
            the ``MERGE``'s snapshot.
        rows_written: target rows the ``MERGE`` inserted or updated, from those metrics
            (0 when nothing was written).
        skipped: ``True`` when the table already held this ``(app_id, batch_id)``: the
            batch was not read and nothing was written (the counts are zero).
        retries: write conflicts (a concurrent ``OPTIMIZE``, another writer) after which
            a write was run again.
        purged: tombstones removed by ``tombstone_retention``.
        truncated: the batch held a ``truncate`` not older than the table's last one, and
            it was applied (every value written before it deleted).
    """

    events: int = 0
    changes: int = 0
    applied: int = 0
    keys: int = 0
    stale: int = 0
    unkeyed: int = 0
    unsequenced: int = 0
    errors: int = 0
    other: dict[str, int] = field(default_factory=dict)
    ddl: list[str] = field(default_factory=list)
    key_changes: int = 0
    unconverted: dict[str, int] = field(default_factory=dict)
    unknown_columns: list[str] = field(default_factory=list)
    absent_columns: list[str] = field(default_factory=list)
    added_columns: list[str] = field(default_factory=list)
    created: bool = False
    version: int | None = None
    metrics: dict[str, str] = field(default_factory=dict)
    rows_written: int = 0
    skipped: bool = False
    retries: int = 0
    purged: int = 0
    truncated: bool = False

    def accounted(self) -> bool:
        """Whether every event is applied, an error, or not applied for a counted reason
        (a replay skipped reads no event: its counts are zero)."""
        counted = self.applied + self.unkeyed + self.unsequenced + self.errors
        return self.events == counted + sum(self.other.values())


@built_without_call_sites
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
    on_ddl: str = "raise",
    on_stale: str = "warn",
    on_invalid: str = "raise",
    properties: Mapping[str, str] | None = None,
    cluster_by: str | Sequence[str] | None = None,
    partition_by: str | Sequence[str] | None = None,
    metadata_columns: bool | Sequence[str] | None = None,
) -> ApplyResult:
    """Apply one table's change events to a Delta table, creating it when absent.

    Works as a batch call and inside ``foreachBatch`` (pass ``batch_id`` and an
    ``app_id`` to also use Delta's idempotent-write markers). Calls for different tables
    may run at once from threads. Every rule is in docs/apply.md; in short:

    - ``insert``, ``read``, ``update`` and ``update_after`` upsert the ``after`` image;
      ``delete`` and ``update_before`` remove the row of the ``before`` image's key; an
      ``update`` whose key changed removes the old key and upserts the new one, taking
      the old row's values for the columns its image lacks.
    - Each column takes the newest value (by ``sequence_by``) any change carried for it:
      changes older than what the table holds are ignored, a late partial image fills the
      columns no newer change wrote. Deleted rows stay as tombstones (``_cdc_deleted``),
      so a late, older change cannot bring them back. :func:`current_rows` reads the
      live rows.
    - A column absent from an image keeps the stored value; a null overwrites it. Typed
      events say which columns their ``after`` image lacked in ``after_absent``
      (docs/typed.md); generic images (``map<string, string>``) by their keys, matched to
      the columns ignoring case. Typed frames without an ``after_absent`` column are
      taken as whole images (``ignore_null_updates=True`` makes a null keep the stored
      value instead).
    - A column of the events that the table lacks is added to it; a column of the table
      that the events lack, or of another type, is a ``ValueError`` naming both.
    - A ``truncate`` deletes every row at its sequence (type 2: closes every live
      version); a change older than it is not applied afterwards.
    - Error rows and other non-row events (``begin``, ``commit``, ``ddl`` …) are counted
      in the result, never written; ``ddl`` statements are reported, not applied.

    Args:
        events: one table's change events: ``decode(df, fmt, schema=...)``, one frame of
            ``decode(df, fmt, tables=...)``, or generic events (``after`` a
            ``map<string, string>``) with ``schema=``. It needs ``op``, ``before``,
            ``after`` and the ``sequence_by`` column; ``event_time``, ``primary_key``,
            ``ddl`` and ``after_absent`` are used when present.
        target: a Delta table path (``/lake/users``, ``s3://…``; anything with ``/`` or
            ``:``) or a catalog table name (``shop.users``). A name in a catalog of
            Iceberg's ``SparkCatalog`` (``lake.shop.users``) is an Apache Iceberg table, and
            so is a new or Iceberg table named in Iceberg's ``SparkSessionCatalog``
            (docs/iceberg.md).
        keys: the key columns; by default the ones stored with the table, else (a new
            table) the events' ``primary_key``. Stored with the table when it is made,
            and checked on every call.
        sequence_by: the column ordering the changes: ``binary`` (compared as unsigned
            bytes, as ``sequence`` is), or an integer or timestamp column (converted to 8
            bytes that order as the numbers do).
        scd_type: ``1`` (the table equals the source) or ``2`` (one row per version, with
            start and end sequence and event time, and a current flag).
        schema: for generic events only: the table's columns (Spark DDL or a pyarrow
            schema); map values are converted to their types with Spark's ``try_cast``.
            Without it, the existing table's columns are used.
        ignore_null_updates: a null in an ``after`` image keeps the stored value (for
            sources that send absent columns as nulls). A null can then never be written
            over a value.
        tombstone_retention: type 1: forget tombstones whose delete's event time is this
            much older than the newest row change of the batch (or than the wall clock,
            if that is earlier). The newest purged delete's sequence is kept with the
            table: a key the table no longer holds takes no change up to it. ``None``
            (the default) keeps tombstones for ever.
        app_id: with ``batch_id``: Delta's ``txnAppId`` (Iceberg: a property of the
            commit's snapshot summary). A batch id the table already
            holds for this app id is skipped (``ApplyResult.skipped``); a lower one is a
            ``ValueError`` (an ``app_id`` belongs to one checkpoint and one table).
        batch_id: the ``foreachBatch`` batch id (Delta's ``txnVersion``).
        on_ddl: ``"raise"`` (the default): a ``ddl`` event that renames or drops a
            column the table has is a ``ValueError`` before anything is written;
            ``"report"``: only reported in ``ApplyResult.ddl``.
        on_stale: ``"warn"`` (the default): a :class:`StaleChangesWarning` when most of
            the batch's keys (more than half, and at least 10) were stale; ``"raise"``: a
            ``ValueError`` then (after the batch is written); ``"ignore"``.
        on_invalid: what a change that cannot be applied as it was sent does: an error
            row (a message that did not decode) and, for generic events, a value that does
            not convert to its column's type. ``"raise"`` (the default): a ``ValueError``
            naming the column and a value (or the error row's error), before anything is
            written; ``"count"``: the error rows are not applied and a value that does not
            convert is written as null, each counted (``ApplyResult.errors``,
            ``ApplyResult.unconverted``). ``sync`` takes the same option.
        properties: table properties (``{"delta.appendOnly": "false"}``,
            ``{"write.target-file-size-bytes": "134217728"}``) set when the table is made,
            and again, in one change of the table, whenever the ones given differ from
            the ones last given (kept with the table as ``cdc_decode.properties``). A
            property no longer given is left as it is. Names starting ``cdc_decode.`` are
            the library's own and refused.
        cluster_by: columns the table is clustered by when it is made: Delta's liquid
            clustering (``CLUSTER BY``), Iceberg's sort order (``WRITE ORDERED BY``). A
            table that exists keeps its own layout.
        partition_by: the table's partitions when it is made: columns (``"region"``) or
            Iceberg's partition transforms (``"days(created_at)"``, ``"bucket(16, id)"``),
            on Delta as generated columns (``_cdc_part_days_created_at``; docs/sync.md,
            "Table layout"). A Delta table is partitioned or clustered, not both.
        metadata_columns: event columns to keep in the table beside the source's, each as
            ``_cdc_meta_<name>``: ``op``, ``event_time``, ``capture_time``, ``position``,
            ``tx_id``, ``source_db``, ``source_schema``, ``source_table``, and
            ``kafka_topic``, ``kafka_partition``, ``kafka_offset`` (Kafka's columns, kept
            by ``decode``); ``True`` for ``op``, ``event_time``, ``capture_time``,
            ``position``, ``tx_id``. A row holds those of the newest change that wrote it
            (a history version: of its change, a delete's too). A source column starting
            ``_cdc_meta_`` is then refused; a table's metadata column not asked for is an
            error, as a table column the events lack is (docs/sync.md, "Metadata columns").

    Returns:
        An :class:`ApplyResult` with the counts.

    Raises:
        ValueError: no key columns (none given, none in the events), a key column that is
            not a column of the images, keys other than the table's, a table column
            missing from the events or of another type, columns whose names differ only
            in case, an unknown option, a lower ``batch_id`` than the table holds for
            ``app_id``, a renamed or dropped column (``on_ddl``), or generic events
            without a table schema.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType, StructType

    if scd_type not in (1, 2):
        raise ValueError(f"scd_type must be 1 or 2, not {scd_type!r}")
    if (app_id is None) != (batch_id is None):
        raise ValueError("give app_id and batch_id together (Delta's txnAppId/txnVersion)")
    for name, value, allowed in (
        ("on_ddl", on_ddl, ("raise", "report")),
        ("on_stale", on_stale, ("warn", "raise", "ignore")),
        ("on_invalid", on_invalid, ("count", "raise")),
    ):
        if value not in allowed:
            raise ValueError(
                f"{name} must be one of {', '.join(map(repr, allowed))}, not {value!r}"
            )
    wanted = _properties(properties)
    metadata = _metadata.names(metadata_columns)
    if tombstone_retention is not None and scd_type == 2:
        raise ValueError("tombstone_retention is for scd_type=1: a history keeps its rows")
    fields = {f.name: f for f in events.schema.fields}
    for needed in ("op", "before", "after", sequence_by):
        if needed not in fields:
            raise ValueError(
                f"the events have no {needed!r} column (columns: {', '.join(events.columns)})"
            )
    spark = events.sparkSession
    table = open_table(spark, target)
    exists = table.exists()
    refused = None if app_id is None else table.txn_refused()
    if refused is not None:
        raise ValueError(refused)
    if app_id is not None and exists and table.check_txn(app_id, batch_id):
        _drain(events)
        return ApplyResult(skipped=True, version=table.version())
    # The batch's size (no job: the optimizer's estimate, or a Kafka micro-batch's records),
    # for both choices it makes: the fold interpreted, a type 1 fold in one task. A replay
    # skipped above needs neither.
    size = batch_bytes(events) if max(FOLD_INTERPRET_BYTES, ONE_TASK_BYTES) > 0 else None
    one_task = scd_type == 1 and size is not None and size < ONE_TASK_BYTES
    events = _interpreted(events, table, size)

    image_type = fields["after"].dataType
    generic = isinstance(image_type, MapType)
    if generic:
        columns = _generic_columns(schema, table, target, metadata)
    elif isinstance(image_type, StructType):
        if schema is not None:
            raise ValueError("schema= is for generic events; typed events carry their columns")
        columns = list(image_type.fields)
    else:
        raise ValueError(f"'after' must be a struct or a map, not {image_type.simpleString()}")
    if metadata:
        _metadata.check_source([f.name for f in columns], target)
        events, added = _metadata.with_metadata(events, metadata, generic)
        columns = [*columns, *added]
    names = [f.name for f in columns]
    _check_names(names)

    optional = [
        c for c in ("event_time", "primary_key", "ddl", "error", AFTER_ABSENT) if c in fields
    ]
    selected = events.select(
        "op",
        _sequence(fields[sequence_by]).alias("_seq"),
        (F.col("event_time") if "event_time" in fields else F.lit(None).cast("timestamp")).alias(
            "_time"
        ),
        *[c for c in optional if c != "event_time"],
        "before",
        "after",
    )
    stored = table.properties() if exists else {}
    stored_keys = json.loads(stored[KEYS_PROPERTY]) if KEYS_PROPERTY in stored else None
    check_pk = keys is None and stored_keys is not None and "primary_key" in fields
    if isinstance(keys, str):
        keys = [keys]
    if keys is not None:
        keys = _column_names(list(keys), names, "key column(s)")
        if stored_keys is not None and [k.lower() for k in keys] != [
            k.lower() for k in stored_keys
        ]:
            raise ValueError(
                f"table {target} is keyed by {', '.join(stored_keys)} (stored with it when it "
                f"was made), not {', '.join(keys)}: write to a new table to key it otherwise"
            )
    elif stored_keys is not None:
        keys = _column_names(stored_keys, names, "the table's key column(s)")
    else:
        keys = _resolve_keys(selected, "primary_key" in fields)
        keys = _column_names(keys, names, "key column(s)")
    image = Images(
        columns,
        keys,
        generic,
        absent=not generic and AFTER_ABSENT in fields,
        ignore_null_updates=ignore_null_updates,
        metadata=[_metadata.column(n) for n in metadata],
    )
    shape = layout(cluster_by, partition_by, names)
    # raises before anything is read or written
    plan = _Schema(table, columns, scd_type, wanted, shape)

    if not keys:
        # No row change names a key (none given): count, and write nothing.
        counts = _Counts(selected, image, "ddl" in fields, samples=on_invalid == "raise")
        result = counts.result()
        if on_invalid == "raise":
            _check_invalid(result, counts, image, target)
        if result.changes:
            raise ValueError(
                "the events name no primary key (primary_key is null): give keys=[...]"
            )
        result.created, result.added_columns = plan.apply(keys)
        return result

    # Whole images fold in one pass (rules.fold_whole). Where an upsert may lack columns
    # (typed events with ``after_absent``), the batch still folds whole, the read that folds
    # it counting the upserts that lack one; a batch with any is folded again per column,
    # and so is every later batch into the table in this process (_PARTIAL_TABLES).
    whole = scd_type == 1 and not generic and not ignore_null_updates
    lacks = rules.lacking(image) if whole else None
    if lacks is not None and _table_key(table) in _PARTIAL_TABLES:
        whole, lacks = False, None
    while True:
        counts = _Counts(
            selected,
            image,
            "ddl" in fields,
            observe=True,
            pk_keys=keys if check_pk else None,
            per_column=not whole,
            samples=on_invalid == "raise",
            lacking=lacks,
        )
        entries = rules.entries(counts.frame, image)
        if one_task:
            # One partition needs no shuffle before the fold: one task reads, folds and
            # holds the batch (a job, where the shuffle took two). Not for a history, whose
            # plan reads the entries in several joins: one partition made it slower.
            entries = entries.coalesce(1)
        call = _Call(table, plan, image, counts, app_id, batch_id, on_ddl, on_invalid)
        if scd_type != 1:
            result = call.scd2(entries)
            break
        found = call.scd1(entries, whole, tombstone_retention)
        if found is not None:
            result = found
            break
        # An upsert lacked a column: nothing was written; fold per column.
        _remember_partial(table)
        whole, lacks = False, None
    if (
        on_stale != "ignore"
        and not result.truncated  # the keys a truncate of the batch deleted are stale
        and result.stale > STALE_MINIMUM - 1
        and (result.stale > STALE_SHARE * result.keys)
    ):
        message = (
            f"{result.stale} of the {result.keys} keys of this batch held only changes older "
            f"than table {target}'s rows (nothing written for them): did the source's "
            "sequence go backwards (failover, RESET MASTER, a re-sync or new backfill)? "
            "docs/apply.md, 'Stale changes'"
        )
        if on_stale == "raise":
            raise ValueError(message)
        warnings.warn(message, StaleChangesWarning, stacklevel=3)  # over the wrapper
    return result


def current_rows(spark: SparkSession, target: str, *, bookkeeping: bool = False) -> DataFrame:
    """The live rows of a table :func:`apply_changes` writes: what the source holds.

    Args:
        spark: the SparkSession.
        target: the table's path or name, as given to :func:`apply_changes`.
        bookkeeping: keep the bookkeeping ``_cdc_*`` columns (the metadata columns,
            ``_cdc_meta_*``, are kept either way).

    Returns:
        Type 1: the rows that are not tombstones. Type 2: the current version of each
        key that is not deleted.
    """
    from pyspark.sql import functions as F

    df = open_table(spark, target).read()
    if CURRENT in df.columns:
        df = df.where(F.col(CURRENT))
    else:
        df = df.where(~F.col(DELETED))
    if bookkeeping:
        return df
    return df.select(*[quote(c) for c in df.columns if c not in INTERNAL])


# --- the call ---------------------------------------------------------------------------------


class _Call:
    """One call's write: the checks that need the batch's counts, the schema change, the
    MERGE, the counts from its metrics, the purge."""

    def __init__(
        self,
        table: Table,
        plan: _Schema,
        image: Images,
        counts: _Counts,
        app_id: str | None,
        batch_id: int | None,
        on_ddl: str,
        on_invalid: str,
    ) -> None:
        self.table = table
        self.plan = plan
        self.image = image
        self.counts = counts
        self.txn = None if app_id is None else (app_id, int(batch_id))
        self.on_ddl = on_ddl
        self.on_invalid = on_invalid

    def checked(self, keys: int) -> ApplyResult:
        """The counts (after the batch's one read), checked: raises before anything is
        written for a primary key other than the table's, a value that does not convert
        (``on_invalid="raise"``), a renamed or dropped column (``on_ddl="raise"``)."""
        counts = self.counts
        result = counts.result()
        result.keys = keys
        if counts.pk_mismatch():
            got = counts.pk_sample()
            raise ValueError(
                f"the events' primary key is {', '.join(got or [])} in "
                f"{counts.pk_mismatch()} row changes, but table {self.table.target} is keyed "
                f"by {', '.join(self.image.keys)} (stored with it when it was made): did the "
                "source's primary key change? Write to a new table (nothing was written)"
            )
        if self.on_invalid == "raise":
            _check_invalid(result, counts, self.image, self.table.target)
        if self.on_ddl == "raise":
            _check_ddl(result.ddl, self.plan.known_columns(), self.table.target)
        return result

    def begin(self, keys: int) -> tuple[ApplyResult, bytes | None, int | None]:
        """After the batch's one read (``keys``: the keys it touches): the checked counts,
        the table made or brought up to date, and the sequence and event time of the
        newest truncate to apply (``result.truncated``: the batch's own)."""
        result = self.checked(keys)
        result.created, result.added_columns = self.plan.apply(self.image.keys)
        cut, cut_time, result.truncated = self.truncation()
        return result, cut, cut_time

    def truncation(self) -> tuple[bytes | None, int | None, bool]:
        """``(sequence, event time, apply)`` of the newest ``truncate`` of the table: the
        batch's when it is not older than the one stored with the table (``apply``: it is
        applied to every row; stored first, so a rerun after a failure between the two
        finds it, and applies it again), else the stored one; ``(None, None, False)``
        when there is none."""
        table = self.table
        props = table.properties() if table.exists() else {}
        stored = props.get(TRUNCATE_PROPERTY)
        at = None if stored is None else bytes.fromhex(stored)
        time = props.get(TRUNCATE_TIME_PROPERTY)
        cut = self.counts.truncate()
        if cut is not None and (at is None or cut[0] >= at):
            if cut[0] != at:
                update = {TRUNCATE_PROPERTY: cut[0].hex()}
                if cut[1] is not None:
                    update[TRUNCATE_TIME_PROPERTY] = str(cut[1])
                table.set_properties(update)
            return cut[0], cut[1], True
        return at, None if time is None else int(time), False

    def scd1(
        self, entries: DataFrame, whole: bool, retention: dt.timedelta | None
    ) -> ApplyResult | None:
        """The batch's type 1 MERGE; ``None``, having written nothing, when ``whole`` and an
        upsert of the batch lacks a column (the batch needs the per-column fold)."""
        from pyspark import StorageLevel

        image, table = self.image, self.table
        keys, values = image.keys, image.values
        if whole:
            folded = rules.fold_whole(entries, keys, values)
        else:
            folded = rules.fold_columns(entries, keys, values)
        filled = None
        free = warmed = _nothing
        try:
            warmed = _warm(table)
            # The batch's one read: the folded rows held, counted, and the batch's counts.
            folded, keys_in_batch, free = held(folded)
            if whole and self.counts.lacking():
                return None
            result, cut, cut_time = self.begin(keys_in_batch)
            new_cut = result.truncated
            if not result.keys and not new_cut:
                result.version = table.version()
                result.retries = table.retries
                return result
            source = folded
            if cut is not None:
                # A truncate deletes every key: the batch's keys here, the table's others
                # (when it is new) below, after the key changes are filled.
                source = rules.truncate_fold(folded, cut, cut_time)
            resolve = not new_cut and result.keys <= BROADCAST_KEYS and _large(table)
            if not whole and result.key_changes:
                # A row moved twice in the batch fills from the first move's result: a
                # pass per link of the longest chain, each held for the next. The last is
                # held only where its plan is read more than once: each format copies a
                # MERGE's source once (Delta a source that reads a table, the Iceberg module
                # by a checkpoint), the resolved MERGE and a truncate's rows read it twice.
                depth = rules.move_depth(folded, keys, rules.MOVE_SEQ)
                for level in range(depth):
                    done = filled
                    filled = rules.fill_moves(source, table, keys, values)
                    if level == depth - 1 and not (resolve or new_cut):
                        source, filled = filled, done
                        break
                    filled = filled.persist(StorageLevel.MEMORY_AND_DISK)
                    filled.count()
                    source = rules.detached(filled)
                    if done is not None:
                        done.unpersist()
            if new_cut:
                source = source.unionByName(
                    rules.truncated_rows(table, keys, source, cut, cut_time)
                )
            horizon = table.properties().get(HORIZON_PROPERTY)
            horizons = [bytes.fromhex(horizon)] if horizon is not None else []
            horizons += [cut] if cut is not None else []
            clauses = rules_sql.scd1_clauses(
                keys, values, whole=whole, horizon=max(horizons) if horizons else None
            )
            if resolve:
                commit = self._resolved_merge(source, clauses)
            else:
                # The folded batch, held in memory, is the source as it is (no truncate, no
                # key change filled from the table's rows): a leaf over its held rows, it
                # needs no copy first.
                held_as_is = source is folded
                commit = table.merge(
                    source, _on(keys), clauses, self.txn, materialized=held_as_is,
                    rows=keys_in_batch if held_as_is else None,
                )  # fmt: skip
        finally:
            free()
            if filled is not None:
                filled.unpersist()
            warmed()
        _record(result, commit)
        if commit.written:
            # The keys the MERGE left alone: the matched clauses write a row only when a
            # change is newer than something it holds, the insert only above the horizon.
            if commit.changed_rows is not None:
                source = result.keys if commit.source_rows is None else commit.source_rows
                result.stale = max(0, source - commit.changed_rows)
            if retention is not None:
                result.purged = self._purge(retention)
                result.version = table.version()
        elif not commit.skipped:
            result.stale = result.keys  # a MERGE that changed nothing
        result.retries = table.retries
        return result

    def _resolved_merge(self, source: DataFrame, clauses: list[Clause]) -> Commit:
        """A batch of few keys (at most :data:`BROADCAST_KEYS`): its rows resolved against
        the table's rows of its keys (:func:`rules.resolve_scd1`), broadcast into a
        ``MERGE`` that sets them. Resolved again when another writer changed one of
        those rows in between (the ``MERGE`` fails on it, writing nothing)."""
        table, keys = self.table, self.image.keys
        for attempt in range(STALE_ATTEMPTS):
            rows, resolved = rules.resolve_scd1(source, table, keys, clauses)
            try:
                return table.merge(rows, _on(keys), resolved, self.txn, broadcast=True)
            except Exception as error:
                if rules.STALE not in str(error) or attempt == STALE_ATTEMPTS - 1:
                    raise
                table.retries += 1
                table.refresh()
        raise AssertionError("unreachable")  # pragma: no cover

    def _purge(self, retention: dt.timedelta) -> int:
        """Forget tombstones deleted more than ``retention`` before the batch's newest row
        change (or the wall clock, if earlier): first the purge horizon (the newest purged
        delete's sequence) is stored with the table, then the tombstones are deleted, so a
        stop between the two keeps them (safe)."""
        from pyspark.sql import functions as F

        newest = self.counts.newest()
        if newest is None:
            return 0
        now = int(time.time() * 1_000_000)
        cutoff = min(int(newest), now) - int(retention / dt.timedelta(microseconds=1))
        table = self.table
        condition = rules.purge_condition(cutoff)
        top = table.read().where(condition).agg(F.max(col(SEQUENCE)).alias("h")).first()["h"]
        if top is None:
            return 0
        old = table.properties().get(HORIZON_PROPERTY)
        horizon = bytes(top) if old is None else max(bytes(top), bytes.fromhex(old))
        if old is None or horizon != bytes.fromhex(old):
            table.set_properties({HORIZON_PROPERTY: horizon.hex()})
        return table.delete(rules.purge_condition(cutoff, horizon))

    def scd2(self, entries: DataFrame) -> ApplyResult:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        image, table = self.image, self.table
        keys, values = image.keys, image.values
        new = rules.scd2_versions(entries, keys, values).persist(StorageLevel.MEMORY_AND_DISK)
        held: list[DataFrame] = []
        serial = None

        def hold(frame: DataFrame) -> DataFrame:
            # Computed once, then read as a leaf over its cached rows: each step below
            # reads the one before two to four times (the stored versions, each pass of
            # the key changes), so the MERGE's plan held dozens of copies of the table's
            # scan, which Delta's copy of the source ran as 200-odd jobs a call. A small
            # table's steps run without adaptive execution, which would run each of
            # their shuffles as a job of its own.
            home = frame.sparkSession
            if serial is not None:
                frame = in_session(frame, serial)
            frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
            frame.count()
            held.append(frame)
            return rules.detached(frame, home)

        warmed = _nothing
        try:
            warmed = _warm(table)
            touched = new.select(*[col(k) for k in keys]).distinct()
            # The one read of the batch (``new`` is persisted as it counts), which also
            # takes the counts.
            result, cut, cut_time = self.begin(touched.count())
            new_cut = result.truncated
            if not result.keys and not new_cut:
                result.version = table.version()
                return result
            serial = table.serial_session(estimated_bytes(new))
            depth = rules.move_depth(new, keys, START_SEQUENCE) if result.key_changes else 0
            at = [*keys, START_SEQUENCE]

            def chained() -> DataFrame:
                # Each try of the MERGE reads the table's versions afresh (another writer
                # may have committed since the try before).
                while held:
                    held.pop().unpersist()
                wanted = touched
                if new_cut:
                    # The versions of every key live at the truncate are read and closed.
                    truncated = rules.scd2_truncated_keys(table, keys, cut)
                    wanted = wanted.unionByName(truncated).distinct()
                p_stored = [
                    ~F.coalesce(F.array_contains(col(ABSENT), c), F.lit(False)) for c in values
                ]
                old = rules.stored_key_rows(table, keys, wanted).select(
                    *[col(k) for k in keys],
                    START_SEQUENCE,
                    START_TIME,
                    DELETED,
                    *[col(c) for c in values],
                    *[p.alias(f"_p_{i}") for i, p in enumerate(p_stored)],
                    F.coalesce(col(ABSENT), F.array().cast("array<string>")).alias(ABSENT),
                    F.lit(None).cast(new.schema[rules.FROM].dataType).alias(rules.FROM),
                    F.lit(False).alias("_new"),
                )
                old = hold(old)  # one read of the table's versions of the batch's keys
                # A stored version wins over a new one with its start (a replayed change),
                # unless the stored one is a delete and the new one an upsert (the tie rule).
                replaced = old.where(col(DELETED)).join(
                    new.where(~col(DELETED)).select(*[col(k) for k in at]), at, "left_semi"
                )
                kept = old.join(replaced.select(*[col(k) for k in at]), at, "left_anti")
                versions = kept.unionByName(
                    new.join(kept.select(*[col(k) for k in at]), at, "left_anti")
                )
                if cut is not None:
                    versions = rules.scd2_truncate(versions, wanted, keys, values, cut, cut_time)
                if depth:
                    versions = hold(versions)
                for level in range(depth):
                    once = rules.scd2_chain(versions, keys, values)
                    filled = rules.scd2_fill_moves(once, versions, keys, values)
                    # A pass is read three times by the next, once by the chain below.
                    versions = filled if level == depth - 1 else hold(filled)
                return hold(rules.scd2_chain(versions, keys, values))

            every = [
                *keys, START_SEQUENCE, START_TIME, DELETED, *values, END_SEQUENCE, END_TIME,
                CURRENT, ABSENT,
            ]  # fmt: skip
            changed = " OR ".join(
                f"NOT (t.{quote(c)} <=> s.{quote(c)})"
                for c in [START_TIME, DELETED, END_SEQUENCE, END_TIME, CURRENT, ABSENT, *values]
            )
            set_all = {c: col(c, "s") for c in every}
            clauses = [
                Clause("update", set_all, F.expr(changed)),
                Clause("insert", set_all),
            ]
            commit = table.merge(chained, _on(at), clauses, self.txn, materialized=True)
        finally:
            new.unpersist()
            for frame in held:
                frame.unpersist()
            warmed()
        _record(result, commit)
        result.retries = table.retries
        return result


def _check_invalid(result: ApplyResult, counts: _Counts, image: Images, target: str) -> None:
    """``on_invalid="raise"``: an error row, or a value that does not convert, is an error
    naming it (nothing was written yet)."""
    if result.errors:
        sample = counts.error_sample()
        example = f", for example: {sample}" if sample else ""
        raise ValueError(
            f"{result.errors} event(s) for table {target} are error rows (messages that did "
            f"not decode){example}. Nothing was written: fix the decode (schema=, tables=), "
            "or pass on_invalid='count' to apply the batch without them"
        )
    if result.unconverted:
        name, n = next(iter(result.unconverted.items()))
        text = counts.sample(name)
        raise ValueError(
            f"{n} value(s) of column {name!r} do not convert to "
            f"{image.types[name].simpleString()} (for example {text!r}): fix the schema= "
            "type, or pass on_invalid='count' to write them as null (nothing was written)"
        )


def _record(result: ApplyResult, commit: Commit) -> None:
    """What the call's write did, into ``result``: the table's version, whether the write
    was a replay skipped by its marker, the format's metrics and the rows it wrote."""
    result.version = commit.version
    result.skipped = commit.skipped
    result.metrics = commit.metrics
    result.rows_written = (commit.changed_rows or 0) if commit.written else 0


def _drain(events: DataFrame) -> None:
    """Run a replayed micro-batch's plan to its end, writing nothing (Spark's ``noop``
    sink), when called from a streaming query's ``foreachBatch``.

    A skipped replay reads none of its events, and Spark 4.1 and later fail a micro-batch
    whose stateful operators did not commit every partition
    (``STATE_STORE_COMMIT_VALIDATION_FAILED``): ``decode_stream`` keeps a Tencent DTS
    stream's open multi-part sets in such state. Running the plan commits the same state
    the first run did (the parts are the same). Elsewhere nothing is run."""
    try:
        in_stream = events.sparkSession.sparkContext.getLocalProperty(QUERY_ID) is not None
    except Exception:  # noqa: BLE001 (Spark Connect: no SparkContext here; its server runs it)
        in_stream = False
    if in_stream:
        events.write.format("noop").mode("overwrite").save()


def _properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    """``properties=`` checked: names and values as text, none of the library's own."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise ValueError(f"properties must be a mapping of names to values, not {properties!r}")
    out = {}
    for name, value in properties.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"properties: a property's name must be text, not {name!r}")
        if name.lower().startswith("cdc_decode."):
            raise ValueError(f"properties: {name!r} is cdc_decode's own bookkeeping, not to be set")
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"properties: {name!r} must be text or a number, not {value!r}")
        out[name] = str(value)
    return dict(sorted(out.items()))


def _interpreted(events: DataFrame, table: Table, size: int | None) -> DataFrame:
    """``events`` as a frame of an interpreted clone of their session when the batch is
    smaller than :data:`FOLD_INTERPRET_BYTES` (``size``: ``batch_bytes``) and the
    session compiles, else as they are. The rows are the same: a batch held in memory is
    read from its cache."""
    if FOLD_INTERPRET_BYTES <= 0 or size is None or size >= FOLD_INTERPRET_BYTES:
        return events
    conf = events.sparkSession.conf
    if all(conf.get(key, None) == value for key, value in INTERPRETED.items()):
        return events
    session = table.clone_session()
    for key, value in INTERPRETED.items():
        session.conf.set(key, value)
    return in_session(events, session)


def _table_key(table: Table) -> tuple[str, str]:
    return type(table).__name__, table.target


def _remember_partial(table: Table) -> None:
    if len(_PARTIAL_TABLES) >= PARTIAL_TABLES_KEPT:
        _PARTIAL_TABLES.clear()
    _PARTIAL_TABLES.add(_table_key(table))


def _nothing() -> None:
    pass


def _warm(table: Table) -> Callable[[], None]:
    """The table's state computed while the batch is read (:data:`WARM_AHEAD`; nothing
    for a table not made yet); the wait for it."""
    return table.warm() if WARM_AHEAD else _nothing


def _large(table: Table) -> bool:
    """Whether the table holds more than :data:`RESOLVE_BYTES` (asked only when the batch
    could take the resolved path)."""
    size = table.size_bytes()
    return size is not None and size > RESOLVE_BYTES


def _on(keys: Sequence[str]) -> str:
    return " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)


# --- what goes in -------------------------------------------------------------------------------


def _sequence(field_: Any) -> Column:
    """``sequence_by`` as a byte-comparable binary: as it is, or an integer or timestamp
    as 8 bytes, big-endian, sign bit flipped (so the bytes order as the numbers)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        BinaryType,
        ByteType,
        IntegerType,
        LongType,
        ShortType,
        TimestampNTZType,
        TimestampType,
    )

    t = field_.dataType
    value = col(field_.name)
    if isinstance(t, BinaryType):
        return value
    if isinstance(t, (TimestampType, TimestampNTZType)):
        value = F.unix_micros(value.cast("timestamp"))
    elif not isinstance(t, (ByteType, ShortType, IntegerType, LongType)):
        raise ValueError(
            f"sequence_by column {field_.name!r} is {t.simpleString()}: give a binary column "
            "(compared as unsigned bytes) or an integer or timestamp column; text would "
            "compare byte-wise ('9' after '10')"
        )
    flipped = value.cast("long").bitwiseXOR(F.lit(-(1 << 63)))
    return F.unhex(F.lpad(F.hex(flipped), 16, "0"))


def _check_names(names: Sequence[str]) -> None:
    seen: dict[str, str] = {}
    for n in names:
        other = seen.setdefault(n.lower(), n)
        if other != n:
            raise ValueError(
                f"columns {other!r} and {n!r} differ only in case: Delta takes them as one "
                "column; rename one"
            )
    clash = [n for n in names if n.lower() in {c.lower() for c in INTERNAL}]
    if clash:
        raise ValueError(f"column(s) {', '.join(clash)} clash with the table's own columns")


def _column_names(wanted: Sequence[str], names: Sequence[str], what: str) -> list[str]:
    """``wanted`` spelt as the columns are (names match ignoring case)."""
    by_lower = {n.lower(): n for n in names}
    missing = [w for w in wanted if w.lower() not in by_lower]
    if missing:
        raise ValueError(
            f"{what} {', '.join(map(repr, missing))} are not columns of the images "
            f"({', '.join(names)})"
        )
    return [by_lower[w.lower()] for w in wanted]


def _generic_columns(schema: Any, table: Table, target: str, metadata: Sequence[str]) -> list[Any]:
    """The table's columns for generic events: ``schema=``, or the existing table's (its
    metadata columns too, unless ``metadata`` adds them again)."""
    if schema is not None:
        from .._typed import as_schema, typed_event_schema
        from .decoding import spark_event_schema

        struct = spark_event_schema(typed_event_schema(as_schema(schema)))["after"].dataType
        return list(struct.fields)
    if not table.exists():
        raise ValueError(
            f"generic events (map images) need schema= to create {target}: the columns and "
            "their types"
        )
    return [
        f
        for f in table.schema().fields
        if f.name not in INTERNAL and not (metadata and _metadata.is_metadata(f.name))
    ]


def _resolve_keys(selected: DataFrame, has_pk: bool) -> list[str]:
    """The first ``primary_key`` a row change names (``[]`` for none)."""
    from pyspark.sql import functions as F

    if not has_pk:
        return []
    row = (
        selected.where(F.col("op").isin(*ROW_OPS) & F.col("primary_key").isNotNull())
        .select("primary_key")
        .first()
    )
    return list(row[0]) if row is not None and row[0] else []


class _Schema:
    """The table's columns against the events': checked when made (a table column the
    events lack, or of another type, is an error: never silent loss), applied by
    :meth:`apply` (create, add columns, bring a table of an older layout up to date)."""

    def __init__(
        self,
        table: Table,
        columns: Sequence[Any],
        scd_type: int,
        properties: dict[str, str] | None = None,
        shape: Layout = NO_LAYOUT,
    ) -> None:
        from pyspark.sql.types import (
            ArrayType,
            BinaryType,
            BooleanType,
            MapType,
            StringType,
            StructField,
            TimestampType,
        )

        self.table = table
        self.columns = list(columns)
        self.scd_type = scd_type
        self.properties = dict(properties or {})
        self.shape = shape
        types = {
            SEQUENCE: BinaryType(),
            EVENT_TIME: TimestampType(),
            DELETED: BooleanType(),
            BASE_SEQUENCE: BinaryType(),
            COLUMN_SEQUENCES: MapType(StringType(), BinaryType()),
            START_SEQUENCE: BinaryType(),
            END_SEQUENCE: BinaryType(),
            START_TIME: TimestampType(),
            END_TIME: TimestampType(),
            CURRENT: BooleanType(),
            ABSENT: ArrayType(StringType()),
        }
        bookkeeping = SCD1_COLUMNS if scd_type == 1 else SCD2_COLUMNS
        self.bookkeeping = [StructField(n, types[n]) for n in bookkeeping]
        self.exists = table.exists()
        self.added: list[Any] = []
        self.layout: list[Any] = []
        self.existing: dict[str, Any] = {}
        if not self.exists:
            return
        existing = {f.name.lower(): f for f in table.schema().fields}
        self.existing = existing
        # Columns of an older layout's table are added (null: the old behaviour).
        newer = {BASE_SEQUENCE, COLUMN_SEQUENCES, ABSENT}
        lacking = [f.name for f in self.bookkeeping if f.name.lower() not in existing]
        if [n for n in lacking if n not in newer]:
            kind = "type 2 (history)" if scd_type == 2 else "type 1"
            raise ValueError(
                f"table {table.target} was not written as a {kind} table by apply_changes "
                f"(it lacks {', '.join(n for n in lacking if n not in newer)})"
            )
        self.layout = [f for f in self.bookkeeping if f.name in lacking]
        names = {f.name.lower(): f for f in columns}
        for name, f in existing.items():
            if f.name in INTERNAL:
                continue
            if name not in names and _metadata.is_metadata(f.name):
                raise ValueError(
                    f"table {table.target} has the metadata column {f.name!r}, which "
                    "metadata_columns= does not name (nothing was written): give every "
                    "metadata column the table has, or drop the column from the table first"
                )
            if name not in names:
                raise ValueError(
                    f"column {f.name!r} of table {table.target} is not in the events: dropped "
                    "or renamed in the source? Rename or drop it in the table first (nothing "
                    "was written)"
                )
        for f in columns:
            stored = existing.get(f.name.lower())
            if stored is not None and stored.dataType != table.column_type(f.dataType):
                raise ValueError(
                    f"column {f.name!r} of table {table.target} is "
                    f"{stored.dataType.simpleString()} but the events have "
                    f"{f.dataType.simpleString()}: retyped in the source? Change the table "
                    "first (nothing was written)"
                )
        self.added = [f for f in columns if f.name.lower() not in existing]

    def known_columns(self) -> list[str]:
        return [f.name for f in self.columns] + [
            f.name for f in self.existing.values() if f.name not in INTERNAL
        ]

    def apply(self, keys: Sequence[str]) -> tuple[bool, list[str]]:
        """Create the table (with its keys as a property), or add the events' new columns
        and the bookkeeping columns an older layout lacks; ``(created, added)``."""
        table = self.table
        given = {}
        if self.properties:
            given = {**self.properties, PROPERTIES_PROPERTY: json.dumps(self.properties)}
        if not self.exists:
            fields = self.columns + self.bookkeeping
            props = {KEYS_PROPERTY: json.dumps(list(keys))} if keys else {}
            table.create(fields, {**given, **props}, self.shape)
            self.exists = True
            return True, []
        if self.added or self.layout:
            table.add_columns(self.added + self.layout)
        stored = table.properties()
        update = {}
        if keys and KEYS_PROPERTY not in stored:
            update[KEYS_PROPERTY] = json.dumps(list(keys))
        if given and stored.get(PROPERTIES_PROPERTY) != given[PROPERTIES_PROPERTY]:
            update.update(given)
        if update:
            table.set_properties(update)
        added, self.added, self.layout = [f.name for f in self.added], [], []
        return False, added


# --- what the batch holds -----------------------------------------------------------------------


class _Counts:
    """What the batch holds: events per op, the row changes without a key or a sequence,
    key changes, the newest row change's event time, the ``ddl`` statements, values that
    did not convert, image keys that are no column, columns no upsert carried, upserts
    lacking a column (given their condition, ``lacking``), and (checking the stored keys)
    row changes naming another primary key.

    ``observe=True``: the counts are taken by ``DataFrame.observe`` on :attr:`frame` while
    the first action over it (the fold's) reads the batch, so the batch is read once and
    never cached; else by one aggregate when asked.
    """

    def __init__(
        self,
        selected: DataFrame,
        image: Images,
        has_ddl: bool,
        *,
        observe: bool = False,
        pk_keys: Sequence[str] | None = None,
        per_column: bool = False,
        samples: bool = False,
        lacking: str | None = None,
    ) -> None:
        from pyspark.sql import functions as F

        self.selected = selected
        self.image = image
        self.has_ddl = has_ddl
        # Every count as SQL text, in one struct: one py4j call for all of them.
        row = in_list("op", ROW_OPS)
        upsert = in_list("op", UPSERT_OPS)
        aggs = [
            ("events", "count(1)"),
            ("newest", f"max(CASE WHEN {row} THEN unix_micros(_time) END)"),
            (
                "truncate",
                "max_by(named_struct('s', _seq, 't', unix_micros(_time)), CASE WHEN op = "
                "'truncate' AND _seq IS NOT NULL THEN _seq END)",
            ),
            *[(f"op_{name}", f"count(CASE WHEN op = {literal(name)} THEN 1 END)") for name in OPS],
            ("unknown", f"count(CASE WHEN NOT {in_list('op', OPS)} THEN 1 END)"),
            ("unsequenced", f"count(CASE WHEN {row} AND _seq IS NULL THEN 1 END)"),
        ]
        if image.keys:
            unkeyed = f"NOT ({image.keyed('after')} OR {image.keyed('before')})"
            sequenced = f"{row} AND _seq IS NOT NULL"
            aggs += [
                ("unkeyed", f"count(CASE WHEN {sequenced} AND {unkeyed} THEN 1 END)"),
                ("applied", f"count(CASE WHEN {sequenced} AND NOT {unkeyed} THEN 1 END)"),
                ("moves", f"count(CASE WHEN {upsert} AND {image.moved()} THEN 1 END)"),
            ]
        if has_ddl:
            # The statements ride in the one read too: collected here, a batch with a ddl
            # event was read (decoded) a second time for them.
            aggs.append((
                "ddl_statements",
                "collect_list(CASE WHEN op = 'ddl' THEN named_struct('s', _seq, 'd', ddl) END)",
            ))  # fmt: skip
        if samples and "error" in selected.columns:
            aggs.append(("error_sample", "min(CASE WHEN op = 'error' THEN error END)"))
        if image.generic:
            for i, c in enumerate(image.names):
                bad = image.unconverted("after", c)
                if c in image.keys:
                    before = image.unconverted("before", c)
                    aggs.append((
                        f"bad_{i}",
                        f"sum(CASE WHEN {row} THEN (CASE WHEN {bad} THEN 1 ELSE 0 END) + "
                        f"(CASE WHEN {before} THEN 1 ELSE 0 END) END)",
                    ))  # fmt: skip
                else:
                    aggs.append((f"bad_{i}", f"count(CASE WHEN {row} AND {bad} THEN 1 END)"))
                if samples:
                    raw_before = (
                        f"CASE WHEN {image.unconverted('before', c)} "
                        f"THEN {image.raw('before', c)} END"
                        if c in image.keys
                        else "NULL"
                    )
                    raw_after = f"CASE WHEN {bad} THEN {image.raw('after', c)} END"
                    raw = f"coalesce({raw_after}, {raw_before})"
                    aggs.append((f"sample_{i}", f"max(CASE WHEN {row} THEN {raw} END)"))
            unknown = image.unknown()
            aggs.append((
                "unknown_keys",
                "array_sort(array_distinct(flatten(collect_set("
                f"CASE WHEN {upsert} AND size({unknown}) > 0 THEN {unknown} END))))",
            ))  # fmt: skip
        if per_column and image.values:
            for i, c in enumerate(image.values):
                aggs.append((
                    f"carried_{i}",
                    f"max(CASE WHEN {upsert} AND `after` IS NOT NULL THEN {image.present(c)} END)",
                ))  # fmt: skip
        if lacking is not None:
            aggs.append(("lacking", f"count(CASE WHEN {lacking} THEN 1 END)"))
        self.pk_keys = pk_keys
        if pk_keys is not None:
            want = "array(" + ", ".join(literal(k.lower()) for k in pk_keys) + ")"
            other = (
                f"{row} AND primary_key IS NOT NULL AND transform(primary_key, k -> lower(k)) "
                f"!= {want}"
            )
            aggs.append(("pk_mismatch", f"count(CASE WHEN {other} THEN 1 END)"))
            aggs.append(("pk_sample", f"max(CASE WHEN {other} THEN primary_key END)"))
        text = ", ".join(f"{literal(name)}, {value}" for name, value in aggs)
        self.metrics = F.expr(f"named_struct({text})").alias("counts")
        self.observation = None
        self._row: dict[str, Any] | None = None
        if observe:
            from pyspark.sql import Observation

            self.observation = Observation(f"cdc_apply_{uuid.uuid4().hex}")
            self.frame = selected.observe(self.observation, self.metrics)
        else:
            self.frame = selected

    def _values(self) -> dict[str, Any]:
        if self._row is None and self.observation is not None:
            from ._compat import observed

            found = observed(self.observation)
            self._row = None if not found else found["counts"].asDict()
        if self._row is None:
            # A plan the optimizer folded away (a batch without row changes, read from
            # local data) records no metrics: take them by an aggregate.
            self._row = self.selected.agg(self.metrics).first()[0].asDict()
        return self._row

    def newest(self) -> int | None:
        """The newest row change's event time (microseconds since the epoch)."""
        return self._values()["newest"]

    def truncate(self) -> tuple[bytes, int | None] | None:
        """The batch's newest sequenced ``truncate``: its sequence and event time."""
        found = self._values()["truncate"]
        return None if found is None else (bytes(found["s"]), found["t"])

    def lacking(self) -> int:
        """Upserts that lack a column (counted when given their condition, ``lacking``)."""
        return self._values().get("lacking") or 0

    def pk_mismatch(self) -> int:
        return self._values().get("pk_mismatch") or 0

    def pk_sample(self) -> list[str] | None:
        return self._values().get("pk_sample")

    def sample(self, column: str) -> str | None:
        return self._values().get(f"sample_{self.image.names.index(column)}")

    def error_sample(self) -> str | None:
        return self._values().get("error_sample")

    def result(self) -> ApplyResult:
        """A new :class:`ApplyResult` with the counts (after the first action over
        :attr:`frame`, when observed)."""
        from pyspark.sql import functions as F

        values = self._values()
        result = ApplyResult(
            events=values["events"],
            applied=values.get("applied") or 0,
            unkeyed=values.get("unkeyed") or 0,
            unsequenced=values.get("unsequenced") or 0,
            key_changes=values.get("moves") or 0,
        )
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
            # In sequence order, nulls first (as Spark sorts), equal sequences by their text.
            rows = [(r["s"], r["d"]) for r in values.get("ddl_statements") or []]
            rows.sort(key=lambda r: (r[0] is not None, bytes(r[0] or b""), r[1] or ""))
            result.ddl = [text for _, text in rows]
        image = self.image
        for i, c in enumerate(image.names):
            n = values.get(f"bad_{i}") or 0
            if n:
                result.unconverted[c] = int(n)
        result.unknown_columns = list(values.get("unknown_keys") or [])
        upserts = sum(values[f"op_{n}"] for n in UPSERT_OPS)
        if upserts:
            result.absent_columns = [
                c
                for i, c in enumerate(image.values)
                if f"carried_{i}" in values and not values[f"carried_{i}"]
            ]
        return result


# --- ddl ----------------------------------------------------------------------------------------

_IDENT = r"(`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|\[[^\]]+\]|[A-Za-z_][\w$]*)"
_NOT_COLUMNS = (
    "INDEX|KEY|PRIMARY|FOREIGN|CONSTRAINT|CHECK|PARTITION|DEFAULT|NOT|IDENTITY|EXPRESSION|"
    "TABLE|VIEW|SEQUENCE|UNIQUE|TRIGGER|TO|COLUMNS|SUBPARTITION|SYSTEM|FULLTEXT|SPATIAL"
)
_RENAME = re.compile(
    rf"\bRENAME\s+(?:COLUMN\s+)?(?!(?:{_NOT_COLUMNS})\b){_IDENT}\s+TO\b", re.IGNORECASE
)
_CHANGE = re.compile(rf"\bCHANGE\s+(?:COLUMN\s+)?{_IDENT}\s+{_IDENT}", re.IGNORECASE)
_DROP = re.compile(
    rf"\bDROP\s+(?:COLUMN\s+)?(?:IF\s+EXISTS\s+)?(?!(?:{_NOT_COLUMNS})\b){_IDENT}", re.IGNORECASE
)
_DROP_LIST = re.compile(r"\bDROP\s*\(([^)]*)\)", re.IGNORECASE)


def _unquote(name: str) -> str:
    if name[:1] in '`"[':
        inner = name[1:-1]
        return inner.replace("``", "`").replace('""', '"')
    return name


def ddl_columns(statement: str) -> list[tuple[str, str]]:
    """``(what, column)`` for each column an ``ALTER TABLE`` statement renames or drops
    (``"renames"``/``"drops"``): MySQL, PostgreSQL and Oracle spellings."""
    if not re.search(r"\bALTER\s+TABLE\b", statement, re.IGNORECASE):
        return []
    found = [("renames", _unquote(m.group(1))) for m in _RENAME.finditer(statement)]
    for m in _CHANGE.finditer(statement):
        old, new = _unquote(m.group(1)), _unquote(m.group(2))
        if old.lower() != new.lower():
            found.append(("renames", old))
    found += [("drops", _unquote(m.group(1))) for m in _DROP.finditer(statement)]
    for m in _DROP_LIST.finditer(statement):
        found += [("drops", _unquote(n.strip())) for n in m.group(1).split(",") if n.strip()]
    return found


def _check_ddl(statements: Sequence[str], columns: Sequence[str], target: str) -> None:
    known = {c.lower() for c in columns}
    for statement in statements:
        for what, name in ddl_columns(statement or ""):
            if name.lower() in known:
                raise ValueError(
                    f"a ddl event {what} column {name!r} of table {target} ({statement!r}): "
                    "the column would keep its last values without an error. Change the "
                    "table and the events' columns first (nothing was written), or pass "
                    "on_ddl='report' to apply the batch as it is"
                )
