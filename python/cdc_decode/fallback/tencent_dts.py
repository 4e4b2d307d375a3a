"""The ``tencent-dts`` format: Tencent Cloud DTS data subscription, Kafka edition, ProtoBuf.

Every rule here is written down in docs/formats/tencent-dts.md, which the Rust core
follows too: Envelopes and multi-part sets, one event per entry or DML row, row images,
charsets, and the order of the ``metadata`` keys.
"""

from __future__ import annotations

import codecs
import re
import struct
from collections.abc import Callable
from functools import partial

from google.protobuf.message import DecodeError as ProtoError

from .. import _proto
from .._limits import DEFAULT, Limits
from .._values import base64_text
from . import _schemas
from ._events import EventSink, Malformed, report_all
from ._typed import Hints, Unconvertible

FORMAT = "tencent-dts"

_SEQUENCE = struct.Struct(">QQ").pack

# Header.messageType
_BEGIN, _COMMIT, _DML, _DDL, _ROLLBACK, _HEARTBEAT, _CHECKPOINT = range(7)
_MESSAGE_OPS = {
    _BEGIN: "begin",
    _COMMIT: "commit",
    _DDL: "ddl",
    _ROLLBACK: "rollback",
    _HEARTBEAT: "heartbeat",
    _CHECKPOINT: "checkpoint",
}
_DML_OPS = {0: "insert", 1: "update", 2: "delete"}


def _names(enum) -> dict[int, str]:
    return {number: value.name for number, value in enum.values_by_number.items()}


_MESSAGE_NAMES = _names(_proto.MessageType)
_DML_NAMES = _names(_proto.DMLType)
_SOURCE_NAMES = _names(_proto.SourceType)

# Data.dataType
_NIL, _BYTES, _STRING, _NA = 0, 11, 13, 14
_TEXT_TYPES = frozenset(range(1, 11)) | {12}  # INT8 … FLOAT64, DECIMAL: `sv` as sent


# ---------------------------------------------------------------------------------------
# ProtoBuf


def _parse(cls, data: bytes, what: str):
    """Decodes ``data`` as message ``cls`` with the protobuf runtime (upb).

    Unknown fields are skipped, and so is a known field sent with another wire type, as
    upb does; the Rust core's wire reader follows the same rules.
    """
    try:
        return cls.FromString(data)
    except ProtoError as exc:
        # upb says "Error parsing message with type 'subscribe.X': <what is wrong>".
        reason = str(exc).rpartition("': ")[2] or str(exc)
        raise Malformed(f"invalid {what}: {reason}") from None


def _pairs(properties) -> list[tuple[str, str]]:
    return [(p.key, p.value) for p in properties]


# ---------------------------------------------------------------------------------------
# Charsets


def _windows_1252_table() -> str:
    # MySQL's latin1 is windows-1252 with the five undefined bytes passed through (WHATWG).
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(byte))
    return "".join(chars)


_WINDOWS_1252 = _windows_1252_table()


def _latin1(data: bytes) -> str:
    return codecs.charmap_decode(data, "strict", _WINDOWS_1252)[0]


# GB18030 as the WHATWG Encoding Standard decodes it (GB18030-2022, what encoding_rs and so
# the Rust core do). Python's codec follows GB18030-2005: it rejects a lone 0x80 (WHATWG: €)
# and differs on these code points, which map one to one back to their byte sequences.
_GB18030_2022 = str.maketrans(
    {
        "\ue5e5": "\u3000",  # A3A0
        "\ue78d": "\ufe10",  # A6D9
        "\ue78e": "\ufe12",  # A6DA
        "\ue78f": "\ufe11",  # A6DB
        "\ue790": "\ufe13",  # A6DC
        "\ue791": "\ufe14",  # A6DD
        "\ue792": "\ufe15",  # A6DE
        "\ue793": "\ufe16",  # A6DF
        "\ue794": "\ufe17",  # A6EC
        "\ue795": "\ufe18",  # A6ED
        "\ue796": "\ufe19",  # A6F3
        "\ue7c7": "\u1e3f",  # A8BC
        "\ue81e": "\u9fb4",  # FE59
        "\ue826": "\u9fb5",  # FE61
        "\ue82b": "\u9fb6",  # FE66
        "\ue82c": "\u9fb7",  # FE67
        "\ue832": "\u9fb8",  # FE6D
        "\ue843": "\u9fb9",  # FE7E
        "\ue854": "\u9fba",  # FE90
        "\ue864": "\u9fbb",  # FEA0
        "\u1e3f": "\ue7c7",  # 8135F437
    }
)
_GB18030_CHANGED = re.compile("[" + "".join(chr(c) for c in _GB18030_2022) + "]")


