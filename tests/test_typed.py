"""Typed mode (docs/typed.md): ``schema=`` and ``tables=`` on both engines.

Every conversion rule and its failures, the hints each format supplies, generated streams
of every format and the shared fixtures, each decoded by both engines into equal batches.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from conftest import ENGINES, FIXTURES

import cdc_decode
from cdc_decode import parse_ddl
from cdc_decode.generate import generate
from cdc_decode.generate.source import default_tables

UTC = dt.timezone.utc


def both(values, format, **options):
    """The batch (or dict of batches) of both engines, checked equal."""
    native = cdc_decode.decode(values, format, engine="native", **options)
    python = cdc_decode.decode(values, format, engine="python", **options)
    if isinstance(native, dict):
        assert native.keys() == python.keys()
        for name in native:
            assert native[name].equals(python[name]), name
    else:
        assert native.schema == python.schema
        assert native.equals(python), (native.to_pylist(), python.to_pylist())
    return native


def debezium(after: dict, *, before: dict | None = None, schema: dict | None = None) -> bytes:
    """A Debezium insert (an update with ``before``) on ``d.t``, with its Connect schema
    when given."""
    payload = {
        "op": "u" if before else "c",
        "before": before,
        "after": after,
        "source": {"db": "d", "table": "t"},
        "ts_ms": 1,
    }
    if schema is not None:
        payload = {"schema": schema, "payload": payload}
    return json.dumps(payload).encode()


def convert(text, ddl_type: str):
    """Debezium carries ``text`` (a JSON string, or a number/bool token) as column ``v``:
    the typed value, or the error text."""
    batch = both([debezium({"v": text})], "debezium-json", schema=f"v {ddl_type}")
    row = batch.to_pylist()[0]
    if row["op"] == "error":
        return ("error", row["error"])
    return row["after"]["v"]


# --- the DDL -------------------------------------------------------------------------------


def test_ddl_types():
    schema = parse_ddl(
        "a boolean, b TINYINT, c smallint, d int, e integer, f bigint, g float, h double, "
        "i decimal(10,2), j dec, k string, l varchar(20), m char(2), n binary, o date, "
        "p timestamp, q timestamp_ntz, `order id` long, `we``ird` numeric(38, 0)"
    )
    assert [(f.name, f.type) for f in schema] == [
        ("a", pa.bool_()),
        ("b", pa.int8()),
        ("c", pa.int16()),
        ("d", pa.int32()),
        ("e", pa.int32()),
        ("f", pa.int64()),
        ("g", pa.float32()),
        ("h", pa.float64()),
        ("i", pa.decimal128(10, 2)),
        ("j", pa.decimal128(10, 0)),
        ("k", pa.string()),
        ("l", pa.string()),
        ("m", pa.string()),
        ("n", pa.binary()),
        ("o", pa.date32()),
        ("p", pa.timestamp("us", tz="UTC")),
        ("q", pa.timestamp("us")),
        ("order id", pa.int64()),
        ("we`ird", pa.decimal128(38, 0)),
    ]


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("a map<string,int>", "column 'a' has type 'map'"),
        ("a interval", "column 'a' has type 'interval'"),
        ("a decimal(40,2)", "decimal(40,2) is out of range"),
        ("a decimal(5,6)", "decimal(5,6) is out of range"),
        ("a varchar", "varchar needs a length"),
        ("a", "column 'a' has no type"),
        ("a int b int", "expected ',' after column 'a'"),
        ("", "no column"),
    ],
)
def test_ddl_errors(ddl, message):
    with pytest.raises(ValueError, match="supported types") as info:
        parse_ddl(ddl)
    assert message in str(info.value)


@pytest.mark.parametrize("engine", ENGINES)
def test_pyarrow_schemas_are_checked(engine):
    with pytest.raises(ValueError, match="column 'u' has type uint64"):
        cdc_decode.Decoder("debezium-json", engine=engine, schema=pa.schema([("u", pa.uint64())]))
    with pytest.raises(ValueError, match="column 't' has type timestamp"):
        cdc_decode.Decoder(
            "debezium-json", engine=engine, schema=pa.schema([("t", pa.timestamp("ms"))])
        )
    with pytest.raises(ValueError, match="named twice"):
        cdc_decode.Decoder("debezium-json", engine=engine, schema="a int, a bigint")
    with pytest.raises(ValueError, match="not both"):
        cdc_decode.Decoder("debezium-json", engine=engine, schema="a int", tables={"t": "a int"})
    # Found by the typed fuzz target: a schema of no column panicked in the native engine
    # when it built the structs (a PanicException); now both engines refuse it, as "".
    with pytest.raises(ValueError, match="schema: no column"):
        cdc_decode.Decoder("debezium-json", engine=engine, schema=pa.schema([]))
    with pytest.raises(ValueError, match=r"tables\[.t.\]: no column"):
        cdc_decode.Decoder("debezium-json", engine=engine, tables={"t": pa.schema([])})


# --- every conversion rule, both engines -------------------------------------------------

ERROR = object()

CASES = [
    # booleans: true/false/1/0 only
    ("true", "boolean", True),
    (True, "boolean", True),
    ("0", "boolean", False),
    ("yes", "boolean", ERROR),
    ("TRUE", "boolean", ERROR),
    # integers: range-checked per width
    ("127", "tinyint", 127),
    ("128", "tinyint", ERROR),
    ("-32768", "smallint", -32768),
    ("2147483648", "int", ERROR),
    (-9223372036854775808, "bigint", -9223372036854775808),
    ("9223372036854775808", "bigint", ERROR),
    ("+7", "int", 7),
    ("1.0", "bigint", ERROR),
    (" 1", "int", ERROR),
    ("1_000", "int", ERROR),
    # floats
    ("1.100000", "double", 1.1),
    (2.5, "float", 2.5),
    ("-.5e1", "double", -5.0),
    ("-Infinity", "double", float("-inf")),
    ("1e400", "double", float("inf")),
    ("abc", "double", ERROR),
    ("1_0", "double", ERROR),
    # decimals: exact; extra fraction digits must be zeros, at most p digits
    ("12.5", "decimal(10,2)", Decimal("12.50")),
    (12345.11, "decimal(10,3)", Decimal("12345.110")),
    ("12.500", "decimal(10,2)", Decimal("12.50")),
    ("12.505", "decimal(10,2)", ERROR),
    ("1.5E+2", "decimal(10,2)", Decimal("150.00")),
    ("-0.05", "decimal(4,2)", Decimal("-0.05")),
    ("123456789", "decimal(10,2)", ERROR),
    ("18446744073709551615", "decimal(20,0)", Decimal("18446744073709551615")),
    ("abc", "decimal(10,2)", ERROR),
    # strings pass through; nested JSON is its compact text
    ("Zoë 🦊", "string", "Zoë 🦊"),
    ({"a": [1, 2]}, "varchar(10)", '{"a":[1,2]}'),
    # binary: standard padded base64 (hex with a hint, below)
    ("3q2+7w==", "binary", b"\xde\xad\xbe\xef"),
    ("3q2+7w", "binary", ERROR),
    ("not base64!", "binary", ERROR),
    # timestamps: epoch ms by default, ISO with or without an offset (naive is UTC)
    ("2021-05-17 07:22:42 +00:00", "timestamp", dt.datetime(2021, 5, 17, 7, 22, 42, tzinfo=UTC)),
    ("2021-05-17T15:22:42+08:00", "timestamp", dt.datetime(2021, 5, 17, 7, 22, 42, tzinfo=UTC)),
    ("2021-05-17T15:22:42+0800", "timestamp", dt.datetime(2021, 5, 17, 7, 22, 42, tzinfo=UTC)),
    ("2021-05-17 07:22:42", "timestamp", dt.datetime(2021, 5, 17, 7, 22, 42, tzinfo=UTC)),
    (
        "2024-05-01T10:00:00.123456789Z",
        "timestamp",
        dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC),
    ),
    ("2024-05-01", "timestamp", dt.datetime(2024, 5, 1, tzinfo=UTC)),
    (1621236162000, "timestamp", dt.datetime(2021, 5, 17, 7, 22, 42, tzinfo=UTC)),
    (
        "1969-12-31T23:59:59.5Z",
        "timestamp",
        dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
    ),
    ("2021-05-17T07:22:42Z", "timestamp_ntz", dt.datetime(2021, 5, 17, 7, 22, 42)),
    ("2021-02-29 00:00:00", "timestamp", ERROR),
    ("2021-05-17 24:00:00", "timestamp", ERROR),
    ("2021-05-17T07:22:42+25:00", "timestamp", ERROR),
    ("yesterday", "timestamp", ERROR),
    # dates: ISO, an ISO midnight, or epoch days
    ("2024-05-01", "date", dt.date(2024, 5, 1)),
    ("2024-05-01T00:00:00Z", "date", dt.date(2024, 5, 1)),
    ("2024-05-01T08:00:00+08:00", "date", dt.date(2024, 5, 1)),
    ("2024-05-01T00:00:01Z", "date", ERROR),
    (19844, "date", dt.date(2024, 5, 1)),
    ("2024-13-01", "date", ERROR),
]


@pytest.mark.parametrize(("text", "ddl_type", "expected"), CASES)
def test_conversion_rules(text, ddl_type, expected):
    got = convert(text, ddl_type)
    if expected is ERROR:
        token = text if isinstance(text, str) else json.dumps(text, separators=(",", ":"))
        type_name = "string" if ddl_type.startswith(("varchar", "char")) else ddl_type
        shown = json.dumps(token, ensure_ascii=False)
        assert got == ("error", f"after.v: cannot convert {shown} to {type_name}")
    elif isinstance(expected, float) and expected != expected:
        assert got != got
    else:
        assert got == expected
        assert type(got) is type(expected)


@pytest.mark.parametrize("engine", ENGINES)
def test_float_nan(engine):
    batch = cdc_decode.decode(
        [debezium({"v": "nan"})], "debezium-json", schema="v float", engine=engine
    )
    value = batch.to_pylist()[0]["after"]["v"]
    assert value != value  # NaN (batches with NaN are never equal, so one engine at a time)


def test_long_values_are_cut_in_errors():
    text = "x" * 100
    kind, message = convert(text, "int")
    assert kind == "error"
    assert message == f'after.v: cannot convert "{"x" * 64}"… to int'


# --- what typed mode does with images, messages and modes ---------------------------------

DDL = "id bigint, name string, price decimal(10,2), payload binary, created timestamp"


def test_missing_columns_are_null_and_unknown_keys_ignored():
    batch = both([debezium({"id": 1, "extra": "x"})], "debezium-json", schema=DDL)
    assert batch.schema.field("after").type == pa.struct(list(parse_ddl(DDL)))
    assert batch.to_pylist()[0]["after"] == {
        "id": 1,
        "name": None,
        "price": None,
        "payload": None,
        "created": None,
    }


def test_a_bad_value_makes_the_whole_message_one_error_row():
    good = debezium({"id": 1, "price": "9.99"})
    bad = debezium({"id": 2, "price": "9.99"}, before={"id": 2, "price": "abc"})
    batch = both([good, bad, None], "debezium-json", schema=DDL)
    rows = batch.to_pylist()
    assert [r["op"] for r in rows] == ["insert", "error", "tombstone"]
    assert rows[0]["after"]["price"] == Decimal("9.99")
    assert rows[1]["error"] == 'before.price: cannot convert "abc" to decimal(10,2)'
    assert rows[1]["raw"] == bad
    assert rows[1]["before"] is None and rows[1]["after"] is None
    assert rows[2]["before"] is None and rows[2]["after"] is None


@pytest.mark.parametrize("engine", ENGINES)
def test_modes(engine):
    bad = debezium({"id": "x"})
    decoder = cdc_decode.Decoder("debezium-json", mode="dropmalformed", engine=engine, schema=DDL)
    assert decoder.decode([bad, debezium({"id": 1})]).num_rows == 1
    assert decoder.stats()["dropped"] == 1
    with pytest.raises(cdc_decode.DecodeError, match=r'message 0: after.id: cannot convert "x"'):
        cdc_decode.decode([bad], "debezium-json", mode="failfast", engine=engine, schema=DDL)


def test_control_events_get_null_structs():
    messages = [json.dumps({"status": "BEGIN", "id": "tx1"}).encode(), b"[1]"]
    rows = both(messages, "debezium-json", schema=DDL).to_pylist()
    assert [r["op"] for r in rows] == ["begin", "error"]
    assert all(r["before"] is None and r["after"] is None for r in rows)


def test_after_absent_tells_absent_columns_from_explicit_nulls():
    """``after_absent``, typed output's last column: the fields the ``after`` image does
    not carry (a key with a null value is carried), ``[]`` for a whole image, null for rows
    without an ``after`` image. Lindorm's partial ``after`` (Debezium JSON) included."""
    lindorm = {
        "op": "u",
        "before": {"id": 3, "name": "x", "price": "1.00"},
        "after": {"id": 3, "price": "2.50"},
        "source": {"version": "2.0", "db": "lindorm", "namespace": "default", "table": "t"},
        "ts_ms": 1700000000456,
    }
    whole = {"id": 1, "name": "a", "price": "1.00", "payload": None, "created": None}
    messages = [
        debezium(whole),
        debezium({"id": 1, "name": None}, before={"id": 1}),  # an explicit null, the rest absent
        debezium({"id": 2, "extra": "x", "id ": 5}),  # unknown keys are not fields
        json.dumps(lindorm).encode(),
        json.dumps({"op": "d", "before": {"id": 1}, "source": {"db": "d", "table": "t"}}).encode(),
        json.dumps({"status": "BEGIN", "id": "tx1"}).encode(),
        debezium({"id": 9, "price": "abc"}),  # an error row
        None,
        debezium({}),
    ]
    batch = both(messages, "debezium-json", schema=DDL)
    assert batch.schema.names[-1] == "after_absent"
    assert batch.schema.field("after_absent").type == pa.list_(pa.string())
    assert batch.schema == cdc_decode.typed_event_schema(parse_ddl(DDL))
    rows = batch.to_pylist()
    assert [r["op"] for r in rows] == [
        "insert", "update", "insert", "update", "delete", "begin", "error", "tombstone", "insert"
    ]  # fmt: skip
    assert [r["after_absent"] for r in rows] == [
        [],
        ["price", "payload", "created"],
        ["name", "price", "payload", "created"],
        ["name", "payload", "created"],
        None,
        None,
        None,
        None,
        ["id", "name", "price", "payload", "created"],
    ]
    assert rows[1]["after"]["name"] is None and rows[1]["after"]["price"] is None


