"""A whole database in one call: every table of a CDC stream into its own Delta table.

>>> from cdc_decode import spark as cdc_spark
>>> result = cdc_spark.sync(kafka_df, "tencent-dts", "/lake/{db}/{table}")
>>> result.tables["shop.orders"]     # TableSync(events=…, rows_written=…, created=True, …)

One call reads the batch's messages once into memory, runs the schema pass
(:func:`cdc_decode.spark.table_schemas`: each table's columns, types and key as the wire
carries them), plans each table (create it, add columns, widen types, or stop it with an
error), decodes the batch once in typed mode with every touched table's schema
(``decode(..., tables=...)``), and applies each table's frame with
:func:`cdc_decode.spark.apply_changes` from a bounded thread pool, each table with its own
replay marker (``app_id``). Tables routed into one target (``routes=``: the shards of a
sharded database) are planned, decoded and applied together, one ``apply_changes`` call
and one replay marker per target. docs/sync.md gives every rule.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._wire_schemas import WireTable
from . import _metadata, _type_mapping
from ._apply_rules import INTERNAL, ROW_OPS
from ._layout import listed as _patterns
from ._tables import open_table, quote
from .apply import KEYS_PROPERTY, QUERY_ID, ApplyResult, apply_changes
from .apply import _properties as _checked_properties
from .decoding import _LOCATION

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["SyncError", "SyncResult", "TableSync", "sync", "sync_stream"]

STOPPED_PROPERTY = "cdc_decode.sync.stopped"
"""The table property that stops a table (``on_error="continue"``): its text says why.
Unset it (``ALTER TABLE … UNSET TBLPROPERTIES``) to sync the table again."""
HISTORY_SUFFIX = "_history"
"""What ``scd2=`` appends to a table's target for its SCD type 2 history table."""
ROUTE_KEYS = ("per-table", "unique")
"""``route_keys=``: what the keys of the tables routed into one table are unique over.
``"per-table"`` (the default): each source table's own, so the routed table's key adds
the source database and table (:data:`SHARD_COLUMNS`); ``"unique"``: all of them, so the
routed table's key is the source key alone."""
SHARD_COLUMNS = ("source_db", "source_schema", "source_table")
"""The metadata columns (``_cdc_meta_source_db`` …) a routed table's key adds with
``route_keys="per-table"`` (``source_schema`` only for sources that have schemas)."""
_INTEGRAL = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)$")


@dataclass
class TableSync:
    """What :func:`sync` did for one source table.

    Attributes:
        name: the source table (``db.table``, ``db.schema.table``), as the events name it.
        target: its Delta table (path or catalog name); a routed table's (``routes=``, or
            a target function giving several tables one target), which its source tables
            share.
        routed: the table is applied with the other source tables of its target, in one
            ``apply_changes`` call (docs/sync.md, "Routes"). Its ``events``, ``written``,
            ``errors``, ``not_written`` and ``ddl`` are its own; what was done to the
            target (``rows_written``, ``created``, the columns, ``keys``, ``apply``,
            ``history``, ``error``, ``seconds``) is the target's, the same in each of them.
        events: the batch's events of the table (row changes, DDL, …, and its error rows).
        written: of those, the row changes the table's MERGE took
            (:attr:`ApplyResult.applied`; some may be older than what the table holds:
            ``apply.stale`` counts their keys).
        errors: of those, messages of the table that did not decode (a value that does not
            convert to its column's type; ``error_sample`` is one of their errors).
        not_written: of those, the events neither written nor errors, by reason:
            ``replayed`` (the table holds the batch), ``excluded`` (``include``/``exclude``,
            or the target function gave ``None``), ``stopped``, ``failed`` (the table
            failed in this call: nothing written), ``unkeyed``, ``unsequenced``,
            ``truncate of no table`` (a table whose only events in the batch are a
            ``truncate``, and whose target does not exist), and each op that is not a row
            change (``begin``, ``commit``, ``ddl``, ``truncate`` …: an applied truncate
            too; ``apply.truncated`` says it emptied the table).
            ``events == written + errors + sum(not_written.values())``: every event is
            accounted for (docs/sync.md, "Every change accounted for").
        error_sample: one error of the table's messages that did not decode (it names the
            column and the value), or ``None``.
        rows_written: target rows the MERGE inserted or updated
            (:attr:`ApplyResult.rows_written`).
        created: the table was created by this call.
        added_columns: columns added to the table (schema evolution).
        widened_columns: column -> ``(old type, new type)``, widened by this call.
        dropped_columns: columns the table has and the wire's latest schema lacks: they
            keep their values; rows inserted from then on have null there.
        untyped_columns: columns created as ``string`` because neither the wire, the
            table nor ``schemas=`` gave a type.
        keys: the key columns applied by.
        ddl: the batch's DDL statements of the table (reported, never executed).
        apply: the :class:`ApplyResult` of the current table (``None``: not applied).
        history: with ``scd2=``: the :class:`ApplyResult` of the history table.
        history_target: with ``scd2=``: the history table.
        error: why the table failed in this call (``None``: it did not).
        stopped: the table is stopped (``on_error="continue"``): later calls skip it
            until its stop property is removed.
        skipped: why the table was not applied (excluded, stopped, a replay, no key, a
            truncate of a table that does not exist …).
        seconds: wall time of the table's apply.
    """

    name: str
    target: str | None = None
    routed: bool = False
    events: int = 0
    written: int = 0
    errors: int = 0
    not_written: dict[str, int] = field(default_factory=dict)
    error_sample: str | None = None
    rows_written: int = 0
    created: bool = False
    added_columns: list[str] = field(default_factory=list)
    widened_columns: dict[str, tuple[str, str]] = field(default_factory=dict)
    dropped_columns: list[str] = field(default_factory=list)
    untyped_columns: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    ddl: list[str] = field(default_factory=list)
    apply: ApplyResult | None = None
    history: ApplyResult | None = None
    history_target: str | None = None
    error: str | None = None
    stopped: bool = False
    skipped: str | None = None
    seconds: float = 0.0

    def accounted(self) -> bool:
        """Whether every event of the table is written, an error or not written for a
        counted reason."""
        return self.events == self.written + self.errors + sum(self.not_written.values())


