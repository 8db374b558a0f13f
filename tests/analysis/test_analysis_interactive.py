"""The report's interactive timeline (zkconsumer/analysis/interactive.py): hand-built frames in, the figure's traces,
hover texts and shapes checked. No Spark, no browser (tests/analysis/test_analysis_lab.py opens a real one)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from zkconsumer.analysis import interactive as ix

T0 = 1_700_000_000_000  # 22:13:20.000 UTC


def owners() -> pd.DataFrame:
    return pd.DataFrame({
        "group": ["g"] * 4, "topic": ["t"] * 4, "partition": [0, 1, 0, 1],
        "consumer": ["c1", "c1", "c1", "c2"], "thread": ["c1-0", "c1-0", "c1-0", None],
        "owned_from": [T0 + 100, T0 + 100, T0 + 2_050, T0 + 2_060],
        "owned_to": [T0 + 2_000, T0 + 2_000, T0 + 5_000, T0 + 5_000],
        "end_reason": ["released", "released", "shutdown", "last line (no shutdown)"],
        "rebalance_id": [1, 1, 2, 2]})


def rebalances() -> pd.DataFrame:
    return pd.DataFrame({"group": ["g", "g"], "rebalance_id": [1, 2], "start": [T0, T0 + 1_990],
                         "end": [T0 + 100, T0 + 2_060],
                         "causes": [np.array(["startup"]), np.array(["ids_changed", "startup"])]})


def lanes() -> pd.DataFrame:
    rows = [  # consumer, seq, ts, event, rebalance, attempt, attempts, topic, partition, backoff_ms
        ("c1", 1, T0, "registered", None, None, None, None, None, None),
        ("c1", 2, T0 + 1, "attempt_started", 1, 1, None, None, None, None),
        ("c1", 3, T0 + 100, "rebalance_done", 1, None, 1, None, None, 0),
        ("c2", 1, T0 + 1_990, "attempt_started", 1, 1, None, None, None, None),
        ("c2", 2, T0 + 1_995, "claim_conflict", 1, 1, None, "t", 1, None),
        ("c2", 3, T0 + 2_000, "attempt_started", 1, 2, None, None, None, None),
        ("c2", 4, T0 + 2_010, "claim_conflict", 1, 2, None, "t", 1, None),
        ("c2", 5, T0 + 2_040, "attempt_started", 1, 3, None, None, None, None),
        ("c2", 6, T0 + 2_060, "rebalance_done", 1, None, 3, None, None, 40),
        ("c2", 7, T0 + 3_000, "session_expired", None, None, None, None, None, None),
        ("c1", 4, T0 + 4_000, "attempt_started", 2, 1, None, None, None, None),  # the trace ends in it
    ]
    df = pd.DataFrame(rows, columns=["consumer", "seq", "ts", "event", "rebalance", "attempt", "attempts", "topic",
                                     "partition", "backoff_ms"])
    return df.assign(group="g", cause=None, failure=None)


def lab() -> pd.DataFrame:
    return pd.DataFrame({"ts": [T0 + 1_900, T0 + 2_900, T0 + 3_500], "event": ["lab_step", "fault_injected",
                                                                             "fault_healed"],
                         "step": ["join", None, None], "fault": [None, "pause", "pause"],
                         "target": ["c2", "c2", "c2"]})


def activity() -> pd.DataFrame:
    return pd.DataFrame({"group": ["g"] * 6, "ts": [T0 + i * 1000 for i in range(6)], "bucket_ms": [1000] * 6,
                         "deliveries": [10, 20, 0, 5, 5, 0], "records_per_s": [10.0, 20.0, 0.0, 5.0, 5.0, 0.0],
                         "owned": [2, 2, 2, 2, 2, 0], "unowned": [0, 0, 0, 0, 0, 2]})


def _trace(fig, name: str):
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace {name!r} in {[t.name for t in fig.data]}"
    return found[0]


def test_ownership_bars_one_per_interval_coloured_by_consumer_with_their_story_on_hover() -> None:
    fig = ix.timeline(owners(), rebalances(), lanes(), lab(), activity())
    c1, c2 = _trace(fig, "c1"), _trace(fig, "c2")
    assert c1.type == "bar" and c1.orientation == "h" and list(c1.y) == ["t-0", "t-1", "t-0"]
    assert list(c1.x) == [1_900, 1_900, 2_950] and c1.marker.color != c2.marker.color
    assert str(pd.Timestamp(c1.base[0])) == "2023-11-14 22:13:20.100000"
    hover = c1.hovertext[2]
    assert hover.startswith("<b>c1</b> (thread c1-0)<br>t-0<br>22:13:22.050 – 22:13:25.000 UTC (2,950 ms)")
    assert "given by group rebalance #2 (cause: ids_changed, startup)" in hover and "ended: shutdown" in hover
    assert c2.hovertext[0].startswith("<b>c2</b><br>t-1")  # no thread known: none said
    assert c1.hovertemplate == "%{hovertext}<extra></extra>"
    assert list(fig.layout.yaxis.categoryarray) == ["t-1", "t-0"]  # first partition on top


def test_every_row_shares_one_time_axis() -> None:
    fig = ix.timeline(owners(), rebalances(), lanes(), lab(), activity())
    rows = {t.xaxis for t in fig.data}
    assert rows == {"x", "x2", "x3"}
    assert fig.layout.xaxis.matches == "x3" and fig.layout.xaxis2.matches == "x3"
    assert {fig.layout[a].type for a in ("xaxis", "xaxis2", "xaxis3")} == {"date"}


def test_attempts_end_at_the_next_step_and_retries_carry_their_backoff() -> None:
    spans = ix.attempt_spans(lanes())
    c2 = spans[spans["consumer"] == "c2"]
    assert list(c2["start"] - T0) == [1_990, 2_000, 2_040] and list(c2["end"] - T0) == [2_000, 2_040, 2_060]
    assert list(c2["outcome"]) == ["attempt_started", "attempt_started", "rebalance_done"]
    assert list(c2["backoff_ms"]) == [0, 20, 20]  # 40 ms over the two retries
    last = spans[(spans["consumer"] == "c1") & (spans["rebalance"] == 2)].iloc[0]
    assert last["outcome"] == "" and last["end"] == last["start"]  # unfinished: ends with the trace


def test_member_lanes_show_attempts_backoffs_claims_and_session_events() -> None:
    fig = ix.timeline(owners(), rebalances(), lanes(), lab(), activity())
    assert list(_trace(fig, "attempt → retried").y) == ["c2", "c2"]
    assert "then: another attempt" in _trace(fig, "attempt → retried").hovertext[0]
    assert list(_trace(fig, "attempt → done").y) == ["c1", "c2"]
    backoff = _trace(fig, "backoff")
    assert list(backoff.x) == [20, 20] and "backoff ≈ 20 ms before rebalance 1's attempt 2" in backoff.hovertext[0]
    claims = _trace(fig, "failed claim")
    assert claims.mode == "markers" and list(claims.y) == ["c2", "c2"]
    assert "partition t-1" in claims.hovertext[0] and "attempt 1" in claims.hovertext[0]
    assert list(_trace(fig, "session expired").y) == ["c2"]
    assert "backoff 40 ms" in _trace(fig, "rebalance done").hovertext[1]
    assert list(fig.layout.yaxis2.categoryarray) == ["lab", "c2", "c1"]


def test_the_labs_steps_and_faults_are_lines_through_every_row_and_labelled_marks() -> None:
    fig = ix.timeline(owners(), rebalances(), lanes(), lab(), activity())
    marks = _trace(fig, "lab step / fault")
    assert list(marks.text) == ["join c2", "pause c2", "heal pause c2"] and set(marks.y) == {"lab"}
    lines = [s for s in fig.layout.shapes if s.type == "line"]
    assert len(lines) == 3 and {(s.yref, s.y0, s.y1) for s in lines} == {("paper", 0, 1)}
    assert [s.line.color for s in lines] == [ix.LAB_STYLE[e][0] for e in ("lab_step", "fault_injected",
                                                                           "fault_healed")]


def test_records_per_second_and_rebalance_bands() -> None:
    fig = ix.timeline(owners(), rebalances(), lanes(), lab(), activity())
    rate, unowned = _trace(fig, "records/s"), _trace(fig, "unowned partitions")
    assert list(rate.y) == [10, 20, 0, 5, 5, 0] and rate.line.shape == "hv"
    assert list(unowned.y) == [0, 0, 0, 0, 0, 2] and unowned.yaxis != rate.yaxis
    assert pd.Timestamp(unowned.x[0]) == pd.Timestamp(T0 + 1000, unit="ms")  # a count at the bucket's end
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [(pd.Timestamp(s.x0), pd.Timestamp(s.x1)) for s in bands] == [
        (pd.Timestamp(T0, unit="ms"), pd.Timestamp(T0 + 101, unit="ms")),
        (pd.Timestamp(T0 + 1_990, unit="ms"), pd.Timestamp(T0 + 2_061, unit="ms"))]


def test_partitions_beyond_the_limit_are_left_out_and_the_title_says_so() -> None:
    fig = ix.timeline(owners(), rebalances(), lanes(), lab(), activity(), max_partitions=1)
    assert set(_trace(fig, "c1").y) == {"t-0"} and not [t for t in fig.data if t.name == "c2"]
    assert "the first 1 of 2 partitions" in fig.layout.annotations[0].text


@pytest.mark.parametrize("part", ["owners", "lanes", "lab", "activity", "all"])
def test_an_empty_part_leaves_a_figure(part: str) -> None:
    frames = {"owners": owners(), "lanes": lanes(), "lab": lab(), "activity": activity()}
    for name in frames if part == "all" else [part]:
        frames[name] = frames[name].iloc[0:0]
    fig = ix.timeline(frames["owners"], rebalances().iloc[0:0] if part == "all" else rebalances(), frames["lanes"],
                      frames["lab"], frames["activity"])
    assert fig.to_html(full_html=False, include_plotlyjs=False)
