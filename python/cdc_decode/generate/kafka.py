"""Put a generated stream on a Kafka topic, as the CDC service would write it.

>>> from cdc_decode.generate import generate
>>> from cdc_decode.generate.kafka import create_topic, produce
>>> stream = generate("tencent-dts", messages=2000, seed=1)
>>> create_topic("127.0.0.1:9092", "dts", partitions=3)
>>> produce("127.0.0.1:9092", "dts", stream)        # Kafka records, one per value
2000

The messages go round-robin over the topic's partitions, a **unit** at a time: one message,
or a whole Tencent DTS multi-part set (``Envelope.total > 1``: every part in order, in one
partition, as DTS writes it). Each DTS record carries the Kafka headers the service sends:
``ShardId`` (here the source's shard, ``"0"``) and ``ps``, the per-partition sequence
(decimal text, continuous from 0). A stream with message keys (``Stream.message_keys``:
Debezium's, whose key is the row's primary key) sends them as the records' keys; the
others' records have no key, as those services send them. ``datahub-tuple`` (records, not
values) and ``datastream-avro`` (files in a bucket) are not Kafka-borne and are refused.

Needs ``confluent-kafka`` (``requirements-dev.txt``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["KAFKA_FORMATS", "create_topic", "produce", "produce_records", "records"]

KAFKA_FORMATS: tuple[str, ...] = (
    "tencent-dts",
    "datahub-blob",
    "tdsql-json",
    "debezium-json",
    "datastream-json",
)
"""The generated formats whose messages travel as Kafka values."""

Record = tuple[int, bytes | None, list[tuple[str, bytes]]]
"""``(partition, value, headers)`` of one Kafka record; :func:`produce_records` also takes
``(partition, value, headers, key)``."""


def _units(format: str, values: Sequence[bytes | None]) -> list[list[int]]:
    """The values' indexes grouped into what must stay together in one partition: a DTS
    multi-part set (parts ``0 .. total-1`` in a row), else each message alone."""
    if format != "tencent-dts":
        return [[i] for i in range(len(values))]
    from .. import _proto as pb

    units: list[list[int]] = []
    open_set: list[int] | None = None
    for i, value in enumerate(values):
        total = index = 0
        if value is not None:
            try:
                envelope = pb.Envelope.FromString(value)
                total, index = envelope.total, envelope.index
            except Exception:  # not an Envelope: a message alone
                pass
        if total > 1 and index > 0 and open_set is not None:
            open_set.append(i)
            if index == total - 1:
                units.append(open_set)
                open_set = None
            continue
        if open_set is not None:
            units.append(open_set)
            open_set = None
        if total > 1 and index == 0:
            open_set = [i]
        else:
            units.append([i])
    if open_set is not None:
        units.append(open_set)
    return units


def records(
    format: str,
    values: Sequence[bytes | None],
    *,
    partitions: int,
    shard: str = "0",
    keys: Sequence[bytes | None] | None = None,
) -> list[Record]:
    """The Kafka records of a stream's values, in the order to send them.

    Args:
        format: the stream's format (one of :data:`KAFKA_FORMATS`).
        values: the Kafka values (``Stream.values``).
        partitions: how many partitions the topic has; units go round-robin over them.
        shard: the ``ShardId`` header of Tencent DTS records.
        keys: the values' Kafka keys (``Stream.message_keys``), if they have any.

    Returns:
        ``(partition, value, headers)`` per value, in the values' order;
        ``(partition, value, headers, key)`` with ``keys``.
    """
    if format not in KAFKA_FORMATS:
        raise ValueError(
            f"{format} is not Kafka-borne here: the topic formats are {', '.join(KAFKA_FORMATS)}"
        )
    if partitions < 1:
        raise ValueError("partitions must be at least 1")
    out: list[Record] = []
    sequence = [0] * partitions
    for n, unit in enumerate(_units(format, values)):
        partition = n % partitions
        for i in unit:
            headers: list[tuple[str, bytes]] = []
            if format == "tencent-dts":
                headers = [("ShardId", shard.encode()), ("ps", str(sequence[partition]).encode())]
            sequence[partition] += 1
            if keys is None:
                out.append((partition, values[i], headers))
            else:
                out.append((partition, values[i], headers, keys[i]))  # type: ignore[arg-type]
    return out


def create_topic(bootstrap: str, topic: str, *, partitions: int = 3, timeout: float = 30.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication factor 1) and wait for it.

    Raises:
        RuntimeError: the broker refused (for example: the topic exists).
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout,
        request_timeout=timeout,
    )
    try:
        futures[topic].result(timeout)
    except Exception as exc:
        raise RuntimeError(f"could not create topic {topic!r}: {exc}") from exc
    # Metadata reaches the broker's cache a moment after the controller answers.
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic!r} did not show {partitions} partitions in {timeout} s")


def produce_records(
    bootstrap: str, topic: str, items: Iterable[Record], *, config: dict[str, Any] | None = None
) -> int:
    """Send ``(partition, value, headers[, key])`` records to ``topic``, in order per partition,
    and wait until the broker has them all.

    Returns:
        How many records were sent.

    Raises:
        RuntimeError: a record was not delivered.
    """
    from confluent_kafka import Producer

    settings = {
        "bootstrap.servers": bootstrap,
        # Ordered and not duplicated on retry, as a CDC service writes.
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.max.bytes": 8 * 1024 * 1024,
        "compression.type": "none",
    }
    settings.update(config or {})
    producer = Producer(settings)
    failures: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            failures.append(f"partition {msg.partition()}: {err}")

    sent = 0
    for partition, value, headers, *key in items:
        while True:
            try:
                producer.produce(
                    topic,
                    key=key[0] if key else None,
                    value=value,
                    partition=partition,
                    headers=headers or None,
                    on_delivery=delivered,
                )
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.1)
        sent += 1
        if sent % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(60)
    if remaining:
        raise RuntimeError(f"{remaining} records to {topic!r} not delivered after 60 s")
    if failures:
        raise RuntimeError(f"records to {topic!r} not delivered: {failures[:3]}")
    return sent


def produce(bootstrap: str, topic: str, stream: Any, *, partitions: int = 3) -> int:
    """Send a generated stream's values to ``topic`` (made with ``partitions`` partitions by
    :func:`create_topic`). To send a stream in pieces, cut the list of :func:`records` and
    give each piece to :func:`produce_records`.

    Returns:
        How many records were sent.
    """
    keys = getattr(stream, "message_keys", None)
    return produce_records(
        bootstrap, topic, records(stream.format, stream.values, partitions=partitions, keys=keys)
    )
