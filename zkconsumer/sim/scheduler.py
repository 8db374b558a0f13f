"""A deterministic discrete-event scheduler: virtual time that never waits, and one seeded choice wherever the
order of two things is genuinely free.

Every source of order in a simulated run (a timer firing, a message arriving, a thread being woken) is an event
here, so the seed decides every interleaving and replays it exactly (FoundationDB's and TigerBeetle's rule).

Time is an ``int`` of milliseconds. ZooKeeper, Kafka and the consumer all count whole milliseconds (``tickTime``,
session timeouts, backoffs), ZooKeeper's session buckets round with integer division, and integers add exactly:
with floats, ``a + b + c`` may differ from ``a + (b + c)``, and a run's trace would depend on how its delays
were summed. :meth:`Clock.monotonic` still answers in float seconds, as ``time.monotonic`` does.

Ordering: events are due by time. Events due at the *same* time are concurrent unless they share a ``lane``: the
events of one lane (say, the packets of one TCP connection) keep the order they were scheduled in, and the
scheduler picks among the lanes' heads (an event without a lane is a lane of its own) with its seeded
``random.Random``. Without a seed it picks the earliest scheduled, which is plain FIFO.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from zkconsumer.errors import IllegalArgument

#: The lane of an event scheduled without one: a lane of its own (paired with its sequence number).
_OWN_LANE = object()


@dataclass(eq=False)
class Timer:
    """A scheduled call, as :meth:`Scheduler.call_at` returns it: pass it to :meth:`Scheduler.cancel`."""

    due_ms: int
    seq: int
    fn: Callable[[], object]
    lane: Hashable | None = None
    cancelled: bool = field(default=False)

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """The runtime's clock seam: what the consumer will read instead of ``time`` once it runs simulated.

    ``epoch_ms`` is what :meth:`time` answers at virtual time zero, so traces carry plausible wall-clock stamps
    that are still a pure function of the seed."""

    def __init__(self, scheduler: Scheduler, epoch_ms: int = 1_600_000_000_000) -> None:
        self._scheduler = scheduler
        self._epoch_ms = epoch_ms

    def now_ms(self) -> int:
        """Virtual milliseconds since the run began."""
        return self._scheduler.now_ms

    def monotonic(self) -> float:
        """``time.monotonic()``'s counterpart: seconds, float."""
        return self._scheduler.now_ms / 1000.0

    def time(self) -> float:
        """``time.time()``'s counterpart: epoch seconds, float."""
        return (self._epoch_ms + self._scheduler.now_ms) / 1000.0


class Scheduler:
    """Runs callbacks in virtual time. Nothing here sleeps: :meth:`run_until` jumps from one due event to the next.

    ``seed=None`` orders simultaneous events FIFO; a seed orders them by a ``random.Random(seed)`` of the
    scheduler's own, which nothing else may draw from (so adding a random draw elsewhere does not reshuffle
    the interleavings). ``executed`` counts the callbacks run, for benchmarks and step limits."""

    def __init__(self, seed: int | None = None, start_ms: int = 0) -> None:
        self.now_ms = start_ms
        self.executed = 0
        self._rng = random.Random(seed) if seed is not None else None
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = itertools.count()

    # ------------------------------------------------------------------------------------------- scheduling
    def call_at(self, due_ms: int, fn: Callable[[], object], lane: Hashable | None = None) -> Timer:
        """Run ``fn()`` at virtual time ``due_ms`` (not before now: the past cannot be scheduled)."""
        if not isinstance(due_ms, int):
            raise IllegalArgument(f"virtual time is whole milliseconds, got {due_ms!r}")
        if due_ms < self.now_ms:
            raise IllegalArgument(f"cannot schedule at {due_ms} ms, before now ({self.now_ms} ms)")
        timer = Timer(due_ms, next(self._seq), fn, lane)
        heapq.heappush(self._heap, (due_ms, timer.seq, timer))
        return timer

    def call_later(self, delay_ms: int, fn: Callable[[], object], lane: Hashable | None = None) -> Timer:
        """Run ``fn()`` ``delay_ms`` from now (``0``: now, after what is already due now, in the seed's order)."""
        if not isinstance(delay_ms, int) or delay_ms < 0:
            raise IllegalArgument(f"a delay is a non-negative whole number of milliseconds, got {delay_ms!r}")
        return self.call_at(self.now_ms + delay_ms, fn, lane)

    @staticmethod
    def cancel(timer: Timer) -> None:
        """Forget a scheduled call; cancelling one that already ran, or twice, does nothing."""
        timer.cancel()

    # ------------------------------------------------------------------------------------------- running
    def next_due_ms(self) -> int | None:
        """When the next live event is due, or None when nothing is scheduled."""
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Run one event: advance to the earliest due time and run one of the events due then (the seed's pick).
        False when nothing is scheduled."""
        self._drop_cancelled()
        if not self._heap:
            return False
        due = self._heap[0][0]
        first = heapq.heappop(self._heap)
        self._drop_cancelled()
        if not self._heap or self._heap[0][0] != due:  # alone at its time (most events): nothing to choose
            self.now_ms = due
            self.executed += 1
            first[2].fn()
            return True
        heapq.heappush(self._heap, first)
        ready: list[tuple[int, int, Timer]] = []
        while self._heap and self._heap[0][0] == due:
            entry = heapq.heappop(self._heap)
            if not entry[2].cancelled:
                ready.append(entry)
        if not ready:
            return self.step()
        chosen = self._pick(ready)
        for entry in ready:
            if entry is not chosen:
                heapq.heappush(self._heap, entry)
        self.now_ms = due
        self.executed += 1
        chosen[2].fn()
        return True

    def run_until(self, until_ms: int) -> None:
        """Run every event due at or before ``until_ms`` (those they schedule too), then set the clock to it."""
        while True:
            due = self.next_due_ms()
            if due is None or due > until_ms:
                break
            self.step()
        self.now_ms = max(self.now_ms, until_ms)

    def run_for(self, duration_ms: int) -> None:
        self.run_until(self.now_ms + duration_ms)

    def run(self, max_events: int | None = None) -> None:
        """Run until nothing is scheduled (or ``max_events`` have run: a guard against a timer that re-arms
        itself forever, such as a ping loop)."""
        ran = 0
        while (max_events is None or ran < max_events) and self.step():
            ran += 1

    # ------------------------------------------------------------------------------------------- internals
    def _pick(self, ready: list[tuple[int, int, Timer]]) -> tuple[int, int, Timer]:
        """Among events due at one time, the heads of their lanes are the candidates; the seed picks one."""
        heads: dict[object, tuple[int, int, Timer]] = {}
        for entry in sorted(ready, key=lambda e: e[1]):
            key = entry[2].lane if entry[2].lane is not None else (_OWN_LANE, entry[1])
            heads.setdefault(key, entry)
        candidates = sorted(heads.values(), key=lambda e: e[1])
        if self._rng is None or len(candidates) == 1:
            return candidates[0]
        return candidates[self._rng.randrange(len(candidates))]

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)
