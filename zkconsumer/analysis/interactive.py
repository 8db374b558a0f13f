"""The report's interactive timeline: pandas frames in, one plotly figure out (no Spark, no I/O).

Four views of one run on one shared time axis, so that zooming into a rebalance in one zooms all of them:

* ownership: one row per partition, one bar per ownership interval coloured by consumer; hovering a bar names the
  consumer, its thread, the interval and the group rebalance that gave it the partition;
* member lanes: one lane per consumer with its rebalance attempts (from ``attempt_started`` to the next step),
  the backoffs between them, failed claims and session events, and a lane for the lab's steps and faults;
* records per second (and partitions without an owner) from the ``activity`` table;
* the lab's actions and faults as vertical lines through all of them, group rebalances as grey bands.

Times are UTC: plotly draws naive datetimes as given, so epoch milliseconds become naive UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

#: Lines that start, end or cut short a rebalance attempt: an attempt lasts until the next one of them.
STEP_EVENTS = ("attempt_started", "rebalance_done", "rebalance_failed", "session_expired", "shutdown")
#: Lines drawn as a marker on their member's lane: (symbol, colour, what it means).
MARKERS: dict[str, tuple[str, str, str]] = {
    "registered": ("circle", "#1f77b4", "registered"),
    "rebalance_done": ("line-ns-open", "#2ca02c", "rebalance done"),
    "claim_conflict": ("x", "#d62728", "failed claim"),
    "rebalance_failed": ("square", "#d62728", "rebalance failed"),
    "session_expired": ("diamond", "#000000", "session expired"),
    "connection_suspended": ("triangle-down", "#ff7f0e", "connection suspended"),
    "reconnected": ("triangle-up", "#2ca02c", "reconnected"),
    "join_stalled": ("hourglass", "#8c564b", "join stalled"),
    "shutdown": ("square-open", "#7f7f7f", "shutdown"),
}
LANE_EVENTS = tuple(dict.fromkeys((*STEP_EVENTS, *MARKERS)))
#: How an attempt ended (the event after it) → (legend name, colour).
OUTCOMES = {"rebalance_done": ("attempt → done", "#6baed6"), "attempt_started": ("attempt → retried", "#fd8d3c"),
            "rebalance_failed": ("attempt → failed", "#d62728"), "session_expired": ("attempt → session expired",
                                                                                     "#636363"),
            "shutdown": ("attempt → shutdown", "#969696"), "": ("attempt (unfinished)", "#bdbdbd")}
#: The lab's lines: colour and dash of their vertical line.
LAB_STYLE = {"lab_step": ("#6a3d9a", "dot"), "fault_injected": ("#d62728", "dash"),
             "fault_healed": ("#2ca02c", "dash")}
LAB_LANE = "lab"
MAX_BARS = 20_000
MAX_BANDS = 500
ROW_PX = {"partition": 16, "lane": 26, "rate": 200}


def when(ms: pd.Series | Iterable[int]) -> pd.Series:
    """Epoch milliseconds as naive UTC datetimes (plotly shows them as given)."""
    return pd.to_datetime(pd.Series(ms, dtype="float64"), unit="ms")


def clock(ms: float | int | None) -> str:
    """``HH:MM:SS.mmm`` (UTC) of an epoch-ms time; empty when unknown."""
    if ms is None or pd.isna(ms):
        return ""
    return pd.Timestamp(int(ms), unit="ms").strftime("%H:%M:%S.%f")[:-3]


def _int(v: object) -> str:
    return "" if v is None or pd.isna(v) else str(int(v))


def _words(v: object) -> str:
    """A list cell (an array column through Arrow) as comma-separated words."""
    if v is None or (not hasattr(v, "__len__") and pd.isna(v)):
        return ""
    return ", ".join(str(x) for x in (v.tolist() if hasattr(v, "tolist") else v))


def _palette(names: list[str]) -> dict[str, str]:
    colours = qualitative.Plotly if len(names) <= 10 else qualitative.Dark24 + qualitative.Light24
    return {n: colours[i % len(colours)] for i, n in enumerate(names)}


# ------------------------------------------------------------------ ownership
def ownership_rows(owners: pd.DataFrame, max_partitions: int) -> tuple[list[tuple], dict[tuple, str], int]:
    """(shown (group, topic, partition) keys, their labels, how many partitions there are in all)."""
    keys = sorted({(g, t, int(p)) for g, t, p in owners[["group", "topic", "partition"]].itertuples(index=False)})
    shown = keys[:max_partitions]
    multi = len({k[0] for k in shown}) > 1
    return shown, {k: (f"{k[0]}/{k[1]}-{k[2]}" if multi else f"{k[1]}-{k[2]}") for k in shown}, len(keys)


def ownership_hover(o: pd.Series) -> str:
    """What hovering an ownership bar says: who owned it, when, and which group rebalance gave it to them."""
    thread = o.get("thread")
    who = f"<b>{o['consumer']}</b>" + (f" (thread {thread})" if isinstance(thread, str) and thread else "")
    rid = _int(o.get("rebalance_id"))
    moved = (f"given by group rebalance #{rid}" + (f" (cause: {_words(o.get('causes'))})"
                                                   if _words(o.get("causes")) else "")) if rid else \
        "no group rebalance"
    return (f"{who}<br>{o['topic']}-{int(o['partition'])}<br>{clock(o['owned_from'])} – {clock(o['owned_to'])} UTC "
            f"({int(o['owned_to'] - o['owned_from']):,} ms)<br>{moved}<br>ended: {o.get('end_reason') or ''}")


def ownership_bars(owners: pd.DataFrame, rebalances: pd.DataFrame, labels: dict[tuple, str],
                   colours: dict[str, str], max_bars: int = MAX_BARS) -> list[go.Bar]:
    """One horizontal bar trace per consumer: its ownership intervals of the shown partitions."""
    if owners.empty or not labels:
        return []
    o = owners.assign(_key=[(g, t, int(p)) for g, t, p in owners[["group", "topic", "partition"]]
                            .itertuples(index=False)])
    o = o[o["_key"].isin(labels.keys()) & o["owned_to"].notna()].head(max_bars)
    if len(rebalances) and "causes" in rebalances:
        o = o.merge(rebalances[["group", "rebalance_id", "causes"]], on=["group", "rebalance_id"], how="left")
    bars = []
    for consumer, rows in o.groupby("consumer", sort=True):
        bars.append(go.Bar(
            name=str(consumer), legendgroup="owners", legendgrouptitle_text="owner", orientation="h",
            y=[labels[k] for k in rows["_key"]], base=when(rows["owned_from"]),
            x=(rows["owned_to"] - rows["owned_from"]).clip(lower=1).astype("int64"),
            marker_color=colours.get(str(consumer)), hovertext=[ownership_hover(r) for _, r in rows.iterrows()],
            hovertemplate="%{hovertext}<extra></extra>"))
    return bars


# ------------------------------------------------------------------ member lanes
def lane_name(group: str, consumer: str, multi_group: bool) -> str:
    return f"{group}/{consumer}" if multi_group else str(consumer)


def attempt_spans(lanes: pd.DataFrame) -> pd.DataFrame:
    """One row per rebalance attempt: group, consumer, rebalance, attempt, start, end, outcome, backoff_ms.

    An attempt ends at its consumer's next step (another attempt, the rebalance's end, a session expiry or a
    shutdown; ``outcome`` names it, "" when the trace ends first, and then so does the attempt). ``backoff_ms``
    is the sleep before a retry: the rebalance's ``phases_ms.backoff``, spread evenly over its retries."""
    cols = ["group", "consumer", "rebalance", "attempt", "start", "end", "outcome", "backoff_ms"]
    if lanes.empty:
        return pd.DataFrame(columns=cols)
    lines = lanes.sort_values(["group", "consumer", "ts", "seq"]).reset_index(drop=True)
    last = lines.groupby(["group", "consumer"])["ts"].transform("max")
    steps = lines[lines["event"].isin(STEP_EVENTS)].copy()
    steps["_last"] = last[steps.index]
    nxt = steps.groupby(["group", "consumer"])[["ts", "event"]].shift(-1)
    steps["end"], steps["outcome"] = nxt["ts"], nxt["event"].fillna("")
    ends = steps[steps["event"].isin(("rebalance_done", "rebalance_failed"))][
        ["group", "consumer", "ts", "seq", "attempts", "backoff_ms"]].rename(columns={"backoff_ms": "_backoff"})
    att = steps[steps["event"] == "attempt_started"].copy()
    att["end"] = att["end"].fillna(att["_last"]).clip(lower=att["ts"])
    # the rebalance's end line: the consumer's first done / failed at or after the attempt
    att = att.reset_index().rename(columns={"index": "_n"})
    ends = ends.reset_index().rename(columns={"index": "_n"})
    if len(att):
        att = pd.merge_asof(att.sort_values("_n"), ends.drop(columns=["ts", "seq"]).sort_values("_n"), on="_n",
                            by=["group", "consumer"], direction="forward", suffixes=("", "_end"))
        retries = (att["attempts_end"].fillna(0) - 1).clip(lower=1)
        att["backoff_ms"] = (att["_backoff"].fillna(0) / retries).where(att["attempt"].fillna(1) > 1, 0.0)
    else:
        att["backoff_ms"] = []
    return att.rename(columns={"ts": "start"})[cols].reset_index(drop=True)


