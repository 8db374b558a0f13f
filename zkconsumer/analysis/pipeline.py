"""``analyze``: trace directory → tables (Parquet + CSV), PNG plots, report.md / report.html.

The stages print one progress line each. Tables are written first and the report reads back only
previews and small aggregates, so the driver never holds a whole trace.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

from zkconsumer.analysis import consumers as consumers_mod
from zkconsumer.analysis import interactive, lanes, plots
from zkconsumer.analysis.activity import activity
from zkconsumer.analysis.invariants import InvariantCounts, compute_invariants, count_invariants
from zkconsumer.analysis.partitions import analyze_partitions, stints
from zkconsumer.analysis.progress import Stages
from zkconsumer.analysis.rebalances import analyze_rebalances, split_tp
from zkconsumer.analysis.report import PREVIEW_ROWS, Report, Written
from zkconsumer.analysis.tables import TableWriter
from zkconsumer.analysis.traces import TraceSet, is_small, read_traces

BAD_LINES_SHOWN = 20

DESCRIPTIONS = {
    "group_rebalances": "one row per group rebalance: start, end (final assignment fully owned), duration, "
                        "attempts, failed claims, partitions moved, unowned time",
    "consumer_rebalances": "one row per consumer rebalance (consumer, rebalance number) and its group rebalance",
    "unowned": "per group rebalance and partition: how long the partition had no owner before its new owner",
    "ownership": "ownership timeline: partition, consumer, thread, owned_from, owned_to, why it ended",
    "partitions": "per partition: deliveries, committed offset, duplicates, lost offsets, overlaps, owners",
    "duplicates": "one row per extra delivery of an offset, with the group rebalance during/after which it happened "
                  "and whether it was inside an uncommitted window (offset >= the commit before it)",
    "lost_offsets": "offset ranges never delivered: below the highest commit, or gaps between delivered offsets",
    "overlaps": "two consumers delivering the same partition at the same time (delivery intervals intersect)",
    "stints": "per partition and consumer, delivery intervals between the consumer's rebalances (or session "
              "expirations)",
    "consumers": "per consumer: records, rebalances joined, time spent rebalancing, bad lines",
    "offset_resets": "offset out of range: the consumer reset its position (auto.offset.reset) from from_offset "
                     "to to_offset and consumed and committed from there",
    "bad_lines": "malformed trace lines: file, line number, reason, text",
    "duplicates_committed": "invariant: duplicates of an offset a commit had already covered when it was delivered "
                            "again (should be empty)",
    "commits_backwards": "invariant: commits below an earlier commit of the partition and store (should be empty)",
    "reowned": "invariant: per fault heal and partition, its owner at heal + session timeout + 1 s (null: none)",
    "faults": "the lab's faults: injected, healed, deadline, partitions unowned at it, latest re-own after the heal",
    "activity": "per group and time bucket (ts: its start; 1 s, wider for long traces): deliveries, records per "
                "second, partitions owned and unowned (of the group's known ones) at the bucket's end",
}


def offset_resets(events: DataFrame) -> DataFrame:
    """Every ``offset_reset`` line: where a committed position was out of the log's range and was reset."""
    return (events.where(F.col("event") == "offset_reset")
            .select("group", "consumer", "ts", "topic", "partition", "from_offset", "to_offset", "reset")
            .orderBy("group", "topic", "partition", "ts"))


@dataclass
class AnalysisResult(Written):
    """An analysis' outputs, with the trace lines it read (``bad_lines``: the malformed ones it skipped)."""

    bad_lines: int = 0
    lines: int = 0
    summary: dict[str, int] = field(default_factory=dict)
    stages: list[tuple[str, float, str]] = field(default_factory=list)
    invariants: InvariantCounts = field(default_factory=InvariantCounts)


def _pdf(df: DataFrame, limit: int | None = None) -> pd.DataFrame:
    return (df.limit(limit) if limit else df).toPandas()


def _written(writer: TableWriter, name: str, df: DataFrame, limit: int | None = None) -> pd.DataFrame:
    """The first rows of a written table: from the copy the writer collected, else from Spark."""
    table = writer.tables.get(name)
    if table is None:
        return _pdf(df, limit)
    return (table.slice(0, limit) if limit else table).to_pandas()


