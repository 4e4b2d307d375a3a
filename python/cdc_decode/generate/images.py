"""Whole-row images for writers of formats that always send them (TDSQL, Debezium).

The source writes minimal images now and then (``binlog_row_image=minimal``: a key-only
before image, an after image of the changed columns). A writer whose format has no way to
say "this column is not in the image" keeps a copy of every table here and completes
each image from it; :meth:`Tables.mark` / :meth:`Tables.rewind` take back what a record
did when the stream generator takes the record back.
"""

from __future__ import annotations

from .source import RowImage, RowsEvent, Value

_MISSING = object()


class Tables:
    """The writer's copy of each table: ``"db.table"`` → key → row."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[tuple, dict[str, Value]]] = {}
        self._undo: list[tuple] = []

    def mark(self) -> int:
        """A point to :meth:`rewind` to."""
        return len(self._undo)

    def rewind(self, mark: int) -> None:
        """Takes back every change since ``mark``."""
        while len(self._undo) > mark:
            table, key, old = self._undo.pop()
            if old is _MISSING:
                self.rows[table].pop(key, None)
            else:
                self.rows[table][key] = old

    def _put(self, table: str, key: tuple, row: dict | None) -> None:
        rows = self.rows.setdefault(table, {})
        self._undo.append((table, key, rows.get(key, _MISSING)))
        if row is None:
            rows.pop(key, None)
        else:
            rows[key] = row

    def whole(self, event: RowsEvent, image: RowImage) -> tuple[dict | None, dict | None]:
        """``(before, after)`` of one changed row as whole rows, and the copy updated."""
        name = f"{event.db}.{event.table}"
        source = image.before if image.before is not None else image.after
        key = tuple(source[c] for c in event.primary_key)
        old = self.rows.get(name, {}).get(key)
        before = after = None
        if event.kind == "insert":
            after = dict(image.after)
        elif event.kind == "update":
            before = {**(old or {}), **image.before}
            after = {**before, **image.after}
        else:
            before = {**(old or {}), **image.before}
        new_key = key if after is None else tuple(after[c] for c in event.primary_key)
        if new_key != key:
            self._put(name, key, None)
        self._put(name, new_key, after)
        return before, after
