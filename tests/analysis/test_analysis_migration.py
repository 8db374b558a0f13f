"""A live migration, proven on its traces: a lab run whose 0.8 members (real processes, ``--migratable``) are
moved to the broker's group coordinator by ``zkconsumer migrate`` while records flow, then analysed on Spark."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest
from helpers import send_authorized_operations
from rich.console import Console

from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.lab.backends import ProcessBackend
from zkconsumer.lab.runner import Lab
from zkconsumer.migration.plan import MigrationPlan, plan_path
from zkconsumer.scenario.model import Step
from zkconsumer.scenario.plan import GROUP, GroupSettings, RunPlan
from zkconsumer.zk.registry import Registry

pytestmark = pytest.mark.skipif(importlib.util.find_spec("zkconsumer.coordinator.manager") is None,
                                reason="the broker has no group coordinator yet (branch coord)")


def last_modes(traces: Path) -> dict[str, str]:
    out = {}
    for path in traces.glob("lab_*.jsonl"):  # the members' (lab.jsonl holds the lab's own steps)
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        out[path.stem] = lines[-1].get("mode", "zookeeper")
    return out


class ForeignCoordinatorBackend(ProcessBackend):
    """The lab's broker answering as Kafka-compatible coordinators written independently of Kafka did: DescribeGroups
    and Metadata with authorized-operation bits kafka-python's enum does not know (15), asked for or not (before issue
    30 every check of the migration failed on them and the step was rolled back), and DescribeGroups with only the
    fields the protocol requires filled: member ids and the group's state, no client id, host, metadata or assignment
    (the test-only switch; before issue 38 no member was found and the first step was rolled back)."""

    def start_broker(self, zk_connect: str, data_dir: Path, group: GroupSettings) -> str:
        bootstrap = super().start_broker(zk_connect, data_dir, group)
        send_authorized_operations(self._broker, {3, 6, 8, 15})
        self._broker.group_apis.describe_required_only = True
        return bootstrap


@pytest.mark.slow
def test_a_live_migration_loses_nothing_and_never_has_two_owners(spark, zk_connect, tmp_path) -> None:
    plan = RunPlan(consumers=3, duration=20.0, mode="migrate", rate=100.0, initial_records=100,
                   session_timeout_ms=4000, commit_interval_ms=300, initial_rebalance_delay_ms=0,
                   steps=[Step(2.0, "join", "c4"), Step(4.0, "migrate", "")])
    lab = Lab(plan, tmp_path / "run", zookeeper=zk_connect, console=Console(file=io.StringIO(), width=200),
              backend=ForeignCoordinatorBackend())
    summary = lab.run()
    assert summary["migration"] == "done", summary
    assert summary["lost"] == 0 and summary["verify_ok"], summary
    with Registry.open(zk_connect) as reg:
        assert MigrationPlan.decode(plan_path(GROUP), reg.read(plan_path(GROUP))).phase == "done"
        assert reg.consumer_ids(GROUP) == []  # the bridges are gone: the group is the coordinator's
    # members that lived to the end finished in coordinator mode (c1..c4 all did: no kill in this plan)
    assert set(last_modes(Path(summary["trace_dir"])).values()) == {"coordinator"}
    res = run_analysis(spark, summary["trace_dir"], tmp_path / "report", Console(file=io.StringIO()))
    assert res.summary["overlaps"] == 0, "two consumers delivered one partition at the same time"
    assert res.summary["lost_below_committed"] == 0 and res.summary["lost_gap"] == 0
    assert res.summary["duplicates_of_committed"] == 0, "a duplicate outside an uncommitted window"
