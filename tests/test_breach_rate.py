"""Rates, not anecdotes (issue 40 item 2; zkconsumer/lab/breach_rate.py): runs' verdicts folded into "breaks in k
of N runs" with per invariant the runs that broke it. Pure: milliseconds."""

from __future__ import annotations

import pytest

from zkconsumer.lab.breach_rate import BreachRate, InvariantRate, RateOutcome, RunStatus, RunVerdict, spread
from zkconsumer.scenario.nemesis import COMMIT_INVARIANTS, Breach, Invariant

HOLDS = RunVerdict({i: 0 for i in Invariant})
OWNERS = Invariant.ONE_LIVE_OWNER
DUPS = Invariant.DUPLICATES_UNCOMMITTED


def broke(**violations: int) -> RunVerdict:
    """A run judging every invariant, with these violations (by the enum's member name)."""
    return RunVerdict({i: 0 for i in Invariant} | {Invariant[name]: n for name, n in violations.items()})


def test_a_rate_counts_the_runs_that_broke_anything_and_each_invariant_apart() -> None:
    rate = BreachRate((broke(ONE_LIVE_OWNER=10), HOLDS, broke(ONE_LIVE_OWNER=3, DUPLICATES_UNCOMMITTED=600), HOLDS,
                       HOLDS))
    assert (rate.k, rate.n, rate.outcome) == (2, 5, RateOutcome.BREAKS)
    assert rate.fraction == "2/5" and rate.headline == "breaks in 2 of 5 runs"
    # per invariant: runs, not violations (10 + 3 overlaps are two runs)
    assert rate.invariants[OWNERS] == InvariantRate(broken=2, judged=5)
    assert rate.invariants[DUPS] == InvariantRate(broken=1, judged=5)
    assert rate.invariants[Invariant.ZERO_LOST] == InvariantRate(broken=0, judged=5)
    assert rate.text == ("breaks in 2 of 5 runs: never two live owners (2 of 5); duplicates only inside uncommitted "
                         "windows (1 of 5)")


def test_no_run_broken_holds_in_n_of_n() -> None:
    rate = BreachRate((HOLDS, HOLDS, HOLDS))
    assert (rate.k, rate.n, rate.outcome, rate.fraction) == (0, 3, RateOutcome.HOLDS, "0/3")
    assert rate.text == rate.headline == "holds in 3 of 3 runs"
    assert BreachRate((HOLDS,)).text == "holds in 1 of 1 run"
    assert BreachRate((broke(ZERO_LOST=154),)).text == "breaks in 1 of 1 run: zero lost (1 of 1)"


def test_a_failed_or_unanalysed_run_is_no_verdict_and_never_counts_as_holding() -> None:
    rate = BreachRate((HOLDS, RunVerdict.failed("LabError: the broker did not start"), RunVerdict(None)))
    assert (rate.n, rate.k, rate.failed, rate.not_analysed) == (1, 0, 1, 1)
    assert rate.fraction == "0/1"
    assert rate.text == "holds in 1 of 1 run (1 failed to run, 1 not analysed of 3)"
    nothing = BreachRate((RunVerdict.failed("boom"),))
    assert nothing.outcome is RateOutcome.NO_VERDICT and nothing.text == "no verdict (1 failed to run of 1)"
    assert nothing.not_judged == []  # no verdict at all is not "every invariant not judged"
    assert RunVerdict.failed("boom").status is RunStatus.FAILED and RunVerdict(None).status is RunStatus.NOT_ANALYSED


def test_an_invariant_not_judged_counts_neither_way() -> None:
    """Kafka 0.8.2.2's own consumer: its commits are not in its trace; a mixed group may judge them in some runs."""
    untraced = RunVerdict({i: 0 for i in Invariant if i not in COMMIT_INVARIANTS} | {OWNERS: 9})
    rate = BreachRate((untraced, untraced, HOLDS))
    assert rate.invariants[DUPS] == InvariantRate(broken=0, judged=1)
    assert rate.not_judged == []
    only = BreachRate((untraced, RunVerdict({i: 0 for i in Invariant if i not in COMMIT_INVARIANTS})))
    assert only.not_judged == list(COMMIT_INVARIANTS)
    assert only.text == ("breaks in 1 of 2 runs: never two live owners (1 of 2) (not judged: duplicates only inside "
                         "uncommitted windows, commits never backwards)")
    partly = BreachRate((broke(DUPLICATES_UNCOMMITTED=5), untraced))
    assert "duplicates only inside uncommitted windows (1 of 1 judged)" in partly.text


def test_a_nemesis_breach_is_a_verdict_over_the_invariants_judged() -> None:
    verdict = RunVerdict.of_breach(Breach(frozenset({OWNERS})), [i for i in Invariant if i not in COMMIT_INVARIANTS])
    assert verdict.broken == {OWNERS} and verdict.text == "BROKEN: never two live owners (1)"
    assert set(verdict.violations) == set(Invariant) - set(COMMIT_INVARIANTS)
    assert RunVerdict.of_breach(None).text == "holds" and RunVerdict.of_breach(None).broken == frozenset()


def test_pooled_rates_are_every_run_of_every_seed() -> None:
    seeds = [BreachRate((HOLDS, broke(ONE_LIVE_OWNER=1))), BreachRate((HOLDS, HOLDS)),
             BreachRate((broke(ZERO_LOST=3), broke(ONE_LIVE_OWNER=2, ZERO_LOST=1)))]
    total = BreachRate.pooled(seeds)
    assert (total.k, total.n) == (3, 6)
    assert total.invariants[OWNERS] == InvariantRate(2, 6) and total.invariants[Invariant.ZERO_LOST] == InvariantRate(
        2, 6)


def test_the_json_carries_k_n_the_counts_and_each_runs_verdict() -> None:
    doc = BreachRate((broke(ONE_LIVE_OWNER=10), HOLDS, RunVerdict.failed("boom"))).as_json()
    assert (doc["k"], doc["n"], doc["failed"], doc["outcome"]) == (1, 2, 1, "breaks")
    assert doc["invariants"]["one-live-owner"] == {"broken": 1, "judged": 2}
    assert [r["verdict"] for r in doc["runs"]] == ["BROKEN: never two live owners (10)", "holds",
                                                   "failed to run: boom"]
    assert doc["runs"][0]["invariants"]["one-live-owner"] == 10 and doc["runs"][2]["invariants"] is None


def test_nonsense_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        BreachRate(())
    with pytest.raises(ValueError, match="counts"):
        RunVerdict({OWNERS: -1})
    with pytest.raises(ValueError, match="failed"):
        RunVerdict({OWNERS: 0}, "boom")


def test_spread_is_the_lowest_and_highest_measured() -> None:
    assert spread([3, None, 1, 7]) == (1, 7)
    assert spread([None, None]) is None and spread([]) is None
    assert spread([0, 0]) == (0, 0)
