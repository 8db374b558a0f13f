"""Where a rebalance's time goes: wall time per phase, measured on the rebalance thread.

The phases (docs/trace.md, ``phases_ms`` on ``rebalance_done`` / ``rebalance_failed``):

``trigger``     from the first watch callback (or the trigger) to the rebalance thread picking it up
``reads``       reading ZooKeeper: brokers, registrations, topic nodes, owner nodes of kept partitions
``assign``      the assignor over the whole group, and this consumer's share
``release``     stopping fetchers, the listener, and deleting owner nodes that move
``owner_wait``  waiting for a previous owner to delete a node we need (a watch, or Kafka's failed attempt)
``claim``       creating owner nodes (the multi-op or Kafka's one create per node), conflicts read back
``offsets``     reading the start offsets of gained partitions
``start``       the listener and restarting fetchers
``backoff``     sleeping between failed attempts (``rebalance.backoff.ms``)

Watch *delivery* (a ZooKeeper change until its callback runs here) happens in another process's clock
domain; the benchmark measures it from the moment it made the change (benchmarks/rebalance.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from zkconsumer import runtime

PHASES = ("trigger", "reads", "assign", "release", "owner_wait", "claim", "offsets", "start", "backoff")


class PhaseClock:
    """Accumulates seconds per phase for one rebalance; nested phases are subtracted from their parent."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._stack: list[list[float]] = []  # per open phase: [start, seconds spent in nested phases]

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = runtime.monotonic()
        self._stack.append([start, 0.0])
        try:
            yield
        finally:
            _, nested = self._stack.pop()
            took = runtime.monotonic() - start
            self.seconds[name] += took - nested
            if self._stack:
                self._stack[-1][1] += took

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += max(0.0, seconds)

    def as_ms(self) -> dict[str, int]:
        """Milliseconds per phase, every phase present (0 when it did not happen)."""
        return {name: round(s * 1000) for name, s in self.seconds.items()}
