"""The test broker itself (tests/support/kafka.py) and what the producer puts on a topic."""

from __future__ import annotations

from support.kafka import consume, new_topic, produce, records

from cdc_decode import _proto as pb
from cdc_decode.generate import generate


def test_dts_sets_stay_in_one_partition_with_the_service_headers(kafka_broker):
    # Small parts: many multi-part sets.
    stream = generate("tencent-dts", messages=300, seed=3, max_message_bytes=2048)
    topic = new_topic(kafka_broker, partitions=3)
    assert produce(kafka_broker.bootstrap, topic, stream, partitions=3) == 300
    got = consume(kafka_broker, topic, count=300)
    assert len(got) == 300
    assert {p for p, *_ in got} == {0, 1, 2}
    assert sorted(v for _, _, v, _ in got) == sorted(stream.values)
    sets = 0
    for partition in range(3):
        rows = [r for r in got if r[0] == partition]
        # ps: the per-partition sequence, continuous from 0, in offset order.
        assert [dict(h)["ps"] for *_, h in rows] == [str(i).encode() for i in range(len(rows))]
        assert all(dict(h)["ShardId"] == b"0" for *_, h in rows)
        expected_next = None
        for _, _, value, _ in rows:
            envelope = pb.Envelope.FromString(value)
            if expected_next is not None:  # inside a set: the next part follows at once
                assert (envelope.index, envelope.total) == expected_next
            if envelope.total > 1 and envelope.index + 1 < envelope.total:
                expected_next = (envelope.index + 1, envelope.total)
            else:
                sets += envelope.total > 1
                expected_next = None
        assert expected_next is None
    assert sets >= 5


def test_round_robin_by_unit():
    values = [b"a", b"b", b"c", b"d"]
    assert [p for p, _, _ in records("datahub-blob", values, partitions=3)] == [0, 1, 2, 0]
    assert all(h == [] for _, _, h in records("debezium-json", values, partitions=2))
