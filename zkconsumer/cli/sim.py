"""``zkconsumer sim``: the lab's runs on the deterministic simulator (zkconsumer/sim/, docs/simulation.md).

    zkconsumer sim --scenario gc-pause --profile kafka-0.8 --seed 3 --trace-dir /tmp/t   # one seed, its trace
    zkconsumer sim --profile kafka-0.8 --seeds 1000                                      # nemesis seeds, on Spark
    zkconsumer sim --scenario stale-view --seeds 200 --json                              # one plan, 200 interleavings
    zkconsumer sim --grid --seeds 100 --out /tmp/grid     # retries x backoff x session, both profiles, heatmaps
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from zkconsumer.cli.analyze import add_spark_args, start_spark
from zkconsumer.cli.output import CliError, console
from zkconsumer.config import PROFILES
from zkconsumer.errors import ZkConsumerError
from zkconsumer.lab.variants import VARIANTS
from zkconsumer.scenario import nemesis
from zkconsumer.scenario.model import LabMode

if TYPE_CHECKING:
    from zkconsumer.sim.runs import SimJob


#: The settings grid's axes by default (sim/grid.py keeps the same; the CLI does not import the simulator to say so)
GRID_PROFILES = ("kafka-0.8", "default")
GRID_RETRIES = (1, 4, 10)
GRID_BACKOFF_MS = (250, 2000, 5000)
GRID_SESSION_TIMEOUT_MS = (2000, 6000, 30000)
#: The herd's by default (sim/herd_scale.py)
HERD_SIZES = (10, 50, 200, 1000)
HERD_DESIGNS = ("default", "eager", "cooperative")


def _csv(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


#: Fewer seeds than this run in this process unless ``--master`` asks for Spark: Spark's local JVM takes about 7 s to
#: start, the time of some ten seeds on one core.
LOCAL_SEEDS = 16


#: compare's variants the simulator runs: those whose members and broker are the project's own code
SIM_VARIANTS = ("zookeeper-default", "zookeeper-kafka-0.8", "coordinator", "cooperative-sticky", "static")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim", help="run lab scenarios or nemesis schedules on the deterministic simulator, many seeds on Spark",
        description="Runs zkconsumer's own consumer code (the connector, both profiles' rebalance, kazoo itself) on "
                    "simulated time, ZooKeeper, broker and network: one seed gives one byte-identical trace. Each "
                    "run is judged after every step (the lab's five invariants, zombie deliveries, Jepsen's "
                    "poll-skip and nonmonotonic-poll). A breaching nemesis seed is shrunk to a scenario TOML that "
                    "`zkconsumer lab --scenario FILE` replays on real processes.")
    p.add_argument("--profile", default="default", help="default | kafka-0.8 (default: default)")
    p.add_argument("--variant", default=None, metavar="NAME",
                   help=f"a variant of `zkconsumer compare` instead of a profile: {', '.join(SIM_VARIANTS)} "
                        "(coordinator mode: the project's coordinator-mode members, kafka-python's group client, "
                        "against the project's broker)")
    p.add_argument("--mode", choices=(LabMode.MIGRATE.value,), default=None,
                   help="migrate: the lab's migrate mode: members started --migratable (both connectors), moved to "
                        "the coordinator by zkconsumer migrate's own driver; nemesis schedules get a migrate step "
                        "(and in a quarter of the seeds a rollback), a scenario brings its own; judged also on how "
                        "the migration ended (never a mixed group, the driver's ownership verdict)")
    p.add_argument("--scenario", metavar="NAME|FILE",
                   help="a shipped scenario (zkconsumer lab --help names them) or a scenario file; without it each "
                        "seed draws a nemesis schedule")
    p.add_argument("--seed", type=int, default=None, help="run this one seed and show its run")
    p.add_argument("--seeds", type=int, default=None, metavar="N", help="run N seeds (default 20)")
    p.add_argument("--first-seed", type=int, default=0, metavar="S", help="the first seed of --seeds (default 0)")
    p.add_argument("--trace-dir", metavar="DIR", help="with --seed: write its trace there (zkconsumer analyze DIR)")
    p.add_argument("--out", metavar="DIR", help="write results.json and the shrunk reproducers (*.toml) there")
    p.add_argument("--shrink", type=int, default=3, metavar="K",
                   help="shrink the first K breaching nemesis seeds (default 3; 0: none)")
    p.add_argument("--shrink-budget", type=int, default=40, metavar="RUNS",
                   help="simulated runs one shrink may spend (default 40)")
    p.add_argument("--shrink-keep", metavar="KIND,KIND", default="",
                   help="shrink only seeds breaking every one of these kinds, and keep them broken while shrinking "
                        "(e.g. commits_backwards): a reproducer of that breach, not of the easiest one")
    p.add_argument("--in-process", action="store_true",
                   help="run the seeds here, a process per core, not on Spark (the default for fewer than "
                        f"{LOCAL_SEEDS} seeds without --master: a JVM's start costs more than they do)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    g = p.add_argument_group("nemesis schedules (without --scenario)")
    g.add_argument("--actions", default=None, help="action kinds to draw (default: the nemesis's)")
    g.add_argument("--max-actions", type=int, default=4)
    g.add_argument("--duration", type=float, default=30.0)
    g.add_argument("--consumers", type=int, default=3)
    g.add_argument("--session-timeout-ms", type=int, default=4000)
    g = p.add_argument_group(
        "the settings grid (--grid): every point runs --seeds nemesis schedules scaled to its session timeout, "
        "on Spark; --out gets the rows as Parquet, the rates per point, heatmaps and a report")
    g.add_argument("--grid", action="store_true", help="run the settings grid instead of one job")
    g.add_argument("--profiles", default=",".join(GRID_PROFILES), metavar="P,P",
                   help=f"the grid's profiles (default {','.join(GRID_PROFILES)})")
    g.add_argument("--retries", default=_csv(GRID_RETRIES), metavar="N,N",
                   help=f"rebalance.max.retries values (default {_csv(GRID_RETRIES)})")
    g.add_argument("--backoff-ms", default=_csv(GRID_BACKOFF_MS), metavar="MS,MS",
                   help=f"rebalance.backoff.ms values (default {_csv(GRID_BACKOFF_MS)})")
    g.add_argument("--session-timeouts-ms", default=_csv(GRID_SESSION_TIMEOUT_MS), metavar="MS,MS",
                   help=f"zookeeper.session.timeout.ms values (default {_csv(GRID_SESSION_TIMEOUT_MS)})")
    g = p.add_argument_group(
        "the herd by size (--herd): each design at each size a Spark task, one member joining and the first "
        "leaving; --out gets the rows as Parquet, the log-log figure and a report")
    g.add_argument("--herd", action="store_true", help="run the herd by size instead of one job")
    g.add_argument("--sizes", default=_csv(HERD_SIZES), metavar="N,N",
                   help=f"members (default {_csv(HERD_SIZES)}; 10,000 is about 5 min of one core for the default "
                        "profile)")
    g.add_argument("--designs", default=",".join(HERD_DESIGNS), metavar="D,D",
                   help=f"default, kafka-0.8 (0.8's ZooKeeper rebalance), eager, cooperative (the coordinator) "
                        f"(default {','.join(HERD_DESIGNS)}; kafka-0.8 reads every registration on every attempt: "
                        "about 30 min of wall at 1,000 members)")
    g.add_argument("--rounds", type=int, default=3, help="joins and crashes per size (1 from 1,000 members on)")
    p.add_argument("--zk-service", choices=("none", "lab"), default=None,
                   help="the simulated ZooKeeper's service time per request: none (served on arrival, as the "
                        "recorded agreement was measured; the default) or lab (measured on the lab's real server: "
                        "benchmarks/zk_service_time.py; the default of --herd)")
    add_spark_args(p)
    p.set_defaults(func=cmd_sim)


def _job(args: argparse.Namespace) -> SimJob:
    from zkconsumer.sim.runs import SimJob, SourceKind
    from zkconsumer.sim.zk_service import ServiceModel

    if args.profile not in PROFILES:
        raise CliError(f"unknown profile {args.profile!r}; one of: {', '.join(PROFILES)}")
    service = ServiceModel(args.zk_service or "none")
    if args.mode and args.variant:
        raise CliError("--mode migrate moves a 0.8 group (--profile) to the coordinator; leave out --variant")
    variant = variant_settings(args.variant) if args.variant else {}
    if args.mode:
        variant = {"mode": LabMode(args.mode)}
    profile = variant.pop("profile", args.profile)
    if args.scenario:
        path = Path(args.scenario)
        if path.suffix == ".toml" or path.exists():
            if not path.is_file():
                raise CliError(f"no scenario file {path}")
            return SimJob(profile, SourceKind.SCENARIO, scenario_text=path.read_text(), scenario_source=str(path),
                          service=service, **variant)
        return SimJob(profile, SourceKind.SCENARIO, scenario=args.scenario, service=service, **variant)
    kinds = nemesis.parse_kinds(args.actions) if args.actions else nemesis.DEFAULT_KINDS
    settings = nemesis.NemesisSettings(duration=args.duration, members=args.consumers, max_actions=args.max_actions,
                                       session_timeout_ms=args.session_timeout_ms, kinds=kinds)
    return SimJob(profile, SourceKind.NEMESIS, nemesis=settings, service=service, **variant)


def variant_settings(name: str) -> dict:
    """What a SimJob takes of compare's variant ``name`` (lab/variants.py): its mode, profile, strategy, static
    members and the actions it has no counterpart for. Only the variants whose members and broker are the
    project's own run in simulation."""
    if name not in SIM_VARIANTS:
        others = f"; not simulated: {', '.join(v for v in VARIANTS if v not in SIM_VARIANTS)} (Apache Kafka's " \
                 "brokers or consumers, librdkafka: not the project's code)" if name in VARIANTS else ""
        raise CliError(f"unknown variant {name!r} for sim; one of: {', '.join(SIM_VARIANTS)}{others}")
    v = VARIANTS[name]
    return {"variant": name, "mode": v.mode, "strategy": v.strategy or "", "static_members": v.static_members,
            "absent": v.absent(), "profile": v.profile}


