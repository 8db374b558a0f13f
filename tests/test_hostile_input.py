"""Hostile and broken input (issue 11, item 3): each case against a real ZooKeeper, real consumers and the real
broker. A bad node or a bad peer gets a logged error that names it, the consumer keeps running (or stops with a
clear message where Kafka 0.8.2.2 would), recovers once the node is fixed, and never commits garbage.
What each profile does, and why, is in docs/profiles.md ("Broken input").
"""

from __future__ import annotations

import logging
import socket
import struct

import pytest
from helpers import consumer, drain, wait_until
from kafka import KafkaProducer
from kafka.protocol.metadata import ApiVersionsRequest

from zkconsumer.broker import Broker
from zkconsumer.broker.client import RawClient
from zkconsumer.consumer.zookeeper.connector import ConsumerRebalanceFailed
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, TopicAssignment, topic_path
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

PROFILES = ["default", "kafka-0.8"]
G = GroupPaths("g")
JUNK = G.registration("g_junk")
VALID_JUNK = ConsumerRegistration.static({"t": 1}, 1).encode()

BROKEN_REGISTRATIONS = {
    "not-json": b"{oops",
    "json-array": b"[1,2]",
    "no-pattern": b'{"version":1,"subscription":{"t":1}}',
    "zero-streams": b'{"version":1,"subscription":{"t":0},"pattern":"static","timestamp":"1"}',
    "streams-as-string": b'{"version":1,"subscription":{"t":"1"},"pattern":"static","timestamp":"1"}',
    "binary": b"\xff\xfe\x00\x01garbage",
    "empty": b"",
}


@pytest.fixture(autouse=True)
def _log_everything(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer")


def logged(caplog: pytest.LogCaptureFixture, *fragments: str, level: int = logging.WARNING) -> list[str]:
    """Messages at ``level`` or above from zkconsumer that contain every fragment."""
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("zkconsumer") and r.levelno >= level and all(f in r.getMessage() for f in fragments)]


def owners(reg: Registry, group: str = "g") -> dict[str, str]:
    return {f"{t}-{p}": tid for (t, p), tid in sorted(reg.owners(group).items())}


def settled(*consumers) -> bool:
    return all(not c.rebalancer.busy for c in consumers)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for i in range(count):
        producer.send(topic, value=b"v%d" % i, partition=0)
    producer.flush()
    producer.close()


# ------------------------------------------------------------------------ foreign registrations in ids
@pytest.mark.parametrize("garbage", BROKEN_REGISTRATIONS.values(), ids=BROKEN_REGISTRATIONS.keys())
def test_broken_registration_is_skipped_and_picked_up_once_fixed(registry: Registry, zk_connect: str, caplog,
                                                                  garbage: bytes) -> None:
    """Default profile: the member is left out with an error naming its node; the group keeps consuming; when
    the node is fixed (a data change: no ids child event) the consumer notices and shares with it."""
    create_topic(registry, "t", 2)
    a = consumer(zk_connect, "g", "a")
    try:
        a.create_message_streams({"t": 1})
        assert owners(registry) == {"t-0": "g_a-0", "t-1": "g_a-0"}
        registry.zk.create(JUNK, garbage)
        wait_until(lambda: logged(caplog, JUNK, level=logging.ERROR) and settled(a), message="error naming the node")
        assert owners(registry) == {"t-0": "g_a-0", "t-1": "g_a-0"}
        assert a.failure is None
        registry.zk.set(JUNK, VALID_JUNK)
        wait_until(lambda: owners(registry) == {"t-0": "g_a-0"} and settled(a), message="the fixed member counted")
        assert a.failure is None
    finally:
        a.shutdown()


