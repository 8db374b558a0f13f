"""The ``__consumer_offsets`` topic: committed offsets and group metadata in the broker's own log.

Records are written in Kafka 2.8's formats (offsets_codec.py), so Kafka's tools could read the topic. A group's
records go to partition ``Utils.abs(group.hashCode) % partitions`` as one v2 record batch per call, fsynced before
the call returns: an acknowledged commit survives ``kill -9`` of the broker and a crash of the machine.

``load()`` replays every partition, latest value per key wins, a tombstone (null value) deletes. The local log has no
compaction, so the topic grows by one record per committed partition; the load deduplicates by key before it
decodes values, which keeps it fast (100k commit records: 0.9 s on 2 cores shared at load 14). Formats,
expiry and what differs from Kafka: docs/offsets-topic.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping

from kafka.record.memory_records import MemoryRecordsBuilder

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.manager import partition_for
from zkconsumer.coordinator.offsets_codec import (
    CodecError,
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    iter_records,
    next_offset_after,
)
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemoryOffsetStore
from zkconsumer.errors import ZkConsumerError
from zkconsumer.log import batches as B
from zkconsumer.log.storage import LogManager, PartitionLog
from zkconsumer.zk.layout import OFFSETS_TOPIC

log = logging.getLogger(__name__)

DEFAULT_NUM_PARTITIONS = 50  # offsets.topic.num.partitions
DEFAULT_RETENTION_MS = 10080 * 60_000  # offsets.retention.minutes, Kafka 2.0+'s 7 days
_READ_BYTES = 4 << 20
#: The topic's configuration as Kafka creates it (GroupMetadataManager.offsetsTopicConfigs), written to
#: ``/config/topics/__consumer_offsets`` for Kafka's tools; our log does not compact (docs/offsets-topic.md).
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}


def _now_ms() -> int:
    return int(time.time() * 1000)


class OffsetsAppendFailed(ZkConsumerError, OSError):
    """The log refused a batch of the coordinator's own records: an ``OSError`` still, as a failed write is."""


