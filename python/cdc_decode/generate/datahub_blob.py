"""The DataHub BLOB writer: a simulated source's records as DataWorks real-time sync JSON,
one message per change, and the events they must decode to.

A stream starts with full-sync rows (``sequenceId`` ``"-1"``, times ``-1``: the snapshot
DataWorks sends before the log), then the incremental log: ``TRANSACTION_BEGIN``, one
message per changed row, ``TRANSACTION_END``; updates as an ``UPDATE_BEFOR`` /
``UPDATE_BEFORE`` + ``UPDATE_AFTER`` pair or one ``UPDATE_AFTER`` with both images; DDL
(``ALTER``, ``CINDEX``, ``DINDEX``) with ``ddlMeta``; ``MHEARTBEAT``. Checkpoints and
rolled-back transactions send nothing. The expected events are rendered here from what
this writer put in each field, following docs/formats/datahub-blob.md, never by decoding.
"""

from __future__ import annotations

import base64
import calendar
import datetime as dt
import json
import random
import struct

from .source import Column, Ddl, Heartbeat, MySQLSource, Transaction, Value, mysql_text

FORMAT = "datahub-blob"
VERSION = "0.0.1"

_SIGN = 1 << 63


class Raw(str):
    """A JSON number token, written as is."""

    __slots__ = ()


# MySQL type family -> DataHub BLOB type.
_LONG = ("tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit")
_DATE = ("date", "datetime", "timestamp")
_BYTES = ("binary", "blob", "geometry")


def datahub_type(column: Column) -> str:
    """The DataHub type DataWorks declares in ``schema.dataColumn`` for a MySQL column."""
    kind = column.type
    if kind in _LONG:
        return "LONG"
    if kind in ("float", "double", "decimal"):
        return "DOUBLE"
    if kind in _DATE:
        return "DATE"
    if kind in _BYTES:
        return "BYTES"
    return "STRING"  # varchar char enum set json time


def _epoch_ms(column: Column, value) -> int:
    if column.type == "date":
        return calendar.timegm(value.timetuple()) * 1000
    if column.type == "timestamp":
        value = value.astimezone(dt.timezone.utc)
    # A DATETIME has no zone: DataWorks reads it as UTC here.
    return calendar.timegm(value.timetuple()) * 1000 + value.microsecond // 1000


def wire(column: Column, value: Value):
    """The JSON value DataWorks sends: numbers as tokens (:class:`Raw`), FLOAT as a string
    with six decimals (``"1.100000"``), DATE as epoch ms, BYTES as base64 text."""
    if value is None:
        return None
    kind = column.type
    if kind in _LONG:
        return Raw(str(value))
    if kind == "float":
        return f"{value:.6f}"
    if kind == "double":
        return Raw(repr(value))
    if kind == "decimal":
        return Raw(format(value, "f"))  # 12.50 stays 12.50
    if kind in _DATE:
        return Raw(str(_epoch_ms(column, value)))
    text = mysql_text(column, value)
    if isinstance(text, bytes):
        return base64.b64encode(text).decode("ascii")
    return text


def render(column: Column, value: Value) -> str | None:
    """The generic text of a value once decoded: the string's text or the number's token."""
    return wire(column, value)


# --- JSON out ---------------------------------------------------------------------------


