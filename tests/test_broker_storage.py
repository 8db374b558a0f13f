"""Storage: append/read, the offset and time index, segment rolls, idempotence, and crash recovery."""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from zkconsumer.errors import KafkaCode
from zkconsumer.log import batches as B
from zkconsumer.log.segment import INDEX_ENTRY
from zkconsumer.log.storage import CHECKPOINT_FILE, LogConfig, LogManager, OffsetOutOfRange, PartitionLog


def make_batch(values: list[bytes], ts0: int = 1_000, key: bytes | None = b"k", producer: tuple | None = None,
               headers: list | None = None) -> bytes:
    pid, epoch, seq = producer or (-1, -1, -1)
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq)
    for i, v in enumerate(values):
        builder.append(timestamp=ts0 + i, key=key, value=v, headers=headers or [])
    builder.close()
    return bytes(builder.buffer())


def produce(plog: PartitionLog, values: list[bytes], **kw) -> int:
    result = plog.append(B.parse_produced(make_batch(values, **kw), 1 << 30))
    assert result.error == 0, result
    return result.base_offset


def produce_each(plog: PartitionLog, prefix: bytes, n: int) -> None:
    """``n`` one-record batches, ``prefix0`` .. ``prefix{n-1}``: many batches, so a restart has some to scan."""
    for i in range(n):
        produce(plog, [b"%s%d" % (prefix, i)])


def read_all(plog: PartitionLog, start: int = 0) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    out = []
    offset = start
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20, min_one=True)
        assert data, f"no data at {offset}"
        for batch in MemoryRecords(data):
            for r in batch:
                if r.offset >= offset:
                    out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
        offset = out[-1][0] + 1
    return out


def open_log(path: Path, **cfg) -> PartitionLog:
    cfg.setdefault("index_interval_bytes", 256)
    return PartitionLog(path, "t", 0, LogConfig(**cfg))


