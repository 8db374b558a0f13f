"""Tools over a 0.8 group in ZooKeeper: describe (offset checker), list, delete, offsets export/import, verify.

These read the tree exactly as Kafka's ``ConsumerOffsetChecker``, ``ExportZkOffsets``/``ImportZkOffsets`` and
``VerifyConsumerRebalance`` did; the log-end offsets come from the brokers (registered in ZooKeeper, or
``--bootstrap-server``) through kafka-python.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kafka import KafkaConsumer
from kafka import TopicPartition as KTP
from kazoo.exceptions import NotEmptyError

from zkconsumer import broker_version
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk import layout
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry

log = logging.getLogger(__name__)

_EXPORT_LINE = re.compile(r"^/consumers/([^/]+)/offsets/([^/]+)/(\d+):(-?\d+)$")


class GroupError(ZkConsumerError, RuntimeError):
    pass


@dataclass(frozen=True)
class PartitionRow:
    topic: str
    partition: int
    offset: int | None
    log_end: int | None
    owner: str | None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end is None:
            return None
        return max(self.log_end - self.offset, 0)


def subscribed_topics(reg: Registry, group: str) -> dict[str, dict[str, int]]:
    """Consumer id → topic → streams, wildcards resolved against ``/brokers/topics``."""
    all_topics = reg.topics()
    out = {}
    for cid in reg.consumer_ids(group):
        registration = reg.registration(group, cid)
        if registration is not None:
            out[cid] = registration.topic_streams(all_topics)
    return out


@dataclass(frozen=True)
class LogEnds:
    """Log-end offsets and the leader that answered for each partition (missing: unknown)."""

    offsets: dict[TopicPartition, int]
    leaders: dict[TopicPartition, int]


def broker_api_version(reg: Registry) -> tuple[int, ...] | None:
    """The protocol version to talk to the registered brokers with, when one of them predates ApiVersions.

    kafka-python 3 opens every connection with an ApiVersions request; a 0.8 or 0.9 broker answers it by closing
    the socket, so without being told the version the client never bootstraps (every logSize ``No broker``).
    The registrations say which brokers are that old; None (ask the broker) when none is.
    """
    return broker_version.registration_hint(reg.brokers().values())


def read_log_ends(bootstrap: str | None, tps: Iterable[TopicPartition], timeout_ms: int = 5000,
                  api_version: tuple[int, ...] | None = None) -> LogEnds:
    """Latest offsets from the brokers, as ``ConsumerOffsetChecker`` asked each leader for ``LatestTime``.

    ``api_version``: the brokers' protocol when they predate ApiVersions (:func:`broker_api_version`).
    Best effort: with no broker reachable the result is empty and the caller shows the offsets alone, after one
    warning naming the cause (kafka-python 3 rejects unknown settings, so a wrong keyword would land here too).
    """
    tps = list(tps)
    if not bootstrap or not tps:
        return LogEnds({}, {})
    try:
        # none known from the registrations: the probe decides (zkconsumer.broker_version)
        version = {"api_version": api_version} if api_version is not None else broker_version.client_settings(
            bootstrap)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                 request_timeout_ms=max(timeout_ms, 1000), bootstrap_timeout_ms=timeout_ms,
                                 **version)
        try:
            for topic in sorted({tp.topic for tp in tps}):
                consumer.partitions_for_topic(topic)  # the metadata: which partitions have a leader
            cluster = consumer._client.cluster  # kafka-python keeps leaders only here; it is what end_offsets uses
            leaders = {tp: cluster.leader_for_partition(KTP(tp.topic, tp.partition)) for tp in tps}
            # only partitions with a leader: kafka-python's end_offsets fails as a whole for a leaderless one (its
            # replica on a broker that never registered), which must show as that partition's "No broker" alone
            led = [tp for tp, leader in leaders.items() if leader is not None and leader >= 0]
            ends = consumer.end_offsets([KTP(tp.topic, tp.partition) for tp in led], timeout_ms=timeout_ms
                                        ) if led else {}
        finally:
            consumer.close()
        offsets = {TopicPartition(k.topic, k.partition): v for k, v in ends.items()}
        return LogEnds(offsets, {tp: leaders[tp] for tp in offsets})
    except Exception as e:  # noqa: BLE001 - lag is best effort; offsets still show
        log.warning("could not read log-end offsets from %s: %s", bootstrap, e)
        return LogEnds({}, {})


def log_end_offsets(bootstrap: str | None, tps: Iterable[TopicPartition], timeout_ms: int = 5000,
                    api_version: tuple[int, ...] | None = None) -> dict[TopicPartition, int]:
    """Latest offsets from the brokers; empty when none is reachable (the caller shows '-')."""
    return read_log_ends(bootstrap, tps, timeout_ms, api_version).offsets


def describe(reg: Registry, group: str, bootstrap: str | None = None) -> list[PartitionRow]:
    """One row per partition of every topic the group has offsets, owners or subscriptions for."""
    if group not in reg.groups():
        raise GroupError(f"Consumer group {group} does not exist.")
    topics = set()
    for subs in subscribed_topics(reg, group).values():
        topics.update(subs)
    g = GroupPaths(group)
    topics.update(reg.children(g.offsets))
    topics.update(reg.children(g.owners))
    offsets = reg.offsets(group)
    owners = reg.owners(group)
    parts = reg.partitions_for_topics(sorted(topics))
    tps = [TopicPartition(t, p) for t in sorted(topics) for p in parts[t]]
    for (t, p) in list(offsets) + list(owners):
        if TopicPartition(t, p) not in tps:
            tps.append(TopicPartition(t, p))
    ends = log_end_offsets(bootstrap or reg.bootstrap_servers(), tps, api_version=broker_api_version(reg))
    return [PartitionRow(tp.topic, tp.partition, offsets.get(tp), ends.get(tp), owners.get(tp))
            for tp in sorted(tps)]


def delete_group(reg: Registry, group: str) -> None:
    """Kafka's ``deleteConsumerGroupInZK``: refused while consumers are registered."""
    g = GroupPaths(group)
    if group not in reg.groups():
        raise GroupError(f"Consumer group {group} does not exist.")
    live = reg.consumer_ids(group)
    if live:
        raise GroupError(f"Delete for group {group} failed because its consumers are still active: "
                         f"{', '.join(live)}")
    try:
        reg.delete_tree(g.root)
    except NotEmptyError:
        raise GroupError(f"Delete for group {group} failed: a consumer registered meanwhile") from None


