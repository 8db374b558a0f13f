"""This consumer's owner nodes ``/consumers/<g>/owners/<topic>/<partition>``: claiming them (Kafka's one at a time,
or the default profile's pipelined claim that waits for a holder's release), releasing them, and the exists-watches
that guard the nodes it holds (default profile).

Split from the rebalancer (rebalance.py), which decides *what* to claim and release (plan.py) and asks
this class to do it. It needs of the rebalancer only what :class:`ClaimOwner` names: the condition its watches
notify, the shutdown flag, whether another rebalance is pending, its trigger, its phase clock and counters.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NodeExistsError, NoNodeError

from zkconsumer import runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConsumerConfig, Profile
from zkconsumer.consumer.listener import RebalanceListener
from zkconsumer.consumer.zookeeper.claim_round import Batch, ClaimRound, Conflict
from zkconsumer.consumer.zookeeper.phases import PhaseClock
from zkconsumer.consumer.zookeeper.triggers import TriggerCause, Triggers
from zkconsumer.errors import NotAuthorized
from zkconsumer.trace import TraceWriter
from zkconsumer.types import partitions_by_topic, tp_str
from zkconsumer.zk import layout
from zkconsumer.zk.handler import runs_inline
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry

log = logging.getLogger("zkconsumer.consumer.zookeeper.rebalance")  # split from rebalance.py: one subject, one logger

#: Owner watches are set this long after the claim, off the rebalance's busiest window.
OWNER_WATCH_DELAY_S = 0.3


def nothing() -> None:
    """The completion of a release that has nothing left to do."""


class ReadAhead:
    """A read sent in the same flush as the claim that completes it (the start offsets of the partitions gained):
    ZooKeeper answers a session's requests in order, so it sees the claim done, one round trip sooner than a read
    sent after the claim's answer. Kept only when that claim created every node at its first try; otherwise
    dropped and read again afterwards."""

    def __init__(self, send: Callable[[list[TopicPartition]], Callable[[], object]]) -> None:
        self._send = send
        self._pending: Callable[[], object] | None = None

    def send(self, tps: Iterable[TopicPartition]) -> None:
        self._pending = self._send(list(tps))

    def drop(self) -> None:
        self._pending = None

    def take(self) -> Callable[[], object] | None:
        """The answer's wait, if a read was sent and kept (once)."""
        pending, self._pending = self._pending, None
        return pending


class ClaimHost(Protocol):
    """What :class:`OwnerNodes` needs of its consumer (a part of rebalance.RebalanceHost)."""

    consumer_id: str
    config: ConsumerConfig
    profile: Profile
    trace: TraceWriter
    zk: KazooClient
    registry: Registry
    listener: RebalanceListener

    def owned_partitions(self) -> dict[TopicPartition, str]: ...

    def drop_ownership(self, tps: set[TopicPartition]) -> None: ...


class ClaimOwner(Protocol):
    """What :class:`OwnerNodes` needs of the rebalancer that owns it."""

    clock: PhaseClock
    stats: Counter[str]
    rebalance_count: int

    @property
    def stopping(self) -> runtime.Event: ...

    @property
    def cond(self) -> runtime.Condition: ...

    triggers: Triggers

    def trigger(self, cause: TriggerCause) -> None: ...


