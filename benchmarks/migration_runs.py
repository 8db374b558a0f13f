"""Live migration, run after run: how often the lab's migration passes, per group coordinator.

Issue 20 asks for "10 runs out of 10 against zkconsumer's broker and against Kafka's coordinator". One run is
``zkconsumer lab --mode migrate --consumers 4`` (the default migrate schedule: a fifth member joins at 10 %, the
migration starts at 25 %, ``kill -9`` of c1 at 80 % of the duration). It passes when its summary.json says
``migration`` "done", ``lost`` 0, ``verify_ok`` true, and the lab exited 0. Targets: ``zkconsumer`` (the lab starts
its own ZooKeeper and zkconsumer's broker) and ``kafka-<version>`` (Apache Kafka's own broker in ZooKeeper mode, its
GroupCoordinator, with Kafka's 3 s initial rebalance delay: one shared real ZooKeeper, a fresh chroot and broker per
run); ``kafka-<version>x3`` runs three such brokers (issue 22: the 3-broker run). Every run keeps its directory
(summary.json, logs/, traces/, lab.out, kafka-*/server.log) until the next invocation with the same --out.
Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/migration_runs.py --runs 10 --duration 40 [--record FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from records import write_record
from rich.table import Table

from zkconsumer.apache_kafka.processes import KafkaBroker
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import ZooKeeperServer, running_zookeeper

CONSUMERS = 4


@dataclass
class Run:
    target: str
    index: int
    directory: str
    exit_code: int | None
    passed: bool
    lost: int | None
    duplicates: int | None
    join_stalls: int | None
    failed_rebalances: int | None
    migration: str
    seconds: float


def lab_command(out: Path, duration: float, zookeeper: str | None, bootstrap: str | None) -> list[str]:
    cmd = [sys.executable, "-m", "zkconsumer", "lab", "--mode", "migrate", "--consumers", str(CONSUMERS),
           "--duration", str(duration), "--out", str(out)]
    if zookeeper:
        cmd += ["--zookeeper", zookeeper, "--bootstrap-server", bootstrap or ""]
    return cmd


@contextlib.contextmanager
def kafka_cluster(zk: ZooKeeperServer, target: str, index: int, out: Path) -> Iterator[tuple[str, str]]:
    """A fresh chroot and a fresh Kafka cluster registered in it: (zookeeper, bootstrap). ``target`` is
    ``<version>`` (one broker) or ``<version>x<n>`` (``3.9.1x3``: three brokers; ``__consumer_offsets`` replicated
    on all three, so the group's coordinator is whichever broker leads its partition)."""
    version, _, count = target.partition("x")
    brokers = int(count or 1)
    chroot = f"/mr{index}-{target}"
    with Registry.open(zk.connect_string) as reg:
        reg.zk.ensure_path(chroot)
    zk_connect = zk.connect_string + chroot
    properties = {"group.initial.rebalance.delay.ms": 3000, "offsets.topic.replication.factor": brokers,
                  "transaction.state.log.replication.factor": brokers}
    with contextlib.ExitStack() as stack:
        started = [stack.enter_context(KafkaBroker(zk_connect, broker_id=i, version=version,
                                                   data_dir=out / f"kafka-{i}", properties=properties))
                   for i in range(brokers)]
        yield zk_connect, ",".join(b.bootstrap for b in started)


def run_once(target: str, index: int, out: Path, duration: float, zk: ZooKeeperServer | None) -> Run:
    shutil.rmtree(out, ignore_errors=True)  # a previous invocation's summary.json or Kafka log dirs
    out.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        zookeeper = bootstrap = None
        if target.startswith("kafka-"):
            assert zk is not None
            zookeeper, bootstrap = stack.enter_context(kafka_cluster(zk, target[len("kafka-"):], index, out))
        started = time.monotonic()
        with open(out / "lab.out", "wb") as log:
            try:
                code: int | None = subprocess.run(lab_command(out, duration, zookeeper, bootstrap), stdout=log,
                                                  stderr=subprocess.STDOUT, timeout=duration + 600).returncode
            except subprocess.TimeoutExpired:
                code = None
        seconds = time.monotonic() - started
    path = out / "summary.json"
    s = json.loads(path.read_text()) if path.exists() else {}
    migration = s.get("migration") or ("no summary.json" if not s else "no migration in summary")
    passed = code == 0 and migration == "done" and s.get("lost") == 0 and s.get("verify_ok") is True
    return Run(target, index, str(out), code, passed, s.get("lost"), s.get("duplicates"), s.get("join_stalls"),
               s.get("failed_rebalances"), migration, round(seconds, 1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per target")
    ap.add_argument("--targets", nargs="+", default=["zkconsumer", "kafka-3.9.1"],
                    help="zkconsumer (its own broker) and/or kafka-<version> (Apache Kafka's broker)")
    ap.add_argument("--duration", type=float, default=40.0, help="seconds of churn per run")
    ap.add_argument("--out", type=Path, default=Path("/tmp/migration-runs"))
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    if bad := [t for t in args.targets if t != "zkconsumer" and not t.startswith("kafka-")]:
        ap.error(f"unknown target(s) {bad}: zkconsumer or kafka-<version>")
    console = make_console()
    results: dict[str, list[Run]] = {t: [] for t in args.targets}
    with contextlib.ExitStack() as stack:
        zk = None
        if any(t.startswith("kafka-") for t in args.targets):
            zk = stack.enter_context(running_zookeeper())
        for target in args.targets:
            for i in range(1, args.runs + 1):
                with console.status(f"{target}: run {i}/{args.runs}..."):
                    run = run_once(target, i, args.out / target / f"run-{i:02d}", args.duration, zk)
                results[target].append(run)
                verdict = "[green]pass[/]" if run.passed else "[red]FAIL[/]"
                console.print(f"{target} run {i}/{args.runs}: {verdict} in {run.seconds:.0f} s, exit "
                              f"{run.exit_code}, lost {run.lost}, duplicates {run.duplicates}, join stalls "
                              f"{run.join_stalls}, failed rebalances {run.failed_rebalances}, migration "
                              f"{run.migration!r}  {run.directory}", highlight=False)
    (args.out / "results.json").write_text(json.dumps({t: [asdict(r) for r in rs] for t, rs in results.items()},
                                                      indent=2))

    table = Table(title=f"lab --mode migrate --consumers {CONSUMERS} --duration {args.duration:g}: "
                        f"{args.runs} run(s) per target")
    for col in ("target", "passed", "lost (total)", "duplicates (median)", "join stalls (total)",
                "failed rebalances (total)", "failed runs"):
        table.add_column(col, justify="left" if col in ("target", "failed runs") else "right")
    for target, runs in results.items():
        failed = "; ".join(f"run {r.index} (exit {r.exit_code}): {r.migration}" for r in runs if not r.passed)
        table.add_row(target, f"{sum(r.passed for r in runs)}/{len(runs)}",
                      str(sum(r.lost or 0 for r in runs)),
                      f"{statistics.median(r.duplicates or 0 for r in runs):g}",
                      str(sum(r.join_stalls or 0 for r in runs)),
                      str(sum(r.failed_rebalances or 0 for r in runs)), failed or "-")
    console.print(table)
    if args.record:
        rows = [{"target": target, "runs": len(runs), "passed": sum(r.passed for r in runs),
                 "lost_total": sum(r.lost or 0 for r in runs),
                 "duplicates_p50": statistics.median(r.duplicates or 0 for r in runs),
                 "join_stalls_total": sum(r.join_stalls or 0 for r in runs),
                 "failed_rebalances_total": sum(r.failed_rebalances or 0 for r in runs),
                 "failed_runs": [{"index": r.index, "exit_code": r.exit_code, "migration": r.migration}
                                 for r in runs if not r.passed],
                 "run_results": [{k: v for k, v in asdict(r).items() if k != "target"} for r in runs]}
                for target, runs in results.items()]
        write_record(args.record, vars(args),
                     {"consumers": CONSUMERS, "rows": rows}, Scope.LAB)
    return 0 if all(r.passed for runs in results.values() for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
