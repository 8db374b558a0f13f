"""The simulator's checkers (zkconsumer/sim/checkers.py) on hand-built traces: each invariant holds on a run that
keeps it and is breached, at the step that proves it, on one that does not. Pure and fast: no Spark (the
agreement with the Spark analysis is tests/analysis/test_sim_checkers_agree.py)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from typing import Any

from zkconsumer.sim.checkers import (
    JUDGED,
    LAB_INVARIANTS,
    Breach,
    Checker,
    Invariant,
    SimVerdict,
    judge,
    judged_deadlines,
)


class Run:
    """A trace in the making, as a simulation emits it: records in global order, ``seq`` counted per consumer.
    ``step`` feeds one record to the checker at once and returns the breaches it proved."""

    def __init__(self, group: str = "g", from_zero: bool = True) -> None:
        self.group = group
        self.records: list[dict[str, Any]] = []
        self.seq: dict[str, int] = {}
        self.checker = Checker(from_zero=from_zero)

    def emit(self, consumer: str, ts: int, event: str, **fields: Any) -> list[Breach]:
        self.seq[consumer] = self.seq.get(consumer, 0) + 1
        record = {"v": 1, "ts": ts, "event": event, "group": self.group, "consumer": consumer,
                  "seq": self.seq[consumer], **fields}
        self.records.append(record)
        return self.checker.observe(record)

    def deliver(self, consumer: str, ts: int, offset: int, partition: int = 0, topic: str = "t") -> list[Breach]:
        return self.emit(consumer, ts, "record_delivered", topic=topic, partition=partition, offset=offset,
                         thread=f"{consumer}-0")

    def deliver_range(self, consumer: str, ts: int, offsets: range, partition: int = 0) -> list[Breach]:
        found = []
        for i, o in enumerate(offsets):
            found += self.deliver(consumer, ts + i, o, partition)
        return found

    def commit(self, consumer: str, ts: int, offset: int, partition: int = 0, **fields: Any) -> list[Breach]:
        return self.emit(consumer, ts, "offset_committed", topic="t", partition=partition, offset=offset, **fields)

    def done(self, consumer: str, ts: int, owned: list[str], rebalance: int = 1, startup: bool = False) -> None:
        self.emit(consumer, ts, "rebalance_triggered", cause="startup" if startup else "ids_changed")
        self.emit(consumer, ts, "rebalance_done", rebalance=rebalance, attempts=1, duration_ms=0, owned=owned)

    def reset(self, consumer: str, ts: int, old: int, new: int, partition: int = 0) -> list[Breach]:
        return self.emit(consumer, ts, "offset_reset", topic="t", partition=partition, from_offset=old,
                         to_offset=new, reset="smallest")

    def lab(self, ts: int, event: str, **fields: Any) -> None:
        self.emit("lab", ts, event, **fields)

    def verdict(self, log_end: dict[tuple[str, int], int] | None = None, ended: int | None = None) -> SimVerdict:
        return self.checker.finish(log_end or {}, ended if ended is not None else self.records[-1]["ts"])


def counts(v: SimVerdict) -> dict[str, int]:
    """The non-zero counts, by value: what an assertion compares."""
    return {i.value: n for i, n in v.counts.items() if n}


# ----------------------------------------------------------------------------------------- a clean run
def clean_run() -> Run:
    """A owns t-0 and t-1; B joins and takes t-1 from A's commit on; both commit and shut down."""
    run = Run()
    run.emit("A", 1, "registered", subscription={"t": 1}, pattern="static")
    run.done("A", 10, ["t-0", "t-1"], startup=True)
    run.deliver_range("A", 20, range(0, 10))
    run.deliver_range("A", 30, range(0, 5), partition=1)
    run.commit("A", 40, 10)
    run.commit("A", 40, 3, partition=1)  # 3 and 4 delivered, not committed: at-least-once again below
    run.emit("A", 50, "released", rebalance=2, partitions=["t-0", "t-1"])
    run.done("A", 51, ["t-0"], rebalance=2)
    run.done("B", 52, ["t-1"], startup=True)
    run.deliver_range("A", 60, range(10, 20))
    run.deliver_range("B", 70, range(3, 12), partition=1)
    run.commit("A", 80, 20)
    run.commit("B", 80, 12, partition=1)
    run.emit("A", 90, "shutdown", committed=True)
    run.emit("B", 90, "shutdown", committed=True)
    return run


