"""The rules of :func:`cdc_decode.spark.apply_changes`, written once for every table format.

A batch of change events becomes **entries** (one per row change, two for an update that
moves its key), the entries are **folded** to one row per key, a key change with a partial
image is **filled** from the old key's row, and the result is written by one ``MERGE``
whose clauses (SCD type 1: their SQL text is :mod:`._rules_sql`) or re-chained versions
(SCD type 2) hold the rules below. The table format (:mod:`cdc_decode.spark._tables`)
runs that ``MERGE``; the rules import no format, only the leaves :mod:`._sql` (SQL text)
and :mod:`._plans` (plan helpers) that the formats import too.

**Per-column write sequences (type 1).** Each row keeps its newest change's sequence
(``_cdc_sequence``, which decides whether the key is live or deleted, with its event time)
and, per column, the sequence of the change that last wrote the column, stored sparsely:
``_cdc_base_sequence`` (null: the row's sequence; ``X''``: never written) is the write
sequence of every column not in ``_cdc_column_sequences`` (a ``map<string, binary>`` of the
columns written since). Whole images leave the map empty and the base null. A change writes
a column when it carries it and is newer than the column's write, so a late, older image
fills exactly the columns no newer change wrote. A delete keeps its row as a tombstone
with the values it had (current rows hide them: they are null for the source): a key
change arriving later reads them; a re-insert after a delete starts from an empty row, since
every value written before the delete is dropped when the key is live again.

**Equal sequences of one key** are ordered the same way on every path: a delete before an
upsert (the upsert wins), two upserts by a hash of their images (the same one wins in
every run), and across batches the change already in the table stays unless it is a delete
and the new change an upsert.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from .._typed import AFTER_ABSENT
from ._plans import col, merge_outcome
from ._plans import detached as detached  # noqa: F401 (the rules' callers use it here)
from ._sql import Clause, in_list, literal, quote

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

    from ._tables import Table

UPSERT_OPS: tuple[str, ...] = ("insert", "read", "update", "update_after")
"""Ops that write a row: its ``after`` image (a ``read`` is a snapshot row)."""

REMOVE_OPS: tuple[str, ...] = ("delete", "update_before")
"""Ops that remove a row: its ``before`` image names the key."""

ROW_OPS = UPSERT_OPS + REMOVE_OPS

# The table's own columns.
SEQUENCE = "_cdc_sequence"
EVENT_TIME = "_cdc_event_time"
DELETED = "_cdc_deleted"
BASE_SEQUENCE = "_cdc_base_sequence"
COLUMN_SEQUENCES = "_cdc_column_sequences"
START_SEQUENCE = "_cdc_start_sequence"
END_SEQUENCE = "_cdc_end_sequence"
START_TIME = "_cdc_start_time"
END_TIME = "_cdc_end_time"
CURRENT = "_cdc_current"
ABSENT = "_cdc_absent"

SCD1_COLUMNS = (SEQUENCE, EVENT_TIME, DELETED, BASE_SEQUENCE, COLUMN_SEQUENCES)
"""The bookkeeping columns of a type 1 table, after the source's columns."""

SCD2_COLUMNS = (START_SEQUENCE, END_SEQUENCE, START_TIME, END_TIME, CURRENT, DELETED, ABSENT)
"""The bookkeeping columns of a type 2 table, after the source's columns."""

INTERNAL = frozenset(SCD1_COLUMNS) | frozenset(SCD2_COLUMNS)

# Columns of the entries and of the folded rows.
KIND = "_kind"  # "u" upsert, "d" delete
TIE = "_tie"  # orders upserts of one key with one sequence
FROM = "_from"  # an upsert that moved its key: the old key (a struct of the key columns)
LAST_SEQ = "_last_seq"
LAST_KIND = "_last_kind"
LAST_TIME = "_last_time"
DEL_SEQ = "_del_seq"  # the batch's newest delete of the key
DEL_PREV = "_del_prev"  # the one before it
DEL_MAX = "_del_max"  # the per-column fold's window: the key's newest delete
FULL_SEQ = "_full_seq"  # the newest upsert that carried every column
UPSERT_SEQ = "_upsert_seq"  # whole images: the newest upsert (its image is the values)
MOVE_SEQ = "_move_seq"


def _all(columns: Sequence[Column], default: bool = True) -> Column:
    from pyspark.sql import functions as F

    return reduce(lambda a, b: a & b, columns) if columns else F.lit(default)


def _any(columns: Sequence[Column]) -> Column:
    from pyspark.sql import functions as F

    return reduce(lambda a, b: a | b, columns) if columns else F.lit(False)


def _and(parts: Sequence[str], default: str = "true") -> str:
    return "(" + " AND ".join(parts) + ")" if parts else default


def _or(parts: Sequence[str], default: str = "false") -> str:
    return "(" + " OR ".join(parts) + ")" if parts else default


