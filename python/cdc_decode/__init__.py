"""cdc-decode: cloud change-data-capture streams in, Arrow change events out.

>>> import cdc_decode
>>> batch = cdc_decode.decode(kafka_values, "tencent-dts")      # pyarrow.RecordBatch
>>> batch = cdc_decode.decode(kafka_values, "tencent-dts", engine="python")  # same result
>>> batch = cdc_decode.decode(tuple_records, "datahub-tuple")  # a pyarrow Table of records
>>> batch, stats = cdc_decode.decode(kafka_values, "tencent-dts", stats=True)
>>> batch = cdc_decode.decode(kafka_values, "tencent-dts", limits=cdc_decode.Limits(max_items=1000))

Every format decodes to one schema (:func:`event_schema`, see docs/events.md). The Rust
engine (``engine="native"``, the default) and the pure-Python fallback
(``engine="python"``) give equal batches for every input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, overload

import pyarrow as pa

from ._checks import (
    check_columns,
    check_engine,
    check_format,
    check_mode,
    check_schema_or_tables,
    check_time_zone,
    check_unavailable_value,
)
from ._errors import DecodeError
from ._headers import OLD_KEY, header_values
from ._limits import Limits, as_limits
from ._schema import ENGINES, FORMATS, RECORD_FORMATS, event_schema
from ._typed import (
    TableSchema,
    as_schema,
    as_tables,
    multi_event_schema,
    parse_ddl,
    split_tables,
    typed_event_schema,
)
from ._wire_schemas import SchemaVersion, TableSchemas, WireColumn, WireTable

__all__ = [
    "ENGINES",
    "FORMATS",
    "DecodeError",
    "Decoder",
    "Limits",
    "SchemaReader",
    "SchemaVersion",
    "TableSchemas",
    "WireColumn",
    "WireTable",
    "decode",
    "event_schema",
    "multi_event_schema",
    "parse_ddl",
    "spark_type",
    "split_tables",
    "table_schemas",
    "typed_event_schema",
]
__version__ = "0.1.0"

_INPUT_TYPES = (pa.binary(), pa.large_binary(), pa.string(), pa.large_string())

Decoded = pa.RecordBatch | dict[str | None, pa.RecordBatch]
"""What :func:`decode` returns: one batch, or with ``tables=`` one per table."""

Columns = Mapping[str, Sequence[str]]
"""``{"db.table": ["id", "name", ...]}``: the column names of positional row images."""


def _engine_decoder(
    engine: str,
    format: str,
    mode: str,
    columns: Columns | None,
    schema: pa.Schema | None = None,
    tables: list[tuple[str, pa.Schema]] | None = None,
    limits: Limits | None = None,
    schemas: bool = False,
    source_time_zone: str | None = None,
    unavailable_value: str | None = None,
):
    check_engine(engine)
    if columns is not None:
        columns = check_columns(format, columns)
    unavailable_value = check_unavailable_value(format, unavailable_value)
    limits = as_limits(limits)
    # Checked here for both engines: the Python engine's zoneinfo is the stricter reader.
    check_time_zone(source_time_zone, schema is not None or tables is not None)
    if engine == "native":
        from ._native import NativeDecoder

        return NativeDecoder(
            format,
            mode,
            columns,
            schema,
            tables,
            limits.as_dict(),
            schemas,
            source_time_zone,
            unavailable_value,
        )
    from .fallback import PythonDecoder

    return PythonDecoder(
        format,
        mode,
        columns=columns,
        schema=schema,
        tables=tables,
        limits=limits,
        schemas=schemas,
        source_time_zone=source_time_zone,
        unavailable_value=unavailable_value,
    )


def _as_arrays(values: Any) -> list[pa.Array]:
    """The input as pyarrow arrays of one of the accepted types, without copying arrays."""
    if isinstance(values, pa.ChunkedArray):
        chunks = values.chunks
    elif isinstance(values, pa.Array):
        chunks = [values]
    else:
        items = list(values)
        text = items and all(isinstance(v, str) or v is None for v in items)
        kind = pa.string() if text else pa.binary()
        try:
            chunks = [pa.array(items, type=kind)]
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError("values must be bytes, str or None") from exc
    for chunk in chunks:
        if chunk.type not in _INPUT_TYPES:
            raise TypeError(
                f"values must be binary, large_binary, string or large_string, not {chunk.type}"
            )
    return chunks


def _as_batches(format: str, records: Any) -> list[pa.RecordBatch]:
    """The records of a format of records as record batches, without copying."""
    if isinstance(records, pa.RecordBatch):
        return [records]
    if isinstance(records, pa.Table):
        # A table without rows may hold no batch: its (empty) columns are still checked.
        return records.to_batches() or [pa.RecordBatch.from_pylist([], schema=records.schema)]
    raise TypeError(
        f"{format} decodes records: pass a pyarrow RecordBatch or Table of TUPLE records, "
        f"not {type(records).__name__}"
    )


def _as_keys(keys: Any, length: int) -> pa.Array | None:
    if keys is None:
        return None
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array([None if k is None else str(k) for k in keys], type=pa.string())
    if keys.type != pa.string():
        keys = keys.cast(pa.string())
    if len(keys) != length:
        raise ValueError(f"keys has {len(keys)} entries for {length} values")
    return keys


def _concat(parts: list[tuple[pa.RecordBatch, pa.Array]]) -> tuple[pa.RecordBatch, pa.Array]:
    if len(parts) == 1:
        return parts[0]
    batches = [b for b, _ in parts]
    ordinals = pa.concat_arrays([o for _, o in parts])
    return pa.concat_batches(batches), ordinals


class Decoder:
    """A stateful decoder: one per stream (a Spark partition, a Kafka consumer).

    It keeps what must outlive one call, such as the parts of a multi-part Tencent DTS
    envelope split across batches, and counts what it did.

    Args:
        format: one of :data:`FORMATS`.
        mode: ``"permissive"`` (bad messages become error rows), ``"dropmalformed"``
            (they are dropped and counted) or ``"failfast"`` (raise :class:`DecodeError`).
        engine: ``"native"`` (Rust) or ``"python"`` (the pure-Python fallback).
        columns: ``tdsql-json`` only: ``{"db.table": ["id", "name", ...]}`` names the
            positional values of that table's row images (otherwise keyed ``"0"``,
            ``"1"``, ...).
        schema: typed mode (docs/typed.md): the table's columns, as a pyarrow schema or a
            Spark DDL string (``"id bigint, price decimal(10,2), created timestamp"``).
            ``before`` and ``after`` are then structs of exactly those fields, converted
            in the decoder; a value that does not convert makes its message an error row
            naming the column (``after.price: cannot convert "abc" to decimal(10,2)``).
        tables: multi-table typed mode: ``{"shop.orders": schema, ...}``. Each batch then
            has the event columns (``before``/``after`` as text maps, for rows no table
            claims), a ``table`` column naming the table a row belongs to, and
            ``before_<i>``/``after_<i>`` structs for the i-th table;
            :func:`split_tables` makes one typed batch per table of it.
        limits: the resource limits (:class:`Limits`): message size, nesting, items,
            multi-part sets, decompression and output. ``None``: the defaults.
        source_time_zone: typed mode: the source's time zone, an IANA name
            (``"Asia/Shanghai"``). A wall clock the wire sends without an offset is read in
            it when it becomes a ``timestamp``; an instant becomes its wall clock there in a
            ``timestamp_ntz`` or ``date`` column (docs/typed.md, "The source's time zone").
            ``None``: UTC.
        unavailable_value: ``debezium-json`` only: the connector's
            ``unavailable.value.placeholder``, the value it sends for a column it did not
            read (an unchanged TOASTed PostgreSQL value, an Oracle LOB). Such a column is
            left out of the image (absent: ``after_absent`` in typed mode), so applying the
            change keeps the stored value. ``None``: Debezium's default,
            ``__debezium_unavailable_value``; ``""``: no placeholder
            (docs/formats/debezium-json.md).

    Example:
        >>> decoder = cdc_decode.Decoder("tencent-dts")
        >>> for values in batches_of_one_partition:
        ...     events = decoder.decode(values)
        >>> leftovers = decoder.finish()   # error rows for incomplete multi-part sets
        >>> decoder.stats()
        {'messages': 10000, 'decoded': 10000, 'events': 98000, 'errors': 0, 'dropped': 0,
         'pending': 0}
    """

    def __init__(
        self,
        format: str,
        *,
        mode: str = "permissive",
        engine: str = "native",
        columns: Columns | None = None,
        schema: TableSchema | None = None,
        tables: Mapping[str, TableSchema] | None = None,
        limits: Limits | None = None,
        source_time_zone: str | None = None,
        unavailable_value: str | None = None,
    ) -> None:
        self._setup(
            format,
            mode,
            engine,
            columns,
            schema,
            tables,
            limits,
            source_time_zone,
            unavailable_value=unavailable_value,
        )

    def _setup(
        self,
        format,
        mode,
        engine,
        columns,
        schema,
        tables,
        limits,
        source_time_zone=None,
        schemas=False,
        unavailable_value=None,
    ):
        check_format(format)
        check_mode(mode)
        self.format = format
        self.mode = mode
        self.engine = engine
        check_schema_or_tables(schema, tables)
        self.schema = None if schema is None else as_schema(schema)
        self.tables = None if tables is None else as_tables(tables)
        self.source_time_zone = source_time_zone
        self._inner = _engine_decoder(
            engine,
            format,
            mode,
            columns,
            self.schema,
            self.tables,
            limits,
            schemas,
            source_time_zone,
            unavailable_value,
        )

    def decode(self, values: Any, *, keys: Any = None, headers: Any = None) -> pa.RecordBatch:
        """Decode a batch of messages.

        Args:
            values: a pyarrow binary/string Array or ChunkedArray, or a sequence of
                ``bytes``/``str``/``None`` (``None`` is a Kafka tombstone). For
                ``datahub-tuple``: a pyarrow RecordBatch or Table of TUPLE records (a
                table is decoded batch by batch), see docs/formats/datahub-tuple.md.
            keys: optional reassembly keys, one per value (for example
                ``"topic/partition"``); multi-part messages are joined per key. Not for
                ``datahub-tuple``.
            headers: optional Kafka headers, one entry per value: Spark's Kafka
                ``headers`` column (a list of ``{key, value}`` structs per row) or, per
                value, a list of ``(name, bytes)`` pairs (a Kafka client's
                ``message.headers()``) or ``None``. ``debezium-json`` reads
                ``__debezium.oldkey``: an insert that carries it is the second half of a
                key change and becomes an ``update`` from the old key
                (docs/formats/debezium-json.md). Not for ``datahub-tuple``.

        Returns:
            A ``pyarrow.RecordBatch`` of :func:`event_schema`.
        """
        return self.decode_indexed(values, keys=keys, headers=headers)[0]

    def decode_indexed(
        self, values: Any, *, keys: Any = None, headers: Any = None
    ) -> tuple[pa.RecordBatch, pa.Array]:
        """Like :meth:`decode`, also returning each row's input ordinal.

        The ordinal (``int64``) counts input values across every call of this decoder, so
        a row produced now for a message received in an earlier call (the completed set or
        the error rows of a multi-part envelope) can be traced to that message.
        """
        return self._decode_indexed(values, keys, last=False, headers=headers)

    def _decode_indexed(
        self, values: Any, keys: Any, last: bool, headers: Any = None
    ) -> tuple[pa.RecordBatch, pa.Array]:
        """:meth:`decode_indexed`; with ``last``, :meth:`finish_indexed` too, in the same call
        and batch (the one-shot :func:`decode`: no second, empty batch to export)."""
        if self.format in RECORD_FORMATS:
            if keys is not None or headers is not None:
                raise ValueError(
                    f"keys and headers do not apply to {self.format}: it decodes records"
                )
            batches = _as_batches(self.format, values)
            return _concat(
                [
                    self._inner.decode_records(b, last and i == len(batches) - 1)
                    for i, b in enumerate(batches)
                ]
            )
        if isinstance(values, pa.RecordBatch | pa.Table):
            raise TypeError(
                f"{self.format} decodes binary values (an Array of messages), not a "
                f"{type(values).__name__}; only {', '.join(RECORD_FORMATS)} decodes records"
            )
        chunks = _as_arrays(values)
        length = sum(len(c) for c in chunks)
        all_keys = _as_keys(keys, length)
        old_keys = header_values(headers, OLD_KEY, length)
        parts = []
        offset = 0
        for i, chunk in enumerate(chunks):
            chunk_keys = None if all_keys is None else all_keys.slice(offset, len(chunk))
            chunk_old = None if old_keys is None else old_keys.slice(offset, len(chunk))
            parts.append(
                self._inner.decode(
                    chunk, chunk_keys, last and i == len(chunks) - 1, old_keys=chunk_old
                )
            )
            offset += len(chunk)
        if not parts:
            parts.append(self._inner.decode(pa.array([], pa.binary()), None, last))
        return _concat(parts)

    def finish(self) -> pa.RecordBatch:
        """End of input: error rows for every multi-part set still incomplete."""
        return self.finish_indexed()[0]

    def finish_indexed(self) -> tuple[pa.RecordBatch, pa.Array]:
        """Like :meth:`finish`, also returning each row's input ordinal."""
        return self._inner.finish()

    def stats(self) -> dict[str, int]:
        """What this decoder did so far, counted across all its calls (docs/events.md,
        "Accounting"). The difference of two calls' results is what the calls between did.

        Returns:
            ``messages`` (input values seen), ``decoded`` (messages decoded into their
            events, tombstones and every part of a completed multi-part set included),
            ``events`` (event rows, tombstone rows included, error rows not), ``errors``
            (error rows, emitted or dropped), ``dropped`` (error rows dropped in
            ``dropmalformed``) and ``pending`` (multi-part parts buffered now). Every
            message has one outcome: ``messages == decoded + errors + pending``.
        """
        return dict(self._inner.stats())


