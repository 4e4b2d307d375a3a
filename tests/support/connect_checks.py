"""Every public function of the Spark layer on a Spark Connect session: a Connect server in
its own JVM (tests/support/connect.py), this process only a client (``sc://``).

``decode`` (generic, ``schema=``, ``tables=``, ``event_columns=``, datahub-tuple on both
plans), ``read_datastream`` (Avro and JSON) and ``DecodeAccounting`` (no accumulators on
Connect: observed metrics) give what they give on a classic session.

pyspark allows no Connect session in a process that has a classic one (and decides
which kind ``pyspark.sql.functions`` builds by a process-wide flag), so
``tests/test_connect.py`` runs this file in a pytest of its own, after running the
cluster test's jobs on the classic session: ``CDC_CLASSIC_INPUTS`` and ``CDC_CLASSIC_OUT``
say where their inputs and results are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode import spark as cdc_spark
from support.cluster_job import run_jobs
from support.connect import ConnectServer

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    """A Connect session (``pyspark.sql.connect.session.SparkSession``) to a fresh server."""
    from pyspark.sql import SparkSession

    with ConnectServer(work=tmp_path_factory.mktemp("connect")) as server:
        session = SparkSession.builder.remote(server.url).getOrCreate()
        assert type(session).__module__ == "pyspark.sql.connect.session"
        yield session
        session.stop()


def read(path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def test_decode_tables_read_datastream_and_accounting_as_classic(connect, tmp_path):
    """The jobs of the cluster test (multi-part DTS over four Kafka partitions with
    accounting, ``tables=``, ``read_datastream`` with accounting) on Connect and on a classic
    local session: equal rows, equal totals."""
    inputs = Path(os.environ["CDC_CLASSIC_INPUTS"])
    classic = Path(os.environ["CDC_CLASSIC_OUT"])
    run_jobs(connect, inputs, tmp_path / "connect")
    names = sorted(p.name for p in classic.glob("*.arrow"))
    assert "decode.arrow" in names and "read_datastream.arrow" in names
    assert names == sorted(p.name for p in (tmp_path / "connect").glob("*.arrow"))
    for name in names:
        want, got = read(classic / name), read(tmp_path / "connect" / name)
        assert want.num_rows > 0, name
        assert got.schema == want.schema, name
        assert got.to_pylist() == want.to_pylist(), name
    totals = json.loads((classic / "totals.json").read_text())
    assert json.loads((tmp_path / "connect" / "totals.json").read_text()) == totals
    assert totals["partitions"] == 4 and totals["decode"]["messages"] == 1200


def values_frame(connect, values: list, partitions: int):
    """A DataFrame of ``value`` binary in ``partitions`` partitions, in order."""
    rows = [(i, v) for i, v in enumerate(values)]
    df = connect.createDataFrame(rows, "i long, value binary")
    return df.repartitionByRange(partitions, "i").sortWithinPartitions("i").drop("i")


def json_stream() -> list[bytes]:
    from cdc_decode.generate import generate

    return list(generate("debezium-json", messages=300, seed=4).values) + [b"{oops", None]


def test_accounting_on_connect(connect):
    """Totals equal to what each partition's own decoder says; a second action replaces
    (does not add to) them; reset forgets; two decode calls add up; the rows returned
    never include the stats rows, and the schema is the classic one (``op`` not null)."""
    values = json_stream()
    accounting = cdc_spark.DecodeAccounting(connect)
    assert accounting.value() == dict.fromkeys(cdc_spark.STATS, 0)
    df = values_frame(connect, values, 3)
    events = cdc_spark.decode(df, "debezium-json", keep=[], accounting=accounting)
    plain = cdc_spark.decode(df, "debezium-json", keep=[])
    assert events.schema == plain.schema
    assert not events.schema["op"].nullable
    rows = events.collect()
    assert len(rows) == plain.count()
    _, want = cdc_decode.decode(values, "debezium-json", stats=True)
    totals = accounting.value()
    assert totals == {n: want[n] for n in cdc_spark.STATS}
    assert totals["errors"] == 1 and totals["messages"] == len(values)
    assert accounting.partitions() == 3
    assert sum(r["op"] == "error" for r in rows) == totals["errors"]

    assert events.count() == len(rows)  # a second action: the same totals, not twice them
    assert accounting.value() == totals
    accounting.reset()
    assert accounting.value() == dict.fromkeys(cdc_spark.STATS, 0)
    assert accounting.partitions() == 0
    events.count()
    assert accounting.value() == totals

    other = cdc_spark.decode(
        values_frame(connect, values, 2), "debezium-json", accounting=accounting
    )
    other.collect()
    assert accounting.value() == {n: 2 * totals[n] for n in cdc_spark.STATS}
    assert accounting.partitions() == 5


def test_accounting_of_an_empty_partition_and_dropmalformed(connect):
    values = [b"{oops", b"[]"]
    accounting = cdc_spark.DecodeAccounting(connect)
    df = values_frame(connect, values, 1).union(values_frame(connect, [], 1))
    events = cdc_spark.decode(df, "debezium-json", mode="dropmalformed", accounting=accounting)
    assert events.collect() == []
    totals = accounting.value()
    assert totals["messages"] == 2 == totals["errors"] == totals["dropped"]


def test_typed_and_event_columns(connect):
    from cdc_decode.generate import generate
    from support.cluster_job import table_ddls

    stream = generate("debezium-json", messages=200, seed=3, tables=["shop.orders"])
    ddl = table_ddls()["shop.orders"]
    df = values_frame(connect, list(stream.values), 2)
    typed = cdc_spark.decode(df, "debezium-json", schema=ddl, keep=[])
    want = cdc_decode.decode(list(stream.values), "debezium-json", schema=ddl)
    got = typed.toArrow()
    assert got.column("after").to_pylist() == want.column("after").to_pylist()
    assert got.column("op").to_pylist() == want.column("op").to_pylist()
    names = ["op", "source_table"]
    picked = cdc_spark.decode(df, "debezium-json", keep=[], event_columns=names)
    assert picked.columns == names
    assert [tuple(r) for r in picked.collect()] == list(
        zip(want.column("op").to_pylist(), want.column("source_table").to_pylist(), strict=True)
    )


@pytest.mark.parametrize("plan", ["sql", "arrow"])
def test_datahub_tuple_on_both_plans(connect, plan):
    from cdc_decode.generate import generate

    # shop.order_items: no float columns, so plan="sql" is exact for it.
    stream = generate("datahub-tuple", messages=200, seed=5, tables=["shop.order_items"])
    accounting = cdc_spark.DecodeAccounting(connect) if plan == "arrow" else None
    df = connect.createDataFrame(stream.values).coalesce(1)
    events = cdc_spark.decode(df, "datahub-tuple", keep=[], plan=plan, accounting=accounting)
    got = events.toArrow()
    want = cdc_decode.decode(stream.values, "datahub-tuple")
    for name in ("op", "sequence", "source_table"):
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    got_after = [None if m is None else dict(m) for m in got.column("after").to_pylist()]
    want_after = [None if m is None else dict(m) for m in want.column("after").to_pylist()]
    assert got_after == want_after
    if accounting is not None:
        assert accounting.value()["messages"] == 200


def test_read_datastream_json(connect, tmp_path):
    lines = [
        json.dumps({
            "uuid": f"u-{i}", "read_method": "mysql-cdc-binlog", "source_timestamp": 1000 + i,
            "source_metadata": {"database": "shop", "table": "orders", "change_type": "INSERT",
                                "log_file": "mysql-bin.000001", "log_position": 100 + i},
            "payload": {"id": i},
        })
        for i in range(30)
    ]  # fmt: skip
    folder = tmp_path / "shop_orders" / "2024" / "05" / "01" / "10" / "00"
    folder.mkdir(parents=True)
    (folder / "part-1.jsonl").write_text("\n".join(lines) + "\n")
    events = cdc_spark.read_datastream(connect, str(tmp_path), format="datastream-json")
    got = events.toArrow().sort_by([("event_id", "ascending")])
    want = pa.Table.from_batches([cdc_decode.decode(lines, "datastream-json")])
    assert got.column("event_id").to_pylist() == sorted(want.column("event_id").to_pylist())
    assert got.num_rows == 30


def test_spark_event_schema_and_errors_on_connect(connect):
    assert cdc_spark.spark_event_schema().names == cdc_decode.event_schema().names
    df = values_frame(connect, [b"{}"], 1)
    with pytest.raises(ValueError, match="unknown format"):
        cdc_spark.decode(df, "nope")
    with pytest.raises(TypeError, match="DecodeAccounting"):
        cdc_spark.decode(df, "debezium-json", accounting={})  # type: ignore[arg-type]
    events = cdc_spark.decode(df, "debezium-json", mode="failfast")
    with pytest.raises(Exception, match="DecodeError"):
        events.collect()
