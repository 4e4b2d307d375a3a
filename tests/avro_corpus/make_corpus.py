"""Writes the bad ``datastream-avro`` files of this folder: each must give one error row.

Every file is written here byte by byte (no Avro library, no compressor whose output could
change between versions; Avro longs with the generator's encoder), so the same bytes come
out on every run (``tests/test_datastream_avro_corpus.py`` checks that the files are what
this script writes). Run from the repository root::

    PYTHONPATH=python .venv/bin/python tests/avro_corpus/make_corpus.py
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

from cdc_decode.generate.datastream_avro import avro_long as zigzag

HERE = Path(__file__).resolve().parent

SYNC = bytes(range(16))
"""The sync marker of every file here."""

ENVELOPE = [
    {"name": "uuid", "type": "string"},
    {"name": "read_timestamp", "type": "long"},
    {"name": "source_timestamp", "type": "long"},
    {"name": "read_method", "type": "string"},
]


def with_payload(*fields: dict) -> dict:
    """A Datastream-shaped schema: the envelope, then a payload record of ``fields``."""
    payload = {"type": "record", "name": "payload", "fields": list(fields)}
    return {
        "type": "record",
        "name": "t",
        "fields": [*ENVELOPE, {"name": "payload", "type": payload}],
    }


SCHEMA = with_payload({"name": "x", "type": "long"})
"""The schema of the files the broken ones are made from: a payload of one long."""


def string(value: bytes | str) -> bytes:
    value = value.encode() if isinstance(value, str) else value
    return zigzag(len(value)) + value


def header(schema: object | bytes = SCHEMA, codec: bytes | None = None) -> bytes:
    """Magic, the metadata map (``avro.schema``, then ``avro.codec`` when given), sync."""
    text = schema if isinstance(schema, bytes) else json.dumps(schema).encode()
    meta = [(b"avro.schema", text)] + ([(b"avro.codec", codec)] if codec is not None else [])
    body = b"".join(string(k) + string(v) for k, v in meta)
    return b"Obj\x01" + zigzag(len(meta)) + body + b"\x00" + SYNC


def block(count: int, data: bytes, size: int | None = None, sync: bytes = SYNC) -> bytes:
    return zigzag(count) + zigzag(len(data) if size is None else size) + data + sync


def record(x: int = 1, uuid: bytes = b"u", method: bytes = b"mysql-cdc-binlog") -> bytes:
    """One record of :data:`SCHEMA`."""
    return string(uuid) + zigzag(2) + zigzag(1) + string(method) + zigzag(x)


def good(codec: bytes | None = None, data: bytes | None = None) -> bytes:
    """A valid file of two records (the base the broken ones are made from)."""
    return header(codec=codec) + block(2, data if data is not None else record(1) + record(2))


class _Bits:
    """An RFC 1951 bit stream: fields least significant bit first, Huffman codes most
    significant bit first."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def bits(self, value: int, n: int) -> None:
        self.acc |= value << self.n
        self.n += n
        while self.n >= 8:
            self.out.append(self.acc & 0xFF)
            self.acc >>= 8
            self.n -= 8

    def code(self, code: int, n: int) -> None:
        self.bits(int(f"{code:0{n}b}"[::-1], 2), n)

    def bytes(self) -> bytes:
        return bytes(self.out) + (bytes([self.acc]) if self.n else b"")


