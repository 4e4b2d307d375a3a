"""Every rule of docs/formats/tdsql-json.md, on both engines (each test runs once with the
Rust core and once with the Python fallback), the seed's sample messages decoded to what a
reader of the vendor's page expects, a bad-input corpus, and generated streams."""

from __future__ import annotations

import json
import struct
from collections import Counter
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from test_generator import assert_events_equal

import cdc_decode
from cdc_decode.generate import apply_events, generate

FORMAT = "tdsql-json"


def decode(engine, values, **options) -> list[dict]:
    values = [v.encode() if isinstance(v, str) else v for v in values]
    return cdc_decode.decode(values, FORMAT, engine=engine, **options).to_pylist()


def one(engine, value, **options) -> dict:
    (row,) = decode(engine, [value], **options)
    assert row["error"] is None, row["error"]
    return row


def key(number: int, index: int, sub: int = 0) -> bytes:
    return struct.pack(">QQQ", number, index, sub)


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def dml(kind: str, where=(), field=(), **extra) -> str:
    doc = {"eventtypestr": kind, "db": "d", "table": "t", "gtid": "u:7", "event_index": "2",
           "where": list(where), "field": list(field), **extra}  # fmt: skip
    return json.dumps(doc)


# ---------------------------------------------------------------------------------------
# The seed's samples (vendor page 004), with the events its reader expects

SEED_INSERT = """{
"logtype":"mysqlbinlog", "eventtype":23, "eventtypestr":"insert", "db":"testdb",
"table":"testtable", "localip":"000.00.000.000", "localport":0000, "begintime":1511350073,
"gtid":"0-2670193178-726233561", "event_index":"4", "where":[ ], "field":[ "1", "'name1'" ]
}"""  # the page's comments removed; `0000` is not JSON (a leading zero) and is made `0` below
SEED_GTID = """{"logtype":"mysqlbinlog","eventtype":33,"eventtypestr":"gtid","db":"sysdb",
"table":"statustableforhb","localip":"10.231.23.241","localport":8810,"begintime":1511419963,
"gtid":"35be190b-d019-11e7-ab7a-a0423f32c225:469","event_index":"1"}"""
SEED_XID = """{"logtype":"mysqlbinlog","eventtype":16,"eventtypestr":"xid","db":"testsummer",
"table":"test_table1","localip":"10.231.23.241","localport":8810,"begintime":1511419963,
"gtid":"35be190b-d019-11e7-ab7a-a0423f32c225:469","event_index":"5","xid":"11866"}"""
SEED_QUERY = """{"logtype":"mysqlbinlog","eventtype":2,"eventtypestr":"query","db":"testsummer",
"table":"statustableforhb","localip":"10.231.23.241","localport":8810,"begintime":1511419941,
"gtid":"35be190b-d019-11e7-ab7a-a0423f32c225:452","event_index":"2",
"sql":"create table test_table1 (id int primary key,name varchar(20))"}"""
UUID = "35be190b-d019-11e7-ab7a-a0423f32c225"


