"""The 0.8 rebalance against a real ZooKeeper: Kafka's connector test, joins, leaves, crashes, expiry, growth."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import consumer, expire_session, streaming_members, wait_until

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.consumer.zookeeper.connector import MessageStreamsExist
from zkconsumer.consumer.zookeeper.rebalance import BrokerCount
from zkconsumer.zk.layout import TopicAssignment
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import add_partitions, create_topic

PROFILES = ["default", "kafka-0.8"]


def owners(reg: Registry, group: str) -> dict[str, str]:
    return {f"{t}-{p}": tid for (t, p), tid in sorted(reg.owners(group).items())}


@pytest.mark.parametrize("profile", PROFILES)
def test_kafkas_connector_test(registry: Registry, zk_connect: str, profile: str) -> None:
    """ZookeeperConsumerConnectorTest: consumer1 alone, consumer2 joins, consumer3 with nothing changes nothing."""
    registry.zk.create("/brokers/topics/topic1", TopicAssignment({0: [0], 1: [0]}).encode(), makepath=True)
    c1 = consumer(zk_connect, "group1", "consumer1", zkconsumer_profile=profile)
    c2 = c3 = None
    try:
        c1.create_message_streams({"topic1": 1})
        assert owners(registry, "group1") == {"topic1-0": "group1_consumer1-0", "topic1-1": "group1_consumer1-0"}
        c2 = consumer(zk_connect, "group1", "consumer2", zkconsumer_profile=profile)
        c2.create_message_streams({"topic1": 1})
        expected = {"topic1-0": "group1_consumer1-0", "topic1-1": "group1_consumer2-0"}
        wait_until(lambda: owners(registry, "group1") == expected and not c1.rebalancer.busy
                   and not c2.rebalancer.busy, message="consumer2's share")
        assert len(c1.owned_partitions()) == len(c2.owned_partitions()) == 1
        c3 = consumer(zk_connect, "group1", "consumer3", zkconsumer_profile=profile)
        c3.create_message_streams({})
        wait_until(lambda: c1.rebalancer.rebalance_count >= 3 and c2.rebalancer.rebalance_count >= 2,
                   message="consumers 1 and 2 rebalanced for consumer3")
        wait_until(lambda: owners(registry, "group1") == expected and not c1.rebalancer.busy
                   and not c2.rebalancer.busy, message="the same owners once the group settled")
        assert c3.owned_partitions() == {}
        with pytest.raises(MessageStreamsExist):
            c1.create_message_streams({"topic1": 1})
    finally:
        for c in (c3, c2, c1):
            if c is not None:
                c.shutdown()
    assert registry.consumer_ids("group1") == []
    assert owners(registry, "group1") == {}


def test_registration_node_is_kafkas(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 1)
    with consumer(zk_connect, "g", "c1") as c:
        c.create_message_streams({"t": 2})
        data = registry.read("/consumers/g/ids/g_c1").decode()
        assert data.startswith('{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"')
        assert registry.zk.exists("/consumers/g/ids/g_c1").ephemeralOwner == c.zk.client_id[0]
        assert owners(registry, "g") == {"t-0": "g_c1-0"}


@pytest.mark.parametrize("profile", PROFILES)
def test_leave_moves_partitions(registry: Registry, zk_connect: str, profile: str) -> None:
    create_topic(registry, "t", 4)
    with streaming_members(zk_connect, "a", "b", zkconsumer_profile=profile) as (a, b):
        wait_until(lambda: owners(registry, "g") == {"t-0": "g_a-0", "t-1": "g_a-0", "t-2": "g_b-0", "t-3": "g_b-0"},
                   message="two-way split")
        b.shutdown()
        wait_until(lambda: owners(registry, "g") == {f"t-{p}": "g_a-0" for p in range(4)}, message="a owns all")


CHILD = """
import sys, threading
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
c = ZookeeperConsumerConnector(ConsumerConfig.from_properties({
    "group.id": "g", "consumer.id": "b", "zookeeper.connect": sys.argv[1], "zkconsumer.fetch.enable": False,
    "zookeeper.session.timeout.ms": 2000, "auto.commit.enable": False}))
