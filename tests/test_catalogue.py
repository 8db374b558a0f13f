"""The failure catalogue as data (zkconsumer/lab/catalogue.py): every mode names its scenario and sources, a
variant with nothing to strike is n/a, the table says each cell's rate ("breaks in k of N runs", the invariants
broken and in how many runs), the page shows k/N with each run's verdict in its tooltip. ``--runs N`` is driven
here with a ``compare`` that runs nothing; the real runs are in tests/test_failure_modes.py (make faults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import remote_references

from zkconsumer.lab.catalogue import (
    CATALOGUE_VARIANTS,
    MODES,
    Cell,
    RunFigures,
    markdown,
    modes,
    not_applicable,
    page,
    run_catalogue,
)
from zkconsumer.lab.compare import judged
from zkconsumer.lab.variants import VARIANTS
from zkconsumer.scenario.nemesis import Invariant
from zkconsumer.scenario.reader import builtin, builtin_names


def test_every_mode_of_the_issue_is_there_with_a_shipped_scenario_or_where_it_is_measured() -> None:
    assert sorted({m.key for m in MODES}) == list("abcdefghijk")
    for mode in MODES:
        assert mode.scenario in builtin_names() if mode.scenario else mode.elsewhere, mode
        for source in mode.sources:
            assert source.url.startswith("https://"), source
    assert set(CATALOGUE_VARIANTS) <= set(VARIANTS)


def test_modes_are_chosen_by_letter_or_scenario_in_the_catalogues_order() -> None:
    assert [m.scenario for m in modes(["k", "a"])] == ["gc-pause", "quorum-loss", "broker-kill", "coordinator-kill"]
    assert [m.key for m in modes(["zk-cut"])] == ["f"]
    assert len(modes(None)) == len(MODES)
    with pytest.raises(ValueError, match="unknown failure modes \\['z'\\]"):
        modes(["z"])


def test_a_variant_where_no_fault_of_the_scenario_strikes_is_not_applicable() -> None:
    cut = builtin("zk-cut")
    assert "no ZooKeeper session" in not_applicable(cut, "coordinator")
    assert not_applicable(cut, "zookeeper-kafka-0.8") is None
    # the mode is its fault: the joins around the cut alone would show a healthy group
    assert "no ZooKeeper session" in not_applicable(builtin("reconnect-mid-rebalance"), "coordinator")
    assert not_applicable(builtin("quorum-loss"), "consumer-protocol-kafka-4")
    assert not_applicable(builtin("gc-pause"), "coordinator") is None


def run(**violations: int) -> RunFigures:
    """One judged run with these violations (by the invariant's member name)."""
    return RunFigures(invariants={i.value: 0 for i in Invariant}
                      | {Invariant[k].value: n for k, n in violations.items()})


def test_the_table_names_each_broken_invariant_with_its_runs() -> None:
    broken = Cell("a", "gc-pause", "zookeeper-kafka-0.8", runs=[RunFigures(
        invariants={i.value: 0 for i in Invariant} | {Invariant.ONE_LIVE_OWNER.value: 10},
        duplicates=707, overlaps=10, unowned_ms_total=18500, unowned_ms_max=1900, failed_rebalances=0,
        claim_conflicts=15)])
    holds = Cell("a", "gc-pause", "zookeeper-default", runs=[run(), run()])
    na = Cell("f", "zk-cut", "coordinator", not_applicable="a coordinator-mode member has no ZooKeeper session")
    assert broken.verdict == "breaks in 1 of 1 run: never two live owners (1 of 1)"
    assert holds.verdict == "holds in 2 of 2 runs" and na.verdict == "n/a" and na.rate is None
    assert Cell("a", "gc-pause", "coordinator").verdict == "not run"
    assert Cell("a", "gc-pause", "coordinator", runs=[RunFigures()]).verdict == "no verdict (1 not analysed of 1)"
    # Kafka 0.8.2.2's own consumer: its commits are not in its trace, so the invariants about them are not judged
    own = Cell("a", "gc-pause", "kafka-0.8.2.2", runs=[RunFigures(invariants={i.value: n for i, n in judged(
        {i: 0 for i in Invariant} | {Invariant.ONE_LIVE_OWNER: 9, Invariant.DUPLICATES_UNCOMMITTED: 3},
        VARIANTS["kafka-0.8.2.2"]).items()})])
    assert own.verdict == ("breaks in 1 of 1 run: never two live owners (1 of 1) (not judged: duplicates only "
                           "inside uncommitted windows, commits never backwards)")
    assert judged({i: 0 for i in Invariant}, VARIANTS["coordinator"]) == {i: 0 for i in Invariant}
    # records skipped by a reset to the log end are lost, though no trace shows a gap: the lab's own tally of the
    # never readable counts (records merely unread at the end are not passed: they are no loss)
    assert judged({i: 0 for i in Invariant}, VARIANTS["coordinator"], 255)[Invariant.ZERO_LOST] == 255
    text = markdown([broken, holds, na])
    assert ("| a | `gc-pause` | `zookeeper-kafka-0.8` | breaks in 1 of 1 run: never two live owners (1 of 1) | - | "
            "- | 10 | 707 | 18,500 (1,900) | 0 | 15 |") in text
    assert "n/a: a coordinator-mode member has no ZooKeeper session" in text


def test_a_cell_of_several_runs_is_breaks_in_k_of_n_with_each_figure_as_its_range() -> None:
    cell = Cell("b", "owner-held", "zookeeper-kafka-0.8", runs=[
        RunFigures(invariants=run(ONE_LIVE_OWNER=5, DUPLICATES_UNCOMMITTED=348).invariants, overlaps=5, lost=0,
                   duplicates=417, unowned_ms_total=12866, unowned_ms_max=4130, failed_rebalances=1),
        RunFigures(invariants=run().invariants, overlaps=0, lost=0, duplicates=20, unowned_ms_total=2100,
                   unowned_ms_max=300, failed_rebalances=0),
        RunFigures(invariants=run(ONE_LIVE_OWNER=2).invariants, overlaps=2, lost=0, duplicates=1200,
                   unowned_ms_total=9000, unowned_ms_max=2000, failed_rebalances=1)])
    assert cell.verdict == ("breaks in 2 of 3 runs: never two live owners (2 of 3); duplicates only inside "
                            "uncommitted windows (1 of 3)")
    assert cell.figure("overlaps") == "0–5" and cell.figure("lost") == "0" and cell.figure("duplicates") == "20–1,200"
    assert Cell("b", "owner-held", "x", runs=[RunFigures(), RunFigures()]).figure("lost") == "-"
    assert ("| b | `owner-held` | `zookeeper-kafka-0.8` | breaks in 2 of 3 runs: never two live owners (2 of 3); "
            "duplicates only inside uncommitted windows (1 of 3) | 0 | - | 0–5 | 20–1,200 | 2,100–12,866 (300–4,130) | "
            "0–1 | - |") in markdown([cell])
    doc = cell.as_json()
    assert (doc["rate"]["k"], doc["rate"]["n"]) == (2, 3)
    assert doc["rate"]["invariants"]["one-live-owner"] == {"broken": 2, "judged": 3}
    assert doc["rate"]["invariants"]["duplicates-uncommitted"] == {"broken": 1, "judged": 3}
    assert [r["verdict"] for r in doc["runs"]] == [
        "BROKEN: never two live owners (5); duplicates only inside uncommitted windows (348)", "holds",
        "BROKEN: never two live owners (2)"]
    assert doc["runs"][0]["overlaps"] == 5 and doc["verdict"] == cell.verdict


def test_the_page_shows_k_of_n_per_cell_with_the_invariants_and_each_runs_verdict() -> None:
    cells = [Cell("a", "gc-pause", "zookeeper-default", runs=[run(), run(), run()]),
             Cell("a", "gc-pause", "zookeeper-kafka-0.8", runs=[run(ONE_LIVE_OWNER=10), run(), run(ONE_LIVE_OWNER=4)]),
             Cell("f", "zk-cut", "coordinator", not_applicable="a coordinator-mode member has no ZooKeeper session")]
    text = page(cells, lambda r: "a/report/report.html" if r is cells[1].runs[0] else None)
    assert remote_references(text) == []
    assert '<td class="holds" data-rate="0/3"' in text
    assert '<td class="breaks" data-rate="2/3" title="run 1: BROKEN: never two live owners (10)\nrun 2: holds\n' \
           'run 3: BROKEN: never two live owners (4)">' in text
    assert '<div class="broken">never two live owners (2 of 3)</div>' in text
    assert 'reports: <a href="a/report/report.html">1</a> 2 3' in text
    assert '<td class="na" title="a coordinator-mode member has no ZooKeeper session">n/a</td>' in text
    # the grid: a row per scenario, a column per variant, "-" where a variant has no cell in a row
    assert text.count("<tr data-scenario=") == 2 and text.count('<td class="none">-</td>') == 3
    assert "<script" not in text and "zk-cut" in text and "f. a member cut off from ZooKeeper" in text


@pytest.mark.slow
def test_the_page_opens_in_a_browser_with_k_of_n_and_the_runs_in_the_tooltip(tmp_path) -> None:
    from browser import chromium, open_page

    cells = [Cell("a", "gc-pause", "zookeeper-default", runs=[run(), run()]),
             Cell("a", "gc-pause", "kafka-0.8.2.2", runs=[run(ONE_LIVE_OWNER=9), run(ZERO_LOST=154)]),
             Cell("d", "stale-view", "coordinator", not_applicable="no ZooKeeper session")]
    path = tmp_path / "catalogue.html"
    path.write_text(page(cells), encoding="utf-8")
    with chromium() as browser, open_page(browser, path.as_uri()) as (pg, log):
        rows = pg.locator("#catalogue tbody tr")
        assert rows.count() == 2
        first = rows.nth(0).locator("td")
        assert first.nth(0).locator(".rate").inner_text() == "0/2"
        assert first.nth(1).locator(".rate").inner_text() == "2/2"
        # in the analysis' order, one a line
        assert first.nth(1).locator(".broken").inner_text().splitlines() == ["zero lost (1 of 2)",
                                                                            "never two live owners (1 of 2)"]
        assert first.nth(1).get_attribute("title") == ("run 1: BROKEN: never two live owners (9)\n"
                                                       "run 2: BROKEN: zero lost (154)")
        # the broken figure is red, the held one green: the colours say which at a glance
        assert first.nth(1).locator(".rate").evaluate("e => getComputedStyle(e).color") == "rgb(187, 0, 0)"
        assert first.nth(0).locator(".rate").evaluate("e => getComputedStyle(e).color") == "rgb(0, 119, 0)"
        assert rows.nth(1).locator("td").nth(2).get_attribute("title") == "no ZooKeeper session"
        assert log.errors == [] and log.remote == []


def fake_compare(calls: list[tuple[Path, list[str]]], breaking: dict[tuple[str, int], dict[str, int]]):
    """A ``run_compare`` that runs nothing: each variant's run holds, but where ``breaking`` says otherwise
    (by variant and call number)."""
    from zkconsumer.lab.compare import VariantResult

    def run_compare(plan, out, variants, console, spark=None):  # noqa: ANN001, ANN202 - run_compare's signature
        calls.append((out, list(variants)))
        console.print(f"compare into {out}")
        return [VariantResult.of(v, {"trace_dir": str(out / v / "traces")}, {"lost": 0, "overlaps": 0},
                                 {i: breaking.get((v, len(calls)), {}).get(i.value, 0) for i in Invariant})
                for v in variants]
    return run_compare


def test_the_catalogue_runs_each_cell_n_times_and_writes_the_rates(tmp_path, monkeypatch) -> None:
    import io

    from rich.console import Console

    import zkconsumer.analysis.spark as spark
    import zkconsumer.lab.compare as compare

    calls: list[tuple[Path, list[str]]] = []
    monkeypatch.setattr(compare, "run_compare", fake_compare(calls, {("zookeeper-default", 2): {"one-live-owner": 3}}))

    class Session:
        stopped = False

        def stop(self) -> None:
            Session.stopped = True

    monkeypatch.setattr(spark, "build_session", lambda *a, **k: Session())
    printed = io.StringIO()
    out = tmp_path / "catalogue"
    cells = run_catalogue(modes(["zk-cut"]), ["zookeeper-default", "coordinator"], out,
                          Console(file=printed, width=200), runs=3)
    # one compare per run, each in its own directory; the n/a variant never run
    assert calls == [(out / "zk-cut" / f"run-{i}", ["zookeeper-default"]) for i in (1, 2, 3)]
    assert Session.stopped
    for i in (1, 2, 3):
        assert f"(scenario zk-cut), run {i} of 3" in printed.getvalue()
    by = {c.variant: c for c in cells}
    assert by["zookeeper-default"].verdict == "breaks in 1 of 3 runs: never two live owners (1 of 3)"
    assert by["coordinator"].verdict == "n/a"
    doc = {c["variant"]: c for c in json.loads((out / "catalogue.json").read_text())}
    assert (doc["zookeeper-default"]["rate"]["k"], doc["zookeeper-default"]["rate"]["n"]) == (1, 3)
    assert [r["verdict"] for r in doc["zookeeper-default"]["runs"]] == ["holds", "BROKEN: never two live owners (3)",
                                                                       "holds"]
    assert doc["coordinator"]["rate"] is None and "ZooKeeper session" in doc["coordinator"]["not_applicable"]
    assert "breaks in 1 of 3 runs" in (out / "catalogue.md").read_text()
    assert 'data-rate="1/3"' in (out / "catalogue.html").read_text()
    # one run keeps the layout of before: the mode's runs straight under its scenario's directory
    calls.clear()
    run_catalogue(modes(["zk-cut"]), ["zookeeper-default"], tmp_path / "one", Console(file=io.StringIO()))
    assert calls == [(tmp_path / "one" / "zk-cut", ["zookeeper-default"])]
    with pytest.raises(ValueError, match="runs must be >= 1"):
        run_catalogue(modes(["zk-cut"]), ["zookeeper-default"], tmp_path / "none", Console(file=io.StringIO()),
                      runs=0)


@pytest.mark.parametrize("runs", ["0", "-2", "x", "1.5"])
def test_the_cli_refuses_runs_below_one_in_one_line_before_running_anything(runs: str, tmp_path, capsys) -> None:
    from zkconsumer.cli import main

    out = tmp_path / "catalogue"
    assert main(["catalogue", "--runs", runs, "--modes", "zk-cut", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: --runs takes a whole number of runs per cell, 1 or more, not {runs!r}", err
    assert not out.exists()
