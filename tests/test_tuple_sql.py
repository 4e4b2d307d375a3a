"""``datahub-tuple`` decoded as Spark expressions (``plan="sql"``) gives the rows the decoder
gives in ``mapInArrow`` (``plan="arrow"``), every event column and the schema, on generated
topics and on records built to fail each check; and the plan says why when it cannot be
exact."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc_decode import spark as cdc_spark


def both(df, **options) -> tuple[pa.Table, pa.Table]:
    """The decoded rows of both plans (Rust decoder for ``arrow``), schema checked."""
    sql = cdc_spark.decode(df, "datahub-tuple", plan="sql", **options)
    arrow = cdc_spark.decode(df, "datahub-tuple", plan="arrow", **options)
    assert sql.schema == arrow.schema
    return sql.toArrow(), arrow.toArrow()


def assert_same(sql: pa.Table, arrow: pa.Table) -> None:
    assert sql.schema == arrow.schema
    assert sql.num_rows == arrow.num_rows
    for name in arrow.schema.names:
        got, want = sql.column(name).combine_chunks(), arrow.column(name).combine_chunks()
        if got.equals(want):
            continue
        # Arrow's own text: instants past year 9999 have no Python datetime
        i = next(i for i in range(len(got)) if not got.slice(i, 1).equals(want.slice(i, 1)))
        sql_text, arrow_text = got.slice(i, 1).to_string(), want.slice(i, 1).to_string()
        raise AssertionError(f"row {i}, {name}: sql {sql_text}, decoder {arrow_text}")


def _exact_columns(table: pa.Table) -> pa.Table:
    """The generated records without float columns (which keep the decoder)."""
    return table.select([f.name for f in table.schema if not pa.types.is_floating(f.type)])


def uses_python(df) -> bool:
    return "MapInArrow" in df._jdf.queryExecution().executedPlan().toString()


@pytest.mark.parametrize("seed", [5, 11])
@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_generated_topics_decode_alike_in_both_plans(spark, seed, mode):
    """Every DataHub type but floats (tinyint … decimal(20,0), timestamp, binary, JSON
    text), inserts, both halves of updates, deletes, full-sync rows; generic images."""
    from cdc_decode.generate import generate

    records = _exact_columns(generate("datahub-tuple", messages=600, seed=seed).values)
    df = spark.createDataFrame(records).coalesce(1)
    sql, arrow = both(df, mode=mode)
    assert arrow.num_rows == 600
    assert_same(sql, arrow)


def test_typed_images_alike_in_both_plans(spark):
    """Typed mode where every conversion is exact: the same type, wider integers, a wider
    decimal of the same scale, text of integers, decimals, binary and timestamps into
    string fields, a field no record has."""
    from cdc_decode.generate import generate

    records = _exact_columns(generate("datahub-tuple", messages=400, seed=7).values)
    df = spark.createDataFrame(records).coalesce(1)
    schema = (
        "id decimal(24,0), account_no string, name string, age bigint, balance decimal(14,2), "
        "created_at timestamp, updated_at string, avatar string, flags bigint, nope date"
    )
    sql, arrow = both(df, schema=schema)
    assert_same(sql, arrow)
    after = [a for a in arrow.column("after").to_pylist() if a is not None]
    assert after and all(a["nope"] is None for a in after)
    assert any(a["avatar"] for a in after)  # base64 text
    # after_absent: the field no record has, on every row with an after image.
    absent = arrow.column("after_absent").to_pylist()
    has_after = [a is not None for a in arrow.column("after").to_pylist()]
    assert absent == [["nope"] if h else None for h in has_after]


def _hostile(spark):
    """Records that fail every check of the format in turn, and values whose text is hard
    to render: control characters, quotes, backslashes, far-off dates and instants."""
    from pyspark.sql import functions as F

    rows = [
        # op, before, after, sequence, time, source table, text, offset (metadata)
        ("I", "N", "Y", "17", 1714550400000, "shop.orders", "plain", "f.000001:4"),
        ("U", "Y", "N", "18", 1714550400001, "shop.orders", 'quote " and \\ back', None),
        ("U", "N", "Y", "18", 1714550400001, "shop.orders", "ctl \x00\x0b\x1f\x7f", "x"),
        ("D", "Y", "N", "19", None, "orders", "\\u001F literal", None),
        ("I", "N", "Y", "-1", -1, "db.", "full sync", None),
        ("I", "N", "Y", "0000000000000000000000042", 5, ".t", "leading zeros", None),
        ("I", "N", "Y", "-0", 5, "a.b.c", "minus zero", None),
        ("X", "N", "Y", "1", 5, "shop.orders", "bad op", None),
        (None, "N", "Y", "1", 5, "shop.orders", "null op", None),
        ("I", "y", "Y", "1", 5, "shop.orders", "bad flag", None),
        ("I", "N", None, "1", 5, "shop.orders", "null flag", None),
        ("I", "Y", "N", "1", 5, "shop.orders", "insert as before", None),
        ("D", "N", "Y", "1", 5, "shop.orders", "delete as after", None),
        ("U", "Y", "Y", "1", 5, "shop.orders", "both", None),
        ("I", "N", "Y", "12a", 5, "shop.orders", "bad sequence", None),
        ("I", "N", "Y", " 12", 5, "shop.orders", "spaced", None),
        ("I", "N", "Y", "12\n", 5, "shop.orders", "newline", None),
        ("I", "N", "Y", "٣", 5, "shop.orders", "arabic digit", None),
        ("I", "N", "Y", "9223372036854775808", 5, "shop.orders", "overflow", None),
        ("I", "N", "Y", "-9223372036854775808", 5, "shop.orders", "the least", None),
        ("I", "N", "Y", None, 5, "shop.orders", "null sequence", None),
        ("I", "N", "Y", "x" * 60 + "\x01é", 5, "shop.orders", "long", None),
        ("I", "N", "Y", "3", 9223372036854775, "shop.orders", "latest time", None),
        ("I", "N", "Y", "3", 9223372036854776, "shop.orders", "time too late", None),
        ("I", "N", "Y", "3", -9223372036854776, "shop.orders", "time too early", None),
        ("I", "N", "Y", "3", 5, None, "no table", None),
        ("I", "N", "Y", "3", 5, "", "empty table", None),
    ]
    schema = (
        "_operation_type_ string, _before_image_ string, _after_image_ string, "
        "_sequence_id_ string, _excute_time_ bigint, _source_table_ string, note string, "
        "_log_file_name_offset_ string"
    )
    df = spark.createDataFrame(rows, schema)
    days = F.monotonically_increasing_id().cast("int") * 150_000 - 2_000_000
    return (
        df.coalesce(1)
        .withColumn("n", F.monotonically_increasing_id())
        .withColumn("small", (F.col("n") - 3).cast("tinyint"))
        .withColumn("flag", F.col("n") % 2 == 0)
        .withColumn("price", (F.col("n") * F.lit(-1.05)).cast("decimal(20,10)"))
        .withColumn(
            "blob", F.when(F.col("n") > 0, F.repeat(F.lit("ab\x00"), F.col("n") * 9)).cast("binary")
        )  # fmt: skip
        .withColumn("day", F.date_from_unix_date(days))
        .withColumn("at", F.timestamp_micros(days.cast("long") * 86_400_000_000 + F.col("n")))
        .withColumn("nothing", F.lit(None))
        .withColumn("_execute_time_", F.col("_excute_time_") + 1)
    )


@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_records_failing_each_check_alike_in_both_plans(spark, mode):
    """Each error row's text and raw record, the full-sync, metadata and source-name rules,
    and far-off dates and instants rendered, as the Rust decoder gives them; the Python
    engine agrees too."""
    df = _hostile(spark)
    sql, arrow = both(df, mode=mode)
    assert_same(sql, arrow)
    python = cdc_spark.decode(df, "datahub-tuple", mode=mode, engine="python").toArrow()
    assert_same(sql, python)
    if mode == "permissive":
        errors = [e for e in arrow.column("error").to_pylist() if e is not None]
        assert len(errors) == 16
        assert '_operation_type_: expected I, U or D, got "X"' in errors
        assert "_execute_time_: 9223372036854777 milliseconds is out of range" in errors


def test_typed_records_failing_checks_alike(spark):
    df = _hostile(spark)
    schema = "n bigint, small int, price decimal(22,10), blob string, day string, at timestamp"
    sql, arrow = both(df, schema=schema)
    assert_same(sql, arrow)


# Instants at the ends of the years 0000-9999 and beyond, in microseconds.
_US_DAY = 86_400_000_000
_EDGES = [
    -719_528 * _US_DAY - 1,  # -0001-12-31T23:59:59.999999Z
    -719_528 * _US_DAY,  # 0000-01-01T00:00:00.000000Z
    -719_528 * _US_DAY + 1,
    -1,
    0,
    1_714_550_400_123_456,
    2_932_897 * _US_DAY - 1,  # 9999-12-31T23:59:59.999999Z
    2_932_897 * _US_DAY,  # +10000-01-01T00:00:00.000000Z
    2_932_897 * _US_DAY + 86_399_999_999,
    -4_000_000 * _US_DAY,  # far before 0000
    4_000_000 * _US_DAY,  # far after 9999
    None,
]


@pytest.mark.parametrize("typed", [False, True])
def test_dates_and_instants_at_the_ends_of_four_digit_years(spark, typed):
    """Spark's own date text serves the years 0000-9999 and format_string the rest: both
    give the decoder's text at each end (generic images), and a typed timestamp or date
    outside those years is the decoder's error row."""
    from pyspark.sql import functions as F

    rows = [(i, "I", "N", "Y", str(i + 1), at) for i, at in enumerate(_EDGES)]
    schema = "n bigint, _operation_type_ string, _before_image_ string, "
    schema += "_after_image_ string, _sequence_id_ string, us bigint"
    df = spark.createDataFrame(rows, schema).coalesce(1)
    df = df.withColumn("at", F.timestamp_micros("us"))
    # The dates of those instants' days.
    days = F.expr(f"CAST((us - pmod(us, {_US_DAY})) div {_US_DAY} AS int)")
    df = df.withColumn("day", F.date_from_unix_date(days))
    df = df.drop("us")
    options = {"schema": "n bigint, at timestamp, day date"} if typed else {}
    sql, arrow = both(df, **options)
    assert_same(sql, arrow)
    errors = [e for e in arrow.column("error").to_pylist() if e is not None]
    if typed:  # each instant before 0000 or from 10000 on: its first field that fails
        assert len(errors) == 5
        assert errors[0].startswith('after.at: cannot convert "-0001-12-31T23:59:59.999999Z"')
    else:
        after = arrow.column("after").to_pylist()
        assert dict(after[0])["at"] == "-0001-12-31T23:59:59.999999Z"
        assert dict(after[0])["day"] == "-0001-12-31"
        assert dict(after[1])["at"] == "0000-01-01T00:00:00.000000Z"
        assert dict(after[6])["at"] == "9999-12-31T23:59:59.999999Z"
        assert dict(after[7])["at"] == "+10000-01-01T00:00:00.000000Z"
        assert dict(after[7])["day"] == "+10000-01-01"
        assert errors == []