@pytest.mark.parametrize("engine", ENGINES)
def test_after_absent_with_tables(engine):
    """With ``tables=`` one ``after_absent`` column, last, holds the claiming table's
    field names; each table's batch carries it, the generic rest does not."""
    messages = [
        debezium({"id": 1}),
        json.dumps({"op": "c", "after": {"uid": 7}, "source": {"db": "d", "table": "u"}}).encode(),
        json.dumps({"op": "c", "after": {"x": 1}, "source": {"db": "d", "table": "z"}}).encode(),
    ]
    tables = {"d.t": "id bigint, price decimal(10,2)", "u": "uid int, name string"}
    decoder = cdc_decode.Decoder("debezium-json", engine=engine, tables=tables)
    batch = decoder.decode(messages)
    assert batch.schema == cdc_decode.multi_event_schema(cdc_decode.as_tables(tables))
    assert batch.schema.names[-1] == "after_absent"
    assert batch.column("after_absent").to_pylist() == [["price"], ["name"], None]
    split = cdc_decode.split_tables(batch, tables)
    assert split["d.t"].column("after_absent").to_pylist() == [["price"]]
    assert split["u"].column("after_absent").to_pylist() == [["name"]]
    assert "after_absent" not in split[None].schema.names


def test_pyarrow_schema_and_ddl_agree():
    message = [debezium({"id": 3, "created": "2024-05-01T10:00:00Z"})]
    by_ddl = both(message, "debezium-json", schema=DDL)
    by_schema = both(message, "debezium-json", schema=parse_ddl(DDL))
    assert by_ddl.equals(by_schema)


