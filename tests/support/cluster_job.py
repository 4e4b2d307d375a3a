"""The jobs ``tests/test_cluster.py`` runs twice, in local mode and on a standalone cluster,
and what they write (Arrow IPC files and JSON), so the two runs can be compared.

    python tests/support/cluster_job.py MASTER ENV_TAR INPUT OUTPUT

runs them as a driver of the cluster at ``MASTER`` whose executors run the packed venv
``ENV_TAR``; :func:`write_inputs` makes ``INPUT``; :func:`run_jobs` is what both runs do.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

if __name__ == "__main__":  # run as a script: tests/ on the path, for `support`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cdc_decode import spark as cdc_spark  # noqa: E402
from support import spark_conf  # noqa: E402

# Each Kafka partition is one parquet file, read as one Spark partition (files are never
# packed together: openCostInBytes is larger than maxPartitionBytes), in offset order.
READ_CONF = {"spark.sql.files.openCostInBytes": str(1 << 30)}
KAFKA_PARTITIONS = 4


def write_inputs(folder: Path) -> None:
    """Generated streams: tencent-dts in multi-part sets over ``KAFKA_PARTITIONS`` Kafka
    partitions (one parquet file each), and a tree of Datastream Avro files."""
    from cdc_decode.generate import generate

    kafka = folder / "kafka"
    kafka.mkdir(parents=True)
    for partition in range(KAFKA_PARTITIONS):
        stream = generate("tencent-dts", messages=300, seed=40 + partition, max_message_bytes=4096)
        values = list(stream.values)
        n = len(values)
        table = pa.table(
            {
                "key": pa.array([b"k"] * n, pa.binary()),
                "value": pa.array(values, pa.binary()),
                "topic": pa.array(["dts"] * n),
                "partition": pa.array([partition] * n, pa.int32()),
                "offset": pa.array(range(n), pa.int64()),
            }
        )
        pq.write_table(table, kafka / f"part-{partition}.parquet")
    avro = generate("datastream-avro", messages=24, seed=7)
    for i, value in enumerate(v for v in avro.values if v is not None):
        leaf = folder / "datastream" / "shop_orders" / "2024" / "05" / "01" / f"{i % 4:02d}"
        leaf.mkdir(parents=True, exist_ok=True)
        (leaf / f"part-{i:03d}.avro").write_bytes(value)


def table_ddls() -> dict[str, str]:
    """``tables=`` for the generator's tables: each one's Spark DDL."""
    from cdc_decode.generate.source import default_tables

    return {
        t.qualified: ", ".join(f"`{c.name}` {c.spark_type}" for c in t.columns)
        for t in default_tables()
    }


def run_jobs(spark, inputs: Path, out: Path) -> None:
    """``decode`` with accounting, ``tables=`` and ``read_datastream`` over ``inputs``; each
    result sorted and written to ``out`` as ``<name>.arrow``, the totals as JSON."""
    out.mkdir(parents=True, exist_ok=True)
    with spark_conf(spark, **READ_CONF):
        kafka = spark.read.parquet(str(inputs / "kafka"))
        accounting = cdc_spark.DecodeAccounting(spark)
        events = cdc_spark.decode(kafka, "tencent-dts", accounting=accounting)
        write(events, out / "decode.arrow", ["partition", "offset"])
        totals = {"decode": accounting.value(), "partitions": accounting.partitions()}

        split = cdc_spark.decode(kafka, "tencent-dts", tables=table_ddls())
        split["*"].persist()  # one decode for every table's frame, as docs/typed.md says
        for name, frame in split.items():
            if name != "*":
                write(frame, out / f"table-{name}.arrow", ["partition", "offset"])
        split["*"].unpersist()

        avro_accounting = cdc_spark.DecodeAccounting(spark)
        files = cdc_spark.read_datastream(
            spark, str(inputs / "datastream"), accounting=avro_accounting
        )
        write(files.drop("path"), out / "read_datastream.arrow", ["event_id"])
        totals["read_datastream"] = avro_accounting.value()
    (out / "totals.json").write_text(json.dumps(totals, sort_keys=True))


def write(frame, path: Path, order: list[str]) -> None:
    """The frame's rows as one Arrow IPC file, sorted by ``order`` (a stable sort: the
    events of one message keep their order)."""
    table = frame.toArrow()
    table = table.sort_by([(c, "ascending") for c in order])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def executors(spark) -> list[dict]:
    """Where tasks ran: each task's executor process, its Python and its cdc_decode."""

    def where(_):
        import os
        import sys

        import pyarrow

        import cdc_decode

        yield {
            "pid": os.getpid(),
            "python": sys.executable,
            "prefix": sys.prefix,
            "cdc_decode": cdc_decode.__file__,
            "pyarrow": pyarrow.__version__,
            "python_engine": _python_engine(),
        }

    return spark.sparkContext.parallelize(range(8), 8).mapPartitions(where).collect()


def _python_engine() -> str:
    """What ``engine="python"`` says here: "ok", or its error (no python-engine extra)."""
    import cdc_decode

    try:
        cdc_decode.Decoder("tencent-dts", engine="python")
    except ModuleNotFoundError as exc:
        return str(exc)
    return "ok"


def main(master: str, env_tar: str, inputs: str, out: str) -> None:
    """The cluster run: a driver whose executors run the packed venv."""
    import time

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("cdc-decode-cluster-test")
        .config("spark.archives", f"{env_tar}#environment")
        .config("spark.pyspark.python", "./environment/bin/python")
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "768m")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # Both executors registered before the first job, so its tasks spread over them.
        deadline = time.monotonic() + 60
        while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3:
            if time.monotonic() > deadline:
                raise TimeoutError("the two executors did not register")
            time.sleep(0.2)
        where = executors(spark)
        run_jobs(spark, Path(inputs), Path(out))
        (Path(out) / "executors.json").write_text(json.dumps(where))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
