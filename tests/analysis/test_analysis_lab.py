"""A real lab run (ZooKeeper, broker, consumer processes, a kill -9) analysed by Spark: the report agrees
with what the lab itself counted, and its report.html works offline in a real browser (one lab run for both)."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from browser import chromium, open_page, remote_references
from rich.console import Console

from zkconsumer.analysis.pipeline import AnalysisResult, run_analysis
from zkconsumer.analysis.report import Report
from zkconsumer.lab.runner import Lab
from zkconsumer.scenario.model import Step
from zkconsumer.scenario.plan import RunPlan


@pytest.fixture(scope="module")
def lab_report(spark, tmp_path_factory) -> tuple[dict, AnalysisResult]:
    root = tmp_path_factory.mktemp("lab")
    plan = RunPlan(consumers=2, duration=8, rate=100, initial_records=100, session_timeout_ms=3000,
                   topics={"orders": 4}, steps=[Step(2, "join", "c3"), Step(4, "kill", "c1")])
    quiet = Console(file=io.StringIO())
    summary = Lab(plan, root / "run", console=quiet).run()
    return summary, run_analysis(spark, str(root / "run" / "traces"), root / "report", quiet)


@pytest.mark.slow
def test_lab_run_turns_into_a_report(lab_report) -> None:
    summary, result = lab_report
    assert summary["verify_ok"] and summary["lost"] == 0
    assert result.bad_lines == 0
    assert result.summary["consumers"] == 3
    assert result.summary["duplicates"] == summary["duplicates"]
    assert result.summary["lost_below_committed"] == 0 and result.summary["lost_gap"] == 0
    assert result.summary["group_rebalances"] >= 2
    assert result.report_md.exists() and result.report_html.exists()
    assert all(p.exists() and p.stat().st_size > 0 for p in result.plots)


def _column(page, table, name: str) -> list[str]:
    return page.evaluate("""([table, name]) => {
        const t = document.querySelectorAll("table.sortable")[table];
        const i = [...t.tHead.rows[0].cells].findIndex(c => c.textContent === name);
        return [...t.tBodies[0].rows].map(r => r.cells[i].textContent);
    }""", [table, name])


@pytest.mark.slow
def test_the_report_works_offline_in_a_browser(lab_report, tmp_path: Path) -> None:
    """No console error, nothing fetched from the network, the timeline answers a hover with the owner, and a
    table sorts by a click on its header, numbers as numbers."""
    _, result = lab_report
    html = result.report_html.read_text()
    assert remote_references(html) == []
    tiny = tmp_path / "sort.html"
    r = Report("t")
    r.table(pd.DataFrame({"consumer": ["c10", "c9", "c100"], "records": [100, 9, 25]}))
    tiny.write_text(r.to_html())
    with chromium() as browser:
        with open_page(browser, result.report_html.as_uri()) as (page, log):
            page.wait_for_selector("#figure-1 .barlayer .point path", timeout=15_000)
            page.locator("#figure-1 .barlayer .point path").first.hover(force=True)  # plotly's drag layer is on top
            page.wait_for_selector(".hovertext", timeout=5_000)
            hover = page.locator(".hovertext").first.text_content()
            assert "lab_c" in hover and "thread" in hover and "group rebalance #" in hover, hover
            assert log.errors == [] and log.remote == []
        with open_page(browser, tiny.as_uri()) as (page, log):
            page.click("th:text('records')")
            assert _column(page, 0, "records") == ["9", "25", "100"]
            page.click("th:text('records')")
            assert _column(page, 0, "records") == ["100", "25", "9"]
            page.click("th:text('consumer')")
            assert _column(page, 0, "consumer") == ["c9", "c10", "c100"]
            assert log.errors == [] and log.remote == []
