"""Rebalances as the group lived them: per consumer, clustered per group, and who owned what when.

Works on the small, non-delivery part of a trace (``TraceSet.control``), so the window functions here
sort thousands of rows, not millions. Definitions follow docs/trace.md ("How the analysis reads it"):

* consumer rebalance: lines sharing (``consumer``, ``rebalance``), plus the ``rebalance_triggered`` lines
  that led to it (each trigger belongs to the next rebalance whose attempt 1 starts after it);
* group rebalance: consumer rebalances of a group whose [start, end] intervals overlap (gaps and islands);
  it ends when the last of them is done or failed, which is the moment its final assignment is fully owned
  because ownership starts at ``rebalance_done``;
* ownership: from ``rebalance_done.owned`` to the consumer's next ``released`` of that partition, or to
  its last line when it never released (killed, or shut down without releasing).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

UNBOUNDED = Window.unboundedPreceding
UNBOUNDED_F = Window.unboundedFollowing


class OwnershipEnd(StrEnum):
    """Why an ownership interval ended: the ``ownership`` table's ``end_reason``."""

    LIFE_ENDED = "its process ended (a later one took the id)"
    RELEASED = "released"
    OWNED_AGAIN = "owned again"
    SHUTDOWN = "shutdown"
    LAST_LINE = "last line (no shutdown)"

    @property
    def unreleased(self) -> bool:
        """No line of the owner ended it: its lines stop there (a ``kill -9`` after them is its real end)."""
        return self in (OwnershipEnd.LIFE_ENDED, OwnershipEnd.SHUTDOWN, OwnershipEnd.LAST_LINE)


def split_tp(col: str | Column) -> tuple[Column, Column]:
    """``"topic-partition"`` → (topic, partition); topics may contain dashes, the partition is the tail."""
    c = F.col(col) if isinstance(col, str) else col
    return (F.regexp_extract(c, r"^(.*)-(\d+)$", 1).alias("topic"),
            F.regexp_extract(c, r"^(.*)-(\d+)$", 2).cast("long").alias("partition"))


def _ev(name: str) -> Column:
    return F.col("event") == name


def _with_life(lines: DataFrame) -> DataFrame:
    """Each line's life: how many ``rebalance_triggered`` lines with cause ``startup`` its consumer wrote up to it."""
    w = Window.partitionBy("group", "consumer").orderBy("seq").rowsBetween(UNBOUNDED, 0)
    starts = F.when(_ev("rebalance_triggered") & (F.col("cause") == "startup"), 1).otherwise(0)
    return lines.withColumn("_life", F.sum(starts).over(w))


def number_across_lives(control: DataFrame, life_lines: DataFrame | None = None) -> DataFrame:
    """Rebalance numbers that stay unique when a consumer is started again under its id.

    A deploy's restart, or a ``kill -9`` and a start, appends to the same trace file, and the new process counts
    its rebalances from 1 again. Its lines would join the old life's rebalance of the same number: one consumer
    rebalance spanning both lives, and, in a rolling restart, the whole run as one group rebalance. A life
    begins at its ``rebalance_triggered`` line with cause ``startup``. Each life's numbers go on from the
    previous life's highest.

    Also adds ``life_last_ts``, the last line of the line's life, when a later life follows: a rebalance or an
    ownership that life left unfinished ends there, not at the end of the file. It is read from ``life_lines``
    (the consumers' lines but deliveries: commits, every auto-commit interval, bound how late a killed life's
    last sign of life can be) and leaves out the next process's ``registered`` line, written before its startup
    trigger. It is null on the last life, which ends with the consumer's last line (deliveries included)."""
    lines = _with_life(control)
    numbers = lines.groupBy("group", "consumer", "_life").agg(F.coalesce(F.max("rebalance"), F.lit(0)).alias("_top"))
    ends = _with_life(life_lines if life_lines is not None else control).groupBy("group", "consumer", "_life").agg(
        F.max(F.when(~_ev("registered"), F.col("ts"))).alias("_ends"))
    before = Window.partitionBy("group", "consumer").orderBy("_life").rowsBetween(UNBOUNDED, -1)
    later = Window.partitionBy("group", "consumer").orderBy("_life").rowsBetween(1, UNBOUNDED_F)
    offsets = (numbers.join(ends, ["group", "consumer", "_life"], "left")
               .select("group", "consumer", "_life",
                       F.when(F.count("_life").over(later) > 0, F.col("_ends")).alias("life_last_ts"),
                       F.coalesce(F.sum("_top").over(before), F.lit(0)).alias("_offset")))
    return (lines.join(offsets, ["group", "consumer", "_life"], "left")
            .withColumn("rebalance", F.col("rebalance") + F.col("_offset"))
            .drop("_life", "_offset"))


