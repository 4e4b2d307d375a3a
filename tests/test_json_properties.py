"""Property tests for the JSON formats (`datahub-blob`, `tdsql-json`): random messages,
written as raw JSON text so that everything the strict rules are about shows up (number
tokens such as `-0` and `1E+5`, `\\u` escapes and surrogate pairs, lone surrogates,
duplicate keys, whitespace, deep nesting), plus byte mutations of them, give equal
batches, ordinals and stats on both engines.

The example count is `CDC_HYPOTHESIS_EXAMPLES` (300 by default, what `make test` runs).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
from compare import assert_same_events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cdc_decode

EXAMPLES = int(os.environ.get("CDC_HYPOTHESIS_EXAMPLES", "300"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

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
