"""``lab --ui``: the live page's source for a running lab (a :class:`~zkconsumer.web.snapshot.LiveSource`).

Two halves. :class:`LiveGroup` is pure: it takes what the lab read in one turn of its loop (a :class:`Reading`) and
keeps the page's data across turns: who owns what, ownership changes over time (diffed between turns and
timestamped), and the event log (each member's rebalance from its trace, the group settling again, the lab's steps
and faults, members exiting). :class:`LabSource` is the lab's side: it hooks into the lab's loop (``Lab.ui``) and
reads the lab there, and carries out the page's buttons there too, as steps through ``Lab.perform`` (so the lab's
trace gets its ``lab_step`` and fault lines as for a scenario's steps), because the lab is not thread-safe and the
web server calls :meth:`LabSource.act` on a thread of its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import re
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from enum import StrEnum

from rich.errors import MarkupError
from rich.text import Text

from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.runner import Lab
from zkconsumer.scenario.model import ActionKind, LabMode, Step
from zkconsumer.scenario.plan import GROUP
from zkconsumer.types import tp_str
from zkconsumer.web.history import MAX_CHANGES, MAX_EVENTS, Settling, partition_key
from zkconsumer.web.snapshot import Action, Change, Event, GroupInfo, Member, PartitionRow, Snapshot, SourceKind, Status
from zkconsumer.zk.registry import Registry

TP = tuple[str, int]


class EventKind(StrEnum):
    """The lab page's event kinds (:attr:`Event.kind`)."""

    REBALANCE = "rebalance"  # a member's rebalance_done, or the group settled again (and after which step)
    ACTION = "action"  # a step of the lab's (the page's, the scenario's), a fault and its heal
    MEMBER = "member"  # a member's process exited
    SOURCE = "source"  # the lab cannot read the group (ZooKeeper or the broker down), or can again


#: The process state of a member that consumes (MemberProcesses.status).
RUNNING = "running"
#: The page's actions besides the members' own: they act on the run.
JOIN, FINISH = ActionKind.JOIN.value, "finish"
#: Each process state (MemberProcesses.status) → the member actions it takes, before the lab's own say
#: (Lab.not_applicable): a paused or stopping process acts on nothing but SIGKILL.
BY_STATE: dict[str, tuple[ActionKind, ...]] = {
    RUNNING: (ActionKind.STOP, ActionKind.KILL, ActionKind.PAUSE, ActionKind.CUT_ZK),
    "paused": (ActionKind.KILL,),
    "stopping": (ActionKind.KILL,),
}
#: A member no longer running is started again (``restart``), whatever ended it.
ENDED = (ActionKind.RESTART,)
#: How many ownership changes and events the page keeps (a long run would grow its page without end): as many as
#: ``zkconsumer watch`` keeps.
KEEP_CHANGES, KEEP_EVENTS = MAX_CHANGES, MAX_EVENTS


def actions(fault_seconds: float) -> list[Action]:
    """Every button of the lab page; a member shows those that apply to it now (:attr:`Member.actions`)."""
    return [Action(JOIN, "add a member", member=False), Action(FINISH, "finish the run", member=False),
            Action(ActionKind.STOP, "stop (SIGTERM)"), Action(ActionKind.KILL, "kill -9"),
            Action(ActionKind.PAUSE, f"pause {fault_seconds:g} s (SIGSTOP)"),
            Action(ActionKind.CUT_ZK, f"cut from ZooKeeper {fault_seconds:g} s"),
            Action(ActionKind.RESTART, "restart")]


def member_of(owner: str, names: list[str]) -> str:
    """The lab member behind an owner id: a thread id (``lab_c1-0``, ZooKeeper mode) or a consumer id
    (``lab_c1``, coordinator mode); the id itself when no member of the run matches."""
    for name in sorted(names, key=len, reverse=True):
        consumer = f"{GROUP}_{name}"
        if owner == consumer or owner.startswith(consumer + "-"):
            return name
    return owner


