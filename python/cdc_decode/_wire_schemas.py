"""The schema pass's results (docs/schemas.md): each source table's columns, types and key as
the wire describes them, and where in the stream each schema was seen.

The decoders give rows of :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA` (one per table and
wire schema, one per message that did not decode); :class:`TableSchemas` merges the rows of
any number of calls or Spark partitions into one view per table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from ._schema import OPEN_PART, SCHEMA_PASS_SCHEMA

_OPEN_PART = re.compile(
    re.escape(OPEN_PART) + r": topic (?P<topic>.*), partition (?P<partition>-?\d+), "
    r"offset (?P<offset>-?\d+)"
)


@dataclass(frozen=True)
class WireColumn:
    """One column as the wire describes it.

    Attributes:
        name: the column's name.
        source_type: its type as the format spells it (``decimal(10,2)``, ``int64
            io.debezium.time.MicroTimestamp``, ``long timestamp-micros``); ``None`` where
            the wire carries no types.
        type: the Spark type typed mode converts its values to (docs/types.md); ``None``
            without a source type, or for one the mapping does not know.
    """

    name: str
    source_type: str | None
    type: str | None


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class SchemaVersion:
    """One schema of a table: its columns and key as some of its events described them.

    Attributes:
        columns: the columns, in the order sent.
        key: the key columns, in key order; ``None`` where the wire does not say.
        dialect: whose spelling ``source_type`` is (``mysql``, ``postgresql``, ``oracle``,
            ``sqlserver``, ``connect``, ``avro``, ``datahub``, ``arrow``); ``None`` when the
            wire carries no types (TDSQL JSON, Debezium without ``schemas.enable``,
            Datastream JSON).
        events: how many events carried it.
        first_ordinal, last_ordinal: the least and greatest input ordinal of those events
            (within one decoder: in Spark, one partition's).
        first_sequence, last_sequence: the least and greatest ``sequence`` of those events
            (byte order, as ``sequence`` sorts); ``None`` where they have none.
    """

    columns: tuple[WireColumn, ...]
    key: tuple[str, ...] | None
    dialect: str | None
    events: int
    first_ordinal: int
    last_ordinal: int
    first_sequence: bytes | None
    last_sequence: bytes | None

    @property
    def typed(self) -> bool:
        """Whether the wire carried the columns' types."""
        return self.dialect is not None

    def untyped_columns(self) -> list[WireColumn]:
        """The columns without a Spark type (all of them when the wire carries no types)."""
        return [c for c in self.columns if c.type is None]

    def ddl(self, *, unknown: str | None = None) -> str:
        """The columns as a Spark DDL column list, for ``schema=``/``tables=``.

        Args:
            unknown: the type of a column without one (``"string"`` keeps any value's
                text); ``None`` raises instead.

        Raises:
            ValueError: a column has no Spark type and ``unknown`` is not given; the error
                names each such column and its source type.
        """
        parts = []
        missing = []
        for column in self.columns:
            spark = column.type or unknown
            if spark is None:
                missing.append(f"{column.name} ({column.source_type or 'no type sent'})")
                continue
            parts.append(f"{_quoted(column.name)} {spark}")
        if missing:
            raise ValueError(
                f"no Spark type for column(s) {', '.join(missing)}: give unknown='string' "
                "or declare the table's schema"
            )
        return ", ".join(parts)

    def arrow_schema(self, *, unknown: str | None = None) -> pa.Schema:
        """:meth:`ddl` as a pyarrow schema (``cdc_decode.parse_ddl``)."""
        from ._typed import parse_ddl

        return parse_ddl(self.ddl(unknown=unknown))


_INTEGER_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def _whole_and_scale(spark: str | None) -> tuple[int, int] | None:
    if spark in _INTEGER_DIGITS:
        return _INTEGER_DIGITS[spark], 0
    found = _DECIMAL.fullmatch(spark or "")
    if found is None:
        return None
    p, s = int(found.group(1)), int(found.group(2))
    return p - s, s


def wider_number(a: str | None, b: str | None) -> str | None:
    """Of two Spark types the schema pass gave one column (one widened for its values,
    docs/types.md), the one holding both: the same type, ``string``, or the ``decimal``
    with the greater whole part and scale (``bigint`` counts 20 digits, an unsigned 64-bit
    value's), ``string`` past 38 digits."""
    if a == b or a is None or b is None:
        return a if b is None else b
    if "string" in (a, b):
        return "string"
    x, y = _whole_and_scale(a), _whole_and_scale(b)
    if x is None or y is None:
        return a
    whole, scale = max(x[0], y[0]), max(x[1], y[1])
    return f"decimal({whole + scale},{scale})" if whole + scale <= 38 else "string"


def _order(version: SchemaVersion) -> tuple:
    return (version.first_sequence is None, version.first_sequence or b"", version.first_ordinal)


@dataclass(frozen=True)
class WireTable:
    """A source table and the schemas its events carried, in stream order.

    Attributes:
        source_db, source_schema, source_table: the table's names, as the events'
            ``source_db``, ``source_schema``, ``source_table``.
        versions: each distinct schema (columns, types and key) seen, ordered by its first
            ``sequence`` (then its first ordinal): more than one when a column was added,
            dropped or retyped mid-stream, or the key changed. Empty for a table whose
            events carried no schema (``sync`` gives a ``target`` function such a table
            when its only events in a batch are a ``truncate``).
    """

    source_db: str | None
    source_schema: str | None
    source_table: str | None
    versions: tuple[SchemaVersion, ...]

    @property
    def name(self) -> str:
        """``db.schema.table`` of the names that are not null (``shop.orders``): the name
        ``tables=`` routes by first."""
        return ".".join(p for p in (self.source_db, self.source_schema, self.source_table) if p)

    @property
    def latest(self) -> SchemaVersion:
        """The schema seen first the latest in the stream."""
        if not self.versions:
            raise ValueError(f"table {self.name}: its events carried no schema")
        return self.versions[-1]

    @property
    def changed(self) -> bool:
        """Whether the table's schema changed within what was read."""
        return len(self.versions) > 1


class TableSchemas:
    """What the schema pass saw: the wire schemas of each table, and the messages that did
    not decode.

    Built from the rows of one or more schema-pass calls (:class:`SchemaReader`, Spark
    partitions): rows of one table and one schema merge (events added, the least and
    greatest ordinals and sequences kept), so the result does not depend on how the input
    was split.

    Args:
        batches: record batches (or tables) of :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA`.
    """

    def __init__(self, batches: Iterable[pa.RecordBatch | pa.Table]) -> None:
        merged: dict[tuple, dict] = {}
        errors: list[tuple[int, str]] = []
        open_parts: list[tuple[str, int, int]] = []
        for batch in batches:
            for row in batch.to_pylist():
                if row["error"] is not None:
                    held = _OPEN_PART.fullmatch(row["error"])
                    if held is not None:
                        open_parts.append((held["topic"], int(held["partition"]),
                                           int(held["offset"])))  # fmt: skip
                    else:
                        errors.append((row["first_ordinal"], row["error"]))
                    continue
                shape = tuple((c["name"], c["source_type"]) for c in row["columns"] or ())
                key = None if row["key"] is None else tuple(row["key"])
                names = (row["source_db"], row["source_schema"], row["source_table"])
                # One schema of the wire, whatever its values needed: a row whose columns
                # were widened for its values (docs/types.md, "Values wider than the wire's
                # type") merges with the others of its schema, each column of the wider type.
                identity = (names, row["dialect"], shape, key)
                into = merged.get(identity)
                if into is None:
                    merged[identity] = dict(row)
                    continue
                if row["dialect"] is not None:
                    into["columns"] = [
                        {**a, "type": wider_number(a["type"], b["type"])}
                        for a, b in zip(into["columns"], row["columns"], strict=True)
                    ]
                into["events"] += row["events"]
                into["first_ordinal"] = min(into["first_ordinal"], row["first_ordinal"])
                into["last_ordinal"] = max(into["last_ordinal"], row["last_ordinal"])
                for name, pick in (("first_sequence", min), ("last_sequence", max)):
                    values = [v for v in (into[name], row[name]) if v is not None]
                    into[name] = pick(values) if values else None
        tables: dict[tuple, list[SchemaVersion]] = {}
        for (names, dialect, _, key), row in merged.items():
            columns = [(c["name"], c["source_type"], c["type"]) for c in row["columns"] or ()]
            version = SchemaVersion(
                columns=tuple(WireColumn(*c) for c in columns),
                key=key,
                dialect=dialect,
                events=row["events"],
                first_ordinal=row["first_ordinal"],
                last_ordinal=row["last_ordinal"],
                first_sequence=row["first_sequence"],
                last_sequence=row["last_sequence"],
            )
            tables.setdefault(names, []).append(version)
        self.tables: dict[str, WireTable] = {}
        for names, versions in tables.items():
            table = WireTable(*names, tuple(sorted(versions, key=_order)))
            self.tables[table.name] = table
        self.errors: list[tuple[int, str]] = sorted(errors)
        """``(ordinal, error)`` of each message that did not decode."""
        self.open_parts: list[tuple[str, int, int]] = sorted(open_parts)
        """``(topic, partition, offset)`` of each part of a Tencent DTS multi-part set
        still open at the end of a streamed micro-batch (``streamed=True``)."""
        rows = list(merged.values()) + [
            {"first_ordinal": o, "last_ordinal": o, "events": 0, "error": e} for o, e in errors
        ]
        rows.sort(key=lambda r: r["first_ordinal"])
        self.batch: pa.Table = pa.Table.from_pylist(rows, schema=SCHEMA_PASS_SCHEMA)
        """The merged rows, in :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA`."""

    def __getitem__(self, name: str) -> WireTable:
        return self.tables[name]

    def __contains__(self, name: object) -> bool:
        return name in self.tables

    def __iter__(self) -> Iterator[WireTable]:
        return iter(self.tables.values())

    def __len__(self) -> int:
        return len(self.tables)

    def __repr__(self) -> str:
        changed = sum(t.changed for t in self)
        return (
            f"TableSchemas({len(self)} tables, {changed} with schema changes, "
            f"{len(self.errors)} errors)"
        )

    def ddl(self, *, unknown: str | None = None) -> dict[str, str]:
        """Each table's latest schema as Spark DDL (:meth:`SchemaVersion.ddl`), keyed by its
        name: ready for ``decode(..., tables=...)``.

        Raises:
            ValueError: a column without a Spark type (and no ``unknown``), naming the table.
        """
        out = {}
        for table in self:
            try:
                out[table.name] = table.latest.ddl(unknown=unknown)
            except ValueError as exc:
                raise ValueError(f"{table.name}: {exc}") from None
        return out
