"""``zkconsumer sim --grid`` and ``--herd`` on Spark: every (profile, point, seed) or (design, size) runs as a
Spark task and lands as a Parquet row equal to the row it gives in this process; the report is counted from those
rows; and ``zkconsumer analyze`` reads either directory back into the same tables."""

from __future__ import annotations

import json

import pandas as pd

from zkconsumer.cli import main
from zkconsumer.sim import grid, herd_scale
from zkconsumer.sim.grid import GridPoint


def test_the_grid_runs_as_spark_tasks_into_parquet_that_analyze_reads_back(spark, tmp_path, capsys) -> None:
    out = tmp_path / "grid"
    assert main(["sim", "--grid", "--profiles", "kafka-0.8", "--seeds", "2", "--retries", "1,10", "--backoff-ms",
                 "250", "--session-timeouts-ms", "2000", "--out", str(out), "--master", "local[2]", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["seeds"] == 4 and summary["points"] == 2
    rows = pd.read_parquet(out / "tables" / "grid_results.parquet").sort_values(["retries", "seed"])
    here = [grid.run_row("kafka-0.8", GridPoint(2000, r, 250), s) for r in (1, 10) for s in (0, 1)]
    assert rows["trace_sha256"].tolist() == [r["trace_sha256"] for r in here]
    assert rows["rebalances_given_up"].tolist() == [r["rebalances_given_up"] for r in here]
    points = pd.read_csv(out / "tables" / "grid_by_point.csv").sort_values("retries")
    assert points["seeds"].tolist() == [2, 2]
    assert points["given_up"].tolist() == [sum(r["rebalances_given_up"] for r in here[:2]),
                                           sum(r["rebalances_given_up"] for r in here[2:])]
    assert points["breaking"].tolist() == [sum(not r["ok"] for r in here[:2]), sum(not r["ok"] for r in here[2:])]
    for png in ("grid_breaches.png", "grid_given_up.png", "grid_settle.png"):
        assert (out / "img" / png).stat().st_size > 5000
    assert "settings grid" in (out / "report.md").read_text()

    again = tmp_path / "again"
    assert main(["analyze", str(out), "--out", str(again)]) == 0
    assert "4 seeds at 2 points" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(again / "tables" / "grid_by_point.csv").sort_values("retries"),
                                  points)


def test_grid_arguments_are_checked_before_spark_starts(capsys) -> None:
    for argv, said in ((["--retries", "1,x"], "whole numbers separated by commas"),
                       (["--retries", "0"], "of 1 or more"),
                       (["--profiles", "kafka-0.9"], "unknown profile kafka-0.9"),
                       (["--seed", "3"], "not --seed")):
        assert main(["sim", "--grid", "--out", "/nonexistent/grid", *argv]) == 1
        assert said in capsys.readouterr().err


def test_the_herd_by_size_runs_as_spark_tasks_into_parquet_that_analyze_reads_back(spark, tmp_path, capsys) -> None:
    out = tmp_path / "herd"
    assert main(["sim", "--herd", "--sizes", "5,8", "--designs", "default,eager", "--rounds", "1", "--out", str(out),
                 "--master", "local[2]", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 4
    rows = pd.read_parquet(out / "tables" / "herd_results.parquet").sort_values(["design", "size"])
    here = [herd_scale.row(d, n, 1) for d in ("default", "eager") for n in (5, 8)]
    assert rows["requests_per_action"].tolist() == [r["requests_per_action"] for r in here]
    assert rows["join_ms"].tolist() == [r["join_ms"] for r in here]  # virtual time: the same in a task as here
    assert rows["collapsed"].tolist() == [""] * 4
    assert (out / "img" / "herd_scale.png").stat().st_size > 5000
    report = (out / "report.md").read_text()
    assert "| default | 8 |" in report and "| eager | 8 |" in report

    again = tmp_path / "again"
    assert main(["analyze", str(out), "--out", str(again)]) == 0
    assert "herd: 4 rows" in capsys.readouterr().out
    assert (again / "report.md").read_text() == report
