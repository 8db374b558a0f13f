"""Mixed groups timed: Kafka 0.8.2.2's own consumers beside zkconsumer members, against groups of one kind.

The churn of tests/test_kafka_mixed_groups.py (six members with two streams each join one by one, two leave
gracefully, two are killed with kill -9) with Kafka's own timing settings (``rebalance.backoff.ms`` 2000, the 0.8.2
default; sessions of 6 s), over one real ZooKeeper and zkconsumer's broker, records flowing. Groups compared in the
same run: all Kafka (the baseline), mixed with each zkconsumer profile, all zkconsumer with each profile. For each
membership change: from the moment the registrations show it (for a kill, the session's expiry) until the owner
nodes are the computed assignment, and the failed rebalance attempts of each kind (Kafka's "Rebalancing attempt
failed" log lines; zkconsumer's traces). Printed: one table per measure and each group's ratio to all-Kafka.

Each join is a race (issue 40, item 4): the joiner claims its share while the members already there release theirs;
a claim that comes first finds nodes still held and costs a failed attempt and a 2 s backoff. The second table
times both sides from the joiner's registration, from each member's own record. "all Kafka 0.8.2.2, warm JVMs"
runs Kafka's members in JVMs that have each run three joins and leaves of a throwaway member first (a new consumer
process is a cold JVM; a connector created in a running application is not): what Kafka's own consumer does when
its join code runs at speed.
Run: .venv/bin/python benchmarks/mixed_groups.py [--rounds 1] [--partitions 10] [--groups 1,4,6] [--record FILE]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kafka import KafkaProducer
from records import write_record
from rich.table import Table

from zkconsumer.apache_kafka.mixed import MixedGroup, Subscription
from zkconsumer.broker import Broker
from zkconsumer.consoles import make_console
from zkconsumer.records import encode_value
from zkconsumer.results.record import Scope
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import running_zookeeper
from zkconsumer.zk.topics import create_topic

KAFKA_TIMING = {"zookeeper.session.timeout.ms": 6000, "rebalance.backoff.ms": 2000, "rebalance.max.retries": 10,
                "auto.commit.enable": "true", "auto.commit.interval.ms": 1000, "auto.offset.reset": "smallest"}
#: (group name, zkconsumer profile, kinds of m1..m6, warm-up rounds of each Kafka JVM): the mixed groups alternate
#: kinds, as the test does
GROUPS = [
    ("all Kafka 0.8.2.2", None, "kkkkkk", 0),
    ("mixed, kafka-0.8", "kafka-0.8", "kzkzkz", 0),
    ("mixed, default", "default", "kzkzkz", 0),
    ("all zkconsumer, kafka-0.8", "kafka-0.8", "zzzzzz", 0),
    ("all zkconsumer, default", "default", "zzzzzz", 0),
    ("all Kafka 0.8.2.2, warm JVMs", None, "kkkkkk", 3),
]
WARM_UP = 3
KINDS = {"k": "kafka", "z": "zkconsumer"}
#: the churn: (action, member index); in the mixed groups m1 m3 m5 are Kafka's and m2 m4 m6 ours
CHURN = [("start", 0), ("start", 1), ("start", 2), ("start", 3), ("start", 4), ("start", 5),
         ("leave", 1), ("leave", 0), ("kill", 2), ("kill", 3)]


def producer_loop(bootstrap: str, topic: str, partitions: int, stop: threading.Event, rate: float = 200.0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    seq = 0
    while not stop.wait(1.0 / rate):
        p = seq % partitions
        producer.send(topic, value=encode_value(topic, p, seq), partition=p)
        seq += 1
    producer.flush()
    producer.close()


def run_group(zk_root: str, name: str, profile: str | None, kinds: str, warm_up: int, partitions: int,
              work: Path) -> tuple[list, list, list[int]]:
    """One churn: per step (its result, the failed attempts so far), per start step the join's race (ms to the
    joiner's first claim, ms to the holders' last release), and the Kafka JVMs' warm-up rounds (ms)."""
    zk = f"{zk_root}/{name.replace(' ', '_').replace(',', '').replace('.', '')}-{int(time.time() * 1000)}"
    with Registry.open(zk_root) as reg:
        reg.zk.ensure_path(zk[len(zk_root):])
    broker = Broker(zk, data_dir=work / "broker").start()
    stop = threading.Event()
    try:
        with Registry.open(zk) as reg:
            create_topic(reg, "t", partitions)
        feeder = threading.Thread(target=producer_loop, args=(broker.bootstrap, "t", partitions, stop), daemon=True)
        feeder.start()
        sub = Subscription({"t": partitions}, streams=2)
        with MixedGroup(zk, "g", sub, "range", profile or "default", work, KAFKA_TIMING, warm_up) as group:
            names = []
            for i, kind in enumerate(kinds):
                n = f"{kind}{i + 1}"
                (group.kafka if kind == "k" else group.zkconsumer)(n)
                names.append(n)
            for action, i in CHURN:
                group.step(action, names[i], timeout=120)
            failed = group.failed_attempts()
            if group.offsets.backwards:
                raise AssertionError(f"{name}: committed offsets went backwards: {group.offsets.backwards}")
            races = [group.join_race(names[i], names[:i]) for action, i in CHURN if action == "start"]
            warm = [ms for n in names if n.startswith("k") for ms in group.members[n].warm_up_ms()]
            return [(s, failed) for s in group.steps], races, warm
    finally:
        stop.set()
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="churns per group (figures are medians over rounds)")
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--groups", default=",".join(str(i + 1) for i in range(len(GROUPS))),
                    help="which groups, by number (default all): " +
                         "; ".join(f"{i + 1} {g[0]}" for i, g in enumerate(GROUPS)) + "; the first is the baseline")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    groups = [GROUPS[int(i) - 1] for i in args.groups.split(",")]
    console = make_console()
    results: dict[str, list[list]] = {}
    races: dict[str, list[list]] = {}
    warm: dict[str, list[int]] = {}
    with running_zookeeper(quick_start=False) as zk:
        for r in range(args.rounds):
            for name, profile, kinds, warm_up in groups:
                with console.status(f"round {r + 1}/{args.rounds}: {name}..."):
                    t0 = time.monotonic()
                    steps, race, rounds = run_group(zk.connect_string, name, profile, kinds, warm_up,
                                                    args.partitions,
                                                    Path(tempfile.mkdtemp(prefix="zkconsumer-mixed-")))
                results.setdefault(name, []).append(steps)
                races.setdefault(name, []).append(race)
                warm.setdefault(name, []).extend(rounds)
                failed = steps[-1][1]
                console.print(f"{name}: churn in {time.monotonic() - t0:.1f} s, failed attempts "
                              f"Kafka {failed['kafka']}, zkconsumer {failed['zkconsumer']}", highlight=False)

    table = Table(title=f"ms from the registrations showing a change to the computed assignment fully owned "
                        f"(range, {args.partitions} partitions, 2 streams, rebalance.backoff.ms 2000; median of "
                        f"{args.rounds} round(s))")
    table.add_column("step")
    for name, *_ in groups:
        table.add_column(name, justify="right")
    base = groups[0][0]
    rows: dict[str, dict[str, Any]] = {name: {"group": name, "profile": profile, "kinds": kinds, "steps": []}
                                       for name, profile, kinds, _ in groups}
    for k, (action, i) in enumerate(CHURN):
        cells = []
        for name, _, kinds, _ in groups:
            ms = statistics.median(run[k][0].converged_s * 1000 for run in results[name])
            cells.append(f"{ms:.0f} ({kinds[i]})")
            rows[name]["steps"].append({"step": f"{action} m{i + 1}", "member_kind": KINDS[kinds[i]],
                                        "converged_ms": ms})
        table.add_row(f"{action} m{i + 1}", *cells)
    totals = {name: sum(statistics.median(run[k][0].converged_s for run in results[name]) for k in range(len(CHURN)))
              for name, *_ in groups}
    table.add_row("total (s)", *(f"{totals[name]:.2f}" for name, *_ in groups))
    table.add_row(f"ratio to {base}", *("1.00x" if name == base else
                                       (f"{totals[name] / totals[base]:.2f}x" if totals[base] else "n/a")
                                       for name, *_ in groups))
    table.add_row("failed attempts: Kafka / zkconsumer",
                  *(f"{statistics.median(run[-1][1]['kafka'] for run in results[name]):.0f} / "
                    f"{statistics.median(run[-1][1]['zkconsumer'] for run in results[name]):.0f}"
                    for name, *_ in groups))
    for name, *_ in groups:
        rows[name].update({
            "total_s": totals[name], "ratio_to_baseline": totals[name] / totals[base] if totals[base] else None,
            "failed_attempts_kafka": statistics.median(run[-1][1]["kafka"] for run in results[name]),
            "failed_attempts_zkconsumer": statistics.median(run[-1][1]["zkconsumer"] for run in results[name])})
    console.print(table)
    console.print("(k) / (z): the member that changed is Kafka's / zkconsumer's")
    console.print(race_table(groups, races, rows))
    for name, *_ in groups:
        if warm.get(name):
            rounds = [warm[name][k::WARM_UP] for k in range(WARM_UP)]
            console.print(f"{name}: warm-up rounds, createMessageStreams alone in a group (median ms): " +
                          ", ".join(f"round {k + 1} {statistics.median(r):.0f}" for k, r in enumerate(rounds) if r),
                          highlight=False)
            rows[name]["warm_up_round_ms"] = [statistics.median(r) for r in rounds if r]
    if args.record:
        write_record(args.record, vars(args),
                     {"baseline": base, "rows": list(rows.values())}, Scope.LAB)


