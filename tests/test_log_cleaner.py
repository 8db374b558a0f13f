"""The log cleaner of compacted topics (zkconsumer/log/cleaner.py) on real segment files: what it keeps (the last
record per key, tombstones until ``delete.retention.ms``), that offsets survive it, that a log reads back the same
after it and after a restart, that a swap a crash left half done is completed, and that a damaged record of
``__consumer_offsets`` costs its own group's history only."""

from __future__ import annotations

import logging
import os
import shutil
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator import offsets_codec as codec
from zkconsumer.coordinator.offsets_log import OFFSETS_TOPIC, OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemberSnapshot
from zkconsumer.log import cleaner
from zkconsumer.log.cleaner import CleanerConfig, group_by_size
from zkconsumer.log.storage import LogConfig, LogManager

NOW = 1_900_000_000_000
DAY = 86_400_000


def compacted(segment_bytes: int = 2048, **cleaner_settings) -> LogConfig:
    return LogConfig(compacted_topics=frozenset({OFFSETS_TOPIC}),
                     topic_segment_bytes=((OFFSETS_TOPIC, segment_bytes),),
                     cleaner=CleanerConfig(**cleaner_settings))


def open_store(path, config: LogConfig) -> OffsetsLog:
    store = OffsetsLog(LogManager(path, config).open(), num_partitions=1)
    store.load()
    return store


def records(store: OffsetsLog) -> list[tuple[int, bytes | None, bytes | None]]:
    plog = store.logs.get(OFFSETS_TOPIC, 0)
    out = []
    for seg in plog.segments:
        data = os.pread(seg.log_fd, seg.size, 0)
        out += [(o, k and bytes(k), v and bytes(v)) for o, k, v in codec.iter_records(data)]
    return out


def test_segments_merge_while_their_sizes_fit_one_segment() -> None:
    assert group_by_size([], 10) == []
    assert group_by_size([4, 4, 4, 11, 0, 3], 10) == [[0, 1], [2], [3], [4, 5]]
    assert group_by_size([0, 0, 0], 1) == [[0, 1, 2]]


def test_the_last_record_per_key_is_kept_at_its_offset_and_the_log_reads_back_the_same(tmp_path) -> None:
    store = open_store(tmp_path, compacted())
    for i in range(300):
        store.commit(f"g{i % 3}", {TopicPartition("t", i % 4): CommittedOffset(i, "", NOW)})
    store.store_group("g0", GroupSnapshot("consumer", 1, "range", "m", NOW,
                                          (MemberSnapshot("m", "c", "/h", 1, 2, b"s", b"a"),)))
    before = records(store)
    plog = store.logs.get(OFFSETS_TOPIC, 0)
    assert len(plog.segments) > 10
    end, start = plog.log_end_offset, plog.log_start_offset
    result = store.logs.clean_compacted(force=True, now_ms=NOW)[(OFFSETS_TOPIC, 0)]
    after = records(store)
    closed_keys = [k for o, k, _ in after if o < plog.active.base_offset]
    assert len(closed_keys) == len(set(closed_keys)) <= 13  # one record per key (12 offsets, 1 group) at most
    assert result.bytes_after < result.bytes_before / 5
    # as Kafka's groupSegmentsBySize: segments are merged by their sizes before the cleaning, so full segments are
    # cleaned one by one, and the next round merges what the first one left small
    assert result.segments_after == result.segments_before
    assert store.logs.clean_compacted(force=True, now_ms=NOW)[(OFFSETS_TOPIC, 0)].segments_after == 1
    assert records(store) == after
    assert set(after) <= set(before)  # every kept record is one that was written, at its own offset
    # the latest record of every key is still there, at the same offset
    latest = {k: (o, v) for o, k, v in before}
    assert {k: (o, v) for o, k, v in after} == latest
    assert (plog.log_start_offset, plog.log_end_offset) == (start, end)
    fetched = {g: store.fetch(g) for g in ("g0", "g1", "g2")}
    store.logs.close()
    again = open_store(tmp_path, compacted())
    assert {g: again.fetch(g) for g in ("g0", "g1", "g2")} == fetched and "g0" in again.groups()
    assert records(again) == after  # recovery accepts the gaps a cleaning leaves
    # a read from any offset finds the next kept batch (a consumer of the topic skips the gaps)
    plog = again.logs.get(OFFSETS_TOPIC, 0)
    data = plog.read(start + 1, 1 << 20, min_one=True)
    assert struct.unpack_from(">q", data)[0] > start
    again.logs.close()


def test_tombstones_are_kept_for_the_delete_retention_then_dropped(tmp_path) -> None:
    store = open_store(tmp_path, compacted(delete_retention_ms=DAY))
    tp = TopicPartition("t", 0)
    store.commit("gone", {tp: CommittedOffset(1, "", NOW)})
    store.delete_offsets("gone")  # the tombstone
    for i in range(200):
        store.commit("busy", {tp: CommittedOffset(i, "", NOW)})
    key = codec.encode_offset_key("gone", tp)
    store.logs.clean_compacted(force=True, now_ms=_wall_ms())
    assert [v for _, k, v in records(store) if k == key] == [None]  # the value went, the tombstone stays
    # written (by _append) at the wall clock's time: a day later by that clock it has done its work
    store.logs.clean_compacted(force=True, now_ms=_wall_ms() + DAY + 1)
    assert [v for _, k, v in records(store) if k == key] == []
    assert store.fetch("gone") == {} and store.fetch("busy")[tp].offset == 199
    store.logs.close()


