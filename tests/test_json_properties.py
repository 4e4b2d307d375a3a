"""Property tests for the JSON formats (`datahub-blob`, `tdsql-json`, `debezium-json`,
`datastream-json`): random messages, written as raw JSON text so that everything the
strict rules are about shows up (number tokens such as `-0` and `1E+5`, `\\u` escapes and
surrogate pairs, lone surrogates, duplicate keys, whitespace, deep nesting; fields in any
order, now and then a value of the wrong type), plus byte mutations of them, give equal
batches, ordinals and stats on both engines.

The example count is `CDC_HYPOTHESIS_EXAMPLES` (300 by default, what `make test` runs).
"""

from __future__ import annotations

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


@st.composite
def strings(draw) -> str:
    """A JSON string token: plain text with escapes (valid or not) mixed in."""
    parts = draw(st.lists(st.one_of(PLAIN, PLAIN, ESCAPES), max_size=4))
    return '"' + "".join(parts) + '"'


def values(depth: int = 3):
    scalars = st.one_of(
        strings(), NUMBERS, st.sampled_from(["true", "false", "null"]),
        st.sampled_from(["'##isnull##'", "-5 (18446744073709551611)"]).map(json.dumps),
    )  # fmt: skip
    if depth == 0:
        return scalars
    inner = values(depth - 1)
    return st.one_of(
        scalars,
        st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(strings(), inner), max_size=3).map(
            lambda members: "{" + ",".join(f"{k}:{v}" for k, v in members) + "}"
        ),
    )


def obj(members: list[tuple[str, str]], ws: str) -> str:
    return "{" + ws + ("," + ws).join(f"{json.dumps(k)}{ws}:{ws}{v}" for k, v in members) + "}"


@st.composite
def blob_messages(draw) -> bytes:
    """A DataHub BLOB message: the known fields with values of any type now and then."""
    ws = draw(st.sampled_from(["", " ", "\n\t"]))
    any_value = values(2)
    ops = st.sampled_from(["INSERT", "UPDATE_BEFOR", "UPDATE_BEFORE", "UPDATE_AFTER",
                           "DELETE", "MHEARTBEAT", "TRANSACTION_BEGIN", "insert"])  # fmt: skip
    column_values = st.lists(st.tuples(st.sampled_from(["id", "name", "v", "id"]), any_value),
                             max_size=4)  # fmt: skip
    image = column_values.map(lambda cols: obj([("dataColumn", obj(cols, ""))], ""))

    def field(name, good):
        return st.tuples(st.just(name), st.one_of(*[good] * 30, any_value))

    payload = draw(st.lists(st.one_of(
        field("op", ops.map(json.dumps)),
        field("sequenceId", st.one_of(NUMBERS, NUMBERS.map(json.dumps))),
        field("before", image), field("after", image),
        field("timestamp", st.lists(st.tuples(
            st.sampled_from(["eventTime", "systemTime", "checkpointTime", "x"]),
            st.one_of(NUMBERS, st.just("-1"))), max_size=3).map(lambda m: obj(m, ""))),
        field("ddl", st.just('{"text":"ALTER TABLE t ADD c int","ddlMeta":"rO0AB"}')),
        st.tuples(st.sampled_from(["gtid", "extra"]), any_value),
    ), max_size=7))  # fmt: skip
    schema = draw(st.lists(st.one_of(
        field("primaryKey", st.lists(strings(), max_size=2).map(lambda k: "[" + ",".join(k) + "]")),
        field("source", st.just('{"dbType":"MySQL","dbName":"shop","tableName":"t"}')),
        field("dataColumn", st.just('[{"name":"id","type":"LONG"}]')),
    ), max_size=3))  # fmt: skip
    if draw(st.sampled_from([True] * 9 + [False])):
        payload.insert(0, ("op", json.dumps(draw(ops))))
    top = [("schema", obj(schema, ws)), ("payload", obj(payload, ws))]
    top += draw(st.lists(st.tuples(st.sampled_from(["version", "x"]), any_value),
                         max_size=2))  # fmt: skip
    return obj(draw(st.permutations(top)), ws).encode("utf-8", "surrogatepass")


