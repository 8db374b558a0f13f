"""A coordinator-mode member's presence in its ZooKeeper group while the group is mixed.

The hand-off rests on one rule: **a partition is consumed only by the holder of its 0.8 owner node**, whatever
the holder's mode. ZooKeeper-mode members already obey it (they claim ``owners/<t>/<p>`` before fetching);
a coordinator-mode member obeys it through :class:`ZkBridge`, the
:class:`~zkconsumer.consumer.coordinated.holds.Handover` of its connector: every partition the coordinator
gives it starts *held*; it is fetched only once the bridge created its owner node, from the larger of the two
committed offsets; on revocation the bridge writes the committed offsets to ZooKeeper too, then deletes the
owner node. Whatever the timing of the two rebalances, two modes never consume a partition at once.

For the two halves to *agree* (rather than only not overlap), the bridge keeps the member's 0.8 registration in
``ids`` (same consumer id, same JSON), so ZooKeeper-mode members count it, and the coordinator group's leader uses
:class:`BridgeAssignor`, which runs zkconsumer's own 0.8 Range/RoundRobin over the ZooKeeper registrations and gives
each coordinator member the share of its consumer id. When ``ids`` changes, members whose assignment was computed
from an older ``ids`` version ask the coordinator for a new generation.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from zkconsumer import runtime
from zkconsumer.assignment.assignors import AssignmentContext, TopicPartition, assign
from zkconsumer.consumer.zookeeper.offsets import ZkOffsetStore
from zkconsumer.migration.plan import MigrationPlan, plan_path
from zkconsumer.trace import TraceWriter
from zkconsumer.zk import layout
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths
from zkconsumer.zk.registry import Registry

log = logging.getLogger(__name__)


def zookeeper_context(registry: Registry, group: str, exclude_internal: bool = True
                      ) -> tuple[AssignmentContext, int]:
    """What a ZooKeeper-mode member reads before it assigns: every registration, resolved, and the partitions;
    with the ``ids`` children version it was read at."""
    paths = GroupPaths(group)
    ids, cversion = registry.consumer_ids_with_version(group)
    raw = registry.read_many(paths.registration(cid) for cid in ids)
    registrations = {cid: ConsumerRegistration.decode(paths.registration(cid), raw[paths.registration(cid)])
                     for cid in ids if raw[paths.registration(cid)] is not None}
    all_topics = registry.topics() if any(r.is_wildcard for r in registrations.values()) else []
    subs = {cid: r.topic_streams(all_topics, exclude_internal) for cid, r in registrations.items()}
    topics = sorted({t for s in subs.values() for t in s})
    return AssignmentContext(subs, registry.partitions_for_topics(topics)), cversion


class BridgeAssignor(AbstractPartitionAssignor):
    """The coordinator group's assignor while the group migrates: zkconsumer's 0.8 strategy over the ZooKeeper
    registrations (mixed phase) or over the members' own subscriptions (done phase), so every coordinator-mode
    member gets exactly what a 0.8 member with its consumer id would claim.

    Each member's subscription user data names its consumer id and stream counts; each assignment's user data
    carries the ``ids`` version it was computed from (-1 in the done phase)."""

    name = "zkconsumer-bridge"
    version = 0

    def __init__(self, registry: Registry, group: str, consumer_id: str, streams: Mapping[str, int] | int,
                 strategy: str, exclude_internal: bool = True) -> None:
        self.registry = registry
        self.group = group
        self.consumer_id = consumer_id
        self.streams = streams  # topic → count (static) or one count for every matching topic (wildcard)
        self.strategy = strategy if strategy in ("range", "roundrobin", "roundrobin-relaxed") else "range"
        self.exclude_internal = exclude_internal
        self.assigned_cversion = -1
        #: this generation's assignment left a share to a consumer id that is not a member of the coordinator's
        #: group: once the plan is done (every member moved) nobody would consume it, so a new generation is asked
        self.orphaned = False
        self.generation = -1

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolSubscription:
        user = json.dumps({"consumer": self.consumer_id, "streams": self.streams}, separators=(",", ":"))
        return ConsumerProtocolSubscription(self.version, sorted(topics), user.encode())

    def assign(self, cluster, members) -> dict[str, ConsumerProtocolAssignment]:
        consumers: dict[str, str] = {}  # consumer id → member id
        subs: dict[str, dict[str, int]] = {}
        for m in members:
            try:
                info = json.loads(bytes(m.metadata.user_data or b"{}"))
                cid, streams = info["consumer"], info["streams"]
            except (ValueError, KeyError, TypeError):
                log.warning("member %s sent no zkconsumer bridge data: it gets no partition", m.member_id)
                continue
            consumers[cid] = m.member_id
            topics = list(m.metadata.topics)
            subs[cid] = {t: (streams if isinstance(streams, int) else int(streams.get(t, 1))) for t in topics}
        plan = self._plan()
        if plan is None or plan.bridged:
            ctx, cversion = zookeeper_context(self.registry, self.group, self.exclude_internal)
        else:
            topics = sorted({t for s in subs.values() for t in s})
            ctx = AssignmentContext(subs, {t: sorted(cluster.partitions_for_topic(t) or ()) for t in topics})
            cversion = -1
        owners = assign(self.strategy, ctx).owners
        thread_owner = ctx.thread_owner
        shares: dict[str, dict[str, list[int]]] = {mid: {} for mid in consumers.values()}
        for tp, tid in owners.items():
            mid = consumers.get(thread_owner.get(tid, ""))
            if mid is not None:
                shares[mid].setdefault(tp.topic, []).append(tp.partition)
        # a share computed for a registered consumer id no member of this group stands for: a ZooKeeper-mode member's
        # (it claims it itself), or a dead member's registration its session has not taken away yet
        orphaned = any(thread_owner.get(tid, "") not in consumers for tid in owners.values())
        user = json.dumps({"ids_cversion": cversion, "orphaned": orphaned}).encode()
        out = {}
        for m in members:
            share = shares.get(m.member_id, {})
            out[m.member_id] = ConsumerProtocolAssignment(self.version, sorted((t, sorted(ps))
                                                                               for t, ps in share.items()), user)
        log.info("bridge assignment (ids version %d): %s", cversion,
                 {cid: shares.get(mid) for cid, mid in consumers.items()})
        return out

    def on_assignment(self, assignment, generation) -> None:
        try:
            user = json.loads(bytes(assignment.user_data or b"{}"))
            self.assigned_cversion = int(user.get("ids_cversion", -1))
            self.orphaned = bool(user.get("orphaned", False))
        except (ValueError, AttributeError):
            self.assigned_cversion, self.orphaned = -1, False
        self.generation = generation

    def _plan(self) -> MigrationPlan | None:
        path = plan_path(self.group)
        data = self.registry.read(path)
        return None if not data else MigrationPlan.decode(path, data)


class SessionGate(Protocol):
    """What the member's connector does when the bridge's ZooKeeper session wavers (its
    :class:`~zkconsumer.consumer.coordinated.holds.Holds` implement it)."""

    def handover_suspended(self) -> None: ...

    def handover_confirmed(self) -> None: ...

    def handover_lost(self) -> None: ...


class ZkBridge:
    """The :class:`~zkconsumer.consumer.coordinated.holds.Handover` of a coordinator-mode member during a mixed
    migration."""

    def __init__(self, registry: Registry, group: str, consumer_id: str, registration: ConsumerRegistration,
                 trace: TraceWriter | None = None, stale_wait_s: float = 10.0) -> None:
        self.registry = registry
        self.group = group
        self.consumer_id = consumer_id
        self.registration = registration
        self.paths = GroupPaths(group)
        self.offsets = ZkOffsetStore(registry, group, trace)
        self.stale_wait_s = stale_wait_s
        self._lock = runtime.Lock()
        self._owner_nodes: dict[TopicPartition, str] = {}
        self._stopped = False
        self._on_change: Callable[[int], None] | None = None
        self._gate: SessionGate | None = None
        self._session: int | None = None

    # ------------------------------------------------------------------------------------------ membership
    def start(self, on_ids_change: Callable[[int], None], gate: SessionGate | None = None) -> None:
        """Register under ``ids`` (a 0.8 member for the ZooKeeper half) and report ``ids`` changes with their
        children version; ``gate`` (the member's connector) hears about this session: see :meth:`_on_state`."""
        self._on_change = on_ids_change
        self._gate = gate
        self._session = self.registry.zk.client_id[0] if self.registry.zk.client_id else None
        self.registry.register_consumer(self.group, self.consumer_id, self.registration, self.stale_wait_s)
        self.registry.zk.add_listener(self._on_state)
        ChildrenWatch(self.registry.zk, self.paths.ids, self._ids_changed, send_event=True)

    def _on_state(self, state: str) -> None:
        """kazoo's connection listener (its event thread: flags and spawns only).

        The owner nodes are ephemeral: the bridge's claim on its partitions lasts as long as its session. Found by
        the migration fault matrix (``bridge-zk-expiry``): a bridged member cut off from ZooKeeper kept fetching
        after its session expired and ZooKeeper-mode members had claimed its partitions — two owners across
        modes. Now, SUSPENDED: deliver nothing until the session is confirmed (it may be expiring); CONNECTED on
        the same session: go on; LOST: every partition is held again (claimed anew, from the larger committed
        offset), and on the new session the registration is created again so both halves count this member."""
        if self._stopped:
            return
        if state == KazooState.SUSPENDED:
            if self._gate is not None:
                self._gate.handover_suspended()
        elif state == KazooState.LOST:
            with self._lock:
                self._owner_nodes.clear()
            log.warning("%s: ZooKeeper session expired: every partition held until claimed again", self.consumer_id)
            if self._gate is not None:
                self._gate.handover_lost()
        elif state == KazooState.CONNECTED:
            session = self.registry.zk.client_id[0] if self.registry.zk.client_id else None
            if session != self._session:
                self._session = session
                self.registry.zk.handler.spawn(self._register_again)
            if self._gate is not None:
                self._gate.handover_confirmed()

    def _register_again(self) -> None:
        try:
            self.registry.register_consumer(self.group, self.consumer_id, self.registration, self.stale_wait_s)
            log.info("%s: registered again on the new ZooKeeper session", self.consumer_id)
        except Exception:  # noqa: BLE001 - said loudly; the member is then a coordinator member ZooKeeper does not count
            log.error("%s: could not register again after the session expired", self.consumer_id, exc_info=True)

    def _ids_changed(self, children, event) -> bool | None:
        if self._stopped:
            return False
        if event is not None and self._on_change is not None:  # the first call is the initial listing
            try:
                stat = self.registry.zk.exists(self.paths.ids)
                self._on_change(stat.cversion if stat is not None else -1)
            except Exception:  # noqa: BLE001 - a watch callback must not die; the next change retries
                log.warning("%s: reacting to an ids change failed", self.consumer_id, exc_info=True)
        return None

    def stop(self) -> None:
        """Give up every owner node and the registration (a member leaving, or the migration done)."""
        self._stopped = True
        self.registry.zk.remove_listener(self._on_state)
        with self._lock:
            owned = dict(self._owner_nodes)
            self._owner_nodes.clear()
        self._delete_owner_nodes(owned)
        try:
            self.registry.zk.delete(self.paths.registration(self.consumer_id))
        except NoNodeError:
            pass

    # ------------------------------------------------------------------------------------------- handover
    def hold(self, tp: TopicPartition, thread_id: str) -> bool:
        """True while another member holds ``tp``'s owner node; False once this member created it."""
        path = self.paths.owner(tp.topic, tp.partition)
        data = layout.encode_owner(thread_id)
        try:
            self.registry.zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            try:
                current, stat = self.registry.zk.get(path)
            except NoNodeError:
                return True  # freed meanwhile: claim it on the next ask
            session = self.registry.zk.client_id[0] if self.registry.zk.client_id else None
            if stat.ephemeralOwner != session:
                return True
            if current != data:
                self.registry.zk.set(path, data)
        with self._lock:
            self._owner_nodes[tp] = thread_id
        return False

    def start_offset(self, tp: TopicPartition, kafka_committed: int | None) -> int | None:
        """Where to consume ``tp`` from once claimed: the larger of the ZooKeeper and the broker commits (the
        previous owner may have been a ZooKeeper-mode member, which commits to ZooKeeper)."""
        zk = self.offsets.fetch([tp])[tp]
        values = [v for v in (zk, kafka_committed) if v is not None and v >= 0]
        return max(values) if values else None

    def committed(self, values: Mapping[TopicPartition, int]) -> None:
        """Mirror broker commits into ZooKeeper, where ZooKeeper-mode members and 0.8 tools read them.

        The connector calls this *before* it commits to the broker, and skips the broker when it raises: the next
        owner may be a ZooKeeper-mode member, which reads ZooKeeper alone, so an offset only the broker has would be
        committed for some members and not for others (found by the migration fault matrix: a bridged member cut
        off from ZooKeeper committed to the broker only, and its ZooKeeper-mode successor delivered those committed
        records again)."""
        with self._lock:
            mine = {tp: v for tp, v in values.items() if tp in self._owner_nodes}
        if mine:
            self.offsets.commit(mine)

    def released(self, tps: Iterable[TopicPartition], committed: Mapping[TopicPartition, int]) -> None:
        """After the revocation commit: write it to ZooKeeper, then free the owner nodes (in that order, so the
        next owner reads the final offset)."""
        self.committed(committed)
        with self._lock:
            # sorted: the owner nodes go in one order whatever the set's (a simulated run's trace depended on the
            # hash seed: zkconsumer sim --mode migrate --seed 2)
            owned = {tp: self._owner_nodes.pop(tp) for tp in sorted(tps) if tp in self._owner_nodes}
        self._delete_owner_nodes(owned)

    def _delete_owner_nodes(self, owned: Mapping[TopicPartition, str]) -> None:
        session = self.registry.zk.client_id[0] if self.registry.zk.client_id else None
        for tp in owned:
            path = self.paths.owner(tp.topic, tp.partition)
            try:
                _, stat = self.registry.zk.get(path)
                if stat.ephemeralOwner == session:
                    self.registry.zk.delete(path, version=stat.version)
            except NoNodeError:
                pass
            except Exception:  # noqa: BLE001 - an ephemeral node goes with the session anyway
                log.warning("%s: could not delete %s", self.consumer_id, path, exc_info=True)
