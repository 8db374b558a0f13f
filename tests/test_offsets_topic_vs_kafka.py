"""Kafka 3.9.1's own ``kafka-dump-log.sh --offsets-decoder`` (``kafka.tools.DumpLogSegments``, from the jars the setup
fetches) reads the ``__consumer_offsets`` segments zkconsumer's coordinator writes: group metadata (key version 2,
value version 3) and offset commits (key version 1, value version 3 or 1), tombstones, and batches the log cleaner
rebuilt, every CRC valid."""

from __future__ import annotations

import json
import os
import re

import pytest

from zkconsumer.apache_kafka.jars import fetch
from zkconsumer.apache_kafka.processes import run_tool
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator import offsets_codec as codec
from zkconsumer.coordinator.offsets_log import OFFSETS_TOPIC, OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset, GroupSnapshot, MemberSnapshot
from zkconsumer.log.cleaner import CleanerConfig
from zkconsumer.log.storage import LogConfig, LogManager

pytestmark = pytest.mark.slow

#: ConsumerProtocol Subscription v0 (topics ["t"], no user data) and Assignment v0 (t: [0, 1], no user data)
SUBSCRIPTION = bytes.fromhex("0000" "00000001" "000174" "ffffffff")
ASSIGNMENT = bytes.fromhex("0000" "00000001" "000174" "00000002" "00000000" "00000001" "ffffffff")
RECORD = re.compile(r"^\| offset: (\d+) .* key: (\{.*\}) payload: (.*)$")


def dump(files: list[str]) -> tuple[list[str], list[tuple[int, dict, dict | None]]]:
    """Kafka's tool over ``files``: its batch lines and each record (offset, key, payload or None for <DELETE>)."""
    args = ["--offsets-decoder", "--print-data-log", "--files", ",".join(files)]  # Kafka's list: commas
    done = run_tool("kafka.tools.DumpLogSegments", args, dist=fetch("3.9.1"))
    assert done.returncode == 0, done.stderr
    batches = [line for line in done.stdout.splitlines() if line.startswith("baseOffset:")]
    records = []
    for line in done.stdout.splitlines():
        m = RECORD.match(line)
        if m:
            payload = None if m.group(3) == "<DELETE>" else json.loads(m.group(3))
            records.append((int(m.group(1)), json.loads(m.group(2)), payload))
    return batches, records


def test_kafkas_dump_log_decodes_our_group_metadata_offsets_and_cleaned_segments(tmp_path) -> None:
    config = LogConfig(topic_segment_bytes=((OFFSETS_TOPIC, 1024),), cleaner=CleanerConfig())
    logs = LogManager(tmp_path, config).open()
    store = OffsetsLog(logs, num_partitions=1)
    tp = TopicPartition("t", 0)
    for i in range(40):  # enough commits for several segments, most of them superseded
        store.commit("g", {tp: CommittedOffset(i, f"m{i}", 1_000 + i), TopicPartition("t", 1): CommittedOffset(i)})
    member = MemberSnapshot("c1-5f0e", "c1", "/127.0.0.1", 300_000, 10_000, SUBSCRIPTION, ASSIGNMENT, "static-1")
    store.store_group("g", GroupSnapshot("consumer", 7, "range", "c1-5f0e", 1234, (member,)))
    store.commit("expiring", {tp: CommittedOffset(3, "", 1_000, expire_timestamp_ms=2_000)})  # value v1
    store.commit("gone", {tp: CommittedOffset(1)})
    store.delete_offsets("gone")
    store.store_group("empty", GroupSnapshot("consumer", 2, None, None, 99))
    logs.clean_compacted(force=True)
    partition = tmp_path / f"{OFFSETS_TOPIC}-0"
    files = sorted(str(p) for p in partition.glob("*.log"))
    assert len(files) > 1
    ours = [(o, k, v) for o, k, v in _our_records(logs)]
    logs.close()

    batches, records = dump(files)
    assert batches and all("isvalid: true" in b for b in batches)  # the cleaner's rebuilt batches too
    assert [o for o, _, _ in records] == [o for o, _, _ in ours]  # the same records, at the same offsets
    by_key = {json.dumps(k, sort_keys=True): (o, v) for o, k, v in records}

    group = by_key[json.dumps({"type": "2", "data": {"group": "g"}}, sort_keys=True)][1]
    assert group["version"] == "3"
    assert {k: group["data"][k] for k in ("protocolType", "generation", "protocol", "leader",
                                           "currentStateTimestamp")} == {
        "protocolType": "consumer", "generation": 7, "protocol": "range", "leader": "c1-5f0e",
        "currentStateTimestamp": 1234}
    (m,) = group["data"]["members"]
    assert (m["memberId"], m["groupInstanceId"], m["clientId"], m["clientHost"], m["rebalanceTimeout"],
            m["sessionTimeout"]) == ("c1-5f0e", "static-1", "c1", "/127.0.0.1", 300_000, 10_000)
    assert m["subscription"] == {"topics": ["t"], "userData": None}
    assert m["assignment"] == {"assignedPartitions": [{"topic": "t", "partitions": [0, 1]}], "userData": None}

    latest = by_key[json.dumps({"type": "1", "data": {"group": "g", "topic": "t", "partition": 0}}, sort_keys=True)]
    assert latest[1] == {"version": "3", "data": {"offset": 39, "leaderEpoch": -1, "metadata": "m39",
                                                  "commitTimestamp": 1039}}
    expiring = by_key[json.dumps({"type": "1", "data": {"group": "expiring", "topic": "t", "partition": 0}},
                                 sort_keys=True)][1]
    assert expiring == {"version": "1", "data": {"offset": 3, "metadata": "", "commitTimestamp": 1000,
                                                 "expireTimestamp": 2000}}
    assert by_key[json.dumps({"type": "1", "data": {"group": "gone", "topic": "t", "partition": 0}},
                             sort_keys=True)][1] is None  # the tombstone, within delete.retention.ms
    empty = by_key[json.dumps({"type": "2", "data": {"group": "empty"}}, sort_keys=True)][1]["data"]
    assert (empty["generation"], empty["protocol"], empty["leader"], empty["members"]) == (2, None, None, [])


def _our_records(logs: LogManager):
    plog = logs.get(OFFSETS_TOPIC, 0)
    for seg in plog.segments:
        yield from codec.iter_records(os.pread(seg.log_fd, seg.size, 0))
