"""A nemesis seed's schedule run N times (lab/nemesis_run.py ``repeats``, benchmarks/nemesis.py ``--runs``): the
seed's verdict is "breaks in k of N runs", a variant's total the same over all its runs. Driven by a judge that
runs nothing (a plain function of the run's number): milliseconds; the lab runs are in tests/test_nemesis_lab.py."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from zkconsumer.lab.breach_rate import RunVerdict
from zkconsumer.lab.nemesis_run import SeedResult, run_nemesis
from zkconsumer.scenario.nemesis import COMMIT_INVARIANTS, Breach, Invariant, NemesisSettings

ROOT = Path(__file__).resolve().parent.parent
OWNERS = Breach(frozenset({Invariant.ONE_LIVE_OWNER}), "3 times two live owners")


class ScriptedJudge:
    """A ``LabJudge`` stand-in: the n-th run (counted over the whole benchmark) breaches, holds or raises as
    ``script`` says; records where each run was written."""

    def __init__(self, variant: str, script: dict[int, Breach | Exception], untraced: bool = False) -> None:
        self.variant, self.flags, self.script, self.untraced = variant, {}, script, untraced
        self.outs: list[Path] = []

    def run(self, scenario, out: Path) -> tuple[Breach | None, dict]:  # noqa: ANN001 - a Scenario
        self.outs.append(out)
        outcome = self.script.get(len(self.outs))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome, {"duplicates": 0, "commits_untraced": self.untraced}


def nemesis(tmp_path: Path, judge: ScriptedJudge, seeds: list[int], repeats: int) -> tuple[list[SeedResult], str]:
    printed = io.StringIO()
    results = run_nemesis(seeds, NemesisSettings(), judge.variant, tmp_path, Console(file=printed, width=250),
                          budget=0, judge=judge, repeats=repeats)
    return results, printed.getvalue()


def test_a_seed_run_n_times_is_breaks_in_k_of_n(tmp_path: Path) -> None:
    judge = ScriptedJudge("zookeeper-kafka-0.8", {2: OWNERS})
    (result,), printed = nemesis(tmp_path, judge, [3], repeats=3)
    assert judge.outs == [tmp_path / "seed-3" / f"run-{i}" for i in (1, 2, 3)]
    assert (result.rate.k, result.rate.n) == (1, 3) and result.breach == OWNERS and result.error is None
    assert result.rate.text == "breaks in 1 of 3 runs: never two live owners (1 of 3)"
    assert len(result.run_seconds) == 3
    for i in (1, 2, 3):
        assert f"seed 3 run {i} of 3" in printed
    assert "seed 3: breaks in 1 of 3 runs" in printed and "every run of every seed: breaks in 1 of 3 runs" in printed
    doc = json.loads((tmp_path / "nemesis.json").read_text())["runs"][0]
    assert (doc["rate"]["k"], doc["rate"]["n"]) == (1, 3) and doc["breached"] == ["one-live-owner"]
    assert [r["verdict"] for r in doc["rate"]["runs"]] == ["holds", "BROKEN: never two live owners (1)", "holds"]


def test_one_run_keeps_the_layout_and_output_of_before(tmp_path: Path) -> None:
    judge = ScriptedJudge("zookeeper-default", {})
    (result,), printed = nemesis(tmp_path, judge, [2], repeats=1)
    assert judge.outs == [tmp_path / "seed-2" / "run"]
    assert "seed 2: every invariant holds" in printed and "runs: 1, breaches: 0" in printed
    assert " of 1" not in printed and "every run of every seed" not in printed
    assert result.rate.text == "holds in 1 of 1 run"


def test_a_run_that_fails_is_no_verdict_and_every_run_failing_fails_the_seed(tmp_path: Path) -> None:
    judge = ScriptedJudge("zookeeper-default", {1: RuntimeError("no broker"), 3: RuntimeError("no broker"),
                                                4: RuntimeError("no broker")})
    partly, wholly = nemesis(tmp_path, judge, [0, 1], repeats=2)[0]
    assert partly.error is None and (partly.rate.k, partly.rate.n, partly.rate.failed) == (0, 1, 1)
    assert partly.rate.text == "holds in 1 of 1 run (1 failed to run of 2)"
    assert wholly.error == "RuntimeError: no broker" and wholly.rate.n == 0


def test_commits_untraced_are_not_judged_in_the_seeds_rate(tmp_path: Path) -> None:
    """Kafka 0.8.2.2's own consumer: no commit in its trace, so its rate judges the rest only."""
    judge = ScriptedJudge("zookeeper-default", {1: OWNERS}, untraced=True)
    (result,), _ = nemesis(tmp_path, judge, [0], repeats=2)
    assert result.rate.not_judged == list(COMMIT_INVARIANTS)
    assert result.rate.text.endswith("(not judged: duplicates only inside uncommitted windows, commits never "
                                     "backwards)")


