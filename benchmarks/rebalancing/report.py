"""What the benchmark prints and draws: the per-run lines, the tables, the ratios against Kafka 0.8.2.2's own
consumer with the verdict, and the scaling figure."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from rich.table import Table

from rebalancing.cpu import CORES, floor_ms
from rebalancing.tree import KAFKA
from zkconsumer.consumer.zookeeper.phases import PHASES


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b where both were measured and b is not 0; None otherwise (printed as "–", never a ZeroDivisionError)."""
    return a / b if a is not None and b else None


def fmt(value: float | None, spec: str = ".0f") -> str:
    return "–" if value is None else format(value, spec)


#: How far a measure of the kafka-0.8 profile may lie from Kafka's own (either way) and still count as the same
#: timing: 5 joins and 5 crashes per row on a shared 2-core machine move a p50 by a third between runs.
TOLERANCE = 1.5


def faithfulness(console, by: dict, sizes: list[int]) -> None:
    """The ratios against Kafka 0.8.2.2's own consumer, and the answer: is the kafka-0.8 profile's timing Kafka's?"""
    measures = (("join p50", "join_p50_ms"), ("join max", "join_max_ms"), ("crash p50", "crash_p50_ms"),
                ("crash max", "crash_max_ms"), ("cold start", "cold_s"))
    judged = ("join p50", "crash p50", "cold start")
    verdicts: dict[int, dict[str, float]] = {}  # size → judged measure → kafka-0.8 / Kafka's own
    totals: dict[str, Counter] = {KAFKA: Counter(), "kafka-0.8": Counter()}
    for size in sizes:
        kafka = by.get((KAFKA, size))
        if kafka is None:
            continue
        profile, default = by.get(("kafka-0.8", size)), by.get(("default", size))
        if profile:
            ratios = {label: ratio(profile[key], kafka[key]) for label, key in measures}
            verdicts[size] = {label: ratios[label] for label in judged if ratios[label] is not None}
            cpu, ours, theirs = "", profile["cpu_ms"]["consumers"], kafka["cpu_ms"]["consumers"]
            if ours and theirs:
                cpu = f"; consumers' CPU per rebalance {ours / theirs:.2f}x"
            console.print(f"{size} consumers: kafka-0.8 profile / Kafka 0.8.2.2's own (1.00x = the same time, below 1 "
                          "= the profile is faster) — " + ", ".join(f"{k} {fmt(v, '.2f')}x" for k, v in ratios.items())
                          + cpu,
                          highlight=False)
        if default:
            console.print(f"{size} consumers: default vs Kafka 0.8.2.2's own — " + ", ".join(
                f"{label} {ratio(kafka[key], default[key]):.1f}x faster" for label, key in measures
                if ratio(kafka[key], default[key]) is not None), highlight=False)
        for name, r in ((KAFKA, kafka), ("kafka-0.8", profile), ("default", default)):
            if r:
                if name in totals:
                    totals[name].update({k: r[k] for k in ("attempts", "failed_attempts", "claim_conflicts")})
                console.print(f"    {name:13s} {size:3d}: {r['attempts']} attempts, {r['failed_attempts']} failed "
                              f"(each followed by rebalance.backoff.ms = 2000 ms asleep), {r['claim_conflicts']} claim "
                              f"conflicts, {r['failed_rebalances']} failed rebalances; joins (ms) "
                              + " ".join(f"{v:.0f}" for v in r["joins_ms"]) + ", crashes (ms) "
                              + " ".join(f"{v:.0f}" for v in r["crashes_ms"]), highlight=False)
    if not verdicts:
        return
    console.print(f"Cold start: each of {KAFKA}'s members connects to ZooKeeper within it (the harness builds and "
                  "starts a member in one command); zkconsumer's consumers were connected before it.", highlight=False)

    def within(ratio: float) -> bool:
        return 1 / TOLERANCE <= ratio <= TOLERANCE

    oks = [within(r) for per_size in verdicts.values() for r in per_size.values()]
    answer = "YES" if all(oks) else "NO" if not any(oks) else "PARTLY"
    detail = "; ".join(
        f"{size} consumers: " + ", ".join(f"{label} {r:.2f}x {'(same)' if within(r) else '(differs)'}"
                                          for label, r in per_size.items()) for size, per_size in verdicts.items())
    k, p = totals[KAFKA], totals["kafka-0.8"]
    console.print(f"Is kafka-0.8 a faithful reproduction of Kafka 0.8.2.2's timing? {answer}: the same time means "
                  f"within {TOLERANCE}x either way — {detail}. The mechanism, summed over the sizes (Kafka's own / "
                  f"kafka-0.8): attempts {k['attempts']} / {p['attempts']}, failed attempts (a 2 s sleep each) "
                  f"{k['failed_attempts']} / {p['failed_attempts']}, claim conflicts {k['claim_conflicts']} / "
                  f"{p['claim_conflicts']}.", highlight=False)


