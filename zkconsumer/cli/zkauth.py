"""``--consumer.config`` / ``--property`` for the ZooKeeper tools: how they authenticate (README, "Security").

The tools read only the ZooKeeper security properties from them (``zookeeper.set.acl``,
``zkconsumer.zookeeper.digest``, ``zkconsumer.zookeeper.sasl``), so a group's consumer.properties can be reused
as is: a tool then writes the group's nodes as its consumers do, and nodes it creates get the same ACLs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from zkconsumer.cli.output import CliError
from zkconsumer.config import ConfigError, read_properties, zk_security_from_properties
from zkconsumer.zk.security import ZkSecurity


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


def zk_security_from_args(args: argparse.Namespace) -> ZkSecurity:
    """The ZooKeeper security given by ``--consumer.config`` then ``--property`` (later wins)."""
    props: dict[str, Any] = {}
    try:
        if getattr(args, "properties", None):
            props.update(read_properties(args.properties))
        props.update(parse_property_args(getattr(args, "property", None) or []))
        return zk_security_from_properties(props)
    except ConfigError as e:
        raise CliError(str(e)) from None
