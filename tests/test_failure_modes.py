"""The failure catalogue's modes run for real (docs/failure-modes.md; make faults: each is a lab run of about a
minute with its judgement on Spark). Every mode's shipped scenario on the default profile holds every invariant,
which is the claim the catalogue makes for it; `zkconsumer catalogue` writes the table mode x variant. The other
variants' verdicts are the catalogue's findings, recorded in docs/failure-modes.md; the ones that are certain are
asserted in tests/test_session_lease.py (mode a), tests/test_claims.py (mode b) and tests/test_scenarios.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zkconsumer.cli import main
from zkconsumer.lab.catalogue import MODES
from zkconsumer.lab.nemesis_run import LabJudge
from zkconsumer.lab.scenario import builtin

SCENARIOS = [m.scenario for m in MODES if m.scenario]


@pytest.mark.faults_full
@pytest.mark.parametrize("name", SCENARIOS)
def test_the_default_profile_holds_every_invariant_in_each_failure_mode(name: str, tmp_path: Path, spark) -> None:
    judge = LabJudge("zookeeper-default")
    try:
        breach, summary = judge.run(builtin(name), tmp_path)
    finally:
        judge.close()
    assert breach is None, f"{name}: {breach}"
    assert summary["lost"] == 0 and summary["verify_ok"] and not summary.get("fault_errors"), summary


@pytest.mark.faults_full
def test_the_catalogue_writes_one_table_of_verdicts(tmp_path: Path, capsys) -> None:
    out = tmp_path / "catalogue"
    code = main(["catalogue", "--modes", "f", "--variants", "zookeeper-default,coordinator", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    cells = {c["variant"]: c for c in json.loads((out / "catalogue.json").read_text())}
    assert cells["zookeeper-default"]["verdict"] == "all hold", cells
    # a ZooKeeper cut has nothing to strike in a coordinator-mode member: not run, said why
    assert cells["coordinator"]["verdict"] == "n/a" and "ZooKeeper session" in cells["coordinator"]["not_applicable"]
    table = (out / "catalogue.md").read_text()
    assert "| f | `zk-cut` | `zookeeper-default` | all hold |" in table
