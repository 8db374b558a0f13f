"""Kafka 0.8.2's offset migration for a ZooKeeper group, for real: offsets.storage=kafka commits to the broker's
coordinator, dual.commit.enabled to both stores, and the documented roll (dual on → roll → dual off → roll)
moves a live group with no record lost and no committed offset moving back in either store."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from helpers import consumer, wait_until
from kafka import KafkaAdminClient, KafkaProducer
from kafka import TopicPartition as KTP

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.zookeeper.kafka_offsets import DualOffsetStore, KafkaOffsetStore, offset_store
from zkconsumer.consumer.zookeeper.offsets import ZkOffsetStore
from zkconsumer.records import encode_value
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

needs_coordinator = pytest.mark.skipif(importlib.util.find_spec("zkconsumer.coordinator.manager") is None,
                                       reason="the broker has no group coordinator yet (branch coord)")
PARTITIONS = 4


def test_the_store_is_chosen_by_kafka_082s_rules(registry: Registry) -> None:
    def store(**props):
        config = ConsumerConfig.from_properties({"group.id": "g", **props})
        return offset_store(config, ZkOffsetStore(registry, "g"), None, lambda: "127.0.0.1:1")

    assert type(store()) is ZkOffsetStore
    assert type(store(**{"dual.commit.enabled": "true"})) is ZkOffsetStore  # 0.8.2 ignores it with zookeeper
    assert type(store(**{"offsets.storage": "kafka"})) is DualOffsetStore  # dual defaults to on with kafka
    assert type(store(**{"offsets.storage": "kafka", "dual.commit.enabled": "false"})) is KafkaOffsetStore


def produce(bootstrap: str, per_partition: int, start: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for seq in range(start, start + per_partition):
        for p in range(PARTITIONS):
            producer.send("t", value=encode_value("t", p, seq), partition=p)
    producer.flush()
    producer.close()


class Member:
    """A ZooKeeper connector fetching "t" and draining its stream on a thread."""

    def __init__(self, zk_connect: str, name: str, seen: set, **props) -> None:
        self.connector = consumer(zk_connect, "g", name, fetch=True, auto_offset_reset="smallest",
                                  auto_commit_enable=True, auto_commit_interval_ms=200, **props)
        [stream] = self.connector.create_message_streams({"t": 1})["t"]
        self.thread = threading.Thread(target=self._drain, args=(stream, seen), daemon=True)
        self.thread.start()

    @staticmethod
    def _drain(stream, seen: set) -> None:
        for record in stream:
            seen.add((record.partition, record.offset))


class Watcher:
    """Samples both stores while the group rolls; any value lower than an earlier one is a regression."""

    def __init__(self, registry: Registry, bootstrap: str) -> None:
        self.registry = registry
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        self.regressions: list[str] = []
        self.last: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def read(self) -> tuple[dict[int, int], dict[int, int]]:
        zk = {p: off for (_, p), off in self.registry.offsets("g").items()}
        answer = self.admin.list_group_offsets({"g": [KTP("t", p) for p in range(PARTITIONS)]})["g"]
        kafka = {tp.partition: m.offset for tp, m in answer.items() if m.offset >= 0}
        return zk, kafka

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            zk, kafka = self.read()
            for store, values in (("zookeeper", zk), ("kafka", kafka)):
                for p, value in values.items():
                    before = self.last.get((store, p), -1)
                    if value < before:
                        self.regressions.append(f"{store} t-{p}: {before} -> {value}")
                    self.last[(store, p)] = max(before, value)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.admin.close()


@needs_coordinator
def test_documented_roll_dual_on_then_off(zk_connect: str, registry: Registry, broker) -> None:
    create_topic(registry, "t", PARTITIONS)
    seen: set[tuple[int, int]] = set()
    produced = 0

    def produce_more(n: int = 20) -> None:
        nonlocal produced
        produce(broker.bootstrap, n, produced)
        produced += n

    def all_consumed_and_committed(check_kafka: bool, check_zk: bool) -> None:
        everything = {(p, o) for p in range(PARTITIONS) for o in range(produced)}
        wait_until(lambda: everything <= seen, message=f"all {produced} records per partition consumed")
        end = {p: produced for p in range(PARTITIONS)}
        wait_until(lambda: (not check_zk or watcher.read()[0] == end) and (not check_kafka or watcher.read()[1] == end),
                   message="offsets committed to the expected stores")

    watcher = Watcher(registry, broker.bootstrap)
    members = {}
    try:
        # ZooKeeper storage, as every 0.8 group starts.
        produce_more()
        members = {n: Member(zk_connect, n, seen) for n in ("a", "b")}
        all_consumed_and_committed(check_kafka=False, check_zk=True)
        assert watcher.read()[1] == {}, "nothing in Kafka yet"
        # Step 1: offsets.storage=kafka + dual.commit.enabled=true, one member at a time.
        for name in ("a", "b"):
            members.pop(name).connector.shutdown()
            members[name] = Member(zk_connect, name, seen, offsets_storage="kafka", dual_commit_enabled=True)
            produce_more()
            all_consumed_and_committed(check_kafka=False, check_zk=True)
        all_consumed_and_committed(check_kafka=True, check_zk=True)  # both stores agree before dual goes off
        # Step 2: dual.commit.enabled=false, one member at a time; ZooKeeper offsets stop moving.
        for name in ("a", "b"):
            members.pop(name).connector.shutdown()
            members[name] = Member(zk_connect, name, seen, offsets_storage="kafka", dual_commit_enabled=False)
            produce_more()
        all_consumed_and_committed(check_kafka=True, check_zk=False)
        for m in members.values():
            m.connector.shutdown()
        zk, kafka = watcher.read()
    finally:
        for m in members.values():
            m.connector.shutdown()
        watcher.close()
    assert not watcher.regressions, watcher.regressions
    assert kafka == {p: produced for p in range(PARTITIONS)}
    assert all(zk[p] <= kafka[p] for p in zk)


@needs_coordinator
def test_dual_store_reads_the_larger_and_catches_up_the_lagging_store(registry: Registry, broker) -> None:
    create_topic(registry, "t", 2)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    zk = ZkOffsetStore(registry, "g")
    zk.commit({tp0: 7})  # written by a consumer still on ZooKeeper storage
    kafka = KafkaOffsetStore(broker.bootstrap, "g", "test", backoff_ms=100)
    try:
        kafka.commit({tp1: 5})
        dual = DualOffsetStore(kafka, ZkOffsetStore(registry, "g"))
        assert dual.fetch([tp0, tp1]) == {tp0: 7, tp1: 5}
        dual.commit({tp0: 7, tp1: 5})  # unchanged positions still bring the lagging store up to date
        fresh = KafkaOffsetStore(broker.bootstrap, "g", "x")
        assert fresh.fetch([tp0, tp1]) == {tp0: 7, tp1: 5}
        fresh.close()
        assert ZkOffsetStore(registry, "g").fetch([tp0, tp1]) == {tp0: 7, tp1: 5}
        assert dual.commit({tp0: 6}) == {}, "never backwards"
    finally:
        kafka.close()
