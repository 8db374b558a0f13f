"""benchmarks/herd.py's group on the simulator, to set the simulated coordinator's herd beside the real one (issue 54,
item 4: requests per join and leave, real against simulated, at 10 and 50 members).

The same parts and the same harness as the real benchmark: the project's broker (``group.initial.rebalance.delay.ms``
0, one topic of ``partitions``), members that are kafka-python's ``KafkaConsumer`` with the benchmark's settings
(session 10 s, heartbeat 1 s, ``max.poll.interval.ms`` 60 s, auto-commit off), each polled every 50 ms on a task
of its own as the benchmark's thread polls it; the same actions (after a cold start, each round a member joins and,
1.5 s after the group converged, that member leaves gracefully), the same convergence (every live member holds
something and the holdings cover each partition once, as the members' clients see them) and the same counting
window (the broker's requests from the action to convergence). What differs is time: virtual, on the simulated
network (:data:`~.coordinator_herd.BASE_DELAY_US` a hop), the broker's CPU charged per request
(:data:`~.coordinator_herd.LAB_COORDINATOR`).
"""

from __future__ import annotations

import contextlib
import random
import statistics
import tempfile
from collections import Counter
from typing import Any

from kafka import KafkaConsumer
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor

from zkconsumer.sim import tasks
from zkconsumer.sim.coordinator_herd import BASE_DELAY_US, LAB_COORDINATOR, CostedBroker, run_routed, start_broker
from zkconsumer.sim.kafka_io import KafkaIO
from zkconsumer.sim.kazoo_world import KazooWorld

TOPIC = GROUP = "herd"
ASSIGNORS = {"range": RangePartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}
#: the group requests the real benchmark counts
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetFetch")
POLL_S, CHECK_S, QUIET_S = 0.05, 0.01, 1.5


class _Member:
    """One consumer polled every 50 ms, what it holds read after each poll (the benchmark's ``Member``).

    ``gaps_us``: the real members' time between two polls of a join in flight, measured on the real side of the same
    benchmark (benchmarks/herd_agreement.py: from kafka-python's join wait timing out to its next look at the join,
    thread hand-offs and the GIL included); after each poll one is drawn and spent. Without it a simulated member
    spends no time there, and kafka-python 3.0's duplicate JoinGroup (a join that completes while nobody awaits it
    is sent again: ``BaseCoordinator.join_group_async`` replaces a finished join task with a new one) never
    happens."""

    def __init__(self, world: KazooWorld, name: str, bootstrap: str, protocol: str,
                 gaps_us: tuple[int, ...] = (), rng: random.Random | None = None) -> None:
        self.name, self.bootstrap, self.protocol = name, bootstrap, protocol
        self.gaps_us, self.rng = gaps_us, rng or random.Random(name)
        self.assigned: frozenset[int] = frozenset()
        self.stop = tasks.Event(world.runtime)
        self.left = tasks.Event(world.runtime)
        world.network.set_delay_us(name, BASE_DELAY_US)
        world.runtime.spawn(self._run, name=f"{name}-main", process=tasks.Process(name))

    def _run(self) -> None:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=GROUP, client_id=self.name,
                                 enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=1000,
                                 max_poll_interval_ms=60000, partition_assignment_strategy=[ASSIGNORS[self.protocol]])
        consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            with contextlib.suppress(Exception):  # as the benchmark: a rebalance in progress, poll again
                consumer.poll(timeout_ms=50)
                self.assigned = frozenset(tp.partition for tp in consumer.assignment())
            if self.gaps_us:
                tasks.sleep(self.rng.choice(self.gaps_us) / 1e6)
        with contextlib.suppress(Exception):
            consumer.close(autocommit=False)
        self.left.set()


def _converged(members: dict[str, _Member], partitions: int) -> bool:
    held = [m.assigned for m in members.values()]
    if not all(held):
        return False
    taken = [p for parts in held for p in parts]
    return len(taken) == partitions and set(taken) == set(range(partitions))


def measure(protocol: str, size: int, rounds: int = 3, partitions: int | None = None, seed: int = 0,
            gaps_us: tuple[int, ...] = ()) -> dict[str, Any]:
    """The real benchmark's row (``benchmarks/herd.py``'s ``run``) for ``protocol`` at ``size`` members, simulated;
    ``gaps_us`` the real members' times between polls to replay (:class:`_Member`)."""
    partitions = partitions or 2 * size
    world = KazooWorld(seed=seed)
    io = KafkaIO(world.runtime, world.network, random.Random(f"kafka-{seed}"))
    data_dir = tempfile.mkdtemp(prefix="zkconsumer-sim-herd-")
    row: dict[str, Any] = {}

    def counts(broker: CostedBroker) -> Counter:
        got = broker.request_counts()
        return Counter({api: got.get(f"{api}Request", 0) for api in GROUP_APIS})

    def wait_converged(members: dict[str, _Member]) -> float:
        while not _converged(members, partitions):
            tasks.sleep(CHECK_S)
        return world.clock.monotonic()

    def lab() -> None:
        for host in ("lab", "broker"):
            world.network.set_delay_us(host, BASE_DELAY_US)
        holder: dict[str, CostedBroker] = {}
        world.runtime.spawn(lambda: holder.setdefault("b", start_broker(
            world, LAB_COORDINATOR, data_dir, TOPIC, partitions, group_initial_rebalance_delay_ms=0)),
            name="broker-main", process=tasks.Process("broker")).join()
        broker = holder["b"]
        t0 = world.clock.monotonic()
        def member(name: str) -> _Member:
            return _Member(world, name, broker.bootstrap, protocol, gaps_us, random.Random(f"gap-{seed}-{name}"))

        members = {n: member(n) for n in (f"m{i:03d}" for i in range(size))}
        cold = wait_converged(members) - t0
        joins, leaves, join_reqs, leave_reqs = [], [], Counter(), Counter()
        join_rounds: list[int] = []  # JoinGroups of each round, as the real benchmark keeps them
        leave_rounds: list[int] = []
        for r in range(rounds):
            tasks.sleep(QUIET_S)
            joiner = f"j{r:02d}"
            before, t = counts(broker), world.clock.monotonic()
            members[joiner] = member(joiner)
            joins.append(wait_converged(members) - t)
            join_reqs.update(got := counts(broker) - before)
            join_rounds.append(got["JoinGroup"])
            tasks.sleep(QUIET_S)
            before, t = counts(broker), world.clock.monotonic()
            leaving = members.pop(joiner)
            leaving.stop.set()
            leaves.append(wait_converged(members) - t)
            leave_reqs.update(got := counts(broker) - before)
            leave_rounds.append(got["JoinGroup"])
        row.update(protocol=protocol, size=size, cold_s=cold, join_ms=1000 * statistics.median(joins),
                   leave_ms=1000 * statistics.median(leaves),
                   join_requests={k: join_reqs[k] / rounds for k in GROUP_APIS},
                   leave_requests={k: leave_reqs[k] / rounds for k in GROUP_APIS},
                   join_joingroups=join_rounds, leave_joingroups=leave_rounds)

    run_routed(world, io, lab, data_dir)
    return row
