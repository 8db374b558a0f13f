"""The group coordinator's injectable clock: a ManualClock plus ``tick()`` fires each timeout at exactly its
millisecond (Kafka's MockTime/MockTimer), and the default stays the wall clock with its timer thread."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import wait_until

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.clock import ManualClock, SystemClock
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator
from zkconsumer.coordinator.offsets_log import OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset
from zkconsumer.errors import KafkaCode
from zkconsumer.log.storage import LogManager

T0 = 5_000_000


def manual(clock: ManualClock, store=None, **config) -> GroupCoordinator:
    settings = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 100} | config
    c = GroupCoordinator(CoordinatorConfig(**settings), store, clock=clock).start(timers=False)
    wait_until(lambda: c.loaded, message="the store loaded")  # a load thread, not time
    return c


def join(c: GroupCoordinator, session: int = 1000, rebalance: int = 2000):
    return c.join("g", "", None, "client", "/h", session, rebalance, "consumer", [("range", b"m")], False)


def test_the_manual_clock_moves_only_when_advanced() -> None:
    clock = ManualClock(T0)
    assert clock.now_ms() == clock.now_ms() == T0
    assert clock.advance(250) == T0 + 250 == clock.now_ms()
    assert clock.advance(0) == T0 + 250
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.now_ms() == T0 + 250 and ManualClock().now_ms() == 0


def test_the_default_is_the_wall_clock_with_its_timer_thread() -> None:
    before = int(time.time() * 1000)
    assert before <= SystemClock().now_ms() <= int(time.time() * 1000)
    c = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100))
    assert isinstance(c.clock, SystemClock)
    c.start()
    try:
        assert c._timer_thread is not None and c._timer_thread.is_alive()
        wait_until(lambda: c.loaded, message="the store loaded")
        a = join(c, session=100)
        c.sync("g", a.generation, a.member_id, None, None, None, {})
        # nobody calls tick(): the timer thread expires the session on the wall clock
        wait_until(lambda: c.describe("g").state == "Empty", timeout=5, message="the timer thread to expire a")
    finally:
        c.stop()
    assert not c._timer_thread.is_alive()


def test_a_silent_member_is_removed_exactly_when_its_session_timeout_has_passed() -> None:
    clock = ManualClock(T0)
    c = manual(clock)
    try:
        a = join(c, session=500)
        assert c.sync("g", a.generation, a.member_id, None, None, None, {}).error == KafkaCode.NONE
        assert c.groups["g"].members[a.member_id].last_heartbeat_ms == T0
        clock.advance(500)
        c.tick()
        assert c.describe("g").state == "Stable" and c.groups["g"].has(a.member_id)  # 500 ms: not over yet
        clock.advance(1)
        assert c.groups["g"].has(a.member_id)  # time alone changes nothing: only tick() runs the timers
        c.tick()
        assert c.describe("g").state == "Empty" and not c.groups["g"].has(a.member_id)
        assert c.groups["g"].state_timestamp_ms == T0 + 501
        assert c.heartbeat("g", a.generation, a.member_id) == KafkaCode.UNKNOWN_MEMBER_ID
    finally:
        c.stop()


def test_the_initial_rebalance_delay_completes_the_join_only_once_it_has_passed() -> None:
    clock = ManualClock(T0)
    c = manual(clock, group_initial_rebalance_delay_ms=3000)
    try:
        out: dict = {}
        joining = threading.Thread(target=lambda: out.setdefault("a", join(c, rebalance=60_000)), daemon=True)
        joining.start()  # a JoinGroup blocks until the group's join completes
        wait_until(lambda: c.describe("g").members, message="a's join to arrive")  # a thread, not time
        assert c.delayed_joins.deadline_ms("g") == T0 + 3000
        clock.advance(2999)
        c.tick()
        assert (c.describe("g").state, c.groups["g"].generation, out) == ("PreparingRebalance", 0, {})
        clock.advance(1)
        c.tick()
        assert c.describe("g").state == "CompletingRebalance" and c.groups["g"].state_timestamp_ms == T0 + 3000
        joining.join(5)
        assert (out["a"].error, out["a"].generation, out["a"].leader) == (KafkaCode.NONE, 1, out["a"].member_id)
    finally:
        c.stop()


def test_offsets_expire_at_the_retention_check_interval_of_the_manual_clock(tmp_path) -> None:
    """tick() runs offset expiry only when offsets.retention.check.interval.ms has passed since the last check."""
    clock = ManualClock(T0)
    logs = LogManager(tmp_path).open()
    c = manual(clock, OffsetsLog(logs, retention_ms=60_000), offsets_retention_minutes=1,
               offsets_retention_check_interval_ms=100_000)
    try:
        tp = TopicPartition("t", 0)
        assert c.commit_offsets("solo", -1, "", {tp: CommittedOffset(3, "", T0)}) == KafkaCode.NONE
        clock.advance(60_000)
        c.tick()  # old enough, but the first check is due at T0+100000
        assert tp in c.fetch_offsets("solo", None)[1]
        clock.advance(39_999)
        c.tick()
        assert tp in c.fetch_offsets("solo", None)[1]
        clock.advance(1)
        c.tick()
        assert c.fetch_offsets("solo", None)[1] == {} and "solo" not in c.groups
    finally:
        c.stop()
        logs.close()


def test_a_static_member_that_restarts_keeps_its_assignment_without_a_rebalance() -> None:
    """KIP-345 on a manual clock: a static member rejoining with no member id and its group.instance.id takes a new
    member id in the same generation, its SyncGroup answers its assignment, and its old id is fenced."""
    c = manual(ManualClock(T0))
    static = c.join("g", "", "instance-1", "client", "/h", 1000, 2000, "consumer", [("range", b"m")], False)
    assert (static.error, static.generation) == (KafkaCode.NONE, 1)
    assert c.sync("g", 1, static.member_id, "instance-1", None, None, {static.member_id: b"a0"}).error == 0
    again = c.join("g", "", "instance-1", "client", "/h", 1000, 2000, "consumer", [("range", b"m")], False)
    assert (again.error, again.generation, again.leader) == (KafkaCode.NONE, 1, again.member_id)
    assert again.member_id != static.member_id
    answer = c.sync("g", 1, again.member_id, "instance-1", None, None, {})
    assert (answer.error, answer.assignment) == (KafkaCode.NONE, b"a0")
    assert c.heartbeat("g", 1, static.member_id, "instance-1") == KafkaCode.FENCED_INSTANCE_ID
    assert c.heartbeat("g", 1, again.member_id, "instance-1") == KafkaCode.NONE
    assert c.describe("g").state == "Stable"
    c.stop()


def test_the_last_member_leaving_empties_the_group_at_once() -> None:
    """As Kafka: the join of a group whose last member left completes at once (Empty), not at the next timer."""
    c = manual(ManualClock(T0))
    member = join(c)
    assert c.sync("g", 1, member.member_id, None, None, None, {member.member_id: b""}).error == 0
    assert c.leave("g", [(member.member_id, None)])[0] == KafkaCode.NONE
    assert c.describe("g").state == "Empty"
    c.stop()


def test_a_restarted_coordinator_keeps_its_groups_members_and_their_sessions(tmp_path) -> None:
    """Issue 52, as Kafka's loadGroup/onGroupLoaded: after a restart over the same ``__consumer_offsets`` the group is
    Stable in its generation with the same members, leader and assignments (DescribeGroups answers as before); a
    member that heartbeats keeps its place, one that stays silent is removed one session timeout after the load,
    and a static member coming back under a new member id is no rebalance."""
    clock = ManualClock(T0)
    logs = LogManager(tmp_path).open()
    c = manual(clock, OffsetsLog(logs))
    a = join(c)
    b_joins = threading.Thread(target=c.join, args=("g", "", "inst-b", "client", "/h", 1000, 2000, "consumer",
                                                   [("range", b"m")], False))
    b_joins.start()
    wait_until(lambda: c.describe("g").state == "PreparingRebalance", message="b's join to start a rebalance")
    a = join_again(c, a.member_id)  # a rejoins: every member is in, the join completes for both
    b_joins.join(5)
    gen = c.groups["g"].generation
    assert gen == 2 and len(c.groups["g"].members) == 2
    assert c.sync("g", gen, a.member_id, None, None, None, {a.member_id: b"A", s_id(c, "inst-b"): b"B"}).error == 0
    before = c.describe("g")
    c.stop()
    logs.close()

    clock.advance(400)
    logs = LogManager(tmp_path).open()
    c = manual(clock, OffsetsLog(logs))
    try:
        after = c.describe("g")
        assert (after.state, after.generation, after.leader, after.members) == \
            ("Stable", before.generation, before.leader, before.members)
        assert c.heartbeat("g", gen, a.member_id) == KafkaCode.NONE
        answer = c.sync("g", gen, a.member_id, None, None, None, {})
        assert (answer.error, answer.assignment) == (KafkaCode.NONE, b"A")
        # the static member restarts meanwhile: a new member id, the same generation and assignment, no rebalance
        back = c.join("g", "", "inst-b", "client", "/h", 1000, 2000, "consumer", [("range", b"m")], False)
        assert (back.error, back.generation) == (KafkaCode.NONE, gen)
        assert c.sync("g", gen, back.member_id, "inst-b", None, None, {}).assignment == b"B"
        assert c.describe("g").state == "Stable"
        # sessions run from the load: a heartbeats, the static member (heard from at its join, at the load) does not
        clock.advance(900)
        assert c.heartbeat("g", gen, a.member_id) == KafkaCode.NONE
        c.tick()
        assert c.describe("g").state == "Stable"
        clock.advance(101)
        c.tick()
        assert c.describe("g").state == "PreparingRebalance"
        assert c.groups["g"].has(a.member_id) and not c.groups["g"].has(back.member_id)
    finally:
        c.stop()
        logs.close()


def join_again(c: GroupCoordinator, member_id: str):
    """The first member's rejoin after a second member joined (the rebalance it was told of)."""
    return c.join("g", member_id, None, "client", "/h", 1000, 2000, "consumer", [("range", b"m")], False)


