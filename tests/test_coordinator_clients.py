"""Real clients as group members of the local broker's coordinator: librdkafka (confluent-kafka) and kafka-python
groups with range, roundrobin and cooperative-sticky; leave, kill -9, resume from commits, a mixed group, the
coordinator on another broker; Describe/List through the admin client. Each checks that every partition has
exactly one member and that every produced record is consumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import wait_until
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from zkconsumer.broker import Broker
from zkconsumer.coordinator.manager import OFFSETS_TOPIC, partition_for
from zkconsumer.zk.layout import TopicAssignment
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

PARTITIONS = 6
FAST = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 500}


@pytest.fixture
def cluster(zk_connect: str, registry: Registry, tmp_path) -> Iterator[Broker]:
    create_topic(registry, "t", PARTITIONS)
    with Broker(zk_connect, data_dir=tmp_path / "broker", **FAST) as broker:
        yield broker


def produce(bootstrap: str, n_per_partition: int, start: int = 0) -> set[tuple[int, int]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    for i in range(start, start + n_per_partition):
        for p in range(PARTITIONS):
            producer.send("t", value=b"%d-%d" % (p, i), partition=p)
    producer.flush()
    producer.close()
    return {(p, i) for p in range(PARTITIONS) for i in range(start, start + n_per_partition)}


def rd_consumer(bootstrap: str, strategy: str = "range", **extra) -> Consumer:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                  "session.timeout.ms": 2000, "heartbeat.interval.ms": 200, "partition.assignment.strategy": strategy,
                  "enable.auto.commit": False, **extra})
    c.subscribe(["t"])
    return c


def poll_all(consumers, seen: set, until, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.add((m.partition(), m.offset()))
        if until():
            return
    raise AssertionError(f"timed out; seen {len(seen)} records, assignments "
                         f"{[sorted(tp.partition for tp in c.assignment()) for c in consumers]}")


def each_partition_once(consumers) -> bool:
    owned = [tp.partition for c in consumers for tp in c.assignment()]
    return sorted(owned) == list(range(PARTITIONS))


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_librdkafka_group_join_leave_every_partition_once_nothing_lost(cluster: Broker, strategy: str) -> None:
    expected = produce(cluster.bootstrap, 10)
    consumers = [rd_consumer(cluster.bootstrap, strategy) for _ in range(3)]
    seen: set = set()
    poll_all(consumers, seen, lambda: seen >= expected and each_partition_once(consumers)
             and all(c.assignment() for c in consumers))
    assert len(seen) == len(expected)
    consumers.pop().close()  # a graceful leave: LeaveGroup, the others take its partitions
    expected |= produce(cluster.bootstrap, 5, start=10)
    poll_all(consumers, seen, lambda: seen >= expected and each_partition_once(consumers))
    assert cluster.coordinator.describe("g").state == "Stable"
    for c in consumers:
        c.close()


def test_resume_from_committed_offsets(cluster: Broker) -> None:
    produce(cluster.bootstrap, 10)
    c = rd_consumer(cluster.bootstrap)
    seen: set = set()
    poll_all([c], seen, lambda: len(seen) == 10 * PARTITIONS)
    c.commit(asynchronous=False)
    c.close()
    expected = produce(cluster.bootstrap, 4, start=10)
    again = rd_consumer(cluster.bootstrap, "roundrobin")  # a new member, a new protocol: the group was Empty
    later: set = set()
    poll_all([again], later, lambda: later >= {(p, o) for p in range(PARTITIONS) for o in range(10, 14)})
    assert later == {(p, o) for p in range(PARTITIONS) for o in range(10, 14)} == expected
    committed = again.committed([TopicPartition("t", p) for p in range(PARTITIONS)], timeout=10)
    assert {tp.offset for tp in committed} == {10}
    again.close()


MEMBER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "g", "auto.offset.reset": "earliest",
                  "session.timeout.ms": 1500, "heartbeat.interval.ms": 150, "enable.auto.commit": False})
    c.subscribe(["t"])
    told = False
    while True:
        c.poll(0.1)
        if c.assignment() and not told:
            print("assigned", flush=True)
            told = True
""")


