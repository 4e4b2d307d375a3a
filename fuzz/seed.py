"""Build the fuzz seed corpora into fuzz/corpus/<target>/ (git-ignored; `make fuzz` runs it).

Seeds are in the fuzz input format (fuzz/src/lib.rs, `split`): each message a u32
little-endian length then its bytes, as the generators' ``values.bin``. They come from
the generators (windows of one to four consecutive messages, so multi-part DTS sets and
their neighbours are there), the real fixtures in ../shared/fixtures, and the hostile DTS
corpus in tests/dts_corpus. ``datahub-tuple`` seeds are recipes for record batches
(fuzz/src/records.rs) with the meta columns it requires. ``typed`` seeds are those of the
formats of binary values behind a header declaring the columns' types (``typed_header``).

Usage: python fuzz/seed.py [--messages N]
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import cdc_decode

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"
CORPUS = ROOT / "fuzz" / "corpus"
# The formats of binary values (datahub-tuple takes records: recipes, below), in the order
# of the typed target's format numbers (fuzz/src/lib.rs, value_formats).
BINARY_FORMATS = [f for f in cdc_decode.FORMATS if f != "datahub-tuple"]


def frame(messages: list[bytes | None]) -> bytes:
    """Messages in the fuzz input format."""
    out = bytearray()
    for message in messages:
        if message is None:
            out += struct.pack("<I", 0xFFFFFFFF)
        else:
            out += struct.pack("<I", len(message)) + message
    return bytes(out)


def read_values(path: Path) -> list[bytes | None]:
    data, values, at = path.read_bytes(), [], 0
    while at < len(data):
        (length,) = struct.unpack_from("<I", data, at)
        at += 4
        if length == 0xFFFFFFFF:
            values.append(None)
        else:
            values.append(data[at : at + length])
            at += length
    return values


def save(target: str, seed: bytes) -> None:
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(seed).hexdigest()).write_bytes(seed)


def generated(format: str, messages: int) -> list[bytes | None]:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [sys.executable, "-m", "cdc_decode", "generate", format, "--messages", str(messages)]
            + ["--seed", "1", "--out", out]
            + (["--max-message-bytes", "2048"] if format == "tencent-dts" else []),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return read_values(Path(out) / "values.bin")


def fixtures(format: str) -> list[bytes]:
    """Each real message of the fixtures for a format, one per seed."""
    if format == "datastream-avro":
        return [p.read_bytes() for p in sorted((FIXTURES / "datastream-avro").glob("*.avro"))]
    if format == "tencent-dts":
        return [p.read_bytes() for p in sorted((ROOT / "tests" / "dts_corpus").glob("*.bin"))]
    folder = {"datahub-blob": "datahub-blob", "debezium-json": "debezium"}.get(format)
    if folder is None:
        return []
    found = []
    if format == "debezium-json":  # each connector's messages (tests/debezium_corpus)
        for path in sorted((ROOT / "tests" / "debezium_corpus").glob("*.jsonl")):
            found += [line for line in path.read_bytes().splitlines() if line.strip()]
    for path in sorted((FIXTURES / folder).iterdir()):
        text = path.read_bytes()
        if path.suffix == ".jsonl":
            found += [line for line in text.splitlines() if line.strip()]
        else:  # a license header, then one JSON message
            found.append(text[text.index(b"{") :])
    return found


def tuple_recipes() -> list[bytes]:
    """Record-batch recipes (fuzz/src/records.rs) of good TUPLE records: the four required
    meta columns as strings, an int64 and a string data column, four rows."""
    word = {"I": 0, "U": 1, "D": 2, "Y": 3, "N": 4, "-1": 6, "12": 8, "shop.users": 10}

    def strings(*words: str) -> bytes:  # per cell: not null, a word, which word
        return b"".join(bytes([1, 1, word[w]]) for w in words)

    recipes = []
    for ops in [("I", "U", "U", "D"), ("D", "I", "U", "U")]:
        flags = {"I": ("N", "Y"), "D": ("Y", "N")}
        before, after, toggle = [], [], False
        for op in ops:
            if op == "U":
                b, a = ("Y", "N") if not toggle else ("N", "Y")
                toggle = not toggle
            else:
                b, a = flags[op]
            before.append(b)
            after.append(a)
        recipe = bytes([5, 4])
        recipe += bytes([0, 0, 0]) + strings("12", "12", "12", "-1")
        recipe += bytes([2, 0, 0]) + strings(*ops)
        recipe += bytes([5, 0, 0]) + strings(*before)
        recipe += bytes([6, 0, 0]) + strings(*after)
        recipe += bytes([8, 9 << 1, 0])  # "id" (NAMES[8]): int64 (kind 9)
        recipe += b"".join(bytes([1]) + i.to_bytes(8, "big") for i in range(4))
        recipes.append(recipe)
    return recipes


# The typed target's header (fuzz/src/lib.rs, `check_typed`): the names it declares types
# for, and the kind numbers of `typed_column`.
TYPED_NAMES = (
    "id name balance score birthday created_at avatar order_id amount discount placed_at "
    "line_no sku unit_price gift_wrap returned_at checksum 0 1 4"
).split()
KINDS = {"boolean": 1, "bigint": 5, "double": 7, "string": 8, "binary": 9, "date": 10}
KINDS |= {"timestamp": 12, "timestamp_ntz": 13, "int": 4, "smallint": 3, "float": 6}


def typed_header(format_index: int, multi: bool, types: dict[str, str]) -> bytes:
    """A typed input's header declaring ``types`` (name to Spark type) for its names."""
    header = bytearray([format_index | (0x80 if multi else 0)])
    for name in TYPED_NAMES:
        spark = types.get(name)
        if spark is None:
            header += bytes(3)
        elif spark.startswith("decimal("):
            p, s = (int(x) for x in spark[len("decimal(") : -1].split(","))
            header += bytes([11, p - 1, s])
        else:
            header += bytes([KINDS[spark], 0, 0])
    return bytes(header)


def typed_seeds(values: dict[str, list[bytes | None]]) -> list[bytes]:
    """Typed inputs: each format's generated windows under the types the tables declare
    (one schema for all tables, and one per table), under all-text and under
    mistaken types (every conversion's error path)."""
    from cdc_decode.generate.source import default_tables

    right = {"0": "bigint", "1": "string", "2": "string", "3": "string", "4": "double"}
    for table in default_tables():
        for column in table.columns:
            right.setdefault(column.name, column.spark_type)
    text = dict.fromkeys(right, "string")
    wrong = {
        name: ["int", "date", "timestamp_ntz", "decimal(5,2)", "boolean"][i % 5]
        for i, name in enumerate(right)
    }
    seeds = []
    for index, format in enumerate(BINARY_FORMATS):
        stream = values[format]
        for at in range(0, min(len(stream), 60), 3):
            window = frame(stream[at : at + 3])
            for multi, types in [(False, right), (True, right), (False, text), (True, wrong)]:
                seeds.append(typed_header(index, multi, types) + window)
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    args = parser.parse_args()
    streams = {}
    for format in BINARY_FORMATS:
        values = streams[format] = generated(format, args.messages)
        at, width = 0, 1
        while at < len(values):
            save(format, frame(values[at : at + width]))
            at += width
            width = width % 4 + 1
        for message in fixtures(format):
            save(format, frame([message]))
    for recipe in tuple_recipes():
        save("datahub-tuple", recipe)
    for seed in typed_seeds(streams):
        save("typed", seed)
    for folder in sorted(CORPUS.iterdir()):
        print(f"{folder.name}: {len(list(folder.iterdir()))} seeds")


if __name__ == "__main__":
    main()
