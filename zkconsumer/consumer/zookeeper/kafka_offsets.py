"""Kafka 0.8.2's offset migration path: offsets in the broker (``offsets.storage=kafka``) and dual commit.

A ZooKeeper-coordinated group can keep its offsets in the broker's offsets topic instead of ZooKeeper.
Kafka 0.8.2 did it with OffsetCommit/OffsetFetch v1 sent to the group's offset manager, found with
ConsumerMetadata (later FindCoordinator), as a group without coordinator members (generation -1, member
""). kafka-python's admin client sends exactly those requests (FindCoordinator, then OffsetCommit or
OffsetFetch at the highest version both sides speak, v1+ on any 0.9+ broker), so this module only adds
Kafka 0.8.2's retries and zkconsumer's "never backwards" checkpoints on top.

The documented migration roll: ``offsets.storage=kafka`` + ``dual.commit.enabled=true`` (commit to both,
read the larger of both, as 0.8.2's ``fetchOffsets`` does) → rolling restart → ``dual.commit.enabled=false``
→ rolling restart. :func:`offset_store` is the one place that picks the store from the configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from kafka import TopicPartition as KTP
from kafka.structs import OffsetAndMetadata

from zkconsumer import broker_version, runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.progress import INVALID_OFFSET
from zkconsumer.consumer.zookeeper.offsets import ZkOffsetStore
from zkconsumer.errors import ZkConsumerError
from zkconsumer.kafka_admin import AdminClient
from zkconsumer.trace import TraceWriter

log = logging.getLogger(__name__)


class KafkaOffsetError(ZkConsumerError, RuntimeError):
    """The coordinator did not take (or give) offsets within the configured retries."""


def _retriable(error: type) -> bool:
    """Coordinator moved, not available, or loading (Kafka 0.8.2 retried these after a backoff), or a connection
    not up yet: kafka-python's errors and ours say so themselves (``retriable``); anything else (an OSError) not."""
    return bool(getattr(error, "retriable", False))


