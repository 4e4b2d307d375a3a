"""docs/formats/debezium-json.md's connectors beyond MySQL on both engines (each test runs
with the Rust core and with the Python fallback): messages of the MongoDB, Oracle, SQL
Server, Db2, Informix, Vitess and PostgreSQL connectors and of the transaction topic, built
from Debezium's documentation examples and the connectors' source-block fields
(tests/debezium_corpus/, one connector a file, in log order), decode without error rows;
each file's `sequence` keys follow its log order; MongoDB's Extended JSON, partial images
and `_id` key; applying by `sequence` gives the final documents."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from compare import assert_same_events

import cdc_decode
from cdc_decode.generate import apply_change, apply_events
from cdc_decode.generate.apply import table_name

FORMAT = "debezium-json"
ENGINE = "native"
CORPUS = Path(__file__).parent / "debezium_corpus"
CONNECTORS = ["mongodb", "oracle", "sqlserver", "db2", "informix", "vitess", "postgresql"]


@pytest.fixture(autouse=True, params=["native", "python"])
def _engine(request):
    """Runs every test of this module on each engine."""
    global ENGINE
    ENGINE = request.param
    yield
    ENGINE = "native"


def messages(name: str) -> list[bytes]:
    return (CORPUS / f"{name}.jsonl").read_bytes().splitlines()


def decode(values) -> list[dict]:
    values = [v.encode() if isinstance(v, str) else v for v in values]
    return cdc_decode.decode(values, FORMAT, engine=ENGINE).to_pylist()


def one(value) -> dict:
    (row,) = decode([json.dumps(value) if isinstance(value, dict) else value])
    assert row["error"] is None, row["error"]
    return row


@pytest.mark.parametrize("name", CONNECTORS)
def test_each_connector_decodes_in_sequence_order(name):
    rows = decode(messages(name))
    assert [r["error"] for r in rows] == [None] * len(rows)
    keys = [r["sequence"] for r in rows]
    assert None not in keys
    assert keys == sorted(keys), "the file is in log order"
    # Only snapshot rows share a key.
    changes = [r["sequence"] for r in rows if r["op"] != "read"]
    assert len(set(changes)) == len(changes)
    ids = [r["event_id"] for r in rows if r["op"] != "read"]
    if name == "vitess":  # a VGTID names a transaction, not a change
        assert ids == [None] * len(ids)
    else:
        assert all(ids) and len(set(ids)) == len(ids)
    assert all(r["event_id"] is None for r in rows if r["op"] == "read")


@pytest.mark.parametrize("name", CONNECTORS)
def test_shuffled_streams_applied_by_sequence_give_the_log_order_state(name):
    rows = cdc_decode.decode(messages(name), FORMAT, engine=ENGINE)
    key = {"mongodb": None, "oracle": ["ID"], "db2": ["ID"]}.get(name, ["id"])
    in_log_order: dict = {}
    for r in rows.to_pylist():
        table = table_name(r["source_db"], r["source_schema"], r["source_table"])
        before = None if r["before"] is None else dict(r["before"])
        after = None if r["after"] is None else dict(r["after"])
        apply_change(in_log_order, table, r["op"], r["primary_key"] or key, before, after)
    tables = dict.fromkeys(in_log_order, key)
    in_log_order = {table: rows for table, rows in in_log_order.items() if rows}
    shuffled = rows.take(random.Random(7).sample(range(rows.num_rows), rows.num_rows))
    assert apply_events(shuffled, primary_keys=tables) == in_log_order


def test_mongodb_documents_from_extended_json():
    rows = decode(messages("mongodb"))
    read, insert, partial, full, delete, patch, replace, filtered = rows
    assert [r["op"] for r in rows] == [
        "read",
        "insert",
        "update",
        "update",
        "delete",
        "update",
        "update",
        "delete",
    ]
    assert all(r["primary_key"] == ["_id"] for r in rows)
    assert (read["source_db"], read["source_table"]) == ("inventory", "customers")
    # v1 strict (the connector's default for whole documents)
    assert read["after"] == [
        ("_id", "1004"),
        ("first_name", "Anne"),
        ("last_name", "Kretchmar"),
        ("email", "annek@noanswer.org"),
        ("joined", "2026-07-03T17:59:45.729Z"),
        ("photo", "AQID"),
        ("address", '{"zip":12345,"seen":"2026-07-03T17:59:45.000Z"}'),
        ("tags", '["a","596e275826f08b2730779e1f"]'),
    ]
    # v2 canonical, in the payload-only wrapper
    assert dict(insert["after"]) == {
        "_id": "1005",
        "first_name": "596e275826f08b2730779e1f",
        "age": "41",
        "score": "1.5",
        "limit": "Infinity",
        "price": "9.99",
        "joined": "2026-07-03T17:59:45.729Z",
        "photo": "AQID",
        "op_time": "1558965508:3",
        "note": None,
    }
    assert insert["position"] == "1558965508:3" and insert["event_id"] == "1558965508:3"
    # updateDescription: updated fields, removed ones as nulls; the pre-image as before
    assert partial["after"] == [
        ("first_name", "Anne Marie"),
        ("joined", "2026-07-03T17:59:45.700Z"),
        ("email", None),
    ]
    assert dict(partial["before"])["_id"] == "1004"
    assert partial["tx_id"] == "1462833718356672513"
    assert partial["event_id"] == "1558965509:1:1" and full["event_id"] == "1558965509:1:2"
    assert partial["sequence"] < full["sequence"]  # same oplog entry, order in the transaction
    meta = dict(partial["metadata"])
    assert meta["txnNumber"] == "1" and json.loads(meta["updateDescription"])["removedFields"]
    assert dict(full["after"]) == {"_id": "1005", "first_name": "Jo", "age": "42"}
    assert delete["after"] is None and dict(delete["before"])["_id"] == "1005"
    # the older connector: $set / $unset patches, replacement documents, filters
    assert patch["after"] == [
        ("last_name", "Kretchmar-Smith"),
        ("visits", "3"),
        ("first_name", None),
    ]
    assert patch["before"] == [("_id", "1004")]
    assert dict(replace["after"]) == {"_id": "1006", "first_name": "Rita", "last_name": "Mora"}
    assert filtered["before"] == [("_id", "1006")] and filtered["after"] is None


def test_mongodb_stream_applied_by_sequence():
    values = messages("mongodb")
    shuffled = values[:]
    random.Random(3).shuffle(shuffled)
    state = apply_events(cdc_decode.decode(shuffled, FORMAT, engine=ENGINE))
    assert state == {
        "inventory.customers": {
            ("1004",): {
                "_id": "1004",
                "first_name": None,
                "last_name": "Kretchmar-Smith",
                "email": None,
                "joined": "2026-07-03T17:59:45.700Z",
                "photo": "AQID",
                "address": '{"zip":12345,"seen":"2026-07-03T17:59:45.000Z"}',
                "tags": '["a","596e275826f08b2730779e1f"]',
                "visits": "3",
            },
        }
    }


def test_extended_json_forms_agree():
    relaxed = {
        "i": 5,
        "d": 1.5,
        "t": {"$date": "2026-07-03T19:59:45.729+02:00"},
        "n": {"a": [1, 2.5]},
        "o": {"$oid": "abc"},
    }
    canonical = {
        "i": {"$numberInt": "5"},
        "d": {"$numberDouble": "1.5"},
        "t": {"$date": {"$numberLong": "1783101585729"}},
        "n": {"a": [{"$numberLong": "1"}, {"$numberDouble": "2.5"}]},
        "o": {"$oid": "abc"},
    }
    strict = {
        "i": 5,
        "d": 1.5,
        "t": {"$date": 1783101585729},
        "n": {"a": [1, 2.5]},
        "o": {"$oid": "abc"},
    }
    images = [
        one({"op": "c", "after": json.dumps(d)})["after"] for d in (relaxed, canonical, strict)
    ]
    assert images[0] == images[1] == images[2]
    assert dict(images[0])["t"] == "2026-07-03T17:59:45.729Z"
    # Not wrappers: left as compact JSON; dates that do not read pass as sent.
    odd = {
        "a": {"$oid": 1},
        "b": {"$date": "soon"},
        "c": {"$regex": "^a", "$options": "i"},
        "d": {"$numberDouble": "NaN"},
        "e": {"$date": "2026-02-30T00:00:00Z"},
    }
    assert one({"op": "c", "after": json.dumps(odd)})["after"] == [
        ("a", '{"$oid":1}'),
        ("b", "soon"),
        ("c", '{"$regex":"^a","$options":"i"}'),
        ("d", "NaN"),
        ("e", "2026-02-30T00:00:00Z"),
    ]


def test_mongodb_typed_mode():
    ddl = "_id bigint, name string, joined timestamp, price decimal(10,2), photo binary"
    doc = {
        "_id": {"$numberLong": "7"},
        "name": "x",
        "joined": {"$date": 1783101585729},
        "price": {"$numberDecimal": "9.99"},
        "photo": {"$binary": "AQID", "$type": "00"},
    }
    value = json.dumps({"op": "c", "after": json.dumps(doc), "source": {"connector": "mongodb"}})
    batch = cdc_decode.decode([value.encode()], FORMAT, engine=ENGINE, schema=ddl)
    (row,) = batch.to_pylist()
    assert row["error"] is None, row["error"]
    after = row["after"]
    assert after["_id"] == 7 and after["name"] == "x" and after["photo"] == b"\x01\x02\x03"
    assert str(after["price"]) == "9.99"
    assert after["joined"].isoformat().startswith("2026-07-03T17:59:45.729")
    partial = json.dumps(
        {
            "op": "u",
            "updateDescription": {"updatedFields": '{"name": "y"}', "removedFields": ["price"]},
        }
    )
    (row,) = cdc_decode.decode([partial.encode()], FORMAT, engine=ENGINE, schema=ddl).to_pylist()
    assert row["after"]["name"] == "y" and row["after"]["price"] is None


def test_oracle_sequence_and_ids():
    rows = decode(messages("oracle"))
    read, _, insert, update, delete, last = rows
    assert read["position"] == "1513734" and read["tx_id"] is None
    assert insert["tx_id"] == "6.28.807" and insert["event_id"] == "2122185:2122185:1"
    assert update["event_id"] == "2122185:2122185:2"
    # commit SCN first: a change with a lower SCN committed later sorts later
    assert delete["position"] == "2122180" and delete["sequence"] > update["sequence"]
    assert delete["event_id"] == "2125544:2122180:1" and last["event_id"] == "2125544:2125544:2"
    key = struct.pack(">Q", 2125544) + b"5.6.641\x00\x01" + struct.pack(">QQ", 2122180, 1)
    assert delete["sequence"] == key
    assert (insert["source_db"], insert["source_schema"], insert["source_table"]) == (
        "ORCLPDB1",
        "DEBEZIUM",
        "CUSTOMERS",
    )


def test_lsn_connectors():
    sqlserver = decode(messages("sqlserver"))
    assert sqlserver[0]["position"] == "00000025:00000d98:00a2"
    assert sqlserver[1]["position"] == "00000027:00000758:0003"
    assert sqlserver[1]["event_id"] == "00000027:00000758:0005:00000027:00000758:0003:1"
    assert sqlserver[1]["sequence"] == (
        b"00000027:00000758:0005\x00\x0100000027:00000758:0003\x00\x01" + struct.pack(">Q", 1)
    )
    db2 = decode(messages("db2"))
    assert db2[1]["event_id"] == "00000027:00000758:0005:00000027:00000758:0003"
    assert db2[1]["tx_id"] == "00000025:00000d08:0025"
    informix = decode(messages("informix"))
    assert informix[1]["position"] == "627404540485812" and informix[1]["tx_id"] == "571"
    assert informix[1]["sequence"] == struct.pack(">QQ", 627404540485860, 627404540485812)


def test_postgres_sequence_and_vitess():
    pg = decode(messages("postgresql"))
    # the later commit sorts later though its change LSN is lower
    assert pg[1]["sequence"] == struct.pack(">QQ", 24023200, 24023120) > pg[0]["sequence"]
    assert pg[1]["position"] == "24023120" and pg[1]["tx_id"] == "554"
    start = {"op": "c", "source": {"lsn": 5, "sequence": '[null,"5"]'}}
    assert one(start)["sequence"] == struct.pack(">QQ", 0, 5)
    vitess = decode(messages("vitess"))
    uuid = b"e03ece6c-4c04-11ec-8e20-0242ac110004\x00\x01"
    assert vitess[2]["sequence"] == b"commerce\x00\x010\x00\x01" + uuid + struct.pack(">QQ", 69, 1)
    assert vitess[0]["position"].startswith('[{"keyspace":"commerce"')
    ordered = {
        "op": "c",
        "source": {"vgtid": "[]", "ts_ms": 1},
        "transaction": {
            "id": "x",
            "total_order": 3,
            "transaction_epoch": 0,
            "transaction_rank": 68,
        },
    }
    row = one(ordered)
    assert row["sequence"] == struct.pack(">QQQ", 1 << 63, (1 << 63) + 68, 3)
    assert dict(row["metadata"])["transaction_rank"] == "68"
    two_shards = {
        "op": "c",
        "source": {
            "ts_ms": 2,
            "vgtid": json.dumps(
                [
                    {"keyspace": "k", "shard": "-80", "gtid": "MySQL56/u:1-5"},
                    {"keyspace": "k", "shard": "80-", "gtid": "MySQL56/v:1-9"},
                ]
            ),
        },
    }
    assert one(two_shards)["sequence"] == struct.pack(">Q", 2 * 10**6 + (1 << 63))


def test_transaction_topic_and_payload_only_wrapper():
    begin, end, wrapped = decode(messages("transactions"))
    assert (begin["op"], begin["tx_id"]) == ("begin", "571:53195829")
    assert (end["op"], dict(end["metadata"])["event_count"]) == ("commit", "2")
    assert (wrapped["op"], wrapped["tx_id"]) == ("begin", "00000025:00000d08:0025")
    bare = {"op": "c", "after": {"id": 1}, "source": {"db": "d", "table": "t"}}
    assert one({"payload": bare}) == one(bare)
    assert one('{"payload":null}')["op"] == "tombstone"
    # Other members beside it: the bare envelope, payload a member like any other.
    assert one('{"op":"c","payload":{}}')["metadata"] == [("payload", "{}")]
    # Within a transaction, the order in it breaks ties of the source time.
    first = one({"op": "c", "source": {"ts_ms": 5}, "transaction": {"id": "t", "total_order": 1}})
    second = one({"op": "c", "source": {"ts_ms": 5}, "transaction": {"id": "t", "total_order": 2}})
    assert first["sequence"] < second["sequence"]


BAD = [
    b'{"op":"c","after":"{"}',
    b'{"op":"c","after":"[1]"}',
    b'{"op":"u","updateDescription":{"updatedFields":5}}',
    b'{"op":"u","updateDescription":{"removedFields":[null]}}',
    b'{"op":"u","updateDescription":[]}',
    b'{"op":"u","patch":"{\\"$set\\":1}"}',
    b'{"op":"d","filter":"x"}',
    b'{"op":"c","source":{"lsn":1,"sequence":"[1]"}}',
    b'{"op":"c","source":{"lsn":1,"sequence":"[\\"x\\",\\"1\\"]"}}',
    b'{"op":"c","source":{"scn":"abc"}}',
    b'{"op":"c","source":{"commit_lsn":5}}',
    b'{"op":"c","source":{"connector":"informix","change_lsn":"x"}}',
    b'{"op":"c","source":{"vgtid":5}}',
    b'{"op":"c","source":{"ord":-1}}',
    b'{"op":"c","source":{"txId":true}}',
    b'{"op":"c","source":{"connector":5}}',
    b'{"op":"c","transaction":{"transaction_rank":"x"}}',
    b'{"op":"c","after":"{\\"a\\":' + b"[" * 200 + b"]" * 200 + b'}"}',
]


@pytest.mark.parametrize("raw", BAD)
def test_bad_input_is_one_error_row(raw):
    (row,) = decode([raw])
    assert row["op"] == "error" and row["error"] and row["raw"] == raw


def test_other_connectors_members_are_read_only_for_them():
    # MySQL's and PostgreSQL's messages do not read `connector` and the like.
    assert one('{"op":"c","source":{"file":"f","connector":5,"scn":"x"}}')["event_id"] == "f:0:0"
    assert one('{"op":"c","source":{"lsn":3,"connector":5,"ord":-1}}')["position"] == "3"


def test_engines_agree_on_every_connector_and_corrupted_copies():
    values = [v for name in CONNECTORS + ["transactions"] for v in messages(name)]
    values += [bytes(raw) for raw in BAD]
    rng = random.Random(19)
    for value in list(values):
        for _ in range(30):
            data = bytearray(value)
            i = rng.randrange(len(data))
            choice = rng.random()
            if choice < 0.4:
                data[i] ^= 1 << rng.randrange(8)
            elif choice < 0.7:
                del data[i:]
            else:
                data[i:i] = rng.choice([b"\\", b'"', b"{", b"$", b"0", b":"])
            values.append(bytes(data))
    native = cdc_decode.decode(pa.array(values, pa.binary()), FORMAT, engine="native")
    python = cdc_decode.decode(pa.array(values, pa.binary()), FORMAT, engine="python")
    assert_same_events(native, python)


# ---------------------------------------------------------------------------------------
# Generated MongoDB and Oracle streams


@pytest.fixture(scope="module", params=["oracle", "mongodb"])
def connector_stream(request):
    from cdc_decode.generate import generate

    return generate(FORMAT, messages=2500, seed=4, connector=request.param)


def test_generated_connector_stream_applies_to_the_source(connector_stream):
    from test_generator import assert_events_equal

    out = cdc_decode.decode(connector_stream.values, FORMAT, engine=ENGINE)
    assert out.column("error").null_count == out.num_rows
    assert_events_equal(pa.Table.from_batches([out]), connector_stream.expected)
    shuffled = out.take(random.Random(5).sample(range(out.num_rows), out.num_rows))
    state = apply_events(shuffled, primary_keys=connector_stream.primary_keys)
    assert state == connector_stream.final_state
    sequences = [s for s in connector_stream.expected.column("sequence").to_pylist() if s]
    assert sequences == sorted(sequences), "the log order is the sequence order"


def test_generated_connector_streams_agree_on_both_engines(connector_stream):
    values = connector_stream.values
    native = cdc_decode.decode(values, FORMAT, engine="native")
    python = cdc_decode.decode(values, FORMAT, engine="python")
    assert_same_events(native, python)
    texts = [v for v in values if v is not None]
    if connector_stream.options["connector"] == "mongodb":
        assert any(b'"updateDescription":{' in t for t in texts)
        assert any(b"$numberLong" in t for t in texts) and any(b'$date\\":\\"' in t for t in texts)
    else:
        assert any(b'"commit_scn":"' in t for t in texts) and any(b'"txSeq":' in t for t in texts)


def test_the_generator_refuses_unknown_connectors():
    from cdc_decode.generate import generate

    with pytest.raises(ValueError, match="unknown connector"):
        generate(FORMAT, messages=10, connector="db9")
    with pytest.raises(ValueError, match="applies to debezium-json only"):
        generate("tencent-dts", messages=10, connector="oracle")


def test_the_command_line_writes_connector_streams(tmp_path):
    from cdc_decode.cli import main
    from cdc_decode.generate import read_final_state, read_values

    assert main(["generate", FORMAT, "--connector", "oracle", "--messages", "300",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    events = cdc_decode.decode(read_values(tmp_path / "values.bin"), FORMAT, engine=ENGINE)
    assert set(events.column("source_db").to_pylist()) == {"ORCLPDB1", None}  # tombstones
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["options"]["connector"] == "oracle"
    assert read_final_state(tmp_path / "final_state.json")
