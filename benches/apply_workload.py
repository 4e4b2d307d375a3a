"""apply_changes on the workload users have: a big table, small micro-batches.

A Delta table of ``--rows`` rows (12 columns of mixed types, loaded sorted by key into
``--files`` files) takes ``--warmup`` + ``--batches`` micro-batches of typed change events
(as typed ``decode`` gives them, ``after_absent`` included), each touching ``--fraction`` of
the keys: 75 % updates (a quarter of them partial images), 20 % inserts of new keys, 5 %
deletes, about 1 % exact duplicates and about 1 % changes delivered one batch late. Updates
and deletes pick their keys uniformly (``uniform``) or mostly among the newest 5 % of keys
(``recent``: 90 % there, 10 % anywhere).

Contenders, each on its own copy of the same loaded table, reading the same event files
from disk, taking turns batch by batch (the order rotates every batch):

- ``apply_changes``: ``cdc_spark.apply_changes(events, path)``;
- ``merge``: what users write without it: ``row_number()`` over the key by sequence, keep
  the newest, one plain MERGE (delete, update every column, insert) on a default table;
- ``merge-dv``: the same MERGE on a table with deletion vectors enabled.

``--contenders`` adds variants of the hand-written MERGE to measure Delta's options:
``merge+dv+broadcast`` (the reduced batch broadcast), ``+ranges`` (an OR of narrow key
ranges of the batch on the target in the ON clause, so Delta skips files), ``+split`` (a
matched-only MERGE, then an insert-only one: two commits), ``+nomat``
(``merge.materializeSource=none``), ``+partial`` (an update keeps the columns its image
lacks: a ``CASE`` per column on ``after_absent``, which reads the table's values as the
rules do; checked against what that MERGE's own rules give).

Every contender's final table is checked against a reference computed here, in numpy, from
the generated changes, and the run fails when one differs: ``apply_changes`` against the
source's final state (what the table must equal); the hand-written MERGE against what its
own rules give on the batches as delivered (it cannot equal the source: a partial image
nulls the columns it lacks, a late change overwrites a newer one, a late update brings a
deleted row back). How many rows of its table differ from the source is printed too.

    make bench-apply                                   # the full suite (long)
    python benches/apply_workload.py --scenarios small-20k   # a streaming micro-batch
    python benches/apply_workload.py --rows 200000 --batches 5 --warmup 1
    python benches/apply_workload.py --rows 10000000 --pattern recent --fraction 0.001

Reported per contender: seconds per micro-batch (median and mean of the measured ones),
events/s, Delta's operation metrics summed over the measured batches (files removed and
added, deletion vectors added, rows copied, and the files each MERGE scanned after skipping,
from the Spark UI's SQL metrics), and the time to read the table afterwards (the live rows,
every column).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

# The value columns, after the key ``id``: every value is a function of an integer code
# (the sequence of the change that wrote it; -1 is null), so the reference state is a
# matrix of codes.
VALUES: list[tuple[str, pa.DataType]] = [
    ("name", pa.string()),
    ("street", pa.string()),
    ("token", pa.string()),
    ("qty", pa.int32()),
    ("rank", pa.int32()),
    ("amount", pa.int64()),
    ("counter", pa.int64()),
    ("ratio", pa.float64()),
    ("score", pa.float64()),
    ("price", pa.decimal128(12, 2)),
    ("updated_at", pa.timestamp("us", tz="UTC")),
]
NAMES = ["id"] + [n for n, _ in VALUES]
IMAGE = pa.struct([("id", pa.int64()), *VALUES])
NULL = -1


def values(codes: np.ndarray) -> list[pa.Array]:
    """The value columns for rows of codes (shape ``(n, len(VALUES))``)."""
    out = []
    for j, (name, type_) in enumerate(VALUES):
        c = codes[:, j]
        mask = c == NULL
        text = pa.array(c).cast(pa.string())
        if name == "name":
            arr = pc.binary_join_element_wise("name-", text, "")
        elif name == "street":
            arr = pc.binary_join_element_wise(
                "", text, " lorem ipsum street, flat ", pa.array(c % 97).cast(pa.string()), ""
            )
        elif name == "token":
            arr = pa.array((c * 2654435761) % (1 << 40)).cast(pa.string())
            arr = pc.binary_join_element_wise("tk-", arr, "")
        elif name == "qty":
            arr = pa.array((c % 1_000_003).astype(np.int32))
        elif name == "rank":
            arr = pa.array(((c * 7) % 99_991).astype(np.int32))
        elif name == "amount":
            arr = pa.array(c * 1000 + 17)
        elif name == "counter":
            arr = pa.array(c ^ 0x5DEECE66D)
        elif name == "ratio":
            arr = pa.array(c / 7.0)
        elif name == "score":
            arr = pa.array(c * 0.001 + 0.5)
        elif name == "price":
            arr = pa.array((c % 1_000_000_000).astype(np.int32)).cast(type_)
        else:  # updated_at
            arr = pa.array(1_700_000_000_000_000 + c * 1_000_000).cast(type_)
        out.append(pc.if_else(pa.array(mask), pa.nulls(len(c), arr.type), arr).cast(type_))
    return out


def rows_table(ids: np.ndarray, codes: np.ndarray) -> pa.Table:
    return pa.Table.from_arrays([pa.array(ids, pa.int64()), *values(codes)], names=NAMES)


@dataclass
class Workload:
    rows: int = 200_000
    fraction: float = 0.01
    pattern: str = "uniform"  # or "recent"
    warmup: int = 3
    batches: int = 20
    files: int = 0  # 0: one per 31,250 rows
    seed: int = 1
    partial: float = 0.25  # share of updates with a partial image
    late: float = 0.01  # share of changes delivered one batch late
    duplicates: float = 0.01
    late_partial: bool = True  # may a late change have a newer partial change of its key?

    @property
    def per_batch(self) -> int:
        return max(1, round(self.rows * self.fraction))

    @property
    def total_batches(self) -> int:
        return self.warmup + self.batches

    def describe(self) -> str:
        return (
            f"{self.rows:,} rows, {self.fraction * 100:g} % of keys a batch "
            f"({self.per_batch:,} changes), {self.pattern} keys, "
            f"{self.warmup} + {self.batches} batches"
        )


@dataclass
class Generated:
    """What :func:`generate` wrote: the files and the two references."""

    base: str  # Parquet of the loaded table (sorted by key)
    snapshot: str  # the same rows as typed ``read`` events
    batches: list[str]  # Parquet of each batch's events, as delivered
    events: list[int]  # events per batch
    truth: pa.Table  # the source's final rows
    plain: pa.Table  # what the hand-written MERGE's rules give
    kept: pa.Table  # the same, but an update keeps the columns its image lacks


def _pick(rng, n, alive, newest, pattern):
    """``n`` live keys (with repeats) below ``newest``."""
    out = np.empty(0, np.int64)
    while len(out) < n:
        want = (n - len(out)) * 2 + 16
        if pattern == "recent":
            hot = rng.random(want) < 0.9
            span = max(1, newest // 20)
            keys = np.where(
                hot,
                newest - 1 - rng.integers(0, span, want),
                rng.integers(0, newest, want),
            )
        else:
            keys = rng.integers(0, newest, want)
        out = np.concatenate([out, keys[alive[keys]]])
    return out[:n]


def generate(w: Workload, folder: Path) -> Generated:
    """Simulate the source table and its change log; write the loaded table, each batch's
    events as delivered, and compute both references."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(w.seed)
    nv = len(VALUES)
    capacity = w.rows + int(w.per_batch * w.total_batches * 0.25) + 16
    state = np.full((capacity, nv), NULL, np.int64)
    alive = np.zeros(capacity, bool)
    state[: w.rows] = np.arange(w.rows, dtype=np.int64)[:, None]
    alive[: w.rows] = True
    base = str(folder / "base.parquet")
    pq.write_table(rows_table(np.arange(w.rows), state[: w.rows]), base, row_group_size=1 << 20)
    snapshot = str(folder / "snapshot.parquet")
    _write_snapshot(w, state, snapshot)

    newest = w.rows
    seq = w.rows + 10  # the snapshot's sequences are 1..rows
    # Every change, in source order: (batch, seq, op, id, before codes, after codes,
    # absent mask). op: 0 insert, 1 update, 2 delete.
    log_batch, log_seq, log_op, log_id = [], [], [], []
    log_before, log_after, log_absent = [], [], []
    for b in range(w.total_batches):
        n = w.per_batch
        kinds = rng.choice(3, size=n, p=[0.20, 0.75, 0.05])
        picks = _pick(rng, n, alive, newest, w.pattern)
        for k in range(n):
            kind = kinds[k]
            absent = np.zeros(nv, bool)
            if kind == 0:
                key = newest
                newest += 1
                before = np.full(nv, NULL, np.int64)
                after = np.full(nv, seq, np.int64)
                alive[key] = True
            else:
                key = picks[k]
                if not alive[key]:  # deleted earlier in this batch: pick again
                    key = _pick(rng, 1, alive, newest, w.pattern)[0]
                before = state[key].copy()
                if kind == 1:
                    after = before.copy()
                    if rng.random() < w.partial:
                        carried = rng.choice(nv, size=int(rng.integers(1, 5)), replace=False)
                        absent[:] = True
                        absent[carried] = False
                        after[carried] = seq
                    else:
                        after[:] = seq
                    if rng.random() < 0.05:  # an explicit null
                        nulled = int(rng.integers(0, nv))
                        absent[nulled] = False
                        after[nulled] = NULL
                else:
                    after = np.full(nv, NULL, np.int64)
                    alive[key] = False
            if kind != 2:
                state[key] = after
            log_batch.append(b)
            log_seq.append(seq)
            log_op.append(kind)
            log_id.append(key)
            log_before.append(before)
            log_after.append(after)
            log_absent.append(absent)
            seq += 1

    batch = np.array(log_batch)
    seqs = np.array(log_seq, np.int64)
    ops = np.array(log_op, np.int8)
    ids = np.array(log_id, np.int64)
    befores = np.array(log_before)
    afters = np.array(log_after)
    absents = np.array(log_absent)
    # An update's after image holds null where the column is absent (what typed decode gives).
    after_img = np.where(absents, NULL, afters)

    # Delivery: a share of the changes one batch late; without late_partial only those of
    # keys with no partial update after them (a late change under a newer partial one needs
    # per-column sequences to come out right).
    deliver = batch.copy()
    late = (rng.random(len(batch)) < w.late) & (batch < w.total_batches - 1)
    if not w.late_partial:
        partial = (ops == 1) & absents.any(axis=1)
        last_partial = np.full(capacity, -1, np.int64)
        np.maximum.at(last_partial, ids[partial], seqs[partial])
        late &= last_partial[ids] < seqs
    deliver[late] += 1
    order = np.arange(len(batch))
    dup = order[rng.random(len(batch)) < w.duplicates]
    rows = np.concatenate([order, dup])
    rng.shuffle(rows)  # inside a batch, order does not matter

    paths, counts = [], []
    plain_codes = np.full((capacity, nv), NULL, np.int64)
    plain_codes[: w.rows] = np.arange(w.rows, dtype=np.int64)[:, None]
    plain_alive = np.zeros(capacity, bool)
    plain_alive[: w.rows] = True
    kept_codes = plain_codes.copy()
    kept_alive = plain_alive.copy()
    for b in range(w.total_batches):
        sel = rows[deliver[rows] == b]
        path = str(folder / f"batch-{b:03d}.parquet")
        pq.write_table(
            _events(seqs[sel], ops[sel], ids[sel], befores[sel], after_img[sel], absents[sel]),
            path,
        )
        paths.append(path)
        counts.append(len(sel))
        # The hand-written MERGE: per key the newest delivered change; a delete removes
        # the row, anything else writes its after image whole (nulls where absent) or
        # inserts it.
        newest_first = sel[np.lexsort((-seqs[sel], ids[sel]))]
        keys, first = np.unique(ids[newest_first], return_index=True)
        last = newest_first[first]
        dele = ops[last] == 2
        plain_alive[keys[dele]] = False
        up = last[~dele]
        plain_codes[ids[up]] = after_img[up]
        plain_alive[ids[up]] = True
        # ``merge+partial``: the same, but a matched update keeps the columns its image
        # lacks (a row it meets deleted is inserted, nulls where absent).
        kept_alive[keys[dele]] = False
        keep = absents[up] & kept_alive[ids[up]][:, None]
        kept_codes[ids[up]] = np.where(keep, kept_codes[ids[up]], after_img[up])
        kept_alive[ids[up]] = True

    live = np.flatnonzero(alive)
    truth = rows_table(live, state[live])
    plain_live = np.flatnonzero(plain_alive)
    plain = rows_table(plain_live, plain_codes[plain_live])
    kept_live = np.flatnonzero(kept_alive)
    kept = rows_table(kept_live, kept_codes[kept_live])
    return Generated(base, snapshot, paths, counts, truth, plain, kept)


