"""SQL in, equal tables out: a seeded SQL workload on a real database, captured by a real
Debezium, streamed through Kafka, ``decode_stream`` and ``apply_changes`` into Delta, and
compared with the database's own ``SELECT *``.

- :data:`POSTGRES` and :data:`MARIADB`: each source's tables (DDL), the Spark DDL their
  Delta tables are decoded with, and how each column of ``SELECT *`` compares with the
  Delta value (the type mapping of docs/formats/debezium-json.md, "Types").
- :class:`Workload`: the SQL, phase by phase, from one seed: the same statements every run.
- :class:`SyncSink`: the ``foreachBatch`` of one query over every table's topic: decoded
  once with ``tables=``, each table's events (its ``TRUNCATE`` too) applied with
  ``apply_changes``.
- :func:`assert_tables_equal`: every Delta table against ``SELECT *`` of its source table.

``python tests/support/real_source.py ...`` runs the query as its own driver process (the
kill test SIGKILLs it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import random
import string
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script, this folder is sys.path[0], and its delta.py would hide the delta
# package: import `support` from tests/ instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE.parent))

from support.streaming import kafka_source  # noqa: E402

UTC = dt.timezone.utc


# --------------------------------------------------------------------------------------
# The type mapping: how a column of SELECT * compares with its Delta value.


def _time_micros(value: dt.time | dt.timedelta) -> int:
    if isinstance(value, dt.timedelta):  # PyMySQL reads TIME as a timedelta
        return value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _float32(value: float | None) -> float | None:
    import numpy as np

    return None if value is None else float(np.float32(value))


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# kind -> (source value -> comparable, Delta value -> comparable)
_SAME = (lambda v: v, lambda v: v)
COMPARE: dict[str, tuple] = {
    "same": _SAME,
    # real / FLOAT: Delta's float32, the source's text read as a double: both as float32.
    "float32": (_float32, _float32),
    # timestamptz / TIMESTAMP: instants, compared in UTC.
    "instant": (_utc, _utc),
    # time: Debezium's MicroTime, microseconds of the day, into a bigint.
    "time": (_time_micros, lambda v: v),
    # uuid: its text.
    "text": (str, lambda v: v),
    # arrays, json, jsonb: the JSON text Debezium sends, parsed (jsonb prints its own
    # spacing; arrays arrive as JSON arrays).
    "json": (
        lambda v: v if not isinstance(v, str) else json.loads(v),
        lambda v: json.loads(v),
    ),
    # BIT(n > 1): Debezium's io.debezium.data.Bits, little-endian bytes; PyMySQL reads
    # the server's big-endian ones.
    "bits": (lambda v: int.from_bytes(v, "big"), lambda v: int.from_bytes(v, "little")),
    # BIT(1): a boolean on both sides (PyMySQL: one byte).
    "bit1": (lambda v: v != b"\x00" if isinstance(v, bytes) else bool(v), bool),
    # SET: the member names, comma separated, in definition order on both sides.
    "set": (lambda v: ",".join(sorted(v)) if isinstance(v, set) else v, lambda v: v),
}


@dataclass(frozen=True)
class Column:
    """One column: its SQL type, its Spark type in Delta, how it compares, and the SQL
    that reads it for the comparison (the column itself, unless the mapping says)."""

    name: str
    sql: str
    spark: str
    compare: str = "same"
    select: str | None = None


@dataclass(frozen=True)
class Table:
    name: str  # as decode's tables= names it: schema.table (PostgreSQL), db.table (MariaDB)
    keys: tuple[str, ...]
    columns: tuple[Column, ...]
    extra: str = ""  # table options after the columns

    @property
    def ddl(self) -> str:
        return ", ".join(f"`{c.name}` {c.spark}" for c in self.columns)

    @property
    def path(self) -> str:
        return self.name.replace(".", "__")

    def create(self, quote: str) -> str:
        cols = [
            f"{quote}{c.name}{quote} {c.sql}"
            for c in self.columns
            if not c.name.startswith("added")
        ]
        keys = ", ".join(f"{quote}{k}{quote}" for k in self.keys)
        return f"CREATE TABLE {self.name} ({', '.join(cols)}, PRIMARY KEY ({keys})){self.extra}"


C = Column
POSTGRES = (
    Table(
        "public.accounts",
        ("id",),
        (
            C("id", "bigint", "bigint"),
            # widened by the workload: varchar(20) -> varchar(200)
            C("name", "varchar(20)", "string"),
            C("balance", "numeric(12,2)", "decimal(12,2)"),
            C("fee", "money", "decimal(18,2)", select="fee::numeric"),
            C("rate", "real", "float", "float32"),
            C("score", "double precision", "double"),
            C("active", "boolean", "boolean"),
            C("small", "smallint", "smallint"),
            # widened by the workload: integer -> bigint (declared bigint from the start)
            C("counter", "integer", "bigint"),
            C("opened", "date", "date"),
            C("created", "timestamp(6)", "timestamp_ntz"),
            C("updated", "timestamptz", "timestamp", "instant"),
            C("wake", "time", "bigint", "time"),
            C("token", "uuid", "string", "text"),
            C("mood", "mood", "string"),
            C("tags", "text[]", "string", "json"),
            C("nums", "int[]", "string", "json"),
            # ALTER TABLE ADD COLUMN by the workload
            C("added_note", "text", "string"),
        ),
    ),
    Table(
        "public.docs",
        ("id",),
        (
            C("id", "integer", "int"),
            C("title", "text", "string"),
            C("body", "text", "string"),  # TOASTed: 12,800 random characters
            C("blob", "bytea", "binary"),  # TOASTed: 9,000 random bytes
            C("meta", "jsonb", "string", "json"),
            C("raw", "json", "string", "json"),
            C("labels", "text[]", "string", "json"),
        ),
    ),
    Table(
        "public.items",
        ("order_id", "line"),
        (
            C("order_id", "integer", "int"),
            C("line", "smallint", "smallint"),
            C("qty", "integer", "int"),
            C("price", "numeric(10,3)", "decimal(10,3)"),
        ),
    ),
)

MARIADB = (
    Table(
        "shop.products",
        ("id",),
        (
            C("id", "int unsigned", "bigint"),
            C("sku", "varchar(20)", "string"),  # widened to varchar(64)
            C("qty", "smallint unsigned", "int"),
            C("big", "bigint unsigned", "decimal(20,0)"),
            C("price", "decimal(10,2)", "decimal(10,2)"),
            C("weight", "double", "double"),
            C("ratio", "float", "float", "float32"),
            C("made", "datetime(6)", "timestamp_ntz"),
            C("seen", "datetime", "timestamp_ntz"),
            C("stamp", "timestamp(3) NULL", "timestamp", "instant"),
            C("day", "date", "date"),
            C("yr", "year", "int"),
            C("wake", "time(6)", "bigint", "time"),
            C("flags", "set('a','b','c')", "string", "set"),
            C("color", "enum('red','green','blue')", "string"),
            C("bits", "bit(10)", "binary", "bits"),
            C("flag", "bit(1)", "boolean", "bit1"),
            C("note", "text", "string"),
            C("blob", "blob", "binary"),
            C("added_level", "int", "int"),
        ),
    ),
    Table(
        "shop.lines",
        ("order_id", "line"),
        (
            C("order_id", "int", "int"),
            C("line", "tinyint unsigned", "smallint"),
            C("qty", "int", "int"),
        ),
    ),
)


# --------------------------------------------------------------------------------------
# The workload.


class Workload:
    """Seeded SQL against one source: ``setup`` (before the connector: the snapshot),
    then ``phase(n)`` for the streamed changes. Every statement and value comes from the
    seed, so two runs issue the same SQL."""

    def __init__(self, server: Any, tables: tuple[Table, ...], seed: int = 30) -> None:
        self.server = server
        self.kind = server.kind
        self.tables = tables
        self.rng = random.Random(seed)
        self.quote = '"' if self.kind == "postgres" else "`"
        self.next_id: dict[str, int] = {}
        self.conn = server.connect()

    def close(self) -> None:
        self.conn.close()

    # -- SQL plumbing

    def run(self, sql: str, params: tuple | list = ()) -> None:
        if self.kind == "postgres":
            self.conn.execute(sql, params)
        else:
            with self.conn.cursor() as cursor:
                cursor.execute(sql.replace("%s", "%s"), params)

    def transaction(self, statements: list[tuple[str, tuple]]) -> None:
        """Several statements in one transaction (one commit)."""
        self.run("BEGIN")
        for sql, params in statements:
            self.run(sql, params)
        self.run("COMMIT")

    def select_all(self, table: Table) -> list[dict]:
        exprs = ", ".join(
            (c.select or f"{self.quote}{c.name}{self.quote}")
            + f" AS {self.quote}{c.name}{self.quote}"
            for c in table.columns
            if self.has_column(table, c.name)
        )
        sql = f"SELECT {exprs} FROM {table.name}"
        if self.kind == "postgres":
            cursor = self.conn.execute(sql)
            names = [d.name for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        with self.conn.cursor() as cursor:
            cursor.execute(sql)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def has_column(self, table: Table, name: str) -> bool:
        schema, bare = table.name.split(".")
        sql = (
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s AND column_name = %s"
        )
        if self.kind == "postgres":
            return self.conn.execute(sql, (schema, bare, name)).fetchone()[0] == 1
        with self.conn.cursor() as cursor:
            cursor.execute(sql, (schema, bare, name))
            return cursor.fetchone()[0] == 1

    # -- values

    def text(self, n: int) -> str:
        return "".join(self.rng.choice(string.ascii_letters + string.digits) for _ in range(n))

    def new_id(self, table: str) -> int:
        self.next_id[table] = self.next_id.get(table, 0) + 1
        return self.next_id[table]

    # -- PostgreSQL

    def pg_account(self, id_: int) -> tuple:
        r = self.rng
        return (
            id_,
            self.text(r.randint(1, 20)),
            decimal.Decimal(r.randint(-(10**9), 10**9)) / 100,
            decimal.Decimal(r.randint(0, 10**8)) / 100,
            r.choice([0.1, 1.5, -2.25, 3.4028e38, 1e-30, r.uniform(-1e6, 1e6)]),
            r.choice([0.1, -1e300, 2.5e-300, r.uniform(-1e9, 1e9)]),
            r.random() < 0.5,
            r.randint(-32768, 32767),
            r.randint(-(2**31), 2**31 - 1),
            dt.date(1990, 1, 1) + dt.timedelta(days=r.randint(0, 20000)),
            dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=r.randint(0, 10**15)),
            dt.datetime(2000, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=r.randint(0, 10**15)),
            dt.time(r.randint(0, 23), r.randint(0, 59), r.randint(0, 59), r.randint(0, 999999)),
            f"{r.getrandbits(128):032x}",
            r.choice(["sad", "ok", "happy"]),
            [self.text(3), "a,b", 'q"uote', "ü"][: r.randint(1, 4)],
            [r.randint(-99, 99) for _ in range(r.randint(1, 5))],
        )

    def pg_doc(self, id_: int) -> tuple:
        r = self.rng
        body = self.text(12_800)
        blob = bytes(r.getrandbits(8) for _ in range(9_000))
        meta = json.dumps({"k": r.randint(0, 9), "s": self.text(5), "n": [1, 2.5, None]})
        return (id_, self.text(8), body, blob, meta, meta, [self.text(4), self.text(2)])

    def postgres_setup(self) -> None:
        self.run("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        for table in self.tables:
            self.run(table.create('"'))
        accounts = "INSERT INTO public.accounts VALUES (" + ", ".join(["%s"] * 17) + ")"
        for _ in range(20):
            self.run(accounts, self.pg_account(self.new_id("accounts")))
        for _ in range(4):
            self.run(
                "INSERT INTO public.docs VALUES (%s, %s, %s, %s, %s, %s, %s)",
                self.pg_doc(self.new_id("docs")),
            )
        for order in range(1, 4):
            for line in range(1, 4):
                self.run(
                    "INSERT INTO public.items VALUES (%s, %s, %s, %s)",
                    (order, line, line * 2, decimal.Decimal(order * 1000 + line) / 1000),
                )

    def postgres_phase(self, phase: int) -> None:
        r = self.rng
        accounts = (
            "INSERT INTO public.accounts (id, name, balance, fee, rate, score, active, small, "
            "counter, opened, created, updated, wake, token, mood, tags, nums) VALUES ("
            + ", ".join(["%s"] * 17)
            + ")"
        )  # noqa: E501
        for _ in range(8):
            self.run(accounts, self.pg_account(self.new_id("accounts")))
        # multi-row transactions: updates of several rows, an insert and a delete
        ids = r.sample(range(1, self.next_id["accounts"] + 1), 6)
        self.transaction(
            [
                (
                    "UPDATE public.accounts SET balance = balance + %s, active = NOT active "
                    "WHERE id = %s",
                    (decimal.Decimal(r.randint(1, 999)) / 100, i),
                )
                for i in ids[:4]
            ]
            + [("DELETE FROM public.accounts WHERE id = %s", (ids[4],))]
            + [(accounts, self.pg_account(self.new_id("accounts")))]
        )
        self.run(
            "UPDATE public.accounts SET tags = %s, nums = NULL, rate = %s WHERE id = %s",
            (["x"], 0.5, ids[5]),
        )
        # a primary-key change of an account (no out-of-line values)
        old = ids[0]
        self.run(
            "UPDATE public.accounts SET id = %s WHERE id = %s",
            (self.new_id("accounts") + 1000, old),
        )
        # TOAST: an update that leaves the out-of-line body and blob unchanged (the
        # placeholder; a key change of such a row is test_real_source's own test)
        doc = r.randint(1, self.next_id["docs"])
        self.run(
            "UPDATE public.docs SET title = %s, labels = %s WHERE id = %s",
            (self.text(6), [self.text(3)], doc),
        )
        self.run(
            "INSERT INTO public.docs VALUES (%s, %s, %s, %s, %s, %s, %s)",
            self.pg_doc(self.new_id("docs")),
        )
        self.run(
            "UPDATE public.docs SET meta = %s, body = %s "
            "WHERE id = (SELECT max(id) FROM public.docs)",
            (json.dumps({"phase": phase}), self.text(30)),
        )
        self.run("UPDATE public.items SET qty = qty + 1 WHERE order_id = %s", (phase % 3 + 1,))
        if phase == 1:
            self.run("ALTER TABLE public.accounts ALTER COLUMN name TYPE varchar(200)")
            self.run("ALTER TABLE public.accounts ALTER COLUMN counter TYPE bigint")
            self.run(
                "UPDATE public.accounts SET name = %s, counter = %s WHERE id = %s",
                (self.text(150), 2**40, ids[5]),
            )
        if phase == 2:
            self.run("ALTER TABLE public.accounts ADD COLUMN added_note text")
            self.run("UPDATE public.accounts SET added_note = %s WHERE id = %s", ("noted", ids[5]))
            self.run(
                "INSERT INTO public.accounts (id, name, added_note) VALUES (%s, %s, %s)",
                (self.new_id("accounts"), "late", "with note"),
            )
            self.run("TRUNCATE public.items")
            self.run(
                "INSERT INTO public.items VALUES (%s, %s, %s, %s)",
                (9, 1, 1, decimal.Decimal("1.5")),
            )
        if phase == 3:
            self.run(
                "DELETE FROM public.accounts "
                "WHERE id IN (SELECT id FROM public.accounts ORDER BY id LIMIT 2)"
            )

    # -- MariaDB

    def mariadb_product(self, id_: int) -> tuple:
        """A products row (its ``TIME(6)`` with microseconds, in the snapshot's rows too)."""
        r = self.rng
        day = 86_400_000_000
        return (
            id_,
            self.text(r.randint(1, 20)),
            r.randint(0, 65535),
            r.choice([0, 2**63 - 1, 2**63, 2**64 - 1, r.randint(0, 2**64 - 1)]),
            decimal.Decimal(r.randint(-(10**9), 10**9)) / 100,
            r.uniform(-1e6, 1e6),
            # FLOAT values a float32 holds exactly (MariaDB prints FLOAT with 6 digits)
            r.choice([0.5, 1.25, -3.75, 1024.0, 0.0]),
            dt.datetime(2001, 1, 1) + dt.timedelta(microseconds=r.randint(0, 10**15)),
            dt.datetime(2001, 1, 1) + dt.timedelta(seconds=r.randint(0, 10**9)),
            dt.datetime(2001, 1, 1) + dt.timedelta(milliseconds=r.randint(0, 10**12)),
            dt.date(1990, 1, 1) + dt.timedelta(days=r.randint(0, 20000)),
            r.randint(1901, 2155),
            dt.timedelta(microseconds=r.randint(0, day - 1)),
            ",".join(sorted(r.sample(["a", "b", "c"], r.randint(0, 3)))),
            r.choice(["red", "green", "blue"]),
            r.getrandbits(10),
            r.getrandbits(1),
            self.text(r.randint(0, 40)),
            bytes(r.getrandbits(8) for _ in range(r.randint(0, 30))),
        )

    def mariadb_setup(self) -> None:
        for table in self.tables:
            self.run(table.create("`"))
        for _ in range(15):
            row = self.mariadb_product(self.new_id("products"))
            self.run(self._product_sql(), row)
        for order in range(1, 3):
            for line in range(1, 4):
                self.run("INSERT INTO shop.lines VALUES (%s, %s, %s)", (order, line, line))

    def _product_sql(self) -> str:
        names = [c.name for c in MARIADB[0].columns if not c.name.startswith("added")]
        columns = ", ".join(f"`{n}`" for n in names)  # `blob` is a reserved word
        return f"INSERT INTO shop.products ({columns}) VALUES ({', '.join(['%s'] * len(names))})"

    def mariadb_phase(self, phase: int) -> None:
        r = self.rng
        for _ in range(6):
            self.run(self._product_sql(), self.mariadb_product(self.new_id("products")))
        ids = r.sample(range(1, self.next_id["products"] + 1), 5)
        self.transaction(
            [
                (
                    "UPDATE shop.products SET price = price + 1, qty = %s WHERE id = %s",
                    (r.randint(0, 65535), i),
                )
                for i in ids[:3]
            ]
            + [("DELETE FROM shop.products WHERE id = %s", (ids[3],))]
        )
        self.run(
            "UPDATE shop.products SET id = %s WHERE id = %s",
            (self.new_id("products") + 1000, ids[4]),
        )
        self.run("UPDATE shop.lines SET qty = qty + 1 WHERE order_id = %s", (phase % 2 + 1,))
        if phase == 1:
            self.run("ALTER TABLE shop.products MODIFY sku varchar(64)")
            self.run("UPDATE shop.products SET sku = %s WHERE id = %s", (self.text(60), ids[0]))
        if phase == 2:
            self.run("ALTER TABLE shop.products ADD COLUMN added_level int")
            self.run("UPDATE shop.products SET added_level = 7 WHERE id = %s", (ids[0],))
            self.run("TRUNCATE shop.lines")
            self.run("INSERT INTO shop.lines VALUES (5, 1, 1)")

    def setup(self) -> None:
        (self.postgres_setup if self.kind == "postgres" else self.mariadb_setup)()

    def phase(self, n: int) -> None:
        (self.postgres_phase if self.kind == "postgres" else self.mariadb_phase)(n)

    def fence(self, value: int) -> None:
        """A row in the table ``fence``: when its change is in Kafka, so is everything
        committed before it."""
        if value == 0:
            self.run("CREATE TABLE fence (id int PRIMARY KEY)")
        self.run("INSERT INTO fence VALUES (%s)", (value,))


# --------------------------------------------------------------------------------------
# The sink: every table of one decoded micro-batch applied to its Delta table.


class SyncSink:
    """``foreachBatch``: the micro-batch (``decode_stream(..., tables=)["*"]``) applied
    table by table, each to ``<lake>/<schema__table>`` with ``apply_changes``, its
    ``truncate`` events included (``apply_changes`` deletes every row at a truncate's
    sequence). No ``app_id``: a micro-batch run again after a kill runs its MERGEs again,
    and the sequences keep the tables equal."""

    def __init__(
        self,
        lake: str | os.PathLike,
        tables: tuple[Table, ...],
        *,
        log: Path | None = None,
        pause_first: bool = False,
        pause: float = 0.0,
        on_stale: str = "warn",
    ) -> None:
        self.on_stale = on_stale
        self.lake = Path(lake)
        self.tables = tables
        self.log = log
        self.pause_first = pause_first
        self.pause = pause

    def target(self, table: Table) -> str:
        return str(self.lake / table.path)

    def __call__(self, batch: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        from cdc_decode import spark as cdc_spark

        batch = batch.persist()
        try:
            present = {
                r["table"]
                for r in batch.where(F.col("table").isNotNull())
                .select("table")
                .distinct()
                .collect()
            }
            for i, table in enumerate(self.tables):
                if table.name not in present:
                    continue
                frame = batch.where(F.col("table") == table.name).select(
                    "op",
                    "sequence",
                    "event_time",
                    "primary_key",
                    "ddl",
                    F.col(f"before_{i}").alias("before"),
                    F.col(f"after_{i}").alias("after"),
                    "after_absent",
                )
                cdc_spark.apply_changes(
                    frame, self.target(table), keys=list(table.keys), on_stale=self.on_stale
                )
        finally:
            batch.unpersist()
        if self.log is not None:
            self.log.mkdir(parents=True, exist_ok=True)
            if self.pause_first:  # the first micro-batch of this process, applied
                self.pause_first = False
                (self.log / f"{batch_id:06d}.applied").touch()
                time.sleep(self.pause)
            (self.log / f"{batch_id:06d}.done").touch()


def run_query(
    spark: Any,
    bootstrap: str,
    pattern: str,
    tables: tuple[Table, ...],
    *,
    checkpoint: str | os.PathLike,
    sink: SyncSink,
    max_offsets: int | None = None,
) -> None:
    """Every topic matching ``pattern`` from its first offset, decoded with ``tables=``,
    applied by ``sink``, until everything there now is done (``availableNow``)."""
    from cdc_decode import spark as cdc_spark

    decoded = cdc_spark.decode_stream(
        kafka_source(spark, bootstrap, pattern=pattern, max_offsets=max_offsets),
        "debezium-json",
        tables={t.name: t.ddl for t in tables},
        mode="failfast",
    )["*"]
    query = (
        decoded.writeStream.option("checkpointLocation", str(checkpoint))
        .foreachBatch(sink)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


# --------------------------------------------------------------------------------------
# The comparison.


def delta_rows(spark: Any, target: str) -> list[dict]:
    from cdc_decode import spark as cdc_spark

    return cdc_spark.current_rows(spark, target).toArrow().to_pylist()


def _short(value: Any) -> Any:
    """A value for an assertion message: long texts and bytes cut to their first 40."""
    if isinstance(value, str | bytes) and len(value) > 40:
        return f"{value[:40]!r}... ({len(value)})"
    return value


def assert_tables_equal(
    spark: Any, workload: Workload, sink: Any, delta: dict[str, Any] | None = None
) -> None:
    """Every Delta table equals ``SELECT *`` of its source table, row for row and value for
    value through :data:`COMPARE`; columns the source does not have (yet) are null.
    ``sink``: anything whose ``target(table)`` is the table's Delta path. ``delta``: how
    the Delta side of a :data:`COMPARE` kind reads where the tables' types differ from the
    declared ones (``sync``'s wire mapping)."""
    compare = {kind: (pair[0], (delta or {}).get(kind, pair[1])) for kind, pair in COMPARE.items()}
    for table in workload.tables:
        source = workload.select_all(table)
        lake = delta_rows(spark, sink.target(table))

        def keyed(rows: list[dict], side: int, table: Table = table) -> dict:
            out = {}
            for row in rows:
                values = {}
                for c in table.columns:
                    value = row.get(c.name)
                    values[c.name] = None if value is None else compare[c.compare][side](value)
                out[tuple(values[k] for k in table.keys)] = values
            return out

        want, got = keyed(source, 0), keyed(lake, 1)
        assert len(lake) == len(got), f"{table.name}: a key twice in Delta"
        missing = sorted(want.keys() - got.keys())[:5]
        extra = sorted(got.keys() - want.keys())[:5]
        assert not missing and not extra, f"{table.name}: keys missing {missing}, extra {extra}"
        for key, row in want.items():
            diff = {c: (_short(v), _short(got[key][c])) for c, v in row.items() if got[key][c] != v}
            assert not diff, f"{table.name} {key}: source vs Delta {diff}"


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Debezium topics -> decode_stream -> Delta")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--pattern", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--lake", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--max-offsets", type=int, default=None)
    parser.add_argument("--pause-first", action="store_true")
    parser.add_argument("--pause", type=float, default=0.0)
    args = parser.parse_args(argv)

    from support.delta import delta_session

    tables = POSTGRES + MARIADB
    # Code generation on, as users run it: the generated path of the rules (support.INTERPRETED).
    spark = delta_session(Path(args.warehouse), app="cdc-decode-real-source-job")
    sink = SyncSink(
        args.lake, tables, log=Path(args.log), pause_first=args.pause_first, pause=args.pause
    )
    run_query(
        spark,
        args.bootstrap,
        args.pattern,
        tables,
        checkpoint=args.checkpoint,
        sink=sink,
        max_offsets=args.max_offsets,
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
