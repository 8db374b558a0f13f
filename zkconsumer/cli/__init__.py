"""The ``zkconsumer`` command line: one sub-module per command family, each with ``register(subparsers)``.

Flags follow Kafka's tools (``--zookeeper``, ``--topic``, ``--group``, ``--bootstrap-server``) and any Kafka
property can be given as ``--property key=value`` or from a ``consumer.properties`` file where it applies.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading

from kazoo.exceptions import NoAuthError
from rich.markup import escape

from zkconsumer.cli.output import CliError, err_console
from zkconsumer.zk.registry import ZkConnectError

#: Command families, in the order ``--help`` lists them. Each module defines ``register(subparsers)``.
COMMAND_MODULES = [
    "zkconsumer.cli.zk",
    "zkconsumer.cli.topics",
    "zkconsumer.cli.assign",
    "zkconsumer.cli.broker",
    "zkconsumer.cli.produce",
    "zkconsumer.cli.demo",
    "zkconsumer.cli.consume",
    "zkconsumer.cli.groups",
    "zkconsumer.cli.watch",
    "zkconsumer.cli.migrate",
    "zkconsumer.cli.lab",
    "zkconsumer.cli.analyze",
    "zkconsumer.cli.sweep",
    "zkconsumer.cli.sim",
    "zkconsumer.cli.kafka",
    "zkconsumer.cli.results",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zkconsumer",
        description="Kafka 0.8 ZooKeeper consumer groups, reimplemented: ZooKeeper, topics, assignors, lab.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue  # a command family not built yet
            raise
        module.register(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, so a command cleans up as after Ctrl-C: without it Python dies on
    the spot and the ZooKeeper, broker and consumer processes a lab or demo started outlive it."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.verbose < 2:
        logging.getLogger("kazoo").setLevel(logging.ERROR)
    # Commands with their own SIGTERM handling (consume, broker) install it over this one.
    previous = (signal.signal(signal.SIGTERM, _terminate) if threading.current_thread() is threading.main_thread()
                else None)
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
        return e.code
    except ZkConnectError as e:  # raised on entering ``with open_registry(args)``: no server, refused credentials
        err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False)
        return 1
    except NoAuthError as e:  # a node protected by ACLs (docs/security.md)
        message = str(e) or ("ZooKeeper refused the operation (NoAuth): the node's ACL does not allow this "
                             "client; give the group's credentials with --consumer.config or --property "
                             "zkconsumer.zookeeper.digest=user:password")
        err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        return 1
    except Terminated:
        return 143  # 128 + SIGTERM, as the shell reports a process it terminated
    except KeyboardInterrupt:
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
