"""What a rebalance attempt reads of its group: every member's registration and the partitions of the topics
they subscribe to, as an :class:`AssignmentContext` for the assignor (the ``reads`` phase, docs/trace.md).

``kafka-0.8`` reads it all on every attempt, one synchronous round trip per node, as ZkClient did. The default
profile pipelines the reads, keeps the registrations it read (a registration node is written once: the child
version of ``ids`` says which ids can be new), and keeps each subscribed topic's partitions from its data watch.

Members that share a process (the lab's hosts run 25, the simulator's herd thousands) share what they read, by
content: a member's view equal to one already built for the same child version of ``ids`` *is* that one
(:class:`SharedView`). Without that, each of N members keeps its own N-entry tables, N² in all: 670 MB settled at
1,500 simulated members, and the 10,000-member herd of issue 41 would not fit in memory. Every member still sends
its own requests; only the memory is shared.
"""

from __future__ import annotations

import logging
import weakref
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


class SharedView:
    """One reading of a group's members, shared by every member in this process that read the same: the
    registrations, the subscriptions worked out from them and the topics subscribed, plus the assignor's input
    built on them (its lookups are memoised on the context, so they are built once, not once per member).

    Nobody changes these tables: a member that reads something new copies them first (``GroupView.read``).
    """

    __slots__ = ("registrations", "subs", "topics", "_context", "__weakref__")

    def __init__(self, registrations: dict[str, ConsumerRegistration], subs: dict[str, Mapping[str, int]],
                 topics: list[str]) -> None:
        self.registrations, self.subs, self.topics = registrations, subs, topics
        self._context: AssignmentContext | None = None

    def context(self, partitions: Mapping[str, list[int]]) -> AssignmentContext:
        """The assignor's input for these members and ``partitions`` (the last one built, when its partitions
        are equal: the partition lists are shared too, so that comparison is by identity)."""
        ctx = self._context
        if ctx is None or ctx.partitions != partitions:
            ctx = self._context = AssignmentContext(self.subs, partitions)
        return ctx


#: (group, ``ids`` child version, exclude internal topics) → the view members of this process last built for it.
#: Weak: a view lives while a member holds it, so views of finished simulations go with their members. The key
#: only finds a candidate; equality of the registrations decides (two ZooKeepers, one group name, same version).
_VIEWS: weakref.WeakValueDictionary[tuple[str, int, bool], SharedView] = weakref.WeakValueDictionary()
#: Equal subscriptions are one mapping, process-wide (the assignor groups consumers by its identity), and the
#: mappings by ``id`` (the table holds them, so an id stays its own). Emptied when full.
_SUBS: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}
_SUBS_BY_ID: dict[int, Mapping[str, int]] = {}
SUBS_CAPACITY = 1024
#: (id of a static registration, exclude internal) → (the registration, its interned subscription); the
#: registrations are shared by their bytes (zk/layout.py), so this is worked out once per node, not per member.
_MEMBER_SUBS: dict[tuple[int, bool], tuple[ConsumerRegistration, Mapping[str, int]]] = {}
MEMBER_SUBS_CAPACITY = 1 << 17


def shared_view(group: str, version: int, exclude_internal: bool = True) -> SharedView | None:
    """The view members of this process built for ``group`` at ``ids`` child version ``version``, if one lives."""
    return _VIEWS.get((group, version, exclude_internal))


def _interned(mapping: dict[str, int]) -> Mapping[str, int]:
    key = tuple(sorted(mapping.items()))
    shared = _SUBS.get(key)
    if shared is None:
        if len(_SUBS) >= SUBS_CAPACITY:  # wildcards over changing topic lists: keep it bounded
            _SUBS.clear()
            _SUBS_BY_ID.clear()
        shared = _SUBS[key] = mapping
        _SUBS_BY_ID[id(mapping)] = mapping
    return shared


