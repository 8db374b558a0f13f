"""The group state machine and the coordinator's rules, without sockets: Kafka 2.x's transitions, protocol votes,
KIP-394 member ids, generations, commit validation. The coordinator runs on a ManualClock without its timer
thread: time moves only when a test advances the clock and calls ``tick()``, so every timeout fires at a chosen
millisecond. Threads remain only where a JoinGroup or SyncGroup must block while another member acts."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_until

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.clock import ManualClock
from zkconsumer.coordinator.group import Group, GroupState, IllegalStateTransition, Member
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator, partition_for
from zkconsumer.coordinator.store import CommittedOffset
from zkconsumer.errors import KafkaCode


def member(mid: str, *protocols: str) -> Member:
    return Member(mid, "client", "/127.0.0.1", 1000, 1000, "consumer", [(p, p.encode()) for p in protocols])


def test_the_coordinator_partition_is_kafkas() -> None:
    assert partition_for("my-group") == 12  # Utils.abs("my-group".hashCode) % 50
    assert partition_for("my-group", 10) == 2 and 0 <= partition_for("") < 50


def test_transitions_follow_kafkas_valid_previous_states() -> None:
    g = Group("g")
    g.transition(GroupState.PREPARING_REBALANCE, 1)
    g.transition(GroupState.COMPLETING_REBALANCE, 2)
    g.transition(GroupState.STABLE, 3)
    with pytest.raises(IllegalStateTransition):
        g.transition(GroupState.EMPTY, 4)  # a stable group empties only through a rebalance
    g.transition(GroupState.PREPARING_REBALANCE, 5)
    g.transition(GroupState.DEAD, 6)
    assert g.state_timestamp_ms == 6


def test_protocol_selection_by_votes_among_protocols_every_member_supports() -> None:
    g = Group("g")
    for m in (member("a", "roundrobin", "range"), member("b", "range", "roundrobin"),
              member("c", "range", "sticky", "roundrobin")):
        g.add(m)
    assert g.candidate_protocols() == {"range", "roundrobin"}
    assert g.select_protocol() == "range"  # b and c prefer range
    assert g.supports("consumer", ["roundrobin"]) and not g.supports("consumer", ["sticky"])
    assert not g.supports("connect", ["range"])


def test_next_generation_keeps_the_leader_and_empties_without_members() -> None:
    g = Group("g")
    g.add(member("a", "range"))
    g.add(member("b", "range"))
    g.transition(GroupState.PREPARING_REBALANCE, 1)
    g.init_next_generation(2)
    assert (g.generation, g.leader_id, g.state, g.protocol_name) == (1, "a", GroupState.COMPLETING_REBALANCE,
                                                                     "range")
    g.remove("a")
    assert g.leader_id == "b"
    g.remove("b")
    g.transition(GroupState.STABLE, 3)
    g.transition(GroupState.PREPARING_REBALANCE, 4)
    g.init_next_generation(5)
    assert (g.generation, g.state, g.empty_since_ms) == (2, GroupState.EMPTY, 5)


# ------------------------------------------------------------------------------------------ the coordinator
T0 = 1_000_000  # the manual clock's start: any time works, a non-zero one catches "0 means unset" slips


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


def start(clock: ManualClock, initial_delay_ms: int = 0) -> GroupCoordinator:
    c = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=initial_delay_ms,
                                           group_min_session_timeout_ms=100), clock=clock).start(timers=False)
    wait_until(lambda: c.loaded, message="the store loaded")  # a load thread, not time
    return c


@pytest.fixture
def coordinator(clock: ManualClock):
    c = start(clock)
    yield c
    c.stop()


def advance(c: GroupCoordinator, clock: ManualClock, ms: int) -> None:
    """Kafka's MockTime.sleep + MockTimer.advanceClock: move time, then run what became due."""
    clock.advance(ms)
    c.tick()


def join(c: GroupCoordinator, mid: str = "", protocols=("range",), require_id: bool = False, session: int = 1000,
         group: str = "g"):
    return c.join(group, mid, None, "client", "/h", session, 2000, "consumer", [(p, b"m") for p in protocols],
                  require_id)


def join_in_thread(c: GroupCoordinator, results: dict, key: str, **kwargs) -> threading.Thread:
    """A JoinGroup that blocks (as a connection's thread does) until its join completes; its answer in results."""
    t = threading.Thread(target=lambda: results.setdefault(key, join(c, **kwargs)), daemon=True)
    t.start()
    return t


