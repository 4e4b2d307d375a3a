"""The schema pass (docs/schemas.md), the source-type mapping (docs/types.md) and typed
decoding with the wire's own schemas: both engines equal on every generated stream and
the shared fixtures, every value of a generated whole-database stream converted exactly,
hostile input an error per message."""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES, ROOT
from support.typed_truth import expected_value, same, typed_rows

import cdc_decode
from cdc_decode.generate import FORMATS as GENERATED
from cdc_decode.generate import generate

TYPED_FORMATS = ("tencent-dts", "datahub-blob", "debezium-json", "datastream-avro")
"""The formats whose wire carries the columns' types (and which the generator writes for a
whole database)."""
DATABASE_FORMATS = (*TYPED_FORMATS, "tdsql-json", "datastream-json")


def _passes(values, format, **options):
    """The schema pass of both engines: their rows equal but for the wording of errors
    (docs/events.md: the engines may word an error differently)."""
    native = cdc_decode.table_schemas(values, format, engine="native", **options)
    python = cdc_decode.table_schemas(values, format, engine="python", **options)
    a, b = native.batch.drop_columns(["error"]), python.batch.drop_columns(["error"])
    assert a.equals(b), (a.to_pylist()[:3], b.to_pylist()[:3])
    assert [o for o, _ in native.errors] == [o for o, _ in python.errors]
    return native


# --- both engines, every generated stream and fixture --------------------------------------


@pytest.mark.parametrize("format", GENERATED)
def test_engines_agree_on_every_generated_stream(format):
    stream = generate(format, messages=300, seed=2)
    options = {"columns": stream.options["columns"]} if format == "tdsql-json" else {}
    schemas = _passes(stream.values, format, **options)
    assert not schemas.errors
    want = set(stream.final_state) | set(stream.primary_keys)
    assert {t.name for t in schemas} <= want
    for table in schemas:
        latest = table.latest
        if format in ("tdsql-json",):
            assert latest.dialect is None and latest.key is None
        elif format in ("debezium-json", "datastream-json"):
            assert latest.dialect is None  # no Connect schema in the default stream
        else:
            assert latest.dialect is not None
            assert all(c.type is not None for c in latest.columns), latest.columns
        if format not in ("tdsql-json", "datahub-tuple", "debezium-json"):
            assert list(latest.key) == stream.primary_keys[table.name]


@pytest.mark.parametrize("format", DATABASE_FORMATS)
def test_engines_agree_on_a_generated_database(format):
    stream = generate(format, messages=400, seed=3, table_count=40)
    options = {"columns": stream.options["columns"]} if format == "tdsql-json" else {}
    schemas = _passes(stream.values, format, keys=stream.message_keys, **options)
    assert len(schemas) > 10 and not schemas.errors
    if format in TYPED_FORMATS:
        for table in schemas:
            assert list(table.latest.key) == stream.primary_keys[table.name], table.name
            assert table.latest.typed and not table.latest.untyped_columns()


def _fixture_messages(path: Path) -> list[bytes]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".txt":
        return [text[text.index("{") :].strip().encode()]
    return [line.encode() for line in text.splitlines() if line.strip()]


FIXTURE_CASES = [
    *[("debezium-json", p) for p in sorted((FIXTURES / "debezium").iterdir())],
    *[("datahub-blob", p) for p in sorted((FIXTURES / "datahub-blob").iterdir())],
    *[("datastream-avro", p) for p in sorted((FIXTURES / "datastream-avro").iterdir())],
]


@pytest.mark.parametrize(("format", "path"), FIXTURE_CASES, ids=lambda c: getattr(c, "name", c))
def test_engines_agree_on_the_shared_fixtures(format, path):
    values = [path.read_bytes()] if format == "datastream-avro" else _fixture_messages(path)
    schemas = _passes(values, format)
    for table in schemas:
        if table.latest.typed:
            # The wire's types are enough to decode the fixture's values.
            tables = {table.name: table.latest.ddl(unknown="string")}
            out = cdc_decode.decode(values, format, tables=tables)
            errors = [e for e in out[None].column("error").to_pylist() if e]
            if path.name != "avro_file_ut.avro":  # its test values are out of range
                assert not errors, errors


