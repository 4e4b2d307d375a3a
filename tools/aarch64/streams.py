"""Both halves of tools/aarch64/check.sh, in one file that Python 3.10+ runs anywhere.

    python streams.py write DIR   # on the host: each format's stream and its events
    python streams.py check DIR   # on aarch64: the same events, or exit 1

``write`` generates a stream per format (the generator needs the python-engine extra,
which the aarch64 side does not have) and decodes it with the host's native engine;
``check`` decodes the same values with the wheel being checked and compares the batches
(schema and values) with the host's.
"""

from __future__ import annotations

import platform
import struct
import sys
from pathlib import Path

import pyarrow as pa

import cdc_decode

NULL = 0xFFFFFFFF


def write(folder: Path) -> None:
    from cdc_decode.generate import generate

    for format in cdc_decode.FORMATS:
        out = folder / format
        out.mkdir(parents=True)
        stream = generate(format, messages=300, seed=1)
        if isinstance(stream.values, pa.Table):
            values = stream.values
            save(out / "records.arrow", values)
        else:
            values = list(stream.values)
            with open(out / "values.bin", "wb") as sink:
                for value in values:
                    sink.write(struct.pack("<I", NULL if value is None else len(value)))
                    sink.write(value or b"")
        save(out / "events.arrow", pa.Table.from_batches([cdc_decode.decode(values, format)]))


def check(folder: Path) -> int:
    failed = 0
    for out in sorted(p for p in folder.iterdir() if p.is_dir()):
        format = out.name
        if (out / "records.arrow").exists():
            values = load(out / "records.arrow")
        else:
            values = read_values(out / "values.bin")
        got = pa.Table.from_batches([cdc_decode.decode(values, format)])
        want = load(out / "events.arrow")
        same = got.equals(want, check_metadata=True)
        failed += not same
        verdict = "equal" if same else "DIFFERENT"
        print(f"{platform.machine()} {format}: {got.num_rows} events, {verdict}")
    return 1 if failed else 0


def read_values(path: Path) -> list[bytes | None]:
    data = path.read_bytes()
    values: list[bytes | None] = []
    at = 0
    while at < len(data):
        (size,) = struct.unpack_from("<I", data, at)
        at += 4
        if size == NULL:
            values.append(None)
        else:
            values.append(data[at : at + size])
            at += size
    return values


def save(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def load(path: Path) -> pa.Table:
    with pa.OSFile(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "write":
        write(folder)
    else:
        sys.exit(check(folder))
