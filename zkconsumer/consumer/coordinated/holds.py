"""Where a coordinator-mode member starts each partition it is assigned, and which ones it must not fetch yet.

Without a handover, a new partition is consumed from the broker's committed offset, whatever position kafka-python
kept for it. With one (a member of a group migrating from ZooKeeper: zkconsumer.migration.bridge.ZkBridge), every
new partition is *held* until the handover says it is free, then consumed from the handover's start offset. This
module is the member's one point of contact with the handover: the connector never calls it directly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from zkconsumer import runtime
from zkconsumer.consumer.coordinated.backlog import Backlog
from zkconsumer.consumer.progress import PartitionProgress
from zkconsumer.trace import TraceWriter
from zkconsumer.types import TopicPartition

log = logging.getLogger(__name__)


class Handover(Protocol):
    """The hook of a member whose partitions are also guarded elsewhere (the migration's ZooKeeper owner nodes):
    every assigned partition starts held until :meth:`hold` says it is free, is consumed from :meth:`start_offset`,
    and is given back through :meth:`released` after the revocation commit; every commit goes to :meth:`committed`
    first, and to the broker only if that did not raise."""

    def hold(self, tp: TopicPartition, thread_id: str) -> bool: ...

    def start_offset(self, tp: TopicPartition, kafka_committed: int | None) -> int | None: ...

    def committed(self, values: Mapping[TopicPartition, int]) -> None: ...

    def released(self, tps: Iterable[TopicPartition], committed: Mapping[TopicPartition, int]) -> None: ...


class HoldsHost(Protocol):
    """What :class:`Holds` reads and changes of its member
    (:class:`~zkconsumer.consumer.coordinated.connector.CoordinatorConsumerConnector`)."""

    consumer_id: str
    member_id: str | None
    state_lock: runtime.RLock
    owned: dict[TopicPartition, PartitionProgress]
    backlog: Backlog
    deliverable: runtime.Event
    trace: TraceWriter

    def next_generation(self) -> int: ...


class Holds:
    """The member's held partitions, those waiting for their seek to the committed offset, and the handover.

    State changes happen under the member's state lock; the calls to the client and to the handover outside it.
    """

    def __init__(self, host: HoldsHost, handover: Handover | None) -> None:
        self.host = host
        self.handover = handover
        self._held: set[TopicPartition] = set()
        #: Assigned partitions whose fetch position must be set to the committed offset before any delivery:
        #: kafka-python (like Kafka's consumer) keeps the position of a partition that comes back to the same
        #: member, and that position is past records we fetched but dropped at the revocation.
        self._needs_seek: set[TopicPartition] = set()
        #: The first offset polled (and not buffered) for a partition still waiting for that seek.
        self._dropped_from: dict[TopicPartition, int] = {}

    # -------------------------------------------------------------------------- ownership changes (IO thread)
    def assigned(self, tps: Iterable[TopicPartition]) -> None:
        """New partitions: held for the handover, or else sought to their committed offset before delivery."""
        with self.host.state_lock:  # one look at the handover, under the lock drop_handover() takes
            if self.handover is not None:
                self._held |= set(tps)  # claimed through the handover, and sought, before any delivery
            else:
                self._needs_seek |= set(tps)

    def give_back(self, tps: Iterable[TopicPartition], committed: Mapping[TopicPartition, int]) -> None:
        """After the revocation commit, before the member forgets ``tps``: the next owner must find the final
        offset."""
        handover = self.handover
        if handover is None:
            return
        try:
            handover.released(tps, committed)
        except Exception:  # noqa: BLE001 - owner nodes are ephemeral: they go with the session at worst
            log.warning("%s: handing partitions back failed", self.host.consumer_id, exc_info=True)

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Under the state lock, as the member stops owning ``tps``."""
        for tp in tps:
            self._held.discard(tp)
            self._needs_seek.discard(tp)
            self._dropped_from.pop(tp, None)

    # --------------------------------------------------------------------------------- the poller's side
    def is_held(self, tp: TopicPartition) -> bool:
        """Under the state lock: ``tp`` may be neither fetched nor delivered for now."""
        return tp in self._held

    def polled_before_seek(self, tp: TopicPartition, offsets: Sequence[int]) -> bool:
        """Under the state lock: True if ``tp`` still waits for its seek, so records polled for it now are dropped
        (fetched again from where the seek leads); the first of them is remembered."""
        if tp not in self._needs_seek:
            return False
        if offsets:
            self._dropped_from.setdefault(tp, min(offsets))
        return True

    def settle(self, consumer: KafkaConsumer, timeout_ms: int) -> None:
        """Poller: seek the partitions that wait for it, and ask the handover about the held ones. Each client call
        is bounded by ``timeout_ms``, and all of them together too: what is left is done on the next loop."""
        host = self.host
        with host.state_lock:
            to_seek = set(self._needs_seek)
        budget = runtime.monotonic() + timeout_ms / 1000.0
        for tp in sorted(to_seek):
            if runtime.monotonic() > budget:
                break
            self._seek_to_committed(consumer, tp, timeout_ms)
        handover = self.handover  # once: drop_handover() may clear it meanwhile
        if handover is None:
            return
        with host.state_lock:
            held = set(self._held)
        freed = {tp for tp in sorted(held) if not self._ask(tp, handover)}  # sorted: the handover's writes in one order
        freed = {tp for tp in sorted(freed)
                 if runtime.monotonic() <= budget and self._resume(consumer, tp, handover, timeout_ms)}
        with host.state_lock:
            self._held -= freed

    def _seek_to_committed(self, consumer: KafkaConsumer, tp: TopicPartition, timeout_ms: int) -> None:
        """Consume a newly assigned partition from its committed offset (at-least-once), whatever position the
        client kept for it."""
        host = self.host
        ktp = KTP(tp.topic, tp.partition)
        try:
            committed = consumer.committed(ktp, timeout_ms=timeout_ms)
            with host.state_lock:
                dropped = self._dropped_from.get(tp)
            # nothing committed (None, or -1 from the broker): auto.offset.reset placed the position; rewind only
            # to what was polled meanwhile. Never seek to -1: to kafka-python that means "latest".
            target = committed if committed is not None and committed >= 0 else dropped
            if target is not None and ktp in consumer.assignment():
                consumer.seek(ktp, target)
        except Exception as e:  # noqa: BLE001 - tried again on the next loop; nothing is delivered meanwhile
            log.warning("%s: could not read the committed offset of %s: %r", host.consumer_id, tp, e)
            return
        with host.state_lock:
            self._needs_seek.discard(tp)
            self._dropped_from.pop(tp, None)
            host.backlog.drop(tp)

    def _ask(self, tp: TopicPartition, handover: Handover) -> bool:
        """Whether ``tp`` stays held; a failing handover holds it (the safe side), said in the log."""
        host = self.host
        try:
            with host.state_lock:
                progress = host.owned.get(tp)
            return progress is None or bool(handover.hold(tp, progress.thread_id))
        except Exception:  # noqa: BLE001 - asked again on the next loop
            log.warning("%s: hold hook failed for %s", host.consumer_id, tp, exc_info=True)
            return True

    def _resume(self, consumer: KafkaConsumer, tp: TopicPartition, handover: Handover, timeout_ms: int) -> bool:
        """A partition the handover just freed is consumed from its start offset (the larger of both stores'),
        which becomes committable at once so the broker store catches up with ZooKeeper's. False: the broker's
        committed offset could not be read in time; the partition stays held and is tried again."""
        host = self.host
        ktp = KTP(tp.topic, tp.partition)
        try:
            kafka = consumer.committed(ktp, timeout_ms=timeout_ms)
        except Exception as e:  # noqa: BLE001 - tried again on the next loop; nothing is delivered meanwhile
            log.warning("%s: could not read the committed offset of %s: %r", host.consumer_id, tp, e)
            return False
        if kafka is not None and kafka < 0:
            kafka = None
        start = handover.start_offset(tp, kafka)
        if start is None or start < 0:
            return True
        consumer.seek(ktp, start)
        with host.state_lock:
            host.backlog.drop(tp)  # fetched before the hand-off, from an older position
            progress = host.owned.get(tp)
            if progress is not None and progress.generation > 0:
                progress.start = start
                if kafka is None or start > kafka:
                    progress.processed = start
        return True

    # ------------------------------------------------------------------------------------------- commits
    def commit_first(self, values: Mapping[TopicPartition, int]) -> bool:
        """Give ``values`` to the handover before they go to the broker (zkconsumer.migration.bridge.ZkBridge says
        why). False: nothing is committed now, to either store; the next commit tries again."""
        handover = self.handover
        if handover is None:
            return True
        try:
            handover.committed(values)
            return True
        except Exception as e:  # noqa: BLE001 - e.g. ZooKeeper suspended: both stores wait for the next commit
            log.warning("%s: committing to ZooKeeper failed (%r): not committing to the broker either",
                        self.host.consumer_id, e)
            return False

    # ------------------------------------------------ the handover's session (migration.bridge.SessionGate)
    def drop_handover(self) -> None:
        """The handover is over (the migration is done) and the member stays in its group, same member id, same
        partitions: no rebalance. A partition still held is consumed from the broker's committed offset."""
        host = self.host
        with host.state_lock:
            self.handover = None
            self._needs_seek |= self._held
            self._held.clear()
        host.deliverable.set()

    def handover_suspended(self) -> None:
        """The handover's guard may be lapsing (its ZooKeeper connection is suspended): the streams hand out
        nothing until it is confirmed or known lost. Called from kazoo's event thread: it only flags."""
        self.host.deliverable.clear()
        self.host.trace.emit("connection_suspended", member_id=self.host.member_id)

    def handover_confirmed(self) -> None:
        """The same guard again (the same session): deliveries go on."""
        self.host.deliverable.set()

    def handover_lost(self) -> None:
        """The handover's guard is gone (its session expired) and others may own the partitions already. Every
        owned partition is held again (paused, claimed anew through the handover, then sought to its start
        offset); records queued for it are stale (a new generation); nothing processed so far is committed (the
        next owner may be further on)."""
        host = self.host
        with host.state_lock:
            generation = host.next_generation()
            for progress in host.owned.values():
                progress.generation = generation
                progress.handed = progress.processed = None
            self._held |= set(host.owned)
            host.backlog.clear()
        host.deliverable.set()
        host.trace.emit("session_expired", member_id=host.member_id)
