"""The coordinator's keyed timers and its parked requests, on a manual clock: a timer runs when ``run_due`` reaches
its deadline, one per key (scheduling a key again replaces its timer), earliest first; a blocked JoinGroup or
SyncGroup wakes when its answer exists, on its completion, never on a timeout."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_until

from zkconsumer.coordinator import purgatory
from zkconsumer.coordinator.clock import ManualClock
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator
from zkconsumer.coordinator.purgatory import Purgatory
from zkconsumer.coordinator.timer import KeyedTimer
from zkconsumer.errors import KafkaCode

T0 = 7_000_000


def recorder(timer: KeyedTimer, ran: list, name: str, key=None, deadline: int | None = None) -> None:
    """Schedule under ``key`` (default: the name) an action that notes its name and the time it ran at."""
    timer.schedule(name if key is None else key, deadline, lambda now: ran.append((name, now)))


def test_a_timer_runs_once_when_its_deadline_is_reached_and_gets_the_time() -> None:
    timer, ran = KeyedTimer(ManualClock(T0)), []
    recorder(timer, ran, "a", deadline=T0 + 100)
    assert (timer.deadline_ms("a"), timer.next_deadline_ms(), len(timer)) == (T0 + 100, T0 + 100, 1)
    assert timer.run_due(T0 + 99) == 0 and ran == []
    assert timer.run_due(T0 + 150) == 1 and ran == [("a", T0 + 150)]  # late: it gets the time it runs at
    assert timer.run_due(T0 + 500) == 0 and ran == [("a", T0 + 150)]
    assert (timer.deadline_ms("a"), timer.next_deadline_ms(), len(timer)) == (None, None, 0)


def test_scheduling_a_key_again_replaces_its_timer() -> None:
    timer, ran = KeyedTimer(ManualClock(T0)), []
    recorder(timer, ran, "first", key="k", deadline=T0 + 10)
    recorder(timer, ran, "later", key="k", deadline=T0 + 30)  # pushed out, as a heartbeat pushes a session
    assert timer.run_due(T0 + 20) == 0 and ran == []
    recorder(timer, ran, "sooner", key="k", deadline=T0 + 25)  # pulled in
    assert timer.run_due(T0 + 30) == 1 and ran == [("sooner", T0 + 30)]
    for i in range(1000):  # replaced timers do not pile up
        recorder(timer, ran, "again", key="k", deadline=T0 + 100 + i)
    assert len(timer) == 1 and len(timer._heap) <= 2 + 64


def test_a_cancelled_timer_does_not_run() -> None:
    timer, ran = KeyedTimer(ManualClock(T0)), []
    recorder(timer, ran, "a", deadline=T0 + 10)
    recorder(timer, ran, "b", deadline=T0 + 20)
    assert timer.cancel("a") and not timer.cancel("a") and not timer.cancel("never")
    assert timer.next_deadline_ms() == T0 + 20
    timer.run_due(T0 + 20)
    assert ran == [("b", T0 + 20)]


def test_due_timers_run_earliest_first_and_ties_in_the_order_scheduled() -> None:
    timer, ran = KeyedTimer(ManualClock(T0)), []
    for name, deadline in (("c", 30), ("a", 10), ("b2", 20), ("b1", 20), ("d", 40)):
        recorder(timer, ran, name, deadline=T0 + deadline)
    recorder(timer, ran, "b2", deadline=T0 + 20)  # rescheduled: now after b1
    assert timer.run_due(T0 + 30) == 4
    assert [name for name, _ in ran] == ["a", "b1", "b2", "c"]
    assert timer.run_due(T0 + 40) == 1 and ran[-1] == ("d", T0 + 40)


def test_a_timer_scheduled_by_a_running_one_waits_for_the_next_run_and_a_failure_stops_no_other() -> None:
    timer, ran = KeyedTimer(ManualClock(T0)), []

    def again(now: int) -> None:  # e.g. a check every 0 ms: runs once per run_due, not forever
        ran.append(("again", now))
        timer.schedule("again", now, again)

    def boom(now: int) -> None:
        raise RuntimeError("a broken timer")

    timer.schedule("again", T0, again)
    timer.schedule("boom", T0, boom)
    recorder(timer, ran, "after", deadline=T0 + 1)
    assert timer.run_due(T0 + 1) == 3
    assert ran == [("again", T0 + 1), ("after", T0 + 1)]
    assert timer.run_due(T0 + 1) == 1 and ran[-1] == ("again", T0 + 1)


def test_the_timer_thread_sleeps_until_the_earliest_deadline_or_a_wake() -> None:
    clock = ManualClock(T0)
    timer = KeyedTimer(clock)

    def waits(max_wait_s: float) -> threading.Thread:
        t = threading.Thread(target=timer.wait_for_due, args=(max_wait_s,), daemon=True)
        t.start()
        return t

    recorder(timer, [], "due", deadline=T0)
    waits(60).join(5)  # already due: returns at once
    timer.cancel("due")
    sleeper = waits(60)  # nothing due, nothing scheduled: sleeps
    wait_until(lambda: timer._cond._waiters, message="the thread to sleep")
    recorder(timer, [], "now", deadline=T0)  # an earlier deadline (one already due) wakes it
    sleeper.join(5)
    assert not sleeper.is_alive()
    timer.cancel("now")
    timer.wake()  # a wake before the wait ends the next wait at once (a stop cannot slip in between)
    waits(60).join(5)
    sleeper = waits(60)
    wait_until(lambda: timer._cond._waiters, message="the thread to sleep")
    timer.wake()
    sleeper.join(5)
    assert not sleeper.is_alive()


# ------------------------------------------------------------------------------------------ parked requests
class RecordingCondition(threading.Condition):
    """A condition that notes how each of its waits ended: (timeout asked for, woken by a notify)."""

    waits: list[tuple[float | None, bool]] = []

    def wait(self, timeout: float | None = None) -> bool:
        notified = super().wait(timeout)
        RecordingCondition.waits.append((timeout, notified))
        return notified


@pytest.fixture
def recorded_waits(monkeypatch) -> list[tuple[float | None, bool]]:
    RecordingCondition.waits = []
    monkeypatch.setattr(purgatory.runtime, "Condition", RecordingCondition)  # the seam the purgatory waits on
    return RecordingCondition.waits


def test_a_parked_request_gets_the_first_answer_and_a_closed_purgatory_answers_at_once() -> None:
    lock = threading.RLock()
    parked: Purgatory[str, str] = Purgatory(lock)
    with lock:
        one, two = parked.park("k"), parked.park("k")
        assert parked.complete("k", "yes") and not parked.complete("k", "no")
        assert (one.wait(), two.wait()) == ("yes", "yes")
        assert not one.complete("late") and one.wait() == "yes"
        waiting = parked.park("j")
        parked.close(lambda key: f"closed {key}")
        assert waiting.wait() == "closed j" and parked.park("later").wait() == "closed later"


def manual(clock: ManualClock) -> GroupCoordinator:
    c = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=100),
                         clock=clock).start(timers=False)
    wait_until(lambda: c.loaded, message="the store loaded")  # a load thread, not time
    return c


def join(c: GroupCoordinator, member_id: str = ""):
    return c.join("g", member_id, None, "client", "/h", 1000, 2000, "consumer", [("range", b"m")], False)


def test_a_blocked_join_wakes_on_its_answer_not_on_a_poll(recorded_waits) -> None:
    """b's JoinGroup blocks until a rejoins; a's join completes it and b wakes once, notified, from a wait without
    a timeout: no tick ran, no time passed, nothing polled."""
    clock = ManualClock(T0)
    c = manual(clock)
    try:
        a = join(c)
        assert c.sync("g", 1, a.member_id, None, None, None, {a.member_id: b"all"}).error == KafkaCode.NONE
        out: dict = {}
        b_thread = threading.Thread(target=lambda: out.setdefault("b", join(c)), daemon=True)
        b_thread.start()
        # b holds the lock from its join until it waits: two members seen means b waits
        wait_until(lambda: len(c.describe("g").members) == 2, message="b's join to block")
        assert recorded_waits == [] and "b" not in out
        again = join(c, a.member_id)  # the last member to rejoin: the join completes in this call
        b_thread.join(5)
        assert (again.generation, out["b"].error, out["b"].generation) == (2, KafkaCode.NONE, 2)
        assert recorded_waits == [(None, True)]
        assert clock.now_ms() == T0
    finally:
        c.stop()


def test_a_blocked_sync_wakes_on_the_leaders_and_a_stop_answers_a_blocked_join(recorded_waits) -> None:
    c = manual(ManualClock(T0))
    a = join(c)
    c.sync("g", 1, a.member_id, None, None, None, {})
    out: dict = {}
    b_thread = threading.Thread(target=lambda: out.setdefault("b", join(c)), daemon=True)
    b_thread.start()
    wait_until(lambda: len(c.describe("g").members) == 2, message="b's join to block")
    join(c, a.member_id)
    b_thread.join(5)
    b = out.pop("b")
    follower = threading.Thread(target=lambda: out.setdefault("sync", c.sync("g", 2, b.member_id, None, None, None,
                                                                               {})), daemon=True)
    follower.start()
    wait_until(lambda: c.groups["g"].members[b.member_id].awaiting_sync, message="b's sync to block")
    c.sync("g", 2, a.member_id, None, None, None, {a.member_id: b"A", b.member_id: b"B"})
    follower.join(5)
    assert (out["sync"].error, out["sync"].assignment) == (KafkaCode.NONE, b"B")
    # a blocked join at the coordinator's stop ends with COORDINATOR_NOT_AVAILABLE at once
    c3 = threading.Thread(target=lambda: out.setdefault("c", join(c)), daemon=True)
    c3.start()
    wait_until(lambda: len(c.describe("g").members) == 3, message="c's join to block")
    c.stop()
    c3.join(5)
    assert out["c"].error == KafkaCode.COORDINATOR_NOT_AVAILABLE
    assert [notified for _, notified in recorded_waits] == [True, True, True]
    assert {timeout for timeout, _ in recorded_waits} == {None}