def export_offsets(reg: Registry, groups: Iterable[str] | None = None) -> list[str]:
    """``ExportZkOffsets`` lines: ``/consumers/<g>/offsets/<t>/<p>:<offset>``; every group when ``groups`` is None,
    as the Kafka tool did without ``--group``. (Kafka aborted on a group without an ``offsets`` node; such a group
    simply has no lines here.)

    Groups, topics and partitions come in the order ZooKeeper lists the children, unsorted, as Kafka wrote them:
    the same server gives both tools the same order, so the files are byte-identical (partition 11 of a
    12-partition topic comes right after 0, in the order of the server's hash set)."""
    lines = []
    for group in reg.children(layout.CONSUMERS_PATH) if groups is None else groups:
        g = GroupPaths(group)
        paths = [g.offset(topic, int(child)) for topic in reg.children(g.offsets)
                 for child in reg.children(g.offsets_topic(topic)) if child.isdecimal()]
        for path, data in reg.read_many(paths).items():
            if data is not None:  # deleted meanwhile
                lines.append(f"{path}:{layout.decode_offset(path, data)}")
    return lines


def parse_export(lines: Iterable[str]) -> list[tuple[str, str, int, int]]:
    """Validate every line before anything is written; a bad line names its number."""
    out = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _EXPORT_LINE.match(line)
        if not m:
            raise GroupError(f"line {n}: expected /consumers/<group>/offsets/<topic>/<partition>:<offset>, "
                             f"got {line!r}")
        group, topic, partition, offset = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
        layout.validate_topic(topic)
        if offset < 0:
            raise GroupError(f"line {n}: offset must be >= 0, got {offset}")
        out.append((group, topic, partition, offset))
    return out


def import_offsets(reg: Registry, entries: list[tuple[str, str, int, int]], force: bool = False) -> int:
    """``ImportZkOffsets``; refused for a group with live consumers unless ``force`` (they would race it)."""
    for group in sorted({e[0] for e in entries}):
        live = reg.consumer_ids(group)
        if live and not force:
            raise GroupError(f"group {group} has live consumers ({', '.join(live)}); stop them or use --force")
    for group, topic, partition, offset in entries:
        reg.write_offset(group, topic, partition, offset)
    return len(entries)


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    problems: list[str]
    checked: int
    #: set when there is nothing to verify (no such group, nobody registered); ``ok`` is then False
    error: str | None = None


def verify(reg: Registry, group: str) -> VerifyResult:
    """``VerifyConsumerRebalance``: every partition of every subscribed topic owned by a live thread id.

    Differences from 0.8.2.2's tool, on purpose: a group that does not exist, or has no registered consumer,
    is an error (Kafka found no topics to check and said "Rebalance operation successful !"); Kafka compared
    owner node names (strings) with partition ids (ints), so it reported "No owner" for every partition of a
    correctly owned group, which we do not copy; a failure exits non-zero (Kafka always exited 0).
    """
    if group not in reg.groups():
        return VerifyResult(False, [], 0, f"Consumer group {group} does not exist.")
    if not reg.consumer_ids(group):
        return VerifyResult(False, [], 0, f"Consumer group {group} has no registered consumers: nothing "
                                          "owns its partitions, so there is no rebalance to verify.")
    subs = subscribed_topics(reg, group)
    live_threads: dict[str, set[str]] = {}
    for cid, topics in subs.items():
        for topic, streams in topics.items():
            live_threads.setdefault(topic, set()).update(layout.thread_ids(cid, streams))
    problems = []
    checked = 0
    g = GroupPaths(group)
    parts = reg.partitions_for_topics(sorted(live_threads))
    for topic in sorted(live_threads):
        if not parts[topic]:
            problems.append(f"topic {topic} has no partitions (does it exist?)")
        elif not reg.children(g.owners_topic(topic)):
            problems.append(f"No owners for any partitions for topic {topic}")
        for p in parts[topic]:
            checked += 1
            try:
                owner = reg.owner(group, topic, p)
            except layout.MalformedNodeError as e:
                problems.append(str(e))
                continue
            if owner is None:
                problems.append(f"No owner for partition [{topic},{p}]")
            elif owner not in live_threads[topic]:
                problems.append(f"Owner {owner} for partition [{topic},{p}] is not a valid member of consumer "
                                f"group {group}")
    return VerifyResult(not problems, problems, checked)
