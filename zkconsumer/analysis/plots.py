"""PNG figures (matplotlib, Agg backend: no display needed on servers or in CI).

Every function takes small pandas frames already aggregated by Spark and always writes its file, drawing a
"no data" note when the input is empty, so the report's links never break.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

DPI = 90


def _empty(ax: plt.Axes, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])


def _save(fig: plt.Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def ownership_timeline(owners: pd.DataFrame, rebalances: pd.DataFrame, path: Path,
                       max_partitions: int = 48) -> Path:
    """Gantt chart: one row per partition, one bar per ownership interval coloured by consumer; grey spans
    are group rebalances. Time is seconds since the first line shown."""
    labels = sorted({(g, t, int(p)) for g, t, p in owners[["group", "topic", "partition"]].itertuples(index=False)})
    shown = labels[:max_partitions]
    height = 1.2 + 0.28 * max(len(shown), 4)
    fig, ax = plt.subplots(figsize=(10, min(height, 18)))
    if not shown:
        _empty(ax, "no ownership in the trace")
        return _save(fig, path)
    t0 = min(owners["owned_from"].min(), rebalances["start"].min() if len(rebalances) else np.inf)
    consumers = sorted(owners["consumer"].unique())
    cmap = plt.get_cmap("tab20" if len(consumers) > 10 else "tab10")
    colour = {c: cmap(i % cmap.N) for i, c in enumerate(consumers)}
    row = {key: i for i, key in enumerate(shown)}
    for r in rebalances.itertuples(index=False):
        ax.axvspan((r.start - t0) / 1000, (max(r.end, r.start + 1) - t0) / 1000, color="0.85", zorder=0)
    for o in owners.itertuples(index=False):
        i = row.get((o.group, o.topic, int(o.partition)))
        if i is None:
            continue
        ax.broken_barh([((o.owned_from - t0) / 1000, max(o.owned_to - o.owned_from, 1) / 1000)], (i - 0.4, 0.8),
                       color=colour[o.consumer])
    multi_group = len({g for g, _, _ in shown}) > 1
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"{g}/{t}-{p}" if multi_group else f"{t}-{p}" for g, t, p in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since first ownership")
    title = "Partition ownership (grey: group rebalances)"
    if len(labels) > len(shown):
        title += f" — first {len(shown)} of {len(labels)} partitions"
    ax.set_title(title)
    if len(consumers) <= 20:
        handles = [plt.Rectangle((0, 0), 1, 1, color=colour[c]) for c in consumers]
        ax.legend(handles, consumers, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path)


def duration_cdf(rebalances: pd.DataFrame, path: Path) -> Path:
    """Empirical CDF of group rebalance durations (ms)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    d = np.sort(rebalances["duration_ms"].dropna().to_numpy()) if len(rebalances) else np.array([])
    if d.size == 0:
        _empty(ax, "no rebalances")
        return _save(fig, path)
    y = np.arange(1, d.size + 1) / d.size
    ax.step(d, y, where="post")
    ax.plot(d, y, "o", ms=3)
    ax.set_xlabel("group rebalance duration (ms)")
    ax.set_ylabel("fraction of rebalances ≤ x")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(f"Rebalance duration CDF ({d.size} rebalances)")
    return _save(fig, path)


def duplicates_per_rebalance(counts: pd.DataFrame, path: Path) -> Path:
    """Bar chart: extra deliveries attributed to each group rebalance (``none``: before any rebalance)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    if counts.empty:
        _empty(ax, "no duplicates")
        return _save(fig, path)
    labels = [("none" if pd.isna(r) else f"{g}#{int(r)}") if counts["group"].nunique() > 1 else
              ("none" if pd.isna(r) else f"#{int(r)}")
              for g, r in counts[["group", "rebalance_id"]].itertuples(index=False)]
    ax.bar(range(len(labels)), counts["duplicates"].to_numpy())
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60 if len(labels) > 12 else 0, fontsize=7)
    ax.set_xlabel("group rebalance")
    ax.set_ylabel("records delivered again")
    ax.set_title("Duplicates per rebalance")
    return _save(fig, path)


def balance_by_strategy(summary: pd.DataFrame, path: Path) -> Path:
    """Mean and max balance (max − min partitions per thread) per strategy and subscription pattern."""
    return _grouped_bars(summary, "mean_balance", "max_balance", "balance (max − min partitions per thread)",
                         "Balance by strategy", path)


def moved_by_strategy(summary: pd.DataFrame, path: Path) -> Path:
    """Mean partitions moved per membership change, per strategy and change kind."""
    return _grouped_bars(summary, "mean_moved", None, "partitions moved per change", "Moved partitions per change",
                         path, group_col="change")


def _grouped_bars(df: pd.DataFrame, value: str, whisker: str | None, ylabel: str, title: str, path: Path,
                  group_col: str = "pattern") -> Path:
    fig, ax = plt.subplots(figsize=(8, 4.2))
    if df.empty:
        _empty(ax)
        return _save(fig, path)
    groups = sorted(df[group_col].unique())
    strategies = sorted(df["strategy"].unique())
    width = 0.8 / max(len(strategies), 1)
    for i, s in enumerate(strategies):
        sub = df[df["strategy"] == s].set_index(group_col)
        vals = [float(sub[value].get(g, np.nan)) for g in groups]
        x = np.arange(len(groups)) + i * width
        ax.bar(x, vals, width, label=s)
        if whisker:
            tops = [float(sub[whisker].get(g, np.nan)) for g in groups]
            ax.scatter(x, tops, marker="_", color="black", s=80, zorder=3)
    ax.set_xticks(np.arange(len(groups)) + width * (len(strategies) - 1) / 2)
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title + (" (bar: mean, tick: max)" if whisker else ""))
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)
