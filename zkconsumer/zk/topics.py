"""Topic administration in ZooKeeper, as Kafka 0.8's ``AdminUtils`` / ``TopicCommand`` did it.

Creating a topic is only writing ``/brokers/topics/<topic>`` with a replica assignment; brokers and consumers
watch that node. Replica placement follows ``AdminUtils.assignReplicasToBrokers``: first replicas round-robin
from a random start, further replicas shifted so a broker's partitions spread their followers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zkconsumer import runtime
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.layout import TopicAssignment, validate_topic
from zkconsumer.zk.registry import Registry, UnknownTopicError


class AdminOperationError(ZkConsumerError, ValueError):
    """Kafka's ``AdminOperationException``: the request makes no sense for this cluster."""


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas_to_brokers(brokers: Sequence[int], partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: runtime.Random | None = None) -> dict[int, list[int]]:
    """``AdminUtils.assignReplicasToBrokers`` (0.8.2): partition id → replica broker ids."""
    if partitions <= 0:
        raise AdminOperationError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise AdminOperationError("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise AdminOperationError(f"replication factor: {replication_factor} larger than available brokers: "
                                  f"{len(brokers)}")
    rng = rng or runtime.Random()
    n = len(brokers)
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    current = start_partition_id if start_partition_id >= 0 else 0
    out: dict[int, list[int]] = {}
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        replicas = [brokers[first]] + [brokers[_replica_index(first, shift, j, n)]
                                       for j in range(replication_factor - 1)]
        out[current] = replicas
        current += 1
    return out


@dataclass(frozen=True)
class TopicDescription:
    topic: str
    partitions: dict[int, list[int]]
    live_brokers: list[int]

    @property
    def replication_factor(self) -> int:
        return max((len(r) for r in self.partitions.values()), default=0)


def create_topic(reg: Registry, topic: str, partitions: int, replication_factor: int = 1,
                 rng: runtime.Random | None = None, config: dict[str, str] | None = None) -> dict[int, list[int]]:
    """Write a new topic's assignment over the registered brokers (broker 0 when none is registered)."""
    validate_topic(topic)
    brokers = reg.broker_ids() or [0]
    assignment = assign_replicas_to_brokers(brokers, partitions, replication_factor, rng=rng)
    reg.create_topic_node(topic, TopicAssignment(assignment), config)
    return assignment


def add_partitions(reg: Registry, topic: str, partitions: int) -> dict[int, list[int]]:
    """``AdminUtils.addPartitions``: grow to ``partitions`` in total; never shrinks."""
    existing = reg.topic(topic)
    if existing is None:
        raise UnknownTopicError(f"The topic {topic} does not exist")
    current = dict(existing.partitions)
    to_add = partitions - len(current)
    if to_add <= 0:
        raise AdminOperationError("The number of partitions for a topic can only be increased")
    first_replicas = current[min(current)] if current else [0]
    brokers = reg.broker_ids() or sorted({b for r in current.values() for b in r}) or [0]
    # Kafka passes a first replica *id* (of the map's head; ours is partition 0) as the fixed start index and
    # the replica shift; both are only used modulo the broker count.
    new = assign_replicas_to_brokers(brokers, to_add, len(first_replicas), first_replicas[0], len(current))
    current.update(new)
    reg.update_topic_node(topic, TopicAssignment(current))
    return new


def describe_topic(reg: Registry, topic: str) -> TopicDescription:
    ta = reg.topic(topic)
    if ta is None:
        raise UnknownTopicError(f"Topic {topic} does not exist")
    return TopicDescription(topic, {p: list(ta.partitions[p]) for p in ta.partition_ids}, reg.broker_ids())