def consumer_rebalances(control: DataFrame, consumers: DataFrame) -> DataFrame:
    """One row per (group, consumer, rebalance): start, end, status, attempts, conflicts, owned share.

    ``consumers`` gives each consumer's ``last_ts`` (end of a rebalance cut short by a kill); lines numbered by
    :func:`number_across_lives` carry the end of their process's life (``life_last_ts``), which comes first.
    """
    if "life_last_ts" not in control.columns:
        control = control.withColumn("life_last_ts", F.lit(None).cast("long"))
    w_next = Window.partitionBy("group", "consumer").orderBy("seq").rowsBetween(0, UNBOUNDED_F)
    first_attempt = F.when(_ev("attempt_started") & (F.col("attempt") == 1), F.col("rebalance"))
    rb = F.when(_ev("rebalance_triggered"), F.first(first_attempt, ignorenulls=True).over(w_next)
                ).otherwise(F.col("rebalance"))
    lines = control.withColumn("rb", rb).where(F.col("rb").isNotNull())
    done, failed = _ev("rebalance_done"), _ev("rebalance_failed")
    agg = lines.groupBy("group", "consumer", "rb").agg(
        F.min("ts").alias("start"),
        F.min(F.when(_ev("attempt_started"), F.col("ts"))).alias("first_attempt_ts"),
        F.max(F.when(done, F.col("ts"))).alias("done_ts"),
        F.max(F.when(failed, F.col("ts"))).alias("failed_ts"),
        F.max(F.when(_ev("claimed"), F.col("ts"))).alias("claimed_ts"),
        F.max(F.when(done | failed, F.col("attempts"))).alias("_attempts"),
        F.max("attempt").alias("_max_attempt"),
        F.sum(F.when(_ev("claim_conflict"), 1).otherwise(0)).alias("claim_conflicts"),
        F.array_sort(F.collect_set("cause")).alias("causes"),
        F.max_by(F.when(done, F.col("owned")), F.when(done, F.col("seq"))).alias("owned"),
        F.max_by(F.col("ids_cversion"), F.when(_ev("attempt_started"), F.col("seq"))).alias("ids_cversion"),
        F.max_by(F.col("strategy"), F.when(_ev("assigned"), F.col("seq"))).alias("strategy"),
        F.max_by(F.col("failure"), F.when(failed, F.col("seq"))).alias("failure"),
        F.max("life_last_ts").alias("life_last_ts"),
    )
    return (agg.join(consumers.select("group", "consumer", "last_ts"), ["group", "consumer"], "left")
            .select(
                "group", "consumer", F.col("rb").alias("rebalance"), "start",
                F.coalesce("done_ts", "failed_ts", "life_last_ts", "last_ts").alias("end"),
                F.when(F.col("done_ts").isNotNull(), "done").when(F.col("failed_ts").isNotNull(), "failed")
                .otherwise("incomplete").alias("status"),
                F.coalesce("_attempts", "_max_attempt", F.lit(0)).alias("attempts"),
                "claim_conflicts", "causes", "ids_cversion", "strategy", "claimed_ts", "owned", "failure")
            .withColumn("duration_ms", F.col("end") - F.col("start")))


def cluster_group_rebalances(crb: DataFrame) -> DataFrame:
    """Add ``rebalance_id`` (1, 2, … per group): overlapping consumer rebalances form one group rebalance."""
    w = Window.partitionBy("group").orderBy("start", "end", "consumer", "rebalance")
    prev_end = F.max("end").over(w.rowsBetween(UNBOUNDED, -1))
    new = F.when(prev_end.isNull() | (F.col("start") > prev_end), 1).otherwise(0)
    return crb.withColumn("_new", new).withColumn(
        "rebalance_id", F.sum("_new").over(w.rowsBetween(UNBOUNDED, 0))).drop("_new")


def final_assignments(crb: DataFrame) -> DataFrame:
    """(group, rebalance_id, tp, owner): each participant's share at its last rebalance in the cluster."""
    w = Window.partitionBy("group", "rebalance_id", "consumer").orderBy(F.col("rebalance").desc())
    last = crb.withColumn("_r", F.row_number().over(w)).where((F.col("_r") == 1) & (F.col("status") == "done"))
    return last.select("group", "rebalance_id", F.explode("owned").alias("tp"), F.col("consumer").alias("owner"))


def _assignments(control: DataFrame) -> DataFrame | None:
    """One ``assign`` mark per ``assigned`` line and partition, carrying the thread it went to; None when the lines
    carry no assignment (a hand-built or converted trace). The map is staged as its JSON text and decoded here, on
    the few ``assigned`` lines: decoding it while staging made the optimizer copy the whole typed parse into the
    plan once more (out of memory)."""
    if "assignment" not in control.columns:
        return None
    share = F.explode(F.from_json("assignment", "map<string,string>"))
    return control.where(_ev("assigned")).select(
        "group", "consumer", "seq", "ts", "rebalance", "life_last_ts", share.alias("tp", "_thread"),
        F.lit("assign").alias("kind"))


