"""``zkconsumer compare``: one workload with the same churn in ZooKeeper mode (default and kafka-0.8 profiles) and
in coordinator mode, each run analysed on Spark, side by side in one table and one figure.

Every variant is a full lab run (docs/lab.md, "Compare the modes"): its own ZooKeeper, broker, consumer
processes, joins, a graceful stop and a ``kill -9`` at the same moments. The measures come from the Spark
analysis of each run's traces (group rebalance latency, time partitions sit unowned, duplicates, overlaps,
lost records) and from the servers (ZooKeeper packets received, broker requests by API), divided by the number
of group rebalances so that modes with different rebalance counts compare per rebalance.

A measure that means nothing for a variant (its ``Variant.not_applicable``) has no value: "n/a" in the table with
the reason in a footnote, an empty cell in compare.csv, null in compare.json, no bar in the figure. The builders
of those (:func:`table_cells`, :func:`csv_frame`, :func:`json_document`, :func:`figure`) do no I/O. compare.html
(compare_page.py) puts every variant on one time axis above the same table, with a link to each run's report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from zkconsumer.apache_kafka.cluster import KafkaCluster
from zkconsumer.apache_kafka.kraft import KraftBroker
from zkconsumer.apache_kafka.processes import KafkaBroker
from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.compare_page import NoTimeline, Timeline, lab_marks, page
from zkconsumer.lab.faults.scenario_lab import lab_for
from zkconsumer.lab.variants import VARIANTS, Measure, NotApplicable, Variant, unavailable
from zkconsumer.scenario.nemesis import COMMIT_INVARIANTS, Invariant, invariant_counts
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.scenario.properties import merge_properties
from zkconsumer.zk.server import ZooKeeperServer

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Broker APIs that coordinate a group (the rest move records or metadata).
GROUP_APIS = ("FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit",
              "OffsetFetch")

#: (key, label) in the table's order, for callers that read measures by their compare.json key.
MEASURES = [(m.value, m.label) for m in Measure]

#: A cell with no number: not counted (a server the lab did not start, a run not analysed), or not applicable.
NOT_COUNTED = "-"
NOT_APPLICABLE = "n/a"


@dataclass(frozen=True)
class Servers:
    """What a variant's lab runs against: ``zookeeper`` and ``bootstrap`` None when the lab starts its own (with
    zkconsumer's broker); ``cluster`` set when compare started several of Apache Kafka's brokers, whose
    coordinator a scenario kills (``kill-coordinator``)."""

    zookeeper: str | None = None
    bootstrap: str | None = None
    cluster: KafkaCluster | None = None


#: Brokers in the cluster a ``kill-coordinator`` scenario runs on: one can go and two keep every replica.
CLUSTER_SIZE = 3


@contextlib.contextmanager
def _servers(variant: Variant, plan: RunPlan, out: Path) -> Iterator[Servers]:
    """The servers a variant's lab uses: none (the lab starts its own, with zkconsumer's broker), or Apache Kafka's
    broker started here (in a ZooKeeper of its own for 3.x, in KRaft mode for 4.x), three of them replicating
    every internal topic when the scenario kills the group's coordinator."""
    if variant.kafka is None:
        yield Servers()
        return
    settings = plan.group_settings()
    delay = {"group.initial.rebalance.delay.ms": settings.initial_rebalance_delay_ms}
    data_dir = out / f"kafka-{variant.kafka}"
    if any(step.action.on_cluster for step in plan.schedule()):
        with contextlib.ExitStack() as stack:
            zk = None if variant.kraft else stack.enter_context(ZooKeeperServer(servers=1)).connect_string
            props = delay if variant.kraft else {**delay,
                                                 "group.min.session.timeout.ms": settings.min_session_timeout_ms}
            cluster = stack.enter_context(KafkaCluster(variant.kafka, CLUSTER_SIZE, zk, data_dir, props))
            yield Servers(zk, cluster.bootstrap, cluster)
        return
    if variant.kraft:  # no ZooKeeper in Kafka 4: the lab starts its own for its bookkeeping
        with KraftBroker(data_dir=data_dir, version=variant.kafka, properties=delay) as k:
            yield Servers(None, k.bootstrap)
        return
    with ZooKeeperServer(servers=1) as zk, \
            KafkaBroker(zk.connect_string, version=variant.kafka, data_dir=data_dir,
                        properties={**delay, "group.min.session.timeout.ms": settings.min_session_timeout_ms}) as kafka:
        yield Servers(zk.connect_string, kafka.bootstrap)


