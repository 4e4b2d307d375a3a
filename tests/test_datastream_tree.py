"""Datastream bucket trees on a real local Spark: read_datastream over the cdc-datastream
data source (batch and streaming), against the decoder run in process on the same files."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import cdc_decode
from cdc_decode import spark as cdc_spark
from cdc_decode.generate.tree import tree_files, write_files, write_tree
from cdc_decode.spark import datastream
from cdc_decode.spark.datastream import (
    list_tree,
    plan_partitions,
    read_files,
    register,
    sort_key,
)

pytestmark = pytest.mark.spark

TYPED = "order_id bigint, line_no int, sku string, qty int, unit_price decimal(10,4)"


def uri(path) -> str:
    """A local file as Spark names it (``file:/abs/path``)."""
    return "file:" + str(path)


def rows(table: pa.Table) -> list[tuple]:
    """``(path, event_id, op, after)`` of every row, maps as sorted item tuples, sorted."""

    def plain(value):
        if isinstance(value, list):  # a map from Spark or pyarrow: (key, value) pairs
            return tuple(sorted(value))
        if isinstance(value, dict):
            return tuple(sorted(value.items()))
        return value

    cols = [table.column(c).to_pylist() for c in ("path", "event_id", "op", "after")]
    return sorted(tuple(plain(v) for v in row) for row in zip(*cols, strict=True))


def expected(tree_paths, fmt: str, **options) -> pa.Table:
    """The events of the files decoded in process, each with its file's path."""
    parts = []
    for path in tree_paths:
        data = path.read_bytes()
        values = [data] if fmt == "datastream-avro" else data.splitlines()
        batch = cdc_decode.decode(values, fmt, **options)
        table = pa.Table.from_batches([batch])
        parts.append(table.add_column(0, "path", pa.array([uri(path)] * table.num_rows)))
    return pa.concat_tables(parts)


def spark_table(df) -> pa.Table:
    return pa.Table.from_batches(df.toArrow().to_batches())


@pytest.mark.parametrize(
    ("fmt", "engine"),
    [("datastream-avro", "native"), ("datastream-avro", "python"), ("datastream-json", "native")],
)
def test_a_tree_reads_as_the_decoder_reads_its_files(spark, engine, fmt, tmp_path, monkeypatch):
    """Every file of a tree, hidden and foreign files skipped, each event with its file;
    every plan gives the same rows (driver and binaryFile checked on the Rust engine), and
    the driver plan counts them in accounting=, its file names shipped with the function
    or, past ``_SHIPPED_NAMES``, as a DataFrame."""
    tree = write_tree(fmt, tmp_path, files=60, files_per_minute=7)
    table_dir = tree.paths[0].parent.parent.parent.parent.parent.parent
    (table_dir / "README.txt").write_text("not a Datastream file")
    (tree.paths[0].parent / "_SUCCESS.avro").write_bytes(b"marker")
    (tree.paths[0].parent / ".inflight.jsonl").write_bytes(b"{")
    events = cdc_spark.read_datastream(spark, str(tmp_path), format=fmt, engine=engine)
    assert events.columns[0] == "path"
    want = rows(expected(tree.paths, fmt))
    assert len(want) == tree.events
    assert rows(spark_table(events)) == want
    if engine == "python":
        return
    accounting = cdc_spark.DecodeAccounting(spark)
    listed = cdc_spark.read_datastream(
        spark, str(tmp_path), format=fmt, engine=engine, accounting=accounting
    )  # plan="driver": listed here, decoded in mapInArrow, counted
    assert rows(spark_table(listed)) == want
    assert accounting.value()["events"] + accounting.value()["errors"] == tree.events
    monkeypatch.setattr(datastream, "_SHIPPED_NAMES", 0)
    named = cdc_spark.read_datastream(
        spark, str(tmp_path), format=fmt, engine=engine, plan="driver", min_partitions=2
    )
    assert rows(spark_table(named)) == want
    old = cdc_spark.read_datastream(
        spark, str(tmp_path), format=fmt, engine=engine, plan="binaryFile"
    )
    assert rows(spark_table(old)) == want


