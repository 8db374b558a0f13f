"""Where a consumer stands on each partition it owns: the "next to read" offsets a commit is made of.

Shared by both connectors (ZooKeeper mode and coordinator mode) and the fetcher; pure, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from zkconsumer.types import TopicPartition

#: Kafka's ``OffsetAndMetadata.InvalidOffset``: nothing committed yet, auto.offset.reset decides.
INVALID_OFFSET = -1


@dataclass
class PartitionProgress:
    """Where a stream stands on one owned partition. Offsets are "next to read" values.

    ``handed`` is past the last record a stream gave out, ``processed`` past the last one the caller finished
    with; which of the two a commit takes is the profile's choice (``committable``)."""

    tp: TopicPartition
    thread_id: str
    generation: int
    start: int
    handed: int | None = None
    processed: int | None = None

    def committable(self, processed_only: bool) -> int | None:
        return self.processed if processed_only else self.handed