def test_a_clean_run_holds_every_invariant_and_reads_every_record() -> None:
    run = clean_run()
    v = run.verdict({("t", 0): 20, ("t", 1): 12})
    assert v.ok and v.lab_ok and v.broken() == [] and v.violations() == []
    assert counts(v) == {"duplicates": 2}  # offsets 3 and 4 of t-1, at-least-once
    assert v.first == {} and v.deliveries == 10 + 5 + 10 + 9 and v.events == len(run.records)
    assert v.out_of_order == 0
    json.dumps(v.as_dict())  # JSON-ready
    assert v.as_dict()["counts"]["lost"] == 0 and v.as_dict()["ok"] is True


def test_the_verdict_names_each_invariant_and_its_first_breach() -> None:
    assert {i.value for i in LAB_INVARIANTS} == {"lost", "overlaps", "duplicates_committed", "commits_backwards",
                                                 "unowned_after_heal"}
    assert Invariant.ZOMBIE_DELIVERIES.judged and not Invariant.DUPLICATES.judged
    assert not Invariant.UNSEEN_UNREAD.judged and LAB_INVARIANTS < JUDGED
    run = Run()
    run.done("A", 10, ["t-0"], startup=True)
    run.deliver_range("A", 20, range(0, 3))
    run.commit("A", 30, 5)  # 3 and 4 never delivered
    v = run.verdict()
    assert not v.ok and not v.lab_ok and v.broken() == [Invariant.LOST]
    first = v.first[Invariant.LOST]
    assert (first.ts, first.topic, first.partition, first.offset) == (30, "t", 0, 3)
    assert v.violations() == [f"2 records lost (first: {first})"]
    assert v.as_dict()["first"]["lost"]["offset"] == 3


# ------------------------------------------------------------------------------------------------ lost
def test_lost_counts_offsets_below_the_commit_or_between_deliveries_never_delivered() -> None:
    run = Run()
    run.done("A", 10, ["t-0"], startup=True)
    for ts, o in [(20, 0), (21, 1), (22, 3), (23, 4)]:
        run.deliver("A", ts, o)
    assert counts(run.verdict()) == {"lost": 1, "poll_skips": 1}  # 2, passed over at 22
    assert run.verdict().first[Invariant.LOST].ts == 22
    run.commit("A", 30, 8)  # 5, 6 and 7 committed as consumed, never delivered
    assert counts(run.verdict()) == {"lost": 4, "poll_skips": 1}
    run.deliver_range("A", 40, range(2, 8))  # delivered after all (and 3, 4 twice): nothing lost
    assert run.verdict().counts[Invariant.LOST] == 0


def test_lost_from_zero_or_from_the_first_delivered_offset() -> None:
    def run_from(from_zero: bool) -> SimVerdict:
        run = Run(from_zero=from_zero)
        run.done("A", 10, ["t-0"], startup=True)
        run.deliver_range("A", 20, range(5, 10))
        return run.verdict()

    assert run_from(True).counts[Invariant.LOST] == 5  # the lab's setting: topics start empty
    assert run_from(False).counts[Invariant.LOST] == 0
    only_commits = Run()
    only_commits.commit("A", 10, 3)
    assert only_commits.verdict().counts[Invariant.LOST] == 3


# -------------------------------------------------------------------------------------------- overlaps
def test_two_live_owners_are_found_by_the_delivery_that_proves_it() -> None:
    run = Run()
    run.done("A", 10, ["t-0"], startup=True)
    run.done("B", 11, ["t-0"], startup=True)
    assert run.deliver("A", 100, 0) == []
    assert run.deliver("B", 105, 1) == []  # A's span so far ends at 100: not yet two live owners
    [breach] = run.deliver("A", 110, 2)  # now A's span [100, 110] holds B's delivery at 105
    assert (breach.invariant, breach.ts, breach.consumer, breach.partition) == (Invariant.OVERLAPS, 110, "A", 0)
    assert run.deliver("A", 111, 3) == [] and run.deliver("B", 112, 4) == []  # the same pair, counted once
    v = run.verdict()
    assert v.counts[Invariant.OVERLAPS] == 1 and v.first[Invariant.OVERLAPS] == breach


