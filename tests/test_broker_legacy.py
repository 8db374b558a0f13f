"""0.8-era protocol against the broker: Produce v0–v2 (message format v0/v1, up-converted), Fetch v0–v3
(down-converted), ListOffsets v0 (max_num_offsets), and kafka-python pinned to api_version (0, 8, 2)."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from zkconsumer.broker import legacy
from zkconsumer.broker.client import RawClient
from zkconsumer.log.batches import InvalidBatchError
from zkconsumer.zk.topics import create_topic

GZIP = 1


def message_set(magic: int, codec: int, messages: list[tuple[bytes | None, bytes]], ts0: int = 1000) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (key, value) in enumerate(messages):
        builder.append(i, timestamp=ts0 + i, key=key, value=value)
    return bytes(builder.build())


def entries(data: bytes) -> list[tuple[int, int, int | None, bytes | None, bytes | None]]:
    """(magic, offset, timestamp, key, value) of every record in ``data``."""
    return [(batch.magic, r.offset, r.timestamp, r.key, r.value) for batch in MemoryRecords(data) for r in batch]


# --------------------------------------------------------------------------------------- conversions (pure)

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, GZIP])
def test_up_convert_keeps_keys_values_and_v1_timestamps(magic: int, codec: int) -> None:
    messages = [(b"k%d" % i, b"value-%d" % i * 20) for i in range(5)] + [(None, b"no key")]
    [batch] = list(MemoryRecords(legacy.up_convert(message_set(magic, codec, messages))))
    assert batch.magic == 2 and batch.producer_id == -1
    records = list(batch)  # a batch iterates once
    assert [(r.offset, r.key, r.value) for r in records] == [(i, k, v) for i, (k, v) in enumerate(messages)]
    assert [r.timestamp for r in records] == ([1000 + i for i in range(6)] if magic else [-1] * 6)
    if codec:  # gzip stays gzip (these values compress well), as Kafka keeps the producer's codec
        assert batch.compression_type == GZIP


def test_up_convert_refuses_what_kafka_refuses() -> None:
    good = message_set(1, 0, [(None, b"a"), (None, b"b")])
    with pytest.raises(InvalidBatchError) as e:
        legacy.up_convert(good[:-3])
    assert e.value.code == 2  # CORRUPT_MESSAGE: partial message
    flipped = bytearray(good)
    flipped[-1] ^= 1
    with pytest.raises(InvalidBatchError) as e:
        legacy.up_convert(bytes(flipped))
    assert e.value.code == 2  # CORRUPT_MESSAGE: CRC
    with pytest.raises(InvalidBatchError) as e:
        legacy.up_convert(legacy.up_convert(good))  # a v2 batch in an old Produce
    assert e.value.code == 87


def test_down_convert_skips_records_before_the_fetch_offset_and_honours_max_bytes() -> None:
    stored = bytearray(legacy.up_convert(message_set(1, GZIP, [(None, b"m%d" % i) for i in range(10)])))
    stored[:8] = (100).to_bytes(8, "big")  # as the log would have assigned base offset 100
    got = entries(legacy.down_convert(bytes(stored), 1, 103, 1 << 20, min_one=True))
    assert [(m, o, v) for m, o, _, _, v in got] == [(1, 100 + i, b"m%d" % i) for i in range(3, 10)]
    assert [t for _, _, t, _, _ in got] == [1000 + i for i in range(3, 10)]
    assert {m for m, *_ in entries(legacy.down_convert(bytes(stored), 0, 100, 1 << 20, True))} == {0}
    one = legacy.down_convert(bytes(stored), 0, 100, 1, min_one=True)
    assert [o for _, o, *_ in entries(one)] == [100]  # larger than max_bytes but the first: sent alone
    assert legacy.down_convert(bytes(stored), 0, 100, 1, min_one=False) == b""


# ---------------------------------------------------------------------------------------------- on the wire

def produce(topic: str, partition: int, data: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.TopicProduceData.PartitionProduceData(
            index=partition, records=data)])])


def fetch(topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> FetchRequest:
    Topic = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0,
                        topics=[Topic(topic=topic, partitions=[Topic.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])


def list_offsets_v0(topic: str, partition: int, timestamp: int, max_num: int) -> ListOffsetsRequest:
    Topic = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(replica_id=-1, topics=[Topic(name=topic, partitions=[Topic.ListOffsetsPartition(
        partition_index=partition, timestamp=timestamp, max_num_offsets=max_num)])])


@pytest.fixture
def topic(broker, registry) -> str:
    create_topic(registry, "old", 1)
    assert broker.cluster.wait_for(lambda s: "old" in s.topics, 10)
    return "old"


def test_old_produce_and_fetch_versions_round_trip(broker, topic: str) -> None:
    with RawClient.to(broker.bootstrap) as c:
        offset = 0
        for version, magic in [(0, 0), (1, 0), (2, 1)]:
            data = message_set(magic, GZIP, [(b"v%d" % version, b"x" * 50), (None, b"y%d" % version)])
            r = c.call(produce(topic, 0, data), version)
            part = r.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, offset)
            offset += 2
        for version in range(4):
            got = entries(c.call(fetch(topic, 0, 1), version).responses[0].partitions[0].records)
            magic = 0 if version < 2 else 1
            assert [(m, o, k, v) for m, o, _, k, v in got] == [
                (magic, 1, None, b"y0"), (magic, 2, b"v1", b"x" * 50), (magic, 3, None, b"y1"),
                (magic, 4, b"v2", b"x" * 50), (magic, 5, None, b"y2")]
            if magic == 1:
                assert [t for *_, t, _, _ in got][-2:] == [1000, 1001]  # the v1 producer's timestamps
        # a modern fetch sees the same records as v2 batches
        modern = entries(c.call(fetch(topic, 0, 0), 12).responses[0].partitions[0].records)
        assert [(m, o, v) for m, o, _, _, v in modern][:2] == [(2, 0, b"x" * 50), (2, 1, b"y0")]
        # Produce v3+ still takes message format v2 only (INVALID_RECORD), as Kafka
        r = c.call(produce(topic, 0, message_set(1, 0, [(None, b"z")])), 3)
        assert r.responses[0].partition_responses[0].error_code == 87


def test_list_offsets_v0_max_num_offsets(broker, topic: str) -> None:
    with RawClient.to(broker.bootstrap) as c:
        c.call(produce(topic, 0, message_set(0, 0, [(None, b"a")] * 3)), 0)
        answer = c.call(list_offsets_v0(topic, 0, -1, 10), 0).topics[0].partitions[0]
        assert (answer.error_code, answer.old_style_offsets) == (0, [3, 0])  # log end, then the segment base
        assert c.call(list_offsets_v0(topic, 0, -1, 1), 0).topics[0].partitions[0].old_style_offsets == [3]
        assert c.call(list_offsets_v0(topic, 0, -2, 1), 0).topics[0].partitions[0].old_style_offsets == [0]
        assert c.call(list_offsets_v0(topic, 0, -1, 0), 0).topics[0].partitions[0].old_style_offsets == []
        missing = c.call(list_offsets_v0("nope", 0, -1, 1), 0).topics[0].partitions[0]
        assert (missing.error_code, missing.old_style_offsets) == (3, [])


def test_kafka_python_pinned_to_0_8_2(broker, registry) -> None:
    """kafka-python with api_version=(0, 8, 2) speaks Metadata/Produce/Fetch/ListOffsets v0 only."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(registry, "old082", 2)
    assert broker.cluster.wait_for(lambda s: "old082" in s.topics, 10)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, api_version=(0, 8, 2), acks=1,
                             compression_type="gzip", linger_ms=5)
    try:
        for i in range(200):
            producer.send("old082", key=b"%d" % i, value=b"value-%d" % i, partition=i % 2)
        producer.flush(20)
    finally:
        producer.close(5)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 8, 2), enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    try:
        tps = [TopicPartition("old082", p) for p in (0, 1)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        assert consumer.end_offsets(tps) == {tps[0]: 100, tps[1]: 100}
        seen = {0: [], 1: []}
        while sum(map(len, seen.values())) < 200:
            batch = consumer.poll(timeout_ms=2000)
            assert batch, f"no records after {sum(map(len, seen.values()))}"
            for tp, records in batch.items():
                seen[tp.partition] += [(r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    for p in (0, 1):
        assert seen[p] == [(n, b"%d" % i, b"value-%d" % i) for n, i in enumerate(range(p, 200, 2))]