class KafkaOffsetStore:
    """A group's offsets in the broker, with the surface of
    :class:`~zkconsumer.consumer.zookeeper.offsets.ZkOffsetStore`.

    Like the ZooKeeper store, a value is written only when it is higher than the last one this store read
    or wrote for the partition (never backwards; an equal value is not re-sent). The admin client is
    created on first use, so a connector that never commits never connects.
    """

    store = "kafka"
    #: the broker's offsets are not ordered behind our ZooKeeper session's writes: read after the claim
    reads_with_claims = False

    def __init__(self, bootstrap: str | Callable[[], str], group: str, client_id: str,
                 trace: TraceWriter | None = None, retries: int = 5, backoff_ms: int = 1000,
                 request_timeout_ms: int = 30000, api_version: str = "auto") -> None:
        self._bootstrap = bootstrap
        self._api_version = api_version  # zkconsumer.broker.api.version (Kafka 0.8.2 answers no ApiVersions)
        self.group = group
        self.client_id = client_id
        self.trace = trace
        self.retries = retries
        self.backoff = backoff_ms / 1000.0
        self.request_timeout_ms = request_timeout_ms
        self._admin = None
        self._checkpoints: dict[TopicPartition, int] = {}
        self._lock = runtime.Lock()  # one request at a time; guards the admin client and the checkpoints

    def _client(self):
        if self._admin is None:
            bootstrap = self._bootstrap() if callable(self._bootstrap) else self._bootstrap
            self._admin = AdminClient(bootstrap_servers=bootstrap, client_id=self.client_id,
                                      request_timeout_ms=max(1000, self.request_timeout_ms),
                                      **broker_version.client_settings(bootstrap, self._api_version))
        return self._admin

    def _with_retries(self, what: str, call: Callable[[], object]) -> object:
        for attempt in range(self.retries + 1):
            try:
                return call()
            except Exception as e:  # noqa: BLE001 - kafka-python raises its error classes or network errors
                if attempt == self.retries or not (_retriable(type(e)) or "Connection" in type(e).__name__):
                    raise KafkaOffsetError(f"{what} for group {self.group} failed: {e!r}") from e
                log.debug("%s for group %s: %r; retrying in %.1fs", what, self.group, e, self.backoff)
                runtime.sleep(self.backoff)  # Kafka's offsets.channel.backoff.ms between attempts
        raise KafkaOffsetError(f"{what} for group {self.group}: no attempt (offsets.commit.max.retries={self.retries})")

    def fetch(self, tps: Iterable[TopicPartition], pipelined: bool = True) -> dict[TopicPartition, int]:
        """The committed offsets (``INVALID_OFFSET`` when none), in one OffsetFetch; they become checkpoints.

        ``pipelined`` is accepted for the ZooKeeper store's signature: one request reads them all anyway."""
        tps = list(tps)
        if not tps:
            return {}
        with self._lock:
            answer = self._with_retries("OffsetFetch", lambda: self._client().list_group_offsets(
                {self.group: [KTP(tp.topic, tp.partition) for tp in tps]}).get(self.group, {}))
            out = {}
            for tp in tps:
                meta = answer.get(KTP(tp.topic, tp.partition))
                value = meta.offset if meta is not None and meta.offset >= 0 else INVALID_OFFSET
                out[tp] = value
                if value >= 0:
                    self._checkpoints[tp] = max(value, self._checkpoints.get(tp, value))
            return out

    def commit_detailed(self, offsets: Mapping[TopicPartition, int]
                        ) -> tuple[dict[TopicPartition, int], set[TopicPartition]]:
        """Commit what moved forward in one OffsetCommit; returns (written, partitions the broker refused)."""
        with self._lock:
            todo = {}
            for tp, value in sorted(offsets.items()):
                if value is None or value < 0:
                    continue
                last = self._checkpoints.get(tp)
                if last is not None and value <= last:
                    if value < last:
                        log.warning("not committing %s=%d for group %s to Kafka: below the committed %d", tp,
                                    value, self.group, last)
                    continue
                todo[tp] = value
            if not todo:
                return {}, set()
            pending = dict(todo)
            failed: set[TopicPartition] = set()
            for attempt in range(self.retries + 1):
                request = {KTP(tp.topic, tp.partition): OffsetAndMetadata(v, "", None) for tp, v in pending.items()}
                errors = self._with_retries("OffsetCommit",
                                            lambda r=request: self._client().alter_group_offsets(self.group, r))
                retry = {}
                for ktp, error in errors.items():
                    tp = TopicPartition(ktp.topic, ktp.partition)
                    if error.__name__ == "NoError":
                        continue
                    if _retriable(error) and attempt < self.retries:
                        retry[tp] = pending[tp]
                    else:
                        log.warning("the coordinator refused %s=%d for group %s: %s", tp, pending[tp],
                                    self.group, error.__name__)
                        failed.add(tp)
                if not retry:
                    break
                pending = retry
                runtime.sleep(self.backoff)
            written = {tp: v for tp, v in todo.items() if tp not in failed}
            for tp, value in written.items():
                self._checkpoints[tp] = value
        if self.trace is not None:
            for tp, value in written.items():
                self.trace.emit("offset_committed", topic=tp.topic, partition=tp.partition, offset=value,
                                store=self.store)
        return written, failed

    def commit(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Write the offsets that moved forward; returns what was written."""
        return self.commit_detailed(offsets)[0]

    def checkpoint(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._checkpoints.get(tp)

    def close(self) -> None:
        with self._lock:
            if self._admin is not None:
                admin, self._admin = self._admin, None
                try:
                    admin.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    log.debug("closing the admin client failed", exc_info=True)


class DualOffsetStore:
    """``dual.commit.enabled=true``: commit to Kafka, then to ZooKeeper for every partition Kafka took;
    read both and take the larger (Kafka 0.8.2's ``commitOffsets`` / ``fetchOffsets``). Each store keeps its
    own checkpoints, so a store that lags (written by consumers still on ZooKeeper) is caught up."""

    store = "dual"
    reads_with_claims = False  # half of it is the broker's (see KafkaOffsetStore)

    def __init__(self, kafka: KafkaOffsetStore, zookeeper: ZkOffsetStore) -> None:
        self.kafka = kafka
        self.zookeeper = zookeeper

    def fetch(self, tps: Iterable[TopicPartition], pipelined: bool = True) -> dict[TopicPartition, int]:
        tps = list(tps)
        in_kafka = self.kafka.fetch(tps)
        in_zk = self.zookeeper.fetch(tps, pipelined=pipelined)
        return {tp: max(in_kafka.get(tp, INVALID_OFFSET), in_zk.get(tp, INVALID_OFFSET)) for tp in tps}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        written, refused = self.kafka.commit_detailed(offsets)
        in_zk = self.zookeeper.commit({tp: v for tp, v in offsets.items() if tp not in refused})
        return {**in_zk, **written}

    def checkpoint(self, tp: TopicPartition) -> int | None:
        values = [v for v in (self.kafka.checkpoint(tp), self.zookeeper.checkpoint(tp)) if v is not None]
        return max(values) if values else None

    def close(self) -> None:
        self.kafka.close()


OffsetStore = ZkOffsetStore | KafkaOffsetStore | DualOffsetStore


def offset_store(config: ConsumerConfig, zookeeper: ZkOffsetStore, trace: TraceWriter | None,
                 bootstrap: Callable[[], str]) -> OffsetStore:
    """The one place that picks where a ZooKeeper group's offsets live (Kafka 0.8.2's rules), given the group's
    ZooKeeper store: ``offsets.storage=zookeeper`` → that store (``dual.commit.enabled`` is ignored, as 0.8.2
    did); ``kafka`` → the broker, plus ZooKeeper when ``dual.commit.enabled`` (its default with kafka storage)."""
    if not config.kafka_offsets:
        return zookeeper
    kafka = KafkaOffsetStore(bootstrap, zookeeper.group, config.client_id, trace,
                             retries=config.get("offsets.commit.max.retries"),
                             backoff_ms=config.get("offsets.channel.backoff.ms"),
                             request_timeout_ms=config.get("socket.timeout.ms"),
                             api_version=config.broker_api_version)
    return DualOffsetStore(kafka, zookeeper) if config.dual_commit else kafka