def test_what_the_fixtures_say():
    alltype = _fixture_messages(FIXTURES / "debezium" / "paimon-mysql-alltype-schema.txt")
    table = cdc_decode.table_schemas(alltype, "debezium-json")["paimon_sync_table.all_types_table"]
    columns = {c.name: c for c in table.latest.columns}
    assert table.latest.dialect == "connect"
    assert columns["pt"].type == "decimal(2,1)"
    assert columns["_bigint_unsigned"].type == "decimal(38,0)"
    assert columns["_fixed"].type == "string"  # decimal(40,3): over 38 digits
    assert columns["_float"].source_type == "double" and columns["_float"].type == "double"
    blob = _fixture_messages(FIXTURES / "datahub-blob" / "paimon-event-insert.txt")
    table = cdc_decode.table_schemas(blob, "datahub-blob")["bigdata_test.sync_test_table"]
    assert [(c.name, c.source_type, c.type) for c in table.latest.columns] == [
        ("id", "LONG", "bigint"),
        ("val", "DOUBLE", "double"),
        ("name", "STRING", "string"),
        ("create_time", "DATE", "timestamp"),
    ]
    assert table.latest.key == ("id",)
    avro = (FIXTURES / "datastream-avro" / "mysql_numbers_test.avro").read_bytes()
    table = cdc_decode.table_schemas([avro], "datastream-avro")["user1.numbers"]
    types = {c.name: (c.source_type, c.type) for c in table.latest.columns}
    assert types["decimaler"] == ("bytes decimal(10,2)", "decimal(10,2)")
    assert types["bigu"] == ("string number", "decimal(20,0)")
    assert table.latest.key == ("id",)


# --- the mapping, as docs/types.md writes it -----------------------------------------------


