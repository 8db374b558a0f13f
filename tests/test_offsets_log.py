"""``__consumer_offsets``: Kafka's record formats, replay on load, tombstones, expiry, and committed offsets that
survive ``kill -9`` of a broker process committed to by a real client."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.structs import OffsetAndMetadata

from zkconsumer.assignors import TopicPartition
from zkconsumer.broker.storage import LogManager
from zkconsumer.coordinator.offsets_codec import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from zkconsumer.coordinator.offsets_log import OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemberSnapshot
from zkconsumer.registry import Registry
from zkconsumer.topics import create_topic

TP = TopicPartition("t", 0)


# ---------------------------------------------------------------------------------------------- formats
def test_worked_bytes_of_an_offset_commit_record() -> None:
    # key v1: version, group, topic, partition; value v3: version, offset, leader epoch, metadata, commit time
    assert encode_offset_key("g", TP) == bytes.fromhex("0001" "000167" "000174" "00000000")
    assert encode_offset_value(CommittedOffset(5, "", 1000)) == bytes.fromhex(
        "0003" "0000000000000005" "ffffffff" "0000" "00000000000003e8")
    # an explicit expiry (OffsetCommit v2-v4 retention) is written as value v1, as Kafka 2.x does
    assert encode_offset_value(CommittedOffset(5, "m", 1000, 2000)) == bytes.fromhex(
        "0001" "0000000000000005" "00016d" "00000000000003e8" "00000000000007d0")
    assert encode_group_key("g") == bytes.fromhex("0002" "000167")


texts = st.text(max_size=20)
offsets = st.builds(CommittedOffset, st.integers(0, 2**62), texts, st.integers(0, 2**50), st.just(-1),
                    st.integers(-1, 2**31 - 1))
members = st.builds(MemberSnapshot, texts, texts, texts, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                    st.binary(max_size=30), st.binary(max_size=30), st.none() | texts)
groups = st.builds(GroupSnapshot, texts, st.integers(0, 2**31 - 1), st.none() | texts, st.none() | texts,
                   st.integers(-1, 2**50), st.lists(members, max_size=4).map(tuple))


@given(texts, texts, st.integers(0, 2**31 - 1), offsets)
def test_offset_records_round_trip(group: str, topic: str, partition: int, c: CommittedOffset) -> None:
    assert decode_key(encode_offset_key(group, TopicPartition(topic, partition))) == OffsetKey(group, topic,
                                                                                                partition)
    assert decode_offset_value(encode_offset_value(c)) == c


@given(texts, groups)
def test_group_records_round_trip(group: str, snapshot: GroupSnapshot) -> None:
    assert decode_key(encode_group_key(group)) == GroupKey(group)
    assert decode_group_value(encode_group_value(snapshot)) == snapshot


# ---------------------------------------------------------------------------------------------- the store
def test_load_replays_latest_values_and_tombstones(tmp_path) -> None:
    logs = LogManager(tmp_path).open()
    store = OffsetsLog(logs)
    store.commit("g", {TP: CommittedOffset(3, "", 1), TopicPartition("t", 1): CommittedOffset(4, "", 1)})
    store.commit("g", {TP: CommittedOffset(9, "x", 2)})
    store.commit("h", {TP: CommittedOffset(1, "", 1)})
    store.delete_offsets("h")
    snapshot = GroupSnapshot("consumer", 7, "range", "m1", 5, (MemberSnapshot("m1", "c", "/h", 1, 2, b"s", b"a"),))
    store.store_group("g", snapshot)
    store.store_group("dead", GroupSnapshot("consumer", 1, None, None))
    store.store_group("dead", None)
    logs.close()
    again = OffsetsLog(LogManager(tmp_path).open())
    again.load()
    assert again.fetch("g") == {TP: CommittedOffset(9, "x", 2), TopicPartition("t", 1): CommittedOffset(4, "", 1)}
    assert again.fetch("h") == {} and again.groups() == {"g": snapshot}
    assert again.loaded_records == 8
    again.logs.close()


def test_offsets_expire_after_the_group_was_empty_for_the_retention(tmp_path) -> None:
    logs = LogManager(tmp_path).open()
    store = OffsetsLog(logs, retention_ms=1000)
    store.commit("idle", {TP: CommittedOffset(1, "", 0)})
    store.commit("busy", {TP: CommittedOffset(2, "", 0)})
    store.commit("explicit", {TP: CommittedOffset(3, "", 0, 5000)})
    expired = store.expire(2000, {"idle": 500, "busy": None})  # busy has members; explicit lives until 5000
    assert expired == {"idle": [TP]}
    assert store.expire(6000, {"busy": None}) == {"explicit": [TP]}
    logs.close()
    again = OffsetsLog(LogManager(tmp_path).open())
    again.load()
    assert set(again.groups()) == {"busy"}
    again.logs.close()


def test_loading_a_large_topic_is_quick(tmp_path) -> None:
    logs = LogManager(tmp_path).open()
    store = OffsetsLog(logs)
    for i in range(200):
        store.commit(f"g{i % 10}", {TopicPartition("t", p): CommittedOffset(i, "", i) for p in range(50)})
    logs.close()
    again = OffsetsLog(LogManager(tmp_path).open())
    started = time.monotonic()
    again.load()
    took = time.monotonic() - started
    assert again.loaded_records == 10_000 and again.fetch("g9")[TopicPartition("t", 7)].offset == 199
    print(f"loaded 10,000 commit records in {took:.2f}s")  # a figure for the docs, not a timed assertion
    again.logs.close()


# ------------------------------------------------------------------------------------ kill -9 and restart
def start_broker(zk_connect: str, data_dir, log_path) -> tuple[subprocess.Popen, str]:
    from test_broker_crash import start_broker as start

    return start(zk_connect, data_dir, log_path)


@pytest.mark.slow
def test_committed_offsets_survive_kill_9_of_the_broker(zk_connect, registry: Registry, tmp_path) -> None:
    create_topic(registry, "t", 2)
    data = tmp_path / "broker"
    proc, bootstrap = start_broker(zk_connect, data, tmp_path / "broker.log")
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(20):
            producer.send("t", value=b"%d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
        consumer.commit({KTP("t", 0): OffsetAndMetadata(7, "seven", -1), KTP("t", 1): OffsetAndMetadata(9, "", -1)})
        consumer.close()
        os.kill(proc.pid, signal.SIGKILL)  # no shutdown, no checkpoint: only what was fsynced
        proc.wait()
        proc, bootstrap = start_broker(zk_connect, data, tmp_path / "broker.log")
        again = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
        assert again.committed(KTP("t", 0)) == 7 and again.committed(KTP("t", 1)) == 9
        again.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


