"""``zkconsumer compare`` end to end, shortened: ZooKeeper mode and coordinator mode under the same churn,
each run analysed on Spark, one table, a CSV, a JSON and a figure."""

from __future__ import annotations

import io
import json
from pathlib import Path

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
    timeline_of,
)
from zkconsumer.lab.compare_page import LabMark, NoTimeline, Timeline, lab_marks, page, series, timeline_figure
from zkconsumer.lab.variants import VARIANTS, Measure, NotApplicable
from zkconsumer.scenario.model import Step
from zkconsumer.scenario.nemesis import Invariant
from zkconsumer.scenario.plan import RunPlan


@pytest.mark.slow
def test_compare_runs_both_modes_and_writes_one_table(spark, tmp_path) -> None:
    plan = RunPlan(consumers=2, duration=8.0, rate=50.0, initial_records=50, session_timeout_ms=4000,
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
    assert f"page: {out / 'compare.html'}" in " ".join(buf.getvalue().split())
    assert all(r.summary["started_ms"] < r.summary["ended_ms"] for r in results)  # the series' end, below
    _the_page_opens_offline_with_a_row_per_variant(out, {r.name: r.summary for r in results})


def _the_page_opens_offline_with_a_row_per_variant(out, summaries: dict[str, dict]) -> None:
    """compare.html in a real browser: no console error, nothing fetched from the network, both panels of every
    variant drawn with their curves and the kill -9 marked, every report link resolving to a file."""
    from urllib.parse import unquote, urlparse

    from browser import chromium, open_page

    names = list(summaries)
    with chromium() as browser, open_page(browser, (out / "compare.html").as_uri()) as (page, log):
        page.wait_for_selector("#timeline .main-svg")
        titles = page.locator("#timeline .annotation-text").all_text_contents()
        assert titles == [f"{n}: {what}" for n in names for what in ("records per second",
                                                                      "partitions without an owner")], titles
        assert page.locator("#timeline g.cartesianlayer > g.subplot").count() == 2 * len(names)
        assert page.locator("#timeline g.trace.scatter").count() == 3 * len(names)  # rate, unowned, lab actions
        assert page.locator("#timeline .textpoint", has_text="kill -9 c1").count() == len(names)
        # each unowned series cut where its run's churn and catch-up ended, within a bucket (1 s): not at the lab
        # stopping every member after it
        ends = page.evaluate("document.getElementById('timeline')._fullData"  # the x arrays decoded
                             ".filter(t => t.yaxis !== 'y' && Number(t.yaxis.slice(1)) % 2 === 0)"
                             ".map(t => Number(t.x[t.x.length - 1]))")
        ended = [(s["ended_ms"] - s["started_ms"]) / 1000 for s in summaries.values()]
        assert all(e - 1 <= end <= e for end, e in zip(ends, ended, strict=True)), (ends, ended)
        assert page.locator("#measures tbody tr").count() == len(MEASURES) + len(Invariant)
        links = page.locator("#reports a").evaluate_all("links => links.map(a => a.href)")
        assert len(links) == len(names) and all(Path(unquote(urlparse(u).path)).is_file() for u in links), links
        hrefs = page.locator("#reports a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert hrefs == [f"{n}/report/report.html" for n in names]  # relative: the folder can move
        assert log.errors == [] and log.remote == []


@pytest.mark.slow
def test_kafkas_own_consumer_runs_as_a_variant_with_a_trace_rebuilt_from_its_log(spark, tmp_path) -> None:
    """Apache Kafka 0.8.2.2's high-level consumer, a JVM per member, in the same lab: a join, a graceful stop, a
    kill -9. Its trace comes from its log and its records; every share a member's trace says it owned is the Range
    assignment of a group it was in, as Kafka computed it, and the last is the one of the members left."""
    # the kill's rebalance comes one session (4 s) after it, plus Kafka's backoff: 6 s of room before the end; and
    # 11 s between the stop and the kill. A stop that lands in the middle of c1's rebalance (c3's join, late on a
    # loaded machine) waits for that rebalance to give up: Kafka's shutdown took 8,192 ms so in a CI run
    # (rebalance.max.retries 4 × backoff 2 s), and only then did c1's registration go. With 6 s, c2 was killed
    # first and never traced the two-member group.
    plan = RunPlan(consumers=2, duration=20.0, rate=50.0, initial_records=50, session_timeout_ms=4000,
                   commit_interval_ms=300, topics={"orders": 6, "payments": 2},
                   steps=[Step(1.0, "join", "c3"), Step(3.0, "stop", "c1"), Step(14.0, "kill", "c2")])
    out = tmp_path / "cmp"
    results = run_compare(plan, out, ["kafka-0.8.2.2"], Console(file=io.StringIO(), width=200), spark=spark)
    [result] = results
    m, summary = result.measures, result.summary
    assert summary["client"] == "kafka-0.8.2.2" and summary["malformed_trace_lines"] == 0
    assert m["lost"] == 0 and m["verify_ok"] and m["overlaps"] == 0, m
    # the start, c3's join, the stop, the kill: overlapping member rebalances count as one group rebalance, and
    # when the JVMs start slowly (a loaded machine) the start runs into c3's join; the shares below say the rest
    assert m["group_rebalances"] >= 2 and m["rebalance_ms_p50"] is not None, m
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

    # every share a member traced is Range over some group it was in, as Kafka computed it (which members start
    # first is the JVMs' race, so a member may start alone)
    names = ["lab_c1", "lab_c2", "lab_c3"]
    groups = [[n for i, n in enumerate(names) if mask >> i & 1] for mask in range(1, 8)]
    for member, done in dones.items():
        for ts, owned in done:
            assert any(member in g and owned == range_share(g, member) for g in groups), (member, ts, owned)
    # c2 was killed in a group with c3 (c1's stop waits out a rebalance it lands in, 8 s of Kafka's retries on a
    # loaded machine, so c2 may not have traced the two-member group before the kill); c3 ends alone
    assert dones["lab_c2"][-1][1] in (range_share(names, "lab_c2"), range_share(names[1:], "lab_c2"))
    killed_at = last_line["lab_c2"]
    assert [o for ts, o in dones["lab_c3"] if ts <= killed_at][-1] in (range_share(names, "lab_c3"),
                                                                        range_share(names[1:], "lab_c3"))
    assert dones["lab_c3"][-1][1] == range_share(["lab_c3"], "lab_c3")  # alone after c2's session expired


def test_the_workloads_schedule_what_they_say() -> None:
    from zkconsumer.scenario.plan import WORKLOADS

    rolling = RunPlan(consumers=3, duration=30.0, workload="rolling-restart").schedule()
    assert [(s.action, s.consumer) for s in rolling] == [("bounce", "c1"), ("bounce", "c2"), ("bounce", "c3")]
    assert all(0 < s.at < 30.0 for s in rolling) and [s.at for s in rolling] == sorted(s.at for s in rolling)
    scale = RunPlan(consumers=3, duration=30.0, workload="scale-out", topics={"a": 8, "b": 4}).schedule()
    assert [(s.action, s.consumer) for s in scale] == [("join", f"c{i}") for i in range(4, 9)]  # up to 8 members
    assert [s.action for s in RunPlan(workload="churn").schedule()] == ["join", "stop", "kill", "join"]
    with pytest.raises(ValueError, match="unknown workload"):
        RunPlan(workload="chaos").schedule()
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
    results = run_compare(RunPlan(), tmp_path, ["coordinator-kafka-3.9"], Console(file=buf, width=200),
                          analyze=False)
    assert results == [] and "skipped coordinator-kafka-3.9: Kafka 3.9.1's jars" in " ".join(buf.getvalue().split())
    with pytest.raises(ValueError, match="unknown variants"):
        run_compare(RunPlan(), tmp_path, ["eager-ish"], Console(file=io.StringIO()), analyze=False)


# --------------------------------------------------------------------------- the outputs, built from results
# Measures as the lab and Spark hand them over (the rolling restart of 2026-11-24, benchmarks/README.md): the
# figures that do not apply are there, as a run records them; "-" where nothing was counted.
_RUN = {
    "zookeeper-default": (7, 39, 118, 280, 3029, 215, 3, 0, 0, 0, 0, 411, 0, True),
    "zookeeper-kafka-0.8": (5, 684, 2081, 2188, 47391, 2032, 0, 0, 0, 0, 0, 627, 0, True),
    "coordinator": (6, 30, 618, 6042, 76011, 6042, 1, 0, 0, 0, 0, 76, 53, True),
    "coordinator-kafka-3.9": (6, 44, 452, 6055, 75616, 6055, 2, 0, 0, 0, 0, None, None, True),
    "cooperative-sticky": (11, 1089, 0.5, 6, 16780, 1097, 2, 0, 0, 0, 0, 42, 25, True),
    "consumer-protocol-kafka-4": (24, 104, 1.0, 19, 8934, 990, 0, 0, 0, 0, 0, 0.9, None, True),
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
        for label in ("two consumers on one partition at once", "records lost (never readable)",
                      "records unread when the run ended"):
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


# --------------------------------------------------------------------------- compare.html, built from frames
def _activity(rates: list[float], unowned: list[int], start: int = 1_000_000) -> pd.DataFrame:
    """An activity table as the analysis writes it: one group, 1 s buckets from ``start``."""
    n = len(rates)
    return pd.DataFrame({"group": ["lab"] * n, "ts": [start + 1000 * i for i in range(n)], "bucket_ms": [1000] * n,
                         "deliveries": [int(r) for r in rates], "records_per_s": rates,
                         "owned": [6 - u for u in unowned], "unowned": unowned})


def _timelines() -> list[Timeline]:
    kill = LabMark(1_003_000, "kill -9 c1")
    return [Timeline("zookeeper-kafka-0.8", _activity([50.0, 50, 0, 0, 0, 50], [0, 0, 6, 6, 6, 0]), (kill,),
                     started_ms=999_000, report="zookeeper-kafka-0.8/report/report.html"),
            Timeline("zookeeper-default", _activity([50.0, 50, 50, 40, 50, 50], [0, 0, 0, 2, 0, 0]), (kill,),
                     started_ms=999_000, report="zookeeper-default/report/report.html"),
            Timeline("coordinator", None, missing=NoTimeline.NOT_ANALYSED)]


def test_the_timeline_has_a_row_per_variant_with_both_series_on_one_time_axis() -> None:
    fig = timeline_figure(_timelines())
    by_axes = {}
    for trace in fig.data:
        by_axes.setdefault((trace.xaxis, trace.yaxis), []).append(trace)
    [rate] = [t for t in by_axes[("x", "y")] if t.name == "zookeeper-kafka-0.8"]
    [unowned] = by_axes[("x2", "y2")]
    # seconds since the lab's start; the last bucket's rate is held to its end
    assert list(rate.x) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0] and list(rate.y) == [50, 50, 0, 0, 0, 50, 50]
    assert list(unowned.x) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0] and list(unowned.y) == [0, 0, 6, 6, 6, 0]
    [marks] = [t for t in by_axes[("x", "y")] if t.name == "lab actions"]
    assert list(marks.text) == ["kill -9 c1"] and list(marks.x) == [4.0]
    assert [t.name for t in by_axes[("x3", "y3")]] == ["zookeeper-default", "lab actions"]
    assert [t.name for t in by_axes[("x4", "y4")]] == ["zookeeper-default"]
    assert not any(t.xaxis in ("x5", "x6") for t in fig.data)  # the run without a table has its row, and a note
    assert "coordinator: " + NoTimeline.NOT_ANALYSED.value in [a.text for a in fig.layout.annotations]
    matches = [fig.layout[f"xaxis{i if i > 1 else ''}"].matches for i in range(1, 7)]
    assert matches.count(None) == 1 and len(set(matches) - {None}) == 1  # zoom one panel, all follow


def test_each_series_ends_where_the_labs_churn_and_catch_up_did() -> None:
    """The lab stops every member after its run: the last bucket, sampled after that, has every partition unowned;
    cut at ``ended_ms`` (summary.json), it is gone from the series, the figure and so the page."""
    activity = _activity([50.0, 50, 40, 0], [0, 0, 0, 6])  # buckets end at 1_001_000 ... 1_004_000
    assert list(series(activity, 1_003_500)["unowned"]) == [0, 0, 0]
    assert list(series(activity, 1_003_000)["unowned"]) == [0, 0, 0]  # a bucket ending at ended_ms stays
    assert list(series(activity)["unowned"]) == [0, 0, 0, 6]
    cut = Timeline("zookeeper-default", activity, started_ms=1_000_000, ended_ms=1_003_500)
    [rate, unowned] = timeline_figure([cut]).data
    assert list(unowned.x) == [1.0, 2.0, 3.0] and max(unowned.y) == 0 and list(rate.x)[-1] == 3.0
    results = _results()[:1]
    cells = table_cells(results)
    text = page("t", [cut], cells.header, cells.rows, cells.footnotes)
    assert "Each series ends where the lab's churn and the group's catch-up did" in text
    assert "Each series ends" not in page("t", _timelines()[:1], cells.header, cells.rows, cells.footnotes)


def _tags(text: str) -> list[tuple[str, dict[str, str]]]:
    """The page's tags and their attributes (a script's text is not parsed for tags)."""
    from html.parser import HTMLParser

    found = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list) -> None:
            found.append((tag, {k: v or "" for k, v in attrs}))

    Tags().feed(text)
    return found