def dump_json(value, escape) -> str:
    """Compact JSON of ``value`` (dicts, lists, strings, numbers, :class:`Raw` tokens), its
    strings written by ``escape`` (``json.encoder.encode_basestring`` or its ASCII twin)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is Raw:
        return value
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{escape(k)}:{dump_json(v, escape)}" for k, v in value.items()) + "}"
    if isinstance(value, int):
        return str(value)
    return "[" + ",".join(dump_json(v, escape) for v in value) + "]"


def _tokens(value):
    """A parsed JSON document with its numbers as :class:`Raw` tokens again."""
    if isinstance(value, dict):
        return {k: _tokens(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tokens(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    return Raw(json.dumps(value))


_META = 16  # the metadata slot in an event row


class DatahubBlobWriter:
    """Turns a :class:`MySQLSource`'s records into DataHub BLOB messages and expected events.

    Args:
        source: the simulated server.
        seed: seeds the writer's own choices (update shape, key order, escaping …).
        snapshot_records: at most this many leading insert-only transactions are sent as
            full-sync rows.
        unsigned_text: declare BIGINT UNSIGNED columns STRING and send their values as
            text (``generate(..., table_count=N)``): a DataHub LONG holds no value above
            2^63 - 1, which typed decoding with the wire's types would refuse.
    """

    format = FORMAT

    def __init__(
        self,
        source: MySQLSource,
        *,
        seed: int = 0,
        snapshot_records: int = 3,
        unsigned_text: bool = False,
    ) -> None:
        self.unsigned_text = unsigned_text
        self.source = source
        self.rng = random.Random(f"datahub-blob/{seed}")
        # Incremental ids as DataWorks makes them: epoch ms × 10^6 plus a counter.
        self.sequence_id = source.time_us // 1000 * 1_000_000
        self.snapshot_left = snapshot_records
        self._schema_cache: dict[tuple, dict] = {}

    def _as_text(self, column: Column) -> bool:
        """A BIGINT UNSIGNED sent as text (``unsigned_text``)."""
        return self.unsigned_text and column.type == "bigint" and column.unsigned

    def state(self) -> tuple:
        return self.sequence_id, self.snapshot_left

    def restore(self, state: tuple) -> None:
        self.sequence_id, self.snapshot_left = state

    # --- one message --------------------------------------------------------------------

    def _message(self, schema: dict, payload: dict, row: list) -> tuple[bytes, list]:
        rng = self.rng
        if rng.random() < 0.3:
            # As the Kafka output writes it (the fixtures): keys sorted.
            doc = {"payload": dict(sorted(payload.items())), "schema": schema, "version": VERSION}
        else:
            doc = {"schema": schema, "payload": payload, "version": VERSION}
        escape = (
            json.encoder.encode_basestring_ascii
            if rng.random() < 0.1
            else json.encoder.encode_basestring
        )
        return dump_json(doc, escape).encode("utf-8"), row

    def _next_id(self) -> int:
        self.sequence_id += 1
        return self.sequence_id

    def _timestamp(self, seconds: int, full_sync: bool = False) -> tuple[dict, int | None, int]:
        """``(payload.timestamp, event ms or None, system ms)``."""
        system = seconds * 1000 + self.rng.randint(200, 4000)
        if full_sync:
            return {"eventTime": -1, "systemTime": system, "checkpointTime": -1}, None, system
        event = seconds * 1000
        return {"eventTime": event, "systemTime": system, "checkpointTime": event}, event, system

    def _row(self, op, source_op, source, sequence_id, half, timestamps, **columns) -> list:
        _, event_ms, system_ms = timestamps
        meta = [("version", VERSION)]
        if source:
            meta.append(("dbType", source["dbType"]))
            if "dbVersion" in source:
                meta.append(("dbVersion", source["dbVersion"]))
        if event_ms is not None:
            meta.append(("checkpointTime", str(event_ms)))
        meta += columns.pop("extra_meta", [])
        if sequence_id is None:
            sequence = event_id = position = None
        else:
            sequence = struct.pack(">QQ", sequence_id + _SIGN, half)
            event_id = None if sequence_id == -1 else f"{sequence_id}:{half}"
            position = str(sequence_id) if sequence_id >= 0 else None
        return [
            FORMAT,
            op,
            source_op,
            source.get("dbName") if source else None,
            None,
            source.get("tableName") if source else None,
            None if event_ms is None else event_ms * 1000,
            None if system_ms is None else system_ms * 1000,
            None,
            position,
            sequence,
            event_id,
            columns.get("primary_key"),
            columns.get("before"),
            columns.get("after"),
            columns.get("ddl"),
            meta,
            None,
            None,
        ]

    def _source(self, db: str, table: str) -> dict:
        source = {"dbType": "MySQL", "dbName": db, "tableName": table}
        if self.rng.random() < 0.2:
            source["dbVersion"] = "8.0.32"
        return source

    def _image(self, columns: tuple[Column, ...], image: dict | None):
        """``(JSON dataColumn, expected map entries)``; ``(None, None)`` for no image."""
        if image is None:
            return None, None
        data, entries = {}, []
        nested = self.rng.random() < 0.3
        for column in columns:
            if column.name not in image:
                continue
            value = image[column.name]
            text = render(column, value)
            if column.type == "json" and value is not None and nested:
                # Sent as a nested object now and then: it renders back to the same text.
                data[column.name] = _tokens(json.loads(value))
            else:
                data[column.name] = (
                    str(value)
                    if value is not None and self._as_text(column)
                    else wire(column, value)
                )
            entries.append((column.name, text))
        return data, entries

    def _dml(self, event, image, full_sync: bool) -> list[tuple[bytes, list]]:
        rng = self.rng
        columns = event.columns
        key = (columns, event.primary_key)
        schema_base = self._schema_cache.get(key)
        if schema_base is None:
            schema_base = self._schema_cache[key] = {
                "dataColumn": [
                    {"name": c.name, "type": "STRING" if self._as_text(c) else datahub_type(c)}
                    for c in columns
                ],
                "primaryKey": list(event.primary_key),
            }
        source = self._source(event.db, event.table)
        schema = {**schema_base, "source": source}
        primary_key = list(event.primary_key) or None
        stamp = self._timestamp(event.timestamp, full_sync)
        before, before_entries = self._image(columns, image.before)
        after, after_entries = self._image(columns, image.after)

        def payload(op, sequence_id, before=None, after=None, explicit=False) -> dict:
            out = {"op": op}
            if before is not None or explicit:
                out["before"] = None if before is None else {"dataColumn": before}
            if after is not None or explicit:
                out["after"] = None if after is None else {"dataColumn": after}
            out["sequenceId"] = str(sequence_id)
            out["timestamp"] = stamp[0]
            if explicit:
                out["ddl"] = None
            return out

        explicit = rng.random() < 0.3  # "before": null, "ddl": null, as the fixtures have
        if full_sync:
            p = payload("INSERT", -1, after=after, explicit=explicit)
            row = self._row("read", "INSERT", source, -1, 1, stamp, primary_key=primary_key,
                            after=after_entries)  # fmt: skip
            return [self._message(schema, p, row)]
        sequence_id = self._next_id()
        if event.kind == "insert":
            p = payload("INSERT", sequence_id, after=after, explicit=explicit)
            row = self._row("insert", "INSERT", source, sequence_id, 1, stamp,
                            primary_key=primary_key, after=after_entries)  # fmt: skip
            return [self._message(schema, p, row)]
        if event.kind == "delete":
            p = payload("DELETE", sequence_id, before=before, explicit=explicit)
            row = self._row("delete", "DELETE", source, sequence_id, 1, stamp,
                            primary_key=primary_key, before=before_entries)  # fmt: skip
            return [self._message(schema, p, row)]
        # An update. A partial image (binlog_row_image=minimal) only fits the one-message
        # form: the pair's update_before would take the whole row away.
        partial = len(image.before) < len(columns)
        if partial or rng.random() < 0.4:
            p = payload("UPDATE_AFTER", sequence_id, before=before, after=after)
            row = self._row("update", "UPDATE_AFTER", source, sequence_id, 1, stamp,
                            primary_key=primary_key, before=before_entries,
                            after=after_entries)  # fmt: skip
            return [self._message(schema, p, row)]
        spelling = "UPDATE_BEFORE" if rng.random() < 0.5 else "UPDATE_BEFOR"
        first = self._message(
            schema,
            payload(spelling, sequence_id, before=before),
            self._row("update_before", spelling, source, sequence_id, 0, stamp,
                      primary_key=primary_key, before=before_entries),
        )  # fmt: skip
        second = self._message(
            {**schema, "source": source},
            payload("UPDATE_AFTER", sequence_id, after=after),
            self._row("update_after", "UPDATE_AFTER", source, sequence_id, 1, stamp,
                      primary_key=primary_key, after=after_entries),
        )  # fmt: skip
        return [first, second]

    def _control(self, op: str, kind: str, seconds: int, extra=None) -> tuple[bytes, list]:
        sequence_id = self._next_id()
        stamp = self._timestamp(seconds)
        payload = {"op": op, "sequenceId": str(sequence_id), "timestamp": stamp[0]}
        extra_meta = []
        if extra:
            payload.update(extra)
            extra_meta = list(extra.items())
        row = self._row(kind, op, None, sequence_id, 1, stamp, extra_meta=extra_meta)
        return self._message({}, payload, row)

    def _transaction(self, tx: Transaction) -> list[tuple[bytes, list]]:
        if tx.rolled_back:
            return []  # MySQL logs nothing of it
        full_sync = self.snapshot_left > 0 and bool(tx.events)
        full_sync = full_sync and all(e.kind == "insert" for e in tx.events)
        if full_sync:
            self.snapshot_left -= 1
            return [m for e in tx.events for image in e.rows for m in self._dml(e, image, True)]
        self.snapshot_left = 0
        extra = {"gtid": tx.gtid} if tx.gtid and self.rng.random() < 0.3 else None
        out = [self._control("TRANSACTION_BEGIN", "begin", tx.timestamp, extra)]
        for event in tx.events:
            for image in event.rows:
                out += self._dml(event, image, False)
        out.append(self._control("TRANSACTION_END", "commit", tx.timestamp))
        return out

    def _ddl(self, ddl: Ddl) -> tuple[bytes, list]:
        sql = ddl.sql
        op = (
            "ALTER"
            if sql.startswith("ALTER")
            else "CINDEX"
            if sql.startswith("CREATE")
            else "DINDEX"
        )
        source = self._source(ddl.db, ddl.table)
        sequence_id = self._next_id()
        stamp = self._timestamp(ddl.timestamp)
        # A stand-in for the Java-serialized FastSQL statement: only its shape matters.
        meta = base64.b64encode(b"\xac\xed\x00\x05sr\x00\x27" + sql.encode("utf-8")).decode()
        payload = {
            "op": op,
            "sequenceId": str(sequence_id),
            "ddl": {"text": sql, "ddlMeta": meta},
            "timestamp": stamp[0],
        }
        row = self._row("ddl", op, source, sequence_id, 1, stamp, ddl=sql,
                        extra_meta=[("ddlMeta", meta)])  # fmt: skip
        return self._message({"source": source}, payload, row)

    def heartbeat(self, seconds: int) -> tuple[bytes, list]:
        """An ``MHEARTBEAT``: no source, no ``sequenceId``, no ``systemTime``."""
        ms = seconds * 1000 + self.rng.randrange(1000)
        payload = {"op": "MHEARTBEAT", "timestamp": {"eventTime": ms, "checkpointTime": ms}}
        row = self._row("heartbeat", "MHEARTBEAT", None, None, 1, (None, ms, None))
        return self._message({}, payload, row)

    def messages(self, record) -> list[tuple[bytes, list]]:
        """``(value, expected event row)`` of each message one source record becomes."""
        if isinstance(record, Transaction):
            return self._transaction(record)
        if isinstance(record, Ddl):
            self.snapshot_left = 0
            return [self._ddl(record)]
        if isinstance(record, Heartbeat):
            self.snapshot_left = 0
            return [self.heartbeat(record.timestamp)]
        return []  # a Checkpoint: DataWorks sends none


def write_stream(source: MySQLSource, writer: DatahubBlobWriter, messages: int):
    """Run ``source`` through ``writer`` until exactly ``messages`` values.

    The last record that would overshoot is taken back (``source.undo_last``) and the
    stream is filled up with heartbeats, so the count is exact and the source's tables are
    what the written events say.

    Returns:
        ``(values, event rows)``.
    """
    values: list[bytes] = []
    rows: list[list] = []
    while len(values) < messages:
        record = source.next_record()
        saved = writer.state()
        out = writer.messages(record)
        if len(values) + len(out) > messages:
            source.undo_last()
            writer.restore(saved)
            break
        for value, row in out:
            values.append(value)
            rows.append(row)
    source.undo_pending()  # a change drawn ahead of the last record sent was not written
    while len(values) < messages:
        value, row = writer.heartbeat(source.now)
        values.append(value)
        rows.append(row)
    return values, rows
