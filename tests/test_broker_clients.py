"""Real clients against the broker: kafka-python and librdkafka each write and read back 100,000 records.

Every record carries (topic, partition, seq) and partitions are chosen explicitly, so the read-back checks
that nothing is lost, duplicated or reordered within a partition and that offsets are contiguous.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

from zkconsumer.broker import Broker
from zkconsumer.records import decode_value, encode_value
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

RECORDS = 100_000
PARTITIONS = 8

pytestmark = pytest.mark.slow


@pytest.fixture
def broker(zk_connect: str) -> Iterator[Broker]:
    with Broker(zk_connect) as b:
        yield b


def setup_topic(broker: Broker, registry: Registry, topic: str) -> None:
    create_topic(registry, topic, PARTITIONS)
    assert broker.cluster.wait_for(lambda s: topic in s.topics, 10)


def check_partitions(topic: str, seen: dict[int, list[tuple[int, bytes]]]) -> None:
    """Offsets 0..n-1 in order, and the value at offset k is the k-th record written to that partition."""
    assert sorted(seen) == list(range(PARTITIONS))
    assert sum(len(v) for v in seen.values()) == RECORDS
    for partition, records in seen.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(offsets))), f"partition {partition}: offsets not contiguous"
        for offset, value in records:
            assert decode_value(value) == {"topic": topic, "partition": partition, "seq": offset}


def values(topic: str) -> Iterator[tuple[int, bytes]]:
    seqs = [0] * PARTITIONS
    for n in range(RECORDS):
        p = n % PARTITIONS
        yield p, encode_value(topic, p, seqs[p])
        seqs[p] += 1


def test_kafka_python_round_trip(broker: Broker, registry: Registry) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = "kp"
    setup_topic(broker, registry, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=-1, linger_ms=20, batch_size=64 * 1024)
    acked: dict[int, list[int]] = defaultdict(list)
    try:
        futures = [(p, producer.send(topic, value=v, partition=p)) for p, v in values(topic)]
        producer.flush(timeout=120)
        for p, f in futures:
            acked[p].append(f.get(timeout=0).offset)
    finally:
        producer.close(timeout=10)
    for p, offsets in acked.items():
        assert offsets == list(range(RECORDS // PARTITIONS)), f"partition {p}: acknowledged offsets"

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=4 * 1024 * 1024, max_partition_fetch_bytes=1024 * 1024)
    seen: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + 120
        total = 0
        while total < RECORDS and time.monotonic() < deadline:
            for tp, recs in consumer.poll(timeout_ms=1000, max_records=10_000).items():
                seen[tp.partition].extend((r.offset, r.value) for r in recs)
                total += len(recs)
    finally:
        consumer.close()
    check_partitions(topic, seen)


def test_confluent_kafka_round_trip(broker: Broker, registry: Registry) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = "rdk"
    setup_topic(broker, registry, topic)
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                            "linger.ms": 20, "queue.buffering.max.messages": 200_000})
    acked: dict[int, list[int]] = defaultdict(list)
    errors: list = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.partition()].append(msg.offset())

    for p, v in values(topic):
        producer.produce(topic, value=v, partition=p, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not errors
    for p, offsets in acked.items():
        assert sorted(offsets) == list(range(RECORDS // PARTITIONS)), f"partition {p}: acknowledged offsets"

    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "verify",
                            "enable.auto.commit": False, "enable.auto.offset.store": False})
    seen: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    try:
        consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 120
        total = 0
        while total < RECORDS and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                assert msg.error() is None, msg.error()
                seen[msg.partition()].append((msg.offset(), msg.value()))
                total += 1
    finally:
        consumer.close()
    check_partitions(topic, seen)
