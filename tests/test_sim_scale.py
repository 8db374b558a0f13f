"""What lets the simulator run herds of thousands, checked to change nothing a run sees.

* The scheduler takes an instant's events off its heap once and draws among the lanes' heads
  (sim/scheduler.py): drawn schedules (events at equal times, lanes, events scheduling more for now, cancellations
  of events waiting in the instant) run in the same order as under the draw it replaced, which re-heaped the
  whole instant at every step. A seed's trace is therefore the one recorded before it.
* ``ChildOrder.PER_VERSION``: one children order per set of children, as the real server's HashSet.
* kazoo's getChildren decoding, remembered by bytes (sim/kazoo_codecs.py): the same answer, a fresh list each time.
* Equal group views share one assignment (assignment/assignors.py ``assign``), and each member's share is the one
  the whole assignment gives it.
"""

from __future__ import annotations

import heapq
import itertools
import random
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.protocol.serialization import GetChildren, GetChildren2

from zkconsumer.assignment.assignors import AssignmentContext, assign, range_assign
from zkconsumer.sim import kazoo_codecs
from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.zk_codes import CreateMode
from zkconsumer.sim.zookeeper import ChildOrder, ServerConfig, ZooKeeperModel


class ReferenceScheduler:
    """The draw as it was before the instant's lanes: every step pops all events due at the earliest time, picks
    among the lanes' heads in scheduling order, and pushes the rest back."""

    def __init__(self, seed: int) -> None:
        self.now_ms, self._rng, self._heap, self._seq = 0, random.Random(seed), [], itertools.count()

    def call_at(self, due_ms: int, fn, lane=None) -> list:
        timer = [due_ms, next(self._seq), fn, lane, False]  # due, seq, fn, lane, cancelled
        heapq.heappush(self._heap, (due_ms, timer[1], timer))
        return timer

    def step(self) -> bool:
        while self._heap and self._heap[0][2][4]:
            heapq.heappop(self._heap)
        if not self._heap:
            return False
        due = self._heap[0][0]
        ready = []
        while self._heap and self._heap[0][0] == due:
            entry = heapq.heappop(self._heap)
            if not entry[2][4]:
                ready.append(entry)
        heads: dict = {}
        for entry in sorted(ready, key=lambda e: e[1]):
            heads.setdefault(entry[2][3] if entry[2][3] is not None else ("own", entry[1]), entry)
        candidates = sorted(heads.values(), key=lambda e: e[1])
        chosen = candidates[0] if len(candidates) == 1 else candidates[self._rng.randrange(len(candidates))]
        for entry in ready:
            if entry is not chosen:
                heapq.heappush(self._heap, entry)
        self.now_ms = due
        chosen[2][2]()
        return True


#: one event: (delay from now, lane or None, what it does when it runs: schedule k more for now, cancel the n-th
#: event scheduled so far)
EVENT = st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 2),
                  st.one_of(st.none(), st.integers(0, 60)))


def _run(make, seed: int, plan: list) -> list[int]:
    sched = make(seed)
    order: list[int] = []
    timers: list = []
    names = itertools.count()

    def schedule(delay: int, lane, more: int, cancel) -> None:
        name = next(names)

        def fire() -> None:
            order.append(name)
            for _ in range(more):
                if len(timers) < 200:
                    d, ln, m, c = plan[len(timers) % len(plan)]
                    schedule(0 if d < 2 else d, ln, max(0, m - 1), c)
            if cancel is not None and cancel < len(timers):
                t = timers[cancel]
                if isinstance(t, list):
                    t[4] = True
                else:
                    t.cancel()

        timers.append(sched.call_at(sched.now_ms + delay, fire, lane))

    for delay, lane, more, cancel in plan:
        schedule(delay, lane, more, cancel)
    while sched.step():
        pass
    return order


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**16), plan=st.lists(EVENT, min_size=1, max_size=40))
def test_the_instant_draw_is_the_draw_it_replaced(seed: int, plan: list) -> None:
    assert _run(Scheduler, seed, plan) == _run(ReferenceScheduler, seed, plan)