def test_a_handover_is_no_overlap_but_one_in_the_same_millisecond_is() -> None:
    run = Run()
    run.done("A", 10, ["t-0"], startup=True)
    run.deliver_range("A", 100, range(0, 5))  # 100..104
    run.done("B", 105, ["t-0"], startup=True)
    assert run.deliver_range("B", 105, range(5, 10)) == []
    assert run.verdict().counts[Invariant.OVERLAPS] == 0
    same_ms = Run()
    same_ms.deliver("A", 100, 0)
    assert len(same_ms.deliver("B", 100, 1)) == 1  # spans meet inclusively, as Spark's do


def test_a_rebalance_or_a_session_expiry_ends_a_stint() -> None:
    """A delivers before and after its own rebalance, B in between: two stints of A, neither overlapping B's."""
    for boundary in ("rebalance_done", "session_expired"):
        run = Run()
        run.deliver("A", 100, 0)
        fields = {"rebalance": 2, "attempts": 1, "owned": []} if boundary == "rebalance_done" else {}
        run.emit("A", 101, boundary, **fields)
        run.deliver("B", 102, 1)
        assert run.deliver("A", 103, 2) == [], boundary
        assert run.verdict().counts[Invariant.OVERLAPS] == 0
    without = Run()
    without.deliver("A", 100, 0)
    without.emit("A", 101, "connection_suspended")  # not a stint boundary
    without.deliver("B", 102, 1)
    assert len(without.deliver("A", 103, 2)) == 1


def test_stints_of_other_partitions_or_groups_do_not_overlap() -> None:
    run = Run()
    run.deliver("A", 100, 0, partition=0)
    run.deliver("B", 101, 0, partition=1)
    run.deliver("A", 102, 1, partition=0)
    other = {"v": 1, "ts": 101, "event": "record_delivered", "group": "h", "consumer": "B", "seq": 9, "topic": "t",
             "partition": 0, "offset": 1, "thread": "B-0"}
    assert run.checker.observe(other) == []
    assert run.deliver("A", 103, 2, partition=0) == []
    assert run.verdict().counts[Invariant.OVERLAPS] == 0


# ------------------------------------------------------------------------------------ commits backwards
def test_a_commit_below_an_earlier_one_of_the_same_store_is_backwards() -> None:
    run = Run()
    assert run.commit("A", 10, 10) == []
    assert run.commit("A", 11, 10, store="kafka") == []
    assert run.commit("B", 12, 8, store="kafka")[0].invariant is Invariant.COMMITS_BACKWARDS  # kafka store
    assert run.commit("B", 13, 9) != []  # ZooKeeper
    assert run.commit("B", 14, 12) == []
    v = run.verdict()
    assert v.counts[Invariant.COMMITS_BACKWARDS] == 2
    first = v.first[Invariant.COMMITS_BACKWARDS]
    assert (first.ts, first.consumer, first.offset) == (12, "B", 8)


def test_commits_of_one_millisecond_by_two_consumers_have_no_order() -> None:
    """A commit takes effect between its sending and its answer: two answered in one millisecond by different
    consumers may have landed either way round, so neither is behind the other (as Spark's commits_moving_back)."""
    same_ms = Run()
    same_ms.commit("b", 10, 8)
    assert same_ms.commit("a", 10, 12) == []
    [own] = same_ms.commit("a", 11, 9, sent_ts=10)  # a's own earlier 12 came first, whatever the clock says
    assert (own.consumer, own.offset) == ("a", 9)
    assert same_ms.verdict().counts[Invariant.COMMITS_BACKWARDS] == 1  # a went below its own earlier 12