@dataclass
class SyncResult:
    """What one :func:`sync` call did.

    Attributes:
        tables: per source table, its :class:`TableSync` (every table of the batch, the
            excluded and skipped ones too).
        messages: the batch's messages (input rows).
        decoded: of those, the messages decoded into events.
        messages_with_errors: of those, the messages that did not decode (error rows; never
            applied): those of a table (a value that does not convert) are counted in its
            :attr:`TableSync.errors` too. ``messages == decoded + messages_with_errors +
            messages_held``, as for a decode (docs/events.md, "Accounting").
        events: rows decoded from the batch (error rows included).
        errors: samples of their error texts (at most 10).
        unclaimed: events of no table, by ``op`` (transaction markers, heartbeats, DDL of
            tables without row changes in the batch …).
        app_id: the replay markers' prefix (each table's is ``app_id/table``).
        batch_id: the ``foreachBatch`` batch id, or ``None``.
        seconds: wall time of the call.
        newest_event: the newest ``event_time`` of the batch's events (when the change
            happened in the source), a naive ``datetime`` in the driver's local time as
            PySpark gives ``timestamp`` values, or ``None``; :meth:`lag` is the wall clock
            minus it.
        phases: wall time of its parts: ``schemas`` (the schema pass and the plans),
            ``decode`` (the typed decode, counted), ``apply`` (the tables).
        messages_held: Tencent DTS parts of multi-part sets still open at the end of the
            micro-batch, held by :func:`sync_stream` for the next one (not decoded yet).
    """

    tables: dict[str, TableSync] = field(default_factory=dict)
    messages: int = 0
    decoded: int = 0
    events: int = 0
    messages_with_errors: int = 0
    errors: list[str] = field(default_factory=list)
    unclaimed: dict[str, int] = field(default_factory=dict)
    app_id: str | None = None
    batch_id: int | None = None
    seconds: float = 0.0
    newest_event: dt.datetime | None = None
    phases: dict[str, float] = field(default_factory=dict)
    messages_held: int = 0

    @property
    def applied(self) -> list[TableSync]:
        """The tables this call wrote (not skipped, no replay, no error)."""
        return [
            t
            for t in self.tables.values()
            if t.apply is not None and t.error is None and not t.apply.skipped
        ]

    @property
    def failed(self) -> list[TableSync]:
        """The tables with an error in this call."""
        return [t for t in self.tables.values() if t.error is not None]

    @property
    def rows_written(self) -> int:
        return sum(t.rows_written for t in self._targets())

    def _targets(self) -> list[TableSync]:
        """One entry per target: a routed table's source tables share what was done to it
        (its rows, its creation), counted once."""
        seen: dict[Any, TableSync] = {}
        for t in self.tables.values():
            seen.setdefault(t.target if t.routed else ("", t.name), t)
        return list(seen.values())

    def lag(self) -> float | None:
        """Seconds from the batch's newest source change to now (``None`` without one)."""
        if self.newest_event is None:
            return None
        return max(0.0, time.time() - self.newest_event.timestamp())

    def accounted(self) -> bool:
        """Whether every message is decoded, an error or held, and every table's every
        event accounted for (:meth:`TableSync.accounted`)."""
        messages = self.decoded + self.messages_with_errors + self.messages_held
        return self.messages == messages and all(t.accounted() for t in self.tables.values())

    def summary(self) -> str:
        """One line: tables applied (and into how many targets, when tables are routed),
        created, evolved, failed; events; rows; bad messages, and which tables they were
        of; Tencent DTS parts held for the next micro-batch (when any); seconds."""
        targets = self._targets()
        created = sum(t.created for t in targets)
        evolved = sum(bool(t.added_columns or t.widened_columns) for t in targets)
        skipped = sum(t.skipped is not None for t in self.tables.values())
        batch = "" if self.batch_id is None else f"batch {self.batch_id}: "
        applied = self.applied
        into = len({t.target for t in applied})
        routed = "" if into == len(applied) else f" into {into} table{'s' * (into != 1)}"
        bad = [t for t in self.tables.values() if t.errors]
        of = ""
        if bad:
            shown = ", ".join(f"{t.name} {t.errors}" for t in bad[:5])
            of = f" ({shown}{', …' if len(bad) > 5 else ''})"
        return (
            f"{batch}{len(applied)} tables applied{routed} ({created} created, {evolved} evolved, "
            f"{len(self.failed)} failed, {skipped} skipped), {self.events} events, "
            f"{self.rows_written} rows written, {self.messages_with_errors} bad messages{of}, "
            + (f"{self.messages_held} parts held, " if self.messages_held else "")
            + f"{self.seconds:.1f} s"
        )


class SyncError(RuntimeError):
    """Tables failed in a :func:`sync` call with ``on_error="raise"``; the others were
    applied. ``result`` is the call's :class:`SyncResult`."""

    def __init__(self, result: SyncResult) -> None:
        self.result = result
        lines = [f"{t.name} -> {t.target}: {t.error}" for t in result.failed]
        super().__init__(
            f"{len(lines)} of {len(result.tables)} tables failed (the others were applied; "
            "a rerun of the batch skips them by their replay markers):\n" + "\n".join(lines)
        )


