"""Streaming helpers for the tests: the Kafka source, an idempotent sink, a query run.

The sink (:class:`BatchSink`) is what ``foreachBatch`` calls: each micro-batch's rows go to
one Arrow IPC file named by its ``batchId`` (written under a temporary name, then renamed),
its accounting to a JSON file beside it. A micro-batch that Spark runs again after a
restart (same ``batchId``, same offsets, same state) replaces its files, so the sink holds
each micro-batch once however often it ran: nothing lost, nothing applied twice.

``python tests/support/streaming.py ...`` runs one query as its own driver process (the
kill-and-restart test SIGKILLs it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SPARK_JARS = ROOT / ".jars"


def kafka_source(
    spark: Any,
    bootstrap: str,
    topic: str | None = None,
    *,
    pattern: str | None = None,
    max_offsets: int | None = None,
):
    """Spark's Kafka source on ``topic`` (or every topic matching ``pattern``) from its
    first offset, headers included, at most ``max_offsets`` records a micro-batch."""
    if (topic is None) == (pattern is None):
        raise ValueError("give a topic or a pattern")
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe" if pattern is None else "subscribePattern", topic or pattern)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
    )
    if max_offsets is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    return reader.load()


def kafka_batch(spark: Any, bootstrap: str, topic: str):
    """The same topic read as one batch (every record there now)."""
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .load()
    )


class BatchSink:
    """An idempotent ``foreachBatch`` sink: one file per ``batchId`` (see the module doc).

    Args:
        path: the sink's folder.
        accounting: a ``DecodeAccounting`` given to ``decode_stream``; reset before each
            micro-batch, its counts written beside the rows.
        pause_at: the micro-batch that waits ``pause`` seconds after its rows are written
            and before its accounting is (a window in which the test kills the driver
            mid-batch); ``<batchId>.started`` marks that the window began.
        pause: seconds.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        accounting: Any = None,
        pause_at: int | None = None,
        pause: float = 0,
    ):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.accounting = accounting
        self.pause_at = pause_at
        self.pause = pause

    def __call__(self, batch: Any, batch_id: int) -> None:
        import pyarrow as pa

        if self.accounting is not None:
            self.accounting.reset()
        table = batch.toArrow()
        name = f"{batch_id:06d}"
        temporary = self.path / f".{name}.arrow.tmp"
        with pa.OSFile(str(temporary), "wb") as sink:
            with pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)
        os.replace(temporary, self.path / f"{name}.arrow")
        if batch_id == self.pause_at:
            (self.path / f"{name}.started").touch()
            time.sleep(self.pause)
        counts = {} if self.accounting is None else self.accounting.value()
        temporary = self.path / f".{name}.json.tmp"
        temporary.write_text(json.dumps({"batch_id": batch_id, "rows": table.num_rows, **counts}))
        os.replace(temporary, self.path / f"{name}.json")

    def batches(self) -> list[int]:
        """The batch ids written (rows and accounting both)."""
        return sorted(int(p.stem) for p in self.path.glob("*.json"))

    def table(self):
        """Every micro-batch's rows, in batch order (a ``pyarrow.Table``)."""
        import pyarrow as pa

        tables = [
            pa.ipc.open_file(pa.memory_map(str(p))).read_all()
            for p in sorted(self.path.glob("*.arrow"))
        ]
        return pa.concat_tables(tables) if tables else None

    def counts(self) -> list[dict]:
        """Each micro-batch's accounting, in batch order."""
        return [json.loads(p.read_text()) for p in sorted(self.path.glob("*.json"))]


def run(
    spark: Any,
    bootstrap: str,
    topic: str,
    format: str,
    *,
    checkpoint: str | os.PathLike,
    sink: BatchSink,
    max_offsets: int | None = None,
    available_now: bool = True,
    interval: str = "0 seconds",
    **options: Any,
):
    """Start ``decode_stream`` on ``topic`` into ``sink``; with ``available_now`` run until
    everything there now is processed and return the stopped query, else return it running
    (triggered every ``interval``)."""
    from cdc_decode import spark as cdc_spark

    source = kafka_source(spark, bootstrap, topic, max_offsets=max_offsets)
    events = cdc_spark.decode_stream(source, format, accounting=sink.accounting, **options)
    writer = (
        events.writeStream.option("checkpointLocation", str(checkpoint))
        .foreachBatch(sink)
        .queryName(f"{topic}-{format}")
    )
    if available_now:
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return query
    return writer.trigger(processingTime=interval).start()


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run one decode_stream query as a driver")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--format", default="tencent-dts")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--max-offsets", type=int, default=None)
    parser.add_argument("--pause-at", type=int, default=None, help="the batch that pauses")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds it pauses")
    args = parser.parse_args(argv)

    from cdc_decode import spark as cdc_spark

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = cdc_spark.local_session(
        "cdc-decode-stream-job",
        master="local[1]",
        spark__sql__shuffle__partitions="2",
        spark__default__parallelism="1",
        spark__driver__memory="1g",
        spark__jars=",".join(str(p) for p in sorted(SPARK_JARS.glob("*.jar"))),
    )
    sink = BatchSink(
        args.sink,
        accounting=cdc_spark.DecodeAccounting(spark),
        pause_at=args.pause_at,
        pause=args.pause,
    )
    run(
        spark,
        args.bootstrap,
        args.topic,
        args.format,
        checkpoint=args.checkpoint,
        sink=sink,
        max_offsets=args.max_offsets,
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
