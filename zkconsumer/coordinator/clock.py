"""The group coordinator's clock, injectable as Kafka's ``Time`` is (``SystemTime`` / ``MockTime``).

Every deadline the coordinator keeps (session timeouts, the initial rebalance delay, rebalance timeouts, offset
retention) is compared with ``clock.now_ms()``. The broker runs on the wall clock; tests hand in a
:class:`ManualClock` and call ``GroupCoordinator.tick()`` after advancing it, so a timeout fires at exactly the
millisecond the test chooses instead of whenever a timer thread happens to wake up.
"""

from __future__ import annotations

from typing import Protocol

from zkconsumer import runtime
from zkconsumer.errors import IllegalArgument


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch (or any fixed origin: the coordinator only compares and subtracts)."""
        ...


class SystemClock:
    """The wall clock (``time.time()``), the coordinator's default: what the broker runs on."""

    def now_ms(self) -> int:
        return int(runtime.time() * 1000)


class ManualClock:
    """A clock that moves only when told to (Kafka's ``MockTime``), so time-driven transitions are deterministic.

    Thread-safe: a test may advance it while request threads of the coordinator read it.
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._lock = runtime.Lock()
        self._now_ms = start_ms

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def advance(self, ms: int) -> int:
        """Move the clock ``ms`` forward (never back: deadlines assume a monotonic clock); returns the new time."""
        if ms < 0:
            raise IllegalArgument(f"a clock does not go back (advance by {ms} ms)")
        with self._lock:
            self._now_ms += ms
            return self._now_ms