def cmd_sim(args: argparse.Namespace) -> int:
    if args.grid and args.herd:
        raise CliError("--grid or --herd, not both")
    if args.grid:
        return _grid(args)
    if args.herd:
        return _herd(args)
    if args.seed is not None and args.seeds is not None:
        raise CliError("give --seed (one run) or --seeds (many), not both")
    seeds_n = 20 if args.seeds is None else args.seeds
    if args.seed is None and seeds_n < 1:
        raise CliError(f"--seeds takes a number of seeds, 1 or more, not {seeds_n}")
    if args.seed is not None and args.seed < 0 or args.first_seed < 0:
        raise CliError("seeds are whole numbers, 0 or more")
    if args.trace_dir and args.seed is None:
        raise CliError("--trace-dir goes with --seed (one run's trace)")
    # A simulated member logs what a real one logs (refused commits while its session is gone, rebalances given
    # up): over many seeds that drowns the verdicts, which say what matters; the trace keeps every event.
    logging.disable(logging.ERROR)
    from zkconsumer.sim.world import NOT_SIMULATED, STEP_HANDLERS, unsupported

    try:
        job = _job(args)
        refused = [k for k in job.nemesis.kinds if k not in STEP_HANDLERS] if not args.scenario else []
        if refused:  # every seed draws from these kinds: refuse them by name, not only where the first seed drew one
            raise CliError("cannot simulate " + "; ".join(f"--actions {k}: {NOT_SIMULATED.get(k, 'no handler')}"
                                                          for k in refused))
        reasons = unsupported(job.plan(job.scenario_for(args.seed if args.seed is not None else args.first_seed)))
        if reasons:
            raise CliError("cannot simulate this run: " + "; ".join(reasons))
        if args.seed is not None:
            return _one(args, job)
        return _many(args, job, list(range(args.first_seed, args.first_seed + seeds_n)))
    except ZkConsumerError as e:
        raise CliError(str(e)) from None