@dataclass
class VariantResult:
    """One variant's run: its lab summary and its measures by compare.json key. A measure in ``not_applicable``
    is None whatever the run recorded, so no output can show a number that does not measure what its row says."""

    name: str
    summary: dict
    measures: dict
    not_applicable: dict[Measure, NotApplicable] = field(default_factory=dict)
    #: per invariant, the violations the analysis found (0: it holds); None: the run was not analysed
    invariants: dict[Invariant, int] | None = None

    def __post_init__(self) -> None:
        self.measures = {**self.measures, **{m.value: None for m in self.not_applicable}}

    @classmethod
    def of(cls, name: str, summary: dict, measures: dict,
           invariants: dict[Invariant, int] | None = None) -> VariantResult:
        """The result of the variant called ``name``, with the measures its definition says do not apply."""
        return cls(name, summary, measures, dict(VARIANTS[name].not_applicable), invariants)


def _table(report: Path, name: str) -> pd.DataFrame:
    """One analysis table, read back from its Parquet (the CSV flattens nested columns)."""
    path = report / "tables" / f"{name}.parquet"
    if not path.exists():
        return pd.DataFrame()
    return pd.read_parquet(path)


def stop_the_world_ms(trace_dir: Path | str | None) -> int | None:
    """The longest time no member of the group delivered any record, between the first delivery and the last:
    records are produced all along, so a gap is the whole group standing still (an eager rebalance's
    stop-the-world, a session timeout waited out)."""
    if trace_dir is None or not Path(trace_dir).is_dir():
        return None
    stamps = []
    for path in Path(trace_dir).glob("*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            if '"record_delivered"' in line:
                try:
                    stamps.append(json.loads(line)["ts"])
                except (ValueError, KeyError):
                    continue
    stamps.sort()
    return max((b - a for a, b in zip(stamps, stamps[1:], strict=False)), default=0) if stamps else None


def never_readable(summary: dict) -> int | None:
    """A run's records lost for good: never delivered and below their partition's frontier (analysis/unseen.py);
    what is above it was unread when the run ended, a stall, not a loss. A summary from before the split has only
    the total, as ``lost``."""
    return summary.get("lost_never_readable", summary.get("lost"))


def measures_from(summary: dict, report: Path | None) -> dict:
    """The table's measures for one run: the lab summary plus its analysis tables (when analysed)."""
    out: dict = {"lost": never_readable(summary),
                 "unread_at_end": summary.get("unread_at_end"), "verify_ok": summary.get("verify_ok"),
                 "duplicates": summary.get("duplicates"), "failed_rebalances": summary.get("failed_rebalances"),
                 "claim_conflicts": summary.get("claim_conflicts"),  # the catalogue's, not a compare row
                 "stop_the_world_ms": stop_the_world_ms(summary.get("trace_dir"))}
    rebalances = None
    if report is not None:
        grb = _table(report, "group_rebalances")
        unowned = _table(report, "unowned")
        overlaps = _table(report, "overlaps")
        rebalances = len(grb)
        durations = grb["duration_ms"].dropna() if "duration_ms" in grb else pd.Series(dtype=float)
        out["rebalance_ms_p50"] = round(float(durations.median()), 1) if len(durations) else None
        out["rebalance_ms_max"] = round(float(durations.max()), 1) if len(durations) else None
        ms = unowned["unowned_ms"].dropna() if "unowned_ms" in unowned else pd.Series(dtype=float)
        out["unowned_ms_total"] = int(ms.sum()) if len(ms) else 0
        out["unowned_ms_max"] = int(ms.max()) if len(ms) else 0
        out["overlaps"] = len(overlaps)
    else:
        out["rebalance_ms_p50"] = summary.get("rebalance_ms_p50")
        out["rebalance_ms_max"] = summary.get("rebalance_ms_max")
    out["group_rebalances"] = rebalances
    per = max(1, rebalances or summary.get("consumer_rebalances") or 1)
    # Counted on servers the lab started itself: an external ZooKeeper or Apache Kafka's broker shows "-", not 0
    if summary.get("zookeeper_requests") is not None and not summary.get("external_zookeeper"):
        out["zookeeper_requests_per_rebalance"] = round(summary["zookeeper_requests"] / per, 1)
    counts = summary.get("broker_request_counts") or {}
    if counts:
        group_requests = sum(n for name, n in counts.items() if name.removesuffix("Request") in GROUP_APIS)
        out["group_requests_per_rebalance"] = round(group_requests / per, 1)
    return out


@dataclass(frozen=True)
class TableCells:
    """The comparison as text: one row per measure (its label, then a cell per variant) and the footnotes that
    give the reason behind each "n/a [k]" (k numbers the distinct reasons in the order the table meets them)."""

    header: list[str]
    rows: list[list[str]]
    footnotes: list[str]


def table_cells(results: list[VariantResult]) -> TableCells:
    """The table's text, shared by the terminal table and anything else that prints it."""
    reasons: list[NotApplicable] = []
    rows = []
    for m in Measure:
        row = [m.label]
        for r in results:
            why = r.not_applicable.get(m)
            if why is not None:
                if why not in reasons:
                    reasons.append(why)
                row.append(f"{NOT_APPLICABLE} [{reasons.index(why) + 1}]")
            else:
                value = r.measures.get(m.value)
                row.append(NOT_COUNTED if value is None else str(value))
        rows.append(row)
    if any(r.invariants is not None for r in results):
        rows += [[f"invariant: {i.claim}", *(invariant_cell(r, i) for r in results)] for i in Invariant]
    footnotes = [f"[{i}] {', '.join(r.name for r in results if why in r.not_applicable.values())}: {why.value}"
                 for i, why in enumerate(reasons, 1)]
    if any(NOT_COUNTED in row[1:] for row in rows):
        footnotes.append(f"{NOT_COUNTED} not counted: a server the lab did not start itself, or a run not analysed")
    return TableCells(["measure", *(r.name for r in results)], rows, footnotes)


#: The invariants about commits: not judged where the members' commits are not traced.
NOT_JUDGED = "not judged"


def judged(counts: dict[Invariant, int], variant: Variant, never_consumed: int | None = None,
           commits_untraced: bool = False) -> dict[Invariant, int]:
    """The verdicts a run can give. Without its members' commits in the traces (Kafka 0.8.2.2's own consumer, as
    the variant or as some members of a mixed group: ``commits_untraced``), none about commits: a commit the trace
    lacks would make a window look uncommitted, so an absent key reads "not judged", never "holds". "Zero lost"
    counts the lab's own tally too (``never_consumed``: produced, never delivered, and below the partition's
    frontier: skipped by an offset reset or committed past, so never readable by the group), which sees what the
    traces' gaps cannot: a reset to the log end over records nobody read. Records still unread when the run ended
    (a partition nobody had discovered yet, a member that claimed and read nothing) are no loss: compare reports
    them apart ("unread when the run ended"; analysis/unseen.py)."""
    untraced = variant.commits_untraced or commits_untraced
    out = {i: n for i, n in counts.items() if not (untraced and i in COMMIT_INVARIANTS)}
    if never_consumed and Invariant.ZERO_LOST in out:
        out[Invariant.ZERO_LOST] = max(out[Invariant.ZERO_LOST], never_consumed)
    return out


def invariant_cell(result: VariantResult, invariant: Invariant) -> str:
    """``holds``, ``BROKEN (n)`` with the violations found, ``not judged``, or ``-`` for a run not analysed."""
    if result.invariants is None:
        return NOT_COUNTED
    if invariant not in result.invariants:
        return NOT_JUDGED
    n = result.invariants[invariant]
    return f"BROKEN ({n})" if n else "holds"


def render_table(results: list[VariantResult], title: str) -> Table:
    cells = table_cells(results)
    # Text, not markup: "[1]" is a footnote mark, not a style
    table = Table(title=title, caption=Text("\n".join(cells.footnotes)) if cells.footnotes else None,
                  caption_justify="left")
    table.add_column(cells.header[0])
    for name in cells.header[1:]:
        table.add_column(name, justify="right")
    for row in cells.rows:
        table.add_row(*(Text(c) for c in row))
    return table


def csv_frame(results: list[VariantResult]) -> pd.DataFrame:
    """compare.csv: a row per measure, a column per variant; no number (not counted, n/a) is an empty cell."""
    rows = [{"measure": m.label, **{r.name: r.measures.get(m.value) for r in results}} for m in Measure]
    if any(r.invariants is not None for r in results):  # violations found: 0 holds, empty not judged
        rows += [{"measure": f"invariant: {i.claim}",
                  **{r.name: None if r.invariants is None else r.invariants.get(i) for r in results}}
                 for i in Invariant]
    return pd.DataFrame(rows)


def json_document(results: list[VariantResult]) -> dict[str, Any]:
    """compare.json: per variant its measures (null where there is no number), why the null ones that do not apply
    do not, and the lab summary."""
    return {r.name: {"measures": r.measures,
                     "not_applicable": {m.value: why.value for m, why in r.not_applicable.items()},
                     "invariants": None if r.invariants is None else {i.value: n for i, n in r.invariants.items()},
                     "summary": r.summary}
            for r in results}


def figure(results: list[VariantResult]) -> Figure:
    """One bar chart per numeric measure, the variants side by side. A variant without a number gets no bar but
    "n/a" or "-" where it would stand; a panel whose measure is 0 in every variant says so rather than drawing
    empty axes around 0."""
    from zkconsumer.analysis import plots  # matplotlib with the Agg backend

    plt = plots.plt
    measures = [m for m in Measure if m is not Measure.VERIFY_OK]
    cols = 3
    rows = (len(measures) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(4.2, 0.75 * len(results) + 1.5) * cols, 3.4 * rows))
    names = [r.name for r in results]
    for ax, m in zip(axes.flat, measures, strict=False):
        values = [r.measures.get(m.value) for r in results]
        measured = [v for v in values if v is not None]
        if not measured:
            plots._empty(ax, f"{NOT_APPLICABLE} in every variant"
                         if all(m in r.not_applicable for r in results) else "no data")
        elif not any(measured):
            plots._empty(ax, "0 in every variant" + ("" if len(measured) == len(values) else " measured"))
        else:
            at = [i for i, v in enumerate(values) if v is not None]
            # one colour per variant, the same in every panel (tab10 has ten)
            ax.bar(at, [values[i] for i in at], color=[plt.cm.tab10(i % 10) for i in at])
            for i, r in enumerate(results):
                if values[i] is None:  # x in data, y in axes: the mark sits on the baseline whatever the scale
                    ax.text(i, 0.02, NOT_APPLICABLE if m in r.not_applicable else NOT_COUNTED, ha="center",
                            va="bottom", fontsize=7, color="grey", transform=ax.get_xaxis_transform())
            ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
            ax.set_xlim(-0.6, len(names) - 0.4)  # every variant's slot, with or without a bar
        ax.set_title(m.label, fontsize=9)
    for ax in list(axes.flat)[len(measures):]:
        ax.axis("off")
    return fig


