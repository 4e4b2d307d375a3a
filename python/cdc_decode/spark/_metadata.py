"""Metadata columns (``metadata_columns=`` of ``apply_changes`` and ``sync``): what each
change was, when and where in the source's log it happened, which source table and Kafka
record it came from, written into the table beside the source's columns, each as
``_cdc_meta_<name>`` (docs/sync.md, "Metadata columns"). A leaf: it imports nothing of the
package.

The values ride in each event's row images as extra fields (``after``, and ``before`` for
a delete's history version), so the rules of ``apply_changes`` carry them as they carry a
source column that every image holds: a row ends with the metadata of the newest change
that wrote it (per-column sequences, late and partial images, key changes, replays and
SCD type 2 versions alike), and no rule is written twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

PREFIX = "_cdc_meta_"
"""The prefix of every metadata column; a source column starting with it is refused when
metadata columns are asked for (it could be taken for one)."""

VOCABULARY: dict[str, str] = {
    "op": "op",
    "event_time": "event_time",
    "capture_time": "capture_time",
    "position": "position",
    "tx_id": "tx_id",
    "source_db": "source_db",
    "source_schema": "source_schema",
    "source_table": "source_table",
    "kafka_topic": "topic",
    "kafka_partition": "partition",
    "kafka_offset": "offset",
}
"""Each name ``metadata_columns=`` takes, and the events' column it copies (the event
columns of docs/events.md; ``kafka_*`` the Kafka columns ``decode`` keeps)."""

DEFAULT: tuple[str, ...] = ("op", "event_time", "capture_time", "position", "tx_id")
"""``metadata_columns=True``: what each format's events carry about the change itself (the
source names are in the table's target already; the Kafka ones exist only when read from
Kafka)."""


def names(value: bool | str | Sequence[str] | None) -> list[str]:
    """``metadata_columns=`` checked: its names, each once, in the order given (``True``:
    :data:`DEFAULT`; ``None``, ``False`` or empty: none).

    Raises:
        ValueError: a name not in :data:`VOCABULARY`, or a value of another kind.
    """
    if value is None or value is False:
        return []
    if value is True:
        return list(DEFAULT)
    listed = [value] if isinstance(value, str) else value
    if not isinstance(listed, Sequence) or not all(isinstance(n, str) for n in listed):
        raise ValueError(
            f"metadata_columns must be True or a list of names ({', '.join(VOCABULARY)}), "
            f"not {value!r}"
        )
    out: list[str] = []
    for name in listed:
        wanted = name.strip().lower()
        if wanted not in VOCABULARY:
            raise ValueError(
                f"metadata_columns: {name!r} is not a metadata column (they are "
                f"{', '.join(VOCABULARY)}; True for {', '.join(DEFAULT)})"
            )
        if wanted not in out:
            out.append(wanted)
    return out


def checked(value: Any, columns: Sequence[str]) -> None:
    """``sync``'s ``metadata_columns=`` (names, ``True``, or by table pattern) checked
    before anything is read: every name known, and the Kafka ones only where the messages
    have Kafka's ``columns``."""
    listed = [names(v) for v in value.values()] if isinstance(value, Mapping) else [names(value)]
    lacking = sorted(
        {n for given in listed for n in given if n.startswith("kafka_")}
        - {n for n in VOCABULARY if VOCABULARY[n] in columns}
    )
    if lacking:
        raise ValueError(
            f"metadata_columns: {', '.join(lacking)} need Kafka's "
            f"{', '.join(VOCABULARY[n] for n in lacking)} column(s), which the messages lack "
            f"(columns: {', '.join(columns) or 'none'})"
        )


def column(name: str) -> str:
    """The table's column of metadata ``name``."""
    return PREFIX + name


def is_metadata(column_name: str) -> bool:
    """Whether a column's name is a metadata column's (starts with :data:`PREFIX`)."""
    return column_name.lower().startswith(PREFIX)


def check_source(columns: Sequence[str], table: str) -> None:
    """Refuses source columns named like metadata columns (before anything is written)."""
    clash = [c for c in columns if is_metadata(c)]
    if clash:
        raise ValueError(
            f"table {table}: column(s) {', '.join(clash)} start with {PREFIX}, the prefix of "
            "the metadata columns (metadata_columns=): rename them in the source, or sync the "
            "table without metadata columns (nothing was written)"
        )


def with_metadata(events: DataFrame, wanted: Sequence[str], generic: bool) -> tuple[Any, list]:
    """``events`` with the metadata ``wanted`` added to their ``after`` and ``before``
    images (a null image stays null), and the metadata columns' fields (named
    :func:`column`, of the event columns' types).

    Typed images (structs) take them as fields; generic ones (``map<string, string>``) as
    entries of text that converts back exactly (a time with its offset).

    Raises:
        ValueError: the events lack a column of ``wanted`` (``kafka_*`` without Kafka's
            columns).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, TimestampNTZType, TimestampType

    fields = {f.name: f for f in events.schema.fields}
    missing = [n for n in wanted if VOCABULARY[n] not in fields]
    if missing:
        raise ValueError(
            "metadata_columns: the events have no "
            + ", ".join(f"{VOCABULARY[n]!r} column (for {n})" for n in missing)
            + " (kafka_*: Kafka's topic, partition and offset, kept by decode from Kafka's "
            "source; nothing was written)"
        )
    added = [StructField(column(n), fields[VOCABULARY[n]].dataType) for n in wanted]

    def text(f: Any) -> Column:
        value = F.col(VOCABULARY[f.name[len(PREFIX) :]])
        if isinstance(f.dataType, TimestampType):
            return F.date_format(value, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
        if isinstance(f.dataType, TimestampNTZType):
            return F.date_format(value, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
        return value.cast("string")

    def image(name: str) -> Column:
        current = F.col(name)
        if generic:
            entries = F.create_map(*[x for f in added for x in (F.lit(f.name), text(f))])
            ours = F.map_filter(current, lambda k, v: ~F.lower(k).startswith(PREFIX))
            return F.map_concat(ours, entries)  # null for a null image
        for f in added:  # a null struct stays null
            current = current.withField(f.name, F.col(VOCABULARY[f.name[len(PREFIX) :]]))
        return current

    out = events.withColumns({"after": image("after"), "before": image("before")})
    return out, added
