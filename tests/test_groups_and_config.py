"""Group tools (describe, delete, export/import, verify) on live groups, and consumer configuration."""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import consumer, wait_until

from zkconsumer.cli import main
from zkconsumer.config import PROFILE_SETTINGS, ConfigError, ConsumerConfig, read_properties
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def test_defaults_are_kafka_08s() -> None:
    c = ConsumerConfig.from_properties({"group.id": "g"})
    d = c.as_dict()
    assert d["partition.assignment.strategy"] == "range"
    assert d["rebalance.max.retries"] == 4
    assert d["rebalance.backoff.ms"] == 2000 == d["zookeeper.sync.time.ms"]
    assert d["zookeeper.session.timeout.ms"] == 6000 == d["zookeeper.connection.timeout.ms"]
    assert d["auto.commit.enable"] is True and d["auto.commit.interval.ms"] == 60000
    assert d["auto.offset.reset"] == "largest" and d["exclude.internal.topics"] is True
    assert d["offsets.storage"] == "zookeeper" and d["dual.commit.enabled"] is False
    assert d["client.id"] == "g"
    assert ConsumerConfig.from_properties({"group.id": "g", "offsets.storage": "kafka"}).dual_commit is True
    assert ConsumerConfig.from_properties({"group.id": "g", "zookeeper.sync.time.ms": 500}).rebalance_backoff_ms == 500


