"""ConsumerConfig against Kafka 0.8.2.2's ConsumerConfig.scala / VerifiableProperties / PartitionAssignor, and
what ``rebalance.max.retries=0`` does to a real consumer (Kafka's syncedRebalance makes no attempt, then throws)."""

from __future__ import annotations

import logging

import pytest
from helpers import consumer

from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.consumer.zookeeper.connector import ConsumerRebalanceFailed
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def test_offsets_storage_is_lower_cased() -> None:
    c = ConsumerConfig.from_properties({"group.id": "g", "offsets.storage": "KAFKA"})
    assert c.offsets_storage == "kafka" and c.dual_commit is True  # dual.commit follows the lower-cased value
    assert ConsumerConfig.from_properties({"group.id": "g", "offsets.storage": "ZooKeeper"}).offsets_storage == \
        "zookeeper"
    with pytest.raises(ConfigError, match="Wrong value s3 of offsets.storage"):
        ConsumerConfig.from_properties({"group.id": "g", "offsets.storage": "S3"})


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_fetch_wait_must_not_exceed_socket_timeout(profile: str) -> None:
    base = {"group.id": "g", "zkconsumer.profile": profile}
    with pytest.raises(ConfigError, match="socket.timeout.ms should always be at least fetch.wait.max.ms"):
        ConsumerConfig.from_properties({**base, "fetch.wait.max.ms": 30001})
    with pytest.raises(ConfigError, match="socket.timeout.ms should always be at least fetch.wait.max.ms"):
        ConsumerConfig.from_properties({**base, "socket.timeout.ms": 50})
    ConsumerConfig.from_properties({**base, "socket.timeout.ms": 100, "fetch.wait.max.ms": 100})  # equal is fine


def test_unknown_properties_are_named_in_one_warning() -> None:
    c = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.conect": "x", "fetch.size": "1",
                                        "external.tag": "kept"})  # Kafka never warned about external.*
    unknown = [w for w in c.warnings() if "not valid" in w]
    assert unknown == ["Properties fetch.size, zookeeper.conect are not valid (ignored)"]
    # Kafka 0.8.2's own properties that zkconsumer has no use for are not unknown
    quiet = ConsumerConfig.from_properties({"group.id": "g", "num.consumer.fetchers": "2",
                                            "socket.receive.buffer.bytes": "65536", "refresh.leader.backoff.ms": "1",
                                            "offsets.channel.backoff.ms": "1", "offsets.commit.max.retries": "1",
                                            "offsets.channel.socket.timeout.ms": "1"})
    assert not [w for w in quiet.warnings() if "not valid" in w]
    assert quiet.as_dict()["num.consumer.fetchers"] == 2


def test_int_properties_are_java_ints() -> None:
    with pytest.raises(ConfigError, match="fetch.min.bytes must be an integer"):
        ConsumerConfig.from_properties({"group.id": "g", "fetch.min.bytes": str(2**31)})


def test_unknown_strategy_is_range_in_the_kafka_08_profile(caplog: pytest.LogCaptureFixture) -> None:
    """PartitionAssignor.createInstance: anything but "roundrobin" is range (even "RoundRobin")."""
    c = ConsumerConfig.from_properties({"group.id": "g", "zkconsumer.profile": "kafka-0.8",
                                        "partition.assignment.strategy": "RoundRobin"})
    assert c.strategy == "range"
    assert any("RoundRobin" in w and "range" in w for w in c.warnings())
    with pytest.raises(ConfigError, match="partition.assignment.strategy must be one of"):
        ConsumerConfig.from_properties({"group.id": "g", "partition.assignment.strategy": "RoundRobin"})


def test_zero_rebalance_retries_is_accepted_and_never_attempts(registry: Registry, zk_connect: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """``for (i <- 0 until 0)`` runs no attempt; syncedRebalance then throws "can't rebalance after 0 retries"."""
    create_topic(registry, "t", 2)
    with pytest.raises(ConfigError, match="rebalance.max.retries must be >= 0"):
        ConsumerConfig.from_properties({"group.id": "g", "rebalance.max.retries": -1})
    with caplog.at_level(logging.WARNING, logger="zkconsumer"):
        c = consumer(zk_connect, "g", "a", rebalance_max_retries=0, some_typo="1", other_typo="2")
    try:
        warned = [r.getMessage() for r in caplog.records if "not valid" in r.getMessage()]
        assert warned == ["Properties other.typo, some.typo are not valid (ignored)"]  # once, naming both
        assert any("rebalance.max.retries=0" in r.getMessage() for r in caplog.records)
        with pytest.raises(ConsumerRebalanceFailed, match="can't rebalance after 0 retries"):
            c.create_message_streams({"t": 1})
        assert registry.consumer_ids("g") == ["g_a"]  # registered, as Kafka's consumer was, but owning nothing
        assert registry.owners("g") == {}
    finally:
        c.shutdown()


def test_consumer_ids_zookeeper_refuses_are_config_errors(registry: Registry) -> None:
    """ZooKeeper refuses U+D800..U+F8FF, U+FFF0..U+FFFF and (as surrogate pairs) everything beyond U+FFFF in a
    path, so no 0.8 group can hold a consumer id where Java's and Python's string orders differ."""
    from kazoo.exceptions import BadArgumentsError

    for name in ("g_\U0001F600", "g_\uE000", "g_\uFFF0"):
        with pytest.raises(BadArgumentsError):
            registry.zk.create("/consumers/g/ids/" + name, makepath=True)
        with pytest.raises(ConfigError, match="ZooKeeper refuses character"):
            ConsumerConfig.from_properties({"group.id": "g", "consumer.id": name[2:]})
    registry.zk.create("/consumers/g/ids/g_\uF900", makepath=True)  # just above the refused range: allowed
    ConsumerConfig.from_properties({"group.id": "g", "consumer.id": "\uF900"})
