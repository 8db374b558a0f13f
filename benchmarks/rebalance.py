"""Rebalance speed: Kafka 0.8's timing (profile kafka-0.8) against zkconsumer's default, in the same run.

One real ZooKeeper, one topic of 200 partitions, groups of 10 and 50 consumers (in this process, fetching
disabled: this measures coordination, not records). For each profile and size it measures

* cold start: every consumer started at the same moment, until the group owns every partition as the
  assignor says (read back from ZooKeeper);
* join: one more consumer joins, until the new assignment is fully owned;
* crash: one consumer's session ends without a shutdown (its ephemeral nodes vanish, as after kill -9 once
  the session timed out), until the survivors own everything;

and counts failed claim attempts (claim conflicts), failed attempts and failed rebalances.
Run: .venv/bin/python benchmarks/rebalance.py [--sizes 10 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import time
import uuid
from collections import Counter

from rich.console import Console
from rich.table import Table

from zkconsumer.assignors import AssignmentContext, assign
from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector
from zkconsumer.groups import verify
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


def converged(consumers: dict[str, ZookeeperConsumerConnector], expected: dict) -> bool:
    owned = {}
    for c in consumers.values():
        if c.rebalancer.busy:
            return False
        owned.update({(tp.topic, tp.partition): tid for tp, tid in c.owned_partitions().items()})
    return owned == expected


def wait_converged(consumers, expected, reg: Registry, timeout: float = 120.0) -> float:
    """Seconds until every consumer holds its share in memory (claims succeeded), then checked in ZooKeeper."""
    t0 = time.monotonic()
    while not converged(consumers, expected):
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the group did not converge")
        time.sleep(0.01)
    elapsed = time.monotonic() - t0
    assert reg.owners(GROUP) == expected, "in-memory ownership disagrees with ZooKeeper"
    assert verify(reg, GROUP).ok
    return elapsed


def stats_of(consumers) -> Counter:
    total: Counter = Counter()
    for c in consumers:
        total.update(c.rebalancer.stats)
    return total


def run_scenario(zk_root: str, profile: str, size: int, partitions: int, rounds: int) -> dict:
    zk = f"{zk_root}/{profile.replace('.', '')}-{size}-{uuid.uuid4().hex[:6]}"
    client = connect(zk)
    reg = Registry(client)
    create_topic(reg, TOPIC, partitions)
    names = [f"c{i:03d}" for i in range(size)]
    consumers: dict[str, ZookeeperConsumerConnector] = {}
    gone: list[ZookeeperConsumerConnector] = []
    try:
        for n in names:
            consumers[n] = new_consumer(zk, n, profile)
        barrier = threading.Barrier(size + 1)

        def start(c) -> None:
            barrier.wait()
            with contextlib.suppress(Exception):  # counted through the stats
                c.create_message_streams({TOPIC: 1})

        threads = [threading.Thread(target=start, args=(c,)) for c in consumers.values()]
        for t in threads:
            t.start()
        barrier.wait()
        t0 = time.monotonic()
        wait_converged(consumers, expected_owners(names, partitions), reg)
        cold = time.monotonic() - t0
        for t in threads:
            t.join()
        joins, crashes = [], []
        for r in range(rounds):
            name = f"j{r:03d}"
            c = new_consumer(zk, name, profile)
            t0 = time.monotonic()
            c.create_message_streams({TOPIC: 1})
            consumers[name] = c
            joins.append(time.monotonic() - t0 + wait_converged(consumers, expected_owners(list(consumers),
                                                                                           partitions), reg))
            victim = sorted(consumers)[r % len(consumers)]
            c = consumers.pop(victim)
            c.rebalancer.stop()
            t0 = time.monotonic()
            c.zk.stop()  # the session ends: its registration and owner nodes vanish at once
            gone.append(c)
            crashes.append(wait_converged(consumers, expected_owners(list(consumers), partitions), reg))
        counts = stats_of(list(consumers.values()) + gone)
        return {"profile": profile, "size": size, "cold_s": cold,
                "join_p50_ms": statistics.median(joins) * 1000, "join_max_ms": max(joins) * 1000,
                "crash_p50_ms": statistics.median(crashes) * 1000, "crash_max_ms": max(crashes) * 1000,
                "claim_conflicts": counts["claim_conflicts"], "failed_attempts": counts["failed_attempts"],
                "failed_rebalances": counts["failed_rebalances"]}
    finally:
        for c in list(consumers.values()) + gone:
            with contextlib.suppress(Exception):
                c.shutdown()
        client.stop()
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5, help="joins and crashes per scenario")
    ap.add_argument("--profiles", nargs="+", default=["kafka-0.8", "default"])
    args = ap.parse_args()
    console = Console()
    results = []
    with ZooKeeperServer() as server:
        for size in args.sizes:
            for profile in args.profiles:
                with console.status(f"{profile}, {size} consumers..."):
                    results.append(run_scenario(server.connect_string, profile, size, args.partitions, args.rounds))
                r = results[-1]
                console.print(f"{profile:9s} {size:3d}: cold {r['cold_s']:.2f}s, join p50 {r['join_p50_ms']:.0f} ms, "
                              f"crash p50 {r['crash_p50_ms']:.0f} ms, conflicts {r['claim_conflicts']}, "
                              f"failed attempts {r['failed_attempts']}, failed rebalances {r['failed_rebalances']}",
                              highlight=False)
    table = Table(title=f"rebalance, {args.partitions} partitions, range, {args.rounds} joins + {args.rounds} crashes")
    for col in ("profile", "consumers", "cold start (s)", "join p50 (ms)", "join max (ms)", "crash p50 (ms)",
                "crash max (ms)", "claim conflicts", "failed attempts", "failed rebalances"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(r["profile"], str(r["size"]), f"{r['cold_s']:.2f}", f"{r['join_p50_ms']:.0f}",
                      f"{r['join_max_ms']:.0f}", f"{r['crash_p50_ms']:.0f}", f"{r['crash_max_ms']:.0f}",
                      str(r["claim_conflicts"]), str(r["failed_attempts"]), str(r["failed_rebalances"]))
    console.print(table)
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
