"""The PySpark layer on a real local SparkSession, on DataFrames shaped like Kafka's source."""

from __future__ import annotations

import datetime as dt

import pytest
from support import spark_conf

import cdc_decode
from cdc_decode import _proto as pb
from cdc_decode import event_schema
from cdc_decode import spark as cdc_spark

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS = "headers array<struct<key:string,value:binary>>"
T0 = dt.datetime(2024, 5, 1, 10, 0, 0)  # session time zone is UTC
T0_EPOCH = 1714557600


# --- DTS messages -------------------------------------------------------------------------


def enum(descriptor, name: str) -> int:
    return descriptor.values_by_name[name].number


def dml(seq: int, op: str, table: str, rows: list[tuple[dict | None, dict | None]]) -> bytes:
    """An ``Entries`` with one DML entry on ``shop.<table>`` (columns id, name)."""

    def image(values: dict | None):
        if values is None:
            return []
        return [
            pb.Data(dataType=enum(pb.DataType, "INT64"), sv=str(values["id"])),
            pb.Data(
                dataType=enum(pb.DataType, "STRING"), charset="utf8mb4", bv=values["name"].encode()
            ),
        ]

    header = pb.Header(
        version=1,
        sourceType=enum(pb.SourceType, "MYSQL"),
        messageType=enum(pb.MessageType, "DML"),
        timestamp=T0_EPOCH,
        fileName="mysql-bin.000003",
        position=4000 + seq,
        schemaName="shop",
        tableName=table,
        seqId=seq,
    )
    event = pb.Event(
        dmlEvent=pb.DMLEvent(
            dmlEventType=enum(pb.DMLType, op),
            columns=[pb.Column(name="id", isKey=True), pb.Column(name="name")],
            rows=[pb.RowChange(oldColumns=image(b), newColumns=image(a)) for b, a in rows],
        )
    )
    return pb.Entries(items=[pb.Entry(header=header, event=event)]).SerializeToString()


def envelope(data: bytes, total: int = 1, index: int = 0) -> bytes:
    return pb.Envelope(version=1, total=total, index=index, data=data).SerializeToString()