def _gb18030_euro(error: UnicodeError) -> tuple[str, int]:
    if isinstance(error, UnicodeDecodeError) and error.object[error.start] == 0x80:
        return "\u20ac", error.start + 1
    raise error


codecs.register_error("cdc_decode.gb18030", _gb18030_euro)


def _gb18030(data: bytes) -> str:
    text = data.decode("gb18030", "cdc_decode.gb18030")
    if not text.isascii() and _GB18030_CHANGED.search(text):
        text = text.translate(_GB18030_2022)
    return text


# Plain C callables where possible: this runs once per STRING value.
_utf8 = bytes.decode  # UTF-8, strict
_ascii = partial(bytes.decode, encoding="ascii")

_CHARSETS: dict[str, Callable[[bytes], str]] = {
    **dict.fromkeys(("", "utf8", "utf8mb3", "utf8mb4", "utf-8"), _utf8),
    **dict.fromkeys(("latin1", "cp1252"), _latin1),
    **dict.fromkeys(("gbk", "gb2312", "gb18030", "cp936"), _gb18030),
    **dict.fromkeys(("ascii", "us-ascii"), _ascii),
    "binary": base64_text,
}
# The charsets as sent (any letter case) -> decoder; only known ones are cached.
_charset_cache: dict[str, Callable[[bytes], str]] = dict(_CHARSETS)


def _charset_decoder(charset: str, column: str) -> Callable[[bytes], str]:
    decoder = _charset_cache.get(charset)
    if decoder is None:
        # ASCII case folding only, as the Rust core's eq_ignore_ascii_case.
        decoder = _CHARSETS.get(charset.lower()) if charset.isascii() else None
        if decoder is None:
            raise Malformed(f"unsupported charset {charset!r} for column {column!r}")
        _charset_cache[charset] = decoder
    return decoder


# ---------------------------------------------------------------------------------------
# Events


def _image(values, names: list[str], row: int, which: str) -> list[tuple[str, str | None]]:
    """One row image (``oldColumns`` or ``newColumns``) as map entries."""
    if len(values) > len(names):
        raise Malformed(f"row {row} has {len(values)} {which} values for {len(names)} columns")
    entries = []
    append = entries.append
    # Fewer values than columns leave the last columns out.
    for name, data in zip(names, values, strict=False):
        data_type = data.dataType
        if data_type == _STRING:
            charset = data.charset
            decode = _charset_cache.get(charset) or _charset_decoder(charset, name)
            try:
                append((name, decode(data.bv)))
            except UnicodeDecodeError:
                raise Malformed(f"invalid {charset or 'utf8'} text in column {name!r}") from None
        elif data_type in _TEXT_TYPES:
            append((name, data.sv or None))
        elif data_type == _NA:
            continue
        elif data_type == _NIL:
            append((name, None))
        elif data_type == _BYTES:
            append((name, base64_text(data.bv)))
        else:
            raise Malformed(f"unknown DataType {data_type} for column {name!r}")
    return entries


def _add(metadata: dict[str, str], pairs) -> None:
    """Adds KVPairs to ``metadata``; a key already there keeps its value."""
    for pair in pairs:
        key = pair.key
        if key not in metadata:
            metadata[key] = pair.value


_DIALECTS = {_proto.SourceType.values_by_name["PGSQL"].number: "postgresql",
             _proto.SourceType.values_by_name["ORACLE"].number: "oracle"}  # fmt: skip


def _wire_schema(source_type: int, columns) -> tuple:
    """The schema pass: a DML entry's columns (``originalType``, ``isKey``) as a wire
    schema, in the dialect of the header's ``sourceType`` (``rust/formats/tencent_dts``)."""
    key = [c.name for c in columns if c.isKey] or None
    dialect = _DIALECTS.get(source_type, "mysql")
    return _schemas.typed(dialect, [(c.name, c.originalType) for c in columns], key)


def _json_hints(names: list[str], json_columns: frozenset, *images) -> Hints | None:
    """Typed mode: MySQL ``json`` values sent as BYTES (base64 text) of one row are text
    for a string column (``rust/formats/tencent_dts/events.rs``)."""
    columns = {
        name: "base64-text"
        for values in images
        for name, data in zip(names, values, strict=False)
        if data.dataType == _BYTES and name in json_columns
    }
    return Hints(columns=columns) if columns else None


def _is_json(original_type: str) -> bool:
    head = original_type[:4]
    return head.isascii() and head.lower() == "json"


