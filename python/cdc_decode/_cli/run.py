"""The decoding loop ``cdc-decode decode``, ``stats`` and ``tail`` share: one
:class:`cdc_decode.Decoder` fed chunk by chunk (so DTS multi-part sets join across
chunks), every row traced to the message it came from, bad input counted, never fatal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import Decoder, decode
from .._schema import RECORD_FORMATS
from .inputs import Chunk, InputError

SAMPLE = 50
"""Messages ``--format auto`` tries every format on."""

GUESS_ORDER = (
    "tencent-dts",
    "datastream-avro",
    "datastream-json",
    "debezium-json",
    "datahub-blob",
    "tdsql-json",
)
"""Formats ``--format auto`` tries on values, in the order that breaks a tie."""


def count(n: int, word: str) -> str:
    """``1,204 messages``, ``1 message``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


class UsageError(Exception):
    """A command line that cannot run (exit status 2)."""


def guess_format(values: list[bytes | None], *, engine: str = "native") -> tuple[str, str]:
    """The format the first messages are in, and a sentence saying why.

    Every format decodes the sample; the one giving the most change events (rows whose op
    is neither ``error`` nor ``other``) wins, fewer error rows breaking a tie, then
    :data:`GUESS_ORDER`. A lenient format reading another's JSON gives ``other`` rows, so
    it never beats the right one.
    """
    sample = [v for v in values if v is not None][:SAMPLE]
    if not sample:
        return "tencent-dts", "no non-null message to guess from"
    scores = []
    for rank, fmt in enumerate(GUESS_ORDER):
        ops = decode(sample, fmt, engine=engine).column("op")
        errors = pc.sum(pc.equal(ops, "error")).as_py() or 0
        other = pc.sum(pc.equal(ops, "other")).as_py() or 0
        scores.append((len(ops) - errors - other, -errors, -rank, fmt))
    scores.sort(reverse=True)
    good, _, _, best = scores[0]
    runner = scores[1]
    n = len(sample)
    if not good:
        return best, f"no format gives a change event from the {n} sample messages; say --format"
    why = (
        f"{good} change event{'s' if good != 1 else ''} from {n} sample "
        f"message{'s' if n != 1 else ''}; next best {runner[3]} gave {runner[0]}"
    )
    return best, why


def with_format(
    chunks: Iterator[Chunk],
    format: str,
    *,
    engine: str,
    say: Callable[[str], None],
    enough: int = SAMPLE,
) -> tuple[str, Iterator[Chunk]]:
    """The format (guessed from the first chunks when ``auto``, once ``enough`` messages
    are in: 1 for a live input, which may hold fewer for a long time) and the same
    chunks."""
    if format != "auto":
        return format, chunks
    seen: list[Chunk] = []
    values: list[bytes | None] = []
    chosen = None
    for chunk in chunks:
        seen.append(chunk)
        if chunk.records is not None:
            chosen, why = "datahub-tuple", "the input is Arrow records"
            break
        values += [v for v in chunk.values or () if v is not None]
        if len(values) >= enough:
            break
    if chosen is None:
        if not values:
            return "auto", iter(seen)
        chosen, why = guess_format(values, engine=engine)
    say(f"--format auto: {chosen} ({why})")

    def replay() -> Iterator[Chunk]:
        yield from seen
        yield from chunks

    return chosen, replay()


