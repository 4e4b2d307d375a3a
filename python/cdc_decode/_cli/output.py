"""How ``cdc-decode decode`` shows events: a readable table, JSON lines, Arrow or Parquet.

Every sink takes decoded batches with the place each row's message came from, and the
input's own errors (:class:`~cdc_decode._cli.inputs.InputError`) as error rows.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import sys
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from .._schema import EVENT_SCHEMA
from .._typed import AFTER_ABSENT, split_tables
from .inputs import InputError

RAW_HEX_BYTES = 64
"""Raw bytes shown in hex in the table (``--json`` has them all)."""

VALUE_WIDTH = 40
"""Characters of one value shown in the table (``--wide``: all)."""


def table_name(row: dict[str, Any]) -> str | None:
    """``db.schema.table`` of a row, from the parts it has."""
    parts = [row.get(c) for c in ("source_db", "source_schema", "source_table")]
    parts = [p for p in parts if p]
    return ".".join(parts) if parts else None


def _image(value: Any) -> dict[str, Any] | None:
    """A row image as a dict: a text map (first of a repeated key wins) or a struct."""
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for k, v in value:
        out.setdefault(k, v)
    return out


def images(row: dict[str, Any], tables: list[str] | None) -> tuple[dict | None, dict | None]:
    """The before and after images of a row (typed per table in ``--tables`` mode)."""
    if tables and row.get("table") is not None:
        i = tables.index(row["table"])
        return _image(row.get(f"before_{i}")), _image(row.get(f"after_{i}"))
    return _image(row.get("before")), _image(row.get("after"))


def plain(value: Any) -> Any:
    """A value as JSON has it: binary values in base64, times as ISO text, decimals as
    text, NaN and infinities as text."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _show(value: Any, wide: bool) -> str:
    if value is None:
        return "NULL"
    text = value if isinstance(value, str) else str(plain(value))
    if not wide and len(text) > VALUE_WIDTH:
        text = text[: VALUE_WIDTH - 1] + "…"
    return text


def short_where(where: str) -> str:
    """A message's place without the folders of its file (``values.bin#17``)."""
    head, sep, tail = where.rpartition("/")
    if sep and ("#" in tail or ":" in tail or "." in tail):
        return tail
    return where


def key_text(row: dict, before: dict | None, after: dict | None, wide: bool) -> str:
    names = row.get("primary_key") or []
    if not names or (before is None and after is None):
        return ""
    # Each key column from the after image, else (a partial after image) from before.
    images = [i for i in (after, before) if i is not None]
    value = {n: next((i[n] for i in images if n in i), None) for n in names}
    return ",".join(f"{n}={_show(value[n], wide)}" for n in names)


def changes_text(row: dict, before: dict | None, after: dict | None, wide: bool) -> str:
    """What changed: ``col: old → new`` for images on both sides; the columns of the one
    image otherwise (key columns left out, they are in KEY)."""
    op = row["op"]
    if op == "error":
        raw = row.get("raw") or b""
        if not raw:
            return str(row.get("error"))
        hexed = raw[:RAW_HEX_BYTES].hex()
        more = f"… ({len(raw)} bytes)" if len(raw) > RAW_HEX_BYTES else ""
        return f"{row.get('error')} | raw {hexed}{more}"
    if row.get("ddl"):
        return str(row["ddl"])
    keys = set(row.get("primary_key") or [])
    if before is not None and after is not None:
        # Partial images (minimal row images: the key before, the changed columns after)
        # leave columns out; one missing is unknown there, not NULL. A column only before
        # did not change; one only after is shown with its new value.
        changed = []
        for c, new in after.items():
            if c not in before:
                changed.append(f"{c}={_show(new, wide)}")
            elif before[c] != new:
                changed.append(f"{c}: {_show(before[c], wide)} → {_show(new, wide)}")
        return ", ".join(changed) if changed else "(no change)"
    image = after if after is not None else before
    if image is None:
        return ""
    return ", ".join(f"{c}={_show(v, wide)}" for c, v in image.items() if c not in keys)