def test_the_seed_samples(engine):
    insert = SEED_INSERT.replace('"localport":0000', '"localport":0')
    rows = decode(engine, [insert, SEED_GTID, SEED_XID, SEED_QUERY])
    assert [r["error"] for r in rows] == [None] * 4
    common = {"format": FORMAT, "source_schema": None, "capture_time": None,
              "position": None, "primary_key": None, "error": None, "raw": None}  # fmt: skip
    assert rows[0] == {
        **common, "op": "insert", "source_op": "insert", "source_db": "testdb",
        "source_table": "testtable", "event_time": at(1511350073),
        "tx_id": "0-2670193178-726233561", "sequence": key(726233561, 4),
        "event_id": "0-2670193178-726233561:4", "before": None,
        "after": [("0", "1"), ("1", "name1")], "ddl": None,
        "metadata": [("logtype", "mysqlbinlog"), ("eventtype", "23"),
                     ("localip", "000.00.000.000"), ("localport", "0")],
    }  # fmt: skip
    assert rows[1] == {
        **common, "op": "begin", "source_op": "gtid", "source_db": "sysdb",
        "source_table": "statustableforhb", "event_time": at(1511419963),
        "tx_id": f"{UUID}:469", "sequence": key(469, 1), "event_id": f"{UUID}:469:1",
        "before": None, "after": None, "ddl": None,
        "metadata": [("logtype", "mysqlbinlog"), ("eventtype", "33"),
                     ("localip", "10.231.23.241"), ("localport", "8810")],
    }  # fmt: skip
    assert rows[2]["op"] == "commit" and rows[2]["sequence"] == key(469, 5)
    assert rows[2]["metadata"][-1] == ("xid", "11866")
    assert rows[3]["op"] == "ddl" and rows[3]["sequence"] == key(452, 2)
    assert rows[3]["ddl"] == "create table test_table1 (id int primary key,name varchar(20))"
    # The page's own insert sample is not JSON as printed (`"localport":0000`).
    assert decode(engine, [SEED_INSERT])[0]["op"] == "error"
    # In log order: the earlier transaction (452) first.
    assert rows[3]["sequence"] < rows[1]["sequence"] < rows[2]["sequence"]


# ---------------------------------------------------------------------------------------
# op, images, literals


@pytest.mark.parametrize(
    "source_op, op",
    [("insert", "insert"), ("update", "update"), ("delete", "delete"), ("gtid", "begin"),
     ("xid", "commit"), ("query", "ddl"), ("rotate", "other"), ("INSERT", "other")],
)  # fmt: skip
def test_every_op(source_op, op, engine):
    row = one(engine, json.dumps({"eventtypestr": source_op}))
    assert (row["op"], row["source_op"]) == (op, source_op)


def test_images_are_positional_and_empty_arrays_are_no_image(engine):
    insert = one(engine, dml("insert", [], ["1", "'a'"]))
    assert insert["before"] is None and insert["after"] == [("0", "1"), ("1", "a")]
    delete = one(engine, dml("delete", ["1", "'a'"], []))
    assert delete["before"] == [("0", "1"), ("1", "a")] and delete["after"] is None
    assert one(engine, json.dumps({"eventtypestr": "update", "where": None}))["before"] is None


@pytest.mark.parametrize(
    "item, text",
    [
        ("'name1'", "name1"),
        ("'##isnull##'", None),
        ("'it\\'s'", "it's"),
        ("'it''s'", "it's"),
        ("'a\\\\b'", "a\\b"),
        ("'a\\nb\\tc\\rd\\0e'", "a\nb\tc\rd\0e"),
        ("'say \\\"hi\\\"'", 'say "hi"'),
        ("'a\\qb'", "a\\qb"),
        ("'trailing\\'", "trailing\\"),
        ("''", ""),
        ("'", "'"),
        ("'unclosed", "'unclosed"),
        ("-50800 (18446744073709500816)", "-50800"),
        ("-50800 (x)", "-50800 (x)"),
        ("50800 (50800)", "50800 (50800)"),
        ("1", "1"),
        ("3.14", "3.14"),
        ("'2020-03-18 18:01:07'", "2020-03-18 18:01:07"),
        ("'无线鼠标'", "无线鼠标"),
        ("##isnull##", "##isnull##"),
    ],
)
def test_sql_literals(item, text, engine):
    assert one(engine, dml("insert", [], [item]))["after"] == [("0", text)]


def test_number_tokens_and_nulls_in_images(engine):
    raw = '{"eventtypestr":"insert","field":[1.50,-0,null,"x"]}'
    assert one(engine, raw)["after"] == [("0", "1.50"), ("1", "-0"), ("2", None), ("3", "x")]


def test_columns_name_the_images(engine):
    columns = {"d.t": ["id", "name"], "d.other": ["x"]}
    row = one(engine, dml("update", ["1", "'a'", "'extra'"], ["1"]), columns=columns)
    assert row["before"] == [("id", "1"), ("name", "a"), ("2", "extra")]
    assert row["after"] == [("id", "1")]
    other = json.dumps({"eventtypestr": "insert", "db": "d", "table": "u", "field": ["1"]})
    assert one(engine, other, columns=columns)["after"] == [("0", "1")]