def _documented_mapping() -> list[tuple[str, str, str | None]]:
    """Every (dialect, source type, Spark type) row of docs/types.md's tables."""
    rows, dialect = [], None
    for line in (ROOT / "docs" / "types.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"## .*\(`(\w+)`\)", line)
        if heading:
            dialect = heading.group(1)
            continue
        if line.startswith("## "):
            dialect = None
        cells = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else []
        if dialect is None or len(cells) < 2 or not cells[0].startswith("`"):
            continue
        spark = re.findall(r"`([^`]*)`", cells[1])
        for source in re.findall(r"`([^`]*)`", cells[0]):
            rows.append((dialect, source, spark[0] if spark else None))
    return rows


def test_both_engines_map_every_documented_type(engine):
    rows = _documented_mapping()
    assert len(rows) > 200
    dialects = {d for d, _, _ in rows}
    assert dialects == {
        "mysql", "postgresql", "oracle", "sqlserver", "connect", "avro", "datahub", "arrow"
    }  # fmt: skip
    wrong = [
        (d, s, want, got)
        for d, s, want in rows
        if (got := cdc_decode.spark_type(d, s, engine=engine)) != want
    ]
    assert not wrong, wrong


def test_the_engines_map_hostile_type_text_alike():
    """Type text a source would never send: both engines give the same answer (or none)."""
    rng = random.Random(5)
    pieces = ["decimal", "(", ")", ",", "10", "-2", "*", "'", " unsigned", "timestamp", "with",
              " time zone", "99999999999999999999", "number", "int64 ", "bytes ", "decimal(",
              "org.apache.kafka.connect.data.Decimal(scale=", "connect.decimal.precision=",
              "[", "]", "_", "float", "é", "\x00"]  # fmt: skip
    dialects = ["mysql", "postgresql", "oracle", "sqlserver", "connect", "avro", "datahub", "arrow"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        dialect = rng.choice(dialects)
        native = cdc_decode.spark_type(dialect, text)
        python = cdc_decode.spark_type(dialect, text, engine="python")
        assert native == python, (dialect, text)
    with pytest.raises(ValueError, match="unknown dialect"):
        cdc_decode.spark_type("db2", "int")


# --- typed decoding with the wire's schemas: every value exact ------------------------------


def _union(table) -> dict:
    """A table's columns over all its versions (a later version's type wins: widened)."""
    columns = {}
    for version in table.versions:
        for column in version.columns:
            columns[column.name] = column
    return columns


@pytest.mark.parametrize("format", TYPED_FORMATS)
def test_typed_decoding_with_the_wire_schemas_gives_the_source_values(format):
    """A whole-database stream (DDL mid-stream included) decoded with each table's schema
    from the schema pass: no error row, and every table, applied, holds exactly the
    source's values as the mapping types them (tests/support/typed_truth.py)."""
    stream = generate(format, messages=700, seed=11, table_count=30)
    schemas = cdc_decode.table_schemas(stream.values, format, keys=stream.message_keys)
    unions = {t.name: _union(t) for t in schemas}
    tables = {
        n: ", ".join(f"`{k}` {c.type}" for k, c in cols.items()) for n, cols in unions.items()
    }
    native = cdc_decode.decode(stream.values, format, tables=tables)
    python = cdc_decode.decode(stream.values, format, tables=tables, engine="python")
    assert native.keys() == python.keys()
    for name in native:
        assert native[name].equals(python[name]), name
    assert native[None].column("error").null_count == native[None].num_rows
    checked, families = 0, set()
    for name, (columns, rows) in stream.final_values.items():
        key = stream.primary_keys[name]
        wire = unions[name]
        got = typed_rows(native[name], key)
        assert len(got) == len(rows), name
        for source_key, row in rows.items():
            at = tuple(
                expected_value(format, columns[c], wire[c].type, v)
                for c, v in zip(key, source_key, strict=True)
            )
            typed = got[at]
            for column, value in row.items():
                want = expected_value(format, columns[column], wire[column].type, value)
                assert same(want, typed.get(column)), (name, column, value, typed.get(column))
                checked += 1
                families.add((columns[column].type, wire[column].type))
    assert checked > 2000
    # The families the issue names are all among them.
    kinds = {kind for kind, _ in families}
    assert {"decimal", "datetime", "timestamp", "json", "blob", "enum", "time"} <= kinds


@pytest.mark.parametrize("format", ["tencent-dts", "datahub-blob", "datastream-avro"])
def test_the_default_database_decodes_whole_with_the_wire_schemas(format):
    """The generator's default database (five tables, every MySQL type family, the values a
    real source holds: ``bigint unsigned`` past 2**63-1 among them), typed by the schema pass
    of both engines alone: no message is an error, and every value is the source's.
    DataWorks declares ``shop.users.account_no`` (``bigint unsigned``) as ``LONG``: its
    values widen it to ``decimal(20,0)`` (docs/types.md, "Values wider than the wire's
    type"); Datastream's Avro ``number`` is a ``decimal(20,0)`` from the start. (The
    default Debezium stream carries no Connect schema: its typed streams are
    those of ``table_count``, above.)"""
    stream = generate(format, messages=4000, seed=5)
    schemas = _passes(stream.values, format, keys=stream.message_keys)
    assert {t.name for t in schemas} == set(stream.final_values)
    unions = {t.name: _union(t) for t in schemas}
    account = unions["shop.users"]["account_no"]
    assert account.type == "decimal(20,0)", account
    big = [r["account_no"] for r in stream.final_values["shop.users"][1].values()]
    assert max(big) > 2**63, "the stream has no value past a bigint's"
    tables = {
        n: ", ".join(f"`{k}` {c.type}" for k, c in cols.items()) for n, cols in unions.items()
    }
    decoded = cdc_decode.decode(stream.values, format, tables=tables)
    assert decoded[None].column("error").null_count == decoded[None].num_rows
    for name, (columns, rows) in stream.final_values.items():
        batch = decoded[name]
        assert "error" not in batch.column("op").to_pylist(), name
        key = stream.primary_keys[name]
        got = typed_rows(batch, key)
        assert len(got) == len(rows), name
        wire = unions[name]
        for source_key, row in rows.items():
            at = tuple(
                expected_value(format, columns[c], wire[c].type, v)
                for c, v in zip(key, source_key, strict=True)
            )
            for column, value in row.items():
                want = expected_value(format, columns[column], wire[column].type, value)
                assert same(want, got[at].get(column)), (name, column, value, got[at].get(column))


@pytest.mark.parametrize("engine", ["native", "python"])
def test_values_past_the_wire_type_widen_it_per_value(engine):
    """A DataHub ``LONG`` column stays ``bigint`` while its values fit; the batch whose
    values pass 2**63-1 gives ``decimal(20,0)``, a 25-digit value ``decimal(25,0)``, one of
    40 digits ``string``; a ``DECIMAL(12,2)`` one a wider decimal on either side of the
    point; text is no reason to widen (typed mode makes it an error). Both engines alike,
    and ``TableSchemas`` keeps one version per wire schema, of the widest type."""

    def message(seq: int, no: object, amount: object) -> bytes:
        columns = [{"name": "id", "type": "LONG"}, {"name": "no", "type": "LONG"},
                   {"name": "amount", "type": "DECIMAL(12,2)"}]  # fmt: skip
        return json.dumps(
            {
                "schema": {
                    "dataColumn": columns,
                    "primaryKey": ["id"],
                    "source": {"dbName": "d", "tableName": "t"},
                },  # fmt: skip
                "payload": {
                    "op": "INSERT",
                    "sequenceId": seq,
                    "after": {"dataColumn": {"id": seq, "no": no, "amount": amount}},
                },
            }  # fmt: skip
        ).encode()

    def types(values) -> dict:
        schemas = cdc_decode.table_schemas(values, "datahub-blob", engine=engine)
        (version,) = schemas["d.t"].versions
        return {c.name: c.type for c in version.columns}

    fits = [message(1, 5, "1.50"), message(2, -(2**63), "9999999999.99")]
    assert types(fits) == {"id": "bigint", "no": "bigint", "amount": "decimal(12,2)"}
    past = [*fits, message(3, 2**64 - 1, "12345678901.5"), message(4, "77", "0.125")]
    assert types(past) == {"id": "bigint", "no": "decimal(20,0)", "amount": "decimal(14,3)"}
    assert types([*past, message(5, 10**24, "1")])["no"] == "decimal(25,0)"
    assert types([*past, message(6, str(10**39), "1")])["no"] == "string"
    assert types([*fits, message(7, "abc", "1.5x")]) == types(fits)
    # The typed decode of the widened schema takes every value; text stays an error.
    tables = {"d.t": "id bigint, no decimal(20,0), amount decimal(14,3)"}
    out = cdc_decode.decode(past, "datahub-blob", tables=tables, engine=engine)
    assert [int(v["no"]) for v in out["d.t"].column("after").to_pylist()] == [
        5, -(2**63), 2**64 - 1, 77
    ]  # fmt: skip


@pytest.mark.parametrize("engine", ["native", "python"])
def test_datastream_numbers_are_decimals_as_wide_as_their_values(engine):
    """Datastream writes MySQL's ``bigint unsigned`` (and Oracle's ``NUMBER``) as an Avro
    ``string`` of logical type ``number``: a ``decimal(20,0)`` (the real file's
    ``18446744073709551615`` lands exact), wider where the values are, ``string`` past 38
    digits. Both engines alike; the typed decode takes every value."""
    import io

    import fastavro

    fixture = (FIXTURES / "datastream-avro" / "mysql_numbers_test.avro").read_bytes()
    reader = fastavro.reader(io.BytesIO(fixture))
    schema, record = reader.writer_schema, next(iter(reader))

    def file(*numbers: str | None) -> bytes:
        out = io.BytesIO()
        records = [
            {**record, "payload": {**record["payload"], "id": i, "bigu": n}}
            for i, n in enumerate(numbers)
        ]
        fastavro.writer(out, fastavro.parse_schema(schema), records)
        return out.getvalue()

    def bigu(*numbers: str | None) -> str:
        schemas = cdc_decode.table_schemas([file(*numbers)], "datastream-avro", engine=engine)
        (version,) = schemas["user1.numbers"].versions
        (column,) = [c for c in version.columns if c.name == "bigu"]
        assert column.source_type == "string number"
        return column.type

    assert bigu("5", None) == "decimal(20,0)"
    assert bigu("18446744073709551615", "-3") == "decimal(20,0)"
    assert bigu("5", "1.25") == "decimal(22,2)"
    assert bigu("1" * 25) == "decimal(25,0)"
    assert bigu("1" * 45) == "string"
    assert bigu("x") == "decimal(20,0)"  # no number: an error of its row, not a reason
    values = ["18446744073709551615", "1.25", "-0.5"]
    out = cdc_decode.decode(
        [file(*values)],
        "datastream-avro",
        tables={"user1.numbers": "bigu decimal(22,2)"},
        engine=engine,
    )["user1.numbers"]
    assert [str(a["bigu"]) for a in out.column("after").to_pylist()] == [
        "18446744073709551615.00", "1.25", "-0.50"
    ]  # fmt: skip


def test_schema_changes_show_as_versions():
    """Columns added, widened and dropped mid-stream: each a new version of its table, in
    stream order."""
    stream = generate("tencent-dts", messages=1500, seed=4, table_count=40)
    schemas = cdc_decode.table_schemas(stream.values, "tencent-dts")
    added = widened = dropped = 0
    for table in schemas:
        for old, new in zip(table.versions, table.versions[1:], strict=False):
            assert (old.first_sequence, old.first_ordinal) < (new.first_sequence, new.first_ordinal)
            before = {c.name: c.source_type for c in old.columns}
            after = {c.name: c.source_type for c in new.columns}
            added += bool(set(after) - set(before))
            dropped += bool(set(before) - set(after))
            widened += any(before[n] != after[n] for n in set(before) & set(after))
    assert added and widened and dropped, (added, widened, dropped)
    ddl = [r for r in stream.expected.to_pylist() if r["op"] == "ddl"]
    assert {"ADD", "MODIFY", "DROP"} <= {r["ddl"].split()[3] for r in ddl}


def test_debezium_keys_come_from_the_message_key():
    stream = generate("debezium-json", messages=300, seed=5, table_count=20)
    with_keys = cdc_decode.table_schemas(stream.values, "debezium-json", keys=stream.message_keys)
    without = cdc_decode.table_schemas(stream.values, "debezium-json")
    for table in with_keys:
        assert list(table.latest.key) == stream.primary_keys[table.name]
        assert without[table.name].latest.key is None
    # Connect's wrapper or a bare key, bytes or text; a key that is not an object says nothing.
    message = stream.values[0]
    for key, want in [
        (b'{"id":1}', ("id",)),
        ('{"schema":{"type":"struct"},"payload":{"a":1,"b":2}}', ("a", "b")),
        (b"7", None),
        (b"\xff", None),
        (None, None),
    ]:
        schemas = cdc_decode.table_schemas([message], "debezium-json", keys=[key])
        (table,) = list(schemas)
        assert table.latest.key == want, key


def test_lindorm_hbase_and_mongodb_keys():
    lindorm = json.dumps({"schema": {}, "payload": {
        "op": "c", "ts_ms": 1, "before": None, "after": {"ROW": "dXNlcjE=", "f_name": "bHVja3k="},
        "source": {"version": "v2.0", "db": "ld-1", "namespace": "default", "table": "t",
                   "ts_ms": 1}}}).encode()  # fmt: skip
    mongo = generate("debezium-json", messages=50, seed=1, connector="mongodb").values
    for engine in cdc_decode.ENGINES:
        (table,) = list(cdc_decode.table_schemas([lindorm], "debezium-json", engine=engine))
        assert table.latest.key == ("ROW",) and not table.latest.typed
        schemas = cdc_decode.table_schemas(mongo, "debezium-json", engine=engine)
        assert {t.latest.key for t in schemas} == {("_id",)}


# --- hostile input: an error per message, never a panic -------------------------------------


def _mutate(value: bytes, rng: random.Random) -> bytes:
    data = bytearray(value)
    for _ in range(rng.randint(1, 4)):
        pick = rng.random()
        at = rng.randrange(len(data) + 1)
        if pick < 0.3:
            del data[at:]
        elif pick < 0.6 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        else:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
    return bytes(data)


@pytest.mark.parametrize("format", [f for f in GENERATED if f != "datahub-tuple"])
def test_hostile_messages_are_an_error_each_as_in_a_decode(format):
    """Truncated, bit-flipped and spliced messages: the schema pass gives an error row for
    exactly the messages the decoder does, on both engines (which agree), and no panic."""
    stream = generate(format, messages=120, seed=6)
    rng = random.Random(format)
    values = [
        None if v is None else (_mutate(v, rng) if rng.random() < 0.6 else v) for v in stream.values
    ]
    values += [b"", b"\x00" * 64, b"{" * 200, b"\xff\xfe"]
    schemas = _passes(values, format)
    decoded, ordinals = cdc_decode.Decoder(format)._decode_indexed(values, None, last=True)
    bad = sorted({o for o, e in zip(ordinals.to_pylist(), decoded.column("error").to_pylist(),
                                    strict=True) if e})  # fmt: skip
    assert [o for o, _ in schemas.errors] == bad
    assert all(error for _, error in schemas.errors)


def test_oversized_and_empty_input():
    limits = cdc_decode.Limits(max_message_bytes=1000)
    big = b'{"op":"c","after":{"a":"' + b"x" * 2000 + b'"},"source":{"db":"d","table":"t"}}'
    for engine in cdc_decode.ENGINES:
        schemas = cdc_decode.table_schemas([big], "debezium-json", limits=limits, engine=engine)
        ((ordinal, error),) = schemas.errors
        assert ordinal == 0 and "max_message_bytes" in error
        assert len(cdc_decode.table_schemas([], "tencent-dts", engine=engine)) == 0
        with pytest.raises(cdc_decode.DecodeError, match="message 0"):
            cdc_decode.table_schemas([b"nope"], "datahub-blob", mode="failfast", engine=engine)


def test_a_multipart_set_across_calls_and_cut_short():
    stream = generate("tencent-dts", messages=60, seed=1, max_message_bytes=1024)
    reader = cdc_decode.SchemaReader("tencent-dts")
    one = cdc_decode.table_schemas(stream.values, "tencent-dts")
    batches = [reader.read(stream.values[i : i + 7]) for i in range(0, len(stream.values), 7)]
    merged = cdc_decode.TableSchemas([*batches, reader.finish()])
    assert merged.batch.equals(one.batch)
    from cdc_decode import _proto

    first = next(i for i, v in enumerate(stream.values) if _proto.Envelope.FromString(v).total > 1)
    cut = cdc_decode.table_schemas(stream.values[: first + 1], "tencent-dts")
    assert [o for o, _ in cut.errors] == [first]  # the set, incomplete
    assert "multi-part" in cut.errors[0][1]


def test_ddl_of_a_version_and_unknown_types():
    schemas = cdc_decode.table_schemas(generate("tdsql-json", messages=60, seed=1).values,
                                       "tdsql-json")  # fmt: skip
    table = next(iter(schemas))
    with pytest.raises(ValueError, match="no Spark type for column"):
        table.latest.ddl()
    assert table.latest.ddl(unknown="string").startswith("`0` string")
    assert table.latest.arrow_schema(unknown="string").field(0).type == pa.string()


# --- the source's time zone ------------------------------------------------------------------


def _debezium(values: dict) -> bytes:
    return json.dumps({"op": "c", "after": values, "source": {"db": "d", "table": "t"}}).encode()


def test_dst_in_new_york_on_both_engines():
    """The spring-forward gap moves forward, the fall-back fold is the earlier instant; a
    timestamp_ntz keeps the wall clock; an instant shows as New York's wall clock."""
    utc = "2024-11-03T05:30:00Z"
    walls = ["2024-03-10 01:59:59", "2024-03-10 02:30:00", "2024-03-10 03:00:00",
             "2024-11-03 00:59:59", "2024-11-03 01:30:00", "2024-11-03 02:00:00"]  # fmt: skip
    values = [_debezium({"t": w, "n": w}) for w in walls] + [_debezium({"t": utc, "n": utc})]
    rows = {}
    for engine in cdc_decode.ENGINES:
        batch = cdc_decode.decode(values, "debezium-json", schema="t timestamp, n timestamp_ntz",
                                  source_time_zone="America/New_York", engine=engine)  # fmt: skip
        rows[engine] = batch.column("after").to_pylist()
    assert rows["native"] == rows["python"]
    got = [(r["t"].strftime("%m-%d %H:%M:%S"), r["n"].strftime("%m-%d %H:%M:%S"))
           for r in rows["native"]]  # fmt: skip
    assert got == [
        ("03-10 06:59:59", "03-10 01:59:59"),
        ("03-10 07:30:00", "03-10 02:30:00"),  # skipped: forward by the gap (03:30 EDT)
        ("03-10 07:00:00", "03-10 03:00:00"),
        ("11-03 04:59:59", "11-03 00:59:59"),
        ("11-03 05:30:00", "11-03 01:30:00"),  # repeated: the earlier (EDT) instant
        ("11-03 07:00:00", "11-03 02:00:00"),
        ("11-03 05:30:00", "11-03 01:30:00"),  # an instant: its wall clock in New York
    ]


def test_the_engines_agree_on_any_wall_clock_in_any_zone():
    rng = random.Random(9)
    zones = [
        "America/New_York",
        "Asia/Shanghai",
        "Europe/London",
        "Australia/Lord_Howe",
        "Pacific/Apia",
        "America/Sao_Paulo",
        "Asia/Kolkata",
        "UTC",
        "Africa/Casablanca",
    ]
    texts = []
    for _ in range(400):
        moment = rng.randint(-2_000_000_000, 4_200_000_000)
        base = f"{dt.datetime(1970, 1, 1) + dt.timedelta(seconds=moment):%Y-%m-%d %H:%M:%S}"
        texts += [base, base.replace(" ", "T") + "Z", str(moment * 1000), base[:10]]
    texts += ["0001-01-01 00:00:00", "0001-01-02 12:00:00", "9999-12-29 12:00:00",
              "9999-12-31 23:00:00", "1900-01-01 00:00:00"]  # fmt: skip
    values = [_debezium({"t": t, "n": t, "d": t}) for t in texts]
    for zone in zones:
        batches = [
            cdc_decode.decode(
                values,
                "debezium-json",
                schema="t timestamp, n timestamp_ntz, d date",
                source_time_zone=zone,
                engine=engine,
            )  # fmt: skip
            for engine in cdc_decode.ENGINES
        ]
        assert batches[0].column("after").equals(batches[1].column("after")), zone
        assert batches[0].column("error").equals(batches[1].column("error")), zone


def test_the_zone_per_format():
    """DTS datetime text and Debezium's MicroTimestamp are wall clocks; DataHub's DATE
    milliseconds are instants (a date column takes their date in the zone)."""
    shanghai = "Asia/Shanghai"
    micro = {"type": "struct", "fields": [{"type": "struct", "field": "after", "fields": [
        {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "t"}]}]}  # fmt: skip
    message = json.dumps(
        {
            "schema": micro,
            "payload": {
                "op": "c",
                "after": {"t": 1_714_557_600_000_000},
                "source": {"db": "d", "table": "t"},
            },
        }
    )
    for engine in cdc_decode.ENGINES:
        row = cdc_decode.decode(
            [message.encode()],
            "debezium-json",
            schema="t timestamp",
            source_time_zone=shanghai,
            engine=engine,
        ).to_pylist()[0]
        # 2024-05-01 10:00 on the source's clock is 02:00 UTC.
        assert row["after"]["t"].isoformat() == "2024-05-01T02:00:00+00:00"
        blob = json.dumps({"payload": {"op": "INSERT", "sequenceId": "1",
            "after": {"dataColumn": {"d": 1714492800000}}}}).encode()  # fmt: skip
        row = cdc_decode.decode(
            [blob], "datahub-blob", schema="d date", source_time_zone=shanghai, engine=engine
        ).to_pylist()[0]
        assert str(row["after"]["d"]) == "2024-05-01"  # Shanghai's midnight
        plain = cdc_decode.decode([blob], "datahub-blob", schema="d date", engine=engine)
        assert plain.to_pylist()[0]["error"]  # not a UTC midnight
    stream = generate("tencent-dts", messages=200, seed=3, table_count=10)
    schemas = cdc_decode.table_schemas(stream.values, "tencent-dts")
    tables = schemas.ddl()
    utc = cdc_decode.decode(stream.values, "tencent-dts", tables=tables)
    local = cdc_decode.decode(
        stream.values, "tencent-dts", tables=tables, source_time_zone=shanghai
    )
    compared = 0
    for name in tables:
        for a, b in zip(utc[name].column("after").to_pylist(),
                        local[name].column("after").to_pylist(), strict=True):  # fmt: skip
            for column, value in (a or {}).items():
                kind = schemas[name].latest
                spark = {c.name: c.type for c in kind.columns}.get(column)
                if value is not None and spark in ("timestamp_ntz", "timestamp"):
                    # datetime (ntz) keeps its wall clock; timestamp arrives with +00:00.
                    assert b[column] == value, (name, column)
                    compared += 1
    assert compared


def test_a_zone_needs_typed_mode_and_a_real_name(engine):
    with pytest.raises(ValueError, match="typed mode"):
        cdc_decode.decode([b"{}"], "debezium-json", source_time_zone="UTC", engine=engine)
    for name in ("Mars/Olympus", "asia/shanghai", "", "../etc/passwd"):
        with pytest.raises(ValueError, match="unknown time zone"):
            cdc_decode.decode([b"{}"], "debezium-json", schema="t timestamp",
                              source_time_zone=name, engine=engine)  # fmt: skip


# --- Spark -------------------------------------------------------------------------------------


def test_spark_schema_pass_and_zone_equal_the_local_ones(spark):
    from cdc_decode import spark as cdc_spark
    from cdc_decode.generate.kafka import records

    stream = generate("debezium-json", messages=300, seed=8, table_count=15)
    offsets: dict[int, int] = {}
    rows = []
    for (partition, value, _), key in zip(
        records("debezium-json", stream.values, partitions=2), stream.message_keys, strict=True
    ):
        offsets[partition] = offsets.get(partition, -1) + 1
        rows.append((key, value, "t", partition, offsets[partition]))
    rows.append((None, b"not json", "t", 0, 999))
    df = spark.createDataFrame(
        rows, "key binary, value binary, topic string, partition int, offset long"
    ).repartition(2, "partition")
    got = cdc_spark.table_schemas(df, "debezium-json")
    local = cdc_decode.table_schemas(
        [r[1] for r in rows], "debezium-json", keys=[r[0] for r in rows]
    )

    def view(schemas):
        return {
            t.name: [
                (v.columns, v.key, v.events, v.first_sequence, v.last_sequence) for v in t.versions
            ]  # fmt: skip
            for t in schemas
        }

    assert view(got) == view(local)
    ((_, error),) = got.errors
    assert error.startswith("topic t, partition 0, offset 999: ")
    tables = got.ddl()
    frames = cdc_spark.decode(df, "debezium-json", tables=tables, source_time_zone="Asia/Shanghai")
    name = next(iter(tables))
    spark_rows = sorted(frames[name].select("sequence", "after").collect())
    want = cdc_decode.decode([r[1] for r in rows], "debezium-json", tables=tables,
                             source_time_zone="Asia/Shanghai")[name]  # fmt: skip
    assert len(spark_rows) == want.num_rows


# --- conversions the mapped types need ----------------------------------------------------


def test_hinted_values_into_string_columns(engine):
    """A string column gets a Connect decimal's text, a Debezium time's `HH:MM:SS.f`; a
    Tencent DTS json column its text (docs/typed.md)."""
    schema = {"type": "struct", "fields": [{"type": "struct", "field": "after", "fields": [
        {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "3", "connect.decimal.precision": "40"}, "field": "big"},
        {"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "field": "var"},
        {"type": "int64", "name": "io.debezium.time.MicroTime", "field": "us"},
        {"type": "int32", "name": "io.debezium.time.Time", "field": "ms"},
        {"type": "int64", "name": "io.debezium.time.NanoTime", "field": "ns"},
    ]}]}  # fmt: skip
    unscaled = -(10**39) - 5  # 40 digits at scale 3: over Spark's 38
    raw = unscaled.to_bytes(17, "big", signed=True)
    import base64

    after = {
        "big": base64.b64encode(raw).decode(),
        "var": {"scale": 2, "value": base64.b64encode(b"\x04\xd2").decode()},
        "us": -3_600_000_001,
        "ms": 45_296_789,
        "ns": 1_500,
    }
    message = json.dumps({"schema": schema, "payload": {
        "op": "c", "after": after, "source": {"db": "d", "table": "t"}}}).encode()  # fmt: skip
    row = cdc_decode.decode(
        [message],
        "debezium-json",
        engine=engine,
        schema="big string, var string, us string, ms string, ns string",
    )
    assert row.column("error").to_pylist() == [None]
    assert row.column("after").to_pylist()[0] == {
        "big": "-1000000000000000000000000000000000000.005",
        "var": "12.34",
        "us": "-01:00:00.000001",
        "ms": "12:34:56.789",
        "ns": "00:00:00.000001",
    }


def test_dts_json_bytes_are_text_for_a_string_column(engine):
    from cdc_decode import _proto as pb

    def envelope(value: bytes) -> bytes:
        dml = pb.DMLEvent(
            dmlEventType=0,
            columns=[
                pb.Column(name="doc", originalType="json"),
                pb.Column(name="raw", originalType="blob"),
            ],  # fmt: skip
            rows=[
                pb.RowChange(
                    newColumns=[pb.Data(dataType=11, bv=value), pb.Data(dataType=11, bv=value)]
                )
            ],  # fmt: skip
        )
        entry = pb.Entry(
            header=pb.Header(messageType=2, schemaName="d", tableName="t", seqId=1),
            event=pb.Event(dmlEvent=dml),
        )
        entries = pb.Entries(items=[entry]).SerializeToString()
        return pb.Envelope(version=1, total=1, data=entries).SerializeToString()

    good = envelope('{"a":"中"}'.encode())
    bad = envelope(b"\xff\xfe")
    batch = cdc_decode.decode([good, bad], "tencent-dts", schema="doc string, raw binary",
                              engine=engine)  # fmt: skip
    rows = batch.to_pylist()
    assert rows[0]["after"] == {"doc": '{"a":"中"}', "raw": '{"a":"中"}'.encode()}
    assert rows[1]["error"].startswith('after.doc: cannot convert "//4=" to string')
    generic = cdc_decode.decode([good], "tencent-dts", engine=engine).to_pylist()[0]
    assert dict(generic["after"])["doc"] == base64_text('{"a":"中"}'.encode())


def base64_text(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode()


def test_the_cli_writes_a_database(tmp_path):
    from cdc_decode.cli import main

    out = tmp_path / "db"
    args = ["generate", "debezium-json", "--messages", "40", "--table-count", "12"]
    assert main([*args, "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["table_count"] == 12
    assert (out / "keys.bin").exists()
    bad = ["generate", "datahub-tuple", "--table-count", "3", "--out", str(tmp_path / "x")]
    assert main(bad) == 2
