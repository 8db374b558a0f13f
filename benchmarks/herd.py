"""The herd effect on the coordinator generations (failure mode c, docs/failure-modes.md): every member takes part
in every rebalance, whatever moved. The 0.8 side is measured by benchmarks/rebalance.py (ZooKeeper requests and
time per change); this is its counterpart for the classic group protocol.

One real ZooKeeper and zkconsumer's broker in this process (its group coordinator counts the requests it serves),
one topic of twice as many partitions as the largest group, no records (this measures coordination, not
fetching). Groups of ``--sizes`` members, kafka-python consumers in threads spread over host processes (25 per
process), each polling every 50 ms, with the eager ``range`` protocol and the incremental ``cooperative-sticky``
one. For each protocol and size, after a cold start (every member at once):

* join: one more member subscribes, until the group's assignments cover every partition once again, the new
  member's included;
* leave: one member leaves gracefully (LeaveGroup), until the others cover its partitions;

and counts the group requests the coordinator served from the action until convergence (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetFetch), with the members that rejoined (JoinGroup senders). The baseline in the
same run is the smallest size: a herd shows as requests growing with the group for a change of one member.
Run: .venv/bin/python benchmarks/herd.py [--sizes 10 50 200] [--rounds 3] [--protocols range cooperative-sticky]
     [--in-process]   (the members as threads of this process; benchmarks/herd_agreement.py sets that beside
                       the simulated herd)
     [--record FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from hosts import RemoteHost
from records import write_record
from rich.table import Table

from zkconsumer.broker import Broker
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import ZooKeeperServer
from zkconsumer.zk.topics import create_topic

TOPIC = "herd"
GROUP = "herd"
PER_PROCESS = 25
ASSIGNORS = {"range": "kafka.coordinator.assignors.range:RangePartitionAssignor",
             "cooperative-sticky": "kafka.coordinator.assignors.cooperative_sticky:CooperativeStickyAssignor"}
#: The coordinator's requests a rebalance is made of (and the heartbeats that carry the news of one).
GROUP_APIS = ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetFetch")
#: How the broker counts them (Dispatcher.requests: kafka-python's request class names).
_COUNTED = {api: f"{api}Request" for api in GROUP_APIS}


def _assignor(protocol: str):  # noqa: ANN202 - a kafka-python class
    module, _, name = ASSIGNORS[protocol].partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


class Member:
    """One kafka-python consumer in the group, polled by a thread of its own; what it holds is read by the host."""

    def __init__(self, name: str, bootstrap: str, protocol: str) -> None:
        from kafka import KafkaConsumer

        self.name = name
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, client_id=name,
                                      enable_auto_commit=False, session_timeout_ms=10000,
                                      heartbeat_interval_ms=1000, max_poll_interval_ms=60000,
                                      partition_assignment_strategy=[_assignor(protocol)])
        self.assigned: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> None:
        self.consumer.subscribe([TOPIC])
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a rebalance in progress, a coordinator moving: poll again
                self.consumer.poll(timeout_ms=50)
                self.assigned = frozenset(tp.partition for tp in self.consumer.assignment())

    def leave(self) -> None:
        """A graceful leave: LeaveGroup, then the consumer closed."""
        self._stop.set()
        self._thread.join(10)
        with contextlib.suppress(Exception):
            self.consumer.close(autocommit=False)


class Host:
    def __init__(self, bootstrap: str, protocol: str) -> None:
        self.bootstrap, self.protocol = bootstrap, protocol
        self.members: dict[str, Member] = {}

    def start(self, names: list[str]) -> None:
        for name in names:
            self.members[name] = Member(name, self.bootstrap, self.protocol)
        for name in names:
            self.members[name].start()

    def leave(self, name: str) -> None:
        self.members.pop(name).leave()

    def held(self) -> dict[str, frozenset[int]]:
        return {name: m.assigned for name, m in self.members.items()}

    def close(self) -> None:
        for m in list(self.members.values()):
            m.leave()
        self.members.clear()


class Group:
    """``size`` members over ``ceil(size / PER_PROCESS)`` host processes; one more host for the joiner."""

    def __init__(self, bootstrap: str, protocol: str, size: int) -> None:
        self.hosts = [RemoteHost(Host, bootstrap, protocol) for _ in range((size + PER_PROCESS - 1) // PER_PROCESS + 1)]
        self.where: dict[str, RemoteHost] = {}
        self.size = size

    def start(self, names: list[str], host: RemoteHost | None = None) -> None:
        if host is not None:
            host.call("start", names)
            self.where.update({n: host for n in names})
            return
        for i, host_ in enumerate(self.hosts[:-1]):
            chunk = names[i * PER_PROCESS:(i + 1) * PER_PROCESS]
            if chunk:
                host_.call("start", chunk)
                self.where.update({n: host_ for n in chunk})

    def leave(self, name: str) -> None:
        self.where.pop(name).call("leave", name)

    def held(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for host in self.hosts:
            out.update(host.call("held"))
        return out

    def close(self) -> None:
        for host in self.hosts:
            with contextlib.suppress(Exception):
                host.call("close")
            host.proc.join(30)


class InProcessGroup:
    """The members as threads of this process, one :class:`Host` (``--in-process``): what the simulator's counterpart
    (zkconsumer/sim/herd_benchmark.py) is set beside, each member on a host of its own there."""

    def __init__(self, bootstrap: str, protocol: str, size: int) -> None:
        self.host = Host(bootstrap, protocol)
        self.hosts = [None]
        self.where: dict[str, None] = {}
        self.size = size

    def start(self, names: list[str], host: None = None) -> None:
        self.host.start(names)
        self.where.update(dict.fromkeys(names))

    def leave(self, name: str) -> None:
        self.where.pop(name)
        self.host.leave(name)

    def held(self) -> dict[str, frozenset[int]]:
        return self.host.held()

    def close(self) -> None:
        self.host.close()


def converged(held: dict[str, frozenset[int]], members: set[str], partitions: int) -> bool:
    """Every live member holds something and the holdings cover each partition exactly once."""
    if set(held) != members or not all(held.values()):
        return False
    taken = [p for parts in held.values() for p in parts]
    return len(taken) == partitions and set(taken) == set(range(partitions))


def wait_converged(group: Group, members: set[str], partitions: int, timeout: float = 60.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if converged(group.held(), members, partitions):
            return time.monotonic()
        time.sleep(0.01)
    held = group.held()
    raise TimeoutError(f"the group of {len(members)} did not converge within {timeout:.0f}s: "
                       f"{ {m: sorted(p) for m, p in sorted(held.items())} }")


def requests_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {api: after.get(_COUNTED[api], 0) - before.get(_COUNTED[api], 0) for api in GROUP_APIS}


def run(broker: Broker, protocol: str, size: int, partitions: int, rounds: int, console,
        group_class: type = Group) -> dict:
    group = group_class(broker.bootstrap, protocol, size)
    names = [f"m{i:03d}" for i in range(size)]
    try:
        t0 = time.monotonic()
        group.start(names)
        cold = wait_converged(group, set(names), partitions) - t0
        joins, leaves, join_reqs, leave_reqs = [], [], Counter(), Counter()
        join_rounds: list[int] = []  # JoinGroups of each round: the spread a mean hides
        leave_rounds: list[int] = []
        for r in range(rounds):
            time.sleep(1.5)  # a quiet group: heartbeats only (the next change starts from a stable generation)
            joiner = f"j{r:02d}"
            before = broker.request_counts()
            t = time.monotonic()
            group.start([joiner], group.hosts[-1])
            joins.append(wait_converged(group, set(group.where), partitions) - t)
            join_reqs.update(got := requests_between(before, broker.request_counts()))
            join_rounds.append(got.get("JoinGroup", 0))
            time.sleep(1.5)
            before = broker.request_counts()
            t = time.monotonic()
            group.leave(joiner)
            leaves.append(wait_converged(group, set(group.where), partitions) - t)
            leave_reqs.update(got := requests_between(before, broker.request_counts()))
            leave_rounds.append(got.get("JoinGroup", 0))
        row = {"protocol": protocol, "size": size, "cold_s": cold,
               "join_ms": 1000 * statistics.median(joins), "leave_ms": 1000 * statistics.median(leaves),
               "join_requests": {k: v / rounds for k, v in join_reqs.items()},
               "leave_requests": {k: v / rounds for k, v in leave_reqs.items()},
               "join_joingroups": join_rounds, "leave_joingroups": leave_rounds}
        console.print(f"{protocol} {size}: cold start {cold:.1f} s, join p50 {row['join_ms']:.0f} ms, leave p50 "
                      f"{row['leave_ms']:.0f} ms, JoinGroup per join {row['join_requests']['JoinGroup']:.0f}",
                      highlight=False)
        return row
    finally:
        group.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--protocols", nargs="+", default=list(ASSIGNORS), choices=list(ASSIGNORS))
    ap.add_argument("--in-process", action="store_true",
                    help="the members as threads of this process, not of host processes")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    rows = run_all(args.protocols, args.sizes, args.rounds, console, InProcessGroup if args.in_process else Group)
    console.print(table(list(rows.values()), min(args.sizes)))
    if args.record:
        write_record(args.record, vars(args),
                     {"base_size": min(args.sizes), "rows": record_rows(list(rows.values()), min(args.sizes))},
                     Scope.LAB)


def _snake(api: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", api).lower()


def record_rows(rows: list[dict], base: int) -> list[dict]:
    """The table's rows for the result record: requests per join or leave by API (a mean over the rounds), their
    totals, the join's total against the smallest group's, and each round's JoinGroups."""
    by_base = {r["protocol"]: sum(r["join_requests"].values()) for r in rows if r["size"] == base}
    out = []
    for r in rows:
        join_total = sum(r["join_requests"].values())
        out.append({"protocol": r["protocol"], "size": r["size"], "cold_start_s": r["cold_s"],
                    "join_p50_ms": r["join_ms"], "leave_p50_ms": r["leave_ms"],
                    "requests_per_join": {_snake(k): v for k, v in r["join_requests"].items()},
                    "group_requests_per_join": join_total,
                    "group_requests_per_join_vs_base": join_total / by_base[r["protocol"]]
                    if by_base.get(r["protocol"]) else None,
                    "requests_per_leave": {_snake(k): v for k, v in r["leave_requests"].items()},
                    "group_requests_per_leave": sum(r["leave_requests"].values()),
                    "join_group_requests_by_join_round": r["join_joingroups"],
                    "join_group_requests_by_leave_round": r["leave_joingroups"]})
    return out