def timeline_of(result: VariantResult, report: Path | None, out: Path) -> Timeline:
    """A variant's row of compare.html, read from its run: the activity table of its analysis, the lab's actions
    (``lab.jsonl``), the lab's start and end, and its report.html as a link relative to ``out`` (where
    compare.html is)."""
    activity, missing = None, None
    if report is None:
        missing = NoTimeline.NOT_ANALYSED
    elif (report / "tables" / "activity.parquet").exists():
        activity = _table(report, "activity")
    else:
        missing = NoTimeline.NO_TABLE
    trace_dir = result.summary.get("trace_dir")
    lab_trace = Path(trace_dir) / "lab.jsonl" if trace_dir else None
    marks = lab_marks(lab_trace.read_text(errors="replace").splitlines()) if lab_trace and lab_trace.is_file() \
        else []
    page_path = report / "report.html" if report is not None else None
    link = Path(os.path.relpath(page_path, out)).as_posix() if page_path is not None and page_path.is_file() \
        else None
    return Timeline(result.name, activity, tuple(marks), result.summary.get("started_ms"), link, missing,
                    result.summary.get("ended_ms"))


def write_page(results: list[VariantResult], reports: dict[str, Path | None], title: str, path: Path) -> Path:
    """compare.html: :func:`compare_page.page` on each variant's :func:`timeline_of`, written."""
    cells = table_cells(results)
    timelines = [timeline_of(r, reports.get(r.name), path.parent) for r in results]
    path.write_text(page(title, timelines, cells.header, cells.rows, cells.footnotes), encoding="utf-8")
    return path


