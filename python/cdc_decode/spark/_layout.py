"""A table's layout chosen when it is made: the columns it is clustered by and its
partitions (``cluster_by=``, ``partition_by=`` of ``apply_changes`` and ``sync``). A leaf:
it imports nothing of the package but the SQL text helpers.

A partition is a column (``"region"``) or one of Iceberg's partition transforms:
``years(col)``, ``months(col)``, ``days(col)``, ``hours(col)``, ``bucket(n, col)``,
``truncate(n, col)`` (on Delta, a generated column: ``_tables/delta.py``). Delta's
clustering is liquid clustering (``CLUSTER BY``), Iceberg's a sort order (``WRITE ORDERED
BY``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._sql import quote

TRANSFORMS = ("years", "months", "days", "hours", "bucket", "truncate")
_TRANSFORM = re.compile(r"^\s*(\w+)\s*\(\s*(?:(\d+)\s*,\s*)?(.+?)\s*\)\s*$")


@dataclass(frozen=True)
class Partition:
    """One partition field: ``column`` as it is (``transform`` ``None``) or through an
    Iceberg transform (``width``: ``bucket``'s and ``truncate``'s number)."""

    column: str
    transform: str | None = None
    width: int | None = None

    def sql(self) -> str:
        if self.transform is None:
            return quote(self.column)
        if self.width is not None:
            return f"{self.transform}({self.width}, {quote(self.column)})"
        return f"{self.transform}({quote(self.column)})"


@dataclass(frozen=True)
class Layout:
    """``cluster_by`` and ``partition_by`` of a table to make, their columns named as the
    table names them."""

    cluster_by: tuple[str, ...] = ()
    partition_by: tuple[Partition, ...] = ()


NO_LAYOUT = Layout()
"""A table made as the format makes it by default."""


def layout(
    cluster_by: str | Sequence[str] | None,
    partition_by: str | Sequence[str] | None,
    columns: Sequence[str],
) -> Layout:
    """The layout of the options as given, each column found among ``columns`` (ignoring
    case, named as there).

    Raises:
        ValueError: a column that is not one of ``columns``, a transform other than
            :data:`TRANSFORMS` or without its number.
    """
    names = {c.lower(): c for c in columns}

    def column(name: str, option: str) -> str:
        found = names.get(name.strip().strip("`").lower())
        if found is None:
            raise ValueError(
                f"{option}: {name!r} is not a column of the table (columns: {', '.join(columns)})"
            )
        return found

    clusters = tuple(column(c, "cluster_by") for c in listed(cluster_by))
    parts = []
    for text in listed(partition_by):
        match = _TRANSFORM.match(text)
        if match is None:
            parts.append(Partition(column(text, "partition_by")))
            continue
        transform, width, name = match.group(1).lower(), match.group(2), match.group(3)
        if transform not in TRANSFORMS:
            raise ValueError(
                f"partition_by: {text!r}: {transform} is not a partition transform (one of "
                f"{', '.join(TRANSFORMS)})"
            )
        if (transform in ("bucket", "truncate")) != (width is not None):
            raise ValueError(
                f"partition_by: {text!r}: {transform} takes "
                + ("a number and a column: bucket(16, id)" if width is None else "a column only")
            )
        parts.append(
            Partition(
                column(name, "partition_by"), transform, None if width is None else int(width)
            )
        )
    return Layout(clusters, tuple(parts))


def listed(value: str | Sequence[str] | None) -> list[str]:
    """An option of one name or many as a list (``None``: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)
