"""docs/formats/debezium-json.md on both engines (each test runs with the Rust core and
with the Python fallback): the shared Debezium fixtures decode with no error rows to the
ops and images their writers meant, the Flink PostgreSQL fixture applied in `sequence`
order gives the final table the fixtures' README states, and every rule and bad input."""

from __future__ import annotations

import json
import random
import struct
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from compare import assert_same_events
from conftest import FIXTURES

import cdc_decode
from cdc_decode.generate import apply_events

FORMAT = "debezium-json"
FLINK = "flink-postgres-schema-exclude.jsonl"


def decode(engine, values) -> list[dict]:
    values = [v.encode() if isinstance(v, str) else v for v in values]
    return cdc_decode.decode(values, FORMAT, engine=engine).to_pylist()


def one(engine, value) -> dict:
    (row,) = decode(engine, [value])
    assert row["error"] is None, row["error"]
    return row


def fixture(name: str) -> list[bytes]:
    """The messages of a fixture file, one JSON value a line (license header skipped)."""
    text = (FIXTURES / "debezium" / name).read_bytes()
    if b"*/" in text:
        text = text[text.index(b"{", text.index(b"*/")) :]
    return [line.strip() for line in text.splitlines() if line.strip()]


def at_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


# ---------------------------------------------------------------------------------------
# The shared fixtures


def test_flink_postgres_fixture(engine):
    rows = decode(engine, fixture(FLINK))
    assert [r["error"] for r in rows] == [None] * 16
    ops = ["read"] * 9 + ["update"] * 2 + ["insert"] * 2 + ["update"] * 2 + ["delete"]
    assert [r["op"] for r in rows] == ops
    first = rows[0]
    assert (first["source_db"], first["source_schema"], first["source_table"]) == (
        "postgres", "inventory", "products",
    )  # fmt: skip
    assert first["after"] == [
        ("id", "101"), ("name", "scooter"), ("description", "Small 2-wheel scooter"),
        ("weight", "3.14"),
    ]  # fmt: skip
    assert first["before"] is None and first["event_id"] is None  # a snapshot row
    assert first["tx_id"] == "601" and first["position"] == "34078720"
    assert first["sequence"] == struct.pack(">Q", 34078720)
    assert first["event_time"] == first["capture_time"] == at_ms(1596001099434)
    assert dict(first["metadata"])["snapshot"] == "true"
    delete = rows[-1]
    assert delete["before"] is not None and delete["after"] is None
    assert delete["event_id"] == delete["position"]


def test_flink_postgres_fixture_applied_in_sequence_order_gives_the_final_table(engine):
    events = cdc_decode.decode(fixture(FLINK), FORMAT, engine=engine)
    state = apply_events(events, primary_keys={"postgres.inventory.products": ["id"]})
    (table,) = state.values()
    assert sorted(int(k[0]) for k in table) == list(range(101, 111))  # no 111
    # The README's texts are the description column's.
    assert table[("106",)]["description"] == "18oz carpenter hammer"
    assert table[("107",)]["weight"] == "5.1"
    assert table[("110",)]["description"] == "new water resistent white wind breaker"
    assert table[("110",)]["weight"] == "0.5"


def test_paimon_mysql_fixture_with_the_connect_schema(engine):
    (row,) = decode(engine, fixture("paimon-mysql-alltype-schema.txt"))
    assert row["error"] is None and row["op"] == "read"
    assert (row["source_db"], row["source_table"]) == ("paimon_sync_table", "all_types_table")
    after = dict(row["after"])
    assert after["_id"] == "1" and after["pt"] == "1.1" and after["_bit1"] == "true"
    assert after["_bit"] == "xwcAAAAAAAA="  # bytes stay base64 text
    assert after["_bigint"] == "10000000000"
    assert row["position"] == ":0"  # the snapshot's file is empty
    assert dict(row["metadata"])["connector"] == "mysql"


@pytest.mark.parametrize("name", ["paimon-schemaevolution-1.txt", "paimon-schemaevolution-2.txt",
                                  "paimon-schemaevolution-3.txt"])  # fmt: skip
def test_paimon_schema_evolution_fixtures(name, engine):
    rows = decode(engine, fixture(name))
    assert rows and all(r["error"] is None for r in rows)
    assert {r["op"] for r in rows} <= {"read", "insert", "update", "delete"}
    assert all(r["after"] is not None or r["op"] == "delete" for r in rows)