def plain(markup: str) -> str:
    """A lab event without its time (``HH:MM:SS``, the page has its own) and rich's markup."""
    text = re.sub(r"^\d\d:\d\d:\d\d ", "", markup)
    with contextlib.suppress(MarkupError):
        return Text.from_markup(text).plain
    return text


@dataclass(frozen=True)
class Reading:
    """What the lab's loop read in one turn; ``rebalances`` and ``lab_events`` are the lines new since the last."""

    ts: int
    states: dict[str, str]
    subscriptions: dict[str, dict[str, int]] = field(default_factory=dict)
    clients: dict[str, str] = field(default_factory=dict)
    actions: dict[str, list[str]] = field(default_factory=dict)
    owners: dict[TP, str] = field(default_factory=dict)
    committed: dict[TP, int] = field(default_factory=dict)
    produced: dict[TP, int] = field(default_factory=dict)
    #: the partitions some running member subscribes to: owned once the group has settled
    expected: frozenset[TP] = frozenset()
    rebalances: list[dict] = field(default_factory=list)
    lab_events: list[str] = field(default_factory=list)
    #: the lab's steps and faults as its trace has them (ts, ``kill -9 c1``): what a rebalance is said to follow
    steps: list[tuple[int, str]] = field(default_factory=list)
    #: False once the churn is over: the page offers no more actions
    open: bool = True


