"""The broker's data on disk: one append-only log per partition, made of segments, recovered on start.

Layout (Kafka's): ``<data dir>/<topic>-<partition>/<20-digit base offset>.log|.index`` plus our
``recovery-checkpoint.json``. Durability rules:

* ``flush_interval_ms=0``: every append is fsynced before it is acknowledged.
* ``flush_interval_ms=N``: a background thread fsyncs logs with new data every N ms.
* ``flush_interval_ms=None``: the produce path never fsyncs (Kafka's default, the OS decides).

In every mode a segment is fsynced when it is rolled, and every ``checkpoint_interval_ms`` the log is fsynced
and a recovery checkpoint written: the flushed position and the idempotent-producer state there. On start,
data before the checkpoint is trusted (index files, a header scan after the last index entry) and data after it
is scanned with CRC checks; the first bad or incomplete batch and everything after it is truncated with a
warning. A clean stop writes a checkpoint at the end, so the next start scans nothing.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from zkconsumer import runtime
from zkconsumer.errors import IllegalArgument, KafkaCode, ZkConsumerError
from zkconsumer.log import batches as B
from zkconsumer.log import cleaner
from zkconsumer.log.cleaner import CleanerConfig
from zkconsumer.log.producer_state import ProducerStateTable
from zkconsumer.log.segment import MAX_SEGMENT_BYTES, Segment
from zkconsumer.zk.layout import OFFSETS_TOPIC

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "recovery-checkpoint.json"
LOCK_FILE = ".lock"


class StorageError(ZkConsumerError, RuntimeError):
    pass


class DataDirInUse(StorageError):
    pass


class OffsetOutOfRange(ZkConsumerError, LookupError):
    pass


@dataclass(frozen=True)
class LogConfig:
    #: Kafka's default is 1 GiB; smaller here because recovery checks CRCs in Python.
    segment_bytes: int = 64 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_interval_ms: int | None = None
    checkpoint_interval_ms: int = 10_000
    #: Kafka's ``message.max.bytes`` (a batch, with its log overhead).
    max_batch_bytes: int = 1048588
    verify_crc: bool = True
    #: Topics whose logs are compacted (``cleanup.policy=compact``): cleaned by log/cleaner.py, their offsets may
    #: have gaps. ``__consumer_offsets`` always is, as Kafka creates it.
    compacted_topics: frozenset[str] = frozenset({OFFSETS_TOPIC})
    #: ``segment.bytes`` of single topics, overriding ``segment_bytes`` (``offsets.topic.segment.bytes``).
    topic_segment_bytes: tuple[tuple[str, int], ...] = ()
    cleaner: CleanerConfig = CleanerConfig()

    def segment_bytes_for(self, topic: str) -> int:
        return dict(self.topic_segment_bytes).get(topic, self.segment_bytes)

    def __post_init__(self) -> None:
        if self.flush_interval_ms is not None and self.flush_interval_ms < 0:
            raise IllegalArgument("flush_interval_ms must be None, 0 or a positive number of milliseconds")
        if not 0 < self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise IllegalArgument(f"segment_bytes must be in 1..{MAX_SEGMENT_BYTES}")
        for topic, size in self.topic_segment_bytes:
            if not 0 < size <= MAX_SEGMENT_BYTES:
                raise IllegalArgument(f"segment.bytes of {topic} must be in 1..{MAX_SEGMENT_BYTES}")


@dataclass(frozen=True)
class AppendResult:
    error: int = KafkaCode.NONE
    base_offset: int = -1
    duplicate: bool = False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class PartitionLog:
    """One partition's log. Appends are serialised by ``lock``; reads run concurrently with them."""

    def __init__(self, directory: Path, topic: str, partition: int, config: LogConfig,
                 on_append: Callable[[], None] | None = None) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.lock = runtime.Lock()
        #: Replaced whole by a cleaning (readers keep the list they took); a roll appends to it.
        self.segments: list[Segment] = []
        #: Compacted (log/cleaner.py): batches keep their offsets, so offsets have gaps between batches.
        self.compacted = topic in config.compacted_topics
        self.segment_bytes = config.segment_bytes_for(topic)
        #: The active segment's base at the last cleaning: closed segments from there on are dirty.
        self.cleaned_up_to = 0
        self._retired: list[Segment] = []  # replaced by a cleaning; closed at the next one (readers may hold them)
        self.producers = ProducerStateTable()
        self._on_append = on_append or (lambda: None)
        self._unflushed = False
        self._checkpointed: tuple[int, int] | None = None
        self._closed = False
        self.dir.mkdir(parents=True, exist_ok=True)
        self._recover()

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic}-{self.partition}, {self.log_start_offset}..{self.log_end_offset})"

    # ------------------------------------------------------------------------------------------- offsets
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign; with a single replica it is also the high watermark."""
        return self.segments[-1].next_offset

    # ------------------------------------------------------------------------------------------ recovery
    def _read_checkpoint(self) -> tuple[int, int, ProducerStateTable] | None:
        path = self.dir / CHECKPOINT_FILE
        try:
            obj = json.loads(path.read_text())
            return int(obj["segment"]), int(obj["position"]), ProducerStateTable.from_snapshot(obj["producers"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("%s: ignoring unreadable %s (%s); the whole log will be checked", self, path, e)
            return None

    def _recover(self) -> None:
        if self.compacted:
            cleaner.complete_swaps(self.dir)
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log") if p.stem.isdigit() and len(p.stem) == 20)
        interval = self.config.index_interval_bytes
        if not bases:
            self._add_segment(Segment(self.dir, 0, interval))
            return
        checkpoint = self._read_checkpoint()
        if checkpoint is not None and checkpoint[0] not in bases:
            log.warning("%s: recovery checkpoint names a missing segment; the whole log will be checked", self)
            checkpoint = None
        if checkpoint is not None:
            self.producers = checkpoint[2]
        scanned_after_checkpoint = False
        for i, base in enumerate(bases):
            seg = Segment(self.dir, base, interval)
            self._add_segment(seg)
            file_size = os.fstat(seg.log_fd).st_size
            if checkpoint is None or base > checkpoint[0]:
                trusted = 0
            elif base < checkpoint[0]:
                trusted = file_size
            else:
                trusted = min(checkpoint[1], file_size)
            if not seg.load_index(trusted):
                log.warning("%s: index %s was invalid and is rebuilt", self, seg.index_path)
            pos, offset = seg.resume_from_last_entry()
            ok = self._scan_into(seg, pos, trusted, offset, verify_crc=False, track_producers=False)
            if ok:
                scanned_after_checkpoint |= seg.size < file_size
                ok = self._scan_into(seg, seg.size, file_size, seg.next_offset, verify_crc=True,
                                     track_producers=True)
            if not ok:
                scanned_after_checkpoint = True
                for later in bases[i + 1:]:
                    self._delete_segment_files(later)
                break
        if scanned_after_checkpoint:
            # Whatever the scan accepted is now the log: make it durable and checkpoint it, so a crash right
            # after this start does not scan it again.
            for seg in self.segments:
                seg.flush()
            self.checkpoint()

    def _scan_into(self, seg: Segment, start: int, end: int, expected_offset: int, verify_crc: bool,
                   track_producers: bool) -> bool:
        """Scan ``seg`` from ``start`` to ``end``, accounting batches; truncate at the first bad one."""
        if start >= end:
            if start > end:  # index entry past the trusted end cannot happen (load_index filters); be safe
                seg.truncate(end)
            return True
        result = B.ScanEnd(start)
        entries = []
        # a cleaned segment of a compacted log has gaps between its batches
        for batch in B.scan(seg.log_fd, start, end, expected_offset, verify_crc, result, gaps=self.compacted):
            if not batch.crc_ok:
                log.warning("%s: the batch at offsets %d-%d (byte %d of %s) fails its CRC; kept in place, as valid "
                            "batches follow it (its reader skips it)", self, batch.base_offset, batch.last_offset,
                            batch.position, seg.log_path)
            entry = seg.note_recovered(batch)
            if entry:
                entries.append(entry)
            if track_producers:
                self.producers.record(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                      batch.last_sequence, batch.base_offset, batch.last_offset)
        seg.write_index_entries(entries)
        seg.size = result.position
        if result.reason:
            file_size = os.fstat(seg.log_fd).st_size
            log.warning("%s: truncating %d bytes at byte %d of %s (next offset %d): %s",
                        self, file_size - result.position, result.position, seg.log_path, seg.next_offset,
                        result.reason)
            seg.truncate(result.position)
            seg.flush()
            return False
        return True

    def _delete_segment_files(self, base: int) -> None:
        seg = Segment(self.dir, base, self.config.index_interval_bytes)
        log.warning("%s: deleting segment %s, which follows a truncated one", self, seg.log_path)
        seg.close()
        for path in (seg.log_path, seg.index_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _add_segment(self, seg: Segment) -> None:
        self.segments.append(seg)

    def replace_segments(self, old: list[Segment], fresh: Segment) -> None:
        """A cleaning's swap (called with ``lock`` held): the consecutive segments ``old`` become ``fresh``."""
        i = next(k for k, s in enumerate(self.segments) if s is old[0])
        self.segments = self.segments[:i] + [fresh] + self.segments[i + len(old):]
        for seg in self._retired:
            seg.close()
        self._retired = list(old)

    def fsync_dir(self) -> None:
        _fsync_dir(self.dir)

    # ------------------------------------------------------------------------------------------- writing
    def append(self, batches: list[B.ProducedBatch]) -> AppendResult:
        """Assign offsets and append; idempotent batches are checked for duplicates and gaps first."""
        with self.lock:
            if self._closed:
                raise StorageError(f"{self} is closed")
            verdict = self._check_sequences(batches)
            if verdict is not None:
                return verdict
            active = self.active
            offset = first = active.next_offset
            rows, rel = [], 0
            for b in batches:
                b.assign_base_offset(offset)
                rows.append((rel, len(b.data), offset, offset + b.record_count, b.max_timestamp))
                rel += len(b.data)
                offset += b.record_count
            if active.size > 0 and (active.size + rel > self.segment_bytes
                                    or offset - active.base_offset > 2**31 - 1):
                active = self._roll(first)
            data = batches[0].data if len(batches) == 1 else b"".join(b.data for b in batches)
            active.append(data, rows)
            for b, row in zip(batches, rows, strict=True):
                self.producers.record(b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
                                      row[2], row[3] - 1)
            if self.config.flush_interval_ms == 0:
                active.flush()
            else:
                self._unflushed = True
        self._on_append()
        return AppendResult(KafkaCode.NONE, first)

    def _check_sequences(self, batches: list[B.ProducedBatch]) -> AppendResult | None:
        head = batches[0]
        verdict = self.producers.check(head.producer_id, head.producer_epoch, head.base_sequence,
                                       head.last_sequence)
        if verdict.duplicate_of is not None and len(batches) == 1:
            return AppendResult(KafkaCode.NONE, verdict.duplicate_of, duplicate=True)
        if not verdict.append:
            return AppendResult(verdict.error or KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        for prev, b in zip(batches, batches[1:], strict=False):
            if b.producer_id >= 0 and b.base_sequence >= 0 and (
                    b.producer_id != prev.producer_id or b.producer_epoch != prev.producer_epoch
                    or b.base_sequence != (prev.last_sequence + 1) % 2**31):
                return AppendResult(KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return None

    def _roll(self, base_offset: int) -> Segment:
        old = self.active
        old.flush()
        seg = Segment(self.dir, base_offset, self.config.index_interval_bytes)
        self._add_segment(seg)
        _fsync_dir(self.dir)
        log.debug("%s: rolled a new segment at offset %d", self, base_offset)
        return seg

    def flush(self) -> None:
        with self.lock:
            if not self._unflushed or self._closed:
                return
            self._unflushed = False
            active = self.active
        active.flush()

    def checkpoint(self) -> None:
        """fsync, then record the flushed end and the producer state there (skipped when nothing changed)."""
        with self.lock:
            if self._closed:
                return
            point = (self.active.base_offset, self.active.size)
            if point == self._checkpointed:
                return
            state = self.producers.snapshot()
            next_offset = self.active.next_offset
            self._unflushed = False
            active = self.active
        active.flush()
        body = {"segment": point[0], "position": point[1], "next_offset": next_offset, "producers": state}
        _write_atomically(self.dir / CHECKPOINT_FILE, json.dumps(body).encode())
        self._checkpointed = point

    # ------------------------------------------------------------------------------------------- reading
    def read(self, offset: int, max_bytes: int, min_one: bool = False) -> bytes:
        """Whole batches from the one holding ``offset`` (one segment per read, as Kafka does)."""
        end = self.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRange(f"offset {offset} is outside {self.log_start_offset}..{end}")
        if offset == end:
            return b""
        segments = self.segments  # one list for the whole read: a cleaning replaces it, never changes it
        i = bisect.bisect_right(segments, offset, key=_base_offset) - 1
        seg = segments[i]
        size = seg.size
        pos = seg.locate(offset, size)
        if pos is None:
            if i + 1 < len(segments):  # offset sits between a segment's end (or a gap) and the next one's base
                return self.read(segments[i + 1].base_offset, max_bytes, min_one)
            return b""
        return seg.read(pos, max_bytes, size, min_one)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp``; None when none is."""
        for seg in list(self.segments):
            if seg.max_timestamp < timestamp:
                continue
            size = seg.size
            result = B.ScanEnd(0)
            for batch in B.scan(seg.log_fd, seg.lookup_time(timestamp), size, None, False, result):
                if batch.max_timestamp >= timestamp:
                    found = B.first_offset_at_or_after(os.pread(seg.log_fd, batch.size, batch.position),
                                                       timestamp)
                    if found is not None:
                        return found
            return None
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Flush and checkpoint (a clean stop), then close the files."""
        self.checkpoint()
        with self.lock:
            self._closed = True
            for seg in self.segments + self._retired:
                seg.close()


def _base_offset(seg: Segment) -> int:
    return seg.base_offset


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


class LogManager:
    """All partition logs under one data directory, plus the background flusher/checkpointer.

    Also the rendezvous for long-polling fetches: every append bumps a counter and wakes the waiters.
    """

    def __init__(self, data_dir: str | os.PathLike, config: LogConfig | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.config = config or LogConfig()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._logs_lock = runtime.Lock()
        self._appended = runtime.Condition()
        self._append_count = 0
        self._stop = runtime.Event()
        self._closing = runtime.Event()
        self._thread: runtime.Task | None = None
        self._lock_fd: int | None = None
        self._cleaning = runtime.Lock()  # one cleaning at a time: the thread's, or a caller's

    def open(self) -> LogManager:
        """Lock the data directory, recover every log in it and start the background thread."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise DataDirInUse(f"data directory {self.data_dir} is in use by another broker") from None
        started = runtime.monotonic()
        for child in sorted(self.data_dir.iterdir()):
            tp = parse_partition_dir(child.name) if child.is_dir() else None
            if tp is not None:
                self._logs[tp] = PartitionLog(child, tp[0], tp[1], self.config, self._notify)
        if self._logs:
            log.info("loaded %d partition logs from %s in %.2fs", len(self._logs), self.data_dir,
                     runtime.monotonic() - started)
        self._thread = runtime.spawn(self._background, name="log-flusher")
        return self

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int) -> PartitionLog:
        found = self._logs.get((topic, partition))
        if found is not None:
            return found
        with self._logs_lock:
            found = self._logs.get((topic, partition))
            if found is None:
                directory = self.data_dir / partition_dir_name(topic, partition)
                found = PartitionLog(directory, topic, partition, self.config, self._notify)
                self._logs[(topic, partition)] = found
            return found

    def logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    # ------------------------------------------------------------------------------------ long polling
    def _notify(self) -> None:
        with self._appended:
            self._append_count += 1
            self._appended.notify_all()

    @property
    def append_count(self) -> int:
        return self._append_count

    def wait_for_append(self, seen: int, timeout: float) -> None:
        """Return once an append happened after ``seen`` was read, the timeout passed, or on close."""
        with self._appended:
            self._appended.wait_for(lambda: self._append_count != seen or self._closing.is_set(), timeout)

    def wake_waiters(self) -> None:
        """Release every long-polling fetch and make new ones return at once (the broker is stopping)."""
        self._closing.set()
        with self._appended:
            self._appended.notify_all()

    # ------------------------------------------------------------------------------------- maintenance
    def clean_compacted(self, force: bool = False, now_ms: int | None = None) -> dict[tuple[str, int],
                                                                                   cleaner.CleanResult]:
        """Clean the compacted logs whose dirty ratio reached ``min.cleanable.dirty.ratio`` (every one with a closed
        segment when ``force``); the background thread calls it every ``log.cleaner.backoff.ms``."""
        results = {}
        with self._cleaning:
            for plog in self.logs():
                if not plog.compacted or plog.closed:
                    continue
                if not force and cleaner.dirty_ratio(plog) < self.config.cleaner.min_cleanable_dirty_ratio:
                    continue
                result = cleaner.clean(plog, int(runtime.time() * 1000) if now_ms is None else now_ms,
                                       self.config.cleaner)
                if result is not None:
                    results[(plog.topic, plog.partition)] = result
                    log.info("cleaned %s: %d -> %d segments, %d -> %d bytes, %d -> %d records (%d tombstones "
                             "dropped) in %.3fs", plog, result.segments_before, result.segments_after,
                             result.bytes_before, result.bytes_after, result.records_before, result.records_after,
                             result.tombstones_dropped, result.seconds)
        return results

    def _background(self) -> None:
        flush_s = (self.config.flush_interval_ms or 0) / 1000.0
        checkpoint_s = self.config.checkpoint_interval_ms / 1000.0
        clean_s = self.config.cleaner.backoff_ms / 1000.0
        next_flush = runtime.monotonic() + flush_s if flush_s > 0 else float("inf")
        next_checkpoint = runtime.monotonic() + checkpoint_s
        next_clean = runtime.monotonic() + clean_s
        while not self._stop.wait(max(0.0, min(next_flush, next_checkpoint, next_clean) - runtime.monotonic())):
            now = runtime.monotonic()
            try:
                if now >= next_clean:
                    self.clean_compacted()
                    next_clean = runtime.monotonic() + clean_s
                if now >= next_checkpoint:
                    for plog in self.logs():
                        plog.checkpoint()
                    next_checkpoint = now + checkpoint_s
                elif now >= next_flush:
                    for plog in self.logs():
                        plog.flush()
                if now >= next_flush:
                    next_flush = now + flush_s
            except Exception:  # a failing disk must not kill the thread silently; keep trying
                log.exception("background flush failed")

    def close(self) -> None:
        self.wake_waiters()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for plog in self.logs():
            try:
                plog.close()
            except Exception:
                log.exception("closing %s failed", plog)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def release_lock(self) -> None:
        """Give up the directory's lock and nothing else: what the kernel does for a process killed with SIGKILL
        (its descriptors close; nothing is flushed or checkpointed). The simulator kills a broker so, in one OS
        process, so that the next broker on the directory can lock it (sim/kafka_side.py)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def closed(self) -> bool:
        return self._closing.is_set()
