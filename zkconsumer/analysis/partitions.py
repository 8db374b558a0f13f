"""What each partition's records went through: duplicates, lost offsets, overlapping delivery.

These read every ``record_delivered`` line, so they are the heavy part of ``analyze``. Duplicates and loss
share one pass: deliveries sorted by offset within their (group, topic, partition); an offset equal to the
previous one is an extra delivery, a jump of more than one is a gap. Overlap needs the deliveries of a
consumer cut into *stints* (between two of its ``rebalance_done`` lines): the [first, last] delivery time of
each stint is that consumer's ownership as its deliveries show it; stints of different consumers on the same
partition that intersect are overlaps (inclusive: two deliveries in the same millisecond overlap).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

PKEY = ["group", "topic", "partition"]


def attach_rebalance(df: DataFrame, ts_col: str, group_rb: DataFrame, name: str = "rebalance_id") -> DataFrame:
    """Add the group rebalance that started last at or before ``ts_col`` (during or after which it happened).

    A union sorted per group plus ``last(ignorenulls)`` is a range join without a quadratic comparison.
    """
    marks = group_rb.select("group", F.col("start").alias("_t"), F.lit(0).alias("_k"),
                            F.col("rebalance_id").alias("_rid"))
    cols = df.columns
    rows = df.select("*", F.col(ts_col).alias("_t"), F.lit(1).alias("_k"), F.lit(None).cast("long").alias("_rid"),
                     F.monotonically_increasing_id().alias("_row"))
    marks = marks.select(*[F.lit(None).cast(df.schema[c].dataType).alias(c) for c in cols if c != "group"],
                         "group", "_t", "_k", "_rid", F.lit(None).cast("long").alias("_row"))
    w = Window.partitionBy("group").orderBy("_t", "_k", "_row").rowsBetween(Window.unboundedPreceding, 0)
    both = rows.unionByName(marks).withColumn(name, F.last("_rid", ignorenulls=True).over(w))
    return both.where(F.col("_k") == 1).select(*cols, name)


def sorted_deliveries(deliveries: DataFrame) -> DataFrame:
    """Deliveries with the previous delivery of the same partition in offset order (then time)."""
    w = Window.partitionBy(*PKEY).orderBy("offset", "ts", "consumer", "seq")
    peers = Window.partitionBy(*PKEY).orderBy("offset").rangeBetween(0, 0)
    return deliveries.select(
        *PKEY, "offset", "ts", "consumer",
        F.lag("offset").over(w).alias("prev_offset"), F.lag("ts").over(w).alias("prev_ts"),
        F.lag("consumer").over(w).alias("prev_consumer"),
        F.count("*").over(peers).alias("deliveries"), F.min("ts").over(peers).alias("first_ts"))


def duplicates(sorted_d: DataFrame, group_rb: DataFrame) -> DataFrame:
    """One row per extra delivery of an offset, with the group rebalance during/after which it happened."""
    dups = sorted_d.where(F.col("offset") == F.col("prev_offset")).select(
        *PKEY, "offset", "deliveries", "first_ts", F.col("prev_consumer").alias("previous_consumer"),
        F.col("prev_ts").alias("previous_ts"), F.col("consumer").alias("duplicate_consumer"),
        F.col("ts").alias("duplicate_ts"))
    return attach_rebalance(dups, "duplicate_ts", group_rb)


def committed_at(dups: DataFrame, commits: DataFrame) -> DataFrame:
    """Add ``committed_before`` (the partition's highest commit before ``duplicate_ts``) and
    ``inside_uncommitted``: a duplicate of an offset that was not committed yet when it was delivered again is
    at-least-once working as designed; one below an earlier commit means a consumer resumed from a stale
    position. Same sorted-union trick as :func:`attach_rebalance` (no range join)."""
    cols = dups.columns
    marks = commits.select(*PKEY, F.col("ts").alias("_t"), F.lit(0).alias("_k"), F.col("offset").alias("_c"),
                           F.lit(None).cast("long").alias("_row"))
    rows = dups.select("*", F.col("duplicate_ts").alias("_t"), F.lit(1).alias("_k"),
                       F.lit(None).cast("long").alias("_c"), F.monotonically_increasing_id().alias("_row"))
    marks = marks.select(*[F.lit(None).cast(dups.schema[c].dataType).alias(c) for c in cols if c not in PKEY],
                         *PKEY, "_t", "_k", "_c", "_row")
    w = Window.partitionBy(*PKEY).orderBy("_t", "_k", "_row").rowsBetween(Window.unboundedPreceding, -1)
    both = rows.unionByName(marks).withColumn("committed_before", F.max("_c").over(w))
    return both.where(F.col("_k") == 1).select(
        *cols, "committed_before",
        (F.col("committed_before").isNull() | (F.col("offset") >= F.col("committed_before"))
         ).alias("inside_uncommitted"))


def lost_offsets(sorted_d: DataFrame, commits: DataFrame, from_zero: bool) -> DataFrame:
    """Offset ranges no line delivered: gaps between delivered offsets, and below the highest commit.

    The expected range of a partition starts at its first delivered offset (or 0 with ``from_zero``) and
    ends below max(highest committed offset, last delivered + 1). Ranges are split at the committed offset:
    ``below_committed`` ranges were committed as consumed yet never delivered.
    """
    inner = sorted_d.where(F.col("offset") > F.col("prev_offset") + 1).select(
        *PKEY, (F.col("prev_offset") + 1).alias("from_offset"), (F.col("offset") - 1).alias("to_offset"),
        F.col("ts").alias("next_delivery_ts"))
    stats = sorted_d.groupBy(*PKEY).agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
    hw = commits.groupBy(*PKEY).agg(F.max("offset").alias("committed"))
    s = stats.join(hw, PKEY, "full_outer")
    null_ts = F.lit(None).cast("long").alias("next_delivery_ts")
    trailing = s.where(F.col("committed") - 1 > F.coalesce(F.col("hi"), F.lit(-1) if from_zero else F.lit(None))
                       ).select(*PKEY, (F.coalesce(F.col("hi"), F.lit(-1)) + 1).alias("from_offset"),
                                (F.col("committed") - 1).alias("to_offset"), null_ts)
    ranges = inner.unionByName(trailing)
    if from_zero:
        leading = s.where(F.col("lo") > 0).select(*PKEY, F.lit(0).cast("long").alias("from_offset"),
                                                   (F.col("lo") - 1).alias("to_offset"), null_ts)
        ranges = ranges.unionByName(leading)
    ranges = ranges.join(hw, PKEY, "left")
    h = F.coalesce(F.col("committed"), F.lit(-1))
    below = ranges.where(F.col("from_offset") < h).select(
        *PKEY, "from_offset", F.least(F.col("to_offset"), h - 1).alias("to_offset"), "next_delivery_ts",
        "committed", F.lit("below_committed").alias("kind"))
    above = ranges.where(F.col("to_offset") >= h).select(
        *PKEY, F.greatest(F.col("from_offset"), h).alias("from_offset"), "to_offset", "next_delivery_ts",
        "committed", F.lit("gap").alias("kind"))
    out = below.unionByName(above)
    return out.withColumn("count", F.col("to_offset") - F.col("from_offset") + 1)


def stints(deliveries_with_done: DataFrame) -> DataFrame:
    """Per (partition, consumer, stint): first/last delivery time, records, offsets."""
    w = Window.partitionBy("group", "consumer").orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    d = deliveries_with_done.withColumn(
        "stint", F.sum(F.when(F.col("event") == "rebalance_done", 1).otherwise(0)).over(w))
    return (d.where(F.col("event") == "record_delivered")
            .groupBy(*PKEY, "consumer", "stint")
            .agg(F.min("ts").alias("from_ts"), F.max("ts").alias("to_ts"), F.count("*").alias("records"),
                 F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset")))


def overlaps(st: DataFrame, group_rb: DataFrame) -> DataFrame:
    """Pairs of stints of different consumers on one partition whose delivery intervals intersect."""
    a = st.select(*PKEY, *[F.col(c).alias(f"a_{c}") for c in ("consumer", "stint", "from_ts", "to_ts", "records")])
    b = st.select(*PKEY, *[F.col(c).alias(f"b_{c}") for c in ("consumer", "stint", "from_ts", "to_ts", "records")])
    pairs = a.join(b, PKEY).where(
        (F.col("a_consumer") < F.col("b_consumer"))
        & (F.col("a_from_ts") <= F.col("b_to_ts")) & (F.col("b_from_ts") <= F.col("a_to_ts")))
    pairs = pairs.select(
        *PKEY, F.col("a_consumer").alias("consumer_a"), F.col("b_consumer").alias("consumer_b"),
        "a_from_ts", "a_to_ts", "b_from_ts", "b_to_ts",
        F.greatest("a_from_ts", "b_from_ts").alias("overlap_from"),
        F.least("a_to_ts", "b_to_ts").alias("overlap_to"))
    pairs = pairs.withColumn("overlap_ms", F.col("overlap_to") - F.col("overlap_from"))
    return attach_rebalance(pairs, "overlap_from", group_rb)


def partition_summary(sorted_d: DataFrame, commits: DataFrame, dups: DataFrame, lost: DataFrame,
                      ovl: DataFrame, owners: DataFrame) -> DataFrame:
    """One row per partition: deliveries, offsets, commit, duplicates, loss, overlaps, owners."""
    d = sorted_d.groupBy(*PKEY).agg(
        F.count("*").alias("deliveries"), F.countDistinct("offset").alias("distinct_offsets"),
        F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset"),
        F.countDistinct("consumer").alias("delivering_consumers"))
    c = commits.groupBy(*PKEY).agg(F.max("offset").alias("committed"))
    du = dups.groupBy(*PKEY).agg(F.count("*").alias("duplicate_deliveries"))
    lo = lost.groupBy(*PKEY).agg(
        F.sum(F.when(F.col("kind") == "below_committed", F.col("count")).otherwise(0)).alias("lost_below_committed"),
        F.sum(F.when(F.col("kind") == "gap", F.col("count")).otherwise(0)).alias("lost_gap"))
    ov = ovl.groupBy(*PKEY).agg(F.count("*").alias("overlaps"), F.sum("overlap_ms").alias("overlap_ms"))
    ow = owners.groupBy(*PKEY).agg(F.count("*").alias("ownership_intervals"),
                                   F.countDistinct("consumer").alias("owners"))
    out = d.join(c, PKEY, "full_outer")
    for t in (du, lo, ov, ow):
        out = out.join(t, PKEY, "full_outer")
    return (out.na.fill(0, ["deliveries", "distinct_offsets", "delivering_consumers", "duplicate_deliveries",
                            "lost_below_committed", "lost_gap", "overlaps", "overlap_ms",
                            "ownership_intervals", "owners"])
            .orderBy(*PKEY))


@dataclass
class PartitionTables:
    partitions: DataFrame
    duplicates: DataFrame
    lost: DataFrame
    overlaps: DataFrame
    stints: DataFrame


def analyze_partitions(events: DataFrame, group_rb: DataFrame, owners: DataFrame,
                       from_zero: bool = False) -> PartitionTables:
    deliveries = events.where(F.col("event") == "record_delivered").select(
        "group", "consumer", "seq", "ts", "topic", "partition", "offset")
    commits = events.where(F.col("event") == "offset_committed").select(*PKEY, "offset", "ts").cache()
    sd = sorted_deliveries(deliveries).cache()
    dups = committed_at(duplicates(sd, group_rb), commits).cache()
    lost = lost_offsets(sd, commits, from_zero).cache()
    st = stints(events.where(F.col("event").isin("record_delivered", "rebalance_done")).select(
        "group", "consumer", "seq", "ts", "event", "topic", "partition", "offset")).cache()
    ovl = overlaps(st, group_rb).cache()
    summary = partition_summary(sd, commits, dups, lost, ovl, owners)
    return PartitionTables(summary, dups.orderBy(*PKEY, "offset", "duplicate_ts"),
                           lost.orderBy(*PKEY, "from_offset"), ovl.orderBy(*PKEY, "overlap_from"),
                           st.orderBy(*PKEY, "from_ts"))
