"""Ordering keys, as rust/sequence.rs encodes them: comparing two keys as unsigned bytes
gives the order of their tuples."""

from __future__ import annotations

_SIGN = 1 << 63


def u64(*numbers: int) -> bytes:
    """Unsigned integers: 8 bytes big-endian each."""
    return b"".join(n.to_bytes(8, "big") for n in numbers)


def i64(number: int) -> bytes:
    """A signed integer: 8 bytes big-endian with the sign bit flipped."""
    return (number + _SIGN).to_bytes(8, "big")


def text(value: str) -> bytes:
    """A string: its UTF-8 with 0x00 escaped as 0x00 0xFF, then 0x00 0x01."""
    return value.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x01"