def run_all(protocols: list[str], sizes: list[int], rounds: int, console, group_class: type = Group,  # noqa: ANN001
            partitions: int | None = None) -> dict[tuple[str, int], dict]:
    """Every protocol at every size on one ZooKeeper and one broker, the topic of 2 × the largest size (or
    ``partitions``)."""
    partitions = partitions or 2 * max(sizes)
    rows = {}
    with ZooKeeperServer(servers=1) as zk, tempfile.TemporaryDirectory() as data:
        with Registry.open(zk.connect_string) as reg:
            create_topic(reg, TOPIC, partitions)
        with Broker(zk.connect_string, data_dir=Path(data), group_initial_rebalance_delay_ms=0) as broker:
            for protocol in protocols:
                for size in sizes:
                    rows[(protocol, size)] = run(broker, protocol, size, partitions, rounds, console, group_class)
    return rows


def table(rows: list[dict], base: int) -> Table:
    t = Table(title="the herd on the classic group protocol: one member joins or leaves a group of N")
    for col in ("protocol", "N", "cold start s", "join p50 ms", "leave p50 ms", "JoinGroup / join",
                "SyncGroup / join", "Heartbeat / join", "group requests / join", "vs N=" + str(base),
                "JoinGroup / leave", "group requests / leave"):
        t.add_column(col, justify="right")
    by_base = {r["protocol"]: r for r in rows if r["size"] == base}
    for r in rows:
        join_total = sum(r["join_requests"].values())
        base_total = sum(by_base[r["protocol"]]["join_requests"].values()) if r["protocol"] in by_base else None
        t.add_row(r["protocol"], str(r["size"]), f"{r['cold_s']:.1f}", f"{r['join_ms']:.0f}", f"{r['leave_ms']:.0f}",
                  f"{r['join_requests']['JoinGroup']:.0f}", f"{r['join_requests']['SyncGroup']:.0f}",
                  f"{r['join_requests']['Heartbeat']:.0f}", f"{join_total:.0f}",
                  f"{join_total / base_total:.1f}x" if base_total else "-",
                  f"{r['leave_requests']['JoinGroup']:.0f}", f"{sum(r['leave_requests'].values()):.0f}")
    return t


if __name__ == "__main__":
    main()
