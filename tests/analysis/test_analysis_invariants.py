"""The five lab invariants on hand-built traces: a clean run holds them all; each breach is found and named."""

from __future__ import annotations

import io

from rich.console import Console

from zkconsumer.analysis.invariants import judged_deadlines
from zkconsumer.analysis.pipeline import run_analysis


def lab_line(tb, ts: int, event: str, **fields) -> None:
    tb.emit("lab", ts, event, **fields)


def test_a_clean_faulted_run_holds_every_invariant(spark, trace_builder, tmp_path) -> None:
    tb = trace_builder
    tb.rebalance("g_a", 100, 1, ["t-0", "t-1"], cause="startup")
    for o in range(3):
        tb.deliver("g_a", 110 + o, "t", 0, o)
    tb.commit("g_a", 120, "t", 0, 2)  # offset 2 not committed yet: its redelivery is at-least-once
    lab_line(tb, 150, "fault_injected", fault="kill", target="g_a")
    tb.emit("g_b", 160, "session_expired")  # an earlier session of g_b: it does not end what g_b owns later
    tb.rebalance("g_b", 200, 1, ["t-0", "t-1"], cause="session_expired")
    tb.deliver("g_b", 210, "t", 0, 2)
    tb.deliver("g_b", 211, "t", 0, 3)
    tb.commit("g_b", 220, "t", 0, 4)
    lab_line(tb, 230, "fault_healed", fault="kill", session_timeout_ms=1000)
    tb.deliver("g_b", 3000, "t", 1, 0)
    tb.commit("g_b", 3001, "t", 1, 1)
    tb.emit("g_b", 3002, "shutdown", committed=True)
    res = run_analysis(spark, str(tb.dir), tmp_path / "out", Console(file=io.StringIO()), from_zero=True)
    inv = res.invariants
    assert inv.ok, inv.violations()
    assert inv.duplicates == 1 and inv.duplicates_committed == 0
    assert res.summary["consumers"] == 2  # the lab's own file is not a consumer
    [fault] = inv.faults
    assert fault["fault"] == "kill" and fault["target"] == "g_a" and fault["unowned_at_deadline"] == 0
    assert fault["deadline"] == 230 + 1000 + 1000 and fault["partitions"] == 2
    assert "Invariants" in res.report_md.read_text()


def test_each_broken_invariant_is_named(spark, trace_builder, tmp_path) -> None:
    tb = trace_builder
    tb.rebalance("g_a", 100, 1, ["t-0"], cause="startup")
    for o in range(5):
        tb.deliver("g_a", 110 + o, "t", 0, o)
    tb.commit("g_a", 120, "t", 0, 5)
    lab_line(tb, 150, "fault_injected", fault="cut", target="g_a")
    tb.emit("g_a", 160, "connection_suspended")
    tb.rebalance("g_b", 200, 1, ["t-0"], cause="ids_changed")
    tb.deliver("g_b", 210, "t", 0, 3)  # committed at 120 already: a redelivery of committed work
    tb.deliver("g_a", 211, "t", 0, 5)  # a still delivers: two live owners
    tb.deliver("g_b", 212, "t", 0, 7)  # 5..6 by b never: 6 lost
    tb.commit("g_b", 220, "t", 0, 4)  # below 5: backwards
    lab_line(tb, 230, "fault_healed", fault="cut", session_timeout_ms=1000)
    tb.emit("g_a", 240, "session_expired")
    tb.emit("g_b", 250, "shutdown", committed=True)  # nobody owns t-0 at 2230
    res = run_analysis(spark, str(tb.dir), tmp_path / "out", Console(file=io.StringIO()), from_zero=True,
                       plots_and_report=False)
    inv = res.invariants
    assert not inv.ok
    assert inv.lost == 1 and inv.overlaps == 1 and inv.duplicates_committed == 1 and inv.commits_backwards == 1
    assert inv.unowned_after_heal == 1
    assert len(inv.violations()) == 5
    assert res.report_md is None


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


def test_a_kill_after_a_heal_is_judged_on_the_settled_group(spark, trace_builder, tmp_path) -> None:
    """At the pause's own deadline the killed member still owns t-0 (its session has not expired yet); judged
    from the kill, the survivor owns it."""
    tb = trace_builder
    tb.rebalance("g_a", 100, 1, ["t-0"], cause="startup")
    tb.deliver("g_a", 110, "t", 0, 0)
    lab_line(tb, 200, "fault_injected", fault="pause", target="g_a")
    lab_line(tb, 300, "fault_healed", fault="pause", target="g_a", session_timeout_ms=1000)
    lab_line(tb, 2000, "lab_step", step="kill", target="g_a")  # g_a writes nothing more: owns t-0 to its last line
    tb.deliver("g_a", 2100, "t", 0, 1)
    tb.rebalance("g_b", 3500, 1, ["t-0"], cause="ids_changed")
    tb.deliver("g_b", 3600, "t", 0, 2)
    tb.emit("g_b", 5000, "shutdown", committed=False)
    res = run_analysis(spark, str(tb.dir), tmp_path / "out", Console(file=io.StringIO()), from_zero=True,
                       plots_and_report=False)
    [fault] = res.invariants.faults
    assert fault["deadline"] == 2000 + 2000 and fault["unowned_at_deadline"] == 0
    assert res.invariants.ok, res.invariants.violations()
