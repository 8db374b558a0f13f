"""``zkconsumer zk start|stop|status``: a real ZooKeeper in the background, for the CLI and the lab."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.table import Table

from zkconsumer.cli.output import CliError, console
from zkconsumer.zk.server import (
    DEFAULT_DATA_DIR,
    STATE_FILE,
    ZooKeeperError,
    ZooKeeperServer,
    find_classpath,
    find_java,
    server_command,
)


def register(sub: argparse._SubParsersAction) -> None:
    zk = sub.add_parser("zk", help="run a real local ZooKeeper (standalone or 3-node ensemble)")
    zsub = zk.add_subparsers(dest="zk_command", metavar="ACTION", required=True)

    start = zsub.add_parser("start", help="start ZooKeeper in the background and print the connect string")
    start.add_argument("--port", type=int, default=2181, help="client port of the first server (default 2181; "
                       "an ensemble uses PORT, PORT+1, PORT+2; 0 picks free ports)")
    start.add_argument("--servers", type=int, choices=(1, 3), default=1, help="1 (standalone) or 3 (ensemble)")
    start.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help=f"default {DEFAULT_DATA_DIR}")
    start.add_argument("--tick-time", type=int, default=500, help="tickTime in ms (sessions expire on ticks)")
    start.add_argument("--sasl-user", action="append", default=[], metavar="USER:PASSWORD",
                       help="turn on SASL DIGEST-MD5 with this user (repeatable); clients authenticate with "
                            "zkconsumer.zookeeper.sasl=USER:PASSWORD")
    start.add_argument("--json", action="store_true", help="print the state as JSON")
    start.set_defaults(func=cmd_start)

    stop = zsub.add_parser("stop", help="stop the ZooKeeper started from --data-dir")
    stop.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    stop.set_defaults(func=cmd_stop)

    run = zsub.add_parser("run", help="run one ZooKeeper server from a zoo.cfg in the foreground (what the docker "
                                      "lab's ZooKeeper containers run)")
    run.add_argument("config", type=Path, help="a zoo.cfg (its dataDir holds myid for an ensemble)")
    run.set_defaults(func=cmd_run)

    status = zsub.add_parser("status", help="show the servers started from --data-dir")
    status.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)


def cmd_start(args: argparse.Namespace) -> int:
    if (args.data_dir / STATE_FILE).exists():
        old = ZooKeeperServer.from_state(args.data_dir)
        if any(s["alive"] for s in old.status()):
            raise CliError(f"a ZooKeeper from {args.data_dir} is already running at {old.connect_string} "
                           "('zkconsumer zk stop' first)")
    users = {}
    for item in args.sasl_user:
        name, colon, password = item.partition(":")
        if not colon or not name:
            raise CliError(f"--sasl-user wants USER:PASSWORD, got {name or item!r}")
        users[name] = password
    try:
        server = ZooKeeperServer(servers=args.servers, port=args.port or None, data_dir=args.data_dir,
                                 tick_time=args.tick_time, detach=True, sasl_users=users)
        with console.status(f"starting {args.servers} ZooKeeper server(s)..."):
            server.start()
    except ZooKeeperError as e:
        raise CliError(str(e)) from None
    if args.json:
        print(json.dumps({"connect": server.connect_string, "data_dir": str(args.data_dir),
                          "source": server.source}))
    else:
        console.print(f"ZooKeeper ({'standalone' if args.servers == 1 else 'ensemble of 3'}, jars from "
                      f"{server.source}) serving{' with SASL DIGEST-MD5' if users else ''}; data in "
                      f"{args.data_dir}", highlight=False)
        print(server.connect_string)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    try:
        server = ZooKeeperServer.from_state(args.data_dir)
    except ZooKeeperError as e:
        raise CliError(str(e)) from None
    server.stop()
    console.print(f"stopped ZooKeeper at {server.connect_string}", highlight=False)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Replace this process with the JVM: in a container it is then the server that receives SIGTERM/SIGKILL."""
    if not args.config.is_file():
        raise CliError(f"no ZooKeeper config at {args.config}")
    try:
        command = server_command(find_java(), find_classpath()[0], args.config.resolve(), args.config.parent.resolve())
    except ZooKeeperError as e:
        raise CliError(str(e)) from None
    sys.stdout.flush()
    os.execv(command[0], command)


def cmd_status(args: argparse.Namespace) -> int:
    try:
        server = ZooKeeperServer.from_state(args.data_dir)
    except ZooKeeperError as e:
        raise CliError(str(e), code=3) from None
    rows = server.status()
    if args.json:
        print(json.dumps({"connect": server.connect_string, "servers": rows}))
    else:
        table = Table(title=f"ZooKeeper {server.connect_string}")
        for col in ("server", "address", "pid", "alive", "mode", "node count", "version"):
            table.add_column(col)
        for r in rows:
            table.add_row(str(r["server"]), r["address"], str(r["pid"]), "yes" if r["alive"] else "no",
                          r.get("mode", r.get("error", "-")), r.get("node_count", "-"),
                          r.get("zookeeper_version", "-").split("-")[0])
        console.print(table)
    return 0 if all(r["alive"] for r in rows) else 3
