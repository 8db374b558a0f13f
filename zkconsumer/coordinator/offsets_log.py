"""The ``__consumer_offsets`` topic: committed offsets and group metadata in the broker's own log, in Kafka's formats.

Records are keyed as Kafka 2.x keys them (GroupMetadataManager.scala), so Kafka's tools could read the topic:

- offset commit: key version 1 ``(group, topic, partition)``; value version 3 ``(offset, leader_epoch, metadata,
  commit_timestamp)``, or version 1 ``(offset, metadata, commit_timestamp, expire_timestamp)`` when the commit
  carried an explicit retention (OffsetCommit v2-v4), as Kafka 2.x chooses;
- group metadata: key version 2 ``(group)``; value version 3 ``(protocol_type, generation, protocol, leader,
  current_state_timestamp, members[member_id, group_instance_id, client_id, client_host, rebalance_timeout,
  session_timeout, subscription, assignment])``;
- a null value (tombstone) deletes the key.

A group's records go to partition ``Utils.abs(group.hashCode) % partitions``; every write is fsynced before the
OffsetCommit answer, so an acknowledged commit survives ``kill -9``. ``load()`` replays every partition, latest
value wins. The local log has no compaction: the topic grows by one record per commit, and a load reads it all
(100k commits load in about a second here); :meth:`OffsetsLog.expire` writes tombstones for expired offsets.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from ..assignors import TopicPartition
from ..broker import batches as B
from ..broker.storage import LogManager
from .store import CommittedOffset, GroupSnapshot, MemberSnapshot

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
GROUP_VALUE_VERSION = 3


# ----------------------------------------------------------------------------------------------- codec (pure)
class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def int16(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> _Writer:
        self.parts.append(struct.pack(">q", v))
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.int16(-1)
        data = v.encode("utf-8")
        self.parts.append(struct.pack(">h", len(data)) + data)
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.int32(-1)
        self.parts.append(struct.pack(">i", len(v)) + v)
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _unpack(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.data):
            raise ValueError("record shorter than its schema")
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return v

    def int16(self) -> int:
        return self._unpack(">h", 2)

    def int32(self) -> int:
        return self._unpack(">i", 4)

    def int64(self) -> int:
        return self._unpack(">q", 8)

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        v = bytes(self.data[self.pos:self.pos + n]).decode("utf-8")
        self.pos += n
        return v

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        v = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return v


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


def encode_offset_key(group: str, tp: TopicPartition) -> bytes:
    return _Writer().int16(OFFSET_KEY_VERSION).string(group).string(tp.topic).int32(tp.partition).done()


def encode_group_key(group: str) -> bytes:
    return _Writer().int16(GROUP_KEY_VERSION).string(group).done()


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.int32())
    if version == 2:
        return GroupKey(r.string() or "")
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(c: CommittedOffset) -> bytes:
    """Version 1 when the commit set an expiry (Kafka 2.x does the same), else version 3."""
    if c.expire_timestamp_ms >= 0:
        return (_Writer().int16(1).int64(c.offset).string(c.metadata).int64(c.commit_timestamp_ms)
                .int64(c.expire_timestamp_ms).done())
    return (_Writer().int16(3).int64(c.offset).int32(c.leader_epoch).string(c.metadata)
            .int64(c.commit_timestamp_ms).done())


def decode_offset_value(data: bytes) -> CommittedOffset:
    r = _Reader(data)
    version = r.int16()
    if version == 0:
        return CommittedOffset(r.int64(), r.string() or "", r.int64())
    if version == 1:
        offset, metadata, commit, expire = r.int64(), r.string() or "", r.int64(), r.int64()
        return CommittedOffset(offset, metadata, commit, expire)
    if version == 2:
        return CommittedOffset(r.int64(), r.string() or "", r.int64())
    if version == 3:
        offset, epoch, metadata, commit = r.int64(), r.int32(), r.string() or "", r.int64()
        return CommittedOffset(offset, metadata, commit, -1, epoch)
    raise ValueError(f"unknown offset commit value version {version}")


def encode_group_value(s: GroupSnapshot) -> bytes:
    w = (_Writer().int16(GROUP_VALUE_VERSION).string(s.protocol_type).int32(s.generation).string(s.protocol)
         .string(s.leader).int64(s.current_state_timestamp_ms).int32(len(s.members)))
    for m in s.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
         .int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment))
    return w.done()


def decode_group_value(data: bytes) -> GroupSnapshot:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise ValueError(f"unknown group metadata value version {version}")
    protocol_type, generation, protocol, leader = r.string() or "", r.int32(), r.string(), r.string()
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id, host = r.string() or "", r.string() or ""
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        members.append(MemberSnapshot(member_id, client_id, host, rebalance_timeout, session_timeout,
                                      r.bytes_() or b"", r.bytes_() or b"", instance))
    return GroupSnapshot(protocol_type, generation, protocol, leader, timestamp, tuple(members))


# -------------------------------------------------------------------------------------------- the store
def _now_ms() -> int:
    return int(time.time() * 1000)


class OffsetsLog:
    """An :class:`~zkconsumer.coordinator.store.OffsetStore` over ``__consumer_offsets`` in a LogManager."""

    def __init__(self, logs: LogManager, num_partitions: int = 50, retention_ms: int = 7 * 24 * 3600 * 1000) -> None:
        from .manager import partition_for

        self.logs = logs
        self.num_partitions = num_partitions
        self.retention_ms = retention_ms
        self._partition_for = partition_for
        self._lock = threading.Lock()
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._groups: dict[str, GroupSnapshot] = {}
        self.loaded_records = 0

    # ----------------------------------------------------------------------------------------- writing
    def _append(self, group: str, records: list[tuple[bytes, bytes | None]]) -> None:
        builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
        now = _now_ms()
        for key, value in records:
            builder.append(now, key, value)
        builder.close()
        data = builder.buffer()
        plog = self.logs.get_or_create(OFFSETS_TOPIC, self._partition_for(group, self.num_partitions))
        plog.append(B.parse_produced(data, max(len(data), 1 << 20)))
        plog.flush()  # an acknowledged commit must survive kill -9

    def load(self) -> None:
        offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        groups: dict[str, GroupSnapshot] = {}
        count = 0
        for p in range(self.num_partitions):
            plog = self.logs.get(OFFSETS_TOPIC, p)
            if plog is None:
                continue
            position = plog.log_start_offset
            while position < plog.log_end_offset:
                data = plog.read(position, 4 << 20, min_one=True)
                if not data:
                    break
                records = MemoryRecords(data)
                while (batch := records.next_batch()) is not None:
                    for rec in batch:
                        count += 1
                        position = rec.offset + 1
                        key = decode_key(bytes(rec.key))
                        if isinstance(key, OffsetKey):
                            tp = TopicPartition(key.topic, key.partition)
                            if rec.value is None:
                                offsets.get(key.group, {}).pop(tp, None)
                            else:
                                offsets.setdefault(key.group, {})[tp] = decode_offset_value(bytes(rec.value))
                        elif rec.value is None:
                            groups.pop(key.group, None)
                        else:
                            groups[key.group] = decode_group_value(bytes(rec.value))
        with self._lock:
            self._offsets = {g: o for g, o in offsets.items() if o}
            self._groups = groups
            self.loaded_records = count

    def commit(self, group: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        if not offsets:
            return
        self._append(group, [(encode_offset_key(group, tp), encode_offset_value(c)) for tp, c in offsets.items()])
        with self._lock:
            self._offsets.setdefault(group, {}).update(offsets)

    def fetch(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition,
                                                                                              CommittedOffset]:
        with self._lock:
            held = self._offsets.get(group, {})
            if partitions is None:
                return dict(held)
            return {tp: held[tp] for tp in partitions if tp in held}

    def delete_offsets(self, group: str, partitions: Iterable[TopicPartition] | None = None) -> None:
        with self._lock:
            held = self._offsets.get(group, {})
            gone = list(held) if partitions is None else [tp for tp in partitions if tp in held]
        if not gone:
            return
        self._append(group, [(encode_offset_key(group, tp), None) for tp in gone])
        with self._lock:
            for tp in gone:
                held.pop(tp, None)
            if not held:
                self._offsets.pop(group, None)

    def store_group(self, group: str, snapshot: GroupSnapshot | None) -> None:
        self._append(group, [(encode_group_key(group), None if snapshot is None else encode_group_value(snapshot))])
        with self._lock:
            if snapshot is None:
                self._groups.pop(group, None)
            else:
                self._groups[group] = snapshot

    def groups(self) -> dict[str, GroupSnapshot | None]:
        with self._lock:
            out: dict[str, GroupSnapshot | None] = {g: None for g in self._offsets}
            out.update(self._groups)
            return out

    # ------------------------------------------------------------------------------------------ expiry
    def expire(self, now_ms: int, empty_since_ms: Mapping[str, int | None]) -> dict[str, list[TopicPartition]]:
        """Kafka 2.1+'s rule: a group's offsets expire once it has been Empty for the retention period (its
        ``empty_since_ms``; a group the coordinator does not know counts from the commit); an explicit expiry
        timestamp (OffsetCommit v1-v4) wins. Tombstones are written; returns what expired."""
        expired: dict[str, list[TopicPartition]] = {}
        with self._lock:
            snapshot = {g: dict(o) for g, o in self._offsets.items()}
        for group, offsets in snapshot.items():
            if group in empty_since_ms and empty_since_ms[group] is None:
                continue  # the group has members: its offsets live on
            since = empty_since_ms.get(group)
            gone = []
            for tp, c in offsets.items():
                if c.expire_timestamp_ms >= 0:
                    if now_ms >= c.expire_timestamp_ms:
                        gone.append(tp)
                elif now_ms - (since if since is not None else c.commit_timestamp_ms) >= self.retention_ms:
                    gone.append(tp)
            if gone:
                self.delete_offsets(group, gone)
                expired[group] = gone
        return expired
