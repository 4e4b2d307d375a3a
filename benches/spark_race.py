"""The Spark race: ``cdc_decode.spark.decode`` against what a Spark user writes without it.

    make bench-spark                      # every format, 200,000 messages each
    .venv/bin/python benches/spark_race.py --formats datahub-blob --messages 50000

On a local Spark with one core (``local[1]``), the same generated stream per format (one
table, ``shop.order_items``), decoded to typed rows of the same columns and written to
Spark's ``noop`` sink, by four contenders:

- ``native``: ``cdc_spark.decode(df, fmt, schema=...)``, the Rust engine (for DataHub
  TUPLE records, Spark expressions: ``plan="auto"``; ``--tuple-plan arrow`` races the
  Rust decoder in ``mapInArrow`` instead; for Datastream Avro files
  ``cdc_spark.read_datastream`` over the same files on disk that spark-avro reads);
- ``python``: the same with ``engine="python"``, the pure-Python fallback;
- ``spark``: what a Spark user writes without us: ``from_json`` with casts (and
  ``unbase64`` where the format sends base64) for the JSON formats, the spark-avro reader
  for Datastream Avro files, column casts over the TUPLE records, and for Tencent DTS a
  ``mapInArrow`` with Google's ``protobuf`` package, because the spark-protobuf connector
  (``from_protobuf``) is not in the Maven repository this project's machines reach;
- ``passthrough``: a ``mapInArrow`` that returns its input unchanged, the floor set by
  moving data between the JVM and Python.

The input is cached in memory first, so reading it is not timed, except for Datastream Avro
files, which ``native``, ``python`` and ``spark`` all read from the same folder on disk
(``benches/datastream_tree.py`` races whole trees). Every contender is run
once to warm up, then ``--rounds`` times; the best round counts. A round that takes over
``--round-timeout`` seconds (300) has its Spark jobs cancelled and is run once more.
Prints messages/s and the ratios, and writes ``docs/spark-race.md`` and ``docs/spark-race.png``.
"""

from __future__ import annotations

import argparse
import glob
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
TABLE = "shop.order_items"

# The typed columns every contender produces for shop.order_items (returned_at arrives by
# DDL part-way through the stream).
COLUMNS = (
    "order_id bigint, line_no int, sku string, qty int, unit_price decimal(10,4), "
    "cost int, weight_g bigint, gift_wrap boolean, returned_at timestamp"
)
# The event columns the race outputs, in this order, for every contender.
OUTPUT = ["op", "source_db", "source_table", "event_time", "sequence", "before", "after"]

CONTENDERS = ("native", "python", "spark", "passthrough")

FORMATS = (
    "datahub-blob",
    "tencent-dts",
    "tdsql-json",
    "datahub-tuple",
    "debezium-json",
    "datastream-json",
    "datastream-avro",
)


@dataclass
class Result:
    format: str
    contender: str
    messages: int
    events: int
    seconds: float

    @property
    def rate(self) -> float:
        """Events (rows) per second."""
        return self.events / self.seconds


# --- inputs -------------------------------------------------------------------------------


