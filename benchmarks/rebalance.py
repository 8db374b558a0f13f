"""Rebalance speed: Kafka 0.8's timing (profile kafka-0.8) against zkconsumer's default, in the same run.

One real ZooKeeper (run as in production: the JVM's default JIT, not the quick-start flags tests use), one topic
of 200 partitions, groups of 10 and 50 consumers spread over ``--processes`` host processes (4 by default; 1 keeps
them all in this process), fetching disabled: this measures coordination, not records. Convergence is read from
ZooKeeper itself: the creation time (``ctime``) of the last owner node of the new assignment, once every owner
node holds the thread the assignor names (then Kafka's verify must pass); waiting for it costs one listing every
10 ms. For each profile and size it measures

* cold start: every consumer started at the same moment, until the group owns every partition as the
  assignor says;
* join: one more consumer joins, until the new assignment is fully owned;
* crash: one consumer's session ends without a shutdown (its ephemeral nodes vanish, as after kill -9 once
  the session timed out), until the survivors own everything;

and counts failed claim attempts (claim conflicts), failed attempts and failed rebalances, and prints where each
consumer's rebalance spent its time (zkconsumer/phases.py), the ZooKeeper round trip measured alone (--floor), and
the CPU one rebalance costs the consumers' processes and ZooKeeper (with the part ZooKeeper's JIT compiler took).
Unmeasured scenarios run first until that compiler is quiet (--warmup), as in a ZooKeeper that has been serving.
Run: .venv/bin/python benchmarks/rebalance.py [--sizes 10 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections import Counter

from kazoo.exceptions import NoNodeError
from rich.table import Table

from zkconsumer.assignors import AssignmentContext, assign
from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.consoles import make_console
from zkconsumer.groups import verify
from zkconsumer.phases import PHASES
from zkconsumer.registry import Registry, connect
from zkconsumer.topics import create_topic
from zkconsumer.zkserver import ZooKeeperServer

TOPIC = "bench"
GROUP = "g"


def new_consumer(zk: str, name: str, profile: str) -> ZookeeperConsumerConnector:
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties({
        "group.id": GROUP, "consumer.id": name, "zookeeper.connect": zk, "zkconsumer.fetch.enable": False,
        "zkconsumer.profile": profile, "auto.commit.enable": False, "rebalance.max.retries": 10,
        "zookeeper.session.timeout.ms": 6000}))


def expected_owners(names: list[str], partitions: int) -> dict:
    ctx = AssignmentContext({f"{GROUP}_{n}": {TOPIC: 1} for n in names}, {TOPIC: range(partitions)})
    return {(tp.topic, tp.partition): tid for tp, tid in assign("range", ctx).owners.items()}


def zk_owners(reg: Registry) -> tuple[dict, int]:
    """Every owner node of the topic and the latest creation time among them (ZooKeeper's ``ctime``, epoch ms),
    read with pipelined requests."""
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    pending = [(int(c), reg.zk.get_async(f"{base}/{c}")) for c in reg.children(base)]
    owners, latest = {}, 0
    for partition, result in pending:
        with contextlib.suppress(Exception):  # deleted between the listing and the read
            data, stat = result.get()
            owners[(TOPIC, partition)] = data.decode()
            latest = max(latest, stat.ctime)
    return owners, latest


def wait_converged(expected: dict, reg: Registry, since: float, timeout: float = 120.0) -> float:
    """Seconds from ``since`` (epoch seconds) until ZooKeeper held the expected assignment fully owned.

    The moment is read from ZooKeeper itself: once every owner node holds the thread the assignor names, the
    latest owner node's creation time (``ctime``, stamped by the server on this same host) is when the
    assignment became complete. Waiting costs the consumers next to nothing: one listing of the owner nodes
    every 10 ms, whose child version counts every create and delete; all nodes are read only once there is one
    per partition, the listing has stayed still for 30 ms and it changed since the last full read. (Reading all
    200 nodes in the lull before the consumers' first writes took CPU from them exactly when they needed it.)
    Kafka's verify must pass.
    """
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    t0 = time.monotonic()
    last, still_since, read_at = None, time.monotonic(), None
    while True:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the group did not converge")
        try:
            children, stat = reg.zk.get_children(base, include_data=True)
            version = stat.cversion
        except NoNodeError:
            children, version = [], None
        now = time.monotonic()
        if version != last:
            last, still_since = version, now
        elif now - still_since >= 0.03 and len(children) == len(expected) and version != read_at:
            owners, latest = zk_owners(reg)
            if owners == expected:
                break
            read_at = version
        time.sleep(0.01)
    assert verify(reg, GROUP).ok
    return max(0.0, latest / 1000.0 - since)


def _cpu_ms(stat_path: str) -> tuple[str, float]:
    """(name, CPU ms used so far: user + system) of a process or thread, from its ``/proc/.../stat``."""
    with open(stat_path) as f:
        stat = f.read()
    fields = stat.rsplit(")", 1)[1].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf(
        "SC_CLK_TCK")


def process_cpu_ms(pids: list[int]) -> float | None:
    """CPU time (ms) these processes have used so far (Linux /proc; None elsewhere)."""
    try:
        return sum(_cpu_ms(f"/proc/{pid}/stat")[1] for pid in pids)
    except OSError:
        return None


def zookeeper_cpu_ms(pid: int | None) -> tuple[float, float] | None:
    """CPU time (ms) the ZooKeeper server process has used so far, and the part of it its JIT compiler threads
    used (Linux /proc; None elsewhere). A production ZooKeeper has compiled its hot paths long ago; a fresh one
    spends more CPU compiling than serving during its first thousands of rebalance requests."""
    if pid is None:
        return None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = jit = 0.0
    for task in tasks:
        try:
            name, ms = _cpu_ms(f"/proc/{pid}/task/{task}/stat")
        except OSError:
            continue  # the thread ended
        total += ms
        if "CompilerThre" in name:  # "C2 CompilerThre", "C1 CompilerThre" (names are cut at 15 characters)
            jit += ms
    return total, jit


def cpu_sample(host_pids: list[int], zk_pid: int | None) -> dict[str, float | None]:
    """CPU ms used so far by the consumers' host processes, ZooKeeper, and ZooKeeper's JIT (None: no /proc)."""
    zk = zookeeper_cpu_ms(zk_pid)
    return {"consumers": process_cpu_ms(host_pids), "zookeeper": zk and zk[0], "jit": zk and zk[1]}


class Host:
    """Consumers living in one process: commands arrive over a pipe (or are called directly in-process)."""

    def __init__(self, zk: str, profile: str) -> None:
        self.zk, self.profile = zk, profile
        self.consumers: dict[str, ZookeeperConsumerConnector] = {}
        self.gone: list[ZookeeperConsumerConnector] = []

    def create(self, names: list[str]) -> None:
        for n in names:
            self.consumers[n] = new_consumer(self.zk, n, self.profile)

    def start_at(self, names: list[str], at: float) -> None:
        """Start these consumers' streams at wall-clock time ``at`` (all hosts at the same moment)."""
        def start(c) -> None:
            time.sleep(max(0.0, at - time.time()))
            with contextlib.suppress(Exception):  # counted through the stats
                c.create_message_streams({TOPIC: 1})

        threads = [threading.Thread(target=start, args=(self.consumers[n],)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def join(self, name: str) -> None:
        self.create([name])
        self.consumers[name].create_message_streams({TOPIC: 1})

    def crash(self, name: str) -> None:
        c = self.consumers.pop(name)
        c.rebalancer.stop()
        c.zk.stop()  # the session ends: its registration and owner nodes vanish at once
        self.gone.append(c)

    def stats(self) -> Counter:
        total: Counter = Counter()
        for c in list(self.consumers.values()) + self.gone:
            total.update(c.rebalancer.stats)
        return total

    def phases(self) -> list[tuple[float, float | None, dict[str, int]]]:
        """(monotonic start, trigger time, phases in ms) of every consumer's recent rebalances (phases.py)."""
        return [(start, triggered, phases) for c in list(self.consumers.values()) + self.gone
                for _, start, triggered, phases in c.rebalancer.phase_log]

    def close(self) -> None:
        for c in list(self.consumers.values()) + self.gone:
            with contextlib.suppress(Exception):
                c.shutdown()


def _host_main(conn, zk: str, profile: str) -> None:
    host = Host(zk, profile)
    while True:
        method, args = conn.recv()
        try:
            conn.send(("ok", getattr(host, method)(*args)))
        except Exception as e:  # noqa: BLE001 - reported to the parent
            conn.send(("error", repr(e)))
        if method == "close":
            return


class RemoteHost:
    def __init__(self, zk: str, profile: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_host_main, args=(child, zk, profile), daemon=True)
        self.proc.start()

    def send(self, method: str, *args) -> None:
        self.conn.send((method, args))

    def result(self):
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(value)
        return value

    def call(self, method: str, *args):
        self.send(method, *args)
        return self.result()


def run_scenario(zk_root: str, profile: str, size: int, partitions: int, rounds: int, processes: int,
                 zk_pid: int | None = None) -> dict:
    zk = f"{zk_root}/{profile.replace('.', '')}-{size}-{uuid.uuid4().hex[:6]}"
    client = connect(zk)
    reg = Registry(client)
    reg.setup_common_paths(f"/consumers/{GROUP}/ids")  # as a running cluster and group have them
    create_topic(reg, TOPIC, partitions)
    names = [f"c{i:03d}" for i in range(size)]
    hosts = [RemoteHost(zk, profile) for _ in range(processes)] if processes > 1 else None
    local = Host(zk, profile) if hosts is None else None
    placement = {n: i % max(processes, 1) for i, n in enumerate(names)}

    def call(host: int, method: str, *args):
        return getattr(local, method)(*args) if hosts is None else hosts[host].call(method, *args)

    try:
        for h in range(max(processes, 1)):
            call(h, "create", [n for n in names if placement[n] == h])
        at = time.time() + 1.0
        if hosts is None:
            starter = threading.Thread(target=local.start_at, args=(names, at))
            starter.start()
        else:
            for h, host in enumerate(hosts):
                host.send("start_at", [n for n in names if placement[n] == h], at)
        time.sleep(max(0.0, at - time.time()))
        members = list(names)
        cold = wait_converged(expected_owners(members, partitions), reg, since=at)
        if hosts is None:
            starter.join()
        else:
            for host in hosts:
                host.result()
        joins, crashes = [], []
        actions: list[float] = []  # monotonic (system-wide on Linux, so comparable across host processes)
        host_pids = [h.proc.pid for h in hosts] if hosts else [os.getpid()]
        cpu_before = cpu_sample(host_pids, zk_pid)
        for r in range(rounds):
            name = f"j{r:03d}"
            placement[name] = r % max(processes, 1)
            t0 = time.time()
            actions.append(time.monotonic())
            call(placement[name], "join", name)
            members.append(name)
            joins.append(wait_converged(expected_owners(members, partitions), reg, since=t0))
            victim = sorted(members)[r % len(members)]
            members.remove(victim)
            t0 = time.time()
            actions.append(time.monotonic())
            call(placement[victim], "crash", victim)
            crashes.append(wait_converged(expected_owners(members, partitions), reg, since=t0))
        cpu_after = cpu_sample(host_pids, zk_pid)
        cpu = {name: None if cpu_before[name] is None or cpu_after[name] is None
               else (cpu_after[name] - cpu_before[name]) / (2 * rounds) for name in cpu_before}
        counts: Counter = Counter()
        logged: list[tuple[float, float | None, dict[str, int]]] = []
        for h in range(max(processes, 1)):
            counts.update(call(h, "stats"))
            logged += call(h, "phases")
        return {"phases": phase_summary(logged, actions),"profile": profile, "size": size, "cold_s": cold,
                "join_p50_ms": statistics.median(joins) * 1000, "join_max_ms": max(joins) * 1000,
                "crash_p50_ms": statistics.median(crashes) * 1000, "crash_max_ms": max(crashes) * 1000,
                "claim_conflicts": counts["claim_conflicts"], "failed_attempts": counts["failed_attempts"],
                "failed_rebalances": counts["failed_rebalances"], "cpu_ms": cpu}
    finally:
        for h in range(max(processes, 1)):
            with contextlib.suppress(Exception):
                call(h, "close")
        for host in hosts or []:
            host.proc.join(30)
        client.stop()
        client.close()


def measure_floor(zk_root: str, repeats: int = 50) -> dict[str, float]:
    """ZooKeeper's own latencies on this machine, idle, from one client, p50 in ms: a synchronous get, a create
    (ephemeral), a multi-op of 4 creates, and the shortest chain a rebalance can be: a change made by a second
    session reaches our watch, then a listing, a multi-op delete of 4 owner nodes and a multi-op create of 4."""
    zk = f"{zk_root}/floor-{uuid.uuid4().hex[:6]}"
    a, b = connect(zk), connect(zk)
    out: dict[str, list[float]] = {"get": [], "create": [], "multi of 4 creates": [], "rebalance chain": []}
    try:
        a.ensure_path("/ids")
        a.ensure_path("/owners")
        for i in range(repeats):
            t0 = time.perf_counter()
            a.get("/ids")
            out["get"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            a.create(f"/owners/x{i}", b"x", ephemeral=True)
            out["create"].append(time.perf_counter() - t0)
            txn = a.transaction()
            for p in range(4):
                txn.create(f"/owners/{i}-{p}", b"x", ephemeral=True)
            t0 = time.perf_counter()
            txn.commit()
            out["multi of 4 creates"].append(time.perf_counter() - t0)
            fired = threading.Event()
            a.get_children("/ids", watch=lambda event, fired=fired: fired.set())
            t0 = time.perf_counter()
            b.create(f"/ids/m{i}", b"", ephemeral=True)
            fired.wait(5)
            a.get_children("/ids", include_data=True)
            txn = a.transaction()
            for p in range(4):
                txn.delete(f"/owners/{i}-{p}")
            txn.commit()
            txn = a.transaction()
            for p in range(4):
                txn.create(f"/owners/{i}-{p}", b"y", ephemeral=True)
            txn.commit()
            out["rebalance chain"].append(time.perf_counter() - t0)
    finally:
        for c in (a, b):
            c.stop()
            c.close()
    return {k: statistics.median(v) * 1000 for k, v in out.items()}


def phase_summary(logged: list[tuple[float, float | None, dict[str, int]]], actions: list[float]
                  ) -> dict[str, tuple[float, float]]:
    """Phase → (p50, max) in ms over every consumer rebalance that followed a join or crash (not the cold start).

    ``watch`` is watch delivery: from the benchmark's change (the join call, or ending the victim's session) to
    the consumer's watch callback. For a join it includes the joiner's own start (connect, register).
    """
    values: dict[str, list[float]] = {}
    first = actions[0] if actions else float("inf")
    for start, triggered, phases in logged:
        if start < first:
            continue
        if triggered is not None:
            action = max(a for a in actions if a <= start)
            values.setdefault("watch", []).append(max(0.0, (triggered - action) * 1000))
        for name, ms in phases.items():
            values.setdefault(name, []).append(ms)
    return {name: (statistics.median(v), max(v)) for name, v in values.items() if v}


def warm_up(console, zk: str, zk_pid: int | None, args: argparse.Namespace) -> None:
    """Unmeasured scenarios (every profile, the largest size) until ZooKeeper's JIT compiler threads use under
    5 ms of CPU per rebalance, or ``--warmup`` scenarios have run.

    A fresh JVM compiles ZooKeeper's request paths during its first thousands of requests: measured from a cold
    start, its compiler threads took 100-230 ms of CPU per rebalance on these 2 cores, as much as the consumers
    and ZooKeeper's own request processing together. A production ZooKeeper compiled them long ago.
    """
    size = max(args.sizes)
    for n in range(args.warmup):
        profile = args.profiles[n % len(args.profiles)]
        with console.status(f"warming ZooKeeper up ({profile}, {size} consumers, scenario {n + 1})..."):
            r = run_scenario(zk, profile, size, args.partitions, 3, args.processes, zk_pid)
        cpu = r["cpu_ms"]
        if cpu["zookeeper"] is None:
            console.print("warm-up: no /proc to read ZooKeeper's CPU from; one scenario only", highlight=False)
            return
        console.print(f"warm-up {n + 1}: ZooKeeper CPU {cpu['zookeeper']:.0f} ms per rebalance, "
                      f"{cpu['jit']:.0f} ms of it compiling", highlight=False)
        if cpu["jit"] < 5 and n + 1 >= len(args.profiles):
            return
    if args.warmup:
        console.print(f"warm-up: ZooKeeper still compiling after {args.warmup} scenarios; the figures include it "
                      "(see the JIT column)", highlight=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="joins and crashes per scenario")
    ap.add_argument("--profiles", nargs="+", default=["kafka-0.8", "default"])
    ap.add_argument("--no-floor", dest="floor", action="store_false", help="skip measuring ZooKeeper's own latencies")
    ap.add_argument("--warmup", type=int, default=8, metavar="N",
                    help="at most N unmeasured scenarios first, until ZooKeeper's JIT compiler is quiet (0: none)")
    ap.add_argument("--processes", type=int, default=4,
                    help="consumer host processes (1: all consumers in this process, sharing one GIL)")
    args = ap.parse_args()
    console = make_console()
    results = []
    floor = None
    with ZooKeeperServer(quick_start=False) as server:
        if args.floor:
            measure_floor(server.connect_string, 20)  # warm the JIT first
            floor = measure_floor(server.connect_string)
        zk_pid = server.nodes[0].pid
        warm_up(console, server.connect_string, zk_pid, args)
        for size in args.sizes:
            for profile in args.profiles:
                with console.status(f"{profile}, {size} consumers..."):
                    results.append(run_scenario(server.connect_string, profile, size, args.partitions, args.rounds,
                                                args.processes, zk_pid))
                r = results[-1]
                console.print(f"{profile:9s} {size:3d}: cold {r['cold_s']:.2f}s, join p50 {r['join_p50_ms']:.0f} ms, "
                              f"crash p50 {r['crash_p50_ms']:.0f} ms, conflicts {r['claim_conflicts']}, "
                              f"failed attempts {r['failed_attempts']}, failed rebalances {r['failed_rebalances']}",
                              highlight=False)
    table = Table(title=f"rebalance, {args.partitions} partitions, range, {args.rounds} joins + {args.rounds} crashes")
    for col in ("profile", "consumers", "cold start (s)", "join p50 (ms)", "join max (ms)", "crash p50 (ms)",
                "crash max (ms)", "claim conflicts", "failed attempts", "failed rebalances",
                "consumers' CPU / rebalance (ms)", "ZooKeeper CPU / rebalance (ms)", "of it JIT (ms)"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(r["profile"], str(r["size"]), f"{r['cold_s']:.2f}", f"{r['join_p50_ms']:.0f}",
                      f"{r['join_max_ms']:.0f}", f"{r['crash_p50_ms']:.0f}", f"{r['crash_max_ms']:.0f}",
                      str(r["claim_conflicts"]), str(r["failed_attempts"]), str(r["failed_rebalances"]),
                      *("–" if r["cpu_ms"][k] is None else f"{r['cpu_ms'][k]:.0f}"
                        for k in ("consumers", "zookeeper", "jit")))
    console.print(table)
    phases = Table(title="where the time goes: ms per consumer rebalance after a join or crash, p50 / max "
                         "(zkconsumer/phases.py; watch = from the change to the consumer's watch callback)")
    names = ["watch", *PHASES]
    for col in ("profile", "consumers", *names):
        phases.add_column(col, justify="right")
    for r in results:
        cells = [f"{r['phases'][n][0]:.0f} / {r['phases'][n][1]:.0f}" if n in r["phases"] else "–" for n in names]
        phases.add_row(r["profile"], str(r["size"]), *cells)
    console.print(phases)
    if floor:
        console.print("ZooKeeper alone (idle, one client, p50): "
                      + ", ".join(f"{k} {v:.1f} ms" for k, v in floor.items()), highlight=False)
    by = {(r["profile"], r["size"]): r for r in results}
    for size in args.sizes:
        if ("kafka-0.8", size) in by and ("default", size) in by:
            a, b = by[("kafka-0.8", size)], by[("default", size)]
            ratio = a["join_p50_ms"] / b["join_p50_ms"]
            console.print(f"{size} consumers: default vs kafka-0.8 — join p50 {ratio:.1f}x "
                          f"faster, crash p50 {a['crash_p50_ms'] / b['crash_p50_ms']:.1f}x faster, cold start "
                          f"{a['cold_s'] / b['cold_s']:.1f}x faster", highlight=False)


if __name__ == "__main__":
    main()