def plot(results: list[VariantResult], path: Path) -> Path:
    """compare.png: :func:`figure`, written."""
    from zkconsumer.analysis import plots  # matplotlib: loaded only when a figure is drawn

    return plots._save(figure(results), path)


def run_compare(plan: RunPlan, out: Path, variants: list[str], console: Console, analyze: bool = True,
                master: str | None = None, spark=None) -> list[VariantResult]:
    """Run each variant's lab, analyse each run (on ``spark`` if given, else a session of its own), print and
    write the comparison. ``variants`` may be ``["all"]``; a variant this machine cannot run (Kafka's jars and no
    Maven) is skipped with one line saying why."""
    if variants == ["all"]:
        variants = list(VARIANTS)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise IllegalArgument(f"unknown variants {unknown}; choose from all, {', '.join(VARIANTS)}")
    reasons = {v: unavailable(v) for v in variants}
    for reason in filter(None, reasons.values()):
        console.print(f"[yellow]skipped[/] {reason}", highlight=False)
    variants = [v for v in variants if reasons[v] is None]
    if not variants:
        console.print("nothing to compare on this machine", highlight=False)
        return []
    summaries: dict[str, dict] = {}
    for name in variants:
        variant = VARIANTS[name]
        what = f"scenario {plan.scenario.name}" if plan.scenario is not None else f"workload {plan.workload}"
        console.rule(f"[bold]compare: {name}[/] ({variant.about}, {what})")
        run_plan = dataclasses.replace(plan, mode=variant.mode, profile=variant.profile,
                                       strategy=variant.strategy or plan.strategy,
                                       static_members=variant.static_members, client=variant.client,
                                       properties=merge_properties(plan.properties, variant.properties),
                                       absent=variant.absent())
        with _servers(variant, run_plan, out / name) as servers:
            lab = lab_for(run_plan, out / name, zookeeper=servers.zookeeper, bootstrap=servers.bootstrap,
                          console=console, cluster=servers.cluster)
            summary = lab.run()
        summary["broker_request_counts"] = lab.requests.get("broker", {})
        summary["external_zookeeper"] = servers.zookeeper is not None
        summaries[name] = summary
    reports: dict[str, Path | None] = {name: None for name in variants}
    verdicts: dict[str, dict[Invariant, int] | None] = {name: None for name in variants}
    if analyze:
        from zkconsumer.analysis.pipeline import run_analysis
        from zkconsumer.analysis.spark import build_session

        session = spark or build_session(master, "zkconsumer-compare")
        try:
            for name in variants:
                console.rule(f"[bold]analysis: {name}")
                report = out / name / "report"
                analysed = run_analysis(session, summaries[name]["trace_dir"], report, console)
                reports[name] = report
                verdicts[name] = judged(invariant_counts(analysed.invariants), VARIANTS[name],
                                        never_readable(summaries[name]), bool(summaries[name].get("commits_untraced")))
        finally:
            if spark is None:
                session.stop()
    results = [VariantResult.of(n, summaries[n], measures_from(summaries[n], reports[n]), verdicts[n])
               for n in variants]
    what = f"scenario {plan.scenario.name}" if plan.scenario is not None else f"workload {plan.workload}"
    title = f"{what}, {plan.consumers} consumers, {plan.duration:.0f}s"
    table = render_table(results, title)
    console.print(table)
    for r in results:  # a scenario's action with no counterpart in a variant (compare.json: summary.not_applicable)
        for line in r.summary.get("not_applicable") or ():
            console.print(f"[yellow]n/a[/] {r.name}: {escape(line)}")
    png = plot(results, out / "compare.png")
    csv_frame(results).to_csv(out / "compare.csv", index=False)
    (out / "compare.json").write_text(json.dumps(json_document(results), indent=2, default=str))
    html_page = write_page(results, reports, title, out / "compare.html")
    console.print(f"table: {out / 'compare.csv'}  figure: {png}  page: {html_page}  reports: "
                  + ", ".join(str(p) for p in reports.values() if p is not None), highlight=False)
    return results
