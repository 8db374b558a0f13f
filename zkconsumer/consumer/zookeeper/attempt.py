"""One rebalance attempt, one straight sequence per profile (docs/profiles.md).

:class:`StopTheWorld` is Kafka 0.8.2's ``ZKRebalancerListener.rebalance()`` step by step (the ``kafka-0.8``
profile): read the brokers and our registration, stop every fetcher and release every owner node, read the group,
assign, read the start offsets, create the owner nodes one at a time. :class:`Incremental` is the ``default``
profile's: read the group (pipelined, only what changed), assign, release only what moves, check that what stays
is still ours, claim the rest in one round that waits for its holders' releases, read the offsets behind the claim.

Both decide with the pure :func:`~zkconsumer.consumer.zookeeper.plan.plan` and carry the decision out through
the rebalancer's owner nodes (claims.py) and group view (group_view.py); the retries, backoff and give-up around
an attempt are the rebalancer's (rebalance.py). The :class:`~zkconsumer.config.Profile` switches an attempt reads
are each one behaviour: ``recheck_membership``, ``pipelined_claims``, ``offsets_after_claim``, ``watch_own_nodes``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Protocol

from kazoo.exceptions import NoNodeError

from zkconsumer import runtime
from zkconsumer.assignment.assignors import Assignment, AssignmentContext, TopicPartition, assign
from zkconsumer.consumer.zookeeper import plan as rebalance_plan
from zkconsumer.consumer.zookeeper.claims import ClaimHost, OwnerNodes, ReadAhead, nothing
from zkconsumer.consumer.zookeeper.offsets import ZkOffsetStore
from zkconsumer.consumer.zookeeper.phases import PhaseClock
from zkconsumer.consumer.zookeeper.triggers import Triggers
from zkconsumer.types import owners_by_topic, tp_str
from zkconsumer.zk.layout import GroupPaths

log = logging.getLogger("zkconsumer.consumer.zookeeper.rebalance")  # split from rebalance.py: one subject, one logger


class Outcome(Enum):
    DONE = "done"
    FAILED = "failed"
    STALE = "stale"  # the membership changed under us: recompute at once (default profile)
    HELD = "held"  # a claim waited in vain for an owner node another session holds: failed, but worth outlasting


class AttemptHost(ClaimHost, Protocol):
    """What an attempt needs of its consumer (and, through :class:`ClaimHost`, what its owner nodes need)."""

    group: str
    offsets: ZkOffsetStore
    closed: bool

    @property
    def needs_registered_brokers(self) -> bool:
        """Records come from brokers registered in ZooKeeper: a rebalance without any waits for one."""

    def register(self) -> None:
        """Write the registration node (again after a session expiry)."""

    def stop_fetching(self, tps: set[TopicPartition] | None = None, commit: bool = True) -> None:
        """Stop delivering ``tps`` (all when None), committing what was consumed."""

    def drop_lost(self) -> None:
        """Forget the partitions owned under an expired session (their nodes died with it)."""

    def start_fetching(self, gained: Mapping[TopicPartition, str], offsets: Mapping[TopicPartition, int]) -> None:
        """Own ``gained`` from ``offsets`` and fetch the whole share."""


class AttemptOwner(Protocol):
    """What an attempt needs of the rebalancer that runs it."""

    c: AttemptHost
    paths: GroupPaths
    clock: PhaseClock
    owners: OwnerNodes
    triggers: Triggers
    #: the whole group's last assignment this member claimed under (who owned what, as far as it knows)
    last_owners: dict[TopicPartition, str]

    @property
    def stopping(self) -> runtime.Event: ...

    def read_group(self) -> tuple[AssignmentContext, int]: ...

    def known_brokers(self) -> int | None: ...

    def no_brokers(self) -> Outcome: ...


class Attempt:
    """What both sequences share: the assignment and its trace, the claims' bookkeeping, the start of fetching."""

    def __init__(self, owner: AttemptOwner, number: int, attempt: int) -> None:
        self.r, self.c, self.clock = owner, owner.c, owner.clock
        self.number, self.attempt = number, attempt

    def run(self) -> Outcome:
        raise NotImplementedError

    def _assign(self, ctx: AssignmentContext, cversion: int) -> tuple[Assignment, dict[TopicPartition, str]]:
        """The whole group's assignment and this member's share of it, traced."""
        c = self.c
        c.trace.emit("attempt_started", rebalance=self.number, attempt=self.attempt, ids_cversion=cversion)
        with self.clock.phase("assign"):
            whole = assign(c.config.strategy, ctx)
            whole.warn_idle(c.consumer_id)
            decision = whole.for_consumer(c.consumer_id)
        c.trace.emit("assigned", rebalance=self.number, attempt=self.attempt, strategy=c.config.strategy,
                     assignment={tp_str(tp): tid for tp, tid in sorted(decision.items())})
        return whole, decision

    def _claimed(self, whole: Assignment, gained: dict[TopicPartition, str]) -> None:
        self.c.trace.emit("claimed", rebalance=self.number, attempt=self.attempt,
                          partitions={tp_str(tp): tid for tp, tid in sorted(gained.items())})
        self.r.last_owners = whole.owners

    def _start(self, decision: dict[TopicPartition, str], gained: dict[TopicPartition, str],
               offsets: dict[TopicPartition, int]) -> Outcome:
        c = self.c
        with self.clock.phase("start"):
            c.listener.before_starting_fetchers(c.consumer_id, owners_by_topic(decision))
            c.start_fetching(gained, offsets)
        return Outcome.DONE