def cpu_table(results: list[dict]) -> Table:
    """CPU per join and per crash, until convergence and in all, and where the consumers' share went."""
    table = Table(title="CPU per join and per crash (ms): until the group converged, and in all (until it is quiet "
                        f"again); CPU ÷ cores = CPU until converged / {CORES} cores")
    for col in ("implementation", "consumers", "action", "p50", "CPU ÷ cores", "consumers, to converged",
                "ZooKeeper, to converged", "consumers, in all", "rebalance threads", "connection threads", "other",
                "ZooKeeper, in all"):
        table.add_column(col, justify="right")
    for r in results:
        for action in ("join", "crash"):
            cpu = r[f"cpu_{action}_ms"]

            def cell(key: str, cpu=cpu) -> str:
                return "–" if cpu.get(key) is None else f"{cpu[key]:.0f}"
            table.add_row(r["profile"], str(r["size"]), action, fmt(r[f"{action}_p50_ms"]), fmt(floor_ms(cpu)),
                          cell("consumers_to_converged"), cell("zookeeper_to_converged"), cell("consumers"),
                          cell("consumers_rebalance"), cell("consumers_connection"), cell("consumers_other"),
                          cell("zookeeper"))
    return table


def plot_scaling(results: list[dict], path: Path, floor: dict[str, float] | None = None) -> Path:
    """ZooKeeper requests per rebalance and convergence time against the group's size, one line per
    implementation, log-log: a line of slope 1 grows linearly, of slope 2 quadratically (the references drawn).

    Beside the convergence, two floors measured in the same run: ZooKeeper's own (the shortest rebalance chain,
    idle, one client) and, per implementation, the CPU a rebalance cost (consumers and ZooKeeper) spread over
    this machine's cores: no convergence can be shorter, so where a line meets it the group is CPU-bound."""
    from zkconsumer.analysis import plots  # matplotlib with the Agg backend

    plt = plots.plt
    fig, (req, lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for implementation in dict.fromkeys(r["profile"] for r in results):
        rows = sorted((r for r in results if r["profile"] == implementation), key=lambda r: r["size"])
        sizes = [r["size"] for r in rows]
        if any(r["zk_requests"] is not None for r in rows):
            req.plot(sizes, [r["zk_requests"] for r in rows], marker="o", label=implementation)
        lat.plot(sizes, [r["crash_p50_ms"] for r in rows], marker="o", label=f"{implementation}, crash p50")
        lat.plot(sizes, [r["join_p50_ms"] for r in rows], marker="s", linestyle="--",
                 label=f"{implementation}, join p50")
        cpu = [(r["size"], floor_ms(r["cpu_crash_ms"])) for r in rows if floor_ms(r["cpu_crash_ms"]) is not None]
        if cpu:
            lat.plot(*zip(*cpu, strict=True), linestyle=":", color=lat.lines[-2].get_color(),
                     label=f"{implementation}: CPU until a crash converged ÷ {CORES} cores")
    sizes = sorted({r["size"] for r in results})
    base = [r for r in results if r["size"] == sizes[0] and r["zk_requests"]]
    if base and len(sizes) > 1:
        y0 = min(r["zk_requests"] for r in base)
        req.plot(sizes, [y0 * s / sizes[0] for s in sizes], color="grey", linestyle=":", label="linear (slope 1)")
        req.plot(sizes, [y0 * (s / sizes[0]) ** 2 for s in sizes], color="black", linestyle=":",
                 label="quadratic (slope 2)")
    if floor and "rebalance chain" in floor and len(sizes) > 1:
        lat.plot([sizes[0], sizes[-1]], [floor["rebalance chain"]] * 2, color="black", linestyle="-.",
                 label=f"ZooKeeper alone: the shortest rebalance chain ({floor['rebalance chain']:.1f} ms)")
    for ax, title in ((req, "ZooKeeper requests per join or crash"), (lat, "convergence after a join or crash (ms)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("consumers in the group")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
    return plots._save(fig, path)


def run_line(r: dict) -> str:
    """The line printed as each measured scenario ends."""
    jit = ""
    if r["cpu_ms"]["consumers_jit"] is not None:
        jit = f", JVMs' JIT {r['cpu_ms']['consumers_jit']:.0f} ms per rebalance"
        if r["warm_jit_ms"] is not None:
            jit += (f" (warm-up: cold start + {r['warm_pairs']} joins and crashes, {r['warm_jit_ms']:.0f} "
                    f"ms of JIT; its last 3 pairs {r['warm_jit_last'] or 0:.0f} ms per rebalance)")
    unmoved = "".join(f", {n} {what}s moved no partition (not measured)" for what, n in r["unmoved"].items())
    return (f"{r['profile']:13s} {r['size']:3d}: cold {r['cold_s']:.2f}s, join p50 "
            f"{fmt(r['join_p50_ms'])} ms, crash p50 {fmt(r['crash_p50_ms'])} ms{unmoved}, attempts "
            f"{r['attempts']}, conflicts {r['claim_conflicts']}, failed attempts "
            f"{r['failed_attempts']}, failed rebalances {r['failed_rebalances']}{jit}")


def results_table(results: list[dict], rounds: int) -> Table:
    """One row per implementation and size: times, the rebalance mechanism's counts, requests and CPU."""
    table = Table(title=f"rebalance, range, {rounds} joins + {rounds} crashes (a join or crash that moves no "
                        "partition is not measured)")
    for col in ("implementation", "consumers", "partitions", "cold start (s)", "join p50 (ms)", "join max (ms)",
                "crash p50 (ms)", "crash max (ms)", "attempts", "claim conflicts", "failed attempts",
                "failed rebalances", "ZooKeeper requests / rebalance", "consumers' CPU / rebalance (ms)",
                "ZooKeeper CPU / rebalance (ms)", "of it JIT (ms)"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(r["profile"], str(r["size"]), str(r["partitions"]), f"{r['cold_s']:.2f}",
                      fmt(r["join_p50_ms"]), fmt(r["join_max_ms"]), fmt(r["crash_p50_ms"]), fmt(r["crash_max_ms"]),
                      *(str(r[k]) for k in ("attempts", "claim_conflicts", "failed_attempts", "failed_rebalances")),
                      fmt(r["zk_requests"]),
                      *("–" if r["cpu_ms"][k] is None else f"{r['cpu_ms'][k]:.0f}"
                        for k in ("consumers", "zookeeper", "jit")))
    return table


def phases_table(results: list[dict]) -> Table:
    """Where zkconsumer's rebalances spent their time, phase by phase (Kafka's connector has no phase clock)."""
    phases = Table(title="where the time goes: ms per consumer rebalance after a join or crash, p50 / max "
                         "(consumer/zookeeper/phases.py; watch = from the change to the consumer's watch callback)")
    names = ["watch", *PHASES]
    for col in ("profile", "consumers", *names):
        phases.add_column(col, justify="right")
    for r in results:
        if r["profile"] == KAFKA:
            continue  # Kafka's connector has no phase clock
        cells = [f"{r['phases'][n][0]:.0f} / {r['phases'][n][1]:.0f}" if n in r["phases"] else "–" for n in names]
        phases.add_row(r["profile"], str(r["size"]), *cells)
    return phases


def report(console, results: list[dict], args: argparse.Namespace, floor: dict[str, float] | None) -> None:
    """Everything printed once every scenario has run, and the figure when ``--plot`` asks for it."""
    console.print(results_table(results, args.rounds))
    console.print(cpu_table(results))
    if any(r["profile"] == KAFKA for r in results):
        console.print(f"{KAFKA}: Apache Kafka's own ZookeeperConsumerConnector, one JVM per host process, counts from "
                      "its log; its JVMs ran an unmeasured cold start and joins and crashes first until their JIT was "
                      f"quiet (at most {args.kafka_warmup}). Consumers' CPU includes the JVMs' JIT and GC threads.",
                      highlight=False)
    phases = phases_table(results)
    if phases.row_count:
        console.print(phases)
    if floor:
        console.print("ZooKeeper alone (idle, one client, p50): "
                      + ", ".join(f"{k} {v:.1f} ms" for k, v in floor.items()), highlight=False)
    by = {(r["profile"], r["size"]): r for r in results}
    for size in args.sizes:
        if ("kafka-0.8", size) in by and ("default", size) in by:
            a, b = by[("kafka-0.8", size)], by[("default", size)]
            console.print(f"{size} consumers: default vs kafka-0.8 — join p50 "
                          f"{fmt(ratio(a['join_p50_ms'], b['join_p50_ms']), '.1f')}x faster, crash p50 "
                          f"{fmt(ratio(a['crash_p50_ms'], b['crash_p50_ms']), '.1f')}x faster, cold start "
                          f"{fmt(ratio(a['cold_s'], b['cold_s']), '.1f')}x faster (– : not measured on both sides)",
                          highlight=False)
    faithfulness(console, by, args.sizes)
    if args.plot:
        console.print(f"figure: {plot_scaling(results, args.plot, floor)}", highlight=False)
