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
from zkconsumer.lab.catalogue import MODES, not_applicable
from zkconsumer.lab.nemesis_run import LabJudge
from zkconsumer.scenario.nemesis import Invariant
from zkconsumer.scenario.reader import builtin

#: the modes with something to strike in the default profile (coordinator-kill has no counterpart there)
SCENARIOS = [m.scenario for m in MODES if m.scenario and not not_applicable(builtin(m.scenario), "zookeeper-default")]


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
    # by its scenario's name: mode f has two (zk-cut, and broker-cut its reverse), each a row per variant
    code = main(["catalogue", "--modes", "zk-cut", "--variants", "zookeeper-default,coordinator", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    cells = {c["variant"]: c for c in json.loads((out / "catalogue.json").read_text())}
    assert cells["zookeeper-default"]["verdict"] == "holds in 1 of 1 run", cells
    assert (cells["zookeeper-default"]["rate"]["k"], cells["zookeeper-default"]["rate"]["n"]) == (0, 1)
    # a ZooKeeper cut has nothing to strike in a coordinator-mode member: not run, said why
    assert cells["coordinator"]["verdict"] == "n/a" and "ZooKeeper session" in cells["coordinator"]["not_applicable"]
    table = (out / "catalogue.md").read_text()
    assert "| f | `zk-cut` | `zookeeper-default` | holds in 1 of 1 run |" in table
    assert 'data-rate="0/1"' in (out / "catalogue.html").read_text()


def _rebalances_during(trace_dir: str) -> list[tuple[str, str]]:
    """(member, cause) of every rebalance that started between the lab's fault_injected and fault_healed."""
    events = [json.loads(line) for path in Path(trace_dir).glob("*.jsonl") for line in path.read_text().splitlines()
              if '"record_delivered"' not in line]
    struck = next(e["ts"] for e in events if e["event"] == "fault_injected")
    healed = next(e["ts"] for e in events if e["event"] == "fault_healed")
    return sorted((e["consumer"], e.get("cause", "")) for e in events
                  if e["event"] == "rebalance_triggered" and struck <= e["ts"] < healed)


@pytest.mark.faults_full
def test_a_member_cut_off_from_the_broker_keeps_its_partitions_in_a_0_8_group_and_loses_them_to_a_coordinator(
        tmp_path: Path, spark) -> None:
    """broker-cut (docs/failure-modes.md, f'): a 0.8 group judges liveness by the ZooKeeper session alone, so the
    cut member keeps its partitions through the whole cut; the coordinator evicts it at its session timeout and the
    others rebalance. Every invariant holds in both."""
    judge = LabJudge("zookeeper-default")
    try:
        breach, summary = judge.run(builtin("broker-cut"), tmp_path / "zookeeper")
        assert breach is None and summary["lost"] == 0, (breach, summary)
        assert _rebalances_during(summary["trace_dir"]) == []
        judge = judge.with_variant("coordinator")
        breach, summary = judge.run(builtin("broker-cut"), tmp_path / "coordinator")
        assert breach is None and summary["lost"] == 0, (breach, summary)
        moved = _rebalances_during(summary["trace_dir"])
        assert ("lab_c2", "coordinator") in moved and ("lab_c3", "coordinator") in moved, moved
        assert not any(member == "lab_c1" for member, _ in moved), moved  # c1 hears of it only after the heal
    finally:
        judge.close()


@pytest.mark.faults_full
def test_one_mixed_group_shows_which_kind_hands_out_records_it_no_longer_owns(tmp_path: Path, spark) -> None:
    """mixed-gc-pause ([kinds]): Kafka 0.8.2.2's own consumer, the kafka-0.8 profile and the default profile in one
    0.8 group, each paused past its session in turn. Every two-owner overlap involves one of the first two, and
    only they hand out again records another member had committed; the default profile's lease fences its member."""
    import pandas as pd

    judge = LabJudge("zookeeper-default")
    try:
        breach, summary = judge.run(builtin("mixed-gc-pause"), tmp_path)
    finally:
        judge.close()
    assert summary["kinds"] == {"c1": "kafka-0.8.2.2", "c2": "kafka-0.8", "c3": "default"}
    assert summary["commits_untraced"] and summary["lost"] == 0
    assert breach is not None and Invariant.ONE_LIVE_OWNER in breach.invariants, breach
    tables = tmp_path / "report" / "tables"
    overlaps = pd.read_parquet(tables / "overlaps.parquet")
    overlaps = overlaps[overlaps["overlap_ms"] > 0]
    # every two-owner overlap has a woken 0.8 member in it; records already committed were handed out again only
    # by those (the default member's lease fenced it on waking)
    assert len(overlaps) and all({"lab_c1", "lab_c2"} & {r.consumer_a, r.consumer_b} for r in overlaps.itertuples())
    again = set(pd.read_parquet(tables / "duplicates_committed.parquet")["duplicate_consumer"])
    assert again and again <= {"lab_c1", "lab_c2"}, again
