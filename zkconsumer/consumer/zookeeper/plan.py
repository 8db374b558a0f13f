"""The decision at the heart of a 0.8 rebalance attempt, as a pure step: what this member releases, keeps, claims
and holds, from what it owns now and what the assignor gives it. No I/O: the rebalancer (rebalance.py) reads the
group, runs the assignor, calls :func:`plan`, and carries the plan out in ZooKeeper.

The model is Kafka trunk's ``CurrentAssignmentBuilder``: a pure step from (current, target, owners) to the next
member state, unit-tested without a cluster. zkconsumer's *held* partitions are its ``UNRELEASED_PARTITIONS``:
assigned to this member, still owned by another member that has not released them yet.

The two profiles (docs/profiles.md) differ here in two policy switches of :class:`~zkconsumer.config.Profile`
(each attempt's sequence around the plan is in attempt.py):

* ``keep_unmoved`` off (Kafka 0.8): stop the world. Everything owned is released before the group is read, and
  everything assigned is claimed again, one owner node at a time.
* ``keep_unmoved`` on (default): a partition assigned to the same thread again is kept (no release, no fetch
  stop), as long as its owner node still names this member's thread; only what moves is released or claimed.
* ``wait_for_release`` on (default): a partition whose previous owner (by the last assignment this member
  computed) is still a member is *held*: its claim waits for that owner's release instead of failing on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import Profile
from zkconsumer.zk.layout import encode_owner

Owners = Mapping[TopicPartition, str]  # partition → consumer thread id


@dataclass(frozen=True)
class RebalancePlan:
    """One attempt's decision. ``release``, ``keep`` and ``claim`` map partitions to thread ids."""

    #: owned now and not kept: given up (owner node deleted, fetching stopped) before the claims
    release: Owners = field(default_factory=dict)
    #: owned now and after, same thread, owner node still ours: untouched (fetching goes on)
    keep: Owners = field(default_factory=dict)
    #: what this member's threads must claim: gained partitions, and kept ones whose owner node was lost
    claim: Owners = field(default_factory=dict)
    #: of ``claim``: still owned by another member (its thread id) that must release first
    hold: Owners = field(default_factory=dict)
    #: owned, assigned to the same thread again, but the owner node no longer names it (deleted or overwritten by
    #: someone else): fetching stops and the partition is claimed again
    lost: frozenset[TopicPartition] = frozenset()


def plan(profile: Profile, consumer_id: str, owned: Owners, target: Owners,
         lost: frozenset[TopicPartition] = frozenset(), last_owners: Owners | None = None,
         thread_owner: Mapping[str, str] | None = None) -> RebalancePlan:
    """The attempt's plan.

    ``owned``: what this member's threads own now; ``target``: this member's share of the new assignment;
    ``lost``: owned partitions whose owner node no longer names us (:func:`lost_owner_nodes`); ``last_owners``:
    the whole group's assignment this member computed last time (who owned what, as far as it knows);
    ``thread_owner``: thread id → consumer id of the members in the group now.
    """
    if not profile.keep_unmoved:
        return RebalancePlan(release=dict(owned), claim=dict(target))
    release = {tp: tid for tp, tid in owned.items() if target.get(tp) != tid}
    lost = frozenset(tp for tp in lost if tp in owned and tp not in release)
    keep = {tp: tid for tp, tid in owned.items() if tp not in release and tp not in lost}
    claim = {tp: tid for tp, tid in target.items() if keep.get(tp) != tid}
    hold: dict[TopicPartition, str] = {}
    if profile.wait_for_release and last_owners:
        members = thread_owner or {}
        hold = {tp: last_owners[tp] for tp in claim
                if tp in last_owners and members.get(last_owners[tp], consumer_id) != consumer_id}
    return RebalancePlan(release, keep, claim, hold, lost)


def lost_owner_nodes(kept: Owners, holders: Mapping[TopicPartition, bytes | None]) -> frozenset[TopicPartition]:
    """Kept partitions whose owner node, as read (``holders``; None: no node), does not name the thread that
    keeps them. Partitions not read (their exists-watch is still set: unchanged) are not in ``holders``."""
    return frozenset(tp for tp, tid in kept.items() if tp in holders and holders[tp] != encode_owner(tid))

