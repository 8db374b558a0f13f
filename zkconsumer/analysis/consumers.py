"""Per-consumer figures: records delivered, rebalances joined, time spent rebalancing.

``basics`` is one aggregation over every event (sums, minima and maxima only: a distinct count over every
line would cost a second shuffle of the whole trace; the partitions each consumer delivered come from the
small stints table instead); its ``last_ts`` is also where the rebalance analysis ends a consumer's ownership
or an unfinished rebalance when the consumer was killed (no ``shutdown`` line).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def basics(events: DataFrame) -> DataFrame:
    ev = F.col("event")
    return events.groupBy("group", "consumer").agg(
        F.first("file").alias("file"),
        F.count("*").alias("lines"),
        F.sum(F.when(ev == "record_delivered", 1).otherwise(0)).alias("records"),
        F.sum(F.when(ev == "offset_committed", 1).otherwise(0)).alias("commits"),
        F.sum(F.when(ev == "session_expired", 1).otherwise(0)).alias("session_expirations"),
        F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"), F.max("seq").alias("last_seq"),
        F.max(F.when(ev == "shutdown", True).otherwise(False)).alias("shutdown"))


def consumer_table(base: DataFrame, crb: DataFrame, bad: DataFrame, stints: DataFrame) -> DataFrame:
    """``base`` plus rebalance figures, the partitions delivered (from ``stints``) and the bad lines found in
    the consumer's file."""
    p = stints.groupBy("group", "consumer").agg(F.countDistinct("topic", "partition").alias("partitions_delivered"))
    r = crb.groupBy("group", "consumer").agg(
        F.count("*").alias("consumer_rebalances"),
        F.countDistinct("rebalance_id").alias("rebalances_joined"),
        F.sum("duration_ms").alias("rebalancing_ms"),
        F.sum("claim_conflicts").alias("failed_claims"),
        F.sum(F.when(F.col("status") == "failed", 1).otherwise(0)).alias("failed_rebalances"),
        F.sum(F.when(F.col("status") == "incomplete", 1).otherwise(0)).alias("incomplete_rebalances"))
    b = bad.groupBy("file").agg(F.count("*").alias("bad_lines"))
    out = base.join(r, ["group", "consumer"], "left").join(p, ["group", "consumer"], "left").join(b, "file", "left")
    out = out.na.fill(0, ["partitions_delivered", "consumer_rebalances", "rebalances_joined", "rebalancing_ms",
                          "failed_claims", "failed_rebalances", "incomplete_rebalances", "bad_lines"])
    return _select(out)


def _select(out: DataFrame) -> DataFrame:
    lifetime = F.col("last_ts") - F.col("first_ts")
    return out.select(
        "group", "consumer", "file", "records", "partitions_delivered", "rebalances_joined",
        "consumer_rebalances", "rebalancing_ms", "failed_claims", "failed_rebalances", "incomplete_rebalances",
        "commits", "session_expirations", "lines", "bad_lines", "first_ts", "last_ts",
        lifetime.alias("lifetime_ms"),
        F.when(lifetime > 0, F.round(F.col("rebalancing_ms") / lifetime, 4)).alias("rebalancing_share"),
        "shutdown").orderBy("group", "consumer")
