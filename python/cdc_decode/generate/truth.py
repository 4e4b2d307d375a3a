"""What a generated database stream (``generate(fmt, table_count=N)``) must become in typed
tables: :func:`expected_value` says what one source value is in the column's mapped Spark
type for one format (docs/types.md), :func:`same` compares a typed value with it, and
:func:`differences` checks every table a stream was synced into against the source's final
values (``Stream.final_values``), value by value. ``make demo`` and the tests check the
tables with it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from .source import Column
from .stream import Stream

UTC = dt.timezone.utc


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


def _normal(value: Any) -> Any:
    """Spark gives ``timestamp`` values as naive datetimes of the session's zone (UTC in
    the tests): the aware expectation's UTC wall clock. pyspark 3.5 gives ``binary``
    values as ``bytearray`` (4.x as ``bytes``): bytes."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _want(fmt: str, column: Any, spark_type: str, value: Any) -> Any:
    want = expected_value(fmt, column, spark_type, value)
    if isinstance(want, tuple) and len(want) == 2 and want[0] in ("time", "json"):
        return want
    return _normal(want)


def differences(
    spark: Any,
    stream: Stream,
    fmt: str,
    target_of: dict[str, str],
    limit: int = 10,
    read: Callable[[Any, str], Any] | None = None,
) -> list[str]:
    """What differs between each synced table and the source's final values (empty: all
    equal). ``target_of``: source table -> its target; ``read``: the frame of a target's
    live rows (by default :func:`cdc_decode.spark.current_rows`, for the tables
    ``apply_changes`` writes)."""
    from .. import spark as cdc_spark

    read = read or cdc_spark.current_rows

    out: list[str] = []
    for name, (columns, rows) in stream.final_values.items():
        target = target_of.get(name)
        if target is None:
            out.append(f"{name}: not synced")
            continue
        try:
            frame = read(spark, target)
        except Exception as error:  # a table its sync failed to make
            out.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0]}")
            continue
        types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        key = stream.primary_keys[name]
        got = {}
        for row in frame.collect():
            values = row.asDict()
            got[tuple(_normal(values[k]) for k in key)] = values
        if len(got) != len(rows):
            out.append(f"{name}: {len(got)} rows, the source has {len(rows)}")
        for source_key, row in rows.items():
            at = tuple(
                _want(fmt, columns[c], types[c], v) for c, v in zip(key, source_key, strict=True)
            )
            have = got.get(at)
            if have is None:
                out.append(f"{name}: key {at} missing")
                continue
            for column, value in row.items():
                if column not in types:
                    out.append(f"{name}: no column {column}")
                    continue
                if column in stream.dropped.get(name, ()):
                    continue  # no longer the source's (Stream.dropped)
                want = _want(fmt, columns[column], types[column], value)
                if not same(want, _normal(have.get(column))):
                    out.append(f"{name} {at}: {column} is {have.get(column)!r}, want {want!r}")
        if len(out) >= limit:
            break
    return out[:limit]
