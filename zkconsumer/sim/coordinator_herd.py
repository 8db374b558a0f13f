"""The broker-side group coordinator's herd on simulated time, beside 0.8's (issue 41, item 3; ``herd.py``).

The same group and the same actions as :mod:`.herd`: N members on one topic of ``2 × N`` partitions, a cold start,
then rounds of one member joining and the first member in id order leaving (the 0.8 herd's "crash" closes its
ZooKeeper session, so its nodes vanish at once; here the member shuts down, and its client sends LeaveGroup, the
same clean exit).

Everything that runs is the project's own code, unchanged (issue 54): each member is the coordinator-mode consumer
(:class:`~zkconsumer.consumer.coordinated.connector.CoordinatorConsumerConnector` on kafka-python's group client:
its JoinGroup, SyncGroup, Heartbeat and LeaveGroup, its assignors, its cooperative protocol), the broker is
:class:`~zkconsumer.broker.broker.Broker` (its server, dispatcher and group coordinator), registered in the
simulated ZooKeeper; kafka-python's sockets, selectors, threads, clocks and random draws are routed to the
simulation (:mod:`.kafka_io`). The members take the project's defaults for coordinator mode
(``heartbeat.interval.ms`` 3,000, ``session.timeout.ms`` 30,000, ``max.poll.interval.ms`` 30,000) and do not
fetch (``zkconsumer.fetch.enable=false``: the herd measures membership, as the 0.8 herd does).

Two protocols: **eager** (``range``): every member gives up its partitions and rejoins; **cooperative**
(``cooperative-sticky``, KIP-429): a partition that moves is revoked first, and a second rebalance hands it over.

What is simulated: the network (one delay each way), and the broker's CPU per request (:class:`CoordinatorCost`,
one request at a time: the coordinator's one lock), charged around the broker's own request handling
(:meth:`Broker.handle_frame`); the members' own CPU is free but for the turn of kafka-python's event loop
(:data:`~.kafka_io.SELECT_COST_S`).
"""

from __future__ import annotations

import logging
import random
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from zkconsumer import broker_version
from zkconsumer.broker.broker import Broker
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.coordinator.group import GroupState
from zkconsumer.sim import tasks
from zkconsumer.sim.kafka_io import KafkaIO, kafka_routed
from zkconsumer.sim.kazoo_handler import SimHandler
from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.world import BASE_DELAY_US
from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.topics import create_topic

GROUP, TOPIC = "g", "bench"
#: the members' heartbeat interval (the project's default for coordinator mode): how long a member may take to
#: learn of a rebalance
HEARTBEAT_MS = 3000
#: a settled group: this long after convergence, as the 0.8 herd waits for a quiet group (heartbeats never stop,
#: so the window is fixed rather than "no request but a ping")
QUIET_MS = 400
#: how often the herd looks whether the group has converged (virtual time)
POLL_MS = 5
#: the group APIs, as the broker's dispatcher counts them
GROUP_APIS = {"JoinGroupRequest": "JoinGroup", "SyncGroupRequest": "SyncGroup", "HeartbeatRequest": "Heartbeat",
              "LeaveGroupRequest": "LeaveGroup"}


class GroupProtocol(StrEnum):
    """The classic protocol's two rebalance styles."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"

    @property
    def assignor(self) -> str:
        """The member's ``partition.assignment.strategy``."""
        return "range" if self is GroupProtocol.EAGER else "cooperative-sticky"


@dataclass(frozen=True)
class CoordinatorCost:
    """The broker's CPU per group request: a fixed part per API, and a part per byte of the request and of the
    answer (the leader's JoinGroup answer and SyncGroup request carry the whole group)."""

    request_us: dict[str, float] = field(default_factory=dict)
    byte_ns: float = 0.0

    def us(self, api: str, size: int) -> float:
        return self.request_us.get(api, 0.0) + self.byte_ns * size / 1000


