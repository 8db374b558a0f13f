"""A deterministic discrete-event scheduler: virtual time that never waits, and one seeded choice wherever the
order of two things is genuinely free.

Every source of order in a simulated run (a timer firing, a message arriving, a thread being woken) is an event
here, so the seed decides every interleaving and replays it exactly (FoundationDB's and TigerBeetle's rule).

Time is an ``int`` of microseconds. Integers add exactly: with floats, ``a + b + c`` may differ from
``a + (b + c)``, and a run's trace would depend on how its delays were summed. ZooKeeper, Kafka and the consumer
count whole milliseconds (``tickTime``, session timeouts, backoffs), and they schedule in them (:meth:`call_at`,
:meth:`call_later`, :attr:`now_ms`); the network schedules in microseconds (:meth:`call_later_us`), since a hop
over the loopback takes a few hundred of them, and a millisecond's floor would widen every race a round trip
decides (a claim's create against another member's read) several times over. :meth:`Clock.monotonic` answers in
float seconds, as ``time.monotonic`` does.

Ordering: events are due by time. Events due at the *same* time are concurrent unless they share a ``lane``: the
events of one lane (say, the packets of one TCP connection) keep the order they were scheduled in, and the
scheduler picks among the lanes' heads (an event without a lane is a lane of its own) with its seeded
``random.Random``. Without a seed it picks the earliest scheduled, which is plain FIFO.

Cost: a herd of thousands of members puts thousands of events on one instant. The events of the instant being
run are therefore taken off the heap once, into per-lane queues and one list of lane heads kept in scheduling order;
each step draws from that list (O(log k) to keep it sorted, not the O(k log n) of re-heaping the instant every step).
The draw is the same as drawing from all the instant's live events re-sorted at every step: the same candidates in
the same order, so a seed's trace did not change with it.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from zkconsumer.errors import IllegalArgument


@dataclass(eq=False)
class Timer:
    """A scheduled call, as :meth:`Scheduler.call_at` returns it: pass it to :meth:`Scheduler.cancel`."""

    due_us: int
    seq: int
    fn: Callable[[], object]
    lane: Hashable | None = None
    cancelled: bool = field(default=False)
    #: the scheduler, while this timer is one of the candidates of the instant being run (so that cancelling it
    #: takes it out of the draw at once, as the draw counts only live events)
    _candidate_of: Scheduler | None = field(default=None, repr=False)

    def cancel(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        if self._candidate_of is not None:
            self._candidate_of._uncandidate(self)


class Clock:
    """The runtime's clock seam: what the consumer will read instead of ``time`` once it runs simulated.

    ``epoch_ms`` is what :meth:`time` answers at virtual time zero, so traces carry plausible wall-clock stamps
    that are still a pure function of the seed."""

    def __init__(self, scheduler: Scheduler, epoch_ms: int = 1_600_000_000_000) -> None:
        self._scheduler = scheduler
        self._epoch_ms = epoch_ms

    def now_ms(self) -> int:
        """Virtual milliseconds since the run began (whole: the floor)."""
        return self._scheduler.now_us // 1000

    def monotonic(self) -> float:
        """``time.monotonic()``'s counterpart: seconds, float."""
        return self._scheduler.now_us / 1e6

    def time(self) -> float:
        """``time.time()``'s counterpart: epoch seconds, float."""
        return (self._epoch_ms * 1000 + self._scheduler.now_us) / 1e6


