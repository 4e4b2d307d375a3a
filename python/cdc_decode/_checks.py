"""The option checks every entry point makes (the Python API, the Spark layer, the Python
engine), each written once with its one error wording."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._schema import ENGINES, FORMATS, MODES


def _one_of(what: str, value: Any, allowed: Iterable[str]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}: expected one of {', '.join(allowed)}")


def check_format(format: str, formats: Iterable[str] = FORMATS) -> None:
    """Raises ``ValueError`` unless ``format`` is one of ``formats`` (all formats by default)."""
    _one_of("format", format, formats)


def check_mode(mode: str) -> None:
    """Raises ``ValueError`` unless ``mode`` is one of :data:`MODES`."""
    _one_of("mode", mode, MODES)


def check_engine(engine: str) -> None:
    """Raises ``ValueError`` unless ``engine`` is one of :data:`ENGINES`."""
    _one_of("engine", engine, ENGINES)


def check_schema_or_tables(schema: Any, tables: Any) -> None:
    """Raises ``ValueError`` when both typed options are given (each excludes the other)."""
    if schema is not None and tables is not None:
        raise ValueError("give schema= (one table) or tables= (many), not both")


def check_unavailable_value(format: str, value: Any) -> str | None:
    """The ``unavailable_value`` option (``debezium-json`` only): the connector's
    ``unavailable.value.placeholder``; ``None`` for Debezium's default, ``""`` for none.

    Raises:
        ValueError: given for another format.
        TypeError: not a string.
    """
    if value is None:
        return None
    if format != "debezium-json":
        raise ValueError(
            f"the unavailable_value option applies to debezium-json only, not {format}"
        )
    if not isinstance(value, str):
        raise TypeError(f"unavailable_value must be a string, not {type(value).__name__}")
    return value


def check_columns(format: str, columns: Any) -> dict[str, list[str]]:
    """The ``columns`` option (``tdsql-json`` only) as a plain dict of lists of names.

    Raises:
        ValueError: another format, or a table that names a column twice.
        TypeError: not a mapping of table names to lists of column names.
    """
    if format != "tdsql-json":
        raise ValueError(f"the columns option applies to tdsql-json only, not {format}")
    if not isinstance(columns, Mapping):
        raise TypeError('columns must be a mapping such as {"db.table": ["id", "name"]}')
    checked = {}
    for table, names in columns.items():
        if not isinstance(table, str) or isinstance(names, str | bytes):
            raise TypeError(f"columns[{table!r}] must be a list of column names")
        names = list(names)
        if not all(isinstance(n, str) for n in names):
            raise TypeError(f"columns[{table!r}] must be a list of column names")
        if len(set(names)) != len(names):
            raise ValueError(f"columns[{table!r}] names a column twice")
        checked[table] = names
    return checked


def check_time_zone(name: object, typed: bool):
    """``source_time_zone=``: an IANA time zone name (``Asia/Shanghai``), for typed mode
    only; the ``zoneinfo.ZoneInfo`` (``None`` for ``None``).

    Raises:
        ValueError: an unknown name (the case counts), or no ``schema=``/``tables=``.
    """
    if name is None:
        return None
    if not typed:
        raise ValueError("source_time_zone applies to typed mode: give schema= or tables= too")
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    unknown = ValueError(
        f"source_time_zone: unknown time zone {name!r}: give an IANA name such as "
        "'Asia/Shanghai' or 'UTC'"
    )
    if not isinstance(name, str) or not name:
        raise unknown
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise unknown from None
