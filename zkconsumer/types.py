"""The neutral value types every layer shares: a partition and a record as a stream hands it out. Pure, no I/O,
and they import nothing of zkconsumer, so the assignors, both connectors, the broker and the coordinator can use
them without depending on one another. ``zkconsumer.assignment.assignors.TopicPartition`` and
``zkconsumer.consumer.fetcher.FetchedRecord`` are these same classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


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
