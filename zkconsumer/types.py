"""The neutral value types every layer shares: a partition, a record as a stream hands it out, the group protocol
a consumer runs, and the base of the string enums whose members carry a label. Pure, no I/O, and they import nothing
of zkconsumer, so the assignors, both connectors, the broker, the coordinator, the migration and the lab can use them
without depending on one another.
``zkconsumer.assignment.assignors.TopicPartition`` and ``zkconsumer.consumer.fetcher.FetchedRecord`` are these same
classes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, Self, TypeVar

V = TypeVar("V")


class GroupMode(StrEnum):
    """How a consumer takes part in its group: Kafka 0.8's rebalance in ZooKeeper, or a broker's group coordinator
    (Kafka 0.9+). String-valued because the values are written as they are: ``consume --mode``, a trace line's
    ``mode``, a migration plan's members and a member's acknowledgement in ZooKeeper."""

    ZOOKEEPER = "zookeeper"
    COORDINATOR = "coordinator"


class LabelledStrEnum(StrEnum):
    """A StrEnum whose members also carry the words people read, written ``NAME = "value", "label"``: the value is
    what is stored and parsed (JSON keys, names in files), :attr:`label` what a table or a summary prints."""

    label: str

    def __new__(cls, value: str, label: str) -> Self:
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label
        return member


class TopicPartition(NamedTuple):
    """Kafka's ``TopicAndPartition``; prints as ``topic-partition`` like the tools do."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return tp_str(self)

    @property
    def kafka_string(self) -> str:
        """``TopicAndPartition.toString``: the string RoundRobin hashes."""
        return f"[{self.topic},{self.partition}]"


def tp_str(tp: tuple[str, int]) -> str:
    """``topic-partition``, as Kafka's tools print a partition; also for a plain ``(topic, partition)`` pair (a
    trace's keys, a table's rows)."""
    return f"{tp[0]}-{tp[1]}"


def partitions_by_topic(tps: Iterable[tuple[str, int]]) -> dict[str, set[int]]:
    """topic → its partitions among ``tps``: the shape ``before_releasing_partitions`` takes (Kafka's
    ``ConsumerRebalanceListener``), and a share as a member's assignment lists it."""
    out: dict[str, set[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, set()).add(partition)
    return out


def chosen(choices: Mapping[str, V], name: str, refused: Callable[[str], Exception], what: str) -> V:
    """``choices[name]``; else ``refused`` with ``what`` is wrong and the names there are, so that a setting
    naming something unknown (a strategy, an assignor) tells the user what would do."""
    try:
        return choices[name]
    except KeyError:
        raise refused(f"{what}; choose one of {', '.join(choices)}") from None


def owners_by_topic(owners: Mapping[TopicPartition, V]) -> dict[str, dict[int, V]]:
    """topic → partition → owner (a thread id): the shape ``before_starting_fetchers`` takes."""
    out: dict[str, dict[int, V]] = {}
    for (topic, partition), owner in owners.items():
        out.setdefault(topic, {})[partition] = owner
    return out


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