def split(data: bytes, parts: int) -> list[bytes]:
    """The envelopes of a multi-part set carrying ``data``."""
    size = -(-len(data) // parts)
    chunks = [data[i * size : (i + 1) * size] for i in range(parts)]
    return [envelope(chunk, parts, i) for i, chunk in enumerate(chunks)]


def kafka_df(spark, values, *, topic="dts", partition=0, shards=None):
    """A one-partition DataFrame shaped like Spark's Kafka source, one row per value."""
    rows = []
    for i, value in enumerate(values):
        row = (b"k", value, topic, partition, 100 + i, T0 + dt.timedelta(seconds=i), 0)
        if shards is not None:
            row += ([("ShardId", shards[i].encode())] if shards[i] is not None else [],)
        rows.append(row)
    schema = KAFKA_SCHEMA + (f", {HEADERS}" if shards is not None else "")
    return spark.createDataFrame(rows, schema).coalesce(1)


def collect(df):
    """Rows as dicts, with the kept ``timestamp`` as epoch seconds (no local time zones)."""
    from pyspark.sql import functions as F

    if "timestamp" in df.columns:
        df = df.withColumn("timestamp", F.unix_timestamp("timestamp"))
    return [row.asDict(recursive=True) for row in df.collect()]


# --- the tests ----------------------------------------------------------------------------

INSERT = dml(
    1, "INSERT", "orders", [(None, {"id": 1, "name": "ann"}), (None, {"id": 2, "name": "bo"})]
)
UPDATE = dml(2, "UPDATE", "orders", [({"id": 1, "name": "ann"}, {"id": 1, "name": "anna"})])
DELETE = dml(3, "DELETE", "users", [({"id": 7, "name": "cy"}, None)])
BAD = b"\x0a\xff\xff\xff"  # a field whose length runs past the end


def test_the_local_session_keeps_a_micro_batchs_compiled_code(spark):
    # Spark's 100 entries are fewer than one apply_changes call compiles (docs/apply.md).
    from cdc_decode.spark.session import CODE_CACHE, CODE_CACHE_ENTRIES

    assert spark.conf.get(CODE_CACHE) == str(CODE_CACHE_ENTRIES) == "2000"


def test_a_delta_merge_is_compiled_from_a_smaller_table_where_its_code_is_kept(spark, monkeypatch):
    # A cache this big keeps a table's compiled MERGE between calls: interpreted only under
    # 1 MiB; with Spark's 100 entries, under 4 MiB (docs/apply.md, "Where interpreting stops
    # paying").
    from cdc_decode.spark._plans import code_cache_entries
    from cdc_decode.spark._tables import delta

    table = delta.DeltaTarget(spark, "/nowhere/t")
    assert code_cache_entries(spark) == 2000
    assert table._interpret_below() == delta.KEPT_INTERPRET_BYTES == 1024 * 1024
    monkeypatch.setattr(delta, "code_cache_entries", lambda _: 100)
    assert table._interpret_below() == delta.INTERPRET_BYTES == 4 * 1024 * 1024
    monkeypatch.setattr(delta, "INTERPRET_BYTES", 0)  # off: every MERGE compiled
    monkeypatch.setattr(delta, "code_cache_entries", lambda _: 2000)
    assert table._interpret_below() == 0


def test_schema_is_kept_columns_then_events(spark):
    df = kafka_df(spark, [envelope(INSERT)])
    events = cdc_spark.decode(df, "tencent-dts", engine="python")
    assert events.columns == ["topic", "partition", "offset", "timestamp", *event_schema().names]
    fields = {f.name: f for f in events.schema.fields}
    assert fields["op"].nullable is False
    assert fields["offset"].dataType.simpleString() == "bigint"
    assert fields["after"].dataType.simpleString() == "map<string,string>"
    assert fields["event_time"].dataType.simpleString() == "timestamp"


def test_decode_kafka_rows(spark, engine):
    values = [envelope(INSERT), envelope(UPDATE), None, BAD, envelope(DELETE)]
    rows = collect(cdc_spark.decode(kafka_df(spark, values), "tencent-dts", engine=engine))

    assert [r["op"] for r in rows] == ["insert", "insert", "update", "tombstone", "error", "delete"]
    # Kafka columns of each event are those of the message it came from.
    assert [r["offset"] for r in rows] == [100, 100, 101, 102, 103, 104]
    assert [r["timestamp"] for r in rows] == [T0_EPOCH + i for i in (0, 0, 1, 2, 3, 4)]
    assert {r["topic"] for r in rows} == {"dts"}
    assert {r["partition"] for r in rows} == {0}

    ins1, ins2, upd, tomb, err, dele = rows
    assert ins1["source_db"] == "shop" and ins1["source_table"] == "orders"
    assert ins1["after"] == {"id": "1", "name": "ann"} and ins1["before"] is None
    assert ins2["after"] == {"id": "2", "name": "bo"}
    assert ins1["primary_key"] == ["id"]
    assert ins1["position"] == "mysql-bin.000003:4001"
    assert ins1["event_id"] == "1:0" and ins2["event_id"] == "1:1"
    assert ins1["sequence"] < ins2["sequence"] < upd["sequence"] < dele["sequence"]
    assert upd["before"] == {"id": "1", "name": "ann"}
    assert upd["after"] == {"id": "1", "name": "anna"}
    assert dele["source_table"] == "users" and dele["before"] == {"id": "7", "name": "cy"}
    assert dele["after"] is None

    assert tomb["format"] == "tencent-dts" and tomb["error"] is None and tomb["after"] is None
    assert err["error"] and err["raw"] == BAD and err["source_table"] is None
    assert all(r["error"] is None for r in rows if r["op"] != "error")


def test_event_time_is_utc(spark):
    from pyspark.sql import functions as F

    events = cdc_spark.decode(kafka_df(spark, [envelope(UPDATE)]), "tencent-dts", engine="python")
    (row,) = events.select(F.unix_timestamp("event_time").alias("t")).collect()
    assert row.t == T0_EPOCH


def test_multipart_set_split_across_batches(spark, engine):
    """A three-part envelope over two Arrow batches; the events carry the last part's offset."""
    parts = split(INSERT, 3)
    values = [envelope(UPDATE), parts[0], parts[1], parts[2], envelope(DELETE)]
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "2"}):
        rows = collect(cdc_spark.decode(kafka_df(spark, values), "tencent-dts", engine=engine))

    assert [(r["op"], r["offset"]) for r in rows] == [
        ("update", 100),
        ("insert", 103),
        ("insert", 103),
        ("delete", 104),
    ]
    assert [r["after"] for r in rows[1:3]] == [
        {"id": "1", "name": "ann"},
        {"id": "2", "name": "bo"},
    ]


