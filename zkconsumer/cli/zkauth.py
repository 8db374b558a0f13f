"""``--consumer.config`` / ``--property`` for the ZooKeeper tools: how they authenticate (docs/security.md).

The tools read only the ZooKeeper security properties from them (``zookeeper.set.acl``,
``zkconsumer.zookeeper.digest``, ``zkconsumer.zookeeper.sasl``), so a group's consumer.properties can be reused
as is: a tool then writes the group's nodes as its consumers do, and nodes it creates get the same ACLs. The tools
that open ZooKeeper with :func:`open_registry` read its two timeouts too (``zookeeper.session.timeout.ms``,
``zookeeper.connection.timeout.ms``, defaulting as a consumer's do).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import Any

from zkconsumer.cli.output import CliError
from zkconsumer.config import ConfigError, ConsumerConfig, read_properties, zk_security_from_properties
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.security import ZkSecurity

#: the connection properties the ZooKeeper tools read besides the credentials
ZK_TIMEOUTS = ("zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms")


def add_zk_auth_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--consumer.config", "--properties", dest="properties", type=Path, metavar="FILE",
                   help="a consumer.properties file; its ZooKeeper credentials are used")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="e.g. zkconsumer.zookeeper.digest=user:password, zookeeper.set.acl=true")


def parse_property_args(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items → a mapping; a malformed item is a CLI error."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CliError(f"--property wants KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def _properties_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``--consumer.config`` then ``--property`` (later wins)."""
    props: dict[str, Any] = {}
    try:
        if getattr(args, "properties", None):
            props.update(read_properties(args.properties))
    except ConfigError as e:
        raise CliError(str(e)) from None
    props.update(parse_property_args(getattr(args, "property", None) or []))
    return props


def zk_security_from_args(args: argparse.Namespace) -> ZkSecurity:
    """The ZooKeeper security given by ``--consumer.config`` then ``--property`` (later wins)."""
    try:
        return zk_security_from_properties(_properties_from_args(args))
    except ConfigError as e:
        raise CliError(str(e)) from None


def zk_timeouts_from_args(args: argparse.Namespace) -> dict[str, int]:
    """``session_timeout_ms`` and ``connection_timeout_ms`` for :meth:`Registry.open`, from the two ZooKeeper
    timeouts among ``--consumer.config`` / ``--property``, validated and defaulted as a consumer's are (the
    connection timeout defaults to the session timeout, that to Kafka's 6000 ms)."""
    props = _properties_from_args(args)
    try:
        # a consumer configuration of these two alone (its group is a placeholder the tools never use)
        config = ConsumerConfig.from_properties({"group.id": "-", **{k: props[k] for k in ZK_TIMEOUTS if k in props}})
    except ConfigError as e:
        raise CliError(str(e)) from None
    if config.connection_timeout_ms < 1:  # the session timeout is checked by the configuration already
        raise CliError(f"zookeeper.connection.timeout.ms must be >= 1, got {config.connection_timeout_ms}")
    return {"session_timeout_ms": config.session_timeout_ms, "connection_timeout_ms": config.connection_timeout_ms}


def open_registry(args: argparse.Namespace) -> contextlib.AbstractContextManager[Registry]:
    """``Registry.open(--zookeeper)`` authenticated and timed as ``--consumer.config`` / ``--property`` say. The
    connection is made on entering the ``with``; its failures (no server, refused credentials) are
    :class:`~zkconsumer.zk.registry.ZkConnectError`, which ``zkconsumer``'s main prints as one ``error:`` line."""
    return Registry.open(args.zookeeper, security=zk_security_from_args(args), **zk_timeouts_from_args(args))