def race_table(groups: list, races: dict[str, list[list]], rows: dict[str, dict[str, Any]]) -> Table:
    """Per join m2..m6: the joiner's first claim and the holders' last release, ms after its registration
    (median over rounds); a claim before the release is a conflict. Each group's joins also go to its ``rows``
    entry, for the record."""
    table = Table(title="each join's race, ms after the joiner registered: its first claim / the holders' last "
                        "release (median over rounds; a claim first finds nodes held)")
    table.add_column("join")
    for name, *_ in groups:
        table.add_column(name, justify="right")
    starts = [i for action, i in CHURN if action == "start"]
    for k, i in enumerate(starts):
        if i == 0:
            continue  # the first member joins an empty group: nobody to race
        cells = []
        for name, _, kinds, _ in groups:
            claims = [run[k][0] for run in races[name] if run[k][0] is not None]
            released = [run[k][1] for run in races[name] if run[k][1] is not None]
            cells.append(f"{statistics.median(claims):.0f} / " if claims else "- / ")
            cells[-1] += (f"{statistics.median(released):.0f}" if released else "-") + f" ({kinds[i]})"
            rows[name].setdefault("joins", []).append({
                "join": f"start m{i + 1}", "member_kind": KINDS[kinds[i]],
                "first_claim_ms": statistics.median(claims) if claims else None,
                "last_release_ms": statistics.median(released) if released else None})
        table.add_row(f"start m{i + 1}", *cells)
    return table


if __name__ == "__main__":
    main()
