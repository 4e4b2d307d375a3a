"""Lay a generated stream out as a Kafka topic would arrive: parquet files with Kafka's
columns, which the pipeline reads as a stream.

    cdc-decode generate debezium-json --messages 2000 --seed 1 --out stream
    python make_topic.py stream topic

``values.bin`` (``cdc_decode.generate.read_values``) becomes ``topic/part-0.parquet`` with
``topic``, ``partition``, ``offset``, ``timestamp`` and ``value`` (binary), one row per
message in order, all in partition 0. With a real topic, read Kafka instead (see
``transformations/orders.py``).
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_decode.generate import read_values

SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("value", pa.binary()),
    ]
)
"""The columns of Spark's Kafka source that ``cdc_spark.decode`` uses."""


def make_topic(stream: str | Path, out: str | Path, *, topic: str = "cdc") -> Path:
    """Write the values of a generated stream directory as one parquet file under ``out``.

    Args:
        stream: a directory written by ``cdc-decode generate`` (holding ``values.bin``).
        out: the directory to write ``part-0.parquet`` into (created if needed).
        topic: the ``topic`` column's value.

    Returns:
        The parquet file written.
    """
    values = read_values(stream)
    start = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    table = pa.table(
        {
            "topic": [topic] * len(values),
            "partition": [0] * len(values),
            "offset": list(range(len(values))),
            "timestamp": [start + dt.timedelta(milliseconds=i) for i in range(len(values))],
            "value": values,
        },
        schema=SCHEMA,
    )
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "part-0.parquet")
    return path / "part-0.parquet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stream", help="a directory written by `cdc-decode generate`")
    parser.add_argument("out", help="the directory to write the topic's parquet file into")
    args = parser.parse_args()
    print(make_topic(args.stream, args.out))


if __name__ == "__main__":
    main()
