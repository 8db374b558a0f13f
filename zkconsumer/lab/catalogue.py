"""The failure catalogue (docs/failure-modes.md): each known failure of the 0.8 design as a shipped scenario, run on
every protocol generation where it has a counterpart, judged by the analysis' invariants.

The modes are data (:data:`MODES`: the issue's a to k, each with the public reports it comes from and the
scenario that reproduces it); :func:`run_catalogue` runs each mode's scenario through ``compare`` on the variants
asked for, N times (``--runs``), and writes one table, mode × variant: the cell's rate ("breaks in k of N runs",
with per invariant the runs that broke it; lab/breach_rate.py), duplicates, two live owners, partition-time
unowned and rebalances given up, each a range where the runs differ (``catalogue.md``, ``catalogue.json`` with
every run's verdict, and ``catalogue.html``: ``k/N`` per cell, each run's verdict in its tooltip). A variant where
none of a scenario's faults has a counterpart (a ZooKeeper cut for a coordinator member) is not run: its cell says
n/a and why. The sentence on the mechanism seen in the traces is a reading, written in docs/failure-modes.md, not
computed.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.breach_rate import BreachRate, RunVerdict, spread
from zkconsumer.lab.variants import VARIANTS
from zkconsumer.scenario.model import LabMode, Scenario
from zkconsumer.scenario.nemesis import Invariant
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.scenario.reader import builtin

if TYPE_CHECKING:
    from zkconsumer.lab.compare import VariantResult

#: The variants a mode runs on unless told otherwise: Kafka 0.8.2.2's own consumer, zkconsumer's two profiles
#: and the classic coordinator (the others with ``--variants``).
CATALOGUE_VARIANTS = ("zookeeper-default", "zookeeper-kafka-0.8", "kafka-0.8.2.2", "coordinator")


@dataclass(frozen=True)
class Source:
    """A public report of the failure: what it is called and where it is."""

    label: str
    url: str


@dataclass(frozen=True)
class FailureMode:
    """One failure of the 0.8 design. ``scenario``: the shipped scenario reproducing it (None: measured elsewhere,
    said in ``elsewhere``)."""

    key: str
    title: str
    scenario: str | None
    sources: tuple[Source, ...]
    elsewhere: str = ""


_HERMES = Source("allegro/hermes#450", "https://github.com/allegro/hermes/pull/450")
_STREAMSX = Source("IBMStreams/streamsx.messaging#125", "https://github.com/IBMStreams/streamsx.messaging/issues/125")
_KAFKA_2589 = Source("KAFKA-2589 (the FAQ rule retries × backoff > session timeout)",
                     "https://issues.apache.org/jira/browse/KAFKA-2589")
_COORDINATOR_DESIGN = Source("Kafka Detailed Consumer Coordinator Design (split brain, herd; KAFKA-242)",
                             "https://cwiki.apache.org/confluence/spaces/KAFKA/pages/27850786/"
                             "Kafka+Detailed+Consumer+Coordinator+Design")
_PYKAFKA_204 = Source("Parsely/pykafka#204", "https://github.com/Parsely/pykafka/issues/204")
_PYKAFKA_273 = Source("Parsely/pykafka#273", "https://github.com/Parsely/pykafka/issues/273")

MODES: tuple[FailureMode, ...] = (
    FailureMode("a", "a process paused longer than its session (GC pause)", "gc-pause", (_PYKAFKA_204, _PYKAFKA_273)),
    FailureMode("b", "\"can't rebalance after 4 retries\": an owner node held past retries × backoff", "owner-held",
                (_HERMES, _STREAMSX, _KAFKA_2589)),
    FailureMode("c", "the herd effect: every member rebalances on every change", None, (_COORDINATOR_DESIGN,),
                elsewhere="benchmarks/rebalance.py: ZooKeeper requests and time per join and per crash, 10 to 500 "
                          "members; benchmarks/herd.py: the coordinator's group requests and time per join and "
                          "leave, 10 to 200 members (benchmarks/README.md)"),
    FailureMode("d", "split brain from a stale view: one member's ZooKeeper traffic delayed", "stale-view",
                (_COORDINATOR_DESIGN,)),
    FailureMode("e", "a session expired under a live member: re-registration and the conflict loop",
                "session-expiry",
                (Source("KAFKA-1585", "https://issues.apache.org/jira/browse/KAFKA-1585"),
                 Source("KAFKA-1387", "https://issues.apache.org/jira/browse/KAFKA-1387"))),
    FailureMode("f", "a member cut off from ZooKeeper that still fetches", "zk-cut", (_PYKAFKA_204, _PYKAFKA_273)),
    FailureMode("f", "the reverse: a member cut off from the broker that keeps its ZooKeeper session", "broker-cut",
                ()),
    FailureMode("g", "a reconnect in the middle of a rebalance: watches set again?", "reconnect-mid-rebalance",
                (Source("wvanbergen/kafka#76", "https://github.com/wvanbergen/kafka/issues/76"),
                 Source("Parsely/pykafka#565", "https://github.com/Parsely/pykafka/issues/565"))),
    FailureMode("h", "one group id over consumers of different topics", "shared-group-id",
                (Source("users@kafka: any registry change rebalances the whole group",
                        "https://mail-archive.com/users@kafka.apache.org/msg13446.html"),)),
    FailureMode("i", "wildcard consumers and a topic created", "topic-created",
                (Source("uber/uReplicator README", "https://github.com/uber/uReplicator/blob/master/README.md"),)),
    FailureMode("j", "partitions added to a live topic", "partitions-added",
                (Source("KAFKA-1030", "https://issues.apache.org/jira/browse/KAFKA-1030"),)),
    FailureMode("k", "ZooKeeper quorum lost (the 0.8 generations)", "quorum-loss", ()),
    FailureMode("k", "the broker killed: the coordinator's, for the coordinator generations", "broker-kill", ()),
    FailureMode("k", "the coordinator's broker killed in a 3-broker cluster (Apache Kafka's coordinator)",
                "coordinator-kill", ()),
)


def modes(keys: list[str] | None = None) -> list[FailureMode]:
    """The modes named by ``keys`` (letters, or scenario names), in the catalogue's order; all when None."""
    if not keys:
        return list(MODES)
    known = {m.key for m in MODES} | {m.scenario for m in MODES if m.scenario}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise IllegalArgument(f"unknown failure modes {unknown}; one of: "
                              + ", ".join(f"{m.key} ({m.scenario or 'no scenario'})" for m in MODES))
    return [m for m in MODES if m.key in keys or m.scenario in keys]


