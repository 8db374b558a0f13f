"""``__consumer_offsets``: Kafka's record formats, replay on load, tombstones, expiry, and committed offsets that
survive ``kill -9`` of a broker process committed to by a real client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import wait_until
from hypothesis import given
from hypothesis import strategies as st
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.structs import OffsetAndMetadata

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator import offsets_codec as codec
from zkconsumer.coordinator.group import GroupState
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator
from zkconsumer.coordinator.offsets_log import OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemberSnapshot
from zkconsumer.errors import KafkaCode
from zkconsumer.log.storage import LogManager
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

TP = TopicPartition("t", 0)


# ---------------------------------------------------------------------------------------------- formats
def test_worked_bytes_of_an_offset_commit_record() -> None:
    # key v1: version, group, topic, partition; value v3: version, offset, leader epoch, metadata, commit time
    assert codec.encode_offset_key("g", TP) == bytes.fromhex("0001" "000167" "000174" "00000000")
    assert codec.encode_offset_value(CommittedOffset(5, "", 1000)) == bytes.fromhex(
        "0003" "0000000000000005" "ffffffff" "0000" "00000000000003e8")
    # an explicit expiry (OffsetCommit v2-v4 retention) is written as value v1, as Kafka 2.x does
    assert codec.encode_offset_value(CommittedOffset(5, "m", 1000, 2000)) == bytes.fromhex(
        "0001" "0000000000000005" "00016d" "00000000000003e8" "00000000000007d0")
    assert codec.encode_group_key("g") == bytes.fromhex("0002" "000167")


def test_worked_bytes_of_a_group_metadata_record() -> None:
    # GroupMetadataValue.json (Kafka 2.8), version 3: protocolType, generation, protocol?, leader?,
    # currentStateTimestamp, members[memberId, groupInstanceId?, clientId, clientHost, rebalanceTimeout,
    # sessionTimeout, subscription (int32-sized bytes), assignment]
    member = MemberSnapshot("m", "c", "/h", 300_000, 10_000, b"S", b"A")
    snapshot = GroupSnapshot("consumer", 1, "range", "m", 1000, (member,))
    v3 = bytes.fromhex(
        "0003" "0008" + b"consumer".hex() + "00000001" "0005" + b"range".hex() + "00016d" "00000000000003e8"
        "00000001" "00016d" "ffff" "000163" "00022f68" "000493e0" "00002710" "0000000153" "0000000141")
    assert codec.encode_group_value(snapshot) == v3
    # version 0 (Kafka 0.9/0.10.0): no state timestamp, no instance id, no rebalance timeout, which Kafka's
    # reader takes from the session timeout
    v0 = bytes.fromhex(
        "0000" "0008" + b"consumer".hex() + "00000001" "0005" + b"range".hex() + "00016d"
        "00000001" "00016d" "000163" "00022f68" "00002710" "0000000153" "0000000141")
    assert codec.decode_group_value(v0) == GroupSnapshot("consumer", 1, "range", "m", -1, (
        MemberSnapshot("m", "c", "/h", 10_000, 10_000, b"S", b"A"),))
    # an Empty group (Kafka writes it when the last member left): null protocol and leader, no members
    empty = GroupSnapshot("consumer", 2, None, None, 5)
    assert codec.encode_group_value(empty) == bytes.fromhex(
        "0003" "0008" + b"consumer".hex() + "00000002" "ffff" "ffff" "0000000000000005" "00000000")
    assert codec.decode_group_value(codec.encode_group_value(empty)) == empty


def test_older_offset_value_versions_decode() -> None:
    # v0 and v2 (Kafka 0.8.2 - 2.1): offset, metadata, commit timestamp
    for version in ("0000", "0002"):
        assert codec.decode_offset_value(bytes.fromhex(version + "0000000000000005" "000178" "00000000000003e8")) == \
            CommittedOffset(5, "x", 1000)


texts = st.text(max_size=20)
offsets = st.builds(CommittedOffset, st.integers(0, 2**62), texts, st.integers(0, 2**50), st.just(-1),
                    st.integers(-1, 2**31 - 1))
members = st.builds(MemberSnapshot, texts, texts, texts, st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                    st.binary(max_size=30), st.binary(max_size=30), st.none() | texts)
groups = st.builds(GroupSnapshot, texts, st.integers(0, 2**31 - 1), st.none() | texts, st.none() | texts,
                   st.integers(-1, 2**50), st.lists(members, max_size=4).map(tuple))


@given(texts, texts, st.integers(0, 2**31 - 1), offsets)
def test_offset_records_round_trip(group: str, topic: str, partition: int, c: CommittedOffset) -> None:
    key = codec.encode_offset_key(group, TopicPartition(topic, partition))
    assert codec.decode_key(key) == codec.OffsetKey(group, topic, partition)
    assert codec.decode_offset_value(codec.encode_offset_value(c)) == c


@given(texts, groups)
def test_group_records_round_trip(group: str, snapshot: GroupSnapshot) -> None:
    assert codec.decode_key(codec.encode_group_key(group)) == codec.GroupKey(group)
    assert codec.decode_group_value(codec.encode_group_value(snapshot)) == snapshot


@given(st.binary(max_size=80))
def test_garbage_raises_a_codec_error_and_nothing_else(data: bytes) -> None:
    for decode in (codec.decode_key, codec.decode_offset_value, codec.decode_group_value):
        try:
            decode(data)
        except (codec.CodecError, UnicodeDecodeError):
            pass


records = st.lists(st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=300),
                             st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=2)),
                   min_size=1, max_size=20)


@given(st.lists(records, min_size=1, max_size=4), st.integers(0, 2**40), st.sampled_from([0, 1]))
def test_our_batch_reader_agrees_with_kafka_python(batches, base: int, compression: int) -> None:
    data, offset = b"", base
    for recs in batches:
        builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 30)
        for key, value, headers in recs:
            builder.append(1_700_000_000_000, key, value, headers)
        builder.close()
        batch = bytearray(builder.buffer())
        batch[:8] = offset.to_bytes(8, "big")  # the base offset, as the log assigns it
        data += bytes(batch)
        offset += len(recs)
    expected = [(r.offset, r.key, r.value) for b in MemoryRecords(data) for r in b]
    ours = [(o, k if k is None else bytes(k), v if v is None else bytes(v)) for o, k, v in codec.iter_records(data)]
    assert ours == expected
    assert list(codec.iter_records(data[:-1])) == expected[:-len(batches[-1])]  # a torn last batch is left out


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


def test_expiry_follows_kafkas_rules_through_the_coordinator(tmp_path) -> None:
    """Empty consumer group: retention from when it became Empty, then Dead with a group tombstone; a group of
    simple commits only: each offset from its own commit, Dead without a tombstone (generation 0)."""
    minute = 60_000
    logs = LogManager(tmp_path).open()
    store = OffsetsLog(logs, retention_ms=minute)
    c = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100,
                                           offsets_retention_minutes=1), store).start()
    wait_until(lambda: c.loaded, message="the store loaded")
    joined = c.join("g", "", None, "client", "/h", 1000, 2000, "consumer", [("range", b"m")], False)
    c.sync("g", joined.generation, joined.member_id, None, None, None, {joined.member_id: b"a"})
    assert c.commit_offsets("g", joined.generation, joined.member_id, {TP: CommittedOffset(7, "", 0)}) == KafkaCode.NONE
    c.leave("g", [(joined.member_id, None)])
    wait_until(lambda: c.describe("g").state == "Empty", message="the group to empty")
    empty_since = c.groups["g"].empty_since_ms
    t1 = TopicPartition("t", 1)
    assert c.commit_offsets("solo", -1, "", {TP: CommittedOffset(1, "", empty_since), t1: CommittedOffset(
        2, "", empty_since + minute)}) == KafkaCode.NONE

    assert c.expire_offsets(empty_since + minute - 1) == {}  # the commit of g at 0 does not count: it is Empty
    assert c.expire_offsets(empty_since + minute) == {"g": [TP], "solo": [TP]}
    assert "g" not in c.groups and c.describe("g").state == GroupState.DEAD.value
    assert c.expire_offsets(empty_since + 2 * minute) == {"solo": [t1]}
    assert "solo" not in c.groups
    c.stop()
    logs.close()

    again = OffsetsLog(LogManager(tmp_path).open())
    again.load()
    assert again.groups() == {}  # g's metadata got its tombstone, solo never had any
    again.logs.close()


def test_a_stable_group_loses_offsets_of_topics_it_no_longer_subscribes_to(tmp_path) -> None:
    """KIP-496 (Kafka 2.4+): in a Stable consumer group, offsets of topics outside every member's subscription
    expire the retention period after their commit; the subscribed ones stay."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    logs = LogManager(tmp_path).open()
    c = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100,
                                           offsets_retention_minutes=1), OffsetsLog(logs, retention_ms=60_000))
    c.start()
    wait_until(lambda: c.loaded, message="the store loaded")
    subscription = RangePartitionAssignor.metadata({"t"}).encode()  # the consumer protocol, as clients send it
    joined = c.join("g", "", None, "client", "/h", 30_000, 60_000, "consumer", [("range", subscription)], False)
    c.sync("g", joined.generation, joined.member_id, None, None, None, {joined.member_id: b""})
    old = TopicPartition("old", 0)
    assert c.commit_offsets("g", joined.generation, joined.member_id,
                            {TP: CommittedOffset(1, "", 0), old: CommittedOffset(2, "", 0)}) == KafkaCode.NONE
    assert c.expire_offsets(59_999) == {}
    assert c.expire_offsets(60_000) == {"g": [old]}
    assert c.fetch_offsets("g", None)[1] == {TP: CommittedOffset(1, "", 0)} and c.describe("g").state == "Stable"
    c.stop()
    logs.close()


