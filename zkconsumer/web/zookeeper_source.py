"""A 0.8 group in ZooKeeper as a live source: its registered ids with their registrations (subscription, pattern,
version, timestamp), owners, committed offsets and lag, kept current by ZooKeeper watches.

Why it calls kazoo itself (docs/architecture.md, "Who talks to ZooKeeper"): the reads go through :class:`Registry`,
but the source listens to its session's state (``add_listener``) to say on the page when ZooKeeper went away and to
read everything again when it is back. Watches on ``ids``, ``owners`` and each ``owners/<topic>`` only wake the reader
thread, which reads the whole group again: a membership change or a partition changing hands shows within a
round trip, and the committed offsets (no watch: they change all the time) are read every ``poll`` seconds.

ZooKeeper away (not reachable at start, a session suspended or lost) never stops the source: the status says so
and since when, the last data stays, kazoo reconnects and the reader reads again. The log-end offsets come from
the brokers (``bootstrap``, else those registered in this ZooKeeper) as ``zkconsumer groups --describe`` reads them,
in a thread of their own, since a broker that does not answer would otherwise hold up the watches.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.tools.groups import broker_api_version, read_log_ends
from zkconsumer.types import tp_str
from zkconsumer.web.live_group import LiveGroup, Read, WatchedGroup
from zkconsumer.web.snapshot import Member, SourceKind
from zkconsumer.zk import layout
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths
from zkconsumer.zk.registry import Registry, ZkConnectError, connect
from zkconsumer.zk.security import NO_SECURITY, ZkSecurity

log = logging.getLogger(__name__)


class ZooKeeperGroupSource(WatchedGroup):
    """The :class:`~zkconsumer.web.snapshot.LiveSource` of ``group`` in the ZooKeeper at ``zk_connect``; its
    threads start at once (ZooKeeper need not be up yet)."""

    def __init__(self, zk_connect: str, group: str, *, bootstrap: str | None = None,
                 security: ZkSecurity = NO_SECURITY, poll: float = 1.0, lag_every: float = 2.0,
                 session_timeout_ms: int = 6000, now: Callable[[], float] = time.time) -> None:
        GroupPaths(group)  # a name the layout refuses fails here, not in the reader thread
        self.zk_connect, self.group, self.bootstrap = zk_connect, group, bootstrap
        self._security, self._poll, self._lag_every = security, poll, lag_every
        self._session_timeout_ms = session_timeout_ms
        self.live = LiveGroup(f"group {group} (ZooKeeper {zk_connect})", SourceKind.ZOOKEEPER, group,
                              f"ZooKeeper {zk_connect}", now)
        self._reg: Registry | None = None
        self._connected = threading.Event()
        self._dirty = threading.Event()
        self._closed = threading.Event()
        self._threads = [threading.Thread(target=self._read_loop, name=f"watch {group}", daemon=True),
                         threading.Thread(target=self._lag_loop, name=f"watch {group} lag", daemon=True)]
        for t in self._threads:
            t.start()

    def close(self) -> None:
        self._closed.set()
        self._dirty.set()
        for t in self._threads:
            t.join(10)
        reg, self._reg = self._reg, None
        if reg is not None:
            reg.zk.stop()
            reg.zk.close()

    # ------------------------------------------------------------------------------------------------ session
    def _on_state(self, state: str) -> None:
        """kazoo's session listener (its own thread: only flags here)."""
        if state == KazooState.CONNECTED:
            self._connected.set()
            self.live.up()
            self._dirty.set()  # watches are gone after a lost session, and anything may have changed meanwhile
        else:
            self._connected.clear()
            self.live.down("ZooKeeper session lost" if state == KazooState.LOST
                           else "ZooKeeper connection suspended")

    def _connect(self) -> Registry | None:
        try:
            client = connect(self.zk_connect, session_timeout_ms=self._session_timeout_ms,
                             connection_timeout_ms=2000, create_chroot=False, security=self._security)
        except ZkConnectError as e:
            self.live.down("ZooKeeper unreachable")
            log.debug("watch: %s", e)
            return None
        reg = Registry(client)
        reg.zk.add_listener(self._on_state)
        self._connected.set()
        self.live.up()
        return reg

    # ------------------------------------------------------------------------------------------------ reading
    def _watch(self, event: object) -> None:
        self._dirty.set()

    def _read_loop(self) -> None:
        while not self._closed.is_set():
            if self._reg is None:
                self._reg = self._connect()
                if self._reg is None:
                    self._closed.wait(1.0)
                    continue
            self._dirty.wait(self._poll)
            self._dirty.clear()
            if self._closed.is_set() or not self._connected.is_set():
                continue
            try:
                self._read(self._reg)
            except KazooException as e:  # the connection went meanwhile: the listener says so, CONNECTED re-reads
                log.debug("watch: read failed: %s", e)
            except ValueError as e:  # a node that does not decode (LayoutError): read again next time
                log.warning("watch: %s", e)

    def _read(self, reg: Registry) -> None:
        """The whole group, watches set again on ``ids``, ``owners`` and each ``owners/<topic>``."""
        g = GroupPaths(self.group)
        ids = reg.consumer_ids(self.group, watch=self._watch)
        registration_nodes = reg.read_many(g.registration(cid) for cid in ids)
        registrations = {cid: _decoded(ConsumerRegistration.decode, g.registration(cid), registration_nodes)
                         for cid in ids}
        all_topics = reg.topics()
        subscriptions = {cid: r.topic_streams(all_topics) for cid, r in registrations.items() if r is not None}
        owner_topics = reg.children(g.owners, watch=self._watch)
        owned = {(t, int(p)) for t in owner_topics
                 for p in reg.children(g.owners_topic(t), watch=self._watch) if p.isdecimal()}
        topics = sorted(set(owner_topics) | set(reg.children(g.offsets))
                        | {t for subs in subscriptions.values() for t in subs})
        parts = reg.partitions_for_topics(topics)
        tps = sorted({(t, p) for t in topics for p in parts[t]} | owned)
        owner_nodes = reg.read_many(g.owner(t, p) for t, p in tps)
        offset_nodes = reg.read_many(g.offset(t, p) for t, p in tps)
        reads = [Read(t, p, _decoded(layout.decode_owner, g.owner(t, p), owner_nodes),
                      _decoded(layout.decode_offset, g.offset(t, p), offset_nodes)) for t, p in tps]
        members = [member(self.group, cid, registrations[cid], subscriptions.get(cid, {}),
                          [tp_str((r.topic, r.partition)) for r in reads if r.owner and _consumer_of(r.owner) == cid])
                   for cid in ids]
        self.live.update(members, reads, settled=settled(ids, subscriptions, reads))
        self.live.up()

    def _lag_loop(self) -> None:
        wait = self._lag_every
        while not self._closed.wait(wait):
            reg = self._reg
            if reg is None or not self._connected.is_set():
                continue
            try:
                bootstrap = self.bootstrap or reg.bootstrap_servers()
                version = broker_api_version(reg)
            except (KazooException, ValueError) as e:
                log.debug("watch: no brokers read: %s", e)
                continue
            tps = self.live.partitions()
            ends = read_log_ends(bootstrap, [TopicPartition(t, p) for t, p in tps], timeout_ms=2000,
                                 api_version=version).offsets
            # a broker that did not answer: ask less often (each failure logs a warning)
            wait = self._lag_every if ends or not tps or not bootstrap else max(self._lag_every, 10.0)
            self.live.set_ends({(tp.topic, tp.partition): end for tp, end in ends.items()})