c.create_message_streams({"t": 1})
print("ready", flush=True)
threading.Event().wait()  # until the test kills us
"""


def test_kill_9_moves_partitions_after_session_timeout(registry: Registry, zk_connect: str) -> None:
    """A consumer process killed with SIGKILL: its ephemerals live until its session times out, then move."""
    create_topic(registry, "t", 2)
    a = consumer(zk_connect, "g", "a")
    child = subprocess.Popen([sys.executable, "-c", CHILD, zk_connect], stdout=subprocess.PIPE, text=True)
    try:
        a.create_message_streams({"t": 1})
        assert child.stdout.readline().strip() == "ready"
        wait_until(lambda: owners(registry, "g") == {"t-0": "g_a-0", "t-1": "g_b-0"}, message="split")
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        killed_at = time.monotonic()
        assert owners(registry, "g")["t-1"] == "g_b-0"  # nobody noticed yet: the session still lives
        wait_until(lambda: owners(registry, "g") == {"t-0": "g_a-0", "t-1": "g_a-0"}, timeout=20,
                   message="a owns all after b's session expired")
        assert time.monotonic() - killed_at >= 1.0  # it took the session timeout, not an instant
    finally:
        child.kill()
        child.wait()
        a.shutdown()


@pytest.mark.parametrize("profile", PROFILES)
def test_server_side_session_expiry_reregisters(registry: Registry, zk_connect: str, zk_server, profile: str) -> None:
    """Expire a's session on the server (a second client on the same id and password, then closed)."""
    create_topic(registry, "t", 2)
    with streaming_members(zk_connect, "a", "b", zkconsumer_profile=profile) as (a, _b):
        split = {"t-0": "g_a-0", "t-1": "g_b-0"}
        wait_until(lambda: owners(registry, "g") == split, message="split")
        # what a still hands out, and has written off, when its registration on the new session returns
        at_registration: list[tuple[set, set]] = []
        register = a.register

        def spy() -> None:
            register()
            with a.state_lock:
                at_registration.append(({tp for tp, p in a.owned.items() if p.generation > 0}, set(a._lost)))

        a.register = spy
        old_session = a.zk.client_id[0]
        expire_session(zk_connect, a.zk.client_id, lambda: a.zk.client_id and a.zk.client_id[0] != old_session)
        wait_until(lambda: a.zk.client_id and a.zk.client_id[0] != old_session and
                   registry.zk.exists("/consumers/g/ids/g_a") is not None and
                   registry.zk.exists("/consumers/g/ids/g_a").ephemeralOwner == a.zk.client_id[0],
                   message="a re-registered on a new session")
        wait_until(lambda: owners(registry, "g") == split, message="split again after expiry")
        events = (a.trace.path.read_text() if a.trace.path else "")
        assert a.failure is None, events
        t0 = TopicPartition("t", 0)
        if profile == "kafka-0.8":
            # Kafka's handleNewSession: forget (never commit) t-0 and register; t-0 is still handed out, until the
            # rebalance's closeFetchers stops it after the registration
            assert at_registration == [({t0}, {t0})]
        else:
            assert at_registration == [(set(), set())]  # stopped before registering again
        assert a._lost == set()


def test_partition_growth_triggers_rebalance(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 2)
    with streaming_members(zk_connect, "a", "b"):
        wait_until(lambda: len(owners(registry, "g")) == 2, message="2 owned")
        add_partitions(registry, "t", 6)
        wait_until(lambda: owners(registry, "g") == {"t-0": "g_a-0", "t-1": "g_a-0", "t-2": "g_a-0",
                                                     "t-3": "g_b-0", "t-4": "g_b-0", "t-5": "g_b-0"},
                   message="6 partitions split 3/3")


def test_wildcard_picks_up_new_topic(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "logs.a", 1)
    create_topic(registry, "other", 1)
    with consumer(zk_connect, "g", "w") as c:
        c.create_message_streams_by_filter("logs\\..*", 1)
        data = registry.read("/consumers/g/ids/g_w").decode()
        assert '"subscription":{"logs\\\\..*":1},"pattern":"white_list"' in data
        assert owners(registry, "g") == {"logs.a-0": "g_w-0"}
        create_topic(registry, "logs.b", 2)
        wait_until(lambda: owners(registry, "g") == {"logs.a-0": "g_w-0", "logs.b-0": "g_w-0", "logs.b-1": "g_w-0"},
                   message="the new matching topic owned")


