"""The connector with real records from the local broker: delivery, commits, listener, failures, the lab."""

from __future__ import annotations

import json
import threading
from collections import defaultdict

import pytest
from helpers import consumer, drain, wait_until
from kafka import KafkaProducer

from zkconsumer.consumer.zookeeper.connector import ConsumerRebalanceFailed, ConsumerTimeout, RebalanceListener
from zkconsumer.lab.runner import Lab
from zkconsumer.records import decode_value, encode_value
from zkconsumer.scenario.model import Step
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for seq in range(per_partition):
        for p in range(partitions):
            producer.send(topic, value=encode_value(topic, p, seq), partition=p)
    producer.flush()
    producer.close()


def test_delivers_everything_in_order_and_commits(registry: Registry, zk_connect: str, broker) -> None:
    create_topic(registry, "t", 4)
    produce(broker.bootstrap, "t", 4, 250)
    c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", consumer_timeout_ms=2000,
                 auto_commit_enable=True)
    try:
        stream = c.create_message_streams({"t": 1})["t"][0]
        records = drain(stream)
        assert len(records) == 1000
        per_partition = defaultdict(list)
        for r in records:
            value = decode_value(r.value)
            assert (value["topic"], value["partition"]) == (r.topic, r.partition)
            per_partition[r.partition].append((r.offset, value["seq"]))
        for p, seen in per_partition.items():
            assert seen == [(i, i) for i in range(250)], f"partition {p} out of order or with gaps"
        c.commit_offsets()
        assert registry.offsets("g") == {("t", p): 250 for p in range(4)}
    finally:
        c.shutdown()


def test_default_profile_commits_only_processed_records(registry: Registry, zk_connect: str, broker) -> None:
    """The record being processed when the consumer stops is not committed: it is redelivered (at-least-once)."""
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 1, 10)
    c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", auto_commit_enable=True)
    try:
        stream = c.create_message_streams({"t": 1})["t"][0]
        got = [next(stream) for _ in range(5)]  # offsets 0..4; offset 4 is still in the caller's hands
        assert [r.offset for r in got] == [0, 1, 2, 3, 4]
        c.commit_offsets()
        assert registry.offset("g", "t", 0) == 4
        stream.ack()
        c.commit_offsets()
        assert registry.offset("g", "t", 0) == 5
    finally:
        c.shutdown()


def test_kafka_08_profile_commits_what_was_handed_out(registry: Registry, zk_connect: str, broker) -> None:
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 1, 10)
    c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", auto_commit_enable=True,
                 zkconsumer_profile="kafka-0.8")
    try:
        stream = c.create_message_streams({"t": 1})["t"][0]
        [next(stream) for _ in range(5)]
        c.commit_offsets()
        assert registry.offset("g", "t", 0) == 5  # Kafka 0.8: the record in the caller's hands counts as done
    finally:
        c.shutdown()


def test_restart_resumes_from_the_committed_offset(registry: Registry, zk_connect: str, broker) -> None:
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 1, 20)
    registry.write_offset("g", "t", 0, 12)
    c = consumer(zk_connect, "g", "a", fetch=True, consumer_timeout_ms=1500)
    try:
        offsets = [r.offset for r in drain(c.create_message_streams({"t": 1})["t"][0])]
        assert offsets == list(range(12, 20))
    finally:
        c.shutdown()


def test_auto_offset_reset_largest_skips_history(registry: Registry, zk_connect: str, broker) -> None:
    create_topic(registry, "t", 1)
    produce(broker.bootstrap, "t", 1, 5)
    c = consumer(zk_connect, "g", "a", fetch=True, consumer_timeout_ms=1500)  # Kafka's default: largest
    try:
        stream = c.create_message_streams({"t": 1})["t"][0]
        wait_until(lambda: c.fetcher is not None and c.fetcher.assigned, message="fetching")
        produce(broker.bootstrap, "t", 1, 3)
        offsets = [r.offset for r in drain(stream)]
        assert offsets and offsets[0] >= 5
    finally:
        c.shutdown()


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def before_releasing_partitions(self, partitions) -> None:
        self.calls.append(("release", {t: sorted(p) for t, p in partitions.items()}))

    def before_starting_fetchers(self, consumer_id, assignment) -> None:
        self.calls.append(("start", {t: dict(sorted(p.items())) for t, p in assignment.items()}))


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_rebalance_listener(registry: Registry, zk_connect: str, profile: str) -> None:
    from zkconsumer.config import ConsumerConfig
    from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector

    create_topic(registry, "t", 2)
    listener = Recorder()
    config = ConsumerConfig.from_properties({"group.id": "g", "consumer.id": "a", "zookeeper.connect": zk_connect,
                                            "zkconsumer.fetch.enable": False, "zkconsumer.profile": profile,
                                            "auto.commit.enable": False, "rebalance.backoff.ms": 200})
    a = ZookeeperConsumerConnector(config, listener)
    b = consumer(zk_connect, "g", "b", zkconsumer_profile=profile)
    try:
        a.create_message_streams({"t": 1})
        assert listener.calls == [("start", {"t": {0: "g_a-0", 1: "g_a-0"}})]
        b.create_message_streams({"t": 1})
        wait_until(lambda: ("start", {"t": {0: "g_a-0"}}) in listener.calls, message="a's new share")
        released = [c for kind, c in listener.calls if kind == "release"]
        # the default releases only what moves; Kafka 0.8 releases everything first
        assert released[-1] == ({"t": [1]} if profile == "default" else {"t": [0, 1]})
    finally:
        b.shutdown()
        a.shutdown()


