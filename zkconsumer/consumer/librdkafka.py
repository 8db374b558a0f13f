"""A coordinator-mode member on librdkafka (confluent-kafka), for the protocol generations kafka-python does not
speak: the next-generation consumer protocol (KIP-848, ``group.protocol=consumer``) above all.

It writes the same trace events as the other members (docs/trace.md), so the lab and the Spark analysis judge it
the same way:

- ``registered``;
- ``rebalance_triggered`` and ``attempt_started`` at the first callback of a rebalance;
- ``released`` when partitions are revoked or lost;
- ``assigned`` and ``rebalance_done`` with the whole share after each assignment;
- ``record_delivered`` for each record handed to the caller;
- ``offset_committed``;
- ``shutdown``.

It commits only what the caller has finished with (``processed``): every interval, before a revocation, and at
shutdown. Under KIP-848 and cooperative-sticky the callbacks are incremental. ``on_assign`` then names only the
partitions added, and ``on_revoke`` only those taken away. The share in the trace is always the whole one.

confluent-kafka is an optional dependency (``pip install zkconsumer[dev]``). Without it, constructing a member
says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from zkconsumer import runtime
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.trace import TraceWriter
from zkconsumer.types import GroupMode, tp_str
from zkconsumer.zk import layout

log = logging.getLogger(__name__)

#: librdkafka properties a member passes through as they are (Kafka's names).
PASSED_THROUGH = ("group.protocol", "group.remote.assignor", "group.instance.id")
#: Classic-protocol settings librdkafka refuses under ``group.protocol=consumer``, where the broker decides them.
CLASSIC_ONLY = ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy")


def client_settings(config: ConsumerConfig, bootstrap: str) -> dict[str, object]:
    """librdkafka's configuration for this member: ours, in its names."""
    protocol = config.get("group.protocol")
    settings: dict[str, object] = {
        "bootstrap.servers": bootstrap, "group.id": config.group_id, "client.id": config.client_id,
        "enable.auto.commit": False,  # processed offsets only, committed here
        "auto.offset.reset": "earliest" if config.auto_offset_reset == "smallest" else "latest",
    }
    for name in PASSED_THROUGH:
        if config.get(name):
            settings[name] = config.get(name)
    if protocol == "classic":
        settings.update({"session.timeout.ms": config.get("session.timeout.ms"),
                         "heartbeat.interval.ms": config.heartbeat_interval_ms,
                         "max.poll.interval.ms": config.get("max.poll.interval.ms"),
                         "partition.assignment.strategy": config.strategy})
    return settings


