"""The broker's CPU per group request (:class:`~.coordinator_herd.CoordinatorCost`), measured on the real
coordinator and fitted, as :mod:`.cpu_fit` does for ZooKeeper and the 0.8 members.

What is measured: the process CPU (``time.process_time``) the project's broker spends on real frames handed to its
:class:`~zkconsumer.wire.protocol.Dispatcher` (decoding, the coordinator's state machine under its lock, encoding),
live, on real threads and the wall clock, phase by phase of one rebalance of ``n`` members:

- the JoinGroups: ``n`` threads each send KIP-394's empty-id JoinGroup, then the one with its id; the joins park
  until the last arrives, which completes them all (its answer to the leader carries every member's metadata);
- the SyncGroups: the leader's (every member's assignment), then each follower's, answered at once;
- the Heartbeats, one per member;
- the LeaveGroups of half the members.

Each phase is one sample: its CPU against its requests and its bytes each way. The fit is non-negative least
squares over the samples of several sizes: ``CPU ≈ Σ request_us[api] × requests[api] + byte_ns × bytes``. The
threads' own switching is in the JoinGroup phase's CPU; it is what a broker thread pool pays too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from zkconsumer.coordinator.apis import GroupApis
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator
from zkconsumer.errors import KafkaCode, ZkConsumerError, code_name
from zkconsumer.sim.coordinator_herd import GROUP, TOPIC, CoordinatorCost
from zkconsumer.sim.cpu_fit import nonnegative_lstsq
from zkconsumer.wire.protocol import ApiTable, Dispatcher

#: the versions the measured requests speak (JoinGroup v4+: KIP-394's member id first)
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V = 5, 3, 3, 3
#: kafka-python's defaults, as the measured members send them
SESSION_MS, REBALANCE_TIMEOUT_MS = 10000, 300000

APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup")


class MeasurementFailed(ZkConsumerError, RuntimeError):
    """The live rebalance being measured went another way than the one measured (a member out of its generation)."""


@dataclass(frozen=True)
class PhaseSample:
    """One phase of a real rebalance: its requests by API, the bytes of its frames both ways, its CPU."""

    size: int
    api: str
    requests: int
    bytes: int
    cpu_us: float


def measure_phases(size: int) -> list[PhaseSample]:
    """One eager rebalance of ``size`` members on the live coordinator, phase by phase (see the module)."""
    coordinator = GroupCoordinator(CoordinatorConfig()).start()  # the initial delay gathers every join into one
    while not coordinator.loaded:
        time.sleep(0.001)
    run = _PhaseRun(size, group_dispatcher(coordinator))
    try:
        run.phase("JoinGroup", run.joins)
        first = next(iter(run.joined.values()))
        generation, leader = first.generation_id, first.leader
        ids = {n: run.joined[n].member_id for n in run.names}
        run.phase("SyncGroup", lambda: run.syncs(ids, generation, leader))
        run.phase("Heartbeat", lambda: [run.call(encode_request(HeartbeatRequest(
            group_id=GROUP, generation_id=generation, member_id=m, group_instance_id=None), HEARTBEAT_V, 11, "c"))
            for m in ids.values()])
        leaving = list(ids.values())[: max(1, size // 2)]
        run.phase("LeaveGroup", lambda: [run.call(encode_request(LeaveGroupRequest(group_id=GROUP, members=[
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=None)]), LEAVE_V, 12, "c"))
            for m in leaving])
    finally:
        coordinator.stop()
    return run.samples


class _PhaseRun:
    """The members of :func:`measure_phases` and what each phase cost: requests and bytes through the dispatcher
    (counted under a lock: the joins come from a thread per member), CPU of this process."""

    def __init__(self, size: int, dispatcher) -> None:
        self.size, self.dispatcher = size, dispatcher
        self.names = [f"m{i:05d}" for i in range(size)]
        self.meta = bytes(ConsumerProtocolSubscription(version=1, topics=[TOPIC], user_data=None).encode())
        self.joined: dict[str, object] = {}
        self.traffic = {"bytes": 0, "requests": 0}
        self.lock = threading.Lock()
        self.samples: list[PhaseSample] = []
        self.go = threading.Event()
        self.threads = [threading.Thread(target=lambda n=n: self.go.wait() and self.join(n), daemon=True)
                        for n in self.names]
        for t in self.threads:  # started before the phase: a broker's connection threads exist before their requests
            t.start()

    def call(self, frame: bytes) -> bytes:
        answer = self.dispatcher.dispatch(frame, peer="sim:0")
        with self.lock:
            self.traffic["bytes"] += len(frame) + len(answer)
            self.traffic["requests"] += 1
        return answer

    def phase(self, api: str, run) -> None:
        self.traffic["bytes"] = self.traffic["requests"] = 0
        cpu = time.process_time()
        run()
        self.samples.append(PhaseSample(self.size, api, self.traffic["requests"], self.traffic["bytes"],
                                        (time.process_time() - cpu) * 1e6))

    def join(self, name: str) -> None:
        member_id = ""
        for attempt in range(2):
            req = JoinGroupRequest(group_id=GROUP, session_timeout_ms=SESSION_MS,
                                   rebalance_timeout_ms=REBALANCE_TIMEOUT_MS, member_id=member_id,
                                   group_instance_id=None, protocol_type="consumer",
                                   protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                         metadata=self.meta)])
            answer = JoinGroupResponse.decode(self.call(encode_request(req, JOIN_V, attempt, name))[4:],
                                              version=JOIN_V, header=True)
            member_id = answer.member_id
            if answer.error_code != KafkaCode.MEMBER_ID_REQUIRED:
                self.joined[name] = answer
                return

    def joins(self) -> None:
        self.go.set()
        for t in self.threads:
            t.join(60)

    def syncs(self, ids: dict[str, str], generation: int, leader: str) -> None:
        plan = range_plan(list(ids.values()), 2 * self.size)
        by_id = {v: k for k, v in ids.items()}
        order = [leader] + [m for m in ids.values() if m != leader]
        for member_id in order:
            assignments = [] if member_id != leader else [
                SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=payload)
                for m, payload in plan.items()]
            req = SyncGroupRequest(group_id=GROUP, generation_id=generation, member_id=member_id,
                                   group_instance_id=None, assignments=assignments)
            answer = SyncGroupResponse.decode(self.call(encode_request(req, SYNC_V, 9, by_id[member_id]))[4:],
                                              version=SYNC_V, header=True)
            if answer.error_code != KafkaCode.NONE:
                raise MeasurementFailed(f"SyncGroup of {member_id} answered {code_name(answer.error_code)}:"
                                        " the rebalance measured did not complete as one generation")


def fit_cost(samples: Sequence[PhaseSample]) -> CoordinatorCost:
    """``request_us`` per API and ``byte_ns`` from phase samples (non-negative least squares, absolute errors)."""
    x = np.array([[s.requests if s.api == api else 0 for api in APIS] + [s.bytes / 1000] for s in samples],
                 dtype=float)
    y = np.array([s.cpu_us for s in samples], dtype=float)
    coef = nonnegative_lstsq(x, y)
    return CoordinatorCost({api: round(float(c), 1) for api, c in zip(APIS, coef[:-1], strict=True)},
                           round(float(coef[-1]), 1))


def measure_cost(sizes: Sequence[int] = (10, 100, 1000), repeats: int = 2) -> tuple[CoordinatorCost,
                                                                                       list[PhaseSample]]:
    """Measure the phases at each size ``repeats`` times, and fit."""
    samples = [s for _ in range(repeats) for n in sizes for s in measure_phases(n)]
    return fit_cost(samples), samples


# ------------------------------------------------------------------------------------- the frames measured

def encode_request(request: Any, version: int, correlation: int, client_id: str) -> bytes:
    """A request frame as a client sends it (header included, the size prefix not), as ``Dispatcher`` takes it."""
    request.API_VERSION = version
    request.with_header(correlation_id=correlation, client_id=client_id)
    return bytes(request.encode(header=True, framed=False))


def range_plan(member_ids: list[str], partitions: int) -> dict[str, bytes]:
    """The leader's SyncGroup payloads: kafka-python's own RangeAssignor over ``member_ids`` for one topic."""
    members = [SimpleNamespace(member_id=m, group_instance_id=None,
                               metadata=ConsumerProtocolSubscription(version=1, topics=[TOPIC], user_data=None))
               for m in member_ids]
    cluster = SimpleNamespace(partitions_for_topic=lambda _topic: set(range(partitions)))
    plan = RangePartitionAssignor.assign(cluster, members)
    return {m: bytes(a.encode()) if isinstance(a, ConsumerProtocolAssignment) else bytes(a) for m, a in plan.items()}


class OneBrokerApis(GroupApis):
    """The broker's group APIs on a one-broker cluster: this broker coordinates every group (the real one finds
    that from ``__consumer_offsets``' leader in its cluster view, which this measurement has no ZooKeeper for)."""

    def _not_mine(self, group_id: str) -> int | None:
        return None


class NoBrokerHost:
    """The broker the group APIs ask for its id (0); it has no cluster view and no further listeners."""

    broker_id = 0
    cluster = None

    def advertised(self, listener: str | None) -> tuple[str, int] | None:
        return None


def group_dispatcher(coordinator: GroupCoordinator) -> Dispatcher:
    """The broker's request dispatch with only its group APIs, on a one-broker cluster, over ``coordinator``."""
    table = ApiTable()
    OneBrokerApis(NoBrokerHost(), coordinator).install(table)
    return Dispatcher(table)