def test_member_id_required_then_join_and_sync(coordinator: GroupCoordinator) -> None:
    first = join(coordinator, require_id=True)
    assert first.error == KafkaCode.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    joined = join(coordinator, first.member_id, require_id=True)
    assert (joined.error, joined.generation, joined.leader) == (KafkaCode.NONE, 1, first.member_id)
    assert [m[0] for m in joined.members] == [first.member_id]  # the leader gets the member list
    sync = coordinator.sync("g", 1, first.member_id, None, None, None, {first.member_id: b"plan"})
    assert (sync.error, sync.assignment) == (KafkaCode.NONE, b"plan")
    assert coordinator.describe("g").state == "Stable"
    assert join(coordinator, "nobody").error == KafkaCode.UNKNOWN_MEMBER_ID


def test_a_second_member_rebalances_the_group_and_both_get_the_new_generation(coordinator) -> None:
    a = join(coordinator)
    coordinator.sync("g", a.generation, a.member_id, None, None, None, {a.member_id: b"all"})
    results = {}
    b_thread = threading.Thread(target=lambda: results.setdefault("b", join(coordinator)))
    b_thread.start()
    wait_until(lambda: coordinator.describe("g").state == "PreparingRebalance", message="b's join")
    assert coordinator.heartbeat("g", a.generation, a.member_id) == KafkaCode.REBALANCE_IN_PROGRESS
    again = join(coordinator, a.member_id)  # a rejoins: the join completes for both
    b_thread.join(5)
    b = results["b"]
    assert again.generation == b.generation == 2 and again.leader == a.member_id and b.members == []
    assert coordinator.sync("g", 1, a.member_id, None, None, None, {}).error == KafkaCode.ILLEGAL_GENERATION
    out = {}
    follower = threading.Thread(target=lambda: out.setdefault("b", coordinator.sync("g", 2, b.member_id, None,
                                                                                     None, None, {})))
    follower.start()
    leader = coordinator.sync("g", 2, a.member_id, None, None, None, {a.member_id: b"A", b.member_id: b"B"})
    follower.join(5)
    assert (leader.assignment, out["b"].assignment) == (b"A", b"B")
    assert coordinator.heartbeat("g", 2, b.member_id) == KafkaCode.NONE


def test_session_expiry_removes_a_silent_member(coordinator: GroupCoordinator, clock: ManualClock) -> None:
    a = join(coordinator, session=200)
    coordinator.sync("g", a.generation, a.member_id, None, None, None, {})
    advance(coordinator, clock, 150)
    assert coordinator.heartbeat("g", a.generation, a.member_id) == KafkaCode.NONE  # the session restarts at T0+150
    advance(coordinator, clock, 200)
    assert coordinator.describe("g").state == "Stable"  # 200 ms of silence: not yet more than the timeout
    advance(coordinator, clock, 1)
    assert coordinator.describe("g").state == "Empty" and coordinator.groups["g"].empty_since_ms == T0 + 351
    assert coordinator.heartbeat("g", a.generation, a.member_id) == KafkaCode.UNKNOWN_MEMBER_ID


def test_a_member_id_nobody_comes_back_with_expires_after_the_session_timeout(coordinator, clock) -> None:
    """KIP-394: the pending member id handed out with MEMBER_ID_REQUIRED lives one session timeout."""
    first = join(coordinator, require_id=True, session=300)
    assert first.error == KafkaCode.MEMBER_ID_REQUIRED
    advance(coordinator, clock, 300)
    assert first.member_id in coordinator.groups["g"].pending_members
    advance(coordinator, clock, 1)
    assert first.member_id not in coordinator.groups["g"].pending_members
    assert join(coordinator, first.member_id, require_id=True).error == KafkaCode.UNKNOWN_MEMBER_ID