def sync(
    df: DataFrame,
    format: str,
    target: str | Callable[[WireTable], str | None],
    *,
    batch_id: int | None = None,
    app_id: str | None = None,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    keys: Mapping[str, Sequence[str]] | None = None,
    schemas: Mapping[str, str] | None = None,
    scd2: str | Sequence[str] | None = None,
    parallelism: int = 4,
    on_error: str = "raise",
    mode: str = "permissive",
    engine: str = "native",
    value_col: str | None = None,
    key_col: str | None = None,
    columns: Mapping[str, Sequence[str]] | None = None,
    limits: Any = None,
    source_time_zone: str | None = None,
    streamed: bool = False,
    tombstone_retention: Any = None,
    on_stale: str = "warn",
    on_invalid: str = "raise",
    properties: Mapping[str, Mapping[str, str]] | None = None,
    cluster_by: Mapping[str, str | Sequence[str]] | None = None,
    partition_by: Mapping[str, str | Sequence[str]] | None = None,
    metadata_columns: bool | Sequence[str] | Mapping[str, bool | Sequence[str]] | None = None,
    type_mapping: str | Sequence[str] | Mapping[str, str | Sequence[str]] | None = None,
    routes: Mapping[str, str] | None = None,
    route_keys: str = "per-table",
    _hold: Callable[[DataFrame | None], None] | None = None,
) -> SyncResult:
    """Sync every table of a batch of CDC messages into its own Delta table.

    Works as a batch call and inside ``foreachBatch`` (pass ``batch_id``; the replay
    markers then make a micro-batch run again leave every table as it was). Every rule:
    docs/sync.md.

    Args:
        df: the messages, exactly as :func:`cdc_decode.spark.decode` takes them (Kafka's
            ``value``; ``key`` is read for ``debezium-json``'s key columns).
        format: one of :data:`cdc_decode.FORMATS` but ``datahub-tuple`` (a TUPLE topic is
            one table: use ``apply_changes``).
        target: a template with ``{db}``, ``{table}`` and ``{schema}``: a path
            (``/lake/{db}/{table}``) or a catalog name (``bronze.{db}__{table}``); or a
            function of the :class:`cdc_decode.WireTable` returning the target (``None``
            skips the table; several tables given one target are routed into it, as by
            ``routes``). A table whose only events in the batch are a ``truncate`` is
            given to it too, as a ``WireTable`` of its names with no ``versions`` (the wire
            carried no schema of it).
        batch_id: the ``foreachBatch`` batch id: each table's Delta ``txnVersion``.
        app_id: the replay markers' prefix (each table's ``txnAppId`` is
            ``app_id/<db.table>``); by default, inside ``foreachBatch``, the streaming
            query's id (kept in its checkpoint). ``batch_id`` without either is an error.
        include, exclude: table name patterns (``shop.*``, ``*.audit_?``; shell-style,
            case-insensitive) of the tables to sync and to leave out.
        keys: ``{"db.table": ["col", …]}``: key columns where the wire carries none, or
            other than the wire's (a name may be a pattern).
        schemas: ``{"db.table": "id bigint, name string"}``: column types where the wire
            carries none (TDSQL JSON, Debezium without ``schemas.enable``, Datastream
            JSON), or to override the wire's.
        scd2: table name patterns that also get a history table (SCD type 2) beside the
            current one, at the target with ``_history`` appended.
        parallelism: tables applied at once (threads; each a Spark job).
        on_error: ``"raise"`` (the default): after every other table is applied, a
            :class:`SyncError` naming each failed table (a streaming query stops; its
            restart runs the batch again, and the tables that committed skip it);
            ``"continue"``: the failed tables are stopped (a table property) and reported,
            the call returns.
        mode, engine, value_col, key_col, columns, limits, source_time_zone: as
            :func:`cdc_decode.spark.decode` (``columns``: TDSQL JSON's names).
        streamed: the DataFrame is a micro-batch of a Kafka stream. A Tencent DTS
            multi-part set still open at its end is an error here (its parts count in
            ``messages_with_errors``); :func:`sync_stream` holds such parts for the next
            micro-batch instead.
        tombstone_retention, on_stale: as :func:`cdc_decode.spark.apply_changes`.
        on_invalid: a table's messages that did not decode (a value that does not convert
            to its column's type): ``"raise"`` (the default) fails the table, nothing of
            it written, its error naming the column and a value (then ``on_error`` says
            what the call does); ``"count"`` applies the table's other changes and counts
            those messages (:attr:`TableSync.errors`), as ``apply_changes`` does.
        properties: ``{"pattern": {"name": "value", …}}``: table properties of the tables
            whose source name matches (``"*"``, ``"shop.*"``, ``"shop.orders"``), set when
            a table is made and again when the ones given change (its history table's
            too), as ``apply_changes(properties=)`` sets them. A table matched by several
            entries takes all of them, a later entry's value over an earlier one's, an
            exact name's over any pattern's.
        cluster_by, partition_by: ``{"db.table": ["col", …]}`` (a name may be a pattern,
            as in ``keys``): the layout of the tables made, as ``apply_changes`` takes it
            (a history table's too).
        metadata_columns: event columns each table keeps beside the source's, as
            ``_cdc_meta_<name>`` (``op``, ``event_time``, ``capture_time``, ``position``,
            ``tx_id``, ``source_db``, ``source_schema``, ``source_table``,
            ``kafka_topic``, ``kafka_partition``, ``kafka_offset``; ``True`` for the first
            five), as ``apply_changes(metadata_columns=)`` keeps them: a list for every
            table, or ``{"db.table": [...]}`` by table name or pattern (as ``keys``). A
            table with a source column starting ``_cdc_meta_`` then fails, nothing of it
            written.
        type_mapping: rules that choose other Spark types than docs/types.md's for the
            columns a call creates (``"tinyint1-to-boolean"``, ``"unsigned-to-signed"``,
            ``"to-string"``): a list for every table, or ``{"db.table": [...]}`` by table
            name or pattern (as ``keys``). A column the table has keeps its type, and
            ``schemas=`` wins over the rules (docs/sync.md, "Type mapping").
        routes: ``{"shop_*.orders_*": "lake.shop.orders"}``: source table patterns (as
            ``keys``; an exact name first, else the first pattern that matches) and the
            one target their tables share, a name or path (``{db}``, ``{table}`` and
            ``{schema}`` work there too), instead of ``target``'s. The tables routed
            into one target (a target function giving several tables one target does the
            same) are applied together, one ``apply_changes`` call per batch: its columns
            are the union of theirs, each column's type the one all of their types widen
            to (a pair that cannot widen fails the target, naming both tables), and its
            replay marker is the target's (docs/sync.md, "Routes").
        route_keys: what the keys of the tables routed into one target are unique over:
            ``"per-table"`` (the default): each table's own (shards numbering their rows
            from 1 each), so the routed table's key adds the source database and table as
            the metadata columns ``_cdc_meta_source_db`` and ``_cdc_meta_source_table``
            (``_cdc_meta_source_schema`` too where the source has schemas); ``"unique"``:
            across the tables (an id from one generator), so the key is the source key
            alone and those columns are kept only when ``metadata_columns`` names them.

    Returns:
        A :class:`SyncResult`.

    Raises:
        SyncError: ``on_error="raise"`` and a table failed.
        ValueError: an unknown option value (a metadata column's name, a type mapping
            rule or a ``route_keys`` value among them; the Kafka metadata columns without
            Kafka's columns; a route that is not a pattern and a target),
            ``batch_id`` without an ``app_id`` outside a streaming query.
    """
    from pyspark import StorageLevel

    from .decoding import decode
    from .schemas import table_schemas

    started = time.monotonic()
    if format == "datahub-tuple":
        raise ValueError("datahub-tuple is one table per topic: use apply_changes")
    if on_error not in ("raise", "continue"):
        raise ValueError(f"on_error must be 'raise' or 'continue', not {on_error!r}")
    if on_invalid not in ("raise", "count"):
        raise ValueError(f"on_invalid must be 'raise' or 'count', not {on_invalid!r}")
    if mode == "dropmalformed":
        raise ValueError(
            "sync accounts for every message: mode='dropmalformed' would drop them unseen "
            "(use on_invalid='count' to apply the tables without their bad messages)"
        )
    if parallelism < 1:
        raise ValueError("parallelism must be at least 1")
    if properties is not None:
        if not isinstance(properties, Mapping):
            raise ValueError(f"properties must map table patterns to properties: {properties!r}")
        for pattern, values in properties.items():
            if not isinstance(values, Mapping):
                raise ValueError(
                    f"properties: {pattern!r} must map to {{name: value}}, not {values!r}"
                )
            _checked_properties(values)
    _metadata.checked(metadata_columns, df.columns)
    _type_mapping.checked(type_mapping)
    checked_routes(routes, route_keys)
    spark = df.sparkSession
    if batch_id is not None and app_id is None:
        app_id = spark.sparkContext.getLocalProperty(QUERY_ID)
        if app_id is None:
            raise ValueError(
                "batch_id needs an app_id outside a streaming query's foreachBatch (the "
                "replay markers' name: one per checkpoint)"
            )
    result = SyncResult(app_id=app_id, batch_id=batch_id)
    include = _patterns(include)
    exclude = _patterns(exclude)
    history = _patterns(scd2)
    # How the messages are read, by the schema pass and the decode alike.
    reading = {"mode": mode, "engine": engine, "value_col": value_col, "columns": columns,
               "limits": limits}  # fmt: skip
    messages = df.persist(StorageLevel.MEMORY_AND_DISK)
    decoded = None
    try:
        wire = table_schemas(messages, format, key_col=key_col, streamed=streamed, **reading)
        # Each target's source tables, in the wire's order, and how the target was named.
        members: dict[str, list[WireTable]] = {}
        named: dict[str, str] = {}
        for table in wire:
            entry = TableSync(table.name)
            result.tables[table.name] = entry
            try:
                placed = _place(table, entry, include, exclude, routes, target, named,
                                lambda to: members[to][0].name)  # fmt: skip
                if not placed:
                    continue
                if _matches(table.name, history):
                    entry.history_target = entry.target + HISTORY_SUFFIX
            except Exception as error:  # one table's target: the others go on
                _failed(spark, entry, error, on_error)
                continue
            members.setdefault(entry.target, []).append(table)
        plans: list[_Plan] = []
        given = {"keys": keys, "schemas": schemas, "metadata_columns": metadata_columns,
                 "type_mapping": type_mapping, "properties": properties,
                 "cluster_by": cluster_by, "partition_by": partition_by}  # fmt: skip
        for name, group in members.items():
            entries = [result.tables[t.name] for t in group]
            routed: bool | None = named[name] == "route" or len(group) > 1
            if named[name] == "function" and not routed:
                routed = None  # alone in this batch: its table's stored key says
            try:  # one target's plan: the others go on
                plan = _Plan.make(
                    spark, group, entries, given, routed=routed, unique=route_keys == "unique"
                )
            except Exception as error:
                _failed_all(spark, entries, error, on_error)
                continue
            if plan is not None:
                plans.append(plan)
        result.phases["schemas"] = time.monotonic() - started
        result.messages = messages.count()  # cached by the schema pass: no second read
        rows = messages
        if wire.open_parts and _hold is not None:
            # The parts of sets still open wait for the next micro-batch (sync_stream);
            # the rest is decoded without them.
            rows, held = _without_open_parts(messages, wire.open_parts)
            result.messages_held = len(wire.open_parts)
            _hold(held)
        elif _hold is not None:
            _hold(None)
        if plans:
            # A routed table's source tables are all decoded with its columns and types.
            tables = {t.name: plan.ddl() for plan in plans for t in plan.tables}
            frames = decode(
                rows, format, tables=tables, source_time_zone=source_time_zone, **reading
            )
        else:  # nothing to apply: the events are only counted
            tables = {}
            frames = {"*": decode(rows, format, **reading)}
        decoded = frames["*"].persist(StorageLevel.MEMORY_AND_DISK)
        ops, truncating = _count(decoded, result, bool(plans))
        # Parse failures the schema pass saw first (the decode's error rows say the same).
        result.errors += [text for _, text in wire.errors][: max(0, 10 - len(result.errors))]
        result.decoded = result.messages - result.messages_with_errors - result.messages_held
        result.phases["decode"] = time.monotonic() - started - result.phases["schemas"]

        # The tables whose only events are a truncate: applied on their tables as they are.
        joined, emptied = _truncate_plans(
            spark,
            truncating,
            result,
            frames[None] if plans else frames["*"],
            target,
            routes=routes,
            include=include,
            exclude=exclude,
            history=history,
            given=given,
            named=named,
            members=members,
            planned={plan.entry.target for plan in plans},
            on_error=on_error,
        )

        def run(plan: _Plan) -> None:
            names = [t.name for t in plan.tables]
            if plan.frame is None:  # (a table seen only through its truncate has its events)
                if plan.routed:
                    plan.frame = _routed_frame(frames, list(tables), names)
                else:
                    plan.frame = frames[names[0]]
            plan.apply(
                plan.frame,
                app_id,
                batch_id,
                tombstone_retention=tombstone_retention,
                on_stale=on_stale,
                on_invalid="count",  # its error rows: counted here, or the table failed
                properties=plan.properties,
                cluster_by=plan.cluster_by,
                partition_by=plan.partition_by,
                metadata_columns=plan.metadata,
            )

        todo = []
        for plan in plans:
            # with the tables routed into its target whose only events are a truncate
            entries = [*plan.entries, *joined.get(plan.entry.target, [])]
            bad = next((e for e in entries if e.errors), None)
            truncated = [e.name for e in entries if ops.get(e.name, {}).get("truncate")]
            if bad is not None and on_invalid == "raise":
                _failed_all(spark, entries, _lost(bad), on_error)
            elif truncated and (plan.routed or len(entries) > len(plan.entries)):
                _failed_all(spark, entries, _truncated(plan, truncated), on_error)
            elif any(e.events for e in entries):
                todo.append(plan)
        todo += emptied
        with ThreadPoolExecutor(max_workers=min(parallelism, max(1, len(todo)))) as pool:
            futures = [(plan, pool.submit(run, plan)) for plan in todo]
            for plan, future in futures:
                try:
                    future.result()
                except Exception as error:
                    _failed_all(spark, plan.entries, error, on_error)
        result.phases["apply"] = time.monotonic() - started - sum(result.phases.values())
        for entry in result.tables.values():
            _account(entry)
        for plan in plans:  # a routed table's events: each source table its own share
            if plan.routed:
                _account_routed(plan, ops)
    finally:
        if decoded is not None:
            decoded.unpersist()
        messages.unpersist()
    result.seconds = time.monotonic() - started
    if on_error == "raise" and result.failed:
        raise SyncError(result)
    return result


