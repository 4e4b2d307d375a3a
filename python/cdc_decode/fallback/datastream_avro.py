"""The ``datastream-avro`` format: one Google Cloud Datastream Avro object-container file per
input value, many events.

Every rule here is written down in docs/formats/datastream-avro.md, which the Rust core
(rust/avro.rs, rust/formats/datastream_avro/) follows too. fastavro reads the records;
around it this module reads the container (header, blocks, codecs) with the same bounds as
the Rust core, and hands fastavro a *canonical* schema: the writer's types without logical
types (values come raw, and are rendered here), enums as ``long`` (the index), ambiguous
union branches wrapped in records so their branch is known, and records and arrays nested
deeper than ``Limits.max_avro_depth`` replaced by a record that cannot be read (fastavro
recurses in C and would overflow the stack on deeper data).
"""

from __future__ import annotations

import io
import zlib

import cramjam
import fastavro
import zstandard

from .._limits import DEFAULT, Limits
from .._values import (
    base64_text,
    date_text,
    datetime_text,
    f32_text,
    f64_text,
    float_json,
    infinity_text,
    interval_text,
    json_string,
    offset_text,
    offset_timestamp_text,
    time_text,
    timestamp_text,
    unscaled_decimal_text,
)
from . import _schemas
from ._events import EventSink, Malformed
from ._json import Number, parse
from ._typed import Hints, Unconvertible
from .datastream_json import order

FORMAT = "datastream-avro"

_CACHED_SCHEMAS = 256
_MAX_MS = (2**63 - 1) // 1000
_I64 = (-(2**63), 2**63 - 1)
_MAGIC = b"Obj\x01"
_CODECS = {b"null": "null", b"deflate": "deflate", b"snappy": "snappy", b"zstandard": "zstandard"}
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_LEADING = ("stream_name", "read_method", "object", "schema_key")
_TIMESTAMPS = {
    "timestamp-millis": ("ms", True),
    "timestamp-micros": ("us", True),
    "timestamp-nanos": ("ns", True),
    "local-timestamp-millis": ("ms", False),
    "local-timestamp-micros": ("us", False),
    "local-timestamp-nanos": ("ns", False),
}
# Source-metadata fields read as non-negative integers (parts of the position), and those
# with a column of their own (not in metadata).
_POSITIONS = ("log_position", "scn", "ssn")
_COLUMNS = ("database", "schema", "table", "collection", "object_name", "change_type", "tx_id")


# ---------------------------------------------------------------------------------------
# Container