def lane_traces(lanes: pd.DataFrame, multi_group: bool) -> list[go.BaseTraceType]:
    """Attempt bars (by outcome), backoff bars and event markers, one lane per consumer."""
    traces: list[go.BaseTraceType] = []
    spans = attempt_spans(lanes)
    for outcome, (name, colour) in OUTCOMES.items():
        rows = spans[spans["outcome"] == outcome]
        if rows.empty:
            continue
        hover = [f"<b>{r.consumer}</b>: rebalance {_int(r.rebalance)}, attempt {_int(r.attempt)}<br>"
                 f"{clock(r.start)} – {clock(r.end)} UTC ({int(r.end - r.start):,} ms)<br>then: {_then(r.outcome)}"
                 for r in rows.itertuples(index=False)]
        traces.append(go.Bar(name=name, legendgroup="lanes", legendgrouptitle_text="member lanes", orientation="h",
                             y=[lane_name(g, c, multi_group) for g, c in rows[["group", "consumer"]].itertuples(
                                 index=False)],
                             base=when(rows["start"]), x=(rows["end"] - rows["start"]).clip(lower=1).astype("int64"),
                             marker_color=colour, width=0.5, hovertext=hover,
                             hovertemplate="%{hovertext}<extra></extra>"))
    slept = spans[spans["backoff_ms"] > 0]
    if len(slept):
        traces.append(go.Bar(
            name="backoff", legendgroup="lanes", orientation="h",
            y=[lane_name(g, c, multi_group) for g, c in slept[["group", "consumer"]].itertuples(index=False)],
            base=when(slept["start"] - slept["backoff_ms"]), x=slept["backoff_ms"].clip(lower=1).astype("int64"),
            marker_color="#bcbd22", marker_pattern_shape="/", width=0.5,
            hovertext=[f"<b>{r.consumer}</b>: backoff ≈ {r.backoff_ms:,.0f} ms before rebalance "
                       f"{_int(r.rebalance)}'s attempt {_int(r.attempt)}" for r in slept.itertuples(index=False)],
            hovertemplate="%{hovertext}<extra></extra>"))
    for event, (symbol, colour, name) in MARKERS.items():
        rows = lanes[lanes["event"] == event]
        if rows.empty:
            continue
        traces.append(go.Scatter(
            name=name, legendgroup="lanes", mode="markers", marker_symbol=symbol, marker_color=colour,
            marker_size=9, marker_line_width=2 if symbol.endswith(("open", "-ns-open")) or symbol == "x" else 0,
            marker_line_color=colour, x=when(rows["ts"]),
            y=[lane_name(g, c, multi_group) for g, c in rows[["group", "consumer"]].itertuples(index=False)],
            hovertext=[_event_hover(r) for _, r in rows.iterrows()], hovertemplate="%{hovertext}<extra></extra>"))
    return traces


