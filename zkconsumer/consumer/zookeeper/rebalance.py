"""The Kafka 0.8 rebalance, as each consumer runs it on its own (SPEC §4).

Watches (children of ``/consumers/<g>/ids``, data of each subscribed ``/brokers/topics/<t>``, children of
``/brokers/topics`` for wildcards, the session state) only *flag* an event; one thread per consumer waits
for a flag (waking every second to check for shutdown) and runs :meth:`Rebalancer.synced_rebalance`:
up to ``rebalance.max.retries`` attempts (attempt.py), ``rebalance.backoff.ms`` apart,
then :class:`ConsumerRebalanceFailed`, which the streams re-raise to the caller.

With the ``kafka-0.8`` profile an attempt is Kafka's: stop all fetchers, commit, release every owner node,
read everything, assign, read offsets, create owner nodes one by one (a node holding our own thread id is
ours; any other conflict fails the attempt and deletes what it created). The ``default`` profile keeps the
same decisions but (see docs/profiles.md): releases only partitions that move, re-reads the membership
before claiming, claims in one multi-op, and waits for a conflicting owner's deletion with a watch.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable
from enum import Enum
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from zkconsumer import runtime
from zkconsumer.assignment.assignors import AssignmentContext, TopicPartition
from zkconsumer.config import ConsumerConfig, Profile
from zkconsumer.consumer.zookeeper.attempt import AttemptHost, Incremental, Outcome, StopTheWorld
from zkconsumer.consumer.zookeeper.claims import OwnerNodes
from zkconsumer.consumer.zookeeper.group_view import GroupView
from zkconsumer.consumer.zookeeper.phases import PhaseClock
from zkconsumer.consumer.zookeeper.triggers import TriggerCause, Triggers
from zkconsumer.errors import ConsumerRebalanceFailed
from zkconsumer.types import tp_str
from zkconsumer.zk import layout
from zkconsumer.zk.handler import runs_inline
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, MalformedNodeError, TopicFilter
from zkconsumer.zk.registry import broker_ids_of

log = logging.getLogger(__name__)


class BrokerCount:
    """How many brokers are registered, kept by a watch on ``/brokers/ids``.

    The default profile keeps one from the start: brokers come and go rarely, so members need no listing in every
    attempt, and the first broker to register after none starts a rebalance. Kafka sets one only when an attempt
    found no broker, and then every change of the brokers starts a rebalance (``every_change``)."""

    def __init__(self, zk: KazooClient, stopping: runtime.Event, trigger: Callable[[TriggerCause], None],
                 every_change: bool = False) -> None:
        self._count: int | None = None
        self._stopping, self._trigger, self._every_change = stopping, trigger, every_change
        self._watch = ChildrenWatch(zk, layout.BROKER_IDS_PATH, self._changed)

    def _changed(self, children: list[str]) -> bool | None:
        if self._stopping.is_set():
            self._count = None
            return False
        had, self._count = self._count, len(broker_ids_of(children))
        if had is not None and self._every_change or had == 0 and self._count:
            self._trigger(TriggerCause.BROKERS_CHANGED)
        return None

    def known(self) -> int | None:
        """What the watch last saw; None when kazoo stopped it (it does, without telling us, when
        ``/brokers/ids`` is deleted or missing): then an attempt lists the brokers itself."""
        return None if self._watch._stopped else self._count


def outlasting(outcome: Outcome, elapsed: float, config: ConsumerConfig, profile: Profile) -> bool:
    """One more attempt past ``rebalance.max.retries`` (Kafka's FAQ rule enforced, ``Profile.claims_outlast_session``):
    the claims waited on nodes another session holds and a session timeout plus a backoff has not passed since the
    rebalance began (``elapsed`` seconds ago). A holder that died has expired by then; one still alive and holding
    is a member whose node is not ours to take."""
    window = (config.session_timeout_ms + config.rebalance_backoff_ms) / 1000.0
    return outcome is Outcome.HELD and profile.claims_outlast_session and elapsed < window


def gave_up(consumer_id: str, attempts: int, config: ConsumerConfig, last_error: object) -> ConsumerRebalanceFailed:
    """The error of a rebalance given up: Kafka 0.8's words, or, where the claims outlasted a held node past the
    retries (the default profile), how many attempts it made and why."""
    if attempts > config.rebalance_max_retries:
        said = (f"{consumer_id} can't rebalance after {attempts} attempts: rebalance.max.retries is "
                f"{config.rebalance_max_retries}, and its claims waited past them for a session timeout "
                f"({config.session_timeout_ms} ms) on an owner node another live session holds")
    else:
        said = f"{consumer_id} can't rebalance after {config.rebalance_max_retries} retries"
    return ConsumerRebalanceFailed(said + (f" (last error: {last_error})" if last_error else ""))


class RebalancerState(Enum):
    """Where a member's rebalancer is in its life (:attr:`Rebalancer.state`; kazoo's partitioner is the model).

    State transitions::

        NEW ──start()──▶ REBALANCING ──attempt done──▶ STABLE ──a watch fires──▶ REBALANCING
                              │                                                        ▲
                              └── rebalance.max.retries failed ──▶ FAILED ── next trigger ┘
        any ──session expired──▶ EXPIRED ──new session, registered again──▶ REBALANCING
        any ──stop()──▶ STOPPED (final)

    STABLE means this member finished its last rebalance and no trigger is pending yet; the group may still be
    settling (other members run their own rebalances)."""

    NEW = "new"
    REBALANCING = "rebalancing"
    STABLE = "stable"
    FAILED = "failed"
    EXPIRED = "expired"
    STOPPED = "stopped"


class RebalanceHost(AttemptHost, Protocol):
    """What the rebalancer needs from its consumer: what an attempt needs (:class:`~.attempt.AttemptHost`, which
    takes in what its owner nodes need) and the session's side. Narrow on purpose, so the rebalancer does not
    depend on the connector's internals."""

    topic_filter: TopicFilter | None
    registration: ConsumerRegistration | None
    failure: BaseException | None
    connected: runtime.Event

    def reset_after_expiry(self) -> None:
        """The session expired: stop and forget everything without committing."""

    def forget_after_expiry(self) -> None:
        """The session expired: never commit what was owned, but let the next rebalance stop its fetchers."""