def test_all_fixtures_agree_on_both_engines():
    values = [v for name in (FLINK, "paimon-mysql-alltype-schema.txt",
                             "paimon-schemaevolution-1.txt", "paimon-schemaevolution-2.txt",
                             "paimon-schemaevolution-3.txt") for v in fixture(name)]  # fmt: skip
    rng = random.Random(3)
    for value in list(values):
        for _ in range(40):
            data = bytearray(value)
            i = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[i] ^= 1 << rng.randrange(8)
            else:
                del data[i:]
            values.append(bytes(data))
    native = cdc_decode.decode(values, FORMAT, engine="native")
    python = cdc_decode.decode(values, FORMAT, engine="python")
    assert_same_events(native, python)


# ---------------------------------------------------------------------------------------
# Rules


@pytest.mark.parametrize("source_op, op", [("r", "read"), ("c", "insert"), ("u", "update"),
                                           ("d", "delete"), ("t", "truncate"), ("m", "other"),
                                           ("x", "other")])  # fmt: skip
def test_ops(source_op, op, engine):
    row = one(engine, json.dumps({"op": source_op}))
    assert (row["op"], row["source_op"]) == (op, source_op)


def test_the_connect_wrapper_and_its_tombstone(engine):
    bare = {"op": "c", "after": {"id": 1}, "source": {"db": "d", "table": "t"}}
    wrapped = {"schema": {"type": "struct", "fields": []}, "payload": bare}
    assert one(engine, json.dumps(wrapped)) == one(engine, json.dumps(bare))
    assert one(engine, '{"schema":null,"payload":null}')["op"] == "tombstone"
    assert decode(engine, [None])[0]["op"] == "tombstone"
    # Only both members make a wrapper: a table column named "payload" is data.
    assert one(engine, '{"op":"c","payload":1}')["metadata"] == [("payload", "1")]


def test_mysql_source_position_sequence_and_ids(engine):
    source = {"version": "2.4", "connector": "mysql", "name": "srv", "ts_ms": 1700000000000,
              "db": "shop", "table": "orders", "server_id": 223344, "gtid": "uuid:42",
              "file": "mysql-bin.000003", "pos": 4711, "row": 2, "thread": 7}  # fmt: skip
    row = one(engine, json.dumps({"op": "u", "before": {"id": 1}, "after": {"id": 1},
                                  "source": source, "ts_ms": 1700000000500,
                                  "ts_us": 1700000000500123}))  # fmt: skip
    assert row["position"] == "mysql-bin.000003:4711" and row["tx_id"] == "uuid:42"
    assert row["event_id"] == "mysql-bin.000003:4711:2"
    key = b"mysql-bin.000003\x00\x01" + struct.pack(">QQ", 4711, 2)
    assert row["sequence"] == key
    assert row["capture_time"] == datetime(2023, 11, 14, 22, 13, 20, 500123, tzinfo=timezone.utc)
    assert row["event_time"] == at_ms(1700000000000)
    assert [k for k, _ in row["metadata"]] == ["version", "connector", "name", "ts_ms",
                                               "server_id", "gtid", "file", "pos", "row",
                                               "thread"]  # fmt: skip


def test_transaction_blocks_boundaries_and_schema_changes(engine):
    tx = {"id": "tx-9", "total_order": 3, "data_collection_order": 1}
    row = one(engine, json.dumps({"op": "c", "source": {"txId": 7}, "transaction": tx}))
    assert row["tx_id"] == "tx-9"
    assert row["metadata"] == [("txId", "7"), ("total_order", "3"), ("data_collection_order", "1")]
    assert one(engine, json.dumps({"op": "c", "source": {"txId": 7}}))["tx_id"] == "7"
    begin = one(engine, '{"status":"BEGIN","id":"571:53195829","event_count":null}')
    assert (begin["op"], begin["source_op"], begin["tx_id"]) == ("begin", "BEGIN", "571:53195829")
    end = one(engine, '{"status":"END","id":"571:53195829","event_count":2,"data_collections":[]}')
    assert end["op"] == "commit"
    assert end["metadata"] == [("event_count", "2"), ("data_collections", "[]")]
    ddl = one(engine, '{"source":{"server":"s"},"databaseName":"inv","ddl":"DROP TABLE t"}')
    assert (ddl["op"], ddl["source_db"], ddl["ddl"], ddl["source_op"]) == (
        "ddl", "inv", "DROP TABLE t", None,
    )  # fmt: skip


