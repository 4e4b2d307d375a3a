"""The Tencent DTS writer: a simulated source's records as DTS Kafka values, and the events
they must decode to.

Each binlog record becomes ``Entry`` messages (BEGIN, one DML entry per rows event,
COMMIT; DDL; HEARTBEAT; CHECKPOINT), consecutive entries are packed into an ``Entries`` up
to a row and byte budget, and an ``Entries`` larger than ``max_message_bytes`` is split over
several ``Envelope`` parts, as DTS does. The expected events are rendered here from what
this writer put in each field, following docs/formats/tencent-dts.md, never by decoding.
"""

from __future__ import annotations

import base64
import random
import struct
from dataclasses import dataclass, field

from .. import _proto as pb
from .source import Checkpoint, Column, Ddl, Heartbeat, MySQLSource, Transaction, Value, mysql_text

FORMAT = "tencent-dts"


def _number(enum, name: str) -> int:
    return enum.values_by_name[name].number


# MySQL type family → DTS DataType, signed and unsigned (the vendor's mapping table).
_INT_TYPES = {
    "tinyint": (_number(pb.DataType, "INT8"), _number(pb.DataType, "UINT8")),
    "smallint": (_number(pb.DataType, "INT16"), _number(pb.DataType, "UINT16")),
    "mediumint": (_number(pb.DataType, "INT32"), _number(pb.DataType, "UINT32")),
    "int": (_number(pb.DataType, "INT32"), _number(pb.DataType, "UINT32")),
    "bigint": (_number(pb.DataType, "INT64"), _number(pb.DataType, "UINT64")),
}
_NIL = _number(pb.DataType, "NIL")
_NA = _number(pb.DataType, "NA")
_STRING = _number(pb.DataType, "STRING")
_BYTES = _number(pb.DataType, "BYTES")
_NUMBER_TYPES = {
    "bit": _number(pb.DataType, "INT64"),
    "year": _number(pb.DataType, "INT64"),
    "float": _number(pb.DataType, "FLOAT32"),
    "double": _number(pb.DataType, "FLOAT64"),
    "decimal": _number(pb.DataType, "DECIMAL"),
}
_TEXT_TYPES = ("varchar", "char", "enum", "set", "date", "time", "datetime", "timestamp")
_BYTES_TYPES = ("json", "blob", "geometry")

# MySQL charset → Python codec for the bytes in ``bv``. MySQL's latin1 is windows-1252.
_CODECS = {
    "utf8mb4": "utf-8",
    "utf8": "utf-8",
    "": "utf-8",
    "gbk": "gbk",
    "latin1": "cp1252",
    "ascii": "ascii",
}

# The event messages _proto does not name.
_BeginEvent = pb._message("BeginEvent")
_CommitEvent = pb._message("CommitEvent")
_DDLEvent = pb._message("DDLEvent")
_RollbackEvent = pb._message("RollbackEvent")
_HeartbeatEvent = pb._message("HeartbeatEvent")
_CheckpointEvent = pb._message("CheckpointEvent")

_SOURCE_TYPE = _number(pb.SourceType, "MYSQL")


def _MT(name: str) -> int:
    return _number(pb.MessageType, name)


_DML = {
    "insert": _number(pb.DMLType, "INSERT"),
    "update": _number(pb.DMLType, "UPDATE"),
    "delete": _number(pb.DMLType, "DELETE"),
}


def data_type(column: Column) -> int:
    """The ``DataType`` DTS sends for a column, by the vendor's MySQL mapping."""
    if column.type in _INT_TYPES:
        return _INT_TYPES[column.type][column.unsigned]
    if column.type in _NUMBER_TYPES:
        return _NUMBER_TYPES[column.type]
    if column.type in _TEXT_TYPES or column.type == "binary":
        return _STRING  # binary(n) is MYSQL_TYPE_STRING with the binary charset
    if column.type in _BYTES_TYPES:
        return _BYTES
    raise ValueError(f"no DTS DataType for column type {column.type!r}")


