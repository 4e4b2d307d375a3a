"""Property tests for `datastream-avro`: Datastream Avro files of random tables (payload
fields of every Avro type Datastream writes, logical types included), random
source_metadata and codecs, written by fastavro, plus byte mutations of them (bit flips,
truncation, overwritten bytes, swapped ranges, spliced junk), give equal batches, ordinals
and stats on both engines.

The example count is `CDC_HYPOTHESIS_EXAMPLES` (300 by default, what `make test` runs).
"""

from __future__ import annotations

import io

import fastavro
import pyarrow as pa
from compare import assert_same_events
from conftest import PROPERTY_SETTINGS as SETTINGS
from hypothesis import given
from hypothesis import strategies as st

import cdc_decode

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)
DOUBLE = st.floats(allow_nan=True, allow_infinity=True)
FLOAT = st.floats(width=32, allow_nan=True, allow_infinity=True)


def _decimal(precision: int, scale: int):
    limit = 10**precision - 1
    return st.integers(-limit, limit).map(
        lambda n: n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)
    ), {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}


# (Avro type, strategy of its values), as Datastream writes them.
TYPES = [
    ("string", TEXT),
    ("long", LONG),
    ("int", INT),
    ("double", DOUBLE),
    ("float", FLOAT),
    ("boolean", st.booleans()),
    ("bytes", st.binary(max_size=8)),
    ("null", st.none()),
    ({"type": "int", "logicalType": "date"}, INT),
    ({"type": "long", "logicalType": "timestamp-micros"}, LONG),
    ({"type": "long", "logicalType": "timestamp-millis"}, LONG),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, LONG),
    ({"type": "long", "logicalType": "time-micros"}, st.integers(-(2**40), 2**40)),
    ({"type": "int", "logicalType": "time-millis"}, INT),
    ({"type": "string", "logicalType": "number"}, st.sampled_from(["1", "-0.5", "x", ""])),
    ({"type": "string", "logicalType": "uuid"}, TEXT),
    ({"type": "string", "logicalType": "json"}, st.sampled_from(['{"a":1}', "[]", "x"])),
    _decimal(10, 2)[::-1],
    _decimal(40, 0)[::-1],
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, st.sampled_from(["A", "B"])),
    ({"type": "fixed", "name": "F", "size": 2}, st.binary(min_size=2, max_size=2)),
    ({"type": "array", "items": "long"}, st.lists(LONG, max_size=3)),
    ({"type": "map", "values": "string"}, st.dictionaries(TEXT, TEXT, max_size=2)),
    (
        {
            "type": "record",
            "name": "interval",
            "fields": [
                {"name": "months", "type": "int"},
                {"name": "hours", "type": "int"},
                {"name": "micros", "type": "long"},
            ],
        },
        st.fixed_dictionaries({"months": INT, "hours": INT, "micros": LONG}),
    ),  # fmt: skip
    (
        {
            "type": "record",
            "name": "timeTz",
            "fields": [{"name": "time", "type": "long"}, {"name": "offset", "type": "int"}],
        },
        st.fixed_dictionaries({"time": LONG, "offset": INT}),
    ),  # fmt: skip
    (
        {
            "type": "record",
            "name": "r",
            "fields": [{"name": "x", "type": ["null", "double"]}, {"name": "s", "type": "string"}],
        },
        st.fixed_dictionaries({"x": st.none() | DOUBLE, "s": TEXT}),
    ),  # fmt: skip
]

METADATA = [
    ("database", "string", TEXT),
    ("schema", "string", TEXT),
    ("table", "string", TEXT),
    ("change_type", "string", st.sampled_from(
        ["INSERT", "UPDATE", "UPDATE-INSERT", "UPDATE-DELETE", "DELETE", "x"])),
    ("is_deleted", "boolean", st.booleans()),
    ("log_file", "string", TEXT),
    ("log_position", "long", LONG),
    ("primary_keys", {"type": "array", "items": "string"}, st.lists(TEXT, max_size=2)),
    ("tx_id", ["null", "string"], st.none() | TEXT),
    ("lsn", "string", st.sampled_from(["0/16B3748", "1A/FF", "x", ""])),
    ("scn", "long", LONG),
]  # fmt: skip

READ_METHODS = ["mysql-cdc-binlog", "mysql-backfill-fulldump", "oracle-cdc-logminer",
                "oracle_dump", "postgresql-cdc-wal", "sqlserver-cdc", "mongodb-cs",
                "x"]  # fmt: skip


