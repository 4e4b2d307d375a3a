"""Spark 4.3 Declarative Pipelines: examples/autocdc run by the real ``spark-pipelines`` CLI.

Each format's generated stream (five tables, inserts, updates, deletes, DDL, control
events) goes through ``cdc_spark.decode`` (typed) into ``create_auto_cdc_flow``: the SCD1
targets must equal the generator's final state, and the SCD2 target the history the
source's change log gives. The AutoCDC targets live in Spark's in-memory row-level catalog,
which ends with the server's JVM, so the pipeline also copies them to parquet tables
(``cdc_decode.snapshots``) that this test reads afterwards.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from support.connect import bin_dir, connect_server, spark_env

from cdc_decode.generate import generate
from cdc_decode.generate.source import _column_ddl, default_tables

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "autocdc"
JAR = ROOT / ".jars-autocdc" / "spark-catalyst_2.13-4.2.0-tests.jar"

# Formats of Kafka values whose row images are whole rows (partial images cannot go through
# AutoCDC as they are: docs/autocdc.md). `make test` runs two, each a pipeline run of about
# a minute: Debezium (tombstones), and TDSQL (begin, commit, DDL and heartbeat events among
# the rows, positional images). CDC_AUTOCDC_FORMATS=all adds Datastream JSON.
WHOLE_IMAGES = ["debezium-json", "tdsql-json", "datastream-json"]
FORMATS = (
    WHOLE_IMAGES
    if os.environ.get("CDC_AUTOCDC_FORMATS") == "all"
    else os.environ.get("CDC_AUTOCDC_FORMATS", "debezium-json,tdsql-json").split(",")
)
MESSAGES = 2000
# The pipeline's targets (examples/autocdc/transformations/orders.py): name, table, SCD type.
TARGETS = [("orders", "shop.orders", 1), ("orders_history", "shop.orders", 2)]
TARGETS += [("order_items", "shop.order_items", 1)]
ROW_OPS = ("insert", "read", "update", "update_after", "delete")
UTC = dt.timezone.utc

pytestmark = pytest.mark.spark


def table_columns() -> dict[str, list[tuple[str, str]]]:
    """``db.table`` → ``(column, Spark type)`` of the simulated source, added columns last."""
    columns = {t.qualified: [(c.name, c.spark_type) for c in t.columns] for t in default_tables()}
    for db, table, column, _ in _column_ddl():
        columns[f"{db}.{table}"].append((column.name, column.spark_type))
    return columns


COLUMNS = table_columns()
KEYS = {t.qualified: list(t.primary_key) for t in default_tables()}


def typed(text: str | None, spark_type: str):
    """A generic text value as its Spark type, by the standard library (docs/typed.md)."""
    if text is None:
        return None
    if spark_type == "bigint":
        return int(text)
    if spark_type.startswith("decimal"):
        scale = int(spark_type.rstrip(")").split(",")[1])
        return Decimal(text).quantize(Decimal(1).scaleb(-scale))
    if spark_type == "double":
        return float(text)
    if spark_type == "timestamp":
        if text.lstrip("-").isdigit():  # epoch milliseconds
            return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=int(text))
        value = dt.datetime.fromisoformat(text.replace(" +", "+"))
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    assert spark_type == "string", spark_type
    return text


def row(image: dict, table: str) -> tuple:
    """A generic image (column → text; an absent column is null) as a typed row."""
    return tuple(typed(image.get(name), kind) for name, kind in COLUMNS[table])


def scd1(final_state: dict, table: str) -> list[tuple]:
    """The rows of ``table`` in the source's final state."""
    rows = final_state[table]["rows"]
    return sorted((row(r, table) for r in rows), key=repr)


def scd2(expected: pa.Table, table: str, positional: list[str] | None = None) -> list[tuple]:
    """The history of ``table`` from the source's change log: per key, a version from each
    change to the next (``__START_AT``, ``__END_AT``, null while current); a delete ends
    the version; an upsert equal to the current version adds none. ``positional``: the
    column names of images keyed ``"0"``, ``"1"``, ... (``tdsql-json``)."""
    db, name = table.split(".")
    events = [
        e
        for e in expected.to_pylist()
        if (e["source_db"], e["source_table"]) == (db, name)
        and e["op"] in ROW_OPS
        and e["error"] is None
    ]
    events.sort(key=lambda e: e["sequence"])
    names = [n for n, _ in COLUMNS[table]]
    current: dict[tuple, tuple[tuple, bytes]] = {}
    history = []
    for event in events:
        image = dict(event["before" if event["op"] == "delete" else "after"])
        if positional is not None:
            image = {positional[int(i)]: value for i, value in image.items()}
        values = row(image, table)
        key = tuple(values[names.index(k)] for k in KEYS[table])
        open_version = current.get(key)
        if event["op"] != "delete" and open_version and open_version[0] == values:
            continue
        if open_version:
            history.append((*open_version[0], open_version[1], event["sequence"]))
            del current[key]
        if event["op"] != "delete":
            current[key] = (values, event["sequence"])
    history += [(*values, start, None) for values, start in current.values()]
    return sorted(history, key=repr)


