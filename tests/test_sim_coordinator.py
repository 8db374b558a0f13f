"""The broker-side coordinator's herd in the simulator (zkconsumer/sim/coordinator_herd.py, issues 41 and 54): the
project's coordinator-mode member (kafka-python's group client, unchanged) against the project's broker, both on
simulated time and network (sim/kafka_io.py), and the fit of the broker's CPU."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from zkconsumer.sim import coordinator_herd as ch
from zkconsumer.sim import herd_benchmark
from zkconsumer.sim.coordinator_fit import PhaseSample, fit_cost, range_plan

SIM = Path(__file__).resolve().parents[1] / "zkconsumer" / "sim"


@pytest.fixture(scope="module")
def herds() -> dict[str, ch.CoordinatorHerdResult]:
    """Six members, one joins, the first leaves: once eager, once cooperative (seed 0)."""
    return {protocol: ch.measure(protocol, 6, rounds=1) for protocol in ("eager", "cooperative")}


@pytest.mark.parametrize(("protocol", "join_generations"), [("eager", 1), ("cooperative", 2)])
def test_a_join_and_a_leave_count_every_members_requests(herds, protocol: str, join_generations: int) -> None:
    """Eager: each change is one generation, every member rejoins (JoinGroup: the six, plus the newcomer's two for
    KIP-394's member id; then the six left after the leave) and syncs. Cooperative: a join takes two generations
    (the moved partitions are revoked first), a leave one. Every member learns of a rebalance from its next
    heartbeat, so each change takes about one heartbeat interval."""
    r = herds[protocol]
    assert r.generations == [join_generations, 1]
    per_round = (6 + 2 + 6) if protocol == "eager" else (2 * 6 + 2 + 1 + 6)
    assert r.requests["JoinGroup"] == per_round
    assert r.requests["SyncGroup"] == per_round - 1  # the newcomer's first JoinGroup only gets its member id
    assert r.requests["LeaveGroup"] == 1
    assert all(ms <= join_generations * ch.HEARTBEAT_MS for ms in r.converge_ms["join"])
    assert all(ms <= ch.HEARTBEAT_MS for ms in r.converge_ms["crash"])
    assert r.cold_ms >= 3000  # group.initial.rebalance.delay.ms: the coordinator's own timer, on virtual time


def test_the_brokers_cpu_slows_a_large_group(herds) -> None:
    """The broker takes its requests one at a time: at 30 ms a JoinGroup and a SyncGroup, six members' rejoin and
    sync take longer than with CPU free, and the requests are the same."""
    free = herds["eager"]
    busy = ch.measure("eager", 6, rounds=1, cost=ch.CoordinatorCost({"JoinGroup": 30_000, "SyncGroup": 30_000}))
    assert busy.requests["JoinGroup"] == free.requests["JoinGroup"]
    assert busy.converge_ms["join"][0] > free.converge_ms["join"][0] + 200


def test_no_consumer_logic_is_written_twice_in_the_simulator() -> None:
    """Issue 54: the simulator runs the members' own client; no module of sim/ builds group requests or assigns
    partitions itself. ``coordinator_fit.py`` is the one exception, and not a member: it measures the live
    coordinator's CPU by handing it frames, and its Range is kafka-python's own assignor."""
    requests = {"JoinGroupRequest", "SyncGroupRequest", "HeartbeatRequest", "LeaveGroupRequest"}
    found = {}
    for path in sorted(SIM.glob("*.py")):
        if path.name == "coordinator_fit.py":
            continue
        tree = ast.parse(path.read_text())
        names = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        defs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and "assignment" in n.name
                and n.name.endswith(("_assignment", "_assign"))}
        if names & requests or defs:
            found[path.name] = sorted((names & requests) | defs)
    assert found == {}


def test_the_fits_range_is_kafkas() -> None:
    """The payloads the fit's leader sends: Range over the member ids, the first in id order one partition more."""
    plan = {m: ConsumerProtocolAssignment.decode(p).partitions() for m, p in range_plan(["b", "a", "c"], 7).items()}
    assert {m: sorted(tp[1] for tp in tps) for m, tps in plan.items()} == {"a": [0, 1, 2], "b": [3, 4], "c": [5, 6]}


def test_the_fit_recovers_the_costs_that_made_the_samples() -> None:
    truth = {"JoinGroup": 300.0, "SyncGroup": 80.0, "Heartbeat": 40.0, "LeaveGroup": 60.0}
    samples = []
    for n in (10, 100, 1000):
        for api, per in truth.items():
            requests = 2 * n if api == "JoinGroup" else n
            size = requests * 40 + (n * n // 10 if api in ("JoinGroup", "SyncGroup") else 0)  # the leader's frames
            samples.append(PhaseSample(n, api, requests, size, requests * per + 5.0 * size / 1000))
    cost = fit_cost(samples)
    assert cost.request_us == pytest.approx(truth, rel=0.02) and cost.byte_ns == pytest.approx(5.0, rel=0.05)


def test_the_real_herd_benchmarks_group_counts_one_generation_a_change_in_simulation() -> None:
    """benchmarks/herd.py's harness on the simulator (sim/herd_benchmark.py): kafka-python's own consumers, polled
    every 50 ms. A join is the newcomer's two JoinGroups and every other member's one, one generation; the leave of
    the newcomer has every remaining member rejoin. The real benchmark, members in this process, counted 12, 11 and
    10 for a join at 10 members (docs/simulation.md, "Agreement of the herd")."""
    r = herd_benchmark.measure("range", 6, rounds=1)
    assert (r["join_requests"]["JoinGroup"], r["join_requests"]["SyncGroup"]) == (6 + 2, 6 + 1)
    assert (r["leave_requests"]["JoinGroup"], r["leave_requests"]["LeaveGroup"]) == (6, 1)
    assert r["join_ms"] < 1000  # heartbeats of 1 s: every member hears of the rebalance within one