def sync_stream(
    df: DataFrame,
    format: str,
    target: str | Callable[[WireTable], str | None],
    *,
    checkpoint: str,
    trigger: Mapping[str, Any] | None = None,
    query_name: str | None = None,
    progress: Callable[[SyncResult], None] | None = None,
    **options: Any,
) -> StreamingQuery:
    """Start the streaming query that syncs every micro-batch of ``df`` (Spark's Kafka
    source, or any streaming DataFrame of messages) with :func:`sync`.

    Args:
        df: a streaming DataFrame of messages (``spark.readStream.format("kafka")…``).
        format, target, **options: as :func:`sync` (``app_id`` defaults to the query's id).
        checkpoint: the query's checkpoint location.
        trigger: ``DataStreamWriter.trigger``'s arguments (``{"availableNow": True}``,
            ``{"processingTime": "30 seconds"}``); Spark's default when ``None``.
        query_name: the query's name.
        progress: called with each micro-batch's :class:`SyncResult` (for example
            ``lambda r: print(r.summary())``).

    Returns:
        The started :class:`pyspark.sql.streaming.StreamingQuery`.
    """
    if not df.isStreaming:
        raise ValueError("sync_stream needs a streaming DataFrame; use sync for a batch")
    options.setdefault("streamed", True)
    held = None
    if format == "tencent-dts" and set(_LOCATION) <= set(df.columns):
        held = _HeldParts(f"{str(checkpoint).rstrip('/')}/{HELD_FOLDER}")

    def each(batch: DataFrame, batch_id: int) -> None:
        hold = None
        if held is not None:
            batch = held.before(batch, batch_id)

            def hold(rows: DataFrame | None) -> None:
                held.keep(batch.sparkSession, rows, batch_id)

        done = sync(batch, format, target, batch_id=batch_id, _hold=hold, **options)
        if progress is not None:
            progress(done)

    writer = df.writeStream.foreachBatch(each).option("checkpointLocation", str(checkpoint))
    if trigger:
        writer = writer.trigger(**trigger)
    if query_name:
        writer = writer.queryName(query_name)
    return writer.start()


# --- Tencent DTS multi-part sets across micro-batches ----------------------------------------

HELD_FOLDER = "cdc_decode_open_parts"
"""The folder of a ``sync_stream`` checkpoint that holds the Kafka records of Tencent DTS
multi-part sets open at the end of a micro-batch: ``<batch id>/``, Parquet."""


def _without_open_parts(
    messages: DataFrame, open_parts: list[tuple[str, int, int]]
) -> tuple[DataFrame, DataFrame]:
    """``messages`` without the records of the open parts, and those records."""
    from pyspark.sql import functions as F

    spark = messages.sparkSession
    parts = spark.createDataFrame(open_parts, "topic string, partition int, offset long")
    location = messages.select(*_LOCATION).schema
    parts = parts.select(*[F.col(f.name).cast(f.dataType) for f in location.fields])
    # A broadcast join streams the messages' partitions in their order.
    rest = messages.join(F.broadcast(parts), list(_LOCATION), "left_anti")
    held = messages.join(F.broadcast(parts), list(_LOCATION), "left_semi")
    return rest.select(*messages.columns), held.select(*messages.columns)


class _HeldParts:
    """The open parts of each micro-batch, kept in the checkpoint, put before the next
    micro-batch's records.

    Micro-batch ``n`` writes its open parts to ``<folder>/<n>`` (when it has any) and reads
    ``<folder>/<n - 1>``. A micro-batch run again after a crash has the same records and
    the same held parts, so it writes the same folder again: exactly once, as the tables'
    replay markers are.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def before(self, batch: DataFrame, batch_id: int) -> DataFrame:
        """``batch`` after the parts held by micro-batch ``batch_id - 1``, each Kafka
        partition's records in offset order (one shuffle, only when parts are held)."""
        spark = batch.sparkSession
        try:
            held = spark.read.parquet(f"{self.folder}/{batch_id - 1}")
        except Exception as error:  # no folder: the last micro-batch held nothing
            if "PATH_NOT_FOUND" in str(error) or "does not exist" in str(error):
                return batch
            raise
        joined = held.select(*batch.columns).unionByName(batch)
        try:
            by = [max(1, batch.rdd.getNumPartitions()), "topic", "partition"]
        except Exception:  # Spark Connect has no RDDs: spark.sql.shuffle.partitions
            by = ["topic", "partition"]
        return joined.repartition(*by).sortWithinPartitions(*_LOCATION)

    def keep(self, spark: SparkSession, rows: DataFrame | None, batch_id: int) -> None:
        """Hold ``rows`` (the open parts of micro-batch ``batch_id``) for the next one; drop
        what no run will read again."""
        if rows is not None:
            rows.write.mode("overwrite").parquet(f"{self.folder}/{batch_id}")
        self._drop_before(spark, batch_id - 1)

    def _drop_before(self, spark: SparkSession, batch_id: int) -> None:
        """Delete the folders of micro-batches before ``batch_id`` (a run again of
        ``batch_id + 1`` reads ``batch_id``'s). Classic Spark only (through Hadoop's file
        system); elsewhere they stay, a few records each."""
        jvm = getattr(spark, "_jvm", None)
        if jvm is None:
            return
        path = jvm.org.apache.hadoop.fs.Path(self.folder)
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        if not fs.exists(path):
            return
        for status in fs.listStatus(path):
            name = status.getPath().getName()
            if name.isdigit() and int(name) < batch_id:
                fs.delete(status.getPath(), True)


# --- one table's plan ----------------------------------------------------------------------


