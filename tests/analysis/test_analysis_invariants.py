"""The five lab invariants on hand-built traces: a clean run holds them all; each breach is found and named."""

from __future__ import annotations

import io

from rich.console import Console

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
