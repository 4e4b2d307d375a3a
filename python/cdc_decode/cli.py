"""The ``cdc-decode`` command line.

    cdc-decode generate tencent-dts --messages 10000 --seed 1 --out DIR
    cdc-decode generate datahub-blob --messages 10000 --seed 1 --out DIR
    cdc-decode generate datahub-tuple --tables shop.orders --messages 10000 --out DIR
    cdc-decode generate tencent-dts --tables shop.order_items --message-bytes 2560 --out DIR

writes a generated stream (see :mod:`cdc_decode.generate.stream` for the files) and prints
a one-line summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence


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
    from .generate import FORMATS

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
        "--connector",
        choices=("mysql", "oracle", "mongodb"),
        default=None,
        help="debezium-json only: write the messages as this Debezium connector does "
        "(default: mysql)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
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
            )
        except ValueError as exc:
            print(f"cdc-decode generate: {exc}", file=sys.stderr)
            return 2
        out = stream.write(args.out)
        print(f"{stream.summary()} -> {out} in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
