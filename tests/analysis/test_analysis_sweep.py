"""The sweep runs the project's assignors inside Spark tasks; its rows must equal direct calls."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from rich.console import Console

import zkconsumer.cli.sweep as sweep_cli
from zkconsumer.analysis.sweep import GRID_QUICK, SweepConfig, make_scenario, run_local, run_spark
from zkconsumer.assignment.assignors import AssignmentContext, RoundRobinPreconditionError, assign, sticky_assign
from zkconsumer.cli import main

CFG = SweepConfig(GRID_QUICK, seed=11, changes=3)
N = 60


def direct(sc_id: int) -> list[tuple]:
    """(strategy, step, change, status, balance, moved) straight from zkconsumer.assignment.assignors."""
    sc = make_scenario(CFG, sc_id)
    out = []
    for strategy in CFG.strategies:
        members = dict(sc.members)
        prev = None
        for step, (kind, cid, sub) in enumerate([("initial", "", None), *sc.changes]):
            if kind == "join":
                members[cid] = sub
            elif kind != "initial":
                del members[cid]
            ctx = AssignmentContext(members, sc.topic_partitions)
            try:
                a = sticky_assign(ctx, prev) if strategy == "sticky" else assign(strategy, ctx)
            except RoundRobinPreconditionError:
                out.append((strategy, step, kind, "precondition_failed", None, None))
                prev = None
                continue
            counts = [len(v) for v in a.by_thread().values()]
            owners = dict(a.owners)
            moved = None if prev is None else sum(1 for tp, t in prev.items() if owners.get(tp) != t)
            out.append((strategy, step, kind, "ok", max(counts) - min(counts), moved))
            prev = owners
    return out


def _norm(v):
    return None if pd.isna(v) else int(v)


@pytest.fixture(scope="module")
def spark_rows(spark) -> pd.DataFrame:
    return run_spark(spark, CFG, N, partitions=3).toPandas()


def test_spark_sweep_equals_direct_assignor_calls(spark_rows):
    assert spark_rows["scenario_id"].nunique() == N
    for sc_id, rows in spark_rows.groupby("scenario_id"):
        rows = rows.sort_values(["strategy", "step"])
        got = [(r.strategy, r.step, r.change, r.status, _norm(r.balance), _norm(r.moved))
               for r in rows.itertuples()]
        assert got == sorted(direct(int(sc_id)), key=lambda x: (x[0], x[1])), sc_id


def test_every_pattern_and_change_kind_and_precondition_rows(spark_rows):
    assert set(spark_rows["pattern"]) == {"all-same", "random-subsets", "disjoint"}
    assert {"join", "leave", "crash"} <= set(spark_rows["change"])
    failed = spark_rows[spark_rows["status"] == "precondition_failed"]
    assert len(failed) > 0 and set(failed["strategy"]) == {"roundrobin"}
    assert failed["error"].str.startswith("requirement failed").all()
    assert (spark_rows[spark_rows["pattern"] == "all-same"]["status"] == "ok").all()


def test_deterministic_and_same_as_plain_loop(spark_rows):
    local = run_local(CFG, N).sort_values(["scenario_id", "strategy", "step"]).reset_index(drop=True)
    remote = spark_rows.sort_values(["scenario_id", "strategy", "step"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(local, remote, check_dtype=False)
    assert make_scenario(CFG, 5) == make_scenario(SweepConfig(GRID_QUICK, seed=11, changes=3), 5)
    assert make_scenario(CFG, 5) != make_scenario(SweepConfig(GRID_QUICK, seed=12, changes=3), 5)


def test_cli_sweep_end_to_end(spark, tmp_path):
    buf = io.StringIO()
    saved = sweep_cli.console
    sweep_cli.console = Console(file=buf, width=200)
    try:
        assert main(["sweep", "--out", str(tmp_path), "--quick", "--scenarios", "30", "--master", "local[2]"]) == 0
    finally:
        sweep_cli.console = saved
    for name in ("sweep_results", "sweep_by_pattern", "sweep_by_change", "sweep_by_shape"):
        assert (tmp_path / "tables" / f"{name}.parquet").is_dir()
        assert (tmp_path / "tables" / f"{name}.csv").is_file()
    results = pd.read_csv(tmp_path / "tables" / "sweep_results.csv")
    assert results["scenario_id"].nunique() == 30 and len(results) == 30 * 4 * 4  # 4 strategies x 4 steps
    assert set(results["strategy"]) == {"range", "roundrobin", "roundrobin-relaxed", "sticky"}
    for png in ("balance_by_strategy", "moved_by_strategy"):
        assert (tmp_path / "img" / f"{png}.png").stat().st_size > 1000
    assert "img/balance_by_strategy.png" in (tmp_path / "report.md").read_text()
    assert (tmp_path / "report.html").is_file()
    assert "assign scenarios" in buf.getvalue()
