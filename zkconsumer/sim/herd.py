"""benchmarks/rebalance.py's measurement on the simulator: ZooKeeper requests per join and per crash, by kind.

The same group as the real benchmark: N members of zkconsumer's connector with fetching off (coordination only),
one topic of ``partitions_per_member × N`` partitions, Range, ``rebalance.max.retries`` 10, sessions of 6 s, no
auto-commit; a broker registration (Kafka's rebalance claims nothing without one). The same actions: a member
joins (``create_message_streams``), the first member in id order crashes (its rebalancer stopped and its session
closed, so its registration and owner nodes vanish at once). The same convergence: every owner node names the
thread Range gives it. And the same count: every request ZooKeeper received from the group over the rounds (pings
included), divided by the joins and crashes, each action followed by a settle as the real one waits for a quiet
group (here: :data:`QUIET_MS` without a request other than a ping, and no sooner than that after convergence).

What is simulated is ZooKeeper (``sim/zookeeper.py``; answered at once, or with ``service`` times in one line:
``sim/zk_service.py``), the network (one delay each way) and the members' threads; the rebalance is the
connector's own.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.member_io import MemberIO
from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
from zkconsumer.consumer.zookeeper.group_view import SharedView, shared_view
from zkconsumer.errors import ConsumerRebalanceFailed, ZkConsumerError
from zkconsumer.sim import tasks
from zkconsumer.sim.cpu import Machine
from zkconsumer.sim.kazoo_handler import SimHandler
from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.tasks import Process
from zkconsumer.sim.world import BASE_DELAY_US, LAB_ZOOKEEPER
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_service import INSTANT, ServiceTimes
from zkconsumer.sim.zookeeper import ChildOrder
from zkconsumer.zk.layout import BrokerInfo, GroupPaths, TopicAssignment
from zkconsumer.zk.registry import Registry

GROUP, TOPIC = "g", "bench"  # benchmarks/rebalancing/tree.py's
#: benchmarks/rebalancing/tree.py SETTINGS
SETTINGS = {"auto.commit.enable": False, "rebalance.max.retries": 10, "zookeeper.session.timeout.ms": 6000}
#: a settled group: this long without a request other than a ping (the real benchmark waits for idle CPUs, 400 ms
#: at least)
QUIET_MS = 400
#: a larger group is registered first and rebalances after (:func:`measure`'s cold start). Up to COLD_WAVE members
#: start all at once, each registering and rebalancing, as in benchmarks/rebalance.py
COLD_WAVE = 1000
#: a group that has not settled this long after an action has collapsed (the run stops and says so)
SETTLE_LIMIT_MS = 600_000
#: how often the lab looks at the owners (a convergence time is known to this much; the real benchmark polls every
#: few milliseconds too)
POLL_MS = 1


class HerdCollapsed(ZkConsumerError, RuntimeError):
    """The group did not settle: a member's start gave up, or no convergence within :data:`SETTLE_LIMIT_MS`."""

    def __init__(self, waited_ms: int, members: int) -> None:
        super().__init__(f"{members:,} members did not settle ({waited_ms:,} ms simulated since the action)")


