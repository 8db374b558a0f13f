"""The few rows the report's timeline draws besides the tables: each member's control events and the lab's lines.

The driver gets small frames only: the lines are selected in Spark and capped (the first ``cap`` by time), and the
caller learns how many there were from the counts taken while staging, so the report can say when it shows a part.
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from zkconsumer.analysis.interactive import LANE_EVENTS

LANE_CAP = 20_000
LANE_COLUMNS = ("group", "consumer", "seq", "ts", "event", "rebalance", "attempt", "attempts", "topic", "partition",
                "cause", "failure", "backoff_ms")
LAB_COLUMNS = ("ts", "event", "fault", "target", "step")


def _columns(df: DataFrame, names: tuple[str, ...]) -> list:
    """``names``, null where a frame lacks one (a trace staged before the timeline's columns existed)."""
    return [F.col(n) if n in df.columns else F.lit(None).alias(n) for n in names]


def lane_events(control: DataFrame, cap: int = LANE_CAP) -> pd.DataFrame:
    """The members' lane events (attempts, failed claims, rebalance ends, session events), the first ``cap``."""
    rows = control.where(F.col("event").isin(*LANE_EVENTS)).select(*_columns(control, LANE_COLUMNS))
    return rows.orderBy("ts", "group", "consumer", "seq").limit(cap).toPandas()


def lab_events(lab: DataFrame | None, cap: int = LANE_CAP) -> pd.DataFrame:
    """The lab's steps and faults (``lab.jsonl``), the first ``cap``; empty without a lab."""
    if lab is None:
        return pd.DataFrame(columns=list(LAB_COLUMNS))
    return lab.select(*_columns(lab, LAB_COLUMNS)).orderBy("ts").limit(cap).toPandas()
