"""Ground truth for metadata columns (``metadata_columns=``): each row of a synced table
holds the metadata of the newest change that wrote it, and each version of a history table
(``scd2=``) those of its change, a delete's too. The expected values come from the
messages' own events (``cdc_spark.decode``, generic, with the Kafka columns it keeps), the
newest change of each key found here by sequence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cdc_decode.generate import Stream
from cdc_decode.generate.apply import REMOVE_OPS, UPSERT_OPS

KAFKA = {"kafka_topic": "topic", "kafka_partition": "partition", "kafka_offset": "offset"}


def events_by_table(messages: Any, stream: Stream) -> dict[str, list[dict]]:
    """The row changes of each table (``db.table``) that ``messages`` (a DataFrame of the
    stream's messages, as synced) decode to, generic, each with the Kafka columns its
    message had (a multi-part set's: its last part's); times as microseconds."""
    from pyspark.sql import functions as F

    from cdc_decode import spark as cdc_spark

    options = {"columns": stream.options["columns"]} if stream.format == "tdsql-json" else {}
    events = cdc_spark.decode(messages, stream.format, **options)
    times = [F.unix_micros(c).alias(c) for c in ("event_time", "capture_time")]
    kafka = [F.col(c) if c in events.columns else F.lit(None).alias(c) for c in KAFKA.values()]
    columns = ["op", "sequence", "before", "after", "source_db", "source_schema",
               "source_table", "position", "tx_id"]  # fmt: skip
    rows = (
        events.where(F.col("op").isin(*UPSERT_OPS, *REMOVE_OPS))
        .select(*columns, *times, *kafka)
        .collect()
    )
    out: dict[str, list[dict]] = {}
    for row in rows:
        event = row.asDict()
        event["sequence"] = bytes(event["sequence"])
        names = (event["source_db"], event["source_schema"], event["source_table"])
        out.setdefault(".".join(p for p in names if p), []).append(event)
    return out


def _key(image: Mapping | None, keys: Sequence[str]) -> tuple | None:
    if image is None or not all(image.get(k) is not None for k in keys):
        return None
    return tuple(str(image[k]) for k in keys)


def _value(event: Mapping, name: str) -> Any:
    return event[KAFKA.get(name, name)]


def expected(events: Sequence[dict], keys: Sequence[str], names: Sequence[str]) -> dict:
    """Live key (its values as text) -> the metadata of the newest change that wrote it."""
    newest: dict[tuple, tuple[bytes, dict | None]] = {}

    def put(key: tuple | None, sequence: bytes, event: dict | None) -> None:
        if key is not None and (key not in newest or newest[key][0] <= sequence):
            newest[key] = (sequence, event)

    # by sequence, an upsert after a delete of the same sequence (it wins, as in the rules)
    for event in sorted(events, key=lambda e: (e["sequence"], e["op"] in UPSERT_OPS)):
        before, after = _key(event["before"], keys), _key(event["after"], keys)
        if event["op"] in REMOVE_OPS:
            put(before or after, event["sequence"], None)
            continue
        if event["op"] == "update" and before is not None and after not in (None, before):
            put(before, event["sequence"], None)  # a key change: the old key deleted
        put(after or before, event["sequence"], event)
    return {
        key: {n: _value(e, n) for n in names} for key, (_, e) in newest.items() if e is not None
    }


def _read(spark: Any, target: str, names: Sequence[str], history: bool = False) -> list[dict]:
    """The table's rows (a history's every version, else the live rows): keys as they are,
    each metadata column by its name, a time as microseconds."""
    from pyspark.sql import functions as F

    from cdc_decode import spark as cdc_spark
    from cdc_decode.spark._tables import open_table

    frame = open_table(spark, target).read() if history else cdc_spark.current_rows(spark, target)
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    meta = [
        (F.unix_micros(f"_cdc_meta_{n}") if types[f"_cdc_meta_{n}"] == "timestamp" else
         F.col(f"_cdc_meta_{n}")).alias(f"_cdc_meta_{n}")
        for n in names
    ]  # fmt: skip
    others = [F.col(f"`{c}`") for c in frame.columns if not c.startswith("_cdc_meta_")]
    return [r.asDict() for r in frame.select(*others, *meta).collect()]


def metadata_differences(
    spark: Any,
    messages: Any,
    stream: Stream,
    targets: Mapping[str, str],
    names: Sequence[str],
    *,
    history: Mapping[str, str] | None = None,
    limit: int = 10,
) -> list[str]:
    """What differs between each table's metadata columns ``names`` and the metadata of
    the newest change of each row, ``messages`` being every message synced (``history``:
    source table -> its history table, every version against its own change); empty:
    none."""
    out: list[str] = []
    by_table = events_by_table(messages, stream)
    for name, target in targets.items():
        keys = stream.primary_keys[name]
        want = expected(by_table.get(name, []), keys, names)
        got = {
            tuple(str(r[k]) for k in keys): {n: r[f"_cdc_meta_{n}"] for n in names}
            for r in _read(spark, target, names)
        }
        if got.keys() != want.keys():
            out.append(f"{name}: keys differ ({len(got)} rows, the events give {len(want)})")
        for key in sorted(got.keys() & want.keys()):
            if got[key] != want[key]:
                out.append(f"{name} {key}: metadata {got[key]}, want {want[key]}")
    for name, target in (history or {}).items():
        keys = stream.primary_keys[name]
        # A version is its key's change at its sequence (one statement may change several
        # keys at one sequence); an upsert over a delete, as the rules order them.
        by_version: dict[tuple, dict] = {}
        for event in sorted(by_table.get(name, []), key=lambda e: e["op"] in UPSERT_OPS):
            before, after = _key(event["before"], keys), _key(event["after"], keys)
            for key in {before, after} - {None}:
                by_version[(key, event["sequence"])] = event
        versions = _read(spark, target, names, history=True)
        if not versions:
            out.append(f"{name}: no history")
        for row in versions:
            at = (tuple(str(row[k]) for k in keys), bytes(row["_cdc_start_sequence"]))
            event = by_version.get(at)
            if event is None:
                out.append(f"{name}: a version of no change ({at!r})")
                continue
            have = {n: row[f"_cdc_meta_{n}"] for n in names}
            want_version = {n: _value(event, n) for n in names}
            if have != want_version:
                out.append(f"{name} history {at}: metadata {have}, want {want_version}")
            deleted = row["_cdc_deleted"]
            if event["op"] not in ((*REMOVE_OPS, "update") if deleted else UPSERT_OPS):
                out.append(f"{name} history: a {event['op']} gave a version deleted={deleted}")
    return out[:limit]