def test_a_commit_in_flight_across_a_pause_is_not_behind_what_others_committed_meanwhile() -> None:
    """Found by the simulator: a member paused with a commit in flight writes its line when it wakes, seconds
    after the server applied it. Sent before the other's commit was answered, it is not behind it."""
    paused = Run()
    paused.commit("b", 15_000, 321, sent_ts=14_990)
    assert paused.commit("a", 18_000, 232, sent_ts=10_000) == []
    [late] = paused.commit("a", 19_000, 300, sent_ts=18_500)  # sent after b's 321 was answered: behind it
    assert (late.consumer, late.offset) == ("a", 300)
    assert paused.verdict().counts[Invariant.COMMITS_BACKWARDS] == 1


def test_an_offset_reset_exempts_the_partition_even_when_it_comes_later() -> None:
    run = Run()
    run.commit("A", 10, 10)
    assert len(run.commit("A", 11, 4)) == 1  # reported when seen
    run.reset("A", 12, 10, 4)
    assert run.commit("A", 13, 2) == []  # reset partition: not reported
    assert run.verdict().counts[Invariant.COMMITS_BACKWARDS] == 0  # Spark exempts the whole partition


# --------------------------------------------------------------------------------- duplicates committed
def test_a_duplicate_of_a_committed_record_is_a_breach_an_uncommitted_one_is_not() -> None:
    run = Run()
    run.done("A", 10, ["t-0"], startup=True)
    run.deliver_range("A", 20, range(0, 5))
    run.commit("A", 30, 4)  # 4 delivered, not committed
    run.done("B", 40, ["t-0"], startup=True)
    found = run.deliver("B", 50, 3)  # committed at 30: a stale position
    assert {b.invariant for b in found} == {Invariant.DUPLICATES_COMMITTED, Invariant.ZOMBIE_DELIVERIES}
    assert run.deliver("B", 51, 4) == []  # at-least-once: a duplicate, nothing broken
    v = run.verdict()
    assert v.counts[Invariant.DUPLICATES] == 2 and v.counts[Invariant.DUPLICATES_COMMITTED] == 1
    assert v.first[Invariant.DUPLICATES_COMMITTED].offset == 3


def test_a_commit_in_the_same_millisecond_as_the_duplicate_does_not_cover_it() -> None:
    run = Run()
    run.deliver("A", 10, 0)
    run.commit("A", 20, 1)
    run.done("A", 20, ["t-0"], rebalance=2)
    assert [b.invariant for b in run.deliver("A", 20, 0)] == []  # Spark: a commit strictly before
    run.done("A", 21, ["t-0"], rebalance=3)
    assert [b.invariant for b in run.deliver("A", 21, 0)] == [Invariant.DUPLICATES_COMMITTED]


# ---------------------------------------------------------------------------------------------- zombies
def test_a_record_delivered_after_another_member_committed_past_it_is_a_zombie_delivery() -> None:
    run = Run()
    run.deliver_range("B", 10, range(0, 3))
    run.commit("B", 20, 6)  # B committed past 3..5 without them: that is lost, and A's are zombie deliveries
    [breach] = run.deliver("A", 30, 4)
    assert (breach.invariant, breach.consumer, breach.offset) == (Invariant.ZOMBIE_DELIVERIES, "A", 4)
    assert len(run.deliver("A", 31, 5)) == 1
    run.done("B", 35, ["t-0"], rebalance=2)
    assert run.deliver("B", 40, 3) == []  # B's own commit: a member rereading is not a zombie
    assert run.deliver("C", 60, 6) == []  # not past it
    assert run.verdict().counts[Invariant.ZOMBIE_DELIVERIES] == 2


def test_no_zombie_delivery_after_an_offset_reset_of_the_partition() -> None:
    run = Run()
    run.deliver_range("B", 10, range(0, 6))
    run.commit("B", 20, 6)
    run.reset("A", 25, 9, 0)
    assert [b.invariant for b in run.deliver("A", 30, 0)] == [Invariant.DUPLICATES_COMMITTED]


