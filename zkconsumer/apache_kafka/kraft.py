"""Kafka 4.x in KRaft mode on loopback: one process that is both controller and broker, with the next-generation
consumer group protocol (KIP-848, ``group.protocol=consumer``) beside the classic one.

Kafka 4 has no ZooKeeper mode, so this broker does not register under ``/brokers/ids``. A 0.8 group cannot
fetch from it, and a migration cannot move to it. It is the place to run the consumer protocol, which neither
Kafka 3.9 in ZooKeeper mode nor zkconsumer's broker serves. Like
:class:`~zkconsumer.apache_kafka.processes.KafkaBroker`, it runs Kafka's published jars as they are (fetched by
Maven). "Ready" means what the broker itself answers: a
Metadata request that lists this broker as the controller.

Starting takes two JVMs. ``kafka.tools.StorageTool format`` writes the log directory's ``meta.properties`` with a
cluster id; then ``kafka.Kafka`` runs the server.
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from zkconsumer.apache_kafka.jars import KafkaDist, fetch
from zkconsumer.apache_kafka.processes import KafkaProcessError, KafkaServer, jvm_command
from zkconsumer.broker.client import RawClient
from zkconsumer.zk.server import free_port, port_in_use, tail, time_left

#: The Kafka 4 line the project runs; KIP-848's protocol is GA from 4.0.
KRAFT_VERSION = "4.1.1"


def cluster_id() -> str:
    """A KRaft cluster id as ``kafka-storage.sh random-uuid`` prints one: 16 random bytes, URL-safe base64, drawn
    again while it starts with ``-`` as Kafka's ``Uuid.randomUuid`` does (one in 64 would, and the storage tool's
    argument parser then reads ``-t -xyz…`` as a missing value: a fresh-clone CI run failed on it)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KraftBroker(KafkaServer):
    """Kafka 4.x as one combined controller and broker (``process.roles=broker,controller``) on 127.0.0.1.

    >>> with KraftBroker() as k: k.bootstrap   # doctest: +SKIP
    """

    def __init__(self, port: int | None = None, controller_port: int | None = None,
                 data_dir: str | os.PathLike | None = None, version: str = KRAFT_VERSION,
                 properties: Mapping[str, object] | None = None, quick_start: bool = True, node_id: int = 1,
                 voters: str | None = None, cluster: str | None = None) -> None:
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="zkconsumer-kraft-")).resolve()
        self.version = version
        self.properties = dict(properties or {})
        self.quick_start = quick_start
        self.node_id = node_id
        #: ``controller.quorum.voters``: this node alone, or every node of a cluster (KafkaCluster)
        self.voters = voters or f"{node_id}@127.0.0.1:{self.controller_port}"
        #: the cluster id its storage is formatted with: the same on every node of a cluster
        self.cluster_id = cluster or cluster_id()
        self.proc: subprocess.Popen | None = None
        self.dist: KafkaDist | None = None

    def server_properties(self) -> dict[str, object]:
        """One node, one replica, loopback; the consumer protocol's timings shortened as for the classic one in
        the other test brokers (the heartbeat interval the coordinator hands out, and the session timeout it
        enforces; in KIP-848 both are the broker's, not the client's)."""
        props: dict[str, object] = {
            "process.roles": "broker,controller", "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.data_dir / "logs", "num.partitions": 1, "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0, "num.network.threads": 2, "num.io.threads": 2,
            "group.consumer.min.heartbeat.interval.ms": 500, "group.consumer.heartbeat.interval.ms": 1000,
            "group.consumer.min.session.timeout.ms": 6000, "group.consumer.session.timeout.ms": 10000,
        }
        props.update(self.properties)
        return props

    def _jvm(self, main: str, args: list[str]) -> list[str]:
        assert self.dist is not None
        cmd = jvm_command(self.dist, main, args, None, quick_start=self.quick_start, heap="512m")
        # slf4j-simple (the pom): Kafka's logging to stderr, which start() sends to server.log; INFO, as a broker logs
        return [cmd[0], "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true", *cmd[1:]]

    def start(self, timeout: float = 90.0) -> KraftBroker:
        return super().start(timeout)

    def launch(self) -> None:
        for port in (self.port, self.controller_port):
            if port_in_use(port):
                raise KafkaProcessError(f"port {port} is already in use")
        self.dist = fetch(self.version)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        if not (self.data_dir / "logs" / "meta.properties").exists():
            fmt = subprocess.run(self._jvm("kafka.tools.StorageTool", ["format", "-t", self.cluster_id, "-c",
                                                                        str(config)]),
                                 capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            if fmt.returncode != 0:
                raise KafkaProcessError(f"Kafka {self.version}'s StorageTool could not format {self.data_dir}:\n"
                                        f"{(fmt.stdout + fmt.stderr)[-3000:]}")
        out = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(self._jvm("kafka.Kafka", [str(config)]), stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.data_dir)
        out.close()

    def wait_ready(self, timeout: float) -> None:
        """Until a Metadata answer of this node names a controller and lists this node among the brokers (the
        quorum has a leader and the broker is unfenced), never a fixed sleep."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc is None or self.proc.poll() is not None:
                raise KafkaProcessError(f"Kafka {self.version} (KRaft) exited during start-up; log:\n"
                                        f"{tail(self.log_file)}")
            if port_in_use(self.port):
                try:
                    with RawClient.to(self.bootstrap, timeout=5.0) as raw:
                        answer = raw.call(MetadataRequest(topics=[]), 4)
                    if answer.controller_id >= 0 and self.node_id in {b[0] for b in answer.brokers}:
                        return
                except (OSError, ValueError, AssertionError):
                    pass  # not serving yet
            time_left(deadline, lambda: KafkaProcessError(
                f"Kafka {self.version} (KRaft) was not ready within {timeout:.0f}s; log:\n{tail(self.log_file)}"))
            time.sleep(0.2)