@pytest.mark.parametrize("profile", PROFILES)
def test_many_consumers_started_together_converge(registry: Registry, zk_connect: str, profile: str) -> None:
    create_topic(registry, "t", 40)
    consumers = [consumer(zk_connect, "g", f"c{i:02d}", zkconsumer_profile=profile, rebalance_max_retries=10)
                 for i in range(20)]
    barrier = threading.Barrier(len(consumers))
    errors: list[BaseException] = []

    def start(c) -> None:
        barrier.wait()
        try:
            c.create_message_streams({"t": 1})
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=start, args=(c,)) for c in consumers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        expected = {f"t-{p}": f"g_c{p // 2:02d}-0" for p in range(40)}
        wait_until(lambda: owners(registry, "g") == expected and all(
            len(c.owned_partitions()) == 2 for c in consumers), timeout=60, message="20 consumers converge")
        if profile == "default":
            assert not errors
    finally:
        for c in consumers:
            c.shutdown()


def test_a_membership_change_during_the_first_rebalance_is_answered_by_it(registry: Registry, zk_connect: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """m2 owns t-0..5. m1 starts; right after its first rebalance read the group ({m1, m2}: m1's share t-0..2), m3
    registers ({m1, m2, m3}: m1 t-0..1, m2 t-2..3, m3 t-4..5). m2 keeps t-2, which m1's stale share wants: the
    first rebalance must see the change and recompute, not wait for t-2 and back off (its watcher thread used to
    take the change away from it; found against Kafka 0.8.2.2's own consumer, docs/profiles.md)."""
    from zkconsumer.consumer.zookeeper.group_view import GroupView
    from zkconsumer.zk.layout import ConsumerRegistration

    create_topic(registry, "t", 6)
    m2 = consumer(zk_connect, "g", "m2", rebalance_backoff_ms=2000)
    m1 = consumer(zk_connect, "g", "m1", rebalance_backoff_ms=2000)
    original = GroupView.read
    injected = []

    def read(view: GroupView, ids_watch):
        result = original(view, ids_watch)
        if view.c is m1 and not injected:
            injected.append(True)
            registry.zk.create("/consumers/g/ids/g_m3", ConsumerRegistration({"t": 1}).encode(), ephemeral=True)
            wait_until(m1.rebalancer.triggers.change_pending,
                       message="m3's registration flagged to m1's first rebalance")
        return result

    try:
        m2.create_message_streams({"t": 1})
        wait_until(lambda: len(owners(registry, "g")) == 6, message="m2 owns everything")
        monkeypatch.setattr(GroupView, "read", read)
        m1.create_message_streams({"t": 1})  # returns after the first rebalance
        number, _, _, phases = m1.rebalancer.phase_log[0]
        assert number == 1 and phases["backoff"] == 0 and phases["owner_wait"] < 1000, phases
        assert sorted(f"{tp.topic}-{tp.partition}" for tp in m1.owned_partitions()) == ["t-0", "t-1"]
    finally:
        m1.shutdown()
        m2.shutdown()


def test_the_brokers_watch_counts_triggers_on_the_first_broker_and_gives_up_when_the_path_goes(registry) -> None:
    """The default profile's BrokerCount: the number of registered brokers without a listing per attempt; the first
    broker after none starts a rebalance; a deleted /brokers/ids stops kazoo's watch silently, and the count then
    says "unknown" so that attempts list the brokers themselves again."""
    zk = registry.zk
    zk.ensure_path("/brokers/ids")
    triggered = threading.Event()
    count = BrokerCount(zk, threading.Event(), lambda cause: cause == "brokers_changed" and triggered.set())
    assert count.known() == 0
    zk.create("/brokers/ids/1", b"{}")
    assert triggered.wait(10)
    wait_until(lambda: count.known() == 1, message="one broker counted")
    zk.delete("/brokers/ids/1")
    wait_until(lambda: count.known() == 0, message="no broker counted")
    zk.delete("/brokers/ids")
    wait_until(lambda: count.known() is None, message="the watch stopped with its path")


def test_a_group_read_again_changes_only_what_changed_and_equals_a_full_read(
        registry: Registry, zk_connect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """GroupView (default profile): a read after members joined and left starts from the last one (the
    subscriptions and topics of the members that stayed are kept; set operations, no pass over the group) and
    gives the very context a first, full read gives, wildcard members included."""
    import threading
    import weakref

    from zkconsumer.assignment.assignors import assign
    from zkconsumer.consumer.zookeeper import group_view
    from zkconsumer.consumer.zookeeper.group_view import GroupView
    from zkconsumer.zk.layout import ConsumerRegistration, whitelist

    create_topic(registry, "t", 4)
    create_topic(registry, "u", 2)
    ids = "/consumers/g/ids"

    def member(name: str, registration: ConsumerRegistration) -> None:
        registry.zk.create(f"{ids}/g_{name}", registration.encode(), makepath=True)

    a = consumer(zk_connect, "g", "a")
    try:
        for i in range(1, 6):
            member(f"m{i}", ConsumerRegistration({"t": 1}))
        member("m6", ConsumerRegistration({"t": 1, "u": 2}))
        view = a.rebalancer.view

        def same_as_a_full_read() -> None:
            ctx, version = view.read(None)
            fresh = GroupView(a, a.rebalancer.paths, lambda cause: None, threading.Event())
            with monkeypatch.context() as m:  # a read of its own, not the view the process shares
                m.setattr(group_view, "_VIEWS", weakref.WeakValueDictionary())
                full, full_version = fresh.read(None)
            assert version == full_version
            assert dict(ctx.subscriptions) == dict(full.subscriptions)
            assert dict(ctx.partitions) == dict(full.partitions)
            assert assign("range", ctx).owners == assign("range", full).owners

        same_as_a_full_read()
        kept = view.read(None)[0].subscriptions["g_m1"]
        full_passes = []
        whole = view._subscriptions
        view._subscriptions = lambda registrations: full_passes.append(1) or whole(registrations)
        registry.zk.delete(f"{ids}/g_m2")
        member("m7", ConsumerRegistration({"u": 1}))
        same_as_a_full_read()
        assert view.read(None)[0].subscriptions["g_m1"] is kept  # carried over, not worked out again
        assert not full_passes  # no pass over the whole group
        registry.zk.delete(f"{ids}/g_m6")
        registry.zk.delete(f"{ids}/g_m7")  # nobody subscribes to u any more
        same_as_a_full_read()
        assert "u" not in view.read(None)[0].partitions
        member("m8", ConsumerRegistration.wildcard(whitelist("t|u"), 1))
        same_as_a_full_read()
        member("m9", ConsumerRegistration({"t": 2}))
        same_as_a_full_read()
    finally:
        a.shutdown()


def test_members_of_one_process_share_an_equal_view_and_never_an_unequal_one(
        registry: Registry, zk_connect: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two members in one process reading the same membership hold one view (its tables and the assignor's
    context), so N members cost N entries, not N²; a view planted under the same key with other registrations
    (another ZooKeeper, the same group name and child version) is not taken: content decides, not the key."""
    import weakref

    from zkconsumer.consumer.zookeeper import group_view
    from zkconsumer.consumer.zookeeper.group_view import GroupView, SharedView
    from zkconsumer.zk.layout import ConsumerRegistration

    monkeypatch.setattr(group_view, "_VIEWS", weakref.WeakValueDictionary())
    create_topic(registry, "t", 4)
    for name in ("m1", "m2"):
        registry.zk.create(f"/consumers/g/ids/g_{name}", ConsumerRegistration({"t": 1}).encode(), makepath=True)
    a = consumer(zk_connect, "g", "a")
    try:
        def fresh() -> GroupView:
            return GroupView(a, a.rebalancer.paths, lambda cause: None, threading.Event())

        one, two = fresh(), fresh()
        ctx1, version = one.read(None)
        ctx2, _ = two.read(None)
        assert ctx2 is ctx1 and two.registrations is one.registrations
        assert set(ctx1.subscriptions) == {"g_m1", "g_m2"}

        other = {"g_m1": ConsumerRegistration({"u": 1})}
        planted = SharedView(other, {"g_m1": {"u": 1}}, ["u"])
        group_view._VIEWS[("g", version, a.config.exclude_internal_topics)] = planted
        ctx3, _ = fresh().read(None)
        assert ctx3 is not planted.context({}) and dict(ctx3.subscriptions) == dict(ctx1.subscriptions)
    finally:
        a.shutdown()