@dataclass
class HerdResult:
    profile: str
    size: int
    partitions: int
    rounds: int
    #: per action ("join", "crash"): convergence times (virtual ms) and requests by kind over its window
    converge_ms: dict[str, list[int]] = field(default_factory=lambda: {"join": [], "crash": []})
    requests: Counter = field(default_factory=Counter)
    cold_ms: int = 0
    #: requests by kind over the cold start (not counted in ``requests``)
    cold_requests: Counter = field(default_factory=Counter)
    wall_s: float = 0.0
    #: over the counted actions, as the requests are: watch notifications the server sent, bytes each way
    notifications: int = 0
    bytes_to_server: int = 0
    bytes_from_server: int = 0
    #: (virtual ms, member, why) of each member whose start gave up its rebalance (``rebalance.max.retries`` spent)
    starts_given_up: list[tuple[int, str, str]] = field(default_factory=list)
    #: why the run stopped short: the group did not settle (a start gave up, or SETTLE_LIMIT_MS passed); "" if not
    collapsed: str = ""
    #: the members' rebalance counters over the counted actions (Rebalancer.stats): attempts, failed_attempts,
    #: claim_conflicts, failed_rebalances (rebalances given up)
    stats: Counter = field(default_factory=Counter)
    #: wall seconds spent simulating each phase: the cold start, and each join and crash with its settle
    phase_wall_s: dict[str, list[float]] = field(default_factory=lambda: {"cold": [], "join": [], "crash": []})

    @property
    def actions(self) -> int:
        return len(self.converge_ms["join"]) + len(self.converge_ms["crash"])

    def per_action(self, pings: bool = True) -> float:
        total = sum(n for k, n in self.requests.items() if pings or k != RequestKind.PING.value)
        return total / self.actions if self.actions else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "size": self.size, "partitions": self.partitions, "rounds": self.rounds,
                "cold_ms": self.cold_ms, "cold_requests": sum(self.cold_requests.values()),
                "join_ms": self.converge_ms["join"], "crash_ms": self.converge_ms["crash"],
                "requests_per_action": round(self.per_action(), 1),
                "requests_per_action_without_pings": round(self.per_action(False), 1),
                "requests_by_kind": {k: round(n / max(1, self.actions), 1) for k, n in sorted(self.requests.items())},
                "notifications_per_action": round(self.notifications / max(1, self.actions), 1),
                "bytes_to_server_per_action": round(self.bytes_to_server / max(1, self.actions)),
                "bytes_from_server_per_action": round(self.bytes_from_server / max(1, self.actions)),
                "starts_given_up": self.starts_given_up, "collapsed": self.collapsed,
                "stats_per_action": {k: round(n / max(1, self.actions), 2) for k, n in sorted(self.stats.items())},
                "wall_s": round(self.wall_s, 2),
                "phase_wall_s": {k: [round(x, 2) for x in v] for k, v in self.phase_wall_s.items()}}


def expected_owners(names: list[str], partitions: int) -> dict[int, str]:
    ctx = AssignmentContext({f"{GROUP}_{n}": {TOPIC: 1} for n in names}, {TOPIC: range(partitions)})
    return {tp.partition: tid for tp, tid in assign("range", ctx).owners.items()}


def measure(profile: str, size: int, rounds: int = 3, partitions_per_member: int = 2, seed: int = 0,
            service: ServiceTimes = INSTANT, machine: Machine | None = None, joins: bool = True) -> HerdResult:
    """Cold start ``size`` members, then ``rounds`` × (a join, a crash), counted as the real benchmark counts
    (``joins=False``: the crashes alone, on a group of ``size``).

    ``machine``: the members and the server share its cores, each member host paying its profile's cost per frame
    it receives and the server its CPU per request (:mod:`.cpu`; ``service`` is then the machine's); without it the
    members' CPU is free and only the server's line (``service``) takes time."""
    started = time.perf_counter()
    herd = Herd(profile, size, rounds, partitions_per_member, seed, service, machine)
    collecting = gc.isenabled()
    gc.disable()  # the cold start builds what lives to the end: at thousands of members, collections walking it again
    try:          # and again took half the run (1,000 members: 94 s with the collector, 51 s without)
        herd.run(joins, collecting)
    finally:
        herd.world.close()
        if collecting:
            gc.unfreeze()
            gc.enable()
    herd.result.wall_s = time.perf_counter() - started
    return herd.result