#: CPU is free: only the network's delays take time
FREE = CoordinatorCost()
#: zkconsumer's broker on this machine (2026-11-29, benchmarks/herd_scale.py --fit-coordinator: the live coordinator
#: at 10, 100 and 1,000 members, twice, fitted by coordinator_fit.py). Python's: Kafka's JVM coordinator is cheaper
#: per request, and its JoinGroup cost does not grow with the group (ours checks every member for a join's
#: completion: 400 µs a JoinGroup at 100 members, 750 µs at 1,000)
LAB_COORDINATOR = CoordinatorCost({"JoinGroup": 716.0, "SyncGroup": 162.0, "Heartbeat": 103.0, "LeaveGroup": 113.0},
                                  220.0)


@dataclass
class CoordinatorHerdResult:
    protocol: str
    size: int
    partitions: int
    rounds: int
    converge_ms: dict[str, list[int]] = field(default_factory=lambda: {"join": [], "crash": []})
    #: group requests by API over the counted actions' windows (heartbeats included)
    requests: Counter = field(default_factory=Counter)
    #: generations the group went through per counted action
    generations: list[int] = field(default_factory=list)
    bytes_to_server: int = 0
    bytes_from_server: int = 0
    cold_ms: int = 0
    wall_s: float = 0.0
    #: wall seconds spent simulating the cold start, and each join and leave with its settle
    phase_wall_s: dict[str, list[float]] = field(default_factory=lambda: {"cold": [], "join": [], "crash": []})

    @property
    def actions(self) -> int:
        return len(self.converge_ms["join"]) + len(self.converge_ms["crash"])

    def per_action(self, api: str | None = None) -> float:
        total = sum(self.requests.values()) if api is None else self.requests[api]
        return total / self.actions if self.actions else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "size": self.size, "partitions": self.partitions, "rounds": self.rounds,
                "cold_ms": self.cold_ms, "join_ms": self.converge_ms["join"], "crash_ms": self.converge_ms["crash"],
                "requests": dict(self.requests), "generations": self.generations,
                "bytes_to_server": self.bytes_to_server, "bytes_from_server": self.bytes_from_server,
                "wall_s": round(self.wall_s, 2)}


