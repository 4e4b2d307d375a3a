"""Type mapping rules (``type_mapping=`` of ``sync``): another Spark type than the default
mapping's (docs/types.md) for some source types, chosen from a column's wire
``source_type`` when its table is created or the column added (docs/sync.md, "Type
mapping"). A leaf: it imports nothing of the package.

The rules read the source's own spelling of a type, so they apply where the wire carries
it: MySQL and MariaDB types (dialect ``mysql``, Tencent DTS ``originalType``). Formats with
their own type systems (Debezium's Connect schema, Datastream's Avro, DataHub's types) do
not say ``tinyint(1)`` or ``unsigned``; only ``to-string`` changes their columns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

RULES: dict[str, str] = {
    "tinyint1-to-boolean": "MySQL tinyint(1) (and bool, boolean) as boolean, not tinyint",
    "unsigned-to-signed": "MySQL unsigned integers as the signed type of their width (int "
    "unsigned as int, bigint unsigned and serial as bigint), not the next wider one",
    "to-string": "every column as string: its value's text",
}
"""Each rule ``type_mapping=`` takes, and what it does."""

_TINYINT1 = re.compile(r"(tinyint\s*\(\s*1\s*\)|bool|boolean)(\s+unsigned)?(\s+zerofill)?")
_UNSIGNED = re.compile(
    r"(tinyint|smallint|mediumint|int|integer|bigint)(\s*\(\s*\d+\s*\))?\s+unsigned(\s+zerofill)?"
)
_SIGNED = {"tinyint": "tinyint", "smallint": "smallint", "mediumint": "int", "int": "int",
           "integer": "int", "bigint": "bigint"}  # fmt: skip


def names(value: str | Sequence[str] | None) -> list[str]:
    """One table's rules checked: each once, in the order given (a string: names separated
    by commas; ``None`` or empty: none).

    Raises:
        ValueError: a name not in :data:`RULES`, or a value of another kind.
    """
    if value is None:
        return []
    listed = value.split(",") if isinstance(value, str) else value
    if not isinstance(listed, Sequence) or not all(isinstance(n, str) for n in listed):
        raise ValueError(
            f"type_mapping must be a list of rules ({', '.join(RULES)}) or map table "
            f"patterns to such lists, not {value!r}"
        )
    out: list[str] = []
    for name in listed:
        wanted = name.strip().lower()
        if not wanted:
            continue
        if wanted not in RULES:
            raise ValueError(
                f"type_mapping: {name.strip()!r} is not a rule (they are {', '.join(RULES)}; "
                "char and varchar are string already)"
            )
        if wanted not in out:
            out.append(wanted)
    return out


def checked(value: Any) -> None:
    """``sync``'s ``type_mapping=`` (rules, or rules by table pattern) checked before
    anything is read."""
    if isinstance(value, Mapping):
        for rules in value.values():
            names(rules)
    else:
        names(value)


def spark_type(
    rules: Sequence[str], dialect: str | None, source_type: str | None, default: str | None
) -> str | None:
    """The Spark type of a column whose wire type is ``source_type`` (spelled in
    ``dialect``) under ``rules`` (checked by :func:`names`); ``default`` (the schema
    pass's type, docs/types.md) where no rule applies."""
    if not rules:
        return default
    if "to-string" in rules:
        return "string"
    if dialect != "mysql" or source_type is None:
        return default
    text = " ".join(source_type.lower().split())
    if "tinyint1-to-boolean" in rules and _TINYINT1.fullmatch(text):
        return "boolean"
    if "unsigned-to-signed" in rules:
        if text == "serial":  # bigint unsigned not null auto_increment unique
            return "bigint"
        found = _UNSIGNED.fullmatch(text)
        if found is not None:
            return _SIGNED[found.group(1)]
    return default