class Herd:
    """One measured herd: the simulated world, its members and what the lab counts. The lab's loop (:meth:`run`)
    runs as a task of the world; the members' starts are tasks of their own processes."""

    def __init__(self, profile: str, size: int, rounds: int, partitions_per_member: int, seed: int,
                 service: ServiceTimes, machine: Machine | None) -> None:
        self.profile, self.size, self.rounds = profile, size, rounds
        self.partitions = partitions_per_member * size
        self.result = HerdResult(profile, size, self.partitions, rounds)
        # one children order per version, as the real server's HashSet: a herd shares one answer to getChildren
        self.world = KazooWorld(seed, replace(LAB_ZOOKEEPER, child_order=ChildOrder.PER_VERSION),
                                service=service if machine is None else machine.server, machine=machine)
        self.cost = None if machine is None else machine.cost_for(profile)
        self.owners_path = GroupPaths(GROUP).owners_topic(TOPIC)
        self.members: dict[str, ZookeeperConsumerConnector] = {}
        self.everyone: list[ZookeeperConsumerConnector] = []  # crashed ones too: their counters count
        self.processes: dict[str, Process] = {}
        #: when ZooKeeper last received a request other than a ping (virtual ms): a quiet group has none for a while
        self.last_request_ms = 0
        #: requests count towards the actions (else towards the cold start)
        self.counting = False
        #: members of a registered-first cold start registered, and started
        self.registered = self.ready = 0
        #: the view a registered-first cold start's members start from
        self.warm: tuple[SharedView, int] | None = None
        self.world.model.add_request_listener(self._on_request)

    @property
    def now_ms(self) -> int:
        return self.world.scheduler.now_ms

    def _on_request(self, kind: RequestKind, _session: int) -> None:
        (self.result.requests if self.counting else self.result.cold_requests)[kind.value] += 1
        if kind is not RequestKind.PING:
            self.last_request_ms = self.now_ms

    # ------------------------------------------------------------------------------------------- members
    def start(self, name: str, gate: tasks.Event | None = None) -> tasks.Task:
        """Start member ``name``; with ``gate`` it registers, then waits for the gate to open before its rebalancer
        starts (from the view in :attr:`warm`, if any)."""
        world = self.world
        world.network.set_delay_us(name, BASE_DELAY_US)
        world.network.link(name).cost = self.cost
        self.processes[name] = process = Process(name)
        return world.runtime.spawn(self._member, name, gate, name=f"{name}-main", process=process)

    def _member(self, name: str, gate: tasks.Event | None) -> None:
        io = MemberIO(zk_handler=lambda: SimHandler(self.world.runtime, self.world.network, name))
        c = ZookeeperConsumerConnector(ConsumerConfig.from_properties({
            **SETTINGS, "group.id": GROUP, "consumer.id": name, "zookeeper.connect": "127.0.0.1:2181",
            "zkconsumer.fetch.enable": False, "zkconsumer.profile": self.profile}), io=io)
        self.members[name] = c
        self.everyone.append(c)
        try:
            c.create_message_streams({TOPIC: 1}, rebalance=gate is None)
            if gate is not None:
                self.registered += 1
                gate.wait()
                if self.warm:  # what the first member read, as the version check finds it (GroupView.start_from)
                    c.rebalancer.view.start_from(*self.warm)
                c.start_rebalancing()
        except ConsumerRebalanceFailed as e:  # Kafka's start gives up so too: a result, not the harness's error
            self.result.starts_given_up.append((self.now_ms, name, str(e)))
        finally:
            self.ready += 1

    def crash(self, name: str) -> None:
        c = self.members.pop(name)

        def run() -> None:
            c.rebalancer.stop()
            c.zk.stop()  # the session ends: its registration and owner nodes vanish at once

        self.world.runtime.spawn(run, name=f"{name}-crash", process=self.processes[name]).join()
        self.world.runtime.kill_process(self.processes[name])

    # ------------------------------------------------------------------------------------------- settling
    def converged(self, want: dict[int, str]) -> bool:
        nodes = self.world.model.tree.nodes
        for p, tid in want.items():
            node = nodes.get(f"{self.owners_path}/{p}")
            if node is None or node.data.decode() != tid:
                return False
        return True

    def settle(self, names: list[str]) -> int:
        """Wait for convergence (its virtual ms), then for a quiet group; :class:`HerdCollapsed` past
        :data:`SETTLE_LIMIT_MS` or once a member's start gave up."""
        t0 = self.now_ms
        want = expected_owners(names, self.partitions)  # once per action, not per look
        while not self.converged(want):
            if self.result.starts_given_up or self.now_ms - t0 > SETTLE_LIMIT_MS:
                raise HerdCollapsed(self.now_ms - t0, len(names))
            tasks.sleep(POLL_MS / 1000.0)
        took = self.now_ms - t0
        done_at = self.now_ms
        while self.now_ms - max(self.last_request_ms, done_at) < QUIET_MS:
            tasks.sleep(POLL_MS / 1000.0)
        return took

    def _wait(self, count: Callable[[], int], n: int) -> None:
        """Until ``count()`` (of :attr:`registered` or :attr:`ready` members) reaches ``n``, or a member's start gave
        up (the settle that follows says so)."""
        while count() < n and not self.result.starts_given_up:
            tasks.sleep(POLL_MS / 1000.0)

    # ------------------------------------------------------------------------------------------- the lab
    def run(self, joins: bool, collecting: bool) -> None:
        """The lab's loop as a task of the world; a collapse is a result, not an error."""
        def guarded() -> None:
            try:
                self._lab(joins, collecting)
            except HerdCollapsed as e:
                self.result.collapsed = str(e)

        rt = self.world.runtime
        self.world.run(lambda: rt.spawn(guarded, name="lab", process=Process("lab")).join())

    def _setup(self) -> None:
        """The lab's admin: the group's paths, a broker registration (Kafka's rebalance claims nothing without
        one) and the topic."""
        self.world.network.set_delay_us("lab", BASE_DELAY_US)
        admin = self.world.client("lab", timeout=30.0)
        admin.start()
        reg = Registry(admin)
        reg.setup_common_paths()
        reg.register_broker(BrokerInfo(0, "127.0.0.1", 9092, jmx_port=-1, version=1))
        reg.create_topic_node(TOPIC, TopicAssignment({p: [0] for p in range(self.partitions)}))

    def _lab(self, joins: bool, collecting: bool) -> None:
        self._setup()
        names = [f"c{i:03d}" for i in range(self.size)]
        wall, cold_from = time.perf_counter(), self.now_ms
        if self.size <= COLD_WAVE:
            for n in names:
                self.start(n)
        else:
            self._registered_first(names)
        self.settle(names)
        self.result.cold_ms = self.now_ms - cold_from
        wall = _lap(self.result, "cold", wall)
        if collecting:  # the settled group's objects live to the end: frozen, no collection walks them again; what
            gc.freeze()  # the actions leave behind (failed attempts' cycles: 16 GB at 10,000 members) is collected
            gc.enable()
        self._rounds(names, joins, wall)

    def _registered_first(self, names: list[str]) -> None:
        """Registered first: every member writes its registration, then one rebalances alone and the others start
        from what it read. Grown by joins, each member reads every registration that comes after its own: N²/2
        getData requests (5·10⁷ at 10,000 members, about 1.5 h of this simulator's wall) before the first measured
        action. The settled group is the same either way: every registration in place, every owner node as Range
        gives it, every member's view at the ids child version that lists them all. Both steps go by waves of
        COLD_WAVE: thousands of sessions opened at once, or thousands of first rebalances, queue on the server's
        line past the clients' read timeout (2/3 of the session)."""
        rt, size = self.world.runtime, self.size
        gates = [tasks.Event(rt) for _ in range(0, size, COLD_WAVE)]
        first = tasks.Event(rt)
        for w, at in enumerate(range(0, size, COLD_WAVE)):
            for n in names[at:at + COLD_WAVE]:
                self.start(n, first if n == names[0] else gates[w])
            self._wait(lambda: self.registered, min(size, at + COLD_WAVE))
        first.set()
        self._wait(lambda: self.ready, 1)  # its start (the first rebalance, every registration read) is done
        version = self.world.model.tree.nodes[GroupPaths(GROUP).ids].stat().cversion
        view = shared_view(GROUP, version) if self.profile == "default" else None
        if view is not None:  # kafka-0.8 reads it all anyway
            self.warm = (view, version)
        for w, gate in enumerate(gates):
            gate.set()
            self._wait(lambda: self.ready, min(size, (w + 1) * COLD_WAVE))

    def _rounds(self, names: list[str], joins: bool, wall: float) -> None:
        """The measured actions: per round a join (unless ``joins`` is off), then the crash of the first member in
        id order, each followed by a settle; what ZooKeeper received meanwhile is counted."""
        result = self.result
        self.counting = True
        stats_before = sum((c.rebalancer.stats for c in self.everyone), Counter())
        server = self.world.server
        wire = (server.notifications, server.bytes_in, server.bytes_out)
        for r in range(self.rounds):
            if joins:
                name = f"j{r:03d}"
                self.start(name)
                names.append(name)
                result.converge_ms["join"].append(self.settle(names))
                wall = _lap(result, "join", wall)
            victim = sorted(names)[r % len(names)]
            names.remove(victim)
            self.crash(victim)
            result.converge_ms["crash"].append(self.settle(names))
            wall = _lap(result, "crash", wall)
        self.counting = False
        result.stats = sum((c.rebalancer.stats for c in self.everyone), Counter()) - stats_before
        result.notifications = server.notifications - wire[0]
        result.bytes_to_server = server.bytes_in - wire[1]
        result.bytes_from_server = server.bytes_out - wire[2]


def _lap(result: HerdResult, phase: str, since: float) -> float:
    now = time.perf_counter()
    result.phase_wall_s[phase].append(now - since)
    return now
