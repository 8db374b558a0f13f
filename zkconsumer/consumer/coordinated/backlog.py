"""Records a coordinator-mode member polled and could not queue yet: the poller must never block on a full stream
queue, or kafka-python's heartbeats and rebalances stop with it (poller.py)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping

from zkconsumer import runtime
from zkconsumer.consumer.progress import PartitionProgress
from zkconsumer.consumer.streams import KafkaStream, Queued
from zkconsumer.types import FetchedRecord, TopicPartition


class Backlog:
    """Per partition, the records polled and not yet in their stream's queue, in offset order, each tagged with the
    ownership generation it was polled under. A partition with a backlog is paused until it is drained.

    Not locked itself: every call is made under the member's state lock, with the ownership it is checked against.
    """

    def __init__(self) -> None:
        self._records: dict[TopicPartition, deque[Queued]] = {}

    def add(self, tp: TopicPartition, records: Iterable[FetchedRecord], generation: int) -> None:
        self._records.setdefault(tp, deque()).extend(Queued(r, generation) for r in records)

    def drain(self, owned: Mapping[TopicPartition, PartitionProgress], held: Callable[[TopicPartition], bool],
              stream_for: Callable[[TopicPartition, str], KafkaStream | None]) -> None:
        """Move what fits into the streams' queues without blocking: a full queue keeps the rest here. The records
        of a partition no longer owned (or being revoked) are dropped; those of a held one wait."""
        for tp, backlog in list(self._records.items()):
            progress = owned.get(tp)
            if progress is None or progress.generation < 0:
                del self._records[tp]
                continue
            if held(tp):
                continue
            stream = stream_for(tp, progress.thread_id)
            while backlog and stream is not None:
                try:
                    stream.queue.put_nowait(backlog[0])
                except runtime.Full:
                    break
                backlog.popleft()
            if not backlog:
                del self._records[tp]

    def drop(self, tp: TopicPartition) -> None:
        """Forget ``tp``'s records (stale: fetched before a seek or under an older ownership)."""
        self._records.pop(tp, None)

    def clear(self) -> None:
        self._records.clear()

    def __contains__(self, tp: object) -> bool:
        return tp in self._records
