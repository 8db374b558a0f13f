"""Scenario files (lab/scenario.py, docs/scenarios.md): the format, its errors (file, line, key), the built-in
workloads as shipped files, and a lab run driven by one (a pause, a step with no counterpart said n/a)."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from zkconsumer.cli import main
from zkconsumer.lab.runner import Lab, LabPlan
from zkconsumer.lab.scenario import ActionKind, ScenarioError, Step, builtin, builtin_names, load, loads


def scenario(text: str):
    return loads(textwrap.dedent(text), "s.toml")


def error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as e:
        scenario(text).steps(30.0, 3, {"orders": 8})
    return e.value


# ------------------------------------------------------------------------------------------- the format
def test_every_setting_and_action_is_read() -> None:
    s = scenario("""
        name = "gc"
        description = "a long pause"
        duration = 20
        members = 2
        rate = 50
        initial_records = 10
        session_timeout_ms = 4000
        commit_interval_ms = 300
        strategy = "roundrobin"

        [topics]
        orders = 6

        [[actions]]
        at = 2
        do = "join"
        member = "new"

        [[actions]]
        at = "25%"
        do = "pause"
        member = "c1"
        seconds = 6.5

        [[actions]]
        at = 8
        do = "kill"
        member = "c3"

        [[actions]]
        at = 9
        do = "restart"
        member = "c3"

        [[actions]]
        at = 10
        do = "bounce"
        member = "c2"

        [[actions]]
        at = 11
        do = "stop"
        member = "c2"

        [[actions]]
        at = 12
        do = "migrate"

        [[actions]]
        at = 13
        do = "rollback"
    """)
    assert (s.name, s.duration, s.members, s.rate, s.initial_records, s.session_timeout_ms, s.commit_interval_ms,
            s.strategy, s.topics) == ("gc", 20.0, 2, 50.0, 10, 4000, 300, "roundrobin", {"orders": 6})
    assert s.steps(20.0, 2, s.topics) == [
        Step(2.0, ActionKind.JOIN, "c3"), Step(5.0, ActionKind.PAUSE, "c1", 6.5), Step(8.0, ActionKind.KILL, "c3"),
        Step(9.0, ActionKind.RESTART, "c3"), Step(10.0, ActionKind.BOUNCE, "c2"), Step(11.0, ActionKind.STOP, "c2"),
        Step(12.0, ActionKind.MIGRATE, ""), Step(13.0, ActionKind.ROLLBACK, "")]
    assert {a.kind for a in s.actions} == set(ActionKind)  # every action the format knows is covered here


def test_the_plan_takes_the_files_settings_and_flags_given_on_top() -> None:
    s = scenario("""
        duration = 20
        members = 2
        rate = 50
        [topics]
        orders = 6
    """)
    plan = LabPlan.from_scenario(s, duration=None, consumers=4)
    assert (plan.duration, plan.consumers, plan.rate, plan.topics, plan.strategy) == (20.0, 4, 50.0, {"orders": 6},
                                                                                     "range")


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("duration", [20.0, 30.0, 61.0])
def test_the_built_in_workloads_are_the_schedules_the_lab_always_ran(n: int, duration: float) -> None:
    """The files reproduce the lab's former hard-coded schedules (for 2 members or more; with one, churn now
    stops the member that joined and skips the kill of one that never ran, and says so)."""
    d, topics = duration, {"a": 8, "b": 4}

    def steps(workload: str, mode: str = "zookeeper") -> list[tuple[float, str, str]]:
        return [(round(s.at, 6), str(s.action), s.consumer)
                for s in LabPlan(consumers=n, duration=d, workload=workload, mode=mode, topics=topics).schedule()]

    added = max(0, 8 - n)
    assert steps("churn") == [(round(0.15 * d, 6), "join", f"c{n + 1}"), (round(0.35 * d, 6), "stop", "c2"),
                              (round(0.55 * d, 6), "kill", "c3"), (round(0.75 * d, 6), "join", f"c{n + 2}")]
    assert steps("rolling-restart") == [(round(d * (0.15 + 0.6 * i / n), 6), "bounce", f"c{i + 1}")
                                        for i in range(n)]
    assert steps("scale-out") == [(round(d * (0.1 + 0.7 * i / max(1, added)), 6), "join", f"c{n + i + 1}")
                                  for i in range(added)]
    assert steps("churn", mode="migrate") == [(round(0.1 * d, 6), "join", f"c{n + 1}"),
                                              (round(0.25 * d, 6), "migrate", ""), (round(0.8 * d, 6), "kill", "c1")]


def test_the_built_in_scenarios_are_shipped_files() -> None:
    assert builtin_names() == ["churn", "gc-pause", "migration", "rolling-restart", "scale-out"]
    gc = builtin("gc-pause")
    assert gc.steps(gc.duration, 3, {}) == [Step(10.0, ActionKind.PAUSE, "c1", 8.0)]
    assert builtin("churn").description and not builtin("churn").strict
    with pytest.raises(ScenarioError, match="no built-in scenario 'nope'"):
        builtin("nope")


# ------------------------------------------------------------------------------------- errors: file, line, key
@pytest.mark.parametrize(("text", "where", "says"), [
    ('duration = 10\ncolour = "red"\n', "s.toml:2: colour", "unknown key"),
    ('duration = "long"\n', "s.toml:1: duration", "expected a number"),
    ("duration = 0\n", "s.toml:1: duration", "must be > 0"),
    ('strategy = "sticky"\n', "s.toml:1: strategy", "unknown strategy 'sticky'"),
    ("[topics]\norders = 0\n", "s.toml:2: topics.orders", "partitions must be an integer >= 1"),
    ('[[actions]]\nat = 1\ndo = "kil"\nmember = "c1"\n', "s.toml:3: actions[0].do", "unknown action 'kil'"),
    ('[[actions]]\ndo = "kill"\nmember = "c1"\n', "s.toml:1: actions[0].at", "missing"),
    ('[[actions]]\nat = 1\ndo = "join"\nmember = "new"\n\n[[actions]]\nat = "150%"\ndo = "stop"\nmember = "c1"\n',
     "s.toml:7: actions[1].at", "a share of the run such as '15%'"),
    ('[[actions]]\nat = 1\ndo = "kill"\n', "s.toml:1: actions[0].member", "'kill' needs a member"),
    ('[[actions]]\nat = 1\ndo = "migrate"\nmember = "c1"\n', "s.toml:4: actions[0].member", "acts on the whole"),
    ('[[actions]]\nat = 1\ndo = "pause"\nmember = "c1"\n', "s.toml:1: actions[0].seconds", "a pause lasts"),
    ('[[actions]]\nat = 1\ndo = "stop"\nmember = "c1"\nseconds = 3\n', "s.toml:5: actions[0].seconds",
     "only a pause has seconds"),
    ('[[actions]]\nat = 1\nuntil = 5\ndo = "stop"\nmember = "c1"\n', "s.toml:3: actions[0].until",
     "spreads repeated actions"),
    ('[[actions]]\nat = 1\ndo = "stop"\nmember = "new"\n', "s.toml:4: actions[0].member", "only with do = 'join'"),
    ('[[actions]]\nat = 1\ndo = "join"\nmember = "c4"\ncount = 2\n', "s.toml:5: actions[0].count",
     "new members only"),
    ('[[actions]]\nat = 1\ndo = "join"\nmember = "new"\n\n[[actions]]\nat = 0.5\ndo = "kill"\nmember = "c4"\n',
     "s.toml:6: actions[1].member", "'c4' is not running at 0.5 s"),
    ("duration = [1\n", "s.toml:1", "not valid TOML"),
    ("duration = 10\nrate = = 3\n", "s.toml:2", "not valid TOML: Invalid value"),
])
def test_a_malformed_file_is_one_error_naming_file_line_and_key(text: str, where: str, says: str) -> None:
    e = error(text)
    assert str(e).startswith(where + ":") or str(e).startswith(where + " "), str(e)
    assert says in str(e), str(e)


def test_an_unreadable_file_is_said(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"missing\.toml: cannot read it"):
        load(tmp_path / "missing.toml")


def test_the_cli_reports_the_error_and_runs_nothing(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[actions]]\nat = 1\ndo = "explode"\n')
    assert main(["lab", "--scenario", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:3: actions[0].do: unknown action 'explode'" in " ".join(err.split())
    assert main(["compare", "--scenario", str(path), "--workload", "churn"]) == 1
    assert "give one" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- a real run
GC_PAUSE = """
    name = "gc-pause"
    duration = 16
    members = 2
    rate = 40
    initial_records = 20
    session_timeout_ms = 4000
    commit_interval_ms = 300

    [topics]
    orders = 4

    [[actions]]
    at = 5
    do = "pause"
    member = "c1"
    seconds = 6

    [[actions]]
    at = 6
    do = "migrate"