@pytest.mark.parametrize("engine", ["native", "python"])
def test_local_avro_files_are_read_in_chunks_each_event_with_its_file(
    engine, tmp_path, monkeypatch
):
    """read_files reads local Avro files with the Rust core's reader in chunks of about
    ``_BATCH_BYTES`` (at least a file each), every event with its own file, on either engine;
    an unreadable file is an OSError naming it, and the reader stops at its byte budget."""
    from cdc_decode._native import read_local_files

    tree = write_tree("datastream-avro", tmp_path, files=12)
    uris = [uri(p) for p in tree.paths]
    monkeypatch.setattr(datastream, "_BATCH_BYTES", 1)  # a file per chunk
    batches = list(read_files(uris, "datastream-avro", engine=engine))
    assert len(batches) == len(uris)
    assert rows(pa.Table.from_batches(batches)) == rows(expected(tree.paths, "datastream-avro"))
    sizes = [p.stat().st_size for p in tree.paths]
    values, files = read_local_files([str(p) for p in tree.paths], sizes[0] + 1)
    assert files == 2 and values.to_pylist() == [p.read_bytes() for p in tree.paths[:2]]
    with pytest.raises(FileNotFoundError, match="gone.avro"):
        list(read_files([*uris[:2], uri(tmp_path / "gone.avro")], "datastream-avro"))


def test_typed_columns_and_event_columns(spark, tmp_path):
    """schema= and event_columns= as decode takes them: typed images, only those columns;
    path_column=False leaves the path out."""
    tree = write_tree("datastream-avro", tmp_path, files=20)
    events = cdc_spark.read_datastream(
        spark, f"file:{tmp_path}", schema=TYPED, event_columns=["op", "event_id", "after"]
    )
    assert events.columns == ["path", "op", "event_id", "after"]
    assert (
        events.schema["after"].dataType.simpleString()
        == "struct<" + TYPED.replace(", ", ",").replace(" ", ":") + ">"
    )
    got = sorted((r.path, r.event_id, r.after) for r in events.collect())
    bare = cdc_spark.read_datastream(spark, str(tmp_path), event_columns=["op"], path_column=False)
    assert bare.columns == ["op"]
    assert bare.count() == tree.events
    want = expected(tree.paths, "datastream-avro", schema=TYPED)
    cols = [want.column(c).to_pylist() for c in ("path", "event_id", "after")]
    assert [(p, e, None if a is None else tuple(a)) for p, e, a in got] == sorted(
        (p, e, None if a is None else tuple(a.values())) for p, e, a in zip(*cols, strict=True)
    )


def test_many_files_are_cut_into_few_partitions_in_time_order(spark, tmp_path):
    """The listing is sorted by time folder then path, cut in order: 45 files at 10 per
    partition make 5 partitions; min_partitions asks for more."""
    tree = write_tree("datastream-avro", tmp_path, files=45, files_per_minute=4)
    files = list_tree(str(tmp_path), "datastream-avro")
    assert [u for u, _ in files] == [uri(p) for p in tree.paths]
    assert [len(p) for p in plan_partitions(files, files_per_partition=10)] == [9] * 5
    assert len(plan_partitions(files, min_partitions=9)) == 9
    register(spark)  # spark.read.format("cdc-datastream") as users may call it
    frame = (
        spark.read.format("cdc-datastream").option("filesPerPartition", "10").load(str(tmp_path))
    )
    assert frame.rdd.getNumPartitions() == 5
    assert frame.count() == tree.events
    three = cdc_spark.read_datastream(spark, str(tmp_path), min_partitions=3)
    assert three.rdd.getNumPartitions() == 3
    # Time folders order files across tables, then the path.
    assert sort_key("gs://b/t_b/2024/05/01/10/00/x.avro") < sort_key(
        "gs://b/t_a/2024/05/01/10/01/a.avro"
    )