def read_parquet(path: Path) -> pa.Table:
    """A parquet table Spark wrote, timestamps as UTC (Spark writes them as INT96 in UTC
    by default)."""
    table = pq.read_table(path, coerce_int96_timestamp_unit="us")
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type) and field.type.tz is None:
            utc = table.column(i).cast(pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
            table = table.set_column(i, pa.field(field.name, utc.type), utc)
    return table


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One Connect server for every format's run (the spec names the catalog ``mem``)."""
    assert JAR.is_file(), f"{JAR} is missing: `make jars-autocdc` fetches it"
    conf = {
        "spark.jars": str(JAR),
        # A few thousand rows: interpreting the plans is quicker than compiling them.
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    yield from connect_server(tmp_path_factory.mktemp("connect"), conf)


def run_pipeline(server, tmp_path: Path, format: str, topic: Path, database: str) -> str:
    """The example's pipeline with its spec's configuration pointed at ``topic``, run by
    ``spark-pipelines --remote``; returns its output."""
    spec = yaml.safe_load((EXAMPLE / "spark-pipeline.yml").read_text())
    spec["storage"] = (tmp_path / "storage").as_uri()
    spec["configuration"].update(
        {
            "cdc_decode.format": format,
            "cdc_decode.topic": str(topic),
            "cdc_decode.database": database,
            "cdc_decode.snapshots": "spark_catalog.default",
        }
    )
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    shutil.copytree(EXAMPLE / "transformations", pipeline / "transformations")
    (pipeline / "spark-pipeline.yml").write_text(yaml.safe_dump(spec))
    command = [
        str(bin_dir() / "spark-pipelines"),
        "--remote",
        server.url,
        "run",
        "--spec",
        str(pipeline / "spark-pipeline.yml"),
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=spark_env(),
        cwd=tmp_path,
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "Run is COMPLETED" in output, output[-6000:]
    return output


@pytest.mark.parametrize("format", FORMATS)
def test_autocdc_targets_equal_the_source(server, tmp_path, format):
    """SCD1 targets equal the final state, the SCD2 target equals the change log's history,
    and no control event, tombstone or error row reached a target."""
    stream = generate(format, messages=MESSAGES, seed=1)
    stream.write(tmp_path / "stream")
    topic = tmp_path / "topic"
    subprocess.run(
        [sys.executable, str(EXAMPLE / "make_topic.py"), str(tmp_path / "stream"), str(topic)],
        check=True,
    )
    ops = set(stream.expected.column("op").to_pylist())
    assert ops - set(ROW_OPS), "the stream has events that are not row changes"
    database = format.replace("-", "_")
    run_pipeline(server, tmp_path, format, topic, database)

    final_state = json.loads((tmp_path / "stream" / "final_state.json").read_text())
    for target, table, scd_type in TARGETS:
        got = read_parquet(server.warehouse / f"{database}_{target}")
        names = [n for n, _ in COLUMNS[table]]
        if scd_type == 1:
            assert got.column_names == [*names, "__spark_autocdc_metadata"], target
            metadata = got.column("__spark_autocdc_metadata").to_pylist()
            assert all(m["deleteSequence"] is None for m in metadata), target
            rows = sorted((tuple(r[n] for n in names) for r in got.to_pylist()), key=repr)
            want = scd1(final_state, table)
        else:
            columns = [*names, "__START_AT", "__END_AT"]
            assert got.column_names == [*columns, "__spark_autocdc_metadata"], target
            rows = sorted((tuple(r[n] for n in columns) for r in got.to_pylist()), key=repr)
            want = scd2(stream.expected, table, stream.options.get("columns", {}).get(table))
            # The history has closed versions (updates, deletes) and current ones.
            assert {r[-1] is None for r in want} == {True, False}
        assert len(rows) == len(want) > 100, target
        assert rows == want, target
