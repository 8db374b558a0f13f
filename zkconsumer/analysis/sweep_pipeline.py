"""``sweep``: scenarios on Spark → result rows, summaries (Parquet + CSV), plots, report.md / report.html."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

from zkconsumer.analysis import plots
from zkconsumer.analysis.progress import Stages
from zkconsumer.analysis.report import Report, Written
from zkconsumer.analysis.sweep import SweepConfig, run_spark
from zkconsumer.analysis.tables import TableWriter


@dataclass
class SweepResult(Written):
    """A sweep's outputs, with its size (scenarios in, result rows out) and the seconds Spark computed them in."""

    scenarios: int = field(kw_only=True)
    rows: int = 0
    compute_seconds: float = 0.0


def summaries(results: DataFrame) -> dict[str, DataFrame]:
    """Aggregates the report and plots use; all small (strategies × patterns × shapes)."""
    ok = F.col("status") == "ok"
    change = F.col("step") > 0
    by_pattern = results.groupBy("strategy", "pattern").agg(
        F.countDistinct("scenario_id").alias("scenarios"), F.count("*").alias("steps"),
        F.sum(F.when(~ok, 1).otherwise(0)).alias("precondition_failed"),
        F.round(F.avg("balance"), 3).alias("mean_balance"), F.max("balance").alias("max_balance"),
        F.round(F.avg(F.when(change, F.col("moved"))), 3).alias("mean_moved"),
        F.round(F.avg(F.when(change, F.col("moved") - F.col("moved_forced"))), 3).alias("mean_moved_unforced"))
    by_change = results.where(change).groupBy("strategy", "change").agg(
        F.count("*").alias("changes"), F.sum(F.when(~ok, 1).otherwise(0)).alias("precondition_failed"),
        F.round(F.avg("moved"), 3).alias("mean_moved"), F.max("moved").alias("max_moved"),
        F.round(F.avg("moved_forced"), 3).alias("mean_moved_forced"),
        F.round(F.avg(F.col("moved") / F.when(F.col("assigned") > 0, F.col("assigned"))), 4
                ).alias("mean_moved_share"))
    by_shape = results.groupBy("strategy", "consumers", "streams", "topics", "partitions_per_topic", "pattern").agg(
        F.countDistinct("scenario_id").alias("scenarios"),
        F.sum(F.when(~ok, 1).otherwise(0)).alias("precondition_failed"),
        F.round(F.avg("balance"), 3).alias("mean_balance"), F.max("balance").alias("max_balance"),
        F.round(F.avg(F.when(change, F.col("moved"))), 3).alias("mean_moved"))
    return {"sweep_by_pattern": by_pattern.orderBy("strategy", "pattern"),
            "sweep_by_change": by_change.orderBy("strategy", "change"),
            "sweep_by_shape": by_shape.orderBy("strategy", "consumers", "streams", "topics",
                                               "partitions_per_topic", "pattern")}


DESCRIPTIONS = {
    "sweep_results": "one row per scenario × strategy × step (0 = initial, then each membership change): "
                     "balance, partitions moved, status",
    "sweep_by_pattern": "per strategy and subscription pattern: balance, moves, precondition failures",
    "sweep_by_change": "per strategy and change kind (join/leave/crash): partitions moved",
    "sweep_by_shape": "per strategy and group shape",
}


def run_sweep(spark: SparkSession, cfg: SweepConfig, scenarios: int, out_dir: str | Path, console: Console,
              csv: bool = True, results_csv: bool = True) -> SweepResult:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    st = Stages(console, spark)
    res = SweepResult(out, scenarios=scenarios)
    writer = TableWriter(out, csv=csv)
    with st.stage("assign scenarios") as note:
        results = run_spark(spark, cfg, scenarios)
        csv_results = TableWriter(out, csv=csv and results_csv)
        res.rows = csv_results.write("sweep_results", results, DESCRIPTIONS["sweep_results"]).rows
        writer.written.extend(csv_results.written)
        res.tables["sweep_results"] = res.rows
        note.append(f"{scenarios:,} scenarios × {len(cfg.strategies)} strategies → {res.rows:,} rows")
    res.compute_seconds = st.timings[-1][1]
    stored = spark.read.parquet(str(out / "tables" / "sweep_results.parquet"))
    with st.stage("summaries") as note:
        sums = summaries(stored)
        for name, df in sums.items():
            res.tables[name] = writer.write(name, df, DESCRIPTIONS[name]).rows
        note.append(", ".join(sums))
    with st.stage("plots") as note:
        pat = sums["sweep_by_pattern"].toPandas()
        chg = sums["sweep_by_change"].toPandas()
        img = out / "img"
        res.plots = [plots.balance_by_strategy(pat, img / "balance_by_strategy.png"),
                     plots.moved_by_strategy(chg, img / "moved_by_strategy.png")]
        note.append(f"{len(res.plots)} PNG → {img}")
    with st.stage("report") as note:
        rep = _report(cfg, scenarios, res, writer, st, pat, chg)
        res.report_md, res.report_html = rep.write(out)
        note.append(f"{res.report_md.name}, {res.report_html.name}")
    res.seconds = st.total
    return res


def _report(cfg: SweepConfig, scenarios: int, res: SweepResult, writer: TableWriter, st: Stages,
            pat: pd.DataFrame, chg: pd.DataFrame) -> Report:
    r = Report("zkconsumer assignor sweep")
    r.p(f"{scenarios:,} scenarios (seed {cfg.seed}, {len(cfg.cells)} group shapes, {cfg.changes} membership "
        f"changes each), strategies {', '.join(cfg.strategies)}: {res.rows:,} result rows.")
    r.bullets([f"{k}: {', '.join(map(str, v))}" for k, v in cfg.grid.items()]
              + ["changes: join (a new member), leave and crash (a member removed; the kind is only recorded)",
                 "balance: max − min partitions per consumer thread (every subscribed thread counts)",
                 "moved: partitions whose owner thread changed; forced: its previous thread is gone"])
    r.h2("Balance by strategy and subscription pattern")
    r.image("img/balance_by_strategy.png", "Balance by strategy")
    r.table(pat, r.link("sweep_by_pattern.csv", "tables/sweep_by_pattern.csv")
            + " — roundrobin needs identical subscriptions; failures are counted, not crashed on.")
    r.h2("Partitions moved per membership change")
    r.image("img/moved_by_strategy.png", "Moved partitions per change by strategy")
    r.table(chg, r.link("sweep_by_change.csv", "tables/sweep_by_change.csv"))
    r.h2("Tables")
    r.bullets([f"**{t.name}** ({t.rows:,} rows): {t.description} — "
               + (r.link("CSV", t.csv) + ", " if t.csv else "") + r.link("Parquet", t.parquet)
               for t in writer.written])
    r.h2("Stages")
    r.bullets([f"{name}: {took:.2f} s {('— ' + note) if note else ''}" for name, took, note in st.timings])
    return r
