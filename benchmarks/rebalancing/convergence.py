"""Measures read from ZooKeeper: when a group converged (its owner nodes' ``ctime``), the requests it sent
(``mntr``), and ZooKeeper's own latencies alone (the floor)."""

from __future__ import annotations

import contextlib
import re
import statistics
import threading
import time
import uuid

from kazoo.exceptions import NoNodeError

from rebalancing.tree import GROUP, TOPIC
from zkconsumer.tools.groups import verify
from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.server import four_letter_word, packets_received


def zk_owners(reg: Registry) -> tuple[dict, int]:
    """Every owner node of the topic and the latest creation time among them (ZooKeeper's ``ctime``, epoch ms),
    read with pipelined requests."""
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    pending = [(int(c), reg.zk.get_async(f"{base}/{c}")) for c in reg.children(base)]
    owners, latest = {}, 0
    for partition, result in pending:
        with contextlib.suppress(Exception):  # deleted between the listing and the read
            data, stat = result.get()
            owners[(TOPIC, partition)] = data.decode()
            latest = max(latest, stat.ctime)
    return owners, latest


def wait_converged(expected: dict, reg: Registry, since: float, timeout: float = 120.0) -> float:
    """Seconds from ``since`` (epoch seconds) until ZooKeeper held the expected assignment fully owned.

    The moment is read from ZooKeeper itself: once every owner node holds the thread the assignor names, the
    latest owner node's creation time (``ctime``, stamped by the server on this same host) is when the
    assignment became complete. Waiting costs the consumers next to nothing: one listing of the owner nodes
    every 10 ms, whose child version counts every create and delete; all nodes are read only once there is one
    per partition, the listing has stayed still for 30 ms and it changed since the last full read. (Reading all
    200 nodes in the lull before the consumers' first writes took CPU from them exactly when they needed it.)
    Kafka's verify must pass.
    """
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    t0 = time.monotonic()
    last, still_since, read_at = None, time.monotonic(), None
    while True:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the group did not converge")
        try:
            children, stat = reg.zk.get_children(base, include_data=True)
            version = stat.cversion
        except NoNodeError:
            children, version = [], None
        now = time.monotonic()
        if version != last:
            last, still_since = version, now
        elif now - still_since >= 0.03 and len(children) == len(expected) and version != read_at:
            owners, latest = zk_owners(reg)
            if owners == expected:
                break
            read_at = version
        time.sleep(0.01)
    assert verify(reg, GROUP).ok
    return max(0.0, latest / 1000.0 - since)


def zk_packets(zk_root: str, own_session: int) -> int | None:
    """Requests ZooKeeper has received so far from everyone but the benchmark's own session: ``mntr``'s
    zk_packets_received less what ``cons`` says that session sent (it lists every owner node every 10 ms while
    it waits for convergence, more than a group's own requests)."""
    host, _, port = zk_root.split(",")[0].split("/")[0].rpartition(":")
    total = packets_received(host, int(port))
    try:
        ours = 0
        for line in four_letter_word(host, int(port), "cons").splitlines():
            m = re.search(r"recved=(\d+).*sid=0x([0-9a-f]+)", line)
            if m and int(m.group(2), 16) == own_session:
                ours = int(m.group(1))
        return None if total is None else total - ours
    except (OSError, ValueError):
        return None


def measure_floor(zk_root: str, repeats: int = 50) -> dict[str, float]:
    """ZooKeeper's own latencies on this machine, idle, from one client, p50 in ms: a synchronous get, a create
    (ephemeral), a multi-op of 4 creates, and the shortest chain a rebalance can be: a change made by a second
    session reaches our watch, then a listing, a multi-op delete of 4 owner nodes and a multi-op create of 4."""
    zk = f"{zk_root}/floor-{uuid.uuid4().hex[:6]}"
    a, b = connect(zk), connect(zk)
    out: dict[str, list[float]] = {"get": [], "create": [], "multi of 4 creates": [], "rebalance chain": []}
    try:
        a.ensure_path("/ids")
        a.ensure_path("/owners")
        for i in range(repeats):
            t0 = time.perf_counter()
            a.get("/ids")
            out["get"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            a.create(f"/owners/x{i}", b"x", ephemeral=True)
            out["create"].append(time.perf_counter() - t0)
            txn = a.transaction()
            for p in range(4):
                txn.create(f"/owners/{i}-{p}", b"x", ephemeral=True)
            t0 = time.perf_counter()
            txn.commit()
            out["multi of 4 creates"].append(time.perf_counter() - t0)
            fired = threading.Event()
            a.get_children("/ids", watch=lambda event, fired=fired: fired.set())
            t0 = time.perf_counter()
            b.create(f"/ids/m{i}", b"", ephemeral=True)
            fired.wait(5)
            a.get_children("/ids", include_data=True)
            txn = a.transaction()
            for p in range(4):
                txn.delete(f"/owners/{i}-{p}")
            txn.commit()
            txn = a.transaction()
            for p in range(4):
                txn.create(f"/owners/{i}-{p}", b"y", ephemeral=True)
            txn.commit()
            out["rebalance chain"].append(time.perf_counter() - t0)
    finally:
        for c in (a, b):
            c.stop()
            c.close()
    return {k: statistics.median(v) * 1000 for k, v in out.items()}
