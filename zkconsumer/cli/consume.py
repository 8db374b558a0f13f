"""``zkconsumer consume``: one consumer process, like Kafka's console consumer.

``--mode zookeeper`` (the default) runs a Kafka 0.8 ZooKeeper-coordinated group member; ``--mode coordinator``
runs the same streams on Kafka 0.9+'s broker-side group coordinator (zkconsumer.consumer.coordinated.connector)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.live import Live
from rich.markup import escape
from rich.table import Table

from zkconsumer.cli.output import CliError, console, err_console
from zkconsumer.config import ConfigError, ConsumerConfig, read_properties
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.consumer.librdkafka import RdkafkaMember
from zkconsumer.consumer.zookeeper.connector import ConsumerTimeout, ZookeeperConsumerConnector
from zkconsumer.errors import ZkConsumerError
from zkconsumer.migration.guard import refusal_now
from zkconsumer.migration.member import MigratableConsumer, Subscription
from zkconsumer.types import GroupMode, tp_str
from zkconsumer.zk.layout import MalformedNodeError, blacklist, whitelist
from zkconsumer.zk.registry import Registry, ZkConnectError


def add_consumer_config_args(p: argparse.ArgumentParser) -> None:
    """Flags shared by commands that build a ConsumerConfig (Kafka names first)."""
    p.add_argument("--zookeeper", "--zookeeper.connect", dest="zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="zookeeper.connect; omitted: an embedded ZooKeeper is started")
    p.add_argument("--group", "--group.id", dest="group", help="group.id")
    p.add_argument("--consumer-id", "--consumer.id", dest="consumer_id", help="consumer.id")
    p.add_argument("--properties", "--consumer.config", dest="properties", type=Path, metavar="FILE",
                   help="a consumer.properties file")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="any consumer property, e.g. partition.assignment.strategy=roundrobin")
    p.add_argument("--strategy", "--partition.assignment.strategy", dest="strategy",
                   help="range | roundrobin | roundrobin-relaxed | sticky (coordinator mode only)")
    p.add_argument("--profile", choices=("default", "kafka-0.8"), help="zkconsumer.profile")
    p.add_argument("--bootstrap-server", help="bootstrap.servers of a Kafka cluster (default: brokers in ZooKeeper)")
    p.add_argument("--trace-dir", type=Path, help="write a JSON-lines trace (docs/trace.md)")
    p.add_argument("--from-beginning", action="store_true", help="auto.offset.reset=smallest")


def build_config(args: argparse.Namespace) -> ConsumerConfig:
    props: dict[str, Any] = {}
    if args.properties:
        props.update(read_properties(args.properties))
    for item in args.property:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CliError(f"--property wants KEY=VALUE, got {item!r}")
        props[key.strip()] = value
    flags = {"zookeeper.connect": args.zookeeper, "group.id": args.group, "consumer.id": args.consumer_id,
             "partition.assignment.strategy": args.strategy, "zkconsumer.profile": args.profile,
             "bootstrap.servers": args.bootstrap_server,
             "zkconsumer.trace.dir": str(args.trace_dir) if args.trace_dir else None}
    props.update({k: v for k, v in flags.items() if v is not None})
    if args.from_beginning:
        props["auto.offset.reset"] = "smallest"
    try:
        return ConsumerConfig.from_properties(props)
    except ConfigError as e:
        raise CliError(str(e)) from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consume", help="run one consumer of a ZooKeeper-coordinated (0.8) group, or of a "
                                        "coordinator-managed (0.9+) one with --mode coordinator")
    add_consumer_config_args(p)
    # plain strings: argparse's error for a wrong one lists the choices by their repr
    p.add_argument("--mode", choices=[m.value for m in GroupMode], default=GroupMode.ZOOKEEPER.value,
                   help="zookeeper: Kafka 0.8's ZooKeeper group (default); coordinator: the broker's group "
                        "coordinator (needs --bootstrap-server, or --zookeeper with registered brokers)")
    p.add_argument("--client", choices=("kafka-python", "librdkafka"), default="kafka-python",
                   help="coordinator mode's client: kafka-python (default; the streams API) or librdkafka "
                        "(confluent-kafka), which also speaks the consumer protocol of KIP-848 "
                        "(--property group.protocol=consumer)")
    p.add_argument("--migratable", action="store_true",
                   help="follow `zkconsumer migrate`: switch between ZooKeeper and coordinator mode when the "
                        "group's migration plan says so (docs/migration.md)")
    p.add_argument("--topic", action="append", default=[], help="topic (repeat for several)")
    p.add_argument("--whitelist", help="subscribe by regex instead of --topic")
    p.add_argument("--blacklist", help="subscribe to every topic not matching the regex")
    p.add_argument("--streams", type=int, default=1, help="streams (threads) per topic")
    p.add_argument("--max-messages", type=int, default=0, help="stop after this many records")
    p.add_argument("--output", choices=("value", "record", "rate", "none"), default="value",
                   help="print each value, each record with its offset, a live rate, or nothing")
    p.set_defaults(func=cmd_consume)


def cmd_consume(args: argparse.Namespace) -> int:
    config = build_config(args)
    if sum(bool(x) for x in (args.topic, args.whitelist, args.blacklist)) != 1:
        raise CliError("give --topic (one or more), or --whitelist, or --blacklist")
    if args.streams < 1:
        raise CliError("--streams must be >= 1")
    stop = threading.Event()

    def on_signal(signum, frame) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.client == "librdkafka":
        return _consume_librdkafka(args, config, stop)
    if config.get("group.protocol") != "classic":
        raise CliError("group.protocol=consumer (KIP-848) needs --client librdkafka: kafka-python speaks the "
                       "classic protocol only")
    if args.migratable:
        return _consume_migratable(args, config, stop)
    _refuse_during_migration(config, GroupMode(args.mode))
    try:
        if args.mode == GroupMode.COORDINATOR:
            connector = CoordinatorConsumerConnector(config)
        else:
            connector = ZookeeperConsumerConnector(config)
    except ZkConsumerError as e:  # ZooKeeper or Kafka unreachable, a property refused, the consumer id in use
        raise CliError(str(e)) from None
    printer = _Printer(args, stop)
    try:
        try:
            if args.topic:
                streams = [s for ss in connector.create_message_streams(
                    {t: args.streams for t in args.topic}).values() for s in ss]
            else:
                tf = whitelist(args.whitelist) if args.whitelist else blacklist(args.blacklist)
                streams = connector.create_message_streams_by_filter(tf, args.streams)
        except ZkConsumerError as e:  # the first rebalance failed, a topic name or stream count refused
            raise CliError(str(e)) from None
        err_console.print(f"consumer {connector.consumer_id} joined group {config.group_id}", highlight=False)

        threads = [threading.Thread(target=printer.consume, args=(s,), daemon=True) for s in streams]
        for t in threads:
            t.start()
        if args.output == "rate":
            _live_rate(connector, printer.count, stop)
        else:
            while not stop.wait(0.2):
                pass
    finally:
        sys.stdout.flush()
        connector.shutdown()
    return printer.finish()


class _Printer:
    """What every stream thread does with its records (``--output``, ``--max-messages``), and the end report."""

    def __init__(self, args: argparse.Namespace, stop: threading.Event) -> None:
        self.args = args
        self.stop = stop
        self.count = [0]  # a list: _live_rate reads it while the threads add to it
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []

    def consume(self, stream) -> None:
        args, stop = self.args, self.stop
        try:
            for record in stream:
                with self.lock:
                    if args.max_messages and self.count[0] >= args.max_messages:
                        return  # another stream printed the last one: this record stays unprocessed (uncommitted)
                    self.count[0] += 1
                    if args.output in ("value", "record"):
                        value = (record.value or b"").decode("utf-8", "replace")
                        sys.stdout.write(value + "\n" if args.output == "value" else
                                         f"{record.topic}\t{record.partition}\t{record.offset}\t{value}\n")
                    stream.ack()  # printed is processed: committable now, whichever way this thread leaves
                    if args.max_messages and self.count[0] >= args.max_messages:
                        # the N-th record ends the run now, as Kafka's console consumer does, not when an N+1-th
                        # arrives (which may never happen)
                        stop.set()
                        return
                if stop.is_set():
                    return
        except ConsumerTimeout:
            stop.set()
        except BaseException as e:  # noqa: BLE001 - reported and ends the process
            self.errors.append(e)
            stop.set()

    def finish(self) -> int:
        if self.errors:
            raise CliError(f"{type(self.errors[0]).__name__}: {self.errors[0]}")
        err_console.print(f"Processed a total of {self.count[0]} messages", highlight=False)
        return 0


def _consume_librdkafka(args: argparse.Namespace, config: ConsumerConfig, stop: threading.Event) -> int:
    """``--client librdkafka``: a coordinator-mode member on confluent-kafka (consumer/librdkafka.py)."""
    if args.mode != GroupMode.COORDINATOR or args.migratable:
        raise CliError("--client librdkafka is a coordinator-mode member: add --mode coordinator (no --migratable)")
    if not args.topic:
        raise CliError("--client librdkafka subscribes to --topic names (no --whitelist / --blacklist)")
    try:
        member = RdkafkaMember(config, args.topic)
    except ConfigError as e:
        raise CliError(str(e)) from None
    err_console.print(f"consumer {member.consumer_id} joining group {config.group_id} (librdkafka, "
                      f"group.protocol={member.protocol})", highlight=False)
    count = [0]

    def on_record(msg) -> bool:
        count[0] += 1
        if args.output in ("value", "record"):
            value = (msg.value() or b"").decode("utf-8", "replace")
            sys.stdout.write(value + "\n" if args.output == "value" else
                             f"{msg.topic()}\t{msg.partition()}\t{msg.offset()}\t{value}\n")
        return not (args.max_messages and count[0] >= args.max_messages)

    member.run(stop, on_record)
    sys.stdout.flush()
    if member.error and not stop.is_set() and not (args.max_messages and count[0] >= args.max_messages):
        raise CliError(f"librdkafka: {member.error}")
    err_console.print(f"Processed a total of {count[0]} messages", highlight=False)
    return 0


def _refuse_during_migration(config: ConsumerConfig, mode: GroupMode) -> None:
    """A member without --migratable does not join a group in the middle of a migration (docs/migration.md)."""
    if not config.zookeeper_connect:
        return  # coordinator mode on bootstrap servers alone: no plan to read
    try:
        with Registry.open(config.zookeeper_connect, session_timeout_ms=config.session_timeout_ms) as reg:
            reason = refusal_now(reg, config.group_id, mode)
    except ZkConnectError as e:
        raise CliError(str(e)) from None
    except MalformedNodeError as e:
        raise CliError(f"cannot tell whether group {config.group_id} is being migrated: {e}") from None
    if reason:
        raise CliError(reason)


def _consume_migratable(args: argparse.Namespace, config: ConsumerConfig, stop: threading.Event) -> int:
    """``--migratable``: the same output, from whichever connector the migration plan asks for."""
    if args.mode != GroupMode.ZOOKEEPER:
        raise CliError("--migratable starts in the mode the group's migration plan gives (default: zookeeper); "
                       "leave out --mode")
    if not config.zookeeper_connect:
        raise CliError("--migratable needs --zookeeper: the migration plan lives there")
    if args.topic:
        subscription = Subscription(topics={t: args.streams for t in args.topic})
    else:
        tf = whitelist(args.whitelist) if args.whitelist else blacklist(args.blacklist)
        subscription = Subscription(topic_filter=tf, streams=args.streams)
    try:
        member = MigratableConsumer(config, subscription)
    except (ZkConnectError, ConfigError) as e:
        raise CliError(str(e)) from None
    printer = _Printer(args, stop)

    def started(connector) -> None:
        err_console.print(f"consumer {member.consumer_id} runs in {member.mode} mode"
                          f"{' (bridged to ZooKeeper)' if member.bridged else ''} in group {config.group_id}",
                          highlight=False)

    try:
        member.run(printer.consume, stop, on_start=started)
    except ZkConsumerError as e:
        raise CliError(str(e)) from None
    finally:
        sys.stdout.flush()
    return printer.finish()


def _live_rate(connector: ZookeeperConsumerConnector | CoordinatorConsumerConnector, count: list[int],
               stop: threading.Event) -> None:
    last, last_t = 0, time.monotonic()
    rate = 0.0

    def render() -> Table:
        table = Table(title=f"{connector.consumer_id}")
        table.add_column("records")
        table.add_column("records/s")
        table.add_column("owned partitions")
        owned = connector.owned_partitions()
        table.add_row(str(count[0]), f"{rate:,.0f}", " ".join(sorted(map(tp_str, owned))) or "-")
        stall = getattr(connector, "stall", None)  # coordinator mode: a join not complete within the rebalance timeout
        if stall is not None:
            table.caption = f"[yellow]{escape(stall.summary())}[/]"
        return table

    with Live(render(), console=console, refresh_per_second=4) as live, _log_above(live):
        while not stop.wait(0.5):
            now = time.monotonic()
            rate = (count[0] - last) / (now - last_t)
            last, last_t = count[0], now
            live.update(render())


@contextlib.contextmanager
def _log_above(live: Live):
    """While the live table is drawn, warnings (a stalled join, a failed commit) go to stderr above it rather than
    through it: the log handlers writing to the real stderr write to the live display's stderr proxy instead."""
    moved = [h for h in logging.getLogger().handlers
             if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is sys.__stderr__]
    if not live.is_started or sys.stderr is sys.__stderr__:
        yield
        return
    for h in moved:
        h.setStream(sys.stderr)
    try:
        yield
    finally:
        for h in moved:
            h.setStream(sys.__stderr__)