"""


@pytest.mark.slow
def test_a_lab_runs_a_scenario_file_pausing_a_member_past_its_session(zk_connect: str, tmp_path: Path) -> None:
    path = tmp_path / "gc.toml"
    path.write_text(textwrap.dedent(GC_PAUSE))
    plan = LabPlan.from_scenario(load(path))
    summary = Lab(plan, tmp_path / "run", zookeeper=zk_connect, console=Console(file=io.StringIO())).run()
    assert summary["scenario"] == "gc-pause" and summary["lost"] == 0 and summary["verify_ok"], summary
    # the migration has no counterpart in a ZooKeeper-mode lab: skipped, and said
    assert summary["not_applicable"] == ["migrate at 6.0 s: only a lab in migrate mode migrates its group"]
    events = [json.loads(line) for line in (tmp_path / "run" / "traces" / "lab_c1.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    # c1 owned partitions before its pause (at 5 s, its rebalance done long before); paused 6 s against a 4 s
    # session, it learnt of the expiry on waking and joined the group again
    assert kinds.index("rebalance_done") < kinds.index("session_expired"), kinds
    assert kinds.count("registered") == 2, kinds


# ------------------------------------------------------------------------------- shipped as package data
ZIPPED = """
import sys, zipfile
sys.path.insert(0, sys.argv[1])
import zkconsumer.lab.scenario as s
assert s.__file__.startswith(sys.argv[1]), s.__file__  # imported from the zip, not from the checkout
print(",".join(s.builtin_names()))
from zkconsumer.cli import main
try:
    main(["lab", "--help"])
except SystemExit as e:
    assert e.code == 0
"""


def test_the_scenarios_travel_in_the_package_zip_and_the_cli_starts_without_them(tmp_path: Path) -> None:
    """Spark's --py-files zip carries the shipped scenarios; a zip without them still runs the CLI (spark-submit
    runs zkconsumer's __main__ from one)."""
    import subprocess
    import sys
    import zipfile

    from zkconsumer.analysis.spark import package_zip

    full = package_zip(tmp_path)
    bare = tmp_path / "bare.zip"
    with zipfile.ZipFile(full) as src, zipfile.ZipFile(bare, "w") as dst:
        for name in src.namelist():
            if name.endswith(".py"):
                dst.writestr(name, src.read(name))
    for zipped, names in ((full, ",".join(builtin_names())), (bare, "")):
        run = subprocess.run([sys.executable, "-c", ZIPPED, str(zipped)], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.splitlines()[0] == names