def _one(args: argparse.Namespace, job: SimJob) -> int:
    from zkconsumer.sim.runs import run_seed

    trace_dir = Path(args.trace_dir) if args.trace_dir else None
    result = run_seed(job, args.seed, trace_dir)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0
    verdict = "holds" if result.ok else "BREAKS: " + ", ".join(result.broken)
    console.print(f"seed {result.seed} ({result.scenario}, {job.who}): {verdict}", highlight=False)
    for name, breach in result.first.items():
        if name in result.broken:
            console.print(f"  first {name}: {breach['detail'] or ''} at {breach['ts']} by {breach['consumer']} "
                          f"on {breach['topic']}-{breach['partition']}", highlight=False)
    if result.migration is not None:
        m = result.migration
        console.print(f"  migration: {m['result']}; plan at the end {m['plan'] or '(none)'}; "
                      f"{m['ownership'] or 'no ownership verdict'}", highlight=False)
    console.print(f"  {result.virtual_ms / 1000:.1f} s simulated in {result.wall_s:.2f} s; {result.trace_lines} trace "
                  f"lines (sha256 {result.trace_sha256[:16]}…); {result.zookeeper_requests} ZooKeeper requests",
                  highlight=False)
    if trace_dir is not None:
        console.print(f"  trace written to {trace_dir}: zkconsumer analyze {trace_dir}", highlight=False)
    return 0