def _memo(method):
    """A method of :class:`Images` computed once per arguments: the rules ask for the same
    expressions many times."""

    def wrapper(self, *args):
        key = (method.__name__, *args)
        found = self._columns.get(key)
        if found is None:
            found = self._columns[key] = method(self, *args)
        return found

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class Images:
    """Reading the key and value columns out of the events' ``before``/``after`` images,
    as SQL text over the events' columns (a frame is then made in one py4j call, where
    Spark's column API takes one or more per function).

    Args:
        columns: the table's columns (``StructField``), keys included.
        keys: the key columns.
        generic: images are ``map<string, string>`` (else structs of ``columns``).
        absent: typed events with an ``after_absent`` column (docs/typed.md).
        ignore_null_updates: a null in an ``after`` image counts as absent.
        metadata: the metadata columns among ``columns`` (``metadata_columns=``): every
            image carries them, and a delete's (its ``before`` image's) are its history
            version's values (:mod:`._metadata`).

    Generic images: a column's value is the map entry with its exact name, else the one
    entry whose name equals it ignoring case; the text is converted with ``try_cast``
    (a value that does not convert is null, and counted).
    """

    def __init__(
        self,
        columns: Sequence[Any],
        keys: Sequence[str],
        generic: bool,
        *,
        absent: bool = False,
        ignore_null_updates: bool = False,
        metadata: Sequence[str] = (),
    ) -> None:
        self.types = {f.name: f.dataType for f in columns}
        self.names = [f.name for f in columns]
        self.keys = list(keys)
        self.values = [n for n in self.names if n not in self.keys]
        self.generic = generic
        self.absent = absent
        self.ignore_null_updates = ignore_null_updates
        self.metadata = frozenset(metadata)
        self._columns: dict[tuple, str] = {}

    def _matches(self, image: str, name: str) -> str:
        return f"filter(map_keys({quote(image)}), k -> lower(k) = {literal(name.lower())})"

    @_memo
    def raw(self, image: str, name: str) -> str:
        """The image's value for ``name`` as it is (generic: the text)."""
        value = f"{quote(image)}[{literal(name)}]"
        if not self.generic:
            return value
        matches = self._matches(image, name)
        other = f"CASE WHEN size({matches}) = 1 THEN {quote(image)}[get({matches}, 0)] END"
        contains = f"map_contains_key({quote(image)}, {literal(name)})"
        return f"CASE WHEN {contains} THEN {value} ELSE {other} END"

    @_memo
    def get(self, image: str, name: str) -> str:
        """A column of an image, of the column's type."""
        from pyspark.sql.types import StringType

        raw = self.raw(image, name)
        if not self.generic or isinstance(self.types[name], StringType):
            return raw
        return f"try_cast({raw} AS {self.types[name].simpleString()})"

    @_memo
    def unconverted(self, image: str, name: str) -> str:
        """The image has text for ``name`` that does not convert to its type."""
        return f"({self.raw(image, name)} IS NOT NULL AND {self.get(image, name)} IS NULL)"

    @_memo
    def present(self, name: str) -> str:
        """The ``after`` image carries a value (maybe null) for column ``name``."""
        if self.generic:
            matches = self._matches("after", name)
            contains = f"map_contains_key(`after`, {literal(name)})"
            carried = f"coalesce({contains} OR size({matches}) = 1, false)"
            if self.ignore_null_updates:
                return f"({carried} AND {self.raw('after', name)} IS NOT NULL)"
            return carried
        if self.ignore_null_updates:
            return f"(`after`[{literal(name)}] IS NOT NULL)"  # an absent column is null too
        if self.absent:
            # A null after_absent with an image (a typed frame made by hand): all present.
            listed = f"coalesce(array_contains({quote(AFTER_ABSENT)}, {literal(name)}), false)"
            return f"(`after` IS NOT NULL AND NOT {listed})"
        return "(`after` IS NOT NULL)"

    def unknown(self) -> str:
        """Generic: the ``after`` image's keys that name no column (ignoring case)."""
        lower = ", ".join(literal(n.lower()) for n in self.names)
        return f"filter(map_keys(`after`), k -> NOT array_contains(array({lower}), lower(k)))"

    @_memo
    def keyed(self, image: str) -> str:
        """The image has a value for every key column."""
        return _and([f"{self.get(image, k)} IS NOT NULL" for k in self.keys])

    @_memo
    def moved(self) -> str:
        """An update whose key changed (both images keyed, some key column differs)."""
        differs = _or(
            [f"NOT ({self.get('before', k)} <=> {self.get('after', k)})" for k in self.keys]
        )
        return f"(op = 'update' AND {self.keyed('before')} AND {self.keyed('after')} AND {differs})"