def _static_subscription(r: ConsumerRegistration, exclude: bool) -> Mapping[str, int]:
    key = (id(r), exclude)
    hit = _MEMBER_SUBS.get(key)
    if hit is not None and hit[0] is r:
        return hit[1]
    if len(_MEMBER_SUBS) >= MEMBER_SUBS_CAPACITY:
        _MEMBER_SUBS.clear()
    mapping = _interned(r.topic_streams((), exclude))
    _MEMBER_SUBS[key] = (r, mapping)
    return mapping


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
        self._any_foreign = False  # a member in pykafka's format was ever read (assignment/foreign.py)
        self._wildcards = False  # the last full reading had wildcard members: their topics change without them
        self._view: SharedView | None = None  # the shared view last adopted (holds it in _VIEWS)
        #: the last read's (registrations, subscriptions, topics): the next read changes only what changed
        self._last: tuple[dict, dict[str, Mapping[str, int]], list[str]] | None = None

    def start_from(self, view: SharedView, version: int) -> None:
        """Start knowing the group as ``view`` says it was at ``ids`` child version ``version``, as a member that had
        read it then would: the first attempt reads only the registrations that appeared since (the version check
        still decides; a wrong guess costs a full read, never a wrong view). The simulator's herd starts each wave
        of its cold start so (sim/herd.py): read by every new member, a 10,000-member group is 10⁸ reads before the
        first measured action."""
        self.registrations, self.registrations_version = view.registrations, version
        self._last, self._view = (view.registrations, view.subs, view.topics), view

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
            members = len(ids)
            # Not held while the reads below wait: a herd's members all wait here at once, and N listings of N
            # names each is the N² a large group cannot afford (issue 41: 10,000 members in one process).
            del ids, present
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
            complete = len(registrations) == members
        read_all = registrations  # with any foreign members: the cache keeps them
        if self._any_foreign:
            registrations, outsiders = foreign.split(registrations)
        else:
            outsiders = {}
        exclude = self.c.config.exclude_internal_topics
        key = (self.c.group, cversion, exclude)
        view = None if outsiders or cversion < 0 else _VIEWS.get(key)
        if view is not None and view.registrations == registrations:
            registrations, subs, topics = view.registrations, view.subs, view.topics
            self._wildcards = False  # views with wildcard members are not shared
        else:
            view = None
            if fast and not outsiders and base is not None:
                subs, topics = self._subscriptions_changed(registrations, base, gone, added)
            else:
                subs = self._subscriptions(registrations)
                topics = self._topics(subs)
            if not outsiders and not self._wildcards and cversion >= 0:
                view = _VIEWS[key] = SharedView(registrations, subs, topics)
        self._view = view
        if fast:
            if complete:
                self.registrations = read_all if outsiders else registrations
                self.registrations_version = cversion
            else:
                self.forget_registrations()
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
        if view is not None:
            return view.context(partitions), cversion
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
        exclude = self.c.config.exclude_internal_topics
        subs = last[1].copy()
        for cid in gone:
            del subs[cid]
        for cid in added:
            r = registrations[cid]
            if r.is_wildcard:
                subs = self._subscriptions(registrations)
                return subs, self._topics(subs)
            subs[cid] = _static_subscription(r, exclude)
        return subs, last[2] if not gone and not added else self._topics(subs)

    @staticmethod
    def _topics(subs: Mapping[str, Mapping[str, int]]) -> list[str]:
        """The topics anyone subscribes to, looked up once per distinct subscription mapping."""
        found = [_SUBS_BY_ID.get(i) for i in set(map(id, subs.values()))]  # .get: another member may empty it
        if None not in found:
            return sorted({t for m in found for t in m})  # type: ignore[union-attr]
        return sorted({t for s in subs.values() for t in s})

    def _subscriptions(self, registrations: dict[str, ConsumerRegistration]) -> dict[str, Mapping[str, int]]:
        """Consumer id → topic → streams, wildcards resolved against the topics read now.

        A static registration's subscription is worked out once per registration object (shared by its bytes),
        and equal subscriptions are one shared mapping: the assignor groups consumers by that identity first, so
        a group of N alike members costs N dictionary lookups here and there, not N sorts and parses on every
        attempt of every member.
        """
        exclude = self.c.config.exclude_internal_topics
        subs: dict[str, Mapping[str, int]] = {}
        wildcards = []
        for cid, r in registrations.items():
            if r.is_wildcard:
                wildcards.append(cid)
            else:
                subs[cid] = _static_subscription(r, exclude)
        self._wildcards = bool(wildcards)
        if wildcards:
            all_topics = self.c.registry.topics()
            for cid in wildcards:
                subs[cid] = _interned(registrations[cid].topic_streams(all_topics, exclude))
        return subs

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
