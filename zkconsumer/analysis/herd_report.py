"""The herd by size (``zkconsumer sim --herd``, sim/herd_scale.py): its Parquet rows → the table, the log-log
figure (0.8's herd against the coordinator's), report.md / report.html. ``zkconsumer analyze HERD_DIR --out DIR``
reads a herd directory back the same way; benchmarks/herd_scale.py draws its figure with :func:`loglog`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import pandas as pd  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from rich.console import Console  # noqa: E402

from zkconsumer.analysis.progress import Stages  # noqa: E402
from zkconsumer.analysis.report import Report, Written  # noqa: E402
from zkconsumer.analysis.tables import TableWriter  # noqa: E402
from zkconsumer.errors import ZkConsumerError  # noqa: E402

RESULTS = "herd_results"
LABELS = {"default": "0.8, zkconsumer default profile", "kafka-0.8": "0.8, kafka-0.8 profile",
          "eager": "coordinator, eager (range)", "cooperative": "coordinator, cooperative-sticky"}
ZOOKEEPER = ("default", "kafka-0.8")


class HerdInputError(ZkConsumerError, ValueError):
    """A directory that holds no herd results."""


@dataclass
class HerdReport(Written):
    rows: int = field(default=0, kw_only=True)


def results_path(herd_dir: str | Path) -> Path:
    return Path(herd_dir) / "tables" / f"{RESULTS}.parquet"


def loglog(rows: list[dict[str, Any]], path: Path, dpi: int = 110) -> Path:
    """Two log-log panels, by members: the server's requests per join or leave, and the simulated join's time to
    a settled group; one line per design (0.8 solid, the coordinator dashed)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for design, label in LABELS.items():
        done = sorted((r for r in rows if r["design"] == design and r.get("requests_per_action") is not None),
                      key=lambda r: r["size"])
        if not done:
            continue
        sizes = [r["size"] for r in done]
        style = "-o" if design in ZOOKEEPER else "--s"
        left.plot(sizes, [r["requests_per_action"] for r in done], style, label=label)
        right.plot(sizes, [max(1.0, r["join_ms"]) for r in done], style, label=label)
    left.set(xscale="log", yscale="log", xlabel="members", ylabel="server requests per join or leave",
             title="The herd: requests per membership change")
    right.set(xscale="log", yscale="log", xlabel="members", ylabel="join converged after (ms, simulated)",
              title="Time to a settled group after a join")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def report_herd(spark: SparkSession, herd_dir: str | Path, out_dir: str | Path, console: Console, csv: bool = True,
                stages: Stages | None = None) -> HerdReport:
    """Read the herd's rows from ``herd_dir``; write its table, figure and report to ``out_dir``."""
    source = results_path(herd_dir)
    if not source.exists():
        raise HerdInputError(f"{herd_dir}: no herd results here (no tables/{RESULTS}.parquet; zkconsumer sim --herd "
                             "--out DIR writes one)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    st = stages or Stages(console, spark)
    writer = TableWriter(out, csv=csv)
    res = HerdReport(out)
    with st.stage("herd table") as note:
        df = spark.read.parquet(str(source)).orderBy("design", "size")
        if Path(herd_dir).resolve() != out.resolve():
            writer.write(RESULTS, df, "one row per design and size: per join or crash, the server's requests (by "
                                      "kind), notifications, KB, attempts, convergence; the wall per phase")
        rows = [r.asDict() for r in df.collect()]
        res.rows = res.tables[RESULTS] = len(rows)
        note.append(f"{len(rows)} rows")
    with st.stage("herd figure") as note:
        res.plots = [loglog(rows, out / "img" / "herd_scale.png")]
        note.append(str(res.plots[0]))
    with st.stage("herd report") as note:
        rep = _report(rows)
        res.report_md, res.report_html = rep.write(out)
        note.append(f"{res.report_md.name}, {res.report_html.name}")
    res.seconds = st.total
    return res


def table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as the report shows them, with each row's ratios to the default profile's row of its size."""
    base = {r["size"]: r for r in rows if r["design"] == "default" and r.get("requests_per_action")}
    shown = []
    for r in sorted(rows, key=lambda r: (r["size"], list(LABELS).index(r["design"]))):
        b = base.get(r["size"])
        done = r.get("requests_per_action") is not None
        shown.append({
            "design": r["design"], "members": r["size"], "rounds": r["rounds"],
            "requests / action": round(r["requests_per_action"], 1) if done else None,
            "by kind": ", ".join(f"{k} {v:,.1f}" for k, v in sorted((r.get("by_kind") or {}).items())),
            "notifications / action": None if r.get("notifications_per_action") is None
            else round(r["notifications_per_action"], 1),
            "KB from server / action": round(r["kb_from_server_per_action"], 1) if done else None,
            "attempts or generations / action": round(r["attempts_per_action"], 2) if done else None,
            "join / leave ms (simulated)": f"{r['join_ms']:,.0f} / {r['leave_ms']:,.0f}" if done else "",
            "given up": r["given_up"],
            "÷ default: requests / join": (f"{r['requests_per_action'] / b['requests_per_action']:.2f} / "
                                          f"{r['join_ms'] / max(1.0, b['join_ms']):.2f}") if done and b else "",
            "wall s: cold / join / leave": (f"{r['wall_cold_s']:.1f} / {r['wall_join_s'] or 0:.1f} / "
                                            f"{r['wall_leave_s'] or 0:.1f}") if done else f"{r['wall_s']:.1f}",
            "collapsed": r.get("collapsed") or ""})
    return pd.DataFrame(shown)


def _report(rows: list[dict[str, Any]]) -> Report:
    r = Report("zkconsumer herd by size")
    r.p("Per membership change (a join, or the first member in id order gone), the server's requests, what it "
        "sent, and the simulated time to a settled group: 0.8's ZooKeeper rebalance (zkconsumer's connector on the "
        "simulated ZooKeeper, its measured service times) against the broker-side coordinator (zkconsumer's broker "
        "request path on virtual time, its measured CPU per request). Members' own CPU is free on both sides.")
    r.image("img/herd_scale.png", "Requests and join time against members, log-log")
    r.table(table(rows), r.link("herd_results.csv", "tables/herd_results.csv"))
    collapsed = [x for x in rows if x.get("collapsed")]
    if collapsed:
        r.h2("Groups that did not settle")
        r.bullets([f"{x['design']} at {x['size']:,} members: {x['collapsed']} ({x['starts_given_up']} starts gave "
                   "up their retries)" for x in collapsed])
    return r
