"""Property tests for the JSON formats (`datahub-blob`, `tdsql-json`, `debezium-json`,
`datastream-json`): random messages, written as raw JSON text so that everything the
strict rules are about shows up (number tokens such as `-0` and `1E+5`, `\\u` escapes and
surrogate pairs, lone surrogates, duplicate keys, whitespace, deep nesting; fields in any
order, now and then a value of the wrong type), plus byte mutations of them, give equal
batches, ordinals and stats on both engines.

The example count is `CDC_HYPOTHESIS_EXAMPLES` (300 by default, what `make test` runs).
"""

from __future__ import annotations

import functools
import json

import pyarrow as pa
from compare import assert_same_events
from conftest import PROPERTY_SETTINGS as SETTINGS
from hypothesis import given
from hypothesis import strategies as st

import cdc_decode

# Valid tokens: a message is broken on purpose by `mutated` (one bad token or byte), so
# most messages decode.
GOOD_NUMBERS = st.sampled_from(
    ["0", "-0", "1", "-1", "12.50", "1E+5", "1e-3", "9223372036854775807",
     "9223372036854775808", "-9223372036854775809", "1714550400000000074", "1" * 40, "0.0"]
)  # fmt: skip
NUMBERS = GOOD_NUMBERS
GOOD_ESCAPES = st.sampled_from(
    ["\\n", "\\\"", "\\\\", "\\/", "\\u0041", "\\u00e9", "\\ud83d\\ude80", "\\b", "\\u001b"]
)  # fmt: skip
ESCAPES = GOOD_ESCAPES
PLAIN = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters='"\\', exclude_categories=["Cc"]),
    max_size=8,
)


# Every strategy is built once, here or in a cached function: hypothesis validates a new
# strategy object (walking everything it reaches) on its first draw, which was most of the
# time an example took when the strategies were built inside the composites.


def mostly(good, other, odds: int):
    """`good`, and one time in `odds + 1` `other`. Not `st.one_of(*[good] * odds, other)`:
    one_of drops repeated branches, so that draws `good` and `other` half the time each."""
    return st.sampled_from([good] * odds + [other]).flatmap(lambda strategy: strategy)


# A JSON string token: plain text with escapes (valid or not) mixed in.
STRINGS = st.lists(mostly(PLAIN, ESCAPES, 2), max_size=4).map(
    lambda parts: '"' + "".join(parts) + '"'
)
SCALARS = st.one_of(
    STRINGS, NUMBERS, st.sampled_from(["true", "false", "null"]),
    st.sampled_from(["'##isnull##'", "-5 (18446744073709551611)"]).map(json.dumps),
)  # fmt: skip


def array(items, max_size: int = 2):
    return st.lists(items, max_size=max_size).map(lambda items: "[" + ",".join(items) + "]")


@functools.cache
def values(depth: int = 3):
    if depth == 0:
        return SCALARS
    inner = values(depth - 1)
    return st.one_of(
        SCALARS,
        array(inner, max_size=3),
        st.lists(st.tuples(STRINGS, inner), max_size=3).map(
            lambda members: "{" + ",".join(f"{k}:{v}" for k, v in members) + "}"
        ),
    )


ANY_VALUE = values(2)


def obj(members: list[tuple[str, str]], ws: str) -> str:
    return "{" + ws + ("," + ws).join(f"{json.dumps(k)}{ws}:{ws}{v}" for k, v in members) + "}"


def members(items, max_size: int):
    return st.lists(items, max_size=max_size).map(lambda m: obj(m, ""))


def field(name: str, good, odds: int = 20):
    """A member `name` whose value is `good`, or now and then (1 in `odds + 1`) any value."""
    return mostly(good, ANY_VALUE, odds).map(lambda value: (name, value))


WHITESPACE = st.sampled_from(["", " "])
MOSTLY_TRUE = st.sampled_from([True] * 9 + [False])
COLUMNS = st.sampled_from(["id", "name", "v", "id"])

# DataHub BLOB: the known fields with values of any type now and then.
BLOB_WHITESPACE = st.sampled_from(["", " ", "\n\t"])
BLOB_OPS = st.sampled_from(["INSERT", "UPDATE_BEFOR", "UPDATE_BEFORE", "UPDATE_AFTER",
                            "DELETE", "MHEARTBEAT", "TRANSACTION_BEGIN", "insert"])  # fmt: skip