def test_broken_and_unfinished_sets_keep_their_own_kafka_columns(spark, engine):
    """Parts that become error rows in a later batch (or at the end) keep their offsets."""
    first = split(INSERT, 3)
    second = split(UPDATE, 2)
    # 100: part 0 of a set that never continues; 102: a new set starts and breaks the first;
    # 104: part 0 of a set still open at the end of the partition.
    values = [first[0], envelope(DELETE), second[0], second[1], split(DELETE, 2)[0]]
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "2"}):
        rows = collect(cdc_spark.decode(kafka_df(spark, values), "tencent-dts", engine=engine))

    got = [(r["op"], r["offset"]) for r in rows]
    assert got == [("delete", 101), ("error", 100), ("update", 103), ("error", 104)]
    assert rows[1]["raw"] == first[0]
    assert rows[3]["raw"] == split(DELETE, 2)[0]
    assert "incomplete" in rows[1]["error"]


@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_a_streamed_schema_pass_names_the_open_parts(spark, engine, mode):
    """A micro-batch's schema pass (``streamed=True``) names the Kafka records of the sets
    still open at its end (sync_stream holds them), not as errors; a bad message is still
    one (permissive) or gone (dropmalformed)."""
    first, second = split(INSERT, 3), split(UPDATE, 2)
    values = [first[0], first[1], first[2], b"not an envelope", second[0]]
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "2"}):
        wire = cdc_spark.table_schemas(kafka_df(spark, values), "tencent-dts", engine=engine,
                                       mode=mode, streamed=True)  # fmt: skip
    assert wire.open_parts == [("dts", 0, 104)]
    assert [text.split(": ")[0] for _, text in wire.errors] == (
        ["topic dts, partition 0, offset 103"] if mode == "permissive" else []
    )
    assert wire["shop.orders"].latest.events == 2
    with pytest.raises(Exception, match="offset 103"):
        cdc_spark.table_schemas(kafka_df(spark, values), "tencent-dts", engine=engine,
                                mode="failfast", streamed=True)  # fmt: skip


def test_sets_reassemble_per_shard_header(spark, engine):
    """Two shards interleaved in one partition: the ShardId header keeps their parts apart."""
    a = split(INSERT, 2)
    b = split(DELETE, 2)
    values = [a[0], b[0], a[1], b[1], envelope(UPDATE)]
    shards = ["1", "2", "1", "2", None]
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "3"}):
        df = kafka_df(spark, values, shards=shards)
        rows = collect(cdc_spark.decode(df, "tencent-dts", engine=engine))
    assert [(r["op"], r["offset"]) for r in rows] == [
        ("insert", 102),
        ("insert", 102),
        ("delete", 103),
        ("update", 104),
    ]


def test_large_binary_input(spark, engine):
    values = [envelope(INSERT), None]
    with spark_conf(spark, **{"spark.sql.execution.arrow.useLargeVarTypes": "true"}):
        rows = collect(cdc_spark.decode(kafka_df(spark, values), "tencent-dts", engine=engine))
    assert [(r["op"], r["offset"], r["topic"]) for r in rows] == [
        ("insert", 100, "dts"),
        ("insert", 100, "dts"),
        ("tombstone", 101, "dts"),
    ]


def test_keep_and_value_col(spark):
    df = kafka_df(spark, [envelope(DELETE)]).withColumnRenamed("value", "payload")
    events = cdc_spark.decode(
        df, "tencent-dts", value_col="payload", keep=["key", "offset"], engine="python"
    )
    assert events.columns[:2] == ["key", "offset"]
    (row,) = events.collect()
    assert (row.key, row.offset, row.op) == (b"k", 100, "delete")

    bare = cdc_spark.decode(
        df.select("payload"), "tencent-dts", value_col="payload", engine="python"
    )
    assert bare.columns == event_schema().names
    assert [r.op for r in bare.collect()] == ["delete"]


def test_dropmalformed_drops_error_rows(spark, engine):
    df = kafka_df(spark, [BAD, envelope(DELETE), BAD])
    rows = collect(cdc_spark.decode(df, "tencent-dts", mode="dropmalformed", engine=engine))
    assert [(r["op"], r["offset"]) for r in rows] == [("delete", 101)]