def deflate_zeros(size: int) -> bytes:
    """Raw deflate of ``size`` zero bytes (a multiple of 258, plus one): one fixed-Huffman
    block of a literal 0, then matches of length 258 at distance 1. About 13 bits per 258
    bytes: a decompression bomb."""
    bits = _Bits()
    bits.bits(1, 1)  # BFINAL
    bits.bits(1, 2)  # BTYPE 01: fixed Huffman codes
    bits.code(0b00110000, 8)  # literal 0
    for _ in range((size - 1) // 258):
        bits.code(0b11000101, 8)  # length code 285: 258 bytes
        bits.code(0, 5)  # distance code 0: distance 1
    bits.code(0, 7)  # end of block (256)
    return bits.bytes()


def snappy_literal(data: bytes) -> bytes:
    """A raw snappy block of ``data`` (at most 60 bytes) as one literal."""
    assert len(data) <= 60
    return bytes([len(data), (len(data) - 1) << 2]) + data


def deflate_stored(data: bytes) -> bytes:
    """Raw deflate of ``data`` (under 64 KiB) as one stored block."""
    n = len(data)
    return b"\x01" + n.to_bytes(2, "little") + (n ^ 0xFFFF).to_bytes(2, "little") + data


def zstandard_raw(data: bytes) -> bytes:
    """A zstandard frame of ``data`` (under 256 bytes) as one raw block: magic, a
    single-segment header with a one-byte content size, a last-block header, the bytes."""
    assert len(data) < 256
    block_header = (len(data) << 3 | 1).to_bytes(3, "little")  # last block, raw
    return b"\x28\xb5\x2f\xfd\x20" + bytes([len(data)]) + block_header + data


def controls() -> dict[str, bytes]:
    """Valid files the broken ones are made from, one per codec used: each decodes to two
    events (the test checks it, so a broken file fails for the reason its name says)."""
    data = record(1) + record(2)
    crc = zlib.crc32(data).to_bytes(4, "big")
    return {
        "null": good(),
        "deflate": good(codec=b"deflate", data=deflate_stored(data)),
        "snappy": good(codec=b"snappy", data=snappy_literal(data) + crc),
        "zstandard": good(codec=b"zstandard", data=zstandard_raw(data)),
    }


def corpus() -> dict[str, bytes]:
    """The corpus: file name -> content."""
    valid = good()
    head = header()
    deep = {
        "type": "record",
        "name": "A",
        "fields": [{"name": "n", "type": ["null", {"type": "array", "items": "A"}]}],
    }
    deep_schema = with_payload({"name": "a", "type": deep})
    # 70 levels of A: each a union index 1, an array block of one item; then null and the
    # arrays' ends.
    nested = b"\x02\x02" * 70 + b"\x00" + b"\x00" * 70
    deep_record = string(b"u") + zigzag(2) + zigzag(1) + string(b"m") + nested
    # 5,000 levels: past the limit, and deep enough to overflow a recursive reader's stack
    # (fastavro recurses in C).
    very_deep_record = deep_record.replace(nested, b"\x02\x02" * 5000 + b"\x00" * 5001)
    array_schema = with_payload({"name": "a", "type": {"type": "array", "items": "long"}})
    enum_schema = with_payload(
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}
    )
    union_schema = with_payload({"name": "u", "type": ["null", "long"]})
    zeros = 17 << 20  # past the 16 MiB inflate floor
    zeros += (258 - (zeros - 1) % 258) % 258
    two = record(1) + record(2)
    crc = zlib.crc32(record(1)).to_bytes(4, "big")
    snappy = snappy_literal(record(1))
    # A payload field whose name is 8,000 bytes, over tiny records: the file's events
    # would take some 90 MB of keys, past the output cap (64 MiB or 256x the file).
    wide = {"type": "record", "name": "t", "fields": [{"name": "payload", "type": {
        "type": "record", "name": "payload",
        "fields": [{"name": "k" * 8000, "type": "boolean"}]}}]}  # fmt: skip
    # The same inside one value: an array of 11,000 one-byte records under such a name.
    wide_items = {"type": "record", "name": "t", "fields": [{"name": "payload", "type": {
        "type": "record", "name": "payload", "fields": [{"name": "a", "type": {
            "type": "array", "items": wide["fields"][0]["type"]}}]}}]}  # fmt: skip
    cases = {
        # The container.
        "empty": b"",
        "bad_magic": b"Obj\x02" + valid[4:],
        "truncated_magic": b"Obj",
        "truncated_header": valid[: len(head) // 2],
        "truncated_before_sync_marker": head[:-8],
        "no_schema": b"Obj\x01"
        + zigzag(1)
        + string(b"avro.codec")
        + string(b"null")
        + b"\x00"
        + SYNC,
        "header_map_count_huge": b"Obj\x01" + zigzag(1 << 40) + string(b"avro.schema"),
        "header_map_count_most_negative": b"Obj\x01" + b"\xff" * 9 + b"\x01" + b"\x00",
        "header_string_length_lies": b"Obj\x01"
        + zigzag(1)
        + string(b"avro.schema")
        + zigzag(1 << 40)
        + b"{}",
        "header_negative_string_length": b"Obj\x01" + zigzag(1) + zigzag(-5) + b"avro.schema",
        "unknown_codec": good(codec=b"lzma"),
        "wrong_sync_marker": head + block(2, record(1) + record(2), sync=b"\xee" * 16),
        "truncated_block": valid[:-20],
        "trailing_bytes": valid + b"\x02",
        "block_count_lies": head + block(1 << 40, record(1)),
        "block_count_negative": head + block(-1, record(1)),
        "block_size_past_the_end": head + block(2, record(1) + record(2), size=1 << 30)[:40],
        "bytes_left_after_records": head + block(1, record(1) + record(2)),
        "records_past_block_end": head + block(3, record(1) + record(2)),
        # Schemas.
        "schema_not_json": header(b"{'type': 'record'"),
        "schema_not_utf8": header(b'{"type": "\xff"}'),
        "schema_map_type": header(
            {
                "type": "record",
                "name": "t",
                "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}],
            }
        ),  # fmt: skip
        "schema_union_in_union": header(["null", ["long"]]),
        "schema_unknown_type": header(
            {"type": "record", "name": "t", "fields": [{"name": "a", "type": "Nope"}]}
        ),  # fmt: skip
        "schema_array_of_nothing": header(
            {
                "type": "record",
                "name": "t",
                "fields": [{"name": "a", "type": {"type": "array", "items": "null"}}],
            }
        ),  # fmt: skip
        "schema_not_a_record": header("long") + block(1, zigzag(1)),
        "schema_timestamp_not_a_long": header(
            {
                "type": "record",
                "name": "t",
                "fields": [{"name": "read_timestamp", "type": "string"}],
            }
        ),  # fmt: skip
        # Datums.
        "string_length_lies": head + block(1, zigzag(1 << 40) + b"ab" * 20),
        "string_negative_length": head + block(1, zigzag(-3) + b"abcdefgh" * 3),
        "string_not_utf8": head + block(1, record(uuid=b"\xc3\x28")),
        "array_count_huge": header(array_schema)
        + block(1, record(method=b"m")[:-1] + zigzag(1 << 40) + zigzag(1) + b"\x00"),
        "array_count_lies": header(array_schema)
        + block(1, record(method=b"m")[:-1] + zigzag(1000) + zigzag(1) * 3 + b"\x00"),
        "enum_index_out_of_range": header(enum_schema)
        + block(1, record(method=b"m")[:-1] + zigzag(3)),
        "union_index_out_of_range": header(union_schema)
        + block(1, record(method=b"m")[:-1] + zigzag(2) + zigzag(1)),
        "varint_truncated": head + block(1, record(1)[:-1] + b"\x80"),
        "nested_past_depth_limit": header(deep_schema) + block(1, deep_record),
        "nested_5000_deep": header(deep_schema) + block(1, very_deep_record),
        "timestamp_out_of_range": head
        + block(1, string(b"u") + zigzag(1 << 62) + zigzag(1) + string(b"m") + zigzag(1)),
        "events_past_output_cap": header(wide) + block(11_000, b"\x01" * 11_000),
        "array_text_past_output_cap": header(wide_items)
        + block(1, zigzag(11_000) + b"\x01" * 11_000 + b"\x00"),
        # Codecs.
        "deflate_bomb": good(codec=b"deflate", data=deflate_zeros(zeros)),
        "deflate_garbage": good(codec=b"deflate", data=b"\xff\xfe\xfd\xfc" * 4),
        "deflate_truncated": good(codec=b"deflate", data=deflate_zeros(10_000)[:-3]),
        "snappy_checksum_wrong": good(codec=b"snappy", data=snappy + b"\x00\x00\x00\x00"),
        "snappy_length_too_long": good(codec=b"snappy", data=b"\xff\xff\xff\xff\xff\x01" + crc),
        "snappy_shorter_than_checksum": good(codec=b"snappy", data=b"\x01\x02"),
        "zstandard_garbage": good(codec=b"zstandard", data=b"\x28\xb5\x2f\xfd" + b"\xff" * 12),
        "zstandard_cut_frame": good(codec=b"zstandard", data=zstandard_raw(two)[:-3]),
        "zstandard_bytes_after_frame": good(codec=b"zstandard", data=zstandard_raw(two) + b"\0"),
    }
    return {f"{name}.avro": value for name, value in cases.items()}


def main() -> int:
    for old in HERE.glob("*.avro"):
        old.unlink()
    for name, content in corpus().items():
        (HERE / name).write_bytes(content)
    print(f"wrote {len(corpus())} files to {HERE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