@overload
def decode(
    values: Any,
    format: str,
    *,
    mode: str = ...,
    engine: str = ...,
    keys: Sequence[Any] | Iterable[Any] | pa.Array | None = ...,
    headers: Any = ...,
    columns: Columns | None = ...,
    schema: TableSchema | None = ...,
    tables: Mapping[str, TableSchema] | None = ...,
    limits: Limits | None = ...,
    source_time_zone: str | None = ...,
    unavailable_value: str | None = ...,
    stats: Literal[False] = ...,
) -> Decoded: ...


@overload
def decode(
    values: Any,
    format: str,
    *,
    mode: str = ...,
    engine: str = ...,
    keys: Sequence[Any] | Iterable[Any] | pa.Array | None = ...,
    headers: Any = ...,
    columns: Columns | None = ...,
    schema: TableSchema | None = ...,
    tables: Mapping[str, TableSchema] | None = ...,
    limits: Limits | None = ...,
    source_time_zone: str | None = ...,
    unavailable_value: str | None = ...,
    stats: Literal[True],
) -> tuple[Decoded, dict[str, int]]: ...


def decode(
    values: Any,
    format: str,
    *,
    mode: str = "permissive",
    engine: str = "native",
    keys: Sequence[Any] | Iterable[Any] | pa.Array | None = None,
    headers: Any = None,
    columns: Columns | None = None,
    schema: TableSchema | None = None,
    tables: Mapping[str, TableSchema] | None = None,
    limits: Limits | None = None,
    source_time_zone: str | None = None,
    unavailable_value: str | None = None,
    stats: bool = False,
) -> Decoded | tuple[Decoded, dict[str, int]]:
    """Decode messages of one format into change events, in one shot.

    Args:
        values: a pyarrow binary/string Array or ChunkedArray, or a sequence of
            ``bytes``/``str``/``None``; for ``datahub-tuple``, a pyarrow RecordBatch or
            Table of TUPLE records.
        format: one of :data:`FORMATS`.
        mode: ``"permissive"`` (default), ``"dropmalformed"`` or ``"failfast"``.
        engine: ``"native"`` (default) or ``"python"``.
        keys: optional multi-part reassembly keys, one per value.
        headers: optional Kafka headers, one entry per value (see :meth:`Decoder.decode`).
        columns: ``tdsql-json`` only: the column names of each ``"db.table"``.
        schema: typed mode: the table's columns, a pyarrow schema or a Spark DDL string
            (see :class:`Decoder` and docs/typed.md).
        tables: multi-table typed mode: ``{"shop.orders": schema_or_ddl, ...}``, decoded
            in one pass.
        limits: the resource limits (:class:`Limits`); ``None``: the defaults. A message
            over a limit gives an error row naming the limit.
        source_time_zone: typed mode: the source's time zone, an IANA name (see
            :class:`Decoder`).
        unavailable_value: ``debezium-json`` only: the connector's placeholder for values
            it did not read (see :class:`Decoder`).
        stats: also return what the call did (docs/events.md, "Accounting").

    Returns:
        A ``pyarrow.RecordBatch`` of :func:`event_schema` (with ``schema=``, ``before`` and
        ``after`` as structs of its fields). Multi-part sets still incomplete at the end
        become error rows. With ``tables=``, a dict of one typed batch per table name,
        plus under the key ``None`` the rows no table claims (other tables, control
        events without a table, error rows) as generic events. With ``stats=True``, a
        tuple of that and the counts :meth:`Decoder.stats` gives for this call:
        ``messages``, ``decoded``, ``events``, ``errors``, ``dropped``, ``pending`` (0: the
        call ends the input, so ``messages == decoded + errors``).

    Raises:
        DecodeError: in ``failfast`` mode, naming the first bad message's index (no
            counts then).
        TypeError: input of the wrong kind (records for a bytes format or the other way
            round), or a ``datahub-tuple`` column of a type it does not read.
        ValueError: ``datahub-tuple`` records without a required meta column.

    Example:
        >>> batch = cdc_decode.decode(kafka_values, "tencent-dts")
        >>> batch.to_pandas()[["op", "source_table", "after"]]
        >>> batch, stats = cdc_decode.decode(kafka_values, "tencent-dts", stats=True)
        >>> stats
        {'messages': 3, 'decoded': 2, 'events': 5, 'errors': 1, 'dropped': 0, 'pending': 0}
    """
    decoder = Decoder(
        format,
        mode=mode,
        engine=engine,
        columns=columns,
        schema=schema,
        tables=tables,
        limits=limits,
        source_time_zone=source_time_zone,
        unavailable_value=unavailable_value,
    )
    # The end of input in the same call: no second (mostly empty) batch from finish().
    batch = decoder._decode_indexed(values, keys, last=True, headers=headers)[0]
    result = batch if decoder.tables is None else split_tables(batch, decoder.tables)
    return (result, decoder.stats()) if stats else result