def _entry_rows(
    entry,
    envelope_properties,
    rows: list[tuple],
    limits: Limits,
    schemas: list | None = None,
    hints: list | None = None,
) -> None:
    """Appends the events of one ``Entry`` to ``rows`` (in the schema pass, each one's wire
    schema to ``schemas``; in typed mode, each one's hints to ``hints``)."""
    header = entry.header
    event = entry.event
    for count, noun in (
        (len(event.dmlEvent.rows), "rows"),
        (len(event.dmlEvent.columns), "columns"),
    ):
        if count > limits.max_items:
            raise Malformed(limits.over("max_items", f"DMLEvent has {count:,} {noun}"))
    message_type = header.messageType
    seq_id = header.seqId
    source_db = header.schemaName or None
    timestamp = header.timestamp
    event_time = timestamp * 1_000_000 if timestamp else None
    tx_id = header.gtid or None
    file_name = header.fileName
    log_position = header.position
    if file_name:
        position = f"{file_name}:{log_position}"
    else:
        position = str(log_position) if log_position else None
    ddl = None

    metadata: dict[str, str] = {}
    if header.version:
        metadata["version"] = str(header.version)
    source_type = header.sourceType
    metadata["sourceType"] = _SOURCE_NAMES.get(source_type) or str(source_type)
    if header.serverId:
        metadata["serverId"] = str(header.serverId)
    metadata["seqId"] = str(seq_id)
    if header.eventIndex:
        metadata["eventIndex"] = str(header.eventIndex)
    if header.isLast:
        metadata["isLast"] = "true"

    if message_type == _DML:
        dml = event.dmlEvent
        dml_type = dml.dmlEventType
        op = _DML_OPS.get(dml_type, "other")
        source_op = _DML_NAMES.get(dml_type) or str(dml_type)
    else:
        op = _MESSAGE_OPS.get(message_type, "other")
        source_op = _MESSAGE_NAMES.get(message_type) or str(message_type)
        if message_type == _BEGIN:
            begin = event.beginEvent
            if begin.transactionId:
                tx_id = tx_id or begin.transactionId
                metadata["transactionId"] = begin.transactionId
            if begin.threadId:
                metadata["threadId"] = str(begin.threadId)
        elif message_type == _COMMIT:
            commit = event.commitEvent
            if commit.transactionId:
                tx_id = tx_id or commit.transactionId
                metadata["transactionId"] = commit.transactionId
        elif message_type == _DDL:
            ddl_event = event.ddlEvent
            source_db = source_db or ddl_event.schemaName or None
            ddl = ddl_event.sql or None
            if ddl_event.executionTime:
                metadata["executionTime"] = str(ddl_event.executionTime)
        elif message_type == _HEARTBEAT:
            if event.heartbeatEvent.epoch:
                metadata["epoch"] = str(event.heartbeatEvent.epoch)
        elif message_type == _CHECKPOINT:
            checkpoint = event.checkpointEvent
            if checkpoint.syncedGtid:
                metadata["syncedGtid"] = checkpoint.syncedGtid
            if checkpoint.fakeGtid:
                metadata["fakeGtid"] = "true"
            if checkpoint.fileName:
                metadata["fileName"] = checkpoint.fileName
            if checkpoint.position:
                metadata["position"] = str(checkpoint.position)

    for key, value in envelope_properties:
        if key not in metadata:
            metadata[key] = value
    _add(metadata, header.properties)
    _add(metadata, event.properties)
    source_table = header.tableName or None

    if message_type != _DML:
        rows.append(
            (FORMAT, op, source_op, source_db, None, source_table, event_time, None, tx_id,
             position, _SEQUENCE(seq_id, 0), f"{seq_id}:0", None, None, None, ddl,
             list(metadata.items()), None, None)
        )  # fmt: skip
        if schemas is not None:
            schemas.append(None)
        if hints is not None:
            hints.append(None)
        return

    names = [column.name for column in dml.columns]
    if len(set(names)) != len(names):
        seen: set[str] = set()
        duplicate = next(name for name in names if name in seen or seen.add(name))
        raise Malformed(f"duplicate column name {duplicate!r}")
    primary_key = [column.name for column in dml.columns if column.isKey] or None
    if schemas is not None:
        schemas.extend([_wire_schema(header.sourceType, dml.columns)] * len(dml.rows))
    metadata_items = list(metadata.items())
    json_columns = frozenset(c.name for c in dml.columns if _is_json(c.originalType))
    for row_index, row in enumerate(dml.rows):
        old_values = row.oldColumns
        new_values = row.newColumns
        if hints is not None:
            hints.append(
                _json_hints(names, json_columns, old_values, new_values) if json_columns else None
            )
        before = _image(old_values, names, row_index, "old") if len(old_values) else None
        after = _image(new_values, names, row_index, "new") if len(new_values) else None
        row_properties = row.properties
        if len(row_properties):
            row_metadata = dict(metadata)
            _add(row_metadata, row_properties)
            items = list(row_metadata.items())
        else:
            items = metadata_items
        rows.append(
            (FORMAT, op, source_op, source_db, None, source_table, event_time, None, tx_id,
             position, _SEQUENCE(seq_id, row_index), f"{seq_id}:{row_index}", primary_key,
             before, after, None, items, None, None)
        )  # fmt: skip


