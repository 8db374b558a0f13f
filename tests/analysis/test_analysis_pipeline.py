"""``zkconsumer analyze`` end to end on a hand-built trace whose every anomaly is known in advance.

The story (group g, topic t, partitions t-0 and t-1):
  1000  A starts alone and owns both partitions; delivers t-0 0..4 and t-1 0..2, commits t-0=3, t-1=2.
  2000  B joins (one claim conflict, two attempts); A releases both, keeps t-0; B gets t-1.
        A redelivers t-0 3,4 (after its commit), skips t-0 7; B redelivers t-1 2; A's zombie fetcher
        delivers t-1 3 while B owns it (overlap + duplicate); B commits t-1=9 but never delivered 4,5,7,8.
  3000  C joins and is killed mid-rebalance (no shutdown); A and B rebalance; A shuts down, B never does.
Plus four malformed lines at known places.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from browser import remote_references
from plotly.io.json import to_json_plotly
from rich.console import Console

import zkconsumer.cli.analyze as analyze_cli
from zkconsumer.cli import main


def build_story(tb) -> dict[str, int]:
    bad: dict[str, int] = {}
    tb.emit("A", 1000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance("A", 1000, 1, ["t-0", "t-1"], cause="startup", done_ts=1010)
    for i in range(5):
        tb.deliver("A", 1100 + i, "t", 0, i)
    for i in range(3):
        tb.deliver("A", 1100 + i, "t", 1, i)
    tb.commit("A", 1105, "t", 0, 3)
    tb.commit("A", 1105, "t", 1, 2)
    bad["A.jsonl:invalid"] = tb.raw("A", "{not json")

    tb.emit("B", 2000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance("B", 2000, 1, ["t-1"], cause="startup", conflicts=1, done_ts=2020)
    tb.rebalance("A", 2001, 2, ["t-0"], released=["t-0", "t-1"], done_ts=2015)
    for ts, off in [(2100, 3), (2101, 4), (2102, 5), (2103, 6), (2104, 8)]:
        tb.deliver("A", ts, "t", 0, off)
    tb.deliver("A", 2102, "t", 1, 3)  # zombie: A no longer owns t-1
    bad["A.jsonl:missing"] = tb.raw("A", '{"v":1,"ts":2106,"event":"record_delivered","group":"g","consumer":"A",'
                                         '"seq":99,"topic":"t","partition":0,"thread":"A-0"}')
    bad["A.jsonl:unknown"] = tb.raw("A", '{"v":1,"ts":2107,"event":"exploded","group":"g","consumer":"A","seq":100}')
    tb.commit("A", 2105, "t", 0, 5)
    for ts, off in [(2100, 2), (2101, 3), (2110, 6)]:
        tb.deliver("B", ts, "t", 1, off)
    tb.commit("B", 2111, "t", 1, 9)
    bad["B.jsonl:empty"] = tb.raw("B", "")

    tb.emit("C", 3000, "registered", subscription={"t": 1}, pattern="static")
    tb.emit("C", 3000, "rebalance_triggered", cause="startup")
    tb.emit("C", 3001, "attempt_started", rebalance=1, attempt=1, ids_cversion=3)  # then: kill -9
    tb.rebalance("A", 3001, 3, ["t-0"], released=["t-0"], done_ts=3010)
    tb.rebalance("B", 3001, 2, ["t-1"], released=["t-1"], done_ts=3012)
    tb.emit("A", 4000, "shutdown", committed=True)
    tb.commit("B", 3200, "t", 1, 9)
    return bad


@pytest.fixture(scope="module")
def analyzed(spark, tmp_path_factory, trace_builder_class) -> tuple[Path, dict[str, int], str]:
    """Run the CLI once for the module (Spark jobs cost seconds); tests check its files."""
    root = tmp_path_factory.mktemp("story")
    tb = trace_builder_class(root / "traces")
    bad = build_story(tb)
    out = root / "report"
    buf = io.StringIO()
    saved = analyze_cli.console
    analyze_cli.console = Console(file=buf, width=200)
    try:
        assert main(["analyze", str(tb.dir), "--out", str(out), "--master", "local[2]"]) == 0
    finally:
        analyze_cli.console = saved
    return out, bad, buf.getvalue()


def table(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / "tables" / f"{name}.parquet")


def test_writes_every_file(analyzed):
    out, _, _ = analyzed
    for name in ("group_rebalances", "consumer_rebalances", "unowned", "ownership", "partitions", "duplicates",
                 "lost_offsets", "overlaps", "stints", "consumers", "bad_lines"):
        assert (out / "tables" / f"{name}.parquet").is_dir(), name
        assert (out / "tables" / f"{name}.csv").is_file(), name
    for png in ("ownership", "rebalance_duration_cdf", "duplicates_per_rebalance"):
        assert (out / "img" / f"{png}.png").stat().st_size > 1000
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    # report.md keeps the PNGs; report.html stands alone: the timeline is interactive, the other PNGs embedded
    assert "img/ownership.png" in md and "img/ownership.png" not in html
    assert "## Invariants" in md  # what test_sim_checkers_agree.py's traces judge, in the report
    assert html.count('<img src="data:image/png;base64,') == 2 and 'class="plotly-graph-div"' in html
    assert remote_references(html) == []
    assert "tables/duplicates.csv" in md and 'href="tables/duplicates.csv"' in html
    assert not (out / "_work").exists()


def test_group_rebalances(analyzed):
    g = table(analyzed[0], "group_rebalances").set_index("rebalance_id")
    assert list(g.index) == [1, 2, 3]
    assert list(g["start"]) == [1000, 2000, 3000]
    assert list(g["end"]) == [1010, 2020, 3012]
    assert list(g["duration_ms"]) == [10, 20, 12]
    assert list(g["consumers"]) == [1, 2, 3]
    assert list(g["attempts"]) == [1, 3, 3]
    assert list(g["failed_claims"]) == [0, 1, 0]
    assert list(g["partitions_moved"]) == [0, 1, 0]
    assert list(g["partitions_newly_owned"]) == [2, 0, 0]
    assert list(g["incomplete_consumers"]) == [0, 0, 1]
    assert list(g["max_unowned_ms"]) == [10, 17, 9]


def test_unowned_time_per_partition(analyzed):
    u = table(analyzed[0], "unowned")
    got = {(r.rebalance_id, r.partition): r.unowned_ms for r in u.itertuples()}
    assert got == {(1, 0): 10, (1, 1): 10, (2, 0): 12, (2, 1): 17, (3, 0): 7, (3, 1): 9}


def test_ownership_timeline(analyzed):
    o = table(analyzed[0], "ownership").sort_values(["partition", "owned_from"])
    got = [(r.partition, r.consumer, r.owned_from, r.owned_to, r.end_reason) for r in o.itertuples()]
    assert got == [
        (0, "A", 1010, 2003, "released"), (0, "A", 2015, 3003, "released"), (0, "A", 3010, 4000, "shutdown"),
        (1, "A", 1010, 2003, "released"), (1, "B", 2020, 3003, "released"),
        (1, "B", 3012, 3200, "last line (no shutdown)"),
    ]


def test_duplicates_with_their_rebalance(analyzed):
    d = table(analyzed[0], "duplicates")
    got = sorted((r.partition, r.offset, r.previous_consumer, r.duplicate_consumer, r.duplicate_ts, r.rebalance_id)
                 for r in d.itertuples())
    assert got == [(0, 3, "A", "A", 2100, 2), (0, 4, "A", "A", 2101, 2),
                   (1, 2, "A", "B", 2100, 2), (1, 3, "B", "A", 2102, 2)]


def test_duplicates_know_whether_they_were_already_committed(analyzed, spark):
    d = table(analyzed[0], "duplicates")
    # every redelivery of the story is of an offset not yet committed when it came again
    assert sorted((r.partition, r.offset, r.committed_before) for r in d.itertuples()) == [
        (0, 3, 3), (0, 4, 3), (1, 2, 2), (1, 3, 2)]
    assert d["inside_uncommitted"].all()
    from zkconsumer.analysis.partitions import committed_at

    dups = spark.createDataFrame([("g", "t", 0, 5, 300), ("g", "t", 0, 9, 300), ("g", "t", 0, 2, 100)],
                                 "group string, topic string, partition long, offset long, duplicate_ts long")
    commits = spark.createDataFrame([("g", "t", 0, 8, 200), ("g", "t", 0, 3, 50), ("g", "t", 1, 99, 10)],
                                    "group string, topic string, partition long, offset long, ts long")
    got = sorted((r.offset, r.committed_before, r.inside_uncommitted) for r in committed_at(dups, commits).collect())
    # offset 5 came again after 8 was committed: a consumer resumed below a commit
    assert got == [(2, 3, False), (5, 8, False), (9, 8, True)]


def test_lost_offsets_and_gaps(analyzed):
    lost = table(analyzed[0], "lost_offsets")
    got = sorted((r.partition, r.from_offset, r.to_offset, r.count, r.kind) for r in lost.itertuples())
    assert got == [(0, 7, 7, 1, "gap"), (1, 4, 5, 2, "below_committed"), (1, 7, 8, 2, "below_committed")]


def test_overlap(analyzed):
    ov = table(analyzed[0], "overlaps")
    got = [(r.partition, r.consumer_a, r.consumer_b, r.overlap_from, r.overlap_to, r.rebalance_id)
           for r in ov.itertuples()]
    assert got == [(1, "A", "B", 2102, 2102, 2)]


def test_partition_summary(analyzed):
    p = table(analyzed[0], "partitions").set_index("partition")
    assert list(p["duplicate_deliveries"]) == [2, 2]
    assert list(p["lost_gap"]) == [1, 0]
    assert list(p["lost_below_committed"]) == [0, 4]
    assert list(p["committed"]) == [5, 9]
    assert list(p["overlaps"]) == [0, 1]


def test_consumers(analyzed):
    c = table(analyzed[0], "consumers").set_index("consumer")
    assert c.loc["A", "records"] == 14 and c.loc["B", "records"] == 3 and c.loc["C", "records"] == 0
    assert list(c["rebalances_joined"]) == [3, 2, 1]
    assert list(c["rebalancing_ms"]) == [33, 31, 1]
    assert list(c["failed_claims"]) == [0, 1, 0]
    assert list(c["incomplete_rebalances"]) == [0, 0, 1]
    assert list(c["shutdown"]) == [True, False, False]
    assert list(c["bad_lines"]) == [3, 1, 0]


def test_bad_lines_reported_with_file_and_line(analyzed):
    out, bad, console_text = analyzed
    b = table(out, "bad_lines")
    got = {(r.file, r.line): r.reason for r in b.itertuples()}
    assert set(got) == {("A.jsonl", bad["A.jsonl:invalid"]), ("A.jsonl", bad["A.jsonl:missing"]),
                        ("A.jsonl", bad["A.jsonl:unknown"]), ("B.jsonl", bad["B.jsonl:empty"])}
    assert got[("A.jsonl", bad["A.jsonl:invalid"])].startswith("invalid JSON")
    assert got[("A.jsonl", bad["A.jsonl:missing"])] == "missing field(s) for record_delivered: offset"
    assert got[("A.jsonl", bad["A.jsonl:unknown"])] == "unknown event 'exploded'"
    assert got[("B.jsonl", bad["B.jsonl:empty"])] == "empty line"
    for (f, line) in got:
        assert f"{f}:{line}" in console_text
        assert f"{f}:{line}" in (out / "report.md").read_text()
    assert "4 malformed line(s)" in console_text


def test_offset_resets_are_counted_and_listed(spark, tmp_path, trace_builder_class):
    """A committed offset out of the log's range, reset by auto.offset.reset: a table row and a report line."""
    tb = trace_builder_class(tmp_path / "traces")
    tb.emit("A", 1000, "registered", subscription={"t": 1}, pattern="static")
    tb.rebalance("A", 1000, 1, ["t-0"], cause="startup", done_ts=1010)
    tb.emit("A", 1100, "offset_reset", topic="t", partition=0, from_offset=1000, to_offset=0, reset="smallest")
    for i in range(3):
        tb.deliver("A", 1101 + i, "t", 0, i)
    tb.commit("A", 1105, "t", 0, 3)
    out = tmp_path / "report"
    saved = analyze_cli.console
    analyze_cli.console = Console(file=io.StringIO(), width=200)
    try:
        assert main(["analyze", str(tb.dir), "--out", str(out), "--master", "local[2]"]) == 0
    finally:
        analyze_cli.console = saved
    resets = table(out, "offset_resets")
    assert resets[["consumer", "topic", "partition", "from_offset", "to_offset", "reset"]].values.tolist() == [
        ["A", "t", 0, 1000, 0, "smallest"]]
    assert "offset resets: 1 " in (out / "report.md").read_text()


