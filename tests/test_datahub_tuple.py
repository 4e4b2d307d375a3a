"""Every rule of docs/formats/datahub-tuple.md, on both engines.

Records are built by hand as pyarrow tables; each test states the exact rows it expects,
on the engine it runs on, and every decode is also compared with the other engine's
(equal batches but for error wording). Then generated TUPLE topics: decoded to exactly the
generator's events and final state, in batches of any size, and corrupted.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
import random
import struct
from decimal import Decimal

import pyarrow as pa
import pytest
from compare import assert_same_events
from conftest import PROPERTY_SETTINGS
from hypothesis import given
from hypothesis import strategies as st
from test_generator import assert_events_equal

import cdc_decode
from cdc_decode.cli import main
from cdc_decode.generate import apply_events, generate, read_expected, read_records

FORMAT = "datahub-tuple"
SIGN = 1 << 63
UTC = dt.timezone.utc
OTHER = {"native": "python", "python": "native"}

# The seed's four records (seed 000), with two data columns of our own.
SEED = pa.table(
    {
        "id": pa.array([1, 1, 1, 1], pa.int64()),
        "name": ["joe", "joe", "jim", "jim"],
        "_sequence_id_": [
            "1649991610688000000",
            "1649991610688000001",
            "1649991610688000001",
            "1649991610688000002",
        ],
        "_operation_type_": ["I", "U", "U", "D"],
        "_excute_time_": pa.array(
            [1649991726000, 1649991756000, 1649991756000, 1649991774000], pa.int64()
        ),
        "_before_image_": ["N", "Y", "N", "Y"],
        "_after_image_": ["Y", "N", "Y", "N"],
    }
)


def decode(records, engine: str, mode: str = "permissive") -> list[dict]:
    """The rows ``engine`` decodes ``records`` to, after checking the other engine agrees."""
    batch = cdc_decode.decode(records, FORMAT, engine=engine, mode=mode)
    other = cdc_decode.decode(records, FORMAT, engine=OTHER[engine], mode=mode)
    assert_same_events(batch, other)
    assert batch.schema.equals(cdc_decode.event_schema())
    return batch.to_pylist()


def seq(sequence_id: int, half: int = 1) -> bytes:
    return struct.pack(">QQ", sequence_id + SIGN, half)


def ms(value: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(value / 1000, tz=UTC)


def record(data: dict | None = None, **meta) -> pa.Table:
    """One record: data columns (name -> pa.Array or list), then the meta columns, each
    overridable (``None`` leaves the column out; pass a pa.Array for a type)."""
    columns: dict = {"id": pa.array([7], pa.int64())} if data is None else dict(data)
    defaults = {
        "_sequence_id_": ["100"],
        "_operation_type_": ["I"],
        "_execute_time_": pa.array([1649991726000], pa.int64()),
        "_before_image_": ["N"],
        "_after_image_": ["Y"],
    }
    for name, value in {**defaults, **meta}.items():
        if value is not None:
            columns[name] = value
    return pa.table({k: v if isinstance(v, pa.Array) else pa.array(v) for k, v in columns.items()})


def one(records, engine: str) -> dict:
    (row,) = decode(records, engine)
    assert row["error"] is None, row["error"]
    return row


def error_row(records, engine: str) -> dict:
    (row,) = decode(records, engine)
    assert row["op"] == "error" and row["error"], row
    assert row["format"] == FORMAT
    assert all(row[c] is None for c in row if c not in ("format", "op", "error", "raw")), row
    return row


# ---------------------------------------------------------------------------------------
# The seed's records


def test_the_seed_records(engine):
    rows = decode(SEED, engine)
    common = {
        "format": FORMAT,
        "source_db": None,
        "source_schema": None,
        "source_table": None,
        "capture_time": None,
        "tx_id": None,
        "primary_key": None,
        "ddl": None,
        "metadata": None,
        "error": None,
        "raw": None,
    }
    assert rows == [
        {
            **common,
            "op": "insert",
            "source_op": "I",
            "event_time": ms(1649991726000),
            "position": "1649991610688000000",
            "sequence": seq(1649991610688000000),
            "event_id": "1649991610688000000:1",
            "before": None,
            "after": [("id", "1"), ("name", "joe")],
        },
        {
            **common,
            "op": "update_before",
            "source_op": "U",
            "event_time": ms(1649991756000),
            "position": "1649991610688000001",
            "sequence": seq(1649991610688000001, 0),
            "event_id": "1649991610688000001:0",
            "before": [("id", "1"), ("name", "joe")],
            "after": None,
        },
        {
            **common,
            "op": "update_after",
            "source_op": "U",
            "event_time": ms(1649991756000),
            "position": "1649991610688000001",
            "sequence": seq(1649991610688000001),
            "event_id": "1649991610688000001:1",
            "before": None,
            "after": [("id", "1"), ("name", "jim")],
        },
        {
            **common,
            "op": "delete",
            "source_op": "D",
            "event_time": ms(1649991774000),
            "position": "1649991610688000002",
            "sequence": seq(1649991610688000002),
            "event_id": "1649991610688000002:1",
            "before": [("id", "1"), ("name", "jim")],
            "after": None,
        },
    ]
    # The before half of the update sorts before its after half, and both between the others.
    sequences = [r["sequence"] for r in rows]
    assert sequences == sorted(sequences)


def test_ordinals_count_records_across_calls_and_batches(engine):
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    table = pa.Table.from_batches(SEED.to_batches(max_chunksize=3))
    assert table.column("id").num_chunks == 2
    batch, ordinals = decoder.decode_indexed(table)
    assert ordinals.to_pylist() == [0, 1, 2, 3]
    batch, ordinals = decoder.decode_indexed(SEED.to_batches()[0].slice(1, 2))
    assert ordinals.to_pylist() == [4, 5]
    assert [r["op"] for r in batch.to_pylist()] == ["update_before", "update_after"]
    assert decoder.finish().num_rows == 0
    assert decoder.stats() == {
        "messages": 6,
        "decoded": 6,
        "events": 6,
        "errors": 0,
        "dropped": 0,
        "pending": 0,
    }


# ---------------------------------------------------------------------------------------
# op and images


@pytest.mark.parametrize(
    ("op", "flags", "expected", "half", "side"),
    [
        ("I", ("N", "Y"), "insert", 1, "after"),
        ("D", ("Y", "N"), "delete", 1, "before"),
        ("U", ("Y", "N"), "update_before", 0, "before"),
        ("U", ("N", "Y"), "update_after", 1, "after"),
    ],
)
def test_op_and_image(engine, op, flags, expected, half, side):
    row = one(
        record(_operation_type_=[op], _before_image_=[flags[0]], _after_image_=[flags[1]]),
        engine,
    )
    assert (row["op"], row["source_op"]) == (expected, op)
    assert row[side] == [("id", "7")]
    assert row["after" if side == "before" else "before"] is None
    assert row["sequence"] == seq(100, half)
    assert row["event_id"] == f"100:{half}"
    assert row["position"] == "100"


def test_a_full_sync_row_is_a_read(engine):
    row = one(record(_sequence_id_=["-1"], _execute_time_=pa.array([-1])), engine)
    assert row["op"] == "read"
    assert (row["position"], row["event_id"], row["event_time"]) == (None, None, None)
    assert row["sequence"] == seq(-1)
    # Only an insert becomes a read: a delete with -1 stays a delete.
    row = one(
        record(
            _sequence_id_=["-1"], _operation_type_=["D"], _before_image_=["Y"], _after_image_=["N"]
        ),
        engine,
    )
    assert row["op"] == "delete" and row["event_id"] is None


def test_images_hold_every_data_column_in_order_with_nulls(engine):
    data = {
        "b": pa.array([None], pa.string()),
        "a": pa.array([1], pa.int32()),
        "n": pa.array([None], pa.null()),
    }
    row = one(record(data), engine)
    assert row["after"] == [("b", None), ("a", "1"), ("n", None)]
    # Meta columns may come first or between data columns: they never enter the image.
    reordered = record(data).select(
        ["_operation_type_", "b", "_sequence_id_", "a", "_execute_time_", "n",
         "_before_image_", "_after_image_"]
    )  # fmt: skip
    assert one(reordered, engine)["after"] == row["after"]


def test_no_data_columns_give_an_empty_image(engine):
    row = one(record({}), engine)
    assert row["after"] == []


# ---------------------------------------------------------------------------------------
# Per-record errors


@pytest.mark.parametrize(
    ("meta", "text"),
    [
        ({"_operation_type_": ["X"]}, '_operation_type_: expected I, U or D, got "X"'),
        ({"_operation_type_": ["i"]}, "_operation_type_"),
        ({"_operation_type_": [""]}, "_operation_type_"),
        ({"_operation_type_": pa.array([None], pa.string())}, "got null"),
        ({"_before_image_": ["y"]}, '_before_image_: expected Y or N, got "y"'),
        (
            {"_after_image_": pa.array([None], pa.string())},
            "_after_image_: expected Y or N, got null",
        ),
        ({"_after_image_": ["YES"]}, "_after_image_"),
        (
            {"_before_image_": ["Y"]},
            "_operation_type_: I with _before_image_ Y and _after_image_ Y",
        ),
        ({"_before_image_": ["Y"], "_after_image_": ["N"]}, "an insert is an after image"),
        ({"_operation_type_": ["D"]}, "a delete is a before image"),
        (
            {"_operation_type_": ["U"], "_before_image_": ["Y"]},
            "expected Y/N (before image) or N/Y",
        ),
        (
            {"_operation_type_": ["U"], "_after_image_": ["N"]},
            "U with _before_image_ N and _after_image_ N",
        ),
        ({"_sequence_id_": ["12a"]}, '_sequence_id_: expected a 64-bit integer, got "12a"'),
        ({"_sequence_id_": ["+1"]}, "_sequence_id_"),
        ({"_sequence_id_": ["1.0"]}, "_sequence_id_"),
        ({"_sequence_id_": ["1e3"]}, "_sequence_id_"),
        ({"_sequence_id_": [" 1"]}, "_sequence_id_"),
        ({"_sequence_id_": [""]}, "_sequence_id_"),
        ({"_sequence_id_": ["9223372036854775808"]}, "_sequence_id_"),
        (
            {"_sequence_id_": pa.array([None], pa.string())},
            "_sequence_id_: expected a 64-bit integer, got null",
        ),
        (
            {"_sequence_id_": pa.array([2**64 - 1], pa.uint64())},
            "got the number 18446744073709551615",
        ),
        ({"_execute_time_": ["soon"]}, '_execute_time_: expected a 64-bit integer, got "soon"'),
        (
            {"_execute_time_": pa.array([9300000000000000])},
            "9300000000000000 milliseconds is out of range",
        ),
        ({"_execute_time_": pa.array([2**63 - 1], pa.timestamp("s"))}, "seconds is out of range"),
    ],
)
def test_a_bad_record_is_one_error_row(engine, meta, text):
    records = record(**meta)
    row = error_row(records, engine)
    assert text in row["error"]
    # raw: the record as compact JSON, column -> text, in column order.
    raw = json.loads(row["raw"])
    assert list(raw) == records.column_names
    for name, column in zip(records.column_names, records.columns, strict=True):
        if not pa.types.is_timestamp(column.type):
            value = column[0].as_py()
            assert raw[name] == (None if value is None else str(value)), name


def test_error_text_is_the_same_in_both_engines():
    records = pa.concat_tables(
        [
            record(_operation_type_=["X"]),
            record(_before_image_=["?"]),
            record(_operation_type_=["U"], _before_image_=["Y"]),
            record(_sequence_id_=["x" * 100]),
        ]
    )
    native = cdc_decode.decode(records, FORMAT).column("error").to_pylist()
    python = cdc_decode.decode(records, FORMAT, engine="python").column("error").to_pylist()
    assert native == python
    assert native[3] == f'_sequence_id_: expected a 64-bit integer, got "{"x" * 40}"'


def test_raw_renders_every_type_and_escapes_json(engine):
    data = {
        "s": ['q"\\\n\x1b/é'],
        "b": pa.array([b"\x00\xff"], pa.binary()),
        "f": pa.array([0.1], pa.float32()),
        "t": pa.array([0], pa.timestamp("ms", tz="UTC")),
        "z": pa.array([None], pa.int8()),
    }
    row = error_row(record(data, _operation_type_=["?"]), engine)
    assert row["raw"] == (
        b'{"s":"q\\"\\\\\\n\\u001b/\xc3\xa9","b":"AP8=","f":"0.1",'
        b'"t":"1970-01-01T00:00:00.000Z","z":null,"_sequence_id_":"100",'
        b'"_operation_type_":"?","_execute_time_":"1649991726000",'
        b'"_before_image_":"N","_after_image_":"Y"}'
    )


def test_a_bad_record_leaves_the_others_alone(engine):
    records = pa.concat_tables([record(), record(_operation_type_=["X"]), record()])
    rows = decode(records, engine)
    assert [r["op"] for r in rows] == ["insert", "error", "insert"]
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    _, ordinals = decoder.decode_indexed(records)
    assert ordinals.to_pylist() == [0, 1, 2]
    assert decoder.stats()["errors"] == 1 and decoder.stats()["events"] == 2


def test_dropmalformed_counts_the_dropped(engine):
    records = pa.concat_tables([record(), record(_operation_type_=["X"]), record()])
    decoder = cdc_decode.Decoder(FORMAT, engine=engine, mode="dropmalformed")
    batch, ordinals = decoder.decode_indexed(records)
    assert [r["op"] for r in batch.to_pylist()] == ["insert", "insert"]
    assert ordinals.to_pylist() == [0, 2]
    assert decoder.stats() == {
        "messages": 3,
        "decoded": 2,
        "events": 2,
        "errors": 1,
        "dropped": 1,
        "pending": 0,
    }


def test_failfast_names_the_record_across_calls(engine):
    decoder = cdc_decode.Decoder(FORMAT, engine=engine, mode="failfast")
    decoder.decode(SEED)
    records = pa.concat_tables([record(), record(), record(_after_image_=["N"]), record()])
    with pytest.raises(cdc_decode.DecodeError, match=r"^message 6: _operation_type_"):
        decoder.decode(records)
    assert decoder.stats()["messages"] == 7


# ---------------------------------------------------------------------------------------
# Whole-call errors and input kinds


@pytest.mark.parametrize(
    "drop",
    ["_sequence_id_", "_operation_type_", "_before_image_", "_after_image_"],
)
def test_a_missing_meta_column_is_a_value_error(engine, drop):
    decoder = cdc_decode.Decoder(FORMAT, engine=engine, mode="failfast")
    with pytest.raises(ValueError, match=drop) as info:
        decoder.decode(record(**{drop: None}))
    assert not isinstance(info.value, cdc_decode.DecodeError)
    assert decoder.stats()["messages"] == 0


def test_the_older_names_are_accepted(engine):
    row = one(
        record(
            _sequence_id_=None,
            _log_file_name_offset_=["42"],
            _execute_time_=None,
            _excute_time_=pa.array([1000]),
        ),
        engine,
    )
    assert (row["event_id"], row["event_time"], row["metadata"]) == ("42:1", ms(1000), None)


def test_with_both_names_the_newer_is_read_and_the_older_kept(engine):
    row = one(
        record(
            _excute_time_=pa.array([5]),
            _log_file_name_offset_=pa.array([43], pa.int32()),
        ),
        engine,
    )
    assert (row["event_id"], row["event_time"]) == ("100:1", ms(1649991726000))
    # metadata in column order.
    assert row["metadata"] == [("_excute_time_", "5"), ("_log_file_name_offset_", "43")]
    null = one(record(_excute_time_=pa.array([None], pa.int64())), engine)
    assert null["metadata"] is None


def test_without_an_execute_time_there_is_no_event_time(engine):
    assert one(record(_execute_time_=None), engine)["event_time"] is None
    assert one(record(_execute_time_=pa.array([None], pa.int64())), engine)["event_time"] is None


def test_a_column_name_twice_is_a_value_error(engine):
    table = pa.Table.from_arrays(
        [*record().columns, pa.array([1])], names=[*record().column_names, "id"]
    )
    with pytest.raises(ValueError, match="'id' appears twice"):
        cdc_decode.decode(table, FORMAT, engine=engine)


@pytest.mark.parametrize(
    ("name", "array"),
    [
        ("_operation_type_", pa.array([1], pa.int64())),
        ("_before_image_", pa.array([True])),
        ("_source_table_", pa.array([b"t"], pa.binary())),
        ("_sequence_id_", pa.array([1.0])),
        ("_execute_time_", pa.array([True])),
        ("_execute_time_", pa.array([dt.date(2024, 1, 1)])),
        ("_operation_type_", pa.array(["I"]).dictionary_encode()),
    ],
)
def test_a_meta_column_of_another_type_is_a_type_error(engine, name, array):
    with pytest.raises(TypeError, match=name):
        cdc_decode.decode(record(**{name: array}), FORMAT, engine=engine)


@pytest.mark.parametrize(
    "array",
    [
        pa.array([[1]]),
        pa.array([{"a": 1}]),
        pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        pa.array(["x"]).dictionary_encode(),
        pa.array([1], pa.time32("s")),
        pa.array([1], pa.duration("s")),
        pa.array([1.0], pa.float16()),
    ],
    ids=["list", "struct", "map", "dictionary", "time32", "duration", "float16"],
)
def test_a_data_column_of_another_type_is_a_type_error(engine, array):
    decoder = cdc_decode.Decoder(FORMAT, engine=engine)
    with pytest.raises(TypeError, match="'odd'"):
        decoder.decode(record({"odd": array}))
    assert decoder.stats()["messages"] == 0


def test_columns_are_checked_even_without_rows(engine):
    empty = record().slice(0, 0)
    batch = cdc_decode.decode(empty, FORMAT, engine=engine)
    assert batch.num_rows == 0 and batch.schema.equals(cdc_decode.event_schema())
    no_batches = pa.Table.from_batches([], schema=record().schema)
    assert cdc_decode.decode(no_batches, FORMAT, engine=engine).num_rows == 0
    with pytest.raises(ValueError, match="_operation_type_"):
        cdc_decode.decode(record(_operation_type_=None).slice(0, 0), FORMAT, engine=engine)
    with pytest.raises(TypeError, match="'odd'"):
        cdc_decode.decode(record({"odd": pa.array([[1]])}).slice(0, 0), FORMAT, engine=engine)


def test_input_of_the_wrong_kind_is_a_type_error(engine):
    with pytest.raises(TypeError, match="RecordBatch or Table"):
        cdc_decode.decode([b"x"], FORMAT, engine=engine)
    with pytest.raises(TypeError, match="RecordBatch or Table"):
        cdc_decode.decode(pa.array([b"x"]), FORMAT, engine=engine)
    with pytest.raises(TypeError, match="binary values"):
        cdc_decode.decode(SEED, "tencent-dts", engine=engine)
    with pytest.raises(TypeError, match="binary values"):
        cdc_decode.decode(SEED.to_batches()[0], "tencent-dts", engine=engine)
    with pytest.raises(ValueError, match="keys"):
        cdc_decode.decode(SEED, FORMAT, engine=engine, keys=["a"] * 4)


def test_the_engines_refuse_the_wrong_kind_themselves():
    from cdc_decode._native import NativeDecoder
    from cdc_decode.fallback import PythonDecoder

    batch = SEED.to_batches()[0]
    for inner in (NativeDecoder(FORMAT, "permissive"), PythonDecoder(FORMAT, "permissive")):
        with pytest.raises(TypeError, match="record batches"):
            inner.decode(pa.array([b"x"]), None)
    for inner in (
        NativeDecoder("tencent-dts", "permissive"),
        PythonDecoder("tencent-dts", "permissive"),
    ):
        with pytest.raises(TypeError, match="binary values"):
            inner.decode_records(batch)
    native, ordinals = NativeDecoder(FORMAT, "permissive").decode_records(batch, last=True)
    assert native.num_rows == 4 and ordinals.to_pylist() == [0, 1, 2, 3]


# ---------------------------------------------------------------------------------------
# Columns of the event


@pytest.mark.parametrize(
    ("value", "db", "table"),
    [
        ("shop.users", "shop", "users"),
        ("users", None, "users"),
        ("a.b.c", "a", "b.c"),
        (".t", None, "t"),
        ("db.", "db", None),
        ("", None, None),
        (None, None, None),
    ],
)
def test_source_table(engine, value, db, table):
    row = one(record(_source_table_=pa.array([value], pa.string())), engine)
    assert (row["source_db"], row["source_schema"], row["source_table"]) == (db, None, table)


def test_meta_columns_of_every_string_type(engine):
    for kind in (pa.large_string(), pa.string_view()):
        row = one(
            record(
                _sequence_id_=pa.array(["0042"], kind),
                _operation_type_=pa.array(["I"], kind),
                _before_image_=pa.array(["N"], kind),
                _after_image_=pa.array(["Y"], kind),
                _execute_time_=pa.array(["1000"], kind),
                _source_table_=pa.array(["d.t"], kind),
            ),
            engine,
        )
        assert (row["position"], row["event_id"], row["event_time"]) == ("42", "42:1", ms(1000))
        assert row["source_table"] == "t"


@pytest.mark.parametrize(
    ("array", "position", "sequence_id"),
    [
        (pa.array(["-0"]), "0", 0),
        (pa.array(["-5"]), None, -5),
        (pa.array(["-9223372036854775808"]), None, -(2**63)),
        (pa.array([2**63 - 1], pa.uint64()), str(2**63 - 1), 2**63 - 1),
        (pa.array([-3], pa.int8()), None, -3),
        (pa.array([123], pa.int32()), "123", 123),
    ],
)
def test_sequence_ids(engine, array, position, sequence_id):
    row = one(record(_sequence_id_=array), engine)
    assert row["position"] == position
    assert row["sequence"] == seq(sequence_id)
    assert row["event_id"] == f"{sequence_id}:1"


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        (pa.array(["1649991726000"]), dt.datetime(2022, 4, 15, 3, 2, 6, tzinfo=UTC)),
        (pa.array(["-1"]), None),
        (pa.array([-2], pa.int64()), dt.datetime(1969, 12, 31, 23, 59, 59, 998000, tzinfo=UTC)),
        (pa.array([1000], pa.uint16()), ms(1000)),
        (pa.array([1], pa.timestamp("s", tz="UTC")), ms(1000)),
        (pa.array([1], pa.timestamp("ms")), ms(1)),
        (pa.array([-1], pa.timestamp("ms", tz="Asia/Shanghai")), ms(-1)),
        (pa.array([1500], pa.timestamp("us", tz="UTC")), ms(1.5)),
        (
            pa.array([-1], pa.timestamp("ns", tz="UTC")),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        ),
    ],
)
def test_execute_time(engine, array, expected):
    assert one(record(_execute_time_=array), engine)["event_time"] == expected


def test_columns_a_tuple_record_never_fills(engine):
    row = one(record(_source_table_=["d.t"]), engine)
    for column in ("source_schema", "capture_time", "tx_id", "primary_key", "ddl", "metadata"):
        assert row[column] is None, column


# ---------------------------------------------------------------------------------------
# Rendering values


F32_CASES = [
    (0.1, "0.1"),
    (1.0, "1.0"),
    (-0.0, "-0.0"),
    (16777216.0, "16777216.0"),
    (1e20, "1e+20"),
    (1e-5, "1e-05"),
    (0.0001, "0.0001"),
    (3.4028234663852886e38, "3.4028235e+38"),
    (1.401298464324817e-45, "1e-45"),
    (312985.125, "312985.12"),  # a tie between two shortest texts: the even one
    (float("inf"), "inf"),
    (float("-inf"), "-inf"),
    (float("nan"), "nan"),
]
F64_CASES = [0.1, 1.0, -0.0, 1e16, 1e-5, 123456789012345678.0, 5e-324, 1.7976931348623157e308]


def render(array: pa.Array, engine: str) -> list[str | None]:
    data = {f"c{i}": array.slice(i, 1) for i in range(len(array))}
    return [value for _, value in one(record(data), engine)["after"]]


@pytest.mark.parametrize(
    ("array", "texts"),
    [
        (pa.array([-128, 127], pa.int8()), ["-128", "127"]),
        (pa.array([-(2**63), 2**63 - 1], pa.int64()), [str(-(2**63)), str(2**63 - 1)]),
        (pa.array([255, 2**64 - 1], pa.uint64()), ["255", str(2**64 - 1)]),
        (pa.array([65535], pa.uint16()), ["65535"]),
        (pa.array([v for v, _ in F32_CASES], pa.float32()), [t for _, t in F32_CASES]),
        (
            pa.array(F64_CASES + [math.nan, -math.inf], pa.float64()),
            [repr(v) for v in F64_CASES] + ["nan", "-inf"],
        ),
        (
            pa.array([Decimal("12.50"), Decimal("-0.05"), Decimal("0.00")], pa.decimal128(10, 2)),
            ["12.50", "-0.05", "0.00"],
        ),
        (pa.array([Decimal("1200"), Decimal("0")], pa.decimal128(5, -2)), ["1200", "0"]),
        (pa.array([Decimal("-1.5")], pa.decimal32(5, 1)), ["-1.5"]),
        (pa.array([Decimal("12345678901.23")], pa.decimal64(18, 2)), ["12345678901.23"]),
        (pa.array([Decimal("-" + "9" * 70 + ".5")], pa.decimal256(76, 1)), ["-" + "9" * 70 + ".5"]),
        (pa.array(["a", "", "中文 🦊"], pa.string()), ["a", "", "中文 🦊"]),
        (pa.array(["x"], pa.large_string()), ["x"]),
        (
            pa.array(["a view longer than twelve bytes"], pa.string_view()),
            ["a view longer than twelve bytes"],
        ),
        (pa.array([b"", b"\x00\xff", b"foo"], pa.binary()), ["", "AP8=", "Zm9v"]),
        (pa.array([b"f"], pa.large_binary()), ["Zg=="]),
        (pa.array([b"fo"], pa.binary_view()), ["Zm8="]),
        (pa.array([b"\x01\x02"], pa.binary(2)), ["AQI="]),
        (pa.array([True, False]), ["true", "false"]),
        (pa.array([1714557600], pa.timestamp("s", tz="UTC")), ["2024-05-01T10:00:00Z"]),
        (
            pa.array([1714557600123], pa.timestamp("ms", tz="Asia/Shanghai")),
            ["2024-05-01T10:00:00.123Z"],
        ),
        (
            pa.array([1714557600123456], pa.timestamp("us", tz="UTC")),
            ["2024-05-01T10:00:00.123456Z"],
        ),
        (pa.array([-1], pa.timestamp("ns", tz="UTC")), ["1969-12-31T23:59:59.999999999Z"]),
        (pa.array([1714557600123456], pa.timestamp("us")), ["2024-05-01T10:00:00.123456"]),
        (pa.array([-(2**63)], pa.timestamp("s", tz="UTC")), ["-292277022657-01-27T08:29:52Z"]),
        (pa.array([253402300800], pa.timestamp("s")), ["+10000-01-01T00:00:00"]),
        (pa.array([19844, -719529, 0], pa.date32()), ["2024-05-01", "-0001-12-31", "1970-01-01"]),
        (pa.array([-1, 86400000], pa.date64()), ["1969-12-31", "1970-01-02"]),
        (pa.array([None, None], pa.null()), [None, None]),
        (pa.array([None], pa.int64()), [None]),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else None,
)
def test_rendering(engine, array, texts):
    assert render(array, engine) == texts


def test_float32_texts_agree_on_random_bit_patterns():
    rng = random.Random(32)
    bits = [rng.getrandbits(32) for _ in range(20_000)]
    bits += [0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3F800000, 0x4B800000]
    bits += [e << 23 for e in range(1, 255)]  # powers of two: lopsided intervals
    values = [struct.unpack("<f", struct.pack("<I", b))[0] for b in bits]
    array = pa.array(values, pa.float32())
    rows = decode(record({"f": array}, **_many(len(values))), "native")
    texts = [r["after"][0][1] for r in rows]
    for value, text in zip(values, texts, strict=True):
        if math.isnan(value):
            assert text == "nan"
            continue
        # Reads back to the same float32, and no shorter text does.
        assert struct.unpack("<f", struct.pack("<f", float(text)))[0] == value, text
        digits = text.lstrip("-").split("e")[0].replace(".", "").strip("0")
        assert len(digits) <= 9


def test_float64_and_timestamps_agree_on_random_bit_patterns():
    rng = random.Random(64)
    doubles = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(5000)]
    stamps = [rng.randrange(-(2**63), 2**63) for _ in range(5000)]
    data = {
        "d": pa.array(doubles, pa.float64()),
        **{
            unit: pa.array(stamps, pa.timestamp(unit, tz="UTC")) for unit in ("s", "ms", "us", "ns")
        },
        "day": pa.array([rng.randrange(-(2**31), 2**31) for _ in stamps], pa.date32()),
        "day64": pa.array(stamps, pa.date64()),
    }
    rows = decode(record(data, **_many(len(stamps))), "native")
    assert [r["after"][0][1] for r in rows] == [repr(d) for d in doubles]


def _many(n: int) -> dict:
    return {
        "_sequence_id_": pa.array(range(n), pa.int64()),
        "_operation_type_": ["I"] * n,
        "_execute_time_": pa.array([1] * n, pa.int64()),
        "_before_image_": ["N"] * n,
        "_after_image_": ["Y"] * n,
    }


# ---------------------------------------------------------------------------------------
# Generated topics


@pytest.fixture(scope="module", params=["shop.users", "shop.orders", "inventory.items"])
def stream(request):
    return generate(FORMAT, messages=2500, seed=13, tables=[request.param])


def test_generated_topics_decode_to_the_expected_events(engine, stream):
    batch = cdc_decode.decode(stream.values, FORMAT, engine=engine)
    assert_events_equal(pa.Table.from_batches([batch]), stream.expected)
    assert apply_events(batch, primary_keys=stream.primary_keys) == stream.final_state


def test_engines_agree_across_random_batches(stream):
    rng = random.Random(7)
    records = stream.values.combine_chunks()
    results = {}
    for engine in ("native", "python"):
        decoder = cdc_decode.Decoder(FORMAT, engine=engine)
        at, batches, ordinals = 0, [], []
        while at < records.num_rows:
            size = rng.choice([1, 2, 7, 100, 999])
            batch, ords = decoder.decode_indexed(records.slice(at, size).to_batches()[0])
            batches.append(batch)
            ordinals.append(ords)
            at += size
        table = pa.Table.from_batches(batches, schema=cdc_decode.event_schema()).combine_chunks()
        results[engine] = (table, pa.concat_arrays(ordinals), decoder.stats())
    (native, n_ord, n_stats), (python, p_ord, p_stats) = results["native"], results["python"]
    assert_same_events(native, python)
    assert n_ord.equals(p_ord) and n_ord.to_pylist() == list(range(records.num_rows))
    assert n_stats == p_stats and n_stats["messages"] == records.num_rows
    assert_events_equal(native, stream.expected)


def _corrupt(records: pa.Table, rng: random.Random) -> pa.Table:
    columns = records.to_pydict()
    n = records.num_rows
    bad = {
        "_operation_type_": ["X", "i", None, "", "UU"],
        "_before_image_": ["y", None, "Y"],
        "_after_image_": ["n", None, "N"],
        "_sequence_id_": ["12a", None, "-1", "99999999999999999999", "007"],
    }
    for name, choices in bad.items():
        if name == "_sequence_id_" and records.schema.field(name).type != pa.string():
            continue
        for i in rng.sample(range(n), n // 10):
            columns[name][i] = rng.choice(choices)
    return pa.table(columns, schema=records.schema)


@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_engines_agree_on_corrupted_records(stream, mode):
    records = _corrupt(stream.values, random.Random(3))
    native = cdc_decode.Decoder(FORMAT, mode=mode)
    python = cdc_decode.Decoder(FORMAT, mode=mode, engine="python")
    n_batch, n_ord = native.decode_indexed(records)
    p_batch, p_ord = python.decode_indexed(records)
    assert_same_events(n_batch, p_batch)
    assert n_ord.equals(p_ord)
    assert native.stats() == python.stats() and native.stats()["errors"] > 100
    if mode == "permissive":
        assert n_batch.num_rows == records.num_rows
        for row in n_batch.filter(pa.compute.equal(n_batch.column("op"), "error")).to_pylist():
            assert set(json.loads(row["raw"])) == set(records.column_names)
    else:
        assert n_batch.num_rows == records.num_rows - native.stats()["dropped"]


def test_the_generator_writes_one_table_exactly(stream):
    assert stream.messages == stream.values.num_rows == stream.rows == 2500
    table = stream.options["tables"][0]
    assert set(stream.primary_keys) == set(stream.final_state) == {table}
    db, name = table.split(".")
    assert set(stream.expected.column("source_db").to_pylist()) == {db}
    assert set(stream.expected.column("source_table").to_pylist()) == {name}
    assert set(stream.values.column("_source_table_").to_pylist()) == {table}
    ops = set(stream.expected.column("op").to_pylist())
    assert (
        {"insert", "update_before", "update_after", "delete"}
        <= ops
        <= {
            "insert",
            "read",
            "update_before",
            "update_after",
            "delete",
        }
    )
    assert generate(FORMAT, messages=2500, seed=13, tables=[table]).values.equals(stream.values)


def test_the_generator_maps_datahub_types():
    users = generate(FORMAT, messages=50, seed=1).values.schema
    assert users.field("id").type == pa.decimal128(20, 0)  # bigint unsigned
    assert users.field("age").type == pa.int16()  # tinyint unsigned
    assert users.field("score").type == pa.float32()
    assert users.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert users.field("avatar").type == pa.binary()
    items = generate(FORMAT, messages=50, seed=1, tables=["shop.order_items"]).values.schema
    assert items.field("gift_wrap").type == pa.bool_()
    assert items.field("unit_price").type == pa.decimal128(10, 4)


def test_the_generator_refuses_many_tables():
    with pytest.raises(ValueError, match="one table"):
        generate(FORMAT, messages=10, tables=["shop.users", "shop.orders"])


def test_cli_generate_writes_records(tmp_path, capsys):
    out = tmp_path / "tuple"
    argv = ["generate", FORMAT, "--messages", "120", "--seed", "4", "--out", str(out)]
    assert main([*argv, "--tables", "shop.orders"]) == 0
    assert "datahub-tuple: 120 messages" in capsys.readouterr().out
    stream = generate(FORMAT, messages=120, seed=4, tables=["shop.orders"])
    assert read_records(out).equals(stream.values)
    assert read_expected(out).equals(stream.expected)
    assert not (out / "values.bin").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == FORMAT and manifest["messages"] == 120
    assert main([*argv, "--tables", "shop.orders,shop.users"]) == 2
    assert "one table" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------
# Property: random records, good and bad, give equal batches on both engines

DATA_TYPES = [
    (pa.int8(), st.integers(-128, 127)),
    (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (pa.float32(), st.floats(width=32)),
    (pa.float64(), st.floats()),
    (pa.decimal128(12, 3), st.decimals(min_value=-(10**8), max_value=10**8, places=3)),
    (pa.string(), st.text(max_size=8)),
    (pa.binary(), st.binary(max_size=8)),
    (pa.bool_(), st.booleans()),
    (pa.timestamp("us", tz="UTC"), st.integers(-(2**62), 2**62)),
    (pa.timestamp("ns"), st.integers(-(2**63), 2**63 - 1)),
    (pa.date32(), st.integers(-(2**31), 2**31 - 1)),
]


# Strategies are built once (the cache below): hypothesis validates a new strategy object
# on its first draw, which cost more than the rest of an example when they were built inside
# the composite. A column is `rows` cells, each null or a value.
@functools.cache
def cells(values: st.SearchStrategy, rows: int) -> st.SearchStrategy:
    return st.lists(st.none() | values, min_size=rows, max_size=rows)


SEQUENCE_TEXT = st.sampled_from(["1", "-1", "007", "x", "-0", "+1"])
SEQUENCE_IDS = st.integers(-(2**63), 2**63 - 1)
OPERATIONS = st.sampled_from(["I", "U", "D", "I", "U", "x"])
BEFORE_FLAGS = st.sampled_from(["Y", "N", "y"])
AFTER_FLAGS = st.sampled_from(["Y", "N", ""])
TIME_KINDS = st.sampled_from(["none", "ms", "text", "timestamp"])
TIME_MS = st.integers(-(2**63), 2**63 - 1) | st.just(-1)
TIME_TEXT = st.sampled_from(["1000", "-1", "soon", "99999999999999999"])
TIME_UNITS = st.sampled_from("s ms us ns".split())
SOURCE_TABLES = st.sampled_from(["db.t", "t", ".", "a.b.c", ""])


@st.composite
def tuple_records(draw):
    rows = draw(st.integers(0, 6))
    columns = {}
    for i in range(draw(st.integers(0, 4))):
        kind, values = draw(st.sampled_from(DATA_TYPES))
        items = draw(cells(values, rows))
        if pa.types.is_timestamp(kind) or pa.types.is_date32(kind):
            array = pa.array(items, pa.int64() if pa.types.is_timestamp(kind) else pa.int32())
            columns[f"c{i}"] = array.cast(kind)
        else:
            columns[f"c{i}"] = pa.array(items, kind)

    if draw(st.booleans()):
        columns["_sequence_id_"] = pa.array(draw(cells(SEQUENCE_TEXT, rows)), pa.string())
    else:
        columns["_sequence_id_"] = pa.array(draw(cells(SEQUENCE_IDS, rows)), pa.int64())
    columns["_operation_type_"] = pa.array(draw(cells(OPERATIONS, rows)), pa.string())
    columns["_before_image_"] = pa.array(draw(cells(BEFORE_FLAGS, rows)), pa.string())
    columns["_after_image_"] = pa.array(draw(cells(AFTER_FLAGS, rows)), pa.string())
    time = draw(TIME_KINDS)
    if time == "ms":
        columns["_excute_time_"] = pa.array(draw(cells(TIME_MS, rows)), pa.int64())
    elif time == "text":
        columns["_execute_time_"] = pa.array(draw(cells(TIME_TEXT, rows)), pa.string())
    elif time == "timestamp":
        values = pa.array(draw(cells(SEQUENCE_IDS, rows)), pa.int64())
        columns["_execute_time_"] = values.cast(pa.timestamp(draw(TIME_UNITS)))
    if draw(st.booleans()):
        columns["_source_table_"] = pa.array(draw(cells(SOURCE_TABLES, rows)), pa.string())
    names = list(columns)
    order = draw(st.permutations(names))
    return pa.table({name: columns[name] for name in order})


@PROPERTY_SETTINGS
@given(records=tuple_records(), mode=st.sampled_from(["permissive", "dropmalformed"]))
def test_random_records_decode_alike(records, mode):
    native = cdc_decode.Decoder(FORMAT, mode=mode)
    python = cdc_decode.Decoder(FORMAT, mode=mode, engine="python")
    n_batch, n_ordinals = native.decode_indexed(records)
    p_batch, p_ordinals = python.decode_indexed(records)
    assert_same_events(n_batch, p_batch)
    assert n_ordinals.equals(p_ordinals)
    assert native.stats() == python.stats()
    assert native.stats()["messages"] == records.num_rows