def _write_snapshot(w: Workload, state: np.ndarray, path: str) -> None:
    """The loaded rows as typed ``read`` events (sequences 1..rows), for apply_changes'
    table; written in pieces."""
    writer = None
    step = 1_000_000
    try:
        for lo in range(0, w.rows, step):
            ids = np.arange(lo, min(w.rows, lo + step))
            n = len(ids)
            t = _events(
                ids + 1,
                np.full(n, 3, np.int8),
                ids,
                np.full((n, len(VALUES)), NULL, np.int64),
                state[ids],
                np.zeros((n, len(VALUES)), bool),
            )
            if writer is None:
                writer = pq.ParquetWriter(path, t.schema)
            writer.write_table(t)
    finally:
        if writer is not None:
            writer.close()


OP_NAMES = np.array(["insert", "update", "delete", "read"])


def _events(seqs, ops, ids, befores, afters, absents) -> pa.Table:
    """Typed events (the schema of typed ``decode``, cdc_decode.typed_event_schema)."""
    from cdc_decode._typed import typed_event_schema

    schema = typed_event_schema(pa.schema([("id", pa.int64()), *VALUES]))
    n = len(seqs)
    dele = ops == 2
    has_before = (ops == 1) | dele
    before = pa.StructArray.from_arrays(
        [pa.array(ids), *values(befores)], fields=list(IMAGE), mask=pa.array(~has_before)
    )
    after = pa.StructArray.from_arrays(
        [pa.array(ids), *values(afters)], fields=list(IMAGE), mask=pa.array(dele)
    )
    names = np.array([n for n, _ in VALUES], dtype=object)
    absent = pa.array([None if d else list(names[a]) for d, a in zip(dele, absents, strict=True)])
    cols = {
        "format": pa.array(["bench"] * n),
        "op": pa.array(OP_NAMES[ops]),
        "source_db": pa.array(["shop"] * n),
        "source_table": pa.array(["items"] * n),
        "event_time": pa.array(1_750_000_000_000_000 + seqs * 1000).cast(
            schema.field("event_time").type
        ),
        "sequence": pa.array([int(s).to_bytes(8, "big") for s in seqs], pa.binary()),
        "primary_key": pa.array([["id"]] * n, pa.list_(pa.string())),
        "before": before,
        "after": after,
        "after_absent": absent,
    }
    arrays = [cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


# --- Spark side -------------------------------------------------------------------------


def _apply_kwargs() -> dict:
    """apply_changes' options for this workload: late changes are expected, not warned."""
    from cdc_decode import spark as cdc_spark

    params = inspect.signature(cdc_spark.apply_changes).parameters
    return {"on_stale": "ignore"} if "on_stale" in params else {}


def per_column_sequences() -> bool:
    """Whether apply_changes keeps a sequence per column (a late partial image is exact)."""
    return bool(_apply_kwargs())


def load_sorted(spark, frame, path: str, files: int, properties: dict | None = None) -> None:
    """Write ``frame`` as a Delta table at ``path`` in ``files`` files sorted by key."""
    from delta.tables import DeltaTable

    sorted_ = frame.repartitionByRange(files, "id").sortWithinPartitions("id")
    if properties:
        builder = DeltaTable.create(spark).location(path).addColumns(frame.schema)
        for k, v in properties.items():
            builder = builder.property(k, v)
        builder.execute()
        sorted_.write.format("delta").mode("append").save(path)
    else:
        sorted_.write.format("delta").mode("overwrite").save(path)


class Contender:
    """One way of keeping a table equal to its source; ``apply`` takes one batch."""

    name = ""
    live_filter = None  # a SQL condition selecting the live rows
    reference = "plain"  # the Generated table its final table must equal

    def build(self, spark, gen: Generated, path: str, files: int) -> None:
        raise NotImplementedError

    def apply(self, spark, events, path: str) -> None:
        raise NotImplementedError


class ApplyChanges(Contender):
    """``apply_changes`` as it is (its tables have deletion vectors, a small batch is
    resolved against the table's rows and broadcast into a MERGE that sets them);
    ``cow``: on a table made without deletion vectors (copy-on-write), ``nobroadcast``:
    every batch written by the MERGE of the rules' clauses, not broadcast (these two are
    the apply path before either);
    ``compiled``: every MERGE and fold compiled (``INTERPRET_BYTES`` and
    ``FOLD_INTERPRET_BYTES`` 0); ``shuffled``: a small batch shuffled by key before its
    fold (``ONE_TASK_BYTES`` 0), as before it was folded in one task; ``dv``: deletion
    vectors enabled after the load, ``nomat``: with ``merge.materializeSource=none``
    around the call; ``cluster``: the table liquid clustered by the key after the load
    (``cluster_by=["id"]`` of a table made by ``apply_changes``), ``optimize``:
    ``OPTIMIZE`` after every :data:`OPTIMIZE_EVERY` batches, timed with the batch (a
    clustered table is clustered by it, the other compacted); ``nowarm``: the table's
    state computed by the MERGE, not while the batch is folded (``WARM_AHEAD`` off);
    ``resolved``: a small batch resolved against the table's rows whatever the table's size
    (``RESOLVE_BYTES`` 0); ``nobsource``: the MERGE's held source not broadcast
    (``BROADCAST_SOURCE_ROWS`` -1)."""

    OPTIMIZE_EVERY = 4

    live_filter = "NOT _cdc_deleted"
    reference = "truth"
    LOAD_WHOLE = 1_000_000
    """Larger snapshots: apply_changes loads a sample, the rest is appended like it."""
    SAMPLE = 20_000

    def __init__(self, options: set[str] = frozenset()):
        self.options = set(options)
        self.name = "+".join(["apply_changes", *sorted(options)])

    def build(self, spark, gen, path, files):

        snapshot = spark.read.parquet(gen.snapshot)
        default = "spark.databricks.delta.properties.defaults.enableDeletionVectors"
        if "cow" in self.options:
            spark.conf.set(default, "false")
        try:
            self._load(spark, snapshot, path)
        finally:
            if "cow" in self.options:
                spark.conf.unset(default)
        # apply_changes' MERGE writes in hash order: rewrite sorted by key, as the other
        # tables are loaded (the table's properties and columns stay).
        frame = spark.read.format("delta").load(path)
        sorted_ = frame.repartitionByRange(files, "id").sortWithinPartitions("id")
        sorted_.localCheckpoint().write.format("delta").mode("overwrite").save(path)
        if "dv" in self.options:
            spark.sql(
                f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableDeletionVectors = true)"
            )
        if "cluster" in self.options:
            spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY (id)")
            spark.sql(f"OPTIMIZE delta.`{path}`")
        self.calls = 0

    def _load(self, spark, snapshot, path):
        from cdc_decode import spark as cdc_spark

        if snapshot.count() <= self.LOAD_WHOLE:
            cdc_spark.apply_changes(snapshot, path, **_apply_kwargs())
        else:
            try:
                _load_like(spark, snapshot, path, self.SAMPLE)
            except RuntimeError as e:
                print(f"{e}", flush=True)
                shutil.rmtree(path, ignore_errors=True)
                cdc_spark.apply_changes(snapshot, path, **_apply_kwargs())

    def apply(self, spark, events, path):
        from cdc_decode import spark as cdc_spark
        from cdc_decode.spark import apply as apply_module

        conf = "spark.databricks.delta.merge.materializeSource"
        if "nomat" in self.options:
            spark.conf.set(conf, "none")
        from cdc_decode.spark._tables import delta as delta_module

        broadcast = apply_module.BROADCAST_KEYS
        interpret = apply_module.FOLD_INTERPRET_BYTES, delta_module.INTERPRET_BYTES
        one_task = apply_module.ONE_TASK_BYTES
        if "nobroadcast" in self.options:
            apply_module.BROADCAST_KEYS = -1
        if "shuffled" in self.options:
            apply_module.ONE_TASK_BYTES = 0
        if "compiled" in self.options:
            apply_module.FOLD_INTERPRET_BYTES = delta_module.INTERPRET_BYTES = 0
        warm = apply_module.WARM_AHEAD
        if "nowarm" in self.options:
            apply_module.WARM_AHEAD = False
        resolve_bytes = apply_module.RESOLVE_BYTES
        bsource = delta_module.BROADCAST_SOURCE_ROWS
        if "nobsource" in self.options:
            delta_module.BROADCAST_SOURCE_ROWS = -1
        if "resolved" in self.options:
            apply_module.RESOLVE_BYTES = 0
        try:
            cdc_spark.apply_changes(events, path, **_apply_kwargs())
        finally:
            apply_module.BROADCAST_KEYS = broadcast
            apply_module.WARM_AHEAD = warm
            apply_module.RESOLVE_BYTES = resolve_bytes
            delta_module.BROADCAST_SOURCE_ROWS = bsource
            apply_module.ONE_TASK_BYTES = one_task
            apply_module.FOLD_INTERPRET_BYTES, delta_module.INTERPRET_BYTES = interpret
            if "nomat" in self.options:
                spark.conf.unset(conf)
        self.calls += 1
        if "optimize" in self.options and self.calls % self.OPTIMIZE_EVERY == 0:
            spark.sql(f"OPTIMIZE delta.`{path}`")