@dataclass
class _Column:
    name: str
    type: str
    typed: bool = True


class _Plan:
    """One target's columns (the table's, the wire's versions of each of its source
    tables, ``schemas=``), the schema changes to make, and its apply. A target of one
    source table, or of several routed into it (docs/sync.md, "Routes")."""

    def __init__(
        self, spark: SparkSession, tables: list[WireTable], entries: list[TableSync]
    ) -> None:
        self.spark = spark
        self.tables = tables
        self.entries = entries
        self.entry = entries[0]
        self.routed = False
        self.columns: dict[str, _Column] = {}  # lower-case name -> column, in order
        self.origin: dict[str, str] = {}  # lower-case name -> the table its type is from
        self.widen: dict[str, str] = {}
        self.keys: list[str] | None = None
        self.metadata: list[str] = []
        self.properties: dict[str, str] | None = None
        self.cluster_by: Any = None
        self.partition_by: Any = None
        self.frame: DataFrame | None = None
        self.target = open_table(spark, entries[0].target)

    @property
    def name(self) -> str:
        """The replay marker's name under ``app_id``: the source table's, or a routed
        target's own."""
        return self.entry.target if self.routed else self.entry.name

    @classmethod
    def make(
        cls,
        spark: SparkSession,
        tables: list[WireTable],
        entries: list[TableSync],
        given: Mapping[str, Any],
        *,
        routed: bool | None,
        unique: bool,
    ) -> _Plan | None:
        """``routed``: the tables are applied together into their target; ``None``: a
        target function's table alone in the batch, routed when its target is (the
        target's stored key holds the source table column)."""
        plan = cls(spark, tables, entries)
        target = plan.target
        where = entries[0].target
        exists = target.exists()
        stored_keys = None
        if exists:
            properties = target.properties()
            if _stopped(entries, properties):
                return None
            if KEYS_PROPERTY in properties:
                stored_keys = json.loads(properties[KEYS_PROPERTY])
            for f in target.schema().fields:
                # metadata columns: apply_changes adds them to the images itself
                if f.name not in INTERNAL and not _metadata.is_metadata(f.name):
                    plan.columns[f.name.lower()] = _Column(f.name, f.dataType.simpleString())
        if routed is None:
            routed = _made_routed(stored_keys)
        plan.routed = routed
        for entry in entries:
            entry.routed = routed
        original = {at: c.type for at, c in plan.columns.items()}
        latest: set[str] = set()
        for table in tables:
            schema = _lookup(given["schemas"], table.name)
            declared = _ddl_types(spark, schema) if schema else {}
            rules = _table_rules(given["type_mapping"], table.name)
            latest |= {c.name.lower() for c in table.latest.columns}
            for version in table.versions:
                for column in version.columns:
                    at = column.name.lower()
                    if at in declared:
                        plan._take(column.name, declared[at], table.name)
                        continue
                    spark_type = _type_mapping.spark_type(
                        rules, version.dialect, column.source_type, column.type
                    )
                    # A rule's type is for the columns it creates: one the table has keeps
                    # its type where the rule's cannot widen it (a tinyint stays a tinyint).
                    ruled = spark_type != column.type and at in original
                    plan._take(column.name, spark_type, table.name, keep=ruled)
            for name, spark_type in declared.items():  # declared, not seen in this batch
                if name not in plan.columns:
                    plan._take(name, spark_type, table.name)
        shard = []
        if routed and not unique:
            shard = ["source_db", "source_table"]
            if any(t.source_schema is not None for t in tables):
                shard.insert(1, "source_schema")
        metadata = [n for t in tables for n in _table_metadata(given["metadata_columns"], t.name)]
        if routed:  # the union, in the vocabulary's order
            wanted = {*metadata, *shard}
            metadata = [n for n in _metadata.VOCABULARY if n in wanted]
        plan.metadata = metadata
        if metadata:  # before anything is decoded or written
            names = [c.name for c in plan.columns.values()]
            _metadata.check_source(names, where if routed else tables[0].name)
        for at, column in plan.columns.items():
            if at in original and column.type != original[at]:
                plan.widen[column.name] = column.type
        widened = {c: (original[c.lower()], t) for c, t in plan.widen.items()}
        dropped = [c.name for n, c in plan.columns.items() if n not in latest and exists]
        untyped = [c.name for c in plan.columns.values() if not c.typed]
        plan._key(given["keys"], stored_keys, [_metadata.column(n) for n in shard])
        plan.properties = plan._one(
            "properties", lambda n: _table_properties(given["properties"], n)
        )
        plan.cluster_by = plan._one("cluster_by", lambda n: _lookup(given["cluster_by"], n))
        plan.partition_by = plan._one("partition_by", lambda n: _lookup(given["partition_by"], n))
        if routed and where + HISTORY_SUFFIX in {e.history_target for e in entries}:
            for entry in entries:  # a routed table keeps one history, if any table asks
                entry.history_target = where + HISTORY_SUFFIX
        for entry in entries:
            entry.widened_columns = dict(widened)
            entry.dropped_columns = list(dropped)
            entry.untyped_columns = list(untyped)
        return plan

    def _key(
        self, keys: Mapping[str, Sequence[str]] | None, stored: list[str] | None, shard: list[str]
    ) -> None:
        """The key given to ``apply_changes``: ``keys=``, or the wire's for a new table.
        A table's stored keys are apply_changes' own default, and then it checks the
        events' primary key against them (a source whose key changed is an error, not a
        silent re-key). A routed table's source tables must agree on their key, and its
        key (with ``shard``, the source table columns) is always given: the events'
        primary key is the source key alone."""
        where = self.entry.target
        chosen: list[str] | None = None
        given = False
        of = ""
        for table in self.tables:
            mine = _lookup(keys, table.name)
            key = list(mine) if mine else (list(table.latest.key) if table.latest.key else None)
            if key is None:
                continue
            if chosen is None:
                chosen, given, of = key, bool(mine), table.name
            elif [k.lower() for k in key] != [k.lower() for k in chosen]:
                raise ValueError(
                    f"target {where}: {of} is keyed by {', '.join(chosen)} and {table.name} "
                    f"by {', '.join(key)}: the tables routed into one table need one key "
                    "(give it with keys=)"
                )
        if chosen is not None and self.routed:
            self.keys = [*chosen, *shard]
        elif self.routed:
            self.keys = list(stored) if stored else None
        else:
            self.keys = chosen if given else (None if stored else chosen)
        keyed = list(self.keys or stored or [])
        if not keyed:
            names = ", ".join(t.name for t in self.tables)
            raise ValueError(
                f"no key for table {names}: the wire carries none and the table has none "
                f"stored; give keys={{{self.tables[0].name!r}: [...]}}"
            )
        if stored and (given or self.routed):
            if [k.lower() for k in keyed] != [k.lower() for k in stored]:
                hint = ""
                if self.routed:
                    hint = (
                        " (route_keys='per-table' adds the source table columns to a routed "
                        "table's key, 'unique' does not: give the one the table was made with)"
                    )
                raise ValueError(
                    f"table {where} is keyed by {', '.join(stored)}, not "
                    f"{', '.join(keyed)}{hint}: write to a new table to key it otherwise"
                )
        for entry in self.entries:
            entry.keys = list(keyed)

    def _one(self, option: str, value_of: Callable[[str], Any]) -> Any:
        """A table option's value for the target: its source tables' must be one."""
        values = [(t.name, value_of(t.name)) for t in self.tables]
        for name, value in values[1:]:
            if value != values[0][1]:
                raise ValueError(
                    f"target {self.entry.target}: {option}= gives {values[0][0]} "
                    f"{values[0][1]!r} and {name} {value!r}: the tables routed into one "
                    "table take one (give it by the route's pattern)"
                )
        return values[0][1]

    def _take(self, name: str, spark_type: str | None, source: str, keep: bool = False) -> None:
        """Adds a column, or widens the type of one the plan has (``keep``: the type is a
        type mapping rule's; a column it cannot widen keeps its type). ``source``: the
        source table whose column it is."""
        at = name.lower()
        known = self.columns.get(at)
        if known is None:
            if spark_type is None:
                self.columns[at] = _Column(name, "string", typed=False)
            else:
                self.columns[at] = _Column(name, spark_type)
            self.origin[at] = source
            return
        if spark_type is None or spark_type == known.type or not known.typed:
            return
        wider = wider_type(known.type, spark_type)
        if wider is None and keep:
            return
        if wider is None:
            other = self.origin.get(at)
            if self.routed and other is not None and other != source:
                raise ValueError(
                    f"target {self.entry.target}: column {known.name} is {known.type} in "
                    f"{other} and {spark_type} in {source}, which do not widen to one type "
                    f"(give the column's type for both with schemas=, or route them to "
                    "different targets)"
                )
            raise ValueError(
                f"table {self.entry.target}: column {known.name} changed from {known.type} "
                f"to {spark_type}, which it cannot be widened to (re-create the table, or "
                "change the column yourself and resume)"
            )
        if wider != known.type:
            self.origin[at] = source
        known.type = wider

    def ddl(self) -> str:
        return ", ".join(f"{quote(c.name)} {c.type}" for c in self.columns.values())

    def apply(
        self,
        frame: DataFrame,
        app_id: str | None,
        batch_id: int | None,
        **options: Any,
    ) -> None:
        started = time.monotonic()
        entry = self.entry
        try:
            if self.widen:  # before the apply, which checks the types
                self.target.widen_columns(self.widen)
            txn = {} if app_id is None else {"app_id": f"{app_id}/{self.name}"}
            applied = apply_changes(
                frame,
                entry.target,
                keys=self.keys,
                batch_id=batch_id if app_id is not None else None,
                on_ddl="report",
                **txn,
                **options,
            )
            for each in self.entries:
                each.apply = applied
                each.created = applied.created
                each.added_columns = list(applied.added_columns)
                each.ddl = list(applied.ddl)
                each.rows_written = applied.rows_written
                if applied.skipped:
                    each.skipped = "replay: the table holds this batch already"
            if entry.history_target is not None:
                history_txn = {} if app_id is None else {"app_id": f"{app_id}/{self.name}/history"}
                history = apply_changes(
                    frame,
                    entry.history_target,
                    keys=entry.keys,
                    scd_type=2,
                    batch_id=batch_id if app_id is not None else None,
                    on_ddl="report",
                    on_stale=options.get("on_stale", "warn"),
                    on_invalid=options.get("on_invalid", "raise"),
                    properties=options.get("properties"),
                    cluster_by=options.get("cluster_by"),
                    partition_by=options.get("partition_by"),
                    metadata_columns=options.get("metadata_columns"),
                    **history_txn,
                )
                for each in self.entries:
                    each.history = history
        finally:
            for each in self.entries:
                each.seconds = time.monotonic() - started


