"""The settings grid's results (``zkconsumer sim --grid``, sim/grid.py): rows of seeds → rates per point, heatmaps,
report.md / report.html.

The rows are Parquet (``tables/grid_results.parquet``, one row a seed at a point of a profile); everything here
reads them back with Spark, so a grid run elsewhere (a cluster's ``--out``) is reported the same way by
``zkconsumer analyze GRID_DIR --out REPORT_DIR``. Rates, never one run's word: each cell of a heatmap says "k of
N" seeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import pandas as pd  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from rich.console import Console  # noqa: E402

from zkconsumer.analysis.progress import Stages  # noqa: E402
from zkconsumer.analysis.report import Report, Written  # noqa: E402
from zkconsumer.analysis.tables import TableWriter  # noqa: E402
from zkconsumer.errors import ZkConsumerError  # noqa: E402

#: the table of seeds, under ``tables/``
RESULTS = "grid_results"
#: the judged invariants' columns, as sim/grid.py writes them, with what a breach of each means
INVARIANTS = {
    "lost": "records lost", "overlaps": "two live owners", "duplicates_committed": "duplicates of committed records",
    "commits_backwards": "commits moving back", "unowned_after_heal": "unowned at heal + session + 1 s",
    "zombie_deliveries": "zombie deliveries", "poll_skips": "poll skips", "nonmonotonic_polls": "non-monotonic polls"}
POINT = ["profile", "session_timeout_ms", "retries", "backoff_ms"]
DPI = 90


class GridInputError(ZkConsumerError, ValueError):
    """A directory that holds no settings grid's results."""


@dataclass
class GridReport(Written):
    """What the grid's report wrote, and the seeds and points it covers."""

    seeds: int = field(default=0, kw_only=True)
    points: int = field(default=0, kw_only=True)


def results_path(grid_dir: str | Path) -> Path:
    return Path(grid_dir) / "tables" / f"{RESULTS}.parquet"


def is_grid(grid_dir: str | Path) -> bool:
    return results_path(grid_dir).exists()


def by_point(rows: DataFrame) -> DataFrame:
    """Per profile and point: seeds, seeds breaking any invariant and each one, rebalances given up (in all and
    seeds with one), and the settle time's median and 95th percentile (ms)."""
    broke = [F.sum(F.when(F.col(c) > 0, 1).otherwise(0)).alias(f"breaks_{c}") for c in INVARIANTS]
    return rows.groupBy(*POINT).agg(
        F.first("faq_rule").alias("faq_rule"), F.count("*").alias("seeds"),
        F.sum(F.when(~F.col("ok"), 1).otherwise(0)).alias("breaking"), *broke,
        F.sum("rebalances").alias("rebalances"), F.sum("rebalances_given_up").alias("given_up"),
        F.sum(F.when(F.col("rebalances_given_up") > 0, 1).otherwise(0)).alias("seeds_giving_up"),
        F.percentile_approx("settle_ms", 0.5).alias("settle_p50_ms"),
        F.percentile_approx("settle_ms", 0.95).alias("settle_p95_ms"),
        F.round(F.sum("wall_s"), 1).alias("wall_s"),
    ).withColumn("breach_rate", F.round(F.col("breaking") / F.col("seeds"), 4)
                 ).orderBy(*POINT)


def by_rule(rows: DataFrame) -> DataFrame:
    """Per profile and session timeout, the points where the FAQ rule holds against those where it does not."""
    return rows.groupBy("profile", "session_timeout_ms", "faq_rule").agg(
        F.countDistinct("retries", "backoff_ms").alias("points"), F.count("*").alias("seeds"),
        F.sum(F.when(~F.col("ok"), 1).otherwise(0)).alias("breaking"),
        F.sum("rebalances_given_up").alias("given_up"),
        F.percentile_approx("settle_ms", 0.5).alias("settle_p50_ms"),
    ).orderBy("profile", "session_timeout_ms", "faq_rule")