def test_a_broken_file_is_one_error_row_naming_it_or_fails_the_task(spark, tmp_path):
    """Permissive: the broken file's one error row carries its path, the others decode;
    failfast: the query fails naming the problem."""
    write_tree("datastream-avro", tmp_path, files=5)
    broken = tmp_path / "shop_order_items" / "2024" / "05" / "01" / "10" / "00" / "bad.avro"
    broken.write_bytes(b"Obj\x01 not really")
    events = cdc_spark.read_datastream(spark, str(tmp_path))
    errors = events.where("op = 'error'").select("path", "error").collect()
    assert [e.path for e in errors] == [uri(broken)]
    assert errors[0].error
    with pytest.raises(Exception, match="bad.avro: message"):
        cdc_spark.read_datastream(spark, str(tmp_path), mode="failfast").collect()


def test_bad_options_fail_on_the_driver(spark, tmp_path):
    with pytest.raises(ValueError, match="datastream-avro or datastream-json"):
        cdc_spark.read_datastream(spark, str(tmp_path), format="tencent-dts")
    with pytest.raises(ValueError, match="unknown plan"):
        cdc_spark.read_datastream(spark, str(tmp_path), plan="fast")
    with pytest.raises(ValueError, match="eventColumns"):
        cdc_spark.read_datastream(spark, str(tmp_path), event_columns=["nope"])


# --- following a growing bucket -----------------------------------------------------------


def _batches(spark, out) -> dict[int, list[str]]:
    """The files each micro-batch read, by batch id (from what foreachBatch wrote)."""
    table = spark.read.parquet(str(out)).select("batch", "path").distinct().collect()
    found: dict[int, list[str]] = {}
    for row in table:
        found.setdefault(row.batch, []).append(row.path)
    return {b: sorted(p, key=sort_key) for b, p in sorted(found.items())}


def _start(spark, root, out, checkpoint, *, trigger):
    """A query over the tree writing every micro-batch to ``out/batch=<id>`` (overwritten
    when a batch is run again after a restart: what a sink that is idempotent per batch
    does), 3 files per trigger."""
    stream = cdc_spark.read_datastream(
        spark,
        str(root),
        streaming=True,
        max_files_per_trigger=3,
        event_columns=["op", "event_id"],
    )

    def write(batch, batch_id):
        batch.write.mode("overwrite").parquet(f"{out}/batch={batch_id}")

    return (
        stream.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def test_a_stream_reads_each_landed_file_once_across_restarts(spark, tmp_path):
    """Files land in three lots; the query is stopped mid-run and restarted from its
    checkpoint twice: every file is read exactly once, at most 3 per micro-batch, and the
    micro-batches follow the time folders."""
    root, out, checkpoint = tmp_path / "bucket", tmp_path / "out", tmp_path / "checkpoint"
    contents = tree_files("datastream-avro", files=26, seed=3)
    landed = write_files(root, contents[:10], format="datastream-avro", files_per_minute=4)

    # 1. A continuous query, stopped after a few micro-batches (perhaps in one).
    query = _start(spark, root, out, checkpoint, trigger={"processingTime": "0 seconds"})
    deadline = time.monotonic() + 60
    while len(query.recentProgress) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    done_first = _batches(spark, out)
    assert done_first, "no micro-batch finished"

    # 2. More files land; the query restarts from its checkpoint and reads up to now.
    landed += write_files(
        root, contents[10:20], format="datastream-avro", start=10, files_per_minute=4
    )
    _start(spark, root, out, checkpoint, trigger={"availableNow": True}).awaitTermination(120)

    # 3. The last lot, and once more.
    landed += write_files(
        root, contents[20:], format="datastream-avro", start=20, files_per_minute=4
    )
    _start(spark, root, out, checkpoint, trigger={"availableNow": True}).awaitTermination(120)

    batches = _batches(spark, out)
    read = [p for files in batches.values() for p in files]
    assert sorted(read) == sorted(uri(p) for p in landed)  # every file, exactly once
    assert all(len(files) <= 3 for files in batches.values())
    keys = [sort_key(p) for p in read]
    assert keys == sorted(keys)  # in time-folder order, batch after batch
    # Events: each file's events once (no file's output written by two batches).
    got = spark.read.parquet(str(out)).select("path", "event_id").collect()
    assert (
        len(got)
        == len({(r.path, r.event_id) for r in got})
        == sum(cdc_decode.decode([c], "datastream-avro").num_rows for c in contents)
    )
