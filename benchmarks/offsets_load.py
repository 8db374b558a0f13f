"""Loading ``__consumer_offsets`` at broker start: OffsetsLog.load() against a plain replay with kafka-python.

    .venv/bin/python benchmarks/offsets_load.py [--records 100000] [--per-commit 100] [--groups 200] [--record FILE]

Writes ``--records`` offset commit records through OffsetsLog.commit (``--per-commit`` partitions per commit,
round-robin over ``--groups`` groups, each commit fsynced as the coordinator does), closes the log, then times a
load on a fresh LogManager, median of 3. The baseline reads the same partitions with kafka-python's MemoryRecords
and decodes every record (what a straightforward replay does); both must end with the same offsets.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kafka.record.memory_records import MemoryRecords
from records import write_record

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.offsets_codec import OffsetKey, decode_key, decode_offset_value
from zkconsumer.coordinator.offsets_log import OFFSETS_TOPIC, OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset
from zkconsumer.log.storage import LogManager
from zkconsumer.results.record import Scope


def write(data_dir: str, records: int, per_commit: int, groups: int) -> float:
    logs = LogManager(data_dir).open()
    store = OffsetsLog(logs)
    started = time.monotonic()
    for i in range(records // per_commit):
        store.commit(f"group-{i % groups}", {TopicPartition("orders", p): CommittedOffset(i, "", 1_700_000_000_000 + i)
                                             for p in range(per_commit)})
    took = time.monotonic() - started
    logs.close()
    return took


def load(data_dir: str) -> tuple[float, dict]:
    logs = LogManager(data_dir).open()
    store = OffsetsLog(logs)
    started = time.monotonic()
    store.load()
    took = time.monotonic() - started
    result = {g: store.fetch(g) for g in store.groups()}
    logs.close()
    return took, result


def baseline(data_dir: str) -> tuple[float, dict]:
    logs = LogManager(data_dir).open()
    started = time.monotonic()
    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
    for p in range(50):
        plog = logs.get(OFFSETS_TOPIC, p)
        position = plog.log_start_offset if plog else 0
        while plog is not None and position < plog.log_end_offset:
            for batch in MemoryRecords(plog.read(position, 4 << 20, min_one=True)):
                for rec in batch:
                    position = rec.offset + 1
                    key = decode_key(bytes(rec.key))
                    if isinstance(key, OffsetKey):
                        held = offsets.setdefault(key.group, {})
                        if rec.value is None:
                            held.pop(key.tp, None)
                        else:
                            held[key.tp] = decode_offset_value(bytes(rec.value))
    took = time.monotonic() - started
    logs.close()
    return took, offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--per-commit", type=int, default=100)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="offsets-load-") as data_dir:
        wrote = write(data_dir, args.records, args.per_commit, args.groups)
        commits = args.records // args.per_commit
        print(f"wrote {args.records:,} records in {commits:,} fsynced commits: {wrote:.2f}s "
              f"({commits / wrote:,.0f} commits/s)")
        ours = [load(data_dir) for _ in range(3)]
        theirs = [baseline(data_dir) for _ in range(3)]
        assert ours[0][1] == theirs[0][1], "the two replays disagree"
        a, b = statistics.median(t for t, _ in ours), statistics.median(t for t, _ in theirs)
        print(f"load of {args.records:,} records: OffsetsLog.load {a:.3f}s, kafka-python replay {b:.3f}s "
              f"({b / a:.1f}x)")
    if args.record:
        write_record(args.record, vars(args),
                     {"commits": commits, "write_s": wrote, "commits_per_s": commits / wrote,
                      "load_s": a, "kafka_python_replay_s": b, "speedup": b / a,
                      "load_samples_s": [t for t, _ in ours], "kafka_python_replay_samples_s": [t for t, _ in theirs]},
                     Scope.LAB)


if __name__ == "__main__":
    main()
