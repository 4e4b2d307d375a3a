"""A sharded database: one table split over many databases, as TDSQL and sharded MySQL
behind Tencent DTS keep it (``shop_00.orders_00`` … ``shop_15.orders_15``).

``generate(format, shards=N)`` uses :class:`ShardedSource` instead of the five default
tables: ``N`` databases ``shop_<i>``, each with one table ``orders_<i>`` of the same
columns, as the shards of one ``orders`` table are, but not quite: as shards drift when
their migrations run at different times, every fourth shard (0, 4, 8 …) has one more
column (``coupon``), and some hold a column in a narrower type (``qty`` is a
``smallint`` in shards 3, 7, 11 …, an ``int`` elsewhere; ``amount`` a ``decimal(10,2)``
in shards 1, 5, 9 …, a ``decimal(12,2)`` elsewhere). A consumer routing every shard into
one table gets the union of the columns, each in the type all shards' values fit.

Keys: ``shard_keys="per-table"`` (the default) numbers each shard's rows from 1, so the
shards' keys collide (shard 0's ``id`` 1 and shard 1's ``id`` 1 are two rows);
``"unique"`` gives each shard a range of its own (shard ``i`` from ``i * 10**9 + 1``), as
a global id generator does.
"""

from __future__ import annotations

from .source import Column, MySQLSource, Table, _choice, _counter, _datetime, _decimal, _int
from .source import _nullable as nullable

SHARD_KEYS = ("per-table", "unique")
"""``shard_keys=``: whether the shards' keys collide (``per-table``) or not (``unique``)."""

_STATUS = ["new", "paid", "shipped", "done", "refunded"]


def shard_tables(shards: int, shard_keys: str = "per-table") -> list[Table]:
    """The shards' tables (see the module's docstring)."""
    if shard_keys not in SHARD_KEYS:
        raise ValueError(f"shard_keys must be one of {', '.join(SHARD_KEYS)}, not {shard_keys!r}")
    tables = []
    for i in range(shards):
        C = Column
        narrow_qty = i % 4 == 3
        narrow_amount = i % 4 == 1
        columns = [
            C("id", "bigint", "bigint(20)"),
            C("customer_id", "int", "int(11)", gen=_int("int", lo=1, hi=99_999)),
            C(
                "qty",
                "smallint" if narrow_qty else "int",
                "smallint(6)" if narrow_qty else "int(11)",
                gen=nullable(_int("smallint", lo=0, hi=30_000), 0.1),
            ),
            C(
                "amount",
                "decimal",
                "decimal(10,2)" if narrow_amount else "decimal(12,2)",
                scale=2,
                gen=nullable(_decimal(10 if narrow_amount else 12, 2), 0.1),
            ),
            C("status", "varchar", "varchar(16)", charset="utf8mb4", gen=_choice(_STATUS)),
            C("created_at", "datetime", "datetime(3)", fsp=3, gen=_datetime(3)),
        ]
        if i % 4 == 0:
            codes = ["SPRING10", "VIP", "WELCOME5", "满100减20"]
            columns.append(
                C(
                    "coupon",
                    "varchar",
                    "varchar(32)",
                    charset="utf8mb4",
                    gen=nullable(_choice(codes), 0.4),
                )  # fmt: skip
            )
        start = i * 10**9 + 1 if shard_keys == "unique" else 1
        tables.append(Table(f"shop_{i:02d}", f"orders_{i:02d}", columns, ("id",), _counter(start)))
    return tables


class ShardedSource(MySQLSource):
    """A :class:`MySQLSource` of ``shards`` shards of one table (the module's docstring).

    Args:
        seed: the RNG seed.
        shards: how many shards (databases of one table each), at least 1.
        shard_keys: ``"per-table"`` (keys collide across shards) or ``"unique"``.
        max_rows: about how many rows a shard holds before deletes outweigh inserts.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        shards: int = 16,
        shard_keys: str = "per-table",
        max_rows: int = 2000,
    ) -> None:
        if shards < 1:
            raise ValueError("shards must be at least 1")
        super().__init__(seed, max_rows=max_rows)
        self.tables = shard_tables(shards, shard_keys)
        self._by_name = {t.qualified: t for t in self.tables}
        self._weights = [t.weight for t in self.tables]
        self._ddl = []  # the five tables' column DDL is not theirs: index DDL only
