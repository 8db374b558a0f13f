"""Kafka 0.8.2.2's ``ConsumerOffsetChecker``: its choice of topics, its rows and its exact text layout.

What the Scala tool did, and we do:

* topics are the children of ``/consumers/<g>/owners`` (so a topic the group only has offsets for is not
  shown), or the comma-separated ``--topic`` list instead; topics and partitions in ascending order;
* ``Offset`` is the committed offset; a partition without one shows ``-1`` when its topic has an offsets
  directory, ``unknown`` otherwise; ``Lag`` is ``logSize - Offset``, *not* clamped at 0, and ``unknown``
  for ``-1``; ``Owner`` is the owner node's thread id or ``none``;
* ``logSize`` comes from the partition's leader (``LatestTime``); a partition without a reachable leader
  prints ``No broker for partition <t> - <p>`` instead of a row; ``--broker-info`` lists the leaders used.

Where we differ on purpose (docs/profiles.md "Tools"): Kafka asked the offset manager first (offsets stored
in Kafka win); offsets live in ZooKeeper only here, so ZooKeeper answers (and the line Kafka printed before the
header for a partition without a leader, ``Could not fetch offset for [t,0] due to
kafka.common.UnknownTopicOrPartitionException.``, the offset manager's answer, has no counterpart). Kafka
aborted the whole report (``Exiting due to: ...``) when a topic had no offsets directory or a leader did not
answer; we print ``unknown`` or the ``No broker`` line and go on. A group that does not exist is an error
(Kafka printed the header, or aborted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.tools.groups import GroupError, broker_api_version, read_log_ends
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry

#: Kafka's ``println`` format for the header and every row.
ROW_FORMAT = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
HEADER = ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner")


@dataclass(frozen=True)
class CheckerRow:
    group: str
    topic: str
    partition: int
    #: committed offset; -1 when the topic has offsets but not this partition; None when it has none at all
    offset: int | None
    #: the leader's log-end offset; None when no leader answered
    log_size: int | None
    owner: str | None

    @property
    def lag(self) -> int | None:
        """``logSize - Offset`` unclamped (a negative lag shows an offset beyond the log), as Kafka printed."""
        if self.offset is None or self.offset == -1 or self.log_size is None:
            return None
        return self.log_size - self.offset

    def line(self) -> str:
        if self.log_size is None:
            return f"No broker for partition {self.topic} - {self.partition}"
        return ROW_FORMAT % (self.group, self.topic, self.partition, _or_unknown(self.offset), self.log_size,
                             _or_unknown(self.lag), self.owner or "none")


@dataclass(frozen=True)
class CheckerReport:
    group: str
    rows: list[CheckerRow]
    #: broker id → ``host:port`` of the leaders that answered, for ``--broker-info``
    brokers: dict[int, str] = field(default_factory=dict)

    def lines(self, broker_info: bool = False) -> list[str]:
        out = [ROW_FORMAT % HEADER] + [row.line() for row in self.rows]
        if broker_info:
            out.append("BROKER INFO")
            out += [f"{bid} -> {address}" for bid, address in sorted(self.brokers.items())]
        return out


def _or_unknown(value: int | None) -> int | str:
    return "unknown" if value is None else value


def check(reg: Registry, group: str, topics: Sequence[str] | None = None, bootstrap: str | None = None,
          timeout_ms: int = 5000) -> CheckerReport:
    """The checker's rows for ``group``: ``topics``, or every topic under the group's ``owners`` node."""
    if group not in reg.groups():
        raise GroupError(f"Consumer group {group} does not exist.")
    g = GroupPaths(group)
    topic_list = sorted(set(topics) if topics is not None else reg.children(g.owners))
    parts = reg.partitions_for_topics(topic_list)
    tps = [TopicPartition(t, p) for t in topic_list for p in parts[t]]
    offsets = reg.offsets(group)
    with_offsets = set(reg.children(g.offsets))
    owners = reg.owners(group)
    ends = read_log_ends(bootstrap or reg.bootstrap_servers(), tps, timeout_ms, broker_api_version(reg))
    rows = []
    for tp in tps:
        offset = offsets.get(tp)
        if offset is None and tp.topic in with_offsets:
            offset = -1
        rows.append(CheckerRow(group, tp.topic, tp.partition, offset, ends.offsets.get(tp) if tp in ends.leaders
                               else None, owners.get(tp)))
    registered = reg.brokers()
    brokers = {bid: "{}:{}".format(*registered[bid].plaintext_address())
               for bid in set(ends.leaders.values()) if bid in registered}
    return CheckerReport(group, rows, brokers)
