"""``zkconsumer topics create|alter|list|describe``: Kafka's TopicCommand against ZooKeeper."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable

from rich.table import Table

from zkconsumer.cli.output import CliError, as_cli_error, console
from zkconsumer.cli.zkauth import add_zk_auth_args, zk_security_from_args
from zkconsumer.zk.layout import LayoutError
from zkconsumer.zk.registry import Registry, TopicExistsError, UnknownTopicError, ZkConnectError
from zkconsumer.zk.topics import AdminOperationError, add_partitions, create_topic, describe_topic


def add_zookeeper_arg(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("--zookeeper", "--zookeeper.connect", dest="zookeeper", required=required,
                   metavar="HOST:PORT[/CHROOT]", help="zookeeper.connect")


def add_zookeeper_tool_args(p: argparse.ArgumentParser) -> None:
    """``--zookeeper`` and the credentials to authenticate with (:func:`add_zk_auth_args`)."""
    add_zookeeper_arg(p)
    add_zk_auth_args(p)


def zookeeper_action(actions: argparse._SubParsersAction, name: str, help: str,
                     func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """An ACTION of a tool that works on ZooKeeper: ``--zookeeper``, its credentials, and the command it runs."""
    p = actions.add_parser(name, help=help)
    add_zookeeper_tool_args(p)
    p.set_defaults(func=func)
    return p


def print_names(args: argparse.Namespace, names: Callable[[Registry], Iterable[str]]) -> int:
    """A ``list`` action: the names read from ZooKeeper, one a line, as Kafka's tools print them."""
    with open_registry(args) as reg:
        for name in names(reg):
            print(name)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    topics = sub.add_parser("topics", help="create, grow, list and describe topics in ZooKeeper")
    tsub = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    create = zookeeper_action(tsub, "create", "create a topic (replicas over the registered brokers, or broker 0)",
                              cmd_create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, required=True)
    create.add_argument("--replication-factor", type=int, default=1)
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")

    alter = zookeeper_action(tsub, "alter", "grow a topic's partition count (it never shrinks)", cmd_alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument("--partitions", type=int, required=True)

    zookeeper_action(tsub, "list", "list topics", cmd_list)

    desc = zookeeper_action(tsub, "describe", "show partitions and replicas", cmd_describe)
    desc.add_argument("--topic", action="append", help="topic(s); all when omitted")
    desc.add_argument("--json", action="store_true")


def open_registry(args: argparse.Namespace):
    """``Registry.open(--zookeeper)`` authenticated as the tool's credentials say, a connection failure turned
    into one clear CLI error."""
    security = zk_security_from_args(args)
    try:
        return Registry.open(args.zookeeper, security=security)
    except ZkConnectError as e:
        raise CliError(str(e)) from None


def cmd_create(args: argparse.Namespace) -> int:
    with open_registry(args) as reg, as_cli_error(TopicExistsError, LayoutError, AdminOperationError):
        try:
            assignment = create_topic(reg, args.topic, args.partitions, args.replication_factor)
        except TopicExistsError:
            if args.if_not_exists:
                return 0
            raise
    console.print(f'Created topic "{args.topic}" with {len(assignment)} partition(s).', highlight=False)
    return 0


def cmd_alter(args: argparse.Namespace) -> int:
    with open_registry(args) as reg:
        try:
            new = add_partitions(reg, args.topic, args.partitions)
        except (UnknownTopicError, AdminOperationError, LayoutError) as e:
            raise CliError(str(e).strip("'\"")) from None
    console.print(f"Adding partitions succeeded! ({len(new)} new: {sorted(new)})", highlight=False)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    return print_names(args, Registry.topics)


def cmd_describe(args: argparse.Namespace) -> int:
    with open_registry(args) as reg:
        names = args.topic or reg.topics()
        try:
            descs = [describe_topic(reg, t) for t in names]
        except (UnknownTopicError, LayoutError) as e:
            raise CliError(str(e).strip("'\"")) from None
    if args.json:
        print(json.dumps({d.topic: {str(p): r for p, r in d.partitions.items()} for d in descs}))
        return 0
    for d in descs:
        console.print(f"Topic:{d.topic}\tPartitionCount:{len(d.partitions)}\t"
                      f"ReplicationFactor:{d.replication_factor}", highlight=False)
        table = Table(show_header=True, box=None, pad_edge=False)
        for col in ("Partition", "Replicas", "Live replicas"):
            table.add_column(col)
        live = set(d.live_brokers)
        for p, replicas in d.partitions.items():
            table.add_row(str(p), ",".join(map(str, replicas)),
                          ",".join(str(r) for r in replicas if r in live) or "-")
        console.print(table)
    return 0