@pytest.mark.parametrize("props, message", [
    ({}, "group.id is required"),
    ({"group.id": "bad group"}, "group.id bad group is illegal"),
    ({"group.id": "g", "auto.offset.reset": "earliest"}, "Wrong value earliest of auto.offset.reset"),
    ({"group.id": "g", "offsets.storage": "s3"}, "Wrong value s3 of offsets.storage"),
    ({"group.id": "g", "partition.assignment.strategy": "sticky-ish"}, "partition.assignment.strategy"),
    ({"group.id": "g", "rebalance.max.retries": "four"}, "rebalance.max.retries must be an integer"),
    ({"group.id": "g", "rebalance.max.retries": -1}, "rebalance.max.retries must be >= 0"),
    ({"group.id": "g", "auto.commit.enable": "yes"}, "auto.commit.enable must be true or false"),
    ({"group.id": "g", "zkconsumer.profile": "fast"}, "zkconsumer.profile"),
    ({"group.id": "g", "zkconsumer.profile.disable": "fence,watch_own_nodes"},
     "zkconsumer.profile.disable: no switch fence; the profile's switches: pipelined_reads"),
])
def test_invalid_configs_are_clear(props: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ConsumerConfig.from_properties(props)


def test_a_profile_with_switches_turned_off_is_an_ablation_of_the_named_one() -> None:
    config = ConsumerConfig.from_properties({"group.id": "g", "zkconsumer.profile.disable":
                                             "fence_on_session_lease, watch_own_nodes"})
    base = PROFILE_SETTINGS["default"]
    assert config.profile == dataclasses.replace(base, fence_on_session_lease=False, watch_own_nodes=False)
    assert base.fence_on_session_lease  # the named profile itself is unchanged
    assert ConsumerConfig.from_properties({"group.id": "g"}).profile is base


def test_faq_rule_warning() -> None:
    c = ConsumerConfig.from_properties({"group.id": "g", "rebalance.backoff.ms": 1000})
    assert "should exceed zookeeper.session.timeout.ms" in c.warnings()[0]
    assert ConsumerConfig.from_properties({"group.id": "g"}).warnings() == []


def test_properties_file(tmp_path) -> None:
    f = tmp_path / "consumer.properties"
    f.write_text("# a comment\n! another\ngroup.id = test-group\nzookeeper.connect:127.0.0.1:2181/kafka\n"
                 "partition.assignment.strategy roundrobin\nconsumer.id=a\\\n  b\nauto.commit.enable=false\n")
    assert read_properties(f)["consumer.id"] == "ab"
    c = ConsumerConfig.load(f, {"rebalance.max.retries": "6"})
    assert (c.group_id, c.zookeeper_connect, c.strategy, c.auto_commit, c.rebalance_max_retries) == (
        "test-group", "127.0.0.1:2181/kafka", "roundrobin", False, 6)
    with pytest.raises(ConfigError, match="cannot read properties file"):
        ConsumerConfig.load(tmp_path / "missing.properties")


def test_describe_verify_export_import_delete(registry: Registry, zk_connect: str, capsys) -> None:
    create_topic(registry, "t", 3)
    registry.write_offset("g", "t", 0, 17)
    with consumer(zk_connect, "g", "a") as a:
        a.create_message_streams({"t": 1})
        assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 0
        assert "Rebalance operation successful !" in capsys.readouterr().out
        assert main(["groups", "describe", "--zookeeper", zk_connect, "--group", "g", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [(r["partition"], r["offset"], r["owner"]) for r in rows] == [
            (0, 17, "g_a-0"), (1, None, "g_a-0"), (2, None, "g_a-0")]
        assert main(["groups", "delete", "--zookeeper", zk_connect, "--group", "g"]) == 1
        assert "still active" in capsys.readouterr().err
        # an owner held by a thread id that is not a live member fails verification
        registry.zk.delete(GroupPaths("g").owner("t", 2))
        registry.zk.create(GroupPaths("g").owner("t", 2), b"g_ghost-0")
        assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 1
        out = capsys.readouterr().out
        assert "Owner g_ghost-0 for partition [t,2] is not a valid member" in out
        assert "Rebalance operation failed !" in out
        registry.zk.delete(GroupPaths("g").owner("t", 2))
    assert main(["offsets", "export", "--zookeeper", zk_connect, "--group", "g"]) == 0
    exported = capsys.readouterr().out
    assert exported == "/consumers/g/offsets/t/0:17\n"
    assert main(["groups", "list", "--zookeeper", zk_connect]) == 0
    assert capsys.readouterr().out.split() == ["g"]
    assert main(["groups", "delete", "--zookeeper", zk_connect, "--group", "g"]) == 0
    assert registry.groups() == []


def test_offsets_import_validates_every_line_first(registry: Registry, zk_connect: str, tmp_path, capsys) -> None:
    good = tmp_path / "offsets.txt"
    good.write_text("/consumers/g2/offsets/t/0:5\n/consumers/g2/offsets/t/1:9\n")
    bad = tmp_path / "bad.txt"
    bad.write_text("/consumers/g2/offsets/t/0:6\nnot a line\n")
    assert main(["offsets", "import", "--zookeeper", zk_connect, "--input-file", str(bad)]) == 1
    assert "line 2" in capsys.readouterr().err
    assert registry.offsets("g2") == {}  # nothing written
    assert main(["offsets", "import", "--zookeeper", zk_connect, "--input-file", str(good)]) == 0
    assert registry.offsets("g2") == {("t", 0): 5, ("t", 1): 9}


def test_verify_reports_unowned_partitions(registry: Registry, zk_connect: str, capsys) -> None:
    create_topic(registry, "t", 2)
    from zkconsumer.zk.layout import ConsumerRegistration

    registry.zk.create(GroupPaths("g").registration("g_x"), ConsumerRegistration.static({"t": 1}).encode(),
                       ephemeral=True, makepath=True)
    assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 1
    assert "No owner for partition [t,0]" in capsys.readouterr().out


def test_consumer_never_commits_backwards(registry: Registry, zk_connect: str) -> None:
    from zkconsumer.assignment.assignors import TopicPartition
    from zkconsumer.consumer.zookeeper.offsets import ZkOffsetStore

    create_topic(registry, "t", 1)
    registry.write_offset("g", "t", 0, 100)
    store = ZkOffsetStore(registry, "g")
    assert store.fetch([TopicPartition("t", 0)]) == {TopicPartition("t", 0): 100}
    assert store.commit({TopicPartition("t", 0): 90}) == {}
    assert registry.offset("g", "t", 0) == 100
    assert store.commit({TopicPartition("t", 0): 100}) == {}  # unchanged: not written again
    version = registry.zk.exists("/consumers/g/offsets/t/0").version
    assert store.commit({TopicPartition("t", 0): 120}) == {TopicPartition("t", 0): 120}
    assert registry.zk.exists("/consumers/g/offsets/t/0").version == version + 1


def test_raising_an_offset_only_moves_it_forward(registry: Registry) -> None:
    """What the migration's rollback writes for a group it does not own (Registry.raise_offset): a missing node is
    created, a lower value is raised, a higher one is kept, a malformed one is replaced."""
    assert registry.raise_offset("g", "t", 0, 5) and registry.offset("g", "t", 0) == 5
    assert registry.raise_offset("g", "t", 0, 9) and registry.offset("g", "t", 0) == 9
    assert not registry.raise_offset("g", "t", 0, 7) and registry.offset("g", "t", 0) == 9
    registry.zk.set("/consumers/g/offsets/t/0", b"not an offset")
    assert registry.raise_offset("g", "t", 0, 3) and registry.offset("g", "t", 0) == 3


def test_malformed_peer_registration_fails_the_rebalance_clearly(registry: Registry, zk_connect: str) -> None:
    create_topic(registry, "t", 1)
    registry.zk.create(GroupPaths("g").registration("g_bad"), b'{"version":1,"subscription":',
                       ephemeral=True, makepath=True)
    # Kafka's behaviour, kept by the kafka-0.8 profile; the default leaves g_bad out (tests/test_hostile_input.py)
    c = consumer(zk_connect, "g", "a", rebalance_max_retries=2, rebalance_backoff_ms=50, zkconsumer_profile="kafka-0.8")
    try:
        with pytest.raises(Exception, match="can't rebalance after 2 retries.*/consumers/g/ids/g_bad"):
            c.create_message_streams({"t": 1})
    finally:
        c.shutdown()
    wait_until(lambda: registry.consumer_ids("g") == ["g_bad"], message="a deregistered")