def _load_like(spark, snapshot, path: str, sample: int) -> None:
    """Load a large snapshot of ``read`` events the way apply_changes would, faster:
    apply_changes loads the first ``sample`` keys (creating the table, its properties and
    bookkeeping columns); each bookkeeping column of those rows must then be one of the
    event's ``sequence``, ``event_time``, ``false`` or null, and the other keys' rows are
    appended with the same rule. Raises when the sample's rows follow no such rule."""
    from pyspark.sql import functions as F

    from cdc_decode import spark as cdc_spark

    cdc_spark.apply_changes(snapshot.where(F.col("after.id") < sample), path, **_apply_kwargs())
    table = spark.read.format("delta").load(path)
    events = snapshot.select(
        "after.*", F.col("sequence").alias("_e_seq"), F.col("event_time").alias("_e_time")
    )
    joined = table.alias("t").join(events.alias("e"), "id")
    rules = {}
    for f in table.schema.fields:
        if f.name in NAMES:
            continue
        col = F.col(f"t.`{f.name}`")
        types = dict(events.dtypes)
        candidates = [F.lit(None).cast(f.dataType)]
        if f.dataType.simpleString() == types["_e_seq"]:
            candidates.append(F.col("_e_seq"))
        if f.dataType.simpleString() == types["_e_time"]:
            candidates.append(F.col("_e_time"))
        if f.dataType.simpleString() == "boolean":
            candidates.append(F.lit(False))
        for value in candidates:
            # A map column (the per-column sequences) can only be null here: maps have no
            # equality in Spark.
            differs = col.isNotNull() if f.dataType.typeName() == "map" else ~col.eqNullSafe(value)
            if not joined.where(differs).limit(1).count():
                rules[f.name] = value
                break
        else:
            raise RuntimeError(f"apply_changes' column {f.name} follows no rule: load whole")
    rest = events.where(F.col("id") >= sample).select(
        *[
            F.col(f"`{f.name}`") if f.name in NAMES else rules[f.name].alias(f.name)
            for f in table.schema.fields
        ]
    )
    rest.write.format("delta").mode("append").save(path)


