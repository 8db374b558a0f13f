"""One scenario (cold start, then joins and crashes on a quiet group) for one implementation and size, and the
unmeasured ones that warm ZooKeeper up first."""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections import Counter
from pathlib import Path

from rebalancing.convergence import wait_converged, zk_packets
from rebalancing.cpu import cpu_delta, cpu_mean, cpu_sample, settle
from rebalancing.members import KafkaGroup, ZkconsumerGroup
from rebalancing.tree import KAFKA, expected_owners, moved, prepare_tree
from zkconsumer.zk.registry import Registry, connect


def run_scenario(zk_root: str, implementation: str, size: int, partitions: int, rounds: int, processes: int,
                 zk_pid: int | None = None, kafka_warmup: int = 150, kafka_logs: Path | None = None) -> dict:
    zk = f"{zk_root}/{implementation.replace('.', '')}-{size}-{uuid.uuid4().hex[:6]}"
    client = connect(zk)
    reg = Registry(client)
    prepare_tree(reg, partitions)
    names = [f"c{i:03d}" for i in range(size)]
    placement = {n: i % max(processes, 1) for i, n in enumerate(names)}
    group: ZkconsumerGroup | KafkaGroup
    if implementation == KAFKA:
        group = KafkaGroup(zk, processes, reg, partitions, kafka_warmup,
                           None if kafka_logs is None else kafka_logs / zk.rsplit("/", 1)[1])
    else:
        group = ZkconsumerGroup(zk, implementation, processes)
    hosts = group.host_count
    try:
        group.prepare(placement)
        at = time.time() + 1.0
        group.start_at(placement, at)
        time.sleep(max(0.0, at - time.time()))
        members = list(names)
        cold = wait_converged(expected_owners(members, partitions), reg, since=at)
        group.started()
        joins, crashes = [], []
        actions: list[float] = []  # monotonic (system-wide on Linux, so comparable across host processes)
        host_pids = group.pids()
        quiet_pids = host_pids + ([zk_pid] if zk_pid else [])
        settle(quiet_pids, time.monotonic())
        packets_before = zk_packets(zk_root, client.client_id[0])
        spent: dict[str, list[dict[str, float | None]]] = {"join": [], "crash": []}  # CPU per measured action
        settles: list[float] = []

        def measure(action: str, act, expected_after: dict, moves: bool) -> float:
            """Run one join or crash on a quiet group; the CPU it cost, up to when the group is quiet again."""
            before = {**cpu_sample(host_pids, zk_pid), "jit_consumers": group.jit_ms()}
            group.thread_cpu()
            t0 = time.time()
            actions.append(time.monotonic())
            act()
            took = wait_converged(expected_after, reg, since=t0)
            converged = cpu_sample(host_pids, zk_pid)
            settles.append(settle(quiet_pids, time.monotonic()))
            after = {**cpu_sample(host_pids, zk_pid), "jit_consumers": group.jit_ms()}
            split = group.thread_cpu()
            used = cpu_delta(before, after)
            used.update({f"{k}_to_converged": v for k, v in cpu_delta(before, converged).items() if k != "jit"})
            used.update({f"consumers_{k}": v for k, v in (split or {}).items()})
            if moves:
                spent[action].append(used)
            return took

        unmoved = Counter()  # joins and crashes after which no partition changed hands: not measured
        for r in range(rounds):
            name = f"j{r:03d}"
            placement[name] = r % hosts
            before = expected_owners(members, partitions)
            after = expected_owners([*members, name], partitions)
            moves = bool(moved(before, after))
            took = measure("join", lambda n=name: group.join(placement[n], n), after, moves)
            members.append(name)
            if moves:
                joins.append(took)
            else:
                unmoved["join"] += 1
            victim = sorted(members)[r % len(members)]
            members.remove(victim)
            before, after = after, expected_owners(members, partitions)
            moves = bool(moved(before, after))
            took = measure("crash", lambda v=victim: group.crash(placement[v], v), after, moves)
            if moves:
                crashes.append(took)
            else:
                unmoved["crash"] += 1
        packets_after = zk_packets(zk_root, client.client_id[0])
        per_action = {action: cpu_mean(samples) for action, samples in spent.items()}
        both = spent["join"] + spent["crash"]
        cpu = cpu_mean(both)
        cpu = {"consumers": cpu.get("consumers"), "zookeeper": cpu.get("zookeeper"), "jit": cpu.get("jit"),
               "consumers_jit": cpu.get("jit_consumers")}
        counts, logged = group.results()
        return {"phases": phase_summary(logged, actions), "profile": implementation, "size": size, "cold_s": cold,
                "partitions": partitions, "unmoved": dict(unmoved),
                "join_p50_ms": p50_ms(joins), "join_max_ms": max_ms(joins),
                "crash_p50_ms": p50_ms(crashes), "crash_max_ms": max_ms(crashes),
                "attempts": counts["attempts"], "claim_conflicts": counts["claim_conflicts"],
                "failed_attempts": counts["failed_attempts"], "failed_rebalances": counts["failed_rebalances"],
                "zk_requests": None if packets_before is None or packets_after is None
                else (packets_after - packets_before) / (2 * rounds),
                "cpu_ms": cpu, "cpu_join_ms": per_action["join"], "cpu_crash_ms": per_action["crash"],
                "settle_s": statistics.median(settles) if settles else None,
                "joins_ms": [j * 1000 for j in joins], "crashes_ms": [c * 1000 for c in crashes],
                "warm_jit_ms": getattr(group, "warm_jit_ms", None), "warm_pairs": getattr(group, "warm_pairs", 0),
                "warm_jit_last": getattr(group, "warm_jit_last", None)}
    finally:
        group.close()
        client.stop()
        client.close()


