"""The rebalancer's explicit lifecycle (:class:`RebalancerState`) on a real ZooKeeper: each transition the
docstring draws, reached by what causes it in a live group."""

from __future__ import annotations

import pytest
from helpers import consumer, expire_session, wait_until

from zkconsumer.consumer.zookeeper.rebalance import RebalancerState as S
from zkconsumer.consumer.zookeeper.triggers import TriggerCause
from zkconsumer.errors import ConsumerRebalanceFailed
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def states(c) -> list[S]:
    """The transitions so far, repeats of the same state folded (there are none: a transition is a change)."""
    return [state for _, state in c.rebalancer.transitions]


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_a_member_goes_from_new_to_stable_rebalances_on_a_join_and_stops_for_good(
        registry: Registry, zk_connect: str, profile: str) -> None:
    create_topic(registry, "t", 2)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile=profile)
    assert a.rebalancer.state is S.NEW
    b = None
    try:
        a.create_message_streams({"t": 1})
        assert a.rebalancer.state is S.STABLE  # the first rebalance runs on the caller's thread
        assert states(a) == [S.NEW, S.REBALANCING, S.STABLE]
        b = consumer(zk_connect, "g", "b", zkconsumer_profile=profile)
        b.create_message_streams({"t": 1})
        wait_until(lambda: len(a.owned_partitions()) == 1 and a.rebalancer.state is S.STABLE
                   and not a.rebalancer.busy, message="a rebalanced for b and settled")
        assert states(a)[:5] == [S.NEW, S.REBALANCING, S.STABLE, S.REBALANCING, S.STABLE]
    finally:
        for c in (b, a):
            if c is not None:
                c.shutdown()
    assert a.rebalancer.state is S.STOPPED
    a.rebalancer.trigger(TriggerCause.IDS_CHANGED)  # a late watch: nothing runs, STOPPED is final
    assert a.rebalancer.state is S.STOPPED and states(a)[-1] is S.STOPPED


def test_an_attempt_that_keeps_failing_ends_in_failed_and_the_next_change_recovers(
        registry: Registry, zk_connect: str) -> None:
    """kafka-0.8's RoundRobin refuses members with different subscriptions: every attempt fails, the rebalance
    gives up after rebalance.max.retries (FAILED); once the odd member leaves, the next rebalance succeeds."""
    create_topic(registry, "t", 2)
    create_topic(registry, "u", 2)
    props = dict(zkconsumer_profile="kafka-0.8", partition_assignment_strategy="roundrobin",
                 rebalance_max_retries=2, rebalance_backoff_ms=100)
    a = consumer(zk_connect, "g", "a", **props)
    odd = consumer(zk_connect, "g", "odd", **props)
    try:
        a.create_message_streams({"t": 1})
        assert a.rebalancer.state is S.STABLE
        with pytest.raises(ConsumerRebalanceFailed):  # the odd member's own first rebalance fails too
            odd.create_message_streams({"u": 1})
        assert a.rebalancer.wait_for(S.FAILED, 20), states(a)
        # Kafka 0.8's watcher thread logs it and leaves the streams waiting (the default profile raises it
        # through them): the member stays registered, owning nothing, until the next change
        assert a.failure is None and not a.owned_partitions()
        odd.shutdown()
        assert a.rebalancer.wait_for(S.STABLE, 20), states(a)
        wait_until(lambda: a.failure is None and len(a.owned_partitions()) == 2, message="a owns t again")
    finally:
        odd.shutdown()
        a.shutdown()


def test_a_session_expiry_passes_through_expired(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 2)
    with consumer(zk_connect, "g", "a") as a:
        a.create_message_streams({"t": 1})
        old = a.zk.client_id[0]
        expire_session(zk_connect, a.zk.client_id, lambda: a.zk.client_id and a.zk.client_id[0] != old)
        wait_until(lambda: S.EXPIRED in states(a) and a.rebalancer.state is S.STABLE,
                   message="a went through EXPIRED and back to STABLE")
        after = states(a)[states(a).index(S.EXPIRED):]
        assert after[:3] == [S.EXPIRED, S.REBALANCING, S.STABLE]
        assert len(a.owned_partitions()) == 2
