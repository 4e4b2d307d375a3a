"""What a real Debezium sends, decoded: records captured from PostgreSQL 15 through Debezium
3.6.1 (pgoutput, JSON converter with schemas, JSON header converter) into Kafka, with their
keys and headers (tests/debezium_real/, made by the chain of tests/delta/test_real_source.py).

The table ``docs`` has a 12,800-character ``body`` (TOASTed), a ``blob`` bytea, ``tags``
text[], ``nums`` int[], ``big`` bigint[], ``j`` jsonb and ``js`` json, all out of line.
Then, in order: an insert of row 3; ``UPDATE docs SET title = 'f' WHERE id = 3`` (the
TOASTed columns unchanged: the placeholder); ``UPDATE docs SET id = 4 WHERE id = 3`` (a key
change: a delete with ``__debezium.newkey``, its tombstone, an insert with
``__debezium.oldkey`` carrying the placeholder); a delete of row 1 and its tombstone;
``TRUNCATE docs``. Beside them, transaction boundaries and a heartbeat.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode import DecodeError

CAPTURE = Path(__file__).parent / "debezium_real" / "postgres-15-debezium-3.6.1.jsonl"
RECORDS = [json.loads(line) for line in CAPTURE.read_text().splitlines()]
DOCS = [r for r in RECORDS if r["topic"].endswith("public.docs")]
TOASTED = ["body", "blob", "tags", "nums", "big", "j", "js"]
TYPED = "id int, title string, body string, blob binary, tags string, nums string, j string"


def values(records=DOCS) -> list:
    return [None if r["value"] is None else r["value"].encode() for r in records]


def headers(records=DOCS) -> list:
    return [[(k, None if v is None else v.encode()) for k, v in r["headers"]] for r in records]


def rows(batch: pa.RecordBatch) -> list[dict]:
    return batch.select(["op", "source_op", "before", "after"]).to_pylist()


def test_the_capture_is_what_the_connector_sent():
    """The shapes the docs describe, in the captured messages themselves."""
    update = json.loads(DOCS[1]["value"])["payload"]["after"]
    assert update["body"] == "__debezium_unavailable_value"
    assert base64.b64decode(update["blob"]) == b"__debezium_unavailable_value"
    assert update["tags"] == ["__debezium_unavailable_value"]
    assert update["nums"] == list(b"__debezium_unavailable_value") == update["big"]
    assert update["j"] == update["js"] == "__debezium_unavailable_value"
    names = [[k for k, _ in r["headers"] if not k.startswith("__debezium.context")] for r in DOCS]
    assert names[2:5] == [["__debezium.newkey"], ["__debezium.newkey"], ["__debezium.oldkey"]]
    assert dict(DOCS[4]["headers"])["__debezium.oldkey"] == '{"id":3}'
    delete, create = (json.loads(DOCS[i]["value"])["payload"] for i in (2, 4))
    assert delete["source"]["lsn"] == create["source"]["lsn"]  # one change, one LSN
    assert DOCS[3]["value"] is None and DOCS[6]["value"] is None  # the tombstones


def test_placeholder_columns_are_absent(engine):
    batch = cdc_decode.decode(values(), "debezium-json", headers=headers(), engine=engine)
    got = rows(batch)
    assert [r["op"] for r in got] == [
        "insert",
        "update",
        "delete",
        "tombstone",
        "update",
        "delete",
        "tombstone",
        "truncate",
    ]
    inserted = dict(got[0]["after"])
    assert len(inserted["body"]) == 12_800 and json.loads(inserted["nums"])[:1] != [95]
    for row in (got[1], got[4]):
        after = dict(row["after"])
        assert not set(TOASTED) & after.keys()
        assert after["title"] == "f"
        assert "m" in after and after["m"] is None  # a real null stays a null


def test_placeholder_typed_after_absent(engine):
    batch = cdc_decode.decode(
        values(), "debezium-json", headers=headers(), engine=engine, schema=TYPED
    )
    absent = batch.column("after_absent").to_pylist()
    assert absent[0] == []
    assert absent[1] == absent[4] == ["body", "blob", "tags", "nums", "j"]
    assert batch.column("after").to_pylist()[1]["body"] is None


def _renamed(text: str, old: str, new: str) -> str:
    """A message with the placeholder ``old`` replaced by ``new`` in every shape."""
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    codes = lambda s: json.dumps(list(s.encode()), separators=(",", ":"))  # noqa: E731
    return text.replace(codes(old), codes(new)).replace(b64(old), b64(new)).replace(old, new)


def test_a_configured_placeholder(engine):
    """``unavailable.value.placeholder=__gone``: named with ``unavailable_value``; the
    default one is then a value like any other."""
    renamed = [
        None if v is None else _renamed(v.decode(), "__debezium_unavailable_value", "__gone")
        for v in values()
    ]
    assert "__gone" in renamed[1] and "__debezium" not in renamed[1].split('"payload"')[1]
    batch = cdc_decode.decode(renamed, "debezium-json", engine=engine, unavailable_value="__gone")
    assert not set(TOASTED) & dict(rows(batch)[1]["after"]).keys()
    default = cdc_decode.decode(renamed, "debezium-json", engine=engine)
    assert dict(rows(default)[1]["after"])["body"] == "__gone"


def test_the_placeholder_rule_turned_off(engine):
    batch = cdc_decode.decode(values(), "debezium-json", engine=engine, unavailable_value="")
    after = dict(rows(batch)[1]["after"])
    assert after["body"] == "__debezium_unavailable_value"
    assert after["tags"] == '["__debezium_unavailable_value"]'


def test_unavailable_value_is_for_debezium_only(engine):
    with pytest.raises(ValueError, match="applies to debezium-json only, not datahub-blob"):
        cdc_decode.Decoder("datahub-blob", engine=engine, unavailable_value="x")
    with pytest.raises(TypeError, match="must be a string"):
        cdc_decode.Decoder("debezium-json", engine=engine, unavailable_value=5)


def test_key_change_is_an_update_from_the_old_key(engine):
    batch = cdc_decode.decode(values(), "debezium-json", headers=headers(), engine=engine)
    moved = rows(batch)[4]
    assert (moved["op"], moved["source_op"]) == ("update", "c")
    assert moved["before"] == [("id", "3")]
    assert dict(moved["after"])["id"] == "4"
    assert rows(batch)[2]["op"] == "delete"  # the delete with __debezium.newkey stays one
    # Without the headers the insert half stays an insert.
    plain = cdc_decode.decode(values(), "debezium-json", engine=engine)
    assert rows(plain)[4]["op"] == "insert" and rows(plain)[4]["before"] is None
    # Typed: before holds the key column only.
    typed = cdc_decode.decode(
        values(), "debezium-json", headers=headers(), engine=engine, schema=TYPED
    )
    assert typed.column("before").to_pylist()[4] == dict.fromkeys(TYPED_NAMES, None) | {"id": 3}


TYPED_NAMES = [c.split()[0] for c in TYPED.split(", ")]


def test_headers_as_spark_gives_them(engine):
    """Spark's Kafka ``headers`` column (``array<struct<key, value: binary>>``) as Arrow."""
    kind = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    arrow = pa.array([[{"key": k, "value": v} for k, v in row] for row in headers()], kind)
    batch = cdc_decode.decode(values(), "debezium-json", headers=arrow, engine=engine)
    assert rows(batch)[4]["op"] == "update"