def ownership(control: DataFrame, consumers: DataFrame, crb: DataFrame) -> DataFrame:
    """Ownership intervals: group, topic, partition, consumer, thread, owned_from, owned_to, end_reason,
    rebalance_id.

    An ownership that its process's life ended without a ``released`` (a ``kill -9``) ends with that life, even
    when the consumer, started again under its id, owns the partition again later. Its thread is the one the
    consumer's last assignment of the partition before it named."""
    if "life_last_ts" not in control.columns:
        control = control.withColumn("life_last_ts", F.lit(None).cast("long"))
    no_thread = F.lit(None).cast("string").alias("_thread")
    own = control.where(_ev("rebalance_done")).select(
        "group", "consumer", "seq", "ts", "rebalance", "life_last_ts", F.explode("owned").alias("tp"), no_thread,
        F.lit("own").alias("kind"))
    rel = control.where(_ev("released")).select(
        "group", "consumer", "seq", "ts", "rebalance", "life_last_ts", F.explode("parts").alias("tp"), no_thread,
        F.lit("release").alias("kind"))
    marks = own.unionByName(rel)
    assigned = _assignments(control)
    if assigned is not None:
        marks = marks.unionByName(assigned)
    # one partitioning for all three: the thread from the marks up to each row, the next own / release after it
    # (read backwards: the last one seen from the end, before this row)
    w = Window.partitionBy("group", "consumer", "tp")
    upto, after = w.orderBy("seq").rowsBetween(UNBOUNDED, 0), w.orderBy(F.col("seq").desc()).rowsBetween(UNBOUNDED, -1)
    step = F.col("kind") != "assign"
    marks = marks.select(
        "*", F.last(F.when(step, F.col("kind")), ignorenulls=True).over(after).alias("next_kind"),
        F.last(F.when(step, F.col("ts")), ignorenulls=True).over(after).alias("next_ts"),
        F.last("_thread", ignorenulls=True).over(upto).alias("thread"))
    ends = consumers.select("group", "consumer", "last_ts", "shutdown")
    rid = crb.select("group", "consumer", "rebalance", "rebalance_id")
    topic, partition = split_tp("tp")
    return (marks.where(F.col("kind") == "own")
            .join(ends, ["group", "consumer"], "left")
            .join(rid, ["group", "consumer", "rebalance"], "left")
            .withColumn("_life_ended", F.col("life_last_ts").isNotNull()
                        & (F.col("next_ts").isNull() | (F.col("next_ts") > F.col("life_last_ts"))))
            .select("group", topic, partition, "consumer", "thread", F.col("ts").alias("owned_from"),
                    F.when(F.col("_life_ended"), F.col("life_last_ts"))
                    .otherwise(F.coalesce("next_ts", "last_ts")).alias("owned_to"),
                    F.when(F.col("_life_ended"), OwnershipEnd.LIFE_ENDED.value)
                    .when(F.col("next_kind") == "release", OwnershipEnd.RELEASED.value)
                    .when(F.col("next_kind") == "own", OwnershipEnd.OWNED_AGAIN.value)
                    .when(F.col("shutdown"), OwnershipEnd.SHUTDOWN.value)
                    .otherwise(OwnershipEnd.LAST_LINE.value).alias("end_reason"),
                    "rebalance_id")
            .withColumn("owned_ms", F.col("owned_to") - F.col("owned_from")))


def unowned_gaps(owner_intervals: DataFrame, group_rb: DataFrame) -> DataFrame:
    """How long each partition had no owner before each new ownership began, per group rebalance.

    The gap ends when the new owner's ``rebalance_done`` lands and starts when the previous owner (any
    consumer) let go; a partition's first ownership is unowned since its group rebalance started.
    """
    w = Window.partitionBy("group", "topic", "partition").orderBy("owned_from", "consumer")
    prev_to = F.max("owned_to").over(w.rowsBetween(UNBOUNDED, -1))
    starts = group_rb.select("group", "rebalance_id", F.col("start").alias("rb_start"))
    g = (owner_intervals.withColumn("_prev_to", prev_to)
         .join(starts, ["group", "rebalance_id"], "left")
         .select("group", "rebalance_id", "topic", "partition", F.col("consumer").alias("new_owner"),
                 F.coalesce("_prev_to", "rb_start").alias("unowned_from"), F.col("owned_from").alias("unowned_to")))
    return g.withColumn("unowned_ms", F.greatest(F.lit(0), F.col("unowned_to") - F.col("unowned_from")))


