"""Ground truth for ``apply_changes``: what a generated stream's tables must hold.

Shared by tests/delta/test_apply.py (small streams) and benches/apply_check.py (100,000
events per format): the columns to compare, a delivery order with duplicates, the live
rows of a table, the SCD type 2 history a stream must give, and a short diff.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from cdc_decode.generate import Stream
from cdc_decode.generate.apply import REMOVE_OPS, UPSERT_OPS

Version = tuple["bytes | None", bool, bool, tuple]
"""``(end sequence, current, deleted, values)`` of one history row, keyed by ``(key,
start sequence)``."""


def final_columns(stream: Stream, table: str) -> list[str]:
    """The key columns, then every column a row of ``table``'s final state has."""
    columns: dict[str, None] = dict.fromkeys(stream.primary_keys[table])
    for row in stream.final_state.get(table, {}).values():
        columns.update(dict.fromkeys(row))
    return list(columns)


def mangled(rows: int, seed: int) -> list[int]:
    """Row indexes in a shuffled order, with about one in ten delivered twice: what an
    at-least-once transport with parallel writers hands out."""
    rng = random.Random(seed)
    order = list(range(rows))
    order += [i for i in order if rng.random() < 0.1]
    rng.shuffle(order)
    return order


def table_rows(spark: Any, target: str, keys: Sequence[str]) -> dict[tuple, dict]:
    """The live rows of an ``apply_changes`` table: key tuple -> row."""
    from cdc_decode import spark as cdc_spark

    rows = cdc_spark.current_rows(spark, target).collect()
    return {tuple(r[c] for c in keys): r.asDict() for r in rows}


def want_rows(stream: Stream, table: str, columns: Sequence[str]) -> dict[tuple, dict]:
    """``table``'s final state, every row with exactly ``columns`` (absent ones null)."""
    return {
        key: {c: row.get(c) for c in columns}
        for key, row in stream.final_state.get(table, {}).items()
    }


def _key(image: Mapping | None, keys: Sequence[str]) -> tuple | None:
    if image is None or not all(k in image for k in keys):
        return None
    return tuple(image[k] for k in keys)


def change_log(
    stream: Stream, table: str, columns: Sequence[str]
) -> dict[tuple[tuple, bytes], Version]:
    """The history a type 2 table of ``table`` must hold: ``(key, start sequence)`` ->
    version.

    The source's changes of ``table`` (the stream's expected events, in sequence order),
    folded as :func:`cdc_decode.generate.apply_change` folds them: after each change, the
    key's row is a version (a partial image takes the other columns from the row before;
    ``delete`` and ``update_before`` end the row with a deleted version, whose values are
    null but the key's; an ``update`` that changes the key ends the old key's rows). A
    version ends where the key's next one starts; the last one is current unless deleted.
    """
    keys = list(stream.primary_keys[table])
    short = table.rsplit(".", 1)[-1]
    events = stream.expected.select(
        ["op", "source_table", "sequence", "primary_key", "before", "after"]
    ).to_pylist()
    events = [
        e
        for e in events
        if e["op"] in UPSERT_OPS + REMOVE_OPS
        and e["source_table"] in (short, None)
        and e["sequence"] is not None
    ]
    events.sort(key=lambda e: e["sequence"])
    # tdsql-json's expected images are positional ("0", "1", ...): the decoder names them
    # with columns=stream.options["columns"].
    names = stream.options.get("columns", {}).get(table)

    def image(value: Any) -> dict | None:
        if value is None:
            return None
        if names is None:
            return dict(value)
        return {names[int(k)] if k.isdigit() else k: v for k, v in dict(value).items()}

    rows: dict[tuple, dict] = {}
    starts: dict[tuple, list[tuple[bytes, bool, tuple]]] = {}
    values = [c for c in columns if c not in keys]

    def version(key: tuple, seq: bytes, row: dict | None) -> None:
        got = tuple(None if row is None else row.get(c) for c in values)
        starts.setdefault(key, []).append((seq, row is None, got))

    for e in events:
        before, after = image(e["before"]), image(e["after"])
        old_key, new_key = _key(before, keys), _key(after, keys)
        seq = e["sequence"]
        if e["op"] in REMOVE_OPS:
            key = old_key if old_key is not None else new_key
            rows.pop(key, None)
            version(key, seq, None)
            continue
        if new_key is None:
            new_key = old_key
        row = None
        if old_key is not None and old_key != new_key:
            row = rows.pop(old_key, None)
            version(old_key, seq, None)
        if row is None:
            row = rows.get(new_key, {})
        rows[new_key] = {**row, **after}
        version(new_key, seq, rows[new_key])
    log: dict[tuple[tuple, bytes], Version] = {}
    for key, changes in starts.items():
        changes.sort(key=lambda c: c[0])
        for i, (seq, deleted, got) in enumerate(changes):
            if (key, seq) in log:  # one version per (key, sequence)
                continue
            end = changes[i + 1][0] if i + 1 < len(changes) else None
            log[key, seq] = (end, end is None and not deleted, deleted, got)
    return log


def history_rows(
    spark: Any, target: str, keys: Sequence[str], columns: Sequence[str]
) -> dict[tuple[tuple, bytes], Version]:
    """A type 2 table's rows as :func:`change_log` gives them."""
    from cdc_decode.spark import apply as cdc_apply

    values = [c for c in columns if c not in keys]
    got: dict[tuple[tuple, bytes], Version] = {}
    table = spark.read.format("delta").load(target) if "/" in target else spark.table(target)
    for r in table.collect():
        start = bytes(r[cdc_apply.START_SEQUENCE])
        end = r[cdc_apply.END_SEQUENCE]
        got[tuple(r[k] for k in keys), start] = (
            None if end is None else bytes(end),
            r[cdc_apply.CURRENT],
            r[cdc_apply.DELETED],
            tuple(r[c] for c in values),
        )
    return got


def diff(got: Mapping, want: Mapping, *, limit: int = 3) -> str:
    """A one-line summary of how two ``key -> value`` maps differ ("" when equal): the
    counts of missing, extra and different keys, and the first few of each."""
    if got == want:
        return ""
    missing = sorted((k for k in want if k not in got), key=repr)
    extra = sorted((k for k in got if k not in want), key=repr)
    changed = sorted((k for k in want if k in got and got[k] != want[k]), key=repr)
    parts = []
    for name, found in (("missing", missing), ("extra", extra), ("different", changed)):
        if found:
            parts.append(f"{len(found)} {name} (first: {', '.join(map(repr, found[:limit]))})")
    if changed:
        k = changed[0]
        a, b = got[k], want[k]
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            cols = [c for c in dict.fromkeys([*a, *b]) if a.get(c) != b.get(c)]
            detail = "; ".join(f"{c}: got {a.get(c)!r}, want {b.get(c)!r}" for c in cols[:limit])
        else:
            detail = f"got {a!r}, want {b!r}"
        parts.append(f"at {k!r}: {detail[:600]}")
    return "; ".join(parts)
