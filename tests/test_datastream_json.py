"""docs/formats/datastream-json.md on both engines: events of every source Datastream
reads (MySQL, Oracle, PostgreSQL, SQL Server, MongoDB, Salesforce), both timestamp
encodings, op mapping, ordering keys, metadata, bad input, and parity on mutations."""

from __future__ import annotations

import json
import random
import struct
from datetime import datetime, timezone

import pytest
from compare import assert_same_events

import cdc_decode

FORMAT = "datastream-json"


def decode(engine, values) -> list[dict]:
    values = [v.encode() if isinstance(v, str) else v for v in values]
    return cdc_decode.decode(values, FORMAT, engine=engine).to_pylist()


def one(engine, value) -> dict:
    (row,) = decode(engine, [value if isinstance(value, str) else json.dumps(value)])
    assert row["error"] is None, row["error"]
    return row


def us(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def i64(n: int) -> bytes:
    return struct.pack(">Q", n + (1 << 63))


def u64(*ns: int) -> bytes:
    return b"".join(struct.pack(">Q", n) for n in ns)


MYSQL = {
    "stream_name": "projects/p/locations/l/streams/s", "read_method": "mysql-cdc-binlog",
    "object": "shop_orders", "schema_key": "ab12", "uuid": "6b4c2e3a-0001",
    "read_timestamp": 1640411724408, "source_timestamp": "2021-12-25 05:55:24.123",
    "sort_keys": [1640411724123, "mysql-bin.000007", 4711],
    "source_metadata": {"table": "orders", "database": "shop", "primary_keys": ["id"],
                        "log_file": "mysql-bin.000007", "log_position": 4711,
                        "change_type": "UPDATE-DELETE", "is_deleted": True},
    "payload": {"id": 7, "name": "ann", "price": "12.50", "tags": ["a"]},
}  # fmt: skip


def test_a_mysql_event(engine):
    row = one(engine, MYSQL)
    assert row["op"] == "update_before" and row["source_op"] == "UPDATE-DELETE"
    assert (row["source_db"], row["source_schema"], row["source_table"]) == ("shop", None, "orders")
    assert row["before"] == [("id", "7"), ("name", "ann"), ("price", "12.50"), ("tags", '["a"]')]
    assert row["after"] is None
    assert row["event_time"] == us(1640411724123) and row["capture_time"] == us(1640411724408)
    assert row["event_id"] == "6b4c2e3a-0001" and row["primary_key"] == ["id"]
    assert row["position"] == "mysql-bin.000007:4711"
    assert row["sequence"] == u64(1) + b"mysql-bin.000007\x00\x01" + u64(4711) + i64(
        1640411724123000
    )
    assert row["metadata"] == [
        ("stream_name", "projects/p/locations/l/streams/s"), ("read_method", "mysql-cdc-binlog"),
        ("object", "shop_orders"), ("schema_key", "ab12"),
        ("sort_keys", '[1640411724123,"mysql-bin.000007",4711]'),
        ("log_file", "mysql-bin.000007"), ("log_position", "4711"), ("is_deleted", "true"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "read_method, change_type, op, side",
    [
        ("mysql-cdc-binlog", "INSERT", "insert", "after"),
        ("mysql-cdc-binlog", "UPDATE-INSERT", "update_after", "after"),
        ("mysql-cdc-binlog", "UPDATE-DELETE", "update_before", "before"),
        ("mysql-cdc-binlog", "DELETE", "delete", "before"),
        ("postgresql-cdc", "UPDATE", "update", "after"),
        ("mysql-cdc-binlog", None, "other", "after"),
        ("mysql-cdc-binlog", "MERGE", "other", "after"),
        ("mysql-backfill-fulldump", "INSERT", "read", "after"),
        ("oracle-backfill", None, "read", "after"),
        ("oracle_dump", None, "read", "after"),
    ],
)
def test_ops_and_image_sides(read_method, change_type, op, side, engine):
    meta = {} if change_type is None else {"change_type": change_type}
    row = one(engine, {"read_method": read_method, "source_metadata": meta, "payload": {"id": 1}})
    assert row["op"] == op
    assert row[side] == [("id", "1")]
    assert row["before" if side == "after" else "after"] is None


def test_backfill_sorts_before_cdc_in_mysql(engine):
    base = {"source_timestamp": 1000, "source_metadata": {"log_file": "f", "log_position": 9}}
    backfill = one(engine, {**base, "read_method": "mysql-backfill-fulldump"})
    cdc = one(engine, {**base, "read_method": "mysql-cdc-binlog", "source_timestamp": 1})
    assert backfill["sequence"] < cdc["sequence"]


def test_oracle_postgres_sqlserver_mongodb_salesforce_keys(engine):
    oracle = one(engine, {"read_method": "oracle-cdc-logminer", "source_timestamp": 5,
                          "source_metadata": {"schema": "HR", "table": "EMP", "scn": 123,
                                              "rs_id": "0x1", "ssn": 4, "tx_id": "7.1.9",
                                              "row_id": "AAA"}})  # fmt: skip
    assert oracle["sequence"] == i64(5000) + u64(123) + b"0x1\x00\x01" + u64(4)
    assert (oracle["position"], oracle["tx_id"], oracle["source_schema"]) == ("123", "7.1.9", "HR")
    pg_meta = {"schema": "public", "table": "t", "lsn": "16/B374D848"}
    pg = one(
        engine, {"read_method": "postgresql-cdc", "source_timestamp": 5, "source_metadata": pg_meta}
    )
    assert pg["sequence"] == i64(5000) + u64(0x16, 0xB374D848) and pg["position"] == "16/B374D848"
    sqlserver = one(engine, {"read_method": "sqlserver-cdc", "source_timestamp": 5,
                             "source_metadata": {"lsn": "00000027:00000ba0:0003"}})  # fmt: skip
    assert sqlserver["sequence"] == i64(5000) + b"00000027:00000ba0:0003\x00\x01"
    mongo = one(engine, {"read_method": "mongodb-cdc", "source_timestamp": 5,
                         "sort_keys": [1700000000, 7],
                         "source_metadata": {"collection": "users"}})  # fmt: skip
    assert mongo["sequence"] == u64(1700000000, 7) and mongo["source_table"] == "users"
    sf_meta = {"object_name": "Account"}
    salesforce = one(engine, {"read_method": "salesforce-cdc", "source_timestamp": 5,
                              "sort_keys": [5, "x"], "source_metadata": sf_meta})  # fmt: skip
    assert salesforce["sequence"] == i64(5000) and salesforce["source_table"] == "Account"
    assert one(engine, {"read_method": "mysql-cdc-binlog"})["sequence"] is None


@pytest.mark.parametrize(
    "text, ms",
    [
        ("2021-12-25 05:42:04.408", 1640410924408),
        ("2021-12-25T05:42:04.408", 1640410924408),
        ("2021-12-25T05:42:04.408Z", 1640410924408),
        ("2021-12-25 05:42:04", 1640410924000),
        ("1640410924408", 1640410924408),
    ],
)
def test_both_timestamp_encodings(text, ms, engine):
    assert one(engine, {"source_timestamp": text})["event_time"] == us(ms)
    assert one(engine, {"read_timestamp": ms})["capture_time"] == us(ms)


def test_fractions_are_truncated_to_microseconds(engine):
    row = one(engine, {"source_timestamp": "2021-12-25 05:42:04.123456789"})
    assert row["event_time"] == datetime(2021, 12, 25, 5, 42, 4, 123456, tzinfo=timezone.utc)


BAD = [
    b"[]",
    b"{",
    b'{"payload":[1]}',
    b'{"source_metadata":"x"}',
    b'{"source_timestamp":"soon"}',
    b'{"source_timestamp":"2021-02-30 00:00:00"}',
    b'{"source_timestamp":"2021-12-25 05:42:04+08:00"}',
    b'{"source_timestamp":"0000-01-01 00:00:00"}',
    b'{"source_timestamp":1.5}',
    b'{"source_timestamp":true}',
    b'{"read_timestamp":99999999999999999}',
    b'{"uuid":5}',
    b'{"source_metadata":{"log_position":-1}}',
    b'{"source_metadata":{"primary_keys":"id"}}',
    b'{"source_metadata":{"primary_keys":[null]}}',
    b'{"source_metadata":{"table":["t"]}}',
    b'{"payload":{"x":"\\ud800"}}',
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_input_is_one_error_row(raw, engine):
    (row,) = decode(engine, [raw])
    assert row["op"] == "error" and row["error"] and row["raw"] == raw


def test_engines_agree_on_mutations():
    rng = random.Random(4)
    base = [json.dumps(MYSQL).encode()]
    values = list(base)
    for _ in range(1500):
        data = bytearray(rng.choice(base))
        i = rng.randrange(len(data))
        if rng.random() < 0.5:
            data[i] = rng.choice(b'0123456789"{}[],:-T. Zx')
        else:
            del data[i : i + rng.randint(1, 5)]
        values.append(bytes(data))
    native = cdc_decode.decode(values, FORMAT, engine="native")
    python = cdc_decode.decode(values, FORMAT, engine="python")
    assert_same_events(native, python)
    assert 0 < native.column("op").to_pylist().count("error") < len(values)


# ---------------------------------------------------------------------------------------
# Generated streams


@pytest.fixture(scope="module", params=[1, 3])
def stream(request):
    from cdc_decode.generate import generate

    return generate(FORMAT, messages=3000, seed=request.param)


def test_generated_stream_decodes_to_the_expected_events_and_tables(stream, engine):
    import pyarrow as pa
    from test_generator import assert_events_equal

    from cdc_decode.generate import apply_events

    out = cdc_decode.decode(stream.values, FORMAT, engine=engine)
    assert out.column("error").null_count == out.num_rows
    assert_events_equal(pa.Table.from_batches([out]), stream.expected)
    assert apply_events(out) == stream.final_state  # the events name their keys


def test_generated_stream_covers_the_format(stream):
    ops = set(stream.expected.column("op").to_pylist())
    assert {"read", "insert", "update_after", "delete"} <= ops
    texts = [v.decode() for v in stream.values if v is not None]
    assert any('"source_timestamp":"' in t for t in texts)
    assert any('"source_timestamp":1' in t for t in texts)
    sequences = [s for s in stream.expected.column("sequence").to_pylist() if s is not None]
    assert sequences == sorted(sequences), "the log order is the sequence order"