class RdkafkaMember:
    """One member of a group on librdkafka, consuming ``topics`` until :meth:`run`'s ``stop`` is set."""

    def __init__(self, config: ConsumerConfig, topics: Iterable[str]) -> None:
        try:
            import confluent_kafka  # optional: only this member needs librdkafka
        except ImportError:
            raise ConfigError("--client librdkafka needs confluent-kafka: pip install confluent-kafka") from None
        if not config.bootstrap_servers:
            raise ConfigError("--client librdkafka needs bootstrap.servers (--bootstrap-server)")
        self._ck = confluent_kafka
        self.config = config
        self.group = config.group_id
        self.topics = sorted(topics)
        self.consumer_id = layout.make_consumer_id(self.group, config.consumer_id)
        self.thread_id = f"{self.consumer_id}-0"
        self.trace = TraceWriter(config.trace_dir, self.group, self.consumer_id, mode=GroupMode.COORDINATOR)
        self.protocol = config.get("group.protocol")
        self.consumer = confluent_kafka.Consumer(client_settings(config, config.bootstrap_servers))
        self.owned: set[tuple[str, int]] = set()
        self.processed: dict[tuple[str, int], int] = {}
        self.committed: dict[tuple[str, int], int] = {}
        self.error: str | None = None
        self._rebalance = 0
        self._started: float | None = None

    # ------------------------------------------------------------------------------------- the callbacks
    def _begin(self, cause: str) -> None:
        if self._started is not None:
            return
        self._rebalance += 1
        self._started = runtime.monotonic()
        self.trace.emit("rebalance_triggered", cause=cause, protocol=self.protocol)
        self.trace.emit("attempt_started", rebalance=self._rebalance, attempt=1)

    def _on_assign(self, consumer, partitions) -> None:
        self._begin("startup" if self._rebalance == 0 else "coordinator")
        self.owned |= {(p.topic, p.partition) for p in partitions}
        share = {tp_str(tp): self.thread_id for tp in sorted(self.owned)}
        self.trace.emit("assigned", rebalance=self._rebalance, attempt=1, assignment=share,
                        strategy=self.config.get("group.remote.assignor") or self.config.strategy)
        duration = int((runtime.monotonic() - self._started) * 1000) if self._started else 0
        self._started = None
        self.trace.emit("rebalance_done", rebalance=self._rebalance, attempts=1, duration_ms=duration,
                        owned=sorted(share))

    def _give_up(self, partitions, lost: bool) -> None:
        self._begin("session_expired" if lost else "coordinator")
        gone = {(p.topic, p.partition) for p in partitions} & self.owned
        if not lost:
            self._commit(gone)
        self.owned -= gone
        for tp in gone:
            self.processed.pop(tp, None)
        self.trace.emit("released", rebalance=self._rebalance, partitions=sorted(map(tp_str, gone)))

    # --------------------------------------------------------------------------------------------- commits
    def _commit(self, only: set[tuple[str, int]] | None = None) -> None:
        due = {tp: v for tp, v in self.processed.items()
               if (only is None or tp in only) and tp in self.owned and self.committed.get(tp) != v}
        if not due:
            return
        offsets = [self._ck.TopicPartition(t, p, v) for (t, p), v in sorted(due.items())]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except self._ck.KafkaException as e:  # e.g. a rebalance in progress: the next commit tries again
            log.warning("%s: offset commit failed: %s", self.consumer_id, e)
            return
        self.committed.update(due)
        for (t, p), v in sorted(due.items()):
            self.trace.emit("offset_committed", topic=t, partition=p, offset=v, store="kafka")

    # ------------------------------------------------------------------------------------------------ run
    def run(self, stop: runtime.Event, on_record: Callable[[object], bool] | None = None) -> int:
        """Consume until ``stop`` is set or ``on_record`` returns False; returns the records handed out."""
        self.trace.emit("registered", subscription=dict.fromkeys(self.topics, 1), pattern=layout.STATIC)
        self.consumer.subscribe(self.topics, on_assign=self._on_assign,
                                on_revoke=lambda c, ps: self._give_up(ps, lost=False),
                                on_lost=lambda c, ps: self._give_up(ps, lost=True))
        interval = self.config.auto_commit_interval_ms / 1000.0
        next_commit = runtime.monotonic() + interval
        count = 0
        try:
            while not stop.is_set():
                msg = self.consumer.poll(0.1)
                if msg is not None:
                    if msg.error() is not None:
                        self.error = msg.error().str()
                        log.warning("%s: %s", self.consumer_id, self.error)
                        if msg.error().fatal():
                            break
                    else:
                        tp = (msg.topic(), msg.partition())
                        self.trace.emit("record_delivered", topic=tp[0], partition=tp[1], offset=msg.offset(),
                                        thread=self.thread_id)
                        count += 1
                        keep_going = on_record(msg) if on_record is not None else True
                        self.processed[tp] = msg.offset() + 1
                        if keep_going is False:
                            break
                if self.config.auto_commit and runtime.monotonic() >= next_commit:
                    self._commit()
                    next_commit = runtime.monotonic() + interval
        finally:
            if self.config.auto_commit:
                self._commit()
            self.consumer.close()  # leaves the group (a static member does not)
            self.trace.emit("shutdown", committed=self.config.auto_commit)
            self.trace.close()
        return count