def test_small_trace_settings_change_no_table_and_are_restored(analyzed, spark, tmp_path) -> None:
    """A lab-sized trace runs narrowed (one shuffle partition, no adaptive execution, interpreted expressions):
    the same tables as at the session's own settings, which are back when the analysis returns. The narrowed run
    is the module's (``zkconsumer analyze`` on this session); this one runs wide and compares."""
    from zkconsumer.analysis.pipeline import ADAPTIVE, CODEGEN_FACTORY, SHUFFLE_PARTITIONS, run_analysis

    traces = analyzed[0].parent / "traces"
    quiet = Console(file=io.StringIO())
    before = {key: spark.conf.get(key) for key in (SHUFFLE_PARTITIONS, ADAPTIVE, CODEGEN_FACTORY)}
    # after the module's narrowed run: the session's own settings are back
    assert before[ADAPTIVE] == "true" and before[SHUFFLE_PARTITIONS] != "1" and before[CODEGEN_FACTORY] != "NO_CODEGEN"
    wide = run_analysis(spark, str(traces), tmp_path / "wide", quiet, plots_and_report=False, narrow_small=False)
    assert {key: spark.conf.get(key) for key in before} == before
    names = sorted(p.name for p in (tmp_path / "wide" / "tables").glob("*.csv"))
    # the module's run also wrote the report's own tables (activity, unowned): every table of this one is among them
    assert len(names) >= 10 and set(names) <= {p.name for p in (analyzed[0] / "tables").glob("*.csv")}
    for name in names:
        narrow_csv, wide_csv = analyzed[0] / "tables" / name, tmp_path / "wide" / "tables" / name
        assert narrow_csv.read_bytes() == wide_csv.read_bytes(), name
    assert wide.lines > 0