def charset(column: Column) -> str:
    """The ``charset`` of a STRING column; temporal values are sent with none."""
    return column.charset or ""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded: ``sv`` as sent, text as ``str``, bytes
    (BYTES, and STRING in the ``binary`` charset) as padded base64, NULL as ``None``."""
    text = mysql_text(column, value)
    if text is None or isinstance(text, str) and column.type not in ("json",):
        return text
    if isinstance(text, str):
        text = text.encode("utf-8")
    return _b64(text)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


@dataclass
class _Entry:
    """One serialized ``Entry`` (framed as an ``Entries.items`` field) and its events.

    Each event is a list in event-schema column order whose ``metadata`` slot holds
    ``(header and event keys, properties after the Envelope's)``: the Envelope's properties
    are only known once the entry lands in a message.
    """

    framed: bytes
    events: list[list]
    checkpoint: bool = False


_META = 16  # the metadata slot in an event row


@dataclass
class _Packer:
    """Consecutive entries → groups for one ``Entries`` each."""

    rows_per_message: int
    message_bytes: int
    pending: list[_Entry] = field(default_factory=list)
    nbytes: int = 0
    nevents: int = 0

    def copy(self) -> _Packer:
        return _Packer(
            self.rows_per_message, self.message_bytes, list(self.pending), self.nbytes, self.nevents
        )

    def add(self, entry: _Entry) -> list[list[_Entry]]:
        done = []
        # A consumer commits offsets after a message that starts with a checkpoint.
        if self.pending and (
            entry.checkpoint
            or self.nevents + len(entry.events) > self.rows_per_message
            or self.nbytes + len(entry.framed) > self.message_bytes
        ):
            done.append(self.flush())
        self.pending.append(entry)
        self.nbytes += len(entry.framed)
        self.nevents += len(entry.events)
        return done

    def flush(self) -> list[_Entry]:
        group, self.pending, self.nbytes, self.nevents = self.pending, [], 0, 0
        return group


class TencentDtsWriter:
    """Turns a :class:`MySQLSource`'s records into DTS messages and expected events.

    Args:
        source: the simulated server (for its server id).
        seed: seeds the writer's own choices (properties, encodings of NULL …).
        rows_per_message: at most this many events per ``Entries`` (a single larger entry
            gets its own message).
        message_bytes: at most this many bytes of ``Entries`` per message, same rule.
        max_message_bytes: an ``Envelope`` never exceeds this; a larger ``Entries`` is split
            over ``total`` parts.
    """

    format = FORMAT

    def __init__(
        self,
        source: MySQLSource,
        *,
        seed: int = 0,
        rows_per_message: int = 10,
        message_bytes: int = 3072,
        max_message_bytes: int = 64 * 1024,
    ) -> None:
        if max_message_bytes < 256:
            raise ValueError("max_message_bytes must be at least 256")
        if rows_per_message < 1:
            raise ValueError("rows_per_message must be at least 1")
        self.source = source
        self.rng = random.Random(f"tencent-dts/{seed}")
        self.rows_per_message = rows_per_message
        self.message_bytes = message_bytes
        self.max_message_bytes = max_message_bytes
        self.seq_id = 1_000_000
        self._plan_cache: dict[tuple[Column, ...], list[tuple]] = {}
        self._columns_cache: dict[tuple[Column, ...], tuple[list, list[str] | None]] = {}

    # --- entries ------------------------------------------------------------------------

    def entries(self, record) -> list[_Entry]:
        """The entries of one source record, with fresh ``seqId``s."""
        if isinstance(record, Transaction):
            return self._transaction(record)
        if isinstance(record, Ddl):
            return [self._ddl(record)]
        if isinstance(record, Heartbeat):
            return [self.heartbeat(record.timestamp)]
        if isinstance(record, Checkpoint):
            return [self._checkpoint(record)]
        raise TypeError(f"unknown record {record!r}")

    def _header(self, message_type: str, timestamp: int, **fields) -> tuple[object, list]:
        self.seq_id += 1
        header = pb.Header(
            version=1,
            sourceType=_SOURCE_TYPE,
            messageType=_MT(message_type),
            timestamp=timestamp,
            serverId=self.source.server_id,
            seqId=self.seq_id,
            **fields,
        )
        meta = [
            ("version", "1"),
            ("sourceType", "MYSQL"),
            ("serverId", str(self.source.server_id)),
            ("seqId", str(self.seq_id)),
        ]
        return header, meta

    def _header_properties(self, header) -> list[tuple[str, str]]:
        if self.rng.random() < 0.03:
            props = [("trace_id", f"{self.rng.getrandbits(64):016x}")]
            header.properties.add(key=props[0][0], value=props[0][1])
            return props
        return []

    def _finish(self, header, event, events: list[list], checkpoint: bool = False) -> _Entry:
        data = pb.Entry(header=header, event=event).SerializeToString()
        return _Entry(b"\x0a" + _varint(len(data)) + data, events, checkpoint)

    def _event_row(
        self,
        op,
        source_op,
        header,
        db=None,
        table=None,
        tx_id=None,
        row=0,
        primary_key=None,
        before=None,
        after=None,
        ddl=None,
        meta=None,
    ) -> list:
        seq = header.seqId
        position = (
            f"{header.fileName}:{header.position}"
            if header.fileName
            else (str(header.position) if header.position else None)
        )
        return [
            FORMAT,
            op,
            source_op,
            db,
            None,
            table,
            header.timestamp * 1_000_000 if header.timestamp else None,
            None,
            tx_id,
            position,
            struct.pack(">QQ", seq, row),
            f"{seq}:{row}",
            primary_key,
            before,
            after,
            ddl,
            meta,
            None,
            None,
        ]

    def _transaction(self, tx: Transaction) -> list[_Entry]:
        gtid = tx.gtid or ""
        xid = str(tx.xid)
        out = []
        header, meta = self._header(
            "BEGIN", tx.timestamp, fileName=tx.file, position=tx.position, gtid=gtid
        )
        meta += [("transactionId", xid), ("threadId", str(tx.thread_id))]
        meta = (meta, self._header_properties(header))
        event = pb.Event(beginEvent=_BeginEvent(transactionId=xid, threadId=tx.thread_id))
        row = self._event_row("begin", "BEGIN", header, tx_id=gtid or xid, meta=meta)
        out.append(self._finish(header, event, [row]))
        for rows_event in tx.events:
            out.append(self._dml(rows_event, gtid))
        if tx.rolled_back:
            header, meta = self._header(
                "ROLLBACK", tx.timestamp, fileName=tx.file, position=tx.commit_position, gtid=gtid
            )
            event = pb.Event(rollbackEvent=_RollbackEvent())
            meta = (meta, self._header_properties(header))
            row = self._event_row("rollback", "ROLLBACK", header, tx_id=gtid or None, meta=meta)
        else:
            header, meta = self._header(
                "COMMIT", tx.timestamp, fileName=tx.file, position=tx.commit_position, gtid=gtid
            )
            meta.append(("transactionId", xid))
            event = pb.Event(commitEvent=_CommitEvent(transactionId=xid))
            meta = (meta, self._header_properties(header))
            row = self._event_row("commit", "COMMIT", header, tx_id=gtid or xid, meta=meta)
        out.append(self._finish(header, event, [row]))
        return out

    def _columns(self, columns: tuple[Column, ...], primary_key: tuple[str, ...]):
        cached = self._columns_cache.get(columns)
        if cached is None:
            messages = [
                pb.Column(name=c.name, originalType=c.sql, isKey=c.name in primary_key)
                for c in columns
            ]
            names = [c.name for c in columns if c.name in primary_key] or None
            cached = self._columns_cache[columns] = (messages, names)
        return cached

    def _plan(self, columns: tuple[Column, ...]) -> list[tuple]:
        """Per column: ``(column, name, DataType, mode, charset, codec)``, computed once."""
        plan = self._plan_cache.get(columns)
        if plan is None:
            plan = []
            for column in columns:
                kind = data_type(column)
                cs = charset(column) if kind == _STRING else ""
                if kind == _STRING:
                    mode = "binary" if cs == "binary" else "text"
                else:
                    mode = "bytes" if kind == _BYTES else "number"
                plan.append((column, column.name, kind, mode, cs, _CODECS.get(cs)))
            self._plan_cache[columns] = plan
        return plan

    def _image(self, columns: tuple[Column, ...], image: dict | None) -> tuple[list, list | None]:
        """``(Data messages, expected map entries)`` of one row image."""
        if image is None:
            return [], None
        data, entries = [], []
        Data, rng = pb.Data, self.rng
        for column, name, kind, mode, cs, codec in self._plan(columns):
            if name not in image:
                data.append(Data(dataType=_NA))
                continue
            value = image[name]
            if value is None:
                if mode == "number" and rng.random() < 0.05:
                    data.append(Data(dataType=kind))  # an empty sv: NULL, as DTS's reader says
                else:
                    data.append(Data(dataType=_NIL))
                entries.append((name, None))
                continue
            text = mysql_text(column, value)
            if mode == "number":
                data.append(Data(dataType=kind, sv=text))
                entries.append((name, text))
            elif mode == "text":
                data.append(Data(dataType=kind, charset=cs, bv=text.encode(codec)))
                entries.append((name, text))
            else:
                raw = text.encode("utf-8") if isinstance(text, str) else text
                if mode == "binary":
                    data.append(Data(dataType=kind, charset=cs, bv=raw))
                else:
                    data.append(Data(dataType=kind, bv=raw))
                entries.append((name, _b64(raw)))
        return data, entries

    def _dml(self, rows_event, gtid: str) -> _Entry:
        header, meta = self._header(
            "DML",
            rows_event.timestamp,
            fileName=rows_event.file,
            position=rows_event.position,
            gtid=gtid,
            schemaName=rows_event.db,
            tableName=rows_event.table,
        )
        header_props = self._header_properties(header)
        column_messages, key_names = self._columns(rows_event.columns, rows_event.primary_key)
        event_props = []
        if self.rng.random() < 0.05:
            event_props = [("sql_mode", "STRICT_TRANS_TABLES")]
            dml_props = [pb.KVPair(key=k, value=v) for k, v in event_props]
        else:
            dml_props = []
        rows, events = [], []
        for i, image in enumerate(rows_event.rows):
            old, before = self._image(rows_event.columns, image.before)
            new, after = self._image(rows_event.columns, image.after)
            row_props = []
            if self.rng.random() < 0.02:
                # A repeated key: the metadata keeps the first (the header's) value.
                row_props = [("row_tag", f"r{i}")] + ([("trace_id", "row")] if header_props else [])
            rows.append(
                pb.RowChange(
                    oldColumns=old,
                    newColumns=new,
                    properties=[pb.KVPair(key=k, value=v) for k, v in row_props],
                )
            )
            events.append(
                self._event_row(
                    rows_event.kind,
                    rows_event.kind.upper(),
                    header,
                    rows_event.db,
                    rows_event.table,
                    gtid or None,
                    i,
                    key_names,
                    before,
                    after,
                    meta=(meta, header_props + event_props + row_props),
                )
            )
        event = pb.Event(
            dmlEvent=pb.DMLEvent(
                dmlEventType=_DML[rows_event.kind], columns=column_messages, rows=rows
            ),
            properties=dml_props,
        )
        return self._finish(header, event, events)

    def _ddl(self, ddl: Ddl) -> _Entry:
        # Now and then the header leaves the database out; the DDL event names it.
        header_db = "" if self.rng.random() < 0.25 else ddl.db
        header, meta = self._header(
            "DDL",
            ddl.timestamp,
            fileName=ddl.file,
            position=ddl.position,
            gtid=ddl.gtid or "",
            schemaName=header_db,
            tableName=ddl.table,
        )
        if ddl.execution_time:
            meta.append(("executionTime", str(ddl.execution_time)))
        event = pb.Event(
            ddlEvent=_DDLEvent(schemaName=ddl.db, sql=ddl.sql, executionTime=ddl.execution_time)
        )
        meta = (meta, self._header_properties(header))
        row = self._event_row(
            "ddl", "DDL", header, ddl.db, ddl.table, ddl.gtid, ddl=ddl.sql, meta=meta
        )
        return self._finish(header, event, [row])

    def heartbeat(self, timestamp: int) -> _Entry:
        """A HEARTBEAT entry (no log position, no database)."""
        header, meta = self._header("HEARTBEAT", timestamp)
        meta.append(("epoch", str(timestamp)))
        event = pb.Event(heartbeatEvent=_HeartbeatEvent(epoch=timestamp))
        row = self._event_row("heartbeat", "HEARTBEAT", header, meta=(meta, []))
        return self._finish(header, event, [row])

    def _checkpoint(self, cp: Checkpoint) -> _Entry:
        header, meta = self._header(
            "CHECKPOINT", cp.timestamp, fileName=cp.file, position=cp.position
        )
        if cp.gtid_set:
            meta.append(("syncedGtid", cp.gtid_set))
        meta += [("fileName", cp.file), ("position", str(cp.position))]
        event = pb.Event(
            checkpointEvent=_CheckpointEvent(
                syncedGtid=cp.gtid_set, fakeGtid=False, fileName=cp.file, position=cp.position
            )
        )
        row = self._event_row("checkpoint", "CHECKPOINT", header, meta=(meta, []))
        return self._finish(header, event, [row], checkpoint=True)

    # --- messages -----------------------------------------------------------------------

    @property
    def _chunk(self) -> int:
        # Room for the Envelope's other fields and a small properties list.
        return self.max_message_bytes - 96

    def envelopes_for(self, group: list[_Entry]) -> int:
        """How many Kafka values a group of entries becomes."""
        size = sum(len(e.framed) for e in group)
        return 1 if size <= self._chunk else -(-size // self._chunk)

    def message(self, group: list[_Entry]) -> tuple[list[bytes], list[list]]:
        """``(Kafka values, expected event rows)`` of one ``Entries``."""
        data = b"".join(e.framed for e in group)
        props = []
        if self.rng.random() < 0.02:
            props = [("producer", "dts-sim"), ("seqId", "shadowed")]  # "seqId": the header's wins
        kv = [pb.KVPair(key=k, value=v) for k, v in props]
        if len(data) <= self._chunk:
            values = [
                pb.Envelope(
                    version=1, total=1, index=0, data=data, properties=kv
                ).SerializeToString()
            ]
        else:
            parts = [data[i : i + self._chunk] for i in range(0, len(data), self._chunk)]
            values = [
                pb.Envelope(
                    version=1, total=len(parts), index=i, data=part, properties=kv
                ).SerializeToString()
                for i, part in enumerate(parts)
            ]
        rows = []
        for entry in group:
            for event in entry.events:
                own, later = event[_META]
                metadata, seen = [], set()
                for key, value in (*own, *props, *later):
                    if key not in seen:
                        seen.add(key)
                        metadata.append((key, value))
                row = list(event)
                row[_META] = metadata
                rows.append(row)
        return values, rows


def write_stream(source: MySQLSource, writer: TencentDtsWriter, messages: int):
    """Run ``source`` through ``writer`` until exactly ``messages`` Kafka values.

    The last record that would overshoot is taken back (``source.undo_last``) and the
    stream is filled up with heartbeat messages, so the count is exact and the source's
    tables are what the written events say.

    Returns:
        ``(values, event rows)``.
    """
    values: list[bytes] = []
    rows: list[list] = []
    packer = _Packer(writer.rows_per_message, writer.message_bytes)
    while len(values) < messages:
        record = source.next_record()
        seq_id = writer.seq_id
        trial = packer.copy()
        out = [writer.message(g) for e in writer.entries(record) for g in trial.add(e)]
        needed = len(values) + sum(len(v) for v, _ in out)
        if trial.pending:
            needed += writer.envelopes_for(trial.pending)
        if needed > messages:
            source.undo_last()
            writer.seq_id = seq_id
            break
        for v, r in out:
            values += v
            rows += r
        packer = trial
    source.undo_pending()  # a change drawn ahead of the last record sent was not written
    if packer.pending:
        v, r = writer.message(packer.flush())
        values += v
        rows += r
    while len(values) < messages:
        v, r = writer.message([writer.heartbeat(source.now)])
        values += v
        rows += r
    return values, rows