def test_the_initial_rebalance_delay_waits_for_late_joiners_up_to_the_rebalance_timeout(clock) -> None:
    """Kafka's InitialDelayedJoin: a member joining during the delay buys the group another delay (300 ms here),
    within the rebalance timeout (2000 ms)."""
    c = start(clock, initial_delay_ms=300)
    try:
        results: dict = {}
        a_thread = join_in_thread(c, results, "a")
        wait_until(lambda: len(c.describe("g").members) == 1, message="a's join to arrive")  # a thread, not time
        advance(c, clock, 100)
        b_thread = join_in_thread(c, results, "b")
        wait_until(lambda: len(c.describe("g").members) == 2, message="b's join to arrive")
        advance(c, clock, 199)  # T0+299: the first delay is not over
        assert (c.describe("g").state, c.groups["g"].generation) == ("PreparingRebalance", 0)
        advance(c, clock, 1)  # T0+300: over, but b came: another delay, to T0+600
        assert (c.describe("g").state, c.delayed_joins.deadline_ms("g")) == ("PreparingRebalance", T0 + 600)
        advance(c, clock, 299)
        assert c.describe("g").state == "PreparingRebalance"
        advance(c, clock, 1)
        assert (c.describe("g").state, c.groups["g"].state_timestamp_ms) == ("CompletingRebalance", T0 + 600)
        a_thread.join(5)
        b_thread.join(5)
        assert results["a"].generation == results["b"].generation == 1
        assert results["a"].leader == results["a"].member_id and len(results["a"].members) == 2
    finally:
        c.stop()


def test_a_member_that_does_not_rejoin_within_the_rebalance_timeout_is_dropped(coordinator, clock) -> None:
    a = join(coordinator)
    coordinator.sync("g", a.generation, a.member_id, None, None, None, {})
    results: dict = {}
    b_thread = join_in_thread(coordinator, results, "b")
    wait_until(lambda: coordinator.describe("g").state == "PreparingRebalance", message="b's join")
    # a heartbeats (its session stays alive) but never rejoins within the rebalance timeout (2000 ms)
    for step in (900, 900, 199):
        advance(coordinator, clock, step)
        assert coordinator.heartbeat("g", a.generation, a.member_id) == KafkaCode.REBALANCE_IN_PROGRESS
    assert coordinator.groups["g"].has(a.member_id)  # T0+1999
    advance(coordinator, clock, 1)
    b_thread.join(5)
    b = results["b"]
    assert (b.error, b.generation, b.leader, [m[0] for m in b.members]) == (KafkaCode.NONE, 2, b.member_id,
                                                                            [b.member_id])
    assert coordinator.heartbeat("g", a.generation, a.member_id) == KafkaCode.UNKNOWN_MEMBER_ID


def test_joins_are_validated(coordinator: GroupCoordinator) -> None:
    assert join(coordinator, session=10).error == KafkaCode.INVALID_SESSION_TIMEOUT
    a = join(coordinator)
    coordinator.sync("g", a.generation, a.member_id, None, None, None, {})
    assert join(coordinator, protocols=("sticky",)).error == KafkaCode.INCONSISTENT_GROUP_PROTOCOL


def test_commits_need_the_current_generation_or_an_empty_group(coordinator: GroupCoordinator) -> None:
    tp = TopicPartition("t", 0)
    # a "simple" commit (generation -1, no member) is fine for a group without members
    assert coordinator.commit_offsets("solo", -1, "", {tp: CommittedOffset(5)}) == KafkaCode.NONE
    assert coordinator.fetch_offsets("solo", [tp])[1][tp].offset == 5
    a = join(coordinator)
    assert coordinator.commit_offsets("g", a.generation, a.member_id, {tp: CommittedOffset(1)}) == \
        KafkaCode.REBALANCE_IN_PROGRESS  # CompletingRebalance
    coordinator.sync("g", a.generation, a.member_id, None, None, None, {})
    assert coordinator.commit_offsets("g", a.generation, a.member_id, {tp: CommittedOffset(7)}) == KafkaCode.NONE
    assert coordinator.commit_offsets("g", a.generation + 1, a.member_id, {tp: CommittedOffset(8)}) == \
        KafkaCode.ILLEGAL_GENERATION
    assert coordinator.commit_offsets("g", -1, "", {tp: CommittedOffset(9)}) == KafkaCode.UNKNOWN_MEMBER_ID
    assert coordinator.fetch_offsets("g", None)[1] == {tp: CommittedOffset(7, commit_timestamp_ms=-1)}
    error, members = coordinator.leave("g", [(a.member_id, None)])
    assert error == KafkaCode.NONE and members[0][2] == KafkaCode.NONE
    coordinator.tick()  # the empty rebalance completes at the next timer run, no time needs to pass
    assert coordinator.describe("g").state == "Empty"
    assert coordinator.list_groups()[1] == [("g", "consumer", "Empty"), ("solo", "", "Empty")]