# --- helpers -------------------------------------------------------------------------------


def wider_type(old: str, new: str) -> str | None:
    """The Spark type both ``old`` and ``new`` values fit, where Delta's type widening can
    change ``old`` to it without rewriting (a larger integer, ``float`` to ``double``, a
    decimal of more digits on either side of the point, an integer into a decimal,
    ``date`` to ``timestamp_ntz``); ``None`` where it cannot (``string`` to ``int``, a
    decimal over 38 digits and the like)."""
    if old == new:
        return old
    if old in _INTEGRAL and new in _INTEGRAL:
        return old if _INTEGRAL[old] >= _INTEGRAL[new] else new
    if {old, new} == {"float", "double"}:
        return "double"
    if {old, new} == {"date", "timestamp_ntz"}:
        return "timestamp_ntz"
    a, b = _decimal(old), _decimal(new)
    if a is None or b is None:
        return None
    scale = max(a[1], b[1])
    digits = max(a[0] - a[1], b[0] - b[1])
    if digits + scale > 38:
        return None
    return f"decimal({digits + scale},{scale})"


def _decimal(text: str) -> tuple[int, int] | None:
    """A decimal's (or an integer's) precision and scale."""
    if text in _INTEGRAL:
        return (_INTEGRAL[text] + (text == "bigint"), 0)  # bigint: 20 digits unsigned too
    found = _DECIMAL.match(text.replace(" ", ""))
    return None if found is None else (int(found.group(1)), int(found.group(2)))


def _ddl_types(spark: SparkSession, ddl: str) -> dict[str, str]:
    """A DDL column list's types by lower-case name."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(ddl)
    if not isinstance(parsed, StructType):
        raise ValueError(f"schemas=: not a column list: {ddl!r}")
    return {f.name.lower(): f.dataType.simpleString() for f in parsed.fields}


def _matches(name: str, patterns: Iterable[str]) -> bool:
    lower = name.lower()
    return any(fnmatch.fnmatchcase(lower, p.lower()) for p in patterns)


def _lookup(options: Mapping[str, Any] | None, name: str) -> Any:
    """An option of ``name``: its exact (case-insensitive) entry, else the first pattern
    that matches."""
    if not options:
        return None
    for key, value in options.items():
        if key.lower() == name.lower():
            return value
    for key, value in options.items():
        if fnmatch.fnmatchcase(name.lower(), key.lower()):
            return value
    return None


def _table_properties(
    properties: Mapping[str, Mapping[str, str]] | None, name: str
) -> dict[str, str] | None:
    """The ``properties=`` of table ``name`` (checked by :func:`sync`): every matching
    pattern's, in the order given, then its exact entry's (case-insensitive)."""
    if not properties:
        return None
    out: dict[str, str] = {}
    exact: Mapping[str, str] = {}
    for pattern, values in properties.items():
        if pattern.lower() == name.lower():
            exact = values
        elif fnmatch.fnmatchcase(name.lower(), pattern.lower()):
            out.update(values)
    out.update(exact)
    return out or None


def _table_metadata(metadata_columns: Any, name: str) -> list[str]:
    """The metadata columns of table ``name`` (checked by :func:`_metadata.checked`)."""
    if isinstance(metadata_columns, Mapping):
        return _metadata.names(_lookup(metadata_columns, name))
    return _metadata.names(metadata_columns)


def _table_rules(type_mapping: Any, name: str) -> list[str]:
    """The type mapping rules of table ``name`` (checked by :func:`_type_mapping.checked`)."""
    if isinstance(type_mapping, Mapping):
        return _type_mapping.names(_lookup(type_mapping, name))
    return _type_mapping.names(type_mapping)


def _target(target: str | Callable[[WireTable], str | None], table: WireTable) -> str | None:
    if callable(target):
        return target(table)
    names = {"db": table.source_db, "schema": table.source_schema, "table": table.source_table}
    for name in re.findall(r"\{(\w+)\}", target):
        if name not in names:
            raise ValueError(f"target template: unknown field {{{name}}} (db, schema, table)")
        if names[name] is None:
            raise ValueError(f"target template: table {table.name} has no {name}")
    return target.format(**names)


def _count(
    decoded: DataFrame, result: SyncResult, multi: bool
) -> tuple[dict[str, dict[str, int]], dict[str, WireTable]]:
    """Per table and op, the decoded rows, and an error of each table's error rows (one
    action: it fills the cache). An error row of a table (a value of it that did not
    convert: typed mode names the table) counts for the table and as a bad message.
    A table the schema pass did not list (no row change in the batch) but whose events
    hold a ``truncate`` gets its :class:`TableSync` here, its events counted as its own
    (docs/sync.md, "Truncates"). Returns each table's events by op, and those tables (a
    :class:`WireTable` of their names, no schema version: the wire carried none)."""
    from pyspark.sql import functions as F

    by = ["table", "op"] if multi else [F.lit(None).alias("table"), "op"]
    # A table no plan decoded (excluded, stopped, failed, no row change) by its source names.
    unrouted = F.col("table").isNull() if multi else F.lit(True)
    parts = ("source_db", "source_schema", "source_table")
    by += [F.when(unrouted, F.col(c)).alias(f"named_{c}") for c in parts]
    rows = (
        decoded.groupBy(*by)
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.max("event_time").alias("newest"),
            F.min(F.when(F.col("op") == "error", F.col("error"))).alias("sample"),
        )
        .collect()
    )
    # Each row's table: the plan's, else the one its source names make (their parts kept).
    tabled = []
    for row in rows:
        names = tuple(row[f"named_{c}"] for c in parts)
        tabled.append((row, names, row["table"] or ".".join(p for p in names if p)))
    truncated: dict[str, WireTable] = {}
    for row, names, name in tabled:
        if row["op"] == "truncate" and name and not row["table"] and name not in result.tables:
            truncated[name] = WireTable(*names, versions=())
            result.tables[name] = TableSync(name)
    samples = []
    ops: dict[str, dict[str, int]] = {}
    for row, _, name in tabled:
        result.events += row["count"]
        entry = result.tables.get(name) if name else None
        if entry is not None:
            mine = ops.setdefault(entry.name, {})
            mine[row["op"]] = mine.get(row["op"], 0) + row["count"]
        if row["op"] == "error":
            result.messages_with_errors += row["count"]
            if entry is not None:
                samples.append(row["sample"])
                entry.errors += row["count"]
                entry.error_sample = row["sample"]
        elif row["newest"] is not None:
            result.newest_event = max(result.newest_event or row["newest"], row["newest"])
        if entry is not None:
            entry.events += row["count"]
        elif row["op"] != "error":
            result.unclaimed[row["op"]] = result.unclaimed.get(row["op"], 0) + row["count"]
    result.errors = [s for s in samples if s][:10]
    return ops, truncated


def _lost(entry: TableSync) -> ValueError:
    """The error of a table some of whose messages did not decode (``on_invalid="raise"``)."""
    return ValueError(
        f"{entry.errors} message(s) of table {entry.name} did not decode, for example: "
        f"{entry.error_sample}. Nothing of the table was written in this batch: give the "
        f"column's type with schemas={{{entry.name!r}: ...}}, or pass on_invalid='count' "
        "to apply the table without those messages"
    )


def _account(entry: TableSync) -> None:
    """The table's events as written, errors and not written by reason (from its apply)."""
    rest = entry.events - entry.errors
    apply = entry.apply
    entry.written = 0
    entry.not_written = {}
    if entry.error is not None:
        reason = "failed"
    elif apply is not None and apply.skipped:
        reason = "replayed"
    elif entry.stopped:
        reason = "stopped"
    elif apply is None and (entry.skipped or "").startswith(NO_TABLE):
        reason = NO_TABLE
    elif apply is None:
        reason = "excluded"
    else:
        entry.written = apply.applied
        counts = {"unkeyed": apply.unkeyed, "unsequenced": apply.unsequenced, **apply.other}
        entry.not_written = {reason: n for reason, n in counts.items() if n}
        return
    if rest:
        entry.not_written[reason] = rest