def p50_ms(seconds: list[float]) -> float | None:
    return statistics.median(seconds) * 1000 if seconds else None


def max_ms(seconds: list[float]) -> float | None:
    return max(seconds) * 1000 if seconds else None


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
    """Unmeasured scenarios (every profile measured, the largest size up to 200) until ZooKeeper's JIT compiler
    threads use under 5 ms of CPU per rebalance, or ``--warmup`` scenarios have run. Kafka's own consumer warms
    ZooKeeper only when it is measured alone (its rows warm their own JVMs first, which serves ZooKeeper's compiler
    too).

    A fresh JVM compiles ZooKeeper's request paths during its first thousands of requests: measured from a cold
    start, its compiler threads took 100-230 ms of CPU per rebalance on these 2 cores, as much as the consumers
    and ZooKeeper's own request processing together. A production ZooKeeper compiled them long ago.
    """
    size = min(max(args.sizes), 200)  # enough requests to compile ZooKeeper's paths; kafka-0.8 at 500 takes minutes
    cycle = [i for i in args.implementations if i != KAFKA] or [KAFKA]
    for n in range(args.warmup):
        implementation = cycle[n % len(cycle)]
        with console.status(f"warming ZooKeeper up ({implementation}, {size} consumers, scenario {n + 1})..."):
            r = run_scenario(zk, implementation, size, partitions_for(args, size), 3, processes_for(args, size), zk_pid,
                             kafka_warmup=0)
        cpu = r["cpu_ms"]
        if cpu["zookeeper"] is None:
            console.print("warm-up: no /proc to read ZooKeeper's CPU from; one scenario only", highlight=False)
            return
        console.print(f"warm-up {n + 1} ({implementation}): ZooKeeper CPU {cpu['zookeeper']:.0f} ms per rebalance, "
                      f"{cpu['jit']:.0f} ms of it compiling", highlight=False)
        if cpu["jit"] < 5 and n + 1 >= len(cycle):
            return
    if args.warmup:
        console.print(f"warm-up: ZooKeeper still compiling after {args.warmup} scenarios; the figures include it "
                      "(see the JIT column)", highlight=False)


def partitions_for(args: argparse.Namespace, size: int) -> int:
    return args.partitions_per_consumer * size if args.partitions_per_consumer else args.partitions


def processes_for(args: argparse.Namespace, size: int) -> int:
    """Host processes for a group of ``size``: fixed, or one per ``--consumers-per-process`` consumers."""
    if args.consumers_per_process:
        return max(1, -(-size // args.consumers_per_process))
    return args.processes
