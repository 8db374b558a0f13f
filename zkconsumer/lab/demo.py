"""``zkconsumer demo``: a real ZooKeeper, two topics, three consumers registered as Kafka 0.8 writes them,
their Range and RoundRobin assignments, owners claimed, one consumer leaving and the group re-assigning.

Every consumer here is its own ZooKeeper session, so its registration and owner nodes are real ephemerals
that vanish with it. The full consumer (watches, rebalance retries, fetching) is ``zkconsumer lab``.
"""

from __future__ import annotations

import contextlib

from kazoo.client import KazooClient
from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.consoles import make_console
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, encode_owner
from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.server import ZooKeeperServer
from zkconsumer.zk.topics import create_topic

GROUP = "demo"
TOPICS = {"orders": 6, "payments": 4}
CONSUMERS = {"demo_c1": 1, "demo_c2": 1, "demo_c3": 2}  # consumer id -> streams per topic


def _context(reg: Registry) -> AssignmentContext:
    topics = reg.topics()
    subs = {cid: r.topic_streams(topics) for cid in reg.consumer_ids(GROUP)
            if (r := reg.registration(GROUP, cid)) is not None}
    return AssignmentContext(subs, reg.partitions_for_topics(sorted({t for s in subs.values() for t in s})))


def _table(title: str, by_thread: dict[str, list[str]], before: dict[str, str] | None = None) -> Table:
    table = Table(title=title)
    table.add_column("consumer thread id")
    table.add_column("partitions")
    for tid, parts in by_thread.items():
        shown = [f"[bold green]{p}[/]" if before is not None and before.get(p) != tid else p for p in parts]
        table.add_row(tid, " ".join(shown) or "[dim](none)[/]")
    return table


def _claim(sessions: dict[str, KazooClient], owners: dict, g: GroupPaths) -> None:
    for tp, tid in sorted(owners.items()):
        cid = tid.rsplit("-", 1)[0]
        sessions[cid].create(g.owner(tp.topic, tp.partition), encode_owner(tid), ephemeral=True, makepath=True)


def _release(sessions: dict[str, KazooClient], reg: Registry, g: GroupPaths) -> None:
    for (topic, p), tid in reg.owners(GROUP).items():
        cid = tid.rsplit("-", 1)[0]
        if cid in sessions:
            with contextlib.suppress(Exception):
                sessions[cid].delete(g.owner(topic, p))


def _tree(reg: Registry) -> Tree:
    root = Tree(f"[bold]/consumers/{GROUP}[/]")
    g = GroupPaths(GROUP)
    ids = root.add("ids")
    for cid in reg.consumer_ids(GROUP):
        ids.add(f"{cid} = {reg.read(g.registration(cid)).decode()}")
    owners = root.add("owners")
    for (topic, p), tid in sorted(reg.owners(GROUP).items()):
        owners.add(f"{topic}/{p} = {tid}")
    return root


def run(console: Console | None = None) -> int:
    console = console or make_console()
    with ZooKeeperServer() as zk:
        console.rule("[bold]1. a real ZooKeeper")
        console.print(f"serving at {zk.connect_string} (jars from {zk.source})", highlight=False)
        with Registry.open(zk.connect_string) as reg:
            reg.setup_common_paths()
            console.rule("[bold]2. two topics, written as Kafka's AdminUtils writes them")
            for topic, n in TOPICS.items():
                create_topic(reg, topic, n)
                console.print(f"/brokers/topics/{topic} = {reg.read('/brokers/topics/' + topic).decode()}",
                              highlight=False)
            console.rule("[bold]3. three consumers register (each its own session, ephemeral nodes)")
            g = GroupPaths(GROUP)
            sessions = {cid: connect(zk.connect_string) for cid in CONSUMERS}
            try:
                for cid, streams in CONSUMERS.items():
                    data = ConsumerRegistration.static({t: streams for t in TOPICS}).encode()
                    sessions[cid].create(g.registration(cid), data, ephemeral=True, makepath=True)
                ctx = _context(reg)
                for strategy in ("range", "roundrobin"):
                    console.print(_table(f"{strategy} (partition.assignment.strategy={strategy})",
                                         assign(strategy, ctx).by_thread()))
                console.rule("[bold]4. each consumer claims its range share under /owners")
                first = assign("range", ctx)
                _claim(sessions, first.owners, g)
                console.print(_tree(reg))
                before = {str(tp): tid for tp, tid in first.owners.items()}
                console.rule("[bold]5. demo_c3 leaves: its session closes, its ephemerals vanish, the rest rebalance")
                sessions.pop("demo_c3").stop()
                _release(sessions, reg, g)
                after = assign("range", _context(reg))
                _claim(sessions, after.owners, g)
                moved = sum(1 for tp, tid in after.owners.items() if before.get(str(tp)) != tid)
                console.print(_table("range after demo_c3 left (moved partitions in green)", after.by_thread(),
                                     before))
                console.print(f"{moved} of {len(after)} partitions changed owner; every partition owned: "
                              f"{len(reg.owners(GROUP)) == sum(TOPICS.values())}", highlight=False)
            finally:
                for client in sessions.values():
                    client.stop()
                    client.close()
        console.rule("[bold]6. ZooKeeper stopped")
    return 0