def _wall_ms() -> int:
    import time

    return int(time.time() * 1000)


def test_the_dirty_ratio_decides_when_a_log_is_cleaned(tmp_path) -> None:
    store = open_store(tmp_path, compacted(min_cleanable_dirty_ratio=0.5))
    for i in range(200):
        store.commit("g", {TopicPartition("t", 0): CommittedOffset(i, "", NOW)})
    plog = store.logs.get(OFFSETS_TOPIC, 0)
    assert cleaner.dirty_ratio(plog) == 1.0  # never cleaned since the start
    assert store.logs.clean_compacted(now_ms=NOW)
    assert cleaner.dirty_ratio(plog) == 0.0 and not store.logs.clean_compacted(now_ms=NOW)
    for i in range(200, 400):
        store.commit("g", {TopicPartition("t", 0): CommittedOffset(i, "", NOW)})
    assert cleaner.dirty_ratio(plog) > 0.5 and store.logs.clean_compacted(now_ms=NOW)
    store.logs.close()


def test_a_swap_that_a_crash_left_decided_is_completed_at_the_start(tmp_path) -> None:
    """A crash after ``<base>.log.swap`` was written and before the merged segments were deleted: the next start
    deletes them and puts the swap in place, and the log reads back as a cleaned one."""
    crashed, cleaned = tmp_path / "crashed", tmp_path / "cleaned"
    store = open_store(crashed, compacted())
    for i in range(120):
        store.commit("g", {TopicPartition("t", i % 3): CommittedOffset(i, "", NOW)})
    expected = store.fetch("g")
    store.logs.close()
    shutil.copytree(crashed, cleaned)
    done = open_store(cleaned, compacted())
    done.logs.clean_compacted(force=True, now_ms=NOW)
    done.logs.clean_compacted(force=True, now_ms=NOW)  # the second round merges the closed segments into one
    first = done.logs.get(OFFSETS_TOPIC, 0).segments[0].log_path
    done.logs.close()
    partition = crashed / f"{OFFSETS_TOPIC}-0"
    shutil.copy(first, partition / (first.name + cleaner.SWAP_SUFFIX))
    (partition / ("00000000000000000001.log" + cleaner.CLEANED_SUFFIX)).write_bytes(b"half written")
    before = len(list(partition.glob("*.log")))
    again = open_store(crashed, compacted())
    assert not list(partition.glob("*.swap")) and not list(partition.glob("*.cleaned"))
    assert len(list(partition.glob("*.log"))) < before
    assert again.fetch("g") == expected
    again.logs.close()


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), st.booleans()), min_size=1,
                max_size=120))
def test_a_cleaned_log_loads_as_the_uncleaned_one(tmp_path_factory, steps) -> None:
    """Any sequence of commits and deletions: a load after cleaning (and a restart) equals the load before."""
    path = tmp_path_factory.mktemp("log")
    store = open_store(path, compacted(segment_bytes=400))
    for i, (group, partition, delete) in enumerate(steps):
        tp = TopicPartition("t", partition)
        if delete:
            store.delete_offsets(group, [tp])
        else:
            store.commit(group, {tp: CommittedOffset(i, "", NOW)})
    store.logs.close()
    plain = open_store(path, compacted(segment_bytes=400))
    expected = {g: plain.fetch(g) for g in "abc"}
    plain.logs.clean_compacted(force=True, now_ms=NOW)
    plain.logs.clean_compacted(force=True, now_ms=NOW)  # a second round merges what the first left small
    assert {g: plain.fetch(g) for g in "abc"} == expected
    plain.logs.close()
    again = open_store(path, compacted(segment_bytes=400))
    assert {g: again.fetch(g) for g in "abc"} == expected
    again.logs.close()


# ------------------------------------------------------------------------------------------ damaged records
def _corrupt(path, needle: bytes, replacement: bytes) -> None:
    for seg in path.glob("*.log"):
        data = seg.read_bytes()
        if needle in data:
            seg.write_bytes(data.replace(needle, replacement, 1))
            return
    raise AssertionError(f"{needle!r} is in no segment")


