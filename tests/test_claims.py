"""The default profile's claim (claims.py ``OwnerNodes``): free owner nodes first, held ones as soon as
their holder lets go, nothing left behind when an attempt gives up. Real ZooKeeper; the holder is a second
session creating the owner node itself, as a previous owner that has not released it yet would hold it."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import consumer, wait_until
from kazoo.client import KazooClient

from zkconsumer.consumer.zookeeper.claims import ReadAhead
from zkconsumer.errors import ConsumerRebalanceFailed
from zkconsumer.types import TopicPartition
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, encode_owner
from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.server import ZooKeeperServer, four_letter_word
from zkconsumer.zk.topics import create_topic


def owners(reg: Registry, group: str = "g") -> dict[str, str]:
    return {f"{t}-{p}": tid for (t, p), tid in sorted(reg.owners(group).items())}


def owned_by(reg: Registry, tid: str) -> set[str]:
    return {tp for tp, holder in owners(reg).items() if holder == tid}


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
    a = consumer(zk_connect, "g", "a", rebalance_backoff_ms=300, rebalance_max_retries=2,
                 zookeeper_session_timeout_ms=2000)
    try:
        began = time.monotonic()
        said = r"can't rebalance after [3-9] attempts: rebalance.max.retries is 2, .* session timeout \(2000 ms\)"
        with pytest.raises(ConsumerRebalanceFailed, match=said):
            a.create_message_streams({"t": 1})
        # 2 retries x 300 ms is less than the session: the default profile went on until a session timeout had
        # passed (a dead holder's node would have expired by then); a live holder keeps it, and it gives up
        assert time.monotonic() - began >= 2.0
        # Every attempt created t-0, t-2 and t-3, waited for t-1 and gave up: what it created is gone again.
        assert owners(registry) == {"t-1": "g_squatter-0"}
        assert a.rebalancer.stats["failed_attempts"] > 2
        assert not a.owned_partitions()
    finally:
        a.shutdown()


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_an_owner_node_held_past_retries_times_backoff(registry: Registry, zk_connect: str, holder: KazooClient,
                                                       profile: str) -> None:
    """Failure mode b ("can't rebalance after 4 retries"): a holder whose node outlives rebalance.max.retries x
    rebalance.backoff.ms (Kafka's FAQ rule broken) but goes within a session timeout, as a dead member's does.
    Kafka 0.8 gives up; the default profile outlasts it and claims the partition."""
    create_topic(registry, "t", 2)
    a = consumer(zk_connect, "g", "a", zkconsumer_profile=profile)
    try:
        a.create_message_streams({"t": 1})
        wait_until(lambda: owners(registry) == {"t-0": "g_a-0", "t-1": "g_a-0"}, message="a owns both")
        # b's claim of t-1 meets a node a stranger holds (a's released it; the stranger took it before b)
        b = consumer(zk_connect, "g", "b", zkconsumer_profile=profile, rebalance_backoff_ms=200,
                     rebalance_max_retries=2, zookeeper_session_timeout_ms=3000)
        a.shutdown()
        wait_until(lambda: "t-1" not in owners(registry), message="a gone")
        holder.create(GroupPaths("g").owner("t", 1), encode_owner("g_dead-0"), ephemeral=True)
        expiry = threading.Timer(1.5, holder.delete, args=(GroupPaths("g").owner("t", 1),))  # "expires" at 1.5 s
        expiry.start()
        try:
            if profile == "kafka-0.8":
                with pytest.raises(ConsumerRebalanceFailed, match="can't rebalance after 2 retries"):
                    b.create_message_streams({"t": 1})
            else:
                b.create_message_streams({"t": 1})
                assert owners(registry) == {"t-0": "g_b-0", "t-1": "g_b-0"}
                assert b.rebalancer.stats["failed_attempts"] >= 2 and b.failure is None
        finally:
            expiry.cancel()  # kafka-0.8 gave up before it: no delete on a holder the fixture closes
            expiry.join()
            b.shutdown()
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


def watches_of(zk_server: ZooKeeperServer, session_id: int) -> set[str]:
    """The paths ZooKeeper holds a watch on for this session (the ``wchc`` four-letter word), chroot included."""
    out = four_letter_word("127.0.0.1", zk_server.nodes[0].client_port, "wchc")
    paths: set[str] = set()
    mine = False
    for line in out.splitlines():
        if line.startswith("0x"):
            mine = int(line, 16) == session_id
        elif mine and line.strip():
            paths.add(line.strip())
    return paths


def test_one_watch_per_holding_member_and_a_holder_releasing_node_by_node(
        registry: Registry, zk_connect: str, zk_server: ZooKeeperServer, holder: KazooClient) -> None:
    """c gains t-6 and t-7 from member b, which still holds both: c watches only t-6 (a member releases what it
    gives up in one multi-op). This b lets go of them one at a time: c takes t-6, finds t-7 still b's, watches it
    on its own and takes it when b lets go; neither is a conflict, no attempt fails."""
    create_topic(registry, "t", 12)
    paths = GroupPaths("g")
    chroot = "/" + zk_connect.split("/", 1)[1]
    for member in ("a", "b"):  # two members whose nodes this test writes, in the session of `holder`
        holder.create(paths.registration(f"g_{member}"), ConsumerRegistration.static({"t": 1}).encode(),
                      ephemeral=True, makepath=True)
    for p in range(8):  # Range over a, b, c: a 0-3, b 4-7, c 8-11
        holder.create(paths.owner("t", p), encode_owner("g_a-0" if p < 4 else "g_b-0"), ephemeral=True,
                      makepath=True)
    c = consumer(zk_connect, "g", "c", rebalance_backoff_ms=20_000)
    try:
        c.create_message_streams({"t": 1})
        wait_until(lambda: owned_by(registry, "g_c-0") == {f"t-{p}" for p in range(8, 12)}, message="c owns 8-11")
        # a crashes: its registration and owner nodes vanish. Now b: 0-5, c: 6-11.
        txn = holder.transaction()
        txn.delete(paths.registration("g_a"))
        for p in range(4):
            txn.delete(paths.owner("t", p))
        txn.commit()
        session = c.zk.client_id[0]
        wait_until(lambda: chroot + paths.owner("t", 6) in watches_of(zk_server, session),
                   message="c to watch t-6, held by b")
        assert chroot + paths.owner("t", 7) not in watches_of(zk_server, session)  # one watch for b's two nodes
        holder.delete(paths.owner("t", 6))  # b releases node by node
        wait_until(lambda: owners(registry).get("t-6") == "g_c-0", message="c to take t-6")
        wait_until(lambda: chroot + paths.owner("t", 7) in watches_of(zk_server, session),
                   message="c to watch t-7, still b's")
        assert owners(registry)["t-7"] == "g_b-0"
        holder.delete(paths.owner("t", 7))
        wait_until(lambda: owned_by(registry, "g_c-0") == {f"t-{p}" for p in range(6, 12)}, message="c owns 6-11")
        assert c.rebalancer.stats["claim_conflicts"] == 0  # waiting for the member predicted is no conflict
        assert c.rebalancer.stats["failed_attempts"] == 0
        assert c.failure is None
    finally:
        c.shutdown()


def test_the_executor_thread_sets_the_owner_watches_after_the_claim(
        registry: Registry, zk_connect: str, zk_server: ZooKeeperServer) -> None:
    """Each owner node the consumer created gets its exists-watch a moment after the claim (OWNER_WATCH_DELAY_S),
    set by the watcher-executor thread once idle; a node released before then never gets one."""
    create_topic(registry, "t", 4)
    chroot = "/" + zk_connect.split("/", 1)[1]
    paths = GroupPaths("g")
    a = consumer(zk_connect, "g", "a")
    threads_before = threading.active_count()
    try:
        a.create_message_streams({"t": 1})
        session = a.zk.client_id[0]
        nodes = {chroot + paths.owner("t", p) for p in range(4)}
        wait_until(lambda: nodes <= watches_of(zk_server, session), message="a watch on each of a's owner nodes")
        assert not a.rebalancer.owners._arm_due
        assert threading.active_count() <= threads_before + 4  # kazoo: connection + 2 workers; the executor
        b = consumer(zk_connect, "g", "b")
        try:
            b.create_message_streams({"t": 1})
            wait_until(lambda: owned_by(registry, "g_b-0") == {"t-2", "t-3"}, message="b owns t-2 and t-3")
            b_nodes = {chroot + paths.owner("t", p) for p in (2, 3)}
            # the executor takes the due tokens from the queue and then sends the exists requests (async): the
            # server's watch list is what says they are set, not the queue being empty
            wait_until(lambda: b_nodes <= watches_of(zk_server, b.zk.client_id[0]), message="b's owner watches set")
            assert not b.rebalancer.owners._arm_due
            assert not b_nodes & watches_of(zk_server, session)  # released by a: its watches fired and are gone
        finally:
            b.shutdown()
    finally:
        a.shutdown()


def test_the_start_offsets_travel_with_the_claim_that_completes_it(
        registry: Registry, zk_connect: str, holder: KazooClient) -> None:
    """ReadAhead: the read sent right behind the creates that complete the claim sees every node ours (ZooKeeper
    answers a session's requests in order), one round trip sooner; one sent with a multi-op that failed (a node
    taken after all) is dropped and sent again with the create that completes the claim."""
    create_topic(registry, "t", 3)
    paths = GroupPaths("g")
    holder.create(paths.owner("t", 1), encode_owner("g_old-0"), ephemeral=True, makepath=True)
    a = consumer(zk_connect, "g", "a", rebalance_backoff_ms=20_000)
    sent: list[list[str]] = []

    def read_owner_nodes(tps):  # in a's own session, as the offsets are read
        sent.append(sorted(f"{tp.topic}-{tp.partition}" for tp in tps))
        return a.registry.read_many_async(paths.owner(tp.topic, tp.partition) for tp in tps)

    ahead = ReadAhead(read_owner_nodes)
    decision = {TopicPartition("t", p): "g_a-0" for p in range(3)}
    done: list[bool] = []
    claim = threading.Thread(target=lambda: done.append(
        a.rebalancer.owners.claim_pipelined(decision, 1, 1, read_ahead=ahead)))
    try:
        claim.start()  # t-1 is not predicted held: the multi-op fails, then t-0 and t-2 are created one by one
        wait_until(lambda: owned_by(registry, "g_a-0") == {"t-0", "t-2"}, message="the free nodes claimed")
        assert claim.is_alive()
        holder.delete(paths.owner("t", 1))
        claim.join(10)
        assert done == [True]
        answer = ahead.take()
        assert answer is not None
        assert answer() == {paths.owner("t", p): encode_owner("g_a-0") for p in range(3)}
        assert sent == [["t-0", "t-1", "t-2"], ["t-0", "t-1", "t-2"]]  # with the failed multi-op, then with t-1
        assert ahead.take() is None
    finally:
        claim.join(10)
        a.shutdown()
