"""Partition state nodes and /controller_epoch, written by the controller broker as Kafka's controller does."""

from __future__ import annotations

import json

from helpers import wait_until

from zkconsumer.broker import Broker
from zkconsumer.zk.layout import TopicAssignment
from zkconsumer.zk.partition_state import PartitionState, next_state, state_path
from zkconsumer.zk.topics import add_partitions


def test_state_codec_is_kafka_0_8_2_json_in_its_key_order() -> None:
    state = PartitionState(leader=2, leader_epoch=5, isr=(2,), controller_epoch=3)
    assert state.encode() == b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2]}'
    assert PartitionState.decode(state.encode()) == state
    assert PartitionState.decode(b"junk") is None
    assert next_state(state, 2, 4) is None  # same leader: no write, no epoch bump
    assert next_state(state, 1, 4) == PartitionState(1, 6, (1,), 4)
    assert next_state(None, -1, 4) == PartitionState(-1, 0, (), 4)


def test_state_nodes_follow_topic_creation_growth_and_a_broker_leaving(zk_connect, registry, tmp_path) -> None:
    zk = registry.zk

    def state(topic: str, partition: int) -> dict | None:
        stat = zk.exists(state_path(topic, partition))
        return json.loads(zk.get(state_path(topic, partition))[0]) if stat else None

    b0 = Broker(zk_connect, broker_id=0, data_dir=tmp_path / "b0").start()
    b1 = Broker(zk_connect, broker_id=1, data_dir=tmp_path / "b1").start()
    try:
        assert b0.cluster.wait_for(lambda s: s.controller_id == 0, 10)
        assert zk.get("/controller_epoch")[0] == b"1"
        registry.create_topic_node("s", TopicAssignment({0: [0], 1: [1]}))
        wait_until(lambda: state("s", 0) and state("s", 1), 10)
        assert zk.get(state_path("s", 0))[0] == \
            b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
        assert state("s", 1) == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}

        grown = add_partitions(registry, "s", 3)
        wait_until(lambda: state("s", 2), 10)
        assert state("s", 2)["leader"] == grown[2][0] and state("s", 2)["isr"] == [grown[2][0]]

        b0.stop()  # the controller leaves: broker 1 is elected, bumps the epoch and takes over partition 0
        wait_until(lambda: zk.get("/controller_epoch")[0] == b"2" and state("s", 0)["leader"] == 1, 10)
        assert state("s", 0) == {"controller_epoch": 2, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1]}
        assert state("s", 1) == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
    finally:
        b1.stop()
        b0.stop()
