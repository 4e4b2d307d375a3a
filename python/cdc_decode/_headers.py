"""Kafka record headers, as Spark's Kafka source gives them (``includeHeaders``:
``array<struct<key: string, value: binary>>``) or as a Kafka client does (a list of
``(name, bytes)`` pairs per record): the one value of a named header per record.

Two headers matter to the decoders: Tencent DTS's ``ShardId`` (a multi-part set's
reassembly key, cdc_decode.spark) and Debezium's ``__debezium.oldkey`` (the old key of a
key change, docs/formats/debezium-json.md)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

OLD_KEY = "__debezium.oldkey"
"""The header Debezium puts on the insert half of a key change: the old key, as the
header converter writes it."""


def first_header(headers: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """The value of each row's first header ``name`` (``binary``), null where a row has
    none. ``headers`` is a list of ``{key, value}`` structs per row."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    entries = pc.list_flatten(headers)
    rows = pc.list_parent_indices(headers)
    named = pc.fill_null(pc.equal(entries.field("key"), name), False)
    named_rows = rows.filter(named)
    values = entries.field("value").filter(named)
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    # index_in finds the first such header of each row.
    first = pc.index_in(
        pa.array(range(len(headers)), pa.int64()), value_set=named_rows.cast(pa.int64())
    )
    return values.take(first)


def header_values(headers: Any, name: str, length: int) -> pa.Array | None:
    """``first_header`` of ``headers`` given as Arrow or as Python lists (one list of
    ``(name, value)`` pairs, or ``None``, per record); ``None`` when no record has it.

    Raises:
        ValueError: not one entry per record.
        TypeError: entries that are not pairs of a name and bytes/str.
    """
    if headers is None:
        return None
    if not isinstance(headers, pa.Array | pa.ChunkedArray):
        rows = list(headers)
        found = []
        for row in rows:
            value = None
            for pair in row or ():
                try:
                    key, value_ = pair
                except (TypeError, ValueError):
                    raise TypeError(
                        "headers: each record's headers must be (name, value) pairs"
                    ) from None
                if key == name:
                    value = value_.encode() if isinstance(value_, str) else value_
                    break
            found.append(value)
        try:
            values = pa.array(found, pa.binary())
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError("headers: values must be bytes or str") from exc
    else:
        values = first_header(headers, name)
    if len(values) != length:
        raise ValueError(f"headers has {len(values)} entries for {length} values")
    return None if values.null_count == len(values) else values