class OwnerNodes:
    """Claims, releases and owner-node watches of one consumer."""

    def __init__(self, host: ClaimHost, paths: GroupPaths, owner: ClaimOwner) -> None:
        self.c = host
        self.paths = paths
        self.r = owner
        self._known_parents: set[str] = set()
        self._owner_watches: dict[str, object] = {}  # our owner node → token of the watch guarding it
        self._unarmed: dict[str, object] = {}  # owner watches kazoo dropped with a lost connection
        self._strays: dict[str, str] = {}  # owner nodes a failed claim may have left behind: path → our thread id
        self._claim_token: object | None = None  # the running claim; watches of an abandoned one do nothing
        self._arm_pending: set[str] = set()  # owner nodes whose exists-watch is not set yet (OWNER_WATCH_DELAY_S)
        self._arm_due: deque[tuple[float, dict[str, object]]] = deque()  # (monotonic deadline, tokens) to arm

    # ------------------------------------------------------------------------------- state for the rebalancer
    @property
    def has_strays(self) -> bool:
        return bool(self._strays)

    @property
    def has_unarmed(self) -> bool:
        return bool(self._unarmed)

    def forget_session(self) -> None:
        """A new session: every node and watch of the old one is gone."""
        self._strays.clear()
        self._owner_watches.clear()
        self._unarmed.clear()

    def next_arm_in(self, now: float) -> float:
        """Seconds until the next owner watches are due (1 s when none; call with ``cond`` held)."""
        return self._arm_due[0][0] - now if self._arm_due else 1.0

    def arms_due(self, now: float) -> list[dict[str, object]]:
        """The owner watches due by ``now``, taken from the queue (call with ``cond`` held)."""
        ready = []
        while self._arm_due and self._arm_due[0][0] <= now:
            ready.append(self._arm_due.popleft()[1])
        return ready

    # ------------------------------------------------------------------------------------------------ claims
    def claim_one_by_one(self, decision: Mapping[TopicPartition, str], number: int, attempt: int) -> bool:
        """Kafka's reflectPartitionOwnershipDecision: try every node, undo all if any one failed."""
        zk = self.c.zk
        created: list[TopicPartition] = []
        failed = 0
        for tp, tid in sorted(decision.items()):
            path = self.paths.owner(tp.topic, tp.partition)
            try:
                zk.create(path, layout.encode_owner(tid), ephemeral=True, makepath=True)
                created.append(tp)
            except NoAuthError:
                raise NotAuthorized(path, "create") from None  # an error of the attempt, as Kafka's ZkException
            except NodeExistsError:
                holder = self._holder(path)
                if holder == tid:  # our own node from a create retried after a connection loss
                    created.append(tp)
                    continue
                self._conflict(number, attempt, tp, tid, holder)
                failed += 1
        if failed:
            for tp in created:
                with contextlib.suppress(NoNodeError):
                    zk.delete(self.paths.owner(tp.topic, tp.partition))
            return False
        return True

    def _holder(self, path: str) -> str | None:
        try:
            data, _ = self.c.zk.get(path)
            return data.decode("utf-8", "replace")
        except NoNodeError:
            return None

    def _conflict(self, number: int, attempt: int, tp: TopicPartition, tid: str, holder: str | None) -> None:
        self.r.stats["claim_conflicts"] += 1
        self.c.trace.emit("claim_conflict", rebalance=number, attempt=attempt,
                          path=self.paths.owner(tp.topic, tp.partition), topic=tp.topic,
                          partition=tp.partition, thread=tid, holder=holder)

    def _ensure_parent(self, topic: str) -> None:
        parent = self.paths.owners_topic(topic)
        if parent not in self._known_parents:
            self.c.zk.ensure_path(parent)
            self._known_parents.add(parent)

    def claim_pipelined(self, decision: Mapping[TopicPartition, str], number: int, attempt: int,
                        held: Mapping[TopicPartition, str] | None = None, members: Mapping[str, str] | None = None,
                        after_send: Callable[[], None] = nothing, read_ahead: ReadAhead | None = None) -> bool:
        """Claim every owner node at once, in as few ZooKeeper writes as possible: the I/O of a
        :class:`~zkconsumer.consumer.zookeeper.claim_round.ClaimRound`, which decides what to send next.

        ``held``: partitions whose previous owner (the thread named) is still a member (``members``: thread to
        consumer), so still holding the node until its own rebalance releases it. Each node is created the moment
        its holder deletes it (the holder is normally releasing it right now, so waiting for the event is both
        faster and certain, where Kafka fails the attempt and sleeps 2 s); nodes freed together are created
        together, in one multi-op. A multi-op that fails (a node taken after all, or a holder that releases node
        by node) is retried node by node. Gives up (False), deleting what it created, when the group changes (the
        assignment is stale), the consumer stops, or ``rebalance.backoff.ms`` passes; the next attempt
        recomputes. ``read_ahead`` is sent right behind the writes that would create the last nodes
        (:class:`ReadAhead`).
        """
        claim = ClaimRound(decision, held, members)
        self._claim_token = token = object()
        deadline = runtime.monotonic() + max(self.c.config.rebalance_backoff_ms / 1000.0, 0.5)

        def freed(tp: TopicPartition) -> Callable[[object], None]:
            def watch(event) -> None:  # deleted, overwritten, or the connection dropped: look again
                if self._claim_token is token:
                    self._step(claim.on_freed, tp)
            return watch

        finished = False
        try:
            while not claim.done:
                batch = self._await_batch(claim, deadline)
                if batch is None:
                    return False  # a changed group, a shutdown, or too long: the next attempt recomputes
                self._send_batch(claim, batch, freed, number, attempt, after_send, read_ahead)
                if not claim.done and read_ahead is not None:
                    read_ahead.drop()  # sent with a batch that did not complete the claim
            for tp in decision:
                self._strays.pop(self.paths.owner(tp.topic, tp.partition), None)
            finished = True
            return True
        finally:
            self._claim_token = None
            if not finished:  # given up, or an error (not authorised, the connection lost): undo what we created
                if read_ahead is not None:
                    read_ahead.drop()
                self._undo_claims(claim.created())

    def _step(self, change: Callable[[TopicPartition], object], tp: TopicPartition) -> object:
        """One change of the running claim round, under the rebalancer's condition (watch events arrive on kazoo's
        thread), waking the claim that waits for it."""
        with self.r.cond:
            result = change(tp)
            self.r.cond.notify_all()
            return result

    def _await_batch(self, claim: ClaimRound, deadline: float) -> Batch | None:
        """The next batch, once there is one to send; None when the claim should give up instead."""
        cond = self.r.cond
        with cond:
            while not claim.has_work:
                remaining = deadline - runtime.monotonic()
                if self.r.triggers.pending() or self.r.stopping.is_set() or remaining <= 0:
                    return None
                with self.r.clock.phase("owner_wait"):
                    cond.wait(min(remaining, 0.5))
            batch = claim.next_batch()
        return None if runtime.monotonic() > deadline else batch

    def _send_batch(self, claim: ClaimRound, batch: Batch, freed: Callable[[TopicPartition], Callable],
                    number: int, attempt: int, after_send: Callable[[], None], read_ahead: ReadAhead | None) -> None:
        """Send one batch (creates in a multi-op, reads with watches, the read-ahead), then feed the answers back."""
        zk = self.c.zk

        def path(tp: TopicPartition) -> str:
            return self.paths.owner(tp.topic, tp.partition)

        def create(tp: TopicPartition):
            return zk.create_async(path(tp), layout.encode_owner(claim.decision[tp]), ephemeral=True)

        for topic in {tp.topic for tp in batch.create}:
            self._ensure_parent(topic)
        multi = None
        if len(batch.create) > 1:
            txn = zk.transaction()
            for tp in batch.create:
                txn.create(path(tp), layout.encode_owner(claim.decision[tp]), ephemeral=True)
            multi = txn.commit_async()
        singles = [] if multi is not None else [(tp, create(tp)) for tp in batch.create]
        if read_ahead is not None and batch.completes:
            read_ahead.send(claim.decision)
        reads = [(tp, zk.get_async(path(tp), watch=freed(tp))) for tp in batch.read]
        after_send()  # our own release, sent before these, completes meanwhile
        if multi is not None:
            results = multi.get()
            if not any(isinstance(r, Exception) for r in results):
                with self.r.cond:
                    claim.on_created(batch.create)
            else:
                for tp, r in zip(batch.create, results, strict=True):
                    if isinstance(r, NoAuthError):  # an owners/<t> whose ACL excludes us: waiting cannot help
                        raise NotAuthorized(path(tp), "create")
                # Nothing was created: one node was taken after all. Node by node, to learn which.
                singles = [(tp, create(tp)) for tp in batch.create]
                if read_ahead is not None:
                    read_ahead.drop()  # it was answered before these creates
        for tp, result in singles:
            try:
                result.get()
            except NodeExistsError:
                self._step(claim.on_taken, tp)
            except NoNodeError:  # owners/<topic> was deleted under us: create it again, then retry
                self._known_parents.discard(self.paths.owners_topic(tp.topic))
                self._step(claim.on_freed, tp)
            except NoAuthError:
                raise NotAuthorized(path(tp), "create") from None
            else:
                self._step(lambda t: claim.on_created([t]), tp)
        for tp, result in reads:
            try:
                holder = result.get()[0].decode("utf-8", "replace")
            except NoNodeError:  # free already (no watch was set): create it now
                holder = None
            conflict = self._step(lambda t, h=holder: claim.on_read(t, h), tp)
            if isinstance(conflict, Conflict):
                self._conflict(number, attempt, conflict.tp, conflict.thread, conflict.holder)

    def _undo_claims(self, created: Mapping[TopicPartition, str]) -> None:
        """Delete owner nodes an abandoned claim created; any left (the connection failed) are deleted by the
        next attempt unless it assigns them to us again (:meth:`release_strays`)."""
        paths = {self.paths.owner(tp.topic, tp.partition): tid for tp, tid in created.items()}
        self._strays.update(paths)
        with contextlib.suppress(Exception):
            self.c.registry.delete_many(paths)
            for path in paths:
                self._strays.pop(path, None)

    def release_strays(self, gained: Mapping[TopicPartition, str]) -> None:
        """Owner nodes left by an abandoned claim: those this attempt does not claim go, if still ours."""
        keep = {self.paths.owner(tp.topic, tp.partition) for tp in gained}
        stray = {p: tid for p, tid in self._strays.items() if p not in keep}
        holders = self.c.registry.read_many(stray)
        self.c.registry.delete_many(p for p, tid in stray.items() if holders[p] == layout.encode_owner(tid))
        self._strays = {p: tid for p, tid in self._strays.items() if p in keep}

    def release(self, owned: Mapping[TopicPartition, str], defer: bool = False) -> Callable[[], None]:
        """Delete our owner nodes of ``owned`` and forget them. ``defer`` (pipelined profile): send the deletion
        and return the function that completes the release, so the claim's first requests travel with it."""
        if not owned:
            return nothing
        self.c.listener.before_releasing_partitions(partitions_by_topic(owned))
        paths = {tp: self.paths.owner(tp.topic, tp.partition) for tp in owned}
        armed = {p for p in paths.values() if self.watch_armed(p)}
        for path in paths.values():
            self._owner_watches.pop(path, None)  # our own deletion is no news
        if self.c.profile.release_only_ours:
            # Delete only nodes that hold our thread id. A node whose exists-watch has not fired is still the one
            # we created; the others are read first. (Neither is atomic: ZooKeeper cannot delete on content.)
            unsure = {tp: p for tp, p in paths.items() if p not in armed}
            holders = self.c.registry.read_many(unsure.values())
            deleted = self._delete_owned([*sorted(armed), *(p for tp, p in unsure.items()
                                                            if holders[p] == layout.encode_owner(owned[tp]))])
        else:
            for tp in owned:  # Kafka deletes each owner node without looking at who holds it
                with contextlib.suppress(NoNodeError):
                    self.c.zk.delete(paths[tp])
            deleted = nothing
        done = []

        def finish() -> None:
            if done:
                return
            done.append(True)
            deleted()
            self.c.drop_ownership(set(owned))
            self.c.trace.emit("released", rebalance=self.r.rebalance_count,
                              partitions=sorted(tp_str(tp) for tp in owned))

        if defer:
            return finish
        finish()
        return nothing

    def _delete_owned(self, paths: list[str]) -> Callable[[], None]:
        """Send the deletion of owner nodes of ours as one multi-op (one write for ZooKeeper instead of one per
        node, and every waiting claimer's watch fires at once); returns the wait for it. If one was already
        gone, node by node (gone is fine)."""
        if len(paths) > 1:
            txn = self.c.zk.transaction()
            for p in paths:
                txn.delete(p)
            pending = txn.commit_async()

            def wait() -> None:
                if any(isinstance(r, Exception) for r in pending.get()):
                    self.c.registry.delete_many(paths)
            return wait
        self.c.registry.delete_many(paths)
        return nothing

    def release_all(self) -> None:
        """Shutdown: delete every owner node we hold."""
        self.release(self.c.owned_partitions())

    def watch_owned(self, claimed: Mapping[TopicPartition, str]) -> None:
        """Default profile: an exists-watch on each owner node we created. Someone deleting or overwriting one
        triggers a rebalance, which stops fetching it and claims it again; Kafka 0.8 notices nothing until the
        next rebalance, and meanwhile another consumer could claim the partition we are still fetching."""
        tokens = {}
        for tp in claimed:
            path = self.paths.owner(tp.topic, tp.partition)
            self._owner_watches[path] = tokens[path] = object()
            self._arm_pending.add(path)
        if not tokens:
            return
        # Set a moment later, off the rebalance's busiest window (one request per node, while other members are
        # still claiming); whatever happened to a node meanwhile is seen when its watch is set (_arm_owner_watch).
        # The watcher-executor thread sets them when it is idle (no thread per claim, as a Timer would start).
        with self.r.cond:
            self._arm_due.append((runtime.monotonic() + OWNER_WATCH_DELAY_S, tokens))
            self.r.cond.notify_all()

    def arm(self, tokens: Mapping[str, object]) -> None:
        for path, token in tokens.items():
            if self._owner_watches.get(path) is token and not self.r.stopping.is_set():
                self._arm_owner_watch(path, token)
                self._arm_pending.discard(path)  # requests sent after this one find the watch set

    def watch_armed(self, path: str) -> bool:
        """Our exists-watch on this owner node of ours is set and has not fired: the node is still ours, as we
        created it, with no read needed (someone else deleting or overwriting it fires the watch)."""
        return (self.c.profile.watch_own_nodes and path in self._owner_watches and path not in self._unarmed
                and path not in self._arm_pending)

    def rearm(self) -> None:
        for path, token in list(self._unarmed.items()):
            if self._unarmed.pop(path, None) is token and self._owner_watches.get(path) is token:
                self._arm_owner_watch(path, token)

    def _arm_owner_watch(self, path: str, token: object) -> None:
        def lost(what: str) -> None:
            if self._owner_watches.get(path) is not token or self.r.stopping.is_set():
                return  # we released it ourselves, or a later claim has its own watch
            del self._owner_watches[path]
            log.warning("%s: our owner node %s was %s by someone else: rebalancing to claim it again",
                        self.c.consumer_id, path, what)
            self.r.trigger(TriggerCause.OWNER_CHANGED)

        # Both callbacks run on kazoo's connection thread (runs_inline): most of these watches fire on our own
        # deletes at the next release, the rebalance's busiest moment, and need nothing more than a look at a dict.
        @runs_inline
        def on_event(event) -> None:
            if event.type == "NONE":  # kazoo drops every watch when the connection is lost: re-arm once back
                if self._owner_watches.get(path) is token and not self.r.stopping.is_set():
                    self._unarmed[path] = token
                    if self.c.zk.connected:
                        self.rearm()
                return
            lost("deleted" if event.type == "DELETED" else "overwritten")

        @runs_inline
        def armed(result) -> None:
            with contextlib.suppress(Exception):  # a lost session: the expiry handling takes over
                stat = result.get()
                if stat is None:
                    lost("deleted")
                elif stat.version != 0 or stat.ephemeralOwner != self.c.zk.client_id[0]:
                    lost("overwritten")  # before the watch was set: written, or deleted and created by another

        self.c.zk.exists_async(path, watch=on_event).rawlink(armed)
