"""Ground truth for ``apply_changes``: what a generated stream's tables must hold.

Shared by tests/delta/test_apply.py (small streams) and benches/apply_check.py (100,000
events per format): the columns to compare, a delivery order with duplicates, the live
rows of a table, the SCD type 2 history a stream must give, and a short diff.
"""

from __future__ import annotations

import datetime as dt
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


def text_differences(
    spark: Any, stream: Stream, targets: Mapping[str, str], limit: int = 10
) -> list[str]:
    """What differs between each table of string columns (a format or stream without wire
    types) and the source's text (``Stream.final_state``), value by value; empty: none.
    ``targets``: source table -> its target."""
    out: list[str] = []
    for name, rows in stream.final_state.items():
        if name not in targets:
            out.append(f"{name}: not synced")
            continue
        got = table_rows(spark, targets[name], stream.primary_keys[name])
        if got.keys() != rows.keys():
            out.append(f"{name}: keys differ ({len(got)} rows, the source has {len(rows)})")
            continue
        dropped = stream.dropped.get(name, ())
        for at, row in rows.items():
            for column, value in row.items():
                if column not in dropped and got[at].get(column) != value:
                    out.append(f"{name} {at}: {column} is {got[at].get(column)!r}, want {value!r}")
        if len(out) >= limit:
            break
    return out[:limit]


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


# --- hand-made events ----------------------------------------------------------------------

USERS = "id:bigint,name:string,score:int"
"""The columns of the hand-made tables: ``(id, name, score)``, keyed by ``id``."""
T0 = dt.datetime(2024, 5, 1, 8, 0, 0)


def seq(n: int) -> bytes:
    """Sequence ``n`` as the 4 bytes the hand-made events carry."""
    return n.to_bytes(4, "big")


def typed_events(spark: Any, rows: Sequence[tuple], columns: str = USERS) -> Any:
    """Typed events from rows of ``(op, n, before, after[, absent[, ddl]])``: sequence
    ``seq(n)``, event time ``T0`` + ``n`` seconds, ``primary_key`` ``["id"]`` on row
    changes, ``after_absent`` the names the after image lacks (``[]`` when it has one and
    none are given)."""
    from cdc_decode.spark.apply import ROW_OPS

    schema = (
        "op string, sequence binary, event_time timestamp, primary_key array<string>, "
        f"ddl string, before struct<{columns}>, after struct<{columns}>, "
        "after_absent array<string>"
    )
    full = []
    for row in rows:
        op, n, before, after = row[:4]
        absent = row[4] if len(row) > 4 else None
        ddl = row[5] if len(row) > 5 else None
        if absent is None and after is not None:
            absent = []
        pk = ["id"] if op in ROW_OPS else None
        full.append((op, seq(n), T0 + dt.timedelta(seconds=n), pk, ddl, before, after, absent))
    return spark.createDataFrame(full, schema)


def live(spark: Any, target: str) -> dict:
    """``id -> (name, score)`` of the live rows of a hand-made table."""
    from cdc_decode import spark as cdc_spark

    rows = cdc_spark.current_rows(spark, target).collect()
    return {r["id"]: (r["name"], r["score"]) for r in rows}


# --- deliveries across batches -------------------------------------------------------------


def _image_dict(value: Any) -> dict | None:
    if value is None:
        return None
    return dict(value) if not isinstance(value, dict) else value


def deliveries(
    events: Any,
    keys: Sequence[str],
    batches: int,
    *,
    seed: int,
    late: float = 0.25,
    again: float = 0.1,
) -> list[list[int]]:
    """Row indexes of ``events`` (a pyarrow table of one table's events) in ``batches``
    batches, as an at-least-once transport with parallel partitions delivers them.

    The events in sequence order are cut into ``batches`` consecutive slices; a share
    ``late`` of them is delivered in a later batch than its slice (a partial image, a
    delete or an insert arriving late); a share ``again`` is delivered a second time, in
    its batch or a later one; each batch is shuffled. One order is kept, the one
    docs/apply.md says ``apply_changes`` cannot repair: a change of a key that a later
    update moves to another key is not delivered after that update.
    """
    rng = random.Random(seed)
    rows = events.select(["op", "sequence", "before", "after"]).to_pylist()
    order = sorted(
        range(len(rows)), key=lambda i: (rows[i]["sequence"] is None, rows[i]["sequence"] or b"")
    )
    slice_of = {i: pos * batches // max(len(order), 1) for pos, i in enumerate(order)}
    deadline = {i: batches - 1 for i in order}
    seen: dict[tuple, list[int]] = {}

    def key_of(image: dict | None) -> tuple | None:
        if image is None or not all(image.get(k) is not None for k in keys):
            return None
        return tuple(image[k] for k in keys)

    for i in order:
        op = rows[i]["op"]
        before, after = _image_dict(rows[i]["before"]), _image_dict(rows[i]["after"])
        old, new = key_of(before), key_of(after)
        if op in UPSERT_OPS and old is not None and new is not None and old != new:
            for j in seen.get(old, []):
                deadline[j] = min(deadline[j], slice_of[i])
        key = new if op in UPSERT_OPS and new is not None else old
        if key is not None:
            seen.setdefault(key, []).append(i)
    out: list[list[int]] = [[] for _ in range(batches)]
    for i in order:
        batch = slice_of[i]
        if rng.random() < late and deadline[i] > batch:
            batch = rng.randint(batch + 1, deadline[i])
        out[batch].append(i)
        if rng.random() < again:
            out[rng.randint(batch, batches - 1)].append(i)
    for batch in out:
        rng.shuffle(batch)
    return out


def typed_state(events: Any, keys: Sequence[str]) -> dict[tuple, dict]:
    """The rows typed events (a pyarrow table of one table's events, with
    ``after_absent``) leave, applied in sequence order as the source applied them: an
    upsert merges the columns its image carries into the row (an update that moves its
    key takes the old row's), a delete removes the row."""
    rows = events.select(["op", "sequence", "before", "after", "after_absent"]).to_pylist()
    rows = [r for r in rows if r["op"] in UPSERT_OPS + REMOVE_OPS and r["sequence"] is not None]
    rows.sort(key=lambda r: r["sequence"])
    state: dict[tuple, dict] = {}

    def key_of(image: dict | None) -> tuple | None:
        if image is None or any(image.get(k) is None for k in keys):
            return None
        return tuple(image[k] for k in keys)

    for r in rows:
        old, new = key_of(r["before"]), key_of(r["after"])
        if r["op"] in REMOVE_OPS:
            state.pop(old if old is not None else new, None)
            continue
        absent = set(r["after_absent"] or [])
        carried = {c: v for c, v in r["after"].items() if c not in absent}
        new = new if new is not None else old
        row = state.pop(old, None) if old is not None and old != new else None
        if row is None:
            row = state.get(new, {})
        state[new] = {**row, **carried}
    return state


def plain(value: Any) -> Any:
    """A value as both pyarrow and a Spark ``collect`` give it, made comparable: bytes
    for binary, naive UTC datetimes."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # Spark gives local time
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value
