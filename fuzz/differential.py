"""The differential fuzz target (atheris): the same bytes through both engines, which must
give equal batches apart from the `error` text (tests/compare.py), equal ordinals and
equal stats. The Python fallback is the reference the Rust engine is checked against.

A fuzz input is a stream of messages framed as the cargo-fuzz targets read them
(fuzz/src/lib.rs, `split`), so the same corpora seed it; it is decoded in two calls and
finished, as there. `datahub-tuple` (records, not bytes) is compared by the property tests.

`typed` reads the `typed` cargo-fuzz target's inputs (fuzz/src/lib.rs, `check_typed`): a
header picks a format of binary values, one schema or three tables, and a type for each of
twenty column names; both engines then decode the messages after it in typed mode (and
must both refuse a schema of no column).

Usage: python fuzz/differential.py FORMAT|typed [libFuzzer flags, e.g. -max_total_time=60 DIR]
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import atheris
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

# The Python fallback is what atheris can see: its coverage guides the fuzzing.
with atheris.instrument_imports(include=["cdc_decode"]):
    import cdc_decode
    import cdc_decode.fallback
    from cdc_decode.fallback import (  # noqa: F401
        datahub_blob,
        datastream_avro,
        datastream_json,
        debezium_json,
        tdsql_json,
        tencent_dts,
    )

from compare import assert_same_events  # noqa: E402

FORMAT = sys.argv[1] if len(sys.argv) > 1 else ""

# fuzz/src/lib.rs: TYPED_NAMES, TYPED_TABLES, TYPED_HEADER, value_formats, typed_column.
TYPED_NAMES = (
    "id name balance score birthday created_at avatar order_id amount discount placed_at "
    "line_no sku unit_price gift_wrap returned_at checksum 0 1 4"
).split()
TYPED_TABLES = ["shop.users", "shop.orders", "shop.order_items"]
TYPED_HEADER = 1 + 3 * len(TYPED_NAMES)
VALUE_FORMATS = [f for f in cdc_decode.FORMATS if f != "datahub-tuple"]


def typed_column(kind: int, p: int, s: int) -> pa.DataType | None:
    precision = 1 + p % 38
    kind %= 14
    if kind == 11:
        return pa.decimal128(precision, s % (precision + 1))
    return [
        None, pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(),
        pa.float64(), pa.string(), pa.binary(), pa.date32(), None,
        pa.timestamp("us", tz="UTC"), pa.timestamp("us"),
    ][kind]  # fmt: skip


def typed_options(header: bytes) -> tuple[str, dict]:
    """The format and the Decoder's schema=/tables= argument a typed input's header picks."""
    format = VALUE_FORMATS[(header[0] & 0x7F) % len(VALUE_FORMATS)]
    fields = []
    for name, at in zip(TYPED_NAMES, range(1, TYPED_HEADER, 3), strict=True):
        data_type = typed_column(*header[at : at + 3])
        if data_type is not None:
            fields.append(pa.field(name, data_type))
    schema = pa.schema(fields)
    if header[0] & 0x80:
        return format, {"tables": dict.fromkeys(TYPED_TABLES, schema)}
    return format, {"schema": schema}


def split(data: bytes) -> list[bytes | None]:
    """The messages of a fuzz input, as fuzz/src/lib.rs `split` reads them."""
    messages: list[bytes | None] = []
    while data:
        if len(data) < 4:
            messages.append(data)
            break
        (length,) = struct.unpack_from("<I", data)
        if length == 0xFFFFFFFF:
            messages.append(None)
            data = data[4:]
        elif length <= len(data) - 4:
            messages.append(data[4 : 4 + length])
            data = data[4 + length :]
        else:
            messages.append(data)
            break
    return messages


def one_input(data: bytes) -> None:
    format, options = FORMAT, {}
    if FORMAT == "typed":
        if len(data) < TYPED_HEADER:
            return
        format, options = typed_options(data[:TYPED_HEADER])
        data = data[TYPED_HEADER:]
    messages = split(data)
    cut = len(messages) // 2
    out = {}
    refused = {}
    for engine in ("native", "python"):
        try:
            decoder = cdc_decode.Decoder(format, engine=engine, **options)
        except ValueError as error:  # a schema of no column
            refused[engine] = str(error)
            continue
        calls = [decoder.decode_indexed(messages[:cut]), decoder.decode_indexed(messages[cut:])]
        calls.append(decoder.finish_indexed())
        out[engine] = (calls, decoder.stats())
    if refused:
        assert len(refused) == 2, refused
        return
    for (a, a_ordinals), (b, b_ordinals) in zip(out["native"][0], out["python"][0], strict=True):
        assert_same_events(a, b)
        assert a_ordinals.equals(b_ordinals), (a_ordinals, b_ordinals)
    assert out["native"][1] == out["python"][1], (out["native"][1], out["python"][1])


def main() -> None:
    if FORMAT not in [*VALUE_FORMATS, "typed"]:
        sys.exit(f"usage: differential.py FORMAT [flags]; FORMAT one of {VALUE_FORMATS} or typed")
    atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