# --- hints ---------------------------------------------------------------------------------


def connect_schema(columns: list[dict]) -> dict:
    image = {"type": "struct", "optional": True, "fields": columns, "field": "after"}
    return {"type": "struct", "fields": [{**image, "field": "before"}, image]}


def test_debezium_connect_logical_types():
    columns = [
        {"field": "d", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "1"}},
        {"field": "n", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2"}},
        {"field": "day", "type": "int32", "name": "io.debezium.time.Date"},
        {"field": "ms", "type": "int64", "name": "io.debezium.time.Timestamp"},
        {"field": "us", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
        {"field": "ns", "type": "int64", "name": "io.debezium.time.NanoTimestamp"},
        {"field": "z", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
        {"field": "b", "type": "bytes"},
        {"field": "vs", "type": "struct", "name": "io.debezium.data.VariableScaleDecimal"},
    ]  # fmt: skip
    after = {
        "d": base64.b64encode((12345).to_bytes(2, "big", signed=True)).decode(),  # 1234.5
        "n": 1000,  # decimal.format=NUMERIC: a JSON number, not base64 ("1000" would be)
        "day": 19844,
        "ms": 1714557600123,
        "us": 1714557600123456,
        "ns": 1714557600123456789,
        "z": "2024-05-01T10:00:00.5+02:00",
        "b": "3q2+7w==",
        "vs": {"scale": 1, "value": "MDk="},
    }
    ddl = (
        "d decimal(10,2), n decimal(10,2), day date, ms timestamp, us timestamp, "
        "ns timestamp, z timestamp, b binary, vs decimal(10,2)"
    )
    batch = both([debezium(after, schema=connect_schema(columns))], "debezium-json", schema=ddl)
    assert batch.to_pylist()[0]["after"] == {
        "d": Decimal("1234.50"),
        "n": Decimal("1000.00"),
        "day": dt.date(2024, 5, 1),
        "ms": dt.datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC),
        "us": dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC),
        "ns": dt.datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC),
        "z": dt.datetime(2024, 5, 1, 8, 0, 0, 500000, tzinfo=UTC),
        "b": b"\xde\xad\xbe\xef",
        "vs": Decimal("1234.50"),
    }
    # The same base64 bytes without the schema are not decimal text.
    rows = both([debezium({"d": after["d"]})], "debezium-json", schema="d decimal(10,2)")
    assert rows.to_pylist()[0]["error"] == 'after.d: cannot convert "MDk=" to decimal(10,2)'
    # Bytes of a larger scale rescale only when the dropped digits are zeros.
    rows = both(
        [debezium({"d": after["d"]}, schema=connect_schema(columns[:1]))],
        "debezium-json",
        schema="d decimal(10,0)",
    )
    assert rows.to_pylist()[0]["error"] == 'after.d: cannot convert "MDk=" to decimal(10,0)'


