"""``zkconsumer watch``: a group live in the browser, from ZooKeeper (a 0.8 group) or a group coordinator.

The page (zkconsumer/web/) is served on 127.0.0.1 unless ``--host`` says otherwise; the address is printed at
start, and Ctrl-C stops the server. Starlette and uvicorn are imported only when the command runs, so the other
commands start without them.
"""

from __future__ import annotations

import argparse

from zkconsumer.cli.output import CliError, console, err_console
from zkconsumer.cli.zkauth import add_zk_auth_args, parse_property_args, zk_security_from_args
from zkconsumer.config import ConfigError, read_properties


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("watch", help="a group live in the browser: members, owners, offsets, lag, rebalances",
                       description="Serve a live page of a group: a 0.8 group from ZooKeeper (--zookeeper) or "
                                   "a coordinator group (--bootstrap-server).")
    p.add_argument("--zookeeper", "--zookeeper.connect", dest="zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="a 0.8 group's ZooKeeper (zookeeper.connect)")
    p.add_argument("--bootstrap-server", "--bootstrap.servers", dest="bootstrap_server", metavar="HOST:PORT",
                   help="a coordinator group's brokers (bootstrap.servers); with --zookeeper: the brokers to ask "
                        "for log-end offsets")
    p.add_argument("--group", help="the group (group.id)")
    p.add_argument("--port", type=int, default=0, help="the port to serve on (default: a free one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to serve on (default 127.0.0.1; anything else lets others see the group)")
    add_zk_auth_args(p)  # --consumer.config FILE: also group.id, zookeeper.connect and bootstrap.servers
    p.set_defaults(func=cmd_watch)


def _settings(args: argparse.Namespace) -> tuple[str, str | None, str | None]:
    """(group, zookeeper, bootstrap) from the flags, else ``--consumer.config`` / ``--property``. Flags naming both
    a ZooKeeper and brokers watch the ZooKeeper group (the brokers then give the log ends); a properties file
    naming both (a 0.8.2 consumer with dual commit) watches the ZooKeeper group too."""
    try:
        props = read_properties(args.properties) if args.properties else {}
    except ConfigError as e:
        raise CliError(str(e)) from None
    props.update(parse_property_args(args.property))
    group = args.group or props.get("group.id")
    zookeeper = args.zookeeper or (None if args.bootstrap_server else props.get("zookeeper.connect"))
    bootstrap = args.bootstrap_server or props.get("bootstrap.servers")
    if not group:
        raise CliError("watch needs --group G (or group.id in --consumer.config)")
    if not zookeeper and not bootstrap:
        raise CliError("watch needs --zookeeper ZK (a 0.8 group in ZooKeeper) or --bootstrap-server B (a "
                       "coordinator group)")
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be 0-65535, got {args.port}")
    return group, zookeeper, bootstrap


def cmd_watch(args: argparse.Namespace) -> int:
    from zkconsumer.web import serve  # Starlette and uvicorn: only this command and lab --ui need them

    group, zookeeper, bootstrap = _settings(args)
    warning = serve.exposure_warning(args.host)
    if zookeeper:
        from zkconsumer.web.zookeeper_source import ZooKeeperGroupSource

        source = ZooKeeperGroupSource(zookeeper, group, bootstrap=bootstrap, security=zk_security_from_args(args))
    else:
        from zkconsumer.web.coordinator_source import CoordinatorGroupSource

        source = CoordinatorGroupSource(bootstrap, group)
    try:
        try:
            served = serve.serve(source, args.host, args.port)
        except serve.AddressInUse as e:
            raise CliError(str(e)) from None
        if warning:
            err_console.print(f"[bold yellow]{warning}[/]", highlight=False)
        console.print(f"zkconsumer watch: {served.url} (Ctrl-C to stop)", highlight=False, soft_wrap=True)
        try:
            served.wait()
        finally:
            served.stop()
    finally:
        source.close()
    return 0
