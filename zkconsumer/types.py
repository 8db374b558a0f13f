"""The neutral value types every layer shares: a partition, a record as a stream hands it out, and the group
protocol a consumer runs. Pure, no I/O, and they import nothing of zkconsumer, so the assignors, both connectors, the
broker, the coordinator, the migration and the lab can use them without depending on one another.
``zkconsumer.assignment.assignors.TopicPartition`` and ``zkconsumer.consumer.fetcher.FetchedRecord`` are these same
classes."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple


class GroupMode(StrEnum):
    """How a consumer takes part in its group: Kafka 0.8's rebalance in ZooKeeper, or a broker's group coordinator
    (Kafka 0.9+). String-valued because the values are written as they are: ``consume --mode``, a trace line's
    ``mode``, a migration plan's members and a member's acknowledgement in ZooKeeper."""

    ZOOKEEPER = "zookeeper"
    COORDINATOR = "coordinator"


class TopicPartition(NamedTuple):
    """Kafka's ``TopicAndPartition``; prints as ``topic-partition`` like the tools do."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def kafka_string(self) -> str:
        """``TopicAndPartition.toString``: the string RoundRobin hashes."""
        return f"[{self.topic},{self.partition}]"


@dataclass(frozen=True)
class FetchedRecord:
    """One record as a stream hands it to the caller."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None = None
    headers: tuple = ()