def datahub_blob(after: dict, columns: list[tuple[str, str]]) -> bytes:
    return json.dumps(
        {
            "schema": {
                "dataColumn": [{"name": n, "type": t} for n, t in columns],
                "primaryKey": ["id"],
                "source": {"dbType": "MySQL", "dbName": "shop", "tableName": "t"},
            },
            "payload": {
                "op": "INSERT",
                "before": None,
                "after": {"dataColumn": after},
                "sequenceId": "1",
                "timestamp": {"eventTime": 1, "systemTime": 2, "checkpointTime": 3},
                "ddl": None,
            },
            "version": "0.0.1",
        }
    ).encode()


def test_datahub_dates_are_epoch_milliseconds():
    message = datahub_blob(
        {"id": 1, "d": 1714521600000, "t": 1714557600123, "b": "3q2+7w==", "v": "1.100000"},
        [("id", "LONG"), ("d", "DATE"), ("t", "DATE"), ("b", "BYTES"), ("v", "DOUBLE")],
    )
    batch = both(
        [message], "datahub-blob", schema="id int, d date, t timestamp, b binary, v double"
    )
    assert batch.to_pylist()[0]["after"] == {
        "id": 1,
        "d": dt.date(2024, 5, 1),
        "t": dt.datetime(2024, 5, 1, 10, 0, 0, 123000, tzinfo=UTC),
        "b": b"\xde\xad\xbe\xef",
        "v": 1.1,
    }


def datastream_json(read_method: str, payload: dict) -> bytes:
    return json.dumps(
        {
            "uuid": "u1",
            "read_timestamp": 1,
            "source_timestamp": 1,
            "object": "shop_t",
            "read_method": read_method,
            "source_metadata": {
                "table": "t",
                "database": "shop",
                "change_type": "INSERT",
                "is_deleted": False,
            },
            "payload": payload,
        }
    ).encode()


def test_datastream_mysql_binary_is_hex():
    mysql = datastream_json("mysql-cdc-binlog", {"b": "deadbeef"})
    postgres = datastream_json("postgresql-cdc", {"b": "3q2+7w=="})
    rows = both([mysql, postgres], "datastream-json", schema="b binary").to_pylist()
    assert [r["after"]["b"] for r in rows] == [b"\xde\xad\xbe\xef"] * 2


# --- generated streams of every format -----------------------------------------------------


TABLES = {t.qualified: t for t in default_tables()}
DDLS = {
    name: ", ".join(f"`{c.name}` {c.spark_type}" for c in t.columns) for name, t in TABLES.items()
}


def _from_epoch(value: int, unit: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=value * unit)


def reference(text: str, ddl_type: str, format: str, hex_binary: bool):
    """The typed value of a generic text, by the Python standard library and what each
    format's docs say it sends (an independent check of the converters)."""
    if ddl_type == "bigint":
        return int(text)
    if ddl_type.startswith("decimal"):
        scale = int(ddl_type.rstrip(")").split(",")[1])
        return Decimal(text).quantize(Decimal(1).scaleb(-scale))
    if ddl_type == "double":
        return float(text)
    if ddl_type == "binary":
        return bytes.fromhex(text) if hex_binary else base64.b64decode(text)
    if ddl_type in ("date", "timestamp"):
        if text.lstrip("-").isdigit():
            if format == "debezium-json" and ddl_type == "date":
                return dt.date(1970, 1, 1) + dt.timedelta(days=int(text))
            unit = 1 if format == "datahub-tuple" else 1000
            value = _from_epoch(int(text), unit)
        else:
            value = dt.datetime.fromisoformat(text.replace(" +", "+"))
            value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.date() if ddl_type == "date" else value
    return text


