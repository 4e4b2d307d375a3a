"""The TDSQL writer: a simulated source's records as TencentDB for MariaDB / TDSQL
subscription JSON, one message per binlog event, and the events they must decode to.

A transaction is a ``gtid`` event, one message per changed row (``event_index`` counts
the rows events of the transaction, ``sub_event_index`` the rows of one event), then an
``xid`` event; DDL is a ``gtid`` event then a ``query`` event (``event_index`` 2, as in the
vendor's sample; no ``xid``); the subscription's heartbeat is an empty
transaction on ``sysdb.statustableforhb``, as in the vendor's own samples. Checkpoints and
rolled-back transactions send nothing. Images are whole rows in column order: a minimal
image of the source is completed from this writer's copy of each table. The expected
events are rendered here from what this writer put in each field, following
docs/formats/tdsql-json.md, never by decoding.
"""

from __future__ import annotations

import base64
import json
import random
import struct

from .images import Tables
from .source import Column, Ddl, Heartbeat, MySQLSource, Transaction, Value, mysql_text

FORMAT = "tdsql-json"

_KEY = struct.Struct(">QQQ").pack
_NULL = "'##isnull##'"
_CODES = {"insert": (23, 30), "update": (24, 31), "delete": (25, 32)}
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}

_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "bigint")
_BARE = ("tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit", "float",
         "double", "decimal")  # fmt: skip


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded (binary columns: base64)."""
    if value is None:
        return None
    text = mysql_text(column, value)
    if isinstance(text, bytes):
        return base64.b64encode(text).decode("ascii")
    return text


def _quote(text: str, doubled: bool) -> str:
    out = "".join(_ESCAPES.get(c, c) for c in text)
    return "'" + out.replace("'", "''" if doubled else "\\'") + "'"


class TdsqlJsonWriter:
    """Turns a :class:`MySQLSource`'s records into TDSQL subscription messages and
    expected events.

    Args:
        source: the simulated server.
        seed: seeds the writer's own choices; odd seeds write MariaDB-style GTIDs.
    """

    format = FORMAT

    def __init__(self, source: MySQLSource, *, seed: int = 0) -> None:
        self.source = source
        self.rng = random.Random(f"tdsql-json/{seed}")
        self.mariadb = seed % 2 == 1
        self.tables = Tables()
        # TDSQL always has GTIDs (the source's anonymous transactions included): numbered
        # here, in log order, heartbeat transactions too.
        self.gtid_no = 0
        self.localport = 3306 + self.rng.randrange(10_000)

    def state(self) -> tuple[int, int]:
        return self.tables.mark(), self.gtid_no

    def restore(self, state: tuple[int, int]) -> None:
        mark, self.gtid_no = state
        self.tables.rewind(mark)

    def _commit_id(self, gtid: str) -> int:
        """A group-commit id: transactions committed together share one."""
        return 1000 + int(gtid.rpartition("-")[2]) // 3

    def _gtid(self) -> str:
        """The next transaction's GTID: MySQL ``uuid:N`` or MariaDB ``domain-server-N``."""
        self.gtid_no += 1
        if self.mariadb:
            return f"0-{self.source.server_id}-{self.gtid_no}"
        return f"{self.source.server_uuid}:{self.gtid_no}"

    # --- one message --------------------------------------------------------------------

    def _message(self, kind, db, table, seconds, gtid, index, *, sub=None, where=None,
                 field=None, sql=None, xid=None, file=None, offset=None):  # fmt: skip
        rng = self.rng
        if kind in _CODES:  # the v1 rows event codes (the seed's 23) or the v2 ones
            code = _CODES[kind][rng.random() < 0.7]
        else:
            code = {"gtid": 33, "xid": 16, "query": 2}[kind]
        doc: dict = {
            "logtype": "mysqlbinlog",
            "eventtype": code,
            "eventtypestr": kind,
            "db": db,
            "table": table,
            "localip": "10.0.12.7",
            "localport": self.localport,
            "begintime": seconds,
        }
        if gtid is not None:
            doc["gtid"] = gtid
        doc["event_index"] = str(index)
        if sub is not None:
            doc["sub_event_index"] = sub
        if kind in _CODES:
            doc["where"] = [] if where is None else [w for w, _ in where]
            doc["field"] = [] if field is None else [f for f, _ in field]
        if xid is not None:
            doc["xid"] = str(xid)
        if sql is not None:
            doc["sql"] = sql
        extra = []
        if rng.random() < 0.8:  # the keys real messages carry besides the documented ones
            extra = [("prefix", "tdsql"), ("filename", file), ("serverid", self.source.server_id),
                     ("orgoffset", offset)]  # fmt: skip
            if rng.random() < 0.5:
                extra.append(("sequence_num", rng.randrange(1 << 20)))
            if self.mariadb and gtid is not None:
                # MariaDB's GTID event flags and group-commit id, as text.
                extra += [("gtid_flag2", "1" if kind == "query" else "0"),
                          ("gtid_commitid", str(self._commit_id(gtid)))]  # fmt: skip
            doc.update(extra)
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.1, separators=(",", ":"))

        metadata = [("logtype", "mysqlbinlog"), ("eventtype", str(code)),
                    ("localip", "10.0.12.7"), ("localport", str(self.localport))]  # fmt: skip
        if xid is not None:
            metadata.append(("xid", str(xid)))
        metadata += [(k, str(v)) for k, v in extra]
        number = None if gtid is None else int(gtid.rpartition(":" if ":" in gtid else "-")[2])
        op = {"insert": "insert", "update": "update", "delete": "delete", "gtid": "begin",
              "xid": "commit", "query": "ddl"}[kind]  # fmt: skip
        row = [
            FORMAT, op, kind, db, None, table, seconds * 1_000_000, None, gtid,
            f"{file}:{offset}" if extra else None,
            None if gtid is None else _KEY(number, index, sub or 0),
            None if gtid is None else f"{gtid}:{index}" + ("" if sub is None else f":{sub}"),
            None,
            None if where is None else [(str(i), v) for i, (_, v) in enumerate(where)],
            None if field is None else [(str(i), v) for i, (_, v) in enumerate(field)],
            sql, metadata, None, None,
        ]  # fmt: skip
        return text.encode("utf-8"), row

    def _literal(self, column: Column, value: Value, doubled: bool) -> tuple[str, str | None]:
        """``(the literal as TDSQL writes it, its decoded text)``."""
        if value is None:
            return _NULL, None
        text = render(column, value)
        if column.type in _BARE:
            if column.type in _INTEGERS and value < 0 and self.rng.random() < 0.3:
                # The seed's `-50800 (18446744073709500816)`: a negative integer with its
                # 64-bit unsigned form.
                return f"{value} ({value + (1 << 64)})", text
            return text, text
        return _quote(text, doubled), text

    def _image(self, columns: tuple[Column, ...], row: dict | None) -> list | None:
        if row is None:
            return None
        doubled = self.rng.random() < 0.5
        # A column added after the row was last written (always the last ones) has no value
        # in the source: the array stops before it.
        return [self._literal(c, row[c.name], doubled) for c in columns if c.name in row]

    def _transaction(self, tx: Transaction) -> list[tuple[bytes, list]]:
        if tx.rolled_back:
            return []  # MySQL logs nothing of it
        gtid = self._gtid()
        first = tx.events[0] if tx.events else None
        db, table = (first.db, first.table) if first else ("sysdb", "statustableforhb")
        out = [self._message("gtid", db, table, tx.timestamp, gtid, 1, file=tx.file,
                             offset=tx.position)]  # fmt: skip
        index = 1
        for event in tx.events:
            index += 1
            offset = event.position
            for sub, image in enumerate(event.rows):
                before, after = self.tables.whole(event, image)
                out.append(
                    self._message(
                        event.kind,
                        event.db,
                        event.table,
                        tx.timestamp,
                        gtid,
                        index,
                        sub=sub if len(event.rows) > 1 or sub else None,
                        where=self._image(event.columns, before),
                        field=self._image(event.columns, after),
                        file=event.file,
                        offset=offset + 40 * sub,
                    )  # fmt: skip
                )
        out.append(self._message("xid", db, table, tx.timestamp, gtid, index + 1, xid=tx.xid,
                                 file=tx.file, offset=tx.commit_position))  # fmt: skip
        return out

    def heartbeat(self, seconds: int) -> tuple[bytes, list]:
        """The start of the subscription's heartbeat transaction (one message)."""
        return self._message("gtid", "sysdb", "statustableforhb", seconds, self._gtid(), 1,
                             file=self.source.file, offset=self.source.position)  # fmt: skip

    def messages(self, record) -> list[tuple[bytes, list]]:
        """``(value, expected event row)`` of each message one source record becomes."""
        if isinstance(record, Transaction):
            return self._transaction(record)
        if isinstance(record, Ddl):
            gtid = self._gtid()
            begin = self._message(
                "gtid", record.db, record.table, record.timestamp, gtid, 1,
                file=record.file, offset=record.position,
            )  # fmt: skip
            query = self._message(
                "query", record.db, record.table, record.timestamp, gtid, 2,
                sql=record.sql, file=record.file, offset=record.position + 65,
            )  # fmt: skip
            return [begin, query]
        if isinstance(record, Heartbeat):
            begin = self.heartbeat(record.timestamp)
            gtid = begin[1][8]
            end = self._message("xid", "sysdb", "statustableforhb", record.timestamp, gtid, 2,
                                xid=self.rng.randrange(1 << 30), file=self.source.file,
                                offset=self.source.position)  # fmt: skip
            return [begin, end]
        return []  # a Checkpoint: the subscription sends none