def test_engines_agree(spark):
    parts = split(
        dml(9, "INSERT", "big", [(None, {"id": i, "name": f"n{i}"}) for i in range(40)]), 4
    )
    values = [envelope(INSERT), None, *parts, BAD, envelope(UPDATE), parts[0], envelope(DELETE)]
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "3"}):
        df = kafka_df(spark, values)
        native = collect(cdc_spark.decode(df, "tencent-dts", engine="native"))
        python = collect(cdc_spark.decode(df, "tencent-dts", engine="python"))
    assert len(native) == 2 + 1 + 40 + 1 + 1 + 1 + 1
    # The engines may word an error differently; everything else is equal.
    for row in native + python:
        row["error"] = row["error"] is not None
    assert native == python


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"format": "no-such-format"}, "unknown format"),
        ({"format": "tencent-dts", "value_col": "nope"}, "value column 'nope'"),
        ({"format": "tencent-dts", "value_col": "offset"}, "must be binary or string"),
        ({"format": "tencent-dts", "keep": ["op"]}, "name of an event column"),
        ({"format": "tencent-dts", "keep": ["nope"]}, "not in the DataFrame"),
        ({"format": "tencent-dts", "mode": "lenient"}, "unknown mode"),
        ({"format": "tencent-dts", "engine": "java"}, "unknown engine"),
    ],
)
def test_bad_arguments(spark, kwargs, message):
    df = kafka_df(spark, [envelope(INSERT)])
    with pytest.raises(ValueError, match=message):
        cdc_spark.decode(df, **kwargs)


def test_failfast_fails_the_job(spark):
    df = kafka_df(spark, [envelope(INSERT), BAD])
    with pytest.raises(Exception, match="DecodeError|message 1"):
        cdc_spark.decode(df, "tencent-dts", mode="failfast", engine="native").collect()


def test_a_generated_stream_decodes_in_spark_to_its_expected_events(spark):
    """A realistic stream (every DataType, multi-part transactions) through Spark, in Arrow
    batches smaller than its multi-part sets: the events are exactly the generator's."""
    import pyarrow as pa

    from cdc_decode.generate import generate

    stream = generate("tencent-dts", messages=1500, seed=5, max_message_bytes=4096)
    assert any(pb.Envelope.FromString(v).total > 1 for v in stream.values), (
        "the stream should hold multi-part envelopes"
    )
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "7"}):
        events = cdc_spark.decode(kafka_df(spark, stream.values), "tencent-dts")
        table = pa.Table.from_batches(events.drop(*cdc_spark.KAFKA_COLUMNS).toArrow().to_batches())
    assert_table_matches(table, stream.expected)


def assert_table_matches(table, expected):
    """``table`` (from Spark) holds exactly the events of ``expected`` (a pyarrow Table)."""
    assert table.num_rows == expected.num_rows
    for name in expected.schema.names:
        got, want = table.column(name).to_pylist(), expected.column(name).to_pylist()
        if name in ("before", "after", "metadata"):  # Spark's maps come back as dicts
            want = [None if m is None else dict(m) for m in want]
            got = [None if m is None else dict(m) for m in got]
        if name in ("event_time", "capture_time"):  # compare instants
            got = [None if t is None else t.timestamp() for t in got]
            want = [None if t is None else t.timestamp() for t in want]
        assert got == want, name


def test_datahub_blob_from_kafka_and_from_text(spark, engine):
    """DataHub BLOB records as Kafka values (binary) and as lines of text: the generator's
    events, plus one error row that keeps its Kafka offset."""
    import pyarrow as pa

    from cdc_decode.generate import generate

    stream = generate("datahub-blob", messages=600, seed=9)
    values = [*stream.values, b'{"payload":{"op":5}}']
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "64"}):
        events = cdc_spark.decode(kafka_df(spark, values), "datahub-blob", engine=engine)
        rows = events.select("offset", "op", "error").collect()
        table = pa.Table.from_batches(events.drop(*cdc_spark.KAFKA_COLUMNS).toArrow().to_batches())
    assert_table_matches(table.slice(0, len(stream.values)), stream.expected)
    bad = rows[-1]
    assert (bad.offset, bad.op) == (100 + len(stream.values), "error")
    assert bad.error == "payload.op: expected a string, got the number 5"

    lines = spark.createDataFrame([(v.decode(),) for v in stream.values[:50]], "value string")
    text = cdc_spark.decode(lines.coalesce(1), "datahub-blob", engine=engine, keep=[])
    got = pa.Table.from_batches(text.toArrow().to_batches())
    assert_table_matches(got, stream.expected.slice(0, 50))


