"""compare.html: every variant of a ``zkconsumer compare`` run on one time axis, then the comparison table and a
link to each variant's report.

Each variant's Spark analysis writes an ``activity`` table (records per second and partitions without an owner,
per bucket of time); laid one row per variant on a shared, zoomable axis, a stop-the-world rebalance shows as a
dip to zero and a spike of unowned partitions where an incremental one barely moves, at the same kill. The lab's
actions (``lab.jsonl``) are drawn as lines on each row, so the reader sees what the group answered.

The builders (:func:`lab_marks`, :func:`series`, :func:`timeline_figure`, :func:`page`) do no I/O: compare.py
reads the tables and the lab's trace and writes the file. The page is self-contained: plotly.js is embedded once
(plotly's bundled copy), nothing loads from the network, and links to the reports are relative, so the run
directory can be moved or archived whole.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from zkconsumer.lab.runner import mark_label


class NoTimeline(StrEnum):
    """Why a variant has no row in the timeline: said in its place."""

    NOT_ANALYSED = "not analysed (no Spark analysis): no activity table"
    NO_TABLE = "its analysis wrote no activity table"
    EMPTY = "its activity table is empty: no member traced an event"


class TimeZero(StrEnum):
    """What a variant's t = 0 is."""

    LAB_START = "the lab's start (its schedule's 0)"
    FIRST_BUCKET = "its first activity bucket (no lab start recorded)"


@dataclass(frozen=True)
class LabMark:
    """One of the lab's actions on the traces' clock (epoch ms): a step, a fault struck or healed."""

    ts: int
    label: str


@dataclass(frozen=True)
class Timeline:
    """One variant's row: its activity table (None without one, and ``missing`` says why), the lab's actions, the
    lab's start on the traces' clock, a link to its report.html relative to compare.html (None: no report), and
    when the lab's churn and catch-up ended (``ended_ms``: after it the lab stops every member, which is no
    rebalance; None: not recorded)."""

    name: str
    activity: pd.DataFrame | None
    marks: tuple[LabMark, ...] = ()
    started_ms: int | None = None
    report: str | None = None
    missing: NoTimeline | None = None
    ended_ms: int | None = None

    @property
    def why_none(self) -> NoTimeline | None:
        """Why this variant has no row, or None when it has one."""
        if self.activity is None:
            return self.missing or NoTimeline.NO_TABLE
        return NoTimeline.EMPTY if self.activity.empty else None

    @property
    def time_zero(self) -> TimeZero:
        return TimeZero.LAB_START if self.started_ms is not None else TimeZero.FIRST_BUCKET

    @property
    def t0(self) -> int:
        """t = 0 on the traces' clock: the lab's start, else the first bucket's."""
        if self.started_ms is not None:
            return self.started_ms
        return int(self.activity["ts"].min()) if self.activity is not None and not self.activity.empty else 0


def lab_marks(lines: Iterable[str]) -> list[LabMark]:
    """The lab's actions from its trace's lines (``lab.jsonl``): ``lab_step`` (join, stop, kill -9, ...),
    ``fault_injected`` and ``fault_healed``; a torn or foreign line is skipped."""
    out = []
    for line in lines:
        try:
            e = json.loads(line)
            ts, label = int(e["ts"]), mark_label(e)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if label is not None:
            out.append(LabMark(ts, label))
    return sorted(out, key=lambda m: m.ts)


def series(activity: pd.DataFrame, ended_ms: int | None = None) -> pd.DataFrame:
    """The group's activity per bucket, summed over the groups a run traced (the lab runs one): ts (bucket start),
    end (bucket end, where ``unowned`` was sampled), records_per_s, unowned. With ``ended_ms`` (the lab's churn
    and catch-up over), only the buckets that end by then: a later one samples the members the lab stops at the
    end of every run, every partition unowned at once, which no rebalance did."""
    per = (activity.groupby("ts", as_index=False)
           .agg(bucket_ms=("bucket_ms", "max"), records_per_s=("records_per_s", "sum"), unowned=("unowned", "sum"))
           .sort_values("ts"))
    per["end"] = per["ts"] + per["bucket_ms"]
    if ended_ms is not None:
        per = per[per["end"] <= ended_ms]
    return per[["ts", "end", "records_per_s", "unowned"]].reset_index(drop=True)


