"""Record batches (message format v2) as the broker handles them: validated once, then kept as opaque bytes.

Like Kafka, the broker stores the batches a producer sent, byte for byte, except for the base offset it
assigns; compression, headers and timestamps pass through untouched, and a fetch returns the stored bytes. The
header is read with kafka-python's :class:`DefaultRecordBatch` layout; only records of a single batch are ever
decoded (to answer a ListOffsets by timestamp).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from zkconsumer.errors import KafkaCode, ZkConsumerError

HEADER = DefaultRecordBatch.HEADER_STRUCT  # baseOffset .. recordCount, 61 bytes
HEADER_SIZE = HEADER.size
LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32: the bytes not counted in batchLength
CRC_START = DefaultRecordBatch.ATTRIBUTES_OFFSET  # the CRC covers attributes .. end of batch
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_MAGIC_AT = 16  # the magic byte sits at the same place in every message format
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class InvalidBatchError(ZkConsumerError, ValueError):
    """A produced batch the log must not accept; ``code`` is the Kafka error to answer with."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code




@dataclass
class ProducedBatch:
    """One validated batch from a Produce request; ``data`` is a private copy whose base offset gets patched."""

    data: bytearray
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    @property
    def record_count(self) -> int:
        return self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        return (self.base_sequence + self.last_offset_delta) % 2**31 if self.base_sequence >= 0 else -1

    def assign_base_offset(self, offset: int) -> None:
        struct.pack_into(">q", self.data, 0, offset)


def parse_produced(records: bytes | bytearray | memoryview | None, max_batch_bytes: int,
                   verify_crc: bool = True) -> list[ProducedBatch]:
    """Split and validate the ``records`` of one partition of a Produce request.

    Kafka requires message format v2 from Produce v3 on (older formats → INVALID_RECORD), whole batches
    (a partial one → CORRUPT_MESSAGE) and no transactional or control batches here (this broker has no
    transaction coordinator).
    """
    if not records:
        raise InvalidBatchError("produce request without records", KafkaCode.INVALID_RECORD)
    buf = memoryview(records)
    out: list[ProducedBatch] = []
    pos = 0
    while pos < len(buf):
        if len(buf) - pos <= _MAGIC_AT:
            raise InvalidBatchError(f"truncated batch header at byte {pos}", KafkaCode.CORRUPT_MESSAGE)
        if buf[pos + _MAGIC_AT] != 2:
            raise InvalidBatchError(f"message format v{buf[pos + _MAGIC_AT]} is not accepted (v2 only)",
                                    KafkaCode.INVALID_RECORD)
        if len(buf) - pos < HEADER_SIZE:
            raise InvalidBatchError(f"truncated batch header at byte {pos}", KafkaCode.CORRUPT_MESSAGE)
        _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        size = LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > len(buf):
            raise InvalidBatchError(f"batch length {length} at byte {pos} does not fit the request",
                                    KafkaCode.CORRUPT_MESSAGE)
        if size > max_batch_bytes:
            raise InvalidBatchError(f"batch of {size} bytes is larger than the limit {max_batch_bytes}",
                                    KafkaCode.MESSAGE_TOO_LARGE)
        (_, _, _, _, crc, attributes, last_delta, first_ts, max_ts, pid, epoch, base_seq,
         count) = HEADER.unpack_from(buf, pos)
        if attributes & (_TRANSACTIONAL | _CONTROL):
            raise InvalidBatchError("transactional and control batches are not supported", KafkaCode.INVALID_RECORD)
        if last_delta < 0 or count < 0 or (count and count != last_delta + 1):
            raise InvalidBatchError(f"record count {count} does not match last offset delta {last_delta}",
                                    KafkaCode.INVALID_RECORD)
        if verify_crc and calc_crc32c(buf[pos + CRC_START:pos + size]) != crc:
            raise InvalidBatchError(f"batch CRC mismatch at byte {pos}", KafkaCode.CORRUPT_MESSAGE)
        out.append(ProducedBatch(bytearray(buf[pos:pos + size]), last_delta, first_ts, max_ts, pid, epoch,
                                 base_seq))
        pos += size
    return out