def test_rebalance_failure_reaches_the_stream(registry: Registry, zk_connect: str) -> None:
    """A partition held by a stranger forever: every attempt fails and the caller hears about it."""
    create_topic(registry, "t", 1)
    a = consumer(zk_connect, "g", "a", rebalance_max_retries=2, rebalance_backoff_ms=100, consumer_timeout_ms=20000)
    try:
        stream = a.create_message_streams({"t": 1})["t"][0]
        registry.zk.delete(GroupPaths("g").owner("t", 0))
        registry.zk.create(GroupPaths("g").owner("t", 0), b"g_stranger-0", ephemeral=True)
        registry.zk.create(GroupPaths("g").registration("g_b"), b'{"version":1,"subscription":{},'
                           b'"pattern":"static","timestamp":"1"}', ephemeral=True)  # trigger a rebalance
        # the default profile's claims outlast the held node for a session timeout past the 2 retries, then say so
        with pytest.raises(ConsumerRebalanceFailed, match=r"g_a can't rebalance after \d+ attempts: "
                                                          r"rebalance.max.retries is 2, and its claims waited past "
                                                          r"them for a session timeout \(\d+ ms\)"):
            next(stream)
    finally:
        a.shutdown()


def test_consumer_timeout(registry: Registry, zk_connect: str, broker) -> None:
    create_topic(registry, "t", 1)
    c = consumer(zk_connect, "g", "a", fetch=True, consumer_timeout_ms=300)
    try:
        stream = c.create_message_streams({"t": 1})["t"][0]
        with pytest.raises(ConsumerTimeout):
            next(stream)
    finally:
        c.shutdown()


def test_two_streams_split_partitions(registry: Registry, zk_connect: str, broker) -> None:
    create_topic(registry, "t", 4)
    produce(broker.bootstrap, "t", 4, 50)
    c = consumer(zk_connect, "g", "a", fetch=True, auto_offset_reset="smallest", consumer_timeout_ms=1500)
    try:
        s0, s1 = c.create_message_streams({"t": 2})["t"]
        results: dict[int, list] = {}
        threads = [threading.Thread(target=lambda i=i, s=s: results.__setitem__(i, drain(s))) for i, s in
                   enumerate((s0, s1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert {r.partition for r in results[0]} == {0, 1} and {r.partition for r in results[1]} == {2, 3}
        assert len(results[0]) + len(results[1]) == 200
    finally:
        c.shutdown()


def _uncommitted_window_check(trace_dir) -> tuple[int, int, list]:
    """Every redelivery happened at an offset at or above everything committed for it until then."""
    events = []
    for path in trace_dir.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            events.append(json.loads(line))
    events.sort(key=lambda e: (e["ts"], e["consumer"], e["seq"]))
    committed: dict[tuple[str, int], int] = {}
    seen: dict[tuple[str, int, int], int] = defaultdict(int)
    duplicates, violations = 0, []
    for e in events:
        if e["event"] == "offset_committed":
            key = (e["topic"], e["partition"])
            committed[key] = max(committed.get(key, 0), e["offset"])
        elif e["event"] == "record_delivered":
            key = (e["topic"], e["partition"], e["offset"])
            seen[key] += 1
            if seen[key] > 1:
                duplicates += 1
                if committed.get(key[:2], 0) > e["offset"]:
                    violations.append(e)
    return len(seen), duplicates, violations


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["default"])
def test_lab_churn_loses_nothing(tmp_path, profile: str) -> None:
    """Joins, a graceful stop and a kill -9 while records flow: nothing lost, duplicates only uncommitted."""
    plan = RunPlan(consumers=2, duration=12, profile=profile, rate=150, initial_records=200,
                   session_timeout_ms=3000, topics={"orders": 6, "payments": 2},
                   steps=[Step(2, "join", "c3"), Step(5, "stop", "c1"), Step(8, "kill", "c2"), Step(9, "join", "c4")])
    from rich.console import Console

    summary = Lab(plan, tmp_path / "run", console=Console(file=open(tmp_path / "lab.txt", "w"))).run()
    assert summary["verify_ok"]
    assert summary["lost"] == 0
    assert summary["produced"] > 0 and summary["unique_delivered"] == summary["produced"]
    unique, duplicates, violations = _uncommitted_window_check(tmp_path / "run" / "traces")
    assert duplicates == summary["duplicates"]
    assert violations == []