@pytest.mark.parametrize(
    "meta",
    [
        "_sequence_id_ bigint, _operation_type_ string, _execute_time_ string, "
        "_before_image_ string, _after_image_ string",
        "_log_file_name_offset_ int, _operation_type_ string, _execute_time_ timestamp, "
        "_before_image_ string, _after_image_ string",
        "_sequence_id_ bigint, _operation_type_ string, _execute_time_ bigint, "
        "_before_image_ string, _after_image_ string",
    ],
)
def test_meta_columns_of_other_types(spark, meta):
    """Integer sequence ids, time as text, as a timestamp or as an integer column (out of
    range at both ends, -1, null), no source table."""
    from pyspark.sql import functions as F

    df = spark.range(12).select(
        F.col("id"),
        F.col("id").alias("_sequence_id_").cast("bigint"),
        F.col("id").alias("_log_file_name_offset_").cast("int"),
        F.when(F.col("id") % 3 == 0, "I").when(F.col("id") % 3 == 1, "U").otherwise("D")
        .alias("_operation_type_"),
        F.when(F.col("id") % 4 == 0, None).when(F.col("id") == 5, "1x")
        .when(F.col("id") == 7, "-1").otherwise((F.col("id") * 1000).cast("string"))
        .alias("_execute_time_s"),
        F.timestamp_micros(F.col("id") * 1_000_003).alias("_execute_time_t"),
        F.when(F.col("id") % 4 == 0, None).when(F.col("id") == 5, 9_223_372_036_854_776)
        .when(F.col("id") == 6, -9_223_372_036_854_776).when(F.col("id") == 7, -1)
        .otherwise(F.col("id") * 1000).alias("_execute_time_i"),
        F.when(F.col("id") % 3 == 2, "Y").otherwise("N").alias("_before_image_"),
        F.when(F.col("id") % 3 == 2, "N").otherwise("Y").alias("_after_image_"),
    )  # fmt: skip
    wanted = [part.split()[0] for part in meta.split(", ")]
    time = {"timestamp": "_execute_time_t", "bigint": "_execute_time_i"}.get(
        meta.split("_execute_time_ ")[1].split(",")[0], "_execute_time_s"
    )
    df = df.withColumnRenamed(time, "_execute_time_").select("id", *wanted).coalesce(1)
    sql, arrow = both(df)
    assert_same(sql, arrow)
    assert sql.num_rows == 12
    if time == "_execute_time_i":  # 5 and 6 out of range
        errors = [e for e in sql.column("error").to_pylist() if e is not None]
        assert errors == [
            "_execute_time_: 9223372036854776 milliseconds is out of range",
            "_execute_time_: -9223372036854776 milliseconds is out of range",
        ]