# --------------------------------------------------------------------------- Jepsen's poll checks
def test_a_stint_skipping_offsets_nobody_read_is_a_poll_skip() -> None:
    run = Run()
    run.deliver_range("B", 1, range(5, 8))  # B read 5..7 first (another member, another stint)
    run.deliver_range("A", 10, range(0, 2))
    [breach] = run.deliver("A", 12, 4)  # 2 and 3 never delivered
    assert (breach.invariant, breach.offset) == (Invariant.POLL_SKIPS, 4)
    assert run.deliver("A", 13, 8) == []  # A skips 5..7, which B had read: no skip
    assert run.verdict().counts[Invariant.POLL_SKIPS] == 1
    reset = Run()
    reset.deliver("A", 10, 0)
    reset.reset("A", 11, 1, 50)
    assert reset.deliver("A", 12, 50) == []  # the consumer's own reset moved it: not compared


def test_a_stint_going_back_is_a_nonmonotonic_poll_a_new_stint_is_not() -> None:
    run = Run()
    run.deliver_range("A", 10, range(0, 3))
    [breach] = run.deliver("A", 13, 1)
    assert (breach.invariant, breach.offset) == (Invariant.NONMONOTONIC_POLLS, 1)
    assert [b.invariant for b in run.deliver("A", 14, 1)] == [Invariant.NONMONOTONIC_POLLS]  # equal: not greater
    run.done("A", 15, ["t-0"], rebalance=2)
    assert run.deliver("A", 16, 0) == []  # a new stint starts where its commit was
    assert run.verdict().counts[Invariant.NONMONOTONIC_POLLS] == 2


# ---------------------------------------------------------------------------- owned again after a heal
def heal_run() -> Run:
    """A owns t-0 and t-1 from 100; a fault struck at 150 and healed at 200; session 1 s: deadline 2200."""
    run = Run()
    run.done("A", 100, ["t-0", "t-1"], startup=True)
    run.deliver("A", 110, 0)
    run.deliver("A", 110, 0, partition=1)
    run.lab(150, "fault_injected", fault="pause", target="A")
    run.lab(200, "fault_healed", fault="pause", target="A", session_timeout_ms=1000)
    return run


def test_every_partition_owned_at_the_deadline_holds() -> None:
    run = heal_run()
    run.emit("A", 3000, "shutdown", committed=True)  # owned to its last line
    v = run.verdict()
    assert v.counts[Invariant.UNOWNED_AFTER_HEAL] == 0
    [heal] = v.heals
    assert (heal.fault, heal.healed, heal.deadline, heal.partitions, heal.unowned) == ("pause", 200, 2200, 2, ())


def test_a_partition_released_before_the_deadline_is_unowned() -> None:
    run = heal_run()
    run.emit("A", 1000, "released", rebalance=2, partitions=["t-1"])
    run.emit("A", 3000, "shutdown", committed=True)
    v = run.verdict()
    assert v.counts[Invariant.UNOWNED_AFTER_HEAL] == 1 and v.heals[0].unowned == ("t-1",)
    breach = v.first[Invariant.UNOWNED_AFTER_HEAL]
    assert (breach.ts, breach.topic, breach.partition) == (2200, "t", 1)


def test_the_owners_session_expiry_or_its_last_line_ends_ownership() -> None:
    expired = heal_run()
    expired.emit("A", 500, "session_expired")
    expired.emit("A", 3000, "shutdown", committed=True)
    assert expired.verdict().counts[Invariant.UNOWNED_AFTER_HEAL] == 2
    killed = heal_run()
    killed.deliver("A", 2100, 1)  # its last line: killed before the deadline
    assert killed.verdict().counts[Invariant.UNOWNED_AFTER_HEAL] == 2


def test_a_life_followed_by_another_ends_at_its_last_line_but_deliveries() -> None:
    """A is killed after 2500 (a delivery), started again under its id at 5000: its first life's ownership ends at
    its last other line (the commit at 300), so both partitions were unowned at 2200."""
    run = heal_run()
    run.commit("A", 300, 1)
    run.deliver("A", 2500, 1)
    run.done("A", 5000, ["t-0", "t-1"], startup=True)
    run.emit("A", 6000, "shutdown", committed=True)
    assert run.verdict().counts[Invariant.UNOWNED_AFTER_HEAL] == 2
    single = heal_run()  # the same without the second life: owned to its last line, 6000
    single.commit("A", 300, 1)
    single.deliver("A", 2500, 1)
    single.emit("A", 6000, "shutdown", committed=True)
    assert single.verdict().counts[Invariant.UNOWNED_AFTER_HEAL] == 0


