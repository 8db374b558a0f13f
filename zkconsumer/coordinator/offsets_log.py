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
from collections.abc import Iterable, Iterator, Mapping

from kafka.record.memory_records import MemoryRecordsBuilder

from zkconsumer import runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.manager import partition_for
from zkconsumer.coordinator.offsets_codec import (
    CodecError,
    CorruptBatch,
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
#: ``/config/topics/__consumer_offsets`` for Kafka's tools; the broker compacts it (log/cleaner.py) in segments of
#: its ``offsets.topic.segment.bytes``, whatever this says (docs/offsets-topic.md).
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}


def _now_ms() -> int:
    return int(runtime.time() * 1000)


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
        self._write_lock = runtime.Lock()  # append + fsync + cache update, in log order
        self.loaded_records = 0
        self.skipped_records = 0  # records that do not decode (and keys without a value), at the last load
        self.corrupt_batches = 0  # batches that failed their CRC or did not parse, at the last load

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

        Values are decoded only for the keys that survive. Every batch's CRC is checked. Bad input costs what it
        holds and nothing else, each named in a warning with its group, segment file and offset: a batch that fails
        its CRC or does not parse is skipped whole (its groups named where its keys can be read); a group metadata
        value that does not decode leaves that group without metadata (its members rejoin, its offsets stay); an
        offset value that does not decode falls back to the key's previous value, if any (re-reading some records
        is better than a reset). Kafka instead fails the partition's load; here one bad record would otherwise
        cost every group of its partition.
        """
        # Latest value per raw key first (bytes hash in C); offset keys v0 and v1 have the same fields, so a v0
        # key is counted under its v1 spelling.
        latest: dict[bytes, bytes | None] = {}
        count = skipped = 0
        corrupt: list[CorruptBatch] = []
        for p in range(self.num_partitions):
            plog = self.logs.get(OFFSETS_TOPIC, p)
            if plog is None:
                continue
            for _, raw_key, value in _records(plog, corrupt):
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
                earlier = self._undecodable(key, raw_key, e)
                if earlier is not None:
                    offsets.setdefault(key.group, {})[key.tp] = earlier
        with self._lock:
            self._offsets = offsets
            self._groups = groups
            self.loaded_records = count
            self.skipped_records = skipped
            self.corrupt_batches = len(corrupt)
        log.info("loaded %d records of %s: %d groups, %d committed offsets", count, OFFSETS_TOPIC,
                 len(set(offsets) | set(groups)), sum(len(o) for o in offsets.values()))

    def _undecodable(self, key: OffsetKey | GroupKey, raw_key: bytes, error: Exception) -> CommittedOffset | None:
        """Say where the latest value of ``key`` is and why it does not decode; for an offset, the key's previous
        value that decodes (None when there is none, or for group metadata). The rare path: a second read of the
        key's partition."""
        plog = self.logs.get(OFFSETS_TOPIC, partition_for(key.group, self.num_partitions))
        found: list[tuple[str, int, bytes | None]] = []
        if plog is not None:
            found = [(path, offset, value) for path, offset, k, value in _located_records(plog)
                     if k is not None and (k == raw_key or k[:2] == b"\x00\x00" and b"\x00\x01" + k[2:] == raw_key)]
        where = f"{found[-1][0]} at offset {found[-1][1]}" if found else "its partition"
        if isinstance(key, GroupKey):
            log.warning("%s: the metadata of group %s in %s does not decode (%s): skipped; the group is loaded "
                        "without members and its members rejoin", OFFSETS_TOPIC, key.group, where, error)
            return None
        for path, offset, value in reversed(found[:-1]):
            if value is None:
                break
            try:
                earlier = decode_offset_value(value)
            except (CodecError, UnicodeDecodeError):
                continue
            log.warning("%s: the offset of group %s for %s-%d in %s does not decode (%s): using the one committed "
                        "before it (%s offset %d: %d)", OFFSETS_TOPIC, key.group, key.topic, key.partition, where,
                        error, path, offset, earlier.offset)
            return earlier
        log.warning("%s: the offset of group %s for %s-%d in %s does not decode (%s), and none before it does: the "
                    "partition has no committed offset", OFFSETS_TOPIC, key.group, key.topic, key.partition, where,
                    error)
        return None

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


def _records(plog: PartitionLog, corrupt: list[CorruptBatch]) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    for _, offset, key, value in _located_records(plog, corrupt):
        yield offset, key, value


def _located_records(plog: PartitionLog, corrupt_seen: list[CorruptBatch] | None = None
                     ) -> Iterator[tuple[str, int, bytes | None, bytes | None]]:
    """(segment file, offset, key, value) of every record in ``plog``, segment by segment, CRCs checked; a batch
    that fails its CRC or does not parse is reported (segment, offsets, the groups its keys name) and skipped."""
    for seg in list(plog.segments):
        path = str(seg.log_path)

        def corrupt(batch: CorruptBatch, path: str = path) -> None:
            if corrupt_seen is not None:  # the load's pass reports; a second read for one key stays quiet
                corrupt_seen.append(batch)
                _report_corrupt(path, batch)

        position, size = 0, seg.size
        while position < size:
            data = os.pread(seg.log_fd, min(_READ_BYTES, size - position), position)
            whole = B.whole_batches(data)
            if whole == 0:  # one batch larger than a read
                data = os.pread(seg.log_fd, B.batch_size_at(data), position) if len(data) >= 12 else b""
                whole = len(data)
                if whole == 0:
                    return
            for offset, key, value in iter_records(data[:whole], corrupt):
                yield path, offset, key, value
            position += whole


def _report_corrupt(path: str, batch: CorruptBatch) -> None:
    groups = sorted(_groups_named(batch.data))
    log.warning("%s: skipping the batch at offsets %d-%d of %s: %s; groups whose records it held: %s",
                OFFSETS_TOPIC, batch.base_offset, batch.last_offset, path, batch.reason,
                ", ".join(groups) if groups else "none readable")


def _groups_named(batch: bytes) -> set[str]:
    """The groups a damaged batch's keys still name: each record's key read where it can be (best effort)."""
    found: set[str] = set()
    pos = B.HEADER_SIZE
    while pos < len(batch):
        try:
            length, p = B.read_varint(batch, pos)
            q = p + 1
            _, q = B.read_varint(batch, q)
            _, q = B.read_varint(batch, q)
            n, q = B.read_varint(batch, q)
            if 0 < n <= len(batch) - q:
                key = _decode_key_or_none(bytes(batch[q:q + n]), quiet=True)
                if key is not None:
                    found.add(key.group)
            if length <= 0:
                break
            pos = p + length
        except (IndexError, B.InvalidBatchError):
            break
    return found


def _decode_key_or_none(raw: bytes, quiet: bool = False) -> OffsetKey | GroupKey | None:
    try:
        return decode_key(raw)
    except (CodecError, UnicodeDecodeError) as e:
        if quiet:
            return None
        log.warning("%s: skipping records whose key %r does not decode: %s", OFFSETS_TOPIC, raw[:40], e)
        return None
