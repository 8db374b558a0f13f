"""The broker-side group coordinator's herd on simulated time, beside 0.8's (issue 41, item 3; ``herd.py``).

The same group and the same actions as :mod:`.herd`: N members on one topic of ``2 × N`` partitions, a cold start,
then rounds of one member joining and the first member in id order leaving (the 0.8 herd's "crash" closes its
ZooKeeper session, so its nodes vanish at once; here the member sends LeaveGroup, the same clean exit). What runs
is the project's own coordinator, whole: every request is a real Kafka frame (JoinGroup v5, SyncGroup v3,
Heartbeat v3, LeaveGroup v3, encoded by kafka-python's protocol classes) handed to the broker's own
:class:`~zkconsumer.wire.protocol.Dispatcher` and :class:`~zkconsumer.coordinator.apis.GroupApis`, which drive
:class:`~zkconsumer.coordinator.manager.GroupCoordinator` on virtual time through the runtime seam (its timers,
its parked JoinGroups and SyncGroups are the simulator's tasks and conditions).

The members are a model of the classic client's group loop (kafka-python's and the Java client's ``AbstractCoordinator``
with kafka-python's defaults: ``heartbeat.interval.ms`` 3,000, ``session.timeout.ms`` 10,000,
``max.poll.interval.ms`` 300,000 as the rebalance timeout), in two protocols:

* **eager** (``range``): a member told REBALANCE_IN_PROGRESS by its heartbeat gives up every partition, rejoins,
  and the leader assigns Range over the member ids;
* **cooperative** (``cooperative-sticky``): members keep what they own across the rejoin; the leader keeps each
  member's partitions up to its fair share, hands out the rest, and withholds a partition that another member
  still owns; that owner revokes it when its assignment arrives without it and rejoins at once, so a moved
  partition takes a second rebalance (KIP-429).

A member learns of a rebalance only from its next heartbeat's answer: the design's wait is up to one heartbeat
interval, where 0.8's herd is told by a watch. What is simulated: the network (one delay each way) and the
broker's CPU per request (:class:`CoordinatorCost`, one request at a time: the coordinator's one lock); the
members' own CPU is free.
"""

from __future__ import annotations

import random
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from zkconsumer.coordinator.apis import GroupApis
from zkconsumer.coordinator.group import GroupState
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator
from zkconsumer.errors import KafkaCode
from zkconsumer.sim import runtime_impl, tasks
from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.world import BASE_DELAY_US
from zkconsumer.wire.protocol import ApiTable, Dispatcher

GROUP, TOPIC = "g", "bench"
#: kafka-python's defaults (the coordinator-mode consumer's client)
HEARTBEAT_MS, SESSION_MS, REBALANCE_TIMEOUT_MS = 3000, 10000, 300000
#: the versions the members speak (JoinGroup v4+: KIP-394's member id first)
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V = 5, 3, 3, 3
#: a settled group: this long after convergence, as the 0.8 herd waits for a quiet group (heartbeats never stop,
#: so the window is fixed rather than "no request but a ping")
QUIET_MS = 400
POLL_MS = 1


class GroupProtocol(StrEnum):
    """The classic protocol's two rebalance styles."""

    EAGER = "eager"
    COOPERATIVE = "cooperative"

    @property
    def assignor(self) -> str:
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


# ------------------------------------------------------------------------------ ConsumerProtocol payloads
# Kafka's ConsumerProtocolSubscription v1 and ConsumerProtocolAssignment v1 (the bytes a JoinGroup's metadata and
# a SyncGroup's assignment carry), for one topic: their size is what the coordinator moves per member.

def encode_subscription(topic: str, owned: list[int]) -> bytes:
    t = topic.encode()
    out = struct.pack(">hih", 1, 1, len(t)) + t + struct.pack(">i", -1)  # version, [topic], user data null
    if not owned:
        return out + struct.pack(">i", 0)
    return out + struct.pack(">ih", 1, len(t)) + t + struct.pack(f">i{len(owned)}i", len(owned), *owned)