def test_the_page_holds_the_timeline_the_table_with_n_a_and_relative_links() -> None:
    results = _results()[:2]
    cells = table_cells(results)
    timelines = _timelines()[:2]
    text = page("workload churn, 3 consumers, 30s", timelines, cells.header, cells.rows, cells.footnotes)
    # plotly.js inline, once: no script, stylesheet or font from the network (the browser test checks requests)
    tags = _tags(text)
    assert [a for _, a in tags if a.get("src") or a.get("href", "").startswith(("http:", "https:", "//"))] == []
    assert text.count("* plotly.js v") == 1 and text.count("Plotly.newPlot") == 1  # the library's banner, the plot
    assert '<a href="zookeeper-default/report/report.html">zookeeper-default</a>' in text  # the column's head
    assert '<li data-variant="zookeeper-kafka-0.8"><a href="zookeeper-kafka-0.8/report/report.html">' in text
    assert "the lab&#x27;s start" in text
    without = [Timeline("zookeeper-default", None, missing=NoTimeline.NOT_ANALYSED),
               Timeline("coordinator", _activity([], [])), Timeline("cooperative-sticky", None)]
    results = [VariantResult.of(n, {}, {}) for n in ("zookeeper-default", "coordinator", "cooperative-sticky")]
    cells = table_cells(results)
    text = page("t", without, cells.header, cells.rows, cells.footnotes)
    assert f"zookeeper-default: {NoTimeline.NOT_ANALYSED.value}</li>" in text
    assert f"coordinator: {NoTimeline.EMPTY.value}</li>" in text
    assert f"cooperative-sticky: {NoTimeline.NO_TABLE.value}</li>" in text
    assert '<td class="na">n/a [1]</td>' in text and "[1] cooperative-sticky: " in text
    assert "zookeeper-default: no report (not analysed)" in text