def not_applicable(scenario: Scenario, variant: str) -> str | None:
    """Why running ``scenario`` on ``variant`` would show nothing of the mode: every fault or topic action of it
    has no counterpart there (None: something strikes)."""
    striking = [a.kind for a in scenario.actions if a.kind.fault or a.kind.on_topics]
    if not striking:
        return None
    reasons = {VARIANTS[variant].no_counterpart(kind) for kind in striking}
    if None in reasons:
        return None
    return "; ".join(sorted(r for r in reasons if r))


@dataclass
class RunFigures:
    """One run of a mode's scenario on a variant: each invariant's violations (None: not analysed) and its
    figures."""

    invariants: dict[str, int] | None = None
    duplicates: int | None = None
    overlaps: int | None = None
    unowned_ms_total: int | None = None
    unowned_ms_max: int | None = None
    failed_rebalances: int | None = None
    lost: int | None = None
    unread_at_end: int | None = None
    #: owner nodes a member found held when it claimed (each costs its attempt a backoff): how fast the joiners
    #: are against the holders (issue 40, item 4); None for coordinator members, which claim no nodes
    claim_conflicts: int | None = None
    report: str | None = None

    @property
    def judgement(self) -> RunVerdict:
        return RunVerdict(None if self.invariants is None else {Invariant(k): n for k, n in self.invariants.items()})

    @classmethod
    def of(cls, result: VariantResult) -> RunFigures:
        m = result.measures
        return cls(invariants=None if result.invariants is None else
                   {i.value: n for i, n in result.invariants.items()},
                   duplicates=m.get("duplicates"), overlaps=m.get("overlaps"),
                   unowned_ms_total=m.get("unowned_ms_total"), unowned_ms_max=m.get("unowned_ms_max"),
                   failed_rebalances=m.get("failed_rebalances"), lost=m.get("lost"),
                   unread_at_end=m.get("unread_at_end"),
                   claim_conflicts=(m.get("claim_conflicts") if VARIANTS[result.name].mode is LabMode.ZOOKEEPER
                                    else None),
                   report=str(Path(result.summary.get("trace_dir", ".")).parent / "report"))

    def as_json(self) -> dict:
        return dataclasses.asdict(self) | {"verdict": self.judgement.text}