BLOB_IMAGE = st.lists(st.tuples(COLUMNS, ANY_VALUE), max_size=4).map(
    lambda cols: obj([("dataColumn", obj(cols, ""))], "")
)
BLOB_PAYLOAD = st.lists(st.one_of(
    field("op", BLOB_OPS.map(json.dumps), 30),
    field("sequenceId", st.one_of(NUMBERS, NUMBERS.map(json.dumps)), 30),
    field("before", BLOB_IMAGE, 30), field("after", BLOB_IMAGE, 30),
    field("timestamp", members(st.tuples(
        st.sampled_from(["eventTime", "systemTime", "checkpointTime", "x"]),
        st.one_of(NUMBERS, st.just("-1"))), max_size=3), 30),
    field("ddl", st.just('{"text":"ALTER TABLE t ADD c int","ddlMeta":"rO0AB"}'), 30),
    st.tuples(st.sampled_from(["gtid", "extra"]), ANY_VALUE),
), max_size=7)  # fmt: skip
BLOB_SCHEMA = st.lists(st.one_of(
    field("primaryKey", array(STRINGS), 30),
    field("source", st.just('{"dbType":"MySQL","dbName":"shop","tableName":"t"}'), 30),
    field("dataColumn", st.just('[{"name":"id","type":"LONG"}]'), 30),
), max_size=3)  # fmt: skip
BLOB_EXTRA = st.lists(st.tuples(st.sampled_from(["version", "x"]), ANY_VALUE), max_size=2)


@st.composite
def blob_messages(draw) -> bytes:
    """A DataHub BLOB message: the known fields with values of any type now and then."""
    ws = draw(BLOB_WHITESPACE)
    payload = draw(BLOB_PAYLOAD)
    schema = draw(BLOB_SCHEMA)
    if draw(MOSTLY_TRUE):
        payload.insert(0, ("op", json.dumps(draw(BLOB_OPS))))
    top = [("schema", obj(schema, ws)), ("payload", obj(payload, ws))]
    top += draw(BLOB_EXTRA)
    return obj(draw(st.permutations(top)), ws).encode("utf-8", "surrogatepass")


TDSQL_LITERAL = st.one_of(
    st.sampled_from(["'a'", "'it\\\\'s'", "'it''s'", "'##isnull##'", "1", "'",
                     "-5 (18446744073709551611)"]).map(json.dumps),
    NUMBERS, st.just("null"), ANY_VALUE,
)  # fmt: skip
TDSQL_IMAGE = array(TDSQL_LITERAL, max_size=4)
TDSQL_MEMBERS = st.lists(st.one_of(
    st.tuples(st.just("eventtypestr"), st.sampled_from(
        ["insert", "update", "delete", "gtid", "xid", "query", "rotate"]).map(json.dumps)),
    st.tuples(st.sampled_from(["db", "table", "sql", "filename", "localip"]), STRINGS),
    st.tuples(st.sampled_from(["gtid"]), st.sampled_from(
        ["u:1", "u:18446744073709551616", "0-1-7", "x", "u:"]).map(json.dumps)),
    st.tuples(st.sampled_from(["begintime", "event_index", "sub_event_index", "orgoffset"]),
              st.one_of(NUMBERS, NUMBERS.map(json.dumps))),
    st.tuples(st.sampled_from(["where", "field"]), TDSQL_IMAGE),
    st.tuples(st.sampled_from(["xid", "eventtype", "x"]), ANY_VALUE),
), max_size=9)  # fmt: skip


@st.composite
def tdsql_messages(draw) -> bytes:
    """A TDSQL subscription message."""
    ws = draw(WHITESPACE)
    members = draw(TDSQL_MEMBERS)
    if draw(MOSTLY_TRUE):
        members.insert(0, ("eventtypestr", '"insert"'))
    return obj(members, ws).encode("utf-8", "surrogatepass")


# Bytes that break a message wherever they land, or only inside a string or as a value.
BAD = [b"[", b"{", b'"', b"\\", b",", b"\xff", b"\x00", b"\x1f", b"\\ud800", b"\\udc00",
       b"\\x", b"\\u12", b"01", b"NaN", b"1.", b"-", b"\xef\xbb\xbf", b"\xed\xa0\x80"]  # fmt: skip
MUTATIONS = st.sampled_from(["flip", "cut", "insert"])


@st.composite
def mutated(draw, messages):
    raw = bytearray(draw(messages))
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(MUTATIONS)
        if kind == "flip" and raw:
            i = draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut" and raw:
            del raw[draw(st.integers(0, len(raw) - 1)) :]
        else:
            at = draw(st.integers(0, len(raw)))
            raw[at:at] = draw(st.sampled_from(BAD))
    return bytes(raw)


