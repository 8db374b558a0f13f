"""zkconsumer against Apache Kafka 0.8.2.2's own broker (issue 19: Kafka 0.8.2.2 as the oracle).

kafka-python 3 opens every connection with ApiVersions, which a 0.8.2 broker answers by closing the socket;
:mod:`zkconsumer.broker_version` decides the ``api_version`` instead (an explicit property, else a probe). Here:
the decision's rules (pure), the probe against both brokers, a ZooKeeper-mode group of two members fetching every
record from the 0.8.2.2 broker with offsets in ZooKeeper, the offset checker's logSize, ``zkconsumer produce``, and a
short ``zkconsumer lab --bootstrap-server`` run. One 0.8.2.2 broker serves the module (its own chroot).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections import defaultdict

import pytest
from helpers import consumer, drain, fresh_chroot, wait_until
from kafka import KafkaProducer

from zkconsumer import broker_version
from zkconsumer.apache_kafka.processes import KafkaBroker
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.broker_version import BrokerTooOld, ProbeResult, decide, parse_setting, registration_hint
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.consumer.zookeeper.connector import ConsumerTimeout
from zkconsumer.consumer.zookeeper.kafka_offsets import KafkaOffsetStore
from zkconsumer.tools.groups import read_log_ends
from zkconsumer.tools.offset_checker import check
from zkconsumer.zk.layout import BrokerInfo
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kafka082(zk_server):
    """Kafka 0.8.2.2's broker, registered in a chroot of the module's ZooKeeper."""
    with KafkaBroker(fresh_chroot(zk_server.connect_string, "kafka082")) as broker:
        yield broker


@pytest.fixture(autouse=True)
def _fresh_decisions():
    broker_version.clear_cache()
    yield
    broker_version.clear_cache()


def zkconsumer_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zkconsumer", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def topic_on(broker: KafkaBroker, topic: str, partitions: int) -> None:
    """Created through ZooKeeper, as Kafka 0.8.2's TopicCommand does; its controller elects the leaders."""
    with Registry.open(broker.zk_connect) as reg:
        create_topic(reg, topic, partitions)
    broker.wait_topic(topic, partitions)


# ------------------------------------------------------------------------------------------ the pure decision
def test_setting_parses_auto_and_versions() -> None:
    assert parse_setting("auto") is None and parse_setting(" AUTO ") is None and parse_setting(None) is None
    assert parse_setting("0.8.2") == (0, 8, 2)
    assert parse_setting("0.9") == (0, 9)
    assert parse_setting("2.8.1") == (2, 8, 1)
    assert parse_setting((0, 10, 2)) == (0, 10, 2)
    for bad in ("0.8.x", "8", "", "0.8.2.2", "latest", "0.7.2"):
        with pytest.raises(ValueError, match="zkconsumer.broker.api.version"):
            parse_setting(bad)


def test_decision_rules() -> None:
    reached = dict(reached=True, address="h:1")
    # an explicit setting wins over anything the probe or the registrations say
    assert decide((0, 9), ProbeResult(api_versions=True, **reached))[0] == (0, 9)
    assert decide((0, 8, 2), None, None)[0] == (0, 8, 2)
    # the probe: ApiVersions answered -> negotiate; refused -> 0.9 if ListGroups is answered, else 0.8.2
    assert decide(None, ProbeResult(api_versions=True, **reached))[0] is None
    assert decide(None, ProbeResult(list_groups=True, **reached))[0] == (0, 9)
    assert decide(None, ProbeResult(**reached))[0] == (0, 8, 2)
    # the probe is the ground truth; the registrations count only when no broker could be reached
    assert decide(None, ProbeResult(api_versions=True, **reached), hint=(0, 8, 2))[0] is None
    assert decide(None, ProbeResult(False), hint=(0, 8, 2))[0] == (0, 8, 2)
    assert decide(None, ProbeResult(False), hint=None)[0] is None


def test_registration_format_hint() -> None:
    v1 = BrokerInfo.decode("/brokers/ids/0", b'{"jmx_port":-1,"timestamp":"1","host":"h","version":1,"port":9092}')
    v4 = BrokerInfo.plaintext(1, "h", 9093)
    v2 = BrokerInfo(2, "h", 9094, ("PLAINTEXT://h:9094",), version=2)
    assert registration_hint([v1]) == (0, 8, 2)
    assert registration_hint([v4]) is None
    assert registration_hint([v2, v4]) == (0, 9)
    assert registration_hint([v1, v2, v4]) == (0, 8, 2)  # one client speaks one version to every broker
    assert registration_hint([]) is None