def _then(outcome: str) -> str:
    if outcome == "attempt_started":
        return "another attempt"
    return MARKERS[outcome][2] if outcome in MARKERS else "end of the trace"


def _event_hover(r: pd.Series) -> str:
    text = f"<b>{r['consumer']}</b>: {MARKERS[r['event']][2]}<br>{clock(r['ts'])} UTC"
    if _int(r.get("rebalance")):
        text += f"<br>rebalance {_int(r.get('rebalance'))}"
        if _int(r.get("attempt")):
            text += f", attempt {_int(r.get('attempt'))}"
        if _int(r.get("attempts")):
            text += f", {_int(r.get('attempts'))} attempts"
    if isinstance(r.get("topic"), str) and _int(r.get("partition")):
        text += f"<br>partition {r['topic']}-{_int(r.get('partition'))}"
    if _int(r.get("backoff_ms")) not in ("", "0"):
        text += f"<br>backoff {_int(r.get('backoff_ms'))} ms"
    if isinstance(r.get("failure"), str) and r.get("failure"):
        text += f"<br>{r['failure']}"
    return text


# ------------------------------------------------------------------ the lab
def lab_label(r: pd.Series) -> str:
    """``kill lab_c1``, ``pause lab_c2``, ``heal pause``: what the lab did, and to whom."""
    target = r.get("target") if isinstance(r.get("target"), str) else ""
    if r["event"] == "lab_step":
        what = str(r.get("step") or "step")
    elif r["event"] == "fault_healed":
        what = f"heal {r.get('fault') or ''}"
    else:
        what = str(r.get("fault") or "fault")
    return f"{what} {target}".strip()