def _account_routed(plan: _Plan, ops: Mapping[str, Mapping[str, int]]) -> None:
    """The events of a routed table's source tables, each table's own share of the one
    apply: its row changes written but those unkeyed or unsequenced (counted per table
    by one more aggregate, only when the apply had any), the rest by op; and its own DDL
    statements (read from the batch only when the apply saw any)."""
    from pyspark.sql import functions as F

    applied = plan.entry.apply
    if any(e.error is not None or e.apply is None or e.apply.skipped for e in plan.entries):
        return  # failed or replayed: _account's reasons stand
    shares: dict[str, tuple[int, int]] = {}
    if applied is not None and (applied.unkeyed or applied.unsequenced) and plan.frame is not None:
        row = F.col("op").isin(*ROW_OPS)
        sequenced = F.col("sequence").isNotNull()
        source_keys = [k for k in plan.keys or [] if not _metadata.is_metadata(k)]

        def keyed(image: str) -> Any:
            out = F.lit(True)
            for k in source_keys:
                out = out & F.col(image)[k].isNotNull()
            return out

        unkeyed = row & sequenced & ~(keyed("after") | keyed("before"))
        for r in (
            plan.frame.groupBy("table")
            .agg(
                F.count(F.when(unkeyed, 1)).alias("unkeyed"),
                F.count(F.when(row & ~sequenced, 1)).alias("unsequenced"),
            )
            .collect()
        ):
            shares[r["table"]] = (r["unkeyed"], r["unsequenced"])
    ddl: dict[str, list[tuple[bytes, str]]] = {}
    if applied is not None and applied.ddl and plan.frame is not None:
        # Each table's own statements (the apply's are all of its tables'), in sequence order.
        statements = plan.frame.where(F.col("op") == "ddl").select("table", "sequence", "ddl")
        for r in statements.collect():
            ddl.setdefault(r["table"], []).append((bytes(r["sequence"] or b""), r["ddl"]))
    for entry in plan.entries:
        entry.ddl = [text for _, text in sorted(ddl.get(entry.name, []))]
        mine = ops.get(entry.name, {})
        unkeyed_n, unsequenced_n = shares.get(entry.name, (0, 0))
        changes = sum(n for op, n in mine.items() if op in ROW_OPS)
        entry.written = changes - unkeyed_n - unsequenced_n
        counts = {"unkeyed": unkeyed_n, "unsequenced": unsequenced_n}
        counts.update({op: n for op, n in mine.items() if op not in ROW_OPS and op != "error"})
        entry.not_written = {reason: n for reason, n in counts.items() if n}


def _routed_frame(frames: Mapping[Any, DataFrame], order: list[str], names: list[str]) -> Any:
    """The events of a routed table's source tables as one frame, in one read of the
    decoded batch (a union of their frames would read it once per table). Each was
    decoded with the routed table's columns, so their images (the decode's ``before_<i>``
    and ``after_<i>``, null on other tables' rows) are of one type; ``table`` says whose
    each row is."""
    from pyspark.sql import functions as F

    first = frames[names[0]]
    if len(names) == 1:
        return first.withColumn("table", F.lit(names[0]))
    at = [order.index(n) for n in names]
    images = {c: F.coalesce(*[F.col(f"{c}_{i}") for i in at]).alias(c) for c in ("before", "after")}
    columns = [images.get(c, F.col(c)) for c in first.columns if c != "table"]
    return frames["*"].where(F.col("table").isin(names)).select(*columns, "table")


NO_TABLE = "truncate of no table"
"""The reason (:attr:`TableSync.not_written`) of the events of a table whose only events
in a batch are a ``truncate`` and whose target does not exist: nothing to empty."""


def _collision(target: str, other: str) -> ValueError:
    """The error of a second table a ``target`` template gives the target of another."""
    return ValueError(
        f"target {target} is also {other}'s: give the template {{schema}} (or a target "
        "function) to tell them apart, or routes= to apply them into one table"
    )


