"""The rules of a type 1 ``MERGE`` as SQL text: its clauses, written once per table shape.

The clauses of the ``MERGE`` of folded rows (``s``, :mod:`._apply_rules`'s ``fold_whole``
or ``fold_columns``) into a type 1 table (``t``), as SQL text a format runs in one
statement (``MERGE INTO … USING … WHEN MATCHED AND … THEN UPDATE SET …``), with the same
clauses as Spark columns (``F.expr`` of the text) for the formats and paths that take
columns. One text per (columns, keys, whole images or not, purge horizon): the same text
call after call, so Spark's caches of parsed and compiled code serve it.

Every rule is in :mod:`._apply_rules`' module docstring and docs/apply.md: a change
writes a column when it carries it and is newer than the column's last write (per-column
write sequences ``_cdc_base_sequence`` and ``_cdc_column_sequences``), a delete keeps a
tombstone, a key the table does not hold takes no change up to the purge horizon.
Imports no table format; reads the rules' column names from :mod:`._apply_rules`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

# The table's own columns and the folded rows' columns, as the rules name them.
from ._apply_rules import (  # noqa: E402
    BASE_SEQUENCE,
    COLUMN_SEQUENCES,
    DEL_PREV,
    DEL_SEQ,
    DELETED,
    EVENT_TIME,
    FULL_SEQ,
    LAST_KIND,
    LAST_SEQ,
    LAST_TIME,
    SEQUENCE,
    UPSERT_SEQ,
)
from ._sql import Clause, Exprs, literal, quote

EMPTY = "X''"
NO_SEQ = "CAST(NULL AS BINARY)"
NO_MAP = "CAST(NULL AS MAP<STRING, BINARY>)"


def _s(name: str) -> str:
    return f"s.{quote(name)}"


def _t(name: str) -> str:
    return f"t.{quote(name)}"


def _greatest(*parts: str) -> str:
    return parts[0] if len(parts) == 1 else f"greatest({', '.join(parts)})"


def _least(*parts: str) -> str:
    return parts[0] if len(parts) == 1 else f"least({', '.join(parts)})"


def _when(condition: str, then: str, otherwise: str | None = None) -> str:
    tail = "" if otherwise is None else f" ELSE {otherwise}"
    return f"CASE WHEN {condition} THEN {then}{tail} END"


def _bookkeeping(
    values: Sequence[str], newest: Sequence[str], kill: str, seq: str, live: str, time: str
) -> dict[str, str]:
    """The row's own columns from each column's write sequence (its newest write, or the
    row's last delete, ``kill``, when that is newer: the value is gone): the base is the
    oldest write (null when it is the row's sequence), the map the columns written after
    it. Each expression names the writes and ``kill`` once: the map's array of writes is
    bound to a lambda's variable where it is read twice (``transform(array(x), a -> …)[0]``:
    SQL has no ``let``), so the text grows with the columns, not with their square."""
    if values:
        names = ", ".join(literal(c) for c in values)
        writes = f"transform(array({', '.join(newest)}), w -> greatest(w, {kill}))"
        later = f"map_filter(map_from_arrays(array({names}), a), (k, v) -> v > array_min(a))"
        stored_map = (
            f"transform(array({writes}), a -> "
            f"CASE WHEN array_max(a) > array_min(a) THEN {later} END)[0]"
        )
        # Compiled (no lambda), the oldest of max(w, kill) being max(oldest w, kill); null
        # when it is the row's sequence (never null itself).
        stored_base = f"nullif({_greatest(_least(*newest), kill)}, {seq})"
    else:
        stored_map = NO_MAP
        stored_base = NO_SEQ
    return {
        SEQUENCE: seq,
        EVENT_TIME: time,
        DELETED: f"NOT ({live})",
        BASE_SEQUENCE: stored_base,
        COLUMN_SEQUENCES: stored_map,
    }


def scd1_clauses(
    keys: Sequence[str], values: Sequence[str], *, whole: bool, horizon: bytes | None
) -> list[Clause]:
    """The type 1 ``MERGE``'s clauses (the rules of :mod:`._apply_rules`' docstring), each
    with its SQL text and, from it, its Spark columns (made when read). ``whole``: rows of
    ``fold_whole`` (every column written by ``_upsert_seq``), else of ``fold_columns``;
    ``horizon``: the table's purge horizon (a key the table does not hold is not written by
    changes up to it)."""
    from pyspark.sql import functions as F

    out = []
    for kind, condition, columns in _scd1_text(
        tuple(keys), tuple(values), whole, None if horizon is None else bytes(horizon)
    ):
        texts = dict(columns)
        out.append(
            Clause(
                kind,
                Exprs(texts),
                None if condition is None else F.expr(condition),
                sql=(condition, texts),
            )
        )
    return out


@lru_cache(maxsize=256)
def _scd1_text(
    keys: tuple[str, ...], values: tuple[str, ...], whole: bool, horizon: bytes | None
) -> tuple[tuple[str, str | None, tuple[tuple[str, str], ...]], ...]:
    """``(kind, condition, ((column, value), …))`` of each clause, as SQL text; cached by
    the table's shape."""
    last, kind, time = _s(LAST_SEQ), _s(LAST_KIND), _s(LAST_TIME)
    d1, d2 = _s(DEL_SEQ), _s(DEL_PREV)

    def written(i: int) -> str:
        return f"coalesce({_s(UPSERT_SEQ) if whole else _s(f'_s_{i}')}, {EMPTY})"

    # -- matched ------------------------------------------------------------------------
    t_seq = f"coalesce({_t(SEQUENCE)}, {EMPTY})"
    t_del = f"coalesce({_t(DELETED)}, false)"
    base = f"coalesce({_t(BASE_SEQUENCE)}, {_t(SEQUENCE)}, {EMPTY})"
    newer = f"(({last} > {t_seq}) OR ({last} = {t_seq} AND {t_del} AND {kind} = 'u'))"
    live = _when(newer, f"{kind} = 'u'", f"NOT {t_del}")
    # The row's last delete. A change newer than the row: the batch's newest delete (the
    # one before it when the newest change is itself a delete) or the stored tombstone's.
    # An older one: the batch's newest delete, or on a tombstone the newest one older than
    # it. The text names `newer` once: it is in every column's value.
    newest_delete = _greatest(_when(f"{kind} = 'u'", d1, d2), _when(t_del, t_seq))
    kill = (
        f"coalesce(CASE WHEN {newer} THEN {newest_delete} "
        f"WHEN {t_del} THEN {_when(f'{d1} < {t_seq}', d1, d2)} ELSE {d1} END, {EMPTY})"
    )
    seq = _when(newer, last, t_seq)
    update: dict[str, str] = {}
    newest = []
    changes = [newer, f"({d1} > {base} AND {d1} < {t_seq})"]
    for i, c in enumerate(values):
        stored_ws = f"coalesce({_t(COLUMN_SEQUENCES)}[{literal(c)}], {base})"
        ws = written(i)
        takes = f"({ws} > {stored_ws})"
        w = _greatest(ws, stored_ws)
        update[c] = _when(f"{w} >= {kill}", _when(takes, _s(c), _t(c)))
        newest.append(w)
        if not whole:
            changes.append(takes)
    if whole:
        changes.append(f"({_s(UPSERT_SEQ)} > {base})")
    update.update(_bookkeeping(values, newest, kill, seq, live, _when(newer, time, _t(EVENT_TIME))))
    fast = {c: _s(c) for c in values}
    fast.update(
        {SEQUENCE: last, EVENT_TIME: time, DELETED: "false", BASE_SEQUENCE: NO_SEQ,
         COLUMN_SEQUENCES: NO_MAP}
    )  # fmt: skip
    whole_image = f"{_s(UPSERT_SEQ)} = {last}" if whole else f"{_s(FULL_SEQ)} = {last}"
    clauses = [
        ("update", f"{newer} AND {kind} = 'u' AND {whole_image}", tuple(fast.items())),
        ("update", "(" + " OR ".join(changes) + ")", tuple(update.items())),
    ]

    # -- not matched: a new key -----------------------------------------------------------
    born = None if horizon is None else f"{last} > X'{horizon.hex()}'"
    insert: dict[str, str] = {k: _s(k) for k in keys}
    if whole:
        insert.update({c: _s(c) for c in values})
        upsert = f"coalesce({_s(UPSERT_SEQ)}, {EMPTY})"
        insert.update(
            {SEQUENCE: last, EVENT_TIME: time, DELETED: f"{kind} = 'd'",
             BASE_SEQUENCE: _when(f"{kind} = 'd'", upsert), COLUMN_SEQUENCES: NO_MAP}
        )  # fmt: skip
    else:
        new_live = f"{kind} = 'u'"
        kill_new = f"coalesce({_when(new_live, d1, d2)}, {EMPTY})"
        newest = []
        for i, c in enumerate(values):
            ws = written(i)
            insert[c] = _when(f"{ws} >= {kill_new}", _s(c))
            newest.append(ws)
        insert.update(_bookkeeping(values, newest, kill_new, last, new_live, time))
    clauses.append(("insert", born, tuple(insert.items())))
    return tuple(clauses)