def test_activity_over_time(analyzed):
    """1 s buckets from A's first line (1000) to its shutdown (4000): deliveries in the first two, none after;
    t-1 has no owner from B's last line (3200: B never shut down) to the end."""
    a = pd.read_csv(analyzed[0] / "tables" / "activity.csv")
    assert list(a.columns) == ["group", "ts", "bucket_ms", "deliveries", "records_per_s", "owned", "unowned"]
    assert list(a["ts"]) == [1000, 2000, 3000, 4000] and set(a["bucket_ms"]) == {1000}
    assert list(a["deliveries"]) == [8, 9, 0, 0]
    assert list(a["owned"]) == [2, 2, 1, 1] and list(a["unowned"]) == [0, 0, 1, 1]


def test_the_timeline_tells_the_story(analyzed):
    """The story's ownership (with the thread the assignment gave), B's failed claim and retry, C cut short by
    its kill, and records per second, in the figure embedded in report.html."""
    page = (analyzed[0] / "report.html").read_text()
    for text in ("<b>A</b> (thread A-0)<br>t-0", "given by group rebalance #1 (cause: startup)", "attempt → retried",
                 "failed claim", "<b>C</b>: rebalance 1, attempt 1", "records/s", "unowned partitions"):
        assert to_json_plotly(text)[1:-1] in page, text  # as plotly writes strings into the page
    owners = table(analyzed[0], "ownership")
    assert (owners["thread"] == owners["consumer"] + "-0").all()
