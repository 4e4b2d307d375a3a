"""Hand-written Debezium MySQL changes for the sync tests that need an exact batch (a
``truncate`` alone, a routed shard's): schemaless JSON, as a MySQL connector with
``value.converter.schemas.enable=false`` writes it, so the tests give ``keys=``."""

from __future__ import annotations

import json
from typing import Any


def debezium_change(db: str, table: str, op: str, after: dict | None, position: int) -> bytes:
    """A schemaless Debezium MySQL change of ``<db>.<table>`` at binlog ``position`` (its
    source and event times follow the position)."""
    source = {"version": "2.7.0", "connector": "mysql", "name": "dbz", "db": db,
              "table": table, "server_id": 1, "file": "mysql-bin.000003",
              "pos": position, "row": 0, "ts_ms": 1_700_000_000_000 + position}  # fmt: skip
    change = {"before": None, "after": after, "source": source, "op": op,
              "ts_ms": 1_700_000_000_000 + position}  # fmt: skip
    return json.dumps(change).encode()


def change_messages(spark: Any, *changes: tuple) -> Any:
    """Kafka-like rows (``key``, ``value``) of :func:`debezium_change`'s changes, each
    ``(db, table, op, after, position)``."""
    return spark.createDataFrame(
        [(None, debezium_change(*change)) for change in changes], "key binary, value binary"
    )
