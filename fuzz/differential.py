"""The differential fuzz target (atheris): the same bytes through both engines, which must
give equal batches apart from the `error` text (tests/compare.py), equal ordinals and
equal stats. The Python fallback is the reference the Rust engine is checked against.

A fuzz input is a stream of messages framed as the cargo-fuzz targets read them
(fuzz/src/lib.rs, `split`), so the same corpora seed it; it is decoded in two calls and
finished, as there. `datahub-tuple` (records, not bytes) is compared by the property tests.

Usage: python fuzz/differential.py FORMAT [libFuzzer flags, e.g. -max_total_time=60 DIR]
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import atheris

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
    messages = split(data)
    cut = len(messages) // 2
    out = {}
    for engine in ("native", "python"):
        decoder = cdc_decode.Decoder(FORMAT, engine=engine)
        calls = [decoder.decode_indexed(messages[:cut]), decoder.decode_indexed(messages[cut:])]
        calls.append(decoder.finish_indexed())
        out[engine] = (calls, decoder.stats())
    for (a, a_ordinals), (b, b_ordinals) in zip(out["native"][0], out["python"][0], strict=True):
        assert_same_events(a, b)
        assert a_ordinals.equals(b_ordinals), (a_ordinals, b_ordinals)
    assert out["native"][1] == out["python"][1], (out["native"][1], out["python"][1])


def main() -> None:
    if FORMAT not in cdc_decode.FORMATS or FORMAT == "datahub-tuple":
        sys.exit(f"usage: differential.py FORMAT [flags]; FORMAT one of {cdc_decode.FORMATS}")
    atheris.Setup([sys.argv[0], *sys.argv[2:]], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
