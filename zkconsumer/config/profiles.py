"""The two profiles: ``kafka-0.8`` (Kafka 0.8's connector, weaknesses included) and ``default`` (zkconsumer's own).

Both write the same tree, ids and assignments; every difference in *how* a member gets from one assignment to the
next is a named switch of :class:`Profile` (docs/profiles.md), which ``zkconsumer.profile.disable`` can turn off.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkconsumer.zk.timing import ClientTiming

PROFILES = ("default", "kafka-0.8")


@dataclass(frozen=True)
class Profile:
    """Behaviour switches that differ between Kafka 0.8 and zkconsumer's default (docs/profiles.md)."""

    name: str
    #: read the group pipelined and only what changed (registrations by the ids child version, partitions from the
    #: topics' data watches), each read setting the one-shot ids watch again, instead of one synchronous round
    #: trip per node after ZkClient's re-read
    pipelined_reads: bool
    #: claim every owner node of an attempt at once (multi-ops, free partitions first, nothing left behind when
    #: the attempt gives up), the release of what moves sent with the claim's first requests, instead of one
    #: synchronous create per node
    pipelined_claims: bool
    #: a claim on a partition whose previous owner is still a member waits (with a watch) for that owner to
    #: delete its node instead of failing the attempt on the conflict
    wait_for_release: bool
    #: read the start offsets after the claim (sent with its last write) instead of before it: the previous owner
    #: may commit between Kafka's read and its claim, and the new owner restarts from a stale offset
    offsets_after_claim: bool
    #: a release deletes only owner nodes that name this member's thread; Kafka deletes each one it thinks it
    #: owns without looking
    release_only_ours: bool
    #: keep partitions this consumer keeps after the rebalance (no release, no fetch stop) instead of
    #: stopping the world; the attempt's whole sequence follows it (attempt.py: Incremental or StopTheWorld)
    keep_unmoved: bool
    #: commit only records the caller has finished with (it asked for the next one, or committed), instead
    #: of every record handed out
    commit_processed_only: bool
    #: before claiming, re-read the membership; if it changed, recompute at once instead of claiming stale
    recheck_membership: bool
    #: while the ZooKeeper connection is suspended, hand out nothing (Kafka's streams keep handing out what is
    #: already queued: the partitions may already belong to someone else)
    pause_when_suspended: bool = True
    #: hand out nothing while the session is not known alive by this process's own clock (zk/lease.py): a member
    #: woken from a pause longer than its session (a GC pause) must not deliver what others own now; Kafka 0.8's
    #: streams hand out whatever is queued until ZooKeeper tells them otherwise
    fence_on_session_lease: bool = True
    #: a member whose registration cannot be decoded is left out (its node watched until fixed) and an offset
    #: node holding garbage is treated as absent; Kafka fails the rebalance attempt instead (docs/profiles.md)
    skip_broken_nodes: bool = True
    #: watch our own owner nodes and registration: someone deleting or overwriting them triggers a rebalance
    #: that puts them back (Kafka 0.8 watches neither)
    watch_own_nodes: bool = True
    #: a rebalance whose claims wait on owner nodes another session holds goes on trying until a session timeout
    #: has passed since it began, whatever ``rebalance.max.retries`` x ``rebalance.backoff.ms`` says: Kafka's FAQ
    #: rule (that product must exceed zookeeper.session.timeout.ms, so a dead holder's nodes expire first)
    #: enforced instead of advised. Kafka 0.8 gives up after its retries ("can't rebalance after 4 retries")
    claims_outlast_session: bool = True
    #: a rebalance that gives up after the start raises ConsumerRebalanceFailed through the streams; Kafka 0.8's
    #: watcher thread only logs it ("error during syncedRebalance") and the consumer sits registered with no
    #: partitions until the next change of the group (failure mode b, docs/failure-modes.md)
    surface_rebalance_failure: bool = True
    #: after the session expired, stop the old session's fetchers before registering again; Kafka 0.8's
    #: ``handleNewSession`` only forgets what it owned (``resetState``), registers, and leaves the fetchers to its
    #: rebalance's ``closeFetchers``: they go on handing out records through the registration and the rebalance's
    #: first reads, and that work comes between the new registration and the claims (docs/failure-modes.md, a)
    stop_fetchers_before_registering: bool = True
    #: the ZooKeeper client's connection timing (zk/timing.py): kazoo's pings on waking from a pause and keeps a
    #: session the pause did not outlast; ZooKeeper 3.4's Java client (Kafka 0.8's, through zkclient) first drops a
    #: connection it has heard nothing on for two thirds of the session and reconnects after a random 0–1 s, which
    #: a pause of 2.5–3.5 s with a 4 s session often does not survive (docs/failure-modes.md)
    zk_client_timing: ClientTiming = ClientTiming.KAZOO


PROFILE_SETTINGS = {
    "kafka-0.8": Profile("kafka-0.8", pipelined_reads=False, pipelined_claims=False, wait_for_release=False,
                         offsets_after_claim=False, release_only_ours=False, keep_unmoved=False,
                         commit_processed_only=False, recheck_membership=False, pause_when_suspended=False,
                         fence_on_session_lease=False, skip_broken_nodes=False, watch_own_nodes=False,
                         claims_outlast_session=False, surface_rebalance_failure=False,
                         stop_fetchers_before_registering=False, zk_client_timing=ClientTiming.ZOOKEEPER_3_4),
    "default": Profile("default", pipelined_reads=True, pipelined_claims=True, wait_for_release=True,
                       offsets_after_claim=True, release_only_ours=True, keep_unmoved=True,
                       commit_processed_only=True, recheck_membership=True),
}