def decode_owned(data: bytes) -> list[int]:
    """The owned partitions of :func:`encode_subscription`'s bytes (one topic)."""
    _, _, tlen = struct.unpack_from(">hih", data)
    at = 8 + tlen + 4
    (topics,) = struct.unpack_from(">i", data, at)
    if topics == 0:
        return []
    at += 4
    (tlen,) = struct.unpack_from(">h", data, at)
    at += 2 + tlen
    (n,) = struct.unpack_from(">i", data, at)
    return list(struct.unpack_from(f">{n}i", data, at + 4))


def encode_assignment(topic: str, partitions: list[int]) -> bytes:
    t = topic.encode()
    return (struct.pack(">hih", 1, 1, len(t)) + t + struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
            + struct.pack(">i", -1))


def decode_assignment(data: bytes) -> list[int]:
    if not data:
        return []
    _, _, tlen = struct.unpack_from(">hih", data)
    at = 8 + tlen
    (n,) = struct.unpack_from(">i", data, at)
    return list(struct.unpack_from(f">{n}i", data, at + 4))


# ------------------------------------------------------------------------------------------ the assignors

def range_assignment(members: list[str], partitions: int) -> dict[str, list[int]]:
    """Kafka's RangeAssignor for one topic: members sorted by id, the first ``partitions % n`` one extra."""
    ordered = sorted(members)
    n = len(ordered)
    each, extra = divmod(partitions, n)
    out, at = {}, 0
    for i, m in enumerate(ordered):
        take = each + (1 if i < extra else 0)
        out[m] = list(range(at, at + take))
        at += take
    return out


def cooperative_assignment(owned: dict[str, list[int]], partitions: int) -> dict[str, list[int]]:
    """A balanced, sticky assignment for one topic, then KIP-429's cooperative rule.

    Each member keeps what it owns up to its fair share (``partitions // n``, the first ``partitions % n`` members
    by id one more), the rest go to members below theirs; a partition that changes hands is left out of its new
    owner's assignment in this generation, so its old owner revokes it first and rejoins (the second rebalance
    gives it to the new one). With one topic and equal subscriptions this is what Kafka's CooperativeStickyAssignor
    decides: sticky to the last owner, balanced to within one."""
    ordered = sorted(owned)
    n = len(ordered)
    each, extra = divmod(partitions, n)
    quota = {m: each + (1 if i < extra else 0) for i, m in enumerate(ordered)}
    claimed: dict[int, str] = {}
    for m in ordered:
        for p in owned[m]:
            if p < partitions and p not in claimed:
                claimed[p] = m
    target: dict[str, list[int]] = {m: [] for m in ordered}
    free = []
    for p in range(partitions):
        m = claimed.get(p)
        if m is not None and len(target[m]) < quota[m]:
            target[m].append(p)
        else:
            free.append(p)
    free.reverse()
    for m in ordered:
        while len(target[m]) < quota[m] and free:
            target[m].append(free.pop())
    # KIP-429: a partition another member still owns is not handed over in this generation
    return {m: sorted(p for p in ps if claimed.get(p, m) == m) for m, ps in target.items()}


# -------------------------------------------------------------------------------------------- the herd

class OneBrokerApis(GroupApis):
    """The broker's group APIs on a one-broker cluster: this broker coordinates every group (the real one finds
    that from ``__consumer_offsets``' leader in its cluster view, which the simulation has no ZooKeeper for)."""

    def _not_mine(self, group_id: str) -> int | None:
        return None


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


class _Broker:
    """The coordinator behind one request line: each request takes the line for its CPU, then is dispatched (a
    JoinGroup or a follower's SyncGroup may then wait, off the line, for the rest of the group)."""

    def __init__(self, rt: tasks.Runtime, cost: CoordinatorCost, delay_us: int) -> None:
        self.rt, self.cost, self.delay_us = rt, cost, delay_us
        self.coordinator = GroupCoordinator(CoordinatorConfig())
        self.dispatcher = group_dispatcher(self.coordinator)
        self.line = tasks.Lock(rt)
        self.requests: Counter = Counter()
        self.bytes_in = self.bytes_out = 0
        self._correlation = 0

    def call(self, api: str, request: Any, version: int, response_class: Any, client_id: str) -> Any:
        self._correlation += 1
        frame = encode_request(request, version, self._correlation, client_id)
        self.requests[api] += 1
        self.bytes_in += len(frame) + 4
        self.rt.sleep(self.delay_us / 1e6)
        self._cpu(api, len(frame))
        answer = self.dispatcher.dispatch(frame, peer=f"{client_id}:0")
        self._cpu("", len(answer))
        self.bytes_out += len(answer)
        self.rt.sleep(self.delay_us / 1e6)
        return response_class.decode(answer[4:], version=version, header=True)

    def _cpu(self, api: str, size: int) -> None:
        us = self.cost.us(api, size)
        if us > 0:
            with self.line:
                self.rt.sleep(us / 1e6)


