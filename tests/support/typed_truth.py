"""What typed decoding with the wire's own schema must give for a generated database stream
(``generate(fmt, table_count=N)``): each table's rows, applied from the typed events, equal
to the source's own values (``Stream.final_values``) as each format carries them.

:func:`typed_rows` applies typed events (the ``after`` structs, without the columns
``after_absent`` names); :func:`expected_value` says what one source value must become in
the column's mapped Spark type, for one format (docs/types.md).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
from decimal import Decimal

import pyarrow as pa

from cdc_decode.generate.source import Column

UTC = dt.timezone.utc
UPSERTS = ("insert", "read", "update", "update_after")
REMOVES = ("delete", "update_before")


def typed_rows(batch: pa.RecordBatch, key: list[str]) -> dict[tuple, dict]:
    """One table's typed events applied in ``sequence`` order: key → row (column → value),
    a partial ``after`` keeping the columns it does not carry."""
    rows = batch.select(["op", "sequence", "before", "after", "after_absent"]).to_pylist()
    rows.sort(key=lambda r: (r["sequence"] is None, r["sequence"] or b""))
    state: dict[tuple, dict] = {}
    for row in rows:
        op = row["op"]
        if op in REMOVES:
            image = row["before"] if row["before"] is not None else row["after"]
            state.pop(tuple(image[k] for k in key), None)
        elif op in UPSERTS:
            absent = set(row["after_absent"] or ())
            after = {k: v for k, v in row["after"].items() if k not in absent}
            keyed = after if all(k in after for k in key) else row["before"]
            at = tuple(keyed[k] for k in key)
            state[at] = {**state.get(at, {}), **after}
    return state


def _f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def parse_time(text: str) -> dt.timedelta:
    """``[-]HH:MM:SS[.f]`` as a duration."""
    sign = -1 if text.startswith("-") else 1
    hours, minutes, seconds = text.lstrip("-").split(":")
    whole, _, fraction = seconds.partition(".")
    micros = int((fraction + "000000")[:6]) if fraction else 0
    total = dt.timedelta(hours=int(hours), minutes=int(minutes), seconds=int(whole))
    return sign * (total + dt.timedelta(microseconds=micros))


def _instant(column: Column, value) -> dt.datetime:
    """A date, datetime or timestamp as the UTC instant the formats send for it (a date at
    UTC midnight, a datetime's wall clock read as UTC)."""
    if column.type == "date":
        return dt.datetime(value.year, value.month, value.day, tzinfo=UTC)
    if column.type == "timestamp":
        return value.astimezone(UTC)
    return value.replace(tzinfo=UTC)


def _ms(moment: dt.datetime) -> dt.datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def expected_value(fmt: str, column: Column, spark: str, value):
    """What the typed column of ``spark`` type holds for the source's ``value`` of
    ``column`` in a stream of ``fmt``, or a ``(check, expected)`` pair whose ``check``
    compares the typed value itself (times and JSON documents, whose text differs by
    format)."""
    if value is None:
        return None
    kind = column.type
    if spark in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    if spark.startswith("decimal("):
        return Decimal(value)
    if spark == "float":
        return _f32(float(value))
    if spark == "double":
        return float(value)
    if spark == "boolean":
        return bool(value)
    if spark == "date":
        return value
    if spark == "timestamp_ntz":
        return value
    if spark == "timestamp":
        moment = _instant(column, value)
        return _ms(moment) if fmt == "datahub-blob" else moment
    if spark == "binary":
        if kind == "bit":  # Debezium's Bits: little-endian bytes
            bits = int(column.sql.split("(")[1].rstrip(")"))
            return value.to_bytes((bits + 7) // 8, "little")
        return bytes(value)
    if spark == "string":
        if kind == "time":
            return ("time", value)
        if kind in ("binary", "blob", "geometry") and fmt == "datastream-avro":
            return bytes(value).hex()  # Datastream sends MySQL binaries as hex text
        if kind == "geometry":  # Debezium's Geometry struct, as compact JSON
            return ("json", {"wkb": base64.b64encode(value[4:]).decode(), "srid": 4326})
        if kind in ("bigint", "decimal"):
            return str(value)
        return value
    raise AssertionError(f"no expectation for {spark}")


def same(expected, got) -> bool:
    """Whether a typed value is what :func:`expected_value` said."""
    if isinstance(expected, tuple) and len(expected) == 2 and expected[0] == "time":
        return isinstance(got, str) and parse_time(got) == expected[1]
    if isinstance(expected, tuple) and len(expected) == 2 and expected[0] == "json":
        return isinstance(got, str) and json.loads(got) == expected[1]
    if isinstance(expected, float) and isinstance(got, float):
        return expected == got
    return expected == got and type(expected) is type(got)