def _message_keys(keys: Any) -> Any:
    """Kafka message keys as text (a key that is not UTF-8 is no key); other keys as given."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(keys, pa.Array) and keys.type in (pa.binary(), pa.large_binary()):
        keys = keys.to_pylist()
    if isinstance(keys, pa.Array) or keys is None:
        return keys
    out = []
    for key in keys:
        if isinstance(key, bytes | bytearray | memoryview):
            try:
                key = bytes(key).decode("utf-8")
            except UnicodeDecodeError:
                key = None
        out.append(key)
    return out


class SchemaReader:
    """The schema pass over a stream, call by call (docs/schemas.md): what each table's
    messages say of its columns, their types and its key, without decoding the rows.

    A message is read as :class:`Decoder` reads it (the same checks and error texts, the
    same multi-part sets), but no row image is written: each call returns a small batch of
    :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA`, one row per table and wire schema its
    events carried and one per message that did not decode. :class:`TableSchemas` merges
    the batches of several calls.

    Args:
        format: one of :data:`FORMATS`.
        mode: as :class:`Decoder`'s: ``"permissive"`` (an error row per bad message),
            ``"dropmalformed"`` or ``"failfast"``.
        engine: ``"native"`` or ``"python"``; both give equal rows.
        columns: ``tdsql-json`` only, as :class:`Decoder`'s: names for the positional images.
        limits: the resource limits (:class:`Limits`).

    Example:
        >>> reader = cdc_decode.SchemaReader("tencent-dts")
        >>> batches = [reader.read(values) for values in stream] + [reader.finish()]
        >>> cdc_decode.TableSchemas(batches)["shop.orders"].latest.ddl()
        '`order_id` bigint, `amount` decimal(10,2), `placed_at` timestamp_ntz'
    """

    def __init__(
        self,
        format: str,
        *,
        mode: str = "permissive",
        engine: str = "native",
        columns: Columns | None = None,
        limits: Limits | None = None,
    ) -> None:
        self._decoder = Decoder.__new__(Decoder)
        self._decoder._setup(format, mode, engine, columns, None, None, limits, schemas=True)
        self.format = format

    def read(self, values: Any, *, keys: Any = None) -> pa.RecordBatch:
        """The schema rows of a batch of messages.

        Args:
            values: as :meth:`Decoder.decode` takes them (for ``datahub-tuple``, records).
            keys: one per value: for ``tencent-dts`` the multi-part reassembly keys; for
                ``debezium-json`` the Kafka message keys (``bytes`` or text), whose JSON
                members name the key columns. Other formats do not read them.
        """
        if self.format == "debezium-json":
            keys = _message_keys(keys)
        return self._decoder.decode(values, keys=keys)

    def finish(self) -> pa.RecordBatch:
        """End of input: a row for each multi-part set still incomplete (an error)."""
        return self._decoder.finish()

    def stats(self) -> dict[str, int]:
        """The counts of :meth:`Decoder.stats`: every message has one outcome."""
        return self._decoder.stats()


def table_schemas(
    values: Any,
    format: str,
    *,
    keys: Any = None,
    mode: str = "permissive",
    engine: str = "native",
    columns: Columns | None = None,
    limits: Limits | None = None,
) -> TableSchemas:
    """Each source table's columns, types and key as the messages describe them, and where
    in the stream each schema was seen (docs/schemas.md). Far cheaper than a decode: no row
    image is written.

    Args:
        values: the messages, as :func:`decode` takes them.
        format: one of :data:`FORMATS`.
        keys: ``tencent-dts``: the multi-part reassembly keys; ``debezium-json``: the Kafka
            message keys, which name the key columns (see :meth:`SchemaReader.read`).
        mode, engine, columns, limits: as :func:`decode`'s.

    Returns:
        A :class:`TableSchemas`: ``result["shop.orders"].latest.columns`` (each with its
        source type as sent and its Spark type, docs/types.md), ``.key``, ``.versions``
        (more than one when a column was added, dropped or retyped), and ``result.errors``
        for the messages that did not decode.

    Example:
        >>> schemas = cdc_decode.table_schemas(kafka_values, "tencent-dts")
        >>> schemas["shop.orders"].latest.key
        ('order_id',)
        >>> batch = cdc_decode.decode(kafka_values, "tencent-dts", tables=schemas.ddl())
    """
    reader = SchemaReader(format, mode=mode, engine=engine, columns=columns, limits=limits)
    if format in RECORD_FORMATS:
        return TableSchemas([reader.read(values)])
    if format == "debezium-json":
        keys = _message_keys(keys)
    return TableSchemas([reader._decoder._decode_indexed(values, keys, last=True)[0]])


def spark_type(dialect: str, source_type: str, *, engine: str = "native") -> str | None:
    """The Spark type typed mode converts a source type to (docs/types.md): the one mapping
    the schema pass reports, for writing ``schema=`` by hand where the wire sends no types.

    Args:
        dialect: whose spelling ``source_type`` is: ``mysql``, ``postgresql``, ``oracle``,
            ``sqlserver`` (as the databases print their types), ``connect`` (Debezium's
            Connect schema), ``avro`` (Datastream's writer schema), ``datahub`` (DataHub
            types) or ``arrow`` (pyarrow's names).
        source_type: the type, as that dialect spells it (``decimal(10,2) unsigned``,
            ``TIMESTAMP(6) WITH LOCAL TIME ZONE``).
        engine: ``"native"`` or ``"python"``: the same mapping.

    Returns:
        A Spark DDL type (``decimal(20,0)``, ``timestamp_ntz``), or ``None`` for a type the
        mapping does not know.

    Example:
        >>> cdc_decode.spark_type("mysql", "bigint(20) unsigned")
        'decimal(20,0)'
    """
    check_engine(engine)
    if engine == "native":
        from ._native import spark_type as native

        return native(dialect, source_type)
    from .fallback._source_types import DIALECTS
    from .fallback._source_types import spark_type as python

    if dialect not in DIALECTS:
        raise ValueError(
            f"unknown dialect {dialect!r}: expected mysql, postgresql, oracle, sqlserver, "
            "connect, avro, datahub or arrow"
        )
    return python(dialect, source_type)