@st.composite
def tdsql_messages(draw) -> bytes:
    """A TDSQL subscription message."""
    ws = draw(st.sampled_from(["", " "]))
    any_value = values(2)
    literal = st.one_of(
        st.sampled_from(["'a'", "'it\\\\'s'", "'it''s'", "'##isnull##'", "1", "'",
                         "-5 (18446744073709551611)"]).map(json.dumps),
        NUMBERS, st.just("null"), any_value,
    )  # fmt: skip
    image = st.lists(literal, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
    members = draw(st.lists(st.one_of(
        st.tuples(st.just("eventtypestr"), st.sampled_from(
            ["insert", "update", "delete", "gtid", "xid", "query", "rotate"]).map(json.dumps)),
        st.tuples(st.sampled_from(["db", "table", "sql", "filename", "localip"]), strings()),
        st.tuples(st.sampled_from(["gtid"]), st.sampled_from(
            ["u:1", "u:18446744073709551616", "0-1-7", "x", "u:"]).map(json.dumps)),
        st.tuples(st.sampled_from(["begintime", "event_index", "sub_event_index", "orgoffset"]),
                  st.one_of(NUMBERS, NUMBERS.map(json.dumps))),
        st.tuples(st.sampled_from(["where", "field"]), image),
        st.tuples(st.sampled_from(["xid", "eventtype", "x"]), any_value),
    ), max_size=9))  # fmt: skip
    if draw(st.sampled_from([True] * 9 + [False])):
        members.insert(0, ("eventtypestr", '"insert"'))
    return obj(members, ws).encode("utf-8", "surrogatepass")


# Bytes that break a message wherever they land, or only inside a string or as a value.
BAD = [b"[", b"{", b'"', b"\\", b",", b"\xff", b"\x00", b"\x1f", b"\\ud800", b"\\udc00",
       b"\\x", b"\\u12", b"01", b"NaN", b"1.", b"-", b"\xef\xbb\xbf", b"\xed\xa0\x80"]  # fmt: skip


@st.composite
def mutated(draw, messages):
    raw = bytearray(draw(messages))
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from(["flip", "cut", "insert"]))
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


@st.composite
def debezium_messages(draw) -> bytes:
    """A Debezium value: a change event, schema change, transaction boundary or heartbeat,
    bare or in the Connect wrapper, with values of any type now and then."""
    ws = draw(st.sampled_from(["", " "]))
    any_value = values(2)

    def field(name, good):
        return st.tuples(st.just(name), st.one_of(*[good] * 20, any_value))

    image = st.lists(st.tuples(st.sampled_from(["id", "name", "v", "id"]), values(1)),
                     max_size=4).map(lambda cols: obj(cols, ""))  # fmt: skip
    integer = st.one_of(GOOD_NUMBERS, st.sampled_from(["1714550400000", "0", "-1"]))
    source = st.lists(st.one_of(
        field("db", strings()), field("schema", strings()), field("table", strings()),
        field("namespace", strings()), field("collection", strings()),
        field("file", st.sampled_from(['"mysql-bin.000003"', '""'])),
        field("pos", integer), field("row", integer), field("lsn", integer),
        field("txId", integer), field("gtid", strings()),
        field("ts_ms", integer), field("ts_us", integer), field("ts_ns", integer),
        field("snapshot", st.sampled_from(['"true"', '"last"', "false"])),
        field("connector", st.sampled_from(['"mysql"', '"postgresql"', '"lindorm"'])),
    ), max_size=8).map(lambda m: obj(m, ""))  # fmt: skip
    kind = draw(st.sampled_from(["change"] * 6 + ["ddl", "status", "heartbeat", "other"]))
    members = []
    if kind == "change":
        members.append(("op", json.dumps(draw(st.sampled_from(list("rcudtmx") + ["", "C"])))))
        members += draw(st.lists(st.one_of(
            field("before", image), field("after", image), field("source", source),
            field("ts_ms", integer), field("ts_us", integer), field("ts_ns", integer),
            field("transaction", st.lists(st.tuples(st.sampled_from(
                ["id", "total_order", "data_collection_order"]), values(0)),
                max_size=3).map(lambda m: obj(m, ""))),
        ), max_size=6))  # fmt: skip
    elif kind == "ddl":
        members += [("ddl", draw(strings()))] + draw(st.lists(st.one_of(
            field("databaseName", strings()), field("source", source),
            field("position", st.just('{"file":"f","pos":4}')),
        ), max_size=3))  # fmt: skip
    elif kind == "status":
        members += [("status", json.dumps(draw(st.sampled_from(["BEGIN", "END", "x"]))))]
        members += draw(st.lists(st.one_of(
            field("id", strings()), field("event_count", integer),
            field("data_collections", st.just('[{"data_collection":"d.t","event_count":1}]')),
            field("ts_ms", integer),
        ), max_size=4))  # fmt: skip
    elif kind == "heartbeat":
        members += draw(st.lists(st.one_of(field("ts_ms", integer), field("ts_us", integer)),
                                 min_size=1, max_size=2))  # fmt: skip
    else:
        members += draw(st.lists(st.tuples(st.sampled_from(["x", "source"]), any_value),
                                 max_size=2))  # fmt: skip
    envelope = obj(draw(st.permutations(members)), ws)
    wrapper = draw(st.sampled_from(["bare", "bare", "wrapped", "null-payload"]))
    if wrapper == "wrapped":
        envelope = obj([("schema", '{"type":"struct"}'), ("payload", envelope)], ws)
    elif wrapper == "null-payload":
        envelope = obj([("schema", "null"), ("payload", "null")], ws)
    return envelope.encode("utf-8", "surrogatepass")