def agree(format: str, values: list[bytes]) -> None:
    array = pa.array(values, pa.binary())
    out = {}
    for engine in ("native", "python"):
        decoder = cdc_decode.Decoder(format, engine=engine)
        batch, ordinals = decoder.decode_indexed(array)
        out[engine] = (batch, ordinals, decoder.stats())
    assert_same_events(out["native"][0], out["python"][0])
    assert out["native"][1].equals(out["python"][1])
    assert out["native"][2] == out["python"][2]


@SETTINGS
@given(st.lists(st.one_of(blob_messages(), mutated(blob_messages())), min_size=1, max_size=6))
def test_datahub_blob_engines_agree(values):
    agree("datahub-blob", values)


@SETTINGS
@given(st.lists(st.one_of(tdsql_messages(), mutated(tdsql_messages())), min_size=1, max_size=6))
def test_tdsql_json_engines_agree(values):
    agree("tdsql-json", values)


# Debezium: a change event, schema change, transaction boundary or heartbeat.
DEBEZIUM_IMAGE = members(st.tuples(COLUMNS, values(1)), max_size=4)
DEBEZIUM_INTEGER = st.one_of(GOOD_NUMBERS, st.sampled_from(["1714550400000", "0", "-1"]))
DEBEZIUM_SOURCE = members(st.one_of(
    field("db", STRINGS), field("schema", STRINGS), field("table", STRINGS),
    field("namespace", STRINGS), field("collection", STRINGS),
    field("file", st.sampled_from(['"mysql-bin.000003"', '""'])),
    field("pos", DEBEZIUM_INTEGER), field("row", DEBEZIUM_INTEGER),
    field("lsn", DEBEZIUM_INTEGER), field("txId", DEBEZIUM_INTEGER), field("gtid", STRINGS),
    field("ts_ms", DEBEZIUM_INTEGER), field("ts_us", DEBEZIUM_INTEGER),
    field("ts_ns", DEBEZIUM_INTEGER),
    field("snapshot", st.sampled_from(['"true"', '"last"', "false"])),
    field("connector", st.sampled_from(['"mysql"', '"postgresql"', '"lindorm"'])),
), max_size=8)  # fmt: skip
DEBEZIUM_KINDS = st.sampled_from(["change"] * 6 + ["ddl", "status", "heartbeat", "other"])
DEBEZIUM_OPS = st.sampled_from(list("rcudtmx") + ["", "C"])
DEBEZIUM_CHANGE = st.lists(st.one_of(
    field("before", DEBEZIUM_IMAGE), field("after", DEBEZIUM_IMAGE),
    field("source", DEBEZIUM_SOURCE),
    field("ts_ms", DEBEZIUM_INTEGER), field("ts_us", DEBEZIUM_INTEGER),
    field("ts_ns", DEBEZIUM_INTEGER),
    field("transaction", members(st.tuples(st.sampled_from(
        ["id", "total_order", "data_collection_order"]), values(0)), max_size=3)),
), max_size=6)  # fmt: skip
DEBEZIUM_DDL = st.lists(st.one_of(
    field("databaseName", STRINGS), field("source", DEBEZIUM_SOURCE),
    field("position", st.just('{"file":"f","pos":4}')),
), max_size=3)  # fmt: skip
DEBEZIUM_STATUSES = st.sampled_from(["BEGIN", "END", "x"])
DEBEZIUM_STATUS = st.lists(st.one_of(
    field("id", STRINGS), field("event_count", DEBEZIUM_INTEGER),
    field("data_collections", st.just('[{"data_collection":"d.t","event_count":1}]')),
    field("ts_ms", DEBEZIUM_INTEGER),
), max_size=4)  # fmt: skip
DEBEZIUM_HEARTBEAT = st.lists(
    st.one_of(field("ts_ms", DEBEZIUM_INTEGER), field("ts_us", DEBEZIUM_INTEGER)),
    min_size=1, max_size=2,
)  # fmt: skip
DEBEZIUM_OTHER = st.lists(st.tuples(st.sampled_from(["x", "source"]), ANY_VALUE), max_size=2)
DEBEZIUM_WRAPPERS = st.sampled_from(["bare", "bare", "wrapped", "null-payload"])


