"""A whole simulated database: many generated tables of realistic column mixes, a workload
that touches about half of them at a time, and schema changes mid-stream.

``generate(format, table_count=N)`` uses :class:`DatabaseSource` instead of the five
default tables. The tables (``erp.orders_007`` …) are drawn from the seed: each has a key
(a ``bigint`` counter mostly, now and then an unsigned one, a ``varchar`` code or two
columns) and 4 to 24 other columns of every MySQL family (integers of each width and
sign, ``tinyint(1)``, decimals of many precisions, floats, ``bit``, ``year``, text of
several charsets and lengths, ``enum``, ``set``, ``json``, dates, ``datetime`` and
``timestamp`` of several precisions, ``time``, binaries, blobs, now and then a ``point``).

The workload runs in phases: each phase's transactions touch a random half of the tables
(``hot_fraction``), so a consumer's micro-batch sees some of the tables, not all. About one
change in fifty is DDL on a table of the phase: ``ADD COLUMN``, a widening ``MODIFY
COLUMN`` (``int`` to ``bigint``, a longer ``varchar``, a decimal of four more digits), or
``DROP COLUMN`` (when ``drops`` allows it). A dropped column keeps its values in the rows
written before (a consumer applying the events keeps them too) and is absent from every
image after.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace

from .source import (
    _NAMES,
    _NAMES_ZH,
    _NOTES,
    _TITLES_LATIN1,
    _TITLES_ZH,
    Column,
    Ddl,
    MySQLSource,
    Table,
    _bytes,
    _choice,
    _counter,
    _date,
    _datetime,
    _decimal,
    _email,
    _float,
    _int,
    _json,
    _nullable,
    _point,
    _set,
    _time,
    _timestamp,
)

DATABASES = ("erp", "crm", "ops", "billing")
_WORDS = (
    "orders", "customers", "invoices", "payments", "shipments", "products", "stock",
    "suppliers", "contracts", "tickets", "sessions", "events", "ledger", "refunds",
    "coupons", "addresses", "devices", "visits", "reviews", "accounts",
)  # fmt: skip


def _text(charset: str):
    """Values of a text column in ``charset`` (each drawn from text that charset holds)."""
    return {
        "utf8mb4": _NAMES + _NOTES,
        "gbk": _NAMES_ZH + _TITLES_ZH,
        "latin1": _TITLES_LATIN1,
        "ascii": ["alpha", "beta", "gamma", "x-1", "ok", "", "N/A"],
    }[charset]


def _column(rng: random.Random, name: str) -> Column:
    """One non-key column of a random family."""
    C = Column
    pick = rng.random()
    if pick < 0.25:
        kind = rng.choice(("tinyint", "smallint", "mediumint", "int", "int", "bigint", "bigint"))
        unsigned = rng.random() < 0.3
        width = {"tinyint": 4, "smallint": 6, "mediumint": 9, "int": 11, "bigint": 20}[kind]
        sql = f"{kind}({width - unsigned}){' unsigned' if unsigned else ''}"
        return C(name, kind, sql, unsigned=unsigned, gen=_nullable(_int(kind, unsigned), 0.1))
    if pick < 0.3:
        return C(name, "tinyint", "tinyint(1)", gen=_int("tinyint", lo=0, hi=1))
    if pick < 0.45:
        precision = rng.choice((5, 8, 10, 12, 15, 18, 20, 24))
        scale = rng.choice((0, 2, 2, 4, 6))
        scale = min(scale, precision - 1)
        return C(name, "decimal", f"decimal({precision},{scale})", scale=scale,
                 gen=_nullable(_decimal(precision, scale), 0.1))  # fmt: skip
    if pick < 0.5:
        kind = rng.choice(("float", "double"))
        return C(name, kind, kind, gen=_nullable(_float(-1000, 1000, 2), 0.1))
    if pick < 0.7:
        charset = rng.choice(("utf8mb4", "utf8mb4", "gbk", "latin1", "ascii"))
        length = rng.choice((8, 16, 32, 64, 128, 255))
        kind = rng.choice(("varchar", "varchar", "char")) if length <= 64 else "varchar"
        values = [v[:length] for v in _text(charset)]
        return C(name, kind, f"{kind}({length})", charset=charset,
                 gen=_nullable(_choice(values), 0.15))  # fmt: skip
    if pick < 0.73:
        return C(name, "varchar", "text", charset="utf8mb4", gen=_nullable(_choice(_NOTES), 0.2))
    if pick < 0.76:
        return C(name, "enum", "enum('new','open','done')", charset="utf8mb4",
                 gen=_choice(["new", "open", "done"]))  # fmt: skip
    if pick < 0.78:
        return C(name, "set", "set('a','b','c')", charset="utf8mb4", gen=_set(["a", "b", "c"]))
    if pick < 0.81:
        return C(name, "json", "json", gen=_nullable(_json, 0.3))
    if pick < 0.84:
        return C(name, "date", "date", gen=_nullable(_date(dt.date(1990, 1, 1), 15_000), 0.1))
    if pick < 0.89:
        fsp = rng.choice((0, 0, 3, 6))
        sql = f"datetime({fsp})" if fsp else "datetime"
        return C(name, "datetime", sql, fsp=fsp, gen=_nullable(_datetime(fsp), 0.1))
    if pick < 0.92:
        return C(name, "timestamp", "timestamp", gen=_nullable(_timestamp, 0.1))
    if pick < 0.93:
        return C(name, "time", "time", gen=_nullable(_time, 0.2))
    if pick < 0.95:
        return C(
            name, "blob", rng.choice(("blob", "mediumblob")), gen=_nullable(_bytes(0, 40), 0.3)
        )
    if pick < 0.96:
        return C(name, "binary", "binary(16)", charset="binary", gen=lambda r: r.randbytes(16))
    if pick < 0.97:
        bits = rng.choice((1, 3, 8, 16))
        return C(name, "bit", f"bit({bits})", gen=lambda r, b=bits: r.randrange(1 << b))
    if pick < 0.98:
        return C(name, "year", "year(4)", gen=_nullable(lambda r: r.randint(1901, 2155), 0.1))
    if pick < 0.985:
        return C(name, "geometry", "point", gen=_nullable(_point, 0.3))
    return C(name, "varchar", "varchar(128)", charset="ascii", gen=_email)


def _codes(prefix: str):
    count = _counter()
    return lambda: (f"{prefix}-{count()[0]:08d}",)


def _pairs():
    state = {"parent": 0, "line": 0}

    def next_key() -> tuple[int, int]:
        if state["line"] >= 1 + state["parent"] % 3:
            state["parent"] += 1
            state["line"] = 0
        state["line"] += 1
        return (10_000 + state["parent"], state["line"])

    return next_key


def database_tables(count: int, rng: random.Random) -> list[Table]:
    """``count`` tables of random column mixes (see the module's docstring)."""
    tables = []
    for i in range(count):
        db = DATABASES[i % len(DATABASES)]
        name = f"{_WORDS[(i // len(DATABASES)) % len(_WORDS)]}_{i:03d}"
        C = Column
        shape = rng.random()
        if shape < 0.7:
            key_columns = [C("id", "bigint", "bigint(20)")]
            next_key = _counter(1)
        elif shape < 0.8:
            key_columns = [C("id", "bigint", "bigint(20) unsigned", unsigned=True)]
            next_key = _counter(1 << 40)
        elif shape < 0.9:
            key_columns = [C("code", "varchar", "varchar(24)", charset="ascii")]
            next_key = _codes(name[:3].upper())
        else:
            key_columns = [
                C("parent_id", "bigint", "bigint(20)"),
                C("line_no", "smallint", "smallint(5) unsigned", unsigned=True),
            ]
            next_key = _pairs()
        others = [_column(rng, f"c{j}_{rng.choice(_WORDS)[:4]}") for j in range(rng.randint(4, 24))]
        tables.append(
            Table(
                db,
                name,
                key_columns + others,
                tuple(c.name for c in key_columns),
                next_key,
                weight=rng.choice((0.5, 1, 1, 2)),
            )  # fmt: skip
        )
    return tables


def _widened(column: Column) -> tuple[Column, str] | None:
    """The column one step wider (a new type of the same family) and its SQL type, or
    ``None`` when it has no wider form here."""
    kind, sql = column.type, column.sql
    unsigned = " unsigned" if column.unsigned else ""
    if kind in ("tinyint", "smallint", "mediumint", "int") and not sql.startswith("tinyint(1)"):
        wider = {"tinyint": "smallint", "smallint": "int", "mediumint": "int", "int": "bigint"}
        new = wider[kind]
        width = {"smallint": 6, "int": 11, "bigint": 20}[new]
        new_sql = f"{new}({width - bool(unsigned)}){unsigned}"
        gen = _int(new, column.unsigned)
        return replace(column, type=new, sql=new_sql, gen=_nullable(gen, 0.1)), new_sql
    if kind == "varchar" and sql.startswith("varchar("):
        length = int(sql[8:-1])
        if length >= 4096:
            return None
        new_sql = f"varchar({length * 2})"
        return replace(column, sql=new_sql), new_sql
    if kind == "decimal":
        precision, scale = (int(x) for x in sql.split("(")[1].rstrip(")").split(","))
        if precision + 4 > 28:  # what Python's default decimal context holds exactly
            return None
        new_sql = f"decimal({precision + 4},{scale})"
        return replace(column, sql=new_sql, gen=_nullable(_decimal(precision + 4, scale), 0.1)), (
            new_sql
        )
    return None


class DatabaseSource(MySQLSource):
    """A :class:`MySQLSource` of ``table_count`` generated tables (the module's docstring).

    Args:
        seed: the RNG seed.
        table_count: how many tables (at least 1).
        max_rows: about how many rows a table holds before deletes outweigh inserts.
        hot_fraction: the share of the tables each phase's transactions touch.
        phase: transactions per phase.
        ddl_rate: the share of changes that are DDL.
        drops: whether DDL drops columns (a format whose images are positional, TDSQL,
            cannot name what is left).
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        table_count: int = 100,
        max_rows: int = 2000,
        hot_fraction: float = 0.5,
        phase: int = 150,
        ddl_rate: float = 0.02,
        drops: bool = True,
    ) -> None:
        if table_count < 1:
            raise ValueError("table_count must be at least 1")
        super().__init__(seed, max_rows=max_rows)
        layout = random.Random(f"database/{seed}")
        self.tables = database_tables(table_count, layout)
        self._by_name = {t.qualified: t for t in self.tables}
        self._ddl = []
        self._all_weights = [t.weight for t in self.tables]
        self._hot_fraction = hot_fraction
        self._phase = phase
        self._ddl_rate = ddl_rate
        self._drops = drops
        self._phase_left = 0
        self._hot: list[Table] = list(self.tables)

    def _next_change(self):
        if self._phase_left <= 0:
            self._phase_left = self._phase
            hot = max(1, round(len(self.tables) * self._hot_fraction))
            chosen = set(self.rng.sample(range(len(self.tables)), hot))
            self._weights = [w if i in chosen else 0 for i, w in enumerate(self._all_weights)]
            self._hot = [t for i, t in enumerate(self.tables) if i in chosen]
        self._phase_left -= 1
        if self.count > 20 and self.rng.random() < self._ddl_rate:
            self.count += 1
            return self._ddl_record()
        return super()._next_change()

    def _ddl_record(self) -> Ddl:
        table = self.rng.choice(self._hot)
        others = [c for c in table.columns if c.name not in table.primary_key]
        self._undo.append(("columns", table, list(table.columns)))
        pick = self.rng.random()
        widenable = [(c, w) for c in others if (w := _widened(c)) is not None]
        if pick < 0.35 and widenable:
            column, (new, sql_type) = self.rng.choice(widenable)
            table.columns = [new if c.name == column.name else c for c in table.columns]
            sql = f"ALTER TABLE `{table.name}` MODIFY COLUMN `{column.name}` {sql_type} NULL"
        elif pick < 0.55 and self._drops and len(others) > 3:
            column = self.rng.choice(others)
            table.columns = [c for c in table.columns if c.name != column.name]
            table.dropped[column.name] = column
            sql = f"ALTER TABLE `{table.name}` DROP COLUMN `{column.name}`"
        else:
            names = {c.name for c in table.columns} | set(table.dropped)
            number = len(names)
            while True:
                name = f"added_{number}"
                if name not in names:
                    break
                number += 1
            column = _column(self.rng, name)
            table.columns = [*table.columns, column]
            sql = f"ALTER TABLE `{table.name}` ADD COLUMN `{name}` {column.sql} NULL"
        return Ddl(
            self._gtid(),
            table.db,
            table.name,
            sql,
            self.now,
            self.file,
            self._advance(len(sql) + 80),
            self.rng.choice([0, 0, 1]),
        )