def test_bad_property_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"zkconsumer.broker.api.version must be 'auto' or a Kafka broker "
                                          r"version such as 0.8.2.*got '0.8.x'"):
        ConsumerConfig.from_properties({"group.id": "g", "zkconsumer.broker.api.version": "0.8.x"})
    config = ConsumerConfig.from_properties({"group.id": "g"})
    assert config.broker_api_version == "auto"
    assert ConsumerConfig.from_properties({"group.id": "g", "zkconsumer.broker.api.version": "0.8.2"}
                                          ).broker_api_version == "0.8.2"


def test_unreachable_cluster_is_undecided_and_not_cached() -> None:
    from zkconsumer.zk.server import free_port

    address = f"127.0.0.1:{free_port()}"
    assert broker_version.probe(address) == ProbeResult(False)
    assert broker_version.api_version(address) is None
    assert broker_version.api_version(address, registrations=[BrokerInfo(0, "127.0.0.1", 1, version=1)]) == (0, 8, 2)
    assert address not in broker_version._cache


# ---------------------------------------------------------------------------------------------- the probe
def test_probe_tells_kafka_082_from_zkconsumers_broker(kafka082, broker, caplog) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer.broker_version")
    assert broker_version.probe(kafka082.bootstrap) == ProbeResult(True, address=kafka082.bootstrap)
    assert broker_version.api_version(kafka082.bootstrap) == (0, 8, 2)
    assert broker_version.api_version(kafka082.bootstrap) == (0, 8, 2)  # cached: logged once
    assert broker_version.probe(broker.bootstrap).api_versions
    assert broker_version.api_version(broker.bootstrap) is None
    decisions = [r.getMessage() for r in caplog.records if "api_version" in r.getMessage()]
    assert len([m for m in decisions if kafka082.bootstrap in m]) == 1, decisions
    assert "api_version 0.8.2" in next(m for m in decisions if kafka082.bootstrap in m)
    # an explicit setting wins over the probe, either way
    assert broker_version.api_version(kafka082.bootstrap, "0.8.1") == (0, 8, 1)
    assert broker_version.api_version(broker.bootstrap, "0.10.2") == (0, 10, 2)
    assert broker_version.client_settings(broker.bootstrap) == {}
    # the first reachable address decides
    assert broker_version.probe(f"127.0.0.1:1,{kafka082.bootstrap}").reached


def test_coordinator_mode_refuses_kafka_082_at_once(kafka082) -> None:
    config = ConsumerConfig.from_properties({"group.id": "coordinated", "bootstrap.servers": kafka082.bootstrap})
    with pytest.raises(BrokerTooOld, match=r"coordinator mode .* needs Kafka 0.9 or later; .* speaks Kafka 0.8.2"):
        CoordinatorConsumerConnector(config)


# ------------------------------------------------------------------------------------- a group fetching from it
def test_zookeeper_group_fetches_every_record_from_kafka_082(kafka082) -> None:
    """Two members with two streams each; records before, during and after the second member's join; offsets in
    ZooKeeper never go backwards and end at the log-end offsets the broker reports (the offset checker's logSize)."""
    zk, topic, partitions, group = kafka082.zk_connect, "fetched", 6, "oracle"
    topic_on(kafka082, topic, partitions)

    def produce(count: int) -> None:
        done = zkconsumer_cli("produce", "--bootstrap-server", kafka082.bootstrap, "--topic", topic, "--count",
                              str(count), "--acks", "all", "--no-progress")
        assert done.returncode == 0, done.stderr
        assert f"acknowledged {count}, failed 0" in " ".join(done.stdout.split())

    delivered: dict[TopicPartition, set[int]] = defaultdict(set)
    lock, stop = threading.Lock(), threading.Event()

    def drain(stream) -> None:
        while not stop.is_set():
            try:
                for record in stream:
                    with lock:
                        delivered[TopicPartition(record.topic, record.partition)].add(record.offset)
                    if stop.is_set():
                        return
            except ConsumerTimeout:
                continue

    backwards: list[str] = []
    last: dict = {}

    def sample_offsets() -> None:  # committed offsets, sampled throughout: none may go backwards
        with Registry.open(zk) as reg:
            while not stop.wait(0.05):
                for tp, value in reg.offsets(group).items():
                    if value < last.get(tp, -1):
                        backwards.append(f"{tp}: {last[tp]} -> {value}")
                    last[tp] = value

    def count() -> int:
        with lock:
            return sum(len(offsets) for offsets in delivered.values())

    props = dict(auto_commit_enable=True, auto_commit_interval_ms=200, auto_offset_reset="smallest",
                 consumer_timeout_ms=200)
    members, threads = [], [threading.Thread(target=sample_offsets, daemon=True)]
    threads[0].start()
    try:
        produce(200)
        members.append(consumer(zk, group, "m1", fetch=True, **props))
        for stream in members[0].create_message_streams({topic: 2})[topic]:
            threads.append(threading.Thread(target=drain, args=(stream,), daemon=True))
            threads[-1].start()
        wait_until(lambda: count() >= 100, timeout=20, message="the first member's records")
        members.append(consumer(zk, group, "m2", fetch=True, **props))
        for stream in members[1].create_message_streams({topic: 2})[topic]:
            threads.append(threading.Thread(target=drain, args=(stream,), daemon=True))
            threads[-1].start()
        produce(200)
        with Registry.open(zk) as reg:
            wait_until(lambda: {o.split("-", 1)[0] for o in reg.owners(group).values()} == {f"{group}_m1",
                                                                                          f"{group}_m2"},
                       timeout=20, message="both members owning partitions")
        produce(200)
        wait_until(lambda: count() == 600, timeout=30, message="every record delivered")
        ends = read_log_ends(kafka082.bootstrap, [TopicPartition(topic, p) for p in range(partitions)])
        assert sum(ends.offsets.values()) == 600
        assert {tp: set(range(end)) for tp, end in ends.offsets.items()} == dict(delivered)
        with Registry.open(zk) as reg:
            wait_until(lambda: reg.offsets(group) == {(tp.topic, tp.partition): end
                                                      for tp, end in ends.offsets.items()},
                       timeout=20, message="committed offsets at the log end")
            report = check(reg, group)  # ConsumerOffsetChecker: logSize from the 0.8.2.2 broker, lag 0
        assert [(r.partition, r.offset, r.log_size, r.lag) for r in report.rows] == [
            (p, ends.offsets[TopicPartition(topic, p)], ends.offsets[TopicPartition(topic, p)], 0)
            for p in range(partitions)]
    finally:
        stop.set()
        for member in members:
            member.shutdown()
        for thread in threads:
            thread.join(10)
    assert not backwards


