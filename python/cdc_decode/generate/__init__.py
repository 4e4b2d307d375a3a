"""Realistic CDC streams for tests, benchmarks and the demo.

>>> from cdc_decode.generate import generate
>>> stream = generate("tencent-dts", messages=10_000, seed=1)
>>> batch = cdc_decode.decode(stream.values, "tencent-dts")
>>> assert pa.Table.from_batches([batch]).equals(stream.expected)
>>> stream.write("out/")   # values.bin, expected.arrow, final_state.json, manifest.json

One simulated MySQL server (:mod:`.source`, format-independent) runs a seeded workload;
a writer per format (:mod:`.tencent_dts`, :mod:`.datahub_blob`, :mod:`.datahub_tuple`)
turns its binlog into that format's messages and renders the events they must decode to
from its own knowledge of the values. ``datahub-tuple`` simulates one table (a TUPLE topic
maps one) and its ``Stream.values`` is a ``pyarrow.Table`` of records.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa

from .._checks import check_format
from .._schema import EVENT_SCHEMA

try:
    from . import (
        datahub_blob,
        datahub_tuple,
        datastream_avro,
        datastream_json,
        debezium_json,
        tdsql_json,
        tencent_dts,
    )
except ModuleNotFoundError as exc:  # protobuf, fastavro: the python-engine extra
    if (exc.name or "").split(".")[0] not in ("google", "fastavro", "zstandard", "cramjam"):
        raise
    raise ModuleNotFoundError(
        f"the stream generator needs {exc.name}, which is not installed: "
        "pip install 'cdc-decode[python-engine]'",
        name=exc.name,
    ) from exc
from .apply import State, apply_change, apply_events
from .database import DatabaseSource
from .shards import ShardedSource
from .source import MySQLSource
from .stream import (
    Stream,
    read_expected,
    read_final_state,
    read_records,
    read_values,
    write_values,
)

__all__ = [
    "FORMATS",
    "MySQLSource",
    "State",
    "Stream",
    "apply_change",
    "apply_events",
    "generate",
    "read_expected",
    "read_final_state",
    "read_records",
    "read_values",
    "write_values",
]

FORMATS: tuple[str, ...] = (
    tencent_dts.FORMAT,
    datahub_blob.FORMAT,
    tdsql_json.FORMAT,
    datahub_tuple.FORMAT,
    debezium_json.FORMAT,
    datastream_json.FORMAT,
    datastream_avro.FORMAT,
)
"""The formats the generator writes."""


def _events_table(rows: list[list]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in EVENT_SCHEMA]
    arrays = [
        pa.array(list(col), type=f.type) for col, f in zip(columns, EVENT_SCHEMA, strict=True)
    ]
    return pa.Table.from_arrays(arrays, schema=EVENT_SCHEMA)


def generate(
    format: str = "tencent-dts",
    *,
    messages: int = 1000,
    seed: int = 0,
    rows_per_message: int = 10,
    message_bytes: int = 3072,
    max_message_bytes: int = 64 * 1024,
    max_rows: int = 2000,
    tables: Sequence[str] | None = None,
    connector: str | None = None,
    key_changes: float = 0.0,
    table_count: int | None = None,
    start: dt.datetime | None = None,
    shards: int | None = None,
    shard_keys: str = "per-table",
) -> Stream:
    """Generate a stream of exactly ``messages`` Kafka values.

    Args:
        format: one of :data:`FORMATS`. ``datahub-blob`` sends one message per change and
            ``datahub-tuple`` one record per row image: the packing options
            (``rows_per_message``, ``message_bytes``, ``max_message_bytes``) do not apply
            to them.
        messages: how many values (multi-part parts count one each; for ``datahub-tuple``,
            records).
        seed: the same seed gives byte-identical values and equal expectations.
        rows_per_message: pack at most this many events into one message.
        message_bytes: pack at most this many bytes of entries into one message (a single
            larger entry is sent alone).
        max_message_bytes: no value is larger; a larger message is split into parts.
        max_rows: about how many rows each simulated table holds at most.
        tables: the ``db.table`` names the simulated server has, a subset of its five
            (``["shop.order_items"]``): transactions and DDL touch only those, and the final
            state holds only those. ``None`` (the default) for all five; the stream for a
            seed is then the same as without the option. ``datahub-tuple`` takes exactly
            one table (default ``shop.users``): a TUPLE topic maps one table.
        connector: ``debezium-json`` only: whose messages to write, ``"mysql"`` (the
            default), ``"oracle"`` or ``"mongodb"`` (:mod:`.debezium_json`); the stream's
            expected events, final state and primary keys are that connector's.
        key_changes: the share of updated rows whose primary key the update changes
            (:class:`.source.MySQLSource`); each format sends such an update as its source
            would (Debezium: a delete and a create at one position; Datastream: an
            UPDATE-DELETE and an UPDATE-INSERT). ``0`` (the default) changes none: the
            stream for a seed is the same as without the option.
        table_count: simulate a whole database of this many generated tables instead of
            the five (:mod:`.database`): realistic column mixes, phases of transactions
            that touch about half of the tables, and DDL mid-stream (columns added,
            widened and dropped; TDSQL's positional images get no drops). Every format but
            ``datahub-tuple`` (a topic maps one table); ``debezium-json`` with the MySQL
            connector only, written with the Connect schema on every message
            (``schemas.enable``, decimals as Connect ``Decimal`` bytes) and a Kafka key
            per message (``Stream.message_keys``). ``None`` (the default): the five tables,
            byte for byte as without the option.
        start: when the first change happens (an aware datetime); the others follow it
            as they would (the same distances), so a seed's stream differs only in its
            times. ``None`` (the default): 2024-05-01 08:00 UTC. ``make demo`` starts its
            streams so that the last change is about the moment they are made.
        shards: simulate one table split over this many databases instead of the five
            (:mod:`.shards`): ``shop_00.orders_00``, ``shop_01.orders_01`` …, the same
            columns but for one more in every fourth shard and narrower types in some.
            Every format but ``datahub-tuple``. ``None`` (the default): the five tables.
        shard_keys: with ``shards``: ``"per-table"`` (the default), each shard numbering
            its rows from 1 (the shards' keys collide), or ``"unique"``, each shard a key
            range of its own.

    Returns:
        The :class:`Stream`: values, expected events and final table state.
    """
    check_format(format, FORMATS)
    if messages < 0:
        raise ValueError("messages must not be negative")
    if connector is not None and format != debezium_json.FORMAT:
        raise ValueError(f"connector= applies to {debezium_json.FORMAT} only")
    if table_count is not None:
        if format == datahub_tuple.FORMAT:
            raise ValueError("table_count= does not apply to datahub-tuple: a topic maps one table")
        if tables is not None:
            raise ValueError("give tables= (of the five) or table_count=, not both")
        if connector not in (None, "mysql"):
            raise ValueError("table_count= writes debezium-json as the MySQL connector only")
        if key_changes:
            raise ValueError("key_changes= applies to the five tables, not table_count=")
    if shards is not None:
        if format == datahub_tuple.FORMAT:
            raise ValueError("shards= does not apply to datahub-tuple: a topic maps one table")
        if tables is not None or table_count is not None or key_changes:
            raise ValueError("shards= simulates its own tables: not with tables=, "
                             "table_count= or key_changes=")  # fmt: skip
        if connector not in (None, "mysql"):
            raise ValueError("shards= writes debezium-json as the MySQL connector only")
    if format == datahub_tuple.FORMAT:
        return _generate_tuple(messages, seed, max_rows, tables, key_changes, start)
    if shards is not None:
        source = ShardedSource(seed, shards=shards, shard_keys=shard_keys, max_rows=max_rows)
    elif table_count is not None:
        source = DatabaseSource(
            seed, table_count=table_count, max_rows=max_rows, drops=format != tdsql_json.FORMAT
        )
    else:
        source = MySQLSource(seed, max_rows=max_rows, tables=tables, key_changes=key_changes)
    if start is not None:
        source.start_at(start)
    if format == datahub_blob.FORMAT:
        render = datahub_blob.render
        values, rows = datahub_blob.write_stream(
            source,
            datahub_blob.DatahubBlobWriter(
                source, seed=seed, unsigned_text=table_count is not None
            ),
            messages,
        )
    elif format == datastream_json.FORMAT:
        render = datastream_json.render
        values, rows = datahub_blob.write_stream(
            source, datastream_json.DatastreamJsonWriter(source, seed=seed), messages
        )
    elif format == datastream_avro.FORMAT:
        render = datastream_avro.render
        values, rows = datastream_avro.write_stream(
            source,
            datastream_avro.DatastreamAvroWriter(
                source, seed=seed, rows_per_message=rows_per_message
            ),
            messages,
        )
    elif format == debezium_json.FORMAT:
        writer = debezium_json.DebeziumJsonWriter(
            source, seed=seed, connector=connector or "mysql", connect=table_count is not None
        )
        render = writer.render
        values, rows = datahub_blob.write_stream(source, writer, messages)
    elif format == tdsql_json.FORMAT:
        render = tdsql_json.render
        values, rows = datahub_blob.write_stream(
            source, tdsql_json.TdsqlJsonWriter(source, seed=seed), messages
        )
    else:
        render = tencent_dts.render
        writer = tencent_dts.TencentDtsWriter(
            source,
            seed=seed,
            rows_per_message=rows_per_message,
            message_bytes=message_bytes,
            max_message_bytes=max_message_bytes,
        )
        values, rows = tencent_dts.write_stream(source, writer, messages)
    options: dict = {
        "rows_per_message": rows_per_message,
        "message_bytes": message_bytes,
        "max_message_bytes": max_message_bytes,
        "max_rows": max_rows,
    }
    if tables is not None:
        options["tables"] = [t.qualified for t in source.tables]
    if key_changes:
        options["key_changes"] = key_changes
    if table_count is not None:
        options["table_count"] = table_count
    if shards is not None:
        options["shards"] = shards
        options["shard_keys"] = shard_keys
    if format == tdsql_json.FORMAT:
        # Names for the positional images: decode with ``columns=stream.options["columns"]``.
        options["columns"] = {t.qualified: [c.name for c in t.columns] for t in source.tables}
    final_state: State = {}
    for table in source.tables:
        if not table.rows:
            continue  # as apply_events, a table without rows is left out
        columns = {**table.dropped, **{c.name: c for c in table.columns}}
        final_state[table.qualified] = {
            tuple(render(columns[c], row[c]) for c in table.primary_key): {
                name: render(columns[name], value) for name, value in row.items()
            }
            for row in table.rows.by_key.values()
        }
    primary_keys = {t.qualified: list(t.primary_key) for t in source.tables}
    if connector not in (None, "mysql"):
        options["connector"] = connector
        final_state, primary_keys = writer.final_state(source)
    message_keys = None
    if format == debezium_json.FORMAT and table_count is not None:
        # Filler tombstones at the end have no key.
        message_keys = writer.message_keys + [None] * (len(values) - len(writer.message_keys))
    return Stream(
        format=format,
        seed=seed,
        values=values,
        expected=_events_table(rows),
        final_state=final_state,
        primary_keys=primary_keys,
        options=options,
        message_keys=message_keys,
        final_values=_final_values(source) if connector in (None, "mysql") else None,
        dropped={t.qualified: frozenset(t.dropped) for t in source.tables if t.dropped},
    )


def _final_values(source: MySQLSource) -> dict:
    """``db.table`` → (column name → its last :class:`.source.Column`, dropped ones too;
    key → row of the source's own values: the consumer's view, whose text
    ``final_state`` holds), for tests of typed conversions."""
    return {
        t.qualified: (
            {**t.dropped, **{c.name: c for c in t.columns}},
            {key: dict(row) for key, row in t.rows.by_key.items()},
        )
        for t in source.tables
        if t.rows
    }


def _generate_tuple(
    messages: int,
    seed: int,
    max_rows: int,
    tables: Sequence[str] | None,
    key_changes: float,
    start: dt.datetime | None,
) -> Stream:
    """``datahub-tuple``: one table's TUPLE topic (docs/formats/datahub-tuple.md)."""
    if isinstance(tables, str):
        tables = tables.split(",")
    tables = [datahub_tuple.DEFAULT_TABLE] if tables is None else list(dict.fromkeys(tables))
    if len(tables) != 1:
        raise ValueError(
            f"datahub-tuple simulates one table (a TUPLE topic maps one), not {len(tables)}: "
            "name it with tables=[...]"
        )
    source = MySQLSource(seed, max_rows=max_rows, tables=tables, key_changes=key_changes)
    if start is not None:
        source.start_at(start)
    writer = datahub_tuple.DatahubTupleWriter(source, seed=seed)
    records, rows, state = datahub_tuple.write_stream(source, writer, messages)
    table = writer.table
    columns = writer.columns
    final_state: State = {}
    if state:
        final_state[table.qualified] = {
            tuple(datahub_tuple.render(table.column(c), row[c]) for c in table.primary_key): {
                c.name: datahub_tuple.render(c, row.get(c.name)) for c in columns
            }
            for row in state.values()
        }
    return Stream(
        format=datahub_tuple.FORMAT,
        seed=seed,
        values=records,
        expected=_events_table(rows),
        final_state=final_state,
        primary_keys={table.qualified: list(table.primary_key)},
        options={
            "max_rows": max_rows,
            "tables": [table.qualified],
            **({"key_changes": key_changes} if key_changes else {}),
        },
    )
