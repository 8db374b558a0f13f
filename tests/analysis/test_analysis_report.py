"""The analysis report's verdict lines, rendered as report.md and report.html without Spark: each invariant's
verdict stands apart from the link to its table, the same way in both formats."""

from __future__ import annotations

import re

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