def _long(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``, read as fastavro reads one (rust/avro.rs ``Cursor::long``)."""
    n = 0
    shift = 0
    size = len(buf)
    while True:
        if pos >= size:
            raise Malformed(f"truncated at byte {pos}")
        b = buf[pos]
        pos += 1
        n |= ((b & 0x7F) << (shift & 63)) & 0xFFFFFFFFFFFFFFFF
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7


def _take(buf: bytes, pos: int, n: int) -> tuple[bytes, int]:
    if n > len(buf) - pos:
        raise Malformed(f"{n} bytes at byte {pos} run past the end ({len(buf) - pos} left)")
    return buf[pos : pos + n], pos + n


def _bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    at = pos
    n, pos = _long(buf, pos)
    if n < 0:
        raise Malformed(f"negative length {n} at byte {at}")
    return _take(buf, pos, n)


def _header(buf: bytes) -> tuple[bytes, str, bytes, int]:
    """(schema JSON, codec, sync marker, offset of the first block)."""
    if buf[:4] != _MAGIC:
        raise Malformed("not an Avro object-container file (no Obj\\x01 magic)")
    pos = 4
    schema = codec = None
    while True:
        at = pos
        count, pos = _long(buf, pos)
        if count == 0:
            break
        if count < 0:
            count = -count
            if count > _I64[1]:
                raise Malformed(f"header: bad map block count at byte {at}")
            _, pos = _long(buf, pos)
        if count > len(buf) - pos:
            raise Malformed(f"header: {count} metadata entries at byte {at}")
        for _ in range(count):
            key, pos = _bytes(buf, pos)
            value, pos = _bytes(buf, pos)
            if key == b"avro.schema" and schema is None:
                schema = value
            elif key == b"avro.codec" and codec is None:
                codec = value
    if len(buf) - pos < 16:
        raise Malformed("header: truncated before the sync marker")
    sync = buf[pos : pos + 16]
    pos += 16
    if schema is None:
        raise Malformed("header: no avro.schema")
    name = _CODECS.get(b"null" if codec is None else codec)
    if name is None:
        raise Malformed(f"unsupported codec {codec[:40]!r}")
    return schema, name, sync, pos


def _decompress(codec: str, data: bytes, budget: int, limits: Limits) -> bytes:
    if codec == "deflate":
        inflater = zlib.decompressobj(-15)
        try:
            out = inflater.decompress(data, budget + 1)
        except zlib.error as exc:
            raise Malformed(f"deflate: {exc}") from None
        if len(out) > budget:
            raise Malformed(limits.over_inflate(budget))
        if not inflater.eof:
            raise Malformed("deflate: truncated")
        return out
    if codec == "snappy":
        if len(data) < 4:
            raise Malformed("snappy: a block shorter than its checksum")
        body, crc = data[:-4], data[-4:]
        n = 0
        for i, b in enumerate(body[:5]):
            n |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                break
        else:
            raise Malformed("snappy: bad length")
        if n >= 1 << 32:
            raise Malformed("snappy: bad length")
        if n > budget:
            raise Malformed(limits.over_inflate(budget))
        try:
            out = bytes(cramjam.snappy.decompress_raw(body))
        except Exception as exc:  # cramjam raises its own DecompressionError
            raise Malformed(f"snappy: {exc}") from None
        if zlib.crc32(out) != int.from_bytes(crc, "big"):
            raise Malformed("snappy: checksum does not match")
        return out
    # zstandard: one frame, read no further than the budget allows.
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=False)
        chunks = []
        total = 0
        while total <= budget:
            chunk = reader.read(budget + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        # The reader ends quietly where the input ends, even inside the frame: a frame cut
        # short (its checksum, its last block) is an error, as the native engine says.
        if total <= budget and not _frame_ends(data):
            raise Malformed("zstandard: incomplete frame")
    except zstandard.ZstdError as exc:
        raise Malformed(f"zstandard: {exc}") from None
    if total > budget:
        raise Malformed(limits.over_inflate(budget))
    return b"".join(chunks)


def _frame_ends(data: bytes) -> bool:
    """True when `data` holds a whole zstandard frame (decoding it again, which gives the
    bytes just read, no more)."""
    check = zstandard.ZstdDecompressor().decompressobj()
    check.decompress(data)
    return check.eof


# ---------------------------------------------------------------------------------------
# Schemas


class _Node:
    """A compiled type (rust/avro.rs ``Node``)."""

    __slots__ = ("kind", "logical", "size", "symbols", "items", "branches", "name", "fields",
                 "shape", "by_type", "index")  # fmt: skip

    def __init__(self, kind: str, index: int) -> None:
        self.kind = kind
        self.index = index
        self.logical: tuple | None = None
        self.size = 0
        self.symbols: list[str] = []
        self.items: _Node | None = None
        self.branches: list[_Node] = []
        self.name = ""
        self.fields: list[tuple[str, _Node]] = []
        self.shape: tuple | None = None
        self.by_type: dict = {}


def _is_str(value: object) -> bool:
    return type(value) is str


def _token(value: object) -> int | None:
    """A JSON number token as an integer (``-?[0-9]+``), else ``None``."""
    if type(value) is not Number:
        return None
    digits = value[1:] if value.startswith("-") else value
    return int(value) if digits.isdigit() and digits.isascii() else None


class _Compiler:
    def __init__(self) -> None:
        self.nodes: list[_Node] = []
        self.names: dict[str, _Node] = {}

    def new(self, kind: str) -> _Node:
        node = _Node(kind, len(self.nodes))
        self.nodes.append(node)
        return node

    def node(self, json: object, namespace: str) -> _Node:
        if _is_str(json):
            return self.named(json, namespace, None)
        if isinstance(json, list):
            union = self.new("union")
            seen = []
            for item in json:
                branch = self.node(item, namespace)
                if branch.kind == "union":
                    raise Malformed("schema: a union inside a union")
                if branch.kind == "record":
                    key = branch.name
                elif branch.kind in ("enum", "fixed"):
                    key = f"#{branch.index}"
                else:
                    key = branch.kind
                if key in seen:
                    raise Malformed(f"schema: union has {key} twice")
                seen.append(key)
                union.branches.append(branch)
            return union
        if isinstance(json, dict):
            return self.object(json, namespace)
        raise Malformed("schema: expected a type")

    def object(self, json: dict, namespace: str) -> _Node:
        kind = json.get("type")
        if not _is_str(kind):
            raise Malformed('schema: a type object without a string "type"')
        logical = json.get("logicalType")
        logical = logical if _is_str(logical) else None
        if kind in ("record", "error"):
            return self.record(json, namespace)
        if kind == "enum":
            full, _ = _full_name(json, namespace)
            symbols = json.get("symbols")
            if not isinstance(symbols, list):
                raise Malformed(f"schema: enum {full} without symbols")
            if not all(_is_str(s) for s in symbols):
                raise Malformed(f"schema: enum {full}: a symbol not a string")
            node = self.new("enum")
            node.symbols = list(symbols)
            self.define(full, node)
            return node
        if kind == "fixed":
            full, _ = _full_name(json, namespace)
            size = json.get("size")
            size = int(size) if type(size) is Number and size.isdigit() else None
            if size is None or size >= 1 << 64:
                raise Malformed(f"schema: fixed {full} without a size")
            node = self.new("fixed")
            node.size = size
            node.logical = _decimal(json) if logical == "decimal" else None
            self.define(full, node)
            return node
        if kind == "array":
            if "items" not in json:
                raise Malformed("schema: an array without items")
            node = self.new("array")
            node.items = self.node(json["items"], namespace)
            return node
        if kind == "map":
            raise Malformed("schema: map types are not read (Datastream writes none)")
        return self.named(kind, namespace, _primitive_logical(kind, logical, json))

    def record(self, json: dict, namespace: str) -> _Node:
        full, inner = _full_name(json, namespace)
        node = self.new("record")
        node.name = full
        self.define(full, node)
        fields = json.get("fields")
        if not isinstance(fields, list):
            raise Malformed(f"schema: record {full} without fields")
        names = set()
        for field in fields:
            name = field.get("name") if isinstance(field, dict) else None
            if not _is_str(name):
                raise Malformed(f"schema: record {full}: a field without a name")
            if name in names:
                raise Malformed(f"schema: record {full} has field {name} twice")
            names.add(name)
            if "type" not in field:
                raise Malformed(f"schema: {full}.{name} without a type")
            primitive = _field_logical_primitive(field)
            if primitive is None:
                node.fields.append((name, self.node(field["type"], inner)))
            else:
                logical = _primitive_logical(primitive, field["logicalType"], field)
                node.fields.append((name, self.named(primitive, inner, logical)))
        node.shape = _shape(full.rsplit(".", 1)[-1], node.fields)
        return node

    def named(self, name: str, namespace: str, logical: tuple | None) -> _Node:
        if name in _PRIMITIVES:
            node = self.new(name)
            node.logical = logical
            return node
        found = None
        if "." not in name and namespace:
            found = self.names.get(f"{namespace}.{name}")
        if found is None:
            found = self.names.get(name)
        if found is None:
            raise Malformed(f"schema: unknown type {name}")
        return found

    def define(self, full: str, node: _Node) -> None:
        if full.rsplit(".", 1)[-1] in _PRIMITIVES:
            raise Malformed("schema: a named type called after a primitive")
        if full in self.names:
            raise Malformed(f"schema: type {full} defined twice")
        self.names[full] = node


def _primitive_logical(kind: str, logical: str | None, props: dict) -> tuple | None:
    """The logical type ``logical`` gives the primitive ``kind`` (a decimal's precision and
    scale read from ``props``); ``None`` for one the primitive cannot carry."""
    if kind == "bytes" and logical == "decimal":
        return _decimal(props)
    if kind == "int" and logical == "date":
        return ("date",)
    if kind == "int" and logical == "time-millis":
        return ("time", 3)
    if kind == "long" and logical in ("time-micros", "time-interval-micros"):
        return ("time", 6)
    if kind == "long" and logical in _TIMESTAMPS:
        return ("timestamp", *_TIMESTAMPS[logical])
    return None


def _field_logical_primitive(field: dict) -> str | None:
    """The primitive type of a field whose ``logicalType`` is written on the field (old
    Datastream Oracle files), when that counts as if inside the type (rust/avro.rs
    ``field_logical``): the type is a primitive without a logical type of its own."""
    if not _is_str(field.get("logicalType")):
        return None
    kind = field["type"]
    if isinstance(kind, dict) and not _is_str(kind.get("logicalType")):
        kind = kind.get("type")
    return kind if _is_str(kind) and kind in _PRIMITIVES else None


def _full_name(json: dict, namespace: str) -> tuple[str, str]:
    name = json.get("name")
    if not _is_str(name) or not name:
        raise Malformed("schema: a named type without a name")
    if "." in name:
        full = name
    else:
        space = json.get("namespace")
        space = space if _is_str(space) else namespace
        full = f"{space}.{name}" if space else name
    inner = full.rsplit(".", 1)[0] if "." in full else ""
    return full, inner


def _decimal(json: dict) -> tuple | None:
    precision = _token(json.get("precision"))
    scale = _token(json.get("scale")) if "scale" in json else 0
    if precision is None or scale is None or not 1 <= precision <= 1000:
        return None
    if not 0 <= scale <= precision:
        return None
    return ("decimal", scale)


def _shape(name: str, fields: list[tuple[str, _Node]]) -> tuple:
    positions = {}
    for i, (field, _) in enumerate(fields):
        positions.setdefault(field, i)

    def integer(wanted: str) -> int | None:
        i = positions.get(wanted)
        return i if i is not None and fields[i][1].kind in ("int", "long") else None

    if name == "varchar":
        return ("varchar", positions["value"]) if "value" in positions else ("plain",)
    wanted = {
        "datetime": ("date", "time"),
        "timestampTz": ("timestamp", "offset"),
        "timeTz": ("time", "offset"),
        "interval": ("months", "hours", "micros"),
    }.get(name)
    if wanted is not None:
        found = [integer(w) for w in wanted]
        return (name, *found) if None not in found else ("plain",)
    if len(fields) == 2 and "nestedArray" in positions and "elementValue" in positions:
        return ("pgarray", positions["nestedArray"], positions["elementValue"])
    return ("plain",)


def _check_arrays(nodes: list[_Node]) -> None:
    """Arrays whose items can encode in no bytes are refused (rust/avro.rs ``check_arrays``)."""
    empty = {n.index: True for n in nodes if n.kind == "record"}

    def is_empty(node: _Node) -> bool:
        if node.kind == "null":
            return True
        if node.kind == "fixed":
            return node.size == 0
        if node.kind == "record":
            return empty[node.index]
        return False

    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node.kind == "record" and empty[node.index]:
                if not all(is_empty(f) for _, f in node.fields):
                    empty[node.index] = False
                    changed = True
    for node in nodes:
        if node.kind == "array" and is_empty(node.items):
            raise Malformed("schema: an array's items encode in no bytes")


# Python types of raw fastavro values, by the node kinds that give them.
_PY_TYPE = {
    "null": type(None),
    "boolean": bool,
    "int": int,
    "long": int,
    "enum": int,
    "float": float,
    "double": float,
    "bytes": bytes,
    "fixed": bytes,
    "string": str,
    "array": list,
    "record": tuple,
}


class _Canonical:
    """The schema handed to fastavro (see the module's docstring), and the record names it
    gives back for union branches."""

    def __init__(self, root: _Node, max_depth: int) -> None:
        self.max_depth = max_depth
        self.defined: set[str] = set()
        self.records: dict[str, _Node] = {}  # canonical record name -> node (or wrapper)
        self.schema = self.emit(root, 0)

    def emit(self, node: _Node, depth: int) -> object:
        kind = node.kind
        if kind in ("record", "array") and depth + 1 > self.max_depth:
            return self.too_deep()
        if kind == "record":
            name = f"r{node.index}_{depth + 1}"
            if name in self.defined:
                return name
            self.defined.add(name)
            self.records[name] = node
            fields = [
                {"name": f"x{i}", "type": self.emit(f, depth + 1)}
                for i, (_, f) in enumerate(node.fields)
            ]
            return {"type": "record", "name": name, "fields": fields}
        if kind == "array":
            return {"type": "array", "items": self.emit(node.items, depth + 1)}
        if kind == "union":
            counts: dict[type, int] = {}
            for branch in node.branches:
                t = _PY_TYPE[branch.kind]
                counts[t] = counts.get(t, 0) + 1
            out = []
            for i, branch in enumerate(node.branches):
                if branch.kind != "record" and counts[_PY_TYPE[branch.kind]] > 1:
                    # A wrapper record encodes as its one field: the branch comes back named.
                    name = f"u{node.index}_{i}_{depth}"
                    if name in self.defined:
                        out.append(name)
                        continue
                    self.defined.add(name)
                    self.records[name] = branch
                    out.append(
                        {"type": "record", "name": name,
                         "fields": [{"name": "v", "type": self.emit(branch, depth)}]}
                    )  # fmt: skip
                else:
                    out.append(self.emit(branch, depth))
            return out
        if kind == "enum":
            return "long"
        if kind == "fixed":
            name = f"f{node.index}"
            if name in self.defined:
                return name
            self.defined.add(name)
            return {"type": "fixed", "name": name, "size": node.size}
        return kind

    def too_deep(self) -> object:
        name = "too_deep"
        if name in self.defined:
            return name
        self.defined.add(name)
        return {"type": "record", "name": name, "fields": [{"name": "x", "type": []}]}


# ---------------------------------------------------------------------------------------
# Values


def _branch(node: _Node, value: object, records: dict[str, _Node]) -> tuple[_Node, object]:
    """The union branch a raw value came from, and the value (a wrapper's unwrapped)."""
    if type(value) is tuple:
        name, inner = value
        target = records[name]
        if name.startswith("u"):
            return target, inner["v"]
        return target, (name, inner)
    t = type(value)
    for branch in node.branches:
        if _PY_TYPE[branch.kind] is t:
            return branch, value
    raise Malformed("a union value of no branch")  # not reached: fastavro chose one


def _fields(value: object) -> list:
    """A record's field values in order (a union's record comes as (name, dict))."""
    if type(value) is tuple:
        value = value[1]
    return list(value.values())


def _integer_text(value: int, logical: tuple | None) -> str:
    """An ``int``/``long`` by its logical type (docs/formats/datastream-avro.md)."""
    if logical is None:
        return str(value)
    kind = logical[0]
    if kind == "date":
        return date_text(value)
    if kind == "time":
        return time_text(value, logical[1])
    return infinity_text(value) or timestamp_text(value, logical[1], logical[2])


class _Renderer:
    """Text and compact JSON of raw fastavro values, by compiled node (rust's ``text_value``
    and ``json_value``)."""

    def __init__(self, records: dict[str, _Node]) -> None:
        self.records = records
        # The output limit of the file being read, and the limits it comes from.
        self.limit = DEFAULT.output_floor_bytes
        self.limits = DEFAULT

    def text(self, node: _Node, value: object) -> str | None:
        kind = node.kind
        if kind == "union":
            if value is None:
                return None
            node, value = _branch(node, value, self.records)
            kind = node.kind
        if value is None:
            return None
        if kind == "string":
            return value
        if kind in ("int", "long"):
            return _integer_text(value, node.logical)
        if kind == "boolean":
            return "true" if value else "false"
        if kind == "double":
            return f64_text(value)
        if kind == "float":
            return f32_text(value)
        if kind in ("bytes", "fixed"):
            if node.logical is not None:
                unscaled = int.from_bytes(value, "big", signed=True)
                return unscaled_decimal_text(unscaled, node.logical[1])
            return base64_text(value)
        if kind == "enum":
            if not 0 <= value < len(node.symbols):
                raise Malformed(f"enum index {value}")
            return node.symbols[value]
        if kind == "array":
            return self.json(node, value)
        if kind == "record":
            return self.record_text(node, _fields(value))
        return None  # null

    def record_text(self, node: _Node, values: list) -> str | None:
        shape = node.shape
        kind = shape[0]
        if kind == "plain":
            return self.record_json(node, values)
        if kind == "pgarray":
            nested = self.json(node.fields[shape[1]][1], values[shape[1]])
            if nested != "null":
                return nested
            return self.text(node.fields[shape[2]][1], values[shape[2]])
        if kind == "varchar":
            return self.text(node.fields[shape[1]][1], values[shape[1]])
        if kind == "datetime":
            return datetime_text(values[shape[1]], values[shape[2]])
        if kind == "timestampTz":
            ts, offset = values[shape[1]], values[shape[2]]
            infinite = infinity_text(ts)
            if infinite is not None:
                return infinite
            shift = offset * 1000
            if not _I64[0] <= shift <= _I64[1] or not _I64[0] <= ts + shift <= _I64[1]:
                raise Malformed(f"timestampTz {ts} {offset} is out of range")
            return offset_timestamp_text(ts + shift, offset)
        if kind == "timeTz":
            return time_text(values[shape[1]], 6) + offset_text(values[shape[2]])
        return interval_text(values[shape[1]], values[shape[2]], values[shape[3]])

    def json(self, node: _Node, value: object) -> str:
        kind = node.kind
        if kind == "union":
            if value is None:
                return "null"
            node, value = _branch(node, value, self.records)
            kind = node.kind
        if value is None:
            return "null"
        if kind == "array":
            items = node.items
            parts = []
            size = 0
            for v in value:
                part = self.json(items, v)
                # Items may repeat long field names or symbols: bounded as the file's events.
                size += len(part)
                if size > self.limit:
                    raise Malformed(self.limits.over_output(self.limit, "the file's"))
                parts.append(part)
            return "[" + ",".join(parts) + "]"
        if kind == "record":
            values = _fields(value)
            shape = node.shape
            if shape[0] == "plain":
                return self.record_json(node, values)
            if shape[0] == "pgarray":
                nested = self.json(node.fields[shape[1]][1], values[shape[1]])
                if nested != "null":
                    return nested
                return self.json(node.fields[shape[2]][1], values[shape[2]])
            if shape[0] == "varchar":
                return self.json(node.fields[shape[1]][1], values[shape[1]])
            return json_string(self.record_text(node, values))
        if kind in ("int", "long") and node.logical is None:
            return str(value)
        if kind == "boolean":
            return "true" if value else "false"
        text = self.text(node, value)
        if kind in ("float", "double"):
            return float_json(text)
        return json_string(text)

    def record_json(self, node: _Node, values: list) -> str:
        parts = [
            json_string(name) + ":" + self.json(field, value)
            for (name, field), value in zip(node.fields, values, strict=True)
        ]
        return "{" + ",".join(parts) + "}"


# ---------------------------------------------------------------------------------------
# Events


def _nullable(node: _Node, ok) -> bool:
    if node.kind == "union":
        return all(b.kind == "null" or ok(b) for b in node.branches)
    return ok(node)


def _integer(node: _Node) -> bool:
    return _nullable(node, lambda n: n.kind in ("int", "long"))


def _nullable_record(node: _Node) -> _Node | None:
    if node.kind == "record":
        return node
    if node.kind == "union":
        records = [b for b in node.branches if b.kind == "record"]
        if records and all(b is records[0] or b.kind == "null" for b in node.branches):
            return records[0]
    return None


# --- the schema pass: the payload's types as the schema spells them ----------------------
# (rust/formats/datastream_avro/plan.rs, `payload_types`; docs/types.md)


def _str(value: object) -> str | None:
    return value if type(value) is str else None


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _non_null(ty: object) -> object:
    """A union of ``null`` and one other type as that type (``None`` for other unions)."""
    if not isinstance(ty, list):
        return ty
    others = [b for b in ty if b != "null" or type(b) is not str]
    return others[0] if len(others) == 1 else None


def _spell(ty: object, field: dict | None, named: dict[str, str]) -> str:
    if isinstance(ty, list):
        only = _non_null(ty)
        if only is not None:
            return _spell(only, None, named)
        if all(type(b) is str and b == "null" for b in ty):
            return "null"
        for branch in ty:
            _spell(branch, None, named)
        return "union"
    if type(ty) is str:
        base, holder = ty, None
    elif isinstance(ty, dict):
        base = _str(ty.get("type"))
        if base is None:
            return "union"
        holder = ty
    else:
        return "union"
    kind = named.get(_short(base))
    if kind is not None:
        return f"record {_short(base)}" if kind == "record" else kind
    if base in ("record", "error"):
        name = (_str(holder.get("name")) if holder is not None else None) or ""
        named[_short(name)] = "record"
        fields = holder.get("fields") if holder is not None else None
        for f in fields if isinstance(fields, list) else ():
            if isinstance(f, dict) and "type" in f:
                _spell(f["type"], f, named)
        return f"record {_short(name)}"
    if base in ("enum", "fixed"):
        name = _str(holder.get("name")) if holder is not None else None
        if name is not None:
            named[_short(name)] = base
        return _with_logical(base, holder, None)
    if base == "array":
        if holder is not None and "items" in holder:
            _spell(holder["items"], None, named)
        return "array"
    if base == "map":
        return "map"
    return _with_logical(base, holder, field)


def _with_logical(base: str, holder: dict | None, field: dict | None) -> str:
    source = holder if holder is not None and "logicalType" in holder else None
    if source is None and field is not None and "logicalType" in field:
        source = field
    if source is None:
        return base
    logical = _str(source.get("logicalType"))
    if logical is None:
        return base
    if logical == "decimal":
        precision, scale = source.get("precision"), source.get("scale")
        precision = precision if type(precision) is Number else ""
        scale = scale if type(scale) is Number else "0"
        return f"{base} decimal({precision},{scale})"
    return f"{base} {logical}"


def _payload_types(document: object) -> list[tuple[str, str]] | None:
    """The ``payload`` record's fields and their types as sent, or ``None``."""
    fields = document.get("fields") if isinstance(document, dict) else None
    if not isinstance(fields, list):
        return None
    named: dict[str, str] = {}
    payload = None
    for field in fields:
        if not isinstance(field, dict):
            continue
        is_payload = _str(field.get("name")) == "payload"
        if "type" not in field:
            continue
        if is_payload:
            payload = field["type"]
            break
        _spell(field["type"], None, named)
    if payload is None:
        return None
    payload = _non_null(payload)
    if not isinstance(payload, dict) or _str(payload.get("type")) != "record":
        return None
    name = _str(payload.get("name"))
    if name is not None:
        named[_short(name)] = "record"
    columns = payload.get("fields")
    if not isinstance(columns, list):
        return None
    out = []
    for column in columns:
        name = _str(column.get("name")) if isinstance(column, dict) else None
        if name is None or "type" not in column:
            return None
        out.append((name, _spell(column["type"], column, named)))
    return out


class _Plan:
    """A schema compiled for events (rust ``Plan``): fastavro's parsed canonical schema and
    the roles of the fields."""

    def __init__(self, schema_json: bytes, limits: Limits) -> None:
        compiler = _Compiler()
        document = parse(schema_json, limits)
        root = compiler.node(document, "")
        # The schema pass: the payload's fields and their types as spelled in the schema.
        self.payload_types = _payload_types(document)
        _check_arrays(compiler.nodes)
        if root.kind != "record":
            raise Malformed("schema: the top-level type is not a record")
        self.root = root
        self.meta: _Node | None = None
        self.payload: _Node | None = None
        for name, node in root.fields:
            if name in ("read_timestamp", "source_timestamp") and not _integer(node):
                raise Malformed(f"schema: {name}: expected a long")
            if name in ("source_metadata", "payload"):
                record = _nullable_record(node)
                if record is None:
                    raise Malformed(f"schema: {name}: expected a record")
                if name == "payload":
                    self.payload = record
                else:
                    self.meta = record
                    for field, f in record.fields:
                        if field in _POSITIONS and not _integer(f):
                            raise Malformed(f"schema: source_metadata.{field}: expected a long")
                        if field == "primary_keys" and not _nullable(
                            f, lambda n: n.kind == "array" and n.items.kind == "string"
                        ):
                            raise Malformed(
                                "schema: source_metadata.primary_keys: expected an array of strings"
                            )
        canonical = _Canonical(root, limits.max_avro_depth)
        # Data can reach the unreadable record only by nesting too deep (fastavro then
        # raises IndexError on its empty union).
        self.too_deep = "too_deep" in canonical.defined
        self.renderer = _Renderer(canonical.records)
        self.parsed = fastavro.parse_schema(canonical.schema)


def _unsigned(value: int | None, path: str) -> int | None:
    if value is not None and value < 0:
        raise Malformed(f"{path}: expected a non-negative integer, got {value}")
    return value


def _millis(value: int | None, path: str) -> int | None:
    if value is None:
        return None
    if not -_MAX_MS <= value <= _MAX_MS:
        raise Malformed(f"{path}: {value} milliseconds is out of range")
    return value * 1000


def _size(text: str | None) -> int:
    if text is None:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8"))


_HEX = Hints(hex=True)


def _hints(row: tuple) -> Hints | None:
    """Typed mode: MySQL BLOB/BINARY values are hex text in Datastream's files."""
    read_method = dict(row[16] or ()).get("read_method") or ""
    return _HEX if read_method.startswith("mysql") else None


class DatastreamAvro:
    """Decodes ``datastream-avro`` files: one object-container file, many events. Keeps
    compiled schemas by their JSON text."""

    name = FORMAT
    pending = 0

    def __init__(self, *, limits: Limits = DEFAULT) -> None:
        self._plans: dict[bytes, _Plan] = {}
        self._limits = limits

    def decode(self, raw: bytes, key: str | None, ordinal: int, sink: EventSink) -> None:
        """Decodes one file into ``sink``: all of its events, or one error row."""
        schemas = [] if sink.schema_pass else None
        try:
            rows = self._file(raw, schemas)
            if sink.typed is not None:
                rows = sink.convert(rows, [_hints(row) for row in rows])
        except (Malformed, Unconvertible) as exc:
            sink.error(ordinal, raw, str(exc), getattr(exc, "table", None))
            return
        except (EOFError, IndexError, UnicodeDecodeError, ValueError, TypeError) as exc:
            sink.error(ordinal, raw, f"invalid Avro data: {type(exc).__name__}: {exc}")
            return
        sink.events(rows, ordinal, schemas=schemas)

    def finish(self, sink: EventSink) -> None:
        """End of input: nothing is buffered."""

    def _plan(self, schema: bytes) -> _Plan:
        plan = self._plans.get(schema)
        if plan is None:
            try:
                plan = _Plan(schema, self._limits)
            except Malformed as exc:
                raise Malformed(f"{exc}") from None
            if len(self._plans) >= _CACHED_SCHEMAS:
                self._plans.clear()
            self._plans[schema] = plan
        return plan

    def _file(self, buf: bytes, schemas: list | None = None) -> list[tuple]:
        """The events of one file; in the schema pass (``schemas`` a list), each one's wire
        schema is appended to ``schemas`` and the output bytes are not counted."""
        schema, codec, sync, pos = _header(buf)
        try:
            plan = self._plan(schema)
        except Malformed as exc:
            message = str(exc)
            if not message.startswith("schema:"):
                message = f"avro.schema: {message}"
            raise Malformed(message) from None
        limits = self._limits
        budget = limits.inflate_limit(len(buf))
        output_limit = limits.output_limit(len(buf))
        plan.renderer.limit = output_limit
        plan.renderer.limits = limits
        max_items = limits.max_items
        records = 0
        output = 0
        rows: list[tuple] = []
        index = 0
        read = fastavro.schemaless_reader
        parsed = plan.parsed
        size = len(buf)
        while pos < size:
            at = pos
            count, pos = _long(buf, pos)
            length, pos = _long(buf, pos)
            if count < 0 or length < 0:
                raise Malformed(f"block at byte {at}: negative count {count} or size {length}")
            data, pos = _take(buf, pos, length)
            if size - pos < 16:
                raise Malformed(f"block at byte {at}: truncated before its sync marker")
            if buf[pos : pos + 16] != sync:
                raise Malformed(f"block at byte {at}: sync marker does not match the header's")
            pos += 16
            if codec != "null":
                data = _decompress(codec, data, budget, limits)
                budget -= len(data)
            if count > len(data):
                raise Malformed(f"block {index}: {count} records in {len(data)} bytes")
            records += count
            if records > max_items:
                what = f"the file has more than {max_items:,} records"
                raise Malformed(limits.over("max_items", what))
            stream = io.BytesIO(data)
            for _ in range(count):
                try:
                    record = read(stream, parsed, None, return_record_name=True)
                except IndexError:
                    if not plan.too_deep:
                        raise
                    depth = limits.max_avro_depth
                    what = f"values nested more than {depth} records and arrays deep"
                    raise Malformed(limits.over("max_avro_depth", what)) from None
                row, bytes_out = self._event(plan, list(record.values()))
                if schemas is not None:
                    image = row[13] if row[13] is not None else row[14]
                    schemas.append(
                        None
                        if image is None or plan.payload_types is None
                        else _schemas.widen(
                            _schemas.typed("avro", plan.payload_types, row[12]), image
                        )
                    )
                else:
                    output += bytes_out
                    if output > output_limit:
                        raise Malformed(limits.over_output(output_limit, "the file's"))
                rows.append(row)
            left = len(data) - stream.tell()
            if left:
                raise Malformed(f"block {index}: {left} bytes left after its {count} records")
            index += 1
        return rows

    def _event(self, plan: _Plan, values: list) -> tuple[tuple, int]:
        render = plan.renderer
        text_of = render.text
        uuid = read_method = read_ts = source_ts = None
        meta: dict[str, str | int | None] = {}  # source_metadata's fields, read
        keys: list[str] = []
        sort_numbers: list[int] | None = None
        image = None
        metadata: list[tuple[int, str, str]] = []
        for (name, node), value in zip(plan.root.fields, values, strict=True):
            if name == "uuid":
                uuid = text_of(node, value)
            elif name == "read_timestamp":
                read_ts = _millis(value, name)
            elif name == "source_timestamp":
                source_ts = _millis(value, name)
            elif name == "source_metadata":
                if value is None:
                    continue
                for (field, f), v in zip(plan.meta.fields, _fields(value), strict=True):
                    if field == "primary_keys":
                        keys = list(v) if v else []
                        continue
                    if field in _POSITIONS:
                        read = _unsigned(v, f"source_metadata.{field}")
                        shown = None if read is None else str(read)
                    else:
                        read = shown = text_of(f, v)
                    meta[field] = read
                    if shown is not None and field not in _COLUMNS:
                        metadata.append((5, field, shown))
            elif name == "payload":
                if value is None:
                    continue
                image = [
                    (field, text_of(f, v))
                    for (field, f), v in zip(plan.payload.fields, _fields(value), strict=True)
                ]
            elif name in _LEADING:
                t = text_of(node, value)
                if name == "read_method":
                    read_method = t
                if t is not None:
                    metadata.append((_LEADING.index(name), name, t))
            elif name == "sort_keys":
                rendered = render.json(node, value)
                if rendered != "null":
                    metadata.append((4, name, rendered))
                sort_numbers = self._sort_numbers(plan, node, value)
            else:
                t = text_of(node, value)
                if t is not None:
                    metadata.append((6, name, t))

        get = meta.get
        change = get("change_type")
        op, position, sequence = order(read_method, change, source_ts, sort_numbers,
                                       get("log_file"), get("log_position"), get("scn"),
                                       get("rs_id"), get("ssn"), get("lsn"))  # fmt: skip
        meta_map: dict[str, str] = {}
        for rank in range(7):
            for r, key, value in metadata:
                if r == rank and key not in meta_map:
                    meta_map[key] = value
        source_table = get("table")
        if source_table is None:
            collection = get("collection")
            source_table = collection if collection is not None else get("object_name")
        before, after = (image, None) if op in ("delete", "update_before") else (None, image)
        size = sum(_size(k) + _size(v) for k, v in meta_map.items())
        if image:
            size += sum(_size(k) + _size(v) for k, v in image)
        row = (
            FORMAT, op, change, get("database"), get("schema"), source_table, source_ts,
            read_ts, get("tx_id"), position, sequence, uuid, keys or None, before, after, None,
            list(meta_map.items()) or None, None, None,
        )  # fmt: skip
        return row, size

    @staticmethod
    def _sort_numbers(plan: _Plan, node: _Node, value: object) -> list[int] | None:
        """``sort_keys``' items as integers while they all are (rust ``sort_keys``)."""
        if node.kind == "union":
            if value is None:
                return None
            node, value = _branch(node, value, plan.renderer.records)
        if node.kind != "array" or value is None:
            return None
        numbers = []
        for item in value:
            branch, v = (node.items, item)
            if branch.kind == "union":
                if v is None:
                    return None
                branch, v = _branch(branch, v, plan.renderer.records)
            if branch.kind not in ("int", "long") or branch.logical is not None or v < 0:
                return None
            numbers.append(v)
        return numbers or None