def test_the_deadlines_are_the_analysis_own() -> None:
    """The cases of tests/analysis/test_analysis_invariants.py, on the copy."""

    def line(ts: int, event: str, **fields: Any) -> dict:
        return {"group": "g", "ts": ts, "event": event, "fault": None, "target": None, "session_timeout_ms": None,
                **fields}

    assert judged_deadlines([line(100, "fault_injected", fault="pause", target="g_c1"),
                             line(1100, "fault_healed", fault="pause", target="g_c1", session_timeout_ms=4000),
                             line(6200, "lab_step")]) == [("g", "pause", 1100, 6100)]
    assert judged_deadlines([line(16000, "fault_injected", fault="pause", target="g_c4"),
                             line(17000, "fault_healed", fault="pause", target="g_c4", session_timeout_ms=4000),
                             line(17500, "lab_step", step="kill", target="g_c4"),
                             line(21000, "lab_step", step="join", target="g_c5")]) == [("g", "pause", 17000, 26000)]
    assert judged_deadlines([line(0, "fault_injected", fault="cut-zk", target="g_c1"),
                             line(500, "fault_injected", fault="kill-zk", target="2"),
                             line(1000, "fault_healed", fault="cut-zk", target="g_c1", session_timeout_ms=1000),
                             line(9000, "fault_healed", fault="kill-zk", target="", session_timeout_ms=1000)]
                            ) == [("g", "cut-zk", 1000, 11000), ("g", "kill-zk", 9000, 11000)]
    assert judged_deadlines([line(0, "fault_injected", fault="kill-broker"), line(100, "fault_injected", fault="pause"),
                             line(200, "fault_healed", fault="pause", session_timeout_ms=1000)]) == []


# ------------------------------------------------------------------------------------------------ unseen
def test_unseen_offsets_are_split_into_never_readable_and_unread() -> None:
    run = Run()
    run.deliver_range("A", 10, range(0, 10))
    run.commit("A", 20, 10)
    assert counts(run.verdict({("t", 0): 20})) == {"unseen_unread": 10}
    first = run.verdict({("t", 0): 20}).first[Invariant.UNSEEN_UNREAD]
    assert (first.offset, first.ts) == (10, 20)
    run.commit("A", 30, 15)  # committed past 10..14: lost, and never readable
    v = run.verdict({("t", 0): 20, ("t", 1): 3}, ended=99)
    assert counts(v) == {"lost": 5, "unseen_never_readable": 5, "unseen_unread": 5 + 3}
    assert v.first[Invariant.UNSEEN_NEVER_READABLE].offset == 10
    reset = Run()
    reset.deliver_range("A", 10, range(0, 3))
    reset.reset("A", 13, 3, 12)
    reset.deliver_range("A", 14, range(12, 14))
    assert counts(reset.verdict({("t", 0): 20})) == {
        "lost": 9, "unseen_never_readable": 9, "unseen_unread": 6}


# -------------------------------------------------------------------------------------------- the rest
def test_records_out_of_time_order_are_counted_and_still_judged() -> None:
    run = Run()
    run.deliver("A", 10, 0)
    run.deliver("A", 9, 1)
    run.commit("A", 8, 2)
    assert run.verdict().out_of_order == 2
    late = Run()
    late.deliver("B", 100, 0)
    assert late.deliver("A", 50, 1) == []  # late: A's span is [50, 50] so far
    assert len(late.deliver("A", 120, 2)) == 1  # [50, 120] holds B's 100, though A delivered twice in a row


def test_finish_can_be_called_again_as_the_run_goes_on() -> None:
    run = Run()
    run.deliver("A", 10, 0)
    run.commit("A", 11, 3)
    assert run.verdict().counts[Invariant.LOST] == 2
    run.deliver_range("A", 12, range(1, 3))
    assert run.verdict().counts[Invariant.LOST] == 0