def test_a_seed_runs_at_least_once(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least once"):
        nemesis(tmp_path, ScriptedJudge("zookeeper-default", {}), [0], repeats=0)


@pytest.fixture(scope="module")
def bench():  # noqa: ANN201 - the module
    spec = importlib.util.spec_from_file_location("nemesis_benchmark", ROOT / "benchmarks" / "nemesis.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def seed(n: int, *verdicts: RunVerdict, error: str | None = None) -> SeedResult:
    from zkconsumer.scenario.nemesis import draw

    result = SeedResult(n, draw(n, NemesisSettings()), Path(f"seed-{n}"), seconds=10.0 * len(verdicts),
                        error=error, verdicts=list(verdicts), run_seconds=[10.0] * len(verdicts))
    result.breach = next((Breach(v.broken) for v in verdicts if v.broken), None)
    return result


def table_text(table) -> str:  # noqa: ANN001 - a rich Table
    out = io.StringIO()
    Console(file=out, width=400).print(table)
    return out.getvalue()


def test_the_benchmark_totals_each_variant_over_every_run_and_lays_seeds_side_by_side(bench) -> None:
    holds, owners = RunVerdict.of_breach(None), RunVerdict.of_breach(OWNERS)
    rows = [("zookeeper-kafka-0.8", [seed(0, holds, owners, holds), seed(1, holds, holds, holds)], 60.0),
            ("kafka-0.8.2.2", [seed(0, owners, owners, holds), seed(1, owners, holds, holds)], 60.0)]
    across = table_text(bench.across(rows, NemesisSettings(), 2, runs=3))
    assert "2 seeds per variant, 3 runs each" in across
    # seeds breaching, then every run: k of N over the variant's 6 runs; per invariant seeds (runs of judged)
    assert "│ zookeeper-kafka-0.8 │    2 │        1 │ breaks in 1 of 6 runs │" in across
    assert "│ kafka-0.8.2.2       │    2 │        2 │ breaks in 3 of 6 runs │" in across
    assert "2 (3 of 6)" in across and "1 (1 of 6)" in across
    held = table_text(bench.across([("zookeeper-default", [seed(0, holds, holds), seed(1, holds, holds)], 40.0)],
                                   NemesisSettings(), 2, runs=2))
    assert "│ zookeeper-default │    2 │        0 │ holds in 4 of 4 runs │" in held
    side = table_text(bench.per_seed(rows, [0, 1]))
    lines = [line for line in side.splitlines() if line.startswith("│ ")]  # the body: a line per seed
    assert [line.split("│")[1].strip() for line in lines] == ["0", "1"]
    assert "│ breaks in 1 of 3 runs: never two live owners (1 of 3) │ breaks in 2 of 3 runs" in lines[0]
    assert "│ holds in 3 of 3 runs " in lines[1] and "│ breaks in 1 of 3 runs" in lines[1]


def test_the_benchmarks_table_with_one_run_is_the_table_of_before(bench) -> None:
    holds, owners = RunVerdict.of_breach(None), RunVerdict.of_breach(OWNERS)
    rows = [("zookeeper-kafka-0.8", [seed(0, holds), seed(1, owners), seed(2, error="boom")], 30.0)]
    text = table_text(bench.across(rows, NemesisSettings(), 3))
    assert "every run" not in text and "runs each" not in text and " of " not in text.split("\n", 2)[2]
    row = next(line for line in text.splitlines() if "zookeeper-kafka-0.8" in line)
    cells = [c.strip() for c in row.strip("│").split("│")]
    # runs, breaches, the five invariants (seeds breaking each), failed to run
    assert cells[1:9] == ["3", "1", "0", "1", "0", "0", "0", "1"]