class Scheduler:
    """Runs callbacks in virtual time. Nothing here sleeps: :meth:`run_until` jumps from one due event to the next.

    ``seed=None`` orders simultaneous events FIFO; a seed orders them by a ``random.Random(seed)`` of the
    scheduler's own, which nothing else may draw from (so adding a random draw elsewhere does not reshuffle
    the interleavings). ``executed`` counts the callbacks run, for benchmarks and step limits."""

    def __init__(self, seed: int | None = None, start_ms: int = 0) -> None:
        self.now_us = start_ms * 1000
        self.executed = 0
        self._rng = random.Random(seed) if seed is not None else None
        self._heap: list[tuple[int, int, Timer]] = []
        self._seq = itertools.count()
        # the instant being run: its time, its lanes' queued events, and the lane heads (the candidates) by seq
        self._instant_us: int | None = None
        self._lanes: dict[Hashable, deque[Timer]] = {}
        self._heads: list[Timer] = []

    @property
    def now_ms(self) -> int:
        """Virtual milliseconds since the run began (the floor of :attr:`now_us`)."""
        return self.now_us // 1000

    # ------------------------------------------------------------------------------------------- scheduling
    def call_at(self, due_ms: int, fn: Callable[[], object], lane: Hashable | None = None) -> Timer:
        """Run ``fn()`` at virtual millisecond ``due_ms`` (not before the current one: the past cannot be
        scheduled). The millisecond that is running now means now: its start may have passed already."""
        if not isinstance(due_ms, int):
            raise IllegalArgument(f"virtual time is whole milliseconds, got {due_ms!r}")
        if due_ms < self.now_ms:
            raise IllegalArgument(f"cannot schedule at {due_ms} ms, before now ({self.now_ms} ms)")
        return self.call_at_us(max(due_ms * 1000, self.now_us), fn, lane)

    def call_at_us(self, due_us: int, fn: Callable[[], object], lane: Hashable | None = None) -> Timer:
        """Run ``fn()`` at virtual microsecond ``due_us`` (not before now)."""
        if not isinstance(due_us, int):
            raise IllegalArgument(f"virtual time is whole microseconds, got {due_us!r}")
        if due_us < self.now_us:
            raise IllegalArgument(f"cannot schedule at {due_us} µs, before now ({self.now_us} µs)")
        timer = Timer(due_us, next(self._seq), fn, lane)
        if due_us == self._instant_us:  # joins the instant being run (its seq is the highest: last in any order)
            self._enqueue(timer)
        else:
            heapq.heappush(self._heap, (due_us, timer.seq, timer))
        return timer

    def call_later(self, delay_ms: int, fn: Callable[[], object], lane: Hashable | None = None) -> Timer:
        """Run ``fn()`` ``delay_ms`` from now (``0``: now, after what is already due now, in the seed's order)."""
        if not isinstance(delay_ms, int) or delay_ms < 0:
            raise IllegalArgument(f"a delay is a non-negative whole number of milliseconds, got {delay_ms!r}")
        return self.call_at_us(self.now_us + delay_ms * 1000, fn, lane)

    def call_later_us(self, delay_us: int, fn: Callable[[], object], lane: Hashable | None = None) -> Timer:
        """Run ``fn()`` ``delay_us`` microseconds from now."""
        if not isinstance(delay_us, int) or delay_us < 0:
            raise IllegalArgument(f"a delay is a non-negative whole number of microseconds, got {delay_us!r}")
        return self.call_at_us(self.now_us + delay_us, fn, lane)

    @staticmethod
    def cancel(timer: Timer) -> None:
        """Forget a scheduled call; cancelling one that already ran, or twice, does nothing."""
        timer.cancel()

    # ------------------------------------------------------------------------------------------- running
    def next_due_us(self) -> int | None:
        """When the next live event is due (µs), or None when nothing is scheduled."""
        if self._heads:
            return self._instant_us
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def step(self) -> bool:
        """Run one event: advance to the earliest due time and run one of the events due then (the seed's pick).
        False when nothing is scheduled."""
        if not self._heads and not self._load_instant():
            return False
        heads = self._heads
        n = len(heads)
        chosen = heads.pop(0 if self._rng is None or n == 1 else self._rng.randrange(n))
        self._left_the_draw(chosen)
        self.now_us = chosen.due_us
        self.executed += 1
        chosen.fn()
        return True

    def run_until(self, until_ms: int) -> None:
        """Run every event due at or before ``until_ms`` (those they schedule too), then set the clock to it."""
        self.run_until_us(until_ms * 1000)

    def run_until_us(self, until_us: int) -> None:
        while True:
            due = self.next_due_us()
            if due is None or due > until_us:
                break
            self.step()
        self.now_us = max(self.now_us, until_us)

    def run_for(self, duration_ms: int) -> None:
        self.run_until_us(self.now_us + duration_ms * 1000)

    def run(self, max_events: int | None = None) -> None:
        """Run until nothing is scheduled (or ``max_events`` have run: a guard against a timer that re-arms
        itself forever, such as a ping loop)."""
        ran = 0
        while (max_events is None or ran < max_events) and self.step():
            ran += 1

    # ------------------------------------------------------------------------------------------- internals
    def _load_instant(self) -> bool:
        """Take every live event due at the earliest time off the heap into the instant's lanes."""
        self._drop_cancelled()
        if not self._heap:
            return False
        due = self._heap[0][0]
        self._instant_us = due
        while self._heap and self._heap[0][0] == due:
            timer = heapq.heappop(self._heap)[2]
            if not timer.cancelled:
                self._enqueue(timer)  # popped in seq order
        if not self._heads:
            self._instant_us = None
            return self._load_instant()
        return True

    def _enqueue(self, timer: Timer) -> None:
        """Into the instant: ``timer`` has the highest seq so far, so a new head goes last."""
        if timer.lane is None:  # a lane of its own: a candidate at once
            self._promote(timer, at_end=True)
            return
        queue = self._lanes.get(timer.lane)
        if queue is None:
            self._lanes[timer.lane] = deque((timer,))
            self._promote(timer, at_end=True)
        else:
            queue.append(timer)

    def _promote(self, timer: Timer, at_end: bool = False) -> None:
        timer._candidate_of = self
        if at_end:
            self._heads.append(timer)
        else:
            bisect.insort(self._heads, timer, key=_seq)

    def _uncandidate(self, timer: Timer) -> None:
        """A candidate was cancelled: out of the draw, and its lane's next live event in."""
        heads = self._heads
        del heads[bisect.bisect_left(heads, timer.seq, key=_seq)]
        self._left_the_draw(timer)

    def _left_the_draw(self, timer: Timer) -> None:
        """A head left the candidates (drawn or cancelled): its lane's next live event takes its place."""
        timer._candidate_of = None
        if timer.lane is not None:
            queue = self._lanes[timer.lane]
            queue.popleft()
            while queue and queue[0].cancelled:
                queue.popleft()
            if queue:
                self._promote(queue[0])
            else:
                del self._lanes[timer.lane]
        if not self._heads:
            self._instant_us = None  # what is scheduled for now from here starts a new instant, as a later event
            self._lanes.clear()

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][2].cancelled:
            heapq.heappop(self._heap)


def _seq(timer: Timer) -> int:
    return timer.seq