def group_dispatcher(coordinator: GroupCoordinator) -> Dispatcher:
    """The broker's request dispatch with only its group APIs, on a one-broker cluster, over ``coordinator``."""
    table = ApiTable()
    OneBrokerApis(NoBrokerHost(), coordinator).install(table)
    return Dispatcher(table)


def encode_request(request: Any, version: int, correlation: int, client_id: str) -> bytes:
    """A request frame as a client sends it (header included, the size prefix not), as ``Dispatcher`` takes it."""
    request.API_VERSION = version
    request.with_header(correlation_id=correlation, client_id=client_id)
    return bytes(request.encode(header=True, framed=False))


class NoBrokerHost:
    """The broker the group APIs ask for its id (0); it has no cluster view and no further listeners."""

    broker_id = 0
    cluster = None

    def advertised(self, listener: str | None) -> tuple[str, int] | None:
        return None


class _Member:
    """One consumer's group loop (see the module's docstring): join, sync, heartbeat until told to rejoin."""

    def __init__(self, herd: _Herd, name: str) -> None:
        self.herd, self.name = herd, name
        self.member_id = ""
        self.generation = -1
        self.owned: list[int] = []
        self.rejoin = True
        self.leaving = tasks.Event(herd.rt)

    def run(self) -> None:
        h = self.herd
        while not self.leaving.is_set():
            if self.rejoin:
                self._join_and_sync()
                continue
            if self.leaving.wait(HEARTBEAT_MS / 1000):
                break
            r = h.broker.call("Heartbeat", HeartbeatRequest(group_id=GROUP, generation_id=self.generation,
                                                              member_id=self.member_id, group_instance_id=None),
                              HEARTBEAT_V, HeartbeatResponse, self.name)
            if r.error_code != KafkaCode.NONE:
                self._lost(r.error_code)
        if self.member_id:
            h.broker.call("LeaveGroup", LeaveGroupRequest(group_id=GROUP, members=[
                LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=None)]),
                LEAVE_V, LeaveGroupResponse, self.name)

    def _lost(self, code: int) -> None:
        self.rejoin = True
        if code in (KafkaCode.UNKNOWN_MEMBER_ID, KafkaCode.ILLEGAL_GENERATION):
            if code == KafkaCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.owned = []  # onPartitionsLost

    def _join_and_sync(self) -> None:
        h = self.herd
        eager = h.protocol is GroupProtocol.EAGER
        if eager:
            self.owned = []  # onPartitionsRevoked before the JoinGroup
        meta = encode_subscription(TOPIC, [] if eager else self.owned)
        join = h.broker.call("JoinGroup", JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=h.protocol.assignor, metadata=meta)]),
            JOIN_V, JoinGroupResponse, self.name)
        if join.error_code == KafkaCode.MEMBER_ID_REQUIRED:
            self.member_id = join.member_id
            return
        if join.error_code != KafkaCode.NONE:
            self._lost(join.error_code)
            return
        self.member_id, self.generation = join.member_id, join.generation_id
        assignments = []
        if join.leader == self.member_id:
            plan = h.assign({m.member_id: bytes(m.metadata) for m in join.members})
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=m, assignment=encode_assignment(TOPIC, ps)) for m, ps in plan.items()]
        sync = h.broker.call("SyncGroup", SyncGroupRequest(
            group_id=GROUP, generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
            assignments=assignments), SYNC_V, SyncGroupResponse, self.name)
        if sync.error_code != KafkaCode.NONE:
            self._lost(sync.error_code)
            return
        new = decode_assignment(bytes(sync.assignment))
        revoked = set(self.owned) - set(new)
        self.owned = new
        # cooperative: having revoked what moved, rejoin at once so that its new owner gets it
        self.rejoin = bool(revoked) and not eager


