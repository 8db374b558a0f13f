"""One log segment: an append-only ``<base offset>.log`` of record batches and its sparse ``.index``.

The layout follows Kafka's: files named by the 20-digit base offset, batches stored back to back, and an
index entry every ``index_interval_bytes`` so a read seeks close to its offset and scans a few headers. Our
index entry also carries the largest timestamp *before* the batch it points to, which makes it a time
index too (that running maximum only grows, so it can be bisected).
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from zkconsumer.log import batches as B

#: relative offset (int32), byte position (int32), max timestamp of the earlier records of the segment (int64)
INDEX_ENTRY = struct.Struct(">iiq")
MAX_SEGMENT_BYTES = 2**31 - 1  # positions are int32 in the index, as in Kafka


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    """Not thread-safe by itself: the owning partition log serialises writers; readers use ``pread``."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int = 4096) -> None:
        self.base_offset = base_offset
        self.log_path = directory / f"{segment_name(base_offset)}.log"
        self.index_path = directory / f"{segment_name(base_offset)}.index"
        self.index_interval_bytes = index_interval_bytes
        self.log_fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = 0  # bytes of valid batches; anything after it in the file is not part of the log
        self.next_offset = base_offset
        self.max_timestamp = -1
        self._offsets = array("q")
        self._positions = array("q")
        self._ts_before = array("q")
        self._bytes_since_entry = 0

    # ------------------------------------------------------------------------------------------- writing
    def append(self, data: bytes | bytearray, batches: list[tuple[int, int, int, int, int]]) -> None:
        """Write ``data`` (whole batches) at the end.

        ``batches`` describes them: (position in ``data``, size, base offset, next offset, max timestamp).

        Index entries are written after the data, so a crash never leaves an entry pointing past the log.
        """
        pos = self.size
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.pwrite(self.log_fd, view[written:], pos + written)
        entries = []
        for rel, size, base, next_offset, max_ts in batches:
            if self._bytes_since_entry >= self.index_interval_bytes or not self._offsets:
                entries.append(self._add_entry(base, pos + rel))
            self._bytes_since_entry += size
            self.max_timestamp = max(self.max_timestamp, max_ts)
            self.next_offset = next_offset
        self.size = pos + len(view)
        self.write_index_entries(entries)

    def note_recovered(self, batch: B.StoredBatch) -> bytes | None:
        """Account for a batch found on disk by a scan; returns the index entry to write, if one is due."""
        entry = None
        if self._bytes_since_entry >= self.index_interval_bytes or not self._offsets:
            entry = self._add_entry(batch.base_offset, batch.position)
        self._bytes_since_entry += batch.size
        self.max_timestamp = max(self.max_timestamp, batch.max_timestamp)
        self.next_offset = batch.next_offset
        self.size = batch.position + batch.size
        return entry

    def _add_entry(self, base_offset: int, position: int) -> bytes:
        # Readers bisect ``_offsets`` or ``_ts_before`` without a lock and then index ``_positions``:
        # appending positions first means any index they find already has its position.
        self._positions.append(position)
        self._ts_before.append(self.max_timestamp)
        self._offsets.append(base_offset)
        self._bytes_since_entry = 0
        return INDEX_ENTRY.pack(base_offset - self.base_offset, position, self.max_timestamp)

    def write_index_entries(self, entries: list[bytes]) -> None:
        if entries:
            first = len(self._offsets) - len(entries)
            os.pwrite(self.index_fd, b"".join(entries), first * INDEX_ENTRY.size)

    def flush(self) -> None:
        os.fsync(self.log_fd)
        os.fsync(self.index_fd)

    def truncate(self, size: int) -> None:
        """Cut the log at ``size`` (a batch boundary) and drop index entries at or past it."""
        os.ftruncate(self.log_fd, size)
        keep = bisect.bisect_left(self._positions, size)
        del self._offsets[keep:], self._positions[keep:], self._ts_before[keep:]
        os.ftruncate(self.index_fd, keep * INDEX_ENTRY.size)
        self.size = min(self.size, size)

    # ------------------------------------------------------------------------------------------- loading
    def load_index(self, trusted_size: int) -> bool:
        """Read the index file, keeping entries that point inside the first ``trusted_size`` bytes.

        Returns False (and keeps nothing) when the file is not a valid index: entries must move forward in
        both offset and position. The caller then scans the segment from the start to rebuild it.
        """
        raw = os.pread(self.index_fd, os.fstat(self.index_fd).st_size, 0)
        raw = raw[:len(raw) - len(raw) % INDEX_ENTRY.size]
        last_rel, last_pos, last_ts = -1, -1, -1
        for rel, pos, ts in INDEX_ENTRY.iter_unpack(raw):
            if pos >= trusted_size:
                break
            if rel <= last_rel or pos <= last_pos or ts < last_ts:
                self._offsets, self._positions, self._ts_before = array("q"), array("q"), array("q")
                os.ftruncate(self.index_fd, 0)
                return False
            self._offsets.append(self.base_offset + rel)
            self._positions.append(pos)
            self._ts_before.append(ts)
            last_rel, last_pos, last_ts = rel, pos, ts
        os.ftruncate(self.index_fd, len(self._offsets) * INDEX_ENTRY.size)
        return True

    def resume_from_last_entry(self) -> tuple[int, int]:
        """Forget what the in-memory state says after the last index entry; (position, offset) to scan from.

        The entry itself is dropped too and re-added by the scan, which also restores ``max_timestamp``.
        """
        if not self._offsets:
            self.size, self.next_offset, self.max_timestamp = 0, self.base_offset, -1
            return 0, self.base_offset
        pos, offset, ts = self._positions.pop(), self._offsets.pop(), self._ts_before.pop()
        os.ftruncate(self.index_fd, len(self._offsets) * INDEX_ENTRY.size)
        self.size, self.next_offset, self.max_timestamp = pos, offset, ts
        self._bytes_since_entry = self.index_interval_bytes  # the scan re-adds the dropped entry first
        return pos, offset

    def rebuild_index(self) -> None:
        """Account for every batch of a freshly written file (a cleaned segment) and write its index."""
        result = B.ScanEnd(0)
        entries = [e for batch in B.scan(self.log_fd, 0, os.fstat(self.log_fd).st_size, None, False, result,
                                         gaps=True)
                   if (e := self.note_recovered(batch))]
        self.write_index_entries(entries)

    @property
    def index_entries(self) -> list[tuple[int, int, int]]:
        """(offset, position, max timestamp before) for each index entry, for tests and tools."""
        return list(zip(self._offsets, self._positions, self._ts_before, strict=True))

    # ------------------------------------------------------------------------------------------- reading
    def lookup(self, offset: int) -> int:
        """Byte position of the last indexed batch whose base offset is at most ``offset`` (0 when none)."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._positions[i] if i >= 0 else 0

    def lookup_time(self, timestamp: int) -> int:
        """Byte position from which the first record with a timestamp >= ``timestamp`` can be searched."""
        i = bisect.bisect_left(self._ts_before, timestamp) - 1
        return self._positions[i] if i >= 0 else 0

    def locate(self, offset: int, size: int) -> int | None:
        """Byte position of the batch holding ``offset`` (within the first ``size`` bytes), or None."""
        pos = self.lookup(offset)
        while pos < size:
            chunk = os.pread(self.log_fd, min(64 * 1024, size - pos), pos)
            rel = 0
            while len(chunk) - rel >= B.HEADER_SIZE:
                header = B.HEADER.unpack_from(chunk, rel)
                base, length, last_delta = header[0], header[1], header[6]
                if length <= 0:
                    return None
                if base + last_delta >= offset:
                    return pos + rel
                rel += B.LOG_OVERHEAD + length
            if rel == 0:
                return None
            pos += rel
        return None

    def read(self, position: int, max_bytes: int, size: int, min_one: bool) -> bytes:
        """Whole batches from ``position``, at most ``max_bytes`` of them, or the first one when ``min_one``."""
        want = min(max_bytes, size - position)
        data = os.pread(self.log_fd, want, position) if want > 0 else b""
        keep = B.whole_batches(data)
        if keep == 0 and min_one and position < size:
            header = os.pread(self.log_fd, B.LOG_OVERHEAD, position)
            return os.pread(self.log_fd, B.batch_size_at(header), position)
        return data[:keep] if keep < len(data) else data

    def close(self) -> None:
        for fd in (self.log_fd, self.index_fd):
            try:
                os.close(fd)
            except OSError:
                pass
