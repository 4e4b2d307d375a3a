"""The ``debezium-json`` format: Debezium's JSON converter output, and Lindorm's "Debezium
Format V2.0".

Every rule here is written down in docs/formats/debezium-json.md, which the Rust core
follows too. The JSON accepted and the field types are datahub-blob's (the same strict
parse, from :mod:`._json`).
"""

from __future__ import annotations

import base64

from .._limits import DEFAULT
from . import _schemas
from ._events import Malformed
from ._json import (
    JsonFormat,
    Number,
    add_unknown,
    extended_document,
    extended_object,
    integer_field,
    kind_of,
    object_field,
    parse,
    render,
    render_extended,
    string_field,
    unsigned_field,
)
from ._sequence import i64, text, u64
from ._typed import Hints, parse_int

FORMAT = "debezium-json"
UNAVAILABLE_VALUE = "__debezium_unavailable_value"
"""Debezium's default ``unavailable.value.placeholder``."""
_OLD_KEY = "__debezium.oldkey header"
_HEADER_CONVERTER = (
    " (give Kafka Connect header.converter=org.apache.kafka.connect.json.JsonConverter)"
)

_OPS = {"r": "read", "c": "insert", "u": "update", "d": "delete", "t": "truncate", "m": "other"}
_STATUS = {"BEGIN": "begin", "END": "commit"}
_CONTROL = frozenset(("begin", "commit", "heartbeat", "ddl"))
_MAX_US = 2**63 - 1
_TIMES = frozenset(("ts_ms", "ts_us", "ts_ns"))
_NAMES = frozenset(("db", "schema", "namespace", "table", "collection"))
_ENVELOPE = frozenset(
    ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns", "transaction", "ddl",
     "databaseName", "status", "id")
)  # fmt: skip


def _micros(obj: dict, where: str) -> int | None:
    """``ts_ns`` / 1000, else ``ts_us``, else ``ts_ms`` × 1000 of ``obj``."""
    ns = integer_field(obj.get("ts_ns"), f"{where}ts_ns")
    us = integer_field(obj.get("ts_us"), f"{where}ts_us")
    ms = integer_field(obj.get("ts_ms"), f"{where}ts_ms")
    if ns is not None:
        return ns // 1000 if ns >= 0 else -((-ns) // 1000)
    if us is not None:
        return us
    if ms is not None:
        if abs(ms) > _MAX_US // 1000:
            raise Malformed(f"{where}ts_ms: {ms} milliseconds is out of range")
        return ms * 1000
    return None


def _nanos(obj: dict) -> int | None:
    """The source time in nanoseconds (already checked as integers)."""
    for name, scale in (("ts_ns", 1), ("ts_us", 1000), ("ts_ms", 1_000_000)):
        value = integer_field(obj.get(name), name)
        if value is not None:
            value *= scale
            return value if -(2**63) <= value < 2**63 else None
    return None


class _Unavailable:
    """The placeholder of values the connector did not read, in each shape it is sent
    (rust/render/json.rs ``Unavailable``): its text, the base64 of its bytes, an array of
    its text, an array of its bytes as numbers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.base64 = base64.b64encode(text.encode()).decode()
        self.codes = [str(b) for b in text.encode()]

    def matches(self, value: object) -> bool:
        if type(value) is str:
            return value == self.text or value == self.base64
        if type(value) is list:
            if len(value) == 1:
                return type(value[0]) is str and value[0] == self.text
            return len(value) == len(self.codes) and all(
                type(item) is Number and item == code
                for item, code in zip(value, self.codes, strict=True)
            )
        return False


def _image(value: object, where: str, limits, unavailable: _Unavailable | None = None):
    """``before`` / ``after``: an object (without the members holding the ``unavailable``
    placeholder), a string holding a MongoDB Extended JSON document, or null."""
    if type(value) is str:
        return extended_document(value, where, limits)
    obj = object_field(value, where)
    if obj is None:
        return None
    if unavailable is None:
        return [(k, render(v)) for k, v in obj.items()]
    return [(k, render(v)) for k, v in obj.items() if not unavailable.matches(v)]


def _old_key(raw: bytes, limits) -> dict:
    """The old key of a key change: the ``__debezium.oldkey`` header's JSON object (the
    Connect ``schema``/``payload`` wrapper taken off)."""
    try:
        value = parse(raw, limits)
    except Malformed as exc:
        raise Malformed(f"{_OLD_KEY}: {exc}{_HEADER_CONVERTER}") from None
    if isinstance(value, dict) and "schema" in value and "payload" in value:
        value = value["payload"]
    key = object_field(value, _OLD_KEY)
    if key is None:
        raise Malformed(f"{_OLD_KEY}: expected an object, got null")
    return key


def _remove_fields(image: list, names: list | None) -> None:
    have = {k for k, _ in image}
    for name in names or ():
        if name not in have:
            have.add(name)
            image.append((name, None))


def _string_array(value: object, where: str) -> list | None:
    """An array of strings; ``None`` when null/absent or empty."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise Malformed(f"{where}: expected an array, got {kind_of(value)}")
    for i, item in enumerate(value):
        if item is None:
            raise Malformed(f"{where}: expected strings, got null")
        if type(item) is not str:
            raise Malformed(f"{where}[{i}]: expected a string, got {kind_of(item)}")
    return value or None


