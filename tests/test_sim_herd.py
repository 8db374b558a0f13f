"""The simulated herd (zkconsumer/sim/herd.py): benchmarks/rebalance.py's measurement on the simulator.

Its counts are compared with real ZooKeeper in benchmarks/herd_sim.py (docs/simulation.md); here, at 10 members, the
figures that run recorded (2026-11-28: 52.3 and 261.3 requests per join or crash on the real server) hold within the
5% issue 39 asks, and what the herd reports beside the counts is there and consistent.
"""

from __future__ import annotations

import logging

import pytest

from zkconsumer.sim.herd import measure
from zkconsumer.sim.zk_codes import RequestKind

#: benchmarks/herd_sim.py's real side at 10 members (benchmarks/README.md, "Requests per rebalance in simulation")
REAL_PER_ACTION = {"default": 52.3, "kafka-0.8": 261.3}


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_ten_members_count_what_the_real_server_counted(profile: str) -> None:
    result = measure(profile, 10, rounds=1)
    assert abs(result.per_action() / REAL_PER_ACTION[profile] - 1) < 0.05
    figures = result.as_dict()
    assert result.actions == 2 and figures["join_ms"][0] > 0 and figures["crash_ms"][0] > 0
    # the default profile reads the changed registrations in one multiRead; Kafka 0.8 one getData each
    kinds = figures["requests_by_kind"]
    if profile == "default":
        assert kinds[RequestKind.MULTI_READ.value] >= 1
    else:
        assert RequestKind.MULTI_READ.value not in kinds and kinds[RequestKind.GET_DATA.value] > 100
    # every member hears of the change by a watch, and answers carry more than requests
    assert figures["notifications_per_action"] >= 10
    assert figures["bytes_from_server_per_action"] > figures["bytes_to_server_per_action"] > 0
    assert set(figures["phase_wall_s"]) == {"cold", "join", "crash"}


def test_a_herd_is_one_run_per_seed() -> None:
    a, b = measure("default", 12, rounds=1, seed=3), measure("default", 12, rounds=1, seed=3)
    assert (a.requests, a.converge_ms, a.bytes_from_server, a.notifications) == \
        (b.requests, b.converge_ms, b.bytes_from_server, b.notifications)


def test_a_group_that_does_not_settle_ends_the_run_with_a_verdict_not_an_error(monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    """At 10,000 members on the lab's service times a member's start gave up its retries (issue 41): the herd
    says the group collapsed, at which size and after how long, instead of the simulation dying or waiting forever."""
    from zkconsumer.sim import herd

    monkeypatch.setattr(herd, "SETTLE_LIMIT_MS", 0)  # no group settles in no time
    r = measure("default", 5, rounds=1)
    assert r.collapsed.startswith("5 members did not settle") and not r.converge_ms["join"]
    assert r.as_dict()["collapsed"] == r.collapsed


def test_a_large_group_registers_first_and_settles_as_one_started_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past COLD_WAVE members the cold start registers everyone, lets one member read the group, and starts the
    rest from its view (issue 41: 10,000 members grown by joins are 5·10⁷ reads before the first action). The
    group it leaves is the same: the same requests and convergence for the join and the crash that follow; only
    the cold start's registration reads go: one multiRead of every registration, by the first member, then one of
    the topic's node per member (the first rebalance's), where all at once each member reads as the others come."""
    from zkconsumer.sim import herd

    at_once = measure("default", 12, rounds=1)
    monkeypatch.setattr(herd, "COLD_WAVE", 5)
    first = measure("default", 12, rounds=1)
    assert first.collapsed == "" and first.converge_ms == at_once.converge_ms
    without_pings = [{k: n for k, n in r.requests.items() if k != RequestKind.PING.value} for r in (first, at_once)]
    assert without_pings[0] == without_pings[1]
    reads = RequestKind.MULTI_READ.value
    assert first.cold_requests[reads] == 1 + 12 < at_once.cold_requests[reads]