def _in_process(args: argparse.Namespace, seeds: int) -> bool:
    """Run the seeds here rather than on Spark: when asked, or when they are few and no Spark was asked for (no
    ``--master``, not under spark-submit): a local JVM takes longer to start than a few seeds take to run."""
    from zkconsumer.analysis.spark import under_spark_submit

    return args.in_process or (seeds < LOCAL_SEEDS and args.master is None and not under_spark_submit())


def _many(args: argparse.Namespace, job: SimJob, seeds: list[int]) -> int:
    from zkconsumer.sim.many import SimSummary, run_local, run_spark
    from zkconsumer.sim.runs import BREACH_KINDS, shrink

    keep = frozenset(k for k in args.shrink_keep.split(",") if k)
    if unknown := sorted(keep - BREACH_KINDS):
        raise CliError(f"--shrink-keep: unknown kind {', '.join(unknown)}; one of: {', '.join(sorted(BREACH_KINDS))}")
    started = time.perf_counter()
    status = Console(stderr=True) if args.json else console  # with --json, stdout holds the JSON alone
    if _in_process(args, len(seeds)):
        with Progress(console=status, transient=True, disable=args.json) as bar:
            task = bar.add_task(f"simulating {len(seeds)} seeds", total=len(seeds))
            results = run_local(job, seeds, lambda done: bar.update(task, completed=done),
                                workers=os.cpu_count() or 1)
    else:
        from zkconsumer.analysis.progress import Stages

        owns, spark = start_spark(args, "zkconsumer-sim")
        try:
            with Stages(status, spark).stage(f"simulating {len(seeds)} seeds") as detail:
                results = run_spark(spark, job, seeds)
                detail.append(f"{sum(r.virtual_ms for r in results) / 1000:,.0f} simulated seconds")
        finally:
            if owns:
                spark.stop()
    summary = SimSummary(job, results, time.perf_counter() - started)
    out = Path(args.out) if args.out else None
    breaking = [r for r in results if not r.ok and keep <= set(r.broken)]
    for result in breaking[:max(0, args.shrink)]:
        small = shrink(job, result, args.shrink_budget, keep=keep)
        if small is None:
            continue
        entry = {"seed": small.seed, "invariants": list(small.invariants), "steps": list(small.steps),
                 "tries": small.tries, "toml": small.toml}
        if out is not None:
            (out / "reproducers").mkdir(parents=True, exist_ok=True)
            path = out / "reproducers" / f"{small.scenario.name}.toml"
            path.write_text(small.toml)
            entry["file"] = str(path)
        summary.shrunk.append(entry)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(summary.as_dict(), indent=2))
    if args.json:
        print(json.dumps(summary.as_dict(), indent=2))
        return 0
    table = Table(title=f"zkconsumer sim: {job.label}, {job.who}: {summary.rate_text()}")
    table.add_column("invariant")
    table.add_column("seeds breaking it", justify="right")
    table.add_column("first seeds")
    for inv, n in summary.breaches().items():
        seeds_ = [r.seed for r in results if inv.value in r.broken][:8]
        table.add_row(getattr(inv, "label", str(inv)), f"{n} of {summary.runs}", ", ".join(map(str, seeds_)))
    console.print(table)
    if job.mode is LabMode.MIGRATE:
        ends = ", ".join(f"{what} {n}" for what, n in sorted(summary.migration_results().items()))
        console.print(f"migrations ended: {ends}", highlight=False)
    console.print(f"{summary.runs} schedules in {summary.wall_s:.1f} s: {summary.schedules_per_minute:,.0f} a minute",
                  highlight=False)
    for entry in summary.shrunk:
        where = entry.get("file", "(--out DIR to write it)")
        console.print(f"seed {entry['seed']} shrunk in {entry['tries']} runs ({'; '.join(entry['steps']) or 'as drawn'}"
                      f"): {where}", highlight=False)
    return 0