def lab_marks(lab: pd.DataFrame) -> tuple[list[dict], go.Scatter | None]:
    """(vertical lines through every row, the lab lane's labelled markers) for the lab's lines."""
    if lab.empty:
        return [], None
    lines = [dict(type="line", xref="x", yref="paper", x0=t, x1=t, y0=0, y1=1, layer="above",
                  line=dict(color=LAB_STYLE.get(e, ("#6a3d9a", "dot"))[0], dash=LAB_STYLE.get(e, ("", "dot"))[1],
                            width=1.5))
             for t, e in zip(when(lab["ts"]), lab["event"], strict=True)]
    labels = [lab_label(r) for _, r in lab.iterrows()]
    marks = go.Scatter(name="lab step / fault", legendgroup="lab", mode="markers+text", y=[LAB_LANE] * len(lab),
                       x=when(lab["ts"]), text=labels, textposition="top right", textfont_size=10,
                       marker=dict(symbol="star", size=11,
                                   color=[LAB_STYLE.get(e, ("#6a3d9a", ""))[0] for e in lab["event"]]),
                       hovertext=[f"<b>lab</b>: {lbl}<br>{clock(t)} UTC" for lbl, t in zip(labels, lab["ts"],
                                                                                              strict=True)],
                       hovertemplate="%{hovertext}<extra></extra>")
    return lines, marks


# ------------------------------------------------------------------ activity
def rate_traces(activity: pd.DataFrame) -> tuple[list[go.Scatter], list[go.Scatter]]:
    """(records per second over each bucket, partitions without an owner at its end) per group, as steps."""
    rates, unowned = [], []
    multi = activity["group"].nunique() > 1 if len(activity) else False
    for group, rows in activity.sort_values(["group", "ts"]).groupby("group", sort=True):
        suffix = f" ({group})" if multi else ""
        x = when(rows["ts"])
        rates.append(go.Scatter(name="records/s" + suffix, legendgroup="rate", legendgrouptitle_text="activity",
                                x=x, y=rows["records_per_s"], mode="lines", line_shape="hv",
                                hovertemplate="%{x|%H:%M:%S} UTC: %{y:.0f} records/s<extra>" + str(group) + "</extra>"))
        # the count holds at the bucket's end: drawn from there until the next bucket's end
        unowned.append(go.Scatter(name="unowned partitions" + suffix, legendgroup="rate",
                                  x=when(rows["ts"] + rows["bucket_ms"]), y=rows["unowned"],
                                  mode="lines", line_shape="hv", line=dict(dash="dot", color="#d62728"),
                                  hovertemplate="%{x|%H:%M:%S} UTC: %{y} unowned<extra>" + str(group) + "</extra>"))
    return rates, unowned


