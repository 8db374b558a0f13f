"""Blocked requests waiting for their answers: a JoinGroup until its group's join completes, a follower's
SyncGroup until the leader's assignment arrives.

The broker serves each connection on its own thread, so a blocked request simply blocks that thread (where Kafka
parks it in a purgatory). Each blocked request holds a :class:`Pending`: whatever settles its fate (the join
completing, a newer join of the same member, the member's removal or fencing, the coordinator stopping)
completes it with the answer, and only that request wakes, as soon as its answer exists.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from zkconsumer import runtime

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Pending(Generic[T]):
    """One blocked request's answer-to-be, completed once. Its condition shares the coordinator's lock: a request
    parks and waits in the critical section it decided in, so no completion can slip in between."""

    def __init__(self, lock: Any) -> None:
        self._cond = runtime.Condition(lock)
        self._answer: T | None = None
        self.completed = False

    def complete(self, answer: T) -> bool:
        """Answer the request (call with the lock held); False if it was answered already (the first answer
        stands)."""
        if self.completed:
            return False
        self._answer, self.completed = answer, True
        self._cond.notify_all()
        return True

    def wait(self) -> T:
        """Block until answered (call with the lock held: it is released while waiting)."""
        while not self.completed:
            self._cond.wait()
        return self._answer  # type: ignore[return-value]  # set together with completed


class Purgatory(Generic[K, T]):
    """The pending requests under their keys (e.g. group and member id). Used with the coordinator's lock held."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self._parked: dict[K, list[Pending[T]]] = {}
        self._closed: Callable[[K], T] | None = None

    def park(self, key: K) -> Pending[T]:
        """A new pending request under ``key``; once closed, one already answered with the closing answer."""
        pending: Pending[T] = Pending(self._lock)
        if self._closed is not None:
            pending.complete(self._closed(key))
        else:
            self._parked.setdefault(key, []).append(pending)
        return pending

    def complete(self, key: K, answer: T) -> bool:
        """Answer every request parked under ``key``; False if there was none."""
        waiting = self._parked.pop(key, [])
        for pending in waiting:
            pending.complete(answer)
        return bool(waiting)

    def close(self, answer: Callable[[K], T]) -> None:
        """Answer every parked request, and every later one at once, with ``answer(key)`` (the coordinator
        stopped)."""
        self._closed = answer
        for key in list(self._parked):
            self.complete(key, answer(key))