def test_subscription_topics_are_read_from_every_consumer_protocol_version() -> None:
    from zkconsumer.coordinator.group import consumer_subscription_topics

    v0 = bytes.fromhex("0000" "00000002" "000161" "00026262" "00000000")
    assert consumer_subscription_topics(v0) == {"a", "bb"}
    v1 = bytes.fromhex("0001" "00000001" "000161" "00000000" "00000001" "000161" "00000001" "00000000")
    assert consumer_subscription_topics(v1) == {"a"}  # owned partitions after the v0 prefix are ignored
    assert consumer_subscription_topics(b"\x00\x00\x00\x00\x00\x05\x00\x01") is None  # truncated


def test_a_reloaded_empty_group_keeps_its_empty_since(tmp_path) -> None:
    logs = LogManager(tmp_path).open()
    store = OffsetsLog(logs, retention_ms=60_000)
    store.commit("g", {TP: CommittedOffset(7, "", 0)})
    store.store_group("g", GroupSnapshot("consumer", 3, None, None, 1_000))  # Empty since 1000
    logs.close()
    logs = LogManager(tmp_path).open()
    c = GroupCoordinator(CoordinatorConfig(offsets_retention_minutes=1), OffsetsLog(logs, retention_ms=60_000))
    c.start()
    wait_until(lambda: c.loaded, message="the store loaded")
    assert c.groups["g"].generation == 3 and c.groups["g"].empty_since_ms == 1_000
    assert c.expire_offsets(61_000) == {"g": [TP]}  # not 7 days after this restart
    c.stop()
    logs.close()


