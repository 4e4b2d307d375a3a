"""Hostile inputs for every format, decoded (and read by the schema pass) on one engine
(the argument: native or python); prints {"problems", "counts", "peak"} as JSON.
tests/test_hardening.py runs it under a 3 GiB address-space limit. Inputs are built one at
a time, as decoded, so the process holds one hostile input at a time, as a worker would.

Usage: python tests/hostile.py ENGINE
"""

import json
import sys
import zlib
from pathlib import Path

import pyarrow as pa

import cdc_decode
from cdc_decode import _proto as pb
from cdc_decode.generate.datastream_avro import avro_long as zz

MB = 1 << 20
CORPUS = Path(__file__).resolve().parent / "dts_corpus"


def avro(schema, body, count=1, codec=None, meta=()):
    text = schema if isinstance(schema, bytes) else json.dumps(schema).encode()
    entries = [(b"avro.schema", text)] + ([(b"avro.codec", codec)] if codec else []) + list(meta)
    head = b"Obj\x01" + zz(len(entries))
    for key, value in entries:
        head += zz(len(key)) + key + zz(len(value)) + value
    sync = bytes(range(16))
    return head + b"\x00" + sync + zz(count) + zz(len(body)) + body + sync


def deflate_bomb(size):
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(MB)
    data = b"".join(packer.compress(chunk) for _ in range(size // MB))
    return data + packer.flush()


def string():
    return b"x" * (50 * MB)


def envelope(**fields):
    return pb.Envelope(**fields).SerializeToString()


JSON = {
    "nesting-1e6-arrays": lambda: b"[" * 1_000_000,
    "nesting-1e6-objects": lambda: b'{"a":' * 1_000_000,
    "string-50mb-unterminated": lambda: b'{"a":"' + string(),
    "string-50mb-not-the-format": lambda: b'{"payload":"' + string() + b'"}',
    "key-50mb": lambda: b'{"' + string() + b'":1',
    "number-50mb": lambda: b"[" + b"9" * (50 * MB) + b"]",
    "elements-10m": lambda: b"[" + b"0," * 10_000_000 + b"0",
}
HOSTILE = {
    format: dict(JSON)
    for format in ["datahub-blob", "tdsql-json", "debezium-json", "datastream-json"]
}
HOSTILE["tencent-dts"] = {
    **{p.stem: p.read_bytes for p in sorted(CORPUS.glob("*.bin"))},
    # data claims 2 GiB after a 5-byte length prefix
    "envelope-data-2gib": lambda: b"\x08\x01\x22\x80\x80\x80\x80\x08abc",
    "multipart-total-4e9": lambda: envelope(
        version=1, total=4_000_000_000, index=0, data=b"x" * 100
    ),
    "multipart-50mb-part": lambda: envelope(version=1, total=3, index=0, data=string()),
    "entries-50mb-garbage": lambda: envelope(version=1, data=b"\x0a" + b"\xff" * (50 * MB)),
    "string-50mb-in-entry": lambda: envelope(
        version=1, data=b"\x0a\x80\x80\x80\x19" + string() + b"\xff"
    ),
}
HOSTILE["datastream-avro"] = {
    "block-count-2e40": lambda: avro("long", b"\x02", count=1 << 40),
    "string-length-2e40": lambda: avro("string", b"\x80\x80\x80\x80\x80\x40ab"),
    "array-count-2e31": lambda: avro(
        {"type": "array", "items": "long"}, b"\xfe\xff\xff\xff\x0f\x02"
    ),
    "map-count-2e31": lambda: avro({"type": "map", "values": "null"}, b"\xfe\xff\xff\xff\x0f\x02a"),
    "array-of-nulls-2e40": lambda: avro({"type": "array", "items": "null"}, zz(1 << 40) + b"\x00"),
    "metadata-count-2e40": lambda: b"Obj\x01" + zz(1 << 40) + b"\x02a\x02b",
    "schema-length-2e40": lambda: b"Obj\x01\x02\x16avro.schema" + zz(1 << 40) + b"{",
    "block-size-2e40": lambda: avro("long", b"", count=1)[:-17] + zz(1 << 40) + b"\x02",
    "deflate-bomb-1gib": lambda: avro("long", deflate_bomb(1 << 30), codec=b"deflate"),
    "string-50mb": lambda: avro("string", zz(len(string())) + string()),
    "nesting-100k": lambda: avro(
        {
            "type": "record",
            "name": "A",
            "fields": [{"name": "n", "type": ["null", {"type": "array", "items": "A"}]}],
        },
        b"\x02\x02" * 100_000 + b"\x00" * 100_001,
    ),
    "schema-nesting-1e5": lambda: avro(b"[" * 100_000 + b"]" * 100_000, b""),
}
TUPLE = {
    "operation-50mb": lambda: {
        "_sequence_id_": ["1"],
        "_operation_type_": [string().decode()],
        "_before_image_": ["N"],
        "_after_image_": ["Y"],
    },
    "sequence-50mb": lambda: {
        "_sequence_id_": ["9" * (50 * MB)],
        "_operation_type_": ["I"],
        "_before_image_": ["N"],
        "_after_image_": ["Y"],
    },
}

problems, counts = [], {}
for engine in [sys.argv[1]]:
    for format, inputs in HOSTILE.items():
        for name, make in inputs.items():
            print(engine, format, name, file=sys.stderr, flush=True)
            value = make()
            batch = cdc_decode.decode([value], format, engine=engine)
            ops = batch.column("op").to_pylist()
            error = batch.column("error")[0].as_py() if batch.num_rows else None
            raw = batch.column("raw")[0].as_buffer() if batch.num_rows else None
            if not (ops == ["error"] and error and raw is not None and raw == value):
                problems.append(f"{engine} {format} {name}: {ops} {str(error)[:200]}")
            del batch, raw
            if engine == "native":
                # The schema pass reads the message as the decoder does: the same one error.
                # (The Python engine's pass is its decode, already run above.)
                schemas = cdc_decode.table_schemas([value], format, engine=engine)
                if len(schemas) or [o for o, _ in schemas.errors] != [0]:
                    problems.append(f"{engine} {format} {name} (schema pass): {schemas!r}")
                del schemas
            counts[engine] = counts.get(engine, 0) + 1
            del value
    for name, make in TUPLE.items():
        batch = cdc_decode.decode(pa.table(make()), "datahub-tuple", engine=engine)
        ops = batch.column("op").to_pylist()
        raw = batch.column("raw")[0].as_buffer() if batch.num_rows else None
        if not (
            ops == ["error"]
            and batch.column("error")[0].as_py()
            and raw is not None
            and raw.size > 50 * MB
        ):
            problems.append(f"{engine} datahub-tuple {name}: {ops}")
        del batch, raw
        if engine == "native":
            schemas = cdc_decode.table_schemas(pa.table(make()), "datahub-tuple", engine=engine)
            if len(schemas) or [o for o, _ in schemas.errors] != [0]:
                problems.append(f"{engine} datahub-tuple {name} (schema pass): {schemas!r}")
            del schemas
        counts[engine] += 1
status = Path("/proc/self/status").read_text().splitlines()
peak = [line for line in status if line.startswith("VmPeak")]
print(json.dumps({"problems": problems, "counts": counts, "peak": peak}))
