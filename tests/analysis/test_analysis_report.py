"""The analysis report's verdict lines, rendered as report.md and report.html without Spark: each invariant's
verdict stands apart from the link to its table, the same way in both formats."""

from __future__ import annotations

import base64
import re

import pandas as pd
from browser import remote_references

from zkconsumer.analysis.invariants import InvariantCounts
from zkconsumer.analysis.pipeline import invariant_bullets
from zkconsumer.analysis.report import Report

TABLES = ("lost_offsets", "overlaps", "duplicates_committed", "commits_backwards", "faults")


def _report(inv: InvariantCounts) -> Report:
    r = Report("t")
    r.bullets(invariant_bullets(r, inv))
    return r


def test_a_holding_verdict_is_set_apart_from_its_table_link_in_markdown_and_html() -> None:
    r = _report(InvariantCounts())
    md, page = r.to_markdown(), r.to_html()
    for table in TABLES:
        assert f"holds ([{table}.csv](tables/{table}.csv))" in md
        assert f'holds (<a href="tables/{table}.csv">{table}.csv</a>)' in page
    # no verdict or word glued to a link, in either format
    assert not re.search(r"\w\[", md) and not re.search(r"\w<a ", page)
    assert "- every partition owned again within session timeout + 1 s of a fault healing: no fault in this run, " \
           "holds ([faults.csv](tables/faults.csv))" in md


def test_a_broken_verdict_is_bold_in_both_formats_and_its_count_is_set_apart_from_the_link() -> None:
    r = _report(InvariantCounts(duplicates_committed=2, commits_backwards=1, unowned_after_heal=3,
                                faults=[{"fault": "zk-cut"}]))
    md, page = r.to_markdown(), r.to_html()
    assert ("every duplicate inside an uncommitted window: **broken**: 2 duplicates of committed records "
            "([duplicates_committed.csv](tables/duplicates_committed.csv))") in md
    assert ("every duplicate inside an uncommitted window: <strong>broken</strong>: 2 duplicates of committed "
            'records (<a href="tables/duplicates_committed.csv">duplicates_committed.csv</a>)') in page
    assert "1 faults, <strong>broken</strong>: 3 partitions unowned (<a href=\"tables/faults.csv\">" in page
    assert "**" not in page and "zero records lost: holds" in page


def test_see_renders_one_bracketed_link_per_format() -> None:
    r = Report("t")
    r.p("3 extra deliveries" + r.see("duplicates.csv", "tables/a&b.csv"))
    assert "3 extra deliveries ([duplicates.csv](tables/a&b.csv))" in r.to_markdown()
    assert '<p>3 extra deliveries (<a href="tables/a&amp;b.csv">duplicates.csv</a>)</p>' in r.to_html()


def test_a_figure_is_its_png_in_markdown_and_interactive_in_html_with_plotly_js_once(tmp_path) -> None:
    import plotly.graph_objects as go

    r = Report("t")
    r.figure(go.Figure(go.Bar(x=[1], y=["a"], hovertext=["c1"])), "img/ownership.png", "Ownership", "hover a bar")
    r.figure(go.Figure(), None, "Without a PNG")
    md, page = r.to_markdown(), r.to_html()
    assert "![Ownership](img/ownership.png)" in md and "Without a PNG" not in md
    assert page.count("class=\"plotly-graph-div\"") == 2 and page.count("* plotly.js v") == 1
    assert page.index("* plotly.js v") < page.index('id="figure-1"') < page.index('id="figure-2"')
    assert "<figcaption>hover a bar</figcaption>" in page and "<figcaption>Without a PNG</figcaption>" in page
    assert remote_references(page) == []


def test_images_are_embedded_and_tables_sortable_so_the_page_stands_alone(tmp_path) -> None:
    (tmp_path / "img").mkdir()
    png = b"\x89PNG\r\n\x1a\nnot really"
    (tmp_path / "img" / "cdf.png").write_bytes(png)
    r = Report("t")
    r.image("img/cdf.png", "CDF")
    r.image("img/missing.png", "left as a path")
    r.table(pd.DataFrame({"consumer": ["c10", "c9"], "records": [1000, 99]}), "caption")
    page = r.to_html(tmp_path)
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in page
    assert 'src="img/missing.png"' in page and 'src="img/cdf.png"' in r.to_html()  # no base: paths
    assert "<table class='sortable'>" in page and 'querySelectorAll("table.sortable")' in page
    assert remote_references(page) == []
    assert remote_references('<script src="https://cdn.plot.ly/x.js"></script><link href="//f.io/a.css">'
                             '<a href="https://example.org">a link is not loaded</a>') == [
        "https://cdn.plot.ly/x.js", "//f.io/a.css"]
