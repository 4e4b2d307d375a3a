"""The ``cdc-decode`` command line (docs/cli.md).

    cdc-decode decode FILE... [--format auto|F] [--json | --arrow OUT | --parquet OUT]
    cdc-decode stats FILE... [--format auto|F] [--json]
    cdc-decode tail --bootstrap HOST:PORT --topic T [--from-beginning|--offset N|--last N]
    cdc-decode sync --format F --kafka HOST:PORT --topic T --target '/lake/{db}/{table}'
        --checkpoint PATH (on spark-submit; docs/sync.md)
    cdc-decode generate tencent-dts --messages 10000 --seed 1 --out DIR
    cdc-decode generate datahub-blob --messages 10000 --seed 1 --out DIR
    cdc-decode generate datahub-tuple --tables shop.orders --messages 10000 --out DIR
    cdc-decode generate tencent-dts --tables shop.order_items --message-bytes 2560 --out DIR

``generate`` writes a generated stream (see :mod:`cdc_decode.generate.stream` for the
files) and prints a one-line summary. Exit status: 0 when every message decoded, 1 when
errors were seen (each is also an error line), 2 for a command line that cannot run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any


def _positive(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _tables(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("no table named")
    return names


def _parser() -> argparse.ArgumentParser:
    # The generator writes every format; importing it (numpy) would slow every command.
    from ._schema import FORMATS

    parser = argparse.ArgumentParser(
        prog="cdc-decode",
        description="Decode cloud CDC streams into Arrow change events; generate test streams.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    gen = commands.add_parser(
        "generate",
        help="write a realistic, seeded stream of messages and the events they decode to",
        description=(
            "Simulate a MySQL server running a seeded workload and write its change stream in "
            "FORMAT to DIR: values.bin (u32 little-endian length + bytes per Kafka value, "
            "0xFFFFFFFF for null; for datahub-tuple, records.arrow: the TUPLE records, "
            "Arrow IPC), expected.arrow (the expected events, Arrow IPC), "
            "final_state.json (the tables after all changes) and manifest.json."
        ),
    )
    gen.add_argument("format", choices=FORMATS, help="the message format")
    gen.add_argument(
        "--messages",
        type=_positive,
        default=10_000,
        metavar="N",
        help="how many Kafka values (datahub-tuple: records), exactly (default: %(default)s)",
    )
    gen.add_argument("--seed", type=int, default=0, help="RNG seed (default: %(default)s)")
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    gen.add_argument(
        "--rows-per-message",
        type=_positive,
        default=10,
        metavar="N",
        help="tencent-dts: pack at most N events into one message (default: %(default)s)",
    )
    gen.add_argument(
        "--message-bytes",
        type=_positive,
        default=3072,
        metavar="N",
        help="tencent-dts: pack at most N bytes of entries into one message (default: %(default)s)",
    )
    gen.add_argument(
        "--max-message-bytes",
        type=_positive,
        default=64 * 1024,
        metavar="N",
        help="tencent-dts: split larger messages into multi-part envelopes (default: %(default)s)",
    )
    gen.add_argument(
        "--tables",
        type=_tables,
        default=None,
        metavar="DB.T1,DB.T2",
        help=(
            "simulate only these of the source's tables (shop.users, shop.orders, "
            "shop.order_items, inventory.items, inventory.warehouses); default: all "
            "(datahub-tuple: exactly one, default shop.users)"
        ),
    )
    gen.add_argument(
        "--table-count",
        type=_positive,
        default=None,
        metavar="N",
        help=(
            "simulate a whole database of N generated tables (column mixes of every MySQL "
            "family, phases touching about half of them, columns added, widened and dropped "
            "mid-stream) instead of the five; not datahub-tuple"
        ),
    )
    gen.add_argument(
        "--connector",
        choices=("mysql", "oracle", "mongodb"),
        default=None,
        help="debezium-json only: write the messages as this Debezium connector does "
        "(default: mysql)",
    )
    _decode_parsers(commands)
    return parser


def _input_options(parser: argparse.ArgumentParser) -> None:
    from ._schema import ENGINES, FORMATS

    parser.add_argument(
        "--format",
        default="auto",
        choices=("auto", *FORMATS),
        metavar="FORMAT",
        help=f"the message format: auto (default: guessed from the first messages) or one of "
        f"{', '.join(FORMATS)}",
    )
    parser.add_argument(
        "--engine",
        default="native",
        choices=ENGINES,
        help="native (Rust, default) or python (the pure-Python fallback)",
    )
    parser.add_argument(
        "--schema",
        metavar="DDL",
        help='typed mode: the table\'s columns ("id bigint, price decimal(10,2)") or @FILE',
    )
    parser.add_argument(
        "--tables",
        action="append",
        default=[],
        metavar="DB.TABLE=DDL",
        help="multi-table typed mode: a table and its columns (repeat it), or @FILE.json "
        '({"db.table": "ddl", ...})',
    )
    parser.add_argument(
        "--columns",
        action="append",
        default=[],
        metavar="DB.TABLE=C1,C2",
        help="tdsql-json: the column names of a table's positional images (repeat it)",
    )
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        action="store_true",
        default=None,
        help="show a progress bar on stderr (needs tqdm: the cli extra)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false")


def _print_options(parser: argparse.ArgumentParser, *, json_into: Any = None) -> None:
    """The options of the commands that print events: ``--json`` (added to ``json_into``, a
    group of outputs that exclude each other, when given), ``--errors`` and ``--wide``."""
    (json_into or parser).add_argument(
        "--json", action="store_true", help="print JSON lines, one per event"
    )
    parser.add_argument(
        "--errors",
        action="store_true",
        help="only error rows: where, the reason and the raw bytes in hex",
    )
    parser.add_argument("--wide", action="store_true", help="do not shorten long values")


def _file_options(parser: argparse.ArgumentParser) -> None:
    from ._cli.inputs import KINDS

    parser.add_argument(
        "paths",
        nargs="+",
        metavar="FILE",
        help="inputs: files, stream folders, Datastream trees; - reads stdin",
    )
    parser.add_argument(
        "--input",
        default="auto",
        choices=("auto", *KINDS),
        help="how to read each FILE (default auto: by name and content; kcat is never "
        "guessed): " + ", ".join(KINDS),
    )
    parser.add_argument(
        "--delimiter",
        default="\\n",
        metavar="D",
        help="--input kcat: the message delimiter given to kcat -D (escapes \\n \\t \\r "
        "\\0 \\xHH; default \\n)",
    )
    _input_options(parser)


def _decode_parsers(commands) -> None:
    dec = commands.add_parser(
        "decode",
        help="decode messages from files and print the events",
        description="Decode messages and print the change events: a table (default), JSON "
        "lines, or an Arrow/Parquet file. Bad messages are error lines; the exit status is 1 "
        "when any was seen.",
    )
    _file_options(dec)
    out = dec.add_mutually_exclusive_group()
    _print_options(dec, json_into=out)
    out.add_argument("--arrow", metavar="OUT", help="write the events to an Arrow IPC file")
    out.add_argument("--parquet", metavar="OUT", help="write the events to a Parquet file")

    st = commands.add_parser(
        "stats",
        help="count messages, events by op and table, errors by reason, order problems",
        description="Decode messages and report counts: by op, table and error reason, "
        "message sizes, the sequence range, events out of order or seen twice, missing Kafka "
        "offsets.",
    )
    _file_options(st)
    st.add_argument("--json", action="store_true", help="print the report as one JSON object")

    from ._cli.tail import add_parser as add_tail

    add_tail(commands, _input_options, _print_options)

    from ._cli.sync import add_parser as add_sync

    add_sync(commands)


def _say(text: str) -> None:
    print(f"cdc-decode: {text}", file=sys.stderr)


def _pipeline(args, format: str):
    from ._cli.run import Pipeline, as_columns, as_table_map, schema_text

    return Pipeline(
        format,
        engine=args.engine,
        schema=schema_text(args.schema),
        tables=as_table_map(args.tables) or None,
        columns=as_columns(args.columns) or None,
    )


def _chunks(args):
    from ._cli.inputs import parse_delimiter, read_input

    try:
        delimiter = parse_delimiter(args.delimiter)
    except ValueError as exc:
        from ._cli.run import UsageError

        raise UsageError(f"--delimiter: {exc}") from exc
    fmt = None if args.format == "auto" else args.format
    for path in args.paths:
        yield from read_input(path, args.input, format=fmt, delimiter=delimiter)


def _progress_on(args, default: bool):
    return default if args.progress is None else args.progress


def _run_files(args, command: str) -> int:
    from ._cli.inputs import input_size
    from ._cli.output import FileSink, JsonSink, TableSink, stdout
    from ._cli.run import SAMPLE, Progress, count, with_format
    from ._cli.stats import Stats, render

    started = time.perf_counter()
    live = "-" in args.paths  # a pipe from kcat -C: decode as messages arrive
    fmt, chunks = with_format(
        _chunks(args), args.format, engine=args.engine, say=_say, enough=1 if live else SAMPLE
    )
    pipeline = _pipeline(args, fmt)
    if pipeline.decoder is None:
        _say("no messages to decode")
    to_terminal = sys.stdout.isatty()
    writing = command == "decode" and (args.arrow or args.parquet)
    default_bar = sys.stderr.isatty() and (command == "stats" or writing or not to_terminal)
    progress = Progress(
        sum(input_size(p) for p in args.paths), on=_progress_on(args, default_bar), label=command
    )
    pipeline.on_chunk.append(progress.update)
    sink = stats = None
    if command == "decode":
        options = {"errors_only": args.errors, "tables": pipeline.tables}
        if writing:
            decoder = pipeline.decoder
            schema = None
            if decoder is not None and decoder.schema is not None:
                from ._typed import typed_event_schema

                schema = typed_event_schema(decoder.schema)
            sink = FileSink(
                args.arrow or args.parquet,
                "arrow" if args.arrow else "parquet",
                table_schemas=None if decoder is None else decoder.tables,
                **({"schema": schema} if schema is not None else {}),
                **options,
            )
        elif args.json:
            sink = JsonSink(stdout(), **options)
        else:
            sink = TableSink(stdout(), wide=args.wide, **options)
        pipeline.on_rows.append(sink.events)
        pipeline.on_input_error.append(sink.input_error)
    else:
        stats = Stats(pipeline.tables)
        pipeline.on_chunk.append(stats.chunk)
        pipeline.on_rows.append(stats.rows)
        pipeline.on_input_error.append(stats.input_error)
    try:
        pipeline.run(chunks)
    finally:
        progress.close()
        if sink is not None:
            sink.close()
    counters = pipeline.stats()
    seconds = time.perf_counter() - started
    errors = counters["errors"] + counters["input_errors"]
    if stats is not None:
        report = stats.report(counters, format=fmt, seconds=seconds)
        if args.json:
            import json

            print(json.dumps(report, ensure_ascii=False))
        else:
            stdout().write(render(report))
    else:
        written = ""
        if writing:
            written = " -> " + ", ".join(str(f) for f in sink.files())
        _say(
            f"{count(counters['messages'], 'message')} ({fmt}): "
            f"{count(counters['events'], 'event')}, {count(errors, 'error')}"
            + (
                f" ({counters['input_errors']:,} in the input itself)"
                if counters["input_errors"]
                else ""
            )
            + f"{written} in {seconds:.2f} s"
        )
    return 1 if errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command in ("decode", "stats", "tail"):
        from ._cli.run import UsageError

        try:
            if args.command == "tail":
                from ._cli.tail import run as run_tail

                return run_tail(args, say=_say)
            return _run_files(args, args.command)
        except UsageError as exc:
            print(f"cdc-decode {args.command}: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # `| head`: the reader left; not an error of ours
            sys.stderr.close()
            return 0
    if args.command == "sync":
        from ._cli.sync import run as run_sync

        return run_sync(args, say=_say)
    if args.command == "generate":
        from .generate import generate

        started = time.perf_counter()
        try:
            stream = generate(
                args.format,
                messages=args.messages,
                seed=args.seed,
                rows_per_message=args.rows_per_message,
                message_bytes=args.message_bytes,
                max_message_bytes=args.max_message_bytes,
                tables=args.tables,
                connector=args.connector,
                table_count=args.table_count,
            )
        except ValueError as exc:
            print(f"cdc-decode generate: {exc}", file=sys.stderr)
            return 2
        out = stream.write(args.out)
        print(f"{stream.summary()} -> {out} in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
