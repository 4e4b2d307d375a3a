"""Streaming into Delta (or Iceberg) for the tests: Kafka -> ``decode_stream`` ->
``foreachBatch`` -> ``apply_changes``.

:class:`ApplySink` is the ``foreachBatch`` function: it applies the micro-batch's events to
one Delta table with ``apply_changes`` (the table's columns given as ``schema=``), then
writes the micro-batch's accounting and ``ApplyResult`` counts to ``<batchId>.json``
beside it (replaced when Spark runs the micro-batch again). Optionally it pauses in one
micro-batch after the Delta commit and before returning to Spark (before the checkpoint
records the micro-batch as done): the window in which the kill test SIGKILLs the driver.

``python tests/support/stream_apply.py ...`` runs one query (``availableNow``) as its own
driver process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# Run as a script, this folder is sys.path[0], and its delta.py would hide the delta
# package: import `support` from tests/ instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE.parent))

# run: Kafka -> decode_stream -> a foreachBatch sink (here ApplySink), as the other
# streaming tests run it.
from support.streaming import run  # noqa: E402, F401


class ApplySink:
    """A ``foreachBatch`` function applying each micro-batch to the Delta table ``target``.

    Args:
        target: the Delta table's path.
        log: a folder for one ``<batchId>.json`` per micro-batch (accounting and the
            ``ApplyResult`` counts).
        keys: the table's key columns.
        schema: the table's columns (Spark DDL) for the generic events.
        app_id: Delta's ``txnAppId``; ``None`` relies on the sequence guard alone.
        accounting: a ``DecodeAccounting`` given to ``decode_stream`` (reset per batch).
        pause_at: the micro-batch that, after its Delta commit, touches
            ``<batchId>.applied`` and waits ``pause`` seconds.
        on_stale: as ``apply_changes`` (a replay without ``app_id`` is all stale).
        pause: seconds.
    """

    def __init__(
        self,
        target: str | os.PathLike,
        log: str | os.PathLike,
        *,
        keys: list[str],
        schema: str,
        app_id: str | None = None,
        accounting: Any = None,
        pause_at: int | None = None,
        pause: float = 0,
        on_stale: str = "warn",
    ):
        self.on_stale = on_stale
        self.target = str(target)
        self.log = Path(log)
        self.log.mkdir(parents=True, exist_ok=True)
        self.keys = keys
        self.schema = schema
        self.app_id = app_id
        self.accounting = accounting
        self.pause_at = pause_at
        self.pause = pause

    def __call__(self, batch: Any, batch_id: int) -> None:
        from cdc_decode import spark as cdc_spark

        if self.accounting is not None:
            self.accounting.reset()
        # Unpersisted, as docs/streaming.md writes it: one table's call reads the batch once.
        result = cdc_spark.apply_changes(
            batch,
            self.target,
            keys=self.keys,
            schema=self.schema,
            app_id=self.app_id,
            batch_id=None if self.app_id is None else batch_id,
            on_stale=self.on_stale,
        )
        name = f"{batch_id:06d}"
        if batch_id == self.pause_at:
            (self.log / f"{name}.applied").touch()
            time.sleep(self.pause)
        counts = {} if self.accounting is None else self.accounting.value()
        record = {
            "batch_id": batch_id,
            "events": result.events,
            "changes": result.changes,
            "errors": result.errors,
            "skipped": result.skipped,
            "version": result.version,
            **counts,
        }
        temporary = self.log / f".{name}.json.tmp"
        temporary.write_text(json.dumps(record))
        os.replace(temporary, self.log / f"{name}.json")

    def batches(self) -> list[int]:
        """The batch ids whose ``foreachBatch`` call finished."""
        return sorted(int(p.stem) for p in self.log.glob("*.json"))

    def counts(self) -> list[dict]:
        """Each finished micro-batch's record, in batch order."""
        return [json.loads(p.read_text()) for p in sorted(self.log.glob("*.json"))]


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Kafka -> decode_stream -> apply_changes")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--format", default="tencent-dts")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--keys", required=True, help="comma-separated")
    parser.add_argument("--schema", required=True)
    parser.add_argument("--app-id", default=None)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--max-offsets", type=int, default=None)
    parser.add_argument("--pause-at", type=int, default=None)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument(
        "--iceberg", action="store_true", help="--target names a table of the Iceberg catalog "
        "`lake`, a Hadoop catalog in --warehouse (tests/support/iceberg.py)"
    )  # fmt: skip
    args = parser.parse_args(argv)

    from cdc_decode import spark as cdc_spark

    if args.iceberg:
        from support.iceberg import iceberg_session

        spark = iceberg_session(
            Path(args.warehouse), app="cdc-decode-stream-apply-job", interpreted=True
        )
    else:
        from support.delta import delta_session

        spark = delta_session(
            Path(args.warehouse), app="cdc-decode-stream-apply-job", interpreted=True
        )
    sink = ApplySink(
        args.target,
        args.log,
        keys=args.keys.split(","),
        schema=args.schema,
        app_id=args.app_id,
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
