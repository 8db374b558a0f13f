"""The default profile's claim (rebalance.py ``_claim_pipelined``): free owner nodes first, held ones as soon as
their holder lets go, nothing left behind when an attempt gives up. Real ZooKeeper; the holder is a second
session creating the owner node itself, as a previous owner that has not released it yet would hold it."""

from __future__ import annotations

import threading

import pytest
from helpers import consumer, wait_until
from kazoo.client import KazooClient

from zkconsumer.errors import ConsumerRebalanceFailed
from zkconsumer.layout import GroupPaths, encode_owner
from zkconsumer.registry import Registry, connect
from zkconsumer.topics import create_topic


def owners(reg: Registry, group: str = "g") -> dict[str, str]:
    return {f"{t}-{p}": tid for (t, p), tid in sorted(reg.owners(group).items())}


@pytest.fixture
def holder(zk_connect: str):
    """A second ZooKeeper session, holding owner nodes the way another member would."""
    client: KazooClient = connect(zk_connect)
    yield client
    client.stop()
    client.close()


def test_free_nodes_are_claimed_first_and_a_held_one_the_moment_it_is_released(
        registry: Registry, zk_connect: str, holder: KazooClient) -> None:
    create_topic(registry, "t", 4)
    held = GroupPaths("g").owner("t", 2)
    holder.create(held, encode_owner("g_old-0"), ephemeral=True, makepath=True)
    a = consumer(zk_connect, "g", "a", rebalance_backoff_ms=20_000)  # the claim may wait this long for t-2
    started = threading.Thread(target=a.create_message_streams, args=({"t": 1},))
    try:
        started.start()
        # While t-2 is held, the three free partitions are ours already (a multi-op would have taken none).
        wait_until(lambda: owners(registry) == {"t-0": "g_a-0", "t-1": "g_a-0", "t-2": "g_old-0", "t-3": "g_a-0"},
                   message="the free partitions claimed while t-2 is held")
        assert started.is_alive(), "the claim must still be waiting for t-2"
        holder.delete(held)  # the previous owner lets go: the data watch fires, the node is created at once
        started.join(10)
        assert not started.is_alive()
        assert owners(registry) == {f"t-{p}": "g_a-0" for p in range(4)}
        assert a.rebalancer.stats["claim_conflicts"] >= 1
        assert a.rebalancer.stats["failed_attempts"] == 0  # waited for the event, no failed attempt and backoff
        assert a.failure is None
    finally:
        a.shutdown()
        started.join(10)


def test_a_claim_that_gives_up_leaves_no_owner_node_behind(
        registry: Registry, zk_connect: str, holder: KazooClient) -> None:
    create_topic(registry, "t", 4)
    holder.create(GroupPaths("g").owner("t", 1), encode_owner("g_squatter-0"), ephemeral=True, makepath=True)
    a = consumer(zk_connect, "g", "a", rebalance_backoff_ms=300, rebalance_max_retries=2)
    try:
        with pytest.raises(ConsumerRebalanceFailed):
            a.create_message_streams({"t": 1})
        # Every attempt created t-0, t-2 and t-3, waited for t-1 and gave up: what it created is gone again.
        assert owners(registry) == {"t-1": "g_squatter-0"}
        assert a.rebalancer.stats["failed_attempts"] == 2
        assert not a.owned_partitions()
    finally:
        a.shutdown()


def test_a_moving_partition_goes_straight_from_releaser_to_claimer(registry: Registry, zk_connect: str) -> None:
    """Two members trade partitions: the joiner waits (with a watch) for nodes the first member still holds; no
    attempt fails, whatever the order in which their rebalances reach ZooKeeper."""
    create_topic(registry, "t", 8)
    a = consumer(zk_connect, "g", "a")
    b = consumer(zk_connect, "g", "b")
    try:
        a.create_message_streams({"t": 1})
        wait_until(lambda: owners(registry) == {f"t-{p}": "g_a-0" for p in range(8)}, message="a owns all")
        b.create_message_streams({"t": 1})
        wait_until(lambda: owners(registry) == {**{f"t-{p}": "g_a-0" for p in range(4)},
                                                **{f"t-{p}": "g_b-0" for p in range(4, 8)}}, message="split")
        assert a.rebalancer.stats["failed_attempts"] == b.rebalancer.stats["failed_attempts"] == 0
    finally:
        b.shutdown()
        a.shutdown()
