"""Resource limits (docs/events.md, "Limits"): each limit at its default where a test can
afford the input, and at a changed value, just under and just over, on both engines with
equal batches. Over a limit, a message is one error row naming the limit, its value and
how to change it; its raw bytes are kept."""

from __future__ import annotations

import dataclasses
import io

import fastavro
import pyarrow as pa
import pytest
from compare import assert_same_events
from test_datastream_avro import _DEEP, _one
from test_tencent_dts_rules import BEGIN, INSERT, dml, entries_bytes, entry, envelope, split, text

import cdc_decode
from cdc_decode import Limits
from cdc_decode.generate import generate

MiB = 1 << 20


def both(values, format: str, limits: Limits | None = None, **options) -> pa.RecordBatch:
    """The batch of ``values``, equal on both engines (but for error wording)."""
    native = cdc_decode.decode(values, format, limits=limits, **options)
    python = cdc_decode.decode(values, format, limits=limits, engine="python", **options)
    assert_same_events(native, python)
    for batch in (native, python):
        assert batch.column("error").null_count == native.column("error").null_count
    return native


def errors(batch: pa.RecordBatch) -> list[str | None]:
    return batch.column("error").to_pylist()


def assert_over(batch: pa.RecordBatch, raw: bytes, name: str, value: str) -> None:
    """``batch`` is the one error row of ``raw``, naming limit ``name`` = ``value``."""
    assert batch.num_rows == 1
    row = batch.to_pylist()[0]
    assert (row["op"], row["raw"]) == ("error", raw)
    assert f"over {name} = {value} (Decoder(limits=cdc_decode.Limits(...)))" in row["error"]


def over_in_both(values, format: str, limits: Limits, name: str, value: str, **options):
    """Both engines give one error row naming the limit (each engine's own wording)."""
    for engine in ("native", "python"):
        batch = cdc_decode.decode(values, format, limits=limits, engine=engine, **options)
        assert_over(batch, values[0], name, value)
    return both(values, format, limits, **options)


# ---------------------------------------------------------------------------------------
# The Limits class


def test_defaults_are_the_documented_ones():
    assert Limits().as_dict() == {
        "max_message_bytes": 256 * MiB,
        "max_json_depth": 128,
        "max_avro_depth": 64,
        "max_items": 10_000_000,
        "max_parts": 100_000,
        "max_pending_bytes": 1024 * MiB,
        "max_inflate_ratio": 64,
        "inflate_floor_bytes": 16 * MiB,
        "max_output_ratio": 256,
        "output_floor_bytes": 64 * MiB,
    }


def test_every_limit_is_in_the_docs_table():
    from conftest import ROOT

    docs = (ROOT / "docs" / "events.md").read_text()
    for field in dataclasses.fields(Limits):
        assert f"| `{field.name}` |" in docs, field.name


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"max_items": 0}, ValueError),
        ({"max_items": -1}, ValueError),
        ({"max_items": 1.5}, ValueError),
        ({"max_items": True}, ValueError),
        ({"max_items": 1 << 63}, ValueError),
        ({"max_bogus": 1}, TypeError),
    ],
)
def test_bad_limits(kwargs, error):
    with pytest.raises(error):
        Limits(**kwargs)


def test_limits_are_frozen_keyword_only_and_checked_by_decode():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_items = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        Limits(5)  # type: ignore[misc]
    with pytest.raises(TypeError, match="cdc_decode.Limits"):
        cdc_decode.decode([b"{}"], "debezium-json", limits={"max_items": 5})  # type: ignore[arg-type]


def test_the_native_core_refuses_an_unknown_limit_name():
    from cdc_decode._native import NativeDecoder

    with pytest.raises(ValueError, match="unknown limit 'max_bogus'"):
        NativeDecoder("debezium-json", "permissive", None, limits={"max_bogus": 1})


# ---------------------------------------------------------------------------------------
# max_message_bytes: every format of binary values


def _valid(format: str) -> bytes:
    """A generated message of ``format`` that decodes, with nested objects or arrays."""
    if format == "tencent-dts":  # generated streams have multi-part sets
        return envelope(dml(INSERT, ["a"], [([], [text("x")])]))
    values = [v for v in generate(format, messages=20, seed=5).values if v]
    return max(values, key=lambda v: (v.count(b"{") + v.count(b"["), -len(v)))