class Pipeline:
    """Decodes chunks with one decoder and hands rows to observers.

    Attributes:
        wheres: where each message the decoder saw came from, by ordinal.
        input_errors: problems of the input (not messages), counted as errors.
    """

    def __init__(self, format: str, *, engine: str, schema=None, tables=None, columns=None):
        self.format = format
        if format == "auto":  # no message at all: nothing to decode
            self.decoder = None
        else:
            try:
                self.decoder = Decoder(
                    format, engine=engine, schema=schema, tables=tables, columns=columns
                )
            except (ValueError, TypeError) as exc:
                raise UsageError(str(exc)) from exc
        self.tables = (
            None
            if self.decoder is None or self.decoder.tables is None
            else [name for name, _ in self.decoder.tables]
        )
        self.wheres: list[str] = []
        self.input_errors = 0
        self.on_rows: list[Callable[[pa.RecordBatch, pa.Array, list[str]], None]] = []
        self.on_input_error: list[Callable[[InputError, str | None], None]] = []
        self.on_chunk: list[Callable[[Chunk], None]] = []

    def _input_error(self, error: InputError) -> None:
        self.input_errors += 1
        for observer in self.on_input_error:
            observer(error, None if self.format == "auto" else self.format)

    def _rows(self, batch: pa.RecordBatch, ordinals: pa.Array) -> None:
        for observer in self.on_rows:
            observer(batch, ordinals, self.wheres)

    def feed(self, chunk: Chunk) -> None:
        """Decode one chunk; its input errors go out as error rows (after its events:
        a chunk's problems are mostly at its end, a truncated file, say)."""
        for observer in self.on_chunk:
            observer(chunk)
        try:
            self._decode(chunk)
        finally:
            for error in chunk.errors:
                self._input_error(error)

    def _decode(self, chunk: Chunk) -> None:
        if not len(chunk) or self.decoder is None:
            return
        records = chunk.records is not None
        if records != (self.format in RECORD_FORMATS):
            what = "Arrow records" if records else "message values"
            self._input_error(
                InputError(
                    chunk.wheres[0].rpartition("#")[0] or chunk.wheres[0],
                    f"{len(chunk)} {what}, which {self.format} does not read "
                    f"(datahub-tuple reads records, the other formats values)",
                )
            )
            return
        start = len(self.wheres)
        self.wheres.extend(chunk.wheres)
        try:
            if records:
                batch, ordinals = self.decoder.decode_indexed(chunk.records)
            else:
                keys = chunk.keys if chunk.keys and any(k is not None for k in chunk.keys) else None
                batch, ordinals = self.decoder.decode_indexed(chunk.values, keys=keys)
        except (TypeError, ValueError) as exc:  # records without a meta column, say
            # Ordinals are the decoder's count of messages: keep the places in step.
            del self.wheres[max(start, self.decoder.stats()["messages"]) :]
            self._input_error(InputError(chunk.wheres[0], str(exc)))
            return
        self._rows(batch, ordinals)

    def finish(self) -> None:
        """End of input: incomplete multi-part sets become error rows."""
        if self.decoder is not None:
            batch, ordinals = self.decoder.finish_indexed()
            if batch.num_rows:
                self._rows(batch, ordinals)

    def run(self, chunks: Iterable[Chunk]) -> None:
        for chunk in chunks:
            self.feed(chunk)
        self.finish()

    def stats(self) -> dict[str, int]:
        """The decoder's counters plus ``input_errors``."""
        stats = (
            self.decoder.stats()
            if self.decoder is not None
            else dict.fromkeys(("messages", "decoded", "events", "errors", "dropped", "pending"), 0)
        )
        stats["input_errors"] = self.input_errors
        return stats

    def errors(self) -> int:
        s = self.stats()
        return s["errors"] + s["input_errors"]


class Progress:
    """A progress bar on stderr over the input's bytes (tqdm, from the ``cli`` extra);
    nothing when tqdm is not installed or the bar is off."""

    def __init__(self, total: int, *, on: bool, label: str) -> None:
        self.bar = None
        if not on:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            print(
                "cdc-decode: no progress bar: tqdm is not installed "
                "(pip install 'cdc-decode[cli]')",
                file=sys.stderr,
            )
            return
        self.bar = tqdm(
            total=total or None,
            unit="B",
            unit_scale=True,
            desc=label,
            file=sys.stderr,
            leave=True,
            mininterval=0.2,
        )
        self.messages = 0

    def update(self, chunk: Chunk) -> None:
        if self.bar is not None:
            self.messages += len(chunk)
            self.bar.set_postfix_str(f"{self.messages} messages", refresh=False)
            self.bar.update(chunk.bytes_read)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def as_table_map(items: list[str]) -> dict[str, Any]:
    """``--tables`` values: ``DB.TABLE=DDL`` each, or ``@file.json`` holding a mapping."""
    import json

    out: dict[str, Any] = {}
    for item in items:
        if item.startswith("@"):
            try:
                with open(item[1:], encoding="utf-8") as f:
                    loaded = json.load(f)
            except (OSError, ValueError) as exc:
                raise UsageError(f"--tables {item}: {exc}") from exc
            if not isinstance(loaded, dict):
                raise UsageError(f"--tables {item}: expected a JSON object of table: DDL")
            out.update(loaded)
            continue
        name, sep, ddl = item.partition("=")
        if not sep or not name.strip() or not ddl.strip():
            raise UsageError(f"--tables {item!r}: expected DB.TABLE=DDL")
        out[name.strip()] = ddl.strip()
    return out


def as_columns(items: list[str]) -> dict[str, list[str]]:
    """``--columns DB.TABLE=a,b,c`` values (tdsql-json's positional images)."""
    out = {}
    for item in items:
        name, sep, names = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--columns {item!r}: expected DB.TABLE=COL1,COL2,...")
        out[name.strip()] = [n.strip() for n in names.split(",")]
    return out


def schema_text(text: str | None) -> str | None:
    """``--schema`` value: a DDL string, or ``@file`` holding one."""
    if text is None or not text.startswith("@"):
        return text
    try:
        with open(text[1:], encoding="utf-8") as f:
            return f.read().strip()
    except OSError as exc:
        raise UsageError(f"--schema {text}: {exc.strerror}") from exc
