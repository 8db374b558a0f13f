"""The Kafka side of a coordinator-mode world (issue 54): the project's broker as a simulated process, and the lab's
producer, both their own code on the simulated network (:mod:`.kafka_io` routes kafka-python and the broker's
server while the world runs).

- **the broker**: :class:`~zkconsumer.broker.broker.Broker` itself (its server, dispatcher, group coordinator and
  offsets log, its log on disk in a temporary directory), in a process named ``broker``, registered in the
  simulated ZooKeeper through a session of its own; its coordinator's settings are the lab's
  (``RunPlan.group_settings``). A ``kill -9`` stops its tasks, refuses new connections and closes the ones it had;
  a restart opens a new :class:`Broker` on the same directory, which recovers its logs and its committed offsets
  from the files as the real one does;
- **the producer**: the lab's (lab/runner.py): kafka-python's ``KafkaProducer`` with ``acks=1`` and
  ``linger_ms=5``, writing the lab's values (:func:`~zkconsumer.records.encode_value`). ``log_end`` counts what it
  was handed per partition, as the lab counts ``produced``.

It has the surface of :class:`~.broker.SimBroker` the world uses (:class:`~.broker.LogEnds`, ``down``, ``produce``),
so the world's producer, steps and end read the same.
"""

from __future__ import annotations

import shutil
import tempfile

from kafka import KafkaProducer

from zkconsumer import broker_version
from zkconsumer.broker.broker import Broker
from zkconsumer.records import encode_value
from zkconsumer.scenario.plan import GroupSettings
from zkconsumer.sim import tasks
from zkconsumer.sim.broker import LogEnds
from zkconsumer.sim.kafka_io import KafkaIO
from zkconsumer.sim.kazoo_handler import SimHandler
from zkconsumer.sim.kazoo_world import KazooWorld

#: where the simulated broker listens, as the lab's broker advertises itself to members
BROKER_ADDRESS = ("127.0.0.1", 9092)


class KafkaSide(LogEnds):
    """The broker process and the producer of one coordinator-mode world (``log_end``: what the producer was handed)."""

    def __init__(self, kw: KazooWorld, io: KafkaIO, group: GroupSettings) -> None:
        super().__init__()
        self.kw, self.io, self.group = kw, io, group
        #: the broker's process is not running (killed, not started again)
        self.down = True
        self.broker: Broker | None = None
        self.process: tasks.Process | None = None
        self.data_dir = tempfile.mkdtemp(prefix="zkconsumer-sim-broker-")
        self._producer: KafkaProducer | None = None
        self._stopped = False

    @property
    def bootstrap(self) -> str:
        return f"{BROKER_ADDRESS[0]}:{BROKER_ADDRESS[1]}"

    # ------------------------------------------------------------------------------------------- the process
    def start(self, registered: tasks.Event, delay_s: float = 0.0) -> tasks.Process:
        """Start the broker's process: after ``delay_s`` (an interpreter starting), it opens its log and registers;
        ``registered`` is set once it serves."""
        self.process = process = tasks.Process("broker")

        def main() -> None:
            if delay_s:
                tasks.sleep(delay_s)
            rt, network = self.kw.runtime, self.kw.network
            self.broker = Broker(self.kw.hosts, broker_id=0, host=BROKER_ADDRESS[0], port=BROKER_ADDRESS[1],
                                 data_dir=self.data_dir, session_timeout_ms=6000,
                                 group_initial_rebalance_delay_ms=self.group.initial_rebalance_delay_ms,
                                 group_min_session_timeout_ms=self.group.min_session_timeout_ms,
                                 zk_handler=lambda: SimHandler(rt, network, "broker")).start()
            self.down = False
            registered.set()

        self.kw.runtime.spawn(main, name="broker-main", process=process)
        return process

    def kill(self) -> None:
        """SIGKILL: its tasks never run again, its connections close, nothing listens at its address; its
        registration stays until its ZooKeeper session expires."""
        if self.process is not None:
            self.kw.runtime.kill_process(self.process)
        if self.broker is not None and self.broker.logs is not None:
            self.broker.logs.release_lock()  # the kernel closes a killed process's descriptors, its lock's among them
        self.io.close_listener(BROKER_ADDRESS)
        self.kw.network.close_host("broker")
        self.down = True

    def close(self) -> None:
        """The run is over: the broker's directory goes (its tasks were unwound with the world's)."""
        shutil.rmtree(self.data_dir, ignore_errors=True)

    # ------------------------------------------------------------------------------------------- the producer
    def produce(self, topic: str, partition: int, count: int = 1) -> None:
        """The lab's producer sends ``count`` records to the partition (from the calling task: the lab's); nothing
        once it is stopped (the world's last tick may come after)."""
        if self._stopped:
            return
        producer = self._producer
        if producer is None:
            producer = self._producer = KafkaProducer(
                bootstrap_servers=self.bootstrap, acks=1, linger_ms=5, metrics_enabled=False,
                metadata_max_age_ms=1000, **broker_version.client_settings(self.bootstrap))
        for _ in range(count):
            seq = self.log_end.get((topic, partition), 0)
            try:
                producer.send(topic, value=encode_value(topic, partition, seq), partition=partition)
            except ValueError:
                # a partition added since the producer's last metadata (kafka-python refuses it until its next,
                # a second at most here, as the lab's producer): the record never existed, as in the lab
                return
            self.log_end[(topic, partition)] = seq + 1

    def flush(self, timeout_s: float = 30.0) -> None:
        if self._producer is not None:
            self._producer.flush(timeout=timeout_s)

    def stop_producing(self) -> None:
        self._stopped = True
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.close(timeout=5)
