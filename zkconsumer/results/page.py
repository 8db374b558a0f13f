"""``results.html``: the headline figures across the recorded runs, one chart each, and every record with its
provenance: one offline file (plotly.js inside it once), as the project's other pages."""

from __future__ import annotations

import html

import plotly.graph_objects as go

from zkconsumer.results.history import HEADLINES, Headline
from zkconsumer.results.record import Record

_STYLE = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h2{margin-top:1.6em}.note{color:#555}.none{color:#a60;font-style:italic}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th{background:#f3f3f3}.stale{color:#a60}code{font-size:12px}"""


def headline_figure(headline: Headline, records: list[Record]) -> go.Figure | None:
    series = headline.series(records)
    if not series:
        return None
    fig = go.Figure()
    for s in series:
        fig.add_trace(go.Scatter(
            x=[p.record.data["date"] for p in s.points], y=[p.value for p in s.points], mode="lines+markers",
            name=s.label,
            customdata=[[p.record.name, p.record.commit, p.detail, p.record.data["command"]] for p in s.points],
            hovertemplate="%{y:.4g} " + html.escape(headline.unit) + "<br>%{customdata[2]}<br>"
                          "results/%{customdata[0]}.json, commit %{customdata[1]}<br>%{customdata[3]}"
                          "<extra>%{fullData.name}</extra>"))
    fig.update_layout(height=320, margin={"l": 60, "r": 20, "t": 30, "b": 40}, yaxis_title=headline.unit,
                      legend={"orientation": "h", "y": -0.25}, template="plotly_white")
    return fig


def _records_table(records: list[Record]) -> str:
    rows = []
    for r in sorted(records, key=lambda r: r.data.get("date", ""), reverse=True):
        since = r.stale_since()
        code = f'<span class="stale">changed in {html.escape(since)}</span>' if since else "same"
        m = r.data.get("machine", {})
        rows.append(f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(r.date)}</td>"
                    f"<td>{html.escape(r.commit)}</td><td>{code}</td><td>{m.get('cores', '?')} cores</td>"
                    f"<td><code>{html.escape(r.data['command'])}</code></td></tr>")
    return ('<table id="records"><thead><tr><th>record</th><th>date</th><th>commit</th><th>code since</th>'
            "<th>machine</th><th>command</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def page(records: list[Record]) -> str:
    parts, first = [], True
    for h in HEADLINES:
        fig = headline_figure(h, records)
        parts.append(f'<section class="headline" id="h-{h.key}"><h2>{html.escape(h.title)}</h2>')
        if fig is None:
            parts.append(f'<p class="none">No record has this figure yet: {html.escape(h.how)}.</p>')
        else:
            parts.append(fig.to_html(full_html=False, include_plotlyjs=first, div_id=f"plot-{h.key}",
                                     config={"displaylogo": False, "responsive": True}))
            first = False
        parts.append("</section>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>zkconsumer: results over time</title>
<style>{_STYLE}</style></head>
<body>
<h1>zkconsumer: results over time</h1>
<p class="note">Each point is a recorded run (results/*.json): hover it for its record, commit and command. Runs on
different days ran on different code and machine loads; a record whose code has changed since is marked in the
table below (docs/results.md).</p>
{"".join(parts)}
<h2>Every record</h2>
{_records_table(records)}
</body></html>
"""
