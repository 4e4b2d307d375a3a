"""What the schema pass costs beside a decode (`make bench-schemas`).

For each format with types on the wire (and the two without), one generated whole-database
stream (``generate(fmt, table_count=TABLES)``, the same values in memory for every
contender), three contenders on the native engine, taking turns for ``ROUNDS`` rounds:

- ``schema pass``: ``cdc_decode.table_schemas`` (no row image written);
- ``generic``: ``cdc_decode.decode`` (text maps);
- ``typed``: ``cdc_decode.decode(..., tables=...)`` with every table's schema from the
  schema pass, what a whole-database sync decodes with.

The best round of each (CPU time of this process) is reported, with messages/s and the
ratios to the schema pass. Run it on a quiet machine: the ratios are taken side by side.

    python benches/schema_pass.py [--messages N] [--tables N] [--rounds N] [--formats a,b]
"""

from __future__ import annotations

import argparse
import time

import cdc_decode
from cdc_decode.generate import generate

FORMATS = (
    "tencent-dts",
    "datahub-blob",
    "debezium-json",
    "datastream-avro",
    "tdsql-json",
    "datastream-json",
)


def _best(run, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def _contenders(fmt: str, values, keys, options: dict, tables: dict) -> dict:
    """The three runs over one stream."""
    return {
        "pass": lambda: cdc_decode.table_schemas(values, fmt, keys=keys, **options),
        "generic": lambda: cdc_decode.decode(values, fmt, **options),
        "typed": lambda: cdc_decode.decode(values, fmt, tables=tables, **options),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--formats", default=",".join(FORMATS))
    args = parser.parse_args()
    print(
        f"{args.messages} messages of {args.tables} generated tables per format, best of "
        f"{args.rounds} rounds (CPU seconds), native engine"
    )
    print(
        f"{'format':<16} {'schema pass':>12} {'generic':>10} {'typed':>10} "
        f"{'generic/pass':>13} {'typed/pass':>11} {'pass msg/s':>12}"
    )
    for fmt in args.formats.split(","):
        stream = generate(fmt, messages=args.messages, seed=1, table_count=args.tables)
        values, keys = stream.values, stream.message_keys
        options = {"columns": stream.options["columns"]} if fmt == "tdsql-json" else {}
        schemas = cdc_decode.table_schemas(values, fmt, keys=keys, **options)
        tables = schemas.ddl(unknown="string")
        contenders = _contenders(fmt, values, keys, options, tables)
        best = dict.fromkeys(contenders, float("inf"))
        for _ in range(args.rounds):  # taking turns: a burst of other work hits them alike
            for name, run in contenders.items():
                best[name] = min(best[name], _best(run, 1))
        print(
            f"{fmt:<16} {best['pass']:>12.3f} {best['generic']:>10.3f} {best['typed']:>10.3f} "
            f"{best['generic'] / best['pass']:>12.1f}x {best['typed'] / best['pass']:>10.1f}x "
            f"{len(values) / best['pass']:>12,.0f}"
        )


if __name__ == "__main__":
    main()
