"""The batched sweep (numpy over many scenarios) gives exactly the scalar loop's rows: the assignors are the
oracle. No Spark here: the Spark path is covered by test_analysis_sweep.py."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkconsumer.analysis.sweep import (
    GRID_FULL,
    GRID_QUICK,
    Scenario,
    SweepConfig,
    arrow_batch,
    make_scenario,
    run_local,
    run_scenario,
)
from zkconsumer.analysis.sweep_batch import batch_rows, run_batched

STRATEGIES = ("range", "roundrobin", "roundrobin-relaxed", "sticky")


def scalar(scenarios: list[Scenario], strategies=STRATEGIES, seed: int = 3) -> list[dict]:
    return arrow_batch([row for sc in scenarios for row in run_scenario(sc, strategies, seed)]).to_pylist()


def test_grid_full_scenarios_row_for_row() -> None:
    cfg = SweepConfig(GRID_FULL, seed=1, changes=3)
    scenarios = [make_scenario(cfg, i) for i in range(600)]  # every shape of the grid, some twice
    assert batch_rows(scenarios, cfg.strategies, 1).to_pylist() == scalar(scenarios, cfg.strategies, 1)


def test_run_batched_equals_run_local() -> None:
    cfg = SweepConfig(GRID_QUICK, seed=5, changes=4)
    assert run_batched(cfg, 250, start=40, chunk=64).equals(run_local(cfg, 250, start=40))


def test_a_member_id_drawn_twice_falls_back_to_the_scalar_loop() -> None:
    subs = {"t0": 1}
    sc = Scenario(7, 2, 1, 1, 4, "all-same", {"ca": subs, "cb": subs}, [("leave", "ca", None), ("join", "ca", subs)])
    assert batch_rows([sc], STRATEGIES, 3).to_pylist() == scalar([sc])


# Member ids with digits and dashes, stream counts past 9 ("x-10" sorts before "x-2" in Java's order), more
# than 10 topics ("t10" before "t2"), subscriptions that differ (RoundRobin's precondition), empty batches.
member_ids = st.text(alphabet="ab0129-", min_size=1, max_size=4).map(lambda s: "c" + s)


@st.composite
def scenarios(draw) -> Scenario:
    topics = draw(st.integers(1, 12))
    partitions = draw(st.integers(1, 14))
    streams = draw(st.integers(1, 11))
    names = [f"t{i}" for i in range(topics)]
    ids = draw(st.lists(member_ids, min_size=1, max_size=12, unique=True))
    subset = st.lists(st.sampled_from(names), min_size=1, unique=True).map(lambda ts: dict.fromkeys(ts, streams))
    same = draw(st.booleans())
    first = draw(subset)
    subs = [first if same else draw(subset) for _ in ids]
    initial = draw(st.integers(1, len(ids)))
    members = dict(zip(ids[:initial], subs[:initial], strict=True))
    alive = list(members)
    joiners = list(zip(ids[initial:], subs[initial:], strict=True))
    changes = []
    for _ in range(draw(st.integers(0, 5))):
        if joiners and (len(alive) == 1 or draw(st.booleans())):
            cid, sub = joiners.pop(0)
            alive.append(cid)
            changes.append(("join", cid, sub))
        elif len(alive) > 1:
            cid = alive.pop(draw(st.integers(0, len(alive) - 1)))
            changes.append((draw(st.sampled_from(("leave", "crash"))), cid, None))
    return Scenario(draw(st.integers(0, 10**9)), initial, streams, topics, partitions, "random-subsets",
                    members, changes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(scenarios(), min_size=0, max_size=6), st.sampled_from([STRATEGIES, ("roundrobin", "range"),
                                                                        ("roundrobin-relaxed",), ("sticky",)]))
def test_batched_equals_scalar_on_random_groups(batch: list[Scenario], strategies: tuple[str, ...]) -> None:
    got = batch_rows(batch, strategies, 3)
    assert got.schema == arrow_batch([]).schema
    assert got.to_pylist() == scalar(batch, strategies)
    assert isinstance(got, pa.RecordBatch)
