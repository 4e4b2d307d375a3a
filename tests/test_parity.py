"""Parity: the Rust core and the Python fallback give equal batches on generated streams,
cut into batches of any size, and on corrupted copies of real messages. Every test runs for
each format in ``PARITY_FORMATS``: one generated stream per format."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest
from compare import assert_same_events

import cdc_decode
from cdc_decode.generate import generate

# The byte formats (datahub-tuple takes tables: tests/test_datahub_tuple.py).
PARITY_FORMATS = [
    "tencent-dts",
    "datahub-blob",
    "tdsql-json",
    "debezium-json",
    "datastream-json",
    "datastream-avro",
]


@pytest.fixture(scope="module", params=PARITY_FORMATS)
def stream(request):
    return generate(request.param, messages=12_000, seed=11)


def _decode_in_batches(values, engine, sizes, keys=None, mode="permissive", format="tencent-dts"):
    decoder = cdc_decode.Decoder(format, engine=engine, mode=mode)
    batches, ordinals, at = [], [], 0
    for size in sizes:
        chunk = values[at : at + size]
        chunk_keys = None if keys is None else keys[at : at + size]
        batch, ords = decoder.decode_indexed(chunk, keys=chunk_keys)
        batches.append(batch)
        ordinals.append(ords)
        at += size
    batch, ords = decoder.finish_indexed()
    batches.append(batch)
    ordinals.append(ords)
    table = pa.Table.from_batches(batches, schema=cdc_decode.event_schema())
    return table.combine_chunks(), pa.concat_arrays(ordinals), decoder.stats()


def _sizes(total, rng):
    sizes = []
    while total > 0:
        size = min(total, rng.choice([1, 2, 7, 100, 1000, 4096]))
        sizes.append(size)
        total -= size
    return sizes


def test_engines_agree_on_a_generated_stream(stream):
    assert stream.messages >= 10_000
    native = cdc_decode.decode(stream.values, stream.format, engine="native")
    python = cdc_decode.decode(stream.values, stream.format, engine="python")
    assert native.num_rows == stream.rows
    assert native.column("error").null_count == native.num_rows
    assert_same_events(native, python)


def test_engines_agree_across_batch_boundaries(stream):
    rng = random.Random(5)
    sizes = _sizes(len(stream.values), rng)
    native, native_ordinals, native_stats = _decode_in_batches(
        stream.values, "native", sizes, format=stream.format
    )
    python, python_ordinals, python_stats = _decode_in_batches(
        stream.values, "python", sizes, format=stream.format
    )
    assert_same_events(native, python)
    assert native_ordinals.equals(python_ordinals)
    assert native_stats == python_stats
    assert native_stats["messages"] == len(stream.values)
    assert native_stats["events"] == stream.rows
    # Batches do not change the result: the one-shot decode gives the same events.
    one_shot = cdc_decode.decode(stream.values, stream.format)
    assert native.equals(pa.Table.from_batches([one_shot]))


def _corrupt(value: bytes, rng: random.Random) -> bytes:
    data = bytearray(value)
    kind = rng.randrange(4)
    if kind == 0 and data:  # truncate
        return bytes(data[: rng.randrange(len(data))])
    if kind == 1 and data:  # flip bits
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 2 and data:  # overwrite a byte
        data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    # splice in random bytes
    at = rng.randrange(len(data) + 1)
    return bytes(data[:at] + rng.randbytes(rng.randint(1, 8)) + data[at:])


@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_engines_agree_on_corrupted_messages(stream, mode):
    rng = random.Random(99)
    values = [
        _corrupt(v, rng) if v is not None and rng.random() < 0.5 else v
        for v in stream.values[:3000]
    ]
    values += [None, b"", rng.randbytes(64)]
    keys = [rng.choice(["t/0", "t/1", None]) for _ in values]
    sizes = _sizes(len(values), rng)
    native, native_ordinals, native_stats = _decode_in_batches(
        values, "native", sizes, keys, mode, stream.format
    )
    python, python_ordinals, python_stats = _decode_in_batches(
        values, "python", sizes, keys, mode, stream.format
    )
    assert_same_events(native, python)
    assert native_ordinals.equals(python_ordinals)
    assert native_stats == python_stats
    # Every message is accounted for: its events, an error row, or a counted drop.
    errors = native.column("op").to_pylist().count("error")
    if mode == "permissive":
        assert errors == native_stats["errors"] > 0
        raws = [r for r in native.column("raw").to_pylist() if r is not None]
        assert all(r in values for r in raws)
    else:
        assert errors == 0 and native_stats["dropped"] == native_stats["errors"] > 0
    assert native_stats["pending"] == 0


def test_failfast_stops_at_the_same_message(stream):
    values = list(stream.values[:50])
    values[17] = b"\xff\xff\xff"
    for engine in ("native", "python"):
        with pytest.raises(cdc_decode.DecodeError, match=r"^message 17: "):
            cdc_decode.decode(values, stream.format, engine=engine, mode="failfast")


@pytest.mark.parametrize("kind", [pa.binary(), pa.large_binary()])
def test_a_slice_of_an_array_decodes_as_its_values(stream, kind):
    whole = pa.array(stream.values[:2000], kind)
    part = whole.slice(500, 1000)
    native = cdc_decode.decode(part, stream.format, engine="native")
    python = cdc_decode.decode(part, stream.format, engine="python")
    assert_same_events(native, python)
    expected = cdc_decode.decode(stream.values[500:1500], stream.format)
    assert native.equals(expected)


def test_failfast_counts_the_messages_seen_up_to_the_failure(stream):
    values = list(stream.values[:50])
    values[17] = b"\xff\xff\xff"
    stats = {}
    for engine in ("native", "python"):
        decoder = cdc_decode.Decoder(stream.format, engine=engine, mode="failfast")
        with pytest.raises(cdc_decode.DecodeError):
            decoder.decode(values)
        stats[engine] = decoder.stats()
    assert stats["native"] == stats["python"]
    assert stats["native"]["messages"] == 18


def test_both_engines_build_the_same_schema():
    from cdc_decode import _native

    assert _native.event_schema_native().equals(cdc_decode.event_schema(), check_metadata=True)
    assert list(_native.FORMATS) == list(cdc_decode.FORMATS)


@pytest.mark.parametrize("engine", cdc_decode.ENGINES)
def test_every_format_has_a_decoder_in_each_engine(engine):
    # The Python engine finds each format's module and class by the format's name.
    for format in cdc_decode.FORMATS:
        assert cdc_decode.Decoder(format, engine=engine).stats()["messages"] == 0


JSON_FORMATS = [f for f in PARITY_FORMATS if f not in ("tencent-dts", "datastream-avro")]

_ODD_VALUES = [None, True, 0, -1, "-1", 1.5, "x", "", [], {}, [1, "a"], {"k": None}, 2**70]


def _retype(doc, rng: random.Random):
    """``doc`` with one member somewhere replaced by a value of another type, or removed."""
    node = doc
    while isinstance(node, dict) and node:
        key = rng.choice(list(node))
        if not isinstance(node[key], dict) or rng.random() < 0.3:
            if rng.random() < 0.2:
                del node[key]
            else:
                node[key] = rng.choice(_ODD_VALUES)
            return doc
        node = node[key]
    return doc


@pytest.mark.parametrize("format", JSON_FORMATS)
def test_engines_agree_on_json_fields_of_the_wrong_type(format):
    rng = random.Random(7)
    values = []
    for value in generate(format, messages=1500, seed=5).values:
        if value is None:
            continue
        doc = json.loads(value)
        for _ in range(rng.randint(1, 3)):
            doc = _retype(doc, rng)
        values.append(json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode())
    values += [b"[]", b"1", b'"x"', b"null", b'{"payload":[]}', b'{"payload":{"op":[]}}']
    native = cdc_decode.decode(values, format, engine="native")
    python = cdc_decode.decode(values, format, engine="python")
    assert_same_events(native, python)
    errors = native.column("op").to_pylist().count("error")
    assert 0 < errors < len(values)
