"""ZooKeeper 3.4's session tracker (``SessionTrackerImpl``), pure: sessions filed in buckets of ``tickTime``.

A session is due to expire ``timeout`` after the server last heard from it, rounded *up* to the next multiple of
``tickTime`` (never down: the rounding is a grace period of up to one tick). Every request or ping moves the
session to the bucket of its new deadline; the tracker expires a whole bucket at once when its time comes. So a
session last heard from at ``t`` expires at ``(t + timeout) // tick * tick + tick``: strictly later than
``t + timeout``, and at most one tick later.

The tracker keeps the buckets and says which sessions are due; the server (:mod:`.zookeeper`) closes them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Session:
    """One session as the server knows it: its negotiated timeout, the bucket it is filed in, and whether it is
    closing (expired or closed: from then on every request of it fails with SessionExpired)."""

    session_id: int
    timeout_ms: int
    expires_at_ms: int = 0
    closing: bool = False


class SessionTracker:
    """Sessions by expiry bucket. Bucket times are multiples of ``tick_ms`` on the server's clock."""

    def __init__(self, tick_ms: int) -> None:
        self.tick_ms = tick_ms
        self.sessions: dict[int, Session] = {}
        self._buckets: dict[int, set[int]] = {}

    def round_up(self, t_ms: int) -> int:
        """The bucket of a deadline: the next multiple of the tick strictly after it (ZooKeeper's
        ``roundToInterval``: ``(time / interval + 1) * interval``)."""
        return (t_ms // self.tick_ms + 1) * self.tick_ms

    def add(self, session_id: int, timeout_ms: int, now_ms: int) -> Session:
        session = Session(session_id, timeout_ms)
        self.sessions[session_id] = session
        self.touch(session_id, now_ms)
        return session

    def touch(self, session_id: int, now_ms: int) -> bool:
        """The server heard from the session: file it under its new deadline. False for an unknown or closing
        session (it stays where it is)."""
        session = self.sessions.get(session_id)
        if session is None or session.closing:
            return False
        deadline = self.round_up(now_ms + session.timeout_ms)
        if deadline != session.expires_at_ms:
            self._unfile(session)
            session.expires_at_ms = deadline
            self._buckets.setdefault(deadline, set()).add(session_id)
        return True

    def next_expiry_ms(self) -> int | None:
        """When the earliest non-empty bucket is due, or None."""
        return min(self._buckets) if self._buckets else None

    def due(self, now_ms: int) -> list[int]:
        """The sessions whose bucket has come (oldest bucket first, ids ascending within one), marked closing and
        taken out of the buckets. The server closes each."""
        out: list[int] = []
        for when in sorted(t for t in self._buckets if t <= now_ms):
            ids = sorted(self._buckets.pop(when))
            for session_id in ids:
                self.sessions[session_id].closing = True
            out.extend(ids)
        return out

    def remove(self, session_id: int) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._unfile(session)

    def _unfile(self, session: Session) -> None:
        bucket = self._buckets.get(session.expires_at_ms)
        if bucket is not None:
            bucket.discard(session.session_id)
            if not bucket:
                del self._buckets[session.expires_at_ms]
