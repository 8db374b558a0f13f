"""Where Kafka 0.8.2.2's ZookeeperConsumerConnector and zkconsumer must agree (issue 9, items 1–7).

Each test reproduces the situation for real (ZooKeeper server, local broker, kafka-python producer) and checks
what Kafka's code does: ConsumerFetcherThread.handleOffsetOutOfRange, the start position committed by the next
commit, createEphemeralPathExpectConflictHandleZKBug, syncedRebalance catching every Throwable, handleNewSession,
and a rebalance with no broker registered.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import consumer, drain, fresh_chroot, wait_until
from kafka import KafkaProducer

from zkconsumer.broker import Broker
from zkconsumer.consumer.zookeeper.connector import ConsumerRebalanceFailed, ConsumerTimeout
from zkconsumer.errors import ConsumerIdInUse
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import ZooKeeperServer
from zkconsumer.zk.topics import create_topic

PROFILES = ["default", "kafka-0.8"]


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for i in range(count):
        producer.send(topic, value=b"v%d" % i, partition=partition)
    producer.flush()
    producer.close()


def events(path, name: str) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path and path.exists() else []
    return [e for e in lines if e["event"] == name]


def owners(reg: Registry, group: str) -> dict[str, str]:
    return {f"{t}-{p}": tid for (t, p), tid in sorted(reg.owners(group).items())}


# ------------------------------------------------------------------------ 1. offset out of range
@pytest.mark.parametrize("profile", PROFILES)
def test_out_of_range_offset_resets_and_commits_the_lower_value(registry: Registry, zk_connect: str, broker,
                                                                 tmp_path, profile: str) -> None:
    """Committed 1000 on a 10-record log: the broker answers OffsetOutOfRange, the consumer resets to smallest,
    hands out 0..9 and commits 10 (Kafka resets fetch *and* consume positions), and the trace says so."""
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 10)
    registry.write_offset("g", "t", 0, 1000)
    c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", consumer_timeout_ms=2000,
                 auto_commit_enable=True, zkconsumer_profile=profile, zkconsumer_trace_dir=str(tmp_path))
    try:
        offsets = [r.offset for r in drain(c.create_message_streams({"t": 1})["t"][0])]
        assert offsets == list(range(10))
        c.commit_offsets()
        assert registry.offset("g", "t", 0) == 10
        [reset] = events(c.trace.path, "offset_reset")
        assert (reset["topic"], reset["partition"], reset["from_offset"], reset["to_offset"]) == ("t", 0, 1000, 0)
    finally:
        c.shutdown()


# ------------------------------------------------------------------ 2. start position committed
@pytest.mark.parametrize("profile", PROFILES)
def test_resolved_start_position_is_committed(registry: Registry, zk_connect: str, broker, profile: str) -> None:
    """a starts at `largest` (5) and leaves before any record; what arrives next is b's, from 5 on."""
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 5)
    a = consumer(zk_connect, "g", "a", fetch=True, auto_commit_enable=True, zkconsumer_profile=profile)
    try:
        a.create_message_streams({"t": 1})
        wait_until(lambda: a.fetcher is not None and a.fetcher.assigned, message="a fetching")
    finally:
        a.shutdown()  # commits (auto.commit.enable), as Kafka's shutdown does
    assert registry.offset("g", "t", 0) == 5
    produce(broker.bootstrap, "t", 3)
    b = consumer(zk_connect, "g", "b", fetch=True, consumer_timeout_ms=2000, zkconsumer_profile=profile)
    try:
        assert [r.offset for r in drain(b.create_message_streams({"t": 1})["t"][0])] == [5, 6, 7]
    finally:
        b.shutdown()


# ----------------------------------------------------------------------- 3. same consumer.id twice
def test_second_live_process_with_the_same_id_fails(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 1)
    a = consumer(zk_connect, "g", "a", zookeeper_session_timeout_ms=2000)
    twin = consumer(zk_connect, "g", "a", zookeeper_session_timeout_ms=2000)
    try:
        a.create_message_streams({"t": 1})
        with pytest.raises(ConsumerIdInUse, match="g_a"):
            twin.create_message_streams({"t": 1})
        node = registry.zk.exists(GroupPaths("g").registration("g_a"))
        assert node is not None and node.ephemeralOwner == a.zk.client_id[0]  # a's registration untouched
        assert owners(registry, "g") == {"t-0": "g_a-0"}
    finally:
        twin.shutdown()
        a.shutdown()


STALE = """
import sys, threading
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=2.0)
zk.start(10)
zk.create("/consumers/g/ids/g_a", b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}',
          ephemeral=True, makepath=True)
print("ready", flush=True)
threading.Event().wait()
"""