def test_auto_plans_sql_where_exact_and_the_decoder_otherwise(spark):
    from cdc_decode.generate import generate

    records = generate("datahub-tuple", messages=50, seed=3).values
    exact = spark.createDataFrame(_exact_columns(records))
    assert not uses_python(cdc_spark.decode(exact, "datahub-tuple"))
    assert not uses_python(cdc_spark.decode(exact, "datahub-tuple", schema="id decimal(20,0)"))
    floats = spark.createDataFrame(records)  # a float column: its text is the decoder's
    assert uses_python(cdc_spark.decode(floats, "datahub-tuple"))
    assert uses_python(cdc_spark.decode(exact, "datahub-tuple", engine="python"))
    assert uses_python(cdc_spark.decode(exact, "datahub-tuple", mode="failfast"))
    assert uses_python(cdc_spark.decode(exact, "datahub-tuple", plan="arrow"))
    narrowing = cdc_spark.decode(exact, "datahub-tuple", schema="age tinyint")
    assert uses_python(narrowing)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"engine": "python"}, "engine='python' asks for the decoder"),
        ({"mode": "failfast"}, "mode 'failfast' raises the decoder's DecodeError"),
        ({"schema": "age tinyint"}, "column 'age': smallint to tinyint converts in the decoder"),
        ({"schema": "name bigint"}, "column 'name': string to bigint"),
        ({"tables": {"shop.users": "id bigint"}}, "tables= splits the decoder's output"),
        ({"plan": "fast"}, "unknown plan 'fast'"),
    ],
)
def test_sql_plan_refusals_say_why(spark, kwargs, message):
    from cdc_decode.generate import generate

    records = _exact_columns(generate("datahub-tuple", messages=5, seed=3).values)
    df = spark.createDataFrame(records)
    kwargs = {"plan": "sql", **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cdc_spark.decode(df, "datahub-tuple", **kwargs)


def test_sql_plan_refuses_float_columns_and_other_formats(spark):
    from cdc_decode.generate import generate

    df = spark.createDataFrame(generate("datahub-tuple", messages=5, seed=3).values)
    with pytest.raises(ValueError, match="column 'score' is float"):
        cdc_spark.decode(df, "datahub-tuple", plan="sql")
    accounting = cdc_spark.DecodeAccounting(spark)
    with pytest.raises(ValueError, match="accounting= counts the decoder's work"):
        cdc_spark.decode(df, "datahub-tuple", plan="sql", accounting=accounting)
    blob = spark.createDataFrame([(b"{}",)], "value binary")
    with pytest.raises(ValueError, match="is for datahub-tuple"):
        cdc_spark.decode(blob, "datahub-blob", plan="sql")