class StopTheWorld(Attempt):
    """Kafka 0.8.2's attempt (the ``kafka-0.8`` profile)."""

    def run(self) -> Outcome:
        c, clock, owners = self.c, self.clock, self.r.owners
        # Kafka's order: getCluster (brokers), our own registration (TopicCount), the brokers again; then stop the
        # world (fetchers, queues, commit, delete every owner node) and only then read the group.
        with clock.phase("reads"):
            c.registry.brokers()
            own = self.r.paths.registration(c.consumer_id)
            if c.registry.read(own) is None:
                raise NoNodeError(f"{own}: our registration is gone")  # Kafka's attempt fails the same way
            brokers = c.registry.brokers()
        if not brokers and c.needs_registered_brokers:
            return self.r.no_brokers()
        with clock.phase("release"):
            c.stop_fetching(None)  # also those owned under an expired session, running until now as Kafka's do
            c.drop_lost()
            owners.release(c.owned_partitions())
        with clock.phase("reads"):
            ctx, cversion = self.r.read_group()
        whole, decision = self._assign(ctx, cversion)
        step = rebalance_plan.plan(c.profile, c.consumer_id, {}, decision)  # nothing owned: claim it all again
        # Kafka reads the start offsets before claiming: if the previous owner commits between this read and our
        # claim, we restart from a stale offset (duplicates). The default profile reads them after the claim.
        with clock.phase("offsets"):
            offsets = c.offsets.fetch(step.claim, pipelined=False)
        if c.closed or self.r.stopping.is_set():
            return Outcome.FAILED
        with clock.phase("claim"):
            if not owners.claim_one_by_one(step.claim, self.number, self.attempt):
                return Outcome.HELD
        self._claimed(whole, dict(step.claim))
        return self._start(decision, dict(step.claim), offsets)


