"""The pure-Python decoders: the same results as the Rust core, byte for byte.

:class:`PythonDecoder` is the engine ``cdc_decode.Decoder(..., engine="python")`` drives.
It does what every format shares (input values, tombstones, ordinals, modes, stats, see
docs/events.md); one module per format decodes single messages:

- :mod:`.tencent_dts`: ``tencent-dts``.
- :mod:`.datahub_blob`: ``datahub-blob``.
- :mod:`.tdsql_json`: ``tdsql-json``.
- :mod:`.debezium_json`: ``debezium-json``.
- :mod:`.datastream_json`: ``datastream-json``.
- :mod:`.datastream_avro`: ``datastream-avro`` (Avro files, through fastavro).
- :mod:`.datahub_tuple`: ``datahub-tuple``, whose input is record batches, not binary
  values (:meth:`PythonDecoder.decode_records`).

The four JSON formats derive from :class:`._json.JsonFormat` and read their messages with
:mod:`._json` (the strict parse, value rendering and field checks of
docs/formats/datahub-blob.md), as the Rust ones use ``rust/json/``.

A format class takes the decoder's options as keyword arguments (only those given:
``columns`` for ``tdsql-json``; ``limits``, a ``cdc_decode.Limits``, for every format of
binary values) and has ``decode(raw, key, ordinal, sink)`` (one
non-null input value), ``finish(sink)`` (end of input) and ``pending`` (parts buffered).
A format of records sets ``records = True`` and has ``prepare(batch)`` instead of
``decode``: it checks the batch's columns and returns an object whose
``record(row, ordinal, sink)`` decodes one record.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import import_module

import pyarrow as pa

from .._checks import (
    check_columns,
    check_format,
    check_mode,
    check_schema_or_tables,
    check_time_zone,
    check_unavailable_value,
)
from .._limits import Limits, as_limits
from ._events import EventSink
from ._typed import Typed

# The modules of the extra ``cdc-decode[python-engine]`` (pyproject.toml), which only some
# formats of this engine import; the native engine and a lean executor need none of them.
_EXTRA_MODULES = ("google", "fastavro", "cramjam", "zstandard")
INSTALL_EXTRA = "pip install 'cdc-decode[python-engine]'"

_AS_BYTES = {
    pa.string(): pa.binary(),
    pa.large_string(): pa.large_binary(),
}


def _format_class(format: str) -> type:
    """The class decoding ``format``, imported now; a clear error when it needs a module of
    the ``python-engine`` extra that is not installed.

    Each format has its module here, named after it (``tencent_dts`` for ``tencent-dts``),
    with its decoder class (``TencentDts``). Imported on first use: ``cdc_decode._proto``
    loads its descriptor set from this package, so importing the format modules here would
    be circular.
    """
    module = format.replace("-", "_")
    name = "".join(word.capitalize() for word in format.split("-"))
    try:
        return getattr(import_module(f".{module}", __name__), name)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in _EXTRA_MODULES:
            raise
        raise ModuleNotFoundError(
            f"engine='python' decodes {format} with {exc.name}, which is not installed: "
            f"{INSTALL_EXTRA} (the native engine, the default, needs only pyarrow)",
            name=exc.name,
        ) from exc


@contextmanager
def _without_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: the rows are acyclic tuples and lists, and the
    collector, triggered over and over by their allocations, would only rescan them (half
    the time spent)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class PythonDecoder:
    """A stateful decoder of one format: the pure-Python engine.

    Args:
        format: a format name (``cdc_decode.FORMATS``).
        mode: ``permissive``, ``dropmalformed`` or ``failfast``.
        columns: ``tdsql-json`` only: ``{"db.table": [column names]}``.
        schema: typed mode: a checked pyarrow schema (``cdc_decode._typed.as_schema``).
        tables: multi-table typed mode: (name, checked schema) pairs.
        limits: the resource limits (``cdc_decode.Limits``; the defaults for ``None``).
        schemas: the schema pass (a row per table and wire schema, ``._schemas``) instead
            of events.
        source_time_zone: typed mode's source time zone, an IANA name (docs/typed.md).
        unavailable_value: ``debezium-json`` only: the placeholder of values the connector
            did not read (``None``: Debezium's default, ``""``: none).

    Raises:
        ValueError: for an unknown format or mode, or an option the format does not take.
    """

    def __init__(
        self,
        format: str,
        mode: str,
        *,
        columns: dict | None = None,
        schema: pa.Schema | None = None,
        tables: list | None = None,
        limits: Limits | None = None,
        schemas: bool = False,
        source_time_zone: str | None = None,
        unavailable_value: str | None = None,
    ) -> None:
        check_format(format)
        check_mode(mode)
        self._format = format
        self._mode = mode
        if columns is not None:
            columns = check_columns(format, columns)
        unavailable_value = check_unavailable_value(format, unavailable_value)
        self._limits = as_limits(limits)
        options: dict = {} if columns is None else {"columns": columns}
        if unavailable_value is not None:
            options["unavailable_value"] = unavailable_value
        cls = _format_class(format)
        if not getattr(cls, "records", False):
            options["limits"] = self._limits
        self._decoder = cls(**options)
        self._takes_records = getattr(self._decoder, "records", False)
        self._stats = {"messages": 0, "decoded": 0, "events": 0, "errors": 0, "dropped": 0}
        check_schema_or_tables(schema, tables)
        typed = schema is not None or tables is not None
        if schemas and typed:
            raise ValueError(
                "the schema pass reads the wire's schemas: give it no schema or tables"
            )
        zone = check_time_zone(source_time_zone, typed)
        self._typed = Typed(schema, tables, zone) if typed else None
        self._schemas = schemas

    def decode(
        self,
        values: pa.Array,
        keys: pa.Array | None,
        last: bool = False,
        old_keys: pa.Array | None = None,
    ) -> tuple[pa.RecordBatch, pa.Array]:
        """Decodes a batch of input values.

        Args:
            values: a binary, large_binary, string or large_string array; text is read as
                its UTF-8 bytes, a null is a Kafka tombstone.
            keys: ``None``, or a string array as long as ``values``: the multi-part
                reassembly key of each value (a null key is the default key).
            last: this is also the end of input: the rows :meth:`finish` would give
                follow, in the same batch.
            old_keys: ``None``, or a binary array as long as ``values``: each message's
                ``__debezium.oldkey`` header, null where it has none.

        Returns:
            The event batch and, for each of its rows, the input ordinal (``int64``) of the
            message it comes from, counted across every call of this decoder.

        Raises:
            DecodeError: in ``failfast`` mode, at the first message that does not decode.
        """
        if self._takes_records:
            raise TypeError(
                f"{self._format} decodes record batches (a pyarrow RecordBatch or Table of "
                "records), not an array of binary values"
            )
        if values.type in _AS_BYTES:
            values = values.cast(_AS_BYTES[values.type])
        raws = values.to_pylist()
        key_list = [None] * len(raws) if keys is None else keys.to_pylist()
        if old_keys is not None and len(old_keys) != len(raws):
            raise ValueError(
                f"keys must be a string array as long as the values ({len(raws)}), "
                f"got {len(old_keys)} old keys"
            )
        old_list = None if old_keys is None else old_keys.cast(pa.binary()).to_pylist()
        sink = EventSink(self._format, self._mode, self._stats, self._typed, self._schemas)
        decode_one = self._decoder.decode
        decode_moved = getattr(self._decoder, "decode_with_old_key", None)
        first = self._stats["messages"]
        done = 0
        max_bytes = self._limits.max_message_bytes
        try:
            with _without_gc():
                for ordinal, (raw, key) in enumerate(zip(raws, key_list, strict=True), first):
                    done += 1
                    if raw is None:
                        sink.tombstone(ordinal)
                    elif len(raw) > max_bytes:
                        what = f"message is {len(raw):,} bytes"
                        sink.error(ordinal, raw, self._limits.over("max_message_bytes", what))
                    elif old_list is not None and old_list[ordinal - first] is not None:
                        old_key = old_list[ordinal - first]
                        if decode_moved is None:
                            decode_one(raw, key, ordinal, sink)
                        else:
                            decode_moved(raw, key, old_key, ordinal, sink)
                    else:
                        decode_one(raw, key, ordinal, sink)
        finally:
            self._stats["messages"] = first + done
        if last:
            self._decoder.finish(sink)
        return sink.build()

    def decode_records(
        self, batch: pa.RecordBatch, last: bool = False
    ) -> tuple[pa.RecordBatch, pa.Array]:
        """Decodes a batch of records, for a format whose input is records
        (``datahub-tuple``): one input ordinal per record.

        Args:
            batch: the records.
            last: this is also the end of input, as in :meth:`decode`.

        Returns:
            The event batch and each row's input ordinal, as :meth:`decode` returns them.

        Raises:
            TypeError: the format decodes binary values, or a column has a type the format
                does not read.
            ValueError: the columns do not fit the format (a required column missing).
            DecodeError: in ``failfast`` mode, at the first record that does not decode.
        """
        if not self._takes_records:
            raise TypeError(
                f"{self._format} decodes binary values (an array of messages), not a record batch"
            )
        records = self._decoder.prepare(batch)  # checks the columns first: raises, counts none
        sink = EventSink(self._format, self._mode, self._stats, self._typed, self._schemas)
        record = records.record
        first = self._stats["messages"]
        done = 0
        try:
            with _without_gc():
                for row in range(batch.num_rows):
                    done += 1
                    record(row, first + row, sink)
        finally:
            self._stats["messages"] = first + done
        if last:
            self._decoder.finish(sink)
        return sink.build()

    def finish(self) -> tuple[pa.RecordBatch, pa.Array]:
        """End of input: error rows for whatever is still buffered, and the state cleared.

        Returns:
            The rows and their input ordinals, as :meth:`decode` returns them.
        """
        sink = EventSink(self._format, self._mode, self._stats, self._typed, self._schemas)
        self._decoder.finish(sink)
        return sink.build()

    def stats(self) -> dict[str, int]:
        """What this decoder did so far (docs/events.md).

        Returns:
            ``messages`` (input values seen), ``decoded`` (messages decoded into their
            events), ``events`` (event rows, error rows not counted), ``errors`` (error
            rows, emitted or dropped), ``dropped`` and ``pending`` (multi-part parts
            buffered now): ``messages == decoded + errors + pending``.
        """
        return {**self._stats, "pending": self._decoder.pending}