class OffsetsLog(MemoryOffsetStore):
    """An :class:`~zkconsumer.coordinator.store.OffsetStore` over ``__consumer_offsets`` in a LogManager.

    It answers from the in-memory store it extends (``fetch``, ``groups``), its cache: every change is appended
    to the log first, then applied to the cache. Writes are serialised by one lock held from the append to the
    cache update, so the order of the records in the log is the order the cache saw: what ``fetch`` answers before
    a restart is what ``load`` rebuilds after it.
    """

    def __init__(self, logs: LogManager, num_partitions: int = DEFAULT_NUM_PARTITIONS,
                 retention_ms: int = DEFAULT_RETENTION_MS) -> None:
        super().__init__()
        self.logs = logs
        self.num_partitions = num_partitions
        self.retention_ms = retention_ms
        self._write_lock = threading.Lock()  # append + fsync + cache update, in log order
        self.loaded_records = 0
        self.skipped_records = 0

    # ----------------------------------------------------------------------------------------- writing
    def _append(self, group: str, records: list[tuple[bytes, bytes | None]]) -> None:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
        now = _now_ms()
        for key, value in records:
            builder.append(now, key, value)
        builder.close()
        data = builder.buffer()
        plog = self.logs.get_or_create(OFFSETS_TOPIC, partition_for(group, self.num_partitions))
        # We built the batch ourselves: no CRC check, and no size limit (Kafka's coordinator has its own).
        result = plog.append(B.parse_produced(data, len(data), verify_crc=False))
        if result.error:
            raise OffsetsAppendFailed(f"append to {plog} failed with error {result.error}")
        if self.logs.config.flush_interval_ms != 0:  # 0: append() has fsynced already
            _sync(plog)

    def commit(self, group: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        if not offsets:
            return
        with self._write_lock:
            self._append(group, [(encode_offset_key(group, tp), encode_offset_value(c))
                                 for tp, c in offsets.items()])
            super().commit(group, offsets)

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._write_lock:
            gone = self._held(group, partitions)
            if not gone:
                return
            self._append(group, [(encode_offset_key(group, tp), None) for tp in gone])
            super().delete_offsets(group, gone)

    def store_group(self, group: str, snapshot: GroupSnapshot | None) -> None:
        with self._write_lock:
            value = None if snapshot is None else encode_group_value(snapshot)
            self._append(group, [(encode_group_key(group), value)])
            super().store_group(group, snapshot)

    # ----------------------------------------------------------------------------------------- reading
    def load(self) -> None:
        """Replay the topic: latest value per key wins, tombstones delete.

        Values are decoded only for the keys that survive. A record that does not decode is logged and skipped
        (Kafka fails the partition's load instead; here only the coordinator writes the topic, so such a record
        can only come from a foreign tool, and refusing to start would lose every group for it).
        """
        # Latest value per raw key first (bytes hash in C); offset keys v0 and v1 have the same fields, so a v0
        # key is counted under its v1 spelling.
        latest: dict[bytes, bytes | None] = {}
        count = skipped = 0
        for p in range(self.num_partitions):
            plog = self.logs.get(OFFSETS_TOPIC, p)
            if plog is None:
                continue
            for _, raw_key, value in _records(plog):
                count += 1
                if raw_key is None:
                    skipped += 1
                elif raw_key[:2] == b"\x00\x00":
                    latest[b"\x00\x01" + raw_key[2:]] = value
                else:
                    latest[raw_key] = value
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        groups: dict[str, GroupSnapshot] = {}
        for raw_key, value in latest.items():
            if value is None:
                continue
            key = _decode_key_or_none(raw_key)
            if key is None:
                skipped += 1
                continue
            try:
                if isinstance(key, OffsetKey):
                    offsets.setdefault(key.group, {})[key.tp] = decode_offset_value(value)
                else:
                    groups[key.group] = decode_group_value(value)
            except (CodecError, UnicodeDecodeError) as e:
                skipped += 1
                log.warning("%s: skipping the value of %s that does not decode: %s", OFFSETS_TOPIC, key, e)
        with self._lock:
            self._offsets = offsets
            self._groups = groups
            self.loaded_records = count
            self.skipped_records = skipped
        log.info("loaded %d records of %s: %d groups, %d committed offsets", count, OFFSETS_TOPIC,
                 len(set(offsets) | set(groups)), sum(len(o) for o in offsets.values()))

    # ------------------------------------------------------------------------------------------ expiry
    def expire(self, now_ms: int, empty_since_ms: Mapping[str, int | None],
               subscribed_topics: Mapping[str, frozenset[str]] | None = None) -> dict[str, list[TopicPartition]]:
        """Delete (with tombstones) the offsets Kafka 2.1+'s GroupMetadata.removeExpiredOffsets would.

        ``empty_since_ms`` is the coordinator's view of each group:

        * an int: the group is Empty since then (its current state timestamp): every offset expires once the group
          has been Empty for the retention period;
        * None: the group has members: nothing expires, except (KIP-496, Kafka 2.4+) in a Stable "consumer" group
          whose ``subscribed_topics`` are given: offsets of other topics expire the retention period after their
          commit;
        * absent: a group without a protocol (offsets committed by simple consumers or tools only) or unknown to
          the coordinator: each offset expires the retention period after its own commit.

        An offset committed with an explicit expire timestamp (OffsetCommit v1-v4, value v1) expires at that time
        instead, under the same group condition. Returns what expired.
        """
        expired: dict[str, list[TopicPartition]] = {}
        with self._lock:
            held = {g: dict(o) for g, o in self._offsets.items()}
        subscribed_topics = subscribed_topics or {}
        for group, offsets in held.items():
            since = empty_since_ms.get(group)
            if group in empty_since_ms and since is None:  # members
                if group not in subscribed_topics:
                    continue
                topics = subscribed_topics[group]
                offsets = {tp: c for tp, c in offsets.items() if tp.topic not in topics}
            gone = [tp for tp, c in offsets.items() if _expired(c, since, now_ms, self.retention_ms)]
            if gone:
                self.delete_offsets(group, gone)
                expired[group] = gone
        return expired


def _expired(c: CommittedOffset, empty_since_ms: int | None, now_ms: int, retention_ms: int) -> bool:
    if c.expire_timestamp_ms >= 0:
        return now_ms >= c.expire_timestamp_ms
    base = empty_since_ms if empty_since_ms is not None else c.commit_timestamp_ms
    return now_ms - base >= retention_ms


def _sync(plog: PartitionLog) -> None:
    """fdatasync the segment our append went to. PartitionLog.flush() may return while another thread's fsync of
    the same data is still running (it clears its dirty flag first); an acknowledged commit must be on disk. The
    index is left to the checkpoint: recovery trusts no index entry past the checkpoint and re-scans the log."""
    with plog.lock:
        fd = plog.active.log_fd  # a roll since our append fsynced the segment it closed
        os.fdatasync(fd)  # under the lock: a concurrent close must not recycle the descriptor meanwhile


def _records(plog: PartitionLog):
    position = plog.log_start_offset
    end = plog.log_end_offset
    while position < end:
        data = plog.read(position, _READ_BYTES, min_one=True)
        if not data:
            return
        for offset, key, value in iter_records(data):
            if offset >= position:  # a read starts at the batch holding ``position``
                yield offset, key, value
        following = next_offset_after(data)
        if following <= position:  # nothing whole in the read: never loop on it
            return
        position = following


def _decode_key_or_none(raw: bytes) -> OffsetKey | GroupKey | None:
    try:
        return decode_key(raw)
    except (CodecError, UnicodeDecodeError) as e:
        log.warning("%s: skipping records whose key %r does not decode: %s", OFFSETS_TOPIC, raw[:40], e)
        return None
