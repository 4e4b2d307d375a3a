"""The ``cdc-decode`` command line, run as a user runs it: the installed script in a
subprocess, on generated streams of every format, on the shared fixtures and on broken
input; outputs read back and checked against what the library decodes."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import FIXTURES

import cdc_decode
from cdc_decode.generate import FORMATS, generate
from cdc_decode.generate.stream import read_values

CLI = str(Path(sys.executable).parent / "cdc-decode")
MESSAGES = 120


def run(*args: str, stdin: bytes | None = None, env: dict | None = None):
    """The command's exit status, stdout and stderr (text)."""
    done = subprocess.run(
        [CLI, *args],
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.fixture(scope="module")
def streams(tmp_path_factory) -> dict:
    """One small generated stream per format, written as ``cdc-decode generate`` does."""
    root = tmp_path_factory.mktemp("streams")
    out = {}
    for fmt in FORMATS:
        stream = generate(fmt, messages=MESSAGES, seed=3)
        out[fmt] = (stream, stream.write(root / fmt))
    return out


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_json_every_format_guessed(streams, fmt):
    stream, folder = streams[fmt]
    code, out, err = run("decode", str(folder), "--json")
    assert code == 0, err
    assert f"--format auto: {fmt} (" in err
    rows = json_lines(out)
    expected = stream.expected
    assert [r["op"] for r in rows] == expected.column("op").to_pylist()
    assert [r["sequence"] for r in rows] == [
        None if s is None else s.hex() for s in expected.column("sequence").to_pylist()
    ]
    first = expected.slice(0, 1).to_pylist()[0]
    assert rows[0]["source_table"] == first["source_table"]
    assert rows[0]["after"] == (None if first["after"] is None else dict(first["after"]))
    assert rows[0]["source"].endswith(("values.bin#0", "records.arrow#0"))
    assert f"{MESSAGES} messages ({fmt}): {expected.num_rows:,} events, 0 errors" in err


def test_decode_table(streams):
    stream, folder = streams["tencent-dts"]
    code, out, err = run("decode", str(folder / "values.bin"), "--format", "tencent-dts")
    assert code == 0, err
    assert "--format auto" not in err
    lines = out.splitlines()
    assert lines[0].split() == ["SOURCE", "OP", "TABLE", "KEY", "SEQUENCE", "CHANGES"]
    assert len(lines) == 1 + stream.expected.num_rows
    events = stream.expected.to_pylist()
    at = next(
        i
        for i, e in enumerate(events)
        if e["op"] == "update"
        and e["primary_key"]
        and all(k in dict(e["after"]) for k in e["primary_key"])
        and any(dict(e["before"]).get(c, v) != v for c, v in e["after"])
    )
    event = events[at]
    before, after = dict(event["before"]), dict(event["after"])
    line = lines[1 + at]
    table = f"{event['source_db']}.{event['source_table']}"
    key = ",".join(f"{k}={after[k]}" for k in event["primary_key"])
    assert line.split()[:5] == [line.split()[0], "update", table, key, event["sequence"].hex()]
    changed = next(
        c for c in after if c in before and before[c] != after[c] and len(str(after[c])) < 40
    )
    assert f"{changed}: {before[changed]} → {after[changed]}" in line


def test_decode_arrow_and_parquet_equal_the_library(streams, tmp_path):
    for fmt, kind in (("tencent-dts", "arrow"), ("datahub-tuple", "arrow"),
                      ("tencent-dts", "parquet"), ("datastream-avro", "parquet")):  # fmt: skip
        stream, folder = streams[fmt]
        out = tmp_path / f"{fmt}.{kind}"
        assert run("decode", str(folder), f"--{kind}", str(out))[0] == 0
        if kind == "arrow":
            with pa.memory_map(str(out)) as source:
                written = pa.ipc.open_file(source).read_all()
        else:
            written = pq.read_table(out)
        assert written.equals(stream.expected)


def test_typed_schema_and_tables(streams, tmp_path):
    stream, folder = streams["tencent-dts"]
    orders = "order_id bigint, amount decimal(10,2), placed_at timestamp"
    users = "id decimal(20,0), name string"
    out = tmp_path / "tables"
    code, _, err = run(
        "decode", str(folder), "--tables", f"shop.orders={orders}", "--tables",
        f"shop.users={users}", "--arrow", str(out),
    )  # fmt: skip
    assert code == 0, err
    want = cdc_decode.decode(
        stream.values, "tencent-dts", tables={"shop.orders": orders, "shop.users": users}
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "_other.arrow", "shop.orders.arrow", "shop.users.arrow",
    ]  # fmt: skip
    for name, file in (
        ("shop.orders", "shop.orders"),
        ("shop.users", "shop.users"),
        (None, "_other"),
    ):
        with pa.memory_map(str(out / f"{file}.arrow")) as source:
            assert pa.ipc.open_file(source).read_all().equals(pa.Table.from_batches([want[name]]))
    # One table typed, shown as a table and as JSON.
    code, text, err = run("decode", str(folder), "--schema", orders, "--json")
    assert code == 0, err
    rows = [r for r in json_lines(text) if r["source_table"] == "orders" and r["op"] == "insert"]
    assert set(rows[0]["after"]) == {"order_id", "amount", "placed_at"}
    assert isinstance(rows[0]["after"]["order_id"], int)
    assert rows[0]["after"]["placed_at"].endswith("+00:00")


def _dump(values: list[bytes | None], path: Path) -> None:
    """A Kafka dump as JSON lines: two partitions, base64 values; offset 5 of partition 1
    missing; line 4 a bad message, line 8 not base64, a last line that is not JSON."""
    with open(path, "w") as f:
        for i, value in enumerate(values):
            if i == 3:
                value = b'{"payload": 5}'
            line = {
                "topic": "blob",
                "partition": i % 2,
                "offset": i // 2 + (1 if i % 2 and i >= 10 else 0),
                "value": None if value is None else base64.b64encode(value).decode(),
            }
            if i == 7:
                line["value"] = "!!not base64"
            f.write(json.dumps(line) + "\n")
        f.write("not json\n")


def test_bad_input_is_error_lines_and_exit_1(streams, tmp_path):
    stream, folder = streams["datahub-blob"]
    values = read_values(folder)[:20]
    dump = tmp_path / "dump.jsonl"
    _dump(values, dump)
    code, out, err = run("decode", str(dump), "--errors", "--json")
    assert code == 1
    errors = json_lines(out)
    assert {(e["source"], e["error"]) for e in errors} == {
        ("blob/1@3", '"value" is not valid base64'),
        (f"{dump}:21", "dump line is not a JSON object"),
        ("blob/1@1", "payload: expected an object, got the number 5"),
    }
    assert all(e["op"] == "error" for e in errors)
    bad = next(e for e in errors if e["source"] == "blob/1@1")
    assert bytes.fromhex(bad["raw"]) == b'{"payload": 5}'
    assert "18 events, 3 errors (2 in the input itself)" in err

    code, out, err = run("stats", str(dump), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["messages"] == 19 and report["errors"] == 3 and report["input_errors"] == 2
    assert report["error_reasons"]["payload: expected an object, got the number N"] == 1
    assert report["kafka_offsets"]["blob/0"]["missing"] == 0
    assert report["kafka_offsets"]["blob/1"] == {
        "first": 0, "last": 10, "messages": 10, "missing": 1, "gaps": [[5, 5]], "repeated": 0,
    }  # fmt: skip

    # A values.bin cut short: the messages before the cut decode, the rest is one error.
    cut = tmp_path / "cut.bin"
    data = (folder / "values.bin").read_bytes()
    cut.write_bytes(data[: len(data) - 10])
    code, out, err = run("decode", str(cut), "--format", "datahub-blob", "--errors")
    assert code == 1
    assert f"cut.bin#{MESSAGES - 1}" in out and "claims" in out
    assert f"{MESSAGES - 1} messages (datahub-blob)" in err

    # A missing file is an error line too; the other input still decodes.
    code, out, err = run("decode", str(tmp_path / "nope.bin"), str(folder), "--json")
    assert code == 1
    rows = json_lines(out)
    assert rows[0]["error"] == "no such file or directory"
    assert len(rows) == 1 + stream.expected.num_rows


def test_kcat_delimited_and_stdin(streams):
    stream, folder = streams["datahub-blob"]
    values = [v for v in read_values(folder) if v is not None]
    dump = b"".join(v + b"\n--\n" for v in values) + b"{broken\n--\n"
    code, out, err = run(
        "decode", "-", "--input", "kcat", "--delimiter", "\\n--\\n", "--json", stdin=dump
    )
    assert code == 1, err
    rows = json_lines(out)
    assert len(rows) == stream.expected.num_rows + 1
    assert rows[-1]["op"] == "error" and rows[-1]["source"] == f"-#{len(values)}"
    assert bytes.fromhex(rows[-1]["raw"]) == b"{broken"
    # kcat -J: one JSON envelope a record, the value as text in "payload".
    envelopes = b"".join(
        json.dumps(
            {"topic": "t", "partition": 0, "offset": i, "tstype": "create", "ts": 1,
             "broker": 1, "key": None, "payload": v.decode()}
        ).encode() + b"\n"
        for i, v in enumerate(values)
    )  # fmt: skip
    code, out, err = run("decode", "-", "--json", stdin=envelopes)
    assert code == 0, err
    rows = json_lines(out)
    assert len(rows) == stream.expected.num_rows
    assert rows[-1]["source"] == f"t/0@{len(values) - 1}"


def test_stats(streams):
    stream, folder = streams["tencent-dts"]
    code, out, err = run("stats", str(folder), "--json", "--engine", "python")
    assert code == 0, err
    report = json.loads(out)
    expected = stream.expected
    ops = pc.value_counts(expected.column("op")).to_pylist()
    assert report["ops"] == {o["values"]: o["counts"] for o in ops}
    assert report["messages"] == MESSAGES and report["events"] == expected.num_rows
    assert report["errors"] == 0 and report["error_reasons"] == {}
    sequences = [s for s in expected.column("sequence").to_pylist() if s is not None]
    assert report["sequence"]["min"] == min(sequences).hex()
    assert report["sequence"]["max"] == max(sequences).hex()
    assert report["sequence"]["duplicates"] == 0
    sizes = sorted(len(v) for v in stream.values if v is not None)
    assert report["sizes"]["min"] == sizes[0] and report["sizes"]["max"] == sizes[-1]
    assert report["bytes"] == sum(sizes)
    code, text, _ = run("stats", str(folder))
    assert code == 0
    assert f"messages      {MESSAGES:,} (0 tombstones)" in text
    assert "by table" in text and "shop.orders" in text


def test_stats_counts_repeats(streams, tmp_path):
    """A message delivered twice: its events count as duplicates, and out of order."""
    _, folder = streams["debezium-json"]
    values = read_values(folder)
    lines = tmp_path / "twice.jsonl"
    lines.write_bytes(b"\n".join([*values[:10], values[4]]) + b"\n")
    code, out, _ = run("stats", str(lines), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["messages"] == 11
    assert report["sequence"]["duplicates"] == 1


def test_progress_bar_and_without_tqdm(streams):
    _, folder = streams["datastream-avro"]
    code, _, err = run("stats", str(folder), "--progress")
    assert code == 0
    assert "stats: 100%" in err and f"{MESSAGES} messages" in err
    # Without the cli extra: no bar, a note, the same report.
    script = (
        "import sys; sys.modules['tqdm'] = None; from cdc_decode.cli import main; "
        f"sys.exit(main(['stats', {str(folder)!r}, '--progress', '--json']))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode == 0
    assert "tqdm is not installed" in done.stderr.decode()
    assert json.loads(done.stdout)["messages"] == MESSAGES


def test_usage_errors_exit_2(streams):
    _, folder = streams["debezium-json"]
    code, _, err = run("decode", str(folder), "--schema", "id map<string,string>")
    assert code == 2 and "cdc-decode decode:" in err
    code, _, err = run("decode", str(folder), "--tables", "no-ddl-here")
    assert code == 2 and "DB.TABLE=DDL" in err
    assert run("decode", str(folder), "--format", "nope")[0] == 2
    assert run("decode")[0] == 2


def test_shared_fixtures():
    # Debezium JSON lines (flink) and single messages after a license header (paimon).
    flink = FIXTURES / "debezium" / "flink-postgres-schema-exclude.jsonl"
    code, out, err = run("decode", str(flink), "--json")
    assert code == 0, err
    assert "--format auto: debezium-json" in err
    ops = [r["op"] for r in json_lines(out)]
    assert (ops.count("read"), ops.count("insert"), ops.count("update"), ops.count("delete")) == (
        9, 2, 4, 1,
    )  # fmt: skip
    paimon = sorted(str(p) for p in (FIXTURES / "debezium").glob("*.txt"))
    code, out, err = run("decode", *paimon, "--json")
    assert code == 0, err
    rows = json_lines(out)
    assert rows[0]["source"].endswith("paimon-mysql-alltype-schema.txt:19")
    assert rows[0]["after"]["_varchar"] == "Apache Paimon"
    # DataHub BLOB, one message a file.
    code, out, err = run("decode", *map(str, sorted((FIXTURES / "datahub-blob").glob("*.txt"))))
    assert code == 0, err
    assert "--format auto: datahub-blob" in err
    assert [line.split()[1] for line in out.splitlines()[1:]] == ["delete", "read", "update"]
    assert "val: 1.100000 → 2.200000" in out
    # A Datastream tree: every Avro file, the tables they hold.
    code, out, err = run("stats", str(FIXTURES / "datastream-avro"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["format"] == "datastream-avro" and report["messages"] == 8
    assert report["errors"] == 0
    assert report["tables"]["l1.Users"] == 4
    assert report["ops"]["delete"] == 2


def _tail(broker, topic: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [CLI, "tail", "--bootstrap", broker.bootstrap, "--topic", topic, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: what _read_until reads is not also held in a buffer
    )


def _read_until(process: subprocess.Popen, lines: int, timeout: float = 60.0) -> bytes:
    """The running command's stdout until it has printed ``lines`` lines."""
    import selectors
    import time

    out = b""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while out.count(b"\n") < lines and time.monotonic() < deadline:
        if selector.select(timeout=1):
            data = os.read(process.stdout.fileno(), 1 << 16)
            if not data:
                break
            out += data
    return out


def test_tail_live_topic_sigint_prints_counts(kafka_broker):
    """A DTS stream with multi-part sets on three partitions, read live: every event, in
    per-partition order; Ctrl-C prints the counts; then a bad message makes exit 1."""
    import signal

    from support.kafka import new_topic, produce

    stream = generate("tencent-dts", messages=200, seed=5, max_message_bytes=1500)
    assert any(v is not None and len(v) > 1000 for v in stream.values)  # multi-part sets
    topic = new_topic(kafka_broker, partitions=3)
    produce(kafka_broker.bootstrap, topic, stream)
    process = _tail(kafka_broker, topic, "--from-beginning", "--format", "tencent-dts", "--json")
    try:
        seen = _read_until(process, stream.expected.num_rows)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
    rows = json_lines((seen + out).decode())
    err = err.decode()
    assert process.returncode == 0, err
    # Every expected event once; multi-part sets joined (no error, nothing pending).
    assert sorted(r["event_id"] or "" for r in rows) == sorted(
        e or "" for e in stream.expected.column("event_id").to_pylist()
    )
    assert all(r["source"].startswith(f"{topic}/") for r in rows)
    assert (
        f"stopped: {stream.messages} messages (tencent-dts): "
        f"{stream.expected.num_rows:,} events, 0 errors, 0 pending"
    ) in err

    # Started inside a multi-part set (--offset): its later parts are left out and named,
    # no error, nothing pending.
    from support.kafka import consume

    from cdc_decode import _proto

    records = consume(kafka_broker, topic, count=stream.messages)
    offset = next(o for _, o, v, _ in records if v and _proto.Envelope.FromString(v).index > 0)
    process = _tail(kafka_broker, topic, "--offset", str(offset), "--exit", "--errors")
    out, err = process.communicate(timeout=60)
    err = err.decode()
    assert process.returncode == 0, err
    assert "later parts of DTS multi-part sets begun before the start offset" in err
    assert out == b""  # --errors: not one error row
    assert " events, 0 errors, 0 pending" in err

    # --last 3 of a one-partition topic, read to its end (--exit), a bad message last.
    from support.kafka import produce_records

    blob = generate("datahub-blob", messages=10, seed=5)
    topic = new_topic(kafka_broker, partitions=1)
    produce(kafka_broker.bootstrap, topic, blob, partitions=1)
    produce_records(kafka_broker.bootstrap, topic, [(0, b'{"payload": 5}', [])])
    process = _tail(kafka_broker, topic, "--last", "3", "--exit", "--errors")
    out, err = process.communicate(timeout=60)
    err = err.decode()
    assert process.returncode == 1, err
    lines = out.decode().splitlines()
    assert len(lines) == 2  # the header and the one error
    assert lines[1].split()[:2] == [f"{topic}/0@10", "error"]
    assert "payload: expected an object, got the number 5 | raw 7b227061" in lines[1]
    assert "--format auto: datahub-blob" in err
    assert "end of topic: 3 messages (datahub-blob): 2 events, 1 error, 0 pending" in err


def test_tdsql_columns(streams):
    """``--columns`` names tdsql-json's positional images, as ``columns=`` does."""
    stream, folder = streams["tdsql-json"]
    names = ["order_id", "user_id", "amount", "currency", "quantity", "discount", "note"]
    names += ["status", "placed_at", "ship_window", "delta", "priority"]
    code, out, err = run(
        "decode", str(folder), "--format", "tdsql-json", "--json",
        "--columns", "shop.orders=" + ",".join(names),
    )  # fmt: skip
    assert code == 0, err
    rows = [r for r in json_lines(out) if r["source_table"] == "orders" and r["op"] == "insert"]
    want = cdc_decode.decode(stream.values, "tdsql-json", columns={"shop.orders": names})
    want = [r for r in want.to_pylist() if r["source_table"] == "orders" and r["op"] == "insert"]
    assert rows and [r["after"] for r in rows] == [dict(r["after"]) for r in want]
    assert list(rows[0]["after"]) == names


def test_sync_type_mapping_flag_parses():
    """``--type-mapping``: rules separated by commas, or a JSON object of table patterns,
    read as ``sync(type_mapping=)`` takes them."""
    from cdc_decode._cli.sync import _type_mapping
    from cdc_decode.spark._type_mapping import names

    assert _type_mapping(None) is None
    assert _type_mapping("tinyint1-to-boolean, unsigned-to-signed") == [
        "tinyint1-to-boolean",
        "unsigned-to-signed",
    ]
    by_table = _type_mapping('{"shop.*": ["to-string"], "*": "tinyint1-to-boolean"}')
    assert by_table == {"shop.*": ["to-string"], "*": "tinyint1-to-boolean"}
    assert names(by_table["*"]) == ["tinyint1-to-boolean"]
    assert names(["TO-STRING", "to-string"]) == ["to-string"]


def test_sync_route_flag_parses_and_is_checked_before_spark(capsys):
    """``--route PATTERN=TARGET`` (repeatable) reads as ``sync(routes=)`` takes it, and
    ``--route-keys`` as ``route_keys=``; a route that is not PATTERN=TARGET, a pattern
    routed twice, an unknown field in a target and an unknown ``--route-keys`` exit 2
    before any Spark starts (the routed sync itself runs in
    tests/delta/test_sync_routes.py)."""
    from cdc_decode._cli.sync import _routes
    from cdc_decode.cli import main

    assert _routes(None) is None
    assert _routes(["shop_*.orders_*=lake.shop.orders", " shop_*.users = /lake/{db}/users"]) == {
        "shop_*.orders_*": "lake.shop.orders",
        "shop_*.users": "/lake/{db}/users",
    }
    assert _routes(["a.b=s3://lake/t?x=1"]) == {"a.b": "s3://lake/t?x=1"}  # the first '='
    base = ["sync", "--format", "tencent-dts", "--target", "/l/{db}/{table}", "--checkpoint", "c",
            "--kafka", "127.0.0.1:9", "--topic", "t"]  # fmt: skip
    assert main([*base, "--route", "shop_*.orders_*"]) == 2
    assert "'shop_*.orders_*' is not PATTERN=TARGET" in capsys.readouterr().err
    assert main([*base, "--route", "=lake.shop.orders"]) == 2
    assert "is not PATTERN=TARGET" in capsys.readouterr().err
    assert main([*base, "--route", "s.*=a", "--route", "S.*=b"]) == 2
    assert "'S.*' is routed twice" in capsys.readouterr().err
    assert main([*base, "--route", "shop_*.orders_*=/lake/{shard}/orders"]) == 2
    assert "unknown field {shard}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--route", "s.*=a", "--route-keys", "global"])
    assert "invalid choice: 'global'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("rules", "dialect", "source_type", "default", "want"),
    [
        ([], "mysql", "tinyint(1)", "tinyint", "tinyint"),
        (["tinyint1-to-boolean"], "mysql", "tinyint(1)", "tinyint", "boolean"),
        (["tinyint1-to-boolean"], "mysql", "TINYINT(1) UNSIGNED", "smallint", "boolean"),
        (["tinyint1-to-boolean"], "mysql", "bool", "tinyint", "boolean"),
        (["tinyint1-to-boolean"], "mysql", "tinyint(4)", "tinyint", "tinyint"),
        (["tinyint1-to-boolean"], "connect", "int16", "smallint", "smallint"),
        (["unsigned-to-signed"], "mysql", "int(10) unsigned", "bigint", "int"),
        (["unsigned-to-signed"], "mysql", "int unsigned zerofill", "bigint", "int"),
        (["unsigned-to-signed"], "mysql", "bigint(20) unsigned", "decimal(20,0)", "bigint"),
        (["unsigned-to-signed"], "mysql", "serial", "decimal(20,0)", "bigint"),
        (["unsigned-to-signed"], "mysql", "mediumint(8) unsigned", "int", "int"),
        (["unsigned-to-signed"], "mysql", "tinyint(3) unsigned", "smallint", "tinyint"),
        (["unsigned-to-signed"], "mysql", "decimal(10,2) unsigned", "decimal(10,2)",
         "decimal(10,2)"),
        (["unsigned-to-signed"], "datahub", "LONG", "decimal(20,0)", "decimal(20,0)"),
        (["to-string"], "mysql", "datetime(6)", "timestamp_ntz", "string"),
        (["to-string"], None, None, None, "string"),
        (["tinyint1-to-boolean", "to-string"], "mysql", "tinyint(1)", "tinyint", "string"),
    ],
)  # fmt: skip
def test_type_mapping_rules(rules, dialect, source_type, default, want):
    """Each rule of ``sync(type_mapping=)`` on the source types it reads (docs/sync.md,
    "Type mapping"); other dialects' types are left to ``to-string``."""
    from cdc_decode.spark._type_mapping import spark_type

    assert spark_type(rules, dialect, source_type, default) == want


def test_sync_command_line_checks_before_starting_spark(capsys):
    """``cdc-decode sync``'s usage errors exit 2 with a clear line, before any Spark starts
    (the streaming sync itself runs in tests/delta/test_sync.py)."""
    from cdc_decode.cli import main

    base = ["sync", "--format", "tencent-dts", "--target", "/l/{db}/{table}", "--checkpoint", "c"]
    assert main([*base, "--kafka", "127.0.0.1:9"]) == 2
    assert "--kafka needs --topic" in capsys.readouterr().err
    assert main([*base, "--kafka", "127.0.0.1:9", "--topic", "t", "--keys", "{nope"]) == 2
    assert "--keys is not JSON" in capsys.readouterr().err
    assert main([*base, "--kafka", "127.0.0.1:9", "--topic", "t", "--schemas", "[1]"]) == 2
    assert "--schemas must be a JSON object" in capsys.readouterr().err
    kafka = [*base, "--kafka", "127.0.0.1:9", "--topic", "t"]
    assert main([*kafka, "--metadata-columns", "op, commit_lsn"]) == 2
    assert "'commit_lsn' is not a metadata column (they are op, " in capsys.readouterr().err
    assert main([*kafka, "--metadata-columns", '{"shop.*": ["op"], "*": "nope"}']) == 2
    assert "'nope' is not a metadata column" in capsys.readouterr().err
    assert main([*base, "--datastream", "d", "--metadata-columns", "op,kafka_offset"]) == 2
    assert "kafka_offset need Kafka's offset column" in capsys.readouterr().err
    assert main([*kafka, "--type-mapping", "tinyint1-to-boolean, char-to-string"]) == 2
    err = capsys.readouterr().err
    assert "'char-to-string' is not a rule (they are tinyint1-to-boolean, " in err
    assert "char and varchar are string already" in err
    assert main([*kafka, "--type-mapping", '{"shop.*": ["to-string"], "*": ["nope"]}']) == 2
    assert "'nope' is not a rule" in capsys.readouterr().err
    assert main([*kafka, "--type-mapping", '{"shop.*": 5}']) == 2
    assert "type_mapping must be a list of rules" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sync", "--format", "datahub-tuple", "--kafka", "h:1", "--target", "t",
              "--checkpoint", "c"])  # fmt: skip
