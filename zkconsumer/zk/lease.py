"""How long this process can be sure its ZooKeeper session is alive, by its own clock: a lease, for fencing.

Why: ZooKeeper expires a session once the server has not heard from the client for the session timeout, and tells
the client only when it reconnects. A process stopped for longer than that (a long GC pause, SIGSTOP, a frozen VM)
wakes still believing it holds its ephemeral owner nodes. kazoo finds out only when its connection thread next reads
(SUSPENDED, then LOST); a stream thread woken at the same instant hands out, in the meantime, records of partitions
another member owns and may have committed past: Kafka 0.8's "fetching after losing ZooKeeper" (Parsely/pykafka#204,
#274; docs/failure-modes.md). The default profile fences it with this lease; the kafka-0.8 profile, faithful, does not.

The bound: a request we sent at time ``t`` that the server answered reached it no earlier than ``t``, and the server
expires a session no sooner than its timeout after it last heard from the client. So an answer to a request sent
at ``t`` proves the session alive until ``t + timeout`` at least. The lease ends earlier, at ``t + term``, with the
term two thirds of the negotiated timeout, the same as kazoo's own read timeout. The third left over covers two
things: a follower reporting its sessions' activity to the leader late (once a tick), and a member acting on a
lease that still held a moment ago. kazoo sends a request or a ping at least every third of the timeout, so on a
healthy connection the lease never lapses. It lapses only when the process or its connection stalls for more than
two thirds of the timeout. A holder then hands out nothing until an answer renews the lease or the session is known
to be lost.

Pure: the connection (zk/handler.py) feeds :meth:`SessionLease.confirm` the send time of each answered request;
the clock is injectable for tests.
"""

from __future__ import annotations

from collections.abc import Callable

from zkconsumer import runtime


class SessionLease:
    """The last moment the session is known alive plus the term: :meth:`holds` until then."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        # None: runtime.monotonic, looked up at each reading (not bound here), so a simulation's clock reaches it
        self._clock = clock
        self._changed = runtime.Condition()
        self._until: float | None = None  # None: no answer yet on any session

    def _now(self) -> float:
        return runtime.monotonic() if self._clock is None else self._clock()

    def confirm(self, sent_at: float, term_s: float) -> None:
        """An answer came to a request sent at ``sent_at`` (this clock): the session is alive until ``sent_at``
        plus the session timeout, so the lease holds until ``sent_at + term_s`` (``term_s`` < the timeout)."""
        until = sent_at + term_s
        with self._changed:
            if self._until is None or until > self._until:
                self._until = until
                self._changed.notify_all()

    def holds(self) -> bool:
        until = self._until
        return until is not None and self._now() < until

    def remaining(self) -> float:
        """Seconds the lease still holds (negative once it lapsed; ``-inf`` before the first answer)."""
        until = self._until
        return float("-inf") if until is None else until - self._now()

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lease to hold; True if it holds."""
        deadline = self._now() + timeout
        with self._changed:
            while not self.holds():
                left = deadline - self._now()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True