@pytest.mark.parametrize(
    ("header", "error"),
    [
        (b"Struct{id=3}", "__debezium.oldkey header: "),
        (b"[1]", "__debezium.oldkey header: expected an object, got an array"),
        (b"null", "__debezium.oldkey header: expected an object, got null"),
        (b"[" * 200 + b"]" * 200, "__debezium.oldkey header: "),
    ],
)
def test_a_bad_old_key_is_an_error_row(engine, header, error):
    hdrs = headers()
    hdrs[4] = [("__debezium.oldkey", header)]
    batch = cdc_decode.decode(values(), "debezium-json", headers=hdrs, engine=engine)
    got = batch.column("error").to_pylist()
    assert got[4].startswith(error), got[4]
    assert [e is None for e in got] == [True] * 4 + [False] + [True] * 3
    with pytest.raises(DecodeError, match="message 4: __debezium.oldkey header"):
        cdc_decode.decode(values(), "debezium-json", headers=hdrs, engine=engine, mode="failfast")


def test_engines_agree():
    for options in ({}, {"schema": TYPED}, {"unavailable_value": ""}):
        native = cdc_decode.decode(
            values(RECORDS), "debezium-json", headers=headers(RECORDS), **options
        )
        python = cdc_decode.decode(
            values(RECORDS), "debezium-json", headers=headers(RECORDS), engine="python", **options
        )
        assert native.equals(python), options


def test_control_records(engine):
    others = [r for r in RECORDS if not r["topic"].endswith("public.docs")]
    ops = cdc_decode.decode(values(others), "debezium-json", engine=engine).column("op")
    assert ops.to_pylist() == ["begin", "commit", "heartbeat"]


def test_headers_must_line_up(engine):
    with pytest.raises(ValueError, match="headers has 1 entries for 8 values"):
        cdc_decode.decode(values(), "debezium-json", headers=[[]], engine=engine)


@pytest.mark.spark
def test_spark_reads_the_header(spark):
    """``cdc_spark.decode`` on a DataFrame shaped like Spark's Kafka source with
    ``includeHeaders``: the key change is an update, the placeholder columns absent."""
    from cdc_decode import spark as cdc_spark

    data = [
        (
            r["topic"],
            0,
            i,
            None if r["value"] is None else bytearray(r["value"].encode()),
            [(k, bytearray(v.encode())) for k, v in r["headers"]],
        )
        for i, r in enumerate(DOCS)
    ]
    df = spark.createDataFrame(
        data,
        "topic string, partition int, offset long, value binary, "
        "headers array<struct<key: string, value: binary>>",
    )
    got = cdc_spark.decode(df, "debezium-json", schema=TYPED).orderBy("offset").collect()
    assert [r["op"] for r in got][4] == "update"
    assert got[4]["before"]["id"] == 3 and got[4]["after"]["id"] == 4
    assert got[4]["after_absent"] == ["body", "blob", "tags", "nums", "j"]
    custom = cdc_spark.decode(df, "debezium-json", unavailable_value="").orderBy("offset").collect()
    assert custom[1]["after"]["body"] == "__debezium_unavailable_value"
