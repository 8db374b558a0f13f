"""``zkconsumer groups list|describe|delete``, ``offset-checker``, ``offsets export|import`` and ``verify``:
Kafka's group tools."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kazoo.security import OPEN_ACL_UNSAFE
from rich.table import Table

from zkconsumer.cli.output import CliError, as_cli_error, console
from zkconsumer.cli.topics import zookeeper_action
from zkconsumer.cli.zkauth import add_zk_auth_args, open_registry, zk_security_from_args
from zkconsumer.tools import groups as group_tools
from zkconsumer.tools.offset_checker import check
from zkconsumer.zk.layout import LayoutError


def register(sub: argparse._SubParsersAction) -> None:
    groups = sub.add_parser("groups", help="list, describe (offsets, lag, owners) and delete 0.8 groups")
    gsub = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    zookeeper_action(gsub, "list", "list groups under /consumers", cmd_list)
    desc = zookeeper_action(gsub, "describe", "TOPIC PARTITION OFFSET LOG-END-OFFSET LAG OWNER", cmd_describe)
    desc.add_argument("--group", required=True)
    desc.add_argument("--bootstrap-server", help="brokers for log-end offsets (default: from /brokers/ids)")
    desc.add_argument("--json", action="store_true")
    delete = zookeeper_action(gsub, "delete", "delete a group's tree (refused while consumers are registered)",
                              cmd_delete)
    delete.add_argument("--group", required=True)

    checker = sub.add_parser("offset-checker", help="Kafka 0.8's ConsumerOffsetChecker: Group Topic Pid Offset "
                                                    "logSize Lag Owner")
    checker.add_argument("--zookeeper", "--zookeeper.connect", dest="zookeeper", default="localhost:2181",
                         metavar="HOST:PORT[/CHROOT]", help="zookeeper.connect (default localhost:2181, as Kafka)")
    checker.add_argument("--group", required=True)
    checker.add_argument("--topic", help="comma-separated topics (default: the group's topics under owners/)")
    checker.add_argument("--broker-info", action="store_true", help="print the leaders asked for logSize")
    checker.add_argument("--socket.timeout.ms", dest="socket_timeout_ms", type=int, default=6000,
                         help="timeout of the log-end offset queries (Kafka's default 6000)")
    checker.add_argument("--bootstrap-server", help="brokers for logSize (default: from /brokers/ids)")
    add_zk_auth_args(checker)
    checker.set_defaults(func=cmd_offset_checker)

    secure = zookeeper_action(gsub, "secure", "give a group's existing nodes its ACL (zookeeper.set.acl; Kafka's "
                                              "zookeeper-security-migration for one group)", cmd_secure)
    secure.add_argument("--group", required=True)
    secure.add_argument("--unsecure", action="store_true", help="open the group's nodes to everyone again")

    offsets = sub.add_parser("offsets", help="export / import committed offsets (Kafka's line format)")
    osub = offsets.add_subparsers(dest="offsets_command", metavar="ACTION", required=True)
    exp = zookeeper_action(osub, "export", "print /consumers/<g>/offsets/<t>/<p>:<offset> lines", cmd_export)
    exp.add_argument("--group", action="append", help="repeatable; every group when omitted (as ExportZkOffsets)")
    exp.add_argument("--output-file", type=Path)
    imp = zookeeper_action(osub, "import", "write offsets from an export file", cmd_import)
    imp.add_argument("--input-file", type=Path, required=True, help="'-' reads standard input")
    imp.add_argument("--force", action="store_true", help="even while the group has live consumers")

    ver = zookeeper_action(sub, "verify", "every partition owned by a live consumer thread? (VerifyConsumerRebalance)",
                           cmd_verify)
    ver.add_argument("--group", required=True)


def cmd_list(args: argparse.Namespace) -> int:
    with open_registry(args) as reg:  # this module's open_registry: --property's ZooKeeper timeouts too
        for name in reg.groups():
            print(name)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with open_registry(args) as reg, as_cli_error(group_tools.GroupError, LayoutError):
        rows = group_tools.describe(reg, args.group, args.bootstrap_server)
    if args.json:
        print(json.dumps([{"topic": r.topic, "partition": r.partition, "offset": r.offset, "log_end_offset":
                           r.log_end, "lag": r.lag, "owner": r.owner} for r in rows]))
        return 0
    table = Table(box=None, title=f"GROUP {args.group}", title_justify="left")
    for col in ("TOPIC", "PARTITION", "OFFSET", "LOG-END-OFFSET", "LAG", "OWNER"):
        table.add_column(col, justify="right" if col in ("PARTITION", "OFFSET", "LOG-END-OFFSET", "LAG") else "left")

    def show(v: object) -> str:
        return "-" if v is None else str(v)

    for r in rows:
        table.add_row(r.topic, str(r.partition), show(r.offset), show(r.log_end), show(r.lag), r.owner or "none")
    console.print(table)
    return 0


def cmd_offset_checker(args: argparse.Namespace) -> int:
    topics = [t for t in args.topic.split(",") if t] if args.topic is not None else None
    with open_registry(args) as reg, as_cli_error(group_tools.GroupError, LayoutError):
        report = check(reg, args.group, topics, args.bootstrap_server, args.socket_timeout_ms)
    print("\n".join(report.lines(args.broker_info)))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with open_registry(args) as reg, as_cli_error(group_tools.GroupError):
        group_tools.delete_group(reg, args.group)
    console.print(f"Deleted all consumer group information for group {args.group} in zookeeper.", highlight=False)
    return 0


def cmd_secure(args: argparse.Namespace) -> int:
    security = zk_security_from_args(args)
    if not security.set_acl and not args.unsecure:
        raise CliError("groups secure needs zookeeper.set.acl=true and the group's credentials "
                       "(--consumer.config FILE or --property KEY=VALUE)")
    acl = OPEN_ACL_UNSAFE if args.unsecure else security.group_acl()
    with open_registry(args) as reg:
        if args.group not in reg.groups():
            raise CliError(f"Consumer group {args.group} does not exist.")
        changed = reg.set_group_acl(args.group, acl)
        left = reg.unprotected_group_nodes(args.group, acl)  # nodes created meanwhile by a client without the ACL
    if left:
        raise CliError(f"{len(left)} node(s) were created meanwhile without the ACL, e.g. {left[0]}; run again")
    what = "opened to everyone" if args.unsecure else f"protected ({security.describe()})"
    console.print(f"{changed} node(s) of group {args.group} {what}", highlight=False)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with open_registry(args) as reg:
        lines = group_tools.export_offsets(reg, args.group)
    text = "".join(line + "\n" for line in lines)
    if args.output_file:
        args.output_file.write_text(text)
        console.print(f"exported {len(lines)} offsets to {args.output_file}", highlight=False)
    else:
        sys.stdout.write(text)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    try:
        lines = (sys.stdin.read() if str(args.input_file) == "-" else args.input_file.read_text()).splitlines()
        entries = group_tools.parse_export(lines)
    except OSError as e:
        raise CliError(f"cannot read {args.input_file}: {e.strerror}") from None
    except (group_tools.GroupError, LayoutError) as e:
        raise CliError(str(e)) from None
    with open_registry(args) as reg, as_cli_error(group_tools.GroupError):
        n = group_tools.import_offsets(reg, entries, args.force)
    console.print(f"imported {n} offsets", highlight=False)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    with open_registry(args) as reg, as_cli_error(LayoutError):
        result = group_tools.verify(reg, args.group)
    if result.error:
        raise CliError(result.error)
    for problem in result.problems:
        print(problem)
    if result.ok:
        print("Rebalance operation successful !")
        return 0
    print("Rebalance operation failed !")
    return 1
