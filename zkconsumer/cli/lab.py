"""``zkconsumer lab``: what ``make demo`` runs — a group with churn, live, then verify and a summary."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from zkconsumer.broker_version import BrokerTooOld
from zkconsumer.cli.output import CliError, console, err_console
from zkconsumer.errors import ZkConsumerError
from zkconsumer.lab.backends import BackendError, DockerBackend, ProcessBackend
from zkconsumer.lab.catalogue import CATALOGUE_VARIANTS, MODES, run_catalogue
from zkconsumer.lab.catalogue import modes as catalogue_modes
from zkconsumer.lab.faults.cli import run_matrix
from zkconsumer.lab.faults.matrix import faults_of
from zkconsumer.lab.faults.scenario_lab import lab_for
from zkconsumer.lab.live import LabSource
from zkconsumer.lab.nemesis_run import NEMESIS_VARIANTS, PROFILE_VARIANTS, run_nemesis
from zkconsumer.lab.runner import Lab
from zkconsumer.lab.variants import DEFAULT_VARIANTS, VARIANTS
from zkconsumer.scenario.model import LabMode, ScenarioError
from zkconsumer.scenario.nemesis import DEFAULT_KINDS, NemesisSettings, drawable, parse_kinds
from zkconsumer.scenario.plan import WORKLOADS, RunPlan
from zkconsumer.scenario.reader import builtin as builtin_scenario
from zkconsumer.scenario.reader import builtin_names
from zkconsumer.scenario.reader import load as load_scenario

if TYPE_CHECKING:
    from zkconsumer.lab.backends import LabBackend


#: ``lab --mode`` takes a :class:`LabMode`, ``zk`` for zookeeper, or ``both``: zookeeper then coordinator, compared.
ZK, BOTH = "zk", "both"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="run a live group with joins, stops and kill -9 on a local ZooKeeper + broker")
    p.add_argument("--consumers", type=int, help="consumer processes at the start (default 3)")
    p.add_argument("--duration", type=float, help="seconds of churn (default 30)")
    p.add_argument("--profile", choices=("default", "kafka-0.8"), default="default",
                   help="kafka-0.8 reproduces the original timing and its weaknesses")
    p.add_argument("--compare", action="store_true", help="run kafka-0.8 then default and compare them")
    # plain strings: argparse's error for a wrong one lists the choices by their repr
    p.add_argument("--mode", choices=(LabMode.ZOOKEEPER.value, ZK, LabMode.COORDINATOR.value, LabMode.MIGRATE.value,
                                      BOTH), default=LabMode.ZOOKEEPER.value,
                   help="zookeeper: 0.8 members; coordinator: the broker's group coordinator; migrate: 0.8 members "
                        "moved to the coordinator mid-run; both: zookeeper then coordinator, compared")
    p.add_argument("--strategy", choices=("range", "roundrobin", "roundrobin-relaxed"), help="default range")
    p.add_argument("--rate", type=float, help="records per second produced during the run (default 200)")
    p.add_argument("--workload", choices=WORKLOADS,
                   help="churn (default), rolling-restart (every member restarted in turn) or scale-out (members "
                        "added one by one up to the largest partition count)")
    p.add_argument("--scenario", type=Path, metavar="FILE",
                   help="a scenario file (TOML, docs/scenarios.md): members, topics, settings and timed actions; "
                        "flags given as well override its settings; or a built-in one by name: "
                        + ", ".join(builtin_names()))
    p.add_argument("--out", type=Path, help="run directory (default lab-runs/<time>)")
    p.add_argument("--zookeeper", help="use this ZooKeeper instead of starting one")
    p.add_argument("--bootstrap-server", help="use this Kafka cluster instead of the local broker")
    p.add_argument("--analyze", action="store_true", help="turn the traces into a Spark report afterwards")
    p.add_argument("--master", help="Spark master for --analyze (default local[*])")
    p.add_argument("--backend", choices=("process", "docker"), default="process",
                   help="process: local processes (default); docker: ZooKeeper, the broker and every consumer in "
                        "containers of the zkconsumer image (built locally when missing), host networking")
    p.add_argument("--zookeeper-servers", type=int, choices=(1, 3), default=3,
                   help="ZooKeeper servers the docker backend starts (default 3, an ensemble)")
    p.add_argument("--docker-host", help="Docker engine URL for --backend docker (default: DOCKER_HOST or the "
                                         "system engine; without one, a private dockerd is started as root)")
    p.add_argument("--faults", nargs="*", metavar="FAULT",
                   help="run the fault matrix instead (all faults, or the ones named: "
                        "zk-leader zk-follower zk-quorum zk-cut broker-kill consumers-kill herd-30 consumer-pause; "
                        "with --mode migrate: migrate-kill member-kill-switching bridge-zk-expiry broker-restart "
                        "rollback-mid stranger-joins) and print one verdict per fault; --profile / --compare choose "
                        "the profiles")
    u = p.add_argument_group("the live page (--ui)")
    u.add_argument("--ui", action="store_true",
                   help="serve a live page of the run: members with buttons (add a member, stop, kill -9, pause, cut "
                        "from ZooKeeper where the lab has the link, restart, finish), owners, offsets and lag, "
                        "ownership over time, each rebalance as it happens. Without --workload or --scenario nothing "
                        "is scheduled (the page drives the group); without --duration the run lasts until the "
                        "page's finish or Ctrl-C")
    u.add_argument("--port", type=int, default=0, help="the page's port (default 0: a free one; the URL is printed)")
    u.add_argument("--host", default="127.0.0.1",
                   help="the page's address (default 127.0.0.1; any other is reachable from elsewhere, and the "
                        "page has no login: warned)")
    n = p.add_argument_group("randomized fault schedules (--nemesis; docs/scenarios.md)")
    n.add_argument("--nemesis", action="store_true",
                   help="draw a schedule of actions from --seed, print it (a scenario file), run it, judge it with "
                        "the invariants; on a breach shrink it to a minimal scenario file (<out>/seed-S/minimal.toml) "
                        "and print the command that replays it")
    n.add_argument("--seed", type=int, default=0, help="the first seed (default 0); the same seed draws the same "
                                                       "schedule")
    n.add_argument("--runs", type=int, default=1, help="run seeds S..S+N-1 (default 1)")
    n.add_argument("--actions", default=",".join(k.value for k in DEFAULT_KINDS),
                   help="the action kinds drawn, comma-separated (default and drawable: "
                        f"{','.join(drawable())})")
    n.add_argument("--max-actions", type=int, default=4, help="at most this many actions per run (default 4)")
    n.add_argument("--shrink-budget", type=int, default=30,
                   help="at most this many reruns to shrink one breach (default 30; 0: do not shrink)")
    n.add_argument("--shrink-confirm", type=int, default=1,
                   help="keep a smaller schedule only if it breaches this many runs in a row (default 1)")
    n.add_argument("--variant", choices=NEMESIS_VARIANTS,
                   help="run the members of this variant instead of --profile's (e.g. kafka-0.8.2.2: Apache Kafka "
                        "0.8.2.2's own consumer)")
    p.set_defaults(func=cmd_lab)

    c = sub.add_parser("compare", help="the same workload and churn in ZooKeeper mode (default, kafka-0.8) and "
                                        "coordinator mode: one table, one figure, a page with every run on one "
                                        "time axis (compare.html), a Spark report per run")
    c.add_argument("--consumers", type=int, help="consumer processes at the start (default 3)")
    c.add_argument("--duration", type=float, help="seconds of churn per run (default 30)")
    c.add_argument("--strategy", choices=("range", "roundrobin"), help="default range")
    c.add_argument("--rate", type=float, help="records per second produced during each run (default 200)")
    c.add_argument("--workload", choices=WORKLOADS,
                   help="churn (default): a join, a graceful stop, a kill -9, a join; rolling-restart: every member "
                        "restarted in turn (a deploy); scale-out: members added one by one up to the largest "
                        "partition count")
    c.add_argument("--scenario", type=Path, metavar="FILE",
                   help="run this scenario file (docs/scenarios.md), or a built-in one by name, on every variant; an "
                        "action with no counterpart in a variant is skipped and reported n/a")
    c.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help="comma-separated, or all: " + "; ".join(f"{n} ({v.about})" for n, v in VARIANTS.items()))
    c.add_argument("--out", type=Path, help="run directory (default lab-runs/compare-<time>)")
    c.add_argument("--no-analyze", action="store_true", help="skip Spark: lab summaries only (faster)")
    c.add_argument("--master", help="Spark master (default local[*])")
    c.set_defaults(func=cmd_compare)

    f = sub.add_parser("catalogue", help="the failure catalogue (docs/failure-modes.md): each known failure of the 0.8 "
                                         "design as its shipped scenario, on every variant with a counterpart, "
                                         "judged by the invariants: one table, mode × variant")
    f.add_argument("--modes", help="comma-separated letters or scenario names (default all): "
                                   + "; ".join(f"{m.key} {m.scenario or '(benchmark)'}" for m in MODES))
    f.add_argument("--variants", default=",".join(CATALOGUE_VARIANTS),
                   help=f"comma-separated, or all (default {','.join(CATALOGUE_VARIANTS)})")
    f.add_argument("--runs", default="1", metavar="N",
                   help="run each mode × variant cell N times (default 1): its verdict is 'breaks in k of N runs' "
                        "with, per invariant, the runs that broke it, or 'holds in N of N runs'")
    f.add_argument("--out", type=Path, help="run directory (default lab-runs/catalogue-<time>)")
    f.add_argument("--master", help="Spark master (default local[*])")
    f.add_argument("--record", type=Path, metavar="FILE",
                   help="also write the cells as a result record (results/README.md) there, for the documents")
    f.set_defaults(func=cmd_catalogue)


def lab_plan(args: argparse.Namespace, **settings) -> RunPlan:
    """The plan the flags describe: a scenario file's settings where it sets them, flags given on top, else the
    defaults. A scenario file that cannot be run is one error naming its file, line and key."""
    if args.consumers is not None and args.consumers < 1 or args.duration is not None and args.duration <= 0:
        raise CliError("--consumers must be >= 1 and --duration > 0")
    flags = {"consumers": args.consumers, "duration": args.duration, "strategy": args.strategy, "rate": args.rate,
             **settings}
    if args.scenario is None:
        return RunPlan(**{k: v for k, v in {**flags, "workload": args.workload}.items() if v is not None})
    if args.workload is not None:
        raise CliError("--workload and --scenario both say what happens during the run: give one")
    try:
        named = not args.scenario.exists() and str(args.scenario) in builtin_names()
        scenario = builtin_scenario(str(args.scenario)) if named else load_scenario(args.scenario)
        plan = RunPlan.from_scenario(scenario, **flags)
        plan.schedule()  # a member action on a member never started is the file's mistake: said now, not mid-run
    except ScenarioError as e:
        raise CliError(str(e)) from None
    return plan


def cmd_compare(args: argparse.Namespace) -> int:
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    out = args.out or Path("lab-runs") / time.strftime("compare-%Y%m%d-%H%M%S")
    plan = lab_plan(args)
    try:
        from zkconsumer.lab.compare import run_compare  # pandas: not in the consumer image

        results = run_compare(plan, out, variants, console, analyze=not args.no_analyze, master=args.master)
    except ZkConsumerError as e:
        raise CliError(str(e)) from None
    return 0 if all(r.measures.get("verify_ok") and r.measures.get("lost") == 0 for r in results) else 1


def runs_flag(value: str) -> int:
    """``--runs``: a whole number >= 1, else one line saying so."""
    try:
        runs = int(value)
    except ValueError:
        runs = 0
    if runs < 1:
        raise CliError(f"--runs takes a whole number of runs per cell, 1 or more, not {value!r}")
    return runs


def cmd_catalogue(args: argparse.Namespace) -> int:
    runs = runs_flag(args.runs)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    variants = list(VARIANTS) if variants == ["all"] else variants
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise CliError(f"unknown variants {unknown}; choose from all, {', '.join(VARIANTS)}")
    try:
        chosen = catalogue_modes([k.strip() for k in (args.modes or "").split(",") if k.strip()])
    except ZkConsumerError as e:
        raise CliError(str(e)) from None
    out = args.out or Path("lab-runs") / time.strftime("catalogue-%Y%m%d-%H%M%S")
    recorder = None
    if args.record:
        from zkconsumer.results.record import Recorder  # the code measured is the code that starts the run

        recorder = Recorder(command=" ".join(["zkconsumer", *sys.argv[1:]]))
    cells = run_catalogue(chosen, variants, out, console, master=args.master, runs=runs)
    if recorder and cells:
        from zkconsumer.results.record import Scope

        figures = {"cells": [_without_reports(c.as_json()) for c in cells]}
        settings = {"modes": args.modes, "variants": variants, "runs": runs, "out": str(out)}
        console.print(f"record: {recorder.write(args.record, settings, figures, Scope.LAB)}", highlight=False)
    return 0 if cells else 1


def _without_reports(cell: dict) -> dict:
    """A cell as a record keeps its figures, not the paths of a run directory no one else has."""
    return {**cell, "runs": [{k: v for k, v in r.items() if k != "report"} for r in cell.get("runs", [])]}


def cmd_lab(args: argparse.Namespace) -> int:
    base = args.out or Path("lab-runs") / time.strftime("%Y%m%d-%H%M%S")
    if args.mode == BOTH:
        plan = lab_plan(args)
        from zkconsumer.lab.compare import run_compare  # pandas: not in the consumer image

        results = run_compare(plan, base, ["zookeeper-default", "coordinator"], console, analyze=args.analyze,
                              master=args.master)
        return 0 if all(r.measures.get("verify_ok") and r.measures.get("lost") == 0 for r in results) else 1
    if args.ui and (args.mode == BOTH or args.compare or args.nemesis or args.faults is not None):
        raise CliError("--ui watches one lab run: not with --mode both, --compare, --faults or --nemesis")
    mode = LabMode.ZOOKEEPER if args.mode == ZK else LabMode(args.mode)
    profiles = ["kafka-0.8", "default"] if args.compare else [args.profile]
    if args.nemesis:
        return _nemesis(args, base)
    if args.faults is not None:
        return _faults(args, base, profiles)
    summaries = []
    with _backends(args) as new_backend:
        for profile in profiles:
            plan = lab_plan(args, profile=profile, mode=mode)
            if args.ui and args.scenario is None and args.workload is None:
                # the page drives the group: a schedule would mix its rebalances with those the clicks cause
                plan.steps, plan.workload = [], "live page"
            out = base / profile if args.compare else base
            console.rule(f"[bold]lab: {profile} profile ({args.backend} backend)")
            try:
                lab = lab_for(plan, out, args.zookeeper, args.bootstrap_server, console, backend=new_backend(),
                              cut_any=args.ui)
                with _live_page(args, lab):
                    summaries.append(lab.run(args.analyze, args.master))
            except BrokerTooOld as e:  # --mode coordinator | migrate against a Kafka 0.8 cluster
                raise CliError(str(e)) from None
    if args.compare:
        table = Table(title="kafka-0.8 vs default, same workload")
        table.add_column("measure")
        for s in summaries:
            table.add_column(s["profile"], justify="right")
        for key in ("consumer_rebalances", "failed_rebalances", "claim_conflicts", "rebalance_ms_p50",
                    "rebalance_ms_max", "duplicates", "lost", "verify_ok"):
            table.add_row(key.replace("_", " "), *(str(s.get(key)) for s in summaries))
        console.print(table)
    return 0 if all(s.get("verify_ok") and s.get("lost") == 0 for s in summaries) else 1


@contextlib.contextmanager
def _live_page(args: argparse.Namespace, lab: Lab) -> Iterator[None]:
    """``--ui``: the page served before the lab starts its members, its URL printed; stopped when the run is over
    (after the summary: a page of a finished run would offer buttons on nothing)."""
    if not args.ui:
        yield
        return
    from zkconsumer.web.serve import AddressInUse, exposure_warning, serve

    warning = exposure_warning(args.host, lab=True)
    if warning:
        err_console.print(f"[yellow]{escape(warning)}[/]", highlight=False)
    source = LabSource(lab, open_ended=args.duration is None)
    try:
        served = serve(source, args.host, args.port)
    except AddressInUse as e:
        raise CliError(str(e)) from None
    until = "until the page's finish or Ctrl-C" if args.duration is None else f"{lab.plan.duration:g} s at most"
    console.print(f"live page: {served.url} (its buttons act on this run, which lasts {until})", highlight=False,
                  soft_wrap=True)
    console.file.flush()  # read by whoever started the lab, through a pipe too
    try:
        yield
    finally:
        source.close()
        served.stop()


@contextlib.contextmanager
def _backends(args: argparse.Namespace) -> Iterator[Callable[[], LabBackend]]:
    """A factory of fresh backends (one per lab run) for ``--backend``; with docker, the engine and image too."""
    if args.backend == "process":
        yield ProcessBackend
        return
    from zkconsumer.lab.containers.engine import DockerUnavailable, docker_client
    from zkconsumer.lab.containers.images import ImageBuildError, ensure_image

    def say(text: str) -> None:
        console.print(f"[dim]{text}[/]", highlight=False)

    try:
        with docker_client(args.docker_host, log=say) as client:
            with console.status("zkconsumer image (built when missing; the first build takes minutes)..."):
                image = ensure_image(client, log=say)
            yield lambda: DockerBackend(client, image, zookeeper_servers=args.zookeeper_servers)
    except (DockerUnavailable, ImageBuildError, BackendError) as e:
        raise CliError(str(e)) from None
def _faults(args: argparse.Namespace, base: Path, profiles: list[str]) -> int:
    mode = LabMode.MIGRATE if args.mode == LabMode.MIGRATE else LabMode.ZOOKEEPER
    known = faults_of(mode)
    names = args.faults or known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CliError(f"unknown fault(s) for --mode {mode}: {', '.join(unknown)}; known: {', '.join(known)}")
    verdicts = run_matrix(names, profiles, base, console, args.master)
    return 0 if all(v.ok for v in verdicts) else 1


def _nemesis(args: argparse.Namespace, base: Path) -> int:
    """``lab --nemesis``: exit 1 when a run breached an invariant (or could not run), as a lab whose verify failed
    does."""
    if args.scenario is not None or args.workload is not None or args.faults is not None or args.compare:
        raise CliError("--nemesis draws its own schedule: not with --scenario, --workload, --faults or --compare")
    if args.mode not in (LabMode.ZOOKEEPER, ZK) or args.backend != "process" or args.zookeeper or args.bootstrap_server:
        raise CliError("--nemesis runs on the process backend with its own servers; choose the members with "
                       "--profile or --variant")
    if min(args.runs, args.shrink_confirm, args.consumers or 1) < 1 or args.shrink_budget < 0:
        raise CliError("--runs, --shrink-confirm and --consumers must be >= 1, --shrink-budget >= 0")
    try:
        kinds = parse_kinds(args.actions)
        given = {"duration": args.duration, "members": args.consumers}
        settings = NemesisSettings(kinds=kinds, max_actions=args.max_actions,
                                   **{k: v for k, v in given.items() if v is not None})
        results = run_nemesis(list(range(args.seed, args.seed + args.runs)), settings,
                              args.variant or PROFILE_VARIANTS[args.profile], base, console,
                              budget=args.shrink_budget, flags={"strategy": args.strategy, "rate": args.rate},
                              master=args.master, confirm=args.shrink_confirm)
    except ZkConsumerError as e:
        raise CliError(str(e)) from None
    return 0 if all(r.breach is None and r.error is None for r in results) else 1
