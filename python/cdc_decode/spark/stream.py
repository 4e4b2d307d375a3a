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

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._checks import (
    check_engine,
    check_format,
    check_mode,
    check_time_zone,
    check_unavailable_value,
)
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
    pending_timeout: dt.timedelta | None = None,
    source_time_zone: str | None = None,
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
        pending_timeout: ``tencent-dts``: how long the parts of an open set may wait for
            their next part (processing time, checked when micro-batches run). When no
            record of that topic-partition comes for that long, the held parts end as
            error rows, one per part at its own offset, and the state is cleared.
            ``None`` (the default): held until their set completes or the next part 0 of
            their key closes it. With a time-out Spark runs a micro-batch at every trigger,
            records or not (so give the query a trigger interval), and a query with the
            ``availableNow`` trigger does not end. docs/streaming.md ("What is held") says
            how to choose.
        source_time_zone: typed mode: the source's time zone, as
            :func:`cdc_decode.spark.decode`.
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
        "source_time_zone": source_time_zone,
    }
    if check_unavailable_value(format, unavailable_value) is not None:
        options["unavailable_value"] = unavailable_value
    if pending_timeout is not None and not isinstance(pending_timeout, dt.timedelta):
        raise TypeError(
            f"pending_timeout must be a datetime.timedelta, not {type(pending_timeout).__name__}"
        )
    if pending_timeout is not None and pending_timeout <= dt.timedelta(0):
        raise ValueError(f"pending_timeout must be positive, not {pending_timeout}")
    if format not in MULTIPART_FORMATS or not df.isStreaming:
        # No message spans records, or a batch: each partition's decoder sees all of it.
        return decode(df, format, **options)
    return _decode_multipart(df, format, pending_timeout=pending_timeout, **options)


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
    pending_timeout: dt.timedelta | None,
    source_time_zone: str | None,
) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.types import StructType

    check_format(format)
    check_mode(mode)
    check_engine(engine)
    if columns is not None:
        raise ValueError(f"columns= is for tdsql-json, not {format}")
    typed = _Typed(schema, tables)
    check_time_zone(source_time_zone, typed.arrow_schema is not None)
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
        source_time_zone=source_time_zone,
        pending_timeout_ms=(
            None if pending_timeout is None else int(pending_timeout.total_seconds() * 1000)
        ),
    )
    packed = df.select(*needed).mapInArrow(_pack, _PACKED)
    # A processing-time time-out makes Spark run a micro-batch at every trigger, new
    # records or not (to check it): only when asked for.
    timeout = (
        GroupStateTimeout.NoTimeout
        if pending_timeout is None
        else GroupStateTimeout.ProcessingTimeTimeout
    )
    decoded = packed.groupBy("topic", "partition").applyInPandasWithState(
        job.run, _PACKED, _STATE, "append", timeout
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
        self.accumulator.add({(self.call, f"{topic}/{partition}"): (None, stats)})


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
        """One topic-partition's records of one micro-batch, after the parts it held.

        The records are decoded piece by piece (one Arrow IPC blob of at most
        ``_BLOB_BYTES`` at a time) by one decoder, and each piece's events go out before
        the next piece is read: nothing is concatenated into one array, so a micro-batch
        of any size stays under Arrow's 2 GiB offset limit, and the events of the whole
        micro-batch are never held at once.
        """
        topic, partition = str(key[0]), int(key[1])
        blobs: list[tuple[int, bytes]] = []
        for frame in frames:
            blobs.extend(zip(frame["first_offset"].tolist(), frame["data"].tolist(), strict=True))
        blobs.sort(key=lambda b: b[0])
        pieces = [_read_blob(data) for _, data in blobs]
        run = _Run(self, topic, partition)
        if state.exists:
            held, held_before = state.get
            held_records = _read_blob(held)
            run.held_before = held_before
            stale = (
                bool(pieces) and _last_offset(held_records) >= pieces[0].column("offset")[0].as_py()
            )
            if state.hasTimedOut or stale:
                # No part came within the time-out, or the offsets went back (a topic
                # deleted and made again, offsets reset): the held parts will never be
                # completed; they end as error rows, one per part, at their own offsets.
                yield from run.decode(held_records)
                yield from run.finish()
                run.restart()
            else:
                pieces.insert(0, held_records)
        for piece in pieces:
            yield from run.decode(piece)
        held_rows = run.open_parts()
        if held_rows is not None:
            state.update((_blob(held_rows), held_rows.num_rows))
            if self.pending_timeout_ms is not None:
                state.setTimeoutDuration(self.pending_timeout_ms)
        elif state.exists:
            state.remove()
        run.report()


def _last_offset(records: pa.Table) -> int:
    import pyarrow.compute as pc

    return pc.max(records.column("offset")).as_py()


class _Run:
    """One call of :meth:`_Job.run`: a decoder fed piece after piece, the pieces it was fed
    (to trace an output row's input ordinal back to its record), and the accounting."""

    def __init__(self, job: _Job, topic: str, partition: int) -> None:
        self.job = job
        self.topic = topic
        self.partition = partition
        self.held_before = 0
        self.totals: dict[str, int] = dict.fromkeys(
            ("messages", "decoded", "events", "errors", "pending"), 0
        )
        self.restart()

    def restart(self) -> None:
        """A new decoder (and ordinals from 0); the last one's counts are kept."""
        import cdc_decode

        if getattr(self, "decoder", None) is not None:
            self._add_stats()
        job = self.job
        # Permissive inside: the parts still open are read off finish()'s error rows, and
        # the mode is applied to the rows after (dropmalformed, failfast), as the decoder
        # would have applied it.
        self.decoder = cdc_decode.Decoder(
            job.format,
            engine=job.engine,
            schema=job.schema,
            tables=None if job.tables is None else dict(job.tables),
            limits=job.limits,
            source_time_zone=job.source_time_zone,
        )
        self.pieces: list[pa.Table] = []
        self.starts: list[int] = []
        self.fed = 0

    def _add_stats(self) -> None:
        for name, value in self.decoder.stats().items():
            if name in self.totals:
                self.totals[name] += value

    def decode(self, piece: pa.Table) -> Iterator[Any]:
        """Feed one piece of records; its events (and any earlier record's) out."""
        if not piece.num_rows:
            return
        piece = piece.combine_chunks()  # one piece is at most _BLOB_BYTES
        self.pieces.append(piece)
        self.starts.append(self.fed)
        self.fed += piece.num_rows
        batch = piece.to_batches()[0]
        events, ordinals = self.decoder.decode_indexed(
            piece.column(self.job.value_col),
            keys=_reassembly_keys(batch, True, self.job.has_headers),
        )
        yield from self._emit(events, ordinals)

    def finish(self) -> Iterator[Any]:
        """The decoder's end of input: its open parts become error rows."""
        events, ordinals = self.decoder.finish_indexed()
        yield from self._emit(events, ordinals)

    def open_parts(self) -> pa.Table | None:
        """The records of the sets still open (``None`` when there is none)."""
        import pyarrow as pa

        if not self.decoder.stats()["pending"]:
            return None
        # finish() names them (its error rows carry their ordinals); this decoder is not
        # used after it.
        _, ordinals = self.decoder.finish_indexed()
        self._add_stats()
        self.totals["errors"] -= len(ordinals)  # not errors: held, pending
        self.totals["pending"] += len(ordinals)
        self.decoder = None
        return pa.concat_tables(self._rows(ordinals, None))

    def _rows(self, ordinals: pa.Array, columns: list[str] | None) -> list[pa.Table]:
        """The input records (or their ``columns``) at ``ordinals``, in order, as one
        table per run of ordinals from the same piece."""
        import bisect

        import pyarrow as pa

        out: list[pa.Table] = []
        values = ordinals.to_pylist()
        at = 0
        while at < len(values):
            index = bisect.bisect_right(self.starts, values[at]) - 1
            start, piece = self.starts[index], self.pieces[index]
            end = at
            while end < len(values) and start <= values[end] < start + piece.num_rows:
                end += 1
            rows = pa.array([v - start for v in values[at:end]], pa.int64())
            source = piece if columns is None else piece.select(columns)
            out.append(source.take(rows))
            at = end
        return out

    def _emit(self, events: pa.RecordBatch, ordinals: pa.Array) -> Iterator[Any]:
        import pandas as pd
        import pyarrow as pa
        import pyarrow.compute as pc

        import cdc_decode

        job = self.job
        if not events.num_rows:
            return
        if job.mode != "permissive":
            bad = pc.is_valid(events.column("error"))
            if pc.any(bad).as_py():
                if job.mode == "failfast":
                    first = pc.index(bad, True).as_py()
                    (record,) = self._rows(ordinals.slice(first, 1), ["offset"])
                    raise cdc_decode.DecodeError(
                        f"topic {self.topic}, partition {self.partition}, offset "
                        f"{record.column('offset')[0].as_py()}: "
                        f"{events.column('error')[first].as_py()}"
                    )
                good = pc.invert(bad)
                events = events.filter(good)
                ordinals = ordinals.filter(good)
                if not events.num_rows:
                    return
        columns = list(dict.fromkeys([*job.keep, "offset"]))
        kept = pa.concat_tables(self._rows(ordinals, columns)).combine_chunks()
        offsets = kept.column("offset")
        kept_batch = kept.select(job.keep).to_batches()
        kept_batch = (
            kept_batch[0]
            if kept_batch
            else pa.RecordBatch.from_pylist([], schema=kept.select(job.keep).schema)
        )
        out = _join(kept_batch, events, job.event_columns)
        blobs_out, firsts = [], []
        for at in range(0, out.num_rows, _OUT_ROWS):
            blobs_out.append(_blob(out.slice(at, _OUT_ROWS)))
            firsts.append(offsets[at].as_py())
        yield pd.DataFrame(
            {
                "topic": [self.topic] * len(blobs_out),
                "partition": [self.partition] * len(blobs_out),
                "first_offset": firsts,
                "data": blobs_out,
            }
        )

    def report(self) -> None:
        """This topic-partition's counts of the micro-batch, to the accounting."""
        if self.job.reporter is None:
            return
        if self.decoder is not None:
            self._add_stats()
            self.decoder = None
        t = self.totals
        counts = {
            "messages": t["messages"] - self.held_before,
            "decoded": t["decoded"],
            "events": t["events"],
            "errors": t["errors"],
            "dropped": t["errors"] if self.job.mode == "dropmalformed" else 0,
            "pending": t["pending"] - self.held_before,
        }
        self.job.reporter.report(self.topic, self.partition, counts)
