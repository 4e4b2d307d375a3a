"""Stubs for the compiled module ``cdc_decode._native`` (rust/python.rs)."""

import pyarrow as pa

FORMATS: list[str]

class NativeDecoder:
    """A stateful decoder for one stream; :class:`cdc_decode.Decoder` wraps it."""

    def __init__(
        self,
        format: str,
        mode: str,
        columns: dict[str, list[str]] | None = None,
        schema: pa.Schema | None = None,
        tables: list[tuple[str, pa.Schema]] | None = None,
        limits: dict[str, int] | None = None,
        schemas: bool = False,
        source_time_zone: str | None = None,
        unavailable_value: str | None = None,
    ) -> None:
        """``schema``: typed mode's checked columns; ``tables``: multi-table typed mode's
        (name, schema) pairs (docs/typed.md). ``ValueError`` for an unsupported type. Typed
        batches end with ``after_absent`` (``list<utf8>``: the fields each row's ``after``
        image does not carry), as ``cdc_decode.typed_event_schema``/``multi_event_schema``
        say.
        ``limits``: ``cdc_decode.Limits`` fields by name (the rest keep their defaults); an
        unknown name is a ``ValueError``.
        ``schemas``: the schema pass: each call returns rows of
        ``cdc_decode._schema.SCHEMA_PASS_SCHEMA`` (docs/schemas.md) instead of events.
        ``source_time_zone``: typed mode's source time zone, an IANA name (docs/typed.md);
        a ``ValueError`` for an unknown one or without ``schema``/``tables``.
        ``unavailable_value``: debezium-json's placeholder of values the connector did not
        read (``None``: Debezium's default, ``""``: none)."""
    def decode(
        self,
        values: pa.Array,
        keys: pa.Array | None = None,
        last: bool = False,
        old_keys: pa.Array | None = None,
    ) -> tuple[pa.RecordBatch, pa.Int64Array]:
        """Decode one array of messages: the events and each row's input ordinal.
        ``TypeError`` for a format of records (``datahub-tuple``). ``old_keys``: each
        message's ``__debezium.oldkey`` header (binary, null where it has none).

        With ``last``, this is also the end of input (incomplete multi-part sets become
        error rows), as :meth:`finish` would say.
        """

    def decode_records(
        self, batch: pa.RecordBatch, last: bool = False
    ) -> tuple[pa.RecordBatch, pa.Int64Array]:
        """Decode one record batch (``datahub-tuple``): the events and each row's input
        ordinal, one ordinal per record. ``TypeError`` for a format of binary values."""

    def finish(self) -> tuple[pa.RecordBatch, pa.Int64Array]:
        """End of input: error rows for incomplete multi-part sets."""

    def stats(self) -> dict[str, int]:
        """messages, decoded, events, errors, dropped, pending."""

def event_schema_native() -> pa.Schema:
    """The change-event schema as the Rust core builds it."""

def spark_type(dialect: str, source_type: str) -> str | None:
    """The Spark type of a source type in a dialect (docs/types.md); ``None`` for a type the
    mapping does not know, ``ValueError`` for an unknown dialect."""
