"""When the lab's ownership invariant judges a fault's heal: pure, and free of Spark, so that the Spark analysis
(analysis/invariants.py) and the simulator's checkers (sim/checkers.py) judge by the one definition."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GRACE_MS = 1000
#: A live migration in the lab's trace (``--mode migrate``, live or simulated): a ``lab_step`` ``migrate`` or
#: ``rollback`` when the driver starts, a ``lab_step`` ``migration_ended`` when it returns. In between the group is
#: moved member by member, and each switch leaves the member's partitions without an owner until the other side's
#: rebalance hands them out: a disturbance that lasts, so a heal's deadline inside it moves to its end, as one inside
#: a fault still open moves to that fault's heal (found by ``zkconsumer sim --mode migrate``: an ``expire`` healed at
#: once, judged in the middle of the next member's switch, broke in 20 of 20 seeds).
MIGRATION_STEPS = frozenset({"migrate", "rollback"})
MIGRATION_ENDED_STEP = "migration_ended"


def judged_deadlines(lines: Iterable[Mapping[str, Any]], grace_ms: int = GRACE_MS) -> list[tuple[Any, ...]]:
    """Per ``fault_healed`` line of the lab's trace: ``(group, fault, healed, deadline)``, the moment the group
    must own every partition again. Pure, on the driver: a run has a few dozen lab lines.

    The deadline is ``healed + session_timeout_ms + grace`` unless the group is disturbed again by then: a later
    ``lab_step`` (a join, stop, kill -9, restart, a topic action), a fault struck or another healed inside the
    window moves the anchor to it, and a fault or a live migration still open at the deadline moves it to that
    fault's heal or the migration's end; repeated until the window is quiet. A heal whose window ends under a fault
    never healed (a migration never ended) is not judged (no row). ``lines`` carry ``group``, ``ts``, ``event``,
    ``fault``, ``target``, ``session_timeout_ms`` and ``step``."""
    rows = sorted(lines, key=lambda r: (r["group"], r["ts"]))
    out = []
    for group in dict.fromkeys(r["group"] for r in rows):
        mine = [r for r in rows if r["group"] == group]
        spans = _fault_spans(mine) + _migration_spans(mine)
        moments = sorted({r["ts"] for r in mine if r["event"] in ("lab_step", "fault_injected", "fault_healed")})
        for heal in (r for r in mine if r["event"] == "fault_healed"):
            window = int(heal.get("session_timeout_ms") or 0) + grace_ms
            anchor, judged = heal["ts"], True
            while True:
                deadline = anchor + window
                later = [t for t in moments if anchor < t <= deadline]
                open_at = [end for start, end in spans if start <= deadline and (end is None or end > deadline)]
                if any(end is None for end in open_at):
                    judged = False
                    break
                nxt = max([*later, *open_at], default=anchor)
                if nxt <= anchor:
                    break
                anchor = nxt
            if judged:
                out.append((group, heal["fault"], heal["ts"], deadline))
    return out


def _fault_spans(lines: list[Mapping[str, Any]]) -> list[tuple[int, int | None]]:
    """(struck, healed or None) per ``fault_injected`` line: paired with the first later heal of the same fault
    and target (a heal line without a target, as the fault matrix writes, pairs by the fault's name), in order."""
    spans: list[tuple[int, int | None]] = []
    used: set[int] = set()
    for r in (r for r in lines if r["event"] == "fault_injected"):
        end = None
        for i, h in enumerate(lines):
            if (i not in used and h["event"] == "fault_healed" and h["fault"] == r["fault"] and h["ts"] >= r["ts"]
                    and (not h.get("target") or h.get("target") == r.get("target"))):
                used.add(i)
                end = h["ts"]
                break
        spans.append((r["ts"], end))
    return spans


def _migration_spans(lines: list[Mapping[str, Any]]) -> list[tuple[int, int | None]]:
    """(started, ended or None) per stretch of live migration: from a ``migrate`` or ``rollback`` step while none
    runs to the ``migration_ended`` step that leaves none running (a rollback started during a migration takes the
    group over from it; each driver writes its own end, a killed one's written for it)."""
    spans: list[tuple[int, int | None]] = []
    running, start = 0, 0
    for r in lines:
        if r["event"] != "lab_step":
            continue
        if r.get("step") in MIGRATION_STEPS:
            if running == 0:
                start = r["ts"]
            running += 1
        elif r.get("step") == MIGRATION_ENDED_STEP and running:
            running -= 1
            if running == 0:
                spans.append((start, r["ts"]))
    if running:
        spans.append((start, None))
    return spans