class Rebalancer:
    """Watches, the watcher-executor thread and the rebalance itself, for one consumer."""

    def __init__(self, host: RebalanceHost) -> None:
        self.c = host
        self.paths = GroupPaths(host.group)
        self._cond = runtime.Condition()  # (an RLock inside: the triggers and the claims take it again)
        self.triggers = Triggers(self._cond)
        self._stopping = runtime.Event()
        self._lock = runtime.Lock()  # Kafka's rebalanceLock
        self.state = RebalancerState.NEW
        #: the last transitions, oldest first: (monotonic time, state)
        self.transitions: deque[tuple[float, RebalancerState]] = deque([(runtime.monotonic(), self.state)], maxlen=32)
        self._thread: runtime.Task | None = None  # the watcher executor, once started
        self._topic_watches: set[str] = set()
        self._watched_topics_children: list[str] | None = None
        self.rebalance_count = 0
        #: counters for the lab and benchmarks: attempts, failed_attempts, claim_conflicts, failed_rebalances
        self.stats: Counter[str] = Counter()
        self._brokers: BrokerCount | None = None  # the registered brokers' count (default profile)
        self._no_brokers_watch: BrokerCount | None = None  # Kafka's watch, set when an attempt found no broker
        self._ids_seen = False  # the ids ChildrenWatch delivered its first listing (kafka-0.8 profile)
        self._ids_unarmed = False  # the one-shot ids watch was dropped with the connection (pipelined profile)
        self._ids_cversion_seen = -1  # the child version of ids our last rebalance read
        self.last_owners: dict[TopicPartition, str] = {}  # the whole group's last assignment we claimed under
        self.clock = PhaseClock()  # the running rebalance's phases
        self.owners = OwnerNodes(host, self.paths, self)  # claims, releases and the watches on our owner nodes
        self.view = GroupView(host, self.paths, self.trigger, self._stopping)  # what an attempt reads of the group
        #: (rebalance number, monotonic start, trigger time or None, phases in ms) of recent rebalances
        self.phase_log: deque[tuple[int, float, float | None, dict[str, int]]] = deque(maxlen=64)

    def _set_state(self, state: RebalancerState) -> None:
        """The one place the lifecycle state changes; STOPPED is final. Waiters on ``cond`` are woken."""
        with self._cond:
            if self.state is state or self.state is RebalancerState.STOPPED:
                return
            log.debug("%s: rebalancer %s -> %s", self.c.consumer_id, self.state.value, state.value)
            self.state = state
            self.transitions.append((runtime.monotonic(), state))
            self._cond.notify_all()

    def wait_for(self, state: RebalancerState, timeout: float) -> bool:
        """Wait until the rebalancer is in ``state`` (True) or ``timeout`` seconds pass (False)."""
        deadline = runtime.monotonic() + timeout
        with self._cond:
            while self.state is not state:
                remaining = deadline - runtime.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    # what the owner nodes (claims.py) need of the rebalancer
    @property
    def stopping(self) -> runtime.Event:
        return self._stopping

    @property
    def cond(self) -> runtime.Condition:
        return self._cond

    # --------------------------------------------------------------------------------------------- watches
    def start(self) -> None:
        """Set the watches and run the first rebalance on the caller's thread, as Kafka's connector does."""
        zk = self.c.zk
        if self.c.profile.pipelined_reads:
            # A plain one-shot watch: its event starts the rebalance at once, and every read of ``ids`` sets it
            # again. kazoo's ChildrenWatch (like ZkClient) first re-reads the children before telling us: one
            # round trip more on every member's critical path, and the rebalance reads them anyway.
            try:
                zk.get_children(self.paths.ids, watch=self._on_ids_event)
            except NoNodeError:  # deleted since we registered under it (the rebalance writes it back)
                zk.ensure_path(self.paths.ids)
                zk.get_children(self.paths.ids, watch=self._on_ids_event)
        else:
            zk.ensure_path(self.paths.ids)
            ChildrenWatch(zk, self.paths.ids, self._on_ids_change)
        if self.c.profile.watch_own_nodes:
            DataWatch(zk, self.paths.registration(self.c.consumer_id), self._on_own_registration)
        if self.c.profile.watch_own_nodes or self.c.profile.pipelined_reads:
            zk.add_listener(self._on_connection_state)
        if self.c.profile.keep_unmoved and self.c.needs_registered_brokers:
            self._brokers = BrokerCount(zk, self._stopping, self.trigger)
        if self.c.topic_filter is not None:
            ChildrenWatch(zk, layout.BROKER_TOPICS_PATH, self._on_topics_children)
        else:
            for topic in self.c.registration.subscription:
                self._watch_topic(topic)
        self.c.trace.emit("rebalance_triggered", cause=TriggerCause.STARTUP)
        try:
            self.synced_rebalance(TriggerCause.STARTUP)
        finally:
            # Started only now: running, it would take the triggers a watch raises during this first rebalance
            # and queue a rebalance of its own behind our lock, so this one would not see them. The default
            # profile then waited out an owner wait and a backoff (4 s) on a membership it knew was stale
            # (found by comparing with Kafka 0.8.2.2's own consumer in a rolling restart). Kafka 0.8 starts its
            # watcher thread first, and the kafka-0.8 profile still answers those triggers after the first
            # rebalance, as Kafka does: they stay flagged until the thread starts.
            self._thread = runtime.spawn(self._run, name=f"{self.c.consumer_id}_watcher_executor")

    def _watch_topic(self, topic: str) -> None:
        if topic in self._topic_watches:
            return
        self._topic_watches.add(topic)
        first = [True]

        def on_data(data, stat, event=None) -> bool | None:
            if self._stopping.is_set():
                return False
            # Keep the latest partition list for the default profile's reads (a broken node: none, logged).
            self.view.topic_changed(topic, data)
            if first[0]:
                first[0] = False
                return None
            self.trigger(TriggerCause.TOPIC_CHANGED)
            return None

        DataWatch(self.c.zk, layout.topic_path(topic), on_data)

    def _on_ids_change(self, children: list[str]) -> bool | None:
        if self._stopping.is_set():
            return False
        if self._ids_seen:
            self.trigger(TriggerCause.IDS_CHANGED)
        self._ids_seen = True
        return None

    @runs_inline
    def _on_ids_event(self, event) -> None:
        """The one-shot ``ids`` watch fired (pipelined profile): flag a rebalance; its read sets the watch again.
        Runs on kazoo's connection thread (no hand-off on the way to the executor thread): it must not block."""
        if self._stopping.is_set():
            return
        if event.type == "NONE":  # kazoo dropped the watch with the connection: set it again once back
            self._ids_unarmed = True
            if self.c.zk.connected:  # back already (the listener ran before this callback)
                self.c.zk.handler.spawn(self._rearm_ids_watch)
            return
        self.trigger(TriggerCause.IDS_CHANGED)

    def _rearm_ids_watch(self) -> None:
        """Set the ids watch again after a connection loss; rebalance only if the membership changed meanwhile
        (a reconnect within the session is no reason to rebalance)."""
        if not self._ids_unarmed or self._stopping.is_set():
            return
        self._ids_unarmed = False
        try:
            _, cversion = self.c.registry.consumer_ids_with_version(self.c.group, watch=self._on_ids_event)
        except Exception:  # noqa: BLE001 - lost again: the next reconnect (or the expiry handling) retries
            self._ids_unarmed = True
            return
        if cversion != self._ids_cversion_seen:
            self.trigger(TriggerCause.IDS_CHANGED)

    def _on_own_registration(self, data: bytes | None, stat, event=None) -> bool | None:
        """Someone overwrote our registration with something else: rebalance, which writes it back."""
        if self._stopping.is_set():
            return False
        mine = self.c.registration
        if data is None or mine is None:
            return None  # deleted: the ids watch fires too
        try:
            theirs = ConsumerRegistration.decode(self.paths.registration(self.c.consumer_id), data)
        except MalformedNodeError as e:
            log.warning("%s: our registration was overwritten: %s", self.c.consumer_id, e)
        else:
            if (dict(theirs.subscription), theirs.pattern) == (dict(mine.subscription), mine.pattern):
                return None
            log.warning("%s: our registration %s was overwritten with %r", self.c.consumer_id,
                        self.paths.registration(self.c.consumer_id), data[:300])
        self.view.forget_registrations()  # the node changed without a child event: the cache cannot tell
        self.trigger(TriggerCause.REGISTRATION_CHANGED)
        return None

    def _on_topics_children(self, children: list[str]) -> bool | None:
        if self._stopping.is_set():
            return False
        tf = self.c.topic_filter
        matching = tf.select(children, self.c.config.exclude_internal_topics) if tf else []
        for topic in matching:
            self._watch_topic(topic)
        if self._watched_topics_children is not None and matching != self._watched_topics_children:
            self.trigger(TriggerCause.TOPICS_CHANGED)
        self._watched_topics_children = matching
        return None

    def trigger(self, cause: TriggerCause) -> None:
        """Flag a rebalance (watch callbacks run on kazoo's thread and must not block). A session expiry is traced
        when the executor thread handles it."""
        self.triggers.add(cause)
        if cause is not TriggerCause.SESSION_EXPIRED:
            self.c.trace.emit("rebalance_triggered", cause=cause)

    def stop(self) -> None:
        self._stopping.set()
        self._set_state(RebalancerState.STOPPED)
        with self._cond:
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not runtime.current_task():
            thread.join(30)  # (not started yet while the first rebalance runs: nothing to join)

    # ------------------------------------------------------------------------------- the executor thread
    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._cond:
                if not self.triggers.pending():
                    # Wake up for the next owner watches due, and at least every second to check the shutdown flag.
                    due = self.owners.next_arm_in(runtime.monotonic())
                    if due > 0:
                        self._cond.wait(min(due, 1.0))
                causes = self.triggers.take()
                ready = []
                if not causes:  # a rebalance first: it may release nodes still waiting for their watch
                    ready = self.owners.arms_due(runtime.monotonic())
            for tokens in ready:
                self.owners.arm(tokens)
            if not causes or self._stopping.is_set():
                continue
            try:
                if TriggerCause.SESSION_EXPIRED in causes:
                    self._handle_new_session()
                else:
                    self.synced_rebalance(causes[0])
            except Exception as e:  # noqa: BLE001 - logged always; raised through the streams by the default
                self._set_state(RebalancerState.FAILED)
                surface = self.c.profile.surface_rebalance_failure  # Kafka 0.8's watcher thread only logs it
                log.error("rebalance of %s failed: %s" if surface else "error during syncedRebalance of %s: %s; no "
                          "partitions until the group changes again", self.c.consumer_id, e)
                if surface and self.c.failure is None:
                    self.c.failure = e if isinstance(e, ConsumerRebalanceFailed) else ConsumerRebalanceFailed(
                        f"{self.c.consumer_id} rebalance error: {e}")

    def _handle_new_session(self) -> None:
        """Kafka's handleNewSession: wait for the new session, reset, re-register, rebalance."""
        self.c.trace.emit("rebalance_triggered", cause=TriggerCause.SESSION_EXPIRED)
        self._set_state(RebalancerState.EXPIRED)
        while not self._stopping.is_set() and not self.c.connected.wait(0.2):
            pass
        if self._stopping.is_set():
            return
        if self.c.profile.stop_fetchers_before_registering:
            self.c.reset_after_expiry()
        else:
            self.c.forget_after_expiry()  # Kafka's resetState: its rebalance stops the fetchers (StopTheWorld)
        self.owners.forget_session()  # ephemeral: the nodes and their watches died with the session
        self.c.register()
        self.view.forget_registrations()
        self.synced_rebalance(TriggerCause.SESSION_EXPIRED)

    # ----------------------------------------------------------------------------------- synced rebalance
    def synced_rebalance(self, cause: TriggerCause) -> bool:
        cfg = self.c.config
        with self._lock:
            if self._stopping.is_set():
                return False
            self.rebalance_count += 1
            number = self.rebalance_count
            self._set_state(RebalancerState.REBALANCING)
            started = runtime.monotonic()
            self.clock = clock = PhaseClock()
            triggered_at = self.triggers.take_first_at()
            if triggered_at is not None:
                clock.add("trigger", started - triggered_at)
            last_error = ""
            stale_retries = 0
            attempt = 0
            more = cfg.rebalance_max_retries > 0
            while more:
                attempt += 1
                self.stats["attempts"] += 1
                try:
                    sequence = Incremental if self.c.profile.keep_unmoved else StopTheWorld
                    outcome = sequence(self, number, attempt).run()
                except Exception as e:  # noqa: BLE001 - Kafka catches every Throwable here and retries
                    # ZooKeeper changed while we read it (a node vanished, ...), or the assignor refused the
                    # group (RoundRobin's preconditions): Kafka logs it, backs off and retries.
                    log.info("exception during rebalance of %s: %s", self.c.consumer_id, e)
                    last_error = str(e)
                    outcome = Outcome.FAILED
                if outcome is Outcome.DONE:
                    owned = sorted(tp_str(tp) for tp in self.c.owned_partitions())
                    self.phase_log.append((number, started, triggered_at, clock.as_ms()))
                    self.c.trace.emit("rebalance_done", rebalance=number, attempts=attempt,
                                      duration_ms=int((runtime.monotonic() - started) * 1000), owned=owned,
                                      phases_ms=clock.as_ms())
                    if isinstance(self.c.failure, ConsumerRebalanceFailed):
                        self.c.failure = None
                    self._set_state(RebalancerState.STABLE)
                    return True
                if outcome is Outcome.STALE and stale_retries < 3 * cfg.rebalance_max_retries:
                    stale_retries += 1
                    attempt -= 1  # a changed membership is not a failed attempt: recompute immediately
                    continue
                self.stats["failed_attempts"] += 1
                more = attempt < cfg.rebalance_max_retries or outlasting(
                    outcome, runtime.monotonic() - started, cfg, self.c.profile)
                # Kafka: stop all fetchers, clear the queues and commit (closeFetchersForQueues), then back off.
                # What is still owned stays owned: the next attempt releases it (releasePartitionOwnership).
                if not self.c.profile.keep_unmoved:
                    self.c.stop_fetching(None)
                if more or not self.c.profile.keep_unmoved:
                    with clock.phase("backoff"):
                        self._backoff(cfg.rebalance_backoff_ms / 1000.0)
                if self._stopping.is_set():
                    return False
                if self.triggers.expiry_pending():
                    self._set_state(RebalancerState.EXPIRED)
                    return False  # the executor thread re-registers and rebalances on the new session
            error = gave_up(self.c.consumer_id, attempt, cfg, last_error)
            self.stats["failed_rebalances"] += 1
            self.phase_log.append((number, started, triggered_at, clock.as_ms()))
            self.c.trace.emit("rebalance_failed", rebalance=number, attempts=attempt, error=str(error),
                              phases_ms=clock.as_ms())
            self.c.failure = error if self.c.profile.surface_rebalance_failure else self.c.failure  # streams raise it
            self._set_state(RebalancerState.FAILED)
            raise error

    @property
    def busy(self) -> bool:
        """A rebalance is running or flagged."""
        if self._lock.locked():
            return True
        return self.triggers.pending()

    def _backoff(self, seconds: float) -> None:
        """Kafka sleeps the whole backoff; the default profile wakes up early when the membership changes."""
        if not self.c.profile.recheck_membership:
            self._stopping.wait(seconds)
            return
        deadline = runtime.monotonic() + seconds
        with self._cond:
            while not self.triggers.pending() and not self._stopping.is_set():
                remaining = deadline - runtime.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            self.triggers.answer_changes()  # by the next attempt (a session expiry stays: it needs a reset first)

    # ------------------------------------------------------------------------------- what an attempt needs
    def read_group(self) -> tuple[AssignmentContext, int]:
        """The group as the assignor needs it (group_view.py); the pipelined read sets the ids watch again."""
        ctx, cversion = self.view.read(self._on_ids_event)
        self._ids_cversion_seen = cversion
        return ctx, cversion

    def known_brokers(self) -> int | None:
        """How many brokers the default profile's watch counts (None: no such watch, or kazoo stopped it)."""
        return None if self._brokers is None else self._brokers.known()

    def no_brokers(self) -> Outcome:
        """Kafka: "no brokers found when trying to rebalance" counts as done, and a watch on ``/brokers/ids``
        starts the next rebalance when the brokers change. Nothing is released or claimed meanwhile."""
        log.warning("%s: no brokers found when trying to rebalance; waiting for one to register", self.c.consumer_id)
        if self._brokers is not None and self._brokers.known() is None:  # kazoo stopped it: watch as Kafka does
            self._brokers = None
        if self._brokers is None and self._no_brokers_watch is None:
            self._no_brokers_watch = BrokerCount(self.c.zk, self._stopping, self.trigger, every_change=True)
        return Outcome.DONE

    def _on_connection_state(self, state: str) -> None:
        """kazoo listener (must not block): watches dropped by a connection loss are set again. A lost ``ids``
        watch is set again by a rebalance, which also answers any membership change missed meanwhile."""
        if state != "CONNECTED" or self._stopping.is_set():
            return
        if self.owners.has_unarmed:
            self.c.zk.handler.spawn(self.owners.rearm)
        if self._ids_unarmed:
            self.c.zk.handler.spawn(self._rearm_ids_watch)