def member(group: str, consumer_id: str, registration: ConsumerRegistration | None, subscription: dict[str, int],
           owned: list[str]) -> Member:
    """A registered id as the page shows it: with its registration's version, pattern and timestamp (none when
    the node went, or does not decode, between the ids read and its own), and the host part of an id Kafka
    generated."""
    if registration is None:
        return Member(consumer_id, "registered", subscription, owned, host=consumer_host(group, consumer_id))
    ts = registration.timestamp
    return Member(consumer_id, "registered", subscription, owned, host=consumer_host(group, consumer_id),
                  version=registration.version, pattern=registration.pattern,
                  registered_at=int(ts) if ts.isdecimal() else None)


#: what ZookeeperConsumerConnector appends to ``<group>_`` without a ``consumer.id``: host, millis, 8 hex digits of
#: a UUID (layout.consumer_uuid)
_GENERATED = re.compile(r"(?P<host>.+)-\d{10,}-[0-9a-f]{1,8}")


def consumer_host(group: str, consumer_id: str) -> str | None:
    """The host in a consumer id Kafka generated (``g_web-3-1712345678901-1a2b3c4d`` → ``web-3``); None for an id
    that ``consumer.id`` named (``g_a``), or one of another group's shape."""
    prefix = f"{group}_"
    if not consumer_id.startswith(prefix):
        return None
    generated = _GENERATED.fullmatch(consumer_id[len(prefix):])
    return generated["host"] if generated else None


def settled(ids: list[str], subscriptions: dict[str, dict[str, int]], reads: list[Read]) -> bool:
    """Whether a 0.8 group is whole: every partition of the topics its ids subscribe to owned, and every owner a
    thread of a registered id (a consumer whose session ended may leave its owner nodes a moment longer)."""
    registered = set(ids)
    subscribed = {t for cid in ids for t in subscriptions.get(cid, {})}
    return all(_consumer_of(r.owner) in registered if r.owner else r.topic not in subscribed for r in reads)


def _decoded(decode: Callable[[str, bytes], object], path: str, nodes: dict[str, bytes | None]):
    data = nodes.get(path)
    if data is None:
        return None
    try:
        return decode(path, data)
    except ValueError:
        return None


def _consumer_of(thread_id: str) -> str:
    """The consumer id of a thread id (``<consumer id>-<n>``)."""
    return thread_id.rpartition("-")[0]
