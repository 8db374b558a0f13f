"""Several Apache Kafka brokers on loopback as one cluster, every internal topic replicated on all of them: the
place where a group's coordinator can fail over (the failure catalogue's ``kill-coordinator``, docs/scenarios.md).

A 3.x cluster runs in ZooKeeper mode, registered in the ZooKeeper given (broker ids 0..n-1); a 4.x cluster runs
in KRaft mode, every node both broker and controller (node ids 1..n, all of them voters, so one node down keeps
the quorum). ``__consumer_offsets`` has as many replicas as there are brokers and ``min.insync.replicas`` is 1, so
a group's coordinator moves to another broker when its own is killed and loads the group from the log there.

Which broker coordinates a group is what FindCoordinator answers; a broker killed with SIGKILL is started again
on its port and log directory. In ZooKeeper mode the killed process's registration lingers until its session
expires, and Kafka refuses to start while another session holds ``/brokers/ids/<id>``, so a restart waits for the
node to go first (as an operator restarting a crashed broker must).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Self

from kafka.protocol.metadata import FindCoordinatorRequest

from zkconsumer.apache_kafka.kraft import KraftBroker, cluster_id
from zkconsumer.apache_kafka.processes import KafkaBroker, KafkaProcessError, KafkaServer
from zkconsumer.broker.client import RawClient
from zkconsumer.errors import code_name
from zkconsumer.zk.layout import broker_path
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import free_port


def replicated(size: int) -> dict[str, object]:
    """The settings that make every internal topic (and topics created without a factor) live on ``size``
    brokers, available while one is up."""
    return {"offsets.topic.replication.factor": size, "transaction.state.log.replication.factor": size,
            "transaction.state.log.min.isr": 1, "default.replication.factor": size, "min.insync.replicas": 1,
            "unclean.leader.election.enable": "false"}


class KafkaCluster:
    """``size`` brokers of Kafka ``version``: ZooKeeper mode (3.x, in ``zk_connect``) or KRaft mode (4.x).

    >>> with KafkaCluster("3.9.1", zk_connect="127.0.0.1:2181/k") as c: c.coordinator("g")   # doctest: +SKIP
    """

    def __init__(self, version: str, size: int = 3, zk_connect: str | None = None,
                 data_dir: str | os.PathLike | None = None, properties: Mapping[str, object] | None = None) -> None:
        if size < 1:
            raise KafkaProcessError(f"a cluster has at least one broker, not {size}")
        self.version = version
        self.kraft = int(version.split(".")[0]) >= 4
        if not self.kraft and not zk_connect:
            raise KafkaProcessError(f"Kafka {version} runs in ZooKeeper mode: give the cluster a ZooKeeper")
        self.zk_connect = zk_connect
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="zkconsumer-kafka-cluster-")).resolve()
        props = {**replicated(size), **(properties or {})}
        self.brokers: dict[int, KafkaServer] = {}
        if self.kraft:
            controllers = {i: free_port() for i in range(1, size + 1)}
            voters = ",".join(f"{i}@127.0.0.1:{port}" for i, port in controllers.items())
            shared = cluster_id()
            props["share.coordinator.state.topic.replication.factor"] = size
            for i, port in controllers.items():
                self.brokers[i] = KraftBroker(controller_port=port, data_dir=self.data_dir / f"broker-{i}",
                                              version=version, properties=props, node_id=i, voters=voters,
                                              cluster=shared)
        else:
            for i in range(size):
                self.brokers[i] = KafkaBroker(zk_connect or "", broker_id=i, data_dir=self.data_dir / f"broker-{i}",
                                              version=version, properties=props)

    @property
    def bootstrap(self) -> str:
        """Every broker: a client bootstraps from whichever answers (one may be down)."""
        return ",".join(b.bootstrap for b in self.brokers.values())

    @property
    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None]

    def start(self, timeout: float = 180.0) -> Self:
        """Every broker launched at once, then each waited for (a KRaft quorum forms only with a majority up)."""
        try:
            for broker in self.brokers.values():
                broker.launch()
            deadline = time.monotonic() + timeout
            for broker in self.brokers.values():
                broker.wait_ready(max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        return self

    def coordinator(self, group: str, other_than: int | None = None, timeout: float = 30.0) -> int:
        """The broker that coordinates ``group`` now, as FindCoordinator answers it from the live brokers; with
        ``other_than``, asked again until another broker answers (a failover: the live brokers name the dead one
        until the controller has moved the leadership of the group's offsets partition)."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            for i in self.live:
                try:
                    with RawClient.to(self.brokers[i].bootstrap, timeout=5.0) as raw:
                        answer = raw.call(FindCoordinatorRequest(key=group), 1)
                except (OSError, ValueError, AssertionError) as e:  # this broker going or not serving yet
                    last = f"broker {i}: {type(e).__name__}: {e}"
                    continue
                if answer.error_code:
                    last = f"broker {i}: {code_name(answer.error_code)}"
                elif answer.node_id != other_than:
                    return int(answer.node_id)
                else:
                    last = f"broker {i} still names broker {answer.node_id}"
            if time.monotonic() > deadline:
                raise KafkaProcessError(f"no broker of {self.bootstrap} named a coordinator for group {group!r}"
                                        f"{'' if other_than is None else f' other than broker {other_than}'} "
                                        f"within {timeout:.0f}s ({last})")
            time.sleep(0.2)

    def kill(self, node: int) -> None:
        """SIGKILL: no controlled shutdown, no leadership moved first (a crash)."""
        self.brokers[node].stop(kill=True)

    def restart(self, node: int, timeout: float = 90.0) -> None:
        """The killed broker started again on its port and log, once ZooKeeper has dropped the registration of
        the killed process's session (ZooKeeper mode)."""
        broker = self.brokers[node]
        deadline = time.monotonic() + timeout
        if not self.kraft:
            with Registry.open(self.zk_connect or "") as reg:
                if not reg.wait_gone(broker_path(node), timeout):
                    raise KafkaProcessError(f"broker {node}'s registration outlived its killed process by "
                                            f"{timeout:.0f}s")
        broker.start(max(1.0, deadline - time.monotonic()))

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
