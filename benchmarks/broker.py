"""Throughput of the local broker with kafka-python, against the raw speed of appending to a plain file.

    .venv/bin/python benchmarks/broker.py [--records 1000000] [--size 100] [--partitions 4] [--record FILE]

Starts a ZooKeeper and the broker (as its own process, ``python -m zkconsumer broker start``, so client and
broker each get a core and a GIL), produces ``--records`` values of ``--size`` bytes with KafkaProducer,
reads them all back with KafkaConsumer (assign + seek, no group), then appends the same bytes to a plain
file, one write per record, and fsyncs it. MB/s counts value bytes only (1 MB = 10^6 bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from records import write_record

from zkconsumer.results.record import Scope
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import ZooKeeperServer
from zkconsumer.zk.topics import create_topic

TOPIC = "bench"


def start_broker(zk_connect: str, data_dir: Path, flush_interval_ms: int | None) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "zkconsumer", "broker", "start", "--zookeeper", zk_connect,
           "--data-dir", str(data_dir)]
    if flush_interval_ms is not None:
        cmd += ["--flush-interval-ms", str(flush_interval_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            state = json.loads((data_dir / "zkconsumer-broker.json").read_text())
            if state["pid"] == proc.pid:
                return proc, state["bootstrap"]
        except (FileNotFoundError, ValueError, KeyError):
            pass
        if proc.poll() is not None:
            raise SystemExit(f"the broker exited with code {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the broker did not start within 60s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``), to show which side of the socket is busy."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def measured(pid: int, fn, *args) -> tuple[float, float, float]:
    """(wall seconds, client CPU seconds, broker CPU seconds) of ``fn(*args)``."""
    broker0, client0 = cpu_seconds(pid), time.process_time()
    wall = fn(*args)
    return wall, time.process_time() - client0, cpu_seconds(pid) - broker0


def payloads(n: int, size: int) -> list[bytes]:
    """Distinct values (a record number padded to ``size``), built before timing starts."""
    return [(b"%d" % i).ljust(size, b".") for i in range(n)]


def bench_produce(bootstrap: str, values: list[bytes], partitions: int, acks: int) -> float:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=10, batch_size=256 * 1024,
                             enable_idempotence=acks == -1)
    started = time.perf_counter()
    for i, v in enumerate(values):
        producer.send(TOPIC, value=v, partition=i % partitions)
    producer.flush(timeout=600)
    elapsed = time.perf_counter() - started
    producer.close(timeout=10)
    return elapsed


def bench_consume(bootstrap: str, total: int, partitions: int) -> float:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=16 * 1024 * 1024, max_partition_fetch_bytes=4 * 1024 * 1024)
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, 0)
    seen = 0
    started = time.perf_counter()
    while seen < total:
        for records in consumer.poll(timeout_ms=1000, max_records=50_000).values():
            seen += len(records)
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def bench_file(path: Path, values: list[bytes]) -> float:
    started = time.perf_counter()
    with open(path, "ab") as f:
        for v in values:
            f.write(v)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--acks", type=int, default=1, choices=[0, 1, -1])
    parser.add_argument("--flush-interval-ms", type=int, default=None, help="the broker's (default: OS decides)")
    parser.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = parser.parse_args()

    values = payloads(args.records, args.size)
    megabytes = args.records * args.size / 1e6
    with tempfile.TemporaryDirectory(prefix="zkconsumer-bench-") as tmp, ZooKeeperServer(servers=1) as zk:
        zk_connect = zk.connect_string + "/bench"
        with Registry.open(zk_connect) as reg:
            create_topic(reg, TOPIC, args.partitions)
        proc, bootstrap = start_broker(zk_connect, Path(tmp) / "broker", args.flush_interval_ms)
        try:
            produce = measured(proc.pid, bench_produce, bootstrap, values, args.partitions, args.acks)
            consume = measured(proc.pid, bench_consume, bootstrap, args.records, args.partitions)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        file_s = bench_file(Path(tmp) / "plain.log", values)

    produce_s, consume_s = produce[0], consume[0]
    rows = [("produce (kafka-python -> broker)", produce), ("consume (broker -> kafka-python)", consume),
            ("append to a plain file + fsync", (file_s, file_s, 0.0))]
    print(f"{args.records:,} records x {args.size} B = {megabytes:.0f} MB, {args.partitions} partitions, "
          f"acks={args.acks}, broker flush={args.flush_interval_ms}; {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print(f"  {'':36s} {'wall':>10s} {'MB/s':>9s} {'records/s':>12s} {'client CPU':>11s} {'broker CPU':>11s}")
    for name, (seconds, client_cpu, broker_cpu) in rows:
        print(f"  {name:36s} {seconds:8.2f} s {megabytes / seconds:9.2f} {args.records / seconds:12,.0f} "
              f"{client_cpu:9.1f} s {broker_cpu:9.1f} s")
    print(f"  ratio produce/file {file_s / produce_s:.4f}   consume/file {file_s / consume_s:.4f}")
    if args.record:
        keys = {"produce (kafka-python -> broker)": "produce", "consume (broker -> kafka-python)": "consume",
                "append to a plain file + fsync": "plain_file"}
        figures = {"megabytes": megabytes,
                   "rows": [{"operation": keys[name], "wall_s": seconds, "mb_per_s": megabytes / seconds,
                             "records_per_s": args.records / seconds, "client_cpu_s": client_cpu,
                             "broker_cpu_s": broker_cpu} for name, (seconds, client_cpu, broker_cpu) in rows],
                   "ratio_produce_to_file": file_s / produce_s, "ratio_consume_to_file": file_s / consume_s}
        write_record(args.record, vars(args), figures,
                     Scope.LAB)
    return 0


if __name__ == "__main__":
    sys.exit(main())
