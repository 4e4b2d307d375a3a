"""Accounting (docs/events.md, "Accounting"): every message seen has one outcome, so
``messages == decoded + errors + pending``, per call, per Decoder and for a whole Spark job,
on mixed good and bad input in every mode and on both engines."""

from __future__ import annotations

import pyarrow as pa
import pytest
from test_datastream_avro import _valid as avro_file
from test_tencent_dts_rules import (
    BEGIN,
    COMMIT,
    INSERT,
    dml,
    entries_bytes,
    entry,
    envelope,
    split,
    text,
)

import cdc_decode
from cdc_decode import Limits

MODES = ["permissive", "dropmalformed", "failfast"]


def dts_stream() -> list[bytes | None]:
    """Good envelopes, malformed bytes, tombstones, an empty Entries, a complete and an
    incomplete multi-part set, a duplicate and an out-of-order part, an oversized message."""
    whole = split(entries_bytes(*[entry(BEGIN, seq=i) for i in range(4)]), 3)
    cut = split(entries_bytes(*[entry(COMMIT, seq=i) for i in range(4)]), 3)
    return [
        envelope(dml(INSERT, ["a"], [([], [text("1")]), ([], [text("2")])])),
        b"\xff not an envelope",
        None,
        envelope(),  # no entries: decoded, no rows
        whole[0],
        whole[0],  # a duplicate of part 0: a new set supersedes the first (2 errors)
        whole[1],
        whole[1],  # a duplicate part: an error, the set stays open
        whole[2],  # completes: 4 events for 3 parts
        cut[1],  # a part without its part 0
        cut[0],
        cut[2],  # out of order: the open set and this part are errors
        envelope(entry(COMMIT), properties=[("pad", "x" * 300)]),  # over max_message_bytes
        cut[0],
        cut[1],  # left open: pending until the end
    ]


def json_stream() -> list[bytes | None]:
    return [
        b'{"op":"c","after":{"id":1}}',
        b"{",
        None,
        b'{"schema":null,"payload":null}',  # a Debezium tombstone
        b'{"op":"u","before":{"id":1},"after":{"id":2}}',
        b'{"op":5}',
        b'{"op":"c","after":{"x":' + b"[" * 200 + b"]" * 200 + b"}}",
    ]


def avro_stream() -> list[bytes | None]:
    good = avro_file()
    return [good, good[:-3], None, b"Obj\x01", good]


STREAMS = {
    "tencent-dts": dts_stream,
    "debezium-json": json_stream,
    "datastream-avro": avro_stream,
}
LIMITS = Limits(max_message_bytes=200)
# The Avro files are larger than that.
FORMAT_LIMITS = {"tencent-dts": LIMITS, "debezium-json": LIMITS, "datastream-avro": None}


def assert_balanced(stats: dict[str, int]) -> None:
    assert stats["messages"] == stats["decoded"] + stats["errors"] + stats["pending"], stats
    assert 0 <= stats["dropped"] <= stats["errors"]


@pytest.mark.parametrize("format", list(STREAMS))
@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_one_call_accounts_for_every_message(format, mode):
    values = STREAMS[format]()
    results = {}
    for engine in ("native", "python"):
        batch, stats = cdc_decode.decode(
            values, format, mode=mode, engine=engine, limits=FORMAT_LIMITS[format], stats=True
        )
        results[engine] = stats
        assert_balanced(stats)
        assert stats["messages"] == len(values)
        assert stats["pending"] == 0
        ops = batch.column("op").to_pylist()
        assert stats["events"] == sum(op != "error" for op in ops)
        if mode == "permissive":
            assert stats["errors"] == ops.count("error") > 0 and stats["dropped"] == 0
        else:
            assert stats["dropped"] == stats["errors"] > 0 and "error" not in ops
        # Each decoded message has its ordinal among the rows, unless it gave none.
        assert stats["decoded"] > 0
    assert results["native"] == results["python"]


def test_the_dts_stream_outcomes():
    """The DTS stream, message by message: what each one's outcome is."""
    batch, stats = cdc_decode.decode(dts_stream(), "tencent-dts", limits=LIMITS, stats=True)
    assert stats == {
        # 15 messages; decoded: the insert, the tombstone, the empty Entries and the 3
        # parts of the completed set; errors: the bad bytes, the superseded part 0, the
        # duplicate part, the part without part 0, the out-of-order set (2 parts), the
        # oversized message, and the 2 parts left open at the end.
        "messages": 15, "decoded": 6, "events": 2 + 1 + 4, "errors": 9, "dropped": 0,
        "pending": 0,
    }  # fmt: skip
    assert batch.column("op").to_pylist().count("error") == 9


@pytest.mark.parametrize("format", list(STREAMS))
@pytest.mark.parametrize("engine", ["native", "python"])
def test_a_decoder_accounts_after_every_call(format, engine):
    values = STREAMS[format]()
    decoder = cdc_decode.Decoder(format, engine=engine, limits=FORMAT_LIMITS[format])
    pendings = []
    for start in range(0, len(values), 4):
        before = decoder.stats()
        decoder.decode(values[start : start + 4])
        after = decoder.stats()
        assert_balanced(after)
        assert after["messages"] - before["messages"] == len(values[start : start + 4])
        pendings.append(after["pending"])
    rest = decoder.finish()
    stats = decoder.stats()
    assert_balanced(stats)
    assert stats["pending"] == 0 and stats["messages"] == len(values)
    if format == "tencent-dts":
        assert max(pendings) > 0  # some calls ended with parts held
        assert rest.column("op").to_pylist() == ["error", "error"]