def _partial_after(envelope: dict, limits) -> list | None:
    """The partial ``after`` of a MongoDB update without the full document: from
    ``updateDescription``, else from the older connector's ``patch``."""
    update = object_field(envelope.get("updateDescription"), "updateDescription")
    if update is not None:
        where = "updateDescription.updatedFields"
        updated = string_field(update.get("updatedFields"), where)
        removed = _string_array(update.get("removedFields"), "updateDescription.removedFields")
        image = [] if updated is None else extended_document(updated, where, limits)
        _remove_fields(image, removed)
        return image
    patch = string_field(envelope.get("patch"), "patch")
    if patch is None:
        return None
    document = extended_object(patch, "patch", limits)
    if not any(k.startswith("$") for k in document):
        return [(k, render_extended(v)) for k, v in document.items()]
    image = []
    values = object_field(document.get("$set"), "patch.$set")
    for k, v in (values or {}).items():
        image.append((k, render_extended(v)))
    unset = object_field(document.get("$unset"), "patch.$unset")
    _remove_fields(image, list(unset or ()))
    return image


def _text_or_integer(value: object, where: str) -> str | None:
    if type(value) is str:
        return value
    number = integer_field(value, where)
    return None if number is None else str(number)


def _last_commit(value: object, limits) -> int | None:
    """PostgreSQL's ``source.sequence``: its first LSN (0 when null)."""
    where = "source.sequence"
    text_ = string_field(value, where)
    if text_ is None:
        return None
    try:
        array = parse(text_.encode("utf-8"), limits)
    except Malformed as exc:
        raise Malformed(f"{where}: {exc}") from None
    if not isinstance(array, list) or len(array) != 2:
        raise Malformed(f"{where}: expected an array of two LSNs, got {kind_of(array)}")
    return unsigned_field(array[0], where) or 0


def _vgtid_key(text_: str, limits) -> tuple | None:
    """Vitess's ``vgtid`` when comparable: one shard, one server's one interval."""
    try:
        array = parse(text_.encode("utf-8"), limits)
    except Malformed:
        return None
    if not isinstance(array, list) or len(array) != 1 or not isinstance(array[0], dict):
        return None
    shard = array[0]
    keyspace, name, gtid = shard.get("keyspace"), shard.get("shard"), shard.get("gtid")
    if not all(type(v) is str for v in (keyspace, name, gtid)):
        return None
    gtid_set = gtid.split("/", 1)[1] if "/" in gtid else gtid
    if ":" not in gtid_set:
        return None
    uuid, interval = gtid_set.split(":", 1)
    if not uuid or ":" in interval or "," in interval:
        return None
    last = interval.rsplit("-", 1)[1] if "-" in interval else interval
    if not last or not last.isascii() or not last.isdigit():
        return None
    number = int(last)
    if number >= 2**63:
        return None
    return keyspace, name, uuid, number


def _time_key(nanos: int | None, total: int | None) -> bytes | None:
    if nanos is None:
        return None
    return i64(nanos) + (b"" if total is None else u64(total))


_CONNECT_HINTS = {
    "io.debezium.data.VariableScaleDecimal": "variable",
    "io.debezium.time.Date": "days",
    "org.apache.kafka.connect.data.Date": "days",
    "io.debezium.time.Timestamp": "ms",
    "org.apache.kafka.connect.data.Timestamp": "ms",
    "io.debezium.time.MicroTimestamp": "us",
    "io.debezium.time.NanoTimestamp": "ns",
    "io.debezium.time.Time": "time-ms",
    "org.apache.kafka.connect.data.Time": "time-ms",
    "io.debezium.time.MicroTime": "time-us",
    "io.debezium.time.NanoTime": "time-ns",
}


