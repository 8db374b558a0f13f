"""``zkconsumer demo``: what ``make demo`` runs."""

from __future__ import annotations

import argparse

from zkconsumer.cli.output import console
from zkconsumer.lab.demo import run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="start ZooKeeper, two topics, three consumers: assignments and a rebalance")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    return run(console)