def test_registration_left_by_a_dead_session_is_waited_for(registry: Registry, zk_connect: str) -> None:
    """A restart faster than the session timeout (kill -9, start again): the old node goes, then we register."""
    create_topic(registry, "t", 1)
    child = subprocess.Popen([sys.executable, "-c", STALE, zk_connect], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.kill()
        child.wait(10)
        a = consumer(zk_connect, "g", "a")
        try:
            a.create_message_streams({"t": 1})
            node = registry.zk.exists(GroupPaths("g").registration("g_a"))
            assert node is not None and node.ephemeralOwner == a.zk.client_id[0]
            assert owners(registry, "g") == {"t-0": "g_a-0"}
        finally:
            a.shutdown()
    finally:
        child.kill()
        child.wait()


# ------------------------------------------------------------------- 4. any failure is retried
@pytest.mark.parametrize("profile", PROFILES)
def test_assignment_error_is_retried_not_fatal(registry: Registry, zk_connect: str, profile: str) -> None:
    """RoundRobin (0.8.2) refuses members whose thread sets differ per topic: a retries (with backoff) instead
    of failing after one attempt, and recovers once the odd member leaves."""
    create_topic(registry, "t", 2)
    create_topic(registry, "u", 2)
    everything = {"t-0": "g_a-0", "t-1": "g_a-0", "u-0": "g_a-0", "u-1": "g_a-0"}
    props = dict(partition_assignment_strategy="roundrobin", zkconsumer_profile=profile, rebalance_backoff_ms=200)
    a = consumer(zk_connect, "g", "a", rebalance_max_retries=100, **props)
    odd = consumer(zk_connect, "g", "odd", rebalance_max_retries=1, **props)
    try:
        a.create_message_streams({"t": 1, "u": 1})
        assert owners(registry, "g") == everything
        with pytest.raises(ConsumerRebalanceFailed):
            odd.create_message_streams({"t": 1})
        wait_until(lambda: a.rebalancer.stats["failed_attempts"] >= 2, message="a retrying")
        odd.shutdown()
        wait_until(lambda: not a.rebalancer.busy and owners(registry, "g") == everything,
                   message="a owns everything again")
        assert a.failure is None
    finally:
        odd.shutdown()
        a.shutdown()


# -------------------------------------------------------------------------------- 6. sessions
def test_own_registration_missing_fails_the_attempt_in_kafka_08(registry: Registry, zk_connect: str) -> None:
    """Kafka reads its own registration (TopicCount.constructTopicCount): gone, the attempt fails; after its
    retries the watcher thread logs the failure and the consumer sits with no partitions (its streams wait)."""
    create_topic(registry, "t", 1)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile="kafka-0.8", rebalance_max_retries=2,
                 rebalance_backoff_ms=100, consumer_timeout_ms=300)
    try:
        stream = a.create_message_streams({"t": 1})["t"][0]
        registry.zk.delete(GroupPaths("g").registration("g_a"))  # the ids watch fires
        wait_until(lambda: a.rebalancer.stats["failed_rebalances"] == 1, message="the rebalance given up")
        with pytest.raises(ConsumerTimeout):  # nothing raised through the stream, nothing handed out
            next(stream)
        # (its fetchers stopped; its owner node stays, as Kafka's attempt failed before releasing anything)
        assert a.failure is None
        assert registry.zk.exists(GroupPaths("g").registration("g_a")) is None
    finally:
        a.shutdown()


def test_own_registration_missing_is_restored_by_default(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 1)
    with consumer(zk_connect, "g", "a") as a:
        a.create_message_streams({"t": 1})
        registry.zk.delete(GroupPaths("g").registration("g_a"))
        wait_until(lambda: registry.zk.exists(GroupPaths("g").registration("g_a")) is not None,
                   message="re-registered")
        wait_until(lambda: owners(registry, "g") == {"t-0": "g_a-0"}, message="owns t-0")
        assert a.failure is None


@pytest.mark.parametrize("profile", PROFILES)
def test_suspended_connection_and_queued_records(tmp_path, request, profile: str) -> None:
    """ZooKeeper goes away: Kafka 0.8's streams keep handing out what is queued; the default pauses."""
    server = ZooKeeperServer(servers=1).start()
    broker = c = None
    try:
        zk_connect = fresh_chroot(server.connect_string, request.node.name)
        with Registry.open(zk_connect) as reg:
            create_topic(reg, "t", 1)
        broker = Broker(zk_connect, data_dir=tmp_path / "broker").start()
        produce(broker.bootstrap, "t", 10)
        c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", consumer_timeout_ms=1500,
                     zkconsumer_profile=profile)
        stream = c.create_message_streams({"t": 1})["t"][0]
        assert next(stream).offset == 0
        wait_until(lambda: stream.queue.qsize() >= 9, message="the rest queued")
        server.stop()
        wait_until(lambda: not c.connected.is_set(), message="connection suspended")
        if profile == "kafka-0.8":
            assert [r.offset for r in drain(stream, limit=9)] == list(range(1, 10))
        else:
            with pytest.raises(ConsumerTimeout):
                next(stream)
    finally:
        if c is not None:
            c.shutdown()
        if broker is not None:
            broker.stop()
        server.stop()


# -------------------------------------------------------------------------- 7. no broker yet
@pytest.mark.parametrize("profile", PROFILES)
def test_starts_without_brokers_and_consumes_once_one_registers(registry: Registry, zk_connect: str, tmp_path,
                                                                 profile: str) -> None:
    create_topic(registry, "t", 1)
    c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", consumer_timeout_ms=15000,
                 zkconsumer_profile=profile)
    broker = None
    try:
        stream = c.create_message_streams({"t": 1})["t"][0]  # Kafka: "no brokers found", rebalance done
        assert owners(registry, "g") == {}
        broker = Broker(zk_connect, data_dir=tmp_path / "broker").start()
        produce(broker.bootstrap, "t", 3)
        assert [r.offset for r in drain(stream, limit=3)] == [0, 1, 2]
        assert owners(registry, "g") == {"t-0": "g_a-0"}
    finally:
        c.shutdown()
        if broker is not None:
            broker.stop()
