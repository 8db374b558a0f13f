"""Apache Kafka's own jars: fetched by Maven into a cache, or taken from your own installation; the harness."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from zkconsumer.apache_kafka import jars, kraft
from zkconsumer.apache_kafka.processes import KafkaBroker, KafkaProcessError, harness_command, run_tool
from zkconsumer.cli import main
from zkconsumer.zk.layout import BrokerInfo, TopicAssignment


@pytest.fixture(scope="module")
def dist() -> jars.KafkaDist:
    return jars.fetch()  # make setup fetched it; on a machine without it, this is the fetch


def test_the_cache_holds_kafka_0822_and_its_runtime_dependencies(dist: jars.KafkaDist) -> None:
    names = {os.path.basename(j) for j in dist.jars}
    assert {"kafka_2.10-0.8.2.2.jar", "scala-library-2.10.4.jar", "zkclient-0.3.jar", "metrics-core-2.2.0.jar",
            "zookeeper-3.4.6.jar", "jopt-simple-3.2.jar", "log4j-1.2.16.jar"} <= names
    assert not any(n.startswith("junit") for n in names)  # excluded in the descriptor: not a runtime dependency
    assert dist.version == "0.8.2.2"


def test_a_fetch_into_an_empty_cache_goes_through_maven(tmp_path: Path, monkeypatch, dist: jars.KafkaDist) -> None:
    monkeypatch.setenv("ZKCONSUMER_KAFKA_CACHE", str(tmp_path))
    monkeypatch.delenv("ZKCONSUMER_KAFKA_HOME", raising=False)
    assert jars.cached() is None
    fresh = jars.fetch()
    assert fresh.source.startswith("cache") and fresh.libs == tmp_path / "0.8.2.2" / "libs"
    assert sorted(map(os.path.basename, fresh.jars)) == sorted(map(os.path.basename, dist.jars))
    assert [p.name for p in tmp_path.iterdir()] == ["0.8.2.2"]  # no staging directory left behind
    assert jars.cached() == fresh


def test_a_cache_fetched_with_another_descriptor_is_not_taken(tmp_path: Path, monkeypatch,
                                                             dist: jars.KafkaDist) -> None:
    """The marker holds the descriptor of the fetch: once the descriptor changes (another jar), the cache is stale."""
    monkeypatch.setenv("ZKCONSUMER_KAFKA_CACHE", str(tmp_path))
    monkeypatch.delenv("ZKCONSUMER_KAFKA_HOME", raising=False)
    libs = tmp_path / "0.8.2.2" / "libs"
    libs.mkdir(parents=True)
    for jar in dist.jars:
        (libs / os.path.basename(jar)).symlink_to(jar)
    marker = libs.parent / ".complete"
    marker.write_text(jars.descriptor("0.8.2.2").read_text())
    assert jars.cached() is not None
    marker.write_text("<project><!-- an older descriptor --></project>")
    assert jars.cached() is None


def test_your_own_kafka_installation_wins(tmp_path: Path, monkeypatch, dist: jars.KafkaDist) -> None:
    libs = tmp_path / "kafka_2.10-0.8.2.2" / "libs"
    libs.mkdir(parents=True)
    for jar in dist.jars:
        (libs / os.path.basename(jar)).symlink_to(jar)
    monkeypatch.setenv("ZKCONSUMER_KAFKA_HOME", str(libs.parent))
    mine = jars.fetch()
    assert mine.source.startswith("ZKCONSUMER_KAFKA_HOME") and mine.libs == libs.resolve()
    done = run_tool("VerifyConsumerRebalance", ["--help"], mine)
    assert "--zookeeper.connect" in done.stdout + done.stderr


def test_a_home_without_kafka_jars_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ZKCONSUMER_KAFKA_HOME", str(tmp_path))
    with pytest.raises(jars.KafkaDistError, match="holds no libs/kafka_"):
        jars.cached()
    assert main(["kafka", "info"]) == 1


def test_an_unknown_version_is_refused() -> None:
    with pytest.raises(jars.KafkaDistError, match="no descriptor for Kafka 0.7.2"):
        jars.descriptor("0.7.2")


def test_the_harness_is_compiled_once_per_source(dist: jars.KafkaDist) -> None:
    first = dist.harness_classes()
    assert (first / "HighLevelConsumers.class").exists()
    assert dist.harness_classes() == first


def test_a_broker_on_a_taken_port_says_so(zk_connect: str, dist: jars.KafkaDist) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(KafkaProcessError, match="already in use"):
            KafkaBroker(zk_connect, port=s.getsockname()[1]).start()


def test_a_member_whose_first_rebalance_gives_up_ends_its_process(zk_connect: str, registry,
                                                                   dist: jars.KafkaDist) -> None:
    """Issue 40, catalogue mode d: Kafka 0.8.2.2's ``createMessageStreams`` throws when the first rebalance gives up
    after ``rebalance.max.retries``. A lab member (one process, ``--until-signal``) then ends as an application's
    main() that lets the exception out does: status 1, no shutdown, its registration left for ZooKeeper to expire;
    not a registered connector without streams, whose partitions would stay owned and unread."""
    registry.register_broker(BrokerInfo(0, "127.0.0.1", 1))  # no broker listens: the member does not fetch
    registry.create_topic_node("t", TopicAssignment({0: [0]}))
    registry.zk.create("/consumers/g/owners/t/0", b"another-session", ephemeral=True, makepath=True)
    cmd = harness_command(dist, zk_connect, "g", ["t"], fetch_records=False, start=["c1"], until_signal=True,
                          properties={"rebalance.max.retries": 2, "rebalance.backoff.ms": 100,
                                      "zookeeper.session.timeout.ms": 30000})
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"event":"error"' in done.stdout and "can't rebalance after 2 retries" in done.stdout
    assert registry.zk.exists("/consumers/g/ids/g_c1") is not None  # never shut down: the session outlives it


def test_a_kraft_cluster_id_never_starts_with_a_dash(monkeypatch) -> None:
    """Kafka's storage tool would read ``-t -xyz…`` as an option with its value missing: drawn again, as Kafka's
    ``Uuid.randomUuid`` does."""
    dashed, plain = uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x10" + bytes(15))
    draws = iter([dashed, plain])
    monkeypatch.setattr(kraft.uuid, "uuid4", lambda: next(draws))
    assert kraft.cluster_id() == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")