class HandMerge(Contender):
    """row_number() + one MERGE, and Delta's options around it."""

    def __init__(self, options: set[str]):
        self.options = options
        self.name = "+".join(["merge", *sorted(options)])
        self.reference = "kept" if "partial" in options else "plain"

    def build(self, spark, gen, path, files):
        props = {"delta.enableDeletionVectors": "true"} if "dv" in self.options else None
        load_sorted(spark, spark.read.parquet(gen.base), path, files, props)

    def apply(self, spark, events, path):
        from apply_bench import newest_per_key, plain_merge
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        last = newest_per_key(events, absent="partial" in self.options)
        on = "t.id = s.id"
        if "ranges" in self.options or "split" in self.options:
            last = last.localCheckpoint()  # read once: the keys' ranges and the MERGE(s)
        if "ranges" in self.options:
            keys = [r[0] for r in last.select("id").orderBy("id").collect()]
            on += " AND " + key_ranges("t.id", keys)
        if "broadcast" in self.options:
            last = F.broadcast(last)
        table = DeltaTable.forPath(spark, path).alias("t")
        cols = {c: f"s.`{c}`" for c in NAMES}
        conf = "spark.databricks.delta.merge.materializeSource"
        if "nomat" in self.options:
            spark.conf.set(conf, "none")
        try:
            if "split" in self.options:
                (
                    table.merge(last.alias("s"), on)
                    .whenMatchedDelete(condition="s.op = 'delete'")
                    .whenMatchedUpdate(set=cols)
                    .execute()
                )
                (
                    DeltaTable.forPath(spark, path)
                    .alias("t")
                    .merge(last.alias("s"), on)
                    .whenNotMatchedInsert(condition="s.op != 'delete'", values=cols)
                    .execute()
                )
            else:
                plain_merge(table, last, on, NAMES, keep_absent="partial" in self.options)
        finally:
            if "nomat" in self.options:
                spark.conf.unset(conf)