#: The figures a cell shows of its runs, by their field in :class:`RunFigures`.
FIGURES = ("lost", "unread_at_end", "overlaps", "duplicates", "unowned_ms_total", "unowned_ms_max",
           "failed_rebalances", "claim_conflicts")


@dataclass
class Cell:
    """One mode on one variant: its runs, or why it was not run."""

    mode: str
    scenario: str
    variant: str
    not_applicable: str | None = None
    runs: list[RunFigures] = field(default_factory=list)

    @property
    def rate(self) -> BreachRate | None:
        """Its runs' verdicts as a rate (None: n/a, or not run yet)."""
        if self.not_applicable or not self.runs:
            return None
        return BreachRate(tuple(r.judgement for r in self.runs))

    @property
    def verdict(self) -> str:
        """``breaks in k of N runs: <invariant> (k_i of N); ...``, ``holds in N of N runs``, ``n/a``, or ``not
        run``."""
        if self.not_applicable:
            return "n/a"
        rate = self.rate
        return "not run" if rate is None else rate.text

    def figure(self, name: str) -> str:
        """One figure over the runs: its value, ``lo–hi`` where the runs differ, ``-`` where none measured it."""
        span = spread(getattr(r, name) for r in self.runs)
        if span is None:
            return "-"
        lo, hi = span
        return _n(lo) if lo == hi else f"{_n(lo)}–{_n(hi)}"

    def as_json(self) -> dict:
        """catalogue.json's entry: the verdict, the rate (k, n, per invariant the runs that broke it) and each
        run's verdict and figures."""
        rate = self.rate
        return {"mode": self.mode, "scenario": self.scenario, "variant": self.variant,
                "not_applicable": self.not_applicable, "verdict": self.verdict,
                "rate": None if rate is None else {k: v for k, v in rate.as_json().items() if k != "runs"},
                "runs": [r.as_json() for r in self.runs]}


