"""The stream generator: deterministic, covers the format, consistent with itself, and the
decoders turn its messages into exactly the events it expects."""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode import _proto as pb
from cdc_decode.cli import main
from cdc_decode.generate import (
    FORMATS,
    apply_change,
    apply_events,
    generate,
    read_expected,
    read_final_state,
    read_values,
    write_values,
)

ROOT = Path(__file__).resolve().parent.parent

BIG = 10_000


@pytest.fixture(scope="module")
def big():
    return generate("tencent-dts", messages=BIG, seed=7)


@pytest.fixture(scope="module")
def small():
    return generate("tencent-dts", messages=300, seed=3)


def _entries(values):
    """Every Entries in the stream, multi-part sets joined, with the Envelopes they came in."""
    parts: list = []
    for value in values:
        envelope = pb.Envelope.FromString(value)
        parts.append(envelope)
        if envelope.index == max(envelope.total, 1) - 1:
            yield pb.Entries.FromString(b"".join(p.data for p in parts)), parts
            parts = []
    assert not parts, "the stream ends inside a multi-part set"


def _decoder(engine: str):
    # No skip: a missing engine (the extension did not build) must fail the run.
    return cdc_decode.Decoder("tencent-dts", engine=engine)


def assert_events_equal(actual: pa.Table, expected: pa.Table, limit: int = 5) -> None:
    """``actual.equals(expected)``, or a failure naming the first differing cells."""
    if actual.equals(expected):
        return
    problems = []
    if not actual.schema.equals(expected.schema):
        problems.append(f"schema differs:\n{actual.schema}\n---- expected ----\n{expected.schema}")
    if actual.num_rows != expected.num_rows:
        problems.append(f"{actual.num_rows} rows, expected {expected.num_rows}")
    rows = min(actual.num_rows, expected.num_rows)
    for name in expected.schema.names:
        if name not in actual.schema.names:
            continue
        got = actual.column(name).slice(0, rows).to_pylist()
        want = expected.column(name).slice(0, rows).to_pylist()
        bad = [i for i in range(rows) if got[i] != want[i]]
        for i in bad[:limit]:
            problems.append(
                f"row {i} (event {expected.column('event_id')[i]}, "
                f"op {expected.column('op')[i]}) column {name!r}:\n"
                f"    got      {got[i]!r}\n    expected {want[i]!r}"
            )
        if len(bad) > limit:
            problems.append(f"... column {name!r} differs in {len(bad)} rows")
    pytest.fail("decoded events differ from the expected events:\n" + "\n".join(problems))


# --- the generator on its own -----------------------------------------------------------


def test_same_seed_same_bytes():
    a = generate("tencent-dts", messages=400, seed=11)
    b = generate("tencent-dts", messages=400, seed=11)
    assert a.values == b.values
    assert a.expected.equals(b.expected)
    assert a.final_state == b.final_state
    assert generate("tencent-dts", messages=400, seed=12).values != a.values


@pytest.mark.parametrize("format", FORMATS)
def test_start_moves_every_change_by_one_distance(format):
    """``start=``: the first change at that moment, every other one as far from it as
    without the option; the rows and the final state are the same; decoded, each event's
    time is the moved one. A naive datetime is refused."""
    import datetime as dt

    moment = dt.datetime(2026, 12, 5, 9, 30, tzinfo=dt.timezone.utc)
    a = generate(format, messages=120, seed=4)
    b = generate(format, messages=120, seed=4, start=moment)
    assert len(a.values) == len(b.values) and a.final_state == b.final_state
    moved = {
        y - x
        for x, y in zip(
            a.expected["event_time"].to_pylist(), b.expected["event_time"].to_pylist(),
            strict=True,
        )
        if x is not None and x.year > 1970  # Debezium's heartbeats carry no time
    }  # fmt: skip
    assert moved == {moment - dt.datetime(2024, 5, 1, 8, tzinfo=dt.timezone.utc)}
    decoded = cdc_decode.decode(b.values, format, **(
        {"columns": b.options["columns"]} if "columns" in b.options else {}
    ))  # fmt: skip
    times = [t for t in decoded.column("event_time").to_pylist() if t and t.year > 1970]
    assert times and min(times) >= moment
    with pytest.raises(ValueError, match="aware datetime"):
        generate(format, messages=1, seed=4, start=dt.datetime(2026, 1, 1))


