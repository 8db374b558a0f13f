"""``zkconsumer produce``: write numbered records that consumers can check for loss, duplicates and order.

Each value is :func:`zkconsumer.records.encode_value` (topic, partition, per-partition sequence number). The
partition is chosen here, before sending, so the value can name it: round-robin without keys, Kafka's
murmur2 hash of the key with ``--key-pattern seq`` (the partition the Java client would pick), and a fixed key
per partition with ``--key-pattern partition``.
"""

from __future__ import annotations

import argparse
import time

from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka.partitioner import murmur2
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from zkconsumer import broker_version
from zkconsumer.cli.output import CliError, console, err_console
from zkconsumer.records import encode_value

KEY_PATTERNS = ("none", "seq", "partition")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("produce", help="write numbered JSON records (topic, partition, seq) with kafka-python")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="bootstrap.servers")
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, default=1000, help="records to write (default 1000)")
    p.add_argument("--rate", type=float, default=0.0, help="records per second; 0 (default) is as fast as possible")
    p.add_argument("--key-pattern", choices=KEY_PATTERNS, default="none",
                   help="none: no key, round-robin; seq: key = running number, murmur2-partitioned; "
                        "partition: key = partition number")
    p.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"])
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for the broker, and for outstanding acknowledgements at the end")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_produce)


def choose_partition(pattern: str, n: int, partitions: int) -> tuple[int, bytes | None]:
    """(partition, key) of the ``n``-th record (0-based) among ``partitions`` partitions."""
    if pattern == "seq":
        key = str(n).encode()
        return (murmur2(key) & 0x7FFFFFFF) % partitions, key
    partition = n % partitions
    return partition, (str(partition).encode() if pattern == "partition" else None)


def cmd_produce(args: argparse.Namespace) -> int:
    if args.count < 0:
        raise CliError("--count must be >= 0")
    acks = -1 if args.acks == "all" else int(args.acks)
    version = broker_version.client_settings(args.bootstrap_server)  # a 0.8/0.9 broker refuses ApiVersions
    try:
        producer = KafkaProducer(bootstrap_servers=args.bootstrap_server, acks=acks, linger_ms=args.linger_ms,
                                 enable_idempotence=acks == -1 and broker_version.supports(
                                     version.get("api_version"), (0, 11)),
                                 client_id="zkconsumer-produce", bootstrap_timeout_ms=int(args.timeout * 1000),
                                 **version)
    except KafkaError as e:
        raise CliError(f"cannot connect to {args.bootstrap_server}: {e}") from None
    acked = failed = 0
    first_error: list[BaseException] = []

    def on_ok(_metadata) -> None:
        nonlocal acked
        acked += 1

    def on_error(exc: BaseException) -> None:
        nonlocal failed
        failed += 1
        if not first_error:
            first_error.append(exc)

    try:
        try:
            partitions = sorted(producer.partitions_for(args.topic) or [])
        except KafkaError as e:
            raise CliError(f"topic {args.topic}: {e}") from None
        if not partitions:
            raise CliError(f"topic {args.topic} has no partitions (create it with 'zkconsumer topics create')")
        seqs = dict.fromkeys(partitions, 0)
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                   TimeElapsedColumn()]
        started = time.monotonic()
        with Progress(*columns, console=err_console, disable=args.no_progress, transient=False) as progress:
            task = progress.add_task(f"produce {args.topic}", total=args.count)
            for n in range(args.count):
                if args.rate > 0:
                    delay = started + n / args.rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                index, key = choose_partition(args.key_pattern, n, len(partitions))
                partition = partitions[index]
                value = encode_value(args.topic, partition, seqs[partition])
                seqs[partition] += 1
                future = producer.send(args.topic, value=value, key=key, partition=partition)
                future.add_callback(on_ok)
                future.add_errback(on_error)
                if n % 1000 == 999:
                    progress.update(task, completed=acked if acks != 0 else n + 1)
            producer.flush(timeout=args.timeout)
            progress.update(task, completed=acked if acks != 0 else args.count)
        elapsed = time.monotonic() - started
    finally:
        producer.close(timeout=5)
    rate = args.count / elapsed if elapsed > 0 else 0.0
    summary = f"{args.count} records to {args.topic} ({len(partitions)} partitions) in {elapsed:.1f}s, {rate:,.0f}/s"
    if acks != 0:
        summary += f"; acknowledged {acked}, failed {failed}"
    console.print(summary, highlight=False)
    if failed or (acks != 0 and acked < args.count):
        raise CliError(f"{args.count - acked} records not acknowledged"
                       + (f" (first error: {first_error[0]})" if first_error else ""))
    return 0