@pytest.mark.parametrize("format", cdc_decode.FORMATS)
def test_generated_streams_decode_typed_per_table(format):
    """One pass with ``tables=`` over each format's generated stream: both engines equal,
    no error row, every typed value equal to its generic text converted by the reference,
    and exactly the generic rows of each table."""
    stream = generate(format, messages=150, seed=1)
    options = {}
    if format == "tdsql-json":
        options["columns"] = {n: [c.name for c in t.columns] for n, t in TABLES.items()}
    generic = cdc_decode.decode(stream.values, format, **options).to_pylist()
    split = both(stream.values, format, tables=DDLS, **options)
    assert split[None].column("error").null_count == split[None].num_rows
    types = {n: [(c.name, c.spark_type) for c in t.columns] for n, t in TABLES.items()}
    claimed = 0
    for name, batch in split.items():
        if name is None:
            continue
        want = [
            r for r in generic if r["source_db"] and f"{r['source_db']}.{r['source_table']}" == name
        ]
        got = batch.to_pylist()
        assert len(got) == len(want), name
        claimed += len(got)
        for typed, text in zip(got, want, strict=True):
            if text["after"] is None:
                assert typed["after_absent"] is None
            else:
                keys = {k for k, _ in text["after"]}
                absent = [c for c, _ in types[name] if c not in keys]
                assert typed["after_absent"] == absent, (name, text["after"])
            method = dict(text["metadata"] or {}).get("read_method", "")
            hex_binary = format.startswith("datastream") and method.startswith("mysql")
            for image in ("before", "after"):
                if text[image] is None:
                    assert typed[image] is None
                    continue
                values = dict(text[image])
                expected = {
                    column: None
                    if values.get(column) is None
                    else reference(values[column], ddl_type, format, hex_binary)
                    for column, ddl_type in types[name]
                }
                if format == "tencent-dts":
                    # DTS sends MySQL json as BYTES: a string column gets its text.
                    for column in TABLES[name].columns:
                        if column.type == "json" and expected.get(column.name) is not None:
                            expected[column.name] = base64.b64decode(expected[column.name]).decode()
                assert typed[image] == expected, (name, image)
    assert claimed > 0


@pytest.mark.parametrize("format", [f for f in cdc_decode.FORMATS if f != "datahub-tuple"])
def test_one_schema_matches_the_text_map_path(format):
    """With one ``schema=`` the JSON formats and Datastream Avro convert each image as
    they read it, never writing its text map; with ``tables=`` every format converts the
    text map. Both paths give the same structs and the same errors, on a generated stream
    of one table and (Debezium) on records with duplicate, escaped and unknown keys, nested
    and null values, and values that do not convert."""
    name = "shop.order_items"
    options = {}
    if format == "tdsql-json":
        options["columns"] = {name: [c.name for c in TABLES[name].columns]}
    values = generate(format, messages=200, seed=3, tables=[name]).values
    if format == "debezium-json":
        values = list(values)
        source = {"db": "shop", "table": "order_items"}
        for after in (
            '{"order_id": 1, "order_id": 2, "qty": "3", "sku": {"a": [1, null]}}',
            '{"order_\\u0069d": 5, "qty": null, "unit_price": "1.5e1", "nope": 1}',
            '{"qty": "x", "unit_price": "abc"}',
            '{"order_id": "99999999999999999999"}',
            "{}",
        ):
            values.append(
                f'{{"op": "u", "before": {after}, "after": {after}, '
                f'"source": {json.dumps(source)}}}'.encode()
            )
    ddl = DDLS[name]
    one = cdc_decode.decode(values, format, schema=ddl, **options)
    split = cdc_decode.Decoder(format, tables={name: ddl}, **options).decode(values)
    claimed = split.column("table").to_pylist()
    for column in ("op", "source_op", "sequence", "raw"):
        assert one.column(column).to_pylist() == split.column(column).to_pylist(), column
    errors = [e and e.removeprefix(f"{name}: ") for e in split.column("error").to_pylist()]
    assert one.column("error").to_pylist() == errors
    for image in ("before", "after"):
        want = [
            typed if table == name else None
            for typed, table in zip(split.column(f"{image}_0").to_pylist(), claimed, strict=True)
        ]
        assert one.column(image).to_pylist() == want, image
    absent = [
        listed if table == name else None
        for listed, table in zip(split.column("after_absent").to_pylist(), claimed, strict=True)
    ]
    assert one.column("after_absent").to_pylist() == absent
    assert sum(1 for t in claimed if t == name) > 50
    if format == "debezium-json":
        assert one.column("error").to_pylist()[-5:] == [
            None,
            None,
            'before.qty: cannot convert "x" to bigint',
            'before.order_id: cannot convert "99999999999999999999" to bigint',
            None,
        ]


def test_one_table_stream_with_schema():
    stream = generate("tencent-dts", messages=60, seed=2, tables=["shop.order_items"])
    batch = both(stream.values, "tencent-dts", schema=DDLS["shop.order_items"])
    dml = [r for r in batch.to_pylist() if r["after"] is not None]
    prices = [r["after"]["unit_price"] for r in dml if r["after"]["unit_price"] is not None]
    assert prices and all(isinstance(p, Decimal) for p in prices)
    assert batch.column("error").null_count == batch.num_rows


# --- shared fixtures with their typed values written out -----------------------------------


def fixture_text(path) -> bytes:
    text = path.read_text()
    return text[text.index("{") :].encode()