def test_broken_registration_fails_attempts_in_kafka_08_until_fixed(registry: Registry, zk_connect: str,
                                                                    caplog) -> None:
    """Kafka 0.8.2.2 (TopicCount.constructTopicCount) throws on the member's JSON: every attempt fails and is
    retried; once the node is fixed the next attempt succeeds."""
    create_topic(registry, "t", 2)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile="kafka-0.8", rebalance_max_retries=1000,
                 rebalance_backoff_ms=100)
    try:
        a.create_message_streams({"t": 1})
        registry.zk.create(JUNK, b"{oops")
        wait_until(lambda: a.rebalancer.stats["failed_attempts"] >= 2, message="attempts failing")
        assert logged(caplog, JUNK, level=logging.ERROR)
        registry.zk.set(JUNK, VALID_JUNK)
        wait_until(lambda: owners(registry) == {"t-0": "g_a-0"} and settled(a), message="recovered once fixed")
        assert a.failure is None
    finally:
        a.shutdown()


def test_broken_registration_gives_up_in_kafka_08_naming_the_node(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 1)
    registry.zk.create(JUNK, b"{oops", makepath=True)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile="kafka-0.8", rebalance_max_retries=2,
                 rebalance_backoff_ms=100)
    try:
        with pytest.raises(ConsumerRebalanceFailed, match=f"can't rebalance after 2 retries.*{JUNK}"):
            a.create_message_streams({"t": 1})
    finally:
        a.shutdown()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("data", [
    b'{"version":3,"subscription":{"t":1},"pattern":"static","timestamp":"1","owner":"x"}',
    b'{"version":"two","subscription":{"t":1},"pattern":"static","timestamp":1}',
    b'{"subscription":{"t":1},"pattern":"static"}',
], ids=["version-3-extra-keys", "version-string", "no-version"])
def test_other_registration_versions_are_members(registry: Registry, zk_connect: str, profile: str,
                                                 data: bytes) -> None:
    """Kafka reads only ``pattern`` and ``subscription``: another version with extra keys is a member."""
    create_topic(registry, "t", 2)
    registry.zk.create(JUNK, data, makepath=True)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile=profile)
    try:
        a.create_message_streams({"t": 1})
        assert owners(registry) == {"t-0": "g_a-0"}
    finally:
        a.shutdown()


def test_own_registration_overwritten_is_restored(registry: Registry, zk_connect: str, caplog) -> None:
    """Default profile: someone writes garbage over our registration; we notice and write it back."""
    create_topic(registry, "t", 1)
    a = consumer(zk_connect, "g", "a")
    try:
        a.create_message_streams({"t": 1})
        own = G.registration("g_a")
        registry.zk.set(own, b"garbage")
        wait_until(lambda: registry.read(own).startswith(b'{"version":1,"subscription":{"t":1},"pattern":"static"')
                   and settled(a), message="registration restored")
        assert logged(caplog, own)
        assert owners(registry) == {"t-0": "g_a-0"} and a.failure is None
    finally:
        a.shutdown()


# ------------------------------------------------------------------------------------ offset nodes
@pytest.mark.parametrize("garbage", [b"abc", b"12abc", b"", b"\xff\x00"], ids=["word", "trailing", "empty", "binary"])
def test_garbage_offset_is_reported_and_treated_as_absent(registry: Registry, zk_connect: str, broker, caplog,
                                                          garbage: bytes) -> None:
    """Default profile: the error names the node and value; auto.offset.reset decides; the first commit
    replaces the garbage with a real position (and says so)."""
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 5)
    path = G.offset("t", 0)
    registry.zk.create(path, garbage, makepath=True)
    a = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", auto_commit_enable=True,
                 consumer_timeout_ms=1500)
    try:
        offsets = [r.offset for r in drain(a.create_message_streams({"t": 1})["t"][0])]
        assert offsets == [0, 1, 2, 3, 4]
        assert logged(caplog, path, "auto.offset.reset", level=logging.ERROR)
    finally:
        a.shutdown()
    assert registry.offset("g", "t", 0) == 5
    assert logged(caplog, path, "replac")


def test_garbage_offset_fails_the_rebalance_in_kafka_08(registry: Registry, zk_connect: str, broker) -> None:
    """Kafka 0.8.2.2 (fetchOffsetFromZooKeeper: ``offsetStr.toLong``) throws: the attempts fail, the consumer
    gives up naming the node, and the garbage is left for the operator (never overwritten)."""
    create_topic(registry, "t", 1)
    path = G.offset("t", 0)
    registry.zk.create(path, b"abc", makepath=True)
    a = consumer(zk_connect, "g", "a", fetch=True, zkconsumer_profile="kafka-0.8", rebalance_max_retries=2,
                 rebalance_backoff_ms=100, auto_commit_enable=True)
    try:
        with pytest.raises(ConsumerRebalanceFailed, match=path):
            a.create_message_streams({"t": 1})
    finally:
        a.shutdown()
    assert registry.read(path) == b"abc"