def test_a_damaged_record_costs_its_own_group_only_and_is_named(tmp_path, caplog) -> None:
    """Three kinds of damage in one partition of ``__consumer_offsets``, each named in a warning with its group and
    segment: a batch whose CRC fails (the commit it held is lost: the group falls back to its previous commit), a
    group metadata value that does not decode (that group loses its members, keeps its offsets), an offset value that
    does not decode (the previous commit of that partition is used). Every other group loads whole."""
    config = LogConfig()
    logs = LogManager(tmp_path, config).open()
    store = OffsetsLog(logs, num_partitions=1)
    tp = TopicPartition("t", 0)
    member = MemberSnapshot("m", "c", "/h", 1, 2, b"s", b"a")
    for group in ("crc", "meta", "value", "fine"):
        store.commit(group, {tp: CommittedOffset(1, "first", NOW)})
    store.commit("crc", {tp: CommittedOffset(2, "crc-second", NOW)})
    store.store_group("meta", GroupSnapshot("consumer", 4, "range", "m", NOW, (member,)))
    store.commit("meta", {tp: CommittedOffset(5, "", NOW)})
    store.commit("value", {tp: CommittedOffset(2, "value-second", NOW)})
    store.store_group("fine", GroupSnapshot("consumer", 2, "range", "m", NOW, (member,)))
    logs.close()
    partition = tmp_path / f"{OFFSETS_TOPIC}-0"
    _corrupt(partition, b"crc-second", b"crc-secxnd")  # a flipped byte: the batch's CRC fails
    # a group metadata value of an unknown version (the batch's CRC recomputed, as a foreign writer's would be)
    _rewrite_value(partition, codec.encode_group_key("meta"), b"\x00\x63garbage")
    _rewrite_value(partition, codec.encode_offset_key("value", tp), b"\x00\x03\x00")  # truncated offset value
    caplog.set_level(logging.WARNING)
    again = OffsetsLog(LogManager(tmp_path, config).open(), num_partitions=1)
    again.load()
    text = caplog.text
    segment = str(next(partition.glob("*.log")))
    assert again.corrupt_batches == 1 and "CRC mismatch" in text and "crc" in text and segment in text
    assert again.fetch("crc")[tp] == CommittedOffset(1, "first", NOW)
    assert "the metadata of group meta" in text and again.groups()["meta"] is None
    assert again.fetch("meta")[tp].offset == 5
    assert "the offset of group value for t-0" in text
    assert again.fetch("value")[tp] == CommittedOffset(1, "first", NOW)
    assert again.fetch("fine")[tp].offset == 1 and again.groups()["fine"].generation == 2
    again.logs.close()


def _rewrite_value(partition, key: bytes, value: bytes) -> None:
    """Replace the value of the last record with ``key`` by ``value``: the batch re-encoded, its CRC valid."""
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

    seg = next(partition.glob("*.log"))
    data = seg.read_bytes()
    out, done = bytearray(), False
    batches = []
    pos = 0
    while pos < len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        batches.append(data[pos:pos + 12 + length])
        pos += 12 + length
    for raw in reversed(batches):
        batch = next(iter(MemoryRecords(raw)))
        recs = list(batch)
        if not done and any(r.key == key for r in recs):
            builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
            for r in recs:
                builder.append(r.timestamp, r.key, value if r.key == key else r.value)
            builder.close()
            rebuilt = bytearray(builder.buffer())
            struct.pack_into(">q", rebuilt, 0, batch.base_offset)
            out[:0] = rebuilt
            done = True
        else:
            out[:0] = raw
    assert done, f"no record with key {key!r}"
    seg.write_bytes(bytes(out))
    seg.with_suffix(".index").unlink(missing_ok=True)
    (partition / "recovery-checkpoint.json").unlink(missing_ok=True)


def test_the_broker_logs_background_thread_cleans_every_backoff(tmp_path) -> None:
    """No caller cleans here: the LogManager's own thread does, every ``log.cleaner.backoff.ms``."""
    from helpers import wait_until

    store = open_store(tmp_path, compacted(backoff_ms=50))
    for i in range(300):
        store.commit("g", {TopicPartition("t", 0): CommittedOffset(i, "", NOW)})
    # the thread may clean while the commits are written: count the records left, not the bytes seen at the end
    wait_until(lambda: len(records(store)) < 60, timeout=10, message="the background cleaner to compact the log")
    assert store.fetch("g")[TopicPartition("t", 0)].offset == 299
    store.logs.close()


def test_the_brokers_kafka_properties_reach_the_offsets_topics_log() -> None:
    """``broker start --property`` takes Kafka's names for the offsets topic's segments and the cleaner, and the broker
    hands them to its logs (``__consumer_offsets`` compacted whatever the log config it was given)."""
    from zkconsumer.broker.broker import Broker
    from zkconsumer.cli.broker import group_options
    from zkconsumer.errors import ZkConsumerError

    options = group_options(["offsets.topic.segment.bytes=65536", "log.cleaner.backoff.ms=100",
                             "log.cleaner.delete.retention.ms=60000"])
    assert options == {"offsets_topic_segment_bytes": 65536, "log_cleaner_backoff_ms": 100,
                       "offsets_delete_retention_ms": 60000}
    with pytest.raises(ZkConsumerError):
        group_options(["log.cleaner.backoff.ms=soon"])
    broker = Broker("127.0.0.1:1", log_config=LogConfig(compacted_topics=frozenset()), **options)
    config = broker.log_config
    assert OFFSETS_TOPIC in config.compacted_topics and config.segment_bytes_for(OFFSETS_TOPIC) == 65536
    assert (config.cleaner.backoff_ms, config.cleaner.delete_retention_ms) == (100, 60000)
    assert config.segment_bytes_for("orders") == config.segment_bytes
