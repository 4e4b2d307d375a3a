"""What ``cdc-decode stats`` counts: messages and their sizes, events by op and table,
errors by reason, the sequence range, and what looks wrong in the order (events out of
order, events seen twice, Kafka offsets missing or repeated)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .inputs import Chunk, InputError

_NUMBER = re.compile(r"\b\d+\b")
_QUOTED = re.compile(r'"[^"]*"|\'[^\']*\'')


def reason(error: str | None) -> str:
    """An error message with its particulars (numbers, quoted values) blanked, so errors
    of one cause count together: ``message 17: expected ...`` → ``message N: ...``."""
    text = _QUOTED.sub('"…"', error or "(no reason)")
    text = _NUMBER.sub("N", text)
    return text if len(text) <= 120 else text[:119] + "…"


def _stream(where: str) -> str:
    """The partition or file of a message's place: ``orders/0@42`` → ``orders/0``,
    ``values.bin#7`` → ``values.bin``, ``dump.jsonl:3`` → ``dump.jsonl``."""
    for mark in ("@", "#", ":"):
        head, sep, tail = where.rpartition(mark)
        if sep and tail.isdigit():
            return head
    return where


def _percentile(sorted_values: list[int], q: float) -> int:
    if not sorted_values:
        return 0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class Stats:
    """Counts over everything a pipeline saw; :meth:`report` gives them as a dict."""

    def __init__(self, tables: list[str] | None = None) -> None:
        self.tables = tables
        self.sizes: list[int] = []
        self.tombstones = 0
        self.record_bytes = 0
        self.ops: Counter[str] = Counter()
        self.by_table: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.seq_min: bytes | None = None
        self.seq_max: bytes | None = None
        self.out_of_order = 0
        self.last_seq: dict[str | None, bytes] = {}
        self.seen: set[int] = set()
        self.duplicates = 0
        self.offsets: dict[str, list[int]] = defaultdict(list)
        self.time_min = None
        self.time_max = None

    def chunk(self, chunk: Chunk) -> None:
        if chunk.records is not None:
            self.record_bytes += chunk.records.nbytes
            return
        for value in chunk.values or ():
            if value is None:
                self.tombstones += 1
            else:
                self.sizes.append(len(value))
        for stream, offset in chunk.offsets or ():
            self.offsets[stream].append(offset)

    def input_error(self, error: InputError, format: str | None) -> None:
        self.ops["error"] += 1
        self.reasons[f"input: {error.reason}"] += 1  # our own words, no particulars

    def rows(self, batch: pa.RecordBatch, ordinals: pa.Array, wheres: list[str]) -> None:
        """Count a decoded batch; column at a time, images read only for the rows a
        duplicate check needs them for."""
        ops = batch.column("op")
        for entry in pc.value_counts(ops).to_pylist():
            self.ops[entry["values"]] += entry["counts"]
        is_error = pc.equal(ops, "error")
        for error in batch.filter(is_error).column("error").to_pylist():
            self.reasons[reason(error)] += 1
        good = batch.filter(pc.invert(is_error))
        ordinals = ordinals.filter(pc.invert(is_error)).to_pylist()
        parts = [good.column(c).to_pylist() for c in ("source_db", "source_schema", "source_table")]
        names = [".".join(p for p in row if p) or None for row in zip(*parts, strict=True)]
        self.by_table.update(n for n in names if n)
        when = pc.min_max(good.column("event_time")).as_py()
        if when["min"] is not None:
            first, last = when["min"], when["max"]
            self.time_min = first if self.time_min is None else min(self.time_min, first)
            self.time_max = last if self.time_max is None else max(self.time_max, last)
        sequences = good.column("sequence")
        seq_range = pc.min_max(sequences).as_py()
        if seq_range["min"] is not None:
            low, high = seq_range["min"], seq_range["max"]
            self.seq_min = low if self.seq_min is None else min(self.seq_min, low)
            self.seq_max = high if self.seq_max is None else max(self.seq_max, high)
        sequences = sequences.to_pylist()
        event_ids = good.column("event_id").to_pylist()
        op_list = good.column("op").to_pylist()
        # Without an event id, the images tell one change from another (a snapshot's
        # rows can share a sequence): read them for those rows only.
        need = [i for i, (e, q) in enumerate(zip(event_ids, sequences, strict=True)) if not e and q]
        image_of: dict[int, str] = {}
        if need:
            subset = good.take(pa.array(need, pa.int64()))
            pairs = zip(
                *(subset.column(c).to_pylist() for c in self._image_columns(subset)), strict=True
            )
            image_of = dict(zip(need, (repr(p) for p in pairs), strict=True))
        for i, seq in enumerate(sequences):
            if seq is None:
                continue
            # Order is per Kafka partition, or per input file: a sequence lower than the
            # one before it there.
            stream = _stream(wheres[ordinals[i]])
            last = self.last_seq.get(stream)
            if last is not None and seq < last:
                self.out_of_order += 1
            self.last_seq[stream] = seq
            # The same change twice: equal event id, or (without one) equal sequence,
            # table, op and images.
            identity = event_ids[i] or (seq, names[i], op_list[i], image_of.get(i))
            fingerprint = hash(identity)
            if fingerprint in self.seen:
                self.duplicates += 1
            else:
                self.seen.add(fingerprint)

    def _image_columns(self, batch: pa.RecordBatch) -> list[str]:
        """The columns holding row images: ``before``/``after``, and with ``--tables``
        each table's typed pair too."""
        return [n for n in batch.schema.names if n.startswith(("before", "after"))]

    def _offsets(self) -> dict[str, Any]:
        out = {}
        for stream, offsets in sorted(self.offsets.items()):
            ordered = sorted(offsets)
            distinct = sorted(set(ordered))
            gaps = []
            missing = 0
            for a, b in zip(distinct, distinct[1:], strict=False):
                if b > a + 1:
                    missing += b - a - 1
                    if len(gaps) < 5:
                        gaps.append([a + 1, b - 1])
            out[stream] = {
                "first": distinct[0],
                "last": distinct[-1],
                "messages": len(ordered),
                "missing": missing,
                "gaps": gaps,
                "repeated": len(ordered) - len(distinct),
            }
        return out

    def report(self, counters: dict[str, int], *, format: str, seconds: float) -> dict:
        sizes = sorted(self.sizes)
        return {
            "format": format,
            "messages": counters["messages"],
            "decoded": counters["decoded"],
            "events": counters["events"],
            "errors": counters["errors"] + counters["input_errors"],
            "input_errors": counters["input_errors"],
            "tombstones": self.tombstones,
            "bytes": sum(sizes) if sizes else self.record_bytes,
            # Records (datahub-tuple) have no size of their own: their Arrow bytes only.
            "sizes": {
                "min": sizes[0],
                "median": _percentile(sizes, 0.5),
                "p99": _percentile(sizes, 0.99),
                "max": sizes[-1],
            }
            if sizes
            else None,
            "ops": dict(self.ops.most_common()),
            "tables": dict(self.by_table.most_common()),
            "error_reasons": dict(self.reasons.most_common()),
            "sequence": {
                "min": None if self.seq_min is None else self.seq_min.hex(),
                "max": None if self.seq_max is None else self.seq_max.hex(),
                "out_of_order": self.out_of_order,
                "duplicates": self.duplicates,
            },
            "event_time": {
                "min": None if self.time_min is None else self.time_min.isoformat(),
                "max": None if self.time_max is None else self.time_max.isoformat(),
            },
            "kafka_offsets": self._offsets(),
            "seconds": round(seconds, 3),
        }