def test_debezium_alltype_fixture():
    """Paimon's MySQL all-types event: decimals as JSON numbers, Date, Timestamp,
    MicroTimestamp, ZonedTimestamp and bytes driven by its own Connect schema."""
    message = fixture_text(FIXTURES / "debezium" / "paimon-mysql-alltype-schema.txt")
    ddl = (
        "_id int, pt decimal(2,1), _bit1 boolean, _bit binary, _tinyint smallint, "
        "_bigint bigint, _bigint_unsigned decimal(20,0), _float float, _double double, "
        "_numeric decimal(8,3), _fixed decimal(38,3), _decimal decimal(8,0), "
        "_big_decimal decimal(38,10), _date date, _datetime timestamp, _datetime3 timestamp, "
        "_datetime6 timestamp, _datetime_p2 timestamp_ntz, _timestamp timestamp, "
        "_timestamp0 timestamp, _char char(10), _bin binary, _blob binary, _json string, "
        "_year int, _set string, _missing string"
    )
    after = both([message], "debezium-json", schema=ddl).to_pylist()[0]["after"]
    assert after == {
        "_id": 1,
        "pt": Decimal("1.1"),
        "_bit1": True,
        "_bit": base64.b64decode("xwcAAAAAAAA="),
        "_tinyint": 1,
        "_bigint": 10000000000,
        "_bigint_unsigned": Decimal(20000000000),
        "_float": 1.5,
        "_double": 1.000011,
        "_numeric": Decimal("12345.110"),
        "_fixed": Decimal("123456789876543212345678987654321.110"),
        "_decimal": Decimal(11111),
        "_big_decimal": Decimal("2222222222222222300000001111.1234567890"),
        "_date": dt.date(2023, 3, 23),
        "_datetime": dt.datetime(2023, 3, 23, 14, 30, 5, tzinfo=UTC),
        "_datetime3": dt.datetime(2023, 3, 23, 14, 30, 5, 123000, tzinfo=UTC),
        "_datetime6": dt.datetime(2023, 3, 23, 14, 30, 5, 123456, tzinfo=UTC),
        "_datetime_p2": dt.datetime(2023, 3, 24, 14, 30, 5, 120000),
        "_timestamp": dt.datetime(2023, 3, 23, 22, 0, 10, 123456, tzinfo=UTC),
        "_timestamp0": dt.datetime(2023, 3, 23, 7, 10, tzinfo=UTC),
        "_char": "Paimon",
        "_bin": b"bytes\x00\x00\x00\x00\x00",
        "_blob": b"BLOB type test data",
        "_json": '{"a": "b"}',
        "_year": 2023,
        "_set": "a,b",
        "_missing": None,
    }


def test_datahub_blob_fixtures():
    """Paimon's DataWorks BLOB events: LONG, DOUBLE as a JSON string, STRING, and DATE as
    epoch milliseconds (a DATE holding a time of day is a timestamp, not a date)."""
    folder = FIXTURES / "datahub-blob"
    names = ["paimon-event-insert.txt", "paimon-event-update-in-one.txt", "paimon-event-delete.txt"]
    messages = [fixture_text(folder / n) for n in names]
    ddl = "id bigint, val decimal(10,6), name string, create_time timestamp"
    rows = both(messages, "datahub-blob", schema=ddl).to_pylist()
    created = dt.datetime(2024, 11, 15, 8, 58, 34, tzinfo=UTC)

    def image(id, val):
        return {"id": id, "val": Decimal(val), "name": "a", "create_time": created}

    assert [(r["op"], r["before"], r["after"]) for r in rows] == [
        ("read", None, image(2, "1.100000")),
        ("update", image(2, "1.100000"), image(2, "2.200000")),
        ("delete", image(1, "1.100000"), None),
    ]
    rows = both(messages[:1], "datahub-blob", schema="create_time date").to_pylist()
    assert rows[0]["error"] == 'after.create_time: cannot convert "1731661114000" to date'


def test_datastream_avro_fixtures():
    """Datastream's own files: MySQL DATE as a timestamp-micros midnight, decimals, hex
    BLOBs and BINARY, booleans as 1/0, TIME kept as text; PostgreSQL bytea as bytes."""
    folder = FIXTURES / "datastream-avro"
    ddl = (
        "tinyint_column tinyint, smallint_column smallint, mediumint_column int, "
        "int_column int, bigint_column bigint, float_column float, double_column double, "
        "decimal_column decimal(5,2), date_column date, datetime_column timestamp_ntz, "
        "timestamp_column timestamp, time_column string, year_column smallint, "
        "text_column string, blob_column binary, binary_column binary, bool_column boolean, "
        "other_bool_column boolean, bit_column bigint, no_such_column string"
    )
    files = [(folder / "mysql-cdc1-AllDatatypeColumns.avro").read_bytes()]
    rows = both(files, "datastream-avro", schema=ddl).to_pylist()
    assert [(r["op"], r["after"]) for r in rows] == [
        (
            "delete",
            None,
        )
    ]
    assert rows[0]["before"] == {
        "tinyint_column": 5,
        "smallint_column": 25,
        "mediumint_column": 500,
        "int_column": 25000,
        "bigint_column": 987654,
        "float_column": pytest.approx(12.34),
        "double_column": 56.789,
        "decimal_column": Decimal("123.45"),
        "date_column": dt.date(2024, 2, 9),
        "datetime_column": dt.datetime(2024, 2, 9, 15, 30, 45),
        "timestamp_column": dt.datetime(2024, 2, 9, 15, 30, 45, tzinfo=UTC),
        "time_column": "15:30:45.000000",
        "year_column": 2023,
        "text_column": "text_data_2\n",
        "blob_column": b"blob_data_2",
        "binary_column": b"binary_2" + bytes(12),
        "bool_column": True,
        "other_bool_column": False,
        "bit_column": 25,
        "no_such_column": None,
    }
    files = [(folder / "bytearray.avro").read_bytes()]
    rows = both(files, "datastream-avro", schema="binary_content binary, integer_field int")
    assert rows.to_pylist()[0]["after"] == {
        "binary_content": b"\xde\xad\xbe\xef",
        "integer_field": None,
    }
    files = [(folder / "mysql-cdc-Users.avro").read_bytes()]
    ddl = "id int, name string, age int, subscribed boolean, plan string, startDate date"
    rows = both(files, "datastream-avro", schema=ddl).to_pylist()
    assert [r["op"] for r in rows] == ["delete", "insert", "insert", "update_after"]
    assert rows[0]["before"] == {
        "id": 2,
        "name": "Tester Yadav",
        "age": 33,
        "subscribed": True,
        "plan": "B",
        "startDate": dt.date(2024, 1, 1),
    }