def entries(selected: DataFrame, image: Images) -> DataFrame:
    """The keyed, sequenced row changes as entries: the key, ``_kind`` (``u`` upsert, ``d``
    delete), ``_seq``, ``_time``, every other column's value and ``_p_<i>`` (present),
    ``_tie`` (a hash of an upsert's image) and ``_from`` (the old key of an update that
    moved its key). An update that moves its key gives two: the old key's delete first.
    One select of SQL text."""
    keys, values, get = image.keys, image.values, image.get
    after_keyed = image.keyed("after")
    before_keyed = image.keyed("before")

    def field(name: str, value: str) -> str:
        return f"{literal(name)}, {value}"

    def struct(fields: Sequence[str]) -> str:
        return f"named_struct({', '.join(fields)})"

    new_key = [
        field(k, f"CASE WHEN {after_keyed} THEN {get('after', k)} ELSE {get('before', k)} END")
        for k in keys
    ]
    old_key = [
        field(k, f"CASE WHEN {before_keyed} THEN {get('before', k)} ELSE {get('after', k)} END")
        for k in keys
    ]
    payload = [field(c, get("after", c)) for c in values]
    presence = [field(f"_p_{i}", image.present(c)) for i, c in enumerate(values)]
    hashed = [get("after", c) for c in values] + [image.present(c) for c in values]
    tie = (
        f"xxhash64({', '.join(hashed)})"
        if values
        else "CAST(0 AS BIGINT)"  # a table of key columns only: its upserts are alike
    )

    # A delete carries no values (the folds of type 1 read none of a delete's), but its
    # metadata: a history's deleted version holds them. A null of the value's type.
    def none(c: str) -> str:
        return f"CASE WHEN false THEN {get('after', c)} END"

    nothing = [field(c, get("before", c) if c in image.metadata else none(c)) for c in values]
    absent = [field(f"_p_{i}", "false") for i in range(len(values))]
    common = [field("_seq", "_seq"), field("_time", "_time")]
    from_key = [field(k, get("before", k)) for k in keys]
    moved_from = struct(from_key)
    nowhere = f"CASE WHEN false THEN {moved_from} END"  # a null of the old key's type

    def upsert(origin: str) -> str:
        return struct([*new_key, field(KIND, "'u'"), *common, *payload, *presence,
                       field(TIE, tie), field(FROM, origin)])  # fmt: skip

    def remove(key: list[str]) -> str:
        return struct([*key, field(KIND, "'d'"), *common, *nothing, *absent,
                       field(TIE, "CAST(0 AS BIGINT)"), field(FROM, nowhere)])  # fmt: skip

    upserting = in_list("op", UPSERT_OPS)
    changes = (
        f"CASE WHEN {upserting} AND {image.moved()} "
        f"THEN array({remove(from_key)}, {upsert(moved_from)}) "
        f"WHEN {upserting} THEN array({upsert(nowhere)}) "
        f"WHEN {in_list('op', REMOVE_OPS)} THEN array({remove(old_key)}) END"
    )
    keyed = " AND ".join([*(f"{quote(k)} IS NOT NULL" for k in keys), "_seq IS NOT NULL"])
    return selected.selectExpr(f"inline({changes})").where(keyed)


def lacking(image: Images) -> str | None:
    """The SQL condition of an upsert of typed events that lacks a column (``after_absent``
    not empty), which makes its batch need the per-column fold; ``None`` without an
    ``after_absent`` column (every upsert carries every column)."""
    if not image.absent:
        return None
    return (
        f"{in_list('op', UPSERT_OPS)} AND `after` IS NOT NULL "
        f"AND coalesce(size({quote(AFTER_ABSENT)}) > 0, false)"
    )


