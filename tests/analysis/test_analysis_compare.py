"""``zkconsumer compare`` end to end, shortened: ZooKeeper mode and coordinator mode under the same churn,
each run analysed on Spark, one table, a CSV, a JSON and a figure."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console

from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.lab.compare import (
    MEASURES,
    VariantResult,
    csv_frame,
    figure,
    json_document,
    render_table,
    run_compare,
    table_cells,
)
from zkconsumer.lab.nemesis import Invariant
from zkconsumer.lab.runner import LabPlan, Step
from zkconsumer.lab.variants import VARIANTS, Measure, NotApplicable


@pytest.mark.slow
def test_compare_runs_both_modes_and_writes_one_table(spark, tmp_path) -> None:
    plan = LabPlan(consumers=2, duration=8.0, rate=50.0, initial_records=50, session_timeout_ms=4000,
                   commit_interval_ms=300, initial_rebalance_delay_ms=0,
                   steps=[Step(1.0, "join", "c3"), Step(4.0, "kill", "c1")])
    out = tmp_path / "cmp"
    buf = io.StringIO()
    results = run_compare(plan, out, ["zookeeper-default", "coordinator"], Console(file=buf, width=200),
                          spark=spark)
    by_name = {r.name: r.measures for r in results}
    for name, m in by_name.items():
        assert m["lost"] == 0 and m["verify_ok"], (name, m)
        assert m["group_rebalances"] >= 2 and m["rebalance_ms_p50"] is not None, (name, m)
        assert m["overlaps"] == 0
    # the modes differ where they must: a 0.8 group talks to ZooKeeper, a coordinator group to the broker
    assert by_name["zookeeper-default"]["zookeeper_requests_per_rebalance"] > \
        by_name["coordinator"]["zookeeper_requests_per_rebalance"]
    assert by_name["coordinator"]["group_requests_per_rebalance"] > \
        by_name["zookeeper-default"]["group_requests_per_rebalance"]
    table = pd.read_csv(out / "compare.csv")
    assert list(table["measure"]) == [label for _, label in MEASURES] + [f"invariant: {i.claim}" for i in Invariant]
    document = json.loads((out / "compare.json").read_text())
    assert set(document) == {"zookeeper-default", "coordinator"}
    # each run judged by the analysis' invariants: a join and a kill -9 break none
    assert all(document[v]["invariants"] == {i.value: 0 for i in Invariant} for v in document), document
    assert (out / "compare.png").stat().st_size > 10_000
    assert "rebalance latency p50" in buf.getvalue()


@pytest.mark.slow
def test_kafkas_own_consumer_runs_as_a_variant_with_a_trace_rebuilt_from_its_log(spark, tmp_path) -> None:
    """Apache Kafka 0.8.2.2's high-level consumer, a JVM per member, in the same lab: a join, a graceful stop, a
    kill -9. Its trace comes from its log and its records; the last share each member's trace says it owned is the
    Range assignment of the members left, as Kafka computed it."""
    # the kill's rebalance comes one session (4 s) after it, plus Kafka's backoff: 6 s of room before the end
    plan = LabPlan(consumers=2, duration=11.0, rate=50.0, initial_records=50, session_timeout_ms=4000,
                   commit_interval_ms=300, topics={"orders": 6, "payments": 2},
                   steps=[Step(1.0, "join", "c3"), Step(3.0, "stop", "c1"), Step(5.0, "kill", "c2")])
    out = tmp_path / "cmp"
    results = run_compare(plan, out, ["kafka-0.8.2.2"], Console(file=io.StringIO(), width=200), spark=spark)
    [result] = results
    m, summary = result.measures, result.summary
    assert summary["client"] == "kafka-0.8.2.2" and summary["malformed_trace_lines"] == 0
    assert m["lost"] == 0 and m["verify_ok"] and m["overlaps"] == 0, m
    assert m["group_rebalances"] >= 3 and m["rebalance_ms_p50"] is not None, m
    assert summary["unique_delivered"] == summary["produced"]
    traces = out / "kafka-0.8.2.2" / "traces"
    dones: dict[str, list[tuple[int, list[str]]]] = {}
    last_line: dict[str, int] = {}
    for path in traces.glob("lab_*.jsonl"):  # the members' (lab.jsonl holds the lab's own steps)
        events = [json.loads(x) for x in path.read_text().splitlines()]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        last_line[events[0]["consumer"]] = max(e["ts"] for e in events)
        dones[events[0]["consumer"]] = [(e["ts"], e["owned"]) for e in events if e["event"] == "rebalance_done"]
    assert set(dones) == {"lab_c1", "lab_c2", "lab_c3"}

    def range_share(members: list[str], member: str) -> list[str]:
        ctx = AssignmentContext({c: {"orders": 1, "payments": 1} for c in members},
                                {"orders": range(6), "payments": range(2)})
        return sorted(f"{tp.topic}-{tp.partition}" for tp in assign("range", ctx).for_consumer(member))

    # between c1's stop and c2's kill the group was c2 and c3: what each traced last in that window
    killed_at = last_line["lab_c2"]
    assert dones["lab_c2"][-1][1] == range_share(["lab_c2", "lab_c3"], "lab_c2")
    assert [o for ts, o in dones["lab_c3"] if ts <= killed_at][-1] == range_share(["lab_c2", "lab_c3"], "lab_c3")
    assert dones["lab_c3"][-1][1] == range_share(["lab_c3"], "lab_c3")  # alone after c2's session expired

def test_the_workloads_schedule_what_they_say() -> None:
    from zkconsumer.lab.runner import WORKLOADS

    rolling = LabPlan(consumers=3, duration=30.0, workload="rolling-restart").schedule()
    assert [(s.action, s.consumer) for s in rolling] == [("bounce", "c1"), ("bounce", "c2"), ("bounce", "c3")]
    assert all(0 < s.at < 30.0 for s in rolling) and [s.at for s in rolling] == sorted(s.at for s in rolling)
    scale = LabPlan(consumers=3, duration=30.0, workload="scale-out", topics={"a": 8, "b": 4}).schedule()
    assert [(s.action, s.consumer) for s in scale] == [("join", f"c{i}") for i in range(4, 9)]  # up to 8 members
    assert [s.action for s in LabPlan(workload="churn").schedule()] == ["join", "stop", "kill", "join"]
    with pytest.raises(ValueError, match="unknown workload"):
        LabPlan(workload="chaos").schedule()
    assert WORKLOADS == ("churn", "rolling-restart", "scale-out")


def test_stop_the_world_is_the_longest_gap_in_the_groups_deliveries(tmp_path) -> None:
    from zkconsumer.lab.compare import stop_the_world_ms

    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"event": "record_delivered", "ts": t}) + "\n"
                                              for t in (1000, 1010, 1500)))
    (tmp_path / "b.jsonl").write_text(json.dumps({"event": "record_delivered", "ts": 1200}) + "\n"
                                      + json.dumps({"event": "rebalance_done", "ts": 5000}) + "\n" + "{torn")
    assert stop_the_world_ms(tmp_path) == 300  # 1200 → 1500; the rebalance event and the torn line do not count
    assert stop_the_world_ms(tmp_path / "missing") is None


def test_a_variant_this_machine_cannot_run_is_skipped_with_its_reason(monkeypatch, tmp_path) -> None:
    from zkconsumer.lab import variants

    monkeypatch.setattr(variants, "cached", lambda version: None)
    monkeypatch.setattr(variants.shutil, "which", lambda name: None)
    reason = variants.unavailable("coordinator-kafka-3.9")
    assert reason is not None and "Kafka 3.9.1" in reason and "Maven" in reason
    assert variants.unavailable("coordinator") is None
    buf = io.StringIO()
    results = run_compare(LabPlan(), tmp_path, ["coordinator-kafka-3.9"], Console(file=buf, width=200),
                          analyze=False)
    assert results == [] and "skipped coordinator-kafka-3.9: Kafka 3.9.1's jars" in " ".join(buf.getvalue().split())
    with pytest.raises(ValueError, match="unknown variants"):
        run_compare(LabPlan(), tmp_path, ["eager-ish"], Console(file=io.StringIO()), analyze=False)


# --------------------------------------------------------------------------- the outputs, built from results
# Measures as the lab and Spark hand them over (the rolling restart of 2026-11-24, benchmarks/README.md): the
# figures that do not apply are there, as a run records them; "-" where nothing was counted.
_RUN = {
    "zookeeper-default": (7, 39, 118, 280, 3029, 215, 3, 0, 0, 0, 411, 0, True),
    "zookeeper-kafka-0.8": (5, 684, 2081, 2188, 47391, 2032, 0, 0, 0, 0, 627, 0, True),
    "coordinator": (6, 30, 618, 6042, 76011, 6042, 1, 0, 0, 0, 76, 53, True),
    "coordinator-kafka-3.9": (6, 44, 452, 6055, 75616, 6055, 2, 0, 0, 0, None, None, True),
    "cooperative-sticky": (11, 1089, 0.5, 6, 16780, 1097, 2, 0, 0, 0, 42, 25, True),
    "consumer-protocol-kafka-4": (24, 104, 1.0, 19, 8934, 990, 0, 0, 0, 0, 0.9, None, True),
}


def _results() -> list[VariantResult]:
    return [VariantResult.of(name, {"client": "x"}, dict(zip((m.value for m in Measure), values, strict=True)))
            for name, values in _RUN.items()]


def test_which_measures_do_not_apply_is_part_of_each_variants_definition() -> None:
    latency = {Measure.REBALANCE_MS_P50: NotApplicable.NO_HOOK_BEFORE_ASSIGNMENT,
               Measure.REBALANCE_MS_MAX: NotApplicable.NO_HOOK_BEFORE_ASSIGNMENT}
    assert {n: dict(v.not_applicable) for n, v in VARIANTS.items() if v.not_applicable} == {
        "cooperative-sticky": latency,
        "consumer-protocol-kafka-4": {**latency, Measure.ZOOKEEPER_REQUESTS_PER_REBALANCE: NotApplicable.NO_ZOOKEEPER}}
    # every group on Kafka 4 runs without ZooKeeper
    assert all(dict(v.not_applicable).get(Measure.ZOOKEEPER_REQUESTS_PER_REBALANCE) is NotApplicable.NO_ZOOKEEPER
               for v in VARIANTS.values() if v.kraft)
    assert MEASURES[2] == ("rebalance_ms_p50", "rebalance latency p50 (ms)")


def test_the_table_shows_n_a_with_its_reason_where_a_measure_does_not_apply() -> None:
    results = _results()
    cells = table_cells(results)
    by_label = {row[0]: dict(zip(cells.header[1:], row[1:], strict=True)) for row in cells.rows}
    p50 = by_label["rebalance latency p50 (ms)"]
    assert p50["cooperative-sticky"] == p50["consumer-protocol-kafka-4"] == "n/a [1]"
    assert p50["zookeeper-default"] == "118"
    assert by_label["rebalance latency max (ms)"]["cooperative-sticky"] == "n/a [1]"
    zk = by_label["ZooKeeper requests per rebalance"]
    assert zk["consumer-protocol-kafka-4"] == "n/a [2]" and zk["coordinator"] == "76"
    assert zk["coordinator-kafka-3.9"] == "-"  # not counted is not "does not apply"
    assert by_label["broker group requests per rebalance"]["consumer-protocol-kafka-4"] == "-"
    assert cells.footnotes == [
        f"[1] cooperative-sticky, consumer-protocol-kafka-4: {NotApplicable.NO_HOOK_BEFORE_ASSIGNMENT.value}",
        f"[2] consumer-protocol-kafka-4: {NotApplicable.NO_ZOOKEEPER.value}",
        "- not counted: a server the lab did not start itself, or a run not analysed"]
    buf = io.StringIO()
    Console(file=buf, width=300).print(render_table(results, "t"))
    printed = buf.getvalue()
    assert "n/a [1]" in printed and "n/a [2]" in printed and "[2] consumer-protocol-kafka-4: the group uses no" \
        in printed  # the marks are text, not Rich markup
    assert " 0.5 " not in printed and " 0.9 " not in printed


def test_csv_and_json_carry_no_number_where_a_measure_does_not_apply(tmp_path) -> None:
    results = _results()
    csv_frame(results).to_csv(tmp_path / "compare.csv", index=False)
    table = pd.read_csv(tmp_path / "compare.csv").set_index("measure")
    assert pd.isna(table.loc["rebalance latency p50 (ms)", "cooperative-sticky"])
    assert pd.isna(table.loc["ZooKeeper requests per rebalance", "consumer-protocol-kafka-4"])
    assert float(table.loc["rebalance latency p50 (ms)", "zookeeper-default"]) == 118
    doc = json.loads(json.dumps(json_document(results)))
    kip848 = doc["consumer-protocol-kafka-4"]
    assert kip848["measures"]["rebalance_ms_p50"] is None and kip848["measures"]["zookeeper_requests_per_rebalance"] \
        is None and kip848["measures"]["group_rebalances"] == 24
    assert kip848["not_applicable"]["zookeeper_requests_per_rebalance"] == NotApplicable.NO_ZOOKEEPER.value
    assert doc["zookeeper-default"]["not_applicable"] == {} and doc["zookeeper-default"]["summary"] == {"client": "x"}


def test_the_figure_says_0_in_every_variant_and_draws_no_bar_for_n_a() -> None:
    fig = figure(_results())
    try:
        panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
        for label in ("two consumers on one partition at once", "records lost"):
            ax = panels[label]
            assert [t.get_text() for t in ax.texts] == ["0 in every variant"] and not ax.patches, label
        p50 = panels["rebalance latency p50 (ms)"]
        assert [round(b.get_height(), 1) for b in p50.patches] == [118, 2081, 618, 452]  # no bar for n/a
        assert [t.get_text() for t in p50.texts] == ["n/a", "n/a"]
        zk = panels["ZooKeeper requests per rebalance"]
        assert [t.get_text() for t in zk.texts] == ["-", "n/a"] and len(zk.patches) == 4
    finally:
        from zkconsumer.analysis.plots import plt

        plt.close(fig)