@pytest.mark.parametrize("profile", PROFILES)
def test_negative_offset_resets(registry: Registry, zk_connect: str, broker, caplog, profile: str) -> None:
    """A negative offset is out of range (Kafka: the fetch gets OffsetOutOfRange and resets): a warning names
    the node, auto.offset.reset decides, and the next commit writes a real position."""
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 5)
    path = G.offset("t", 0)
    registry.zk.create(path, b"-5", makepath=True)
    a = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", auto_commit_enable=True,
                 consumer_timeout_ms=1500, zkconsumer_profile=profile)
    try:
        offsets = [r.offset for r in drain(a.create_message_streams({"t": 1})["t"][0])]
        assert offsets == [0, 1, 2, 3, 4]
        assert logged(caplog, path, "-5")
    finally:
        a.shutdown()
    assert registry.offset("g", "t", 0) == 5


# ------------------------------------------------------------------------------- /brokers/topics/<t>
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("garbage", [b"not json", b'{"version":1,"partitions":{"x":[0]}}'], ids=["text", "bad-id"])
def test_broken_topic_node_leaves_other_topics_running(registry: Registry, zk_connect: str, caplog, profile: str,
                                                       garbage: bytes) -> None:
    create_topic(registry, "t", 2)
    create_topic(registry, "u", 2)
    everything = {"t-0": "g_a-0", "t-1": "g_a-0", "u-0": "g_a-0", "u-1": "g_a-0"}
    a = consumer(zk_connect, "g", "a", zkconsumer_profile=profile)
    try:
        a.create_message_streams({"t": 1, "u": 1})
        assert owners(registry) == everything
        good = registry.read(topic_path("u"))
        registry.zk.set(topic_path("u"), garbage)
        wait_until(lambda: owners(registry) == {"t-0": "g_a-0", "t-1": "g_a-0"} and settled(a),
                   message="t kept, u dropped")
        assert logged(caplog, topic_path("u"), level=logging.ERROR)
        assert a.failure is None
        registry.zk.set(topic_path("u"), good)
        wait_until(lambda: owners(registry) == everything and settled(a), message="u back once fixed")
        assert a.failure is None
    finally:
        a.shutdown()


# ------------------------------------------------------------------------------------- 900 KB nodes
def test_900_kb_nodes_are_read_or_refused_cleanly(registry: Registry, zk_connect: str, caplog) -> None:
    """Close to ZooKeeper's 1 MB jute.maxbuffer: a 900 KB garbage registration is skipped with a bounded message,
    and a 900 KB valid topic node (many partitions' worth of replica lists) is read."""
    create_topic(registry, "t", 2)
    replicas = list(range(20))
    big = TopicAssignment({p: replicas for p in range(15000)})
    data = big.encode()
    assert 800_000 < len(data) < 1_000_000
    registry.zk.create(topic_path("big"), data)
    a = consumer(zk_connect, "g", "a")
    try:
        a.create_message_streams({"t": 1})
        registry.zk.create(JUNK, b"x" * 900_000)
        wait_until(lambda: logged(caplog, JUNK, level=logging.ERROR) and settled(a), message="error for 900 KB")
        assert max(len(m) for m in logged(caplog, JUNK)) < 2000
        assert owners(registry) == {"t-0": "g_a-0", "t-1": "g_a-0"}
        assert len(registry.topic("big").partition_ids) == 15000
    finally:
        a.shutdown()


