"""What a rebalance attempt reads of its group: every member's registration and the partitions of the topics
they subscribe to, as an :class:`AssignmentContext` for the assignor (the ``reads`` phase, docs/trace.md).

``kafka-0.8`` reads it all on every attempt, one synchronous round trip per node, as ZkClient did. The default
profile pipelines the reads, keeps the registrations it read (a registration node is written once: the child
version of ``ids`` says which ids can be new), and keeps each subscribed topic's partitions from its data watch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from zkconsumer import runtime
from zkconsumer.assignment import foreign
from zkconsumer.assignment.assignors import AssignmentContext
from zkconsumer.config import ConsumerConfig, Profile
from zkconsumer.consumer.zookeeper.triggers import TriggerCause
from zkconsumer.zk import layout
from zkconsumer.zk.handler import runs_inline
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, MalformedNodeError
from zkconsumer.zk.registry import Registry, partitions_of_topic_node

log = logging.getLogger(__name__)


class GroupViewHost(Protocol):
    """The member whose view this is (the connector, through the rebalancer)."""

    group: str
    consumer_id: str
    config: ConsumerConfig
    profile: Profile
    registry: Registry
    zk: KazooClient


class GroupView:
    """The group as this member last read it, and the reading of it."""

    def __init__(self, host: GroupViewHost, paths: GroupPaths, trigger: Callable[[TriggerCause], None],
                 stopping: runtime.Event) -> None:
        self.c = host
        self.paths = paths
        self.trigger = trigger
        self.stopping = stopping
        #: registrations read, valid for the ``ids`` child version ``registrations_version`` (-1: none)
        self.registrations: dict[str, ConsumerRegistration] = {}
        self.registrations_version = -1
        #: topic → partitions, kept by the topics' data watches (default profile)
        self.topic_partitions: dict[str, list[int]] = {}
        self._broken_watched: set[str] = set()  # registrations left out as unreadable, watched until fixed
        #: consumer id → (registration, its subscription; None for a wildcard), see _subscriptions
        self._member_subs: dict[str, tuple[ConsumerRegistration, Mapping[str, int] | None]] = {}
        self._shared_subs: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}
        self._any_foreign = False  # a member in pykafka's format was ever read (assignment/foreign.py)
        self._by_id: dict[int, Mapping[str, int]] = {}  # the interned mappings by id() (_topics)
        self._wildcards = False  # the last full reading had wildcard members: their topics change without them
        #: the last read's (registrations, subscriptions, topics): the next read changes only what changed
        self._last: tuple[dict, dict[str, Mapping[str, int]], list[str]] | None = None

    def forget_registrations(self) -> None:
        """A node changed without a child event (or a new session): read every registration next time."""
        self.registrations, self.registrations_version = {}, -1

    def topic_changed(self, topic: str, data: bytes | None) -> None:
        """A subscribed topic's node as its data watch delivered it (a broken node: no partitions, logged)."""
        self.topic_partitions[topic] = partitions_of_topic_node(layout.topic_path(topic), data)

    def read(self, ids_watch: Callable | None) -> tuple[AssignmentContext, int]:
        """Everything the assignor needs.

        ``kafka-0.8`` reads every registration and topic node with one synchronous round trip each, as ZkClient
        did. The default reads the same state but (a) pipelines the reads and (b) re-reads only registrations
        that can have changed: a registration node is written once, and the child version (``cversion``) of
        ``ids`` counts every create and delete, so when the version moved by exactly the number of ids that
        appeared or vanished, every id present in both listings is the very same node as before. Otherwise
        (an id deleted and re-created in between) everything is read again. Topic partition lists come from the
        data watches, which already deliver each change.
        """
        reg = self.c.registry
        fast = self.c.profile.pipelined_reads
        ids, cversion = reg.consumer_ids_with_version(self.c.group, watch=ids_watch if fast else None)
        if not fast:
            paths = {cid: self.paths.registration(cid) for cid in ids}
            raw = {p: reg.read(p) for p in paths.values()}
            gone = [p for p, data in raw.items() if data is None]
            if gone:  # a member left between the listing and the read: Kafka's readData throws, the attempt fails
                raise NoNodeError(f"{gone[0]} vanished while reading the group")
            registrations = {cid: self.decode_member(cid, paths[cid], raw[paths[cid]]) for cid in ids}
            base, gone, added = None, set(), []
        else:
            # Set operations and a dict copy (C loops): an attempt's own work grows with what changed, not with N.
            cached, cached_version = self.registrations, self.registrations_version
            present = set(ids)
            if cached_version < 0 or cversion - cached_version != len(cached.keys() ^ present):
                cached = {}  # cannot tell which nodes are the same: read them all
            todo = sorted(present - cached.keys())
            gone = cached.keys() - present
            paths = {cid: self.paths.registration(cid) for cid in todo}
            raw = reg.read_many(paths.values())
            registrations = cached.copy()
            for cid in gone:
                del registrations[cid]
            added = []
            for cid in todo:
                data = raw[paths[cid]]
                if data is not None:  # None: left between the listing and the read; the version check catches it
                    member = self.decode_member(cid, paths[cid], data)
                    if member is not None:
                        registrations[cid] = member
                        added.append(cid)
            base = cached if cached is self.registrations else None
            if len(registrations) == len(ids):
                self.registrations, self.registrations_version = registrations, cversion
            else:
                self.forget_registrations()
        if self._any_foreign:
            registrations, outsiders = foreign.split(registrations)
        else:
            outsiders = {}
        if fast and not outsiders and base is not None:
            subs, topics = self._subscriptions_changed(registrations, base, gone, added)
        else:
            subs = self._subscriptions(registrations)
            topics = self._topics(subs)
        self._last = (registrations, subs, topics)
        if fast:
            missing = [t for t in topics if t not in self.topic_partitions]
            nodes = reg.read_many(layout.topic_path(t) for t in missing)
            partitions = {}
            for t in topics:
                if t in self.topic_partitions:
                    partitions[t] = self.topic_partitions[t]
                else:
                    partitions[t] = partitions_of_topic_node(layout.topic_path(t), nodes[layout.topic_path(t)])
        else:
            partitions = reg.partitions_for_topics(topics)
        if outsiders:
            partitions = foreign.yield_topics(partitions, outsiders, self.c.consumer_id)
        return AssignmentContext(subs, partitions), cversion

    def _subscriptions_changed(self, registrations: dict[str, ConsumerRegistration],
                               base: dict[str, ConsumerRegistration], gone: set[str], added: list[str]
                               ) -> tuple[dict[str, Mapping[str, int]], list[str]]:
        """The subscriptions and topics of the last read, with the members that left or joined since: a member
        present in both is the very same registration (``base`` is the dict the last read cached). Worked out in
        full when the last read is not that one, or a wildcard member is involved (its topics depend on the
        topics that exist now)."""
        last = self._last
        if last is None or last[0] is not base or len(last[1]) != len(base) or self._wildcards:
            subs = self._subscriptions(registrations)
            return subs, self._topics(subs)
        memo, exclude = self._member_subs, self.c.config.exclude_internal_topics
        subs = last[1].copy()
        for cid in gone:
            del subs[cid]
            memo.pop(cid, None)
        for cid in added:
            r = registrations[cid]
            if r.is_wildcard:
                subs = self._subscriptions(registrations)
                return subs, self._topics(subs)
            mapping = self._interned(r.topic_streams((), exclude))
            memo[cid] = (r, mapping)
            subs[cid] = mapping
        return subs, last[2] if not gone and not added else self._topics(subs)

    def _topics(self, subs: Mapping[str, Mapping[str, int]]) -> list[str]:
        """The topics anyone subscribes to, looked up once per distinct subscription mapping."""
        by_id = self._by_id
        distinct = set(map(id, subs.values()))
        if all(i in by_id for i in distinct):
            return sorted({t for i in distinct for t in by_id[i]})
        return sorted({t for s in subs.values() for t in s})

    def _subscriptions(self, registrations: dict[str, ConsumerRegistration]) -> dict[str, Mapping[str, int]]:
        """Consumer id → topic → streams, wildcards resolved against the topics read now.

        A static registration's subscription is worked out once per registration object (the default profile
        keeps them across attempts), and equal subscriptions are one shared mapping: the assignor groups
        consumers by that identity first, so a group of N alike members costs N dictionary lookups here and
        there, not N sorts and parses on every attempt of every member.
        """
        memo, exclude = self._member_subs, self.c.config.exclude_internal_topics
        subs: dict[str, Mapping[str, int]] = {}
        wildcards = []
        for cid, r in registrations.items():
            hit = memo.get(cid)
            if hit is not None and hit[0] is r:
                mapping = hit[1]
            else:
                mapping = None if r.is_wildcard else self._interned(r.topic_streams((), exclude))
                memo[cid] = (r, mapping)
            if mapping is None:
                wildcards.append(cid)
            else:
                subs[cid] = mapping
        self._wildcards = bool(wildcards)
        if wildcards:
            all_topics = self.c.registry.topics()
            for cid in wildcards:
                subs[cid] = self._interned(registrations[cid].topic_streams(all_topics, exclude))
        if len(memo) > 2 * len(registrations) + 16:  # members that left
            self._member_subs = {cid: memo[cid] for cid in registrations if cid in memo}
        return subs

    def _interned(self, mapping: dict[str, int]) -> Mapping[str, int]:
        key = tuple(sorted(mapping.items()))
        shared = self._shared_subs.get(key)
        if shared is None:
            if len(self._shared_subs) > 1024:  # wildcards over changing topic lists: keep it bounded
                self._shared_subs.clear()
                self._by_id.clear()
            shared = self._shared_subs[key] = mapping
            self._by_id[id(mapping)] = mapping  # holds it, so the id stays its own
        return shared

    def decode_member(self, cid: str, path: str, data: bytes | None) -> ConsumerRegistration | None:
        """A member's registration. Unreadable: Kafka's attempt fails (``TopicCount.constructTopicCount``
        throws); the default leaves the member out and watches its node, so a fix starts a rebalance."""
        try:
            if self.c.profile.skip_broken_nodes and cid != self.c.consumer_id:
                member = foreign.decode_member(path, data)  # the default also reads pykafka's (assignment/foreign.py)
                if not isinstance(member, ConsumerRegistration):
                    self._any_foreign = True  # from now on every read splits the foreign members off
                return member
            return ConsumerRegistration.decode(path, data)
        except MalformedNodeError as e:
            if not self.c.profile.skip_broken_nodes:
                log.error("%s: cannot read the registration of %s: %s", self.c.consumer_id, cid, e)
                raise
            log.error("%s: leaving %s out of the group until its registration is fixed: %s", self.c.consumer_id,
                      cid, e)
            if cid != self.c.consumer_id:  # our own is written again by the attempt
                self._watch_broken(path)
            return None

    def _watch_broken(self, path: str) -> None:
        """One data watch per broken registration: its change (a fix) or deletion triggers a rebalance."""
        if path in self._broken_watched:
            return
        self._broken_watched.add(path)

        @runs_inline
        def on_change(event) -> None:
            self._broken_watched.discard(path)
            if not self.stopping.is_set():
                self.trigger(TriggerCause.REGISTRATION_CHANGED)

        if self.c.zk.exists(path, watch=on_change) is None:
            self._broken_watched.discard(path)  # already gone: the ids watch has fired
