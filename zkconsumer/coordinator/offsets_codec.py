"""The record formats of ``__consumer_offsets``, as Kafka 2.8 defines them (pure: bytes in, values out).

Kafka 2.8 generates these from ``core/src/main/resources/common/message/{OffsetCommitKey,OffsetCommitValue,
GroupMetadataKey,GroupMetadataValue}.json``: every key and value starts with an int16 schema version, followed by
the fields of that version in the classic (non-flexible) encoding: int16/int32/int64 big-endian, a string as an
int16 length and UTF-8 bytes (length -1 for null), bytes as an int32 length and the bytes.

* OffsetCommitKey v0/v1 (same fields): ``group, topic, partition:int32``.
* OffsetCommitValue v0: ``offset, metadata, commit_timestamp``; v1: ``... , expire_timestamp``; v2: as v0;
  v3: ``offset, leader_epoch:int32, metadata, commit_timestamp``. Kafka 2.1+ writes v1 when the commit carried an
  explicit retention (an expire timestamp), else v3 (GroupMetadataManager.offsetCommitValue); so do we.
* GroupMetadataKey v2: ``group``.
* GroupMetadataValue v0: ``protocol_type, generation:int32, protocol?, leader?, members[member_id, client_id,
  client_host, session_timeout:int32, subscription:bytes, assignment:bytes]``; v1 adds ``rebalance_timeout``
  before ``session_timeout``; v2 adds ``current_state_timestamp:int64`` before the members; v3 adds
  ``group_instance_id?`` after ``member_id``. We write v3, as Kafka 2.3+ does.
* A record with a null value is a tombstone: the key is deleted.

:func:`iter_records` walks the stored v2 record batches themselves, because loading the topic means reading every
record ever written and kafka-python's generic reader costs several times more per record.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemberSnapshot
from zkconsumer.errors import ZkConsumerError

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_V3_HEAD = struct.Struct(">qih")  # offset value v3: offset, leader epoch, metadata length


class CodecError(ZkConsumerError, ValueError):
    """Bytes that are not a record of ``__consumer_offsets`` (unknown version, or shorter than its schema)."""


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class GroupKey:
    group: str


# --------------------------------------------------------------------------------------------- primitives
class _Writer:
    def __init__(self, version: int) -> None:
        self.parts: list[bytes] = [_I16.pack(version)]

    def int16(self, v: int) -> _Writer:
        self.parts.append(_I16.pack(v))
        return self

    def int32(self, v: int) -> _Writer:
        self.parts.append(_I32.pack(v))
        return self

    def int64(self, v: int) -> _Writer:
        self.parts.append(_I64.pack(v))
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.int16(-1)
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise CodecError(f"a string of {len(data)} bytes does not fit Kafka's int16 length")
        self.parts.append(_I16.pack(len(data)) + data)
        return self

    def bytes_(self, v: bytes | None) -> _Writer:
        if v is None:
            return self.int32(-1)
        self.parts.append(_I32.pack(len(v)) + v)
        return self

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise CodecError("record shorter than its schema")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return v

    def int16(self) -> int:
        return self._take(_I16)

    def int32(self) -> int:
        return self._take(_I32)

    def int64(self) -> int:
        return self._take(_I64)

    def _raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CodecError("record shorter than its schema")
        v = self.data[self.pos:self.pos + n]
        self.pos += n
        return bytes(v)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._raw(n).decode("utf-8")

    def string(self) -> str:
        # Kafka writes "" for absent non-nullable strings; a null there (which Kafka would reject) reads as "".
        return self.nullable_string() or ""

    def bytes_(self) -> bytes:
        n = self.int32()
        return b"" if n < 0 else self._raw(n)


# --------------------------------------------------------------------------------------------------- keys
def encode_offset_key(group: str, tp: TopicPartition) -> bytes:
    return _Writer(OFFSET_KEY_VERSION).string(group).string(tp.topic).int32(tp.partition).done()


def encode_group_key(group: str) -> bytes:
    return _Writer(GROUP_KEY_VERSION).string(group).done()


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    if len(data) >= 4 and data[0] == 0 and data[1] in (0, 1):  # offset key, the common case, without a reader
        n = _I16.unpack_from(data, 2)[0]
        if 0 <= n and len(data) >= 6 + n:
            m = _I16.unpack_from(data, 4 + n)[0]
            if 0 <= m and len(data) == 10 + n + m:
                group, topic = data[4:4 + n].decode(), data[6 + n:6 + n + m].decode()
                return OffsetKey(group, topic, _I32.unpack_from(data, 6 + n + m)[0])
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string())
    raise CodecError(f"unknown __consumer_offsets key version {version}")


# ------------------------------------------------------------------------------------------------- values
def encode_offset_value(c: CommittedOffset) -> bytes:
    """Version 1 when the commit set an expiry (Kafka 2.x does the same), else version 3."""
    if c.expire_timestamp_ms >= 0:
        return (_Writer(OFFSET_VALUE_VERSION_WITH_EXPIRY).int64(c.offset).string(c.metadata)
                .int64(c.commit_timestamp_ms).int64(c.expire_timestamp_ms).done())
    return (_Writer(OFFSET_VALUE_VERSION).int64(c.offset).int32(c.leader_epoch).string(c.metadata)
            .int64(c.commit_timestamp_ms).done())


def decode_offset_value(data: bytes) -> CommittedOffset:
    if len(data) >= 16 and data[0] == 0 and data[1] == 3:  # what we write without an expiry: no reader
        offset, epoch, n = _V3_HEAD.unpack_from(data, 2)
        if 0 <= n and len(data) == 24 + n:
            return CommittedOffset(offset, data[16:16 + n].decode(), _I64.unpack_from(data, 16 + n)[0], -1, epoch)
    r = _Reader(data)
    version = r.int16()
    if version in (0, 2):
        return CommittedOffset(r.int64(), r.string(), r.int64())
    if version == 1:
        offset, metadata, commit, expire = r.int64(), r.string(), r.int64(), r.int64()
        return CommittedOffset(offset, metadata, commit, expire)
    if version == 3:
        offset, epoch, metadata, commit = r.int64(), r.int32(), r.string(), r.int64()
        return CommittedOffset(offset, metadata, commit, -1, epoch)
    raise CodecError(f"unknown offset commit value version {version}")


def encode_group_value(s: GroupSnapshot) -> bytes:
    w = (_Writer(GROUP_VALUE_VERSION).string(s.protocol_type).int32(s.generation).string(s.protocol)
         .string(s.leader).int64(s.current_state_timestamp_ms).int32(len(s.members)))
    for m in s.members:
        (w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
         .int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment))
    return w.done()


def decode_group_value(data: bytes) -> GroupSnapshot:
    r = _Reader(data)
    version = r.int16()
    if not 0 <= version <= 3:
        raise CodecError(f"unknown group metadata value version {version}")
    protocol_type, generation, protocol, leader = r.string(), r.int32(), r.nullable_string(), r.nullable_string()
    timestamp = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id, host = r.string(), r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        if rebalance_timeout is None:  # v0 had none: Kafka's reader uses the session timeout
            rebalance_timeout = session_timeout
        members.append(MemberSnapshot(member_id, client_id, host, rebalance_timeout, session_timeout,
                                      r.bytes_(), r.bytes_(), instance))
    return GroupSnapshot(protocol_type, generation, protocol, leader, timestamp, tuple(members))


# ------------------------------------------------------------------------------------------- record batches
_BATCH_HEADER = DefaultRecordBatch.HEADER_STRUCT  # baseOffset .. recordCount: 61 bytes, message format v2
_COMPRESSION_MASK = 0x07
_CRC_START = DefaultRecordBatch.ATTRIBUTES_OFFSET  # the CRC covers attributes .. end of batch


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (Kafka's record fields) at ``pos``: (value, next position)."""
    b = buf[pos]
    if b < 0x80:  # one byte: the common case for every length and delta here
        return (b >> 1) ^ -(b & 1), pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos + 1
        shift += 7