@pytest.mark.parametrize("messages", [0, 1, 2, 5, 37, 250])
def test_exact_message_count(messages):
    stream = generate("tencent-dts", messages=messages, seed=messages, max_message_bytes=4096)
    assert stream.messages == messages
    assert all(len(v) <= 4096 for v in stream.values)
    assert apply_events(stream.expected) == stream.final_state


def test_a_stream_cut_anywhere_matches_its_final_state():
    # The last record that does not fit is taken back out of the source's tables.
    for messages in range(1, 80, 3):
        stream = generate("tencent-dts", messages=messages, seed=5, max_message_bytes=2048)
        assert stream.messages == messages
        assert apply_events(stream.expected) == stream.final_state, messages


def test_expected_is_in_the_event_schema(small):
    assert small.expected.schema.equals(cdc_decode.event_schema(), check_metadata=True)
    assert small.expected.column("error").null_count == small.rows
    assert small.expected.column("raw").null_count == small.rows


def test_messages_are_sized_as_asked(big):
    sizes = sorted(len(v) for v in big.values)
    assert sizes[-1] <= 64 * 1024
    assert 1500 <= sizes[len(sizes) // 2] <= 4000  # typical messages are a few KB
    assert 5 <= big.rows / big.messages <= 12


def test_covers_the_format(big):
    message_types, data_types, dml_types, charsets = set(), set(), set(), set()
    multipart = gbk = uint64_high = empty_sv = minimal = composite = 0
    envelope_properties = header_properties = row_properties = ddl_without_header_db = 0
    seq_ids = []
    for entries, envelopes in _entries(big.values):
        multipart += len(envelopes) > 1
        envelope_properties += bool(envelopes[0].properties)
        for entry in entries.items:
            header, event = entry.header, entry.event
            assert header.sourceType == pb.SourceType.values_by_name["MYSQL"].number
            message_types.add(pb.MessageType.values_by_number[header.messageType].name)
            seq_ids.append(header.seqId)
            header_properties += bool(header.properties)
            if header.messageType == pb.MessageType.values_by_name["DDL"].number:
                ddl_without_header_db += not header.schemaName
            dml = event.dmlEvent
            if not dml.columns:
                continue
            dml_types.add(dml.dmlEventType)
            composite += sum(c.isKey for c in dml.columns) > 1
            for row in dml.rows:
                row_properties += bool(row.properties)
                images = [list(row.oldColumns), list(row.newColumns)]
                minimal += any(
                    d.dataType == pb.DataType.values_by_name["NA"].number for d in images[0]
                )
                for data in images[0] + images[1]:
                    data_types.add(pb.DataType.values_by_number[data.dataType].name)
                    if data.dataType == pb.DataType.values_by_name["STRING"].number:
                        charsets.add(data.charset)
                        if data.charset == "gbk" and not data.bv.isascii():
                            gbk += 1
                            data.bv.decode("gbk")
                    if data.dataType == pb.DataType.values_by_name["UINT64"].number and data.sv:
                        uint64_high += int(data.sv) >= 1 << 63
                    numeric = data.dataType not in (0, 11, 13, 14)
                    empty_sv += numeric and not data.sv
    assert message_types == {"BEGIN", "COMMIT", "DML", "DDL", "ROLLBACK", "HEARTBEAT", "CHECKPOINT"}
    assert data_types == set(pb.DataType.values_by_name)  # NIL and NA included
    assert dml_types == {0, 1, 2}
    assert {"utf8mb4", "gbk", "latin1", "ascii", "binary", ""} <= charsets
    assert seq_ids == sorted(set(seq_ids)), "seqId must increase strictly"
    for count in (
        multipart,
        gbk,
        uint64_high,
        empty_sv,
        minimal,
        composite,
        envelope_properties,
        header_properties,
        row_properties,
        ddl_without_header_db,
    ):
        assert count > 0
    # Events the source and the docs call for, seen from the expected side.
    ops = set(big.expected.column("op").to_pylist())
    assert ops == {
        "begin",
        "commit",
        "insert",
        "update",
        "delete",
        "ddl",
        "rollback",
        "heartbeat",
        "checkpoint",
    }
    ddl = [d for d in big.expected.column("ddl").to_pylist() if d]
    assert any("ADD COLUMN" in d for d in ddl)


def test_a_short_stream_has_every_message_type(small):
    ops = set(small.expected.column("op").to_pylist())
    assert {"begin", "commit", "insert", "ddl", "rollback", "heartbeat", "checkpoint"} <= ops
    assert any(pb.Envelope.FromString(v).total > 1 for v in small.values)


def test_values_match_the_vendor_mapping(small):
    rendered = {}
    for entries, _ in _entries(small.values):
        for entry in entries.items:
            dml = entry.event.dmlEvent
            for row in dml.rows:
                for column, data in zip(dml.columns, row.newColumns, strict=False):
                    if data.dataType not in (0, 14):
                        rendered[(entry.header.tableName, column.originalType)] = data
    kinds = {key: pb.DataType.values_by_number[d.dataType].name for key, d in rendered.items()}
    assert kinds[("users", "bigint(20) unsigned")] == "UINT64"
    assert kinds[("users", "tinyint(3) unsigned")] == "UINT8"
    assert kinds[("orders", "mediumint(9)")] == "INT32"
    assert kinds[("warehouses", "mediumint(8) unsigned")] == "UINT32"
    assert kinds[("users", "bit(8)")] == "INT64"
    assert kinds[("items", "year(4)")] == "INT64"
    assert kinds[("users", "float")] == "FLOAT32"
    assert kinds[("orders", "double")] == "FLOAT64"
    assert kinds[("orders", "decimal(10,2)")] == "DECIMAL"
    assert kinds[("users", "json")] == "BYTES"
    assert kinds[("items", "point")] == "BYTES"
    assert kinds[("items", "binary(16)")] == "STRING"
    for key in [
        ("users", "timestamp"),
        ("users", "datetime(6)"),
        ("users", "date"),
        ("orders", "time"),
        ("users", "enum('active','blocked','deleted')"),
    ]:
        assert kinds[key] == "STRING"
    stamp = rendered[("users", "timestamp")].bv.decode()
    assert stamp.endswith(" +00:00") and len(stamp) == len("2021-05-17 07:22:42 +00:00")
    assert len(rendered[("users", "datetime(6)")].bv.decode()) == len("2024-05-01 10:00:00.123456")
    assert rendered[("orders", "decimal(10,2)")].sv.split(".")[1].isdigit()


def test_expected_events_follow_the_docs(small):
    events = small.expected.to_pylist()
    for event in events:
        seq, row = struct.unpack(">QQ", event["sequence"])
        assert event["event_id"] == f"{seq}:{row}"
        assert event["format"] == "tencent-dts"
        assert event["source_schema"] is None and event["capture_time"] is None
        meta = dict(event["metadata"])
        assert meta["seqId"] == str(seq) and meta["sourceType"] == "MYSQL"
        assert len(meta) == len(event["metadata"]), "metadata keys are unique"
        if event["op"] in ("insert", "update", "delete"):
            assert event["primary_key"] and event["source_db"] and event["source_table"]
            assert event["position"].startswith("mysql-bin.")
        if event["op"] == "insert":
            assert event["before"] is None and event["after"]
        if event["op"] == "delete":
            assert event["after"] is None and event["before"]
    sequences = [e["sequence"] for e in events]
    assert sequences == sorted(sequences)


def test_applying_the_expected_events_gives_the_final_state(big):
    state = apply_events(big.expected)
    assert state.keys() == big.final_state.keys()
    for table, rows in big.final_state.items():
        assert state[table] == rows, table
    assert big.final_state["shop.order_items"], "the composite-key table has rows"
    some_key = next(iter(big.final_state["shop.order_items"]))
    assert len(some_key) == 2


def test_apply_merges_partial_images_and_moves_keys():
    state: dict = {}
    apply_change(state, "db.t", "insert", ["id"], None, {"id": "1", "a": "x", "b": "y"})
    apply_change(state, "db.t", "update", ["id"], {"id": "1"}, {"b": None})
    assert state == {"db.t": {("1",): {"id": "1", "a": "x", "b": None}}}
    apply_change(state, "db.t", "update", ["id"], {"id": "1"}, {"id": "2"})
    assert state == {"db.t": {("2",): {"id": "2", "a": "x", "b": None}}}
    apply_change(state, "db.t", "begin", None, None, None)
    apply_change(state, "db.t", "update_before", ["id"], {"id": "2"}, None)
    apply_change(state, "db.t", "update_after", ["id"], None, {"id": "2", "a": "z"})
    assert state == {"db.t": {("2",): {"id": "2", "a": "z"}}}
    apply_change(state, "db.t", "delete", ["id"], {"id": "2"}, None)
    assert state == {"db.t": {}}
    with pytest.raises(ValueError, match="no primary key"):
        apply_change(state, "db.t", "insert", None, None, {"id": "3"})


def test_tables_option_keeps_the_default_stream():
    # tables=None is the default stream; all five tables named give the same workload too.
    a = generate("tencent-dts", messages=200, seed=4)
    assert generate("tencent-dts", messages=200, seed=4, tables=None).values == a.values
    assert "tables" not in a.options
    everything = [
        "shop.users",
        "shop.orders",
        "shop.order_items",
        "inventory.items",
        "inventory.warehouses",
    ]
    b = generate("tencent-dts", messages=200, seed=4, tables=everything)
    assert b.values == a.values and b.expected.equals(a.expected)
    assert b.options["tables"] == everything


KEY_CHANGE_CASES = [
    ("tencent-dts", None),
    ("datahub-blob", None),
    ("tdsql-json", None),
    ("datahub-tuple", None),
    ("debezium-json", None),
    ("debezium-json", "mongodb"),
    ("datastream-json", None),
    ("datastream-avro", None),
]


@pytest.mark.parametrize(("fmt", "connector"), KEY_CHANGE_CASES)
def test_key_changes_option(fmt, connector):
    """key_changes= moves rows to new keys, each format as its source would send it; both
    engines decode the stream to its expected events, which applied give its final state.
    Without the option (or with 0) the stream is the default one."""
    extra = {} if connector is None else {"connector": connector}
    stream = generate(fmt, messages=400, seed=3, key_changes=0.3, **extra)
    assert stream.options["key_changes"] == 0.3
    for engine in ("native", "python"):
        got = pa.Table.from_batches([cdc_decode.decode(stream.values, fmt, engine=engine)])
        assert got.equals(stream.expected), engine
    options = {"columns": stream.options["columns"]} if "columns" in stream.options else {}
    events = pa.Table.from_batches([cdc_decode.decode(stream.values, fmt, **options)])
    assert apply_events(events, primary_keys=stream.primary_keys) == stream.final_state
    plain = generate(fmt, messages=400, seed=3, **extra)
    moved = plain.final_state != stream.final_state
    assert moved, "some key moved"
    same = generate(fmt, messages=400, seed=3, key_changes=0.0, **extra)
    if isinstance(plain.values, list):
        assert same.values == plain.values
    else:
        assert same.values.equals(plain.values)
    assert "key_changes" not in same.options


def test_key_changes_move_rows_in_the_source():
    from cdc_decode.generate.source import MySQLSource, Transaction

    source = MySQLSource(5, tables=["shop.users"], key_changes=1.0)
    moves = 0
    for _ in range(300):
        record = source.next_record()
        if not isinstance(record, Transaction):
            continue
        for event in record.events:
            if event.kind != "update":
                continue
            for image in event.rows:
                old = image.before["id"]
                new = image.after["id"]
                assert old != new
                moves += 1
    assert moves > 10
    with pytest.raises(ValueError, match="key_changes"):
        MySQLSource(1, key_changes=2)


def test_tables_option_rejects_unknown_tables():
    with pytest.raises(ValueError, match="unknown table"):
        generate("tencent-dts", messages=10, seed=1, tables=["shop.nope"])
    with pytest.raises(ValueError, match="at least one"):
        generate("tencent-dts", messages=10, seed=1, tables=[])


def test_write_and_read_back(small, tmp_path):
    out = small.write(tmp_path / "stream")
    assert read_values(out) == small.values
    assert read_expected(out).equals(small.expected)
    assert read_final_state(out) == small.final_state
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "tencent-dts"
    assert (manifest["messages"], manifest["rows"], manifest["seed"]) == (300, small.rows, 3)
    assert manifest["bytes"] == sum(map(len, small.values))
    raw = (out / "values.bin").read_bytes()
    assert struct.unpack_from("<I", raw)[0] == len(small.values[0])


def test_values_file_keeps_nulls(tmp_path):
    values = [b"a", None, b"", b"\xff" * 300]
    write_values(tmp_path / "values.bin", values)
    assert (tmp_path / "values.bin").read_bytes()[5:9] == b"\xff\xff\xff\xff"
    assert read_values(tmp_path / "values.bin") == values


def test_cli_generate(tmp_path, capsys):
    out = tmp_path / "cli"
    status = main(
        [
            "generate",
            "tencent-dts",
            "--messages",
            "50",
            "--seed",
            "2",
            "--out",
            str(out),
            "--rows-per-message",
            "4",
            "--max-message-bytes",
            "2048",
        ]
    )
    assert status == 0
    line = capsys.readouterr().out.strip()
    assert "\n" not in line and "50 messages" in line
    assert len(read_values(out)) == 50
    assert all(len(v) <= 2048 for v in read_values(out))
    stream = generate(
        "tencent-dts", messages=50, seed=2, rows_per_message=4, max_message_bytes=2048
    )
    assert read_values(out) == stream.values


def test_python_dash_m_help():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    result = subprocess.run(
        [sys.executable, "-m", "cdc_decode", "generate", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "--max-message-bytes" in result.stdout


def test_bytes_render_as_base64(small):
    # A BYTES value and its expected text agree (json: the UTF-8 text, base64).
    for event in small.expected.to_pylist():
        if event["source_table"] == "users" and event["after"]:
            after = dict(event["after"])
            if after.get("profile"):
                json.loads(base64.b64decode(after["profile"]).decode("utf-8"))
                return
    pytest.fail("no users row with a profile")


# --- decoders against the generator -----------------------------------------------------


def test_decode_equals_expected(engine, big):
    decoder = _decoder(engine)
    batch = decoder.decode(big.values)
    rest = decoder.finish()
    assert rest.num_rows == 0
    assert decoder.stats()["errors"] == 0
    assert_events_equal(pa.Table.from_batches([batch]), big.expected)


def test_decode_then_apply_gives_final_state(engine, small):
    _decoder(engine)
    batch = cdc_decode.decode(small.values, "tencent-dts", engine=engine)
    assert apply_events(batch) == small.final_state


@pytest.fixture(scope="module")
def one_table():
    return generate("tencent-dts", messages=600, seed=8, tables=["shop.order_items"])


def test_tables_option_touches_only_those_tables(one_table):
    events = one_table.expected.to_pylist()
    tables = {(e["source_db"], e["source_table"]) for e in events if e["source_table"]}
    assert tables == {("shop", "order_items")}
    ops = {e["op"] for e in events}
    assert {"insert", "update", "delete", "ddl"} <= ops, ops
    assert ops <= {
        "insert",
        "update",
        "delete",
        "ddl",
        "begin",
        "commit",
        "rollback",
        "heartbeat",
        "checkpoint",
    }, ops
    for e in events:
        if e["op"] in ("insert", "update", "delete"):
            assert e["source_table"] == "order_items"
    assert one_table.final_state.keys() == {"shop.order_items"}
    assert one_table.primary_keys == {"shop.order_items": ["order_id", "line_no"]}
    assert one_table.options["tables"] == ["shop.order_items"]
    assert apply_events(one_table.expected) == one_table.final_state


def test_decode_one_table_stream(engine, one_table):
    decoder = _decoder(engine)
    batch = decoder.decode(one_table.values)
    assert decoder.finish().num_rows == 0
    assert decoder.stats()["errors"] == 0
    table = pa.Table.from_batches([batch])
    assert_events_equal(table, one_table.expected)
    assert apply_events(table) == one_table.final_state


def test_cli_generate_tables(tmp_path, capsys):
    out = tmp_path / "cli-tables"
    argv = ["generate", "tencent-dts", "--messages", "40", "--seed", "6", "--out", str(out)]
    assert main([*argv, "--tables", "shop.order_items,inventory.warehouses"]) == 0
    capsys.readouterr()
    stream = generate(
        "tencent-dts",
        messages=40,
        seed=6,
        tables=["shop.order_items", "inventory.warehouses"],
    )
    assert read_values(out) == stream.values
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["tables"] == ["shop.order_items", "inventory.warehouses"]
    assert main([*argv, "--tables", "shop.nope"]) == 2
    assert "unknown table" in capsys.readouterr().err


@pytest.mark.parametrize("seed", [21, 22])
def test_decode_many_multipart_sets(engine, seed):
    _decoder(engine)
    stream = generate(
        "tencent-dts",
        messages=400,
        seed=seed,
        rows_per_message=25,
        message_bytes=8192,
        max_message_bytes=1024,
    )
    assert sum(pb.Envelope.FromString(v).total > 1 for v in stream.values) > 50
    batch = cdc_decode.decode(stream.values, "tencent-dts", engine=engine)
    assert_events_equal(pa.Table.from_batches([batch]), stream.expected)
