"""The log cleaner of compacted topics (``cleanup.policy=compact``): Kafka's LogCleaner for one broker's logs.

What it keeps, as Kafka's cleaner does: in the closed segments of a partition (never the active one), the last record
of each key; a tombstone (a null value) until ``delete.retention.ms`` has passed, then nothing. Offsets do not change:
a kept batch keeps its base offset and last offset delta (Kafka keeps them too, for the producer state), so a
compacted log has gaps between batches and readers skip them. Consecutive cleaned segments are merged while their
sizes before cleaning add up to at most the topic's ``segment.bytes`` (Kafka's ``groupSegmentsBySize``), so a log that
is mostly overwritten keeps a handful of segments however long it runs.

A partition is cleaned when its dirty ratio (bytes in closed segments written since its last cleaning, over all
bytes in closed segments) reaches ``min.cleanable.dirty.ratio``; the first round after a start cleans every
compacted log that has a closed segment, since the position of the last cleaning is kept in memory only.

Crash safety, as Kafka's ``.cleaned``/``.swap`` files: a group is written to ``<base>.log.cleaned`` and fsynced, then
renamed ``<base>.log.swap`` (the swap is decided), the group's other segments are deleted and the swap file renamed
over ``<base>.log``. Recovery (storage.py) deletes ``.cleaned`` files and completes a ``.swap``.

Where this differs from Kafka: the tombstone horizon is the tombstone's own timestamp plus ``delete.retention.ms``
(Kafka 3.1+ counts it from the first cleaning that saw the tombstone, KIP-534, and 2.x from the last modification of
the cleaned segments); a compressed batch is kept whole when any of its records is kept, and dropped when none is
(Kafka re-compresses the kept records); transactional markers do not occur (the broker has no transactions).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from zkconsumer import runtime
from zkconsumer.log import batches as B
from zkconsumer.log.segment import Segment

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_COMPRESSION_MASK = 0x07
_LENGTH = struct.Struct(">i")
_COUNT = struct.Struct(">i")
_CRC = struct.Struct(">I")
_LENGTH_AT = 8  # batchLength: after baseOffset
_CRC_AT = 17  # after baseOffset, batchLength, partitionLeaderEpoch, magic
_COUNT_AT = B.HEADER_SIZE - 4


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's broker and topic settings for compaction, with Kafka's defaults."""

    #: ``log.cleaner.backoff.ms``: how often the cleaner looks for a log to clean.
    backoff_ms: int = 15_000
    #: ``delete.retention.ms``: how long a tombstone outlives its key.
    delete_retention_ms: int = 86_400_000
    #: ``min.cleanable.dirty.ratio``.
    min_cleanable_dirty_ratio: float = 0.5


@dataclass(frozen=True)
class CleanResult:
    """One partition's cleaning, for the log line and the benchmarks."""

    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_before: int
    records_after: int
    tombstones_dropped: int
    seconds: float


@dataclass(frozen=True)
class _Record:
    offset: int
    timestamp: int
    key: bytes | None
    value_is_null: bool
    raw: bytes  # the record's bytes as stored (length varint included); empty inside a compressed batch


@dataclass(frozen=True)
class _Batch:
    data: bytes
    compressed: bool
    records: tuple[_Record, ...]


def _batches(data: bytes) -> Iterator[_Batch]:
    """The batches of a segment's bytes with their records (offsets, keys, whether the value is null)."""
    pos = 0
    while pos + B.HEADER_SIZE <= len(data):
        (base, length, _, _, _, attributes, _, first_ts, _, _, _, _, count) = B.HEADER.unpack_from(data, pos)
        end = pos + B.LOG_OVERHEAD + length
        batch = data[pos:end]
        if attributes & _COMPRESSION_MASK:  # rare: only a copied Kafka log has them
            records = tuple(_Record(r.offset, r.timestamp, r.key, r.value is None, b"")
                            for b in MemoryRecords(batch) for r in b)
            yield _Batch(batch, True, records)
            pos = end
            continue
        p = B.HEADER_SIZE
        records = []
        for _ in range(count):
            start = p
            length, p = B.read_varint(batch, p)
            following = p + length
            p += 1  # attributes
            ts_delta, p = B.read_varint(batch, p)
            off_delta, p = B.read_varint(batch, p)
            n, p = B.read_varint(batch, p)
            key = None if n < 0 else batch[p:p + n]
            p += max(n, 0)
            n, _ = B.read_varint(batch, p)
            records.append(_Record(base + off_delta, first_ts + ts_delta, key, n < 0, batch[start:following]))
            p = following
        yield _Batch(batch, False, tuple(records))
        pos = end


def _rebuild(batch: _Batch, kept: list[_Record]) -> bytes:
    """The batch with only ``kept`` records: header as stored (base offset, last offset delta, timestamps, producer),
    its length, record count and CRC recomputed."""
    if len(kept) == len(batch.records):
        return batch.data
    out = bytearray(batch.data[:B.HEADER_SIZE])
    for r in kept:
        out += r.raw
    _LENGTH.pack_into(out, _LENGTH_AT, len(out) - B.LOG_OVERHEAD)
    _COUNT.pack_into(out, _COUNT_AT, len(kept))
    _CRC.pack_into(out, _CRC_AT, calc_crc32c(bytes(out[B.CRC_START:])))
    return bytes(out)