def _truncate_plans(
    spark: SparkSession,
    tables: Mapping[str, WireTable],
    result: SyncResult,
    events: DataFrame,
    target: str | Callable[[WireTable], str | None],
    *,
    routes: Mapping[str, str] | None,
    include: list[str],
    exclude: list[str],
    history: list[str],
    given: Mapping[str, Any],
    named: Mapping[str, str],
    members: Mapping[str, list[WireTable]],
    planned: set[str],
    on_error: str,
) -> tuple[dict[str, list[TableSync]], list[_Plan]]:
    """The tables whose only events in the batch are a ``truncate`` (and DDL): the schema
    pass lists no such table, :func:`_count` names them (``tables``), and their events
    are ``events``' (the generic events no plan claims). Each is taken as a table of the
    batch (``include``/``exclude``, its target, ``scd2=``) and:

    - its target is one the batch's other tables go to (routed): returned by target, to
      fail with them, as a truncate of a routed table does (:func:`_truncated`);
    - its target does not exist: not written, :data:`NO_TABLE` (nothing to empty);
    - its target exists, stopped: stopped; routed (several such tables, a route, a target
      function's table keyed by its source table): fails (:func:`_truncated`);
    - else a plan of the table as it is (its columns, its stored key): ``apply_changes``
      of its events, generic ones (docs/sync.md, "Truncates").

    Returns the routed ones by target, and the plans."""
    from functools import reduce

    from pyspark.sql import functions as F

    groups: dict[str, list[tuple[WireTable, TableSync]]] = {}
    hows: dict[str, str] = dict(named)
    for name, table in tables.items():
        entry = result.tables[name]

        def first(to: str) -> str:
            return members[to][0].name if to in members else groups[to][0][0].name

        try:
            if not _place(table, entry, include, exclude, routes, target, hows, first):
                continue
        except Exception as error:  # one table's target: the others go on
            _failed(spark, entry, error, on_error)
            continue
        groups.setdefault(entry.target, []).append((table, entry))
    joined: dict[str, list[TableSync]] = {}
    plans: list[_Plan] = []
    for to, group in groups.items():
        entries = [entry for _, entry in group]
        if to in planned:  # routed with tables of the batch: fails with them
            for entry in entries:
                entry.routed = True
            joined[to] = entries
            continue
        if to in members:  # the target of tables of the batch that failed or are stopped
            first = result.tables[members[to][0].name]
            for entry in entries:
                entry.routed = True
                entry.stopped, entry.skipped = first.stopped, first.skipped
                entry.error = first.error
            continue
        try:  # one target's: the others go on
            plan = _Plan(spark, [table for table, _ in group], entries)
            if not plan.target.exists():
                for entry in entries:
                    entry.skipped = f"{NO_TABLE}: {to} does not exist, nothing to empty"
                continue
            properties = plan.target.properties()
            if _stopped(entries, properties):
                continue
            stored = json.loads(properties[KEYS_PROPERTY]) if KEYS_PROPERTY in properties else None
            function_routed = hows[to] == "function" and _made_routed(stored)
            if hows[to] == "route" or len(group) > 1 or function_routed:
                for entry in entries:
                    entry.routed = True
                raise _truncated(plan, [entry.name for entry in entries])
            ((table, entry),) = group
            mine = _lookup(given["keys"], entry.name)
            keyed = list(mine) if mine else list(stored or [])
            if not keyed:
                raise ValueError(
                    f"no key for table {entry.name}: its table {to} has none stored; give "
                    f"keys={{{entry.name!r}: [...]}}"
                )
            plan.keys = list(mine) if mine else None  # else the stored ones
            entry.keys = keyed
            plan.metadata = _table_metadata(given["metadata_columns"], entry.name)
            plan.properties = _table_properties(given["properties"], entry.name)
            if _matches(entry.name, history):
                kept = to + HISTORY_SUFFIX
                if open_table(spark, kept).exists():  # else no version to close
                    entry.history_target = kept
            names = {"source_db": table.source_db, "source_schema": table.source_schema,
                     "source_table": table.source_table}  # fmt: skip
            same = [F.col(c).eqNullSafe(F.lit(v).cast("string")) for c, v in names.items()]
            plan.frame = events.where(reduce(lambda a, b: a & b, same))
            plans.append(plan)
        except Exception as error:
            _failed_all(spark, entries, error, on_error)
    return joined, plans


def _place(
    table: WireTable,
    entry: TableSync,
    include: list[str],
    exclude: list[str],
    routes: Any,
    target: Any,
    hows: dict[str, str],
    first: Callable[[str], str],
) -> bool:
    """Gives a table of the batch its target (``entry.target``), or the reason it has none
    (``entry.skipped``: not included, excluded, the target function gave None; then
    ``False``). ``hows``: how each target so far was named (``route``, ``function``,
    ``template``), this table's added; ``first``: the first table of a target.

    Raises:
        ValueError: a template gives the target of another table (:func:`_collision`), or
            the target cannot be made of the table's names."""
    if include and not _matches(table.name, include):
        entry.skipped = "not included"
        return False
    if _matches(table.name, exclude):
        entry.skipped = "excluded"
        return False
    route = _lookup(routes, table.name)
    how = "route" if route is not None else "function" if callable(target) else "template"
    entry.target = _target(route if route is not None else target, table)
    if entry.target is None:
        entry.skipped = "the target function gave None"
        return False
    before = hows.get(entry.target)
    if before is not None and "template" in (before, how):
        raise _collision(entry.target, first(entry.target))
    hows[entry.target] = "route" if "route" in (before, how) else how
    return True


def _stopped(entries: Sequence[TableSync], properties: Mapping[str, str]) -> bool:
    """Whether the target (its ``properties``) is stopped (:data:`STOPPED_PROPERTY`): then
    its tables, ``entries``, are marked so and skipped."""
    stopped = properties.get(STOPPED_PROPERTY)
    if stopped is None:
        return False
    for entry in entries:
        entry.stopped = True
        entry.skipped = f"stopped: {stopped}"
    return True


def _made_routed(stored_keys: Sequence[str] | None) -> bool:
    """Whether a table was made routed with ``route_keys="per-table"``: its stored key
    holds the source table column (how a target function's table alone in a batch is
    known to be routed)."""
    shard = _metadata.column("source_table").lower()
    return any(k.lower() == shard for k in stored_keys or [])


def _truncated(plan: _Plan, names: list[str]) -> ValueError:
    """The error of a routed table one of whose source tables was truncated."""
    return ValueError(
        f"table {', '.join(names)} was truncated in this batch, and {plan.entry.target} "
        "holds the rows of other tables routed into it too, which a truncate applied to "
        "it would delete: nothing of it was written in this batch. Re-sync the routed "
        "table from a snapshot of its tables (with on_error='continue' the other targets "
        "go on meanwhile)"
    )


def _failed_all(
    spark: SparkSession, entries: Sequence[TableSync], error: BaseException, on_error: str
) -> None:
    """Records the error of a target's tables (one, or the tables routed into it); with
    ``on_error="continue"`` stops the target once."""
    for i, entry in enumerate(entries):
        _failed(spark, entry, error, on_error if i == 0 else "raise")
        if i and on_error == "continue":
            entry.stopped = True
            entry.error = entries[0].error


def checked_routes(routes: Any, route_keys: Any = "per-table") -> None:
    """``routes=`` and ``route_keys=`` checked before anything is read: a mapping of table
    patterns to targets (names or paths, ``{db}``, ``{schema}`` and ``{table}`` fields
    only), and one of :data:`ROUTE_KEYS`."""
    if route_keys not in ROUTE_KEYS:
        raise ValueError(
            f"route_keys must be one of {', '.join(map(repr, ROUTE_KEYS))}, not {route_keys!r}"
        )
    if routes is None:
        return
    if not isinstance(routes, Mapping):
        raise ValueError(f"routes must map table patterns to targets, not {routes!r}")
    for pattern, to in routes.items():
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError(f"routes: {pattern!r} is not a table pattern")
        if not isinstance(to, str) or not to.strip():
            raise ValueError(f"routes: {pattern!r} must map to a target name or path, not {to!r}")
        for name in re.findall(r"\{(\w*)\}", to):
            if name not in ("db", "schema", "table"):
                raise ValueError(
                    f"routes: {pattern!r}: target {to!r} has the unknown field {{{name}}} "
                    "(db, schema, table)"
                )


def _failed(spark: SparkSession, entry: TableSync, error: BaseException, on_error: str) -> None:
    """Records a table's error; with ``on_error="continue"`` stops the table (a property on
    it, where it exists)."""
    entry.error = f"{type(error).__name__}: {error}"
    if on_error != "continue" or entry.target is None:
        return
    entry.stopped = True
    try:
        table = open_table(spark, entry.target)
        if table.exists():
            table.set_properties({STOPPED_PROPERTY: entry.error[:2000]})
    except Exception as again:  # the stop itself failed: say so, keep the first error
        entry.error += f" (and stopping the table failed: {again})"