def key_ranges(column: str, keys: list[int], cap: int = 64) -> str:
    """``column`` within the sorted ``keys``' ranges: at most ``cap`` ranges, cut at the
    largest gaps, as an OR that Delta's file skipping reads (an IN list becomes one
    [min, max] range there)."""
    if not keys:
        return "FALSE"
    gaps = np.diff(np.asarray(keys, np.int64))
    cuts = np.sort(np.argsort(gaps)[::-1][: cap - 1]) if len(gaps) else np.array([], int)
    cuts = [c for c in cuts if gaps[c] > 1]
    lo = 0
    parts = []
    for c in [*cuts, len(keys) - 1]:
        a, b = keys[lo], keys[c]
        parts.append(f"{column} = {a}" if a == b else f"{column} BETWEEN {a} AND {b}")
        lo = c + 1
    return "(" + " OR ".join(parts) + ")"


def contender(spec: str) -> Contender:
    parts = spec.split("+")
    options = {"dv", "nomat", "cow", "nobroadcast", "cluster", "optimize", "compiled", "shuffled",
               "nowarm", "resolved", "nobsource"}  # fmt: skip
    if parts[0] == "apply_changes" and set(parts[1:]) <= options:
        return ApplyChanges(set(parts[1:]))
    if parts[0] != "merge" or not set(parts[1:]) <= {
        "dv",
        "broadcast",
        "ranges",
        "split",
        "nomat",
        "partial",
    }:
        raise SystemExit(f"unknown contender {spec!r}")
    return HandMerge(set(parts[1:]))


