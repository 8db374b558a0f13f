"""The group every scenario measures: its names and settings, the ZooKeeper tree it starts from, and the
assignment it must reach (Kafka's range assignor)."""

from __future__ import annotations

import dataclasses
import time

from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.zk.layout import BrokerInfo
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

TOPIC = "bench"
GROUP = "g"
#: Apache Kafka 0.8.2.2's own high-level consumer, the oracle (zkconsumer/apache_kafka)
KAFKA = "kafka-0.8.2.2"
PROFILES = ("kafka-0.8", "default")
IMPLEMENTATIONS = (KAFKA, *PROFILES)
#: What every member runs with, whatever its implementation (Kafka 0.8's property names). Everything else is
#: Kafka's default on both sides: range, rebalance.backoff.ms = zookeeper.sync.time.ms = 2000,
#: zookeeper.connection.timeout.ms = the session timeout, offsets in ZooKeeper, one stream.
SETTINGS = {"auto.commit.enable": False, "rebalance.max.retries": 10, "zookeeper.session.timeout.ms": 6000}
#: A broker registration as Kafka 0.8.2's brokers write it. Kafka's rebalance claims nothing without one ("no
#: brokers found when trying to rebalance"); with fetching disabled nothing connects to it. Every implementation's
#: tree has it (the kafka-0.8 profile reads it, as Kafka's getCluster does).
BROKER = BrokerInfo(0, "127.0.0.1", 9092, jmx_port=-1, version=1)


def prepare_tree(reg: Registry, partitions: int) -> None:
    """The tree every scenario starts from: the common paths and the group's ids (as a running cluster and group
    have them), the topic, one registered broker (ephemeral, on the benchmark's own session)."""
    reg.setup_common_paths(f"/consumers/{GROUP}/ids")
    create_topic(reg, TOPIC, partitions)
    reg.register_broker(dataclasses.replace(BROKER, timestamp=str(int(time.time() * 1000))))


def expected_owners(names: list[str], partitions: int) -> dict:
    ctx = AssignmentContext({f"{GROUP}_{n}": {TOPIC: 1} for n in names}, {TOPIC: range(partitions)})
    return {(tp.topic, tp.partition): tid for tp, tid in assign("range", ctx).owners.items()}


def moved(before: dict, after: dict) -> int:
    """How many partitions change hands between two assignments. A join or crash that moves none (more consumers
    than partitions) is no rebalance to measure: the benchmark says so instead of reporting it as 0 ms."""
    return sum(1 for tp in after.keys() | before.keys() if before.get(tp) != after.get(tp))