def connect_hints(schema: object, payload: object) -> Hints:
    """Typed mode's hints from a message's Connect schema: how each column of the
    ``before``/``after`` structs writes its logical type (docs/typed.md). A ``Decimal`` is
    base64 bytes only where the payload sends it as a string (with the converter's
    ``decimal.format=NUMERIC`` it is a JSON number, read as decimal text)."""

    def sent_as_number(column: str) -> bool:
        for image in ("after", "before"):
            values = payload.get(image) if isinstance(payload, dict) else None
            value = values.get(column) if isinstance(values, dict) else None
            if value is not None:
                return isinstance(value, Number)
        return False

    columns: dict = {}
    fields = schema.get("fields") if isinstance(schema, dict) else None
    for image in fields if isinstance(fields, list) else ():
        if not isinstance(image, dict) or image.get("field") not in ("before", "after"):
            continue
        inner = image.get("fields")
        for column in inner if isinstance(inner, list) else ():
            if not isinstance(column, dict):
                continue
            name, logical = column.get("field"), column.get("name")
            if not isinstance(name, str) or not isinstance(logical, str):
                continue
            if logical == "org.apache.kafka.connect.data.Decimal":
                parameters = column.get("parameters")
                scale = parameters.get("scale") if isinstance(parameters, dict) else None
                if not isinstance(scale, str) or parse_int(scale) is None or sent_as_number(name):
                    continue
                hint = ("decimal", int(scale))
            elif logical in _CONNECT_HINTS:
                hint = _CONNECT_HINTS[logical]
            else:
                continue
            columns.setdefault(name, hint)
    return Hints(columns=columns)


def _connect_columns(schema: object) -> list[tuple[str, str]] | None:
    """The Connect schema's columns of the ``after`` struct (else ``before``'s) with their
    types, spelled as ``rust/formats/debezium_json.rs`` spells them."""
    fields = schema.get("fields") if isinstance(schema, dict) else None
    if not isinstance(fields, list):
        return None

    def image(name: str):
        for item in fields:
            if isinstance(item, dict) and type(item.get("field")) is str:
                if item["field"] == name:
                    return item
        return None

    found = image("after")
    if found is None:
        found = image("before")
    columns = found.get("fields") if found is not None else None
    if not isinstance(columns, list):
        return None
    out = []
    for column in columns:
        if not isinstance(column, dict):
            return None
        name, spelled = column.get("field"), column.get("type")
        if type(name) is not str or type(spelled) is not str:
            return None
        logical = column.get("name")
        if type(logical) is str:
            spelled += f" {logical}"
            parameters = column.get("parameters")
            params = [
                f"{k}={render(v) or ''}"
                for k, v in (parameters.items() if isinstance(parameters, dict) else ())
                if not k.startswith("__debezium")
            ]
            if params:
                spelled += f"({','.join(params)})"
        out.append((name, spelled))
    return out


def _key_names(key: str | None, limits) -> list[str] | None:
    """The key columns a Kafka message key names (its object's members, its ``payload``'s
    in Connect's wrapper); ``None`` for a key that is not such an object."""
    if key is None:
        return None
    try:
        value = parse(key.encode("utf-8"), limits)
    except Malformed:
        return None
    if not isinstance(value, dict):
        return None
    if "schema" in value and "payload" in value:
        value = value["payload"]
    return list(value) if isinstance(value, dict) else None


