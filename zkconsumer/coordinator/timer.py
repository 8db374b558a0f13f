"""Keyed timers: at most one pending action per key, run once the clock reaches its deadline.

Each of the coordinator's timeouts belongs to one thing: a group's join phase (the initial rebalance delay, the
rebalance timeout), a member's session, a KIP-394 member id nobody came back with, the offsets retention check.
So each is scheduled under that thing's key: scheduling a key again replaces its timer (a heartbeat pushes its
session's deadline out) and cancelling it is one call, as with trunk's ``CoordinatorTimer`` in Kafka.

Nothing here sleeps on its own. :meth:`KeyedTimer.run_due` takes the time to run at, so a test on a
:class:`~.clock.ManualClock` fires each timer at the millisecond it chooses, without threads. The broker runs one
thread that sleeps in :meth:`KeyedTimer.wait_for_due` until the next deadline, or until an earlier one is scheduled.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from zkconsumer import runtime
from zkconsumer.coordinator.clock import Clock

log = logging.getLogger(__name__)

#: What a timer runs; it gets the time it runs at (not its deadline: a timer fires late when nobody ran it sooner).
Action = Callable[[int], None]


@dataclass(frozen=True)
class _Timer:
    deadline_ms: int
    seq: int
    action: Action


class KeyedTimer:
    """Deadlines by key on an injectable clock. Thread-safe; actions run outside its lock, so they may schedule."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._cond = runtime.Condition()
        self._timers: dict[Hashable, _Timer] = {}
        #: (deadline, seq, key), earliest first. A replaced or cancelled timer stays here until it surfaces (or the
        #: heap is rebuilt): its seq no longer matches the key's timer, so it is skipped.
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()
        self._woken = False

    def schedule(self, key: Hashable, deadline_ms: int, action: Action) -> None:
        """Run ``action`` at ``deadline_ms``, instead of whatever ``key`` was scheduled to run."""
        with self._cond:
            timer = _Timer(deadline_ms, next(self._seq), action)
            self._timers[key] = timer
            heapq.heappush(self._heap, (deadline_ms, timer.seq, key))
            if len(self._heap) > 2 * len(self._timers) + 64:  # mostly replaced timers: keep memory to the live ones
                self._heap = [(t.deadline_ms, t.seq, k) for k, t in self._timers.items()]
                heapq.heapify(self._heap)
            if self._heap[0][1] == timer.seq:
                self._cond.notify_all()  # the earliest now: a thread in wait_for_due sleeps less

    def cancel(self, key: Hashable) -> bool:
        """Forget ``key``'s timer; False when it had none."""
        with self._cond:
            return self._timers.pop(key, None) is not None

    def deadline_ms(self, key: Hashable) -> int | None:
        with self._cond:
            timer = self._timers.get(key)
            return None if timer is None else timer.deadline_ms

    def __len__(self) -> int:
        with self._cond:
            return len(self._timers)

    def next_deadline_ms(self) -> int | None:
        with self._cond:
            return self._earliest()

    def run_due(self, now_ms: int) -> int:
        """Run every timer due at ``now_ms``, earliest deadline first (ties: the earlier scheduled first); returns
        how many ran. A timer that an action schedules runs at a later call even when already due, so a run ends.
        An action that raises is logged and the others still run."""
        with self._cond:
            bound = next(self._seq)  # timers scheduled from here on wait for the next run
        ran = 0
        while (timer := self._pop_due(now_ms, bound)) is not None:
            ran += 1
            try:
                timer.action(now_ms)
            except Exception:  # noqa: BLE001 - one failed timer must not keep the others from running
                log.exception("a coordinator timer failed")
        return ran

    def wait_for_due(self, max_wait_s: float) -> None:
        """Sleep until the earliest timer is due on the clock, an earlier one is scheduled, :meth:`wake` is called,
        or ``max_wait_s`` passed. The bound is how late a jump of the wall clock is noticed."""
        with self._cond:
            if not self._woken:
                earliest = self._earliest()
                wait = max_wait_s if earliest is None else min(max_wait_s,
                                                               (earliest - self.clock.now_ms()) / 1000)
                if wait > 0:
                    self._cond.wait(wait)
            self._woken = False

    def wake(self) -> None:
        """End the current (or the next) :meth:`wait_for_due` at once, e.g. to stop its thread."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def _earliest(self) -> int | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            timer = self._timers.get(key)
            if timer is not None and timer.seq == seq:
                return deadline
            heapq.heappop(self._heap)  # replaced or cancelled
        return None

    def _pop_due(self, now_ms: int, bound: int) -> _Timer | None:
        """Take off the earliest live timer due at ``now_ms`` that was scheduled before ``bound`` (seq)."""
        with self._cond:
            later = []  # due, but scheduled during this run: back on the heap for the next run
            try:
                while (deadline := self._earliest()) is not None and deadline <= now_ms:
                    _, seq, key = heapq.heappop(self._heap)
                    if seq < bound:
                        return self._timers.pop(key)
                    later.append((deadline, seq, key))
                return None
            finally:
                for entry in later:
                    heapq.heappush(self._heap, entry)