def test_a_name_that_is_a_later_position_keeps_the_keys_unique(engine):
    raw = dml("insert", [], ["'a'", "'b'", "'c'", "'d'"])
    # "2" names value 0, so value 2 (key "2") is left out: the first key wins.
    assert one(engine, raw, columns={"d.t": ["2", "x"]})["after"] == [
        ("2", "a"), ("x", "b"), ("3", "d")
    ]  # fmt: skip
    # Only canonical positions collide; a name inside the names' own range takes none.
    assert one(engine, raw, columns={"d.t": ["02", "3"]})["after"] == [
        ("02", "a"), ("3", "b"), ("2", "c")
    ]  # fmt: skip
    assert one(engine, raw, columns={"d.t": ["0", "x"]})["after"] == [
        ("0", "a"), ("x", "b"), ("2", "c"), ("3", "d")
    ]  # fmt: skip
    # A left-out value is still checked.
    (row,) = decode(engine, [dml("insert", [], ["'a'", "'b'", True])], columns={"d.t": ["2", "x"]})
    assert row["op"] == "error" and "field[2]" in row["error"]


@pytest.mark.parametrize(
    "columns, error",
    [({"d.t": ["a", "a"]}, ValueError), ({"d.t": "ab"}, TypeError), ([("d.t", ["a"])], TypeError)],
)
def test_bad_columns(columns, error, engine):
    with pytest.raises(error):
        cdc_decode.Decoder(FORMAT, engine=engine, columns=columns)


def test_columns_belong_to_tdsql_only(engine):
    with pytest.raises(ValueError, match="tdsql-json only"):
        cdc_decode.decode([b"{}"], "datahub-blob", engine=engine, columns={"d.t": ["a"]})


# ---------------------------------------------------------------------------------------
# Header fields


def test_sequence_event_id_position_and_times(engine):
    raw = dml("update", ["1"], ["2"], sub_event_index=3, filename="binlog.000012",
              orgoffset="4711", begintime="1700000000", prefix="p", sequence_num=9)  # fmt: skip
    row = one(engine, raw)
    assert row["sequence"] == key(7, 2, 3) and row["event_id"] == "u:7:2:3"
    assert row["position"] == "binlog.000012:4711"
    assert row["event_time"] == at(1700000000) and row["tx_id"] == "u:7"
    assert row["metadata"] == [("filename", "binlog.000012"), ("orgoffset", "4711"),
                               ("prefix", "p"), ("sequence_num", "9")]  # fmt: skip
    # MariaDB GTIDs; GTIDs without a number; no gtid or no event_index.
    assert one(engine, dml("insert", gtid="0-1-42"))["sequence"] == key(42, 2)
    odd = one(engine, dml("insert", gtid="anonymous"))
    assert odd["sequence"] is None and odd["event_id"] == "anonymous:2"
    bare = one(engine, json.dumps({"eventtypestr": "insert", "gtid": "u:1"}))
    assert bare["sequence"] is None and bare["event_id"] is None
    assert one(engine, dml("insert", filename="f"))["position"] is None


def test_order_keys_follow_the_log(engine):
    events = [dml("insert", gtid=g, event_index=i, sub_event_index=s)
              for g, i, s in [("u:9", 1, 0), ("u:9", 2, 0), ("u:9", 2, 1), ("u:10", 1, 0),
                              ("u:100", 0, 0)]]  # fmt: skip
    keys = [r["sequence"] for r in decode(engine, events)]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_metadata_first_key_wins_and_nulls_are_left_out(engine):
    raw = '{"eventtypestr":"xid","xid":"1","xid":"2","n":null,"o":{"a":[1]},"db":"x"}'
    assert one(engine, raw)["metadata"] == [("xid", "1"), ("o", '{"a":[1]}')]
    assert one(engine, '{"eventtypestr":"xid"}')["metadata"] is None


# ---------------------------------------------------------------------------------------
# Bad input