def _error_rows(batch: pa.RecordBatch, ordinals: pa.Array) -> tuple[pa.RecordBatch, pa.Array]:
    mask = pc.equal(batch.column("op"), "error")
    return batch.filter(mask), ordinals.filter(mask)


class Sink:
    """Where decoded rows go; counts what it was given."""

    def __init__(self, *, errors_only: bool, tables: list[str] | None) -> None:
        self.errors_only = errors_only
        self.tables = tables
        self.rows = 0

    def events(self, batch: pa.RecordBatch, ordinals: pa.Array, wheres: list[str]) -> None:
        if self.errors_only:
            batch, ordinals = _error_rows(batch, ordinals)
        if batch.num_rows:
            self.rows += batch.num_rows
            self.write(batch, ordinals.to_pylist(), wheres)

    def input_error(self, error: InputError, format: str | None) -> None:
        self.rows += 1
        self.write_input_error(error, format)

    def write(self, batch: pa.RecordBatch, ordinals: list[int], wheres: list[str]) -> None:
        raise NotImplementedError

    def write_input_error(self, error: InputError, format: str | None) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Flush what is left."""


class TableSink(Sink):
    """A readable table: one line per event, error rows with the reason and raw bytes."""

    HEADER = ("SOURCE", "OP", "TABLE", "KEY", "SEQUENCE", "CHANGES")
    CAPS = (36, 13, 40, 40, 84)

    def __init__(self, out: IO[str], *, wide: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.out = out
        self.wide = wide
        self.header = False
        self.widths = [len(h) for h in self.HEADER[:-1]]

    def _lines(self, rows: list[tuple[str, ...]]) -> None:
        # Columns as wide as the widest value so far (up to a cap): a stream cannot be
        # measured ahead, so a wider value later widens the lines after it.
        for i in range(len(self.widths)):
            widest = max((len(r[i]) for r in rows), default=0)
            self.widths[i] = max(self.widths[i], min(widest, self.CAPS[i]))
        if not self.header:
            self.header = True
            rows = [self.HEADER, *rows]
        for row in rows:
            cells = [f"{cell:<{w}}" for cell, w in zip(row, self.widths, strict=False)]
            self.out.write(" ".join([*cells, row[-1]]).rstrip() + "\n")
        self.out.flush()  # a reader (a pipe, a live input) sees each chunk as it is done

    SHOWN = ("op", "source_db", "source_schema", "source_table", "sequence", "primary_key",
             "ddl", "error", "raw", "table")  # fmt: skip

    def write(self, batch: pa.RecordBatch, ordinals: list[int], wheres: list[str]) -> None:
        # Only the columns shown (and the images) become Python objects.
        names = [n for n in batch.schema.names if n in self.SHOWN or n.startswith(("bef", "aft"))]
        lines = []
        for row, ordinal in zip(batch.select(names).to_pylist(), ordinals, strict=True):
            before, after = images(row, self.tables)
            seq = row.get("sequence")
            lines.append(
                (
                    short_where(wheres[ordinal]),
                    row["op"],
                    table_name(row) or "",
                    key_text(row, before, after, self.wide),
                    seq.hex() if seq is not None else "",
                    changes_text(row, before, after, self.wide),
                )
            )
        self._lines(lines)

    def write_input_error(self, error: InputError, format: str | None) -> None:
        row = {"op": "error", "error": error.reason, "raw": error.raw}
        changes = changes_text(row, None, None, True)
        self._lines([(short_where(error.where), "error", "", "", "", changes)])

    def close(self) -> None:
        self.out.flush()


def json_row(row: dict, where: str, ordinal: int | None, tables: list[str] | None) -> dict:
    """One event as ``--json`` prints it."""
    before, after = images(row, tables)
    out: dict[str, Any] = {"message": ordinal, "source": where}
    for name in EVENT_SCHEMA.names:
        value = row.get(name)
        if name in ("before", "after"):
            value = before if name == "before" else after
        elif name == "metadata":
            value = _image(value)
        elif name in ("sequence", "raw"):
            value = None if value is None else value.hex()
        out[name] = plain(value)
    if tables:
        out["table"] = row.get("table")
    if AFTER_ABSENT in row:  # typed mode (docs/typed.md)
        out[AFTER_ABSENT] = row[AFTER_ABSENT]
    return out


class JsonSink(Sink):
    """JSON lines: every event column, ``sequence`` and ``raw`` in hex, images as
    objects, plus ``message`` (its ordinal) and ``source`` (where it came from)."""

    def __init__(self, out: IO[str], **kw: Any) -> None:
        super().__init__(**kw)
        self.out = out

    def write(self, batch: pa.RecordBatch, ordinals: list[int], wheres: list[str]) -> None:
        for row, ordinal in zip(batch.to_pylist(), ordinals, strict=True):
            line = json_row(row, wheres[ordinal], ordinal, self.tables)
            self.out.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.out.flush()

    def write_input_error(self, error: InputError, format: str | None) -> None:
        row = {"format": format, "op": "error", "error": error.reason, "raw": error.raw}
        self.out.write(
            json.dumps(json_row(row, error.where, None, None), ensure_ascii=False) + "\n"
        )

    def close(self) -> None:
        self.out.flush()


class FileSink(Sink):
    """Arrow IPC or Parquet: one file of events, or with ``--tables`` a folder of one
    file per table plus ``_other`` (rows no table claims), as :func:`split_tables` gives.
    Input errors are error rows of the event schema there."""

    def __init__(
        self,
        path: str,
        kind: str,
        *,
        schema: pa.Schema = EVENT_SCHEMA,
        table_schemas: list | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.path = Path(path)
        self.kind = kind
        self.schema = schema
        self.table_schemas = table_schemas
        self.writers: dict[str | None, Any] = {}
        if table_schemas:
            self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, name: str | None) -> Path:
        if not self.table_schemas:
            return self.path
        suffix = ".arrow" if self.kind == "arrow" else ".parquet"
        return self.path / f"{name if name is not None else '_other'}{suffix}"

    def _put(self, name: str | None, batch: pa.RecordBatch) -> None:
        writer = self.writers.get(name)
        if writer is None:
            if self.kind == "arrow":
                writer = pa.ipc.new_file(str(self._file(name)), batch.schema)
            else:
                import pyarrow.parquet as pq

                writer = pq.ParquetWriter(str(self._file(name)), batch.schema)
            self.writers[name] = writer
        writer.write_batch(batch)

    def write(self, batch: pa.RecordBatch, ordinals: list[int], wheres: list[str]) -> None:
        if self.table_schemas:
            for name, part in split_tables(batch, self.table_schemas).items():
                if part.num_rows:
                    self._put(name, part)
        else:
            self._put(None, batch)

    def write_input_error(self, error: InputError, format: str | None) -> None:
        row = {"format": format, "op": "error", "error": error.reason, "raw": error.raw}
        batch = pa.RecordBatch.from_pylist([row], schema=EVENT_SCHEMA)
        if not self.table_schemas and self.schema != EVENT_SCHEMA:
            # Typed: the same columns, the image structs null on an error row.
            arrays = [
                batch.column(f.name)
                if f.name in EVENT_SCHEMA.names and EVENT_SCHEMA.field(f.name).type == f.type
                else pa.nulls(1, f.type)
                for f in self.schema
            ]
            batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._put(None, batch)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        if not self.writers and not self.table_schemas:
            self._put(None, pa.RecordBatch.from_pylist([], schema=self.schema))
            self.writers[None].close()

    def files(self) -> list[Path]:
        return [self._file(name) for name in self.writers]


def stdout() -> IO[str]:
    """Standard output as UTF-8 text whatever the locale (values are any Unicode)."""
    try:
        sys.stdout.reconfigure(encoding="utf-8", errors="replace")
    except (AttributeError, ValueError):
        pass
    return sys.stdout
