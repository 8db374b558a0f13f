"""Members of a group that registered in a foreign format: pykafka's BalancedConsumer — pure.

pykafka 2.8's ZooKeeper-balanced consumer registers ``/consumers/<g>/ids/<hostname>:<uuid4>`` holding the bare
topic name, counts as members only registrations holding exactly that name, and claims
``/consumers/<g>/owners/<t>/<leader>-<partition>``. It therefore never sees a Kafka-format member, always
splits *every* partition of its topic among pykafka members, and its owner nodes never collide with Kafka's
``<partition>`` nodes (docs/old-clients.md has the whole comparison).

Kafka 0.8.2.2 cannot parse such a registration (``TopicCount.constructTopicCount`` throws "error constructing
TopicCount"), so every rebalance of every Kafka member fails until the pykafka member leaves; the
``kafka-0.8`` profile keeps that. The default profile instead decodes it as a :class:`ForeignMember` and,
since pykafka's members take the whole topic anyway, gives its own members none of that topic's partitions
while one is registered: the only way each partition is consumed once. A deliberate difference from Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from zkconsumer.zk.layout import ConsumerRegistration, InvalidTopicError, MalformedNodeError, validate_topic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ForeignMember:
    """A registration whose data is a bare topic name (pykafka's BalancedConsumer)."""

    consumer_id: str
    topic: str


def decode_member(path: str, data: bytes | str | None) -> ConsumerRegistration | ForeignMember:
    """Kafka's JSON registration, else pykafka's bare topic name; anything else stays a malformed node."""
    try:
        return ConsumerRegistration.decode(path, data)
    except MalformedNodeError:
        topic = _bare_topic(data)
        if topic is None:
            raise
        return ForeignMember(path.rsplit("/", 1)[-1], topic)


def _bare_topic(data: bytes | str | None) -> str | None:
    if not data:
        return None
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return validate_topic(text)
    except (UnicodeDecodeError, InvalidTopicError):
        return None


def split(members: Mapping[str, ConsumerRegistration | ForeignMember]
          ) -> tuple[dict[str, ConsumerRegistration], dict[str, ForeignMember]]:
    """(Kafka-format registrations, foreign members), each by consumer id."""
    own = {cid: m for cid, m in members.items() if isinstance(m, ConsumerRegistration)}
    foreign = {cid: m for cid, m in members.items() if isinstance(m, ForeignMember)}
    return own, foreign


def yield_topics(partitions: Mapping[str, list[int]], foreign: Mapping[str, ForeignMember],
                 consumer_id: str) -> dict[str, list[int]]:
    """``partitions`` with no partition left of any topic a foreign member consumes; logs who took which topic."""
    taken: dict[str, list[str]] = {}
    for member in foreign.values():
        if member.topic in partitions:
            taken.setdefault(member.topic, []).append(member.consumer_id)
    for topic, ids in sorted(taken.items()):
        log.warning("%s: topic %s is consumed by %d foreign member(s) in pykafka's format (%s): they split all of "
                    "its partitions among themselves and never see Kafka-format members, so this group's "
                    "Kafka-format members take none of them until they leave (docs/old-clients.md)",
                    consumer_id, topic, len(ids), ", ".join(sorted(ids)))
    return {t: ([] if t in taken else list(ps)) for t, ps in partitions.items()}