class DebeziumJson(JsonFormat):
    """Decodes ``debezium-json`` messages: one JSON object, one row (a tombstone for
    Connect's null payload)."""

    name = FORMAT

    def __init__(self, *, limits=DEFAULT, unavailable_value: str | None = None) -> None:
        super().__init__(limits=limits)
        text = UNAVAILABLE_VALUE if unavailable_value is None else unavailable_value
        self._unavailable = _Unavailable(text) if text else None
        self._moved: bytes | None = None

    def decode_with_old_key(self, raw: bytes, key, old_key: bytes, ordinal: int, sink) -> None:
        """Decodes a message that came with Debezium's ``__debezium.oldkey`` header: an
        insert is then the second half of a key change, an ``update`` from the old key."""
        self._moved = old_key
        try:
            self.decode(raw, key, ordinal, sink)
        finally:
            self._moved = None

    def _schema(self, message: object, row: tuple, key: str | None) -> tuple | None:
        """The Connect schema's columns (else the images' names); the key from the Kafka
        message key, else Lindorm's HBase ``ROW``, else MongoDB's ``_id``."""
        before, after = row[13], row[14]
        if before is None and after is None:
            return None
        envelope = message
        if "payload" in message and ("schema" in message or len(message) == 1):
            envelope = message["payload"]
        names = _key_names(key, self._limits)
        if names is None:
            source = envelope.get("source")
            lindorm = (
                isinstance(source, dict) and "namespace" in source and "connector" not in source
            )
            if lindorm and any(k == "ROW" for image in (before, after) for k, _ in image or ()):
                names = ["ROW"]
            elif row[12] == ["_id"]:
                names = ["_id"]
        columns = _connect_columns(message.get("schema"))
        if columns is None:
            if self._unavailable is not None:
                # Named as sent: a column holding the placeholder is still a column.
                sent = [envelope.get(side) for side in ("before", "after")]
                before, after = (
                    list(image.items()) if isinstance(image, dict) else row_image
                    for image, row_image in zip(sent, (before, after), strict=True)
                )
            return _schemas.names(_schemas.image_names(before, after), names)
        return _schemas.typed("connect", columns, names)

    def _hints(self, message: object) -> Hints | None:
        schema = message.get("schema") if isinstance(message, dict) else None
        return None if schema is None else connect_hints(schema, message.get("payload"))

    def _event(self, message: object) -> tuple | None:
        if not isinstance(message, dict):
            raise Malformed(f"expected a JSON object, got {kind_of(message)}")
        limits = self._limits
        # The Connect wrapper, with its schema or without ({"payload": ...} alone).
        if "payload" in message and ("schema" in message or len(message) == 1):
            envelope = object_field(message["payload"], "payload")
            if envelope is None:
                return None  # Connect's tombstone
        else:
            envelope = message
        get = envelope.get
        source_op = string_field(get("op"), "op")
        ddl = string_field(get("ddl"), "ddl")
        status = string_field(get("status"), "status")
        source = object_field(get("source"), "source") or {}
        transaction = object_field(get("transaction"), "transaction") or {}
        unavailable = self._unavailable
        before = _image(get("before"), "before", limits, unavailable)
        after = _image(get("after"), "after", limits, unavailable)
        capture = _micros(envelope, "")
        event_time = _micros(source, "source.")

        src = source.get
        db = string_field(src("db"), "source.db")
        schema = string_field(src("schema"), "source.schema")
        if schema is None:
            schema = string_field(src("namespace"), "source.namespace")
        table = string_field(src("table"), "source.table")
        if table is None:
            table = string_field(src("collection"), "source.collection")
        file = string_field(src("file"), "source.file")
        pos = unsigned_field(src("pos"), "source.pos")
        row_no = unsigned_field(src("row"), "source.row")
        lsn = unsigned_field(src("lsn"), "source.lsn")
        gtid = string_field(src("gtid"), "source.gtid")
        tx_text = _text_or_integer(src("txId"), "source.txId")
        connector = None
        if file is None and lsn is None:  # read for the other connectors only
            connector = string_field(src("connector"), "source.connector")
        tx_id = string_field(transaction.get("id"), "transaction.id")
        total = integer_field(transaction.get("total_order"), "transaction.total_order")
        collection_order = integer_field(
            transaction.get("data_collection_order"), "transaction.data_collection_order"
        )
        epoch = integer_field(transaction.get("transaction_epoch"), "transaction.transaction_epoch")
        rank = integer_field(transaction.get("transaction_rank"), "transaction.transaction_rank")

        if source_op is not None:
            op = _OPS.get(source_op, "other")
        elif ddl is not None:
            op = "ddl"
            db = string_field(get("databaseName"), "databaseName")
        elif status is not None:
            op = _STATUS.get(status, "other")
            source_op = status
            tx_id = string_field(get("id"), "id")
        elif envelope and set(envelope) <= _TIMES:
            op = "heartbeat"  # the heartbeat topic: {"ts_ms": ...}
        else:
            raise Malformed("op: missing")
        if tx_id is None:
            tx_id = gtid if gtid is not None else tx_text

        read = op == "read"
        nanos = _nanos(source)
        order = None if total is None else max(total, 0)
        mongo = False
        if file is not None:
            position = f"{file}:{pos}" if pos is not None else None
            sequence = text(file) + u64(pos or 0, row_no or 0)
            event_id = f"{file}:{pos or 0}:{row_no or 0}"
        elif lsn is not None:
            position = str(lsn)
            commit = _last_commit(src("sequence"), limits)
            sequence = u64(lsn) if commit is None else u64(commit, lsn)
            event_id = str(lsn)
        elif src("scn") is not None or src("commit_scn") is not None:
            # Oracle: commit SCN, transaction, SCN, order in the transaction.
            scn = unsigned_field(src("scn"), "source.scn")
            commit = unsigned_field(src("commit_scn"), "source.commit_scn")
            tx_seq = unsigned_field(src("txSeq"), "source.txSeq")
            in_tx = tx_seq if tx_seq is not None else order
            commit_or = commit if commit is not None else scn if scn is not None else 0
            sequence = u64(commit_or) + text(tx_text or "") + u64(scn or 0, in_tx or 0)
            position = None if scn is None else str(scn)
            event_id = None if in_tx is None else f"{commit_or}:{scn or 0}:{in_tx}"
        elif src("commit_lsn") is not None or src("change_lsn") is not None:
            if connector == "informix":
                commit = unsigned_field(src("commit_lsn"), "source.commit_lsn")
                change = unsigned_field(src("change_lsn"), "source.change_lsn")
                sequence = u64(commit or 0, change or 0)
                shown = change if change is not None else commit
                position = None if shown is None else str(shown)
                event_id = None if change is None else f"{commit or 0}:{change}"
            else:
                commit = string_field(src("commit_lsn"), "source.commit_lsn")
                change = string_field(src("change_lsn"), "source.change_lsn")
                serial = unsigned_field(src("event_serial_no"), "source.event_serial_no")
                sequence = text(commit or "") + text(change or "") + u64(serial or 0)
                position = change if change is not None else commit
                event_id = None
                if change is not None:
                    event_id = f"{commit or ''}:{change}"
                    if serial is not None:
                        event_id += f":{serial}"
        elif string_field(src("vgtid"), "source.vgtid") is not None:
            # Vitess: the ordered transaction metadata, else a one-shard VGTID.
            position = src("vgtid")
            event_id = None
            if epoch is not None and rank is not None:
                sequence = i64(epoch) + i64(rank) + u64(order or 0)
            else:
                key = _vgtid_key(position, limits)
                if key is None:
                    sequence = _time_key(nanos, order)
                else:
                    keyspace, shard, uuid, last = key
                    sequence = text(keyspace) + text(shard) + text(uuid) + u64(last, order or 0)
        elif src("ord") is not None or connector == "mongodb":
            # MongoDB: the oplog time (seconds, ordinal), then the order in the transaction.
            mongo = True
            ord_ = unsigned_field(src("ord"), "source.ord") or 0
            if nanos is None:
                sequence = position = event_id = None
            else:
                sequence = i64(nanos) + u64(ord_, order or 0)
                position = f"{nanos // 1_000_000_000}:{ord_}"
                event_id = position if order is None else f"{position}:{order}"
        else:
            position = event_id = None
            sequence = _time_key(nanos, order)
        if read:
            event_id = None
        if position == "":
            position = None

        # MongoDB without full documents: the partial image of an update, the older
        # connector's `filter` (the document's `_id`) as the image before.
        owned = type(get("before")) is str or type(get("after")) is str
        if after is None:
            after = _partial_after(envelope, limits)
            owned = owned or after is not None
        if before is None:
            filter_ = string_field(get("filter"), "filter")
            if filter_ is not None:
                before = extended_document(filter_, "filter", limits)
                owned = True
        mongo = mongo or owned
        primary_key = ["_id"] if mongo and op not in _CONTROL else None

        if self._moved is not None and op == "insert":
            # The insert half of a key change: an update from the old key.
            op = "update"
            before = _image(_old_key(self._moved, limits), _OLD_KEY, limits, unavailable)

        metadata: dict[str, str] = {}
        add_unknown(metadata, source, _NAMES)
        for name, value in (
            ("total_order", total),
            ("data_collection_order", collection_order),
            ("transaction_epoch", epoch),
            ("transaction_rank", rank),
        ):
            if value is not None and name not in metadata:
                metadata[name] = str(value)
        add_unknown(metadata, envelope, _ENVELOPE)

        return (
            FORMAT, op, source_op, db, schema, table, event_time, capture, tx_id, position,
            sequence, event_id, primary_key, before, after, ddl, list(metadata.items()) or None,
            None, None,
        )  # fmt: skip