class _Herd:
    def __init__(self, rt: tasks.Runtime, protocol: GroupProtocol, partitions: int, cost: CoordinatorCost) -> None:
        self.rt, self.protocol, self.partitions = rt, protocol, partitions
        self.broker = _Broker(rt, cost, BASE_DELAY_US)
        self.members: dict[str, _Member] = {}

    def assign(self, metadata: dict[str, bytes]) -> dict[str, list[int]]:
        if self.protocol is GroupProtocol.EAGER:
            return range_assignment(list(metadata), self.partitions)
        return cooperative_assignment({m: decode_owned(d) for m, d in metadata.items()}, self.partitions)

    def converged(self) -> bool:
        """Stable, every live member in the group's generation with nothing left to rejoin for, and every
        partition owned by exactly one of them."""
        group = self.broker.coordinator.groups.get(GROUP)
        if group is None or group.state is not GroupState.STABLE:
            return False
        live = [m for m in self.members.values() if not m.leaving.is_set()]
        if len(group.members) != len(live):
            return False
        seen = 0
        for m in live:
            if m.rejoin or m.generation != group.generation or m.member_id not in group.members:
                return False
            seen += len(m.owned)
        if seen != self.partitions:
            return False
        return len({p for m in live for p in m.owned}) == self.partitions


def measure(protocol: GroupProtocol | str, size: int, rounds: int = 3, partitions_per_member: int = 2,
            seed: int = 0, cost: CoordinatorCost = FREE) -> CoordinatorHerdResult:
    """Cold start ``size`` members, then ``rounds`` × (a join, a leave), as :func:`.herd.measure` does for 0.8."""
    protocol = GroupProtocol(protocol)
    started = time.perf_counter()
    partitions = partitions_per_member * size
    result = CoordinatorHerdResult(protocol.value, size, partitions, rounds)
    scheduler = Scheduler(seed)
    rt = tasks.Runtime(scheduler)
    rng = random.Random(f"consumer-{seed}")
    with runtime_impl.installed(rt, rng):  # the coordinator takes its locks and conditions from the seam
        herd = _Herd(rt, protocol, partitions, cost)
    broker = herd.broker

    def start(name: str) -> None:
        member = herd.members[name] = _Member(herd, name)
        rt.spawn(member.run, name=name)

    def settle() -> int:
        t0 = scheduler.now_ms
        while not herd.converged():
            tasks.sleep(POLL_MS / 1000)
        took = scheduler.now_ms - t0
        tasks.sleep(QUIET_MS / 1000)
        return took

    def lap(phase: str, since: float) -> float:
        now = time.perf_counter()
        result.phase_wall_s[phase].append(now - since)
        return now

    def lab() -> None:
        wall = time.perf_counter()
        broker.coordinator.start()
        for i in range(size):
            start(f"c{i:05d}")
        result.cold_ms = settle()
        wall = lap("cold", wall)
        counted = broker.requests.copy(), broker.bytes_in, broker.bytes_out
        for r in range(rounds):
            generation = broker.coordinator.groups[GROUP].generation
            start(f"j{r:05d}")
            result.converge_ms["join"].append(settle())
            wall = lap("join", wall)
            after_join = broker.coordinator.groups[GROUP].generation
            result.generations.append(after_join - generation)
            live = sorted(n for n, m in herd.members.items() if not m.leaving.is_set())
            herd.members[live[0]].leaving.set()
            result.converge_ms["crash"].append(settle())
            wall = lap("crash", wall)
            result.generations.append(broker.coordinator.groups[GROUP].generation - after_join)
        result.requests = broker.requests - counted[0]
        result.bytes_to_server = broker.bytes_in - counted[1]
        result.bytes_from_server = broker.bytes_out - counted[2]
        broker.coordinator.stop()

    with runtime_impl.installed(rt, rng):
        try:
            rt.run(lambda: rt.spawn(lab, name="lab").join())
        finally:
            rt.close()
    result.wall_s = time.perf_counter() - started
    return result
