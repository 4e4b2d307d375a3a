"""A simulated MySQL source: tables, a seeded workload, and its binlog as plain records.

Nothing here knows a CDC format. The source keeps its tables, runs transactions against
them and hands out what a binlog reader would see, record by record (:class:`Transaction`,
:class:`Ddl`, :class:`Heartbeat`, :class:`Checkpoint`). A format writer turns the records
into messages; :func:`mysql_text` gives each value the text MySQL itself prints, which the
writers share.

Row state is the **consumer's view**: a row holds the columns some change event has
carried. A column added by ``ALTER TABLE ... ADD COLUMN`` is NULL in MySQL for the rows
already there, but no event says so until the row is written again with a full image, so
those rows simply lack the key (``row.get(name)`` is the MySQL value). That is exactly what
applying the events gives, so the final state and the events can be checked against each
other.

Values are Python objects by column family: ``int`` (integers, ``year``, ``bit``),
``float``, ``decimal.Decimal``, ``str`` (character columns, ``enum``, ``set``, ``json``
text), ``bytes`` (``binary``, blobs, geometry WKB), ``datetime.date``,
``datetime.timedelta`` (``time``, which may be negative or above 24 hours),
``datetime.datetime`` naive (``datetime``) or in UTC (``timestamp``); ``None`` is NULL.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

Value = Any
Gen = Callable[[random.Random], Value]

EPOCH = dt.datetime(2024, 5, 1, 8, 0, 0, tzinfo=dt.timezone.utc)
"""The simulated clock starts here."""

INTEGER_TYPES = ("tinyint", "smallint", "mediumint", "int", "bigint")
_INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}


@dataclass(frozen=True)
class Column:
    """One column of a simulated table.

    Attributes:
        name: the column name.
        type: the MySQL type family: one of ``tinyint smallint mediumint int bigint float
            double decimal varchar char binary enum set date time datetime timestamp year
            bit json blob geometry``.
        sql: the type as ``SHOW CREATE TABLE`` prints it (``decimal(10,2)``,
            ``bigint(20) unsigned``); formats that carry the original type use it.
        unsigned: integer columns only.
        charset: character columns (``varchar``, ``char``, ``enum``, ``set``): the MySQL
            charset name (``utf8mb4``, ``gbk``, ``latin1``, ``ascii``); ``binary`` for
            ``binary(n)``.
        scale: ``decimal`` columns only.
        fsp: fractional-second digits of ``time``/``datetime``/``timestamp``.
        gen: draws a value (never the primary key: the table draws those).
    """

    name: str
    type: str
    sql: str
    unsigned: bool = False
    charset: str | None = None
    scale: int = 0
    fsp: int = 0
    gen: Gen = field(default=lambda rng: None, compare=False, repr=False)

    @property
    def spark_type(self) -> str:
        """The Spark type a data engineer declares for this column in typed mode
        (``schema=``): integers ``bigint`` (an unsigned ``bigint``, ``decimal(20,0)``),
        ``decimal(p,s)`` as declared, floats ``double``, ``date``, ``timestamp``, binary and
        spatial types ``binary``, everything else (text, enum, set, json, time, year, bit)
        ``string``."""
        if self.type in ("tinyint", "smallint", "mediumint", "int", "bigint"):
            return "decimal(20,0)" if self.unsigned and self.type == "bigint" else "bigint"
        if self.type == "decimal":
            return self.sql.replace(" unsigned", "")
        if self.type in ("float", "double"):
            return "double"
        if self.type == "date":
            return "date"
        if self.type in ("datetime", "timestamp"):
            return "timestamp"
        if self.type in ("binary", "blob", "geometry"):
            return "binary"
        return "string"


@dataclass
class Table:
    """A simulated table: its current columns, primary key and rows (consumer's view)."""

    db: str
    name: str
    columns: list[Column]
    primary_key: tuple[str, ...]
    next_key: Callable[[], tuple[Value, ...]] = field(repr=False, default=lambda: ())
    rows: _Rows = field(default_factory=lambda: _Rows(), repr=False)
    weight: float = 1.0
    # Columns dropped by DDL (generate.database), by name: rows written before keep them.
    dropped: dict[str, Column] = field(default_factory=dict, repr=False)

    @property
    def qualified(self) -> str:
        """``db.table``."""
        return f"{self.db}.{self.name}"

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


class _Rows:
    """Rows by primary key, with O(1) insert, delete and uniform random choice."""

    def __init__(self) -> None:
        self.by_key: dict[tuple, dict[str, Value]] = {}
        self._keys: list[tuple] = []
        self._index: dict[tuple, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def put(self, key: tuple, row: dict[str, Value]) -> None:
        if key not in self._index:
            self._index[key] = len(self._keys)
            self._keys.append(key)
        self.by_key[key] = row

    def remove(self, key: tuple) -> None:
        i = self._index.pop(key)
        last = self._keys.pop()
        if last != key:
            self._keys[i] = last
            self._index[last] = i
        del self.by_key[key]

    def sample(self, rng: random.Random, k: int) -> list[tuple]:
        return rng.sample(self._keys, min(k, len(self._keys)))


# --- the records a binlog reader hands out ------------------------------------------------


@dataclass
class RowImage:
    """One changed row. ``before``/``after`` hold the columns in the image (a partial image,
    as ``binlog_row_image=minimal`` writes, holds fewer); ``None`` for no image."""

    before: dict[str, Value] | None
    after: dict[str, Value] | None


@dataclass
class RowsEvent:
    """One binlog rows event: one statement's rows of one kind on one table."""

    db: str
    table: str
    kind: str  # insert | update | delete
    columns: tuple[Column, ...]  # the table's columns when the event was written
    primary_key: tuple[str, ...]
    rows: list[RowImage]
    timestamp: int  # unix seconds
    file: str
    position: int


@dataclass
class Transaction:
    """BEGIN, rows events, then COMMIT (or ROLLBACK, with no rows kept).

    ``gtid`` is ``None`` for an anonymous transaction (no GTID assigned).
    """

    gtid: str | None
    xid: int
    thread_id: int
    timestamp: int
    file: str
    position: int  # of the BEGIN
    events: list[RowsEvent]
    commit_position: int
    rolled_back: bool = False


@dataclass
class Ddl:
    """A DDL statement (its own GTID, no BEGIN/COMMIT, as MySQL logs it)."""

    gtid: str | None
    db: str
    table: str
    sql: str
    timestamp: int
    file: str
    position: int
    execution_time: int


@dataclass
class Heartbeat:
    """The source is alive (sent on a fixed period of the simulated clock)."""

    timestamp: int


@dataclass
class Checkpoint:
    """A consistent point in the log: everything up to ``file:position`` is delivered."""

    timestamp: int
    file: str
    position: int
    gtid_set: str


Record = Transaction | Ddl | Heartbeat | Checkpoint


# --- values -------------------------------------------------------------------------------


def _format_time(value: dt.timedelta, fsp: int) -> str:
    micros = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{text}.{frac:06d}"[: len(text) + 1 + fsp] if fsp else text


def mysql_text(column: Column, value: Value) -> str | bytes | None:
    """The value as MySQL prints it: ``str`` for text and numbers, ``bytes`` for binary data.

    Temporal values use MySQL's own layout (``2024-05-01 10:00:00.123456``); a
    ``timestamp`` is printed in UTC with its offset, ``2021-05-17 07:22:42 +00:00``, as
    Tencent DTS sends it. ``json`` is its compact text.
    """
    if value is None:
        return None
    kind = column.type
    if kind in ("varchar", "char", "enum", "set", "json"):
        return value
    if kind in ("binary", "blob", "geometry"):
        return value
    if kind in _INT_BITS or kind in ("year", "bit"):
        return str(value)
    if kind in ("float", "double"):
        return repr(value)
    if kind == "decimal":
        return format(value, "f")
    if kind == "date":
        return value.isoformat()
    if kind == "time":
        return _format_time(value, column.fsp)
    if kind == "datetime":
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return (
            f"{text}.{value.microsecond:06d}"[: len(text) + 1 + column.fsp] if column.fsp else text
        )
    if kind == "timestamp":
        text = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        if column.fsp:
            text = f"{text}.{value.microsecond:06d}"[: len(text) + 1 + column.fsp]
        return f"{text} +00:00"
    raise ValueError(f"no text form for column type {kind!r}")


# Value generators. Each returns a function of the RNG so a column can be redrawn.


def _nullable(gen: Gen, p: float) -> Gen:
    return lambda rng: None if rng.random() < p else gen(rng)


def _int(kind: str, unsigned: bool = False, lo: int | None = None, hi: int | None = None) -> Gen:
    bits = _INT_BITS[kind]
    low = 0 if unsigned else -(1 << (bits - 1))
    high = (1 << bits) - 1 if unsigned else (1 << (bits - 1)) - 1
    low = low if lo is None else lo
    high = high if hi is None else hi

    def gen(rng: random.Random) -> int:
        r = rng.random()
        if r < 0.03:
            return low  # the type's edges show up in real data too
        if r < 0.06:
            return high
        return rng.randint(low, high)

    return gen


def _decimal(precision: int, scale: int, signed: bool = True) -> Gen:
    top = 10**precision - 1

    def gen(rng: random.Random) -> Decimal:
        unscaled = rng.randint(0, 10 ** min(precision, scale + 5)) if rng.random() < 0.9 else top
        if signed and rng.random() < 0.15:
            unscaled = -unscaled
        return Decimal(unscaled).scaleb(-scale)

    return gen


def _float(lo: float, hi: float, digits: int) -> Gen:
    return lambda rng: round(rng.uniform(lo, hi), digits)


def _choice(options: list) -> Gen:
    return lambda rng: rng.choice(options)


def _bytes(lo: int, hi: int) -> Gen:
    return lambda rng: rng.randbytes(rng.randint(lo, hi))


def _set(members: list[str]) -> Gen:
    return lambda rng: ",".join(m for m in members if rng.random() < 0.4)


def _date(start: dt.date, days: int) -> Gen:
    return lambda rng: start + dt.timedelta(days=rng.randrange(days))


def _datetime(fsp: int) -> Gen:
    def gen(rng: random.Random) -> dt.datetime:
        moment = dt.datetime(2023, 1, 1) + dt.timedelta(seconds=rng.randrange(60_000_000))
        if fsp:
            moment = moment.replace(
                microsecond=rng.randrange(1_000_000) // 10 ** (6 - fsp) * 10 ** (6 - fsp)
            )
        return moment

    return gen


def _timestamp(rng: random.Random) -> dt.datetime:
    return EPOCH - dt.timedelta(seconds=rng.randrange(100_000_000))


def _time(rng: random.Random) -> dt.timedelta:
    r = rng.random()
    if r < 0.05:
        return -dt.timedelta(hours=rng.randrange(1, 30), minutes=rng.randrange(60))
    if r < 0.1:
        return dt.timedelta(hours=rng.randrange(24, 838), seconds=rng.randrange(3600))
    return dt.timedelta(seconds=rng.randrange(86400))


def _json(rng: random.Random) -> str:
    doc = {
        "v": rng.randrange(5),
        "lang": rng.choice(["en", "zh-CN", "de", "ja"]),
        "tags": rng.sample(["new", "sale", "gift", "礼物", "🎁", "b2b"], rng.randrange(3)),
    }
    if rng.random() < 0.2:
        doc["nested"] = {"a": [1, None, True], "quote": 'say "hi"\\n'}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def _point(rng: random.Random) -> bytes:
    # MySQL's internal geometry: SRID (u32 LE) then WKB (little-endian POINT).
    lon, lat = rng.uniform(73, 135), rng.uniform(18, 53)
    return struct.pack("<IBIdd", 4326, 1, 1, lon, lat)


_NAMES = [
    "Alice",
    "Bob",
    "José Álvarez",
    "Zoë 🦊",
    "Łukasz",
    "Søren",
    "山田太郎",
    "Иван Петров",
    "Nguyễn Văn An",
    "O'Brien",
    'The "Boss"',
    "back\\slash",
    "مريم",
    "🚀🚀",
    "Ünal",
    "",
]
_NAMES_ZH = [
    "张伟",
    "王芳",
    "李娜",
    "刘洋",
    "陈静",
    "杨磊",
    "赵敏（测试）",
    "黄小明",
    "周杰",
    "吴用",
]
_TITLES_LATIN1 = [
    "Crème brûlée",
    "Jalapeño salsa",
    "Smørrebrød",
    "Œuvre complète",
    "Café au lait — 2€",
    "Naïve™ socks",
    "Façade kit",
    "plain widget",
    "Ångström ruler",
    "Müsli 500g",
]
_TITLES_ZH = [
    "无线鼠标",
    "机械键盘 青轴",
    "显示器支架",
    "数据线（1米）",
    "保温杯",
    "笔记本电脑包",
    "蓝牙耳机",
]
_NOTES = [
    "leave at the door 🚪",
    "gift wrap please 🎁",
    "no plastic",
    "请尽快发货",
    "Grüße!",
    "",
    "∑ ≠ ∞",
    "call 📞 before delivery",
    "fragile — handle with care",
]
_WAREHOUSES = ["上海一号仓", "北京顺义仓", "广州白云仓", "成都双流仓", "深圳前海仓"]


def _email(rng: random.Random) -> str:
    user = "".join(
        rng.choice("abcdefghijklmnopqrstuvwxyz0123456789._") for _ in range(rng.randint(3, 12))
    )
    return f"{user}@{rng.choice(['example.com', 'qq.com', 'mail.test'])}"


def _counter(start: int = 1) -> Callable[[], tuple[int]]:
    state = [start - 1]

    def next_key() -> tuple[int]:
        state[0] += 1
        return (state[0],)

    return next_key


def _order_lines() -> Callable[[], tuple[int, int]]:
    # Keys (order_id, line_no): a few lines per order, then the next order.
    state = {"order": 500_000, "line": 0}

    def next_key() -> tuple[int, int]:
        if state["line"] >= 1 + (state["order"] * 7919) % 4:
            state["order"] += 1
            state["line"] = 0
        state["line"] += 1
        return (state["order"], state["line"])

    return next_key


def _skus() -> Callable[[], tuple[str]]:
    count = _counter()
    return lambda: (f"SKU-{count()[0]:07d}",)


def default_tables() -> list[Table]:
    """The simulated schema: two databases, five tables, every MySQL type family."""
    C = Column
    users = Table(
        "shop",
        "users",
        [
            C("id", "bigint", "bigint(20) unsigned", unsigned=True),
            C(
                "account_no",
                "bigint",
                "bigint(20) unsigned",
                unsigned=True,
                gen=_int("bigint", unsigned=True, lo=1 << 63),
            ),
            C("name", "varchar", "varchar(64)", charset="utf8mb4", gen=_choice(_NAMES)),
            C(
                "name_zh",
                "varchar",
                "varchar(32)",
                charset="gbk",
                gen=_nullable(_choice(_NAMES_ZH), 0.2),
            ),
            C("email", "varchar", "varchar(128)", charset="ascii", gen=_email),
            C(
                "country",
                "char",
                "char(2)",
                charset="ascii",
                gen=_choice(["CN", "US", "DE", "JP", "FR"]),
            ),
            C(
                "status",
                "enum",
                "enum('active','blocked','deleted')",
                charset="utf8mb4",
                gen=_choice(["active", "active", "blocked", "deleted"]),
            ),
            C(
                "tags",
                "set",
                "set('vip','beta','staff')",
                charset="utf8mb4",
                gen=_set(["vip", "beta", "staff"]),
            ),
            C(
                "age",
                "tinyint",
                "tinyint(3) unsigned",
                unsigned=True,
                gen=_nullable(_int("tinyint", unsigned=True), 0.1),
            ),
            C("balance", "decimal", "decimal(12,2)", scale=2, gen=_decimal(12, 2)),
            C("score", "float", "float", gen=_nullable(_float(-100, 100, 2), 0.1)),
            C("birthday", "date", "date", gen=_nullable(_date(dt.date(1950, 1, 1), 25_000), 0.2)),
            C("created_at", "timestamp", "timestamp", gen=_timestamp),
            C("updated_at", "datetime", "datetime(6)", fsp=6, gen=_datetime(6)),
            C("avatar", "blob", "blob", gen=_nullable(_bytes(0, 32), 0.6)),
            C("profile", "json", "json", gen=_nullable(_json, 0.3)),
            C("flags", "bit", "bit(8)", gen=_int("tinyint", unsigned=True)),
        ],
        ("id",),
        _counter(1),
        weight=2,
    )
    orders = Table(
        "shop",
        "orders",
        [
            C("order_id", "bigint", "bigint(20)"),
            C(
                "user_id",
                "bigint",
                "bigint(20) unsigned",
                unsigned=True,
                gen=_int("bigint", True, 1, 10**6),
            ),
            C("amount", "decimal", "decimal(10,2)", scale=2, gen=_decimal(10, 2, signed=False)),
            C("currency", "char", "char(3)", charset="ascii", gen=_choice(["CNY", "USD", "EUR"])),
            C("quantity", "smallint", "smallint(6)", gen=_int("smallint")),
            C("discount", "double", "double", gen=_nullable(_float(0, 1, 6), 0.3)),
            C(
                "note",
                "varchar",
                "varchar(255)",
                charset="utf8mb4",
                gen=_nullable(_choice(_NOTES), 0.4),
            ),
            C(
                "status",
                "enum",
                "enum('new','paid','shipped','cancelled')",
                charset="utf8mb4",
                gen=_choice(["new", "paid", "shipped", "cancelled"]),
            ),
            C("placed_at", "datetime", "datetime(6)", fsp=6, gen=_datetime(6)),
            C("ship_window", "time", "time", gen=_nullable(_time, 0.2)),
            C("delta", "mediumint", "mediumint(9)", gen=_int("mediumint")),
            C("priority", "tinyint", "tinyint(4)", gen=_int("tinyint")),
        ],
        ("order_id",),
        _counter(100_000),
        weight=3,
    )
    order_items = Table(
        "shop",
        "order_items",
        [
            C("order_id", "bigint", "bigint(20)"),
            C("line_no", "smallint", "smallint(5) unsigned", unsigned=True),
            C(
                "sku",
                "varchar",
                "varchar(32)",
                charset="ascii",
                gen=lambda rng: f"SKU-{rng.randrange(10**7):07d}",
            ),
            C(
                "qty",
                "mediumint",
                "mediumint(8) unsigned",
                unsigned=True,
                gen=_int("mediumint", True),
            ),
            C("unit_price", "decimal", "decimal(10,4)", scale=4, gen=_decimal(10, 4)),
            C("cost", "int", "int(11)", gen=_int("int")),
            C("weight_g", "int", "int(10) unsigned", unsigned=True, gen=_int("int", True)),
            C("gift_wrap", "tinyint", "tinyint(1)", gen=_int("tinyint", lo=0, hi=1)),
        ],
        ("order_id", "line_no"),
        _order_lines(),
        weight=3,
    )
    items = Table(
        "inventory",
        "items",
        [
            C("sku", "varchar", "varchar(32)", charset="ascii"),
            C("title", "varchar", "varchar(100)", charset="latin1", gen=_choice(_TITLES_LATIN1)),
            C(
                "title_zh",
                "varchar",
                "varchar(100)",
                charset="gbk",
                gen=_nullable(_choice(_TITLES_ZH), 0.1),
            ),
            C("stock", "int", "int(11)", gen=_int("int", lo=-50, hi=100_000)),
            C(
                "reorder_level",
                "smallint",
                "smallint(5) unsigned",
                unsigned=True,
                gen=_int("smallint", True),
            ),
            C("price", "decimal", "decimal(18,6)", scale=6, gen=_decimal(18, 6, signed=False)),
            C("weight_kg", "float", "float", gen=_float(0, 50, 3)),
            C(
                "made_year",
                "year",
                "year(4)",
                gen=_nullable(lambda rng: rng.randint(1901, 2155), 0.2),
            ),
            C("restocked_at", "datetime", "datetime", gen=_nullable(_datetime(0), 0.2)),
            C(
                "checksum",
                "binary",
                "binary(16)",
                charset="binary",
                gen=lambda rng: rng.randbytes(16),
            ),
            C("image", "blob", "mediumblob", gen=_nullable(_bytes(0, 48), 0.4)),
            C("location", "geometry", "point", gen=_nullable(_point, 0.3)),
            C("attrs", "json", "json", gen=_json),
        ],
        ("sku",),
        _skus(),
        weight=2,
    )
    warehouses = Table(
        "inventory",
        "warehouses",
        [
            C("id", "mediumint", "mediumint(8) unsigned", unsigned=True),
            C("name", "varchar", "varchar(64)", charset="gbk", gen=_choice(_WAREHOUSES)),
            C(
                "code",
                "char",
                "char(4)",
                charset="ascii",
                gen=lambda rng: f"W{rng.randrange(1000):03d}",
            ),
            C("capacity", "int", "int(10) unsigned", unsigned=True, gen=_int("int", True)),
            C("opened", "date", "date", gen=_date(dt.date(2000, 1, 1), 9000)),
            C("temp_c", "smallint", "smallint(6)", gen=_int("smallint", lo=-40, hi=60)),
            C("lat", "double", "double", gen=_float(18, 53, 6)),
            C("lon", "double", "double", gen=_float(73, 135, 6)),
            C(
                "manager",
                "varchar",
                "varchar(32)",
                charset="utf8mb4",
                gen=_nullable(_choice(_NAMES), 0.3),
            ),
            C("zone_mask", "bit", "bit(3)", gen=lambda rng: rng.randrange(8)),
        ],
        ("id",),
        _counter(1),
        weight=0.6,
    )
    return [users, orders, order_items, items, warehouses]


def _column_ddl() -> list[tuple[str, str, Column, str]]:
    """``(db, table, new column, SQL)`` in the order the workload runs them."""
    C = Column
    return [
        (
            "shop",
            "users",
            C(
                "nickname",
                "varchar",
                "varchar(32)",
                charset="utf8mb4",
                gen=_nullable(_choice(["小明", "ace 🃏", "nick", "Zé"]), 0.3),
            ),
            "ALTER TABLE `users` ADD COLUMN `nickname` varchar(32) NULL COMMENT '昵称'",
        ),
        (
            "inventory",
            "items",
            C(
                "origin",
                "varchar",
                "varchar(16)",
                charset="gbk",
                gen=_nullable(_choice(["浙江", "广东", "江苏", "进口"]), 0.2),
            ),
            "ALTER TABLE `items` ADD COLUMN `origin` varchar(16) CHARACTER SET gbk NULL",
        ),
        (
            "shop",
            "orders",
            C(
                "coupon",
                "decimal",
                "decimal(8,2)",
                scale=2,
                gen=_nullable(_decimal(8, 2, signed=False), 0.5),
            ),
            "ALTER TABLE `orders` ADD COLUMN `coupon` decimal(8,2) DEFAULT NULL",
        ),
        (
            "shop",
            "order_items",
            C("returned_at", "timestamp", "timestamp", gen=_nullable(_timestamp, 0.7)),
            "ALTER TABLE `order_items` ADD COLUMN `returned_at` timestamp NULL",
        ),
    ]


# --- the workload -------------------------------------------------------------------------


class MySQLSource:
    """A seeded MySQL server: :meth:`next_record` runs the workload one record at a time.

    Args:
        seed: the RNG seed; the same seed gives the same records.
        max_rows: about how many rows a table holds before deletes outweigh inserts.
        heartbeat_seconds / checkpoint_seconds: periods of the simulated clock.
        tables: ``db.table`` names of :func:`default_tables` the server has (the workload,
            DDL included, touches only those; a string is a comma-separated list);
            ``None`` for all five.
        key_changes: the share of updated rows whose primary key the update changes (to a
            new key, ``UPDATE t SET id = ... WHERE id = ...``); ``0`` (the default) never
            changes one, and the records for a seed are then the same as without it.

    The first few records always include an empty transaction, a rollback, a DDL, a bulk
    insert (one rows event of hundreds of rows), a heartbeat and a checkpoint, so even a
    short stream covers every kind of record.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        max_rows: int = 2000,
        heartbeat_seconds: int = 5,
        checkpoint_seconds: int = 10,
        tables: Sequence[str] | None = None,
        key_changes: float = 0.0,
    ) -> None:
        if not 0 <= key_changes <= 1:
            raise ValueError(f"key_changes is a share of the updated rows, not {key_changes!r}")
        self.key_changes = key_changes
        self.rng = random.Random(seed)
        self.tables = default_tables()
        if tables is not None:
            known = [t.qualified for t in self.tables]
            if isinstance(tables, str):
                tables = tables.split(",")
            wanted = list(dict.fromkeys(name.strip() for name in tables))
            unknown = [name for name in wanted if name not in known]
            if unknown or not wanted:
                raise ValueError(
                    f"unknown table(s) {', '.join(unknown)}: the source has {', '.join(known)}"
                    if unknown
                    else "tables must name at least one table"
                )
            self.tables = [t for t in self.tables if t.qualified in wanted]
        self._by_name = {t.qualified: t for t in self.tables}
        self._weights = [t.weight for t in self.tables]
        self.max_rows = max_rows
        bits = self.rng.getrandbits
        self.server_uuid = (
            f"{bits(32):08x}-{bits(16):04x}-11ee-{0x8000 | bits(14):04x}-{bits(48):012x}"
        )
        self.server_id = 1_000_000 + self.rng.randrange(9_000_000)
        self.time_us = int(EPOCH.timestamp()) * 1_000_000
        self.file_no = 3
        self.position = 4
        self.gtid_no = 0
        self.xid = 1000 + self.rng.randrange(100_000)
        self.count = 0
        self._ddl = [d for d in _column_ddl() if f"{d[0]}.{d[1]}" in self._by_name]
        self._index_no = 0
        self._pending: list[tuple[Record, list]] = []
        self._last_index: tuple[Table, str] | None = None
        self._undo: list[tuple] = []
        self._heartbeat_seconds = heartbeat_seconds
        self._checkpoint_seconds = checkpoint_seconds
        self._next_heartbeat = self.now + 1
        self._next_checkpoint = self.now + 2

    # clock and log position

    def start_at(self, moment: dt.datetime) -> None:
        """Move the simulated clock, before any change is made, so that the first change
        happens at ``moment`` (an aware datetime): every change after it keeps its
        distance from the first, so a seed's stream differs only in its times."""
        if moment.tzinfo is None:
            raise ValueError("start must be an aware datetime (datetime.now(timezone.utc))")
        shift = round(moment.timestamp() * 1_000_000) - self.time_us
        self.time_us += shift
        self._next_heartbeat += shift // 1_000_000
        self._next_checkpoint += shift // 1_000_000

    @property
    def now(self) -> int:
        return self.time_us // 1_000_000

    @property
    def file(self) -> str:
        return f"mysql-bin.{self.file_no:06d}"

    def _advance(self, nbytes: int) -> int:
        """Reserve ``nbytes`` of binlog; returns the event's start position."""
        if self.position > 256 * 1024 * 1024:  # max_binlog_size: rotate
            self.file_no += 1
            self.position = 4
        start = self.position
        self.position += nbytes
        return start

    def _gtid(self) -> str | None:
        if self.rng.random() < 0.01:
            return None  # an anonymous transaction (gtid_mode ON_PERMISSIVE)
        self.gtid_no += 1
        return f"{self.server_uuid}:{self.gtid_no}"

    # records

    def records(self) -> Iterator[Record]:
        """The records, forever."""
        while True:
            yield self.next_record()

    def next_record(self) -> Record:
        """Run the workload to its next record and apply it to the tables.

        :meth:`undo_last` takes the last record's changes back out of the tables.
        """
        if not self._pending:
            self._undo = []
            self.time_us += int(self.rng.expovariate(1 / 300_000))
            if self.now >= self._next_checkpoint:
                self._next_checkpoint = self.now + self._checkpoint_seconds
                gtids = f"{self.server_uuid}:1-{self.gtid_no}" if self.gtid_no else ""
                self._pending.append((Checkpoint(self.now, self.file, self.position, gtids), []))
            if self.now >= self._next_heartbeat:
                self._next_heartbeat = self.now + self._heartbeat_seconds
                self._pending.append((Heartbeat(self.now), []))
            change = self._next_change()
            self._pending.append((change, self._undo))
        record, self._undo = self._pending.pop(0)
        return record

    def _next_change(self) -> Transaction | Ddl:
        n = self.count
        self.count += 1
        r = self.rng.random()
        if n == 9 or (n > 20 and r < 0.002):
            return self._ddl_record()
        if n == 3 or (n > 20 and r < 0.008):
            return self._transaction(statements=0)  # a transaction on tables not subscribed
        if n == 5 or (n > 20 and r < 0.012):
            return self._transaction(statements=self.rng.randint(1, 2), rollback=True)
        if n == 14 or (n > 20 and r < 0.014):
            return self._transaction(bulk=True)
        return self._transaction(statements=self.rng.randint(1, 4))

    def _ddl_record(self) -> Ddl:
        if self._ddl:
            db, name, column, sql = self._ddl.pop(0)
            table = self._by_name[f"{db}.{name}"]
            self._undo.append(("columns", table, list(table.columns)))
            table.columns = [*table.columns, column]
        else:
            table = self.rng.choice(self.tables)
            db, name = table.db, table.name
            self._index_no += 1
            if self._index_no % 2:
                column = self.rng.choice(table.columns[1:])
                index = f"idx_{column.name}_{self._index_no // 2 + 1}"
                self._last_index = (table, index)
                sql = f"CREATE INDEX `{index}` ON `{name}` (`{column.name}`)"
            else:
                table, index = self._last_index
                db, name = table.db, table.name
                sql = f"DROP INDEX `{index}` ON `{name}`"
        gtid = self._gtid()
        return Ddl(
            gtid,
            db,
            name,
            sql,
            self.now,
            self.file,
            self._advance(len(sql) + 80),
            self.rng.choice([0, 0, 0, 1, 3]),
        )

    def _transaction(
        self, statements: int = 0, rollback: bool = False, bulk: bool = False
    ) -> Transaction:
        # A rolled-back transaction gets no GTID and leaves nothing but BEGIN ... ROLLBACK.
        gtid = None if rollback else self._gtid()
        self.xid += 1
        begin = self._advance(80)
        events: list[RowsEvent] = []
        if bulk:
            # A bulk load of the catalogue, or of the first table when it is not there.
            target = self._by_name.get("inventory.items", self.tables[0])
            events.append(self._insert(target, self.rng.randint(300, 900)))
        for _ in range(statements):
            table = self.rng.choices(self.tables, self._weights)[0]
            events.append(self._statement(table))
        if rollback:
            self._undo_changes()
            events = []
        return Transaction(
            gtid,
            self.xid,
            self.rng.randrange(1, 5000),
            self.now,
            self.file,
            begin,
            events,
            self._advance(31),
            rollback,
        )

    def _statement(self, table: Table) -> RowsEvent:
        size = len(table.rows)
        r = self.rng.random()
        crowded = size > self.max_rows
        if size < 5 or r < (0.15 if crowded else 0.4):
            return self._insert(table, self.rng.choice([1, 1, 1, 2, 3, 5]))
        if r < (0.55 if crowded else 0.85):
            return self._update(table, self.rng.choice([1, 1, 1, 2, 3]))
        return self._delete(table, self.rng.choice([1, 1, 2, 4] if crowded else [1, 1, 2]))

    def _rows_event(self, table: Table, kind: str, rows: list[RowImage]) -> RowsEvent:
        nbytes = 40 + 60 * len(rows) * len(table.columns) // 4
        return RowsEvent(
            table.db,
            table.name,
            kind,
            tuple(table.columns),
            table.primary_key,
            rows,
            self.now,
            self.file,
            self._advance(nbytes),
        )

    def _set_row(self, table: Table, key: tuple, row: dict | None) -> None:
        old = table.rows.by_key.get(key)
        self._undo.append(("row", table, key, old))
        if row is None:
            table.rows.remove(key)
        else:
            table.rows.put(key, row)

    def _insert(self, table: Table, count: int) -> RowsEvent:
        images = []
        for _ in range(count):
            key = table.next_key()
            row = dict(zip(table.primary_key, key, strict=True))
            for column in table.columns:
                if column.name not in row:
                    row[column.name] = column.gen(self.rng)
            self._set_row(table, key, row)
            images.append(RowImage(None, dict(row)))
        return self._rows_event(table, "insert", images)

    def _update(self, table: Table, count: int) -> RowsEvent:
        minimal = self.rng.random() < 0.15
        others = [c for c in table.columns if c.name not in table.primary_key]
        images = []
        for key in table.rows.sample(self.rng, count):
            row = table.rows.by_key[key]
            changes = {
                c.name: c.gen(self.rng) for c in self.rng.sample(others, self.rng.randint(1, 3))
            }
            new_key = key
            # Drawn only when asked for, so streams without key changes stay as they were.
            if self.key_changes and self.rng.random() < self.key_changes:
                new_key = table.next_key()
                changes.update(zip(table.primary_key, new_key, strict=True))
            if minimal:
                before = dict(zip(table.primary_key, key, strict=True))
                after = changes
                new_row = {**row, **changes}
            else:
                before = {c.name: row.get(c.name) for c in table.columns}
                after = {**before, **changes}
                # A column dropped since the row was written keeps its value (as applying
                # the events keeps it); otherwise the row is the after image.
                new_row = {**row, **after}
            if new_key != key:
                self._set_row(table, key, None)
            self._set_row(table, new_key, new_row)
            images.append(RowImage(before, dict(after)))
        return self._rows_event(table, "update", images)

    def _delete(self, table: Table, count: int) -> RowsEvent:
        minimal = self.rng.random() < 0.15
        images = []
        for key in table.rows.sample(self.rng, count):
            row = table.rows.by_key[key]
            if minimal:
                before = dict(zip(table.primary_key, key, strict=True))
            else:
                before = {c.name: row.get(c.name) for c in table.columns}
            self._set_row(table, key, None)
            images.append(RowImage(before, None))
        return self._rows_event(table, "delete", images)

    def _undo_changes(self) -> None:
        for step in reversed(self._undo):
            if step[0] == "row":
                _, table, key, old = step
                if old is None:
                    table.rows.remove(key)
                else:
                    table.rows.put(key, old)
            else:
                _, table, columns = step
                table.columns = columns
        self._undo = []

    def undo_last(self) -> None:
        """Take the last record's changes back out of the tables, with those of any record
        already drawn but not yet handed out (not the clock or the RNG).

        A writer that must stop at an exact message count calls this when the last record
        would not fit, so the tables match what was written. Stop drawing after it.
        """
        last = self._undo  # the last record's: drawn first, undone last
        self.undo_pending()
        self._undo = last
        self._undo_changes()

    def undo_pending(self) -> None:
        """Take back the changes of the records drawn ahead but not handed out yet: a
        heartbeat or checkpoint that falls due before a change is handed out first, the
        change already applied to the tables. A writer that stops calls this (or
        :meth:`undo_last`), so the tables match what was written."""
        for _, undo in reversed(self._pending):
            self._undo = undo
            self._undo_changes()
        self._pending = []

    def state(self) -> dict[str, dict[tuple, dict[str, Value]]]:
        """``db.table`` → primary key → row, as a consumer of the change events sees it."""
        return {t.qualified: dict(t.rows.by_key) for t in self.tables}
