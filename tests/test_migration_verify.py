"""The checks ``zkconsumer migrate`` makes on the coordinator before it calls a step done (migration/verify.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from helpers import produce_counts, send_authorized_operations, wait_until
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.structs import OffsetAndMetadata

from zkconsumer.kafka_admin import AdminClient, operation_names
from zkconsumer.migration.driver import MigrationDriver, MigrationError
from zkconsumer.migration.plan import MigrationPhase
from zkconsumer.migration.verify import (
    AssignmentEvidence,
    DescribedGroup,
    DescribedMember,
    GroupCheck,
    ReportedMember,
    committed,
    describe,
    judge,
    reported_member,
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
    assert check.evidence is AssignmentEvidence.DESCRIBE_GROUPS
    assert check.summary() == "coordinator: Stable, 2 members, every check holds (assignments from DescribeGroups)"


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


# Issue 38: a coordinator need not fill client_id, client_host, member_metadata or member_assignment in DescribeGroups.
def bare(member_id: str) -> DescribedMember:
    """A member as a coordinator answering only the required fields describes it."""
    return DescribedMember(member_id, "", None, ())


def test_members_are_found_by_the_member_id_they_publish_and_assignments_read_from_their_acknowledgements() -> None:
    group = DescribedGroup("Stable", "", (bare("c-1"), bare("c-2")))
    reported = [ReportedMember("g_a", "c-1", 4, (("t", 0), ("t", 1))), ReportedMember("g_b", "c-2", 4, (("t", 2),))]
    check = judge(group, ["g_a", "g_b"], {"t": range(3)}, reported)
    assert check.ok, check.problems
    assert check.evidence is AssignmentEvidence.ACKNOWLEDGEMENTS
    assert check.members == {"g_a": ["t-0", "t-1"], "g_b": ["t-2"]}
    assert check.summary().endswith("every check holds (assignments from the members' acknowledgements)")
    # without the acknowledgements nobody is identified, and nothing is known of the assignments
    blind = judge(group, ["g_a"], {"t": range(3)})
    assert blind.problems == ["g_a is not a member of the coordinator group",
                              "no member's assignment is known: DescribeGroups returned none and no member "
                              "acknowledges its own"]
    assert blind.evidence is AssignmentEvidence.NONE


def test_what_the_acknowledgements_reveal_is_judged_as_describe_groups_would_be() -> None:
    group = DescribedGroup("Stable", "", (bare("c-1"), bare("c-2"), bare("c-9")))
    reported = [ReportedMember("g_a", "c-1", 5, (("t", 0), ("t", 1))), ReportedMember("g_b", "c-2", 4, (("t", 1),)),
                ReportedMember("g_c", None), ReportedMember("g_d", "c-old", 3)]
    check = judge(group, ["g_a", "g_b", "g_c", "g_d"], {"t": range(3)}, reported)
    assert check.problems == [
        "g_c is not a member of the coordinator group (it has not joined: no member id in its acknowledgement)",
        "g_d is not a member of the coordinator group (its member id c-old is not in DescribeGroups)",
        "the members acknowledge different generations (g_a 5, g_b 4): not every one has its assignment of the "
        "current generation yet",
        "the assignment of 1 members is unknown (DescribeGroups returned none and they acknowledge none): c-9",
        "t-1 is assigned to 2 members (g_a, g_b)",
        "1 partitions are assigned to nobody: t-2",
    ]


def test_describe_groups_assignments_win_and_members_are_named_by_their_published_member_id() -> None:
    group = DescribedGroup("Stable", "", (DescribedMember("c-1", "", None, (("t", 0),)),))
    check = judge(group, ["g_a"], {"t": [0]}, [ReportedMember("g_a", "c-1", 2, (("t", 5),))])
    assert check.ok and check.evidence is AssignmentEvidence.DESCRIBE_GROUPS and check.members == {"g_a": ["t-0"]}


def test_an_acknowledgement_carries_a_report_only_when_it_names_a_member_id() -> None:
    assert reported_member("g_a", {"mode": "zookeeper", "bridged": False}) is None  # ZooKeeper mode, or older
    assert reported_member("g_a", {"mode": "coordinator", "member_id": None, "generation": None,
                                   "partitions": {}}) == ReportedMember("g_a", None)
    assert reported_member("g_a", {"member_id": "m", "generation": 3, "partitions": {"u": [1], "t": [2, 0]}}) == \
        ReportedMember("g_a", "m", 3, (("t", 0), ("t", 2), ("u", 1)))


def test_an_unreachable_coordinator_is_a_problem_not_a_crash() -> None:
    check = judge(DescribedGroup("unknown", error="cannot reach 127.0.0.1:1"), ["g_a"], None)
    assert check.problems[0] == "DescribeGroups failed: cannot reach 127.0.0.1:1"
    assert describe("127.0.0.1:1", "g").error  # nothing listens on port 1


def test_a_group_nobody_is_expected_in_may_be_empty_while_the_zookeeper_half_owns_the_rest() -> None:
    """Every member moved so far is gone (the first one stopped mid-step): in the mixed phase nothing is asked of the
    coordinator's group but to have nobody the plan does not expect; after done, or with a member expected, an empty
    group is a problem as before."""
    for state in ("Empty", "Dead"):
        assert judge(DescribedGroup(state, ""), [], None).ok
        assert not judge(DescribedGroup(state, ""), ["g_a"], None).ok
        assert not judge(DescribedGroup(state, ""), [], {"t": [0]}).ok
    assert not judge(DescribedGroup("PreparingRebalance", ""), [], None).ok


def test_stalled_partitions_are_those_with_records_waiting_and_no_progress() -> None:
    before = {("t", 0): 5, ("t", 1): 7, ("t", 2): 3}
    after = {("t", 0): 9, ("t", 1): 7, ("t", 2): 3}
    ends = {("t", 0): 9, ("t", 1): 7, ("t", 2): 8, ("t", 3): 4, ("t", 4): 0}
    # t-0 moved; t-1 has nothing waiting; t-2 waits and did not move; t-3 was never committed and waits
    assert stalled_partitions(before, after, ends) == [("t", 2), ("t", 3)]


def test_describe_and_committed_against_a_real_coordinator(registry: Registry, broker) -> None:
    create_topic(registry, "t", 3)
    produce_counts(broker.bootstrap, "t", {p: 10 for p in range(3)})
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
def traced_owners(traces) -> dict[str, list[str]]:
    """Partition → the members whose traces say they own it now (the lab's reading of the traces)."""
    from zkconsumer.lab.runner import TraceTail

    tail = TraceTail(traces)
    tail.poll()
    out: dict[str, list[str]] = {}
    for consumer, owned in tail.owned.items():
        for tp in owned:
            out.setdefault(tp, []).append(consumer)
    return out


@pytest.mark.slow
def test_on_a_coordinator_returning_only_member_ids_a_failed_step_rolls_the_whole_group_back_and_a_migration_holds(
        zk_connect: str, registry: Registry, tmp_path) -> None:
    """Issue 38, on the local broker switched (test-only) to answer DescribeGroups with member ids and the group's
    state only, as an independent Kafka-compatible coordinator did. Real members, ZooKeeper and coordinator. z1's step
    holds: z1 is found by the member id it publishes, its share read from its acknowledgement. z2's verdict is made
    to fail (as when a coordinator never gives it a partition): the WHOLE group goes back to ZooKeeper mode (z1 too),
    and every partition is owned by the owner nodes (the driver's and the lab's verdict) and by the members' traces.
    Then a migration of the same members completes on that coordinator."""
    from zkconsumer.broker import Broker

    broker = Broker(zk_connect, data_dir=tmp_path / "broker", group_initial_rebalance_delay_ms=0,
                    test_describe_groups_required_only=True).start()
    create_topic(registry, "t", 4)
    produce_counts(broker.bootstrap, "t", {p: 10 for p in range(4)})
    members = {}
    for name in ("z1", "z2"):
        args = [sys.executable, "-m", "zkconsumer", "consume", "--migratable", "--zookeeper", zk_connect,
                "--group", "g", "--consumer-id", name, "--topic", "t", "--output", "none", "--from-beginning",
                "--bootstrap-server", broker.bootstrap, "--trace-dir", str(tmp_path / "traces"),
                "--property", "zookeeper.session.timeout.ms=4000", "--property", "rebalance.backoff.ms=300",
                "--property", "auto.commit.interval.ms=300"]
        with open(tmp_path / f"{name}.err", "wb") as err:
            members[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)

    class CoordinatorRefusingZ2(MigrationDriver):
        def check(self, expected, partitions):
            real = super().check(expected, partitions)
            if "g_z2" in expected:
                return GroupCheck(real.state, real.members, ["g_z2 got no partition (the verdict is injected)"],
                                  real.evidence)
            return real

    said: list[str] = []
    everything = {f"t-{p}" for p in range(4)}
    try:
        driver = CoordinatorRefusingZ2(registry, "g", broker.bootstrap, step_timeout_s=8.0, progress=said.append)
        wait_until(lambda: {m.consumer_id: m.mode for m in driver.members()} == {"g_z1": "zookeeper",
                                                                               "g_z2": "zookeeper"}
                   and not driver.unowned(), timeout=60, message="both members running in ZooKeeper mode")
        with pytest.raises(MigrationError, match=r"moving g_z2 to coordinator mode did not hold: .*g_z2 got no "
                                                 r"partition.*rolled back: the whole group runs in ZooKeeper mode"):
            driver.to_coordinator()
        assert "g_z1 in coordinator mode: coordinator: Stable, 1 members, every check holds (assignments from the " \
               "members' acknowledgements)" in said, said
        plan = driver.plan()
        assert plan.phase is MigrationPhase.MIXED and set(plan.members.values()) == {GroupMode.ZOOKEEPER}
        assert {m.consumer_id: (m.mode, m.bridged) for m in driver.members()} == {
            "g_z1": (GroupMode.ZOOKEEPER, False), "g_z2": (GroupMode.ZOOKEEPER, False)}
        # the rollback's last ZooKeeper rebalance may still move a partition a moment after the driver returned (the
        # moment the lab once looked at, issue 38): owner nodes and traces agree once it settles
        wait_until(lambda: driver.ownership().ok and sorted(traced_owners(tmp_path / "traces")) == sorted(everything)
                   and all(len(who) == 1 for who in traced_owners(tmp_path / "traces").values()), timeout=20,
                   message="every partition owned once, by the owner nodes and by the traces")
        assert driver.ownership().summary() == "every partition owned once (by ZooKeeper's owner nodes)"

        # the same members, the same coordinator: a migration that holds at every step
        said.clear()
        forward = MigrationDriver(registry, "g", broker.bootstrap, step_timeout_s=30.0, progress=said.append)
        assert forward.to_coordinator().phase is MigrationPhase.DONE
        assert forward.last_check is not None and forward.last_check.evidence is AssignmentEvidence.ACKNOWLEDGEMENTS
        assert sorted(tp for tps in forward.last_check.members.values() for tp in tps) == sorted(everything)
        assert forward.ownership().ok, forward.ownership().summary()
    finally:
        for p in members.values():
            p.send_signal(signal.SIGTERM)
        for p in members.values():
            p.wait(30)
        broker.stop()