@pytest.mark.parametrize("format", [f for f in cdc_decode.FORMATS if f not in ("datahub-tuple",)])
def test_max_message_bytes(format):
    value = _valid(format)
    size = len(value)
    batch = both([value], format, Limits(max_message_bytes=size))
    assert batch.column("error").null_count == batch.num_rows > 0
    over_in_both([value], format, Limits(max_message_bytes=size - 1), "max_message_bytes",
                 f"{size - 1:,}")  # fmt: skip
    row = cdc_decode.decode([value], format, limits=Limits(max_message_bytes=size - 1))
    assert errors(row)[0].startswith(f"message is {size:,} bytes, over max_message_bytes")


def test_max_message_bytes_in_units():
    batch = cdc_decode.decode([b"x" * (2 * MiB + 1)], "debezium-json",
                              limits=Limits(max_message_bytes=2 * MiB))  # fmt: skip
    assert errors(batch) == [
        "message is 2,097,153 bytes, over max_message_bytes = 2 MiB "
        "(Decoder(limits=cdc_decode.Limits(...)))"
    ]


# ---------------------------------------------------------------------------------------
# JSON: nesting and items (the four JSON formats share one parser)


def _debezium(value: str) -> bytes:
    # The value is at level 3: the top object, after, the value.
    return ('{"op":"c","after":{"x":' + value + "}}").encode()


@pytest.mark.parametrize("limit", [128, 7])
def test_max_json_depth(limit):
    limits = None if limit == 128 else Limits(max_json_depth=limit)
    under = _debezium("[" * (limit - 2) + "]" * (limit - 2))
    assert errors(both([under], "debezium-json", limits)) == [None]
    over = _debezium("[" * (limit - 1) + "]" * (limit - 1))
    over_in_both([over], "debezium-json", limits, "max_json_depth", str(limit))


@pytest.mark.parametrize("container", ["array", "object"])
def test_max_items(container):
    def message(n):
        if container == "array":
            return _debezium("[" + ",".join(["0"] * n) + "]")
        # Duplicate keys count: the parser sees them before it drops them.
        return _debezium("{" + ",".join(f'"k{i % 3}":{i}' for i in range(n)) + "}")

    limits = Limits(max_items=50)
    assert errors(both([message(50)], "debezium-json", limits)) == [None]
    over_in_both([message(51)], "debezium-json", limits, "max_items", "50")
    # Commas inside strings are not items.
    assert errors(both([_debezium('["' + "," * 99 + '"]')], "debezium-json", limits)) == [None]


@pytest.mark.parametrize("format", ["datahub-blob", "tdsql-json", "datastream-json"])
def test_json_limits_apply_to_every_json_format(format):
    value = _valid(format)
    batch = both([value], format, Limits(max_json_depth=1))
    assert "max_json_depth = 1" in errors(batch)[0]


# ---------------------------------------------------------------------------------------
# tencent-dts: entries, rows, parts, bytes held


def test_dts_entries_and_rows():
    limits = Limits(max_items=4)
    four = envelope(*[entry(BEGIN, seq=i) for i in range(4)])
    assert errors(both([four], "tencent-dts", limits)) == [None] * 4
    five = envelope(*[entry(BEGIN, seq=i) for i in range(5)])
    over_in_both([five], "tencent-dts", limits, "max_items", "4")
    rows = [([], [text(str(i))]) for i in range(4)]
    assert errors(both([envelope(dml(INSERT, ["a"], rows))], "tencent-dts", limits)) == [None] * 4
    rows.append(([], [text("4")]))
    over_in_both([envelope(dml(INSERT, ["a"], rows))], "tencent-dts", limits, "max_items", "4")
    names = ["a", "b", "c", "d"]
    four = envelope(dml(INSERT, names, [([], [text(n) for n in names])]))
    assert errors(both([four], "tencent-dts", limits)) == [None]
    names.append("e")
    five = envelope(dml(INSERT, names, [([], [text(n) for n in names])]))
    over_in_both([five], "tencent-dts", limits, "max_items", "4")


@pytest.mark.parametrize("limit", [100_000, 3])
def test_dts_max_parts(limit, engine):
    limits = None if limit == 100_000 else Limits(max_parts=limit)
    payload = envelope(entry(BEGIN))
    under = envelope(data=payload, total=limit, index=0)
    decoder = cdc_decode.Decoder("tencent-dts", engine=engine, limits=limits)
    assert decoder.decode([under]).num_rows == 0
    assert decoder.stats()["pending"] == 1
    over = envelope(data=payload, total=limit + 1, index=0)
    batch = decoder.decode([over])
    assert_over(batch, over, "max_parts", f"{limit:,}")
    assert decoder.stats()["pending"] == 1  # the open set is untouched


