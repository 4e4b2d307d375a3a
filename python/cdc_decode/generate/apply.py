"""Apply change events to table state: what a sink that mirrors the source would hold.

Works on any format's events (a pyarrow table or batch in the event schema), so a test can
check ``decode`` → :func:`apply_events` against a generator's final state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

Row = dict[str, "str | None"]
State = dict[str, dict[tuple, Row]]

UPSERT_OPS = ("insert", "read", "update", "update_after")
REMOVE_OPS = ("delete", "update_before")


def table_name(db: str | None, schema: str | None, table: str | None) -> str:
    """The state key of a table: its non-null name parts joined by dots (``shop.users``)."""
    return ".".join(part for part in (db, schema, table) if part is not None)


def _key(image: Mapping[str, Any] | None, primary_key: list[str]) -> tuple | None:
    if image is None or not all(name in image for name in primary_key):
        return None
    return tuple(image[name] for name in primary_key)


def apply_change(
    state: State,
    table: str,
    op: str,
    primary_key: list[str] | None,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
) -> None:
    """Apply one change to ``state`` in place.

    ``insert``, ``read``, ``update`` and ``update_after`` upsert the row under its primary
    key, merging the image into the row already there (a column absent from a partial
    image keeps its value); an ``update`` whose key changed moves the row. ``delete`` and
    ``update_before`` remove the row. Other ops leave the state alone.

    Raises:
        ValueError: for a row change without a primary key, or whose images lack a key
            column.
    """
    if op not in UPSERT_OPS and op not in REMOVE_OPS:
        return
    if not primary_key:
        raise ValueError(f"{op} on {table} has no primary key")
    rows = state.setdefault(table, {})
    old_key = _key(before, primary_key)
    new_key = _key(after, primary_key)
    if op in REMOVE_OPS:
        key = old_key if old_key is not None else new_key
        if key is None:
            raise ValueError(f"{op} on {table} has no primary key values")
        rows.pop(key, None)
        return
    if new_key is None:
        new_key = old_key
    if new_key is None:
        raise ValueError(f"{op} on {table} has no primary key values")
    row = rows.pop(old_key, None) if old_key is not None and old_key != new_key else None
    if row is None:
        row = rows.get(new_key, {})
    rows[new_key] = {**row, **(after or {})}


def apply_events(
    events: pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch],
    state: State | None = None,
    *,
    primary_keys: Mapping[str, list[str]] | None = None,
) -> State:
    """Apply events in ``sequence`` order and return the table state.

    Args:
        events: change events in the event schema (``cdc_decode.event_schema()``): a
            table, a batch, or an iterable of batches. Rows without a ``sequence`` keep
            their place after every sequenced row.
        state: a state to continue from (changed in place); a new one by default.
        primary_keys: ``table name`` -> key columns, for events whose ``primary_key`` is
            null (``datahub-tuple`` records do not say; ``Stream.primary_keys`` does).

    Returns:
        ``table name`` (see :func:`table_name`) → primary key tuple → row
        (column → text or ``None``); tables left without rows are left out.

    Raises:
        ValueError: for an ``error`` row, or a row change without primary key values.
    """
    if isinstance(events, pa.RecordBatch):
        events = pa.Table.from_batches([events])
    elif not isinstance(events, pa.Table):
        events = pa.Table.from_batches(list(events))
    state = {} if state is None else state
    columns = events.select(
        [
            "op",
            "source_db",
            "source_schema",
            "source_table",
            "sequence",
            "primary_key",
            "before",
            "after",
            "error",
        ]
    ).to_pydict()
    sequences = columns["sequence"]
    order = sorted(
        range(events.num_rows),
        key=lambda i: (sequences[i] is None, sequences[i] or b""),
    )
    for i in order:
        op = columns["op"][i]
        if op == "error":
            raise ValueError(f"event {i} is an error row: {columns['error'][i]}")
        before = columns["before"][i]
        after = columns["after"][i]
        table = table_name(
            columns["source_db"][i], columns["source_schema"][i], columns["source_table"][i]
        )
        primary_key = columns["primary_key"][i]
        if primary_key is None and primary_keys is not None:
            primary_key = primary_keys.get(table)
        apply_change(
            state,
            table,
            op,
            primary_key,
            None if before is None else dict(before),
            None if after is None else dict(after),
        )
    for table in [t for t, rows in state.items() if not rows]:
        del state[table]
    return state
