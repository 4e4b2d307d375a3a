"""A real Kafka broker for the tests: KRaft single node on free loopback ports.

The ``kafka_broker`` fixture (session scope, registered in ``tests/conftest.py``) starts
one ``java`` process from the jars ``make jars-kafka`` puts in ``.jars-kafka/`` (Apache
Kafka 4.1.1, ``tools/kafka-broker/pom.xml``), in a temporary folder, waits until it serves
and stops it by its PID at the end of the session. It fails, rather than skips, when the
jars or Java are missing: ``make test`` installs them.

>>> def test_something(kafka_broker):
...     topic = new_topic(kafka_broker, partitions=3)
...     produce_records(kafka_broker.bootstrap, topic, [(0, b"value", [])])
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_decode._kafka_broker import Broker, start_broker
from cdc_decode.generate.kafka import create_topic, produce, produce_records, records

__all__ = [
    "KAFKA_JARS",
    "Broker",
    "consume",
    "create_topic",
    "kafka_broker",
    "new_topic",
    "produce",
    "produce_records",
    "records",
    "start_broker",
]

ROOT = Path(__file__).resolve().parents[2]
KAFKA_JARS = Path(os.environ.get("CDC_DECODE_KAFKA_JARS", ROOT / ".jars-kafka"))
"""The broker's jars (``make jars-kafka``)."""

_topics = itertools.count()


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[Broker]:
    """One broker for the whole run (it starts in seconds, then every test makes its own
    topics with :func:`new_topic`); stopped by its PID when the session ends."""
    broker = start_broker(KAFKA_JARS)
    try:
        yield broker
    finally:
        broker.stop()


def new_topic(broker: Broker, *, partitions: int = 3, prefix: str = "t") -> str:
    """A topic name not used before in this run, created with ``partitions`` partitions."""
    name = f"{prefix}-{os.getpid()}-{next(_topics)}"
    create_topic(broker.bootstrap, name, partitions=partitions)
    return name


def consume(broker: Broker, topic: str, *, count: int, timeout: float = 30.0) -> list:
    """Read ``count`` records of ``topic`` from the beginning (confluent-kafka consumer):
    ``(partition, offset, value, headers)`` sorted by partition and offset."""
    import time

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise RuntimeError(f"consume {topic}: {message.error()}")
            out.append(
                (message.partition(), message.offset(), message.value(), message.headers() or [])
            )
    finally:
        consumer.close()
    return sorted(out, key=lambda r: (r[0], r[1]))
