"""A member registered in pykafka's BalancedConsumer format (bare topic name) in a zkconsumer group.

The registration and owner nodes are written exactly as pykafka 2.8 writes them (tests/test_pykafka.py runs
pykafka itself; its BalancedConsumer needs the group coordinator to stay up, see docs/old-clients.md).
"""

from __future__ import annotations

import logging

import pytest
from helpers import consumer, wait_until

from zkconsumer.assignment import foreign
from zkconsumer.consumer.zookeeper.connector import ConsumerRebalanceFailed
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, MalformedNodeError, TopicAssignment
from zkconsumer.zk.registry import Registry, connect

PYKAFKA_ID = "pkhost:6f1c2b3a-0000-4000-8000-000000000001"


def test_decode_member_reads_kafka_json_and_pykafka_bare_topic() -> None:
    path = f"/consumers/g/ids/{PYKAFKA_ID}"
    assert foreign.decode_member(path, b"orders") == foreign.ForeignMember(PYKAFKA_ID, "orders")
    kafka = ConsumerRegistration.static({"orders": 2}, 1).encode()
    assert foreign.decode_member("/consumers/g/ids/g_a", kafka) == ConsumerRegistration({"orders": 2}, "static", "1")
    for junk in (b'{"version":1', b"", b"not a topic!", b"\xff"):
        with pytest.raises(MalformedNodeError):
            foreign.decode_member(path, junk)


def test_yield_topics_empties_only_the_foreign_members_topics(caplog) -> None:
    members = {PYKAFKA_ID: foreign.ForeignMember(PYKAFKA_ID, "a"), "x:1": foreign.ForeignMember("x:1", "zzz")}
    with caplog.at_level(logging.WARNING, logger="zkconsumer.assignment.foreign"):
        assert foreign.yield_topics({"a": [0, 1], "b": [0]}, members, "g_c") == {"a": [], "b": [0]}
    assert PYKAFKA_ID in caplog.text and "topic a" in caplog.text and "zzz" not in caplog.text


def pykafka_session(zk_connect: str, group: str, topic: str, partitions: int):
    """A ZooKeeper session that registers and claims as one pykafka BalancedConsumer alone in its group would."""
    zk = connect(zk_connect)
    g = GroupPaths(group)
    zk.create(g.registration(PYKAFKA_ID), topic.encode(), ephemeral=True, makepath=True)
    for p in range(partitions):  # pykafka's owner nodes: <leader>-<partition>, data = its consumer id
        zk.create(f"{g.owners_topic(topic)}/0-{p}", PYKAFKA_ID.encode(), ephemeral=True, makepath=True)
    return zk


def test_default_profile_steps_aside_while_a_pykafka_member_is_registered(registry: Registry, zk_connect: str,
                                                                          caplog) -> None:
    registry.zk.create("/brokers/topics/t", TopicAssignment({p: [0] for p in range(4)}).encode(), makepath=True)
    c = consumer(zk_connect, "g", "a")
    try:
        c.create_message_streams({"t": 1})
        assert set(registry.owners("g")) == {("t", p) for p in range(4)}
        with caplog.at_level(logging.WARNING, logger="zkconsumer.assignment.foreign"):
            pk = pykafka_session(zk_connect, "g", "t", 4)
            # pykafka holds every partition (under its own node names); zkconsumer releases all of its claims
            wait_until(lambda: registry.owners("g") == {} and not c.owned_partitions() and not c.rebalancer.busy,
                       message="zkconsumer to step aside")
        assert PYKAFKA_ID in caplog.text
        assert sorted(registry.zk.get_children(GroupPaths("g").owners_topic("t"))) == [f"0-{p}" for p in range(4)]
        pk.stop()
        pk.close()  # the pykafka member leaves: zkconsumer takes the topic back
        wait_until(lambda: set(registry.owners("g")) == {("t", p) for p in range(4)}, message="topic taken back")
    finally:
        c.shutdown()


def test_kafka_0_8_profile_fails_as_kafka_does(registry: Registry, zk_connect: str) -> None:
    """Kafka 0.8.2.2's TopicCount cannot parse the bare topic name: every attempt fails, then the consumer gives up."""
    registry.zk.create("/brokers/topics/t", TopicAssignment({0: [0]}).encode(), makepath=True)
    pk = pykafka_session(zk_connect, "g", "t", 1)
    c = consumer(zk_connect, "g", "a", zkconsumer_profile="kafka-0.8", rebalance_max_retries=2,
                 rebalance_backoff_ms=100)
    try:
        with pytest.raises(ConsumerRebalanceFailed, match="can't rebalance after 2 retries"):
            c.create_message_streams({"t": 1})
    finally:
        c.shutdown()
        pk.stop()
        pk.close()
