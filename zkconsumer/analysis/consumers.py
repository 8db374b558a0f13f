"""Per-consumer figures: records delivered, rebalances joined, time spent rebalancing.

``basics`` combines the stints (where the deliveries were aggregated) with the other events, so the trace's
millions of deliveries are not read once more for it; its ``last_ts`` is also where the rebalance analysis
ends a consumer's ownership or an unfinished rebalance when the consumer was killed (no ``shutdown`` line).
A consumer's ``file`` is the smallest file name it wrote (one file per consumer in practice).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def basics(rest: DataFrame, stints: DataFrame) -> DataFrame:
    """Per consumer: file, lines, records, commits, session expirations, first/last time and seq, shutdown.

    ``rest`` is every event but the deliveries; the deliveries are counted from their ``stints`` (which carry
    ``_last_seq`` and ``_file``), so this adds no pass over the trace."""
    ev = F.col("event")
    zero = F.lit(0).cast("long")
    from_deliveries = stints.select(
        "group", "consumer", F.col("_file").alias("file"), F.col("records").alias("lines"), "records",
        zero.alias("commits"), zero.alias("session_expirations"), F.col("from_ts").alias("first_ts"),
        F.col("to_ts").alias("last_ts"), F.col("_last_seq").alias("last_seq"), F.lit(False).alias("shutdown"))
    from_rest = rest.select(
        "group", "consumer", "file", F.lit(1).cast("long").alias("lines"), zero.alias("records"),
        F.when(ev == "offset_committed", 1).otherwise(0).cast("long").alias("commits"),
        F.when(ev == "session_expired", 1).otherwise(0).cast("long").alias("session_expirations"),
        F.col("ts").alias("first_ts"), F.col("ts").alias("last_ts"), F.col("seq").alias("last_seq"),
        (ev == "shutdown").alias("shutdown"))
    return from_deliveries.unionByName(from_rest).groupBy("group", "consumer").agg(
        F.min("file").alias("file"), F.sum("lines").alias("lines"), F.sum("records").alias("records"),
        F.sum("commits").alias("commits"), F.sum("session_expirations").alias("session_expirations"),
        F.min("first_ts").alias("first_ts"), F.max("last_ts").alias("last_ts"), F.max("last_seq").alias("last_seq"),
        F.max("shutdown").alias("shutdown"))


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
