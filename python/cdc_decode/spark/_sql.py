"""SQL text shared by the rules and the table formats: quoting, literals, a ``MERGE``'s
clauses and the statement they make. A leaf: it imports nothing of the package, so the
rules (:mod:`._apply_rules`, :mod:`._rules_sql`) and each format (:mod:`._tables`) import
it, never each other."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column


def quote(name: str) -> str:
    """A column or table name as a quoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    """A string as a SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def in_list(column: str, values: Sequence[str]) -> str:
    """``column IN ('a', 'b', …)``: the column (SQL text) is one of the strings."""
    return f"{column} IN ({', '.join(literal(v) for v in values)})"


class Exprs(Mapping[str, "Column"]):
    """Column name -> the Spark column of a SQL text, each made (a py4j call) when first
    read: a format that runs the text itself never makes them."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        self._texts = dict(texts)
        self._made: dict[str, Column] = {}

    def __getitem__(self, name: str) -> Column:
        found = self._made.get(name)
        if found is None:
            from pyspark.sql import functions as F

            found = self._made[name] = F.expr(self._texts[name])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)


@dataclass
class Clause:
    """One ``WHEN`` clause of a ``MERGE`` (target alias ``t``, source alias ``s``).

    Attributes:
        kind: ``"update"`` (when matched) or ``"insert"`` (when not matched).
        values: target column name -> value.
        condition: the clause's extra condition, or ``None``.
        sql: the same clause as SQL text, ``(condition or None, {column: value})``, for a
            format whose ``MERGE`` is written in SQL (Spark's columns have no SQL text);
            ``None``: not given, and such a format computes the clause's rows itself.
    """

    kind: str
    values: Mapping[str, Column]
    condition: Column | None = None
    sql: tuple[str | None, Mapping[str, str]] | None = None


def merge_statement(name: str, view: str, on: str, clauses: Sequence[Clause]) -> str:
    """The SQL ``MERGE`` into table ``name`` (alias ``t``) of view ``view`` (alias ``s``)
    on the condition ``on``, of clauses that carry their SQL text (:attr:`Clause.sql`)."""
    parts = [f"MERGE INTO {name} t USING {view} s ON {on}"]
    for clause in clauses:
        condition, values = clause.sql  # type: ignore[misc]
        when = " AND " + condition if condition else ""
        if clause.kind == "update":
            sets = ", ".join(f"t.{quote(c)} = {v}" for c, v in values.items())
            parts.append(f"WHEN MATCHED{when} THEN UPDATE SET {sets}")
        else:
            names = ", ".join(quote(c) for c in values)
            given = ", ".join(values.values())
            parts.append(f"WHEN NOT MATCHED{when} THEN INSERT ({names}) VALUES ({given})")
    return " ".join(parts)
