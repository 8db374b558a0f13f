"""A commit soak on ``__consumer_offsets``, compacted against not: the topic's size over time and a reload after it.

    .venv/bin/python benchmarks/offsets_compaction.py [--minutes 60] [--groups 50] [--partitions 10]
        [--interval-ms 5000] [--segment-bytes 65536] [--checkpoints 15,30,60]

The workload is an hour of auto-commits, time-compressed: ``--groups`` groups each commit ``--partitions`` offsets
every ``--interval-ms`` of simulated time, through ``OffsetsLog.commit`` (each commit fsynced, as the coordinator
does), with the log cleaner run every ``log.cleaner.backoff.ms`` (15 s) of simulated time under its dirty-ratio rule.
Segments are ``--segment-bytes`` (Kafka's ``offsets.topic.segment.bytes`` is 100 MiB, sized for a cluster's volume;
a smaller one makes an hour of one machine's commits roll as many segments). The baseline is the same workload on a
log that is not compacted (the broker before issue 52), written in the same run. At each checkpoint (simulated
minutes) both logs are closed and reloaded on a fresh LogManager (median of 3 loads) and must load the same offsets.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from records import write_record

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator.offsets_log import OFFSETS_TOPIC, OffsetsLog
from zkconsumer.coordinator.store import CommittedOffset
from zkconsumer.log.cleaner import CleanerConfig
from zkconsumer.log.storage import LogConfig, LogManager
from zkconsumer.results.record import Scope

CLEANER_BACKOFF_MS = 15_000


def config(compacted: bool, segment_bytes: int) -> LogConfig:
    # the background thread never cleans (its backoff is a day): the soak cleans on its own simulated clock
    return LogConfig(compacted_topics=frozenset({OFFSETS_TOPIC}) if compacted else frozenset(),
                     topic_segment_bytes=((OFFSETS_TOPIC, segment_bytes),),
                     cleaner=CleanerConfig(backoff_ms=86_400_000))


def topic_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.glob(f"{OFFSETS_TOPIC}-*/*.log"))


def segments(data_dir: Path) -> int:
    return len(list(data_dir.glob(f"{OFFSETS_TOPIC}-*/*.log")))


def reload(data_dir: Path, cfg: LogConfig) -> tuple[float, dict]:
    times, offsets = [], {}
    for _ in range(3):
        logs = LogManager(data_dir, cfg).open()
        store = OffsetsLog(logs)
        started = time.monotonic()
        store.load()
        times.append(time.monotonic() - started)
        offsets = {g: store.fetch(g) for g in store.groups()}
        logs.close()
    return statistics.median(times), offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--interval-ms", type=int, default=5000)
    parser.add_argument("--segment-bytes", type=int, default=64 << 10)
    parser.add_argument("--checkpoints", default="15,30,60", help="simulated minutes at which both logs reload")
    parser.add_argument("--record", type=Path, help="also write the result as JSON (command, date, commit, machine, "
                                                     "figures) to this file")
    args = parser.parse_args()
    checkpoints = sorted({int(m) for m in args.checkpoints.split(",") if int(m) <= args.minutes} | {args.minutes})
    rounds_per_minute = 60_000 // args.interval_ms
    cleans_every = max(1, CLEANER_BACKOFF_MS // args.interval_ms)
    print(f"{args.groups} groups x {args.partitions} partitions, a commit every {args.interval_ms} ms for "
          f"{args.minutes} simulated minutes ({args.groups * rounds_per_minute * args.minutes:,} commits, "
          f"{args.groups * args.partitions * rounds_per_minute * args.minutes:,} records), segments of "
          f"{args.segment_bytes:,} bytes")
    with tempfile.TemporaryDirectory(prefix="offsets-compaction-") as tmp:
        dirs = {name: Path(tmp) / name for name in ("compacted", "plain")}
        cfgs = {"compacted": config(True, args.segment_bytes), "plain": config(False, args.segment_bytes)}
        stores = {name: OffsetsLog(LogManager(dirs[name], cfgs[name]).open()) for name in dirs}
        peak = {name: 0 for name in dirs}
        rows = []
        commit_round = 0
        wall = time.monotonic()
        cleaning_s = 0.0
        for minute in range(1, args.minutes + 1):
            for _ in range(rounds_per_minute):
                commit_round += 1
                now_ms = commit_round * args.interval_ms
                for g in range(args.groups):
                    offsets = {TopicPartition("orders", p): CommittedOffset(commit_round * 10 + p, "", now_ms)
                               for p in range(args.partitions)}
                    for store in stores.values():
                        store.commit(f"group-{g}", offsets)
                if commit_round % cleans_every == 0:
                    started = time.monotonic()
                    stores["compacted"].logs.clean_compacted()
                    cleaning_s += time.monotonic() - started
                    for name in dirs:
                        peak[name] = max(peak[name], topic_bytes(dirs[name]))
            if minute in checkpoints:
                for store in stores.values():
                    store.logs.close()
                row = {"minute": minute}
                loaded = {}
                for name in dirs:
                    row[f"{name}_bytes"] = topic_bytes(dirs[name])
                    row[f"{name}_segments"] = segments(dirs[name])
                    row[f"{name}_reload_s"], loaded[name] = reload(dirs[name], cfgs[name])
                assert loaded["compacted"] == loaded["plain"], "the two logs load different offsets"
                rows.append(row)
                print(f"  minute {minute}: written for {time.monotonic() - wall:.0f}s of wall", flush=True)
                stores = {name: OffsetsLog(LogManager(dirs[name], cfgs[name]).open()) for name in dirs}
                for store in stores.values():
                    store.load()
        for store in stores.values():
            store.logs.close()
    print(f"cleaning took {cleaning_s:.1f}s of the soak's {time.monotonic() - wall:.0f}s; peak size compacted "
          f"{peak['compacted'] / 1e6:.2f} MB, not compacted {peak['plain'] / 1e6:.2f} MB")
    print()
    print("| simulated minutes | compacted: MB (segments) | not compacted: MB (segments) | size ratio | "
          "reload compacted | reload not compacted | reload ratio |")
    print("|---|---|---|---|---|---|---|")
    if args.record:
        write_record(args.record, vars(args), {"rows": rows, "peak_bytes": peak, "cleaning_s": round(cleaning_s, 3)},
                     Scope.LAB)
    for r in rows:
        print(f"| {r['minute']} | {r['compacted_bytes'] / 1e6:.2f} ({r['compacted_segments']}) | "
              f"{r['plain_bytes'] / 1e6:.2f} ({r['plain_segments']}) | "
              f"{r['compacted_bytes'] / r['plain_bytes']:.3f} | {r['compacted_reload_s'] * 1000:.0f} ms | "
              f"{r['plain_reload_s'] * 1000:.0f} ms | {r['compacted_reload_s'] / r['plain_reload_s']:.3f} |")


if __name__ == "__main__":
    main()