@pytest.mark.parametrize("format", list(STREAMS))
@pytest.mark.parametrize("engine", ["native", "python"])
def test_failfast_accounts_up_to_the_failing_message(format, engine):
    values = STREAMS[format]()
    limits = FORMAT_LIMITS[format]
    decoder = cdc_decode.Decoder(format, mode="failfast", engine=engine, limits=limits)
    seen = 0
    while seen < len(values):
        try:
            decoder.decode(values[seen:])
            break
        except cdc_decode.DecodeError as exc:
            failed = int(str(exc).split(":")[0].removeprefix("message "))
            assert failed >= seen
            stats = decoder.stats()
            assert_balanced(stats)
            seen = stats["messages"]
    assert_balanced(decoder.stats())
    try:
        decoder.finish()
    except cdc_decode.DecodeError:
        pass
    stats = decoder.stats()
    assert_balanced(stats)
    assert stats["messages"] == len(values) and stats["pending"] == 0 and stats["errors"] > 0


def test_failfast_reports_a_whole_failed_set_before_raising(engine):
    parts = split(entries_bytes(entry(BEGIN), entry(COMMIT)), 3)
    decoder = cdc_decode.Decoder("tencent-dts", mode="failfast", engine=engine)
    decoder.decode(parts[:2])
    with pytest.raises(cdc_decode.DecodeError, match="^message 0: "):
        decoder.decode([parts[0]])  # supersedes the open set of 2 parts
    assert decoder.stats() == {
        "messages": 3, "decoded": 0, "events": 0, "errors": 2, "dropped": 0, "pending": 1
    }  # fmt: skip


def test_datahub_tuple_records(engine):
    from test_datahub_tuple import SEED

    bad = SEED.to_pylist()[0] | {"_operation_type_": "X"}
    records = pa.Table.from_pylist([*SEED.to_pylist(), bad], schema=SEED.schema)
    batch, stats = cdc_decode.decode(records, "datahub-tuple", engine=engine, stats=True)
    assert_balanced(stats)
    assert stats["messages"] == records.num_rows and stats["errors"] == 1
    assert stats["events"] == batch.num_rows - 1


# ---------------------------------------------------------------------------------------
# Spark: the totals of a job


def _frame(spark, values, partitions: int):
    rows = [(v,) for v in values]
    return spark.sparkContext.parallelize(rows, partitions).toDF("value binary")


@pytest.mark.parametrize("mode", ["permissive", "dropmalformed"])
def test_spark_job_totals(spark, engine, mode):
    from cdc_decode import spark as cdc_spark

    values = dts_stream() * 3
    accounting = cdc_spark.DecodeAccounting(spark)
    df = _frame(spark, values, 4)
    events = cdc_spark.decode(
        df, "tencent-dts", mode=mode, engine=engine, limits=LIMITS, accounting=accounting
    )
    rows = events.collect()
    totals = accounting.value()
    assert accounting.partitions() == 4
    assert_balanced(totals)
    assert totals["messages"] == len(values) and totals["pending"] == 0
    ops = [r["op"] for r in rows]
    assert totals["events"] == sum(op != "error" for op in ops)
    if mode == "permissive":
        assert totals["errors"] == ops.count("error") > 0
    else:
        assert totals["dropped"] == totals["errors"] > 0 and "error" not in ops
    # What each partition's own decoder says, added up.
    expected = dict.fromkeys(cdc_spark.STATS, 0)
    for part in df.rdd.glom().collect():
        _, stats = cdc_decode.decode(
            [r["value"] for r in part], "tencent-dts", mode=mode, limits=LIMITS, stats=True
        )
        for name in expected:
            expected[name] += stats[name]
    assert totals == expected

    # A second action recomputes every partition: each is still counted once.
    assert events.count() == len(rows)
    assert accounting.value() == totals
    accounting.reset()
    assert accounting.value() == dict.fromkeys(cdc_spark.STATS, 0)
    events.count()
    assert accounting.value() == totals
    # One task reading every partition (a coalesce, as apply_changes folds a small batch)
    # reports each under its own partition id: they add up, and again once per action.
    accounting.reset()
    assert events.coalesce(1).count() == len(rows)
    assert accounting.value() == totals and accounting.partitions() == 1
    events.coalesce(1).count()
    assert accounting.value() == totals


def test_spark_accounting_of_two_decodes_and_a_failed_job(spark):
    from cdc_decode import spark as cdc_spark

    accounting = cdc_spark.DecodeAccounting(spark)
    dts = cdc_spark.decode(_frame(spark, dts_stream(), 2), "tencent-dts", accounting=accounting)
    json = cdc_spark.decode(_frame(spark, json_stream(), 2), "debezium-json", accounting=accounting)
    dts.union(json).collect()
    totals = accounting.value()
    assert accounting.partitions() == 4
    assert totals["messages"] == len(dts_stream()) + len(json_stream())
    assert_balanced(totals)

    failing = cdc_spark.DecodeAccounting(spark)
    events = cdc_spark.decode(
        _frame(spark, json_stream(), 1), "debezium-json", mode="failfast", accounting=failing
    )
    with pytest.raises(Exception, match="DecodeError"):
        events.collect()
    # A failed task's updates are dropped: nothing is counted for it.
    assert failing.value()["messages"] == 0


def test_spark_accounting_argument_is_checked(spark):
    from cdc_decode import spark as cdc_spark

    df = _frame(spark, [b"{}"], 1)
    with pytest.raises(TypeError, match="DecodeAccounting"):
        cdc_spark.decode(df, "debezium-json", accounting={})  # type: ignore[arg-type]