def test_offsets_in_kafka_082_with_dual_commit(kafka082) -> None:
    """``offsets.storage=kafka`` + ``dual.commit.enabled``, 0.8.2's migration path, against 0.8.2's own offset
    manager: OffsetCommit/OffsetFetch v1 found through ConsumerMetadata, and the same offsets in ZooKeeper."""
    zk, topic, group = kafka082.zk_connect, "dual", "dual-commit"
    topic_on(kafka082, topic, 2)
    producer = KafkaProducer(bootstrap_servers=kafka082.bootstrap,
                             **broker_version.client_settings(kafka082.bootstrap))
    for i in range(50):
        producer.send(topic, b"%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    member = consumer(zk, group, "d1", fetch=True, auto_offset_reset="smallest", consumer_timeout_ms=200,
                      offsets_storage="kafka", dual_commit_enabled=True)
    try:
        stream = member.create_message_streams({topic: 1})[topic][0]
        records: list = []
        wait_until(lambda: records.extend(drain(stream)) or len(records) >= 50, timeout=20,
                   message="50 records")
        stream.ack()
        committed = member.commit_offsets()
        assert {(tp.topic, tp.partition): v for tp, v in committed.items()} == {(topic, 0): 25, (topic, 1): 25}
        with Registry.open(zk) as reg:
            assert reg.offsets(group) == {(topic, 0): 25, (topic, 1): 25}
    finally:
        member.shutdown()
    store = KafkaOffsetStore(kafka082.bootstrap, group, "checker")
    try:
        assert store.fetch([TopicPartition(topic, 0), TopicPartition(topic, 1)]) == {
            TopicPartition(topic, 0): 25, TopicPartition(topic, 1): 25}
    finally:
        store.close()


# ------------------------------------------------------------------------------------------------- the lab
def test_lab_against_kafka_082(kafka082, tmp_path) -> None:
    """``zkconsumer lab --bootstrap-server --zookeeper``: topics through ZooKeeper, churn (a join, a stop, a
    kill -9, a join), verify. ``--duration 6`` keeps it to ~15 s; the coordinator modes are refused at once."""
    done = zkconsumer_cli("lab", "--bootstrap-server", kafka082.bootstrap, "--zookeeper", kafka082.zk_connect,
                          "--consumers", "2", "--duration", "6", "--rate", "100", "--out", str(tmp_path / "run"),
                          timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["verify_ok"] is True and summary["lost"] == 0 and summary["produced"] > 0, summary
    assert "Rebalance operation successful !" in done.stdout
    refused = zkconsumer_cli("lab", "--bootstrap-server", kafka082.bootstrap, "--zookeeper", kafka082.zk_connect,
                             "--mode", "coordinator", "--duration", "3", "--out", str(tmp_path / "refused"))
    assert refused.returncode == 1
    assert "needs Kafka 0.9 or later" in refused.stderr, refused.stderr

