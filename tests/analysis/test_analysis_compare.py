"""``zkconsumer compare`` end to end, shortened: ZooKeeper mode and coordinator mode under the same churn,
each run analysed on Spark, one table, a CSV, a JSON and a figure."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rich.console import Console

from zkconsumer.lab.compare import MEASURES, run_compare
from zkconsumer.lab.runner import LabPlan, Step


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
    assert list(table["measure"]) == [label for _, label in MEASURES]
    assert set(json.loads((out / "compare.json").read_text())) == {"zookeeper-default", "coordinator"}
    assert (out / "compare.png").stat().st_size > 10_000
    assert "rebalance latency p50" in buf.getvalue()