def print_bad_lines(console: Console, ts: TraceSet) -> pd.DataFrame:
    shown = _pdf(ts.bad, BAD_LINES_SHOWN)
    for r in shown.itertuples(index=False):
        console.print(f"[yellow]bad line[/] {r.file}:{r.line}: {r.reason}", highlight=False, soft_wrap=True)
    if ts.bad_count > len(shown):
        console.print(f"[yellow]… and {ts.bad_count - len(shown)} more bad lines[/] (tables/bad_lines.csv)",
                      highlight=False)
    return shown


#: A trace this short (a lab run's) is analysed with one shuffle partition: its per-task and per-stage costs,
#: not its data, are what takes time.
SMALL_TRACE_LINES = 200_000
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: Adaptive execution runs every shuffle stage as a job of its own so it can re-plan from the stage's size; with
#: one shuffle partition there is nothing to re-plan, and a lab-sized trace paid ~75 extra jobs for it.
ADAPTIVE = "spark.sql.adaptive.enabled"
#: Expressions evaluated by their interpreted form: compiling generated Java code (Janino) for every projection,
#: filter and ordering cost a cold JVM ~2.5 s of a small trace's analysis, for a few thousand rows (tables
#: unchanged: Spark's interpreted and generated forms of an expression agree).
CODEGEN_FACTORY = "spark.sql.codegen.factoryMode"


def run_analysis(spark: SparkSession, trace_dir: str, out_dir: str | Path, console: Console,
                 from_zero: bool = False, max_plot_partitions: int = 48, csv: bool = True,
                 keep_work: bool = False, plots_and_report: bool = True, narrow_small: bool = True) -> AnalysisResult:
    """The whole analysis; ``plots_and_report=False`` stops after the tables (the fault matrix's verdicts).

    ``narrow_small``: a trace under SMALL_TRACE_LINES runs with one shuffle partition and without adaptive
    execution, and one under SMALL_TRACE_BYTES on a local disk with interpreted expressions (False keeps the
    session's settings, e.g. ones the user chose); the session's settings are restored afterwards."""
    saved = {key: spark.conf.get(key) for key in (SHUFFLE_PARTITIONS, ADAPTIVE, CODEGEN_FACTORY)}
    try:
        return _analyse(spark, trace_dir, out_dir, console, from_zero, max_plot_partitions, csv, keep_work,
                        plots_and_report, narrow_small)
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)


