"""Structured Streaming from Kafka: decode every micro-batch, and join Tencent DTS multi-part
sets that a micro-batch boundary cuts, across micro-batches and restarts.

>>> from cdc_decode import spark as cdc_spark
>>> kafka = (
...     spark.readStream.format("kafka")
...     .option("kafka.bootstrap.servers", bootstrap)
...     .option("subscribe", "dts")
...     .option("includeHeaders", "true")
...     .load()
... )
>>> events = cdc_spark.decode_stream(kafka, "tencent-dts")
>>> events.writeStream.option("checkpointLocation", "ckpt").foreachBatch(write).start()

Every format but ``tencent-dts`` has no message that spans records, so a micro-batch is
decoded on its own: :func:`decode_stream` is :func:`cdc_decode.spark.decode` there.

Tencent DTS splits a large ``Entries`` over several Kafka records (a multi-part set), all in
one partition, and a micro-batch may end between two of its parts. ``decode_stream`` keeps
the parts still open at the end of a micro-batch as **keyed state** in Spark's state store
(``applyInPandasWithState``, one key per topic-partition), so they are part of the query's
checkpoint: the next micro-batch (after a restart too) joins them with the parts that
follow. docs/streaming.md says what this guarantees and what it costs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._checks import check_engine, check_format, check_mode, check_unavailable_value
from .._limits import Limits, as_limits
from .decoding import (
    DecodeAccounting,
    _checked_keep,
    _is_kafka_headers,
    _join,
    _reassembly_keys,
    _Typed,
    decode,
    spark_event_schema,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["decode_stream"]

MULTIPART_FORMATS: tuple[str, ...] = ("tencent-dts",)
"""The formats whose messages may span Kafka records (and so micro-batches)."""

# Largest Arrow IPC blob one row carries between the stages (a batch is sliced below it).
_BLOB_BYTES = 32 * 1024 * 1024
# Event rows per output blob.
_OUT_ROWS = 10_000
_PACKED = "topic string, partition int, first_offset long, data binary"
_STATE = "held binary, parts long"


def decode_stream(
    df: DataFrame,
    format: str,
    *,
    value_col: str | None = None,
    keep: Sequence[str] | None = None,
    mode: str = "permissive",
    engine: str = "native",
    columns: Mapping[str, Sequence[str]] | None = None,
    schema: Any = None,
    tables: Mapping[str, Any] | None = None,
    limits: Limits | None = None,
    accounting: DecodeAccounting | None = None,
    event_columns: Sequence[str] | None = None,
    unavailable_value: str | None = None,
) -> DataFrame | dict[str | None, DataFrame]:
    """Decode a streaming DataFrame from Spark's Kafka source into change events.

    For ``tencent-dts`` the multi-part sets open at the end of a micro-batch are held, per
    topic-partition, in the query's state store and joined with their next parts in a
    later micro-batch, also after the query is stopped or killed and started again from its
    checkpoint. The result is the same as :func:`cdc_decode.spark.decode` gives for the
    same records read as one batch, wherever the micro-batches are cut. For the other
    formats this is :func:`cdc_decode.spark.decode` itself.

    The ``tencent-dts`` plan: the records of each Kafka partition (as Arrow IPC blobs)
    go through one shuffle to ``applyInPandasWithState`` grouped by ``topic`` and
    ``partition``, which decodes them after the parts held from before and holds the parts
    of the sets still open; the state operator has ``spark.sql.shuffle.partitions``
    partitions (fixed by the first run of a checkpoint: set it to about the number of
    Kafka partitions, or the cores, before the first start). Use an output mode of
    ``append`` (``foreachBatch`` and the file sinks do).

    Args:
        df: Spark's Kafka source (``readStream.format("kafka")``; ``includeHeaders`` to
            key DTS sets by the ``ShardId`` header too). ``tencent-dts`` needs its
            ``topic``, ``partition`` and ``offset``. A batch DataFrame is given to
            :func:`cdc_decode.spark.decode` (a partition's decoder sees all its records).
        format: one of :data:`cdc_decode.FORMATS`.
        value_col: as :func:`cdc_decode.spark.decode`.
        keep: as :func:`cdc_decode.spark.decode` (default: ``topic``, ``partition``,
            ``offset``, ``timestamp``).
        mode: ``"permissive"``, ``"dropmalformed"`` or ``"failfast"``. In ``failfast`` the
            query stops with a :class:`cdc_decode.DecodeError` naming the topic, partition
            and offset of the first bad record.
        engine: ``"native"`` or ``"python"``.
        columns: as :func:`cdc_decode.spark.decode` (``tdsql-json``).
        schema: typed mode, as :func:`cdc_decode.spark.decode`.
        tables: multi-table typed mode, as :func:`cdc_decode.spark.decode`.
        limits: as :func:`cdc_decode.spark.decode`.
        accounting: a :class:`cdc_decode.spark.DecodeAccounting`. Call its ``reset()`` at
            the start of each ``foreachBatch`` and read ``value()`` after the batch is
            written: the micro-batch's counts. For ``tencent-dts`` its ``messages`` are the
            micro-batch's records and its ``pending`` the change in parts held (negative
            when the batch completes sets held before), so every micro-batch has
            ``messages == decoded + errors + pending``, and the sums over all micro-batches
            have it with ``pending`` = the parts held now.
        event_columns: as :func:`cdc_decode.spark.decode`.
        unavailable_value: ``debezium-json`` only, as :func:`cdc_decode.spark.decode`.

    Returns:
        As :func:`cdc_decode.spark.decode`: the kept columns, then the event columns (a
        dict of DataFrames with ``tables=``). The events of a set completed across
        micro-batches carry the kept columns of its last part.

    Raises:
        ValueError: as :func:`cdc_decode.spark.decode`, or for ``tencent-dts`` an input
            without ``topic``, ``partition`` and ``offset`` columns.

    Example:
        >>> events = cdc_spark.decode_stream(kafka, "tencent-dts")
        >>> def write(batch, batch_id):
        ...     batch.write.mode("overwrite").parquet(f"out/batch_id={batch_id}")
        >>> events.writeStream.option("checkpointLocation", "ckpt").foreachBatch(write).start()
    """
    options = {
        "value_col": value_col,
        "keep": keep,
        "mode": mode,
        "engine": engine,
        "columns": columns,
        "schema": schema,
        "tables": tables,
        "limits": limits,
        "accounting": accounting,
        "event_columns": event_columns,
    }
    if check_unavailable_value(format, unavailable_value) is not None:
        options["unavailable_value"] = unavailable_value
    if format not in MULTIPART_FORMATS or not df.isStreaming:
        # No message spans records, or a batch: each partition's decoder sees all of it.
        return decode(df, format, **options)
    return _decode_multipart(df, format, **options)


def _decode_multipart(
    df: DataFrame,
    format: str,
    *,
    value_col: str | None,
    keep: Sequence[str] | None,
    mode: str,
    engine: str,
    columns: Mapping[str, Sequence[str]] | None,
    schema: Any,
    tables: Mapping[str, Any] | None,
    limits: Limits | None,
    accounting: DecodeAccounting | None,
    event_columns: Sequence[str] | None,
) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.types import StructType

    check_format(format)
    check_mode(mode)
    check_engine(engine)
    if columns is not None:
        raise ValueError(f"columns= is for tdsql-json, not {format}")
    typed = _Typed(schema, tables)
    event_columns = typed.checked_event_columns(event_columns)
    limits = as_limits(limits)
    if accounting is not None and not isinstance(accounting, DecodeAccounting):
        raise TypeError(
            f"accounting must be a cdc_spark.DecodeAccounting, not {type(accounting).__name__}"
        )
    fields = {f.name: f for f in df.schema.fields}
    missing = [c for c in ("topic", "partition", "offset") if c not in fields]
    if missing:
        raise ValueError(
            f"decode_stream({format!r}) joins multi-part sets per Kafka partition and needs "
            f"the Kafka source's topic, partition and offset columns; missing: "
            f"{', '.join(missing)}"
        )
    if value_col is None:
        value_col = "value"
    if value_col not in fields:
        raise ValueError(
            f"value column {value_col!r} is not in the DataFrame (columns: {', '.join(df.columns)})"
        )
    if fields[value_col].dataType.typeName() not in ("binary", "string"):
        raise ValueError(
            f"value column {value_col!r} must be binary or string, not "
            f"{fields[value_col].dataType.simpleString()}"
        )
    keep = _checked_keep(df, fields, keep)
    has_headers = "headers" in fields and _is_kafka_headers(fields["headers"].dataType)
    needed = [value_col, *keep]
    for extra in ("topic", "partition", "offset") + (("headers",) if has_headers else ()):
        if extra not in needed:
            needed.append(extra)
    events = spark_event_schema(typed.arrow_schema)
    if event_columns is not None:
        by_name = {f.name: f for f in events.fields}
        events = StructType([by_name[n] for n in event_columns])
    out_schema = StructType([fields[c] for c in keep] + list(events.fields))
    reporter = None if accounting is None else _GroupReporter(accounting)
    job = _Job(
        format=format,
        mode=mode,
        engine=engine,
        value_col=value_col,
        keep=keep,
        has_headers=has_headers,
        schema=typed.schema,
        tables=typed.tables,
        limits=limits,
        event_columns=event_columns,
        reporter=reporter,
    )
    packed = df.select(*needed).mapInArrow(_pack, _PACKED)
    decoded = packed.groupBy("topic", "partition").applyInPandasWithState(
        job.run, _PACKED, _STATE, "append", GroupStateTimeout.NoTimeout
    )
    return typed.split(decoded.mapInArrow(_unpack, out_schema), keep)


class _GroupReporter:
    """Reports one topic-partition's counts of one micro-batch to a DecodeAccounting's
    accumulator, keyed by the decode call and the topic-partition (a retried task replaces
    its earlier report)."""

    def __init__(self, accounting: DecodeAccounting) -> None:
        import uuid

        self.accumulator = accounting._accumulator
        self.call = uuid.uuid4().hex

    def report(self, topic: str, partition: int, stats: dict[str, int]) -> None:
        self.accumulator.add({(self.call, f"{topic}/{partition}"): stats})


def _blob(table: pa.Table | pa.RecordBatch) -> bytes:
    """An Arrow IPC stream of ``table``."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def _read_blob(data: bytes) -> pa.Table:
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def _pack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 1 (``mapInArrow``): each Arrow batch of Kafka records becomes a row per
    topic-partition, ``(topic, partition, first offset, IPC blob of the records)``, so the
    shuffle moves a few large binary values instead of every record through pandas."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = pa.schema(
        [
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("first_offset", pa.int64()),
            ("data", pa.binary()),
        ]
    )
    for batch in batches:
        if batch.num_rows == 0:
            continue
        topics = pc.unique(batch.column("topic"))
        partitions = pc.unique(batch.column("partition"))
        if len(topics) == 1 and len(partitions) == 1:
            groups = [batch]
        else:  # never from Spark's Kafka source (one topic-partition per Spark partition)
            table = pa.Table.from_batches([batch])
            groups = []
            for key in table.group_by(["topic", "partition"]).aggregate([]).to_pylist():
                mask = pc.and_(
                    pc.equal(table.column("topic"), key["topic"]),
                    pc.equal(table.column("partition"), key["partition"]),
                )
                groups.extend(table.filter(mask).combine_chunks().to_batches())
        rows: list[tuple] = []
        for group in groups:
            step = max(1, group.num_rows * _BLOB_BYTES // max(group.nbytes, 1))
            for at in range(0, group.num_rows, step):
                piece = group.slice(at, step)
                rows.append(
                    (
                        piece.column("topic")[0].as_py(),
                        piece.column("partition")[0].as_py(),
                        piece.column("offset")[0].as_py(),
                        _blob(piece),
                    )
                )
        columns = list(zip(*rows, strict=True))
        yield pa.RecordBatch.from_arrays(
            [pa.array(list(col), type=f.type) for col, f in zip(columns, schema, strict=True)],
            schema=schema,
        )


def _unpack(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 3 (``mapInArrow``): the event blobs back into rows."""
    for batch in batches:
        for data in batch.column("data").to_pylist():
            yield from _read_blob(data).to_batches()


class _Job:
    """Stage 2: the ``applyInPandasWithState`` function, closed over plain values."""

    def __init__(self, **options: Any) -> None:
        self.__dict__.update(options)

    def run(self, key: tuple, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[Any]:
        """One topic-partition's records of one micro-batch, after the parts it held."""
        import pandas as pd
        import pyarrow as pa

        import cdc_decode

        topic, partition = str(key[0]), int(key[1])
        blobs: list[tuple[int, bytes]] = []
        for frame in frames:
            blobs.extend(zip(frame["first_offset"].tolist(), frame["data"].tolist(), strict=True))
        blobs.sort(key=lambda b: b[0])
        pieces = [_read_blob(data) for _, data in blobs]
        held_before = 0
        if state.exists:
            held, held_before = state.get
            pieces.insert(0, _read_blob(held))
        if not pieces:
            return
        records = pa.concat_tables(pieces, promote_options="permissive").combine_chunks()
        # Permissive inside: the parts still open are read off finish()'s error rows, and
        # the mode is applied to the rows after (dropmalformed, failfast), as the decoder
        # would have applied it.
        decoder = cdc_decode.Decoder(
            self.format,
            engine=self.engine,
            schema=self.schema,
            tables=None if self.tables is None else dict(self.tables),
            limits=self.limits,
        )
        batch = records.to_batches()[0] if records.num_rows else None
        events, ordinals = decoder.decode_indexed(
            records.column(self.value_col),
            keys=None if batch is None else _reassembly_keys(batch, True, self.has_headers),
        )
        stats = decoder.stats()
        pending = stats["pending"]
        if pending:
            _, open_parts = decoder.finish_indexed()
            held_rows = records.take(open_parts)
            state.update((_blob(held_rows), held_rows.num_rows))
        elif state.exists:
            state.remove()
        kept = records.select(self.keep).take(ordinals)
        if self.mode != "permissive":
            import pyarrow.compute as pc

            bad = pc.is_valid(events.column("error"))
            if pc.any(bad).as_py():
                if self.mode == "failfast":
                    first = pc.index(bad, True).as_py()
                    row = ordinals[first].as_py()
                    raise cdc_decode.DecodeError(
                        f"topic {topic}, partition {partition}, offset "
                        f"{records.column('offset')[row].as_py()}: "
                        f"{events.column('error')[first].as_py()}"
                    )
                good = pc.invert(bad)
                events = events.filter(good)
                kept = kept.filter(good)
                ordinals = ordinals.filter(good)
        if self.reporter is not None:
            counts = {
                "messages": stats["messages"] - held_before,
                "decoded": stats["decoded"],
                "events": stats["events"],
                "errors": stats["errors"],
                "dropped": stats["errors"] if self.mode == "dropmalformed" else 0,
                "pending": pending - held_before,
            }
            self.reporter.report(topic, partition, counts)
        if not events.num_rows:
            return
        kept_batch = kept.combine_chunks().to_batches()
        kept_batch = (
            kept_batch[0] if kept_batch else pa.RecordBatch.from_pylist([], schema=kept.schema)
        )
        out = _join(kept_batch, events, self.event_columns)
        offsets = records.column("offset").take(ordinals)
        blobs_out, firsts = [], []
        for at in range(0, out.num_rows, _OUT_ROWS):
            blobs_out.append(_blob(out.slice(at, _OUT_ROWS)))
            firsts.append(offsets[at].as_py())
        yield pd.DataFrame(
            {
                "topic": [topic] * len(blobs_out),
                "partition": [partition] * len(blobs_out),
                "first_offset": firsts,
                "data": blobs_out,
            }
        )