@st.composite
def debezium_messages(draw) -> bytes:
    """A Debezium value: a change event, schema change, transaction boundary or heartbeat,
    bare or in the Connect wrapper, with values of any type now and then."""
    ws = draw(WHITESPACE)
    kind = draw(DEBEZIUM_KINDS)
    members = []
    if kind == "change":
        members.append(("op", json.dumps(draw(DEBEZIUM_OPS))))
        members += draw(DEBEZIUM_CHANGE)
    elif kind == "ddl":
        members += [("ddl", draw(STRINGS))] + draw(DEBEZIUM_DDL)
    elif kind == "status":
        members += [("status", json.dumps(draw(DEBEZIUM_STATUSES)))]
        members += draw(DEBEZIUM_STATUS)
    elif kind == "heartbeat":
        members += draw(DEBEZIUM_HEARTBEAT)
    else:
        members += draw(DEBEZIUM_OTHER)
    envelope = obj(draw(st.permutations(members)), ws)
    wrapper = draw(DEBEZIUM_WRAPPERS)
    if wrapper == "wrapped":
        envelope = obj([("schema", '{"type":"struct"}'), ("payload", envelope)], ws)
    elif wrapper == "null-payload":
        envelope = obj([("schema", "null"), ("payload", "null")], ws)
    return envelope.encode("utf-8", "surrogatepass")


# Datastream JSON: a line of any source, with times as numbers or text.
DATASTREAM_TIME = st.one_of(
    st.sampled_from(["1714550400000", '"1714550400000"', "0", "-5"]),
    st.sampled_from(["2024-05-01 08:00:00", "2024-05-01T08:00:00.123456789Z",
                     "0001-01-01 00:00:00", "2024-02-30 00:00:00", "2024-05-01 08:00"]
                    ).map(json.dumps),
)  # fmt: skip
DATASTREAM_INTEGER = st.one_of(GOOD_NUMBERS, st.sampled_from(['"12"', "-3"]))
DATASTREAM_METADATA = members(st.one_of(
    field("database", STRINGS), field("schema", STRINGS), field("table", STRINGS),
    field("collection", STRINGS), field("object_name", STRINGS),
    field("change_type", st.sampled_from(
        ["INSERT", "UPDATE", "UPDATE-INSERT", "UPDATE-DELETE", "DELETE", "x"]
    ).map(json.dumps)),
    field("tx_id", STRINGS), field("log_file", STRINGS),
    field("log_position", DATASTREAM_INTEGER), field("scn", DATASTREAM_INTEGER),
    field("rs_id", STRINGS), field("ssn", DATASTREAM_INTEGER),
    field("lsn", st.sampled_from(['"0/16B3748"', '"1A/FF"', '"x"'])),
    field("primary_keys", array(STRINGS)),
    field("is_deleted", st.sampled_from(["true", "false"])),
), max_size=8)  # fmt: skip
DATASTREAM_PAYLOAD = members(st.tuples(COLUMNS, values(1)), max_size=4)
DATASTREAM_MEMBERS = st.lists(st.one_of(
    field("uuid", STRINGS), field("read_timestamp", DATASTREAM_TIME),
    field("source_timestamp", DATASTREAM_TIME), field("object", STRINGS),
    field("read_method", st.sampled_from(
        ["mysql-cdc-binlog", "mysql-backfill-fulldump", "oracle-cdc-logminer",
         "oracle_dump", "postgresql-cdc-wal", "postgres-backfill", "sqlserver-cdc",
         "mongodb-change-streams", "x"]).map(json.dumps)),
    field("stream_name", STRINGS), field("schema_key", STRINGS),
    field("sort_keys", array(st.one_of(DATASTREAM_INTEGER, STRINGS), max_size=3)),
    field("source_metadata", DATASTREAM_METADATA), field("payload", DATASTREAM_PAYLOAD),
    st.tuples(st.sampled_from(["extra"]), ANY_VALUE),
), max_size=9)  # fmt: skip


@st.composite
def datastream_messages(draw) -> bytes:
    """A Datastream JSON line of any source, with times as numbers or text."""
    ws = draw(WHITESPACE)
    members = draw(DATASTREAM_MEMBERS)
    if draw(MOSTLY_TRUE):
        members.insert(0, ("payload", draw(DATASTREAM_PAYLOAD)))
        members.insert(0, ("source_metadata", draw(DATASTREAM_METADATA)))
    return obj(members, ws).encode("utf-8", "surrogatepass")


@SETTINGS
@given(
    st.lists(
        st.one_of(debezium_messages(), mutated(debezium_messages()), st.none()),
        min_size=1,
        max_size=6,
    )
)
def test_debezium_json_engines_agree(values):
    agree("debezium-json", values)


@SETTINGS
@given(
    st.lists(
        st.one_of(datastream_messages(), mutated(datastream_messages())), min_size=1, max_size=6
    )
)
def test_datastream_json_engines_agree(values):
    agree("datastream-json", values)