# --- datahub-tuple: the records are the DataFrame's own columns ---------------------------


def test_a_generated_tuple_topic_decodes_in_spark_to_its_expected_events(spark, engine):
    """A TUPLE topic (every DataHub type: tinyint … decimal(20,0), float, timestamp, binary)
    as a DataFrame of records, in Arrow batches of 7: every column not kept is a record
    column, the kept one (``shard``) rides beside the events and stays out of the images."""
    import pyarrow as pa

    from cdc_decode.generate import generate

    stream = generate("datahub-tuple", messages=400, seed=5)
    records = stream.values.append_column("shard", pa.array([i % 3 for i in range(400)]))
    df = spark.createDataFrame(records).coalesce(1)
    with spark_conf(spark, **{"spark.sql.execution.arrow.maxRecordsPerBatch": "7"}):
        events = cdc_spark.decode(df, "datahub-tuple", keep=["shard"], engine=engine)
        assert events.columns == ["shard", *event_schema().names]
        table = events.toArrow()
    assert table.column("shard").to_pylist() == [i % 3 for i in range(400)]
    table = table.drop_columns(["shard"])
    assert_table_matches(table, stream.expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"value_col": "value"}, "not a value column"),
        ({"keep": ["_operation_type_"]}, "no _operation_type_ column"),
        ({"keep": ["nope"]}, "not in the DataFrame"),
    ],
)
def test_tuple_bad_arguments(spark, kwargs, message):
    df = spark.createDataFrame(
        [(1, "1", "I", "N", "Y")],
        "id long, _sequence_id_ string, _operation_type_ string, _before_image_ string, "
        "_after_image_ string",
    )
    with pytest.raises(ValueError, match=message):
        cdc_spark.decode(df, "datahub-tuple", **kwargs)


def test_tdsql_json_with_column_names(spark, engine):
    """TDSQL messages from Kafka, images named by ``columns=``: the tables they build
    are the source's."""
    import pyarrow as pa

    from cdc_decode.generate import apply_events, generate

    stream = generate("tdsql-json", messages=800, seed=3)
    columns = stream.options["columns"]
    events = cdc_spark.decode(kafka_df(spark, stream.values), "tdsql-json", engine=engine,
                              columns=columns)  # fmt: skip
    table = pa.Table.from_batches(events.drop(*cdc_spark.KAFKA_COLUMNS).toArrow().to_batches())
    assert apply_events(table, primary_keys=stream.primary_keys) == stream.final_state
    named = cdc_decode.decode(stream.values, "tdsql-json", columns=columns)
    assert_table_matches(table, pa.Table.from_batches([named]))
    with pytest.raises(ValueError, match="tdsql-json only"):
        cdc_spark.decode(kafka_df(spark, stream.values), "datahub-blob", columns=columns)


def test_debezium_json_fixture_from_kafka(spark, engine):
    """The Flink PostgreSQL fixture as Kafka values, a Connect tombstone among them: the
    events equal the in-process decode, offsets kept."""
    import pyarrow as pa
    from conftest import FIXTURES

    lines = (FIXTURES / "debezium" / "flink-postgres-schema-exclude.jsonl").read_bytes()
    values = [line for line in lines.splitlines() if line.strip()] + [None]
    events = cdc_spark.decode(kafka_df(spark, values), "debezium-json", engine=engine)
    table = pa.Table.from_batches(events.drop(*cdc_spark.KAFKA_COLUMNS).toArrow().to_batches())
    expected = cdc_decode.decode(values, "debezium-json")
    assert_table_matches(table, pa.Table.from_batches([expected]))
    assert events.select("offset").collect()[-1].offset == 100 + len(values) - 1


