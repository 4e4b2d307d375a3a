"""Every rule of docs/formats/datahub-blob.md, on both engines: each test runs once with
the Rust core (``cdc_decode._native.NativeDecoder``) and once with the Python fallback
(``cdc_decode.fallback.PythonDecoder``), which take the same arguments.

Messages are written by hand as JSON text; each test states the exact rows it expects.
Then the shared fixtures, decoded to what a reader of the vendor's docs expects, and
generated streams decoded to exactly the generator's events and final state.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from conftest import FIXTURES
from test_generator import assert_events_equal

import cdc_decode
from cdc_decode._native import NativeDecoder
from cdc_decode.cli import main
from cdc_decode.fallback import PythonDecoder
from cdc_decode.generate import apply_events, generate, read_values

FORMAT = "datahub-blob"
SIGN = 1 << 63


def decoder(engine, mode: str = "permissive") -> NativeDecoder | PythonDecoder:
    if engine == "native":
        return NativeDecoder(FORMAT, mode)
    return PythonDecoder(FORMAT, mode)


def batch(engine, values, mode: str = "permissive") -> pa.RecordBatch:
    out, ordinals = decoder(engine, mode).decode(pa.array(values, pa.binary()), None)
    assert len(ordinals) == out.num_rows
    return out


def rows(engine, *values) -> list[dict]:
    return batch(
        engine, [v.encode("utf-8") if isinstance(v, str) else v for v in values]
    ).to_pylist()


def one(engine, value) -> dict:
    (row,) = rows(engine, value)
    assert row["error"] is None, row["error"]
    return row


def message(op: str, *, schema=None, version="0.0.1", **payload) -> str:
    """A BLOB message; ``payload`` fields as keyword arguments (JSON-ready values)."""
    doc = {"schema": schema if schema is not None else {}, "payload": {"op": op, **payload}}
    if version is not None:
        doc["version"] = version
    return json.dumps(doc, ensure_ascii=False)


def seq(sequence_id: int, half: int = 1) -> bytes:
    return struct.pack(">QQ", sequence_id + SIGN, half)


def us(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def error_row(engine, raw: bytes) -> None:
    (row,) = batch(engine, [raw]).to_pylist()
    assert row["op"] == "error" and row["error"], row
    assert row["raw"] == raw and row["format"] == FORMAT
    assert all(
        row[c] is None for c in row if c not in ("format", "op", "error", "raw")
    ), row  # fmt: skip


# ---------------------------------------------------------------------------------------
# op


@pytest.mark.parametrize(
    ("source_op", "op"),
    [
        ("INSERT", "insert"),
        ("UPDATE_BEFOR", "update_before"),
        ("UPDATE_BEFORE", "update_before"),
        ("UPDATE_AFTER", "update_after"),
        ("DELETE", "delete"),
        ("TRANSACTION_BEGIN", "begin"),
        ("TRANSACTION_END", "commit"),
        ("CREATE", "ddl"),
        ("ALTER", "ddl"),
        ("ERASE", "ddl"),
        ("QUERY", "ddl"),
        ("RENAME", "ddl"),
        ("CINDEX", "ddl"),
        ("DINDEX", "ddl"),
        ("TRUNCATE", "truncate"),
        ("MHEARTBEAT", "heartbeat"),
        ("XACOMMIT", "commit"),
        ("XAROLLBACK", "rollback"),
        ("GTID", "other"),
        ("insert", "other"),
        ("SOMETHING_NEW", "other"),
        ("", "other"),
    ],
)
def test_every_op(source_op, op, engine):
    row = one(engine, message(source_op, sequenceId="7"))
    assert (row["op"], row["source_op"]) == (op, source_op)
    half = 0 if source_op in ("UPDATE_BEFOR", "UPDATE_BEFORE") else 1
    assert row["sequence"] == seq(7, half)
    assert row["event_id"] == f"7:{half}"
    assert row["position"] == "7"


def test_update_as_two_messages_keeps_both_halves_in_order(engine):
    image_before = {"dataColumn": {"id": 1, "v": "a"}}
    image_after = {"dataColumn": {"id": 1, "v": "b"}}
    for spelling in ("UPDATE_BEFOR", "UPDATE_BEFORE"):
        first, second = rows(
            engine,
            message(spelling, before=image_before, sequenceId="1605339516000000005"),
            message("UPDATE_AFTER", after=image_after, sequenceId="1605339516000000005"),
        )
        assert first["op"] == "update_before" and second["op"] == "update_after"
        assert first["before"] == [("id", "1"), ("v", "a")] and first["after"] is None
        assert second["after"] == [("id", "1"), ("v", "b")] and second["before"] is None
        assert first["event_id"] == "1605339516000000005:0"
        assert second["event_id"] == "1605339516000000005:1"
        assert first["sequence"] < second["sequence"]


def test_one_update_after_with_both_images_is_one_update(engine):
    row = one(
        engine,
        message(
            "UPDATE_AFTER",
            before={"dataColumn": {"id": 2, "val": "1.100000"}},
            after={"dataColumn": {"id": 2, "val": "2.200000"}},
            sequenceId="9",
        ),
    )
    assert row["op"] == "update"
    assert row["before"] == [("id", "2"), ("val", "1.100000")]
    assert row["after"] == [("id", "2"), ("val", "2.200000")]
    assert row["event_id"] == "9:1"
    # A before side without a dataColumn is no image: update_after.
    row = one(
        engine, message("UPDATE_AFTER", before={"dataColumn": None}, after={"dataColumn": {}})
    )
    assert (row["op"], row["before"], row["after"]) == ("update_after", None, [])


def test_images_are_taken_as_sent_for_every_op(engine):
    row = one(
        engine, message("INSERT", before={"dataColumn": {"a": 1}}, after={"dataColumn": {"a": 2}})
    )
    assert (row["op"], row["before"], row["after"]) == ("insert", [("a", "1")], [("a", "2")])
    row = one(engine, message("DELETE"))
    assert (row["op"], row["before"], row["after"]) == ("delete", None, None)
    row = one(engine, message("ALTER", after={"other": 1}))  # no dataColumn: no image
    assert row["after"] is None


# ---------------------------------------------------------------------------------------
# full sync, times, sequence


def test_full_sync_rows(engine):
    row = one(
        engine,
        message(
            "INSERT",
            after={"dataColumn": {"id": 2}},
            sequenceId="-1",
            timestamp={"checkpointTime": -1, "eventTime": -1, "systemTime": 1731661820245},
        ),
    )
    assert row["op"] == "read" and row["source_op"] == "INSERT"
    assert row["event_time"] is None
    assert row["capture_time"] == us(1731661820245)
    assert row["sequence"] == b"\x7f" + b"\xff" * 7 + struct.pack(">Q", 1)
    assert row["event_id"] is None and row["position"] is None
    assert row["metadata"] == [("version", "0.0.1")]  # checkpointTime -1 is left out
    # Only INSERT becomes read; other ops keep their mapping.
    assert one(engine, message("DELETE", sequenceId="-1"))["op"] == "delete"


def test_times(engine):
    row = one(engine,
        message(
            "INSERT",
            timestamp={"eventTime": 1605339932000, "systemTime": "1605339932736",
                       "checkpointTime": "01605339932000"},
        )
    )  # fmt: skip
    assert row["event_time"] == us(1605339932000)
    assert row["capture_time"] == us(1605339932736)
    assert row["metadata"] == [("version", "0.0.1"), ("checkpointTime", "1605339932000")]
    row = one(engine, message("INSERT", timestamp={"eventTime": None, "systemTime": -1}))
    assert row["event_time"] is None and row["capture_time"] is None
    row = one(engine, message("INSERT", timestamp={"eventTime": 0, "systemTime": -1000}))
    assert row["event_time"] == us(0) and row["capture_time"] == us(-1000)
    # The largest time whose microseconds fit an i64 (Python's datetime cannot hold it).
    out = batch(engine, [message("INSERT", timestamp={"eventTime": -9223372036854775}).encode()])
    assert out.column("event_time").cast(pa.int64()).to_pylist() == [-9223372036854775000]
    assert one(engine, message("INSERT", timestamp=None))["event_time"] is None


def test_sequence_encoding_orders_signed_ids(engine):
    ids = ["-9223372036854775808", "-5", "-1", "0", "000", "7", "9223372036854775807"]
    got = rows(engine, *(message("INSERT", sequenceId=i) for i in ids))
    keys = [r["sequence"] for r in got]
    assert keys == sorted(keys)
    assert keys[3] == keys[4] == seq(0)
    assert got[0]["sequence"] == bytes(8) + struct.pack(">Q", 1)
    assert got[-1]["sequence"] == b"\xff" * 8 + struct.pack(">Q", 1)
    assert [r["event_id"] for r in got] == [
        "-9223372036854775808:1", "-5:1", None, "0:1", "0:1", "7:1", "9223372036854775807:1"
    ]  # fmt: skip
    assert [r["position"] for r in got] == [None, None, None, "0", "0", "7", "9223372036854775807"]
    # A number token works as well as a string; a string is read after unescaping.
    assert one(engine, '{"payload":{"op":"INSERT","sequenceId":42}}')["event_id"] == "42:1"
    assert one(engine, '{"payload":{"op":"INSERT","sequenceId":"\\u0031"}}')["event_id"] == "1:1"
    # No sequenceId: no sequence, no id (heartbeats).
    row = one(engine, message("MHEARTBEAT"))
    assert (row["sequence"], row["event_id"], row["position"]) == (None, None, None)


# ---------------------------------------------------------------------------------------
# values


def test_values_render_as_text(engine):
    raw = (
        '{"payload":{"op":"INSERT","after":{"dataColumn":{'
        '"long":12345678901234567890123,"double_str":"1.100000","double":1.10,'
        '"exp":1E+5,"neg0":-0,"frac":-0.000,"t":true,"f":false,"null":null,'
        '"date":1590315269000,"bytes":"VGVzdCB0ZXh0MTIz","text":"a\\"b\\\\c\\u00e9\\ud83d\\ude80",'
        '"empty":"","obj":{"b":[1.50,"x\\u0001\\n\\/",null,{}],"a":{"z":[]}},"arr":[ 1 , 2 ]'
        "}}}}"
    )
    row = one(engine, raw)
    assert row["after"] == [
        ("long", "12345678901234567890123"),
        ("double_str", "1.100000"),
        ("double", "1.10"),
        ("exp", "1E+5"),
        ("neg0", "-0"),
        ("frac", "-0.000"),
        ("t", "true"),
        ("f", "false"),
        ("null", None),
        ("date", "1590315269000"),
        ("bytes", "VGVzdCB0ZXh0MTIz"),  # base64 stays text
        ("text", 'a"b\\cé🚀'),
        ("empty", ""),
        ("obj", '{"b":[1.50,"x\\u0001\\n/",null,{}],"a":{"z":[]}}'),
        ("arr", "[1,2]"),
    ]


def test_compact_json_escapes_exactly(engine):
    value = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f\u2028é🚀'
    doc = {"payload": {"op": "INSERT", "after": {"dataColumn": {"v": [value]}}}}
    row = one(engine, json.dumps(doc, ensure_ascii=True))
    expected = (
        '["\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r'
        "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
        '\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\"\\\\/\x7f\u2028é🚀"]'
    )
    assert row["after"] == [("v", expected)]


def test_duplicate_keys_first_wins_everywhere(engine):
    raw = (
        '{"payload":{"op":"INSERT","sequenceId":"1","after":{"dataColumn":'
        '{"a":1,"b":{"x":1,"y":2,"x":3},"a":2}},"op":"DELETE","sequenceId":"2"},'
        '"payload":{"op":"TRUNCATE"},"version":"0.0.1","version":"9"}'
    )
    row = one(engine, raw)
    assert (row["op"], row["event_id"]) == ("insert", "1:1")
    assert row["after"] == [("a", "1"), ("b", '{"x":1,"y":2}')]
    assert row["metadata"] == [("version", "0.0.1")]


# ---------------------------------------------------------------------------------------
# schema, DDL, heartbeat, metadata


def test_schema_fills_the_source_columns_and_primary_key(engine):
    schema = {
        "dataColumn": [{"name": "id", "type": "LONG"}],
        "primaryKey": ["id", "name"],
        "source": {"dbType": "PostgreSQL", "dbVersion": "14", "dbName": "db",
                   "schemaName": "public", "tableName": "t", "region": "cn-hz"},
    }  # fmt: skip
    row = one(engine, message("INSERT", schema=schema))
    assert (row["source_db"], row["source_schema"], row["source_table"]) == ("db", "public", "t")
    assert row["primary_key"] == ["id", "name"]
    assert row["metadata"] == [
        ("version", "0.0.1"), ("dbType", "PostgreSQL"), ("dbVersion", "14"), ("region", "cn-hz")
    ]  # fmt: skip
    assert one(engine, message("INSERT", schema={"primaryKey": []}))["primary_key"] is None
    row = one(engine, message("INSERT", schema={"source": {"dbName": ""}}))
    assert row["source_db"] == "" and row["primary_key"] is None
    assert one(engine, message("INSERT", schema=None))["source_db"] is None


def test_ddl_keeps_text_and_ddl_meta_verbatim(engine):
    ddl_meta = "rO0ABXNyACljb20uYWxpYmFiYS5kaS5wbHVnaW4uY2VudGVyLm1ldGEuRERMTWV0YQLb5Cx/YWXt"
    row = one(engine,
        message(
            "ALTER",
            schema={"source": {"dbName": "yunshi_db", "dbType": "MySQL",
                               "tableName": "t_shiyu_nopk"}},
            sequenceId="1605339516000000035",
            ddl={"text": "alter table t_shiyu_nopk add column holo text", "ddlMeta": ddl_meta},
            timestamp={"eventTime": 1605342109000, "systemTime": 1605342109259,
                       "checkpointTime": 1605342109000},
        )
    )  # fmt: skip
    assert row == {
        "format": FORMAT,
        "op": "ddl",
        "source_op": "ALTER",
        "source_db": "yunshi_db",
        "source_schema": None,
        "source_table": "t_shiyu_nopk",
        "event_time": us(1605342109000),
        "capture_time": us(1605342109259),
        "tx_id": None,
        "position": "1605339516000000035",
        "sequence": seq(1605339516000000035),
        "event_id": "1605339516000000035:1",
        "primary_key": None,
        "before": None,
        "after": None,
        "ddl": "alter table t_shiyu_nopk add column holo text",
        "metadata": [
            ("version", "0.0.1"),
            ("dbType", "MySQL"),
            ("checkpointTime", "1605342109000"),
            ("ddlMeta", ddl_meta),
        ],
        "error": None,
        "raw": None,
    }
    # ddlMeta is never decoded: anything text passes.
    row = one(engine, message("CREATE", ddl={"text": None, "ddlMeta": "not base64 at all!"}))
    assert row["ddl"] is None and ("ddlMeta", "not base64 at all!") in row["metadata"]


def test_heartbeat_from_the_seed(engine):
    row = one(
        engine,
        '{ "schema": {}, "payload": { "op": "MHEARTBEAT", "timestamp": { "eventTime": '
        '1605339953629, "checkpointTime": 1605339953629 } }, "version": "0.0.1" }',
    )
    assert row["op"] == "heartbeat" and row["source_op"] == "MHEARTBEAT"
    assert row["event_time"] == us(1605339953629) and row["capture_time"] is None
    assert row["metadata"] == [("version", "0.0.1"), ("checkpointTime", "1605339953629")]
    assert row["source_db"] is None and row["sequence"] is None


def test_metadata_order_and_other_fields(engine):
    raw = (
        '{"extra":{"k":[1]},"schema":{"source":{"note":"s","dbType":"MySQL"},"shard":3},'
        '"payload":{"op":"INSERT","gtid":"uuid:5","ddl":{"ddlMeta":"AAA=","who":"me"},'
        '"timestamp":{"checkpointTime":5,"lag":null,"zone":"+08:00"},"version":"shadowed"},'
        '"version":1}'
    )
    assert one(engine, raw)["metadata"] == [
        ("version", "1"),
        ("dbType", "MySQL"),
        ("checkpointTime", "5"),
        ("ddlMeta", "AAA="),
        ("extra", '{"k":[1]}'),
        ("shard", "3"),
        ("note", "s"),
        ("gtid", "uuid:5"),
        ("zone", "+08:00"),
        ("who", "me"),
    ]
    row = one(engine, '{"payload":{"op":"X"}}')
    assert row["metadata"] is None and row["source_op"] == "X"


# ---------------------------------------------------------------------------------------
# errors


DEEP_OK = '{"payload":{"op":"INSERT","after":{"dataColumn":{"v":' + "[" * 124 + "]" * 124 + "}}}}"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"\xff{}",
        b'{"payload":{"op":"INSERT","after":{"dataColumn":{"v":"\xc3\x28"}}}}',
        b"\xef\xbb\xbf" + message("INSERT").encode(),  # a UTF-8 BOM
        b"[]",
        b'"text"',
        b"42",
        b"null",
        b"{",
        message("INSERT").encode() + b" x",
        message("INSERT").encode() + b"{}",
        b'{"payload":{"op":"INSERT",}}',
        b'{"payload":{"op":\'INSERT\'}}',
        b'{"payload":{"op":"INSERT","after":{"dataColumn":{"v":NaN}}}}',
        b'{"payload":{"op":"INSERT","after":{"dataColumn":{"v":-Infinity}}}}',
        b'{"payload":{"op":"INSERT","after":{"dataColumn":{"v":01}}}}',
        b'{"payload":{"op":"INSERT","after":{"dataColumn":{"v":1.}}}}',
        b'{"payload":{"op":"IN\nSERT"}}',  # a raw control character in a string
        b'{"payload":{"op":"\\x"}}',
        b'{"payload":{"op":"INSERT"}} // comment',
        # lone surrogates, also in fields that are not read, and in keys
        b'{"payload":{"op":"\\ud800"}}',
        b'{"payload":{"op":"INSERT","x":["\\udc00"]}}',
        # lone surrogates in a duplicate member that is dropped (first wins) still count
        b'{"payload":{"op":"INSERT","x":1,"x":"\\ud800"}}',
        b'{"payload":{"op":"INSERT","x":1,"x":{"\\udc00":1}}}',
        b'{"payload":{"op":"INSERT","op":"\\ud83d\\ud83d\\ude00"}}',
        b'{"payload":{"op":"INSERT","x":"\\\\ud800\\ud800"}}',
        b'{"payload":{"op":"INSERT"},"\\udbff\\u0041":1}',
        b'{"payload":{"op":"INSERT","x":"\\ude00\\ud83d"}}',
        # structure and types
        b"{}",
        b'{"payload":null}',
        b'{"payload":[]}',
        b'{"payload":{}}',
        b'{"payload":{"op":null}}',
        b'{"payload":{"op":5}}',
        b'{"schema":[],"payload":{"op":"INSERT"}}',
        b'{"schema":{"source":"db"},"payload":{"op":"INSERT"}}',
        b'{"schema":{"source":{"dbName":1}},"payload":{"op":"INSERT"}}',
        b'{"schema":{"source":{"tableName":["t"]}},"payload":{"op":"INSERT"}}',
        b'{"schema":{"source":{"dbType":true}},"payload":{"op":"INSERT"}}',
        b'{"schema":{"primaryKey":"id"},"payload":{"op":"INSERT"}}',
        b'{"schema":{"primaryKey":["id",3]},"payload":{"op":"INSERT"}}',
        b'{"schema":{"primaryKey":[null]},"payload":{"op":"INSERT"}}',
        b'{"payload":{"op":"INSERT","after":[1]}}',
        b'{"payload":{"op":"INSERT","after":{"dataColumn":[1]}}}',
        b'{"payload":{"op":"INSERT","before":"x"}}',
        b'{"payload":{"op":"INSERT","timestamp":1}}',
        b'{"payload":{"op":"INSERT","ddl":"ALTER"}}',
        b'{"payload":{"op":"ALTER","ddl":{"text":1}}}',
        b'{"payload":{"op":"ALTER","ddl":{"ddlMeta":{}}}}',
        # integers: sequenceId and times
        b'{"payload":{"op":"INSERT","sequenceId":"abc"}}',
        b'{"payload":{"op":"INSERT","sequenceId":"+5"}}',
        b'{"payload":{"op":"INSERT","sequenceId":" 5"}}',
        b'{"payload":{"op":"INSERT","sequenceId":1.0}}',
        b'{"payload":{"op":"INSERT","sequenceId":1e3}}',
        b'{"payload":{"op":"INSERT","sequenceId":""}}',
        b'{"payload":{"op":"INSERT","sequenceId":true}}',
        b'{"payload":{"op":"INSERT","sequenceId":"9223372036854775808"}}',
        b'{"payload":{"op":"INSERT","sequenceId":"-9223372036854775809"}}',
        b'{"payload":{"op":"INSERT","sequenceId":' + b"9" * 5000 + b"}}",
        b'{"payload":{"op":"INSERT","timestamp":{"eventTime":"soon"}}}',
        b'{"payload":{"op":"INSERT","timestamp":{"systemTime":1.5}}}',
        b'{"payload":{"op":"INSERT","timestamp":{"checkpointTime":[]}}}',
        b'{"payload":{"op":"INSERT","timestamp":{"eventTime":9223372036854776}}}',
        b'{"payload":{"op":"INSERT","timestamp":{"eventTime":-9223372036854776}}}',
        # nesting: 129 levels
        DEEP_OK.replace('"v":', '"v":[').replace("]}}}}", "]]}}}}").encode(),
        b"[" * 200_000,
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        b'{"payload":{"op":"INSERT","x":' + b"[{" * 70 + b"1" + b"}]" * 70 + b"}}",
    ],
)
def test_errors(raw, engine):
    error_row(engine, raw)


def test_depth_limit_is_exactly_128(engine):
    depth = DEEP_OK.count("[") + 4  # top object, payload, after, dataColumn
    assert depth == 128
    row = one(engine, DEEP_OK)
    assert row["after"] == [("v", "[" * 124 + "]" * 124)]
    # Brackets inside strings do not count.
    row = one(engine, message("INSERT", after={"dataColumn": {"v": "[{" * 500}}))
    assert row["after"] == [("v", "[{" * 500)]


def test_hostile_but_valid_inputs_decode(engine):
    big = "x" * 5_000_000
    huge_number = "9" * 100_000
    raw = (
        '{"payload":{"op":"INSERT","after":{"dataColumn":{"s":"' + big + '","n":'
        + huge_number + ',"e":1e999999999}}}}'
    )  # fmt: skip
    row = one(engine, raw)
    assert row["after"] == [("s", big), ("n", huge_number), ("e", "1e999999999")]
    # A surrogate pair is one character, in values and keys.
    row = one(
        engine,
        '{"payload":{"op":"INSERT","after":{"dataColumn":{"\\ud83d\\ude80":"\\ud83e\\udd8a"}}}}',
    )
    assert row["after"] == [("🚀", "🦊")]
    assert one(engine, b"\r\n\t " + message("INSERT").encode() + b" \n")["op"] == "insert"


def test_an_error_does_not_touch_the_other_messages(engine):
    values = [message("INSERT", sequenceId="1").encode(), b"{", None, b"[" * 1000]
    out = batch(engine, values).to_pylist()
    assert [r["op"] for r in out] == ["insert", "error", "tombstone", "error"]
    assert out[1]["raw"] == b"{" and out[3]["raw"] == b"[" * 1000


def test_modes(engine):
    values = pa.array([message("INSERT").encode(), b"{", b"[]"], pa.binary())
    dropping = decoder(engine, "dropmalformed")
    out, ordinals = dropping.decode(values, None)
    assert out.column("op").to_pylist() == ["insert"] and ordinals.to_pylist() == [0]
    assert dropping.stats() == {
        "messages": 3, "decoded": 1, "events": 1, "errors": 2, "dropped": 2, "pending": 0
    }  # fmt: skip
    failing = decoder(engine, "failfast")
    with pytest.raises(cdc_decode.DecodeError, match="message 1: invalid JSON"):
        failing.decode(values, None)
    finished, _ = decoder(engine).finish()
    assert finished.num_rows == 0


def test_string_input_is_read_as_utf8(engine):
    value = message("INSERT", after={"dataColumn": {"name": "山田太郎"}})
    out, _ = decoder(engine).decode(pa.array([value], pa.large_string()), None)
    assert out.to_pylist()[0]["after"] == [("name", "山田太郎")]


# ---------------------------------------------------------------------------------------
# The shared fixtures (real messages) and the seed's samples


def fixture(name: str) -> bytes:
    text = (FIXTURES / FORMAT / name).read_bytes()
    return text[text.index(b"{", text.index(b"*/")) :].strip()


def _fixture_row(**columns) -> dict:
    row = {
        "format": FORMAT, "source_schema": None, "tx_id": None, "ddl": None, "error": None,
        "raw": None, "source_db": "bigdata_test", "source_table": "sync_test_table",
        "primary_key": ["id"], "before": None, "after": None,
    }  # fmt: skip
    row.update(columns)
    return row


FIXTURE_EVENTS = {
    "paimon-event-insert.txt": _fixture_row(
        op="read",  # sequenceId "-1": a full-sync row
        source_op="INSERT",
        event_time=None,
        capture_time=us(1731661820245),
        position=None,
        sequence=seq(-1),
        event_id=None,
        after=[("create_time", "1731661114000"), ("id", "2"), ("name", "a"), ("val", "1.100000")],
        metadata=[("version", "0.0.1"), ("dbType", "MySQL")],
    ),
    "paimon-event-update-in-one.txt": _fixture_row(
        op="update",
        source_op="UPDATE_AFTER",
        event_time=us(1731662097000),
        capture_time=us(1731663848979),
        position="1731663842292000001",
        sequence=seq(1731663842292000001),
        event_id="1731663842292000001:1",
        before=[("id", "2"), ("val", "1.100000"), ("name", "a"), ("create_time", "1731661114000")],
        after=[("id", "2"), ("val", "2.200000"), ("name", "a"), ("create_time", "1731661114000")],
        metadata=[("version", "0.0.1"), ("dbType", "MySQL"), ("checkpointTime", "1731662097000")],
    ),
    "paimon-event-delete.txt": _fixture_row(
        op="delete",
        source_op="DELETE",
        event_time=us(1731662085000),
        capture_time=us(1731663848953),
        position="1731663842292000000",
        sequence=seq(1731663842292000000),
        event_id="1731663842292000000:1",
        before=[("id", "1"), ("val", "1.100000"), ("name", "a"), ("create_time", "1731661114000")],
        metadata=[("version", "0.0.1"), ("dbType", "MySQL"), ("checkpointTime", "1731662085000")],
    ),
}


@pytest.mark.parametrize("name", sorted(FIXTURE_EVENTS))
def test_shared_fixtures(name, engine):
    assert one(engine, fixture(name)) == FIXTURE_EVENTS[name]


def test_shared_fixtures_in_one_batch_and_applied(engine):
    names = ["paimon-event-insert.txt", "paimon-event-update-in-one.txt",
             "paimon-event-delete.txt"]  # fmt: skip
    out = batch(engine, [fixture(n) for n in names])
    assert out.to_pylist() == [FIXTURE_EVENTS[n] for n in names]
    # The snapshot row of id 2 sorts first; id 1 was never seen, its delete is a no-op.
    assert apply_events(out) == {
        "bigdata_test.sync_test_table": {
            ("2",): {"create_time": "1731661114000", "id": "2", "name": "a", "val": "2.200000"}
        }
    }


SEED_SCHEMA = (
    '"schema": { "dataColumn": [ { "name": "id", "type": "LONG" }, { "name": "name", "type": '
    '"STRING" }, { "name": "comment", "type": "STRING" } ], "source": { "dbName": "yunshi_db", '
    '"dbType": "MySQL", "tableName": "t_shiyu_pk" }, "primaryKey": [ "id", "name" ] }'
)


def test_the_seed_samples(engine):
    insert = (
        "{ " + SEED_SCHEMA + ', "payload": { "op": "INSERT", "after": { "dataColumn": { "name": '
        '"joe", "comment": "comment", "id": 1 } }, "sequenceId": "1605339516000000004", '
        '"timestamp": { "eventTime": 1605339932000, "systemTime": 1605339932736, '
        '"checkpointTime": 1605339932000 } }, "version": "0.0.1" }'
    )
    before = (
        "{ " + SEED_SCHEMA + ', "payload": { "op": "UPDATE_BEFOR", "before": { "dataColumn": { '
        '"name": "joe", "comment": "comment", "id": 1 } }, "sequenceId": "1605339516000000005", '
        '"timestamp": { "eventTime": 1605339934000, "systemTime": 1605339934951, '
        '"checkpointTime": 1605339934000 } }, "version": "0.0.1" }'
    )
    after = before.replace("UPDATE_BEFOR", "UPDATE_AFTER").replace('"before"', '"after"')
    after = after.replace('"comment": "comment"', '"comment": "com1"')
    delete = (
        "{ " + SEED_SCHEMA + ', "payload": { "op": "DELETE", "before": { "dataColumn": { "name": '
        '"joe", "comment": "com1", "id": 1 } }, "sequenceId": "1605339516000000006", '
        '"timestamp": { "eventTime": 1605339937000, "systemTime": 1605339937671, '
        '"checkpointTime": 1605339937000 } }, "version": "0.0.1" }'
    )
    out = rows(engine, insert, before, after, delete)
    assert [r["op"] for r in out] == ["insert", "update_before", "update_after", "delete"]
    assert [r["event_id"] for r in out] == [
        "1605339516000000004:1", "1605339516000000005:0", "1605339516000000005:1",
        "1605339516000000006:1",
    ]  # fmt: skip
    assert out[0]["after"] == [("name", "joe"), ("comment", "comment"), ("id", "1")]
    assert out[2]["after"] == [("name", "joe"), ("comment", "com1"), ("id", "1")]
    for r in out:
        assert r["primary_key"] == ["id", "name"]
        assert (r["source_db"], r["source_table"]) == ("yunshi_db", "t_shiyu_pk")
        assert r["metadata"][:2] == [("version", "0.0.1"), ("dbType", "MySQL")]
    states = [apply_events(batch(engine, [v.encode() for v in out_values]))
              for out_values in ([insert], [insert, before], [insert, before, after])]  # fmt: skip
    table = "yunshi_db.t_shiyu_pk"
    assert states[0][table] == {("1", "joe"): {"name": "joe", "comment": "comment", "id": "1"}}
    assert states[1] == {}
    assert states[2][table] == {("1", "joe"): {"name": "joe", "comment": "com1", "id": "1"}}
    assert apply_events(batch(engine, [v.encode() for v in (insert, before, after, delete)])) == {}


# ---------------------------------------------------------------------------------------
# Generated streams


@pytest.fixture(scope="module")
def stream():
    return generate(FORMAT, messages=4000, seed=7)


def test_generated_stream_decodes_to_the_expected_events(stream, engine):
    assert stream.messages == 4000
    engine = decoder(engine)
    out, _ = engine.decode(pa.array(stream.values, pa.binary()), None)
    assert engine.stats()["errors"] == 0
    assert_events_equal(pa.Table.from_batches([out]), stream.expected)


def test_applying_the_decoded_events_gives_the_final_state(stream, engine):
    out = batch(engine, stream.values)
    state = apply_events(out)
    assert state.keys() == stream.final_state.keys()
    for table, table_rows in stream.final_state.items():
        assert state[table] == table_rows, table
    assert apply_events(stream.expected) == stream.final_state


def test_generated_stream_covers_the_format(stream):
    ops = Counter(stream.expected.column("op").to_pylist())
    assert {"read", "insert", "update", "update_before", "update_after", "delete", "begin",
            "commit", "ddl", "heartbeat"} <= set(ops)  # fmt: skip
    source_ops = Counter(stream.expected.column("source_op").to_pylist())
    assert source_ops["UPDATE_BEFOR"] and source_ops["UPDATE_BEFORE"]
    assert {"ALTER", "TRANSACTION_BEGIN", "TRANSACTION_END", "MHEARTBEAT"} <= set(source_ops)
    docs = [json.loads(v) for v in stream.values]
    texts = [v.decode() for v in stream.values]
    assert docs[0]["payload"]["sequenceId"] == "-1"
    assert docs[0]["payload"]["timestamp"]["eventTime"] == -1
    kinds = Counter()
    for doc, text in zip(docs, texts, strict=True):
        types = {c["name"]: c["type"] for c in doc["schema"].get("dataColumn", [])}
        kinds["sorted"] += text.startswith('{"payload"')
        kinds["ascii"] += "\\u" in text
        kinds["ddlMeta"] += bool((doc["payload"].get("ddl") or {}).get("ddlMeta"))
        for side in ("before", "after"):
            data = (doc["payload"].get(side) or {}).get("dataColumn") or {}
            for name, value in data.items():
                kinds[(types[name], type(value).__name__)] += 1
    assert kinds["sorted"] and kinds["ascii"] and kinds["ddlMeta"]
    # DOUBLE as "1.100000" strings and as numbers; DATE as epoch ms; nested JSON values.
    # (No BOOLEAN: MySQL has no boolean column type, tinyint(1) is a LONG.)
    for kind in [
        ("DOUBLE", "str"),
        ("DOUBLE", "float"),
        ("DATE", "int"),
        ("BYTES", "str"),
        ("LONG", "int"),
        ("STRING", "str"),
        ("STRING", "dict"),
    ]:
        assert kinds[kind], kind
    sequences = [s for s in stream.expected.column("sequence").to_pylist() if s is not None]
    assert sequences == sorted(sequences), "the log order is the sequence order"


def test_generator_is_deterministic_and_exact(engine):
    a = generate(FORMAT, messages=500, seed=11)
    b = generate(FORMAT, messages=500, seed=11)
    assert a.values == b.values and a.expected.equals(b.expected)
    assert a.final_state == b.final_state
    assert generate(FORMAT, messages=500, seed=12).values != a.values
    for messages in (0, 1, 2, 7, 40, 133):
        s = generate(FORMAT, messages=messages, seed=messages)
        assert s.messages == messages == s.rows
        assert apply_events(batch(engine, s.values)) == s.final_state, messages


def test_generator_dts_path_is_unchanged(engine):
    dts = generate("tencent-dts", messages=50, seed=2)
    out = cdc_decode.decode(dts.values, "tencent-dts", engine=engine)
    assert_events_equal(pa.Table.from_batches([out]), dts.expected)


def test_cli_generates_datahub_blob(tmp_path, capsys):
    assert main(["generate", FORMAT, "--messages", "60", "--seed", "4", "--out",
                 str(tmp_path)]) == 0  # fmt: skip
    assert "datahub-blob: 60 messages" in capsys.readouterr().out
    values = read_values(tmp_path)
    assert values == generate(FORMAT, messages=60, seed=4).values
    assert all(json.loads(v)["version"] == "0.0.1" for v in values)
