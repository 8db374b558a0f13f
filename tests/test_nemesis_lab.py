"""``zkconsumer lab --nemesis`` end to end (issue 31 item 3): real labs (ZooKeeper, broker, consumer processes)
judged by the invariants on Spark. One short run that breaches nothing (make test); a pause past the session on
the kafka-0.8 profile, breaching, shrunk, its minimal file replayed to the same breach (make faults: minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zkconsumer.cli import main
from zkconsumer.lab.nemesis_run import LabJudge
from zkconsumer.scenario.model import ActionKind
from zkconsumer.scenario.nemesis import Invariant
from zkconsumer.scenario.reader import load


@pytest.mark.slow
def test_a_short_nemesis_run_prints_its_schedule_and_holds(tmp_path: Path, capsys) -> None:
    out = tmp_path / "nemesis"
    code = main(["lab", "--nemesis", "--seed", "2", "--duration", "18", "--max-actions", "1", "--actions", "join",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    # the schedule, printed before the run as the scenario file it also wrote
    schedule = (out / "seed-2" / "schedule.toml").read_text()
    assert schedule.strip() in printed
    assert load(out / "seed-2" / "schedule.toml").actions[0].kind is ActionKind.JOIN
    assert "seed 2: every invariant holds" in printed and "runs: 1, breaches: 0" in printed
    runs = json.loads((out / "nemesis.json").read_text())["runs"]
    assert [(r["seed"], r["breached"], r["minimal"]) for r in runs] == [(2, [], None)]
    assert not (out / "seed-2" / "minimal.toml").exists()


@pytest.mark.faults_full
def test_a_pause_past_the_session_on_kafka_08_shrinks_to_a_file_that_breaches_again(tmp_path: Path,
                                                                                   capsys) -> None:
    """Failure mode a (docs/failure-modes.md): seed 15 draws c1 paused 7 s at 8 s against 4 s sessions; kafka-0.8
    hands out what c1 queued after it wakes. The shrink (four reruns at most, to bound the test's time) keeps the
    pause; the file it writes breaches the same invariant when run again."""
    out = tmp_path / "nemesis"
    code = main(["lab", "--nemesis", "--profile", "kafka-0.8", "--seed", "15", "--duration", "25",
                 "--max-actions", "1", "--actions", "pause", "--shrink-budget", "4", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 1, printed
    run = json.loads((out / "nemesis.json").read_text())["runs"][0]
    assert run["breached"], run
    minimal = out / "seed-15" / "minimal.toml"
    assert run["minimal"] == str(minimal) and minimal.exists()
    assert f"zkconsumer lab --scenario {minimal} --profile kafka-0.8 --analyze" in printed
    scenario = load(minimal)
    assert [a.kind for a in scenario.actions] == [ActionKind.PAUSE]
    assert scenario.actions[0].seconds > scenario.session_timeout_ms / 1000
    target = Invariant(run["shrink"]["target"])
    judge = LabJudge("zookeeper-kafka-0.8")
    try:
        breach, _ = judge.run(scenario, tmp_path / "replay")
    finally:
        judge.close()
    assert breach is not None and target in breach.invariants, breach