class CorruptBatch(NamedTuple):
    """A batch of a log read that fails its CRC or does not parse: what a load reports and skips."""

    base_offset: int
    last_offset: int
    reason: str
    data: bytes


def iter_records(data: bytes, on_corrupt: Callable[[CorruptBatch], None] | None = None
                 ) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in ``data``, whole v2 batches back to back (a log read).

    Uncompressed batches are parsed here; a compressed one (which we never write, but a copied Kafka log could
    hold) goes through kafka-python. Headers are skipped. A truncated trailing batch is ignored, as a log read may
    end inside one. With ``on_corrupt``, each batch's CRC is checked first, and a batch that fails it, or whose
    records do not parse, is handed to ``on_corrupt`` and none of its records is yielded; without it such a batch
    raises.
    """
    size = len(data)
    pos = 0
    while pos + _BATCH_HEADER.size <= size:
        (base, length, _, magic, crc, attributes, last_delta, _, _, _, _, _,
         count) = _BATCH_HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if end > size:
            return
        if magic != 2:
            raise CodecError(f"message format v{magic} in __consumer_offsets (only v2 is written)")
        if on_corrupt is not None:
            batch = bytes(data[pos:end])
            if calc_crc32c(batch[_CRC_START:]) != crc:
                on_corrupt(CorruptBatch(base, base + last_delta, "CRC mismatch", batch))
                pos = end
                continue
            try:
                records = list(_batch_records(data, pos, end, base, attributes, count))
            except (IndexError, CodecError, ValueError) as e:
                on_corrupt(CorruptBatch(base, base + last_delta, f"records do not parse ({e or type(e).__name__})",
                                        batch))
                pos = end
                continue
            yield from records
        else:
            yield from _batch_records(data, pos, end, base, attributes, count)
        pos = end


def _batch_records(data: bytes, pos: int, end: int, base: int, attributes: int, count: int
                   ) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """The records of the batch at ``data[pos:end]``."""
    if attributes & _COMPRESSION_MASK:
        for batch in MemoryRecords(bytes(data[pos:end])):
            for rec in batch:
                yield rec.offset, rec.key, rec.value
        return
    p = pos + _BATCH_HEADER.size
    for _ in range(count):
        # Record: length, attributes:int8, timestampDelta, offsetDelta, key, value, headers (varints are
        # zig-zag; one byte is the common case, inlined). Headers are skipped through the record length.
        b = data[p]
        if b < 0x80:
            length, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            length, p = _varint(data, p)
        following = p + length
        p += 1
        if data[p] < 0x80:
            p += 1
        else:
            _, p = _varint(data, p)
        b = data[p]
        if b < 0x80:
            delta, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            delta, p = _varint(data, p)
        b = data[p]
        if b < 0x80:
            n, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            n, p = _varint(data, p)
        if n < 0:
            key = None
        else:
            key, p = data[p:p + n], p + n
        b = data[p]
        if b < 0x80:
            n, p = (b >> 1) ^ -(b & 1), p + 1
        else:
            n, p = _varint(data, p)
        if n < 0:
            value = None
        else:
            value, p = data[p:p + n], p + n
        if p > following or following > end:
            raise CodecError(f"a record at offset {base + delta} runs past its length")
        yield base + delta, key, value
        p = following
    if p != end:
        raise CodecError(f"{end - p} bytes after the batch's {count} records")