METRICS = (
    "numTargetFilesRemoved",
    "numTargetFilesAdded",
    "numTargetDeletionVectorsAdded",
    "numTargetRowsCopied",
    "numTargetRowsUpdated",
    "numTargetRowsInserted",
    "numTargetRowsDeleted",
    "scanTimeMs",
    "rewriteTimeMs",
    "materializeSourceTimeMs",
    "executionTimeMs",
)


def merge_metrics(spark, path: str, since: int) -> dict[str, int]:
    """Delta's operation metrics of the MERGEs committed after version ``since``, summed."""
    from delta.tables import DeltaTable

    out: dict[str, int] = {}
    rows = DeltaTable.forPath(spark, path).history().where(f"version > {since}").collect()
    for row in rows:
        if row["operation"] != "MERGE":
            continue
        for k, v in (row["operationMetrics"] or {}).items():
            if k in METRICS:
                out[k] = out.get(k, 0) + int(v)
        out["commits"] = out.get("commits", 0) + 1
    return out


def version(spark, path: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history(1).first()["version"]


class ScanFiles:
    """The files each MERGE read after file skipping (Delta's SQL metric "number of target
    files after skipping", not in the table history), from the Spark UI's REST API."""

    def __init__(self, spark):
        self.url = spark.sparkContext.uiWebUrl
        self.app = spark.sparkContext.applicationId
        self.seen = -1
        self.files_read()

    def files_read(self) -> int:
        """Files MERGEs read since the last call (0 without the UI); the SQL queries run
        since then, with their seconds, are in ``self.queries``."""
        self.queries: list[tuple[str, float]] = []
        if not self.url:
            return 0
        query = f"sql?details=true&planDescription=false&offset={self.seen + 1}&length=100000"
        with urllib.request.urlopen(f"{self.url}/api/v1/applications/{self.app}/{query}") as r:
            queries = json.load(r)
        total = 0
        for q in queries:
            self.seen = max(self.seen, q["id"])
            what = re.sub(r"\d[\d,.]*", "N", q.get("description", ""))[:90]
            self.queries.append((what, q.get("duration", 0) / 1000))
            for node in q.get("nodes", []):
                if "MergeIntoCommand" not in node["nodeName"]:
                    continue
                for m in node.get("metrics", []):
                    if m["name"] == "number of target files after skipping":
                        total += int(str(m["value"]).replace(",", ""))
        return total


def _sums(df) -> tuple[int, str]:
    """Rows and an order-free checksum of every column."""
    from pyspark.sql import functions as F

    row = df.select(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*[F.col(c) for c in NAMES]).cast("decimal(38,0)")).alias("h"),
    ).first()
    return row["n"], str(row["h"] or 0)


def checksum(df, live_filter: str | None) -> tuple[int, str, float]:
    """Live rows of a table read (``df``), an order-free checksum of every column, and the
    seconds the read took."""
    if live_filter:
        df = df.where(live_filter)
    started = time.perf_counter()
    n, h = _sums(df)
    return n, h, time.perf_counter() - started


def reference_checksum(spark, table: pa.Table) -> tuple[int, str]:
    return _sums(spark.createDataFrame(table))


def differences(spark, df, live_filter: str | None, table: pa.Table, show: int = 5):
    """Rows of a table read (``df``) not in the reference and the other way round (a
    few of each)."""
    if live_filter:
        df = df.where(live_filter)
    df = df.select(*NAMES)
    ref = spark.createDataFrame(table)
    extra = df.exceptAll(ref)
    missing = ref.exceptAll(df)
    return (
        extra.count(),
        missing.count(),
        extra.orderBy("id").limit(show).collect(),
        missing.orderBy("id").limit(show).collect(),
    )