def test_the_lab_events_are_the_trace_s() -> None:
    from zkconsumer import trace
    from zkconsumer.sim import checkers

    assert checkers.LAB_EVENTS == trace.LAB_EVENTS


def test_the_checker_imports_no_spark() -> None:
    code = "import sys, zkconsumer.sim.checkers; print(sorted(m for m in sys.modules if m.startswith('pyspark')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def big_run(events: int, seed: int = 1) -> list[dict[str, Any]]:
    """A 0.8 group of 4 over 8 partitions: deliveries, a commit every 50 records, a rebalance every 5,000 events
    (new owners resume from the commit, so at-least-once duplicates), in global order."""
    rng = random.Random(seed)
    consumers, partitions = [f"g_c{i}" for i in range(4)], 8
    seq = dict.fromkeys(consumers, 0)
    out: list[dict[str, Any]] = []
    position, committed = [0] * partitions, [0] * partitions
    ts, rebalance = 1000, 0

    def emit(consumer: str, event: str, **fields: Any) -> None:
        seq[consumer] += 1
        out.append({"v": 1, "ts": ts, "event": event, "group": "g", "consumer": consumer, "seq": seq[consumer],
                    **fields})

    owners: dict[int, str] = {}
    while len(out) < events:
        if len(out) // 5000 >= rebalance:
            rebalance += 1
            order = rng.sample(consumers, len(consumers))
            owners = {p: order[p % len(order)] for p in range(partitions)}
            for c in consumers:
                emit(c, "rebalance_done", rebalance=rebalance, attempts=1, duration_ms=5,
                     owned=[f"t-{p}" for p, o in owners.items() if o == c])
            position = list(committed)
        ts += rng.choice((0, 1, 1, 2))
        p = rng.randrange(partitions)
        emit(owners[p], "record_delivered", topic="t", partition=p, offset=position[p], thread="x")
        position[p] += 1
        if position[p] % 50 == 0:
            committed[p] = position[p]
            emit(owners[p], "offset_committed", topic="t", partition=p, offset=committed[p])
    return out


def test_a_50k_event_run_is_judged_in_a_fraction_of_a_second() -> None:
    records = big_run(50_000)
    started = time.perf_counter()
    v = judge(records, {("t", p): 0 for p in range(8)}, records[-1]["ts"])
    took = time.perf_counter() - started
    assert v.ok and v.deliveries > 45_000 and v.counts[Invariant.DUPLICATES] > 0
    assert took < 1.0, f"{took:.3f} s"  # ~0.05 s on the test machine; a quadratic slip takes minutes


def test_a_closed_stint_still_pairs_with_an_open_one_that_began_before_it() -> None:
    """X delivers at 10, S from 20 to 30 and is closed by its rebalance; X's delivery at 40 makes X's span hold S's:
    a stint dropped from the search too early would miss it."""
    run = Run()
    run.deliver("X", 10, 0)
    run.deliver_range("S", 20, range(1, 4))
    run.done("S", 31, [], rebalance=2)
    run.deliver("Y", 35, 9, partition=1)
    assert len(run.deliver("X", 40, 4)) == 1
    assert run.verdict().counts[Invariant.OVERLAPS] == 1