def test_a_thousand_events_on_one_millisecond_cost_a_step_each() -> None:
    """The herd's case: thousands due at once. Each step is a draw among the heads, not a re-heap of the instant."""
    sched = Scheduler(seed=1)
    ran: list[int] = []
    for i in range(5000):
        sched.call_at(5, lambda i=i: ran.append(i), lane=i % 700)
    while sched.step():
        pass
    assert sorted(ran) == list(range(5000)) and sched.now_ms == 5
    by_lane: dict[int, list[int]] = {}
    for i in ran:
        by_lane.setdefault(i % 700, []).append(i)
    assert all(seq == sorted(seq) for seq in by_lane.values())  # a lane keeps its order


def test_children_per_version_keep_one_order_until_the_set_changes() -> None:
    model = ZooKeeperModel(lambda: 0, ServerConfig(child_order=ChildOrder.PER_VERSION), random.Random(3))
    sid = model.create_session(6000).value[0]
    model.create(sid, "/ids", b"")
    for i in range(30):
        model.create(sid, f"/ids/c{i:02d}", b"", CreateMode.EPHEMERAL)
    first = model.get_children(sid, "/ids").value[0]
    assert model.get_children(sid, "/ids").value[0] == first and sorted(first) == [f"c{i:02d}" for i in range(30)]
    assert first != sorted(first)  # a hash set's order, not a sorted one
    model.delete(sid, "/ids/c07")
    again = model.get_children(sid, "/ids").value[0]
    assert "c07" not in again and len(again) == 29
    per_request = ZooKeeperModel(lambda: 0, ServerConfig(), random.Random(3))
    sid = per_request.create_session(6000).value[0]
    per_request.create(sid, "/ids", b"")
    for i in range(30):
        per_request.create(sid, f"/ids/c{i:02d}", b"", CreateMode.EPHEMERAL)
    assert per_request.get_children(sid, "/ids").value[0] != per_request.get_children(sid, "/ids").value[0]


def _children_answer(names: list[str], stat: bool) -> bytes:
    out = struct.pack("!i", len(names)) + b"".join(struct.pack("!i", len(n)) + n.encode() for n in names)
    return out + (struct.pack("!qqqqiiiqiiq", *range(11)) if stat else b"")


def test_remembered_children_decode_to_the_same_fresh_lists() -> None:
    kazoo_codecs.install()
    kazoo_codecs.install()  # idempotent
    names = [f"g_c{i}" for i in range(50)]
    raw = b"header" + _children_answer(names, stat=True)
    a, stat_a = GetChildren2.deserialize(raw, 6)
    b, stat_b = GetChildren2.deserialize(raw, 6)
    assert a == b == names and a is not b and stat_a == stat_b and stat_a.czxid == 0 and stat_a.pzxid == 10
    a.append("mine")  # a caller's list is its own
    assert GetChildren2.deserialize(raw, 6)[0] == names
    plain = _children_answer(names[:3], stat=False)
    assert GetChildren.deserialize(plain, 0) == names[:3] == GetChildren.deserialize(plain, 0)


def test_equal_views_share_one_assignment_and_each_share_is_its_own() -> None:
    sub = {"t": 2}
    consumers = [f"c{i:03d}" for i in range(40)]
    parts = {"t": list(range(100))}
    mine = AssignmentContext({c: sub for c in consumers}, parts)
    theirs = AssignmentContext({c: sub for c in reversed(consumers)}, parts)  # another member's view, same content
    whole = assign("range", mine)
    assert assign("range", theirs) is whole
    assert whole.owners == range_assign(AssignmentContext({c: sub for c in consumers}, parts)).owners
    for c in consumers:
        share = whole.for_consumer(c)
        assert share == {tp: tid for tp, tid in whole.owners.items() if tid.rsplit("-", 1)[0] == c}
        share.clear()  # the caller's own dict
    assert sum(len(whole.for_consumer(c)) for c in consumers) == 100
    # a different view is a different assignment
    other = AssignmentContext({c: sub for c in consumers[:-1]}, parts)
    assert assign("range", other) is not whole
    # views without one shared subscription mapping are not remembered, and still right
    mixed = AssignmentContext({c: dict(sub) for c in consumers}, parts)
    assert mixed.content_key is None and assign("range", mixed).owners == whole.owners
