"""The migration fault matrix (docs/migration.md): each fault strikes a live migration of three ``--migratable``
members driven by ``zkconsumer migrate`` in its own process, and the analysis judges the traces (zero lost, never
two owners across modes, duplicates only uncommitted, commits never backwards, every partition owned again within
session timeout + 1 s of the heal). Real ZooKeeper, broker, consumer and migrate processes, proxy and Spark."""

from __future__ import annotations

import json

import pytest

from zkconsumer.lab.faults.matrix import FAULTS, faults_of, run_fault
from zkconsumer.lab.faults.verdict import judge

pytestmark = [pytest.mark.slow, pytest.mark.faults]

#: In ``make test``: the migrate process killed mid-step (it strikes the migration's own machinery, ~30 s); ``make
#: faults`` runs all six. A bridged member's ZooKeeper session expiring mid-migration runs in make test in simulation
#: (tests/test_sim_migration.py, the project's own members and driver, 3 s of wall time).
FULL_ONLY = pytest.mark.faults_full


def test_lab_mode_migrate_lists_the_migration_faults() -> None:
    assert faults_of("migrate") == ["migrate-kill", "member-kill-switching", "bridge-zk-expiry", "broker-restart",
                                    "rollback-mid", "stranger-joins"]
    assert not set(faults_of("migrate")) & set(faults_of("zookeeper"))


@pytest.mark.parametrize("name", ["migrate-kill", pytest.param("member-kill-switching", marks=FULL_ONLY),
                                  pytest.param("bridge-zk-expiry", marks=FULL_ONLY),
                                  pytest.param("broker-restart", marks=FULL_ONLY),
                                  pytest.param("rollback-mid", marks=FULL_ONLY),
                                  pytest.param("stranger-joins", marks=FULL_ONLY)])
def test_a_migration_fault_keeps_the_invariants(spark, tmp_path, name: str) -> None:
    run = run_fault(FAULTS[name], tmp_path / name, "default")
    assert run.error is None, run.error
    lab = [json.loads(line)["event"] for line in (tmp_path / name / "traces" / "lab.jsonl").read_text().splitlines()]
    assert lab == ["fault_injected", "fault_healed"]
    verdict = judge(spark, run)
    assert verdict.status == "PASS", verdict.line
    assert verdict.figures["lost"] == 0 and verdict.figures["overlaps"] == 0
