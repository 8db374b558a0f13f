"""Kafka 0.8.2.2's group tools against a real ZooKeeper and the local broker: lag, ConsumerOffsetChecker's
layout, ExportZkOffsets over every group, VerifyConsumerRebalance on missing and empty groups."""

from __future__ import annotations

import json

from helpers import consumer
from helpers import produce_counts as _produce

from zkconsumer.cli import main
from zkconsumer.tools.groups import describe
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def test_describe_shows_log_end_offsets_and_lag(registry: Registry, zk_connect: str, broker, capsys) -> None:
    create_topic(registry, "t", 3)
    _produce(broker.bootstrap, "t", {0: 10, 1: 4, 2: 6})
    registry.write_offset("g", "t", 0, 3)
    registry.write_offset("g", "t", 1, 4)
    rows = {r.partition: r for r in describe(registry, "g")}  # brokers found through /brokers/ids
    assert [(rows[p].offset, rows[p].log_end, rows[p].lag) for p in range(3)] == [(3, 10, 7), (4, 4, 0),
                                                                                 (None, 6, None)]
    assert main(["groups", "describe", "--zookeeper", zk_connect, "--group", "g", "--json",
                 "--bootstrap-server", broker.bootstrap]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["partition"], r["log_end_offset"], r["lag"]) for r in out] == [(0, 10, 7), (1, 4, 0), (2, 6, None)]


def test_offset_checker_prints_kafkas_layout(registry: Registry, zk_connect: str, broker, capsys) -> None:
    create_topic(registry, "t", 3)
    create_topic(registry, "other", 1)
    _produce(broker.bootstrap, "t", {0: 10, 1: 4, 2: 2})
    _produce(broker.bootstrap, "other", {0: 5})
    registry.write_offset("g", "t", 0, 3)
    registry.write_offset("g", "t", 2, 9)  # beyond the log end (e.g. after a topic was recreated)
    registry.write_offset("g", "other", 0, 1)  # offsets but no owners: the checker does not look here
    with consumer(zk_connect, "g", "a") as c:
        c.create_message_streams({"t": 1})
        assert main(["offset-checker", "--zookeeper", zk_connect, "--group", "g", "--broker-info"]) == 0
        lines = capsys.readouterr().out.splitlines()
        fmt = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
        assert lines[:4] == [
            fmt % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner"),
            fmt % ("g", "t", 0, 3, 10, 7, "g_a-0"),
            # the topic has offsets but not this partition: Kafka's -1 and unknown lag
            fmt % ("g", "t", 1, -1, 4, "unknown", "g_a-0"),
            fmt % ("g", "t", 2, 9, 2, -7, "g_a-0"),  # lag is not clamped
        ]
        host, port = broker.bootstrap.rsplit(":", 1)
        assert lines[4:] == ["BROKER INFO", f"0 -> {host}:{port}"]
        # --topic replaces the topics read from owners/ (comma-separated, as Kafka's flag)
        assert main(["offset-checker", "--zookeeper", zk_connect, "--group", "g", "--topic", "other"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[1:] == [fmt % ("g", "other", 0, 1, 5, 4, "none")]


def test_offset_checker_without_offsets_or_group(registry: Registry, zk_connect: str, broker, capsys) -> None:
    create_topic(registry, "t", 1)
    _produce(broker.bootstrap, "t", {0: 2})
    with consumer(zk_connect, "g", "a") as c:
        c.create_message_streams({"t": 1})
        assert main(["offset-checker", "--zookeeper", zk_connect, "--group", "g"]) == 0
        fmt = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
        # Kafka aborted ("Exiting due to: ...") when a topic had no offsets node at all; we show unknown
        assert capsys.readouterr().out.splitlines()[1:] == [fmt % ("g", "t", 0, "unknown", 2, "unknown", "g_a-0")]
    assert main(["offset-checker", "--zookeeper", zk_connect, "--group", "nobody"]) == 1
    assert "Consumer group nobody does not exist" in capsys.readouterr().err


def test_export_without_group_exports_every_group(registry: Registry, zk_connect: str, tmp_path, capsys) -> None:
    registry.write_offset("g1", "t", 0, 5)
    registry.write_offset("g1", "t", 1, 6)
    registry.write_offset("g2", "u", 0, 7)
    registry.zk.ensure_path(GroupPaths("g3").ids)  # a group that never committed: no lines, no failure
    out = tmp_path / "offsets.txt"
    assert main(["offsets", "export", "--zookeeper", zk_connect, "--output-file", str(out)]) == 0
    assert out.read_text().splitlines() == ["/consumers/g1/offsets/t/0:5", "/consumers/g1/offsets/t/1:6",
                                            "/consumers/g2/offsets/u/0:7"]
    assert "exported 3 offsets" in capsys.readouterr().out
    assert main(["offsets", "export", "--zookeeper", zk_connect, "--group", "g2"]) == 0
    assert capsys.readouterr().out == "/consumers/g2/offsets/u/0:7\n"


def test_verify_needs_a_group_with_consumers(registry: Registry, zk_connect: str, capsys) -> None:
    """Kafka's VerifyConsumerRebalance said "Rebalance operation successful !" for a group that does not exist."""
    create_topic(registry, "t", 2)
    assert main(["verify", "--zookeeper", zk_connect, "--group", "nobody"]) == 1
    captured = capsys.readouterr()
    assert "Consumer group nobody does not exist" in captured.err and "successful" not in captured.out
    registry.write_offset("g", "t", 0, 1)  # the group exists, but nobody is registered
    assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 1
    captured = capsys.readouterr()
    assert "Consumer group g has no registered consumers" in captured.err and "successful" not in captured.out
    # kafka-0.8: owner nodes deleted under it stay deleted (the default profile watches them and claims them again)
    with consumer(zk_connect, "g", "a", zkconsumer_profile="kafka-0.8") as c:
        c.create_message_streams({"t": 1})
        assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "Rebalance operation successful !"
        # a topic whose owners node is gone: Kafka's own line for it, then one per partition
        registry.zk.delete(GroupPaths("g").owners_topic("t"), recursive=True)
        assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 1
        assert capsys.readouterr().out.splitlines() == [
            "No owners for any partitions for topic t", "No owner for partition [t,0]",
            "No owner for partition [t,1]", "Rebalance operation failed !"]
