"""Apache Kafka's brokers as a 3-broker cluster (zkconsumer/apache_kafka/cluster.py), what the failure catalogue's
``kill-coordinator`` runs on: the group's coordinator killed with SIGKILL, another broker named coordinator, the
group's committed offsets read back from it (its replica of ``__consumer_offsets``), and the killed broker started
again on its port and log. Once in ZooKeeper mode (Kafka 3.9.1) and once in KRaft mode (Kafka 4.1.1, three
combined nodes, all voters). Three JVM brokers each: in make faults; what a cluster refuses, in make test."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from zkconsumer.apache_kafka.cluster import KafkaCluster
from zkconsumer.apache_kafka.kraft import KRAFT_VERSION
from zkconsumer.errors import ZkConsumerError
from zkconsumer.kafka_admin import AdminClient
from zkconsumer.migration.verify import committed
from zkconsumer.zk.server import ZooKeeperServer


def _commit(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


@pytest.mark.faults_full
@pytest.mark.parametrize("version", ["3.9.1", KRAFT_VERSION])
def test_a_killed_coordinator_fails_over_with_the_groups_offsets(version: str, tmp_path: Path) -> None:
    kraft = int(version.split(".")[0]) >= 4
    with ZooKeeperServer(servers=1) as zk:
        with KafkaCluster(version, 3, None if kraft else zk.connect_string, tmp_path / "cluster") as cluster:
            assert sorted(cluster.live) == ([1, 2, 3] if kraft else [0, 1, 2])
            assert cluster.bootstrap.count(",") == 2
            admin = AdminClient(bootstrap_servers=cluster.bootstrap, client_id="test")
            try:
                admin.create_topics([NewTopic("orders", 3, 3)])
            finally:
                admin.close()
            tp = TopicPartition("orders", 1)
            _commit(cluster.bootstrap, "g", tp, 42)
            first = cluster.coordinator("g")
            cluster.kill(first)
            assert first not in cluster.live
            after = cluster.coordinator("g", other_than=first, timeout=60)
            assert after != first and after in cluster.live
            # the new coordinator loads the group from its replica of the offsets log (asked again while it loads)
            deadline = time.monotonic() + 30
            while (offsets := committed(cluster.bootstrap, "g")) != {("orders", 1): 42} and time.monotonic() < deadline:
                time.sleep(0.2)
            assert offsets == {("orders", 1): 42}
            cluster.restart(first)
            assert sorted(cluster.live) == sorted(cluster.brokers)


def test_a_cluster_is_refused_what_it_cannot_be(tmp_path: Path) -> None:
    with pytest.raises(ZkConsumerError, match="at least one broker"):
        KafkaCluster("3.9.1", 0, "127.0.0.1:1")
    with pytest.raises(ZkConsumerError, match="runs in ZooKeeper mode: give the cluster a ZooKeeper"):
        KafkaCluster("3.9.1", 3, None, tmp_path)


def test_a_wait_for_a_node_to_go_is_woken_by_its_watch(registry) -> None:
    """What a restart in ZooKeeper mode waits on: the killed broker's registration gone (Registry.wait_gone)."""
    registry.zk.create("/brokers/ids/7", b"{}", makepath=True)
    assert registry.wait_gone("/brokers/ids/7", 0.2) is False  # still there at the deadline
    done = threading.Event()
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: (result.append(registry.wait_gone("/brokers/ids/7", 30)), done.set()))
    waiter.start()
    registry.zk.delete("/brokers/ids/7")
    assert done.wait(10) and result == [True]
    waiter.join()
    assert registry.wait_gone("/brokers/ids/8", 0) is True  # never there