def test_datastream_json_lines_from_text_files(spark, engine, tmp_path):
    """Datastream's JSON files as users find them (a `table/yyyy/mm/dd/hh/mm/` tree of
    JSON-lines files) read with spark.read.text: the in-process events, one per line."""
    import json

    import pyarrow as pa

    lines = []
    for i in range(40):
        lines.append(json.dumps({
            "uuid": f"u-{i}", "read_method": "mysql-cdc-binlog", "source_timestamp": 1000 + i,
            "source_metadata": {"database": "shop", "table": "orders", "change_type": "INSERT",
                                "log_file": "mysql-bin.000001", "log_position": 100 + i},
            "payload": {"id": i, "name": f"n{i}"},
        }))  # fmt: skip
    folder = tmp_path / "shop_orders" / "2024" / "05" / "01" / "10" / "00"
    folder.mkdir(parents=True)
    (folder / "part-1.jsonl").write_text("\n".join(lines[:20]) + "\n")
    (folder / "part-2.jsonl").write_text("\n".join(lines[20:]) + "\n")
    df = spark.read.option("recursiveFileLookup", "true").text(str(tmp_path)).coalesce(1)
    events = cdc_spark.decode(df, "datastream-json", engine=engine, keep=[])
    table = pa.Table.from_batches(events.toArrow().to_batches())
    table = table.sort_by([("event_id", "ascending")])
    expected = pa.Table.from_batches([cdc_decode.decode(lines, "datastream-json")])
    assert_table_matches(table, expected.sort_by([("event_id", "ascending")]))


def test_datastream_avro_files_from_a_folder_tree(spark, engine, tmp_path):
    """Datastream's Avro files in a `table/yyyy/mm/dd/hh/mm/` tree, read whole with
    read_datastream (binaryFile): the generator's expected events, each with its file."""
    import pyarrow as pa

    from cdc_decode.generate import generate

    stream = generate("datastream-avro", messages=30, seed=5)
    files = [v for v in stream.values if v is not None]
    for i, value in enumerate(files):
        folder = tmp_path / "shop_orders" / "2024" / "05" / "01" / f"{i % 3:02d}" / "00"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"part-{i:03d}.avro").write_bytes(value)
    (tmp_path / "shop_orders" / "README.txt").write_text("not an Avro file")
    events = cdc_spark.read_datastream(spark, str(tmp_path), engine=engine)
    table = pa.Table.from_batches(events.toArrow().to_batches())
    assert set(table.column("path").to_pylist()) == {
        p.as_uri().replace("file:///", "file:/") for p in tmp_path.rglob("*.avro")
    }
    got = table.drop_columns(["path"]).sort_by([("event_id", "ascending")])
    expected = pa.Table.from_batches([cdc_decode.decode(files, "datastream-avro")])
    assert expected.num_rows == stream.rows - (stream.messages - len(files))  # no fillers
    assert_table_matches(got, expected.sort_by([("event_id", "ascending")]))


def test_event_columns_keep_only_the_named_columns(spark, engine):
    """event_columns= drops the other event columns in the worker: the same rows as a
    select of the full decode, the kept Kafka columns first."""
    df = kafka_df(spark, [envelope(INSERT), BAD, envelope(UPDATE)])
    names = ["after", "op", "error"]
    events = cdc_spark.decode(df, "tencent-dts", engine=engine, event_columns=names)
    assert events.columns == ["topic", "partition", "offset", "timestamp", *names]
    full = cdc_spark.decode(df, "tencent-dts", engine=engine)
    assert collect(events) == collect(full.select(*events.columns))
    records = spark.createDataFrame(
        [("1", "I", "N", "Y", 7, 1714550400000)],
        "_sequence_id_ string, _operation_type_ string, _before_image_ string, "
        "_after_image_ string, id bigint, _execute_time_ bigint",
    )
    tuple_events = cdc_spark.decode(
        records, "datahub-tuple", engine=engine, keep=[], event_columns=["op", "after"]
    )
    assert [tuple(r) for r in tuple_events.collect()] == [("insert", {"id": "7"})]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"event_columns": ["op", "nope"]}, ValueError, "'nope' not an event column"),
        ({"event_columns": ["op", "op"]}, ValueError, "names a column twice"),
        ({"event_columns": []}, ValueError, "is empty"),
        ({"event_columns": "op"}, TypeError, "list of names"),
        ({"event_columns": ["op"], "tables": {"t": "id bigint"}}, ValueError, "tables="),
    ],
)
def test_event_columns_bad_arguments(spark, kwargs, error, message):
    df = kafka_df(spark, [envelope(INSERT)])
    with pytest.raises(error, match=message):
        cdc_spark.decode(df, "tencent-dts", **kwargs)