class LiveGroup:
    """The lab page's data, kept across the lab's turns (pure: each :meth:`take` is one turn's reading).

    ``cause_ms``: how long before a rebalance's first change a step may be to be named as its cause (a kill -9
    moves nothing until the member's session expires)."""

    def __init__(self, title: str, buttons: list[Action], cause_ms: int = 30_000) -> None:
        self.buttons, self.cause_ms = buttons, cause_ms
        self.owners: dict[str, str] = {}  # "topic-partition" → member as shown, as of the last reading
        self._live: dict[str, str] = {}  # "topic-partition" → its owner, where that member runs
        self.states: dict[str, str] = {}
        self.changes: deque[Change] = deque(maxlen=KEEP_CHANGES)
        self.events: deque[Event] = deque(maxlen=KEEP_EVENTS)
        #: the rebalance under way, from its first ownership change; the lab's steps; the last one's start
        self._settling = Settling()
        self._steps: deque[tuple[int, str]] = deque(maxlen=KEEP_EVENTS)
        self._began: int | None = None
        #: a coordinator-mode group's generation, from its members' traces (``generation`` on every line): the one
        #: field of the group a watcher from outside cannot read (web/coordinator_source.py), the lab can
        self._generation: int | None = None
        started = int(time.time() * 1000)
        self.snapshot = Snapshot(title, SourceKind.LAB, started, GroupInfo(GROUP),
                                 Status(False, "starting ZooKeeper and the broker; the members start next"),
                                 since=started)

    def take(self, r: Reading) -> Snapshot:
        names = list(r.states)
        owners = {tp_str(tp): member_of(owner, names) for tp, owner in r.owners.items()}
        self._exits(r)
        self._steps.extend(r.steps)
        for e in r.lab_events:
            self.events.append(Event(r.ts, EventKind.ACTION, plain(e)))
        for e in sorted(r.rebalances, key=lambda e: e.get("ts") or 0):  # read file by file: put in time order
            self.events.append(Event(int(e.get("ts") or r.ts), EventKind.REBALANCE, self._rebalance_text(e, names)))
            if isinstance(e.get("generation"), int) and e["generation"] >= (self._generation or 0):
                self._generation = e["generation"]
        shown = {tp: _shown(m, r.states) for tp, m in owners.items()}
        self._diff(r, owners, shown)
        self.owners, self.states = shown, dict(r.states)
        members = [Member(name, _state(state), r.subscriptions.get(name, {}),
                          sorted((tp for tp, m in owners.items() if m == name), key=partition_key),
                          r.clients.get(name, ""), list(r.actions.get(name, [])) if r.open else [])
                   for name, state in sorted(r.states.items(), key=lambda kv: _name_order(kv[0]))]
        rows = [PartitionRow(t, p, shown.get(tp_str((t, p))), r.committed.get((t, p)), end,
                             end - r.committed.get((t, p), 0))  # from the beginning: nothing committed is all lag
                for (t, p), end in sorted(r.produced.items())]
        info = GroupInfo(GROUP, generation=self._generation)
        self.snapshot = Snapshot(self.snapshot.title, SourceKind.LAB, r.ts, info, Status(), members,
                                 rows, list(self.changes), list(self.events), self.buttons if r.open else [],
                                 since=self.snapshot.since)
        return self.snapshot

    def failed(self, ts: int, message: str) -> Snapshot:
        """The group could not be read this turn: the last data stays, under a banner saying why (an event
        when it starts)."""
        if self.snapshot.status.ok:
            self.events.append(Event(ts, EventKind.SOURCE, message))
        self.snapshot = dataclasses.replace(self.snapshot, ts=ts, status=Status(False, message),
                                            events=list(self.events))
        return self.snapshot

    def _exits(self, r: Reading) -> None:
        for name, state in r.states.items():
            if state != self.states.get(name) and (state == "stopped" or state.startswith("exit")):
                self.events.append(Event(r.ts, EventKind.MEMBER, f"{name} exited ({state})"))

    @staticmethod
    def _rebalance_text(e: dict, names: list[str]) -> str:
        owned = sorted(e.get("owned") or (), key=partition_key)
        attempts = e.get("attempts")
        tries = f", {attempts} attempts" if isinstance(attempts, int) and attempts > 1 else ""
        return (f"{member_of(str(e.get('consumer', '?')), names)} rebalanced in {e.get('duration_ms', '?')} ms{tries}: "
                f"owns {len(owned)}" + (f" ({', '.join(owned)})" if owned else ""))

    def _diff(self, r: Reading, owners: dict[str, str], shown: dict[str, str]) -> None:
        """Ownership changes since the last reading, and the group settled again: every partition a running member
        subscribes to owned by a running member, after changes, with none this turn (the summary dates it by the
        last change, not by this turn).

        The timeline draws the owners as ``shown`` (``c1 (killed)`` from the kill on); the rebalance's measures
        count a partition unowned from the moment its owner stopped running, not from when its owner node went
        (a kill -9 leaves the node until the session expires: the partition is consumed by no one meanwhile)."""
        moved = _differing(self.owners, shown)
        for tp in moved:
            self.changes.append(Change(r.ts, tp, shown.get(tp)))
        live = {tp: m for tp, m in owners.items() if r.states.get(m, RUNNING) == RUNNING}
        for tp in _differing(self._live, live):
            self._settling.change(r.ts, tp, self._live.get(tp), live.get(tp))
        self._live = live
        settled = r.expected and all(r.states.get(owners.get(tp_str(tp), "")) == RUNNING for tp in r.expected)
        if moved or not settled:
            return
        summary = self._settling.settle(r.ts)
        if summary is None:
            return
        counts = ", ".join(f"{m} {n}" for m, n in sorted(Counter(owners.values()).items()))
        self.events.append(Event(r.ts, EventKind.REBALANCE,
                                 f"{summary.text(self._cause(summary.began))}; every partition owned ({counts})"))
        self._began = summary.began

    def _cause(self, began: int) -> tuple[int, str] | None:
        """The lab's last step before a rebalance's first change, within ``cause_ms`` and after the previous
        rebalance's first change (that one's cause is not this one's)."""
        return next((step for step in reversed(self._steps)
                     if step[0] <= began and began - step[0] <= self.cause_ms
                     and (self._began is None or step[0] > self._began)), None)


