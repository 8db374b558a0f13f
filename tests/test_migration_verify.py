"""The checks ``zkconsumer migrate`` makes on the coordinator before it calls a step done (migration/verify.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from helpers import send_authorized_operations, wait_until
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata

from zkconsumer.kafka_admin import AdminClient, operation_names
from zkconsumer.migration.driver import MigrationDriver, MigrationError
from zkconsumer.migration.plan import MigrationPhase
from zkconsumer.migration.verify import (
    DescribedGroup,
    DescribedMember,
    GroupCheck,
    committed,
    describe,
    judge,
    stalled_partitions,
)
from zkconsumer.types import GroupMode
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def member(name: str, *tps: tuple[str, int], bridged: bool = True) -> DescribedMember:
    return DescribedMember(f"{name}-uuid", "client", name if bridged else None, tuple(tps))


def test_a_stable_group_with_every_member_and_partition_holds() -> None:
    group = DescribedGroup("Stable", "zkconsumer-bridge", (member("g_a", ("t", 0), ("t", 1)), member("g_b", ("t", 2))))
    check = judge(group, ["g_a", "g_b"], {"t": range(3)})
    assert check.ok, check.problems
    assert check.members == {"g_a": ["t-0", "t-1"], "g_b": ["t-2"]}
    assert check.summary() == "coordinator: Stable, 2 members, every check holds"


def test_each_broken_promise_is_named() -> None:
    group = DescribedGroup("PreparingRebalance", "range",
                           (member("g_a", ("t", 0), ("t", 1)), member("g_c", ("t", 1))))
    check = judge(group, ["g_a", "g_b"], {"t": range(4)})
    assert not check.ok
    assert check.problems == [
        "the group is PreparingRebalance, not Stable",
        "g_b is not a member of the coordinator group",
        "t-1 is assigned to 2 members (g_a, g_c)",
        "2 partitions are assigned to nobody: t-2, t-3",
    ]


def test_the_mixed_phase_does_not_ask_for_coverage() -> None:
    """While the group is mixed, ZooKeeper-mode members own the rest; the coordinator half holds only its share."""
    group = DescribedGroup("Stable", "zkconsumer-bridge", (member("g_a", ("t", 0)),))
    assert judge(group, ["g_a"], None).ok


def test_a_member_without_bridge_data_is_known_by_its_client_id() -> None:
    group = DescribedGroup("Stable", "range", (DescribedMember("m-1", "g_a", None, (("t", 0),)),))
    assert judge(group, ["g_a"], {"t": [0]}).ok


def test_an_unreachable_coordinator_is_a_problem_not_a_crash() -> None:
    check = judge(DescribedGroup("unknown", error="cannot reach 127.0.0.1:1"), ["g_a"], None)
    assert check.problems[0] == "DescribeGroups failed: cannot reach 127.0.0.1:1"
    assert describe("127.0.0.1:1", "g").error  # nothing listens on port 1


def test_stalled_partitions_are_those_with_records_waiting_and_no_progress() -> None:
    before = {("t", 0): 5, ("t", 1): 7, ("t", 2): 3}
    after = {("t", 0): 9, ("t", 1): 7, ("t", 2): 3}
    ends = {("t", 0): 9, ("t", 1): 7, ("t", 2): 8, ("t", 3): 4, ("t", 4): 0}
    # t-0 moved; t-1 has nothing waiting; t-2 waits and did not move; t-3 was never committed and waits
    assert stalled_partitions(before, after, ends) == [("t", 2), ("t", 3)]


def test_describe_and_committed_against_a_real_coordinator(registry: Registry, broker) -> None:
    create_topic(registry, "t", 3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(30):
        producer.send("t", b"x", partition=i % 3)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g", client_id="g_me",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 20
        while (not consumer.assignment() or sum(consumer.position(tp) for tp in consumer.assignment()) < 30) \
                and time.monotonic() < deadline:
            consumer.poll(200)
        consumer.commit()
        group = describe(broker.bootstrap, "g")
        check = judge(group, ["g_me"], {"t": range(3)})
        assert check.ok, check.problems
        assert check.members == {"g_me": ["t-0", "t-1", "t-2"]}
        assert committed(broker.bootstrap, "g") == {("t", 0): 10, ("t", 1): 10, ("t", 2): 10}
    finally:
        consumer.close()
    # the member left: the group rebalances to Empty, and the check names the member that is missing
    gone = wait_until(lambda: (c := judge(describe(broker.bootstrap, "g"), ["g_me"], None)).state == "Empty" and c,
                      message="the group to be Empty")
    assert gone.problems == ["the group is Empty, not Stable", "g_me is not a member of the coordinator group"]


def test_authorized_operations_are_named_and_an_unknown_one_is_kept() -> None:
    assert operation_names({15, 3, 8, 1}) == ["READ", "DESCRIBE", 15]  # ANY (1) is a filter's, never an answer's
    assert operation_names(set()) == []


def test_a_coordinator_answering_operations_kafka_python_does_not_know_is_still_read(registry: Registry,
                                                                                     broker) -> None:
    """Issue 30: every migration check failed with "15 is not a valid ACLOperation" on such a coordinator."""
    create_topic(registry, "t", 2)
    consumer = KafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g", client_id="g_me",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        wait_until(lambda: consumer.poll(100) is not None and len(consumer.assignment()) == 2,
                   message="the member owns both partitions")
        consumer.commit({tp: OffsetAndMetadata(3, "", -1) for tp in consumer.assignment()})
        send_authorized_operations(broker, {3, 6, 8, 15})
        plain = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:  # the condition is real: kafka-python's own admin client fails on it
            with pytest.raises(ValueError, match="15 is not a valid ACLOperation"):
                plain.describe_groups(["g"])
        finally:
            plain.close()
        check = judge(describe(broker.bootstrap, "g"), ["g_me"], {"t": range(2)})
        assert check.ok, check.problems
        assert committed(broker.bootstrap, "g") == {("t", 0): 3, ("t", 1): 3}
        admin = AdminClient(bootstrap_servers=broker.bootstrap)
        try:
            assert admin.describe_groups(["g"])["g"]["group_state"] == "Stable"
            assert "t" in admin.list_topics()  # Metadata carries the bits too, for the topic and the cluster
            topics = admin.describe_topics(["t"])
            assert topics[0]["authorized_operations"] == ["READ", "DELETE", "DESCRIBE", 15]
        finally:
            admin.close()
    finally:
        consumer.close()


# ------------------------------------------------------------------------------ the driver acts on the checks
@pytest.mark.slow
def test_a_step_that_does_not_hold_is_rolled_back_and_named(zk_connect: str, registry: Registry, broker,
                                                            tmp_path) -> None:
    """Real members, ZooKeeper and coordinator; the coordinator's verdict on the second member is made to fail (as
    when a coordinator never gives it a partition): that member goes back to ZooKeeper mode, every partition is
    owned, the error names it, and the first member's step, which held, stays."""
    create_topic(registry, "t", 4)
    members = {}
    for name in ("z1", "z2"):
        args = [sys.executable, "-m", "zkconsumer", "consume", "--migratable", "--zookeeper", zk_connect,
                "--group", "g", "--consumer-id", name, "--topic", "t", "--output", "none",
                "--bootstrap-server", broker.bootstrap, "--property", "zookeeper.session.timeout.ms=4000",
                "--property", "rebalance.backoff.ms=300"]
        with open(tmp_path / f"{name}.err", "wb") as err:
            members[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)

    class CoordinatorRefusingZ2(MigrationDriver):
        def check(self, expected, partitions):
            real = super().check(expected, partitions)
            if "g_z2" in expected:
                return GroupCheck(real.state, real.members, ["g_z2 got no partition (the verdict is injected)"])
            return real

    try:
        driver = CoordinatorRefusingZ2(registry, "g", broker.bootstrap, step_timeout_s=8.0)
        wait_until(lambda: {m.consumer_id: m.mode for m in driver.members()} == {"g_z1": "zookeeper",
                                                                               "g_z2": "zookeeper"}
                   and not driver.unowned(), timeout=60, message="both members running in ZooKeeper mode")
        with pytest.raises(MigrationError, match=r"moving g_z2 to coordinator mode did not hold: .*g_z2 got no "
                                                 r"partition.*rolled back: g_z2 runs in ZooKeeper mode again"):
            driver.to_coordinator()
        plan = driver.plan()
        assert (plan.phase, plan.mode_of("g_z1"), plan.mode_of("g_z2")) == (MigrationPhase.MIXED, GroupMode.COORDINATOR,
                                                                            GroupMode.ZOOKEEPER)
        assert {m.consumer_id: (m.mode, m.bridged) for m in driver.members()} == {
            "g_z1": (GroupMode.COORDINATOR, True), "g_z2": (GroupMode.ZOOKEEPER, False)}
        # the rollback's own ZooKeeper rebalance and the bridged member's rejoin may still move a partition a
        # moment after the driver returned: every partition is owned again once they settle
        wait_until(lambda: driver.unowned() == [], timeout=20, message="every partition owned")
    finally:
        for p in members.values():
            p.send_signal(signal.SIGTERM)
        for p in members.values():
            p.wait(30)
