"""Topic administration against a real ZooKeeper, and the assign command over a live registration tree."""

from __future__ import annotations

import json
import random

import pytest

from zkconsumer.cli import main
from zkconsumer.zk.layout import BrokerInfo, ConsumerRegistration, GroupPaths, TopicAssignment
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import AdminOperationError, add_partitions, assign_replicas_to_brokers, create_topic


def test_replica_assignment_matches_kafkas_admin_test() -> None:
    """Kafka's AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, 3 replicas, fixed start 0."""
    expected = {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
                5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, 0) == expected


def test_replica_assignment_errors() -> None:
    with pytest.raises(AdminOperationError, match="larger than available brokers: 2"):
        assign_replicas_to_brokers([0, 1], 3, 3)
    with pytest.raises(AdminOperationError, match="partitions must be larger than 0"):
        assign_replicas_to_brokers([0], 0, 1)


def test_create_over_registered_brokers_and_grow(registry: Registry) -> None:
    for bid in (1, 2, 3):
        registry.register_broker(BrokerInfo.plaintext(bid, "127.0.0.1", 9000 + bid))
    assignment = create_topic(registry, "orders", 6, 2, rng=random.Random(1))
    assert sorted(assignment) == list(range(6))
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in assignment.values())
    stored = registry.topic("orders")
    assert stored.partitions == assignment
    new = add_partitions(registry, "orders", 8)
    assert sorted(new) == [6, 7] and registry.topic("orders").partition_ids == list(range(8))
    with pytest.raises(AdminOperationError, match="can only be increased"):
        add_partitions(registry, "orders", 8)


def test_topics_cli(zk_connect: str, capsys: pytest.CaptureFixture) -> None:
    assert main(["topics", "create", "--zookeeper", zk_connect, "--topic", "t1", "--partitions", "3"]) == 0
    assert main(["topics", "create", "--zookeeper", zk_connect, "--topic", "t0", "--partitions", "2"]) == 0
    assert main(["topics", "create", "--zookeeper", zk_connect, "--topic", "t0", "--partitions", "2"]) == 1
    assert main(["topics", "create", "--zookeeper", zk_connect, "--topic", "t0", "--partitions", "2",
                 "--if-not-exists"]) == 0
    assert main(["topics", "create", "--zookeeper", zk_connect, "--topic", "bad name", "--partitions", "1"]) == 1
    assert "illegal" in capsys.readouterr().err
    assert main(["topics", "alter", "--zookeeper", zk_connect, "--topic", "t1", "--partitions", "5"]) == 0
    assert main(["topics", "alter", "--zookeeper", zk_connect, "--topic", "t1", "--partitions", "2"]) == 1
    assert main(["topics", "alter", "--zookeeper", zk_connect, "--topic", "nope", "--partitions", "2"]) == 1
    capsys.readouterr()
    assert main(["topics", "list", "--zookeeper", zk_connect]) == 0
    assert capsys.readouterr().out.split() == ["t0", "t1"]
    assert main(["topics", "describe", "--zookeeper", zk_connect, "--json"]) == 0
    desc = json.loads(capsys.readouterr().out)
    assert desc == {"t0": {"0": [0], "1": [0]}, "t1": {str(p): [0] for p in range(5)}}  # no broker: broker 0
    assert main(["topics", "describe", "--zookeeper", zk_connect, "--topic", "t1"]) == 0
    assert "PartitionCount:5" in capsys.readouterr().out


def test_malformed_topic_node_is_reported(registry: Registry, zk_connect: str,
                                          capsys: pytest.CaptureFixture) -> None:
    registry.zk.create("/brokers/topics/broken", b'{"version":1,"partitions":', makepath=True)
    assert main(["topics", "describe", "--zookeeper", zk_connect, "--topic", "broken"]) == 1
    err = capsys.readouterr().err
    assert "/brokers/topics/broken" in err and "not valid JSON" in err


SPEC_EXAMPLE = ["--topic", "t0:3", "--topic", "t1:3", "--member", "c0:t0=1,t1=1", "--member", "c1:t0=1,t1=1"]


@pytest.mark.parametrize("strategy, expected", [
    ("range", {"c0-0": ["t0-0", "t0-1", "t1-0", "t1-1"], "c1-0": ["t0-2", "t1-2"]}),
    ("roundrobin", {"c0-0": ["t0-0", "t0-2", "t1-1"], "c1-0": ["t0-1", "t1-0", "t1-2"]}),
])
def test_assign_cli_reproduces_spec(strategy: str, expected: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(["assign", "--strategy", strategy, *SPEC_EXAMPLE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"assignment": expected}


def test_assign_cli_range_two_streams(capsys: pytest.CaptureFixture) -> None:
    assert main(["assign", "--topic", "t:5", "--member", "C1:t=2", "--member", "C2:t=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["assignment"] == {
        "C1-0": ["t-0", "t-1"], "C1-1": ["t-2"], "C2-0": ["t-3"], "C2-1": ["t-4"]}


def test_assign_cli_roundrobin_precondition_exits_2(capsys: pytest.CaptureFixture) -> None:
    code = main(["assign", "--strategy", "roundrobin", "--topic", "t0:1", "--topic", "t1:1",
                 "--member", "c0:t0=1,t1=1", "--member", "c1:t0=1"])
    assert code == 2
    assert "Round-robin assignment is allowed only if all consumers" in capsys.readouterr().err


def test_assign_cli_input_errors(capsys: pytest.CaptureFixture) -> None:
    assert main(["assign", "--topic", "t0", "--member", "c0:t0=1"]) == 1
    assert main(["assign", "--topic", "t0:1", "--member", "c0:t9=1"]) == 1
    assert main(["assign", "--topic", "t0:1", "--member", "c0:t0=0"]) == 1
    assert "stream count must be >= 1" in capsys.readouterr().err


def test_assign_from_a_live_group_tree(registry: Registry, zk_connect: str, capsys: pytest.CaptureFixture) -> None:
    """Kafka's connector-test group written as 0.8 would write it; assign reads it back from ZooKeeper."""
    registry.zk.create("/brokers/topics/topic1", TopicAssignment({0: [0], 1: [0]}).encode(), makepath=True)
    g = GroupPaths("group1")
    for cid, subs in (("group1_consumer1", {"topic1": 1}), ("group1_consumer2", {"topic1": 1}),
                      ("group1_consumer3", {})):
        registry.zk.create(g.registration(cid), ConsumerRegistration.static(subs).encode(), makepath=True)
    assert main(["assign", "--zookeeper", zk_connect, "--group", "group1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["assignment"] == {
        "group1_consumer1-0": ["topic1-0"], "group1_consumer2-0": ["topic1-1"]}
    registry.zk.create(g.registration("group1_bad"), b'{"version":1', ephemeral=True)
    assert main(["assign", "--zookeeper", zk_connect, "--group", "group1"]) == 1
    assert "/consumers/group1/ids/group1_bad" in capsys.readouterr().err
