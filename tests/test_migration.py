"""Live ZooKeeper → coordinator migration: the plan node, the bridge's owner-node hand-off and the assignor that
makes both halves of a mixed group agree (real ZooKeeper), and whole migrations with real processes."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass

import pytest
from helpers import wait_until
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from zkconsumer.assignment.assignors import AssignmentContext, TopicPartition, assign
from zkconsumer.migration.bridge import BridgeAssignor, ZkBridge, zookeeper_context
from zkconsumer.migration.plan import MigrationPhase, MigrationPlan, plan_path
from zkconsumer.types import GroupMode
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, MalformedNodeError, TopicAssignment
from zkconsumer.zk.registry import Registry, connect

HAS_COORDINATOR = importlib.util.find_spec("zkconsumer.coordinator.manager") is not None


# ------------------------------------------------------------------------------------------------ the plan
def test_plan_round_trips_and_defaults_to_zookeeper_mode() -> None:
    plan = MigrationPlan({"g_a": GroupMode.COORDINATOR}, MigrationPhase.MIXED, "127.0.0.1:9092")
    # the node as 0.8-era tools and older drivers read it: the enums are written as their plain strings
    assert plan.encode() == (b'{"version":1,"phase":"mixed","bootstrap":"127.0.0.1:9092",'
                             b'"members":{"g_a":"coordinator"}}')
    again = MigrationPlan.decode("/p", plan.encode())
    assert again == plan and again.phase is MigrationPhase.MIXED and again.members["g_a"] is GroupMode.COORDINATOR
    assert again.mode_of("g_a") is GroupMode.COORDINATOR and again.mode_of("g_b") is GroupMode.ZOOKEEPER
    assert again.bridged
    done = MigrationPlan(plan.members, MigrationPhase.DONE)
    assert done.mode_of("g_b") == GroupMode.COORDINATOR and not done.bridged


@pytest.mark.parametrize("raw", [b"{", b'{"version":2}', b'{"version":1,"members":{"a":"kafka"}}',
                                 b'{"version":1,"phase":"over"}', b'{"version":1,"members":[1]}'])
def test_a_broken_plan_names_its_node(raw: bytes) -> None:
    with pytest.raises(MalformedNodeError, match="/consumers/g/migration"):
        MigrationPlan.decode(plan_path("g"), raw)


# ---------------------------------------------------------------------------------------- the assignor
@dataclass
class _Member:
    """The shape kafka-python hands an assignor (JoinGroupResponse member with decoded metadata)."""

    member_id: str
    metadata: ConsumerProtocolSubscription
    group_instance_id: str | None = None


class _Cluster:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.partitions[topic])) if topic in self.partitions else None


def _setup_group(registry: Registry, group: str, consumers: dict[str, int], partitions: int = 7) -> None:
    registry.setup_common_paths()
    registry.create_topic_node("t", TopicAssignment({p: [0] for p in range(partitions)}))
    for cid, streams in consumers.items():
        registry.register_consumer(group, cid, ConsumerRegistration.static({"t": streams}), 1.0)


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_bridge_members_get_exactly_the_share_a_0_8_member_with_their_id_claims(registry: Registry,
                                                                               strategy: str) -> None:
    # g_a and g_c run in ZooKeeper mode; g_b and g_d have moved to the coordinator (bridged registrations)
    _setup_group(registry, "g", {"g_a": 1, "g_b": 2, "g_c": 1, "g_d": 1})
    assignor = BridgeAssignor(registry, "g", "g_b", {"t": 2}, strategy)
    other = BridgeAssignor(registry, "g", "g_d", {"t": 1}, strategy)
    members = [_Member("m-2", other.metadata({"t"})), _Member("m-1", assignor.metadata({"t"}))]
    out = assignor.assign(_Cluster({"t": 7}), members)
    ctx, _ = zookeeper_context(registry, "g")
    decision = assign(strategy, ctx)
    for cid, mid in (("g_b", "m-1"), ("g_d", "m-2")):
        expected = sorted(tp.partition for tp in decision.for_consumer(cid))
        got = dict(out[mid].assignment).get("t", [])
        assert sorted(got) == expected and expected
    # what the ZooKeeper-mode members claim is given to nobody on the coordinator side
    zk_side = {tp.partition for cid in ("g_a", "g_c") for tp in decision.for_consumer(cid)}
    coordinator_side = {p for a in out.values() for _, ps in a.assignment for p in ps}
    assert zk_side and not zk_side & coordinator_side and zk_side | coordinator_side == set(range(7))


def test_the_assignment_carries_the_ids_version_it_was_computed_from(registry: Registry) -> None:
    _setup_group(registry, "g", {"g_a": 1, "g_b": 1})
    assignor = BridgeAssignor(registry, "g", "g_b", {"t": 1}, "range")
    out = assignor.assign(_Cluster({"t": 7}), [_Member("m", assignor.metadata({"t"}))])
    assignor.on_assignment(out["m"], 3)
    _, cversion = registry.consumer_ids_with_version("g")
    assert assignor.assigned_cversion == cversion and assignor.generation == 3
    # g_a is registered in ZooKeeper and no member of the group: its share is left to it (orphaned), as a ZooKeeper-
    # mode member's is; once done, that flag makes the members ask for a generation without it
    assert json.loads(out["m"].user_data) == {"ids_cversion": cversion, "orphaned": True}
    assert assignor.orphaned


def test_once_done_the_assignor_uses_the_members_own_subscriptions(registry: Registry) -> None:
    registry.zk.ensure_path(plan_path("g"))
    registry.zk.set(plan_path("g"), MigrationPlan({}, MigrationPhase.DONE).encode())
    a = BridgeAssignor(registry, "g", "g_a", {"t": 1}, "range")
    b = BridgeAssignor(registry, "g", "g_b", {"t": 1}, "range")
    out = a.assign(_Cluster({"t": 5}), [_Member("ma", a.metadata({"t"})), _Member("mb", b.metadata({"t"}))])
    ctx = AssignmentContext({"g_a": {"t": 1}, "g_b": {"t": 1}}, {"t": range(5)})
    expected = assign("range", ctx)
    assert dict(out["ma"].assignment)["t"] == sorted(tp.partition for tp in expected.for_consumer("g_a"))
    assert json.loads(out["ma"].user_data) == {"ids_cversion": -1, "orphaned": False}


# ------------------------------------------------------------------------------------------- the bridge
def test_the_bridge_waits_for_the_owner_node_then_resumes_from_the_larger_commit(registry: Registry,
                                                                                zk_connect: str) -> None:
    _setup_group(registry, "g", {"g_a": 1})
    tp = TopicPartition("t", 3)
    owner = GroupPaths("g").owner("t", 3)
    previous = connect(zk_connect)  # the ZooKeeper-mode member that owns t-3 now
    try:
        previous.create(owner, b"g_a-0", ephemeral=True, makepath=True)
        registry.write_offset("g", "t", 3, 40)
        bridge = ZkBridge(registry, "g", "g_b", ConsumerRegistration.static({"t": 1}), stale_wait_s=1.0)
        changes: list[int] = []
        bridge.start(changes.append)
        assert registry.registration("g", "g_b").subscription == {"t": 1}  # a 0.8 member to the others
        assert bridge.hold(tp, "g_b-0") is True  # still g_a's
        # g_a commits its last offset, then frees the node (what every owner does on release)
        registry.write_offset("g", "t", 3, 45)
        previous.delete(owner)
        assert bridge.hold(tp, "g_b-0") is False
        assert registry.owner("g", "t", 3) == "g_b-0"
        assert bridge.start_offset(tp, kafka_committed=30) == 45  # ZooKeeper's is larger
        assert bridge.start_offset(tp, kafka_committed=50) == 50
        bridge.committed({tp: 47})
        assert registry.offset("g", "t", 3) == 47
        bridge.released([tp], {tp: 49})
        assert registry.offset("g", "t", 3) == 49 and registry.owner("g", "t", 3) is None
        # a registration change is reported with the ids version
        previous.create(GroupPaths("g").registration("g_c"), ConsumerRegistration.static({"t": 1}).encode(),
                        ephemeral=True)
        wait_until(lambda: changes, message="the ids watch")
        assert changes[-1] == registry.consumer_ids_with_version("g")[1]
        bridge.stop()
        assert "g_b" not in registry.consumer_ids("g")
    finally:
        previous.stop()
        previous.close()


def test_the_bridge_never_takes_a_node_another_session_holds_even_with_its_own_thread_id(
        registry: Registry, zk_connect: str) -> None:
    _setup_group(registry, "g", {})
    other = connect(zk_connect)
    try:
        other.create(GroupPaths("g").owner("t", 0), b"g_b-0", ephemeral=True, makepath=True)
        bridge = ZkBridge(registry, "g", "g_b", ConsumerRegistration.static({"t": 1}))
        assert bridge.hold(TopicPartition("t", 0), "g_b-0") is True
    finally:
        other.stop()
        other.close()


# ------------------------------------------------------------------------------------------- the driver
def test_the_driver_does_not_wait_for_a_member_that_is_gone(zk_connect: str, registry: Registry) -> None:
    """A member killed before it acknowledged the step (its ack node and registration vanish with its session) is
    named and not waited for; a member that answers is waited for as before (issue 20: a ``kill -9`` right at
    ``done`` left the driver waiting its whole step timeout for a member that could not answer)."""
    import threading
    import time

    from zkconsumer.migration.driver import MigrationDriver
    from zkconsumer.migration.member import ack_path

    registry.zk.ensure_path(plan_path("g"))
    doomed, alive = connect(zk_connect), connect(zk_connect)
    try:
        for client, cid in ((doomed, "g_a"), (alive, "g_b")):
            client.create(ack_path("g", cid), json.dumps({"mode": GroupMode.COORDINATOR, "bridged": True}).encode(),
                          ephemeral=True)
        said: list[str] = []
        driver = MigrationDriver(registry, "g", step_timeout_s=10.0, progress=said.append, verify_steps=False)
        threading.Timer(0.5, doomed.stop).start()  # the session ends: what a kill -9 leads to
        started = time.monotonic()
        assert driver._await_member("g_a", "g_a to leave ZooKeeper", GroupMode.COORDINATOR, False) is False
        assert time.monotonic() - started < 5.0 and driver.gone == ["g_a"]
        assert any("g_a is gone" in line for line in said), said
        assert driver._present(["g_a", "g_b"]) == ["g_b"]
        threading.Timer(0.3, lambda: alive.set(ack_path("g", "g_b"), json.dumps(
            {"mode": GroupMode.COORDINATOR, "bridged": False}).encode())).start()
        assert driver._await_member("g_b", "g_b to leave ZooKeeper", GroupMode.COORDINATOR, False) is True
        assert driver.gone == ["g_a"]
    finally:
        for client in (doomed, alive):
            client.stop()
            client.close()


# ----------------------------------------------------------------------------------- whole runs (processes)
@pytest.mark.slow
@pytest.mark.skipif(not HAS_COORDINATOR, reason="the broker has no group coordinator yet")
def test_a_migration_rolled_back_leaves_a_working_0_8_group(zk_connect: str, tmp_path) -> None:
    import io

    from rich.console import Console

    from zkconsumer.lab.runner import Lab
    from zkconsumer.scenario.model import LabMode, Step
    from zkconsumer.scenario.plan import GROUP, RunPlan

    plan = RunPlan(consumers=2, duration=16.0, mode=LabMode.MIGRATE, rate=100.0, initial_records=100,
                   session_timeout_ms=4000, commit_interval_ms=300, initial_rebalance_delay_ms=0,
                   steps=[Step(2.0, "migrate", ""), Step(8.0, "rollback", "")])
    summary = Lab(plan, tmp_path / "run", zookeeper=zk_connect, console=Console(file=io.StringIO())).run()
    # the rollback starts at 8 s whether or not the migration has ended (it takes a driver still running over)
    assert summary["migration"] in ("rolled back", "migration taken over; then rolled back"), summary
    assert summary["lost"] == 0 and summary["verify_ok"], summary  # Kafka's verify on the owner nodes
    with Registry.open(zk_connect) as reg:
        plan_now = MigrationPlan.decode(plan_path(GROUP), reg.read(plan_path(GROUP)))
        assert plan_now.phase is MigrationPhase.MIXED and set(plan_now.members.values()) == {GroupMode.ZOOKEEPER}
    modes = {}
    for path in (tmp_path / "run" / "traces").glob("lab_*.jsonl"):  # the members' (lab.jsonl is the lab's steps)
        events = [json.loads(line) for line in path.read_text().splitlines()]
        modes[path.stem] = {e.get("mode", "zookeeper") for e in events}
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # one sequence across modes
    assert modes["lab_c1"] == {"zookeeper", "coordinator"}, modes  # moved first, and back
    assert all(m <= {"zookeeper", "coordinator"} for m in modes.values()), modes
