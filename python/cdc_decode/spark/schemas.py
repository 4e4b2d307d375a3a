"""The schema pass in Spark (docs/schemas.md): each table's columns, types and key as the
messages of a DataFrame describe them, read on the executors and collected as a small
result.

>>> from cdc_decode import spark as cdc_spark
>>> schemas = cdc_spark.table_schemas(kafka_df, "tencent-dts")     # an action
>>> schemas["shop.orders"].latest.ddl()
'`order_id` bigint, `amount` decimal(10,2), `placed_at` timestamp_ntz'
>>> frames = cdc_spark.decode(kafka_df, "tencent-dts", tables=schemas.ddl())

Each partition runs one :class:`cdc_decode.SchemaReader` in ``mapInArrow`` (no row image
is written, so it costs a fraction of a decode) and returns a row per table and wire schema
and a row per message that did not decode; the driver merges the partitions' rows
(:class:`cdc_decode.TableSchemas`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._checks import check_columns, check_engine, check_format, check_mode
from .._limits import Limits, as_limits
from .._schema import OPEN_PART, RECORD_FORMATS, SCHEMA_PASS_SCHEMA
from .._wire_schemas import TableSchemas
from .decoding import _LOCATION, _is_kafka_headers, _reassembly_keys

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = ["schema_rows", "table_schemas"]


def schema_rows(
    df: DataFrame,
    format: str,
    *,
    value_col: str | None = None,
    key_col: str | None = None,
    mode: str = "permissive",
    engine: str = "native",
    columns: Mapping[str, Sequence[str]] | None = None,
    limits: Limits | None = None,
    streamed: bool = False,
) -> DataFrame:
    """The schema pass's rows, per partition, as a DataFrame (lazy; see
    :func:`table_schemas`, which collects and merges them).

    Args:
        df: the messages, as :func:`cdc_decode.spark.decode` takes them (for
            ``datahub-tuple``, the records' columns).
        format: one of :data:`cdc_decode.FORMATS`.
        value_col: the messages' column (``"value"`` by default).
        key_col: ``debezium-json``: the Kafka message key column, whose JSON names the key
            columns (``"key"`` by default, when the input has it).
        mode: ``"permissive"`` (a row per bad message, its ``error`` naming the Kafka
            record when the input has ``topic``, ``partition`` and ``offset``),
            ``"dropmalformed"`` or ``"failfast"``.
        engine: ``"native"`` or ``"python"``.
        columns: ``tdsql-json`` only: names for the positional images.
        limits: the resource limits.
        streamed: the DataFrame is one micro-batch of a stream that
            :func:`cdc_decode.spark.decode_stream` reads: a Tencent DTS multi-part set
            still open at a partition's end is not an error (``decode_stream`` holds it
            for the next micro-batch).

    Returns:
        A DataFrame of :data:`cdc_decode._schema.SCHEMA_PASS_SCHEMA` (ordinals count each
        partition's messages).
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    check_format(format)
    check_mode(mode)
    check_engine(engine)
    if columns is not None:
        columns = check_columns(format, columns)
    limits = as_limits(limits)
    fields = {f.name: f for f in df.schema.fields}
    out_schema = from_arrow_schema(SCHEMA_PASS_SCHEMA)
    if format in RECORD_FORMATS:
        if value_col is not None:
            raise ValueError(f"{format} reads the records' own columns, not a value column")
        records = [c for c in df.columns if c not in ("topic", "partition", "offset")]
        needed = list(records)
    else:
        value_col = value_col or "value"
        if value_col not in fields:
            raise ValueError(
                f"value column {value_col!r} is not in the DataFrame "
                f"(columns: {', '.join(df.columns)})"
            )
        records = None
        needed = [value_col]
    if format == "debezium-json":
        if key_col is None and "key" in fields:
            key_col = "key"
        if key_col is not None and key_col not in fields:
            raise ValueError(f"key column {key_col!r} is not in the DataFrame")
    elif key_col is not None:
        raise ValueError(f"key_col= is for debezium-json (the Kafka key), not {format}")
    has_topic = "topic" in fields and "partition" in fields
    has_headers = "headers" in fields and _is_kafka_headers(fields["headers"].dataType)
    extras = [c for c in _LOCATION if c in fields]
    if key_col is not None:
        extras.append(key_col)
    if has_headers and format == "tencent-dts":
        extras.append("headers")
    for extra in extras:
        if extra not in needed:
            needed.append(extra)
    options = {
        "format": format,
        "mode": mode,
        "engine": engine,
        "columns": columns,
        "limits": limits,
        "value_col": value_col,
        "key_col": key_col,
        "records": records,
        "has_topic": has_topic,
        "has_offset": "offset" in fields,
        "has_headers": has_headers and format == "tencent-dts",
        "streamed": streamed,
    }
    return df.select(*needed).mapInArrow(_partition_reader(**options), out_schema)


def table_schemas(df: DataFrame, format: str, **options: Any) -> TableSchemas:
    """Each table's columns, source and Spark types and key as the messages of ``df``
    describe them, and where each schema was seen (docs/schemas.md): the schema pass on the
    executors, its rows collected and merged on the driver. An action.

    Args:
        df: the messages (a batch DataFrame; in a streaming query, the micro-batch
            ``foreachBatch`` gets).
        format: one of :data:`cdc_decode.FORMATS`.
        **options: as :func:`schema_rows`.

    Returns:
        A :class:`cdc_decode.TableSchemas`.

    Example:
        >>> def write(batch, batch_id):
        ...     schemas = cdc_spark.table_schemas(batch, "debezium-json", streamed=True)
        ...     for table in schemas:
        ...         print(table.name, table.latest.ddl(), table.latest.key)
    """
    rows = schema_rows(df, format, **options)
    return TableSchemas([_to_arrow(rows)])


def _to_arrow(rows: DataFrame) -> pa.Table:
    """The collected rows as Arrow."""
    from ._compat import to_arrow

    return to_arrow(rows).cast(SCHEMA_PASS_SCHEMA)


def _partition_reader(
    *,
    format: str,
    mode: str,
    engine: str,
    columns: dict | None,
    limits: Limits,
    value_col: str | None,
    key_col: str | None,
    records: list[str] | None,
    has_topic: bool,
    has_offset: bool,
    has_headers: bool,
    streamed: bool,
):
    """The function ``mapInArrow`` runs: one reader per partition, closed over plain values."""

    def read_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import cdc_decode

        # A Tencent DTS micro-batch with the Kafka columns names the parts of the sets
        # still open at its end (sync_stream holds them for the next micro-batch). The
        # reader is then permissive, so that finish() gives every open part's ordinal, and
        # the mode is applied to the rows after.
        holding = streamed and format == "tencent-dts" and has_topic and has_offset
        reader = cdc_decode.SchemaReader(
            format,
            mode="permissive" if holding else mode,
            engine=engine,
            columns=columns,
            limits=limits,
        )
        open_parts = _OpenParts() if holding else None
        start = 0
        for batch in batches:
            if records is not None:
                out = reader.read(batch.select(records))
            else:
                if key_col is not None:
                    keys = batch.column(key_col)
                elif format == "tencent-dts":
                    keys = _reassembly_keys(batch, has_topic, has_headers)
                else:
                    keys = None
                out = _located(reader, batch, start, value_col, keys)
            if open_parts is not None:
                out = _with_mode(out, mode)
                open_parts.update(batch, start, reader.stats()["pending"])
            if out.num_rows:
                yield out
            start += batch.num_rows
        if open_parts is not None:
            end = open_parts.rows(reader.finish())
        elif not streamed:
            end = reader.finish()
        else:
            return
        if end.num_rows:
            yield end

    return read_partition


class _OpenParts:
    """The Kafka locations of one partition's records since the last point no multi-part
    set was open: where the parts of the sets open at the end are."""

    def __init__(self) -> None:
        self.first = 0  # ordinal of the first record held
        self.held: list[pa.Table] = []

    def update(self, batch: pa.RecordBatch, start: int, pending: int) -> None:
        import pyarrow as pa

        if not pending:
            self.held, self.first = [], start + batch.num_rows
            return
        self.held.append(pa.Table.from_batches([batch.select(list(_LOCATION))]))

    def rows(self, ended: pa.RecordBatch) -> pa.RecordBatch:
        """``finish()``'s rows of the open parts, each an :data:`OPEN_PART` row naming its
        record."""
        import pyarrow as pa

        if not ended.num_rows:
            return ended
        where = pa.concat_tables(self.held).combine_chunks()
        texts = []
        for ordinal in ended.column("first_ordinal").to_pylist():
            topic, partition, offset = (where.column(c)[ordinal - self.first].as_py()
                                        for c in _LOCATION)  # fmt: skip
            texts.append(f"{OPEN_PART}: topic {topic}, partition {partition}, offset {offset}")
        at = ended.schema.get_field_index("error")
        return ended.set_column(at, ended.schema.field(at), pa.array(texts, pa.string()))


def _with_mode(out: pa.RecordBatch, mode: str) -> pa.RecordBatch:
    """A permissive reader's rows as ``mode`` gives them: error rows dropped
    (``dropmalformed``) or the first raised (``failfast``)."""
    import pyarrow.compute as pc

    import cdc_decode

    if mode == "permissive" or not out.num_rows:
        return out
    errors = out.column("error")
    if errors.null_count == out.num_rows:
        return out
    if mode == "failfast":
        raise cdc_decode.DecodeError(errors.drop_null()[0].as_py())
    return out.filter(pc.is_null(errors))


def _located(reader: Any, batch: pa.RecordBatch, start: int, value_col: str, keys: Any):
    """One batch's schema rows, an error row's text naming its Kafka record where the batch
    has the Kafka columns (``topic t, partition 2, offset 4711: ...``)."""
    import re

    import pyarrow as pa

    import cdc_decode

    try:
        out = reader.read(batch.column(value_col), keys=keys)
    except cdc_decode.DecodeError as exc:
        found = re.match(r"message (\d+):", str(exc))
        names = [c for c in _LOCATION if c in batch.schema.names]
        if found is None or not names:
            raise
        row = int(found.group(1)) - start
        where = ", ".join(f"{c} {batch.column(c)[row].as_py()}" for c in names)
        raise cdc_decode.DecodeError(f"{where}: {exc}") from exc
    names = [c for c in _LOCATION if c in batch.schema.names]
    errors = out.column("error")
    if not names or errors.null_count == out.num_rows:
        return out
    texts = []
    for error, ordinal in zip(errors.to_pylist(), out.column("first_ordinal").to_pylist(),
                              strict=True):  # fmt: skip
        row = ordinal - start
        if error is None or not 0 <= row < batch.num_rows:
            texts.append(error)
            continue
        where = ", ".join(f"{c} {batch.column(c)[row].as_py()}" for c in names)
        texts.append(f"{where}: {error}")
    at = out.schema.get_field_index("error")
    return out.set_column(at, out.schema.field(at), pa.array(texts, pa.string()))