@dataclass(frozen=True)
class StoredBatch:
    """The header facts of a batch in a segment file, as :func:`scan` finds them."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    #: False for a batch kept in place though its CRC fails (see :func:`scan`'s ``gaps``).
    crc_ok: bool = True

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        delta = self.last_offset - self.base_offset
        return (self.base_sequence + delta) % 2**31 if self.base_sequence >= 0 else -1


@dataclass
class ScanEnd:
    """Where and why :func:`scan` stopped; ``reason`` is empty when it reached ``end`` cleanly."""

    position: int
    reason: str = ""


def scan(fd: int, start: int, end: int, expected_offset: int | None, verify_crc: bool, result: ScanEnd,
         chunk_bytes: int = 1 << 20, gaps: bool = False) -> Iterator[StoredBatch]:
    """Yield the batches stored in ``fd`` between byte ``start`` and ``end``, checking them as recovery must.

    A batch is accepted when it is whole, has format v2, a sane length, the base offset that follows the
    previous batch (offsets in our logs are contiguous, so garbage is caught even without a CRC) and, with
    ``verify_crc``, a matching CRC. The first bad batch stops the scan; ``result`` then says where and why. With
    ``gaps`` (a compacted log, whose cleaning drops whole batches) a base offset may also be past the expected one,
    and a batch whose CRC fails but which a valid batch follows is yielded with ``crc_ok=False`` instead of stopping
    the scan: damage in the middle of the log, not a torn tail, which costs that batch's keys and not every later
    key (``__consumer_offsets``' loader skips it and names its groups).
    """
    pos = start
    buf = b""
    buf_start = start
    while pos < end:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf = os.pread(fd, max(chunk_bytes, HEADER_SIZE), pos)
            buf_start, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                result.position, result.reason = pos, f"{end - pos} bytes too short for a batch header"
                return
        (base, length, _, magic, crc, _, last_delta, _, max_ts, pid, epoch, base_seq,
         _) = HEADER.unpack_from(buf, rel)
        size = LOG_OVERHEAD + length
        if magic != 2 or length < HEADER_SIZE - LOG_OVERHEAD or last_delta < 0:
            result.position, result.reason = pos, f"no valid batch header (magic {magic}, length {length})"
            return
        if pos + size > end:
            result.position, result.reason = pos, f"batch of {size} bytes extends past the end of the file"
            return
        if expected_offset is not None and base != expected_offset and not (gaps and base > expected_offset):
            result.position, result.reason = pos, f"base offset {base} where {expected_offset} was expected"
            return
        if verify_crc:
            if len(buf) - rel < size:
                buf = os.pread(fd, max(chunk_bytes, size), pos)
                buf_start, rel = pos, 0
            if calc_crc32c(memoryview(buf)[rel + CRC_START:rel + size]) != crc:
                if not (gaps and _valid_header_at(fd, pos + size, end, base + last_delta + 1)):
                    result.position, result.reason = pos, "CRC mismatch"
                    return
                yield StoredBatch(pos, size, base, base + last_delta, max_ts, pid, epoch, base_seq, crc_ok=False)
                expected_offset = base + last_delta + 1
                pos += size
                continue
        yield StoredBatch(pos, size, base, base + last_delta, max_ts, pid, epoch, base_seq)
        expected_offset = base + last_delta + 1
        pos += size
    result.position = pos


def _valid_header_at(fd: int, pos: int, end: int, min_offset: int) -> bool:
    """Whether a whole batch with a plausible v2 header and a base offset of at least ``min_offset`` starts at
    ``pos``."""
    if pos + HEADER_SIZE > end:
        return False
    base, length, _, magic, _, _, last_delta, *_ = HEADER.unpack_from(os.pread(fd, HEADER_SIZE, pos))
    return (magic == 2 and length >= HEADER_SIZE - LOG_OVERHEAD and last_delta >= 0 and base >= min_offset
            and pos + LOG_OVERHEAD + length <= end)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint (a record's fields) at ``pos``: (value, next position). IndexError past the end of ``buf``;
    InvalidBatchError for a varint longer than 64 bits (damaged bytes)."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidBatchError("a varint longer than 64 bits", KafkaCode.CORRUPT_MESSAGE)


def whole_batches(data: bytes) -> int:
    """How many leading bytes of ``data`` are whole batches (a read may end inside one)."""
    pos = 0
    while len(data) - pos >= LOG_OVERHEAD:
        _, length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
        if length <= 0 or pos + LOG_OVERHEAD + length > len(data):
            break
        pos += LOG_OVERHEAD + length
    return pos


def batch_size_at(data: bytes, pos: int = 0) -> int:
    """The size of the batch starting at ``pos`` (from its length field)."""
    _, length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
    return LOG_OVERHEAD + length


def first_offset_at_or_after(batch: bytes, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record in ``batch`` whose timestamp is at least ``timestamp``."""
    for b in MemoryRecords(bytes(batch)):
        for record in b:
            if record.timestamp >= timestamp:
                return record.offset, record.timestamp
    return None