def test_append_assigns_contiguous_offsets_and_keeps_record_fields(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    assert produce(plog, [b"a", b"b"], headers=[("h", b"1")]) == 0
    assert produce(plog, [b"c"], ts0=5_000, key=None) == 2
    assert plog.log_end_offset == 3
    assert read_all(plog) == [(0, 1000, b"k", b"a", [("h", b"1")]), (1, 1001, b"k", b"b", [("h", b"1")]),
                              (2, 5000, None, b"c", [])]
    plog.close()


def test_read_from_the_middle_of_a_batch_returns_that_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    produce(plog, [b"%d" % i for i in range(10)])
    produce(plog, [b"x"])
    data = plog.read(5, 1 << 20)
    first = next(iter(MemoryRecords(data)))
    assert first.base_offset == 0 and first.last_offset == 9
    assert plog.read(11, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        plog.read(12, 100)
    plog.close()


def test_max_bytes_returns_whole_batches_and_at_least_one_when_asked(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0")
    for i in range(5):
        produce(plog, [b"v" * 100], ts0=i)
    one = len(plog.read(0, 1 << 20)) // 5
    assert len(plog.read(0, one * 2 + one // 2)) == one * 2
    assert plog.read(0, 10) == b""
    assert len(plog.read(0, 10, min_one=True)) == one
    plog.close()


def test_index_lookup_finds_every_offset(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", index_interval_bytes=200)
    for i in range(60):
        produce(plog, [b"v%d" % i, b"w%d" % i], ts0=i * 10)
    seg = plog.active
    entries = seg.index_entries
    assert len(entries) > 5, "a sparse index entry every ~200 bytes"
    assert [e[0] for e in entries] == sorted(e[0] for e in entries)
    on_disk = [INDEX_ENTRY.unpack_from(seg.index_path.read_bytes(), i * INDEX_ENTRY.size)
               for i in range(len(entries))]
    assert [(rel + seg.base_offset, pos, ts) for rel, pos, ts in on_disk] == entries
    for offset in range(120):
        pos = seg.lookup(offset)
        batch = next(iter(MemoryRecords(plog.read(offset, 1 << 20))))
        assert batch.base_offset <= offset <= batch.last_offset
        assert pos <= seg.locate(offset, seg.size)
    plog.close()


def test_segments_roll_and_reads_cross_them(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=1000)
    for i in range(40):
        produce(plog, [b"x" * 50], ts0=i)
    assert len(plog.segments) > 3
    assert [s.base_offset for s in plog.segments] == sorted({s.base_offset for s in plog.segments})
    assert [r[0] for r in read_all(plog)] == list(range(40))
    plog.close()
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    reopened = open_log(tmp_path / "t-0", segment_bytes=1000)
    assert reopened.log_end_offset == 40 and [r[0] for r in read_all(reopened)] == list(range(40))
    reopened.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", segment_bytes=600, index_interval_bytes=100)
    for i in range(30):
        produce(plog, [b"a", b"b"], ts0=1000 + i * 10)  # record 2i at 1000+10i, 2i+1 at 1001+10i
    assert plog.offset_for_timestamp(0) == (0, 1000)
    assert plog.offset_for_timestamp(1001) == (1, 1001)
    assert plog.offset_for_timestamp(1002) == (2, 1010)
    assert plog.offset_for_timestamp(1000 + 29 * 10 + 1) == (59, 1291)
    assert plog.offset_for_timestamp(5000) is None
    plog.close()


def test_clean_restart_recovers_without_rescanning(tmp_path: Path, caplog) -> None:
    plog = open_log(tmp_path / "t-0")
    produce_each(plog, b"v", 20)
    before = read_all(plog)
    plog.close()
    assert (tmp_path / "t-0" / CHECKPOINT_FILE).exists()
    with caplog.at_level(logging.WARNING, logger="zkconsumer"):
        again = open_log(tmp_path / "t-0")
    # only the log's own warnings count: a kafka-python client left running by an
    # earlier test may log from its thread meanwhile
    assert not [r for r in caplog.records if r.name.startswith("zkconsumer")]
    assert read_all(again) == before and again.log_end_offset == 20
    assert produce(again, [b"next"]) == 20
    again.close()


def test_restart_without_checkpoint_scans_and_keeps_everything_written(tmp_path: Path) -> None:
    plog = open_log(tmp_path / "t-0", flush_interval_ms=0)
    produce_each(plog, b"v", 25)
    before = read_all(plog)
    # a crash: no close(), so no checkpoint; the files are what a kill -9 leaves behind
    second = open_log(tmp_path / "t-0")
    assert read_all(second) == before and second.log_end_offset == 25
    second.close()


def _segment_file(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


@pytest.mark.parametrize("damage", ["partial-batch", "garbage", "zeros", "crc"])
def test_torn_tail_is_truncated_with_a_warning(tmp_path: Path, caplog, damage: str) -> None:
    directory = tmp_path / "t-0"
    plog = open_log(directory)
    produce_each(plog, b"v", 10)
    plog.close()
    good = read_all(open_log(directory))
    log_file = _segment_file(directory)
    size = log_file.stat().st_size
    tail = make_batch([b"torn"])
    tail = struct.pack(">q", 10) + tail[8:]
    if damage == "partial-batch":
        extra = tail[: len(tail) // 2]
    elif damage == "garbage":
        extra = os.urandom(300)
    elif damage == "zeros":
        extra = b"\0" * 4096  # what a file system may show after a crash extended the file
    else:
        extra = tail[:-1] + bytes([tail[-1] ^ 0xFF])
    with open(log_file, "ab") as f:
        f.write(extra)
    # the checkpoint covers only the good part, so the damaged tail is scanned
    with caplog.at_level(logging.WARNING, logger="zkconsumer.log.storage"):
        recovered = open_log(directory)
    assert any("truncating" in r.getMessage() for r in caplog.records)
    assert log_file.stat().st_size == size
    assert read_all(recovered) == good
    assert produce(recovered, [b"after"]) == 10
    recovered.close()


def test_torn_tail_after_checkpoint_position_keeps_unchecked_good_batches(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog = open_log(directory, flush_interval_ms=0)
    produce_each(plog, b"a", 5)
    plog.checkpoint()
    produce_each(plog, b"b", 5)
    # crash now: 5 records after the checkpoint, then a torn write
    with open(_segment_file(directory), "ab") as f:
        f.write(make_batch([b"torn"])[:30])
    recovered = open_log(directory)
    assert [r[3] for r in read_all(recovered)] == [b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)]
    recovered.close()


def test_damage_in_a_middle_segment_drops_later_segments(tmp_path: Path, caplog) -> None:
    directory = tmp_path / "t-0"
    plog = open_log(directory, segment_bytes=500)
    for i in range(30):
        produce(plog, [b"x" * 40], ts0=i)
    bases = [s.base_offset for s in plog.segments]
    # simulate a crash: no clean checkpoint, and the second segment's last byte flipped
    (directory / CHECKPOINT_FILE).unlink(missing_ok=True)
    second = plog.segments[1].log_path
    data = bytearray(second.read_bytes())
    data[-1] ^= 0xFF
    second.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="zkconsumer.log.storage"):
        recovered = open_log(directory, segment_bytes=500)
    assert len(recovered.segments) == 2
    assert recovered.log_end_offset < bases[2]
    assert [r[0] for r in read_all(recovered)] == list(range(recovered.log_end_offset))
    assert any("deleting segment" in r.getMessage() for r in caplog.records)
    recovered.close()


def test_invalid_index_file_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog = open_log(directory, index_interval_bytes=100)
    produce_each(plog, b"v", 30)
    entries = plog.active.index_entries
    plog.close()
    index = sorted(directory.glob("*.index"))[0]
    index.write_bytes(b"\xff" * 64)
    again = open_log(directory, index_interval_bytes=100)
    assert again.active.index_entries == entries
    assert [r[0] for r in read_all(again)] == list(range(30))
    again.close()


def test_idempotent_producer_duplicates_and_gaps(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    plog = open_log(directory)
    assert produce(plog, [b"a", b"b"], producer=(7, 0, 0)) == 0
    assert produce(plog, [b"c"], producer=(7, 0, 2)) == 2
    dup = plog.append(B.parse_produced(make_batch([b"a", b"b"], producer=(7, 0, 0)), 1 << 30))
    assert (dup.error, dup.base_offset, dup.duplicate) == (0, 0, True)
    gap = plog.append(B.parse_produced(make_batch([b"z"], producer=(7, 0, 9)), 1 << 30))
    assert gap.error == KafkaCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    next_seq = plog.append(B.parse_produced(make_batch([b"z"], producer=(7, 0, 3)), 1 << 30))
    assert next_seq.error == 0
    bumped = plog.append(B.parse_produced(make_batch([b"z"], producer=(8, 1, 0)), 1 << 30))
    assert bumped.error == 0
    stale = plog.append(B.parse_produced(make_batch([b"z"], producer=(8, 0, 1)), 1 << 30))
    assert stale.error == KafkaCode.INVALID_PRODUCER_EPOCH
    assert plog.log_end_offset == 5
    # after a crash (no checkpoint) the producer state is rebuilt from the batch headers
    (directory / CHECKPOINT_FILE).unlink(missing_ok=True)
    again = open_log(directory)
    dup = again.append(B.parse_produced(make_batch([b"c"], producer=(7, 0, 2)), 1 << 30))
    assert (dup.base_offset, dup.duplicate) == (2, True)
    again.close()
    # and after a clean stop it comes from the checkpoint
    third = open_log(directory)
    dup = third.append(B.parse_produced(make_batch([b"z"], producer=(7, 0, 3)), 1 << 30))
    assert (dup.base_offset, dup.duplicate) == (3, True)
    third.close()


def test_produced_batches_are_validated() -> None:
    good = make_batch([b"a"])
    assert len(B.parse_produced(good, 1 << 20)) == 1
    with pytest.raises(B.InvalidBatchError) as e:
        B.parse_produced(good[:-3], 1 << 20)
    assert e.value.code == KafkaCode.CORRUPT_MESSAGE
    bad_crc = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(B.InvalidBatchError) as e:
        B.parse_produced(bad_crc, 1 << 20)
    assert e.value.code == KafkaCode.CORRUPT_MESSAGE
    with pytest.raises(B.InvalidBatchError) as e:
        B.parse_produced(good, 10)
    assert e.value.code == KafkaCode.MESSAGE_TOO_LARGE
    legacy = MemoryRecordsBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    legacy.append(timestamp=1, key=None, value=b"old", headers=[])
    legacy.close()
    with pytest.raises(B.InvalidBatchError) as e:
        B.parse_produced(bytes(legacy.buffer()), 1 << 20)
    assert e.value.code == KafkaCode.INVALID_RECORD


def test_log_manager_loads_partitions_and_locks_its_directory(tmp_path: Path) -> None:
    from zkconsumer.log.storage import DataDirInUse

    logs = LogManager(tmp_path, LogConfig()).open()
    produce(logs.get_or_create("my-topic", 3), [b"a"])
    with pytest.raises(DataDirInUse):
        LogManager(tmp_path).open()
    logs.close()
    again = LogManager(tmp_path).open()
    assert again.get("my-topic", 3).log_end_offset == 1
    assert again.get("my-topic", 0) is None
    again.close()


def test_flush_interval_flushes_in_the_background(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, LogConfig(flush_interval_ms=20)).open()
    plog = logs.get_or_create("t", 0)
    produce(plog, [b"a"])
    assert plog._unflushed
    import time

    deadline = time.monotonic() + 5
    while plog._unflushed and time.monotonic() < deadline:
        logs.wait_for_append(logs.append_count, 0.02)  # a bounded wait, re-checking the condition
    assert not plog._unflushed
    logs.close()