def fold_whole(entries: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """One row per key when every upsert carries every column: the newest change
    (``_last_*``) with its image, or, when the newest is a delete, the delete and the
    image of the change before it if that is an upsert (a tombstone keeps it:
    ``_upsert_seq`` and the values).

    The entries are ordered by sequence, then kind (an upsert after a delete of the same
    sequence), then tie, newest first. A ``dense_rank`` up to 2 keeps each key's newest two
    distinct changes, which Spark limits per key before the shuffle (a window group limit),
    so a key with many changes in the batch costs one sort of two rows; a second window
    over the same order (no new sort) takes the newest row and the newest upsert among
    them. The newest upsert further back is not looked for: after a delete, then another
    delete of the key (its re-insert not yet delivered), the tombstone keeps the stored
    values until that re-insert arrives."""
    # SQL text, one py4j call per select: the same plan as the column API's, which took
    # hundreds of calls.
    key_list = ", ".join(quote(k) for k in keys)
    order = f"PARTITION BY {key_list} ORDER BY _seq DESC, {KIND} DESC, {TIE} DESC"
    everything = f"{order} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    image = ", ".join(f"{literal(c)}, {quote(c)}" for c in values)
    upsert = f"named_struct('u', _seq{', ' + image if image else ''})"
    recent = entries.selectExpr("*", f"dense_rank() OVER ({order}) AS _rank").where("_rank <= 2")
    return (
        recent.selectExpr(
            *[quote(k) for k in keys],
            "_seq",
            KIND,
            "_time",
            f"row_number() OVER ({order}) AS _row",
            f"first(CASE WHEN {KIND} = 'u' THEN {upsert} END, true) OVER ({everything}) AS _u",
        )
        .where("_row = 1")
        .selectExpr(
            *[quote(k) for k in keys],
            f"_seq AS {LAST_SEQ}",
            f"{KIND} AS {LAST_KIND}",
            f"_time AS {LAST_TIME}",
            f"CASE WHEN {KIND} = 'd' THEN _seq END AS {DEL_SEQ}",
            f"CAST(NULL AS BINARY) AS {DEL_PREV}",
            f"_u.u AS {UPSERT_SEQ}",
            *[f"_u.{quote(c)} AS {quote(c)}" for c in values],
        )
    )


def fold_columns(entries: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """One row per key, each column folded on its own: the newest change (``_last_*``),
    the batch's newest two deletes (``_del_seq``, ``_del_prev``), the newest upsert that
    carried every column (``_full_seq``), and per column the newest value an upsert carried
    and its sequence (``_s_<i>``); for a key that an update moved here, the old key
    (``_from``) and the move's sequence (``_move_seq``). Which values the key keeps (after a
    delete, against the stored row) the MERGE decides."""
    # SQL text, one py4j call per aggregate: the column API took about ten per column.
    from pyspark.sql import functions as F

    upsert = f"{KIND} = 'u'"
    deleted = f"CASE WHEN {KIND} = 'd' THEN _seq END"
    by = f"struct(_seq, {TIE})"
    carried = _and([f"_p_{i}" for i in range(len(values))])
    # The key's newest delete beside each entry (a window over the key without an order:
    # the aggregate's sort by key serves both), so the delete before it is a plain `max`.
    # A `collect_set` of the deletes made the whole aggregate an ObjectHashAggregate,
    # which falls back to sorting after 128 keys a task: this form takes 34 to 47 % less
    # time compiled on 100,000 entries (docs/apply.md, "Cost").
    key_list = ", ".join(quote(k) for k in keys)
    entries = entries.selectExpr("*", f"max({deleted}) OVER (PARTITION BY {key_list}) AS {DEL_MAX}")
    aggs = [
        f"max(struct(_seq, {KIND}, {TIE}, _time)) AS _newest",
        f"max({deleted}) AS {DEL_SEQ}",
        f"max(CASE WHEN {KIND} = 'd' AND _seq < {DEL_MAX} THEN _seq END) AS {DEL_PREV}",
        f"max(CASE WHEN {upsert} AND {carried} THEN _seq END) AS {FULL_SEQ}",
        f"max_by({FROM}, CASE WHEN {FROM} IS NOT NULL THEN {by} END) AS {FROM}",
        f"max(CASE WHEN {FROM} IS NOT NULL THEN _seq END) AS {MOVE_SEQ}",
    ]
    for i, c in enumerate(values):
        when = f"{upsert} AND _p_{i}"
        aggs.append(f"max_by({quote(c)}, CASE WHEN {when} THEN {by} END) AS {quote(c)}")
        aggs.append(f"max(CASE WHEN {when} THEN _seq END) AS _s_{i}")
    folded = entries.groupBy(*[col(k) for k in keys]).agg(*[F.expr(a) for a in aggs])
    return folded.selectExpr(
        *[quote(k) for k in keys],
        f"_newest._seq AS {LAST_SEQ}",
        f"_newest.{KIND} AS {LAST_KIND}",
        f"_newest._time AS {LAST_TIME}",
        DEL_SEQ,
        DEL_PREV,
        FULL_SEQ,
        FROM,
        MOVE_SEQ,
        *[x for i, c in enumerate(values) for x in (quote(c), f"_s_{i}")],
    )


def _micros(time: int | None) -> Column:
    from pyspark.sql import functions as F

    if time is None:
        return F.lit(None).cast("timestamp")
    return F.timestamp_micros(F.lit(int(time)))


def truncate_fold(folded: DataFrame, at: bytes, time: int | None) -> DataFrame:
    """The folded rows (:func:`fold_whole` or :func:`fold_columns`) with a delete of every
    key at sequence ``at`` (a ``truncate`` of the table, event time ``time`` in
    microseconds) folded in,
    as if the batch held it for each key: the newest change when it is newer, and one of
    the key's deletes. The ``MERGE`` then drops every value written before it, as a
    delete's does."""
    from pyspark.sql import functions as F

    t = F.lit(bytearray(at))
    last, d1, d2 = F.col(LAST_SEQ), F.col(DEL_SEQ), F.col(DEL_PREV)
    later = last < t  # an upsert of the truncate's own sequence comes after it
    replaced = {
        LAST_SEQ: F.when(later, t).otherwise(last),
        LAST_KIND: F.when(later, F.lit("d")).otherwise(F.col(LAST_KIND)),
        LAST_TIME: F.when(later, _micros(time)).otherwise(F.col(LAST_TIME)),
        DEL_SEQ: F.greatest(d1, t),
        DEL_PREV: F.when(d1.isNull() | (d1 < t), d1).when(d1 == t, d2).otherwise(F.greatest(d2, t)),
    }
    return folded.select(
        *[replaced[n].alias(n) if n in replaced else col(n) for n in folded.columns]
    )


def truncated_rows(
    table: Table, keys: Sequence[str], folded: DataFrame, at: bytes, time: int | None
) -> DataFrame:
    """Folded rows (of ``folded``'s columns) holding only a delete at ``at`` for every
    key of the table that ``folded`` lacks and that holds a value written before ``at``
    (or is a tombstone older than it): with :func:`truncate_fold`, a truncate reaches
    every row of the table. One scan of the table."""
    from pyspark.sql import functions as F

    t = F.lit(bytearray(at))
    older = (F.coalesce(col(BASE_SEQUENCE), col(SEQUENCE)) < t) | (col(SEQUENCE) < t)
    held = table.read().where(older).select(*[col(k) for k in keys])
    held = held.join(folded.select(*[col(k) for k in keys]), list(keys), "left_anti")
    fixed = {
        LAST_SEQ: t,
        LAST_KIND: F.lit("d"),
        LAST_TIME: _micros(time),
        DEL_SEQ: t,
    }
    return held.select(
        *[
            col(f.name)
            if f.name in keys
            else fixed.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
            for f in folded.schema.fields
        ]
    )


def stored_key_rows(table: Table, keys: Sequence[str], wanted: DataFrame) -> DataFrame:
    """The table's rows of the keys in ``wanted`` (a frame of the key columns): a
    ``WHERE key IN (...)`` the format can prune files by when they are few (1,000 single
    keys, 100 composite ones), else a join."""
    from pyspark.sql import functions as F

    rows = table.read()
    limit = 1000 if len(keys) == 1 else 100  # an OR of ANDs for composite keys
    few = wanted.limit(limit + 1).collect()
    if len(few) <= limit:
        if not few:
            return rows.limit(0)
        text = _key_list_sql(keys, few)
        if text is not None:  # one expression: not a JVM call per key
            return rows.where(F.expr(text))
        if len(keys) == 1:
            return rows.where(col(keys[0]).isin([r[0] for r in few]))
        match = [_all([col(k) == F.lit(r[i]) for i, k in enumerate(keys)]) for r in few]
        return rows.where(_any(match))
    return rows.join(F.broadcast(wanted), list(keys), "left_semi")


def _sql_value(value: Any) -> str | None:
    """A key value as a SQL literal of its own type, for the types a key usually has
    (integers, text, bytes); ``None`` for any other."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**63 else None
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    return None


def _key_list_sql(keys: Sequence[str], rows: Sequence[Any]) -> str | None:
    """``key IN (…)`` (an OR of ANDs for composite keys) as SQL text, or ``None`` when a
    value has no literal here (its type is then compared through Spark's own literals)."""
    parts = []
    for row in rows:
        values = [_sql_value(v) for v in row]
        if any(v is None for v in values):
            return None
        parts.append(values)
    if len(keys) == 1:
        return f"{quote(keys[0])} IN ({', '.join(v[0] for v in parts)})"
    return " OR ".join(
        "(" + " AND ".join(f"{quote(k)} = {v}" for k, v in zip(keys, values, strict=True)) + ")"
        for values in parts
    )


def move_depth(moves: DataFrame, keys: Sequence[str], start: str) -> int:
    """The longest chain of key changes among ``moves`` (rows with ``_from`` set, their
    key and their sequence in ``start``): 1 when no moved row moves again (in a later
    change of the same frame), 2 when one does, ... at most 8. Each level needs a pass of
    :func:`fill_moves` (:func:`scd2_fill_moves`) over the one before."""
    from pyspark.sql import functions as F

    rows = moves.where(F.col(FROM).isNotNull()).select(
        F.struct(*[col(k) for k in keys]).alias("new"), F.col(FROM).alias("old"), F.col(start)
    )
    found = rows.limit(100_001).collect()
    if len(found) > 100_000:
        return 2
    into = {}
    for r in found:
        into.setdefault(tuple(r["new"]), []).append((tuple(r["old"]), r[start]))

    def depth(key: tuple, before: Any, level: int) -> int:
        best = level
        for old, at in into.get(key, []):
            if before is None or at < before:
                best = max(best, depth(old, at, level + 1) if level < 8 else level)
        return best

    return max((depth(k, None, 0) for k in into), default=0)


def fill_moves(
    folded: DataFrame, table: Table | None, keys: Sequence[str], values: Sequence[str]
) -> DataFrame:
    """The folded rows, with each key an update moved here (``_from``) given the old key's
    values for the columns the update's image lacked and no later change of the batch
    wrote: from the batch's changes of the old key before the move, else from the table's
    row of the old key when it is not newer than the move (a row deleted by the move
    itself, or by a delete with the move's sequence applied before, keeps its values).
    The move then writes every column at its sequence.

    Written as SQL text (a projection is one py4j call, not one per expression: a pass
    over an 18-column table built its plan in about 0.43 s through the column API)."""
    from pyspark.sql import functions as F

    x = "X''"
    q = quote
    new_keys = [f"_n{i}" for i in range(len(keys))]
    moves = folded.where(f"{q(FROM)} IS NOT NULL").selectExpr(
        *[f"{q(FROM)}.{q(k)} AS _o{i}" for i, k in enumerate(keys)],
        f"{q(MOVE_SEQ)} AS _m",
        *[f"{q(k)} AS _n{i}" for i, k in enumerate(keys)],
    )
    # The batch's changes of the old key: a value older than the move, not older than the
    # batch's newest delete of the old key before the move.
    batch_old = folded.alias("b").join(
        moves.alias("m"), F.expr(_and([f"b.{q(k)} = m._o{i}" for i, k in enumerate(keys)]))
    )
    d1, d2 = f"b.{q(DEL_SEQ)}", f"b.{q(DEL_PREV)}"
    prev_del = f"coalesce(CASE WHEN {d1} < m._m THEN {d1} WHEN {d2} < m._m THEN {d2} END, {x})"
    batch_vals = []
    for i in range(len(values)):
        s = f"b.`_s_{i}`"
        ok = f"({s} < m._m AND {s} >= {prev_del})"
        batch_vals += [
            f"CASE WHEN {ok} THEN b.{q(values[i])} END AS _bv{i}",
            f"CASE WHEN {ok} THEN {s} END AS _bs{i}",
        ]
    from_batch = batch_old.selectExpr(
        *[f"m.{k}" for k in new_keys], "m._m", f"{prev_del} AS _pd", *batch_vals
    )
    filled = moves.selectExpr(*new_keys, "_m", *[f"_o{i}" for i in range(len(keys))])
    filled = filled.join(from_batch, [*new_keys, "_m"], "left")
    if table is not None and table.exists():
        wanted = moves.selectExpr(*[f"_o{i} AS {q(k)}" for i, k in enumerate(keys)]).distinct()
        stored = stored_key_rows(table, keys, wanted).alias("t")
        filled = filled.alias("f").join(
            stored, F.expr(_and([f"f._o{i} = t.{q(k)}" for i, k in enumerate(keys)])), "left"
        )
        t_seq = f"coalesce(t.{q(SEQUENCE)}, {x})"
        base = f"coalesce(t.{q(BASE_SEQUENCE)}, t.{q(SEQUENCE)}, {x})"
        # The stored row as it was at the move: not newer than it, and live then.
        usable = (
            f"(t.{q(SEQUENCE)} IS NOT NULL AND ({t_seq} = f._m OR ({t_seq} < f._m AND "
            f"NOT coalesce(t.{q(DELETED)}, false))))"
        )
        pd = f"coalesce(f._pd, {x})"
        out = []
        for i, c in enumerate(values):
            ws = f"coalesce(t.{q(COLUMN_SEQUENCES)}[{literal(c)}], {base})"
            t_ok = f"({usable} AND {ws} >= {pd} AND {ws} < f._m)"
            bs = f"f._bs{i}"
            take_batch = f"({bs} IS NOT NULL AND (NOT {t_ok} OR {bs} > {ws}))"
            out.append(
                f"CASE WHEN {take_batch} THEN f._bv{i} WHEN {t_ok} THEN t.{q(c)} END AS _fill{i}"
            )
        filled = filled.selectExpr(*[f"f.{k}" for k in new_keys], "f._m", *out)
    else:
        filled = filled.selectExpr(
            *new_keys, "_m", *[f"_bv{i} AS _fill{i}" for i in range(len(values))]
        )
    joined = folded.alias("r").join(
        filled.alias("f"),
        F.expr(
            _and([f"r.{q(k)} = f._n{i}" for i, k in enumerate(keys)] + [f"r.{q(MOVE_SEQ)} = f._m"])
        ),
        "left",
    )
    out = [f"r.{q(k)}" for k in keys]
    out += [f"r.{q(c)}" for c in (LAST_SEQ, LAST_KIND, LAST_TIME, DEL_SEQ, DEL_PREV)]
    full = f"r.{q(FULL_SEQ)}"
    out.append(f"CASE WHEN f._m IS NOT NULL THEN greatest({full}, f._m) ELSE {full} END "
               f"AS {q(FULL_SEQ)}")  # fmt: skip
    out += [f"r.{q(FROM)}", f"r.{q(MOVE_SEQ)}"]
    for i, c in enumerate(values):
        s = f"r.`_s_{i}`"
        before = f"(f._m IS NOT NULL AND coalesce({s}, {x}) < f._m)"
        out.append(f"CASE WHEN {before} THEN f._fill{i} ELSE r.{q(c)} END AS {q(c)}")
        out.append(f"CASE WHEN {before} THEN f._m ELSE {s} END AS `_s_{i}`")
    return joined.selectExpr(*out)


# --- SCD type 1: the MERGE's clauses are SQL text, in ._rules_sql ---------------------------


ACTION = "_cdc_action"  # a resolved row: "u" update, "i" insert, null: nothing to write
GUARD = "_cdc_guard"  # a resolved row: the stored row's bookkeeping it was resolved from
STALE = "cdc_decode: a row changed between apply_changes' read and its MERGE"
"""The message of the error a resolved ``MERGE`` raises (and retries) when a row it
resolved was written meanwhile by another writer."""


def _guard(alias: str) -> Column:
    """The bookkeeping of a stored type 1 row: every write of ours changes one of them
    (a value's write sequence is the row's, its base, or in its map)."""
    from pyspark.sql import functions as F

    t = lambda name: col(name, alias)  # noqa: E731
    return F.struct(
        t(SEQUENCE).alias("q"),
        t(DELETED).alias("d"),
        t(BASE_SEQUENCE).alias("b"),
        F.map_entries(t(COLUMN_SEQUENCES)).alias("m"),
    )


def resolve_scd1(
    source: DataFrame, table: Table, keys: Sequence[str], clauses: Sequence[Clause]
) -> tuple[DataFrame, list[Clause]]:
    """The type 1 ``MERGE`` of ``clauses`` resolved beforehand: each row of ``source``
    (folded, few keys) joined with the table's row of its key, the clause it takes chosen
    and every column of the row it writes computed here. The ``MERGE`` that writes them
    then only sets columns from its source: the table's unchanged columns are not read
    (with deletion vectors, Delta reads and shuffles only the key and the bookkeeping of
    the files a batch touches, not every column of them).

    Returns the resolved rows (every table column, :data:`ACTION`, :data:`GUARD`) and
    their clauses. A row another writer changed after it was read here fails the
    ``MERGE`` with :data:`STALE` (nothing is written), and the caller resolves again."""
    from pyspark.sql import functions as F

    fields = table.schema().fields
    wanted = source.select(*[col(k) for k in keys])
    here = stored_key_rows(table, keys, wanted).withColumn("_cdc_here", F.lit(True))
    on = _all([col(k, "s") == col(k, "t") for k in keys])
    # No broadcast hint: Spark's estimate of the rows is the table's size; adaptive
    # execution broadcasts them when they are small, as they are.
    joined = source.alias("s").join(here.alias("t"), on, "left")
    matched = F.col("t._cdc_here").isNotNull()
    which = F.col("_cdc_clause")
    chosen, out, action = merge_outcome(clauses, matched, which, fields)
    # The clause in a projection of its own: Spark keeps it apart (CollapseProject does not
    # copy an expensive expression into each column that reads it).
    rows = joined.select("*", chosen.alias("_cdc_clause")).select(
        *out,
        action.alias(ACTION),
        F.when(matched, _guard("t")).alias(GUARD),
    )
    s = lambda name: col(name, "s")  # noqa: E731
    # Every clause sets every column: a column it left out would be the table's, which the
    # MERGE would then read.
    every = {f.name: s(f.name) for f in fields}
    stale = {**every, SEQUENCE: F.raise_error(F.lit(STALE)).cast("binary")}
    action = s(ACTION)
    # The same clauses in SQL, for a format whose MERGE is SQL text (Iceberg's).
    q = lambda name, alias: f"{alias}.{quote(name)}"  # noqa: E731
    every_sql = {f.name: q(f.name, "s") for f in fields}
    stale_sql = {**every_sql, SEQUENCE: f"CAST(raise_error({literal(STALE)}) AS binary)"}
    guard_sql = (
        f"named_struct('q', {q(SEQUENCE, 't')}, 'd', {q(DELETED, 't')}, "
        f"'b', {q(BASE_SEQUENCE, 't')}, 'm', map_entries({q(COLUMN_SEQUENCES, 't')}))"
    )
    act = q(ACTION, "s")
    return rows, [
        Clause("update", every, (action == "u") & _guard("t").eqNullSafe(s(GUARD)),
               sql=(f"{act} = 'u' AND {guard_sql} <=> {q(GUARD, 's')}", every_sql)),
        Clause("update", stale, action.isNotNull(), sql=(f"{act} IS NOT NULL", stale_sql)),
        Clause("insert", every, action == "i", sql=(f"{act} = 'i'", every_sql)),
        Clause("insert", stale, action == "u", sql=(f"{act} = 'u'", stale_sql)),
    ]  # fmt: skip


def purge_condition(cutoff: int, horizon: bytes | None = None) -> str:
    """The tombstones a purge removes: deleted before ``cutoff`` (event time, microseconds
    since the epoch), and up to the purge ``horizon`` (a sequence) when given."""
    condition = f"{quote(DELETED)} AND {quote(EVENT_TIME)} < timestamp_micros({int(cutoff)})"
    if horizon is not None:
        condition += f" AND {quote(SEQUENCE)} <= X'{horizon.hex()}'"
    return condition


# --- SCD type 2 ----------------------------------------------------------------------------


def scd2_versions(entries: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """The batch's versions: one per (key, sequence), an upsert over a delete, then the
    greater tie (:func:`entries` ``_tie``), with the columns its image lacked
    (``_cdc_absent``; none for a delete, whose values are null) and ``_new``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    one = Window.partitionBy(*[col(k) for k in keys], "_seq").orderBy(
        F.col(KIND).desc(), F.col(TIE).desc()
    )
    deleted = F.col(KIND) == "d"
    lacking = F.filter(
        F.array(*[F.when(~F.col(f"_p_{i}"), F.lit(c)) for i, c in enumerate(values)]),
        lambda v: v.isNotNull(),
    ) if values else F.array().cast("array<string>")  # fmt: skip
    return (
        entries.withColumn("_rank", F.row_number().over(one))
        .where("_rank = 1")
        .select(
            *[col(k) for k in keys],
            F.col("_seq").alias(START_SEQUENCE),
            F.col("_time").alias(START_TIME),
            deleted.alias(DELETED),
            *[col(c) for c in values],
            *[(F.col(f"_p_{i}") | deleted).alias(f"_p_{i}") for i in range(len(values))],
            F.when(deleted, F.array().cast("array<string>")).otherwise(lacking).alias(ABSENT),
            F.col(FROM),
            F.lit(True).alias("_new"),
        )
    )


def scd2_chain(versions: DataFrame, keys: Sequence[str], values: Sequence[str]) -> DataFrame:
    """Each key's versions in sequence order: a column a version's image lacked takes the
    value of the version before it; each version ends where the next starts; the last is
    current unless it is a delete."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(*[col(k) for k in keys]).orderBy(START_SEQUENCE)
    upto = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    filled = [
        F.last(F.when(F.col(f"_p_{i}"), F.struct(col(c).alias("v"))), ignorenulls=True)
        .over(upto)["v"]
        .alias(c)
        for i, c in enumerate(values)
    ]
    return versions.select(
        *[col(k) for k in keys],
        START_SEQUENCE,
        START_TIME,
        DELETED,
        *filled,
        *[F.col(f"_p_{i}") for i in range(len(values))],
        ABSENT,
        FROM,
        F.lead(START_SEQUENCE).over(order).alias(END_SEQUENCE),
        F.lead(START_TIME).over(order).alias(END_TIME),
        "_new",
    ).withColumn(CURRENT, F.col(END_SEQUENCE).isNull() & ~F.col(DELETED))


def scd2_fill_moves(
    chained: DataFrame, versions: DataFrame, keys: Sequence[str], values: Sequence[str]
) -> DataFrame:
    """``versions`` with each version an update moved to its key (``_from``) given, for
    the columns its image lacked, the old key's values just before the move (from
    ``chained``, the versions chained once): the version then carries every column."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    moved = versions.where(F.col(FROM).isNotNull()).select(
        *[F.col(FROM)[k].alias(f"_o{i}") for i, k in enumerate(keys)],
        F.col(START_SEQUENCE).alias("_m"),
        *[col(k).alias(f"_n{i}") for i, k in enumerate(keys)],
    )
    before = chained.alias("c").join(
        moved.alias("m"),
        [col(k, "c") == F.col(f"m._o{i}") for i, k in enumerate(keys)]
        + [col(START_SEQUENCE, "c") < F.col("m._m")],
    )
    latest = Window.partitionBy(*[F.col(f"m._n{i}") for i in range(len(keys))], "m._m").orderBy(
        col(START_SEQUENCE, "c").desc()
    )
    fills = [
        F.when(~col(DELETED, "c"), col(c, "c")).alias(f"_fill{i}") for i, c in enumerate(values)
    ]
    state = (
        before.withColumn("_rank", F.row_number().over(latest))
        .where("_rank = 1")
        .select(*[F.col(f"m._n{i}") for i in range(len(keys))], F.col("m._m"), *fills)
    )
    joined = versions.alias("v").join(
        state.alias("f"),
        [col(k, "v") == F.col(f"f._n{i}") for i, k in enumerate(keys)]
        + [col(START_SEQUENCE, "v") == F.col("f._m"), col(FROM, "v").isNotNull()],
        "left",
    )
    hit = col(FROM, "v").isNotNull()
    out = [col(k, "v") for k in keys] + [col(n, "v") for n in (START_SEQUENCE, START_TIME, DELETED)]
    for i, c in enumerate(values):
        p = col(f"_p_{i}", "v")
        out.append(F.when(hit & ~p, F.col(f"f._fill{i}")).otherwise(col(c, "v")).alias(c))
    for i in range(len(values)):
        out.append((col(f"_p_{i}", "v") | hit).alias(f"_p_{i}"))
    out.append(
        F.when(hit, F.array().cast("array<string>")).otherwise(col(ABSENT, "v")).alias(ABSENT)
    )
    out += [col(FROM, "v"), col("_new", "v")]
    return joined.select(*out)


def scd2_truncated_keys(table: Table, keys: Sequence[str], at: bytes) -> DataFrame:
    """The keys of a type 2 table live at sequence ``at``: a version not deleted that
    starts before it and ends after it (or is current). One scan of the table."""
    from pyspark.sql import functions as F

    t = F.lit(bytearray(at))
    spans = (col(START_SEQUENCE) < t) & (col(END_SEQUENCE).isNull() | (col(END_SEQUENCE) > t))
    return table.read().where(spans & ~col(DELETED)).select(*[col(k) for k in keys]).distinct()


def scd2_truncate(
    versions: DataFrame,
    touched: DataFrame,
    keys: Sequence[str],
    values: Sequence[str],
    at: bytes,
    time: int | None,
) -> DataFrame:
    """``versions`` (stored and new, before :func:`scd2_chain`) with a deleted version at
    ``at`` (a ``truncate``, event time ``time``) for each key of ``touched`` whose version
    before it is live: the truncate closes it. None where a version starts at ``at`` (an
    upsert of the truncate's sequence comes after it; a stored one is the same truncate
    applied before), or where the key had no row or a deleted one then."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    t = F.lit(bytearray(at))
    types = {f.name: f.dataType for f in versions.schema.fields}
    at_cols = [*keys, START_SEQUENCE]
    closing = touched.select(
        *[col(k) for k in keys],
        t.alias(START_SEQUENCE),
        _micros(time).alias(START_TIME),
        F.lit(True).alias(DELETED),
        *[F.lit(None).cast(types[c]).alias(c) for c in values],
        *[F.lit(True).alias(f"_p_{i}") for i in range(len(values))],
        F.array().cast("array<string>").alias(ABSENT),
        F.lit(None).cast(types[FROM]).alias(FROM),
        F.lit(True).alias("_new"),
    )
    closing = closing.join(versions.select(*[col(c) for c in at_cols]), at_cols, "left_anti")
    both = versions.withColumn("_trunc", F.lit(False)).unionByName(
        closing.withColumn("_trunc", F.lit(True))
    )
    order = Window.partitionBy(*[col(k) for k in keys]).orderBy(START_SEQUENCE)
    prev = F.lag(col(DELETED)).over(order)
    both = both.withColumn("_prev_deleted", prev)
    kept = ~F.col("_trunc") | F.coalesce(~F.col("_prev_deleted"), F.lit(False))
    return both.where(kept).drop("_trunc", "_prev_deleted")