class CostedBroker(Broker):
    """The project's broker, each request first taking the broker's one request line for its CPU
    (:class:`CoordinatorCost`); the request is then handled as ever (a JoinGroup or a follower's SyncGroup may then
    wait, off the line, for the rest of the group). Counts the group requests' bytes both ways."""

    def __init__(self, *args: Any, cost: CoordinatorCost, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cost = cost
        self.line = tasks.Lock(tasks.active())
        self.bytes_in = self.bytes_out = 0

    def handle_frame(self, frame: bytes, peer: str, listener: str | None = None) -> bytes | None:
        api = _api_name(frame)
        self._cpu(api, len(frame))
        answer = super().handle_frame(frame, peer, listener)
        if api is not None:
            self.bytes_in += len(frame) + 4
            self.bytes_out += len(answer or b"")
            self._cpu("", len(answer or b""))
        return answer

    def _cpu(self, api: str | None, size: int) -> None:
        us = self.cost.us(api or "", size) if api is not None else 0.0
        if us > 0:
            with self.line:
                tasks.sleep(us / 1e6)

    def group_requests(self) -> Counter:
        return Counter({GROUP_APIS[k]: v for k, v in self.request_counts().items() if k in GROUP_APIS})


#: the api keys of the group APIs (Kafka's: JoinGroup 11, Heartbeat 12, LeaveGroup 13, SyncGroup 14)
_GROUP_KEYS = {11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup"}


def _api_name(frame: bytes) -> str | None:
    return _GROUP_KEYS.get(int.from_bytes(frame[:2], "big", signed=True)) if len(frame) >= 2 else None


class _Member:
    """One member: the project's coordinator-mode consumer, in a process of its own."""

    def __init__(self, herd: _Herd, name: str) -> None:
        self.herd, self.name = herd, name
        self.leaving = tasks.Event(herd.world.runtime)
        self.connector: CoordinatorConsumerConnector | None = None
        self.process = tasks.Process(name)

    def run(self) -> None:
        h = self.herd
        config = ConsumerConfig.from_properties({
            "group.id": GROUP, "bootstrap.servers": h.bootstrap, "client.id": self.name, "consumer.id": self.name,
            "partition.assignment.strategy": h.protocol.assignor, "zkconsumer.fetch.enable": "false",
            "auto.commit.enable": "false"})
        self.connector = CoordinatorConsumerConnector(config)
        self.connector.create_message_streams({TOPIC: 1})
        self.leaving.wait()
        self.connector.shutdown()

    def joined(self) -> tuple[int, str | None]:
        """The generation and member id this member's client holds. Its client's, not the connector's
        ``group_generation``: under cooperative-sticky, kafka-python 3.0 calls ``on_partitions_assigned`` only when
        partitions are added (Java's consumer calls it after every rebalance, KIP-429), so a member whose share did not
        grow keeps the connector's generation of its last growth."""
        consumer = None if self.connector is None else self.connector.poller.consumer
        meta = None if consumer is None else consumer.group_metadata()
        return (-1, None) if meta is None else (meta.generation_id, meta.member_id)

    def owned(self) -> set[int]:
        c = self.connector
        return set() if c is None else {tp.partition for tp, p in list(c.owned.items()) if p.generation >= 0}


class _Herd:
    """The broker, the members, and the run: a cold start, then the rounds of a join and a leave."""

    def __init__(self, world: KazooWorld, protocol: GroupProtocol, result: CoordinatorHerdResult,
                 cost: CoordinatorCost, data_dir: str) -> None:
        self.world, self.protocol, self.result, self.cost = world, protocol, result, cost
        self.partitions = result.partitions
        self.data_dir = data_dir
        self.broker: CostedBroker | None = None
        self.bootstrap = ""
        self.members: dict[str, _Member] = {}
        self._wall = 0.0

    def start(self, name: str) -> None:
        self.world.network.set_delay_us(name, BASE_DELAY_US)
        member = self.members[name] = _Member(self, name)
        self.world.runtime.spawn(member.run, name=f"{name}-main", process=member.process)

    def live(self) -> list[_Member]:
        return [m for m in self.members.values() if not m.leaving.is_set()]

    def generation(self) -> int:
        group = self.broker.coordinator.groups.get(GROUP)
        return -1 if group is None else group.generation

    def converged(self) -> bool:
        """Stable, every live member in the group's generation as its own client sees it, and every partition
        owned by exactly one of them."""
        group = self.broker.coordinator.groups.get(GROUP)
        if group is None or group.state is not GroupState.STABLE:
            return False
        live = self.live()
        if len(group.members) != len(live):
            return False
        seen = 0
        for m in live:
            generation, member_id = m.joined()
            if generation != group.generation or member_id not in group.members:
                return False
            owned = m.owned()
            # what the member holds is what this generation gave it: under cooperative-sticky a member that must
            # give a partition up holds it until its revocation runs, and the partition's next owner waits for the
            # generation after (read at the wrong instant, the first of the two looked settled)
            if owned != assigned_partitions(group.members[member_id].assignment):
                return False
            seen += len(owned)
        return seen == self.partitions and len(set().union(*(m.owned() for m in live))) == self.partitions

    # ------------------------------------------------------------------------------------------------ the run
    def _start_broker(self) -> None:
        self.broker = start_broker(self.world, self.cost, self.data_dir, TOPIC, self.partitions)
        self.bootstrap = self.broker.bootstrap

    def settle(self) -> int:
        t0 = self.world.scheduler.now_ms
        while not self.converged():
            tasks.sleep(POLL_MS / 1000)
        took = self.world.scheduler.now_ms - t0
        tasks.sleep(QUIET_MS / 1000)
        return took

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.result.phase_wall_s[phase].append(now - self._wall)
        self._wall = now

    def lab(self) -> None:
        for host in ("lab", "broker"):
            self.world.network.set_delay_us(host, BASE_DELAY_US)
        self.world.runtime.spawn(self._start_broker, name="broker-main", process=tasks.Process("broker")).join()
        broker, result = self.broker, self.result
        self._wall = time.perf_counter()
        t0 = self.world.scheduler.now_ms
        for i in range(result.size):
            self.start(f"c{i:05d}")
        self.settle()
        result.cold_ms = self.world.scheduler.now_ms - t0 - QUIET_MS
        self.lap("cold")
        counted = broker.group_requests(), broker.bytes_in, broker.bytes_out
        for r in range(result.rounds):
            generation = self.generation()
            self.start(f"j{r:05d}")
            result.converge_ms["join"].append(self.settle())
            self.lap("join")
            after_join = self.generation()
            result.generations.append(after_join - generation)
            sorted(self.live(), key=lambda m: m.name)[0].leaving.set()
            result.converge_ms["crash"].append(self.settle())
            self.lap("crash")
            result.generations.append(self.generation() - after_join)
        result.requests = broker.group_requests() - counted[0]
        result.bytes_to_server = broker.bytes_in - counted[1]
        result.bytes_from_server = broker.bytes_out - counted[2]


def assigned_partitions(assignment: bytes) -> set[int]:
    """The partitions of :data:`TOPIC` a SyncGroup assignment (as the coordinator stores it) gives its member."""
    if not assignment:
        return set()
    return {p for topic, partitions in ConsumerProtocolAssignment.decode(assignment).assignment if topic == TOPIC
            for p in partitions}


def start_broker(world: KazooWorld, cost: CoordinatorCost, data_dir: str, topic: str, partitions: int,
                 **settings: Any) -> CostedBroker:
    """The project's broker on ``world`` (called from a task of its process), and ``topic`` created as the lab's
    admin creates it, in ZooKeeper; ``settings``: the broker's own (``group_initial_rebalance_delay_ms``...)."""
    rt, network = world.runtime, world.network
    broker = CostedBroker(world.hosts, cost=cost, data_dir=data_dir,
                          zk_handler=lambda: SimHandler(rt, network, "broker"), **settings).start()
    zk = connect(world.hosts, handler=lambda: SimHandler(rt, network, "lab"))
    create_topic(Registry(zk), topic, partitions)
    zk.stop()
    return broker


def measure(protocol: GroupProtocol | str, size: int, rounds: int = 3, partitions_per_member: int = 2,
            seed: int = 0, cost: CoordinatorCost = FREE) -> CoordinatorHerdResult:
    """Cold start ``size`` members, then ``rounds`` × (a join, a leave), as :func:`.herd.measure` does for 0.8."""
    protocol = GroupProtocol(protocol)
    started = time.perf_counter()
    result = CoordinatorHerdResult(protocol.value, size, partitions_per_member * size, rounds)
    world = KazooWorld(seed=seed)
    io = KafkaIO(world.runtime, world.network, random.Random(f"kafka-{seed}"))
    data_dir = tempfile.mkdtemp(prefix="zkconsumer-sim-broker-")  # the broker's log: real files, removed after
    herd = _Herd(world, protocol, result, cost, data_dir)
    run_routed(world, io, herd.lab, data_dir)
    result.wall_s = time.perf_counter() - started
    return result


def run_routed(world: KazooWorld, io: KafkaIO, main: Any, data_dir: str) -> None:
    """Run ``main`` on ``world`` with kafka-python routed to it, the members' logging quiet (a simulated member logs
    what a real one logs; the result says what matters), the broker's version probed afresh (as a fresh process
    does); the broker's ``data_dir`` removed after."""
    quiet = logging.root.manager.disable
    logging.disable(max(quiet, logging.WARNING))
    broker_version.clear_cache()
    try:
        with kafka_routed(io):
            try:
                world.run(main)
            finally:
                world.close()
    finally:
        logging.disable(quiet)
        broker_version.clear_cache()
        shutil.rmtree(data_dir, ignore_errors=True)