# ------------------------------------------------------------------------------ owners deleted live
@pytest.mark.parametrize("profile", PROFILES)
def test_owner_nodes_deleted_under_a_live_group(registry: Registry, zk_connect: str, caplog, profile: str) -> None:
    """Default profile: the owner notices at once (a watch on its owner nodes), says so and claims it again.
    Kafka 0.8 does not watch owner nodes: the next rebalance puts things right. Either way, once a second
    consumer joins, every partition has exactly one owner and no two consumers hold the same partition."""
    create_topic(registry, "t", 2)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile=profile)
    b = None
    try:
        a.create_message_streams({"t": 1})
        registry.zk.delete(G.owner("t", 0))
        if profile == "default":
            wait_until(lambda: owners(registry).get("t-0") == "g_a-0" and settled(a), message="t-0 claimed again")
            assert logged(caplog, G.owner("t", 0))
        b = consumer(zk_connect, "g", "b", zkconsumer_profile=profile)
        b.create_message_streams({"t": 1})
        wait_until(lambda: owners(registry) == {"t-0": "g_a-0", "t-1": "g_b-0"} and settled(a, b),
                   message="shared")
        assert not set(a.owned_partitions()) & set(b.owned_partitions())
        assert a.failure is None and b.failure is None
    finally:
        if b is not None:
            b.shutdown()
        a.shutdown()


# ---------------------------------------------------------------------------------- the broker port
@pytest.fixture
def strict_broker(zk_connect: str, tmp_path):
    """A broker with a small request limit (Kafka's socket.request.max.bytes) and a short idle timeout
    (connections.max.idle.ms), so both can be hit quickly."""
    with Broker(zk_connect, data_dir=tmp_path / "broker", socket_request_max_bytes=64 * 1024,
                connections_max_idle_ms=1000) as b:
        yield b


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


HOSTILE_FRAMES = {
    "2-gb-length": struct.pack(">i", 2**31 - 1),
    "negative-length": struct.pack(">i", -1),
    "over-the-limit": struct.pack(">i", 64 * 1024 + 1) + b"\x00" * 100,
    "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "garbage-body": struct.pack(">i", 12) + struct.pack(">hhi", 3, 9, 1) + b"\xff" * 4,
}


@pytest.mark.parametrize("frame", HOSTILE_FRAMES.values(), ids=HOSTILE_FRAMES.keys())
def test_hostile_bytes_close_only_that_connection(strict_broker: Broker, caplog, frame: bytes) -> None:
    with RawClient.to(strict_broker.bootstrap) as bystander, \
            socket.create_connection(("127.0.0.1", strict_broker.port), timeout=10) as bad:
        peer = "{}:{}".format(*bad.getsockname())
        bad.sendall(frame)
        assert _closed_by_peer(bad)
        wait_until(lambda: logged(caplog, peer), message="a log line naming the peer")
        assert bystander.call(ApiVersionsRequest(), 3).error_code == 0


def test_truncated_frame_is_logged_with_the_peer(strict_broker: Broker, caplog) -> None:
    with socket.create_connection(("127.0.0.1", strict_broker.port), timeout=10) as bad:
        peer = "{}:{}".format(*bad.getsockname())
        bad.sendall(struct.pack(">i", 100) + b"\x00" * 10)
        bad.shutdown(socket.SHUT_WR)
        assert _closed_by_peer(bad)
    wait_until(lambda: logged(caplog, peer, "10 of 100", level=logging.INFO), message="truncation logged")
    with RawClient.to(strict_broker.bootstrap) as good:
        assert good.call(ApiVersionsRequest(), 3).error_code == 0


def test_silent_client_is_closed_after_the_idle_timeout(strict_broker: Broker, caplog) -> None:
    with socket.create_connection(("127.0.0.1", strict_broker.port), timeout=10) as silent:
        peer = "{}:{}".format(*silent.getsockname())
        with RawClient.to(strict_broker.bootstrap) as other:  # served while the silent one hangs around
            assert other.call(ApiVersionsRequest(), 3).error_code == 0
        assert _closed_by_peer(silent)
    wait_until(lambda: logged(caplog, peer, "idle", level=logging.INFO), message="idle close logged")


def test_request_up_to_the_limit_is_served(strict_broker: Broker) -> None:
    with RawClient.to(strict_broker.bootstrap, client_id="x" * 30_000) as big:
        assert big.call(ApiVersionsRequest(), 3).error_code == 0