#: One colour per variant, the same in both panels (plotly's default cycle).
COLOURS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff",
           "#fecb52")
RATE, UNOWNED = "records per second", "partitions without an owner"
#: Pixels per variant's row; the gap between rows holds the next row's titles.
ROW_PX, GAP_PX, MARGIN_PX = 210, 70, 110


def timeline_figure(timelines: list[Timeline]) -> go.Figure:
    """A row per variant, records per second on the left and partitions without an owner on the right, every
    panel on one shared x axis (seconds since the variant's t = 0): zoom one, all follow. A variant without an
    activity table keeps its row, with the reason written across it."""
    rows = max(1, len(timelines))
    height = rows * ROW_PX + (rows - 1) * GAP_PX + MARGIN_PX
    titles = [f"<b>{html.escape(t.name)}</b>: {what}" for t in timelines for what in (RATE, UNOWNED)]
    fig = make_subplots(rows=rows, cols=2, shared_xaxes="all", subplot_titles=titles,
                        vertical_spacing=GAP_PX / height if rows > 1 else 0.0, horizontal_spacing=0.07)
    span = (float("inf"), float("-inf"))
    for row, t in enumerate(timelines, 1):
        colour = COLOURS[(row - 1) % len(COLOURS)]
        why = t.why_none
        if why is not None:
            # placed on the page, across the row: plotly.js draws no axes for a panel without traces to refer to
            fig.add_annotation(text=f"{html.escape(t.name)}: {why.value}", x=0.5,
                               y=sum(fig.get_subplot(row, 1).yaxis.domain) / 2, xref="paper", yref="paper",
                               showarrow=False, font={"color": "#a60", "size": 14})
            fig.update_yaxes(visible=False, row=row)
            continue
        s = series(t.activity, t.ended_ms)
        if s.empty:  # nothing ended before the lab's end (a run shorter than a bucket): the whole table, then
            s = series(t.activity)
        start, end = (s["ts"] - t.t0) / 1000, (s["end"] - t.t0) / 1000
        span = (min(span[0], float(start.min())), max(span[1], float(end.max())))
        # the last bucket's rate held to its end (a step line stops at its last point)
        rate_x, rate_y = [*start, float(end.iloc[-1])], [*s["records_per_s"], float(s["records_per_s"].iloc[-1])]
        fig.add_trace(go.Scatter(x=rate_x, y=rate_y, mode="lines", line={"shape": "hv", "color": colour},
                                 name=t.name, hovertemplate="%{y:.0f} records/s from t = %{x:.1f} s"
                                 f"<extra>{html.escape(t.name)}</extra>"), row=row, col=1)
        fig.add_trace(go.Scatter(x=end, y=s["unowned"], mode="lines", line={"shape": "hv", "color": colour},
                                 name=t.name, hovertemplate="%{y} unowned at t = %{x:.1f} s"
                                 f"<extra>{html.escape(t.name)}</extra>"), row=row, col=2)
        if t.marks:
            at = [(m.ts - t.t0) / 1000 for m in t.marks]
            for x in at:
                fig.add_vline(x=x, line={"dash": "dot", "width": 1, "color": "#555"}, row=row, col="all")
            top = float(s["records_per_s"].max()) or 1.0
            fig.add_trace(go.Scatter(x=at, y=[top * 1.1] * len(at), mode="markers+text",
                                     marker={"symbol": "triangle-down", "size": 9, "color": "#555"},
                                     text=[m.label for m in t.marks], textposition="top center",
                                     textfont={"size": 10}, name="lab actions",
                                     hovertemplate="%{text} at t = %{x:.1f} s<extra>lab</extra>"), row=row, col=1)
            fig.update_yaxes(range=[0, top * 1.35], row=row, col=1)  # room for the actions' labels
        fig.update_yaxes(rangemode="tozero", row=row)
    if span[0] < span[1]:  # the runs' span, not the default range of a panel left empty
        fig.update_xaxes(range=list(span))
    fig.update_xaxes(showticklabels=True)
    fig.update_xaxes(title_text="seconds since t = 0", row=rows)
    fig.update_layout(height=height, showlegend=False, margin={"t": 50, "b": 60, "l": 60, "r": 30},
                      hovermode="closest")
    return fig