# --- multi-table streams -----------------------------------------------------------------


def test_tables_in_one_pass():
    """A Debezium topic of two tables and a transaction marker: one typed batch per table
    (a message failing on a value of ``u`` is an error row of ``u``), and the rest (a table
    not asked for, the marker) as generic events."""
    messages = [
        json.dumps({"status": "BEGIN", "id": "tx1"}).encode(),
        debezium({"id": 1, "price": "9.99"}),
        json.dumps({"op": "c", "after": {"uid": 7}, "source": {"db": "d", "table": "u"}}).encode(),
        json.dumps({"op": "c", "after": {"x": 1}, "source": {"db": "d", "table": "z"}}).encode(),
        json.dumps(
            {"op": "c", "after": {"uid": "x"}, "source": {"db": "d", "table": "u"}}
        ).encode(),
    ]
    tables = {"d.t": "id bigint, price decimal(10,2)", "u": "uid int"}
    out = both(messages, "debezium-json", tables=tables)
    assert list(out) == ["d.t", "u", None]
    assert out["d.t"].to_pylist()[0]["after"] == {"id": 1, "price": Decimal("9.99")}
    assert out["d.t"].schema == cdc_decode.typed_event_schema(parse_ddl(tables["d.t"]))
    assert [r["after"] for r in out["u"].to_pylist()] == [{"uid": 7}, None]
    assert [r["op"] for r in out["u"].to_pylist()] == ["insert", "error"]
    assert out["u"].to_pylist()[1]["error"] == 'u: after.uid: cannot convert "x" to int'
    rest = out[None].to_pylist()
    assert [r["op"] for r in rest] == ["begin", "insert"]
    assert rest[1]["after"] == [("x", "1")]
    assert out[None].schema == cdc_decode.event_schema()


@pytest.mark.parametrize("engine", ENGINES)
def test_tables_with_a_decoder(engine):
    """``Decoder(tables=...)`` returns the one combined batch; ``split_tables`` splits it."""
    decoder = cdc_decode.Decoder("debezium-json", engine=engine, tables={"t": "id int"})
    batch = decoder.decode([debezium({"id": 5})])
    assert batch.schema.names[-4:] == ["table", "before_0", "after_0", "after_absent"]
    assert batch.column("table").to_pylist() == ["t"]
    assert batch.column("after").to_pylist() == [None]  # held by after_0
    split = cdc_decode.split_tables(batch, {"t": "id int"})
    assert split["t"].to_pylist()[0]["after"] == {"id": 5}


# --- Spark ---------------------------------------------------------------------------------


def value_df(spark, values):
    """A one-partition DataFrame of binary values with Kafka's offset column."""
    rows = [(v, i) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "value binary, offset long").coalesce(1)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ENGINES)
def test_spark_typed(spark, engine):
    """``cdc_spark.decode(df, fmt, schema=ddl)``: Spark types from the DDL, values
    converted, and a bad value an error row."""
    from cdc_decode import spark as cdc_spark

    ddl = "id bigint, price decimal(10,2), payload binary, created timestamp, local timestamp_ntz"
    values = [
        debezium(
            {
                "id": 1,
                "price": "9.99",
                "payload": "3q2+7w==",
                "created": "2024-05-01T10:00:00Z",
                "local": "2024-05-01 10:00:00",
            }
        ),
        debezium({"id": 2, "price": "abc"}),
        debezium({"id": 3, "payload": None}),  # a partial image with an explicit null
    ]
    events = cdc_spark.decode(value_df(spark, values), "debezium-json", schema=ddl, engine=engine)
    assert events.schema["after_absent"].dataType.simpleString() == "array<string>"
    assert events.columns[-1] == "after_absent"
    assert events.schema["after"].dataType.simpleString() == (
        "struct<id:bigint,price:decimal(10,2),payload:binary,created:timestamp,local:timestamp_ntz>"
    )
    rows = events.orderBy("offset").collect()
    assert rows[0].after.asDict() == {
        "id": 1,
        "price": Decimal("9.99"),
        "payload": bytearray(b"\xde\xad\xbe\xef"),
        "created": dt.datetime(2024, 5, 1, 10, 0),  # session time zone UTC
        "local": dt.datetime(2024, 5, 1, 10, 0),
    }
    assert rows[1].op == "error"
    assert rows[1].error == 'after.price: cannot convert "abc" to decimal(10,2)'
    assert [r.after_absent for r in rows] == [[], None, ["price", "created", "local"]]
    named = cdc_spark.decode(value_df(spark, values), "debezium-json", schema=ddl,
                             event_columns=["op", "after_absent"], engine=engine)  # fmt: skip
    assert named.columns == ["offset", "op", "after_absent"]


@pytest.mark.spark
def test_spark_tables_from_one_decode(spark):
    """``tables=`` on a generated many-table DataHub BLOB stream: one DataFrame per table,
    each equal to the in-process split, all selected from the one decoded DataFrame."""
    import pyarrow as pa

    from cdc_decode import spark as cdc_spark

    stream = generate("datahub-blob", messages=120, seed=3)
    frames = cdc_spark.decode(value_df(spark, list(stream.values)), "datahub-blob",
                              tables=DDLS, keep=[])  # fmt: skip
    assert set(frames) == {*DDLS, None, "*"}
    frames["*"].persist()
    expected = cdc_decode.decode(stream.values, "datahub-blob", tables=DDLS)
    for name in [*DDLS, None]:
        got = pa.Table.from_batches(frames[name].toArrow().to_batches())
        want = pa.Table.from_batches([expected[name]])
        assert got.num_rows == want.num_rows, name
        assert got.cast(want.schema).equals(want), name
    frames["*"].unpersist()