def test_dts_max_parts_equal_batches():
    payload = envelope(entry(BEGIN))
    values = [envelope(data=payload, total=n, index=0) for n in (3, 4)]
    limits = Limits(max_parts=3)
    batch = both(values, "tencent-dts", limits)
    # The set of 4 parts is refused at once; the set of 3 stays open until the input ends.
    assert batch.column("op").to_pylist() == ["error", "error"]
    assert batch.column("raw").to_pylist() == [values[1], values[0]]
    for engine in ("native", "python"):
        out = cdc_decode.decode(values, "tencent-dts", limits=limits, engine=engine)
        assert "4 parts, over max_parts = 3" in errors(out)[0]
        assert "max_parts" not in errors(out)[1]


def test_dts_max_pending_bytes():
    parts = split(entries_bytes(*[entry(BEGIN, seq=i) for i in range(6)]), 3)
    held = sum(len(p) for p in parts)
    batch = both(parts, "tencent-dts", Limits(max_pending_bytes=held))
    assert errors(batch) == [None] * 6
    batch = both(parts, "tencent-dts", Limits(max_pending_bytes=held - 1))
    assert batch.column("op").to_pylist() == ["error"] * 3
    assert batch.column("raw").to_pylist() == parts
    native = cdc_decode.decode(parts, "tencent-dts", limits=Limits(max_pending_bytes=held - 1))
    assert f"over max_pending_bytes = {held - 1:,}" in errors(native)[2]
    # The bytes are held across keys: two sets open at once count together.
    keys = ["a", "b", "a", "b"]
    two = [parts[0], parts[0], parts[1], parts[1]]
    limits = Limits(max_pending_bytes=2 * len(parts[0]) + len(parts[1]))
    batch = both(two, "tencent-dts", limits, keys=keys)
    # Set b goes over at its second part (both its parts fail); set a is cut by the end.
    assert batch.column("op").to_pylist() == ["error"] * 4
    assert batch.column("raw").to_pylist() == [two[1], two[3], two[0], two[2]]
    native = cdc_decode.decode(two, "tencent-dts", limits=limits, keys=keys)
    assert "max_pending_bytes" in errors(native)[1]


def _amplifier(rows: int, pad: int) -> bytes:
    """A DMLEvent of ``rows`` tiny rows under event properties of ``pad`` bytes, which every
    row's metadata repeats: output many times the message's size."""
    changes = [([], [text("x")])] * rows
    return envelope(dml(INSERT, ["a"], changes, event_properties=[("p", "y" * pad)]))


def test_dts_output_limits_changed():
    value = _amplifier(300, 1000)
    output = _output_bytes(both([value], "tencent-dts"))
    assert output > 300_000 > 20 * len(value)
    fits = Limits(max_output_ratio=1, output_floor_bytes=output)
    assert errors(both([value], "tencent-dts", fits)) == [None] * 300
    tight = Limits(max_output_ratio=1, output_floor_bytes=output - 1)
    over_in_both([value], "tencent-dts", tight, "max_output_ratio", "1")
    # The same through a multi-part set: every part is an error row.
    parts = split(_entries(value), 4)
    batch = both(parts, "tencent-dts", tight)
    assert batch.column("op").to_pylist() == ["error"] * 4
    assert batch.column("raw").to_pylist() == parts


def test_dts_output_over_its_default():
    # 5,000 rows of 16 KiB metadata each: 82 MB of output from 91 KB, over 64 MiB.
    value = _amplifier(5_000, 16_384)
    assert 256 * len(value) < 64 * MiB
    over_in_both([value], "tencent-dts", None, "max_output_ratio", "256")


def _entries(envelope_bytes: bytes) -> bytes:
    from cdc_decode import _proto

    return _proto.Envelope.FromString(envelope_bytes).data


# ---------------------------------------------------------------------------------------
# datastream-avro: records, nesting, inflation, output


def _tree(levels: int) -> dict:
    value: dict = {"n": None}
    for _ in range(levels - 1):
        value = {"n": [value]}
    return value


@pytest.mark.parametrize("limit, levels", [(64, 31), (10, 4)])
def test_max_avro_depth(limit, levels):
    # Each level of the tree is a record and an array (two levels of nesting).
    limits = None if limit == 64 else Limits(max_avro_depth=limit)
    under = _one([{"name": "x", "type": _DEEP}], {"x": _tree(levels)})
    assert errors(both([under], "datastream-avro", limits)) == [None]
    over = _one([{"name": "x", "type": _DEEP}], {"x": _tree(levels + 1)})
    over_in_both([over], "datastream-avro", limits, "max_avro_depth", str(limit))