def rebalance_bands(rebalances: pd.DataFrame, max_bands: int = MAX_BANDS) -> list[dict]:
    """Grey bands through every row, one per group rebalance (start to end)."""
    if rebalances.empty:
        return []
    return [dict(type="rect", xref="x", yref="paper", x0=s, x1=e, y0=0, y1=1, layer="below", line_width=0,
                 fillcolor="rgba(128,128,128,0.15)")
            for s, e in zip(when(rebalances["start"].head(max_bands)),
                            when(rebalances[["start", "end"]].head(max_bands).max(axis=1) + 1), strict=True)]


# ------------------------------------------------------------------ the figure
def timeline(owners: pd.DataFrame, rebalances: pd.DataFrame, lanes: pd.DataFrame, lab: pd.DataFrame,
             activity: pd.DataFrame, max_partitions: int = 48) -> go.Figure:
    """The whole timeline figure (ownership, member lanes with the lab's lane, records per second)."""
    shown, labels, n_partitions = ownership_rows(owners, max_partitions)
    consumers = sorted(set(owners["consumer"].astype(str)) | set(lanes["consumer"].astype(str)))
    groups = set(lanes["group"]) | set(owners["group"])
    multi = len(groups) > 1
    lane_names = sorted({lane_name(g, c, multi) for g, c in lanes[["group", "consumer"]].itertuples(index=False)})
    lines, lab_trace = lab_marks(lab)
    lane_rows = lane_names + ([LAB_LANE] if lab_trace is not None else [])
    heights = [max(ROW_PX["partition"] * len(shown), 80), max(ROW_PX["lane"] * len(lane_rows), 60), ROW_PX["rate"]]
    title = "partition ownership (colour: consumer; grey bands: group rebalances)"
    if n_partitions > len(shown):
        title += f" — the first {len(shown)} of {n_partitions} partitions"
    gap = 70  # px between rows: room for each row's time ticks and the next row's title
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=gap / (sum(heights) + 2 * gap),
                        row_heights=[h / sum(heights) for h in heights],
                        specs=[[{}], [{}], [{"secondary_y": True}]],
                        subplot_titles=(title, "member lanes: rebalance attempts, failed claims, session events; "
                                               "the lab's steps and faults",
                                        "records per second; partitions without an owner (dotted)"))
    for bar in ownership_bars(owners, rebalances, labels, _palette(consumers)):
        fig.add_trace(bar, row=1, col=1)
    for trace in lane_traces(lanes, multi):
        fig.add_trace(trace, row=2, col=1)
    if lab_trace is not None:
        fig.add_trace(lab_trace, row=2, col=1)
    rates, unowned = rate_traces(activity)
    for trace in rates:
        fig.add_trace(trace, row=3, col=1, secondary_y=False)
    for trace in unowned:
        fig.add_trace(trace, row=3, col=1, secondary_y=True)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=[labels[k] for k in shown][::-1],
                     row=1, col=1)
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=lane_rows[::-1], row=2, col=1)
    fig.update_yaxes(title_text="records/s", rangemode="tozero", row=3, col=1, secondary_y=False)
    top = int(activity["unowned"].max()) if len(activity) else 0
    fig.update_yaxes(title_text="unowned partitions", range=[0, max(top, 1) * 1.05], dtick=max(1, -(-top // 5)),
                     row=3, col=1, secondary_y=True, showgrid=False)
    fig.update_xaxes(type="date", showticklabels=True)
    fig.update_xaxes(title_text="time (UTC)", row=3, col=1)
    fig.update_layout(barmode="overlay", hovermode="closest", height=sum(heights) + 2 * gap + 150,
                      margin=dict(l=10, r=10, t=40, b=40), legend=dict(groupclick="toggleitem"),
                      shapes=rebalance_bands(rebalances) + lines, template="plotly_white")
    return fig