def _values(fmt: str, messages: int, seed: int) -> list[bytes | None]:
    """``messages`` Kafka values: a generated stream of up to 20,000, repeated."""
    from cdc_decode.generate import generate

    base = generate(fmt, messages=min(messages, 20_000), seed=seed, tables=[TABLE]).values
    if fmt == "tencent-dts":
        base = base[: _whole_sets(base)]
    return (base * (messages // len(base) + 1))[:messages]


def _whole_sets(values: list[bytes | None]) -> int:
    """How many of the DTS values make whole multi-part sets (the stream may end inside
    one; repeated, that set would be joined with the next round's parts)."""
    from cdc_decode._proto import Envelope

    end = 0
    for i, value in enumerate(values):
        envelope = Envelope.FromString(value)
        if envelope.total <= 1 or envelope.index + 1 == envelope.total:
            end = i + 1
    return end


def _input(spark, fmt: str, messages: int, seed: int, partitions: int, tmp: Path):
    """The cached input DataFrame of a format, what the baseline reads instead if anything
    (the Avro files' folder), and how many events the input holds (as the native decoder
    counts them: the one unit every contender's rate is given in)."""
    import cdc_decode
    from cdc_decode.generate import generate

    if fmt == "datahub-tuple":
        records = generate(fmt, messages=messages, seed=seed, tables=[TABLE]).values
        df = _from_arrow(spark, records, partitions).cache()
        return df, None, records.num_rows
    if fmt == "datastream-avro":
        folder = tmp / "avro" / "shop_order_items" / "2024" / "05" / "01" / "10" / "00"
        folder.mkdir(parents=True, exist_ok=True)
        # A file holds about ten events: as many files as a tenth of the messages.
        files = _values(fmt, max(1, messages // 10), seed)
        for i, data in enumerate(files):
            (folder / f"{i:06d}.avro").write_bytes(data)
        events = cdc_decode.decode(files, fmt).num_rows
        df = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(str(tmp / "avro"))
            .select("path", "content")
        )
        return df.repartition(partitions).cache(), str(tmp / "avro"), events
    values = pa.array(_values(fmt, messages, seed), type=pa.binary())
    events = cdc_decode.decode(values, fmt).num_rows
    df = _from_arrow(spark, pa.table({"value": values}), partitions).cache()
    return df, None, events


def _from_arrow(spark, table: pa.Table, partitions: int):
    """A DataFrame of an Arrow table in ``partitions`` contiguous slices, in order, as a
    Kafka topic's partitions deliver them (a shuffle would break multi-part sets)."""
    import pyarrow.parquet as pq

    path = tempfile.mkdtemp(prefix="race-", dir=str(ROOT / "target"))
    step = -(-table.num_rows // partitions)
    for i in range(partitions):
        pq.write_table(table.slice(i * step, step), f"{path}/part-{i:03d}.parquet")
    return spark.read.parquet(path)


# --- contenders ---------------------------------------------------------------------------


def decoded(fmt: str, engine: str, typed: bool = True, plan: str = "auto") -> Callable:
    from cdc_decode import spark as cdc_spark

    # Only the raced columns leave the Python worker (Spark copies every column mapInArrow
    # returns into its rows, used or not).
    options = {"event_columns": OUTPUT}
    if typed:
        options["schema"] = COLUMNS
    if fmt == "tdsql-json":  # positional images: name them
        options["columns"] = {TABLE: [name for name, _ in _fields()]}

    def run(df, source):
        if fmt == "datahub-tuple":  # Spark expressions by default (plan="auto")
            events = cdc_spark.decode(df, fmt, engine=engine, plan=plan, **options)
        elif fmt == "datastream-avro":
            # The files on disk, as spark-avro reads them: the tree, not the cached bytes.
            events = cdc_spark.read_datastream(
                df.sparkSession, source, engine=engine, **options
            ).drop("path")
        else:
            events = cdc_spark.decode(df, fmt, engine=engine, keep=[], **options)
        return events

    return run


def passthrough(df, _source):
    return df.mapInArrow(lambda batches: batches, df.schema)


def _string_struct() -> str:
    from pyspark.sql.types import _parse_datatype_string

    names = [f.name for f in _parse_datatype_string(COLUMNS).fields]
    return "struct<" + ", ".join(f"{n}: string" for n in names) + ">"


def spark_datahub_blob(df, _source):
    """DataWorks BLOB JSON: from_json, then casts; DOUBLE arrives as number or string, and
    timestamps as epoch milliseconds."""
    from pyspark.sql import functions as F

    image = f"struct<dataColumn: {_string_struct()}>"
    schema = (
        "struct<schema: struct<primaryKey: array<string>, "
        "source: struct<dbName: string, tableName: string>>, "
        f"payload: struct<op: string, before: {image}, after: {image}, sequenceId: string, "
        "timestamp: struct<eventTime: bigint>>>"
    )
    j = df.select(F.from_json(F.col("value").cast("string"), schema).alias("j")).select("j.*")

    def image_sql(side: str) -> str:
        row = _row(
            lambda _, n: f"payload.{side}.dataColumn.{n}", "timestamp_millis(CAST({} AS bigint))"
        )
        return f"CASE WHEN payload.{side} IS NULL THEN NULL ELSE {row} END"

    return j.selectExpr(
        """CASE payload.op WHEN 'INSERT' THEN 'insert' WHEN 'DELETE' THEN 'delete'
             WHEN 'UPDATE_BEFOR' THEN 'update_before' WHEN 'UPDATE_BEFORE' THEN 'update_before'
             WHEN 'UPDATE_AFTER' THEN IF(payload.before IS NULL, 'update_after', 'update')
             ELSE lower(payload.op) END AS op""",
        "schema.source.dbName AS source_db",
        "schema.source.tableName AS source_table",
        """IF(payload.timestamp.eventTime = -1, NULL,
              timestamp_millis(payload.timestamp.eventTime)) AS event_time""",
        "CAST(payload.sequenceId AS bigint) AS sequence",
        f"{image_sql('before')} AS before",
        f"{image_sql('after')} AS after",
    )


def _row(value: Callable[[int, str], str | None], timestamp: str | None = None) -> str:
    """The typed columns as a SQL ``named_struct``: ``value(i, name)`` is the i-th column's
    text (``None``: null), cast to the column's type, except ``returned_at`` where the
    format sends time its own way and ``timestamp`` (with ``{}`` for the value) reads it."""
    parts = []
    for i, (name, kind) in enumerate(_fields()):
        text = value(i, name)
        if text is None:
            expr = "NULL"
        elif name == "returned_at" and timestamp is not None:
            expr = timestamp.format(text)
        else:
            expr = f"CAST({text} AS {kind})"
        parts.append(f"'{name}', {expr}")
    return f"named_struct({', '.join(parts)})"


def _fields() -> list[tuple[str, str]]:
    from pyspark.sql.types import _parse_datatype_string

    return [(f.name, f.dataType.simpleString()) for f in _parse_datatype_string(COLUMNS).fields]


def spark_debezium_json(df, _source):
    """Debezium JSON, with or without the Connect ``schema``/``payload`` wrapper:
    from_json over both shapes, casts of each image."""
    from pyspark.sql import functions as F

    image = _string_struct()
    envelope = (
        f"before: {image}, after: {image}, op: string, ts_ms: bigint, "
        "source: struct<db: string, table: string, ts_ms: bigint, file: string, pos: bigint, "
        "row: int>"
    )
    schema = f"struct<{envelope}, payload: struct<{envelope}>>"
    j = df.select(F.from_json(F.col("value").cast("string"), schema).alias("j"))
    names = ["before", "after", "op", "ts_ms", "source"]
    j = j.select(*[F.coalesce(F.col(f"j.payload.{n}"), F.col(f"j.{n}")).alias(n) for n in names])

    def image_sql(side: str) -> str:
        row = _row(lambda _, n: f"{side}.{n}", "to_timestamp({})")
        return f"CASE WHEN {side} IS NULL THEN NULL ELSE {row} END"

    return j.selectExpr(
        """CASE op WHEN 'c' THEN 'insert' WHEN 'u' THEN 'update' WHEN 'd' THEN 'delete'
             WHEN 'r' THEN 'read' WHEN 't' THEN 'truncate' WHEN 'm' THEN 'other'
             ELSE IF(op IS NULL, 'tombstone', 'other') END AS op""",
        "source.db AS source_db",
        "source.table AS source_table",
        "timestamp_millis(source.ts_ms) AS event_time",
        "struct(source.file, source.pos, source.row) AS sequence",
        f"{image_sql('before')} AS before",
        f"{image_sql('after')} AS after",
    )


DATASTREAM_JSON_FIELDS = (
    "read_method string, uuid string, source_timestamp bigint, "
    "source_metadata struct<table: string, database: string, log_file: string, "
    "log_position: bigint, change_type: string>"
)
"""The Datastream JSON fields the plain-Spark contenders read, before ``payload``."""


def spark_datastream_json(df, _source):
    """Datastream JSON lines: from_json, casts of the payload by change type."""
    from pyspark.sql import functions as F

    schema = f"struct<{DATASTREAM_JSON_FIELDS}, payload: {_string_struct()}>"
    j = df.select(F.from_json(F.col("value").cast("string"), schema).alias("j")).select("j.*")
    return datastream_json_events(j)


def datastream_json_events(j):
    """Parsed Datastream JSON records (``DATASTREAM_JSON_FIELDS`` and ``payload``) as
    change events: the op by change type, the payload cast by column."""
    row = _row(lambda _, n: f"payload.{n}", "to_timestamp({}, 'yyyy-MM-dd HH:mm:ss[.SSSSSS] XXX')")
    deleted = "source_metadata.change_type IN ('DELETE', 'UPDATE-DELETE')"
    return j.selectExpr(
        """CASE WHEN source_metadata IS NULL THEN 'tombstone'
             WHEN read_method LIKE '%backfill%' THEN 'read'
             ELSE CASE source_metadata.change_type WHEN 'INSERT' THEN 'insert'
               WHEN 'UPDATE-INSERT' THEN 'update_after' WHEN 'UPDATE-DELETE' THEN 'update_before'
               WHEN 'DELETE' THEN 'delete' WHEN 'UPDATE' THEN 'update' ELSE 'other' END
           END AS op""",
        "source_metadata.database AS source_db",
        "source_metadata.table AS source_table",
        "timestamp_millis(source_timestamp) AS event_time",
        "struct(source_metadata.log_file, source_metadata.log_position) AS sequence",
        f"IF({deleted}, {row}, NULL) AS before",
        f"IF({deleted} OR source_metadata IS NULL, NULL, {row}) AS after",
    )


def spark_tdsql_json(df, _source):
    """TDSQL subscription JSON: positional arrays of SQL literals; quotes stripped,
    '##isnull##' nulls, the unsigned '(…)' suffix dropped, then casts."""
    from pyspark.sql import functions as F

    schema = (
        "struct<eventtypestr: string, db: string, table: string, begintime: bigint, "
        "gtid: string, event_index: string, where: array<string>, field: array<string>>"
    )
    j = df.select(F.from_json(F.col("value").cast("string"), schema).alias("j")).select("j.*")

    def literal(side: str, i: int) -> str:
        v = f"get({side}, {i})"
        text = (
            f"CASE WHEN {v} = '''##isnull##''' THEN NULL "
            f"WHEN {v} LIKE '''%''' THEN replace(substr({v}, 2, length({v}) - 2), '\\\\''', '''') "
            f"ELSE regexp_replace({v}, ' \\\\(.*\\\\)$', '') END"
        )
        return text

    def image_sql(side: str) -> str:
        row = _row(lambda i, _: literal(side, i))
        return f"IF({side} IS NULL OR size({side}) = 0, NULL, {row})"

    return j.selectExpr(
        """CASE eventtypestr WHEN 'insert' THEN 'insert' WHEN 'update' THEN 'update'
             WHEN 'delete' THEN 'delete' WHEN 'gtid' THEN 'begin' WHEN 'xid' THEN 'commit'
             WHEN 'query' THEN 'ddl' ELSE 'other' END AS op""",
        "db AS source_db",
        "`table` AS source_table",
        "timestamp_seconds(begintime) AS event_time",
        "struct(gtid, CAST(event_index AS int)) AS sequence",
        """CASE eventtypestr WHEN 'insert' THEN NULL
             ELSE """
        + image_sql("`where`")
        + " END AS before",
        """CASE eventtypestr WHEN 'delete' THEN NULL
             ELSE """
        + image_sql("field")
        + " END AS after",
    )


def spark_datahub_tuple(df, _source):
    """TUPLE records are already columns: the op from the meta columns, casts."""
    names = set(df.columns)
    seq = "_sequence_id_" if "_sequence_id_" in names else "_log_file_name_offset_"
    time_col = "_execute_time_" if "_execute_time_" in names else "_excute_time_"
    row = _row(lambda _, n: f"`{n}`" if n in names else None)
    return df.selectExpr(
        """CASE _operation_type_ WHEN 'I' THEN 'insert' WHEN 'D' THEN 'delete'
             WHEN 'U' THEN IF(CAST(_before_image_ AS string) IN ('Y', 'true'), 'update_before',
               'update_after') ELSE 'other' END AS op""",
        "'shop' AS source_db",
        "'order_items' AS source_table",
        f"timestamp_millis(CAST(`{time_col}` AS bigint)) AS event_time",
        f"CAST(`{seq}` AS bigint) AS sequence",
        f"IF(_operation_type_ = 'D' OR CAST(_before_image_ AS string) IN ('Y', 'true'), "
        f"{row}, NULL) AS before",
        f"IF(_operation_type_ = 'D' OR CAST(_before_image_ AS string) IN ('Y', 'true'), "
        f"NULL, {row}) AS after",
    )


def spark_datastream_avro(_df, source):
    """Datastream Avro files through the spark-avro reader, casts of the payload."""
    from pyspark.sql import SparkSession

    return read_datastream_avro(SparkSession.getActiveSession(), source)


def read_datastream_avro(spark, source: str):
    """What a Spark user writes for a Datastream Avro tree: spark-avro over the files,
    then the format's op, time and image logic (the tree race uses it too)."""
    j = spark.read.format("avro").option("recursiveFileLookup", "true").load(source)
    row = _row(lambda _, n: f"payload.{n}")
    deleted = "source_metadata.change_type IN ('DELETE', 'UPDATE-DELETE')"
    return j.selectExpr(
        """CASE WHEN read_method LIKE '%backfill%' THEN 'read'
             ELSE CASE source_metadata.change_type WHEN 'INSERT' THEN 'insert'
               WHEN 'UPDATE-INSERT' THEN 'update_after' WHEN 'UPDATE-DELETE' THEN 'update_before'
               WHEN 'DELETE' THEN 'delete' ELSE 'other' END
           END AS op""",
        "source_metadata.database AS source_db",
        "source_metadata.table AS source_table",
        "source_timestamp AS event_time",
        "struct(source_metadata.log_file, source_metadata.log_position) AS sequence",
        f"IF({deleted}, {row}, NULL) AS before",
        f"IF({deleted}, NULL, {row}) AS after",
    )


def spark_tencent_dts(df, _source):
    """Tencent DTS without spark-protobuf (not in the Maven repository this project's
    machines reach): what a Spark user writes instead, a ``mapInArrow`` over Google's
    ``protobuf`` classes (upb) that flattens ``Entries`` to one row per ``RowChange`` and
    converts each value by the target column's type. Multi-part envelopes are joined in
    partition order (no checks of their headers: it favours the baseline)."""
    import datetime as dt
    from decimal import Decimal

    from pyspark.sql.types import _parse_datatype_string

    out_schema = (
        "op string, source_db string, source_table string, event_time timestamp, "
        f"sequence bigint, before struct<{COLUMNS}>, after struct<{COLUMNS}>"
    )
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(_parse_datatype_string(out_schema), timezone="UTC")
    fields = _fields()

    def convert(kind: str):
        if kind in ("bigint", "int"):
            return int
        if kind.startswith("decimal"):
            return Decimal
        if kind == "boolean":
            return lambda s: s in ("1", "true")
        if kind == "timestamp":
            return lambda s: dt.datetime.fromisoformat(s).replace(tzinfo=dt.timezone.utc)
        return lambda s: s

    converters = [(name, convert(kind)) for name, kind in fields]

    def run(batches):
        import pyarrow as pa

        from cdc_decode._proto import DataType, Entries, Envelope, MessageType

        nil, na, string = (
            DataType.values_by_name["NIL"].number,
            DataType.values_by_name["NA"].number,
            DataType.values_by_name["STRING"].number,
        )
        dml = MessageType.values_by_name["DML"].number
        ops = {0: "insert", 1: "update", 2: "delete"}
        names = {v.number: v.name.lower() for v in MessageType.values}

        def image(datas, columns):
            if not datas:
                return None
            row = {}
            for (name, conv), data in zip(columns, datas, strict=False):
                if data.dataType == nil or data.dataType == na:
                    row[name] = None
                elif data.dataType == string:
                    row[name] = conv(data.bv.decode(data.charset or "utf-8"))
                else:
                    row[name] = conv(data.sv)
            return row

        parts: list[bytes] = []
        for batch in batches:
            rows = []
            for value in batch.column(0).to_pylist():
                envelope = Envelope.FromString(value)
                if envelope.total > 1:
                    parts.append(envelope.data)
                    if envelope.index + 1 < envelope.total:
                        continue
                    data, parts = b"".join(parts), []
                else:
                    data = envelope.data
                for entry in Entries.FromString(data).items:
                    h = entry.header
                    base = (
                        h.schemaName,
                        h.tableName,
                        dt.datetime.fromtimestamp(h.timestamp, dt.timezone.utc),
                        h.seqId,
                    )
                    if h.messageType != dml:
                        rows.append((names[h.messageType], *base, None, None))
                        continue
                    event = entry.event.dmlEvent
                    by_name = dict(converters)
                    columns = [(c.name, by_name.get(c.name, str)) for c in event.columns]
                    for change in event.rows:
                        rows.append(
                            (
                                ops[event.dmlEventType],
                                *base,
                                image(change.oldColumns, columns),
                                image(change.newColumns, columns),
                            )
                        )
            cols = list(zip(*rows, strict=True)) if rows else [[] for _ in arrow_schema]
            yield pa.RecordBatch.from_arrays(
                [pa.array(list(c), type=f.type) for c, f in zip(cols, arrow_schema, strict=True)],
                schema=arrow_schema,
            )

    return df.mapInArrow(run, out_schema)


BASELINES = {
    "datahub-blob": spark_datahub_blob,
    "debezium-json": spark_debezium_json,
    "datastream-json": spark_datastream_json,
    "tdsql-json": spark_tdsql_json,
    "datahub-tuple": spark_datahub_tuple,
    "datastream-avro": spark_datastream_avro,
    "tencent-dts": spark_tencent_dts,
}


# --- the run ------------------------------------------------------------------------------


class RoundTimedOut(RuntimeError):
    pass


def _save(frame, timeout: float) -> float:
    """One write of ``frame`` to the ``noop`` sink, in seconds. Its Spark jobs are cancelled
    after ``timeout`` seconds (a stuck round then raises RoundTimedOut, not hang the race)."""
    context = frame.sparkSession.sparkContext
    group = f"race-{time.monotonic_ns()}"
    context.setJobGroup(group, "a round of the Spark race", interruptOnCancel=True)
    timer = threading.Timer(timeout, context.cancelJobGroup, [group])
    timer.start()
    start = time.perf_counter()
    try:
        frame.write.format("noop").mode("overwrite").save()
    except Exception as error:
        if not timer.is_alive():  # fired: the cancel is what failed the write
            raise RoundTimedOut(f"a round took over {timeout:.0f} s and was cancelled") from error
        raise
    finally:
        timer.cancel()
        context.setLocalProperty("spark.jobGroup.id", None)
    return time.perf_counter() - start


def _time(frame, rounds: int, timeout: float) -> float:
    """The best of ``rounds`` writes after a warm-up. A round over ``timeout`` seconds is
    cancelled and run once more (Spark once hung in a round, in the JVM-Python socket)."""
    retries = 1

    def one_round() -> float:
        nonlocal retries
        while True:
            try:
                return _save(frame, timeout)
            except RoundTimedOut as error:
                if not retries:
                    raise
                retries -= 1
                print(f"  {error}; running it again", flush=True)

    one_round()  # warm-up
    return min(one_round() for _ in range(rounds))


def check(spark, fmt: str, seed: int, tmp: Path) -> str:
    """Native typed output against the plain-Spark baseline on one stream: the same
    images for every row they both call a change (a harness check, not a speed run)."""
    df, source, _ = _input(spark, fmt, 4_000, seed, 1, tmp)
    ours = decoded(fmt, "native")(df, source).collect()
    theirs = BASELINES[fmt](df, source).collect()
    changes = ("insert", "update", "update_before", "update_after", "delete", "read")

    def images(rows):
        return sorted((repr(r.before), repr(r.after)) for r in rows if r.op in changes)

    a, b = images(ours), images(theirs)
    same = sum(1 for x, y in zip(a, b, strict=False) if x == y)
    return f"{fmt}: {len(a)} change rows native, {len(b)} spark, {same} images equal"


def session(batch: int):
    from cdc_decode.spark import local_session

    jars = sorted(glob.glob(str(ROOT / ".jars" / "*.jar")))
    if not jars:
        sys.exit("no jars in .jars/: run `make jars` (spark-avro for the Avro baseline)")
    return local_session(
        "cdc-decode-race",
        master="local[1]",
        spark__jars=",".join(jars),
        spark__driver__memory="4g",
        spark__sql__shuffle__partitions="1",
        # One task per input file: the slices stay whole and in order.
        spark__sql__files__maxPartitionBytes=str(1 << 30),
        spark__sql__files__openCostInBytes=str(1 << 30),
        spark__sql__execution__arrow__maxRecordsPerBatch=str(batch),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", nargs="*", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument(
        "--python-messages",
        type=int,
        default=20_000,
        help="the Python engine's input (it is slow): this many messages",
    )
    parser.add_argument("--contenders", nargs="*", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="input partitions (contiguous slices: more than one may cut a "
        "DTS multi-part set in two)",
    )
    parser.add_argument(
        "--batch", type=int, default=10_000, help="spark.sql.execution.arrow.maxRecordsPerBatch"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--round-timeout",
        type=float,
        default=300.0,
        help="seconds after which a round's Spark jobs are cancelled and the round re-run once",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare native typed images with the plain-Spark baseline's, then stop",
    )
    parser.add_argument(
        "--generic",
        action="store_true",
        help="our contenders output generic map images, not typed structs",
    )
    parser.add_argument(
        "--tuple-plan",
        choices=("auto", "sql", "arrow"),
        default="auto",
        help="datahub-tuple's plan= for the native contender (arrow: the decoder in mapInArrow)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write <out>.md and <out>.png (docs/spark-race by make bench-spark)",
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = session(args.batch)
    if args.check:
        with tempfile.TemporaryDirectory(dir=str(ROOT / "target")) as tmp:
            for fmt in args.formats:
                print(check(spark, fmt, args.seed, Path(tmp) / fmt), flush=True)
        spark.stop()
        return 0
    results: list[Result] = []
    with tempfile.TemporaryDirectory(dir=str(ROOT / "target")) as tmp:
        for fmt in args.formats:
            inputs = {}
            for contender in args.contenders:
                n = args.python_messages if contender == "python" else args.messages
                if n not in inputs:
                    d = Path(tmp) / f"{fmt}-{n}"
                    df, source, events = _input(spark, fmt, n, args.seed, args.partitions, d)
                    df.count()  # materialise the cache
                    inputs[n] = (df, source, events)
                df, source, events = inputs[n]
                if contender == "native":
                    frame = decoded(fmt, "native", not args.generic, args.tuple_plan)(df, source)
                elif contender == "python":
                    frame = decoded(fmt, "python", not args.generic)(df, source)
                elif contender == "spark":
                    frame = BASELINES[fmt](df, source)
                else:
                    frame = passthrough(df, source)
                seconds = _time(frame, args.rounds, args.round_timeout)
                r = Result(fmt, contender, n, events, seconds)
                results.append(r)
                print(
                    f"{fmt:16} {contender:12} {n:>9,} msgs {events:>9,} rows {seconds:8.2f} s "
                    f"{n / seconds:>10,.0f} msg/s {r.rate:>10,.0f} rows/s",
                    flush=True,
                )
            for df, _, _ in inputs.values():
                df.unpersist()
    spark.stop()
    print()
    print(table(results, args))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(table(results, args) + "\n")
        chart(results, args.out.with_suffix(".png"))
    return 0


def _rates(results: list[Result]) -> dict[str, dict[str, float]]:
    rates: dict[str, dict[str, float]] = {}
    for r in results:
        rates.setdefault(r.format, {})[r.contender] = r.rate
    return rates


def table(results: list[Result], args) -> str:
    import pyspark

    lines = [
        f"Spark {pyspark.__version__}, local[1], {platform.machine()} "
        f"({_cpu()}), Python {platform.python_version()}, "
        f"maxRecordsPerBatch {args.batch:,}; rows (events) per second, best of "
        f"{args.rounds} rounds after a warm-up.",
        "",
        "| format | native | python | spark | passthrough | native/python | native/spark "
        "| native/passthrough |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for fmt, r in _rates(results).items():
        cells = [f"{r[k]:,.0f}" if k in r else "–" for k in CONTENDERS]
        ratios = [
            f"{r['native'] / r[k]:.2f}x" if "native" in r and k in r else "–"
            for k in CONTENDERS[1:]
        ]
        lines.append(f"| `{fmt}` | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def chart(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = _rates(results)
    contenders = CONTENDERS
    colors = {
        "native": "#d9534f",
        "python": "#999999",
        "spark": "#428bca",
        "passthrough": "#5cb85c",
    }
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.2
    formats = list(rates)
    for i, c in enumerate(contenders):
        xs = [j + (i - 1.5) * width for j in range(len(formats))]
        ys = [rates[f].get(c, 0) / 1000 for f in formats]
        ax.bar(xs, ys, width, label=c, color=colors[c])
    ax.set_xticks(range(len(formats)))
    ax.set_xticklabels(formats, rotation=15)
    ax.set_ylabel("thousand rows/s (local[1])")
    ax.set_title("Decoding to typed rows on Spark, noop sink")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
