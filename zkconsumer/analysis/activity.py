"""``activity``: a group's progress and ownership over time, in fixed buckets.

One row per group and bucket, from the bucket holding the group's first event to the one holding its last, with
no gaps: deliveries (and records per second) in the bucket, and how many of the group's known partitions had an
owner, or none, at the bucket's end. The report plots records per second from it and the compare page lines
variants up on it, so a stop-the-world rebalance shows as a dip in throughput and a spike of unowned partitions.

Buckets are a whole number of seconds, aligned to the epoch (``ts`` is a multiple of ``bucket_ms``): one second,
widened for long traces so that a group has at most about MAX_BUCKETS rows. Deliveries are counted per second
in one pass over the trace, then summed into buckets; ownership comes from the ``ownership`` table's intervals,
merged per partition and turned into a +1/-1 per bucket with a running sum, so the work grows with intervals
and buckets, not with their product.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

BUCKET_MS = 1000
MAX_BUCKETS = 2000
UNBOUNDED = Window.unboundedPreceding


def bucket_ms(span_ms: Column) -> Column:
    """BUCKET_MS, or a whole number of seconds that fits ``span_ms`` into at most MAX_BUCKETS (+1) buckets."""
    per_bucket = F.ceil(span_ms / F.lit(MAX_BUCKETS * 1000)).cast("long") * 1000
    return F.greatest(F.lit(BUCKET_MS).cast("long"), per_bucket)


def _bounds(deliveries: DataFrame, rest: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(per group and second: deliveries; per group: first, last, bucket_ms, base, buckets)."""
    per_second = (deliveries.groupBy("group", F.floor(F.col("ts") / 1000).alias("second"))
                  .agg(F.count("*").alias("n"), F.min("ts").alias("first"), F.max("ts").alias("last")))
    spans = (per_second.select("group", "first", "last")
             .unionByName(rest.groupBy("group").agg(F.min("ts").alias("first"), F.max("ts").alias("last")))
             .groupBy("group").agg(F.min("first").alias("first"), F.max("last").alias("last"))
             .withColumn("bucket_ms", bucket_ms(F.col("last") - F.col("first")))
             .withColumn("base", F.floor(F.col("first") / F.col("bucket_ms")) * F.col("bucket_ms"))
             .withColumn("buckets", F.floor((F.col("last") - F.col("base")) / F.col("bucket_ms")).cast("long") + 1))
    return per_second.drop("first", "last"), spans


def _owned_steps(ownership: DataFrame, spans: DataFrame) -> DataFrame:
    """(group, k, step): +1 where a partition becomes owned at bucket k's end, -1 where it stops.

    A bucket's end is sampled at its last millisecond, or at the group's last event for the last bucket (a trace
    that ends while its members still own everything must not end in a spike of unowned partitions). An interval
    covers the samples within [owned_from, owned_to]; a partition's overlapping intervals (two owners for a
    moment) are merged first, so it counts once."""
    part = Window.partitionBy("group", "topic", "partition").orderBy("owned_from", "owned_to")
    merged = (ownership.join(spans.select("group", "last"), "group")
              .select("group", "topic", "partition", "owned_from",
                      F.coalesce("owned_to", "last").alias("owned_to"))
              .withColumn("_prev", F.max("owned_to").over(part.rowsBetween(UNBOUNDED, -1)))
              .withColumn("_island", F.sum(F.when(F.col("_prev").isNull() | (F.col("owned_from") > F.col("_prev")), 1)
                                           .otherwise(0)).over(part.rowsBetween(UNBOUNDED, 0)))
              .groupBy("group", "topic", "partition", "_island")
              .agg(F.min("owned_from").alias("owned_from"), F.max("owned_to").alias("owned_to")))
    b, base, n = F.col("bucket_ms"), F.col("base"), F.col("buckets")
    # sample k (unclamped) = base + (k + 1) * b - 1: the first k at or after owned_from, the last at or before owned_to
    lo = F.ceil((F.col("owned_from") - base + 1) / b).cast("long") - 1
    hi = F.when(F.col("owned_to") >= F.col("last"), n - 1).otherwise(
        F.floor((F.col("owned_to") - base + 1) / b).cast("long") - 1)
    ranges = merged.join(spans, "group").select("group", F.greatest(lo, F.lit(0)).alias("lo"),
                                                F.least(hi, n - 1).alias("hi")).where(F.col("lo") <= F.col("hi"))
    return (ranges.select("group", F.col("lo").alias("k"), F.lit(1).alias("step"))
            .unionByName(ranges.select("group", (F.col("hi") + 1).alias("k"), F.lit(-1).alias("step")))
            .groupBy("group", "k").agg(F.sum("step").alias("step")))


def activity(deliveries: DataFrame, rest: DataFrame, ownership: DataFrame) -> DataFrame:
    """The ``activity`` table: group, ts, bucket_ms, deliveries, records_per_s, owned, unowned.

    ``deliveries``: the ``record_delivered`` lines (group, ts, topic, partition); ``rest``: the group's other
    events (they bound its time span too); ``ownership``: the ownership intervals (group, topic, partition,
    owned_from, owned_to)."""
    per_second, spans = _bounds(deliveries, rest)
    spans = spans.localCheckpoint(eager=True)  # a few rows, read by every join below
    grid = spans.select("group", "base", "bucket_ms", F.explode(F.sequence(F.lit(0).cast("long"),
                                                                           F.col("buckets") - 1)).alias("k"))
    counts = (per_second.join(spans.select("group", "base", "bucket_ms"), "group")
              .groupBy("group", F.floor((F.col("second") * 1000 - F.col("base")) / F.col("bucket_ms"))
                       .cast("long").alias("k"))
              .agg(F.sum("n").alias("deliveries")))
    known = (ownership.select("group", "topic", "partition")
             .unionByName(deliveries.select("group", "topic", "partition"))
             .groupBy("group").agg(F.countDistinct("topic", "partition").alias("_known")))
    running = Window.partitionBy("group").orderBy("k").rowsBetween(UNBOUNDED, 0)
    return (grid.join(counts, ["group", "k"], "left").join(_owned_steps(ownership, spans), ["group", "k"], "left")
            .join(known, "group", "left")
            .withColumn("owned", F.sum(F.coalesce("step", F.lit(0))).over(running).cast("long"))
            .select("group", (F.col("base") + F.col("k") * F.col("bucket_ms")).cast("long").alias("ts"),
                    F.col("bucket_ms").cast("long").alias("bucket_ms"),
                    F.coalesce("deliveries", F.lit(0)).cast("long").alias("deliveries"),
                    (F.coalesce("deliveries", F.lit(0)) * 1000.0 / F.col("bucket_ms")).alias("records_per_s"),
                    "owned",
                    (F.coalesce("_known", F.lit(0)) - F.col("owned")).cast("long").alias("unowned"))
            .orderBy("group", "ts"))
