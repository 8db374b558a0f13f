"""What every zkconsumer connector shares, whatever coordinates its group: the streams the application reads, the
per-partition progress a commit is made of, and the context-manager surface.

:class:`~zkconsumer.consumer.zookeeper.connector.ZookeeperConsumerConnector` (the 0.8 group in ZooKeeper) and
:class:`~zkconsumer.consumer.coordinated.connector.CoordinatorConsumerConnector` (a broker's group coordinator)
are two drivers of this one surface, as aiokafka's one consumer runs over a pluggable coordinator: the
application code (``for record in stream``, ``commit_offsets()``) is the same in both modes, and a migrating
member switches from one to the other under the same consumer id.
"""

from __future__ import annotations

from collections.abc import Mapping

from zkconsumer import runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.progress import PartitionProgress
from zkconsumer.consumer.streams import KafkaStream, Queued
from zkconsumer.errors import IllegalArgument, MessageStreamsExist
from zkconsumer.trace import TraceWriter
from zkconsumer.types import FetchedRecord
from zkconsumer.zk import layout
from zkconsumer.zk.layout import TopicFilter


class ConsumerBase:
    """The streams and progress half of a connector. Subclasses subscribe, own partitions and commit."""

    config: ConsumerConfig
    trace: TraceWriter
    #: set while records may be handed out (each connector decides when it clears)
    deliverable: runtime.Event
    #: Whether a partition being released (a negative generation: its queued records are stale) still counts in
    #: :meth:`owned_partitions`. In ZooKeeper mode it does until its owner node is deleted (the rebalancer releases
    #: the nodes of what that lists); a coordinator-mode member stops counting it at the revocation.
    releasing_counts_as_owned = True

    def _init_streams(self) -> None:
        """Called by a subclass's ``__init__`` before anything else touches streams or progress."""
        self.state_lock = runtime.RLock()
        self.owned: dict[TopicPartition, PartitionProgress] = {}
        self._streams_created = False
        self.topic_filter: TopicFilter | None = None
        self._static_streams: dict[str, list[KafkaStream]] = {}
        self._wildcard_streams: list[KafkaStream] = []

    # ---------------------------------------------------------------------------------------- the streams
    def _new_static_streams(self, topic_count: Mapping[str, int]) -> dict[str, list[KafkaStream]]:
        """Static subscription: check ``topic_count`` (topic → streams) and make its streams, once per connector."""
        self._claim_streams_creation()
        for topic, n in topic_count.items():
            layout.validate_topic(topic)
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise IllegalArgument(f"stream count for {topic} must be an integer >= 1, got {n!r}")
        self._static_streams = {t: [KafkaStream(self, i, self._queue_size()) for i in range(n)]
                                for t, n in topic_count.items()}
        return self._static_streams

    def _new_wildcard_streams(self, topic_filter: TopicFilter | str, num_streams: int
                              ) -> tuple[TopicFilter, list[KafkaStream]]:
        """Wildcard subscription: ``num_streams`` streams over every topic ``topic_filter`` (a regex: a whitelist)
        matches; returns the filter and the streams."""
        self._claim_streams_creation()
        if isinstance(topic_filter, str):
            topic_filter = layout.whitelist(topic_filter)
        if num_streams < 1:
            raise IllegalArgument("num_streams must be >= 1")
        self.topic_filter = topic_filter
        self._wildcard_streams = [KafkaStream(self, i, self._queue_size()) for i in range(num_streams)]
        return topic_filter, self._wildcard_streams

    def _claim_streams_creation(self) -> None:
        if self._streams_created:  # Kafka's MessageStreamsExistException
            raise MessageStreamsExist(f"{type(self).__name__} can create message streams at most once")
        self._streams_created = True

    def _queue_size(self) -> int:
        """Records a stream buffers: ``queued.max.message.chunks`` chunks of 500."""
        return max(1, self.config.get("queued.max.message.chunks")) * 500

    def all_streams(self) -> list[KafkaStream]:
        return self._wildcard_streams + [s for streams in self._static_streams.values() for s in streams]

    def stream_for(self, tp: TopicPartition, thread_id: str) -> KafkaStream | None:
        """The stream a consumer thread id (``<consumer id>-<n>``) feeds, for a partition of ``tp.topic``."""
        index = int(thread_id.rsplit("-", 1)[1])
        if self.topic_filter is not None:
            return self._wildcard_streams[index] if index < len(self._wildcard_streams) else None
        streams = self._static_streams.get(tp.topic, [])
        return streams[index] if index < len(streams) else None

    @property
    def consumer_timeout_ms(self) -> int:
        """What a KafkaStream waits for a record before raising ConsumerTimeout."""
        return self.config.consumer_timeout_ms

    # ------------------------------------------------------------------------------------------- progress
    def mark_processed(self, record: FetchedRecord, generation: int) -> None:
        """The application is done with ``record``: its offset + 1 becomes committable (same generation only: a
        record handed out before a rebalance does not move the progress of a partition owned again since)."""
        with self.state_lock:
            progress = self.owned.get(TopicPartition(record.topic, record.partition))
            if progress is not None and progress.generation == generation:
                progress.processed = max(progress.processed or 0, record.offset + 1)

    def owned_partitions(self) -> dict[TopicPartition, str]:
        """Partition → the consumer thread id it is dealt to."""
        with self.state_lock:
            return {tp: p.thread_id for tp, p in self.owned.items()
                    if p.generation > 0 or self.releasing_counts_as_owned}

    # ----------------------------------------------------------------------------------------- delivery
    def hand_out(self, item: Queued, stream: KafkaStream) -> bool:
        """Stream thread: atomically check the record is still ours and record that it was handed out."""
        rec = item.record
        tp = TopicPartition(rec.topic, rec.partition)
        with self.state_lock:
            progress = self.owned.get(tp)
            if progress is None or progress.generation < 0 or progress.generation != item.generation:
                return False  # released, being released, or fetched for an earlier ownership
            if progress.handed is not None and rec.offset < progress.handed:
                return False  # a re-fetch of something already handed out
            progress.handed = rec.offset + 1
            thread = progress.thread_id
        self.trace.emit("record_delivered", topic=rec.topic, partition=rec.partition, offset=rec.offset,
                        thread=thread)
        return True

    def may_hand_out(self) -> bool:
        """Whether a stream may hand out a record right now (checked just before each one)."""
        return self.deliverable.is_set()

    def await_deliverable(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for :meth:`may_hand_out` to hold (a stream that may not hand out waits
        here instead of spinning)."""
        self.deliverable.wait(timeout)

    # ------------------------------------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