def time_zero_note(timelines: list[Timeline]) -> str:
    """Says what t = 0 is, per variant where they differ."""
    shown = [t for t in timelines if t.why_none is None]
    kinds = {t.time_zero for t in shown}
    if len(kinds) <= 1:
        kind = next(iter(kinds), TimeZero.LAB_START)
        return f"t = 0 is each variant's {kind.value}."
    return "t = 0 is " + "; ".join(f"for {', '.join(t.name for t in shown if t.time_zero is k)}, {k.value}"
                                   for k in TimeZero if k in kinds) + "."


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.na { color: #888; text-align: right; }
td.broken { color: #b00; font-weight: bold; text-align: right; }
.note, .footnotes { color: #555; font-size: 0.9em; }
ul.missing li { color: #a60; }
"""


#: Cells with no number (compare.py: n/a, not counted, an invariant not judged), greyed.
NO_NUMBER = ("n/a", "-", "not judged")


def _cell(text: str) -> str:
    kind = "broken" if text.startswith("BROKEN") else "na" if text.startswith(NO_NUMBER[0]) or text in NO_NUMBER \
        else "num"
    return f'<td class="{kind}">{html.escape(text)}</td>'


def _link(t: Timeline) -> str:
    return (f'<a href="{html.escape(t.report)}">{html.escape(t.name)}</a>' if t.report is not None
            else html.escape(t.name))


def table_html(header: list[str], rows: list[list[str]], footnotes: list[str], timelines: list[Timeline]) -> str:
    """The comparison table (compare.py's ``table_cells``: "n/a [k]" with its reason in the footnotes), each
    variant's column headed by a link to its report."""
    by_name = {t.name: t for t in timelines}
    head = "".join(f"<th>{_link(by_name[h]) if h in by_name else html.escape(h)}</th>" for h in header)
    body = "".join(f"<tr><th>{html.escape(row[0])}</th>{''.join(_cell(c) for c in row[1:])}</tr>" for row in rows)
    notes = "".join(f"<p>{html.escape(f)}</p>" for f in footnotes)
    return (f'<table id="measures"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f'<div class="footnotes">{notes}</div>')


def reports_html(timelines: list[Timeline]) -> str:
    """A line per variant: the link to its report, or why it has none."""
    items = "".join(f'<li data-variant="{html.escape(t.name)}">' + (
        f'<a href="{html.escape(t.report)}">{html.escape(t.name)}: report.html</a>' if t.report is not None
        else f"{html.escape(t.name)}: no report (not analysed)") + "</li>" for t in timelines)
    return f'<ul id="reports">{items}</ul>'


_ENDED_NOTE = (" Each series ends where the lab's churn and the group's catch-up did: after that the lab stops"
               " every member, which would show as every partition unowned at once but is no rebalance.")


def page(title: str, timelines: list[Timeline], header: list[str], rows: list[list[str]],
         footnotes: list[str]) -> str:
    """The whole page: the timeline (plotly.js embedded, once), the table, the reports."""
    missing = [t for t in timelines if t.why_none is not None]
    notes = "".join(f'<li data-variant="{html.escape(t.name)}">{html.escape(t.name)}: {t.why_none.value}</li>'
                    for t in missing)
    plot = timeline_figure(timelines).to_html(full_html=False, include_plotlyjs=True, div_id="timeline",
                                              config={"displaylogo": False, "responsive": True})
    ended = _ENDED_NOTE if any(t.ended_ms is not None for t in timelines) else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>compare: {html.escape(title)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>compare: {html.escape(title)}</h1>
<h2>Over time</h2>
<p class="note">One row per variant, all on one time axis (drag to zoom, double-click to reset; every panel
follows). {html.escape(time_zero_note(timelines))} Dotted lines and triangles: the lab's actions (hover a triangle).
Records per second are per bucket; partitions without an owner are counted at each bucket's end.{ended}</p>
{f'<ul class="missing">{notes}</ul>' if notes else ""}
{plot}
<h2>Measures</h2>
{table_html(header, rows, footnotes, timelines)}
<h2>Reports</h2>
{reports_html(timelines)}
</body></html>
"""