def _analyse(spark: SparkSession, trace_dir: str, out_dir: str | Path, console: Console, from_zero: bool,
             max_plot_partitions: int, csv: bool, keep_work: bool, plots_and_report: bool,
             narrow_small: bool) -> AnalysisResult:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    st = Stages(console, spark)
    res = AnalysisResult(out)
    writer = TableWriter(out, csv=csv, local=True)

    small = is_small(trace_dir)  # one look at the trace's files for both uses
    if narrow_small and small:
        spark.conf.set(CODEGEN_FACTORY, "NO_CODEGEN")
    with st.stage("read traces") as note:
        work = out / "_work"
        ts = read_traces(spark, trace_dir, work, in_memory=small)
        res.bad_lines, res.lines = ts.bad_count, ts.lines
        note.append(f"{ts.files} files, {ts.lines:,} lines, {ts.bad_count:,} bad")
        if narrow_small and ts.lines < SMALL_TRACE_LINES:
            spark.conf.set(SHUFFLE_PARTITIONS, "1")
            spark.conf.set(ADAPTIVE, "false")
    bad_preview = print_bad_lines(console, ts) if ts.bad_count else pd.DataFrame()

    with st.stage("consumers (events)") as note:
        # a stint ends at the consumer's next rebalance or when its ZooKeeper session expired (its owner nodes went
        # with it; a bridged member claims them again without a rebalance of its own), and a partition's when the
        # consumer released it
        dones = ts.control().where(F.col("event").isin("rebalance_done", "session_expired")).select(
            "group", "consumer", "seq")
        releases = ts.control().where(F.col("event") == "released").select(
            "group", "consumer", "seq", F.explode("parts").alias("_tp")).select(
            "group", "consumer", "seq", *split_tp("_tp"))
        runs = stints(ts.deliveries(), dones, releases).localCheckpoint(eager=True)
        base = consumers_mod.basics(ts.rest(), runs).localCheckpoint(eager=True)
        n_consumers = base.count()
        note.append(f"{n_consumers} consumers")
    with st.stage("rebalances") as note:
        rb = analyze_rebalances(ts.control(), base, ts.rest())
        n_rb = rb.group_rebalances.count()
        note.append(f"{n_rb} group rebalances")
    with st.stage("partitions") as note:
        pt = analyze_partitions(ts.deliveries(), ts.rest(), runs, rb.group_rebalances, rb.ownership,
                                from_zero=from_zero)
        sums = pt.partitions.agg(
            F.count("*").alias("partitions"), F.sum("duplicate_deliveries").alias("duplicates"),
            F.sum("lost_below_committed").alias("lost_below_committed"), F.sum("lost_gap").alias("lost_gap"),
            F.sum("overlaps").alias("overlaps"), F.sum("deliveries").alias("deliveries")).first()
        res.summary = {k: int(v or 0) for k, v in sums.asDict().items()}
        n = ts.event_counts
        resets = offset_resets(ts.rest())
        resets = resets.cache() if n["offset_reset"] else resets.limit(0)
        res.summary.update(consumers=n_consumers, group_rebalances=n_rb, offset_resets=n["offset_reset"],
                           duplicates_of_committed=pt.duplicates.where(~F.col("inside_uncommitted")).count()
                           if res.summary["duplicates"] else 0)
        note.append(", ".join(f"{k} {v:,}" for k, v in res.summary.items() if k != "consumers"))
    with st.stage("invariants") as note:
        inv = compute_invariants(ts.rest(), ts.lab_events, rb.ownership, pt.duplicates, pt.partitions,
                                 heals=n["fault_healed"] > 0, injected=n["fault_injected"] > 0,
                                 duplicates=res.summary["duplicates"] > 0)
        res.invariants = count_invariants(res.summary, inv)
        note.append("all hold" if res.invariants.ok else "; ".join(res.invariants.violations()))
    with st.stage("write tables") as note:
        cons = consumers_mod.consumer_table(base, rb.consumer_rebalances, ts.bad, pt.stints)
        known = {"duplicates": res.summary["duplicates"], "overlaps": res.summary["overlaps"],
                 "offset_resets": res.summary["offset_resets"], "bad_lines": ts.bad_count,
                 "duplicates_committed": res.invariants.duplicates_committed,
                 "commits_backwards": res.invariants.commits_backwards, "lost_offsets": pt.lost_ranges}
        # the activity over time is for the report and the compare page: verdict-only runs skip it
        act = activity(ts.deliveries(), ts.rest(), rb.ownership)
        over_time = [("activity", act)] if plots_and_report else []
        for name, df in [("group_rebalances", rb.group_rebalances), ("consumer_rebalances", rb.consumer_rebalances),
                         ("unowned", rb.unowned), ("ownership", rb.ownership), ("partitions", pt.partitions),
                         ("duplicates", pt.duplicates), ("lost_offsets", pt.lost), ("overlaps", pt.overlaps),
                         ("stints", pt.stints), ("consumers", cons), ("offset_resets", resets),
                         ("bad_lines", ts.bad), ("duplicates_committed", inv.duplicates_committed),
                         ("commits_backwards", inv.commits_backwards), ("reowned", inv.reowned),
                         ("faults", inv.faults), *over_time]:
            res.tables[name] = writer.write(name, df, DESCRIPTIONS[name], rows=known.get(name)).rows
        note.append(f"{len(res.tables)} tables → {out / 'tables'}")
    if not plots_and_report:
        res.seconds, res.stages = st.total, st.timings
        _release(spark, work, keep_work)
        return res
    with st.stage("plots") as note:
        img = out / "img"
        grb = _written(writer, "group_rebalances", rb.group_rebalances)
        owners = _written(writer, "ownership", rb.ownership)
        dup_counts = _pdf(pt.duplicates.groupBy("group", "rebalance_id").agg(F.count("*").alias("duplicates"))
                          .orderBy("group", F.col("rebalance_id").asc_nulls_first()))
        res.plots = [plots.ownership_timeline(owners, grb, img / "ownership.png", max_plot_partitions),
                     plots.duration_cdf(grb, img / "rebalance_duration_cdf.png"),
                     plots.duplicates_per_rebalance(dup_counts, img / "duplicates_per_rebalance.png")]
        note.append(f"{len(res.plots)} PNG → {img}")
    with st.stage("timeline") as note:
        timeline = _timeline(ts, owners, grb, _written(writer, "activity", act), max_plot_partitions)
        note.append(f"{len(timeline.figure.data)} traces" + (f"; {timeline.capped}" if timeline.capped else ""))
    with st.stage("report") as note:
        rep = build_report(trace_dir, ts, res, writer, st, bad_preview, grb, timeline, {
            "partitions": _written(writer, "partitions", pt.partitions, PREVIEW_ROWS),
            "duplicates": _written(writer, "duplicates", pt.duplicates, PREVIEW_ROWS),
            "lost_offsets": _written(writer, "lost_offsets", pt.lost, PREVIEW_ROWS),
            "overlaps": _written(writer, "overlaps", pt.overlaps, PREVIEW_ROWS),
            "offset_resets": _written(writer, "offset_resets", resets, PREVIEW_ROWS),
            "consumers": _written(writer, "consumers", cons, 50)})
        res.report_md, res.report_html = rep.write(out)
        note.append(f"{res.report_md.name}, {res.report_html.name}")
    res.seconds = st.total
    res.stages = st.timings
    _release(spark, work, keep_work)
    return res