def test_groups_come_back_with_their_generation(tmp_path) -> None:
    logs = LogManager(tmp_path).open()
    store = OffsetsLog(logs)
    member = MemberSnapshot("m1", "c", "/h", 300_000, 10_000, b"s", b"a", "static-1")
    for generation in range(1, 4):
        store.store_group("g", GroupSnapshot("consumer", generation, "range", "m1", generation, (member,)))
    store.commit("offsets-only", {TP: CommittedOffset(1, "", 1)})
    logs.close()
    again = OffsetsLog(LogManager(tmp_path).open())
    again.load()
    assert again.groups() == {"g": GroupSnapshot("consumer", 3, "range", "m1", 3, (member,)), "offsets-only": None}
    again.logs.close()


WRITER = """
import sys
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.log.storage import LogManager
from zkconsumer.coordinator.offsets_log import OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset
store = OffsetsLog(LogManager(sys.argv[1]).open())  # default flushing: only the store's own fsync
i = 0
while True:
    store.commit(f"g{i % 7}", {TopicPartition("t", p): CommittedOffset(i, "", i) for p in range(i % 3 + 1)})
    print(i, flush=True)
    i += 1
"""


def test_every_acknowledged_commit_survives_kill_9_of_the_writer(tmp_path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    acked = -1
    try:
        for line in proc.stdout:
            acked = int(line)
            if acked >= 150:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-commit, most likely: the next one was under way
        proc.wait()
    assert acked >= 150, "the writer stopped early"
    store = OffsetsLog(LogManager(tmp_path).open())
    store.load()
    for i in range(acked + 1):  # the latest acknowledged commit of each (group, partition)
        group = f"g{i % 7}"
        for p in range(i % 3 + 1):
            later = [j for j in range(i + 1, acked + 1) if j % 7 == i % 7 and p < j % 3 + 1]
            if not later:
                got = store.fetch(group)[TopicPartition("t", p)].offset
                assert got >= i, f"{group} t-{p}: acknowledged {i}, loaded {got}"
    store.logs.close()


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
def start_broker(zk_connect: str, data_dir, log_path, port: int = 0) -> tuple[subprocess.Popen, str]:
    from test_broker_crash import start_broker as start

    return start(zk_connect, data_dir, log_path, port)


@pytest.mark.slow
def test_committed_offsets_and_a_live_group_survive_kill_9_of_the_broker(zk_connect, registry: Registry,
                                                                         tmp_path) -> None:
    """kill -9 of the broker and a start on the same data: committed offsets are there, and so is a live group
    (issue 52): DescribeGroups answers the same members and assignments as before, and the member's heartbeats find
    its generation, so it keeps its partitions without a rebalance."""
    create_topic(registry, "t", 2)
    data = tmp_path / "broker"
    proc, bootstrap = start_broker(zk_connect, data, tmp_path / "broker.log")
    live = None
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(20):
            producer.send("t", value=b"%d" % i, partition=i % 2)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
        consumer.commit({KTP("t", 0): OffsetAndMetadata(7, "seven", -1), KTP("t", 1): OffsetAndMetadata(9, "", -1)})
        consumer.close()
        config, _ = registry.zk.get("/config/topics/__consumer_offsets")  # created by the first FindCoordinator
        assert json.loads(config)["config"]["cleanup.policy"] == "compact"
        live = KafkaConsumer("t", bootstrap_servers=bootstrap, group_id="live", enable_auto_commit=False,
                             session_timeout_ms=10_000, heartbeat_interval_ms=500)
        wait_until(lambda: live.poll(timeout_ms=100) is not None and len(live.assignment()) == 2, timeout=30,
                   message="the live group's member to get both partitions")
        generation = live._coordinator.generation_if_stable()
        before = describe(bootstrap, "live")
        assert [m["member_id"] for m in before["members"]] == [generation.member_id]
        os.kill(proc.pid, signal.SIGKILL)  # no shutdown, no checkpoint: only what was fsynced
        proc.wait()
        # on its port, as the lab's broker-kill: the member's client knows the broker by its address
        port = int(bootstrap.rpartition(":")[2])
        proc, bootstrap = start_broker(zk_connect, data, tmp_path / "broker.log", port=port)
        restarted = time.monotonic()
        again = KafkaConsumer(bootstrap_servers=bootstrap, group_id="g", enable_auto_commit=False)
        assert again.committed(KTP("t", 0)) == 7 and again.committed(KTP("t", 1)) == 9
        again.close()
        after = describe(bootstrap, "live")
        assert after == before  # members, client ids and hosts, subscriptions and assignments, state Stable
        # the member's heartbeats reach the new broker process and find their generation: nothing rebalances
        heartbeats = live._coordinator.heartbeat
        wait_until(lambda: live.poll(timeout_ms=100) is not None and heartbeats.last_receive > restarted,
                   timeout=20, message="a heartbeat answered by the restarted broker")
        assert live._coordinator.generation_if_stable() == generation and len(live.assignment()) == 2
    finally:
        if live is not None:
            live.close(autocommit=False)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def describe(bootstrap: str, group: str) -> dict:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


def test_the_offsets_topic_is_internal_and_clients_cannot_produce_to_it(broker, registry: Registry) -> None:
    """Metadata says is_internal; a Produce gets INVALID_TOPIC_EXCEPTION (17): only the coordinator appends."""
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    from zkconsumer.broker.client import RawClient

    create_topic(registry, "__consumer_offsets", 1)
    wait_until(lambda: "__consumer_offsets" in broker.cluster.snapshot().topics, message="the topic")
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(0, b"garbage key", b"v")
    builder.close()
    Data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        Data(name="__consumer_offsets", partition_data=[Data.PartitionProduceData(index=0,
                                                                                   records=bytes(builder.buffer()))])])
    with RawClient.to(broker.bootstrap) as client:
        answer = client.call(request, 9)
        metadata = client.call(MetadataRequest(topics=None), 12)
    assert answer.responses[0].partition_responses[0].error_code == 17
    assert {t.name: t.is_internal for t in metadata.topics} == {"__consumer_offsets": True}
    plog = broker.logs.get("__consumer_offsets", 0)
    assert plog is None or plog.log_end_offset == 0