def test_kill_9_of_a_member_hands_its_partitions_over_after_the_session_timeout(cluster: Broker) -> None:
    expected = produce(cluster.bootstrap, 5)
    proc = subprocess.Popen([sys.executable, "-c", MEMBER, cluster.bootstrap], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline().strip() == b"assigned"
        survivor = rd_consumer(cluster.bootstrap)
        seen: set = set()
        poll_all([survivor], seen, lambda: len(cluster.coordinator.describe("g").members) == 2
                 and cluster.coordinator.describe("g").state == "Stable" and survivor.assignment())
        assert len(survivor.assignment()) < PARTITIONS
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        poll_all([survivor], seen, lambda: len(survivor.assignment()) == PARTITIONS and seen >= expected)
        assert time.monotonic() - killed_at >= 1.0  # the session had to expire first
        assert len(cluster.coordinator.describe("g").members) == 1
        survivor.close()
    finally:
        proc.kill()
        proc.wait()


def test_a_mixed_kafka_python_and_librdkafka_group_converges(cluster: Broker) -> None:
    expected = produce(cluster.bootstrap, 5)
    rd = rd_consumer(cluster.bootstrap)
    kp = KafkaConsumer("t", bootstrap_servers=cluster.bootstrap, group_id="g", auto_offset_reset="earliest",
                       session_timeout_ms=2000, heartbeat_interval_ms=200, enable_auto_commit=False)
    seen: set = set()

    def settled() -> bool:
        for tp, records in kp.poll(50).items():
            seen.update((tp.partition, r.offset) for r in records)
        owned = sorted([tp.partition for tp in rd.assignment()] + [tp.partition for tp in kp.assignment()])
        return owned == list(range(PARTITIONS)) and rd.assignment() and kp.assignment() and seen >= expected

    poll_all([rd], seen, settled)
    assert len(cluster.coordinator.describe("g").members) == 2
    kp.close()
    rd.close()


def test_describe_and_list_groups_through_the_admin_client(cluster: Broker) -> None:
    produce(cluster.bootstrap, 1)
    c = rd_consumer(cluster.bootstrap)
    seen: set = set()
    poll_all([c], seen, lambda: len(c.assignment()) == PARTITIONS)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        wait_until(lambda: cluster.coordinator.describe("g").state == "Stable", message="a stable group")
        group = admin.describe_groups(["g"])["g"]
        assert (group["group_state"], group["protocol_type"], group["protocol_data"]) == ("Stable", "consumer",
                                                                                           "range")
        [m] = group["members"]
        assert m["client_host"] == "/127.0.0.1" and m["member_metadata"]["topics"] == ["t"]
        assert sorted(m["member_assignment"]["assigned_partitions"][0]["partitions"]) == list(range(PARTITIONS))
        assert {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable"} in admin.list_groups()
    finally:
        admin.close()
        c.close()


def test_group_requests_to_a_broker_that_is_not_the_coordinator(zk_connect, registry: Registry, tmp_path) -> None:
    """With ``__consumer_offsets`` led elsewhere, group requests get NOT_COORDINATOR and FindCoordinator names
    the leader of the group's partition, so clients go there."""
    from kafka.protocol.consumer import HeartbeatRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from zkconsumer.broker.client import RawClient

    create_topic(registry, "t", PARTITIONS)
    with Broker(zk_connect, broker_id=0, data_dir=tmp_path / "b0", **FAST) as b0, \
            Broker(zk_connect, broker_id=1, data_dir=tmp_path / "b1", **FAST) as b1:
        p = partition_for("g")
        registry.create_topic_node(OFFSETS_TOPIC, TopicAssignment({i: [1 if i == p else 0] for i in range(50)}))
        wait_until(lambda: OFFSETS_TOPIC in b0.cluster.snapshot().topics, message="b0 to see the offsets topic")
        with RawClient.to(b0.bootstrap) as raw:
            found = raw.call(FindCoordinatorRequest(key="g", key_type=0), 1)
            assert (found.error_code, found.node_id, found.port) == (0, 1, b1.port)
            hb = raw.call(HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), 0)
            assert hb.error_code == 16  # NOT_COORDINATOR
        expected = produce(b0.bootstrap, 3)
        c = rd_consumer(b0.bootstrap)
        seen: set = set()
        poll_all([c], seen, lambda: seen >= expected)
        assert b1.coordinator.describe("g").state == "Stable" and not b0.coordinator.groups
        c.close()


def test_offset_commit_and_fetch_v0_use_zookeeper_and_v1_the_offsets_topic(cluster: Broker, registry) -> None:
    """Kafka 0.8.2's broker: OffsetCommit/OffsetFetch v0 are ZooKeeper's offset nodes (what 0.8 tools read);
    v1 and later are the coordinator's store. A partition without a v0 offset answers -1 with error 3."""
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from zkconsumer.broker.client import RawClient

    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    FTopic = OffsetFetchRequest.OffsetFetchRequestTopic
    with RawClient.to(cluster.bootstrap) as raw:
        found = raw.call(FindCoordinatorRequest(key="old"), 0)  # ConsumerMetadata
        assert (found.error_code, found.port) == (0, cluster.port)
        r = raw.call(OffsetCommitRequest(group_id="old", topics=[Topic(name="t", partitions=[
            Partition(partition_index=0, committed_offset=42, committed_metadata="")])]), 0)
        assert r.topics[0].partitions[0].error_code == 0
        r = raw.call(OffsetCommitRequest(group_id="old", generation_id_or_member_epoch=-1, member_id="", topics=[
            Topic(name="t", partitions=[Partition(partition_index=1, committed_offset=7, commit_timestamp=-1,
                                                  committed_metadata="")])]), 1)
        assert r.topics[0].partitions[0].error_code == 0
        v0 = raw.call(OffsetFetchRequest(group_id="old", topics=[FTopic(name="t", partition_indexes=[0, 1])]), 0)
        v1 = raw.call(OffsetFetchRequest(group_id="old", topics=[FTopic(name="t", partition_indexes=[0, 1])]), 1)
    assert [(p.committed_offset, p.error_code) for p in v0.topics[0].partitions] == [(42, 0), (-1, 3)]
    assert [p.committed_offset for p in v1.topics[0].partitions] == [-1, 7]
    assert registry.offsets("old") == {("t", 0): 42}