def render(report: dict) -> str:
    """The report as text for a person."""
    lines = []
    sizes = report["sizes"]
    size_line = (
        f"sizes         min {sizes['min']:,}  median {sizes['median']:,}  "
        f"p99 {sizes['p99']:,}  max {sizes['max']:,} bytes\n"
        if sizes
        else ""
    )
    lines.append(
        f"format        {report['format']}\n"
        f"messages      {report['messages']:,} ({report['tombstones']:,} "
        f"tombstone{'' if report['tombstones'] == 1 else 's'}), "
        f"{report['bytes']:,} bytes\n"
        f"{size_line}"
        f"decoded       {report['decoded']:,} messages into {report['events']:,} events\n"
        f"errors        {report['errors']:,}"
        + (f" ({report['input_errors']:,} in the input itself)" if report["input_errors"] else "")
    )

    def block(title: str, counts: dict) -> None:
        if not counts:
            return
        lines.append(f"\n{title}")
        width = max(len(k) for k in counts)
        for k, v in counts.items():
            lines.append(f"  {k:<{width}}  {v:>10,}")

    block("by op", report["ops"])
    block("by table", report["tables"])
    block("errors by reason", report["error_reasons"])
    seq = report["sequence"]
    lines.append(
        f"\nsequence      {seq['min'] or '-'} .. {seq['max'] or '-'}\n"
        f"out of order  {seq['out_of_order']:,} events (sequence below the one before it)\n"
        f"duplicates    {seq['duplicates']:,} events seen before"
    )
    when = report["event_time"]
    if when["min"]:
        lines.append(f"event time    {when['min']} .. {when['max']}")
    for stream, o in report["kafka_offsets"].items():
        gaps = ", ".join(f"{a}-{b}" for a, b in o["gaps"])
        lines.append(
            f"offsets {stream}: {o['first']}..{o['last']}, {o['messages']:,} messages, "
            f"{o['missing']:,} missing{(' (' + gaps + ')') if gaps else ''}, "
            f"{o['repeated']:,} repeated"
        )
    lines.append(f"took          {report['seconds']:.2f} s")
    return "\n".join(lines) + "\n"