def s_id(c: GroupCoordinator, instance: str) -> str:
    return c.groups["g"].static_member(instance).member_id


def test_a_member_whose_syncgroup_wait_ends_with_the_generation_gets_a_fresh_session() -> None:
    """Issue 54 (found by the simulator): two members get their JoinGroup answers in one millisecond; the leader dies
    before its SyncGroup, the follower waits in its SyncGroup. When the leader's session expires the generation ends,
    the follower's SyncGroup is answered REBALANCE_IN_PROGRESS and, as in Kafka (propagateAssignment), its session
    starts again then; it is not expired in the same millisecond as the leader, but one session later if silent."""
    clock = ManualClock(T0)
    c = manual(clock, group_initial_rebalance_delay_ms=100)
    try:
        out: dict = {}
        joins = [threading.Thread(target=lambda k=k: out.setdefault(k, join(c, session=500, rebalance=60_000)),
                                  daemon=True) for k in ("a", "b")]
        for t in joins:
            t.start()
        wait_until(lambda: len(c.describe("g").members) == 2, message="both joins to arrive")
        while c.describe("g").state == "PreparingRebalance":  # the initial delay, extended once for b
            clock.advance(100)
            c.tick()
        for t in joins:
            t.join(5)
        leader = out["a"].leader
        follower = next(r.member_id for r in out.values() if r.member_id != leader)
        synced: dict = {}
        syncing = threading.Thread(target=lambda: synced.setdefault(
            "answer", c.sync("g", 1, follower, None, None, None, {})), daemon=True)
        syncing.start()
        wait_until(lambda: c.groups["g"].members[follower].awaiting_sync, message="the follower's SyncGroup to wait")
        clock.advance(501)
        c.tick()  # the leader never synced: its session is over, and so is the generation
        syncing.join(5)
        assert synced["answer"].error == KafkaCode.REBALANCE_IN_PROGRESS
        group = c.groups["g"]
        assert (group.has(leader), group.has(follower)) == (False, True)
        clock.advance(500)
        c.tick()
        assert group.has(follower)
        clock.advance(1)
        c.tick()  # silent since its SyncGroup was answered: removed one session timeout later
        assert not group.has(follower)
    finally:
        c.stop()
