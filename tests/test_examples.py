"""The examples users copy: none leans on this repository's tests, each says what it needs,
each is run by a test (here, in tests/test_streaming.py, tests/test_autocdc.py and
tests/delta/test_examples.py), and ``local_session``'s connectors come from Maven Central
when no jars are given.

The Python examples run as programs, in a process of their own, as a user runs them.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest
from support.kafka import new_topic, produce

import cdc_decode
from cdc_decode.generate import generate, write_values
from cdc_decode.spark import session

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
# Each example, and the test module that runs it.
RUN_BY = {
    "apply_delta.py": "tests/delta/test_examples.py",
    "kafka_stream.py": "tests/test_streaming.py",
    "typed_tables.py": "tests/test_examples.py",
    "decode_file.rs": "tests/test_examples.py",
    "autocdc": "tests/test_autocdc.py",
}


def _python(*args, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run this interpreter on ``args``; its Spark workers run it too."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    run = subprocess.run(
        [sys.executable, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return run


def test_every_example_is_run_by_a_test():
    examples = [p.name for p in EXAMPLES.iterdir() if not p.name.startswith(("_", "."))]
    assert sorted(examples) == sorted(RUN_BY)
    for example, test in RUN_BY.items():
        assert example in (ROOT / test).read_text(), f"{test} does not run {example}"


@pytest.mark.parametrize("path", sorted(EXAMPLES.rglob("*.py")), ids=lambda p: p.name)
def test_no_example_imports_the_tests(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        assert not any(n.split(".")[0] in ("tests", "support", "conftest") for n in names)
    assert "sys.path" not in path.read_text()


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_each_example_says_what_it_needs_and_how_to_run_it(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert "Needs" in doc
    assert f"python {path.name}" in doc


@pytest.mark.spark
def test_typed_tables_runs():
    """examples/typed_tables.py: the Spark frames per table count what the in-process
    decode counts, and together every event of the stream."""
    run = _python(EXAMPLES / "typed_tables.py", "--messages", "300")
    on_spark = dict(re.findall(r"^== (\S+): (\d+) events$", run.stdout, re.M))
    in_process = ast.literal_eval(run.stdout.strip().splitlines()[-1])
    assert {name: int(n) for name, n in on_spark.items()} == {
        name: n for name, n in in_process.items() if name is not None
    }
    assert sum(in_process.values()) == generate("datahub-blob", messages=300, seed=1).rows
    assert all(n > 0 for n in in_process.values())


def test_decode_file_rs_runs(tmp_path):
    """examples/decode_file.rs (the profiling driver, a debug build) decodes a generated
    stream's values.bin into exactly its expected events."""
    stream = generate("tencent-dts", messages=200, seed=1)
    write_values(tmp_path / "values.bin", stream.values)
    run = subprocess.run(
        ["cargo", "run", "--quiet", "--example", "decode_file", "--",
         "tencent-dts", str(tmp_path / "values.bin"), "2", "64"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"tencent-dts: 200 messages, {stream.rows} rows;" in run.stdout


def test_connector_packages_follow_pyspark():
    import pyspark

    line = tuple(int(p) for p in pyspark.__version__.split(".")[:2])
    version = "{}.{}.0".format(*min(line, session.NEWEST_MAVEN_SPARK))
    assert session.connector_packages(kafka=True, avro=True) == [
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}",
        f"org.apache.spark:spark-avro_2.13:{version}",
    ]
    assert session.connector_packages(kafka=True, version="4.1.1") == [
        "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"
    ]
    assert session.connector_packages() == []


def test_local_session_settings(tmp_path):
    """Connectors among the given jars are not fetched; the others are, through the
    package's Ivy settings unless the caller names a repository; the caller's settings and
    packages are kept."""
    import pyspark

    line = tuple(int(p) for p in pyspark.__version__.split(".")[:2])
    version = "{}.{}.0".format(*min(line, session.NEWEST_MAVEN_SPARK))
    folder = tmp_path / "jars"
    folder.mkdir()
    names = ["delta-spark_4.2_2.13-4.4.0.jar", "delta-storage-4.4.0.jar",
             "spark-sql-kafka-0-10_2.13-4.2.0.jar"]  # fmt: skip
    for name in names:
        (folder / name).write_bytes(b"")
    settings, packages, delta_package = session._settings(
        delta=True, kafka=True, avro=True, jars=[folder], version=None,
        config={"spark__sql__shuffle__partitions": "2", "spark__jars": "/opt/udf.jar"},
    )  # fmt: skip
    assert settings["spark.jars"] == ",".join(["/opt/udf.jar", *(str(folder / n) for n in names)])
    assert packages == [f"org.apache.spark:spark-avro_2.13:{version}"]
    assert not delta_package
    assert settings["spark.jars.ivySettings"] == str(session.IVY_SETTINGS)
    assert session.IVY_SETTINGS.is_file()
    assert settings["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert settings["spark.sql.shuffle.partitions"] == "2"

    mirror = {
        "spark__jars__repositories": "https://mirror.example/maven",
        "spark__jars__packages": "a:b:1",
    }
    settings, packages, delta_package = session._settings(
        delta=True, kafka=True, avro=False, jars=[], version="4.1.1", config=mirror
    )
    assert "spark.jars.ivySettings" not in settings
    assert packages == ["a:b:1", "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"]
    assert delta_package

    settings, packages, _ = session._settings(
        delta=False, kafka=False, avro=False, jars=[], version=None,
        config={"spark__jars__packages": "a:b:1"},
    )  # fmt: skip
    assert packages == ["a:b:1"] and "spark.jars.ivySettings" not in settings


def test_local_session_iceberg_settings(tmp_path):
    """iceberg=True: Iceberg's SQL extension after the caller's, a Hadoop catalog in a
    folder (an absolute path) or a REST catalog at a URI, the runtime of pyspark's line from
    Maven unless given in jars; Spark 4.2 and 4.3 have none and say so."""
    runtime = tmp_path / "iceberg-spark-runtime-4.1_2.13-1.12.0.jar"
    runtime.write_bytes(b"")
    hadoop = session._iceberg_catalog("lake", "wh", None)
    settings, packages, _ = session._settings(
        delta=False, kafka=False, avro=False, jars=[runtime], version=None,
        config={"spark__sql__extensions": "my.Ext"}, iceberg=hadoop,
    )  # fmt: skip
    assert packages == []
    assert settings["spark.sql.extensions"] == f"my.Ext,{session.ICEBERG_EXTENSIONS}"
    assert settings["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert settings["spark.sql.catalog.lake.type"] == "hadoop"
    assert settings["spark.sql.catalog.lake.warehouse"] == str((Path.cwd() / "wh").resolve())
    rest = session._iceberg_catalog("cat", "s3://bucket/wh", "http://127.0.0.1:8181")
    assert rest == {
        "spark.sql.catalog.cat": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.cat.type": "rest",
        "spark.sql.catalog.cat.uri": "http://127.0.0.1:8181",
        "spark.sql.catalog.cat.warehouse": "s3://bucket/wh",
    }
    assert session.iceberg_package("4.1.4") == (
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0"
    )
    assert session.iceberg_package("3.5.9").endswith("-3.5_2.12:1.12.0")
    with pytest.raises(ValueError, match="no Spark runtime for pyspark 4.3.0"):
        session.iceberg_package("4.3.0")


def test_delta_without_delta_spark_says_what_to_install():
    """.venv (Spark 4.3) has no delta-spark, by design: Delta 4.4 runs on Spark 4.2."""
    with pytest.raises(ModuleNotFoundError, match=r"pip install delta-spark"):
        cdc_decode.spark.local_session(delta=True)


def test_local_session_refuses_missing_jars(tmp_path):
    with pytest.raises(FileNotFoundError, match="no jars in"):
        cdc_decode.spark.local_session(jars=[tmp_path])
    with pytest.raises(FileNotFoundError, match="no such jar or folder of jars"):
        cdc_decode.spark.local_session(jars=[tmp_path / "absent.jar"])


CONNECTORS = """
import sys
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro
from cdc_decode import spark as cdc_spark

spark = cdc_spark.local_session("connectors", master="local[1]", kafka=True, avro=True)
print("packages", spark.conf.get("spark.jars.packages"))
kafka = (
    spark.read.format("kafka").option("kafka.bootstrap.servers", sys.argv[1])
    .option("subscribe", sys.argv[2]).option("includeHeaders", "true").load()
)
events = cdc_spark.decode(kafka, "tencent-dts")
print("events", events.where("op <> 'error'").count())
longs = spark.range(3).select(to_avro(F.col("id")).alias("a"))
print("avro", [r.x for r in longs.select(from_avro("a", '"long"').alias("x")).collect()])
"""


@pytest.mark.spark
@pytest.mark.long  # the connectors from Maven Central: make test-long
def test_local_session_fetches_the_connectors_from_maven_central(kafka_broker, tmp_path):
    """``local_session(kafka=True, avro=True)`` with no jars: Spark resolves the connectors
    from Maven Central (the package's Ivy settings) and reads the broker with them."""
    stream = generate("tencent-dts", messages=40, seed=3, max_message_bytes=1024)
    topic = new_topic(kafka_broker, partitions=1)
    produce(kafka_broker.bootstrap, topic, stream, partitions=1)
    script = tmp_path / "connectors.py"
    script.write_text(CONNECTORS)
    run = _python(script, kafka_broker.bootstrap, topic)
    assert "spark-sql-kafka-0-10_2.13" in run.stdout
    assert "spark-avro_2.13" in run.stdout
    expected = stream.expected.filter(pc.field("op") != "error").num_rows
    assert f"events {expected}\n" in run.stdout
    assert "avro [0, 1, 2]" in run.stdout