@dataclass
class Timeline:
    """The report's interactive figure and, when the lanes show only part of the trace, a sentence saying so."""

    figure: go.Figure
    capped: str = ""


def _timeline(ts: TraceSet, owners: pd.DataFrame, grb: pd.DataFrame, act: pd.DataFrame,
              max_partitions: int) -> Timeline:
    """The interactive timeline from the written tables and the capped lane and lab events."""
    lane_rows, lab_rows = lanes.timeline_events(ts.control(), ts.lab_events)
    total = sum(ts.event_counts.get(e, 0) for e in interactive.LANE_EVENTS)
    capped = (f"the member lanes show the first {len(lane_rows):,} of {total:,} events"
              if total > len(lane_rows) else "")
    return Timeline(interactive.timeline(owners, grb, lane_rows, lab_rows, act, max_partitions), capped)


def _release(spark: SparkSession, work: Path, keep_work: bool) -> None:
    """Drop this run's cached tables (a long-lived session — compare, the soak, the fault matrix, the tests —
    analyses run after run, and the driver's heap must not keep every earlier one) and its staging files."""
    spark.catalog.clearCache()
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)


def _ms_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Epoch-ms columns as UTC times for reading; durations stay in ms."""
    out = df.copy()
    for c in out.columns:
        if c in ("ts", "start", "end", "claims_done", "first_ts", "last_ts") or c.endswith("_ts") or c in (
                "owned_from", "owned_to", "overlap_from", "overlap_to"):
            out[c] = pd.to_datetime(out[c], unit="ms", utc=True).dt.strftime("%H:%M:%S.%f").str[:-3]
    return out


def _see_table(r: Report, name: str) -> str:
    """`` (name.csv)``, linked to the table that lists the rows behind a count or a verdict."""
    return r.see(f"{name}.csv", f"tables/{name}.csv")


def invariant_bullets(r: Report, inv: InvariantCounts) -> list[str]:
    """One line per invariant: what it claims, "holds" or "**broken**" with the count, then the table of its
    violations in brackets. Built in one place so every verdict is set apart from its link the same way."""

    def verdict(claim: str, broken: str | None, table: str, context: str = "") -> str:
        return (f"{claim}: {context}{'holds' if broken is None else f'**broken**: {broken}'}"
                + _see_table(r, table))

    faults = f"{len(inv.faults)} faults, " if inv.faults else "no fault in this run, "
    return [
        verdict("zero records lost", f"{inv.lost:,} lost" if inv.lost else None, "lost_offsets"),
        verdict("never two live owners", f"{inv.overlaps:,} overlaps" if inv.overlaps else None, "overlaps"),
        verdict("every duplicate inside an uncommitted window",
                f"{inv.duplicates_committed:,} duplicates of committed records" if inv.duplicates_committed
                else None, "duplicates_committed"),
        verdict("no committed offset moving back",
                f"{inv.commits_backwards:,} commits" if inv.commits_backwards else None, "commits_backwards"),
        verdict("every partition owned again within session timeout + 1 s of a fault healing",
                f"{inv.unowned_after_heal:,} partitions unowned" if inv.unowned_after_heal else None, "faults",
                context=faults),
    ]


def build_report(trace_dir: str, ts: TraceSet, res: AnalysisResult, writer: TableWriter, st: Stages,
                 bad: pd.DataFrame, grb: pd.DataFrame, timeline: Timeline,
                 previews: dict[str, pd.DataFrame]) -> Report:
    r = Report("zkconsumer trace analysis")
    s = res.summary
    r.p(f"Input: `{trace_dir}` — {ts.files} files, {ts.lines:,} lines, {ts.valid:,} valid events, "
        f"{ts.bad_count:,} malformed lines. Times are UTC.")
    r.bullets([
        f"{s.get('consumers', 0)} consumers, {s.get('group_rebalances', 0)} group rebalances, "
        f"{s.get('partitions', 0)} partitions, {s.get('deliveries', 0):,} deliveries",
        f"duplicates: {s.get('duplicates', 0):,} extra deliveries" + _see_table(r, "duplicates"),
        f"lost: {s.get('lost_below_committed', 0):,} offsets below the committed offset, "
        f"{s.get('lost_gap', 0):,} in gaps above it" + _see_table(r, "lost_offsets"),
        f"overlap: {s.get('overlaps', 0):,} pairs of consumers delivering a partition at the same time"
        + _see_table(r, "overlaps"),
        f"offset resets: {s.get('offset_resets', 0):,} (a committed offset out of the log's range, reset by "
        "auto.offset.reset)" + _see_table(r, "offset_resets"),
    ])
    r.h2("Invariants")
    r.bullets(invariant_bullets(r, res.invariants))
    if ts.bad_count:
        r.h2("Malformed lines")
        r.p(f"{ts.bad_count:,} lines could not be used; they were skipped and are listed in "
            + r.link("bad_lines.csv", "tables/bad_lines.csv") + " (first ones below).")
        r.table(bad.assign(where=bad["file"] + ":" + bad["line"].astype(str))[["where", "reason", "text"]])
    r.h2("Group rebalances")
    cols = ["group", "rebalance_id", "start", "end", "duration_ms", "consumers", "attempts", "failed_claims",
            "partitions_moved", "partitions_unowned", "max_unowned_ms", "causes"]
    r.table(_ms_columns(grb[cols].head(50)) if len(grb) else grb,
            "End is when the final assignment was fully owned (the last rebalance_done). "
            + r.link("group_rebalances.csv", "tables/group_rebalances.csv"))
    r.image("img/rebalance_duration_cdf.png", "Group rebalance duration CDF")
    r.image("img/duplicates_per_rebalance.png", "Records delivered again, per group rebalance")
    r.h2("Partition ownership")
    r.figure(timeline.figure, "img/ownership.png", "Ownership timeline per partition",
             "Ownership per partition (hover a bar: owner, thread, interval, the group rebalance that gave it), each "
             "member's lane (rebalance attempts, backoffs, failed claims, session events), the lab's steps and "
             "faults (vertical lines) and records per second, on one time axis (UTC): drag to zoom, double-click "
             "to zoom out, click a legend entry to hide it." + (f" Note: {timeline.capped}." if timeline.capped
                                                               else ""))
    r.h2("Partitions")
    r.table(previews["partitions"], r.link("partitions.csv", "tables/partitions.csv"))
    for name, title in [("duplicates", "Duplicates"), ("lost_offsets", "Lost offsets"), ("overlaps", "Overlaps"),
                        ("offset_resets", "Offset resets")]:
        r.h2(title)
        r.table(_ms_columns(previews[name]), f"First {PREVIEW_ROWS} rows of "
                + r.link(f"{name}.csv", f"tables/{name}.csv") + f" ({res.tables.get(name, 0):,} rows)")
    r.h2("Consumers")
    r.table(_ms_columns(previews["consumers"]), r.link("consumers.csv", "tables/consumers.csv"))
    r.h2("Tables")
    r.bullets([f"**{t.name}** ({t.rows:,} rows): {t.description} — "
               + r.link("CSV", t.csv) + ", " + r.link("Parquet", t.parquet) for t in writer.written])
    r.h2("Stages")
    r.bullets([f"{name}: {took:.2f} s {('— ' + note) if note else ''}" for name, took, note in st.timings])
    return r
