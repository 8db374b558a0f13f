"""Why a 0.8 member rebalances, and the triggers its watches flagged that no rebalance has answered yet.

Watches run on kazoo's thread and must not block, so they only *flag* a cause here; the watcher-executor thread
takes the flags and rebalances (rebalance.py). A session expiry is the one cause an attempt cannot answer by
reading the group again: it needs a reset and a new registration first, so it survives every "the attempt read
the group now" drain and fails the attempt that finds it.
"""

from __future__ import annotations

from enum import StrEnum

from zkconsumer import runtime


class TriggerCause(StrEnum):
    """The ``cause`` of a ``rebalance_triggered`` trace line (docs/trace.md)."""

    STARTUP = "startup"
    IDS_CHANGED = "ids_changed"  # a member joined or left (children of /consumers/<g>/ids)
    TOPIC_CHANGED = "topic_changed"  # a subscribed topic's partitions changed (its /brokers/topics/<t> node)
    TOPICS_CHANGED = "topics_changed"  # the topics a wildcard matches changed (children of /brokers/topics)
    REGISTRATION_CHANGED = "registration_changed"  # a registration was overwritten, fixed or deleted
    OWNER_CHANGED = "owner_changed"  # someone else deleted or overwrote one of our owner nodes
    BROKERS_CHANGED = "brokers_changed"  # a broker registered after none was
    SESSION_EXPIRED = "session_expired"


class Triggers:
    """The flagged causes, oldest first, guarded by the rebalancer's condition (a re-entrant lock: callers that
    hold it already may ask). Every change wakes the waiters on that condition."""

    def __init__(self, cond: runtime.Condition) -> None:
        self._cond = cond
        self._causes: list[TriggerCause] = []
        self._first_at: float | None = None  # monotonic time of the first flag no rebalance has started on

    def add(self, cause: TriggerCause) -> None:
        with self._cond:
            if self._first_at is None:
                self._first_at = runtime.monotonic()
            self._causes.append(cause)
            self._cond.notify_all()

    def take(self) -> list[TriggerCause]:
        """Every flag, answered from now on by the caller."""
        with self._cond:
            causes, self._causes = self._causes, []
            return causes

    def take_first_at(self) -> float | None:
        """When the first flag a starting rebalance answers was raised (then forgotten: the next one counts anew)."""
        with self._cond:
            first, self._first_at = self._first_at, None
            return first

    def pending(self) -> bool:
        """Anything flagged, a session expiry included."""
        with self._cond:
            return bool(self._causes)

    def change_pending(self) -> bool:
        """A change of the group flagged (a session expiry is not one: the attempt fails on it instead)."""
        with self._cond:
            return any(cause is not TriggerCause.SESSION_EXPIRED for cause in self._causes)

    def expiry_pending(self) -> bool:
        with self._cond:
            return TriggerCause.SESSION_EXPIRED in self._causes

    def answer_changes(self) -> None:
        """An attempt is about to read the group afresh: the changes flagged so far are answered by it; a session
        expiry stays (it needs a reset and a new registration first)."""
        with self._cond:
            self._causes = [cause for cause in self._causes if cause is TriggerCause.SESSION_EXPIRED]
