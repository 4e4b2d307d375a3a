"""The generator's result, and the files it writes for benchmarks and the demo.

A stream directory holds:

- ``values.bin``: the Kafka values in order, each as a u32 little-endian length then the
  bytes; the length ``0xFFFFFFFF`` (no bytes follow) is a null value (a tombstone). For
  ``datahub-tuple``, whose input is records, ``records.arrow`` instead: the TUPLE records,
  an Arrow IPC file.
- ``expected.arrow``: the expected events, an Arrow IPC file in the event schema.
- ``final_state.json``: ``{"db.table": {"primary_key": [...], "rows": [{column: text or
  null}, ...]}}``, rows sorted by key.
- ``manifest.json``: ``format``, ``messages``, ``rows`` (events), ``bytes`` (of all
  values), ``seed`` and the generator options.
- ``keys.bin``: where the stream has Kafka message keys (``debezium-json`` with
  ``table_count``), one per value, laid out as ``values.bin``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from .apply import State

_NULL = 0xFFFFFFFF


@dataclass
class Stream:
    """A generated stream: the messages, the events they decode to, and the tables after.

    Attributes:
        format: the format name (``"tencent-dts"``).
        seed: the seed it was generated from.
        values: the input, as ``cdc_decode.decode`` takes it: the Kafka values, in order
            (``None`` is a tombstone); for ``datahub-tuple``, the TUPLE records as a
            ``pyarrow.Table``.
        keys: multi-part reassembly keys, one per value, or ``None`` (one partition).
        expected: the events ``cdc_decode.decode(values, format)`` must return, exactly
            (a ``pyarrow.Table`` of ``cdc_decode.event_schema()``).
        final_state: ``"db.table"`` → primary key tuple → row (column → generic text or
            ``None``), as applying the events in ``sequence`` order leaves it (see
            :func:`cdc_decode.generate.apply_events`); tables without rows are left out.
        primary_keys: ``"db.table"`` → primary key column names.
        options: the generator options that made it.
        message_keys: the Kafka message key of each value (``debezium-json`` with
            ``table_count``: the key's JSON, as Debezium writes it), or ``None``.
        final_values: for the MySQL source (every format but Debezium's other
            connectors): ``"db.table"`` → (column name → its
            ``generate.source.Column``, key → row of the source's own values: Python
            objects, ``int``, ``Decimal``, ``datetime`` …, whose text ``final_state``
            holds); ``None`` otherwise. Not written to files.
        dropped: ``"db.table"`` → the columns the source dropped (``table_count``): the
            source holds no value of them any more, so their values in a mirror are not
            compared with the source's last ones (a source that splits an update into a
            delete and an insert, DataHub, clears them; one that sends it whole keeps
            them).
    """

    format: str
    seed: int
    values: list[bytes | None] | pa.Table
    expected: pa.Table
    final_state: State
    primary_keys: dict[str, list[str]]
    keys: list[str | None] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    message_keys: list[bytes | None] | None = None
    final_values: dict | None = field(default=None, repr=False)
    dropped: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)

    @property
    def messages(self) -> int:
        """The number of values (records, for ``datahub-tuple``)."""
        if isinstance(self.values, pa.Table):
            return self.values.num_rows
        return len(self.values)

    @property
    def rows(self) -> int:
        """The number of expected events."""
        return self.expected.num_rows

    @property
    def bytes(self) -> int:
        """The total size of the values (of the records' Arrow buffers, for
        ``datahub-tuple``)."""
        if isinstance(self.values, pa.Table):
            return self.values.nbytes
        return sum(len(v) for v in self.values if v is not None)

    def manifest(self) -> dict[str, Any]:
        """What ``manifest.json`` holds."""
        return {
            "format": self.format,
            "messages": self.messages,
            "rows": self.rows,
            "bytes": self.bytes,
            "seed": self.seed,
            "options": self.options,
        }

    def summary(self) -> str:
        """One line: format, counts, sizes."""
        mean = self.bytes / self.messages if self.messages else 0
        return (
            f"{self.format}: {self.messages} messages, {self.rows} events, "
            f"{self.bytes} bytes ({mean:.0f} bytes/message), seed {self.seed}"
        )

    def write(self, directory: str | Path) -> Path:
        """Write ``values.bin`` (``records.arrow`` for ``datahub-tuple``),
        ``expected.arrow``, ``final_state.json`` and ``manifest.json`` into ``directory``
        (created if needed).

        Returns:
            The directory.
        """
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        if isinstance(self.values, pa.Table):
            with pa.OSFile(str(path / "records.arrow"), "wb") as sink:
                with pa.ipc.new_file(sink, self.values.schema) as writer:
                    writer.write_table(self.values, max_chunksize=65536)
        else:
            write_values(path / "values.bin", self.values)
        if self.message_keys is not None:
            write_values(path / "keys.bin", self.message_keys)
        with pa.OSFile(str(path / "expected.arrow"), "wb") as sink:
            with pa.ipc.new_file(sink, self.expected.schema) as writer:
                writer.write_table(self.expected, max_chunksize=65536)
        write_final_state(path / "final_state.json", self.final_state, self.primary_keys)
        (path / "manifest.json").write_text(json.dumps(self.manifest(), indent=2) + "\n")
        return path


def write_values(path: str | Path, values: Iterable[bytes | None]) -> None:
    """Write values as ``values.bin``: u32 LE length + bytes each, ``0xFFFFFFFF`` for null."""
    with open(path, "wb") as out:
        for value in values:
            if value is None:
                out.write(struct.pack("<I", _NULL))
            else:
                out.write(struct.pack("<I", len(value)))
                out.write(value)


def _file(path: str | Path, name: str) -> Path:
    """``path``, or the file ``name`` in it when it is a stream directory."""
    path = Path(path)
    return path / name if path.is_dir() else path


def _read_arrow(path: str | Path, name: str) -> pa.Table:
    with pa.memory_map(str(_file(path, name))) as source:
        return pa.ipc.open_file(source).read_all()


def read_values(path: str | Path) -> list[bytes | None]:
    """Read a ``values.bin`` file (or a stream directory holding one) back into values."""
    path = _file(path, "values.bin")
    data = memoryview(path.read_bytes())
    values: list[bytes | None] = []
    at = 0
    while at < len(data):
        if at + 4 > len(data):
            raise ValueError(f"{path}: truncated length at byte {at}")
        (length,) = struct.unpack_from("<I", data, at)
        at += 4
        if length == _NULL:
            values.append(None)
            continue
        if at + length > len(data):
            raise ValueError(f"{path}: value at byte {at - 4} runs past the end")
        values.append(bytes(data[at : at + length]))
        at += length
    return values


def read_records(path: str | Path) -> pa.Table:
    """Read ``records.arrow`` (or the one in a stream directory): ``datahub-tuple`` input."""
    return _read_arrow(path, "records.arrow")


def read_expected(path: str | Path) -> pa.Table:
    """Read ``expected.arrow`` (or the one in a stream directory)."""
    return _read_arrow(path, "expected.arrow")


def _sort_key(key: tuple) -> tuple:
    return tuple((v is not None, v or "") for v in key)


def write_final_state(path: str | Path, state: State, primary_keys: dict[str, list[str]]) -> None:
    """Write a table state as ``final_state.json``."""
    doc = {
        table: {
            "primary_key": primary_keys[table],
            "rows": [rows[key] for key in sorted(rows, key=_sort_key)],
        }
        for table, rows in sorted(state.items())
    }
    Path(path).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def read_final_state(path: str | Path) -> State:
    """Read ``final_state.json`` (or the one in a stream directory) back into a state."""
    doc = json.loads(_file(path, "final_state.json").read_text(encoding="utf-8"))
    return {
        table: {tuple(row[c] for c in spec["primary_key"]): row for row in spec["rows"]}
        for table, spec in doc.items()
    }