def spark_definitions(records: list[dict[str, Any]]) -> dict[str, int]:
    """The Spark analysis' definitions of lost (from zero), overlaps, duplicates of committed records and commits
    moving back, written the plain way (whole-trace sorts and pairs), to hold the incremental checker to."""
    deliveries = [r for r in records if r["event"] == "record_delivered"]
    commits = [r for r in records if r["event"] == "offset_committed"]
    reset = {(r["group"], r["topic"], r["partition"]) for r in records if r["event"] == "offset_reset"}

    def pk(r: dict[str, Any]) -> tuple:
        return r["group"], r["topic"], r["partition"]

    lost = 0
    for key in {pk(r) for r in deliveries + commits}:
        offsets = {r["offset"] for r in deliveries if pk(r) == key}
        committed = max((r["offset"] for r in commits if pk(r) == key), default=-1)
        lost += sum(1 for o in range(max([*offsets, -1]) + 1 if offsets else 0) if o not in offsets)
        lost += sum(1 for o in range(max(offsets, default=-1) + 1, committed) if o not in offsets)
    spans: dict[tuple, list[int]] = {}
    for r in deliveries:
        stint = sum(1 for d in records if d["consumer"] == r["consumer"] and d["group"] == r["group"]
                    and d["event"] in ("rebalance_done", "session_expired") and d["seq"] < r["seq"])
        span = spans.setdefault((*pk(r), r["consumer"], stint), [r["ts"], r["ts"]])
        span[0], span[1] = min(span[0], r["ts"]), max(span[1], r["ts"])
    overlaps = sum(1 for a, (af, at) in spans.items() for b, (bf, bt) in spans.items()
                   if a[:3] == b[:3] and a[3] < b[3] and af <= bt and bf <= at)
    dup_committed = 0
    by_offset = sorted(deliveries, key=lambda r: (pk(r), r["offset"], r["ts"], r["consumer"], r["seq"]))
    for before, r in zip(by_offset, by_offset[1:], strict=False):
        if pk(before) == pk(r) and before["offset"] == r["offset"]:
            then = max((c["offset"] for c in commits if pk(c) == pk(r) and c["ts"] < r["ts"]), default=-1)
            dup_committed += then > r["offset"]
    backwards = 0
    for key in {(*pk(c), c.get("store") or "zookeeper") for c in commits}:
        mine = [c for c in commits if (*pk(c), c.get("store") or "zookeeper") == key]
        backwards += sum(1 for c in mine if key[:3] not in reset and c["offset"] < max(
            (p["offset"] for p in mine if p["ts"] < c.get("sent_ts", c["ts"])
             or (p["consumer"] == c["consumer"] and p["seq"] < c["seq"])), default=-1))
    return {"lost": lost, "overlaps": overlaps, "duplicates_committed": dup_committed, "commits_backwards": backwards}


def random_records(seed: int, events: int = 250) -> list[dict[str, Any]]:
    """Three consumers on two partitions, in time order with many ties: deliveries that skip, repeat and go
    back, commits to two stores (backwards too), rebalances, session expiries and (one seed in four) resets."""
    rng = random.Random(seed)
    run = Run()
    position: dict[tuple[str, int], int] = {}
    ts = 0
    for _ in range(events):
        ts += rng.choice((0, 0, 1, 3))
        c, p = rng.choice("ABC"), rng.randrange(2)
        roll = rng.random()
        if roll < 0.65:
            o = max(0, position.get((c, p), 0) + rng.choice((0,) * 8 + (1, -1, -3, 2)))
            run.deliver(c, ts, o, partition=p)
            position[(c, p)] = o + 1
        elif roll < 0.85:
            store = {"store": "kafka"} if rng.random() < 0.4 else {}
            run.commit(c, ts, max(0, position.get((c, p), 0) - rng.choice((0, 0, 2))), partition=p, **store)
        elif roll < 0.93:
            run.emit(c, ts, "rebalance_done", rebalance=1, attempts=1, owned=[f"t-{p}"])
            position[(c, p)] = rng.randrange(0, 5)
        elif roll < 0.97 or seed % 4:  # resets in a quarter of the runs: they exempt commits going back
            run.emit(c, ts, "session_expired")
        else:
            run.reset(c, ts, position.get((c, p), 0), 0, partition=p)
            position[(c, p)] = 0
    return run.records


def test_the_incremental_checks_count_what_the_plain_definitions_count() -> None:
    broken = dict.fromkeys(("lost", "overlaps", "duplicates_committed", "commits_backwards"), 0)
    for seed in range(60):
        records = random_records(seed)
        v = judge(records, {}, records[-1]["ts"])
        expected = spark_definitions(records)
        assert {k: v.counts[Invariant(k)] for k in expected} == expected, seed
        for k, n in expected.items():
            broken[k] += n > 0
    assert all(n >= 10 for n in broken.values()), broken  # each definition is exercised, not agreed on zeros
