"""Records produced and never delivered, split by why: never readable, or unread when the run ended.

Jepsen's ``unseen`` is one number; a study of the 0.8 design needs two. A partition's *frontier* is where its
readers stood at the end: the highest of its last delivered offset + 1, its highest committed offset and its
highest offset reset target. Offsets below the frontier that nobody delivered will never be read by this group
(an offset reset skipped them, or a commit went past them): **never readable**, a real loss. Offsets at or above it
were still waiting when the run ended (a member that claimed the partition and read nothing, a partition nobody
had discovered yet): **unread**, a stall, not a loss. The two add up to the log end minus the offsets delivered.

Pure: the lab's tally (lab/runner.py), the simulator's checker (sim/checkers.py) and compare/catalogue use it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class Unseen:
    """One partition's (or a run's, summed) undelivered records, split."""

    never_readable: int = 0
    unread: int = 0

    @property
    def total(self) -> int:
        return self.never_readable + self.unread

    def __add__(self, other: Unseen) -> Unseen:
        return Unseen(self.never_readable + other.never_readable, self.unread + other.unread)


def frontier(hi: int, committed: int, reset_to: int) -> int:
    """Where a partition's readers stood: past the last delivered offset (``hi``, -1 for none), the highest commit
    (0 for none) and the highest reset target (0 for none)."""
    return max(hi + 1, committed, reset_to, 0)


def split(delivered: Collection[int], end: int, committed: int = 0, reset_to: int = 0) -> Unseen:
    """The offsets below ``end`` (the log end) that are not in ``delivered``, split at the partition's frontier."""
    hi = max(delivered, default=-1)
    front = frontier(hi, committed, reset_to)
    bound = min(front, end)
    seen = sum(1 for o in delivered if 0 <= o < bound)
    return Unseen(never_readable=bound - seen, unread=max(0, end - front))
