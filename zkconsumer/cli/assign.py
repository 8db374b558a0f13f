"""``zkconsumer assign``: print a whole group's assignment under a strategy, from flags or from ZooKeeper."""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from zkconsumer.assignment.assignors import (
    STRATEGIES,
    AssignmentContext,
    AssignmentError,
    RoundRobinPreconditionError,
    assign,
)
from zkconsumer.cli.output import CliError, console
from zkconsumer.tools.groups import subscribed_topics
from zkconsumer.zk.layout import LayoutError
from zkconsumer.zk.registry import Registry, ZkConnectError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "assign", help="compute a group's partition assignment (range, roundrobin, roundrobin-relaxed)",
        description="Members are consumer ids with streams per topic: --member c0:t0=1,t1=2. Topics are "
                    "name:partition-count. With --zookeeper and --group, members and topics are read from "
                    "the live group instead.")
    p.add_argument("--strategy", "--partition.assignment.strategy", dest="strategy", default="range",
                   choices=sorted(STRATEGIES), help="default range (Kafka's default)")
    p.add_argument("--topic", action="append", default=[], metavar="NAME:PARTITIONS")
    p.add_argument("--member", action="append", default=[], metavar="CONSUMER_ID:TOPIC=STREAMS,...")
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]", help="read members and topics from ZooKeeper")
    p.add_argument("--group", help="group id, with --zookeeper")
    p.add_argument("--json", action="store_true", help='print {"assignment": {thread: ["topic-p", ...]}}')
    p.set_defaults(func=cmd_assign)


def parse_topic(spec: str) -> tuple[str, list[int]]:
    name, sep, count = spec.rpartition(":")
    if not sep or not name:
        raise CliError(f"--topic wants NAME:PARTITIONS, got {spec!r}")
    try:
        n = int(count)
    except ValueError:
        raise CliError(f"--topic {spec!r}: partition count {count!r} is not an integer") from None
    if n < 0:
        raise CliError(f"--topic {spec!r}: partition count must be >= 0")
    return name, list(range(n))


def parse_member(spec: str) -> tuple[str, dict[str, int]]:
    cid, sep, subs = spec.partition(":")
    if not sep or not cid:
        raise CliError(f"--member wants CONSUMER_ID:TOPIC=STREAMS[,TOPIC=STREAMS], got {spec!r}")
    out: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in subs.split(","))):
        topic, eq, streams = item.partition("=")
        try:
            n = int(streams) if eq else 1
        except ValueError:
            raise CliError(f"--member {spec!r}: stream count {streams!r} is not an integer") from None
        if n < 1:
            raise CliError(f"--member {spec!r}: stream count must be >= 1")
        out[topic] = n
    return cid, out


def context_from_zookeeper(zk_connect: str, group: str) -> AssignmentContext:
    try:
        with Registry.open(zk_connect) as reg:
            subs = subscribed_topics(reg, group)
            topics = {t for s in subs.values() for t in s}
            return AssignmentContext(subs, reg.partitions_for_topics(sorted(topics)))
    except (ZkConnectError, LayoutError) as e:
        raise CliError(str(e)) from None


def cmd_assign(args: argparse.Namespace) -> int:
    if args.zookeeper:
        if not args.group:
            raise CliError("--zookeeper needs --group")
        ctx = context_from_zookeeper(args.zookeeper, args.group)
    else:
        if not args.member:
            raise CliError("give at least one --member (or --zookeeper and --group)")
        partitions = dict(parse_topic(t) for t in args.topic)
        members = dict(parse_member(m) for m in args.member)
        unknown = sorted({t for s in members.values() for t in s} - set(partitions))
        if unknown:
            raise CliError(f"members subscribe to topics without --topic: {', '.join(unknown)}")
        ctx = AssignmentContext(members, partitions)
    try:
        result = assign(args.strategy, ctx)
    except RoundRobinPreconditionError as e:
        raise CliError(str(e).rstrip("\n"), code=2) from None
    except AssignmentError as e:
        raise CliError(str(e), code=2) from None
    by_thread = result.by_thread()
    if args.json:
        print(json.dumps({"assignment": by_thread}))
        return 0
    table = Table(title=f"{args.strategy} assignment")
    table.add_column("consumer thread id")
    table.add_column("count", justify="right")
    table.add_column("partitions")
    for tid, parts in by_thread.items():
        table.add_row(tid, str(len(parts)), " ".join(parts) or "[dim](none)[/]")
    console.print(table)
    for tid, topic in result.idle_threads():
        console.print(f"[yellow]WARN[/] No broker partitions consumed by consumer thread {tid} for topic {topic}",
                      highlight=False)
    return 0