def markdown(cells: list[Cell]) -> str:
    """catalogue.md: one row per mode and variant; a figure that differs between the runs as its range."""
    lines = ["| mode | scenario | variant | invariants | records lost (never readable) | unread when the run ended "
             "| two live owners | duplicates | partition-time unowned (ms, longest) | rebalances given up "
             "| claim conflicts |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if c.not_applicable:
            lines.append(f"| {c.mode} | `{c.scenario}` | `{c.variant}` | n/a: {c.not_applicable} | | | | | | | |")
            continue
        lines.append(f"| {c.mode} | `{c.scenario}` | `{c.variant}` | {c.verdict} | {c.figure('lost')} | "
                     f"{c.figure('unread_at_end')} | "
                     f"{c.figure('overlaps')} | {c.figure('duplicates')} | {c.figure('unowned_ms_total')} "
                     f"({c.figure('unowned_ms_max')}) | {c.figure('failed_rebalances')} | "
                     f"{c.figure('claim_conflicts')} |")
    return "\n".join(lines) + "\n"


def _n(value: object) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def render(cells: list[Cell]) -> Table:
    table = Table(title="failure catalogue: mode × variant")
    for column in ("mode", "variant", "invariants", "lost", "unread at end", "two owners", "duplicates",
                   "unowned ms (longest)", "given up", "conflicts"):
        table.add_column(column)
    for c in cells:
        if c.not_applicable:
            table.add_row(f"{c.mode} {c.scenario}", c.variant, "n/a", "", "", "", "", "", "", "")
        else:
            table.add_row(f"{c.mode} {c.scenario}", c.variant, c.verdict, c.figure("lost"), c.figure("unread_at_end"),
                          c.figure("overlaps"),
                          c.figure("duplicates"), f"{c.figure('unowned_ms_total')} ({c.figure('unowned_ms_max')})",
                          c.figure("failed_rebalances"), c.figure("claim_conflicts"))
    return table


def run_catalogue(chosen: list[FailureMode], variants: list[str], out: Path, console: Console,
                  master: str | None = None, runs: int = 1) -> list[Cell]:
    """Run each mode's scenario on each variant ``runs`` times (one ``compare`` per mode and run, one Spark
    session for all), print and write the table (catalogue.md, catalogue.json, catalogue.html). With one run a
    mode's runs are under ``out/<scenario>/``, with more under ``out/<scenario>/run-<i>/``."""
    from zkconsumer.analysis.spark import build_session
    from zkconsumer.lab.compare import run_compare

    if runs < 1:
        raise IllegalArgument(f"runs must be >= 1, not {runs}")
    cells: list[Cell] = []
    out.mkdir(parents=True, exist_ok=True)
    session = build_session(master, "zkconsumer-catalogue")
    try:
        for mode in chosen:
            if mode.scenario is None:
                console.print(f"[bold]{mode.key}[/] {mode.title}: no scenario; {mode.elsewhere}", highlight=False)
                continue
            scenario = builtin(mode.scenario)
            runnable: dict[str, Cell] = {}
            for variant in variants:
                why = not_applicable(scenario, variant)
                cell = Cell(mode.key, mode.scenario, variant, not_applicable=why)
                cells.append(cell)
                if not why:
                    runnable[variant] = cell
            for i in range(1, runs + 1) if runnable else ():
                console.rule(f"[bold]failure mode {mode.key}[/]: {mode.title} (scenario {mode.scenario}), "
                             f"run {i} of {runs}")
                where = out / mode.scenario if runs == 1 else out / mode.scenario / f"run-{i}"
                results = run_compare(RunPlan.from_scenario(scenario), where, list(runnable), console,
                                      spark=session)
                for r in results:
                    runnable[r.name].runs.append(RunFigures.of(r))
                _write(cells, out)
            # a variant this machine cannot run (compare skipped it, said why) has no run: no row
            cells = [c for c in cells if c.not_applicable or c.runs or c.scenario != mode.scenario]
    finally:
        session.stop()
    order = {v: i for i, v in enumerate(variants)}
    cells.sort(key=lambda c: ([m.scenario for m in MODES].index(c.scenario), order.get(c.variant, 99)))
    console.print(render(cells))
    _write(cells, out)
    console.print(f"table: {out / 'catalogue.md'}  data: {out / 'catalogue.json'}  page: {out / 'catalogue.html'}",
                  highlight=False)
    return cells


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; vertical-align: top; }
th.mode { text-align: left; font-weight: normal; max-width: 22em; }
td .rate { font-size: 1.15em; font-weight: bold; font-variant-numeric: tabular-nums; }
td.breaks .rate { color: #b00; }
td.holds .rate { color: #070; }
td.na, td.none { color: #888; }
td .broken, td .apart, td .runs { font-size: 0.85em; }
td .broken { color: #b00; }
td .apart { color: #a60; }
.note { color: #555; font-size: 0.9em; max-width: 60em; }
"""


def _rate_cell(cell: Cell | None, link: Callable[[RunFigures], str | None]) -> str:
    """One cell of the page: ``k/N`` with the invariants broken (and in how many runs) under it, each run's
    verdict in the tooltip, a link to each run's report."""
    if cell is None:
        return '<td class="none">-</td>'
    if cell.not_applicable:
        return f'<td class="na" title="{html.escape(cell.not_applicable)}">n/a</td>'
    rate = cell.rate
    if rate is None:
        return '<td class="none">not run</td>'
    tip = "\n".join(f"run {i}: {r.judgement.text}" for i, r in enumerate(cell.runs, 1))
    parts = [f'<span class="rate">{rate.fraction}</span>']
    broken = [f"{i.claim} ({r.broken} of {r.judged})" for i, r in rate.invariants.items() if r.broken]
    if broken:
        parts.append(f'<div class="broken">{"<br>".join(html.escape(b) for b in broken)}</div>')
    apart = [f"{n} {what}" for n, what in ((rate.failed, "failed to run"), (rate.not_analysed, "not analysed")) if n]
    if rate.not_judged:
        apart.append("not judged: " + ", ".join(i.claim for i in rate.not_judged))
    if apart:
        parts.append(f'<div class="apart">{html.escape("; ".join(apart))}</div>')
    links = [(i, link(r)) for i, r in enumerate(cell.runs, 1)]
    if any(href for _, href in links):
        parts.append('<div class="runs">reports: ' + " ".join(
            f'<a href="{html.escape(href)}">{i}</a>' if href else str(i) for i, href in links) + "</div>")
    return (f'<td class="{rate.outcome.value.replace(" ", "-")}" data-rate="{rate.fraction}" '
            f'title="{html.escape(tip)}">{"".join(parts)}</td>')


def page(cells: list[Cell], link: Callable[[RunFigures], str | None] = lambda _: None) -> str:
    """catalogue.html: one row per mode's scenario, one column per variant, each cell ``k/N`` (the runs that broke
    some invariant, of those judged) with the invariants it broke; ``link`` gives a run's report, relative to the
    page (None: no link)."""
    variants = list(dict.fromkeys(c.variant for c in cells))
    scenarios = list(dict.fromkeys(c.scenario for c in cells))
    by = {(c.scenario, c.variant): c for c in cells}
    titles = {m.scenario: m for m in MODES if m.scenario}
    head = "".join(f"<th>{html.escape(v)}</th>" for v in variants)
    rows = []
    for s in scenarios:
        mode = titles.get(s)
        label = f"{mode.key}. {mode.title}" if mode else s
        rows.append(f'<tr data-scenario="{html.escape(s)}"><th class="mode">{html.escape(label)}<br>'
                    f"<code>{html.escape(s)}</code></th>"
                    + "".join(_rate_cell(by.get((s, v)), link) for v in variants) + "</tr>")
    runs = sorted({len(c.runs) for c in cells if c.runs})
    per = "runs per cell: " + (", ".join(map(str, runs)) if runs else "none yet")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>failure catalogue: mode × variant</title>
<style>{_STYLE}</style></head>
<body>
<h1>failure catalogue: mode × variant</h1>
<p class="note">Each cell is k/N: the runs of the mode's scenario on that variant that broke at least one invariant,
of the N that were judged ({html.escape(per)}); under it each invariant broken and in how many runs. Hover a cell
for each run's verdict; hover n/a for why the variant has no counterpart of the scenario's faults. The
mechanisms are read in docs/failure-modes.md.</p>
<table id="catalogue"><thead><tr><th>mode</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>
</body></html>
"""


def _write(cells: list[Cell], out: Path) -> None:
    (out / "catalogue.md").write_text(markdown(cells))
    (out / "catalogue.json").write_text(json.dumps([c.as_json() for c in cells], indent=2))

    def link(run: RunFigures) -> str | None:
        target = Path(run.report) / "report.html" if run.report else None
        return Path(os.path.relpath(target, out)).as_posix() if target is not None and target.is_file() else None

    (out / "catalogue.html").write_text(page(cells, link), encoding="utf-8")