def test_lindorm_updates_and_hbase_tables(engine):
    raw = {"op": "u", "before": {"ROW": "cm93MQ==", "cf_q1": "dmFsMQ==", "cf_q2": "eA=="},
           "after": {"ROW": "cm93MQ==", "cf_q1": "dmFsMg=="},
           "source": {"version": "2.0", "db": "lindorm", "namespace": "default", "table": "t",
                      "ts_ms": 1700000000123},
           "ts_ms": 1700000000456}  # fmt: skip
    row = one(engine, json.dumps(raw))
    assert row["source_schema"] == "default" and row["source_db"] == "lindorm"
    assert len(row["before"]) == 3 and row["after"] == [("ROW", "cm93MQ=="), ("cf_q1", "dmFsMg==")]
    assert row["sequence"] == struct.pack(">Q", 1700000000123 * 10**6 + (1 << 63))
    assert row["event_id"] is None and row["position"] is None


def test_values_render_as_text(engine):
    raw = '{"op":"c","after":{"n":12.50,"b":true,"x":null,"o":{"k":[1,"\\u0041"]},"s":"\\u00e9"}}'
    assert one(engine, raw)["after"] == [("n", "12.50"), ("b", "true"), ("x", None),
                                         ("o", '{"k":[1,"A"]}'), ("s", "é")]  # fmt: skip


def test_heartbeats(engine):
    row = one(engine, '{"ts_ms":1700000000456}')
    assert (row["op"], row["capture_time"], row["source_op"]) == (
        "heartbeat", at_ms(1700000000456), None,
    )  # fmt: skip
    assert one(engine, '{"schema":{},"payload":{"ts_ms":1}}')["op"] == "heartbeat"
    assert decode(engine, ['{"ts_ms":1,"x":2}'])[0]["op"] == "error"


BAD = [
    b"",
    b"{",
    b"[]",
    b"null",
    b"{}",
    b'{"before":null}',
    b'{"op":1}',
    b'{"op":"c","after":[1]}',
    b'{"op":"c","before":"x"}',
    b'{"op":"c","source":"x"}',
    b'{"op":"c","transaction":[]}',
    b'{"op":"c","ts_ms":"soon"}',
    b'{"op":"c","ts_ms":9300000000000000}',
    b'{"op":"c","source":{"pos":-1,"file":"f"}}',
    b'{"op":"c","source":{"lsn":"x"}}',
    b'{"op":"c","source":{"db":5}}',
    b'{"schema":{},"payload":"x"}',
    b'{"op":"c","x":"\\ud800"}',
    b'{"op":"c"} {}',
    b'{"op":"c","after":' + b"[" * 200 + b"]" * 200 + b"}",
    b"\xff",
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_input_is_one_error_row(raw, engine):
    (row,) = decode(engine, [raw])
    assert row["op"] == "error" and row["error"] and row["raw"] == raw


def test_hostile_but_valid_inputs_decode(engine):
    big = "x" * 5_000_000
    row = one(engine, '{"op":"c","after":{"s":"' + big + '","n":' + "9" * 100_000 + "}}")
    assert row["after"] == [("s", big), ("n", "9" * 100_000)]


def test_engines_agree_in_batches():
    values = fixture(FLINK) * 3 + [None, b"{"]
    native = cdc_decode.decode(pa.array(values, pa.binary()), FORMAT, engine="native")
    python = cdc_decode.decode(pa.array(values, pa.binary()), FORMAT, engine="python")
    assert_same_events(native, python)


# ---------------------------------------------------------------------------------------
# Generated streams


@pytest.fixture(scope="module", params=[1, 2])
def stream(request):
    from cdc_decode.generate import generate

    return generate(FORMAT, messages=3000, seed=request.param)


def test_generated_stream_decodes_to_the_expected_events(stream, engine):
    from test_generator import assert_events_equal

    out = cdc_decode.decode(stream.values, FORMAT, engine=engine)
    assert out.column("error").null_count == out.num_rows
    assert_events_equal(pa.Table.from_batches([out]), stream.expected)
    state = apply_events(out, primary_keys=stream.primary_keys)
    assert state == stream.final_state


def test_generated_stream_covers_the_format(stream):
    ops = set(stream.expected.column("op").to_pylist())
    assert {"insert", "update", "delete", "tombstone"} <= ops
    texts = [v.decode() for v in stream.values if v is not None]
    assert any(t.startswith('{"schema"') for t in texts)
    assert any(t.startswith('{"before"') for t in texts)
    assert any('"transaction":{' in t for t in texts) and any('"ts_ns"' in t for t in texts)
    sequences = [s for s in stream.expected.column("sequence").to_pylist() if s is not None]
    assert sequences == sorted(sequences), "the log order is the sequence order"


def test_a_stream_starts_with_snapshot_rows():
    from cdc_decode.generate import generate

    ops = generate(FORMAT, messages=200, seed=1).expected.column("op").to_pylist()
    assert ops[0] == "read" and "insert" in ops
