"""The timeline's lane and lab lines (zkconsumer/analysis/lanes.py): selected and capped in Spark, one job."""

from __future__ import annotations

import pandas as pd

from zkconsumer.analysis.lanes import timeline_events


def test_lane_and_lab_lines_are_capped_by_time_and_the_backoff_decoded(spark) -> None:
    control = spark.createDataFrame(pd.DataFrame({
        "group": ["g"] * 4, "consumer": ["b", "a", "a", "a"], "seq": [1, 1, 2, 3], "ts": [30, 10, 20, 40],
        "event": ["attempt_started", "attempt_started", "offset_committed", "rebalance_done"],
        "rebalance": [1, 1, None, 1], "phases_ms": [None, None, None, '{"claim": 3, "backoff": 250}']}))
    lab = spark.createDataFrame(pd.DataFrame({"ts": [25], "event": ["lab_step"], "step": ["kill"], "target": ["a"]}))
    lanes, labs = timeline_events(control, lab, cap=2)
    assert list(lanes["consumer"]) == ["a", "b"] and list(lanes["ts"]) == [10, 30]  # no commit; first 2 by time
    assert list(labs["step"]) == ["kill"] and labs["fault"].isna().all()
    lanes, labs = timeline_events(control, None)
    assert lanes["backoff_ms"].tolist()[-1] == 250 and labs.empty