def _map_bytes(items) -> int:
    """The UTF-8 bytes of a map's keys and values, as the Rust core counts its output."""
    if not items:
        return 0
    return sum(len(k.encode()) + (len(v.encode()) if v is not None else 0) for k, v in items)


def _row_bytes(row: tuple) -> int:
    """The output bytes of one event row: its ``before``, ``after`` and ``metadata``."""
    return _map_bytes(row[13]) + _map_bytes(row[14]) + _map_bytes(row[16])


def _events(
    data: bytes,
    envelope_properties: list[tuple[str, str]],
    limits: Limits,
    schemas: list | None = None,
    hints: list | None = None,
) -> list[tuple]:
    """The event rows of one serialized ``Entries``: all of them, or :class:`Malformed`.

    Their output bytes are held to ``limits.output_limit(len(data))``. Counting them
    exactly costs a pass over every key and value, so an upper bound comes first, per
    entry: rows times (the column names twice and the first row's metadata), plus 4 times
    the entry's wire size (a value's text takes at most 3 UTF-8 bytes per byte sent, row
    properties 1). Only past the limit is every row counted, as the Rust core does.

    In the schema pass (``schemas`` a list, which gets each row's wire schema) the rows
    are not output, and their bytes not counted.
    """
    max_items = limits.max_items
    entries = _parse(_proto.Entries, data, "Entries")
    if len(entries.items) > max_items:
        what = f"Entries has more than {max_items:,} items"
        raise Malformed(limits.over("max_items", what))
    output_limit = limits.output_limit(len(data))
    bound = 0
    exact = None  # the output bytes of the rows so far, once the bound is past the limit
    rows: list[tuple] = []
    for i, entry in enumerate(entries.items):
        start = len(rows)
        try:
            _entry_rows(entry, envelope_properties, rows, limits, schemas, hints)
        except Malformed as exc:
            raise Malformed(f"Entries.items[{i}]: {exc}") from None
        added = len(rows) - start
        if not added or schemas is not None:
            continue
        if exact is None:
            names = sum(len(c.name.encode()) for c in entry.event.dmlEvent.columns)
            per_row = 2 * names + _map_bytes(rows[start][16])
            bound += added * per_row + 4 * entry.ByteSize()
            if bound > output_limit:
                exact = sum(_row_bytes(row) for row in rows[:start])
        if exact is not None:
            exact += sum(_row_bytes(row) for row in rows[start:])
            if exact > output_limit:
                cause = limits.over_output(output_limit, "the message's")
                raise Malformed(f"Entries.items[{i}]: {cause}")
    return rows


# ---------------------------------------------------------------------------------------
# Envelopes and multi-part sets


class _PartSet:
    """The parts received so far of one multi-part Entries, all under one key."""

    __slots__ = ("total", "parts", "properties")

    def __init__(self, total: int, properties: list[tuple[str, str]]) -> None:
        self.total = total
        self.parts: list[tuple[int, bytes, bytes]] = []  # (ordinal, raw, data)
        self.properties = properties  # the first part's Envelope properties