def test_the_labs_actions_come_from_its_trace(tmp_path) -> None:
    lines = [json.dumps({"ts": 20, "event": "lab_step", "step": "kill", "target": "lab_c1"}),
             json.dumps({"ts": 10, "event": "lab_step", "step": "join", "target": "lab_c3"}),
             json.dumps({"ts": 30, "event": "fault_injected", "fault": "pause", "target": "lab_c2"}),
             json.dumps({"ts": 40, "event": "fault_healed", "fault": "pause", "target": "lab_c2"}),
             json.dumps({"ts": 50, "event": "lab_step", "step": "create-topic", "target": ""}),
             json.dumps({"ts": 60, "event": "rebalance_done"}), "{torn"]
    assert lab_marks(lines) == [LabMark(10, "join c3"), LabMark(20, "kill -9 c1"), LabMark(30, "pause c2"),
                                LabMark(40, "healed: pause c2"), LabMark(50, "create-topic")]
    # a run's row, read back: its table, its lab.jsonl, its start, its report relative to compare.html
    run = tmp_path / "zookeeper-default"
    (run / "traces").mkdir(parents=True)
    (run / "traces" / "lab.jsonl").write_text("\n".join(lines) + "\n")
    (run / "report" / "tables").mkdir(parents=True)
    result = VariantResult.of("zookeeper-default", {"trace_dir": str(run / "traces"), "started_ms": 5,
                                                    "ended_ms": 70}, {})
    row = timeline_of(result, run / "report", tmp_path)
    assert row.why_none is NoTimeline.NO_TABLE and row.report is None and len(row.marks) == 5 and row.t0 == 5
    assert row.ended_ms == 70
    _activity([1.0], [0]).to_parquet(run / "report" / "tables" / "activity.parquet")
    (run / "report" / "report.html").write_text("<html></html>")
    row = timeline_of(result, run / "report", tmp_path)
    assert row.why_none is None and len(row.activity) == 1 and row.report == "zookeeper-default/report/report.html"
    assert timeline_of(result, None, tmp_path).why_none is NoTimeline.NOT_ANALYSED