def moved_partitions(final: DataFrame) -> DataFrame:
    """Per group rebalance: partitions whose owner changed from the previous group rebalance's final state."""
    prev = final.select("group", (F.col("rebalance_id") + 1).alias("rebalance_id"), "tp",
                        F.col("owner").alias("prev_owner"))
    both = final.join(prev, ["group", "rebalance_id", "tp"], "full_outer")
    return both.groupBy("group", "rebalance_id").agg(
        F.sum(F.when(F.col("prev_owner").isNotNull()
                     & (F.col("owner").isNull() | (F.col("owner") != F.col("prev_owner"))), 1).otherwise(0)
              ).alias("partitions_moved"),
        F.sum(F.when(F.col("prev_owner").isNull() & F.col("owner").isNotNull(), 1).otherwise(0)
              ).alias("partitions_newly_owned"),
        F.sum(F.when(F.col("owner").isNotNull(), 1).otherwise(0)).alias("partitions_owned_after"))


def group_rebalances(crb: DataFrame, moved: DataFrame, gaps: DataFrame) -> DataFrame:
    """One row per group rebalance with the figures the report and plots use."""
    base = crb.groupBy("group", "rebalance_id").agg(
        F.min("start").alias("start"), F.max("end").alias("end"),
        F.max("claimed_ts").alias("claims_done"),
        F.countDistinct("consumer").alias("consumers"),
        F.array_sort(F.collect_set("consumer")).alias("members"),
        F.sum("attempts").alias("attempts"), F.max("attempts").alias("max_attempts"),
        F.sum("claim_conflicts").alias("failed_claims"),
        F.sum(F.when(F.col("status") == "failed", 1).otherwise(0)).alias("failed_consumers"),
        F.sum(F.when(F.col("status") == "incomplete", 1).otherwise(0)).alias("incomplete_consumers"),
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("causes")))).alias("causes"),
        F.max("ids_cversion").alias("ids_cversion"))
    g = gaps.groupBy("group", "rebalance_id").agg(
        F.sum(F.when(F.col("unowned_ms") > 0, 1).otherwise(0)).alias("partitions_unowned"),
        F.max("unowned_ms").alias("max_unowned_ms"), F.sum("unowned_ms").alias("total_unowned_ms"))
    out = (base.join(moved, ["group", "rebalance_id"], "left").join(g, ["group", "rebalance_id"], "left")
           .withColumn("duration_ms", F.col("end") - F.col("start"))
           .na.fill(0, ["partitions_moved", "partitions_newly_owned", "partitions_owned_after",
                        "partitions_unowned", "max_unowned_ms", "total_unowned_ms"]))
    cols = ["group", "rebalance_id", "start", "end", "duration_ms", "consumers", "members", "attempts",
            "max_attempts", "failed_claims", "failed_consumers", "incomplete_consumers", "causes", "ids_cversion",
            "claims_done", "partitions_moved", "partitions_newly_owned", "partitions_owned_after",
            "partitions_unowned", "max_unowned_ms", "total_unowned_ms"]
    return out.select(*cols).orderBy("group", "rebalance_id")


@dataclass
class RebalanceTables:
    consumer_rebalances: DataFrame
    group_rebalances: DataFrame
    ownership: DataFrame
    unowned: DataFrame


def analyze_rebalances(control: DataFrame, consumers: DataFrame, life_lines: DataFrame | None = None
                       ) -> RebalanceTables:
    """``life_lines``: the consumers' lines but deliveries (``TraceSet.rest``), for where each process's life
    ended (:func:`number_across_lives`); without it, the rebalance lines alone."""
    # small tables, checkpointed so that every later query plans against a short lineage
    control = number_across_lives(control, life_lines).localCheckpoint(eager=True)
    crb = cluster_group_rebalances(consumer_rebalances(control, consumers)).localCheckpoint(eager=True)
    owners = ownership(control, consumers, crb).localCheckpoint(eager=True)
    moved = moved_partitions(final_assignments(crb))
    grb0 = crb.groupBy("group", "rebalance_id").agg(F.min("start").alias("start"))
    gaps = unowned_gaps(owners, grb0).localCheckpoint(eager=True)
    grb = group_rebalances(crb, moved, gaps).localCheckpoint(eager=True)
    crb_out = crb.withColumn("owned_count", F.size(F.coalesce("owned", F.array().cast("array<string>")))
                             ).drop("owned")
    return RebalanceTables(crb_out.orderBy("group", "consumer", "rebalance"), grb,
                           owners.orderBy("group", "topic", "partition", "owned_from"),
                           gaps.orderBy("group", "rebalance_id", "topic", "partition"))
