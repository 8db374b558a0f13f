"""Rebalance speed: Kafka 0.8.2.2's own consumer, its reproduction (profile kafka-0.8) and zkconsumer's default.

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
consumer's rebalance spent its time (zkconsumer/consumer/zookeeper/phases.py), the ZooKeeper round trip measured
alone (--floor), and
the CPU one rebalance costs the consumers' processes and ZooKeeper (with the part ZooKeeper's JIT compiler took).
Unmeasured scenarios run first until that compiler is quiet (--warmup), as in a ZooKeeper that has been serving.
Each join and crash starts on a quiet group: after the previous one converged, the benchmark waits until the
consumers and ZooKeeper are idle again (the default profile sets its owner watches 300 ms after a claim; charged to
the next action, they had slowed it). Its CPU is read when it converged and once all is quiet again, and in
zkconsumer's hosts split into the rebalance threads, kazoo's connection threads and the rest. A CPU-bound rebalance
cannot beat the CPU until convergence over the cores by much (read 30-40 ms after convergence, it runs a little
high).

The third row, ``kafka-0.8.2.2``, is the oracle: Apache Kafka 0.8.2.2's own ``ZookeeperConsumerConnector`` from its
published jars (zkconsumer/apache_kafka), several members per JVM, one JVM per host process, the same placement,
settings, scenarios and convergence measure; its JVMs run an unmeasured cold start, joins and crashes first
(--kafka-warmup) so that their JIT has compiled Kafka's rebalance before anything is measured. Its attempts,
failed attempts, claim conflicts and failed rebalances are counted from its own log (INFO). The output ends with
the ratios against it and the answer: is the kafka-0.8 profile's timing Kafka's?
Run: .venv/bin/python benchmarks/rebalance.py [--sizes 10 50] [--rounds 5] [--implementations ...]
This file is the command line; the parts are in benchmarks/rebalancing/ (its __init__ says which does what).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rebalancing.convergence import measure_floor
from rebalancing.report import report, run_line
from rebalancing.scenario import partitions_for, processes_for, run_scenario, warm_up
from rebalancing.tree import IMPLEMENTATIONS, KAFKA
from records import write_record

from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.zk.server import ZooKeeperServer


def parse_args() -> tuple[argparse.Namespace, dict[str, int]]:
    """The command line, and ``--max-size`` as implementation → the largest group it runs."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--partitions", type=int, default=200, help="partitions of the topic (default 200)")
    ap.add_argument("--partitions-per-consumer", type=int, metavar="K",
                    help="instead: K partitions per consumer of each size (2: a join at 200 consumers moves some)")
    ap.add_argument("--rounds", type=int, default=5, help="joins and crashes per scenario")
    ap.add_argument("--implementations", "--profiles", dest="implementations", nargs="+", choices=IMPLEMENTATIONS,
                    default=list(IMPLEMENTATIONS),
                    help=f"what to measure: zkconsumer's profiles and {KAFKA}, Apache Kafka's own consumer")
    ap.add_argument("--no-floor", dest="floor", action="store_false", help="skip measuring ZooKeeper's own latencies")
    ap.add_argument("--warmup", type=int, default=8, metavar="N",
                    help="at most N unmeasured scenarios first, until ZooKeeper's JIT compiler is quiet (0: none)")
    ap.add_argument("--kafka-warmup", type=int, default=150, metavar="N",
                    help=f"{KAFKA}: its JVMs first run an unmeasured cold start, then joins and crashes until their "
                         "JIT is quiet, at most N of them (0: no warm-up)")
    ap.add_argument("--kafka-logs", type=Path, metavar="DIR",
                    help=f"keep the logs of {KAFKA}'s JVMs under DIR (default: deleted)")
    ap.add_argument("--plot", type=Path, metavar="PNG",
                    help="draw ZooKeeper requests and convergence time against the group size (log-log)")
    ap.add_argument("--processes", type=int, default=4,
                    help="consumer host processes (1: all consumers in this process, sharing one GIL); "
                         f"{KAFKA}: as many JVMs")
    ap.add_argument("--consumers-per-process", type=int, metavar="K",
                    help="instead of --processes: one host process per K consumers of each size (25: 8 processes "
                         "at 200 consumers, 20 at 500)")
    ap.add_argument("--max-size", action="append", default=[], metavar="IMPLEMENTATION=N",
                    help="run IMPLEMENTATION only up to N consumers (kafka-0.8=200: its quadratic reads make 500 "
                         "take tens of minutes); repeatable")
    ap.add_argument("--record", type=Path, metavar="JSON", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    try:
        largest = {impl: int(n) for impl, n in (item.split("=", 1) for item in args.max_size)}
    except ValueError:
        ap.error("--max-size takes IMPLEMENTATION=N, e.g. kafka-0.8=200")
    if args.consumers_per_process is not None and args.consumers_per_process < 1:
        ap.error("--consumers-per-process must be at least 1")
    if unknown := sorted(set(largest) - set(IMPLEMENTATIONS)):
        ap.error(f"--max-size: unknown implementation {unknown[0]} (one of {', '.join(IMPLEMENTATIONS)})")
    return args, largest


def main() -> None:
    args, largest = parse_args()
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
            for implementation in args.implementations:
                if size > largest.get(implementation, size):
                    console.print(f"{implementation:13s} {size:3d}: not run (--max-size {implementation}="
                                  f"{largest[implementation]})", highlight=False)
                    continue
                with console.status(f"{implementation}, {size} consumers..."):
                    results.append(run_scenario(server.connect_string, implementation, size, partitions_for(args, size),
                                                args.rounds, processes_for(args, size), zk_pid, args.kafka_warmup,
                                                args.kafka_logs))
                console.print(run_line(results[-1]), highlight=False)
    report(console, results, args, floor)
    if args.record:
        chain = (floor or {}).get("rebalance chain")
        vs_floor = [{"profile": r["profile"], "consumers": r["size"], "p50_ms": round(r["join_p50_ms"], 1),
                     "ratio": round(r["join_p50_ms"] / chain, 2)}
                    for r in results if chain and r.get("join_p50_ms") is not None]
        write_record(args.record, vars(args),
                     {"floor_ms": floor, "runs": results, "rebalance_vs_floor": vs_floor}, Scope.LAB)


if __name__ == "__main__":
    main()
