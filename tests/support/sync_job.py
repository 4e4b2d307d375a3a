"""A streaming whole-database sync as its own driver process, for the kill test:
Kafka -> ``cdc_spark.sync_stream`` -> one Delta table per source table.

``python tests/support/sync_job.py --bootstrap … --topic … --format … --target …
--checkpoint … --log …`` runs the query (``availableNow``, micro-batches of
``--max-offsets`` records, one table at a time) and writes each micro-batch's
:class:`SyncResult` as ``<log>/<batchId>-<n>.json`` (``n`` counts the runs of that batch).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Run as a script, this folder is sys.path[0], and its delta.py would hide the delta
# package: import `support` from tests/ instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE.parent))

from support.delta import delta_session  # noqa: E402


def record(log: Path, result) -> None:
    """One micro-batch's result as JSON, beside the earlier runs of the same batch."""
    log.mkdir(parents=True, exist_ok=True)
    runs = len(list(log.glob(f"{result.batch_id:06d}-*.json")))
    tables = {
        name: {
            "events": t.events,
            "rows_written": t.rows_written,
            "created": t.created,
            "skipped": t.skipped,
            "error": t.error,
        }
        for name, t in result.tables.items()
    }
    text = json.dumps(
        {
            "batch_id": result.batch_id,
            "app_id": result.app_id,
            "tables": tables,
            "messages_with_errors": result.messages_with_errors,
            "errors": result.errors,
            "messages_held": result.messages_held,
            "messages": result.messages,
            "accounted": result.accounted(),
        }
    )
    (log / f"{result.batch_id:06d}-{runs}.json").write_text(text)


def run_sync(spark, *, bootstrap, topic, format, target, checkpoint, log, max_offsets=40) -> None:
    """The query, until everything in the topic now is synced: in this process (a test's
    own session) or as the job below."""
    from cdc_decode import spark as cdc_spark

    kafka = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets))
        .load()
    )
    query = cdc_spark.sync_stream(
        kafka,
        format,
        str(target),
        checkpoint=str(checkpoint),
        trigger={"availableNow": True},
        parallelism=1,
        progress=lambda result: record(Path(log), result),
    )
    query.awaitTermination()


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "topic", "format", "target", "checkpoint", "log", "warehouse"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--max-offsets", type=int, default=40)
    args = parser.parse_args()
    spark = delta_session(Path(args.warehouse), app="cdc-decode-sync-job", interpreted=True)
    run_sync(spark, bootstrap=args.bootstrap, topic=args.topic, format=args.format,
             target=args.target, checkpoint=args.checkpoint, log=args.log,
             max_offsets=args.max_offsets)  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