BAD = [
    b"",
    b"{",
    b'{"eventtypestr":"insert"',
    b"[]",
    b'"insert"',
    b"\xef\xbb\xbf{}",
    b'{"eventtypestr":"insert","db":"\xff"}',
    b'{"db":"d"}',
    b'{"eventtypestr":null}',
    b'{"eventtypestr":5}',
    b'{"eventtypestr":"insert","db":["d"]}',
    b'{"eventtypestr":"insert","table":{}}',
    b'{"eventtypestr":"insert","gtid":1}',
    b'{"eventtypestr":"insert","begintime":"soon"}',
    b'{"eventtypestr":"insert","begintime":1.5}',
    b'{"eventtypestr":"insert","begintime":9300000000000}',
    b'{"eventtypestr":"insert","event_index":"-1"}',
    b'{"eventtypestr":"insert","sub_event_index":-2}',
    b'{"eventtypestr":"insert","event_index":"1e3"}',
    b'{"eventtypestr":"insert","orgoffset":"x"}',
    b'{"eventtypestr":"insert","where":{"0":"1"}}',
    b'{"eventtypestr":"insert","field":"1"}',
    b'{"eventtypestr":"insert","field":[true]}',
    b'{"eventtypestr":"insert","field":["1",["2"]]}',
    b'{"eventtypestr":"insert","where":[{}]}',
    b'{"eventtypestr":"query","sql":7}',
    b'{"eventtypestr":"insert","x":"\\ud800"}',
    b'{"eventtypestr":"insert","x":1,"x":"\\udc00"}',
    b'{"eventtypestr":"insert"} x',
    b'{"eventtypestr":"insert","field":[' + b"[" * 200 + b"]" * 200 + b"]}",
    b"[" * 100_000,
    # truncated anywhere, an object or array where the other belongs
    b'{"eventtypestr":"insert","field":["1","\'na',
    b'{"eventtypestr":"insert","field":["1",',
    b'{"eventtypestr":"insert","event_index":"4',
    b'[{"eventtypestr":"insert"}]',
    b"null",
    b'{"eventtypestr":{"insert":1}}',
    b'{"eventtypestr":"insert","begintime":{}}',
    b'{"eventtypestr":"insert","event_index":[4]}',
    b'{"eventtypestr":"insert","event_index":true}',
    b'{"eventtypestr":"insert","filename":1,"orgoffset":2}',
    # invalid UTF-8: in an image item, overlong, an encoded surrogate, cut mid-character
    b'{"eventtypestr":"insert","field":["\'\xc3\x28\'"]}',
    b'{"eventtypestr":"insert","sql":"\xc0\xaf"}',
    b'{"eventtypestr":"insert","db":"\xed\xa0\x80"}',
    b'{"eventtypestr":"insert","table":"\xe6\x97"}',
    # lone surrogates in an image item and in a key; not JSON
    b'{"eventtypestr":"insert","field":["\'\\ud800\'"]}',
    b'{"eventtypestr":"insert","\\udbff\\u0041":1}',
    b'{"eventtypestr":"insert","field":[NaN]}',
    b'{"eventtypestr":"insert","field":[01]}',
    b'{"eventtypestr":"insert","field":["1",],}',
    # nesting: objects 129 levels deep (the top object is 1)
    b'{"eventtypestr":"insert","x":' + b'{"a":' * 128 + b"1" + b"}" * 128 + b"}",
    # huge numbers where integers are read
    b'{"eventtypestr":"insert","begintime":' + b"9" * 5000 + b"}",
    b'{"eventtypestr":"insert","event_index":"99999999999999999999"}',
    b'{"eventtypestr":"insert","sub_event_index":9223372036854775808}',
    b'{"eventtypestr":"insert","orgoffset":1e400}',
    # a multi-megabyte string that never ends
    b'{"eventtypestr":"insert","field":["\'' + b"x" * 3_000_000 + b'"]',
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_input_is_one_error_row(raw, engine):
    (row,) = decode(engine, [raw])
    assert row["op"] == "error" and row["error"] and row["raw"] == raw
    assert all(row[c] is None for c in row if c not in ("format", "op", "error", "raw"))


def test_hostile_but_valid_inputs_decode(engine):
    big = "x" * 5_000_000
    raw = '{"eventtypestr":"insert","field":["\'' + big + "'\"," + "9" * 100_000 + "]}"
    assert one(engine, raw)["after"] == [("0", big), ("1", "9" * 100_000)]
    # 128 levels (the top object and 127 arrays) are fine; a huge token in metadata is text.
    deep = "[" * 127 + "]" * 127
    row = one(engine, '{"eventtypestr":"insert","x":' + deep + ',"localport":1e999999999}')
    assert row["metadata"] == [("x", deep), ("localport", "1e999999999")]
    # A multi-megabyte image, half of it escapes, and a surrogate pair in a key.
    quoted = "it''s \\\\ " * 300_000
    row = one(
        engine, json.dumps({"eventtypestr": "insert", "\U0001f680": 1, "field": [f"'{quoted}'"]})
    )
    assert row["after"] == [("0", "it's \\ " * 300_000)] and row["metadata"] == [("🚀", "1")]


def test_errors_touch_nothing_else_and_modes(engine):
    values = [dml("insert", [], ["1"]).encode(), b"{", None, b"[]"]
    rows = decode(engine, values)
    assert [r["op"] for r in rows] == ["insert", "error", "tombstone", "error"]
    dropped = cdc_decode.decode(values, FORMAT, engine=engine, mode="dropmalformed")
    assert dropped.column("op").to_pylist() == ["insert", "tombstone"]
    with pytest.raises(cdc_decode.DecodeError, match="^message 1: "):
        cdc_decode.decode(values, FORMAT, engine=engine, mode="failfast")


# ---------------------------------------------------------------------------------------
# Generated streams


@pytest.fixture(scope="module", params=[4, 5], ids=["mysql-gtid", "mariadb-gtid"])
def stream(request):
    return generate(FORMAT, messages=3000, seed=request.param)


def test_generated_stream_decodes_to_the_expected_events(stream, engine):
    out = cdc_decode.decode(stream.values, FORMAT, engine=engine)
    assert out.column("error").null_count == out.num_rows
    assert_events_equal(pa.Table.from_batches([out]), stream.expected)


def test_generated_stream_with_column_names_rebuilds_the_tables(stream, engine):
    out = cdc_decode.decode(stream.values, FORMAT, engine=engine,
                            columns=stream.options["columns"])  # fmt: skip
    state = apply_events(out, primary_keys=stream.primary_keys)
    assert state == stream.final_state


def test_generated_stream_covers_the_format(stream):
    ops = Counter(stream.expected.column("op").to_pylist())
    assert {"insert", "update", "delete", "begin", "commit", "ddl"} <= set(ops)
    texts = [v.decode() for v in stream.values]
    assert any("'##isnull##'" in t for t in texts)
    assert any("''" in t for t in texts) and any("\\\\'" in t for t in texts)
    assert any(" (1844674407" in t for t in texts)
    assert any('"sub_event_index"' in t for t in texts)
    assert any('"filename"' in t for t in texts) and any('"filename"' not in t for t in texts)
    sequences = [s for s in stream.expected.column("sequence").to_pylist() if s is not None]
    assert sequences == sorted(sequences), "the log order is the sequence order"
    # DDL as the seed shows it: the GTID event (1), then the query (2) in the same GTID.
    docs = [json.loads(t) for t in texts]
    queries = [i for i, d in enumerate(docs) if d["eventtypestr"] == "query"]
    assert queries
    for i in queries:
        assert docs[i]["event_index"] == "2"
        assert docs[i - 1]["eventtypestr"] == "gtid" and docs[i - 1]["gtid"] == docs[i]["gtid"]
    mariadb = "-" in docs[0]["gtid"] and ":" not in docs[0]["gtid"]
    assert any("gtid_commitid" in d for d in docs) == mariadb


def test_generator_is_deterministic():
    a = generate(FORMAT, messages=400, seed=11)
    assert a.values == generate(FORMAT, messages=400, seed=11).values
    for messages in (0, 1, 2, 7, 133):
        s = generate(FORMAT, messages=messages, seed=messages)
        assert len(s.values) == messages
