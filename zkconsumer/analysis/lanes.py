"""The few rows the report's timeline draws besides the tables: each member's control events and the lab's lines.

The driver gets small frames only: the lines are selected in Spark and capped (the first ``cap`` of each by time),
and the caller learns how many there were from the counts taken while staging, so the report can say when it
shows a part. Both come back in one Spark job (a lab-sized analysis pays per job, not per row).
"""

from __future__ import annotations

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from zkconsumer.analysis.interactive import LANE_EVENTS

LANE_CAP = 20_000
LANE_COLUMNS = ("group", "consumer", "seq", "ts", "event", "rebalance", "attempt", "attempts", "topic", "partition",
                "cause", "failure")
LAB_COLUMNS = ("ts", "event", "fault", "target", "step")
_ALL = tuple(dict.fromkeys((*LANE_COLUMNS, *LAB_COLUMNS)))


def _columns(df: DataFrame) -> list[Column]:
    """Every column either part needs, null where a frame lacks one; ``backoff_ms`` decoded from ``phases_ms``."""
    cols = [F.col(n) if n in df.columns else F.lit(None).cast("string").alias(n) for n in _ALL]
    backoff = (F.get_json_object("phases_ms", "$.backoff").cast("long") if "phases_ms" in df.columns
               else F.lit(None).cast("long"))
    return [*cols, backoff.alias("backoff_ms")]


def timeline_events(control: DataFrame, lab: DataFrame | None, cap: int = LANE_CAP
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the members' lane events: attempts, failed claims, rebalance ends, session events; the lab's steps and
    faults), the first ``cap`` of each by time; the lab's part is empty without a lab."""
    lanes = control.where(F.col("event").isin(*LANE_EVENTS)).select(*_columns(control))
    parts = lanes.orderBy("ts", "group", "consumer", "seq").limit(cap).withColumn("_lab", F.lit(False))
    if lab is not None:
        parts = parts.unionByName(lab.select(*_columns(lab)).orderBy("ts").limit(cap).withColumn("_lab", F.lit(True)))
    rows = parts.toPandas()
    is_lab = rows.pop("_lab").astype(bool)
    return (rows[~is_lab][[*LANE_COLUMNS, "backoff_ms"]].reset_index(drop=True),
            rows[is_lab][list(LAB_COLUMNS)].reset_index(drop=True))