@st.composite
def datastream_messages(draw) -> bytes:
    """A Datastream JSON line of any source, with times as numbers or text."""
    ws = draw(st.sampled_from(["", " "]))
    any_value = values(2)

    def field(name, good):
        return st.tuples(st.just(name), st.one_of(*[good] * 20, any_value))

    time = st.one_of(
        st.sampled_from(["1714550400000", '"1714550400000"', "0", "-5"]),
        st.sampled_from(["2024-05-01 08:00:00", "2024-05-01T08:00:00.123456789Z",
                         "0001-01-01 00:00:00", "2024-02-30 00:00:00", "2024-05-01 08:00"]
                        ).map(json.dumps),
    )  # fmt: skip
    integer = st.one_of(GOOD_NUMBERS, st.sampled_from(['"12"', "-3"]))
    metadata = st.lists(st.one_of(
        field("database", strings()), field("schema", strings()), field("table", strings()),
        field("collection", strings()), field("object_name", strings()),
        field("change_type", st.sampled_from(
            ["INSERT", "UPDATE", "UPDATE-INSERT", "UPDATE-DELETE", "DELETE", "x"]
        ).map(json.dumps)),
        field("tx_id", strings()), field("log_file", strings()),
        field("log_position", integer), field("scn", integer), field("rs_id", strings()),
        field("ssn", integer), field("lsn", st.sampled_from(['"0/16B3748"', '"1A/FF"', '"x"'])),
        field("primary_keys", st.lists(strings(), max_size=2).map(
            lambda k: "[" + ",".join(k) + "]")),
        field("is_deleted", st.sampled_from(["true", "false"])),
    ), max_size=8).map(lambda m: obj(m, ""))  # fmt: skip
    payload = st.lists(st.tuples(st.sampled_from(["id", "name", "v", "id"]), values(1)),
                       max_size=4).map(lambda cols: obj(cols, ""))  # fmt: skip
    members = draw(st.lists(st.one_of(
        field("uuid", strings()), field("read_timestamp", time),
        field("source_timestamp", time), field("object", strings()),
        field("read_method", st.sampled_from(
            ["mysql-cdc-binlog", "mysql-backfill-fulldump", "oracle-cdc-logminer",
             "oracle_dump", "postgresql-cdc-wal", "postgres-backfill", "sqlserver-cdc",
             "mongodb-change-streams", "x"]).map(json.dumps)),
        field("stream_name", strings()), field("schema_key", strings()),
        field("sort_keys", st.lists(st.one_of(integer, strings()), max_size=3).map(
            lambda k: "[" + ",".join(k) + "]")),
        field("source_metadata", metadata), field("payload", payload),
        st.tuples(st.sampled_from(["extra"]), any_value),
    ), max_size=9))  # fmt: skip
    if draw(st.sampled_from([True] * 9 + [False])):
        members.insert(0, ("payload", draw(payload)))
        members.insert(0, ("source_metadata", draw(metadata)))
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