# --- the engines agree on any text ---------------------------------------------------------

TYPES = [
    "boolean", "tinyint", "int", "bigint", "float", "double", "decimal(10,2)",
    "decimal(38,0)", "decimal(5,5)", "binary", "date", "timestamp", "timestamp_ntz",
]  # fmt: skip


@pytest.mark.parametrize("ddl_type", TYPES)
def test_engines_agree_on_random_text(ddl_type):
    """Random texts built from the characters the rules look at: both engines convert the
    same values and refuse the same ones, with the same error text."""
    import random

    rng = random.Random(ddl_type)
    pieces = [
        "0", "1", "9", "12", "-", "+", ".", "e", "E", "5", "Z", "T", " ", ":", "+08:00",
        "2024-05-01", "2021-02-29", "23:59:59", "24:00", ".123456789", "=", "==", "ab",
        "3q2+7w", "/", "nan", "Inf", "true", "false", "0000000000000000000000000000001",
        "\u00e9", "99999999999999999999",
    ]  # fmt: skip
    texts = ["".join(rng.choices(pieces, k=rng.randint(1, 5))) for _ in range(400)]
    values = [debezium({"v": t}) for t in texts]
    native = cdc_decode.decode(values, "debezium-json", schema=f"v {ddl_type}")
    python = cdc_decode.decode(values, "debezium-json", schema=f"v {ddl_type}", engine="python")
    for text, n, p in zip(texts, native.to_pylist(), python.to_pylist(), strict=True):
        n_value = n["after"] and n["after"]["v"]
        p_value = p["after"] and p["after"]["v"]
        if n_value != n_value and p_value != p_value:  # NaN
            continue
        assert (n["error"], n_value) == (p["error"], p_value), text


def _split_by_filter(batch: pa.RecordBatch, tables: dict) -> dict:
    """The split as a filter of the whole batch per table: the reference for the grouped one."""
    import pyarrow.compute as pc

    base = [f.name for f in cdc_decode.event_schema()]
    out = {}
    for i, name in enumerate(tables):
        rows = batch.filter(pc.equal(batch.column("table"), name))
        images = {"before": f"before_{i}", "after": f"after_{i}"}
        out[name] = [rows.column(images.get(n, n)) for n in [*base, "after_absent"]]
    out[None] = batch.filter(pc.is_null(batch.column("table"))).select(base).columns
    return out


@pytest.mark.parametrize(
    "tables",
    [
        ["d.a", "d.b", "d.c"],  # interleaved, with rows no table claims
        ["d.c", "d.a"],  # "d.b" unclaimed, "d.c" empty
        ["d.a"],  # one table, the others unclaimed
        ["d.x"],  # no row claimed
    ],
)
@pytest.mark.parametrize("rows", [[], ["d.a"] * 3, ["d.a", "d.b", None, "d.a", "d.b", "d.a"]])
def test_split_tables_groups_rows_in_order(tables, rows):
    """``tables=`` splits one batch per table, each in the stream's order, and the rest,
    whether the tables' rows are interleaved, one table has them all or none has any."""
    values = []
    for i, table in enumerate(rows):
        db, name = ("d", table.split(".")[1]) if table else (None, None)
        if table is None:  # an error row: no table claims it
            values.append(b"{not json")
            continue
        payload = {"op": "c", "before": None, "after": {"a": i}, "ts_ms": i}
        payload["source"] = {"db": db, "table": name}
        values.append(json.dumps(payload).encode())
    spec = {t: "a int" for t in tables}
    decoder = cdc_decode.Decoder("debezium-json", tables=spec)
    batch = decoder._decode_indexed(values, None, last=True)[0]
    split = cdc_decode.decode(values, "debezium-json", tables=spec)
    want = _split_by_filter(batch, spec)
    assert list(split) == [*tables, None]
    for name, columns in want.items():
        assert split[name].columns == columns, name
    claimed = [i for i, t in enumerate(rows) if t in tables]
    got = [row["after"]["a"] for name in tables for row in split[name].to_pylist()]
    assert sorted(got) == claimed
    assert split[None].num_rows == len(rows) - len(claimed)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_value_that_does_not_convert_is_an_error_of_its_table(engine):
    """``tables=``: a message that fails on a value of a table is an error row of that
    table: its ``table`` column names it and it goes with the table's rows, so the table's
    rows account for every message of it. A message that does not parse is no table's.
    Both engines alike."""
    columns = [("id", "LONG"), ("n", "LONG")]
    good = datahub_blob({"id": 1, "n": 5}, columns)
    bad = datahub_blob({"id": 2, "n": "abc"}, columns)
    tables = {"shop.t": "id bigint, n bigint", "shop.u": "id bigint"}
    decoder = cdc_decode.Decoder("datahub-blob", engine=engine, tables=tables)
    batch = decoder.decode([good, bad, b"{not json", good])
    rows = batch.select(["op", "table", "error"]).to_pylist()
    assert [(r["op"], r["table"]) for r in rows] == [
        ("insert", "shop.t"),
        ("error", "shop.t"),
        ("error", None),
        ("insert", "shop.t"),
    ]
    assert rows[1]["error"] == 'shop.t: after.n: cannot convert "abc" to bigint'
    split = cdc_decode.decode([good, bad, b"{not json"], "datahub-blob", tables=tables,
                              engine=engine)  # fmt: skip
    assert split["shop.t"].column("op").to_pylist() == ["insert", "error"]
    assert split["shop.t"].column("after").to_pylist()[1] is None
    assert split[None].column("op").to_pylist() == ["error"]
    # With one schema, error rows have no table column, as before.
    one = cdc_decode.decode([bad], "datahub-blob", schema="id bigint, n bigint", engine=engine)
    assert "table" not in one.schema.names and one.column("op").to_pylist() == ["error"]
