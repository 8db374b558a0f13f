"""The failure catalogue (docs/failure-modes.md): each known failure of the 0.8 design as a shipped scenario, run on
every protocol generation where it has a counterpart, judged by the analysis' invariants.

The modes are data (:data:`MODES`: the issue's a to k, each with the public reports it comes from and the
scenario that reproduces it); :func:`run_catalogue` runs each mode's scenario through ``compare`` on the variants
asked for and writes one table, mode × variant: each invariant's verdict, duplicates, two live owners, partition-time
unowned and rebalances given up (``catalogue.md``, ``catalogue.json``). A variant where none of a scenario's faults
has a counterpart (a ZooKeeper cut for a coordinator member) is not run: its cell says n/a and why. The sentence on
the mechanism seen in the traces is a reading, written in docs/failure-modes.md, not computed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.nemesis import Invariant
from zkconsumer.lab.runner import LabPlan
from zkconsumer.lab.scenario import Scenario, builtin
from zkconsumer.lab.variants import VARIANTS

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
class Cell:
    """One mode on one variant: its figures, or why it was not run."""

    mode: str
    scenario: str
    variant: str
    not_applicable: str | None = None
    invariants: dict[str, int] | None = None
    duplicates: int | None = None
    overlaps: int | None = None
    unowned_ms_total: int | None = None
    unowned_ms_max: int | None = None
    failed_rebalances: int | None = None
    lost: int | None = None
    report: str | None = None

    @property
    def verdict(self) -> str:
        """``all hold``, the invariants broken with their counts, ``n/a`` or ``not analysed``."""
        if self.not_applicable:
            return "n/a"
        if self.invariants is None:
            return "not analysed"
        broken = [f"{Invariant(k).claim} ({n})" for k, n in self.invariants.items() if n]
        unjudged = [Invariant(i).claim for i in Invariant if i.value not in self.invariants]
        verdict = "BROKEN: " + "; ".join(broken) if broken else "all hold" if not unjudged else "the rest hold"
        return verdict + (f" (not judged: {', '.join(unjudged)})" if unjudged else "")

    @classmethod
    def of(cls, mode: FailureMode, result: VariantResult) -> Cell:
        m = result.measures
        return cls(mode.key, mode.scenario or "", result.name,
                   invariants=None if result.invariants is None else
                   {i.value: n for i, n in result.invariants.items()},
                   duplicates=m.get("duplicates"), overlaps=m.get("overlaps"),
                   unowned_ms_total=m.get("unowned_ms_total"), unowned_ms_max=m.get("unowned_ms_max"),
                   failed_rebalances=m.get("failed_rebalances"), lost=m.get("lost"),
                   report=str(Path(result.summary.get("trace_dir", ".")).parent / "report"))


def markdown(cells: list[Cell]) -> str:
    """catalogue.md: one row per mode and variant."""
    lines = ["| mode | scenario | variant | invariants | records lost | two live owners | duplicates | partition-time "
             "unowned (ms, longest) | rebalances given up |", "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if c.not_applicable:
            lines.append(f"| {c.mode} | `{c.scenario}` | `{c.variant}` | n/a: {c.not_applicable} | | | | | |")
            continue
        lines.append(f"| {c.mode} | `{c.scenario}` | `{c.variant}` | {c.verdict} | {_n(c.lost)} | {_n(c.overlaps)} | "
                     f"{_n(c.duplicates)} | {_n(c.unowned_ms_total)} ({_n(c.unowned_ms_max)}) | "
                     f"{_n(c.failed_rebalances)} |")
    return "\n".join(lines) + "\n"


def _n(value: object) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def render(cells: list[Cell]) -> Table:
    table = Table(title="failure catalogue: mode × variant")
    for column in ("mode", "variant", "invariants", "lost", "two owners", "duplicates", "unowned ms (longest)",
                   "given up"):
        table.add_column(column)
    for c in cells:
        if c.not_applicable:
            table.add_row(f"{c.mode} {c.scenario}", c.variant, "n/a", "", "", "", "", "")
        else:
            table.add_row(f"{c.mode} {c.scenario}", c.variant, c.verdict, _n(c.lost), _n(c.overlaps),
                          _n(c.duplicates), f"{_n(c.unowned_ms_total)} ({_n(c.unowned_ms_max)})",
                          _n(c.failed_rebalances))
    return table


def run_catalogue(chosen: list[FailureMode], variants: list[str], out: Path, console: Console,
                  master: str | None = None) -> list[Cell]:
    """Run each mode's scenario on each variant (one ``compare`` per mode, one Spark session for all), print and
    write the table."""
    from zkconsumer.analysis.spark import build_session
    from zkconsumer.lab.compare import run_compare

    cells: list[Cell] = []
    out.mkdir(parents=True, exist_ok=True)
    session = build_session(master, "zkconsumer-catalogue")
    try:
        for mode in chosen:
            if mode.scenario is None:
                console.print(f"[bold]{mode.key}[/] {mode.title}: no scenario; {mode.elsewhere}", highlight=False)
                continue
            scenario = builtin(mode.scenario)
            runnable = []
            for variant in variants:
                why = not_applicable(scenario, variant)
                if why:
                    cells.append(Cell(mode.key, mode.scenario, variant, not_applicable=why))
                else:
                    runnable.append(variant)
            if runnable:
                console.rule(f"[bold]failure mode {mode.key}[/]: {mode.title} (scenario {mode.scenario})")
                results = run_compare(LabPlan.from_scenario(scenario), out / mode.scenario, runnable, console,
                                      spark=session)
                cells += [Cell.of(mode, r) for r in results]
            _write(cells, out)
    finally:
        session.stop()
    order = {v: i for i, v in enumerate(variants)}
    cells.sort(key=lambda c: ([m.scenario for m in MODES].index(c.scenario), order.get(c.variant, 99)))
    console.print(render(cells))
    _write(cells, out)
    console.print(f"table: {out / 'catalogue.md'}  data: {out / 'catalogue.json'}", highlight=False)
    return cells


def _write(cells: list[Cell], out: Path) -> None:
    (out / "catalogue.md").write_text(markdown(cells))
    (out / "catalogue.json").write_text(json.dumps([c.__dict__ | {"verdict": c.verdict} for c in cells], indent=2))

