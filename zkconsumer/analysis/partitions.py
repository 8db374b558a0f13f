"""What each partition's records went through: duplicates, lost offsets, overlapping delivery.

These read every ``record_delivered`` line, so they are the heavy part of ``analyze``; each pass over the
deliveries is one Spark job and nothing trace-sized is cached. Duplicates and loss share one sort: deliveries
in offset order within their (group, topic, partition); an offset equal to the previous one is an extra
delivery, a jump of more than one is a gap. Only those *irregular* rows leave the sort (a few per rebalance),
and everything else about them (how often the offset was delivered, its first delivery) is computed from them.
Overlap needs the deliveries of a consumer cut into *stints* (between two of its ``rebalance_done`` or
``session_expired`` lines, or its ``released`` lines naming the partition): the [first, last] delivery time of
each stint is that consumer's ownership as its deliveries show it; stints of different consumers on the same
partition that intersect are overlaps (inclusive: two deliveries in the same millisecond overlap). A delivery's
stint is looked up in its consumer's (few) boundary positions, a broadcast join, so stints are a hash aggregation
rather than a second sort of every delivery; per-partition counts come from the stints.
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


def irregular_deliveries(deliveries: DataFrame) -> DataFrame:
    """The deliveries that are not the next offset after the previous one (same partition, offset order, then
    time): extra deliveries (``offset == prev_offset``) and the deliveries after a gap. One sort of every
    delivery; the result is small (it grows with duplicates and gaps, not with the trace)."""
    w = Window.partitionBy(*PKEY).orderBy("offset", "ts", "consumer", "seq")
    sd = deliveries.select(
        *PKEY, "offset", "ts", "consumer",
        F.lag("offset").over(w).alias("prev_offset"), F.lag("ts").over(w).alias("prev_ts"),
        F.lag("consumer").over(w).alias("prev_consumer"))
    return sd.where((F.col("offset") == F.col("prev_offset")) | (F.col("offset") > F.col("prev_offset") + 1))


def duplicates(irregular: DataFrame, group_rb: DataFrame) -> DataFrame:
    """One row per extra delivery of an offset, with the group rebalance during/after which it happened.

    An offset delivered k times has k - 1 extra-delivery rows, so ``deliveries`` is their count + 1 and its
    first delivery time is their smallest ``prev_ts`` (the first row's ``prev_ts`` is the first delivery)."""
    per_offset = Window.partitionBy(*PKEY, "offset")
    dups = irregular.where(F.col("offset") == F.col("prev_offset")).select(
        *PKEY, "offset", (F.count("*").over(per_offset) + 1).alias("deliveries"),
        F.min("prev_ts").over(per_offset).alias("first_ts"), F.col("prev_consumer").alias("previous_consumer"),
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


def lost_offsets(irregular: DataFrame, stats: DataFrame, commits: DataFrame, from_zero: bool) -> DataFrame:
    """Offset ranges no line delivered: gaps between delivered offsets, and below the highest commit.

    The expected range of a partition starts at its first delivered offset (or 0 with ``from_zero``) and
    ends below max(highest committed offset, last delivered + 1). Ranges are split at the committed offset:
    ``below_committed`` ranges were committed as consumed yet never delivered. ``stats`` has each partition's
    ``lo`` and ``hi`` delivered offsets.
    """
    inner = irregular.where(F.col("offset") > F.col("prev_offset") + 1).select(
        *PKEY, (F.col("prev_offset") + 1).alias("from_offset"), (F.col("offset") - 1).alias("to_offset"),
        F.col("ts").alias("next_delivery_ts"))
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


STINT_COLUMNS = [*PKEY, "consumer", "stint", "from_ts", "to_ts", "records", "min_offset", "max_offset"]


def stints(deliveries: DataFrame, dones: DataFrame, releases: DataFrame | None = None) -> DataFrame:
    """Per (partition, consumer, stint): first/last delivery time, records, offsets (STINT_COLUMNS), plus the
    consumer's ``_last_seq`` and ``_file`` there, so that the per-consumer figures need no pass of their own.

    A delivery's stint is the number of its consumer's ``dones`` lines (``rebalance_done``, ``session_expired``:
    every partition's stint ends) before it (by ``seq``), plus the number of its ``releases`` of that partition
    before it (group, consumer, seq, topic, partition: a ``released`` line ends the stints of the partitions it
    names, not the others', whose ownership goes on). Both counts only grow with ``seq``, so their sum numbers the
    stints. A member that releases a partition and claims it back in a rebalance it never finishes (kafka-0.8
    gives up after its retries) delivers again before its next ``rebalance_done``: without the release's cut its
    stint would span the other member's ownership in between (issue 39, nemesis seed 24).

    The cut lines are few, so they become small tables of seq ranges, one per stint, and each delivery finds its
    range in a broadcast join (equal consumer, and partition for releases, seq inside the range) instead of a
    sort of every delivery by consumer and seq."""
    d = _count_before(deliveries, dones, ["group", "consumer"], "stint")
    if releases is not None:
        d = _count_before(d, releases, ["group", "consumer", "topic", "partition"], "_released")
        d = d.withColumn("stint", F.col("stint") + F.col("_released"))
    return (d.groupBy(*PKEY, "consumer", "stint")
            .agg(F.min("ts").alias("from_ts"), F.max("ts").alias("to_ts"), F.count("*").alias("records"),
                 F.min("offset").alias("min_offset"), F.max("offset").alias("max_offset"),
                 F.max("seq").alias("_last_seq"), F.min("file").alias("_file")))


def _count_before(rows: DataFrame, cuts: DataFrame, keys: list[str], name: str) -> DataFrame:
    """``rows`` with ``name``: how many ``cuts`` of the same ``keys`` have a smaller ``seq``, by a broadcast join
    of the rows with the cuts' seq ranges."""
    w = Window.partitionBy(*keys).orderBy("seq")
    alias = {k: f"_k_{k}" for k in keys}
    after = cuts.select(*[F.col(k).alias(a) for k, a in alias.items()],
                        F.row_number().over(w).cast("long").alias(name), F.col("seq").alias("_lo"),
                        F.lead("seq").over(w).alias("_hi"))
    first = cuts.groupBy(*[F.col(k).alias(a) for k, a in alias.items()]).agg(
        F.lit(0).cast("long").alias(name), F.lit(None).cast("long").alias("_lo"), F.min("seq").alias("_hi"))
    ranges = F.broadcast(after.unionByName(first))
    inside = F.lit(True)
    for k, a in alias.items():
        inside = inside & (F.col(a) == F.col(k))
    inside = (inside & (F.col("_lo").isNull() | (F.col("seq") > F.col("_lo")))
              & (F.col("_hi").isNull() | (F.col("seq") <= F.col("_hi"))))
    return (rows.join(ranges, inside, "left").withColumn(name, F.coalesce(name, F.lit(0).cast("long")))
            .drop(*alias.values(), "_lo", "_hi"))


def partition_deliveries(st: DataFrame) -> DataFrame:
    """Per partition, from its stints: deliveries, lowest and highest offset, consumers that delivered it."""
    return st.groupBy(*PKEY).agg(
        F.sum("records").alias("deliveries"), F.min("min_offset").alias("lo"), F.max("max_offset").alias("hi"),
        F.countDistinct("consumer").alias("delivering_consumers"))


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


def partition_summary(stats: DataFrame, commits: DataFrame, dups: DataFrame, lost: DataFrame,
                      ovl: DataFrame, owners: DataFrame) -> DataFrame:
    """One row per partition: deliveries, offsets, commit, duplicates, loss, overlaps, owners.

    Every extra delivery repeats an offset, so the distinct offsets are the deliveries minus the duplicates."""
    du = dups.groupBy(*PKEY).agg(F.count("*").alias("duplicate_deliveries"))
    d = stats.join(du, PKEY, "left").select(
        *PKEY, "deliveries",
        (F.col("deliveries") - F.coalesce(F.col("duplicate_deliveries"), F.lit(0))).alias("distinct_offsets"),
        F.col("lo").alias("min_offset"), F.col("hi").alias("max_offset"), "delivering_consumers")
    c = commits.groupBy(*PKEY).agg(F.max("offset").alias("committed"))
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
    lost_ranges: int = 0  # rows of ``lost`` (ranges, not offsets)


def analyze_partitions(deliveries: DataFrame, rest: DataFrame, st: DataFrame, group_rb: DataFrame,
                       owners: DataFrame, from_zero: bool = False) -> PartitionTables:
    """``deliveries`` are read once more here (the offset sort); ``rest`` (every other event) and the stints
    ``st`` are small. Every table built is small and checkpointed, so writing, counting and previewing it never
    re-reads the trace."""
    commits = rest.where(F.col("event") == "offset_committed").select(*PKEY, "offset", "ts")
    stats = partition_deliveries(st)
    irr = irregular_deliveries(deliveries).localCheckpoint()
    dups = committed_at(duplicates(irr, group_rb), commits).localCheckpoint()
    lost = lost_offsets(irr, stats, commits, from_zero).localCheckpoint()
    ovl = overlaps(st, group_rb).localCheckpoint()
    summary = partition_summary(stats, commits, dups, lost, ovl, owners).localCheckpoint()
    return PartitionTables(summary, dups.orderBy(*PKEY, "offset", "duplicate_ts"),
                           lost.orderBy(*PKEY, "from_offset"), ovl.orderBy(*PKEY, "overlap_from"),
                           st.select(*STINT_COLUMNS).orderBy(*PKEY, "from_ts"), lost.count())