def _differing(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The partitions whose owner is not the same in ``after`` as in ``before`` (gone or new included), in order."""
    return sorted({*before, *after} - {tp for tp in after if after[tp] == before.get(tp)}, key=partition_key)


def _shown(member: str, states: dict[str, str]) -> str:
    """An owner as the page shows it: a lab member that no longer runs (killed, stopped, paused) with its state,
    ``c1 (killed)``, so the timeline shows where an owner node outlived its consumer; any other owner as it is."""
    state = states.get(member, RUNNING)
    return member if state == RUNNING else f"{member} ({_state(state)})"


def _state(state: str) -> str:
    """A process state as the page names it (MemberProcesses writes ``killed (-9)``)."""
    return "killed" if state.startswith("killed") else state


def _name_order(name: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", name)
    return (int(digits) if digits else 0, name)


@dataclass
class _Order:
    """A button pressed: carried out on the lab's loop, its outcome given back to :meth:`LabSource.act`."""

    action: str
    member: str | None
    done: Future = field(default_factory=Future)


class LabSource:
    """The live page's source for ``lab``: it attaches itself to the lab's loop (``lab.ui``) before the run.

    ``open_ended``: the churn lasts until the page's "finish" (or Ctrl-C), past the plan's duration; otherwise
    "finish" ends it early. Pause and cut-zk last ``fault_seconds`` (default: twice the session timeout, so the
    member's session expires and the group rebalances, then it comes back)."""

    #: How long :meth:`act` waits for the lab's loop to carry out a button before answering "queued".
    ANSWER_WITHIN_S = 3.0

    def __init__(self, lab: Lab, open_ended: bool = False, fault_seconds: float | None = None) -> None:
        self.lab = lab
        self.open_ended = open_ended
        self.fault_seconds = fault_seconds or 2 * lab.plan.session_timeout_ms / 1000
        plan = lab.plan
        title = f"lab — {plan.mode} mode, {plan.profile} profile, {plan.strategy} — {lab.out}"
        # a step's rebalance: a kill -9 or a cut moves nothing until the session expires, a pause until it heals
        self.group = LiveGroup(title, actions(self.fault_seconds),
                               cause_ms=int(max(3 * plan.session_timeout_ms, 2000 * self.fault_seconds)))
        self._snapshot = self.group.snapshot
        self._lock = threading.Lock()
        self._orders: queue.SimpleQueue[_Order] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._finish = threading.Event()
        self._over = False
        #: why each (member, action) does not apply now, for act()'s answer; written on the lab's loop
        self._why: dict[tuple[str, str], str] = {}
        self._rebalances_seen = self._events_seen = self._steps_seen = 0
        lab.ui = self

    # ------------------------------------------------------------------------------ the web server's side
    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def act(self, action: str, member: str | None) -> str:
        if self._over:
            raise IllegalArgument("the churn is over: the lab is finishing its run (verify, then the summary)")
        if action == FINISH:
            self._finish.set()
            self._wake.set()
            return "finishing: the producer stops, the group catches up, then verify and the summary"
        if action != JOIN:
            self._check(action, member)
        order = _Order(action, member)
        self._orders.put(order)
        self._wake.set()
        try:
            return order.done.result(self.ANSWER_WITHIN_S)
        except FutureTimeout:
            return f"{action} {member or ''}".strip() + ": queued (the lab carries it out on its next turn)"

    def _check(self, action: str, member: str | None) -> None:
        """Refuse now what cannot apply (as of the last turn); the lab's loop checks again when it carries it out."""
        if action not in {str(k) for k in (*BY_STATE[RUNNING], *ENDED)}:
            raise IllegalArgument(f"unknown action {action!r}; one of: "
                                  + ", ".join(a.name for a in self.group.buttons))
        snapshot = self.snapshot()
        known = {m.id: m for m in snapshot.members}
        if member not in known:
            raise IllegalArgument(f"no member {member!r} in this run; members: {', '.join(known) or 'none yet'}")
        if action not in known[member].actions:
            raise IllegalArgument(f"{action} {member}: " + self._why.get(
                (member, action), f"not while {member} is {known[member].state}"))

    def close(self) -> None:
        self._over = True
        self._wake.set()

    # ------------------------------------------------------------------------------------ the lab's side
    def churning(self, elapsed: float) -> bool:
        going = not self._finish.is_set() and (self.open_ended or elapsed < self.lab.plan.duration)
        if not going and not self._over:
            self._over = True
            self._fail_orders()
        return going

    def turn(self, reg: Registry, elapsed: float, wait: float) -> None:
        while not self._over:
            try:
                order = self._orders.get_nowait()
            except queue.Empty:
                break
            self._carry_out(order, elapsed)
        self._read(reg)
        if self._wake.wait(wait):
            self._wake.clear()

    def _carry_out(self, order: _Order, elapsed: float) -> None:
        """One button, as a step of the lab's (``Lab.perform``: it writes the lab's trace as a scenario step
        does, and skips, saying why, what no longer applies)."""
        name = self._next_member() if order.action == JOIN else order.member or ""
        step = Step(round(elapsed, 2), ActionKind(order.action), name,
                    seconds=self.fault_seconds if order.action in (ActionKind.PAUSE, ActionKind.CUT_ZK) else 0.0)
        before = len(self.lab.events)
        try:
            self.lab.perform(step)
        except Exception as e:  # noqa: BLE001 - said on the page; the run goes on
            self.lab.events.append(f"{time.strftime('%H:%M:%S')} [red]failed[/] {order.action} {name}: {e}")
        said = "; ".join(plain(e) for e in self.lab.events[before:])
        order.done.set_result(said or f"{step.action} {name}: under way (its events follow)")

    def _next_member(self) -> str:
        """The next member name neither started nor planned by the run's schedule (a scheduled join keeps its)."""
        taken = set(self.lab.members.status) | {s.consumer for s in self.lab.plan.schedule()}
        return next(f"c{i}" for i in range(1, len(taken) + 2) if f"c{i}" not in taken)

    def _fail_orders(self) -> None:
        while True:
            try:
                order = self._orders.get_nowait()
            except queue.Empty:
                return
            order.done.set_result(f"{order.action} {order.member or ''}: not carried out, the churn is over")

    def _read(self, reg: Registry) -> None:
        now = int(time.time() * 1000)
        try:
            reading = self._reading(reg, now)
        except Exception as e:  # noqa: BLE001 - ZooKeeper or the broker down (a fault): said on the page
            snapshot = self.group.failed(now, f"cannot read the group since {time.strftime('%H:%M:%S')}: "
                                              f"{type(e).__name__}: {e}".rstrip(": "))
        else:
            snapshot = self.group.take(reading)
            self._rebalances_seen += len(reading.rebalances)
            self._events_seen += len(reading.lab_events)
            self._steps_seen += len(reading.steps)
        with self._lock:
            self._snapshot = snapshot

    def _reading(self, reg: Registry, now: int) -> Reading:
        lab, plan = self.lab, self.lab.plan
        lab.members.reap()
        states = dict(lab.members.status)
        # what the lab's view read this turn (it polled the traces just before): not read from ZooKeeper again
        owners, committed = lab.read if lab.read is not None else (lab.owners(reg), lab.committed(reg))
        running = [n for n, s in states.items() if s == RUNNING]
        subscribed = {t for n in running for t in plan.topics_of(n)}
        return Reading(
            now, states,
            subscriptions={n: ({f"/{plan.whitelist}/": 1} if plan.subscribes_by_regex else
                               dict.fromkeys(plan.topics_of(n), 1)) for n in states},
            clients={n: plan.kind_of(n) if plan.mode is LabMode.ZOOKEEPER else plan.client for n in states},
            actions={n: self._actions_of(n, state) for n, state in states.items()},
            owners=owners, committed=committed, produced=dict(lab.produced),
            expected=frozenset(tp for tp in lab.produced if plan.subscribes_by_regex or tp[0] in subscribed),
            rebalances=lab.tail.rebalances[self._rebalances_seen:], lab_events=lab.events[self._events_seen:],
            steps=lab.marks[self._steps_seen:], open=not self._over)

    def _actions_of(self, name: str, state: str) -> list[str]:
        """The member actions that apply to ``name`` now: by its state, then as the lab says
        (``Lab.not_applicable``: a cut needs the member's proxy, which a ScenarioLab has)."""
        out = []
        for kind in (*BY_STATE[RUNNING], *ENDED):
            why = None if kind in BY_STATE.get(state, ENDED) else f"not while {name} is {_state(state)}"
            why = why or self.lab.not_applicable(Step(0.0, kind, name, seconds=self.fault_seconds))
            if why:
                self._why[(name, str(kind))] = why
            else:
                out.append(str(kind))
        return out
