"""The lab's five invariants, computed from a run's traces (issue 11; docs/analysis.md "Invariants").

1. zero records lost: no offset below the committed one, nor between delivered ones, was never delivered;
2. never two live owners: no two consumers delivered one partition at the same time (``overlaps``);
3. every duplicate inside an uncommitted window: a record delivered again was not yet covered by a commit of
   its partition when it was delivered again (a redelivery of committed work is a bug; of uncommitted work it
   is at-least-once doing its job);
4. no committed offset moving back: in trace order, per partition and store, no commit below an earlier one
   (partitions with an ``offset_reset`` are exempt: there the log itself moved);
5. every partition owned again within session timeout + 1 s of a fault healing: at ``fault_healed.ts +
   session_timeout_ms + 1000`` every partition seen in the run has an owner. A consumer's ownership ends at its
   ``released`` line, at its own ``session_expired`` line (its owner nodes died with the session, whatever it
   believes) or at its last line, or at a ``kill`` step of it after that line (an idle member writes nothing
   while it owns). When the group is disturbed again before that deadline (a lab step such as a
   kill -9 or a join, another fault struck or healed), or another fault is still open at it, the deadline runs
   from the last such disturbance instead (:func:`judged_deadlines`): a heal is judged on the settled group, not
   on a rebalance a later step started (found by the nemesis: a kill 0.5 s after a pause's heal, judged at the
   pause's deadline, read as a breach).

Each check returns its violating rows, so a failing verdict can say which partition and when.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from zkconsumer.analysis.deadlines import judged_deadlines
from zkconsumer.analysis.rebalances import OwnershipEnd

PKEY = ["group", "topic", "partition"]


@dataclass
class InvariantTables:
    duplicates_committed: DataFrame  # duplicates of offsets already committed when delivered again
    commits_backwards: DataFrame
    reowned: DataFrame  # per fault heal and partition: owned at the deadline?
    faults: DataFrame  # per fault: injected, healed, deadline, partitions unowned at it, latest re-own


@dataclass
class InvariantCounts:
    lost: int = 0
    overlaps: int = 0
    duplicates: int = 0
    duplicates_committed: int = 0
    commits_backwards: int = 0
    unowned_after_heal: int = 0
    faults: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.overlaps or self.duplicates_committed or self.commits_backwards
                    or self.unowned_after_heal)

    def violations(self) -> list[str]:
        """The broken invariants, in words (empty when all hold)."""
        out = []
        if self.lost:
            out.append(f"{self.lost} records lost")
        if self.overlaps:
            out.append(f"{self.overlaps} times two live owners")
        if self.duplicates_committed:
            out.append(f"{self.duplicates_committed} duplicates of committed records")
        if self.commits_backwards:
            out.append(f"{self.commits_backwards} commits moving back")
        if self.unowned_after_heal:
            out.append(f"{self.unowned_after_heal} partitions unowned at heal + session timeout + 1 s")
        return out


def duplicates_of_committed(dups: DataFrame, commits: DataFrame) -> DataFrame:
    """Duplicates whose offset a commit had already covered when they were delivered again.

    A union sorted by time per partition, with the running maximum commit, avoids a range join; at equal
    timestamps the delivery sorts first (a commit written in the same millisecond may not have preceded it)."""
    d = dups.select(*PKEY, F.col("duplicate_ts").alias("_t"), F.lit(0).alias("_k"), "offset",
                    "duplicate_consumer", F.lit(None).cast("long").alias("_c"))
    c = commits.select(*PKEY, F.col("ts").alias("_t"), F.lit(1).alias("_k"), F.lit(None).cast("long").alias("offset"),
                       F.lit(None).cast("string").alias("duplicate_consumer"), F.col("offset").alias("_c"))
    w = Window.partitionBy(*PKEY).orderBy("_t", "_k").rowsBetween(Window.unboundedPreceding, 0)
    both = d.unionByName(c).withColumn("committed_then", F.max("_c").over(w))
    return (both.where((F.col("_k") == 0) & (F.col("committed_then") > F.col("offset")))
            .select(*PKEY, "offset", F.col("_t").alias("duplicate_ts"), "duplicate_consumer", "committed_then"))


def commits_moving_back(commits: DataFrame, resets: DataFrame) -> DataFrame:
    """Commits below an earlier commit of the same partition and store.

    "Earlier" means known to have taken effect before this commit was sent: a commit answered (``ts``) before this
    one was sent (``sent_ts``, or ``ts`` when the line has none), or this consumer's own previous commit (its
    commits are sequential). A commit is a write that takes effect somewhere between its sending and its answer; a
    member paused with a commit in flight writes the answer's line seconds after the server applied it, and two
    commits whose spans overlap have no known order, so neither can be behind the other. (Ordering by the lines'
    ``ts`` alone read such a paused member's commit, applied before others', as going back: found by the
    simulator, docs/simulation.md.)"""
    keyed = commits.withColumn("_store", F.coalesce("store", F.lit("zookeeper"))).withColumn(
        "_sent", F.coalesce("sent_ts", "ts"))
    back = keyed.groupBy(*PKEY, "_store").applyInPandas(_behind_earlier, _BEHIND_SCHEMA)
    back = back.where(F.col("offset") < F.col("previous_max"))
    back = back.join(resets.select(*PKEY).distinct(), PKEY, "left_anti")
    return back.select(*PKEY, F.col("_store").alias("store"), "consumer", "ts", "offset", "previous_max")


_BEHIND_SCHEMA = ("`group` string, topic string, partition long, _store string, consumer string, ts long, "
                  "offset long, previous_max long")


def _behind_earlier(pdf: pd.DataFrame) -> pd.DataFrame:
    """One partition and store: each commit with the highest offset committed before it (see
    :func:`commits_moving_back`), -1 when none: an as-of join on the answers' times, and each consumer's own."""
    pdf = pdf.sort_values(["ts", "consumer", "seq"], kind="stable").reset_index(drop=True)
    answered = pd.DataFrame({"at": pdf["ts"].to_numpy(), "running": pdf["offset"].cummax().to_numpy()})
    sent = pdf[["_sent"]].reset_index().sort_values("_sent", kind="stable")
    asof = pd.merge_asof(sent, answered, left_on="_sent", right_on="at", allow_exact_matches=False)
    before = np.full(len(pdf), -1, dtype="int64")
    before[asof["index"].to_numpy()] = asof["running"].fillna(-1).astype("int64").to_numpy()
    own = pdf.sort_values(["consumer", "seq"], kind="stable").groupby("consumer", sort=False)["offset"]
    own_before = own.transform(lambda o: o.cummax().shift(1)).fillna(-1).astype("int64")
    pdf["previous_max"] = np.maximum(before, own_before.reindex(pdf.index).to_numpy())
    return pdf[["group", "topic", "partition", "_store", "consumer", "ts", "offset", "previous_max"]]


#: A ``lab_step`` that ends a member's process without a line of its own.
KILL_STEP = "kill"


def effective_ownership(owners: DataFrame, control: DataFrame, lab: DataFrame | None = None) -> DataFrame:
    """Ownership intervals as the heal check judges them: cut at the owner's first ``session_expired`` after
    they began; and one that ended with its owner's last line, not with a release, carried on to a ``kill`` step
    of that owner (``lab``'s ``lab_step`` lines) after that line and before the owner's next process registered.

    An idle member writes nothing (no records, nothing new to commit), so its last line can come long before the
    kill; until then it was a live owner (issue 39's reproducer 108: killed 20 ms after a heal's deadline, its last
    line before the deadline read as an unowned partition). ``control`` holds the ``session_expired`` and
    ``registered`` lines."""
    expired = control.where(F.col("event") == "session_expired").select(
        "group", "consumer", F.col("ts").alias("_exp"))
    eff = owners
    if lab is not None:
        kills = lab.where((F.col("event") == "lab_step") & (F.col("step") == KILL_STEP)).select(
            "group", F.col("target").alias("consumer"), F.col("ts").alias("_kill"))
        regs = control.where(F.col("event") == "registered").select("group", "consumer", F.col("ts").alias("_reg"))
        open_end = owners.where(F.col("end_reason").isin(*[e.value for e in OwnershipEnd if e.unreleased]))
        nxt = open_end.join(regs, ["group", "consumer"], "left").groupBy(
            *PKEY, "consumer", "owned_from", "owned_to").agg(
            F.min(F.when(F.col("_reg") > F.col("owned_to"), F.col("_reg"))).alias("_next_reg"))
        killed = nxt.join(kills, ["group", "consumer"]).where(
            (F.col("_kill") >= F.col("owned_to"))
            & (F.col("_next_reg").isNull() | (F.col("_kill") <= F.col("_next_reg")))
        ).groupBy(*PKEY, "consumer", "owned_from", "owned_to").agg(F.min("_kill").alias("_killed"))
        eff = owners.join(killed, [*PKEY, "consumer", "owned_from", "owned_to"], "left").select(
            *PKEY, "consumer", "owned_from", F.coalesce("_killed", "owned_to").alias("owned_to"))
    j = eff.join(expired, ["group", "consumer"], "left")
    j = j.groupBy(*PKEY, "consumer", "owned_from", "owned_to").agg(
        F.min(F.when(F.col("_exp") >= F.col("owned_from"), F.col("_exp"))).alias("_exp"))
    return j.select(*PKEY, "consumer", "owned_from",
                    F.least("owned_to", F.coalesce("_exp", "owned_to")).alias("owned_to"))


_DEADLINES = T.StructType([T.StructField("group", T.StringType()), T.StructField("fault", T.StringType()),
                           T.StructField("healed", T.LongType()), T.StructField("deadline", T.LongType())])


def reowned_after_heal(lab: DataFrame, owners: DataFrame, control: DataFrame, partitions: DataFrame,
                       heals: bool = True) -> DataFrame:
    """Per ``fault_healed`` line and partition: the owner at its judged deadline (null: none). ``heals=False``
    (no heal line in the run) reads nothing: an empty table of the same shape."""
    lines = [r.asDict() for r in lab.select("group", "event", "ts", "fault", "target", "session_timeout_ms", "step")
             .collect()] if heals else []
    heals = lab.sparkSession.createDataFrame(judged_deadlines(lines), _DEADLINES)
    eff = effective_ownership(owners, control, lab if lines else None)
    grid = heals.join(partitions.select(*PKEY).distinct(), "group")
    covering = grid.join(eff, PKEY, "left").where(
        (F.col("owned_from") <= F.col("deadline")) & (F.col("owned_to") >= F.col("deadline")))
    best = covering.groupBy(*PKEY, "fault", "healed").agg(
        F.max_by("consumer", "owned_from").alias("owner"), F.max("owned_from").alias("owned_from"))
    return (grid.join(best, [*PKEY, "fault", "healed"], "left")
            .select("group", "fault", "healed", "deadline", "topic", "partition", "owner",
                    F.greatest(F.lit(0), F.col("owned_from") - F.col("healed")).alias("owner_since_heal_ms"))
            .orderBy("healed", "topic", "partition"))


def fault_summary(lab: DataFrame, reowned: DataFrame) -> DataFrame:
    """Per fault: when it was injected and healed, the partitions unowned at the deadline, the latest re-own."""
    inj = lab.where(F.col("event") == "fault_injected").groupBy("group", "fault").agg(
        F.min("ts").alias("injected"), F.first("target", ignorenulls=True).alias("target"))
    r = reowned.groupBy("group", "fault", "healed", "deadline").agg(
        F.sum(F.when(F.col("owner").isNull(), 1).otherwise(0)).alias("unowned_at_deadline"),
        F.max("owner_since_heal_ms").alias("latest_owner_since_heal_ms"),
        F.count("*").alias("partitions"))
    return inj.join(r, ["group", "fault"], "full_outer").orderBy("injected")


def compute_invariants(events: DataFrame, lab: DataFrame | None, owners: DataFrame, dups: DataFrame,
                       partitions: DataFrame, heals: bool = True, injected: bool = True,
                       duplicates: bool = True) -> InvariantTables:
    """``heals=False`` (no ``fault_healed`` line), ``injected=False`` (no ``fault_injected``) and
    ``duplicates=False`` (no duplicate) leave those checks' tables empty without running them: a plan with
    ``limit(0)`` is answered by the driver, no Spark job."""
    commits = events.where(F.col("event") == "offset_committed").select(
        *PKEY, "consumer", "seq", "ts", "offset", "store", "sent_ts")
    resets = events.where(F.col("event") == "offset_reset").select(*PKEY)
    control = events.where(F.col("event").isin("session_expired", "registered")).select(
        "group", "consumer", "ts", "event")
    if lab is None:
        lab = events.limit(0)
    reowned = reowned_after_heal(lab, owners, control, partitions, heals)
    reowned = reowned.cache() if heals else reowned.limit(0)
    faults = fault_summary(lab, reowned)
    dup_committed = duplicates_of_committed(dups, commits)
    return InvariantTables(dup_committed.cache() if duplicates else dup_committed.limit(0),
                           commits_moving_back(commits, resets).cache(), reowned,
                           faults.cache() if heals or injected else faults.limit(0))


def count_invariants(summary: dict[str, int], tables: InvariantTables) -> InvariantCounts:
    """The verdict's figures: ``summary`` is the partitions summary of ``run_analysis``."""
    faults = [r.asDict() for r in tables.faults.collect()]
    return InvariantCounts(
        lost=summary.get("lost_below_committed", 0) + summary.get("lost_gap", 0),
        overlaps=summary.get("overlaps", 0), duplicates=summary.get("duplicates", 0),
        duplicates_committed=tables.duplicates_committed.count(),
        commits_backwards=tables.commits_backwards.count(),
        unowned_after_heal=sum(int(f.get("unowned_at_deadline") or 0) for f in faults), faults=faults)