class TencentDts:
    """Decodes ``tencent-dts`` messages, reassembling multi-part Envelopes per key."""

    name = FORMAT

    def __init__(self, *, limits: Limits = DEFAULT) -> None:
        # key -> open set; dict order is the order the sets were opened in.
        self._sets: dict[str | None, _PartSet] = {}
        self._pending = 0
        self._pending_bytes = 0  # bytes of the parts held (whole values), max_pending_bytes
        self._limits = limits

    @property
    def pending(self) -> int:
        """Parts buffered in open multi-part sets."""
        return self._pending

    def decode(self, raw: bytes, key: str | None, ordinal: int, sink: EventSink) -> None:
        """Decodes one Kafka value (a serialized ``Envelope``) into ``sink``.

        Args:
            raw: the message bytes.
            key: the multi-part reassembly key (``None``: the default key).
            ordinal: the message's input ordinal.
            sink: where rows go.
        """
        try:
            envelope = _parse(_proto.Envelope, raw, "Envelope")
            if envelope.version != 1:
                raise Malformed(f"unsupported Envelope version {envelope.version}")
            total = envelope.total or 1
            index = envelope.index
            if index >= total:
                raise Malformed(f"part index {index} is not below total {total}")
            max_parts = self._limits.max_parts
            if total > max_parts:
                what = f"a multi-part envelope of {total:,} parts"
                raise Malformed(self._limits.over("max_parts", what))
        except Malformed as exc:
            sink.error(ordinal, raw, str(exc))
            return
        if total == 1:
            self._emit(sink, envelope.data, _pairs(envelope.properties), [(ordinal, raw, b"")])
            return

        # In failfast, a failed set's parts and this message are all reported before the
        # first error is raised: every message seen is accounted for (docs/events.md).
        open_set = self._sets.get(key)
        if index == 0:
            superseded = None
            if open_set is not None:
                self._close(key)
                superseded = partial(self._fail, sink, open_set, "superseded by a new part 0")
            too_much = self._over_pending(len(raw))
            if too_much:
                report_all(superseded, partial(sink.error, ordinal, raw, too_much))
                return
            part_set = _PartSet(total, _pairs(envelope.properties))
            part_set.parts.append((ordinal, raw, envelope.data))
            self._sets[key] = part_set
            self._pending += 1
            self._pending_bytes += len(raw)
            report_all(superseded)
            return
        if open_set is None:
            sink.error(ordinal, raw, f"part {index} of {total} without a part 0 before it")
            return
        expected = len(open_set.parts)
        if total == open_set.total:
            if index == expected:
                too_much = self._over_pending(len(raw))
                if too_much:
                    self._close(key)
                    reason = f"part {index} is over max_pending_bytes"
                    report_all(
                        partial(self._fail, sink, open_set, reason),
                        partial(sink.error, ordinal, raw, too_much),
                    )
                    return
                open_set.parts.append((ordinal, raw, envelope.data))
                self._pending += 1
                self._pending_bytes += len(raw)
                if index == total - 1:
                    self._close(key)
                    data = b"".join(part[2] for part in open_set.parts)
                    self._emit(sink, data, open_set.properties, open_set.parts)
                return
            if index < expected and open_set.parts[index][2] == envelope.data:
                sink.error(ordinal, raw, f"duplicate part {index} of {total}")
                return
        self._close(key)
        reason = f"expected part {expected} of {open_set.total}, got part {index} of {total}"
        report_all(
            partial(self._fail, sink, open_set, reason),
            partial(sink.error, ordinal, raw, f"multi-part envelope out of order: {reason}"),
        )

    def finish(self, sink: EventSink) -> None:
        """End of input: every part of every open set becomes an error row."""
        sets = self._sets
        self._sets = {}
        self._pending = 0
        self._pending_bytes = 0
        report_all(*(partial(self._fail, sink, s, "the input ended") for s in sets.values()))

    def _close(self, key: str | None) -> None:
        part_set = self._sets.pop(key)
        self._pending -= len(part_set.parts)
        self._pending_bytes -= sum(len(part[1]) for part in part_set.parts)

    def _over_pending(self, more: int) -> str | None:
        """The error text when buffering ``more`` bytes would go over max_pending_bytes."""
        limit = self._limits.max_pending_bytes
        total = self._pending_bytes + more
        if total <= limit:
            return None
        what = f"buffering this part would hold {total:,} bytes of multi-part envelopes"
        return self._limits.over("max_pending_bytes", what)

    @staticmethod
    def _fail(sink: EventSink, part_set: _PartSet, reason: str) -> None:
        received = len(part_set.parts)
        cause = (
            f"incomplete multi-part envelope: {received} of {part_set.total} parts"
            f" received, {reason}"
        )
        sink.errors([(ordinal, raw) for ordinal, raw, _ in part_set.parts], cause)

    def _emit(self, sink: EventSink, data: bytes, properties, parts) -> None:
        """Events of one whole Entries at the last part's place, or every part an error."""
        schemas = [] if sink.schema_pass else None
        hints = [] if sink.typed is not None else None
        try:
            rows = sink.convert(_events(data, properties, self._limits, schemas, hints), hints)
        except (Malformed, Unconvertible) as exc:
            cause = str(exc)
            if len(parts) > 1:
                cause = f"multi-part envelope of {len(parts)} parts: {cause}"
            table = getattr(exc, "table", None)
            sink.errors([(ordinal, raw) for ordinal, raw, _ in parts], cause, table)
            return
        sink.events(rows, parts[-1][0], messages=len(parts), schemas=schemas)
