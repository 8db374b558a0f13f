"""The broker-side coordinator's herd in the simulator (zkconsumer/sim/coordinator_herd.py, issue 41 item 3): the
project's own coordinator and broker request path on virtual time, the members' classic group loop, the
cooperative rule, the payload codecs and the fit of the broker's CPU."""

from __future__ import annotations

import pytest

from zkconsumer.sim import coordinator_herd as ch
from zkconsumer.sim.coordinator_fit import PhaseSample, fit_cost


def test_payload_codecs_round_trip_and_have_kafkas_sizes() -> None:
    """ConsumerProtocolSubscription v1 / Assignment v1 for one topic: what the members' metadata weighs."""
    sub = ch.encode_subscription("bench", [3, 1, 7])
    assert ch.decode_owned(sub) == [3, 1, 7] and ch.decode_owned(ch.encode_subscription("bench", [])) == []
    # version, [topic], null user data, [(topic, [3 partitions])]
    assert len(sub) == 2 + 4 + 2 + 5 + 4 + 4 + 2 + 5 + 4 + 3 * 4
    assert ch.decode_assignment(ch.encode_assignment("bench", [0, 5])) == [0, 5] and ch.decode_assignment(b"") == []


def test_range_and_the_cooperative_rule() -> None:
    assert ch.range_assignment(["b", "a", "c"], 7) == {"a": [0, 1, 2], "b": [3, 4], "c": [5, 6]}
    # a joins a group where b owns everything: balanced and sticky, but b's partitions are withheld from a this
    # generation (b still owns them), so a gets nothing yet and b keeps its share
    first = ch.cooperative_assignment({"a": [], "b": [0, 1, 2, 3]}, 4)
    assert first == {"a": [], "b": [0, 1]}
    # b revoked 2 and 3 and rejoined: now they are free and go to a
    assert ch.cooperative_assignment({"a": [], "b": [0, 1]}, 4) == {"a": [2, 3], "b": [0, 1]}
    # a member that left: its partitions were nobody's, so they move at once
    assert ch.cooperative_assignment({"a": [0, 1], "c": [4, 5]}, 6) == {"a": [0, 1, 2], "c": [3, 4, 5]}


@pytest.mark.parametrize(("protocol", "join_generations"), [("eager", 1), ("cooperative", 2)])
def test_a_join_and_a_leave_on_the_real_coordinator_count_every_members_requests(
        protocol: str, join_generations: int) -> None:
    """Six members, one joins, the first leaves, twice. Eager: each change is one generation, every member rejoins
    (JoinGroup: the six, plus the newcomer's two for KIP-394's member id; then the six left after the leave) and
    syncs. Cooperative: a join takes two generations (the moved partitions are revoked first), a leave one. Every
    member learns of a rebalance from its next heartbeat, so each change takes about one heartbeat interval."""
    r = ch.measure(protocol, 6, rounds=2)
    assert r.generations == [join_generations, 1] * 2
    per_round = (6 + 2 + 6) if protocol == "eager" else (2 * 6 + 2 + 1 + 6)
    assert r.requests["JoinGroup"] == 2 * per_round
    assert r.requests["LeaveGroup"] == 2
    assert all(ms <= join_generations * ch.HEARTBEAT_MS for ms in r.converge_ms["join"])
    assert all(ms <= ch.HEARTBEAT_MS for ms in r.converge_ms["crash"])
    assert r.cold_ms >= 3000  # group.initial.rebalance.delay.ms: the coordinator's own timer, on virtual time
    assert r.wall_s < 30


def test_one_seed_is_one_run() -> None:
    one, two = ch.measure("cooperative", 5, rounds=1, seed=3), ch.measure("cooperative", 5, rounds=1, seed=3)
    assert {**one.as_dict(), "wall_s": 0} == {**two.as_dict(), "wall_s": 0}


def test_the_brokers_cpu_slows_a_large_group() -> None:
    """The broker takes its requests one at a time: at 1 ms a request, 40 members' rejoin and sync take longer than
    with CPU free, and nothing else changes."""
    free = ch.measure("eager", 40, rounds=1)
    busy = ch.measure("eager", 40, rounds=1, cost=ch.CoordinatorCost({"JoinGroup": 1000, "SyncGroup": 1000}))
    assert busy.requests["JoinGroup"] == free.requests["JoinGroup"]
    assert busy.converge_ms["join"][0] > free.converge_ms["join"][0] + 40


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