def compilations(spark) -> int:
    """Classes the driver's JVM has compiled from generated code: the misses of Spark's
    cache of compiled code (the executors of ``local`` mode share the JVM)."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return metrics.METRIC_COMPILATION_TIME().getCount()


@dataclass
class Outcome:
    name: str
    seconds: list[float] = field(default_factory=list)
    metrics: dict[str, int] = field(default_factory=dict)
    files_read: int = 0
    read_seconds: float = 0.0
    files: int = 0
    bytes: int = 0
    ok: bool = False
    note: str = ""
    queries: dict[str, float] = field(default_factory=dict)  # SQL query seconds by kind
    compiled: int = 0  # classes Spark compiled (its code cache's misses) in measured batches


def run(spark, w: Workload, specs: list[str], work: Path, rounds: int = 1, log=print) -> dict:
    """Generate, build every contender's table, apply the batches taking turns, check.
    Returns the best round of each contender and whether all matched their reference."""
    started = time.perf_counter()
    gen = generate(w, work / "data")
    log(
        f"generated {w.describe()}: {sum(gen.events):,} events in "
        f"{time.perf_counter() - started:.1f} s"
    )
    contenders = [contender(s) for s in specs]
    files = w.files or max(1, w.rows // 31_250)
    bases = {}
    for c in contenders:
        base = str(work / "base" / c.name)
        t = time.perf_counter()
        c.build(spark, gen, base, files)
        bases[c.name] = base
        log(f"loaded {c.name}: {time.perf_counter() - t:.1f} s")
    wanted = {"truth"} | {c.reference for c in contenders}
    references = {name: reference_checksum(spark, getattr(gen, name)) for name in wanted}
    scans = ScanFiles(spark)

    best: dict[str, Outcome] = {}
    for r in range(rounds):
        paths = {}
        for c in contenders:
            paths[c.name] = str(work / f"round-{r}" / c.name)
            shutil.copytree(bases[c.name], paths[c.name])
        outcomes = {c.name: Outcome(c.name) for c in contenders}
        start_version = {}
        took: dict[str, float] = {}
        for b, batch in enumerate(gen.batches):
            measured = b >= w.warmup
            turn = b % len(contenders)
            for c in contenders[turn:] + contenders[:turn]:
                if measured and c.name not in start_version:
                    start_version[c.name] = version(spark, paths[c.name])
                scans.files_read()
                classes = compilations(spark)
                t = time.perf_counter()
                c.apply(spark, spark.read.parquet(batch), paths[c.name])
                took[c.name] = time.perf_counter() - t
                read = scans.files_read()
                if measured:
                    outcomes[c.name].seconds.append(took[c.name])
                    outcomes[c.name].compiled += compilations(spark) - classes
                    outcomes[c.name].files_read += read
                    for what, secs in scans.queries:
                        q = outcomes[c.name].queries
                        q[what] = q.get(what, 0.0) + secs
            log(
                f"round {r + 1} batch {b + 1}/{len(gen.batches)}"
                f"{'' if measured else ' (warm-up)'}: "
                + ", ".join(f"{c.name} {took[c.name]:.2f} s" for c in contenders)
            )
        for c in contenders:
            o = outcomes[c.name]
            o.metrics = merge_metrics(spark, paths[c.name], start_version.get(c.name, 0))
            written = spark.read.format("delta").load(paths[c.name])
            n, h, o.read_seconds = checksum(written, c.live_filter)
            detail = spark.sql(f"DESCRIBE DETAIL delta.`{paths[c.name]}`").first()
            o.files, o.bytes = detail["numFiles"], detail["sizeInBytes"]
            o.ok = (n, h) == references[c.reference]
            if c.reference != "truth" and (n, h) != references["truth"]:
                extra, missing, _, _ = differences(spark, written, c.live_filter, gen.truth, 0)
                o.note = f"{max(extra, missing):,} rows differ from the source"
            if not o.ok:
                ref = getattr(gen, c.reference)
                extra, missing, ex, mi = differences(spark, written, c.live_filter, ref)
                o.note = (
                    f"DIFFERS from its reference: {extra} rows not in it, {missing} missing; "
                    f"first extra {ex[:2]}, first missing {mi[:2]}"
                )
            if c.name not in best or sum(o.seconds) < sum(best[c.name].seconds):
                best[c.name] = o
        for c in contenders:
            shutil.rmtree(paths[c.name], ignore_errors=True)
    return {"workload": w, "events": gen.events[w.warmup :], "outcomes": best}


def report(result: dict, baseline: str = "merge") -> list[str]:
    w: Workload = result["workload"]
    events = sum(result["events"])
    outs: dict[str, Outcome] = result["outcomes"]
    lines = [
        f"**{w.describe()}**, {events:,} events measured",
        "",
        "| contender | s/batch median | s/batch mean | events/s | vs merge | vs floor | "
        "files read | files removed | files added | DVs added | rows copied | read s | files | "
        "MB | check |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    base = outs.get(baseline)
    # The floor: the faster hand-written MERGE of the run (a default or a deletion-vector
    # table, whichever is faster for the workload).
    hand = [sum(o.seconds) for n, o in outs.items() if n.startswith("merge")]
    floor = min(hand) if hand else None
    for name, o in outs.items():
        total = sum(o.seconds)
        m = o.metrics
        ratio = f"{sum(base.seconds) / total:.2f}x" if base else "-"
        to_floor = f"{floor / total:.2f}x" if floor else "-"
        lines.append(
            f"| `{name}` | {statistics.median(o.seconds):.2f} | {total / len(o.seconds):.2f} | "
            f"{events / total:,.0f} | {ratio} | {to_floor} | {o.files_read:,} | "
            f"{m.get('numTargetFilesRemoved', 0):,} | {m.get('numTargetFilesAdded', 0):,} | "
            f"{m.get('numTargetDeletionVectorsAdded', 0):,} | "
            f"{m.get('numTargetRowsCopied', 0):,} | "
            f"{o.read_seconds:.2f} | {o.files:,} | {o.bytes / 1e6:.0f} | "
            f"{'equal' if o.ok else 'DIFFERS'}{'; ' + o.note if o.note else ''} |"
        )
    return lines


def profile(result: dict, top: int = 8) -> list[str]:
    """Per contender, the SQL queries its batches ran (by description, numbers left out),
    seconds per batch; nested queries (a MERGE's jobs inside the MERGE command) overlap."""
    lines = []
    for name, o in result["outcomes"].items():
        n = len(o.seconds)
        lines.append(
            f"{name}: {sum(o.seconds) / n:.2f} s a batch, {o.compiled / n:.0f} classes "
            "compiled a batch; SQL queries, s a batch:"
        )
        for what, secs in sorted(o.queries.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"    {secs / n:6.2f}  {what}")
    return lines


def workload_arguments(
    doc: str, scenarios: dict, *, batches: int, warmup: int
) -> argparse.ArgumentParser:
    """The command line of an apply benchmark: which workloads (named ``scenarios`` or one
    given by its size), how many batches, and the local Spark's cores and memory."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--scenarios", nargs="*", default=None, help=f"of {', '.join(scenarios)}")
    parser.add_argument("--rows", type=int, help="one scenario of this many rows")
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--pattern", choices=["uniform", "recent"], default="uniform")
    parser.add_argument("--batches", type=int, default=batches)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--memory", default="6g")
    return parser


SCENARIOS = {
    # name: (rows, fraction, pattern[, share of updates with a partial image])
    # A streaming micro-batch: 1,000 keys of a 20,000-row table, whole images.
    "small-20k": (20_000, 0.05, "uniform", 0.0),
    "uniform-0.1": (2_000_000, 0.001, "uniform"),
    "uniform-1": (2_000_000, 0.01, "uniform"),
    "recent-1": (2_000_000, 0.01, "recent"),
    "recent-0.1-10m": (10_000_000, 0.001, "recent"),
}


def scenario(spec: tuple) -> Workload:
    """The workload of a :data:`SCENARIOS` entry."""
    rows, fraction, pattern, *partial = spec
    return Workload(rows, fraction, pattern, **({"partial": partial[0]} if partial else {}))


def main() -> int:
    parser = workload_arguments(__doc__, SCENARIOS, batches=20, warmup=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--files", type=int, default=0)
    parser.add_argument("--contenders", nargs="*", default=["apply_changes", "merge", "merge+dv"])
    parser.add_argument("--out", help="append the Markdown tables to this file")
    parser.add_argument("--profile", action="store_true", help="print each one's SQL queries")
    args = parser.parse_args()

    from support.delta import delta_session

    late_partial = per_column_sequences()
    if args.rows:
        workloads = [Workload(args.rows, args.fraction, args.pattern)]
    else:
        names = args.scenarios or list(SCENARIOS)
        workloads = [scenario(SCENARIOS[n]) for n in names]
    for w in workloads:
        w.batches, w.warmup, w.files, w.late_partial = (
            args.batches,
            args.warmup,
            args.files,
            late_partial,
        )
    work = Path(tempfile.mkdtemp(prefix="apply-workload-"))
    failed = False
    tables = []
    try:
        # The UI's REST API gives the files each scan read (ScanFiles).
        spark = delta_session(
            work / "warehouse",
            app="apply-workload",
            master=f"local[{args.cores}]",
            memory=args.memory,
            spark__ui__enabled="true",
            spark__ui__port="0",
            spark__sql__ui__retainedExecutions="100000",
        )
        spark.conf.set("spark.sql.shuffle.partitions", str(args.cores * 2))
        for i, w in enumerate(workloads):
            result = run(spark, w, args.contenders, work / f"w{i}", args.rounds)
            lines = report(result)
            tables += lines + [""]
            print("\n".join(lines), flush=True)
            if args.profile:
                print("\n".join(profile(result)), flush=True)
            failed |= not all(o.ok for o in result["outcomes"].values())
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    note = (
        f"late changes {'may have' if late_partial else 'have no'} newer partial changes of "
        f"their key; local[{args.cores}]; load average at the end {os.getloadavg()[0]:.1f}"
    )
    print(note)
    if args.out:
        with open(args.out, "a") as f:
            f.write("\n".join(tables) + note + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