def heatmaps(points: pd.DataFrame, value: str, label: str, path: Path, fmt: str, vmax: float | None = None,
             counts: tuple[str, str] | None = None) -> Path:
    """One panel per profile (rows) and session timeout (columns): ``rebalance.max.retries`` down,
    ``rebalance.backoff.ms`` across, coloured by ``value``; each cell says it (``counts``: as "k/N" of those two
    columns), and a cell where the FAQ rule holds (retries × backoff > session) is framed."""
    profiles = sorted(points["profile"].unique()) if len(points) else []
    sessions = sorted(points["session_timeout_ms"].unique()) if len(points) else []
    fig, axes = plt.subplots(max(1, len(profiles)), max(1, len(sessions)), squeeze=False,
                             figsize=(3.6 * max(1, len(sessions)) + 1.2, 3.2 * max(1, len(profiles)) + 0.6))
    if not profiles:
        axes[0][0].text(0.5, 0.5, "no data", ha="center", va="center", color="grey")
        return _save(fig, path)
    top = vmax if vmax is not None else max(1e-9, float(points[value].max()))
    image = None
    for i, profile in enumerate(profiles):
        for j, session in enumerate(sessions):
            ax = axes[i][j]
            cell = points[(points["profile"] == profile) & (points["session_timeout_ms"] == session)]
            grid = cell.pivot(index="retries", columns="backoff_ms", values=value).sort_index()
            image = ax.imshow(grid.to_numpy(dtype=float), cmap="Reds", vmin=0, vmax=top, aspect="auto")
            ax.set_xticks(range(len(grid.columns)), [f"{b:,}" for b in grid.columns])
            ax.set_yticks(range(len(grid.index)), [str(r) for r in grid.index])
            ax.set_title(f"{profile}, session {session:,} ms", fontsize=9)
            if i == len(profiles) - 1:
                ax.set_xlabel("rebalance.backoff.ms")
            if j == 0:
                ax.set_ylabel("rebalance.max.retries")
            for y, retries in enumerate(grid.index):
                for x, backoff in enumerate(grid.columns):
                    row = cell[(cell["retries"] == retries) & (cell["backoff_ms"] == backoff)]
                    if row.empty:
                        continue
                    r = row.iloc[0]
                    text = f"{int(r[counts[0]])}/{int(r[counts[1]])}" if counts else format(r[value], fmt)
                    dark = float(r[value]) > 0.6 * top
                    ax.text(x, y, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
                    if retries * backoff > session:
                        ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=1.6, ec="tab:blue"))
    fig.colorbar(image, ax=axes, shrink=0.8, label=label)
    fig.suptitle(f"{label}\nframed: retries × backoff > session timeout (Kafka's FAQ rule)", fontsize=10)
    return _save(fig, path, tight=False)


