"""Event rows to Arrow, and the per-mode handling of bad messages, for every format.

A format module produces rows as plain tuples, one value per column of
:data:`~cdc_decode._schema.EVENT_SCHEMA`, in the schema's order::

    format, op, source_op, source_db, source_schema, source_table, event_time (int µs),
    capture_time (int µs), tx_id, position, sequence (bytes), event_id, primary_key (list),
    before, after, ddl, metadata (maps as lists of (key, value) tuples), error, raw

and hands them to an :class:`EventSink`, which applies the mode, keeps the counts of
``Decoder.stats()`` and builds the record batch (docs/events.md).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pyarrow as pa

from .._errors import DecodeError
from .._schema import EVENT_SCHEMA
from ._typed import Typed

_WIDTH = len(EVENT_SCHEMA)
_NULLS_AFTER_OP = (None,) * (_WIDTH - 2)
_NULLS_BEFORE_ERROR = (None,) * (_WIDTH - 4)


class Malformed(Exception):
    """A message (or record) that does not decode: its text, the error row's cause, says
    what is wrong and where."""


def tombstone_row(format: str) -> tuple:
    """The row of a null input value (a Kafka tombstone): every other column null."""
    return (format, "tombstone", *_NULLS_AFTER_OP)


def error_row(format: str, cause: str, raw: bytes) -> tuple:
    """The one row of a message that cannot be decoded: ``error`` and ``raw`` set."""
    return (format, "error", *_NULLS_BEFORE_ERROR, cause, raw)


def report_all(*calls: Callable[[], None] | None) -> None:
    """Runs every call (``None``: none), then raises the first :class:`DecodeError` one
    raised (failfast): every message is reported before the first error is."""
    first = None
    for call in calls:
        if call is None:
            continue
        try:
            call()
        except DecodeError as exc:
            first = first or exc
    if first is not None:
        raise first


class EventSink:
    """Collects the rows of one ``decode``/``finish`` call and counts them.

    Args:
        format: the format name, for error and tombstone rows.
        mode: ``permissive``, ``dropmalformed`` or ``failfast``.
        stats: the decoder's counters, updated in place (``decoded``, ``events``,
            ``errors``, ``dropped``).
    """

    __slots__ = ("_format", "_mode", "_stats", "rows", "ordinals", "typed", "schemas")

    def __init__(
        self,
        format: str,
        mode: str,
        stats: dict[str, int],
        typed: Typed | None = None,
        schema_pass: bool = False,
    ) -> None:
        self._format = format
        self._mode = mode
        self._stats = stats
        self.typed = typed
        self.rows: list[tuple] = []
        self.ordinals: list[int] = []
        # The schema pass (``._schemas``): each row's wire schema.
        self.schemas: list | None = [] if schema_pass else None

    @property
    def schema_pass(self) -> bool:
        """True in the schema pass: formats give each row's wire schema to :meth:`events`,
        and the rows' images and metadata are not needed."""
        return self.schemas is not None

    def convert(self, rows: list[tuple], hints=None) -> list[tuple]:
        """Typed mode: the rows with their images converted (unchanged in generic mode).

        Args:
            rows: the event rows of one message.
            hints: the message's :class:`._typed.Hints`, or a list of one per row.

        Raises:
            Unconvertible: a value that does not convert; the message is an error row.
        """
        if self.typed is None:
            return rows
        return self.typed.convert(rows, hints)

    def events(self, rows: list[tuple], ordinal: int, messages: int = 1, schemas=None) -> None:
        """Adds the event rows (none or many) of the message at ``ordinal``, decoded from
        ``messages`` input values (the parts of a multi-part set). ``schemas``: in the
        schema pass, each row's wire schema (a list), or one for every row."""
        self._stats["decoded"] += messages
        if rows:
            self.rows.extend(rows)
            self.ordinals.extend([ordinal] * len(rows))
            self._stats["events"] += len(rows)
            if self.schemas is not None:
                if isinstance(schemas, list):
                    self.schemas.extend(schemas)
                else:
                    self.schemas.extend([schemas] * len(rows))

    def tombstone(self, ordinal: int) -> None:
        """Adds the row of a null input value."""
        self.rows.append(tombstone_row(self._format))
        self.ordinals.append(ordinal)
        if self.schemas is not None:
            self.schemas.append(None)
        self._stats["events"] += 1
        self._stats["decoded"] += 1

    def errors(
        self, messages: list[tuple[int, bytes]], cause: str, table: str | None = None
    ) -> None:
        """Reports every ``(ordinal, raw)`` message as bad with one cause (``table``: as
        :meth:`error`). In ``failfast`` mode every one is still counted, and the first
        one's :class:`DecodeError` raised."""
        report_all(*(partial(self.error, ordinal, raw, cause, table) for ordinal, raw in messages))

    def error(self, ordinal: int, raw: bytes, cause: str, table: str | None = None) -> None:
        """Reports the message at ``ordinal`` as bad, as the mode says. ``table``: in
        multi-table typed mode, the table whose value did not convert
        (:attr:`._typed.Unconvertible.table`): the error row's ``table`` names it.

        Raises:
            DecodeError: in ``failfast`` mode.
        """
        self._stats["errors"] += 1
        if self._mode == "permissive":
            row = error_row(self._format, cause, raw)
            if table is not None and self.typed is not None and self.typed.multi:
                row += (table,)  # the typed columns' first: ``table``
            self.rows.append(row)
            self.ordinals.append(ordinal)
            if self.schemas is not None:
                self.schemas.append(None)
        elif self._mode == "dropmalformed":
            self._stats["dropped"] += 1
        else:
            raise DecodeError(f"message {ordinal}: {cause}")

    def build(self) -> tuple[pa.RecordBatch, pa.Array]:
        """The rows as a record batch of the event schema, and each row's input ordinal
        (in the schema pass, its rows and each one's first ordinal)."""
        if self.schemas is not None:
            from ._schemas import aggregate

            return aggregate(self.rows, self.ordinals, self.schemas)
        schema = EVENT_SCHEMA if self.typed is None else self.typed.schema
        rows = self.rows
        if self.typed is not None:
            rows = [self.typed.pad(row) for row in rows]
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(schema)
        arrays = [
            pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        return batch, pa.array(self.ordinals, type=pa.int64())
