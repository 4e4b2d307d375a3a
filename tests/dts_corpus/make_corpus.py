"""Writes the bad ``tencent-dts`` inputs of this folder: each must give one error row.

Deterministic: the same bytes on every run (``tests/test_tencent_dts_corpus.py`` checks
that the files are what this script writes). Run from the repository root::

    PYTHONPATH=python .venv/bin/python tests/dts_corpus/make_corpus.py
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from cdc_decode import _proto as P

HERE = Path(__file__).resolve().parent


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _entries(
    table_name: str = "t", data_type: int = 13, bv: bytes = b"x", charset: str = ""
) -> bytes:
    """A serialized Entries: one INSERT of one column with the given value."""
    entries = P.Entries()
    item = entries.items.add()
    item.header.messageType = 2  # DML
    item.header.seqId = 7
    item.header.tableName = table_name
    event = item.event.dmlEvent
    event.columns.add(name="c", isKey=True)
    event.rows.add().newColumns.add(dataType=data_type, bv=bv, charset=charset)
    return entries.SerializeToString()


def _envelope(data: bytes, *, version: int = 1, total: int = 0, index: int = 0) -> bytes:
    return P.Envelope(version=version, total=total, index=index, data=data).SerializeToString()


def corpus() -> dict[str, bytes]:
    """The corpus: file name -> content."""
    good = _envelope(_entries())
    not_utf8 = _entries(table_name="t").replace(b"\x52\x01t", b"\x52\x01\xff")  # tableName
    assert not_utf8 != _entries(table_name="t")
    rnd = random.Random(20261122)
    cases = {
        # ProtoBuf that does not parse.
        "truncated_envelope": good[: len(good) // 2],
        "random_bytes": bytes([0xFF]) + rnd.randbytes(63),
        "invalid_wire_type_7": b"\x08\x01\x0f\x00",
        "end_group_without_start": b"\x08\x01\x0c",
        "mismatched_end_group": b"\x08\x01\x53\x08\x01\x64",
        "unterminated_group": b"\x08\x01\x53\x08\x01",
        "groups_nested_too_deeply": b"\x08\x01" + b"\x53" * 101 + b"\x54" * 101,
        "tag_of_six_bytes": b"\x88\x80\x80\x80\x80\x00\x01",
        "field_number_0": b"\x00\x01",
        # A known field with the wrong wire type is skipped (as upb does): here `version`
        # sent as bytes leaves the version at 0, which is an error.
        "version_sent_as_bytes": b"\x0a\x01\x01\x10\x01" + good[2:],
        # Length prefixes claiming gigabytes.
        "length_prefix_4_gib": b"\x08\x01\x22" + _varint(2**32 - 1) + b"data",
        "length_prefix_1_gib": b"\x08\x01\x22" + _varint(2**30) + b"data",
        "entries_length_prefix_2_gib": _envelope(b"\x0a" + _varint(2**31) + b"\x0a\x00"),
        # Envelope rules.
        "version_2": _envelope(_entries(), version=2),
        "index_not_below_total": _envelope(_entries(), total=3, index=3),
        "index_without_total": _envelope(_entries(), index=1),
        # Entries that do not decode.
        "entries_garbage": _envelope(rnd.randbytes(40) + b"\xff\xff\xff\xff\xff\xff"),
        "entries_truncated": _envelope(_entries()[:-3]),
        "string_field_not_utf8": _envelope(not_utf8),
        # Values that do not decode.
        "invalid_utf8_text": _envelope(_entries(bv=b"caf\xe9")),
        "invalid_gbk_text": _envelope(_entries(bv=b"\xd6\xd0\xce", charset="gbk")),
        "invalid_ascii_text": _envelope(_entries(bv=b"\x80", charset="ascii")),
        "unsupported_charset": _envelope(_entries(charset="big5")),
        "unknown_data_type": _envelope(_entries(data_type=99)),
    }
    return {f"{name}.bin": content for name, content in cases.items()}


def main(out_dir: Path = HERE) -> None:
    """Writes every corpus file into ``out_dir``."""
    for name, content in corpus().items():
        (out_dir / name).write_bytes(content)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