class Incremental(Attempt):
    """The ``default`` profile's attempt: only what moves is released and claimed."""

    def run(self) -> Outcome:
        c = self.c
        if c.profile.recheck_membership:
            self.r.triggers.answer_changes()  # what was flagged so far, this attempt's reads answer
        read = self._read()
        if read is None:
            return self.r.no_brokers()
        ctx, cversion = read
        owned = c.owned_partitions()
        whole, decision = self._assign(ctx, cversion)
        ctx = whole.context  # equal to ours; when the assignment was another member's, its lookups are built already
        step = rebalance_plan.plan(c.profile, c.consumer_id, owned, decision)  # before the owner nodes are read
        finish_release = self._release(step.release)
        try:
            step = self._recheck_kept(step, owned, decision, ctx)
            if self.r.owners.has_strays:
                self.r.owners.release_strays(step.claim)
            return self._claim_and_start(step, whole, decision, ctx, cversion, finish_release)
        finally:
            finish_release()  # an attempt that returned early still completes its release

    def _read(self) -> tuple[AssignmentContext, int] | None:
        """The group as the assignor needs it; None when no broker is registered (and records come from them)."""
        c = self.c
        with self.clock.phase("reads"):
            # The brokers' watch says whether any is registered; without it, the listing travels with the group's
            # reads (one round trip for both). The group is read even when no broker is registered, since that
            # read sets the ids watch again.
            known = self.r.known_brokers()
            listing = c.registry.any_broker_async() if c.needs_registered_brokers and known is None else None
            ctx, cversion = self.r.read_group()
            if listing is not None and not listing() or known == 0 and c.needs_registered_brokers:
                return None
            if c.consumer_id not in ctx.subscriptions:
                # Our node vanished (an expired session's ghost was cleaned up, or someone deleted or overwrote it):
                # Kafka's attempt fails on it until the session expires; we put it back (docs/profiles.md).
                log.warning("%s: our registration %s is missing or unreadable: writing it again",
                            c.consumer_id, self.r.paths.registration(c.consumer_id))
                c.register()
                ctx, cversion = self.r.read_group()
        return ctx, cversion

    def _release(self, moving: dict[TopicPartition, str]) -> Callable[[], None]:
        """Give up what moves; with pipelined claims the deletion travels with the claim's first requests (the
        returned function completes it)."""
        if not moving:
            return nothing
        with self.clock.phase("release"):
            self.c.stop_fetching(set(moving))
            return self.r.owners.release(moving, defer=self.c.profile.pipelined_claims)

    def _recheck_kept(self, step: rebalance_plan.RebalancePlan, owned: dict[TopicPartition, str],
                      decision: dict[TopicPartition, str], ctx: AssignmentContext) -> rebalance_plan.RebalancePlan:
        """A kept partition is only ours while its owner node says so (an operator or another tool may have deleted
        it): the plan again, with those that are not claimed again. A node whose exists-watch is still set needs no
        read."""
        c, owners = self.c, self.r.owners
        paths = {tp: self.r.paths.owner(tp.topic, tp.partition) for tp in step.keep}
        paths = {tp: path for tp, path in paths.items() if not owners.watch_armed(path)}
        with self.clock.phase("reads"):
            read = c.registry.read_many(paths.values())
        lost = rebalance_plan.lost_owner_nodes(step.keep, {tp: read[path] for tp, path in paths.items()})
        if lost:
            c.stop_fetching(set(lost))
            c.drop_ownership(set(lost))
        return rebalance_plan.plan(c.profile, c.consumer_id, owned, decision, lost, self.r.last_owners,
                                   ctx.thread_owner)

    def _claim_and_start(self, step: rebalance_plan.RebalancePlan, whole: Assignment,
                         decision: dict[TopicPartition, str], ctx: AssignmentContext, cversion: int,
                         finish_release: Callable[[], None]) -> Outcome:
        c, clock, profile, owners = self.c, self.clock, self.c.profile, self.r.owners
        gained = dict(step.claim)
        offsets: dict[TopicPartition, int] | None = None
        if not profile.offsets_after_claim:
            with clock.phase("offsets"):
                offsets = c.offsets.fetch(gained, pipelined=False)
        if c.closed or self.r.stopping.is_set():
            return Outcome.FAILED
        if profile.recheck_membership and self._membership_moved(cversion):
            return Outcome.STALE
        with clock.phase("claim"):
            # The start offsets, sent with the claim's last write, where they live in ZooKeeper (a broker's offsets
            # are not ordered behind our ZooKeeper session's writes).
            ahead = ReadAhead(c.offsets.fetch_async) if offsets is None and c.offsets.reads_with_claims else None
            if profile.pipelined_claims:
                # Held until their previous owner, still a member, releases them (from our last assignment).
                ok = owners.claim_pipelined(gained, self.number, self.attempt, dict(step.hold),
                                            ctx.thread_owner, after_send=finish_release, read_ahead=ahead)
            else:
                ok = owners.claim_one_by_one(gained, self.number, self.attempt)
        finish_release()  # (sent with the claim) before the trace says what was claimed
        if not ok:
            return Outcome.STALE if profile.recheck_membership and self.r.triggers.pending() else Outcome.HELD
        self._claimed(whole, gained)
        if profile.watch_own_nodes:
            owners.watch_owned(gained)
        if offsets is None:
            with clock.phase("offsets"):
                # we own them now: nobody else commits these any more
                sent = ahead.take() if ahead is not None else None
                offsets = sent() if sent is not None else c.offsets.fetch(gained)
        return self._start(decision, gained, offsets)

    def _membership_moved(self, cversion: int) -> bool:
        """The group changed since we read it: a watch told us, or (without the one-shot ids watch the pipelined
        reads set) ZooKeeper says so when asked."""
        if self.r.triggers.change_pending():
            return True
        if self.c.profile.pipelined_reads:
            return False
        with self.clock.phase("reads"):
            _, now = self.c.registry.consumer_ids_with_version(self.c.group)
        return now != cversion