# Strategies are built once, at import: hypothesis validates a new strategy object on its
# first draw, a cost paid per example when they were built inside the composites.
PAYLOAD_KINDS = st.lists(st.sampled_from(range(len(TYPES))), max_size=5)
METADATA_KINDS = st.lists(st.sampled_from(range(len(METADATA))), max_size=5, unique=True)
READ_TIMESTAMPS = st.integers(0, 2**41)
SOURCE_TIMESTAMPS = st.integers(-(2**41), 2**41)
READ_METHOD = st.sampled_from(READ_METHODS)
CODECS = st.sampled_from(["null", "null", "deflate", "snappy"])
SYNC_INTERVALS = st.sampled_from([16_000, 1])
MUTATIONS = st.sampled_from(["flip", "cut", "set", "swap", "insert"])
SET_BYTES = st.sampled_from([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF])
SPLICES = st.sampled_from([b"\x80\x80\x80\x80\x80\x40", b"\xff", b"\x00"])


@st.composite
def files(draw) -> bytes:
    """A Datastream Avro file: the envelope, random source_metadata and payload fields, one
    to four records, a random codec."""
    payload = draw(PAYLOAD_KINDS)
    nullable = [draw(st.booleans()) for _ in payload]
    meta = draw(METADATA_KINDS)
    fields = []
    for i, (kind, null) in enumerate(zip(payload, nullable, strict=True)):
        avro_type = TYPES[kind][0]
        # Named types once per file: a second use of a name refers to the first.
        if isinstance(avro_type, dict) and "name" in avro_type:
            avro_type = {**avro_type, "name": f"{avro_type['name']}{i}"}
        fields.append({"name": f"c{i}", "type": ["null", avro_type] if null else avro_type})
    schema = {"type": "record", "name": "t", "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "read_timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "source_timestamp", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "read_method", "type": "string"},
        {"name": "source_metadata", "type": {"type": "record", "name": "source_metadata",
            "fields": [{"name": METADATA[m][0], "type": METADATA[m][1]} for m in meta]}},
        {"name": "payload", "type": {"type": "record", "name": "payload", "fields": fields}},
    ]}  # fmt: skip
    records = []
    for _ in range(draw(st.integers(1, 4))):
        row = {}
        for i, (kind, null) in enumerate(zip(payload, nullable, strict=True)):
            row[f"c{i}"] = None if null and draw(st.booleans()) else draw(TYPES[kind][1])
        records.append({
            "uuid": draw(TEXT),
            "read_timestamp": draw(READ_TIMESTAMPS),
            "source_timestamp": draw(SOURCE_TIMESTAMPS),
            "read_method": draw(READ_METHOD),
            "source_metadata": {METADATA[m][0]: draw(METADATA[m][2]) for m in meta},
            "payload": row,
        })  # fmt: skip
    out = io.BytesIO()
    codec = draw(CODECS)
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec,
                    sync_interval=draw(SYNC_INTERVALS))  # fmt: skip
    return out.getvalue()


FILES = files()


@st.composite
def mutated(draw) -> bytes:
    raw = bytearray(draw(FILES))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(MUTATIONS)
        at = draw(st.integers(0, len(raw) - 1))
        if kind == "flip":
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del raw[at:]
        elif kind == "set":
            raw[at] = draw(SET_BYTES)
        elif kind == "swap":  # two ranges trade places
            size = draw(st.integers(1, 8))
            other = draw(st.integers(0, len(raw) - 1))
            a, b = bytes(raw[at : at + size]), bytes(raw[other : other + size])
            if len(a) == len(b) and (at + size <= other or other + size <= at):
                raw[at : at + size], raw[other : other + size] = b, a
        else:
            raw[at:at] = draw(SPLICES)
        if not raw:
            break
    return bytes(raw)


@SETTINGS
@given(st.lists(st.one_of(FILES, mutated(), st.none()), min_size=1, max_size=4))
def test_datastream_avro_engines_agree(values):
    array = pa.array(values, pa.binary())
    out = {}
    for engine in ("native", "python"):
        decoder = cdc_decode.Decoder("datastream-avro", engine=engine)
        batch, ordinals = decoder.decode_indexed(array)
        out[engine] = (batch, ordinals, decoder.stats())
    assert_same_events(out["native"][0], out["python"][0])
    assert out["native"][1].equals(out["python"][1])
    assert out["native"][2] == out["python"][2]
