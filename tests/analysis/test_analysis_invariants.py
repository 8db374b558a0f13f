"""When the lab's invariants judge a heal: the deadlines, on lab lines. The invariants themselves, judged by Spark on
hand-built traces (a clean faulted run holds them all, each breach is found once, a kill after a heal is judged on
the settled group), are in test_sim_checkers_agree.py, where one analysis judges them all beside the simulator's
checkers."""

from __future__ import annotations

from zkconsumer.analysis.invariants import judged_deadlines


def _line(ts: int, event: str, **fields) -> dict:
    return {"group": "g", "ts": ts, "event": event, "fault": None, "target": None, "session_timeout_ms": None,
            **fields}


def test_a_quiet_heal_is_judged_session_plus_grace_after_it() -> None:
    lines = [_line(100, "fault_injected", fault="pause", target="g_c1"),
             _line(1100, "fault_healed", fault="pause", target="g_c1", session_timeout_ms=4000),
             _line(6200, "lab_step")]  # after the deadline: no effect
    assert judged_deadlines(lines) == [("g", "pause", 1100, 1100 + 4000 + 1000)]


def test_a_step_before_the_deadline_moves_it_to_the_step() -> None:
    """The nemesis' seed 17: a pause healed at 17 s, a kill -9 at 17.5 s; the group is judged 5 s after the kill."""
    lines = [_line(16000, "fault_injected", fault="pause", target="g_c4"),
             _line(17000, "fault_healed", fault="pause", target="g_c4", session_timeout_ms=4000),
             _line(17500, "lab_step", step="kill", target="g_c4"),
             _line(21000, "lab_step", step="join", target="g_c5")]  # inside the kill's window: chained again
    assert judged_deadlines(lines) == [("g", "pause", 17000, 21000 + 5000)]


def test_a_fault_open_at_the_deadline_moves_it_to_that_heal_and_one_never_healed_is_not_judged() -> None:
    lines = [_line(0, "fault_injected", fault="cut-zk", target="g_c1"),
             _line(500, "fault_injected", fault="kill-zk", target="2"),
             _line(1000, "fault_healed", fault="cut-zk", target="g_c1", session_timeout_ms=1000),
             _line(9000, "fault_healed", fault="kill-zk", target="", session_timeout_ms=1000)]
    assert judged_deadlines(lines) == [("g", "cut-zk", 1000, 9000 + 2000), ("g", "kill-zk", 9000, 11000)]
    lines = [_line(0, "fault_injected", fault="kill-broker"), _line(100, "fault_injected", fault="pause"),
             _line(200, "fault_healed", fault="pause", session_timeout_ms=1000)]
    assert judged_deadlines(lines) == []


def test_a_live_migration_moves_a_deadline_inside_it_to_its_end() -> None:
    """A migration is a disturbance that lasts: from its ``migrate`` step to the ``migration_ended`` step that
    leaves none running (a rollback started meanwhile writes its own end); one never ended leaves the heal unjudged."""
    expire = [_line(3500, "fault_injected", fault="expire", target="g_c2"),
              _line(3500, "fault_healed", fault="expire", target="g_c2", session_timeout_ms=3000)]
    migrate, rollback, ended = (_line(3200, "lab_step", step="migrate"), _line(5000, "lab_step", step="rollback"),
                                _line(9000, "lab_step", step="migration_ended"))
    assert judged_deadlines([migrate, *expire, ended]) == [("g", "expire", 3500, 9000 + 4000)]
    assert judged_deadlines([migrate, *expire, rollback, ended, _line(15000, "lab_step", step="migration_ended")]) \
        == [("g", "expire", 3500, 15000 + 4000)]
    assert judged_deadlines([migrate, *expire]) == []
    assert judged_deadlines([*expire, _line(20000, "lab_step", step="migrate")]) == [("g", "expire", 3500, 7500)]