def _save(fig: plt.Figure, path: Path, tight: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


DESCRIPTIONS = {
    RESULTS: "one row per seed at a point of a profile: the verdict, each judged invariant's count, rebalances done "
             "and given up, the settle time after the last disturbance",
    "grid_by_point": "per profile and point (session timeout, retries, backoff): seeds breaking each invariant, "
                     "rebalances given up, settle time p50/p95",
    "grid_by_rule": "per profile and session timeout: the points where Kafka's FAQ rule holds against the others",
}


def report_grid(spark: SparkSession, grid_dir: str | Path, out_dir: str | Path, console: Console,
                csv: bool = True, stages: Stages | None = None, title_note: str = "") -> GridReport:
    """Read the grid's rows from ``grid_dir`` and write its tables, heatmaps and report to ``out_dir``."""
    source = results_path(grid_dir)
    if not source.exists():
        raise GridInputError(f"{grid_dir}: no settings grid here (no tables/{RESULTS}.parquet; "
                             "zkconsumer sim --grid --out DIR writes one)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    st = stages or Stages(console, spark)
    writer = TableWriter(out, csv=csv)
    rows = spark.read.parquet(str(source))
    res = GridReport(out)
    with st.stage("grid summaries") as note:
        if Path(grid_dir).resolve() != out.resolve():
            res.tables[RESULTS] = writer.write(RESULTS, rows, DESCRIPTIONS[RESULTS]).rows
        points = by_point(rows)
        rule = by_rule(rows)
        res.tables["grid_by_point"] = writer.write("grid_by_point", points, DESCRIPTIONS["grid_by_point"]).rows
        res.tables["grid_by_rule"] = writer.write("grid_by_rule", rule, DESCRIPTIONS["grid_by_rule"]).rows
        pts, rl = points.toPandas(), rule.toPandas()
        res.seeds, res.points = int(pts["seeds"].sum()) if len(pts) else 0, len(pts)
        note.append(f"{res.seeds:,} seeds at {res.points} points")
    with st.stage("grid heatmaps") as note:
        img = out / "img"
        pts = pts.assign(given_up_per_seed=pts["given_up"] / pts["seeds"].clip(lower=1),
                         settle_p50_s=pts["settle_p50_ms"].astype(float) / 1000)
        res.plots = [
            heatmaps(pts, "breach_rate", "share of seeds breaking an invariant", img / "grid_breaches.png", ".0%",
                     vmax=1.0, counts=("breaking", "seeds")),
            heatmaps(pts, "given_up_per_seed", "rebalances given up per seed", img / "grid_given_up.png", ".2f"),
            heatmaps(pts, "settle_p50_s", "settle time after the last disturbance, median (s)",
                     img / "grid_settle.png", ".1f")]
        note.append(f"{len(res.plots)} PNG → {img}")
    with st.stage("grid report") as note:
        rep = _report(pts, rl, res, writer, title_note)
        res.report_md, res.report_html = rep.write(out)
        note.append(f"{res.report_md.name}, {res.report_html.name}")
    res.seconds = st.total
    return res


def _report(pts: pd.DataFrame, rule: pd.DataFrame, res: GridReport, writer: TableWriter, note: str) -> Report:
    r = Report("zkconsumer settings grid")
    r.p(f"{res.seeds:,} simulated seeds at {res.points} points (profile × zookeeper.session.timeout.ms × "
        "rebalance.max.retries × rebalance.backoff.ms), each seed a churn-with-faults nemesis schedule judged after "
        f"every step. {note}".strip())
    r.bullets(["a cell: seeds breaking any judged invariant, of the seeds run there (k/N)",
               "framed cells: retries × backoff > session timeout, the rule Kafka's FAQ gives",
               "given up: rebalances that spent rebalance.max.retries (Kafka's \"can't rebalance after N retries\")",
               "settle: from the schedule's last action or heal to the last rebalance done after it"])
    r.h2("Seeds breaking an invariant")
    r.image("img/grid_breaches.png", "Breach rate per point")
    r.h2("Rebalances given up")
    r.image("img/grid_given_up.png", "Rebalances given up per seed")
    r.h2("Time to settle")
    r.image("img/grid_settle.png", "Median settle time per point")
    r.h2("Where the FAQ rule holds, and where it does not")
    r.table(rule, r.link("grid_by_rule.csv", "tables/grid_by_rule.csv"))
    r.h2("Every point")
    cols = [*POINT, "faq_rule", "seeds", "breaking", *[f"breaks_{c}" for c in INVARIANTS], "given_up",
            "seeds_giving_up", "settle_p50_ms", "settle_p95_ms"]
    shown = pts[[c for c in cols if c in pts.columns]]
    shown = shown.loc[:, [c for c in shown.columns if not c.startswith("breaks_") or shown[c].any()]]
    r.table(shown, r.link("grid_by_point.csv", "tables/grid_by_point.csv") + " (invariants no seed broke left out)")
    r.h2("Tables")
    r.bullets([f"**{t.name}** ({t.rows:,} rows): {t.description} — "
               + (r.link("CSV", t.csv) + ", " if t.csv else "") + r.link("Parquet", t.parquet)
               for t in writer.written])
    return r