def _read_all(seg: Segment) -> bytes:
    size = seg.size
    return os.pread(seg.log_fd, size, 0) if size else b""


def group_by_size(sizes: list[int], max_bytes: int) -> list[list[int]]:
    """Indexes of consecutive segments merged into one, while their sizes add up to at most ``max_bytes`` (each group
    has one segment at least): Kafka's ``groupSegmentsBySize``. Pure, for the tests."""
    groups: list[list[int]] = []
    total = max_bytes + 1
    for i, size in enumerate(sizes):
        if groups and total + size <= max_bytes:
            groups[-1].append(i)
            total += size
        else:
            groups.append([i])
            total = size
    return groups


def dirty_ratio(plog) -> float:
    """Bytes of the closed segments written since the last cleaning over all bytes of the closed segments."""
    closed = plog.segments[:-1]
    total = sum(s.size for s in closed)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in closed if s.base_offset >= plog.cleaned_up_to)
    return dirty / total


def clean(plog, now_ms: int, config: CleanerConfig) -> CleanResult | None:
    """Compact the closed segments of ``plog`` (a storage.PartitionLog); None when it has none. Appends go on
    meanwhile: they only touch the active segment, which is never cleaned. Calls are serialised by the caller."""
    started = runtime.monotonic()
    with plog.lock:
        closed = list(plog.segments[:-1])
        end = plog.active.base_offset
    if not closed:
        return None
    contents = [list(_batches(_read_all(seg))) for seg in closed]
    latest: dict[bytes | None, int] = {}
    for batches in contents:
        for batch in batches:
            for r in batch.records:
                latest[r.key] = r.offset  # offsets only grow through the log: the last one seen is the latest
    horizon = now_ms - config.delete_retention_ms
    records_before = records_after = dropped_tombstones = 0
    new_segments: list[tuple[list[Segment], bytes]] = []
    for group in group_by_size([s.size for s in closed], plog.segment_bytes):
        parts = []
        for i in group:
            for batch in contents[i]:
                kept = []
                for r in batch.records:
                    records_before += 1
                    if r.key is not None and latest[r.key] != r.offset:
                        continue  # a later record of the key supersedes this one
                    if r.value_is_null and r.timestamp < horizon:
                        dropped_tombstones += 1
                        continue  # the tombstone has done its work
                    kept.append(r)
                records_after += len(kept)
                if not kept:
                    continue
                parts.append(batch.data if batch.compressed else _rebuild(batch, kept))
        new_segments.append(([closed[i] for i in group], b"".join(parts)))
    bytes_before = sum(s.size for s in closed)
    for group_segments, data in new_segments:
        _swap_in(plog, group_segments, data)
    plog.cleaned_up_to = end
    plog.checkpoint()
    return CleanResult(len(closed), len(new_segments), bytes_before, sum(len(d) for _, d in new_segments),
                       records_before, records_after, dropped_tombstones, runtime.monotonic() - started)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view, written = memoryview(data), 0
        while written < len(view):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_in(plog, old: list[Segment], data: bytes) -> None:
    """Replace the segments ``old`` (consecutive, closed) by one segment holding ``data``, at the first one's base."""
    first = old[0]
    cleaned = first.log_path.with_name(first.log_path.name + CLEANED_SUFFIX)
    swap = first.log_path.with_name(first.log_path.name + SWAP_SUFFIX)
    _write_synced(cleaned, data)
    os.replace(cleaned, swap)  # the swap is decided: recovery completes it from here
    plog.fsync_dir()
    with plog.lock:
        for seg in old[1:]:
            for path in (seg.log_path, seg.index_path):
                path.unlink(missing_ok=True)
        first.index_path.unlink(missing_ok=True)
        os.replace(swap, first.log_path)
        plog.fsync_dir()
        fresh = Segment(plog.dir, first.base_offset, plog.config.index_interval_bytes)
        fresh.rebuild_index()
        plog.replace_segments(old, fresh)


def complete_swaps(directory: Path) -> None:
    """At recovery: drop half-written ``.cleaned`` files and finish every decided swap (its segment's later merged
    segments deleted, the swap renamed over its ``.log``). Each swap file is the cleaned content of the segments from
    its base up to, not including, the next segment that outlived the cleaning."""
    for path in directory.glob("*.log" + CLEANED_SUFFIX):
        log.warning("%s: deleting %s, a cleaning that did not finish", directory, path.name)
        path.unlink()
    for swap in sorted(directory.glob("*.log" + SWAP_SUFFIX)):
        base = int(swap.name.split(".")[0])
        data = swap.read_bytes()
        last = base - 1
        for batch in _batches(data):
            last = max(last, B.HEADER.unpack_from(batch.data)[0] + B.HEADER.unpack_from(batch.data)[6])
        for seg_log in directory.glob("*.log"):
            seg_base = int(seg_log.stem) if seg_log.stem.isdigit() else -1
            if base < seg_base <= last:  # merged into the swap: its records are in it
                seg_log.unlink()
                seg_log.with_suffix(".index").unlink(missing_ok=True)
        swap.with_name(swap.name[:-len(SWAP_SUFFIX)]).with_suffix(".index").unlink(missing_ok=True)
        os.replace(swap, swap.with_name(swap.name[:-len(SWAP_SUFFIX)]))
        log.warning("%s: completed the swap of a cleaned segment at offset %d", directory, base)