def _numbers(flag: str, text: str, low: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CliError(f"{flag} takes whole numbers separated by commas, not {text!r}") from None
    if not values or min(values) < low:
        raise CliError(f"{flag} takes whole numbers of {low} or more, not {text!r}")
    return sorted(set(values))


def _grid(args: argparse.Namespace) -> int:
    """The settings grid: points × profiles × seeds as Spark tasks, rows to Parquet, then the report from them."""
    if args.seed is not None or args.scenario:
        raise CliError("--grid draws nemesis schedules at every point: give --seeds N, not --seed or --scenario")
    if not args.out:
        raise CliError("--grid writes Parquet, heatmaps and a report: give --out DIR")
    profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
    unknown = [p for p in profiles if p not in PROFILES]
    if unknown or not profiles:
        raise CliError(f"unknown profile {', '.join(unknown) or '(none)'}; one of: {', '.join(PROFILES)}")
    seeds_n = 100 if args.seeds is None else args.seeds
    if seeds_n < 1:
        raise CliError(f"--seeds takes a number of seeds, 1 or more, not {seeds_n}")
    logging.disable(logging.ERROR)
    from zkconsumer.analysis.progress import Stages
    from zkconsumer.analysis.settings_grid import RESULTS, report_grid
    from zkconsumer.analysis.tables import TableWriter
    from zkconsumer.sim import grid

    try:
        points = grid.points(_numbers("--retries", args.retries, 1), _numbers("--backoff-ms", args.backoff_ms, 0),
                             _numbers("--session-timeouts-ms", args.session_timeouts_ms, 1000))
    except ZkConsumerError as e:
        raise CliError(str(e)) from None
    seeds = list(range(args.first_seed, args.first_seed + seeds_n))
    work = grid.grid_tasks(profiles, points, seeds)
    out = Path(args.out)
    status = Console(stderr=True) if args.json else console
    owns, spark = start_spark(args, "zkconsumer-sim-grid")
    try:
        st = Stages(status, spark)
        total = len(profiles) * len(points) * len(seeds)
        with st.stage(f"simulating {total:,} seeds") as detail:
            rows = TableWriter(out).write(RESULTS, grid.run_spark(spark, work), "one row per seed at a point",
                                          rows=total).rows
            detail.append(f"{len(points)} points × {len(profiles)} profiles × {len(seeds)} seeds → {rows:,} rows")
        res = report_grid(spark, out, out, status, stages=st,
                          title_note=f"Seeds {seeds[0]}–{seeds[-1]} at every point; each session timeout's "
                                     "schedules scaled to it (sim/grid.py).")
    finally:
        if owns:
            spark.stop()
    summary = {"seeds": res.seeds, "points": res.points, "report": str(res.report_md), "html": str(res.report_html),
               "parquet": str(out / "tables" / f"{RESULTS}.parquet"), "seconds": round(res.seconds, 1)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        console.print(f"{res.seeds:,} seeds at {res.points} points in {res.seconds:,.0f} s: {res.report_md}  "
                      f"{res.report_html}", highlight=False)
    return 0


def _herd(args: argparse.Namespace) -> int:
    """The herd by size: each (design, size) a Spark task, rows to Parquet, then the report from them."""
    if args.seed is not None or args.seeds is not None or args.scenario:
        raise CliError("--herd runs one group per design and size: --seed, --seeds and --scenario do not apply")
    if not args.out:
        raise CliError("--herd writes Parquet, a figure and a report: give --out DIR")
    if args.rounds < 1:
        raise CliError(f"--rounds takes 1 or more, not {args.rounds}")
    sizes = _numbers("--sizes", args.sizes, 2)
    logging.disable(logging.ERROR)
    from zkconsumer.analysis.herd_report import RESULTS, report_herd
    from zkconsumer.analysis.progress import Stages
    from zkconsumer.analysis.tables import TableWriter
    from zkconsumer.sim import herd_scale
    from zkconsumer.sim.zk_service import ServiceModel

    try:
        work = herd_scale.tasks([d.strip() for d in args.designs.split(",") if d.strip()], sizes, args.rounds,
                                ServiceModel(args.zk_service or "lab"))
    except ZkConsumerError as e:
        raise CliError(str(e)) from None
    out = Path(args.out)
    status = Console(stderr=True) if args.json else console
    owns, spark = start_spark(args, "zkconsumer-sim-herd")
    try:
        st = Stages(status, spark)
        with st.stage(f"simulating {len(work)} herds") as detail:
            TableWriter(out).write(RESULTS, herd_scale.run_spark(spark, work), "one row per design and size")
            detail.append(", ".join(sorted({t.design for t in work})) + f" at {', '.join(map(str, sizes))} members")
        res = report_herd(spark, out, out, status, stages=st)
    finally:
        if owns:
            spark.stop()
    summary = {"rows": res.rows, "report": str(res.report_md), "html": str(res.report_html),
               "parquet": str(out / "tables" / f"{RESULTS}.parquet"), "seconds": round(res.seconds, 1)}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        console.print(f"{res.rows} herds in {res.seconds:,.0f} s: {res.report_md}  {res.report_html}",
                      highlight=False)
    return 0
