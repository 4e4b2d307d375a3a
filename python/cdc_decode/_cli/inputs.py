"""The inputs ``cdc-decode decode`` and ``stats`` read, as chunks of messages.

Each kind (docs/cli.md, "Inputs") turns a path into :class:`Chunk` objects: the values
(bytes, ``None`` for a Kafka tombstone) or, for ``datahub-tuple``, a record batch, each
with where it came from. A problem with the input itself (a truncated ``values.bin``, a
dump line that is not JSON, a value that is not base64, a file that cannot be read) is an
:class:`InputError` in the chunk, which the commands print as an error line and count; it
never stops the command.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

KINDS = ("file", "values", "records", "lines", "datastream", "kcat", "kafka-json")
"""The input kinds ``--input`` names; ``auto`` picks one per path."""

CHUNK = 2000
"""Messages per chunk handed to the decoder."""

_NULL = 0xFFFFFFFF
_ARROW_MAGIC = b"ARROW1"
_AVRO_MAGIC = b"Obj\x01"
_MISSING = object()


@dataclass
class InputError:
    """A part of the input that is not a message: where, why, and its bytes."""

    where: str
    reason: str
    raw: bytes | None = None


@dataclass
class Chunk:
    """Some messages of one input, in order.

    Attributes:
        values: the message values (``None``: a tombstone), or ``None`` when ``records``.
        records: ``datahub-tuple`` records, or ``None``.
        wheres: where each message came from (``values.bin#17``, ``dump.jsonl:3``,
            ``orders/0@42``), one per value or record.
        keys: multi-part reassembly keys (``topic/partition``), or ``None``.
        offsets: ``(topic/partition, offset)`` of every Kafka record read (a bad one too),
            for Kafka dumps; ``None`` otherwise.
        errors: problems of the input met while reading this chunk.
        bytes_read: input bytes consumed, for progress.
    """

    values: list[bytes | None] | None = None
    records: pa.RecordBatch | None = None
    wheres: list[str] = field(default_factory=list)
    keys: list[str | None] | None = None
    offsets: list[tuple[str, int]] | None = None
    errors: list[InputError] = field(default_factory=list)
    bytes_read: int = 0

    def __len__(self) -> int:
        if self.records is not None:
            return self.records.num_rows
        return len(self.values or ())


def input_size(path: str) -> int:
    """The bytes a path holds (a tree: all its files), for a progress total; 0 for stdin."""
    if path == "-":
        return 0
    p = Path(path)
    try:
        if p.is_dir():
            for name in ("values.bin", "records.arrow"):
                if (p / name).is_file():
                    return (p / name).stat().st_size
            return sum(
                f.stat().st_size
                for f in p.rglob("*")
                if f.is_file() and f.suffix in (".avro", ".jsonl", ".json")
            )
        return p.stat().st_size
    except OSError:
        return 0


def _strip_comment(text: bytes) -> tuple[bytes, int]:
    """A leading ``/* ... */`` block (a license header on a copied fixture) removed; the
    number of lines it took, so line numbers stay those of the file."""
    stripped = text.lstrip()
    if stripped.startswith(b"/*"):
        end = stripped.find(b"*/")
        if end >= 0:
            head = len(text) - len(stripped) + end + 2
            return text[head:], text[:head].count(b"\n")
    return text, 0


def _first_line(data: bytes) -> bytes:
    body, _ = _strip_comment(data)
    for line in body.splitlines():
        if line.strip():
            return line.strip()
    return b""


def _is_json_object(line: bytes) -> dict | None:
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _values_fit(data: bytes) -> bool:
    """Whether the bytes are exactly a sequence of length-prefixed values."""
    at = 0
    count = 0
    while at < len(data):
        if at + 4 > len(data):
            return False
        (length,) = struct.unpack_from("<I", data, at)
        at += 4
        if length != _NULL:
            at += length
        count += 1
    return at == len(data) and count > 0


def sniff(path: str, head: bytes | None = None) -> str:
    """The input kind of one path, from its name and first bytes (docs/cli.md)."""
    p = Path(path)
    if path != "-" and p.is_dir():
        if (p / "values.bin").is_file():
            return "values"
        if (p / "records.arrow").is_file():
            return "records"
        return "datastream"
    name = p.name.lower()
    if name.endswith((".arrow", ".arrows", ".feather")):
        return "records"
    if name.endswith(".avro"):
        return "file"
    if name == "values.bin":
        return "values"
    if head is None:
        try:
            with open(path, "rb") as f:
                head = f.read(1 << 20)
        except OSError:
            return "file"  # reading it again reports the error
    if head.startswith(_ARROW_MAGIC):
        return "records"
    if head.startswith(_AVRO_MAGIC):
        return "file"
    first = _first_line(head)
    if first.startswith(b"{"):
        doc = _is_json_object(first)
        if doc is not None:
            if "value" in doc and ({"topic", "partition", "offset"} & doc.keys()):
                return "kafka-json"
            kafka = {"topic", "partition", "offset"} <= doc.keys()
            if kafka and isinstance(doc.get("payload"), str):  # kcat -J
                return "kafka-json"
            return "lines"
        # Not one object per line: a pretty-printed message is one message.
        return "file"
    if name.endswith(".bin") or _values_fit(head):
        return "values"
    return "file"


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as f:
        return f.read()


def _chunks_of_values(
    items: Iterator[tuple[bytes | None, str, int]],
) -> Iterator[Chunk]:
    chunk = Chunk(values=[])
    for value, where, size in items:
        chunk.values.append(value)
        chunk.wheres.append(where)
        chunk.bytes_read += size
        if len(chunk.values) >= CHUNK:
            yield chunk
            chunk = Chunk(values=[])
    if chunk.values or chunk.bytes_read:
        yield chunk


def _values(path: str, data: bytes) -> Iterator[Chunk]:
    label = path
    chunk = Chunk(values=[])
    at = 0
    index = 0
    while at < len(data):
        if at + 4 > len(data):
            chunk.errors.append(
                InputError(f"{label}#{index}", f"truncated length at byte {at}", data[at:])
            )
            chunk.bytes_read += len(data) - at
            break
        (length,) = struct.unpack_from("<I", data, at)
        if length == _NULL:
            value = None
            size = 4
        elif at + 4 + length > len(data):
            chunk.errors.append(
                InputError(
                    f"{label}#{index}",
                    f"value at byte {at} claims {length} bytes, {len(data) - at - 4} remain",
                    data[at:],
                )
            )
            chunk.bytes_read += len(data) - at
            break
        else:
            value = data[at + 4 : at + 4 + length]
            size = 4 + length
        chunk.values.append(value)
        chunk.wheres.append(f"{label}#{index}")
        chunk.bytes_read += size
        at += size
        index += 1
        if len(chunk.values) >= CHUNK:
            yield chunk
            chunk = Chunk(values=[])
    if chunk.values or chunk.errors or chunk.bytes_read:
        yield chunk


def _lines(path: str, data: bytes) -> Iterator[tuple[bytes | None, str, int]]:
    body, skipped = _strip_comment(data)
    for number, line in enumerate(body.split(b"\n"), start=1 + skipped):
        text = line.strip()
        if text:
            yield text, f"{path}:{number}", len(line) + 1


def _kcat(path: str, data: bytes, delimiter: bytes) -> Iterator[tuple[bytes | None, str, int]]:
    parts = data.split(delimiter)
    if parts and parts[-1] == b"":
        parts.pop()  # kcat ends every message with the delimiter, the last one too
    for index, part in enumerate(parts):
        yield part, f"{path}#{index}", len(part) + len(delimiter)


def _header_value(headers, name: str) -> str | None:
    """The first header ``name`` of a dump line: a list of ``{"key", "value"}`` or of
    pairs, or an object; values as text."""
    if isinstance(headers, dict):
        value = headers.get(name)
        return None if value is None else str(value)
    if isinstance(headers, list):
        for item in headers:
            if isinstance(item, dict) and item.get("key") == name:
                value = item.get("value")
                return None if value is None else str(value)
            if isinstance(item, list | tuple) and len(item) == 2 and item[0] == name:
                return None if item[1] is None else str(item[1])
    return None


def _kafka_json(path: str, data: bytes, first_line: int = 1) -> Iterator[Chunk]:
    body, skipped = _strip_comment(data) if first_line == 1 else (data, 0)
    chunk = Chunk(values=[], keys=[], offsets=[])
    for number, line in enumerate(body.split(b"\n"), start=first_line + skipped):
        text = line.strip()
        chunk.bytes_read += len(line) + 1
        if not text:
            continue
        where = f"{path}:{number}"
        doc = _is_json_object(text)
        if doc is None:
            chunk.errors.append(InputError(where, "dump line is not a JSON object", text))
            continue
        topic, partition, offset = doc.get("topic"), doc.get("partition"), doc.get("offset")
        stream = None
        if topic is not None or partition is not None:
            stream = f"{'' if topic is None else topic}/{'' if partition is None else partition}"
        if stream is not None and isinstance(offset, int):
            where = f"{stream}@{offset}"
            # The record is on the topic whether or not its value reads: no gap.
            chunk.offsets.append((stream, offset))
        value = doc.get("value", _MISSING)
        problem = None
        if value is _MISSING and "payload" in doc:  # kcat -J: the value as text
            value = doc["payload"]
            if isinstance(value, str):
                value = value.encode("utf-8", "surrogatepass")
            elif value is not None:
                problem = '"payload" is not a string'
        elif value is _MISSING:
            problem = 'dump line has no "value"'
        elif value is not None:
            if not isinstance(value, str):
                problem = '"value" is not a base64 string'
            else:
                try:
                    value = base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    problem = '"value" is not valid base64'
        if problem is not None:
            chunk.errors.append(InputError(where, problem, text))
            continue
        key = stream
        shard = _header_value(doc.get("headers"), "ShardId")
        if shard is not None:
            key = f"{stream or ''}/{shard}"
        chunk.values.append(value)
        chunk.wheres.append(where)
        chunk.keys.append(key)
        if len(chunk.values) >= CHUNK:
            yield chunk
            chunk = Chunk(values=[], keys=[], offsets=[])
    if chunk.values or chunk.errors or chunk.bytes_read:
        yield chunk


def _records(path: str) -> Iterator[Chunk]:
    p = Path(path)
    if p.is_dir():
        p = p / "records.arrow"
    try:
        source = pa.memory_map(str(p))
    except OSError as exc:
        yield Chunk(values=[], errors=[InputError(path, f"cannot read: {exc}")])
        return
    yield from _records_of(source, str(p))


def _records_of(source, p: str) -> Iterator[Chunk]:
    """The records of an Arrow IPC file or stream, in chunks."""
    path = p
    try:
        try:
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            source.seek(0)
            batches = iter(pa.ipc.open_stream(source))
        row = 0
        for batch in batches:
            for start in range(0, max(batch.num_rows, 1), CHUNK):
                part = batch.slice(start, CHUNK)
                wheres = [f"{p}#{row + i}" for i in range(part.num_rows)]
                row += part.num_rows
                yield Chunk(records=part, wheres=wheres, bytes_read=part.nbytes)
    except (OSError, pa.ArrowException) as exc:
        yield Chunk(values=[], errors=[InputError(path, f"not an Arrow file of records: {exc}")])


def _datastream(path: str, format: str | None) -> Iterator[Chunk]:
    """A Datastream tree: every ``*.avro`` file whole, or every line of ``*.jsonl`` /
    ``*.json`` files (which, when the format is not given: Avro if the tree has any)."""
    files = sorted(f for f in Path(path).rglob("*") if f.is_file())
    avro = [f for f in files if f.suffix == ".avro"]
    text = [f for f in files if f.suffix in (".jsonl", ".json")]
    use_avro = format == "datastream-avro" or (format != "datastream-json" and avro)
    if use_avro:
        for f in avro:
            yield from _one_file(str(f))
        return
    for f in text:
        try:
            data = f.read_bytes()
        except OSError as exc:
            yield Chunk(values=[], errors=[InputError(str(f), f"cannot read: {exc.strerror}")])
            continue
        items = _lines(str(f), data)
        yield from _chunks_of_values(items)


def _one_file(path: str) -> Iterator[Chunk]:
    try:
        data = _read(path)
    except OSError as exc:
        yield Chunk(values=[], errors=[InputError(path, f"cannot read: {exc.strerror or exc}")])
        return
    yield Chunk(values=[data], wheres=[path], bytes_read=len(data))


def read_input(
    path: str, kind: str, *, format: str | None = None, delimiter: bytes = b"\n"
) -> Iterator[Chunk]:
    """The chunks of one path read as ``kind`` (``auto``: :func:`sniff` decides).

    Yields:
        :class:`Chunk` objects; problems of the input are in their ``errors``.
    """
    if path == "-":
        yield from _stdin(kind, format, delimiter)
        return
    if not os.path.exists(path):
        yield Chunk(values=[], errors=[InputError(path, "no such file or directory")])
        return
    data = None
    if kind == "auto":
        kind = sniff(path)
    yield from _read_as(path, kind, data, format, delimiter)


def _stdin(kind: str, format: str | None, delimiter: bytes) -> Iterator[Chunk]:
    """Standard input. Lines, kcat output and dumps are decoded as they arrive (``kcat -C
    … | cdc-decode decode -``); the other kinds once it ends."""
    stream = sys.stdin.buffer
    head = b""
    if kind == "auto":
        # Enough to tell the kind: the first line, or what a pipe holds now.
        while b"\n" not in head and len(head) < 1 << 16:
            block = stream.read1(1 << 16)
            if not block:
                break
            head += block
        kind = sniff("-", head)
    if kind not in ("lines", "kcat", "kafka-json"):
        data = head + stream.read()
        if kind == "records":
            yield from _records_of(pa.BufferReader(data), "-")
        elif kind == "datastream":
            yield Chunk(values=[], errors=[InputError("-", "a Datastream tree is a folder")])
        else:
            yield from _read_as("-", kind, data, format, delimiter)
        return
    separator = delimiter if kind == "kcat" else b"\n"
    rest = b""
    count = 0  # messages (kcat) or lines so far
    block = head
    while True:
        if not block:
            block = stream.read1(1 << 16)
        ended = not block
        rest += block
        block = b""
        pieces = rest.split(separator)
        rest = pieces.pop()
        if ended and rest:
            pieces.append(rest)  # the last message, without its delimiter
            rest = b""
        if pieces:
            if kind == "kafka-json":
                yield from _kafka_json("-", b"\n".join(pieces), first_line=count + 1)
            else:
                items = (
                    ((p, f"-#{count + i}", len(p) + len(separator)) for i, p in enumerate(pieces))
                    if kind == "kcat"
                    else (
                        (p.strip(), f"-:{count + i + 1}", len(p) + 1)
                        for i, p in enumerate(pieces)
                        if p.strip()
                    )
                )
                yield from _chunks_of_values(items)
            count += len(pieces)
        if ended:
            return


def _read_as(
    path: str, kind: str, data: bytes | None, format: str | None, delimiter: bytes
) -> Iterator[Chunk]:
    """One file (or the bytes of standard input) read as ``kind``."""
    if kind == "records":
        yield from _records(path)
        return
    if kind == "datastream":
        if not Path(path).is_dir():
            yield Chunk(values=[], errors=[InputError(path, "a Datastream tree is a folder")])
            return
        yield from _datastream(path, format)
        return
    if kind == "file":
        if data is not None:
            yield Chunk(values=[data], wheres=[path], bytes_read=len(data))
        else:
            yield from _one_file(path)
        return
    if data is None:
        source = path
        if kind == "values" and Path(path).is_dir():
            source = str(Path(path) / "values.bin")
        try:
            data = _read(source)
        except OSError as exc:
            yield Chunk(values=[], errors=[InputError(path, f"cannot read: {exc.strerror or exc}")])
            return
        path = source
    if kind == "values":
        yield from _values(path, data)
    elif kind == "lines":
        yield from _chunks_of_values(_lines(path, data))
    elif kind == "kcat":
        yield from _chunks_of_values(_kcat(path, data, delimiter))
    elif kind == "kafka-json":
        yield from _kafka_json(path, data)
    else:
        raise ValueError(f"unknown input kind {kind!r}")


def parse_delimiter(text: str) -> bytes:
    """A delimiter as kcat's ``-D`` takes it: ``\\n``, ``\\r``, ``\\t``, ``\\0``,
    ``\\\\`` and ``\\xHH`` escapes, everything else as its UTF-8 bytes."""
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0", "\\": b"\\"}
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if nxt == "x" and i + 3 < len(text) + 0 and len(text[i + 2 : i + 4]) == 2:
                try:
                    out.append(int(text[i + 2 : i + 4], 16))
                    i += 4
                    continue
                except ValueError:
                    pass
        out += c.encode()
        i += 1
    if not out:
        raise ValueError("the delimiter is empty")
    return bytes(out)