def _records(n: int) -> bytes:
    from test_datastream_avro import _ENVELOPE

    schema = {"type": "record", "name": "t", "fields": [
        *_ENVELOPE,
        {"name": "source_metadata", "type": {"type": "record", "name": "m", "fields": []}},
        {"name": "payload", "type": {"type": "record", "name": "p",
                                     "fields": [{"name": "id", "type": "long"}]}},
    ]}  # fmt: skip
    records = [{"uuid": str(i), "read_timestamp": 2, "source_timestamp": 1,
                "read_method": "mysql-cdc-binlog", "source_metadata": {}, "payload": {"id": i}}
               for i in range(n)]  # fmt: skip
    out = io.BytesIO()
    # Blocks of 4 records: the count is checked over all blocks together.
    fastavro.writer(out, fastavro.parse_schema(schema), records, sync_interval=1)
    return out.getvalue()


def test_avro_records_per_file():
    limits = Limits(max_items=9)
    assert errors(both([_records(9)], "datastream-avro", limits)) == [None] * 9
    over_in_both([_records(10)], "datastream-avro", limits, "max_items", "9")


def _inflated(data: bytes) -> int:
    """The bytes the blocks of an Avro file decompress to, all together."""
    return sum(len(block.bytes_.getvalue()) for block in fastavro.block_reader(io.BytesIO(data)))


def _big_string_file(n: int) -> bytes:
    return _one([{"name": "s", "type": "string"}], {"s": "a" * n}, codec="deflate")


def test_inflate_floor_at_its_default():
    # 16 MiB of payload, compressed to a few KiB: the floor, not the ratio, applies.
    probe = _big_string_file(MiB)
    overhead = _inflated(probe) - MiB
    exact = _big_string_file(16 * MiB - overhead)
    assert _inflated(exact) == 16 * MiB and 64 * len(exact) < 16 * MiB
    assert errors(both([exact], "datastream-avro")) == [None]
    over = _big_string_file(16 * MiB - overhead + 1)
    over_in_both([over], "datastream-avro", None, "max_inflate_ratio", "64")


def test_inflate_limits_changed():
    data = _big_string_file(100_000)
    size = _inflated(data)
    at_floor = Limits(max_inflate_ratio=1, inflate_floor_bytes=size)
    assert errors(both([data], "datastream-avro", at_floor)) == [None]
    below = Limits(max_inflate_ratio=1, inflate_floor_bytes=size - 1)
    over_in_both([data], "datastream-avro", below, "max_inflate_ratio", "1")
    # The ratio: the file's size times the ratio, when more than the floor.
    ratio = -(-size // len(data))
    by_ratio = Limits(max_inflate_ratio=ratio, inflate_floor_bytes=1)
    assert errors(both([data], "datastream-avro", by_ratio)) == [None]
    under_ratio = Limits(max_inflate_ratio=ratio - 1, inflate_floor_bytes=1)
    over_in_both([data], "datastream-avro", under_ratio, "max_inflate_ratio", f"{ratio - 1}")


def _output_bytes(batch: pa.RecordBatch) -> int:
    """The bytes of the keys and values of ``before``, ``after`` and ``metadata``."""
    total = 0
    for name in ("before", "after", "metadata"):
        for entries in batch.column(name).to_pylist():
            for key, value in entries or ():
                total += len(key.encode()) + len((value or "").encode())
    return total


def test_output_limits_changed():
    data = _big_string_file(100_000)
    output = _output_bytes(both([data], "datastream-avro"))
    assert output > 100_000 > len(data)
    fits = Limits(max_output_ratio=1, output_floor_bytes=output)
    assert errors(both([data], "datastream-avro", fits)) == [None]
    tight = Limits(max_output_ratio=1, output_floor_bytes=output - 1)
    over_in_both([data], "datastream-avro", tight, "max_output_ratio", "1")


# ---------------------------------------------------------------------------------------
# Through the public entry points


def test_decoder_and_spark_take_limits(spark):
    from cdc_decode import spark as cdc_spark

    small = Limits(max_message_bytes=10)
    values = [b'{"payload":{"op":"c"}}', None]
    decoder = cdc_decode.Decoder("debezium-json", limits=small)
    assert decoder.decode(values).column("op").to_pylist() == ["error", "tombstone"]
    df = spark.createDataFrame([(v,) for v in values], "value binary")
    for engine in ("native", "python"):
        rows = cdc_spark.decode(df, "debezium-json", limits=small, engine=engine).collect()
        assert [r["op"] for r in rows] == ["error", "tombstone"]
        assert "max_message_bytes = 10" in rows[0]["error"]
