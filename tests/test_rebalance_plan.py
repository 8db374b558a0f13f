"""The 0.8 rebalance's decision, pure (zkconsumer/consumer/zookeeper/plan.py): what a member releases, keeps, claims and
holds, in both profiles, without ZooKeeper. The rebalancer carrying it out is tested end to end elsewhere
(tests/test_rebalance.py, tests/test_claims.py, the Kafka mixed groups)."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import PROFILE_SETTINGS
from zkconsumer.consumer.zookeeper.plan import RebalancePlan, lost_owner_nodes, plan
from zkconsumer.zk.layout import encode_owner

DEFAULT, KAFKA08 = PROFILE_SETTINGS["default"], PROFILE_SETTINGS["kafka-0.8"]
T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))
ME, OTHER = "g_a", "g_b"
A0, B0 = f"{ME}-0", f"{OTHER}-0"  # consumer thread ids
MEMBERS = {A0: ME, f"{ME}-1": ME, B0: OTHER}


def test_kafka_0_8_stops_the_world() -> None:
    """Everything owned is released and everything assigned claimed again, kept or not; nothing is held."""
    step = plan(KAFKA08, ME, owned={T0: A0, T1: A0}, target={T0: A0, T2: A0},
                last_owners={T2: B0}, thread_owner=MEMBERS)
    assert step == RebalancePlan(release={T0: A0, T1: A0}, keep={}, claim={T0: A0, T2: A0}, hold={})


def test_default_keeps_what_stays_and_releases_only_what_moves() -> None:
    step = plan(DEFAULT, ME, owned={T0: A0, T1: A0}, target={T0: A0, T2: A0})
    assert step.release == {T1: A0} and step.keep == {T0: A0} and step.claim == {T2: A0} and not step.lost


def test_a_partition_moving_to_another_thread_of_this_member_is_released_and_claimed() -> None:
    step = plan(DEFAULT, ME, owned={T0: A0}, target={T0: f"{ME}-1"}, last_owners={T0: A0}, thread_owner=MEMBERS)
    assert step.release == {T0: A0} and step.claim == {T0: f"{ME}-1"}
    assert step.hold == {}  # its previous owner is this member: released in this very attempt


def test_gained_from_a_member_still_in_the_group_is_held_until_it_releases() -> None:
    step = plan(DEFAULT, ME, owned={}, target={T1: A0, T2: A0}, last_owners={T1: B0, T2: "g_gone-0"},
                thread_owner=MEMBERS)
    assert step.claim == {T1: A0, T2: A0}
    assert step.hold == {T1: B0}  # g_gone left: its partition is free to claim at once


def test_held_partitions_are_kafkas_unreleased_partitions_only_when_claims_wait_for_release() -> None:
    no_pipeline = dataclasses.replace(DEFAULT, wait_for_release=False)
    step = plan(no_pipeline, ME, owned={}, target={T1: A0}, last_owners={T1: B0}, thread_owner=MEMBERS)
    assert step.claim == {T1: A0} and step.hold == {}


def test_a_kept_partition_whose_owner_node_was_lost_is_claimed_again() -> None:
    owned = {T0: A0, T1: A0}
    lost = lost_owner_nodes(owned, {T0: encode_owner(A0), T1: None})  # T1's node deleted by someone else
    assert lost == {T1}
    step = plan(DEFAULT, ME, owned=owned, target=owned, lost=lost)
    assert step.keep == {T0: A0} and step.claim == {T1: A0} and step.release == {} and step.lost == {T1}


def test_an_owner_node_overwritten_by_another_thread_is_lost_and_one_not_read_is_not() -> None:
    kept = {T0: A0, T1: A0, T2: A0}
    assert lost_owner_nodes(kept, {T0: encode_owner(B0), T1: encode_owner(A0)}) == {T0}  # T2: watch still set


TPS = st.sampled_from([TopicPartition(t, p) for t in "xy" for p in range(4)])
THREADS = st.sampled_from([A0, f"{ME}-1", B0, "g_c-0"])
OWNERS = st.dictionaries(TPS, THREADS, max_size=8)


@given(owned=st.dictionaries(TPS, st.sampled_from([A0, f"{ME}-1"]), max_size=8),
       target=st.dictionaries(TPS, st.sampled_from([A0, f"{ME}-1"]), max_size=8),
       lost=st.frozensets(TPS), last=OWNERS)
def test_the_plan_accounts_for_every_partition(owned, target, lost, last) -> None:
    """Default profile: owned = release + keep + lost (disjoint); keep + claim = target exactly (the member ends
    up owning its share, no more); held partitions are claims whose last owner is another member."""
    members = {A0: ME, f"{ME}-1": ME, B0: OTHER, "g_c-0": "g_c"}
    step = plan(DEFAULT, ME, owned, target, lost, last, members)
    assert set(step.release) | set(step.keep) | step.lost == set(owned)
    assert not (set(step.release) & set(step.keep)) and not (step.lost & set(step.keep))
    assert {**step.keep, **step.claim} == target and not (set(step.keep) & set(step.claim))
    assert set(step.hold) <= set(step.claim)
    assert all(members.get(step.hold[tp]) not in (None, ME) for tp in step.hold)
    kafka = plan(KAFKA08, ME, owned, target, lost, last, members)
    assert kafka.release == owned and kafka.claim == target and not kafka.keep and not kafka.hold
