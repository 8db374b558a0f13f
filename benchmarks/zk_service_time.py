"""ZooKeeper's service time per request kind, on the real server here: what the simulator's queue charges.

The simulated server (zkconsumer/sim/zk_service.py) serves one request at a time and charges each kind its
service time. This measures those times on the project's real ZooKeeper 3.9.5, run as the lab runs it
(zk/server.py: a standalone server, its data on local disk, the log fsynced): for each kind, ``--requests``
requests one after another from one kazoo client, and the server's own account of them: ZooKeeper's ``srst``
before a batch and ``mntr``'s ``zk_avg_latency`` after it (the time from reading a request to writing its reply,
in the server's whole milliseconds; averaged over many requests that is an unbiased sub-millisecond figure, since
a request of 0.3 ms crosses a millisecond boundary 30% of the time). The baseline in the same run is the client's
own round trip for the same requests (p50): the ratio says how much of a round trip is the server's.

A second pass (``--concurrency``, default 8 threads of one client) measures the same under the queueing a herd
makes: the server's latency then includes the wait behind the others, so the difference between the two passes
is the queue the simulator reproduces, not a cost it should add.

A third part times the ensemble's faults the simulator charges (zkconsumer/sim/zk_ensemble.py): on a real 3-server
ensemble as the lab starts it, ``--elections`` times each, the leader killed until a survivor serves again (the
election), and a killed server started until it serves (its JVM and its sync), each read by polling ``srvr`` every
10 ms (the time until a client is served again, minus nothing: a client also needs its reconnect).

Run: flock /tmp/zkc-bench.lock .venv/bin/python benchmarks/zk_service_time.py [--requests 2000] [--elections 3]
     [--record FILE]
The recorded figures, and the simulator's table (``LAB_SERVICE``) they became, are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from records import write_record
from rich.table import Table

from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_ensemble import ELECTION_MS, NODE_START_MS
from zkconsumer.sim.zk_service import LAB_SERVICE
from zkconsumer.zk import multiread
from zkconsumer.zk.server import four_letter_word, running_zookeeper


def server_avg_ms(host: str, port: int) -> float:
    """``mntr``'s average latency since the last ``srst``."""
    stats = dict(line.split("\t", 1) for line in four_letter_word(host, port, "mntr", timeout=5).splitlines()
                 if "\t" in line)
    return float(stats["zk_avg_latency"])


def batch(host: str, port: int, ids: range, threads: int,
          request: Callable[[int], object]) -> tuple[float, float, float]:
    """The requests ``ids`` (``threads`` at a time): the server's average latency, the client's p50 round trip and
    the wall time per request (µs)."""
    four_letter_word(host, port, "srst", timeout=5)
    rtts: list[float] = []
    lock = threading.Lock()
    counter = iter(ids)

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.perf_counter()
            request(i)
            dt = time.perf_counter() - t0
            with lock:
                rtts.append(dt)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    started = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - started
    return server_avg_ms(host, port) * 1000.0, statistics.median(rtts) * 1e6, wall * 1e6 / len(rtts)


@dataclass
class Kind:
    """One kind of request: the ``i``-th request of a pass, and what must exist before a pass of indices ``ids``
    (``i`` grows across passes, so creates never meet a node a previous pass left)."""

    request: Callable[[int], object]
    prepare: Callable[[range], None] = lambda _ids: None


def kinds(zk: KazooClient, root: str, hosts: str) -> dict[str, Kind]:
    """The kinds of request the consumers send, as a member sends them."""
    for parent in ("data", "m", "e", "d"):
        zk.ensure_path(f"{root}/{parent}")
    for i in range(50):
        zk.create(f"{root}/data/c{i}", b'{"version":1,"subscription":{"orders":1}}')
    paths = [f"{root}/data/c{i}" for i in range(8)]

    def multi(i: int) -> object:
        txn = zk.transaction()
        for p in range(4):
            txn.create(f"{root}/m/{i}-{p}", b"lab_c1-0", ephemeral=True)
        return txn.commit()

    def to_delete(ids: range) -> None:
        for r in [zk.create_async(f"{root}/d/n{i}", b"", ephemeral=True) for i in ids]:
            r.get()

    def session(_i: int) -> object:
        client = KazooClient(hosts=hosts, timeout=6.0)
        client.start()
        client.stop()
        client.close()
        return None

    return {
        str(RequestKind.GET_DATA): Kind(lambda i: zk.get(f"{root}/data/c{i % 50}")),
        "getData + watch": Kind(lambda i: zk.get(f"{root}/data/c{i % 50}", watch=lambda _e: None)),
        str(RequestKind.GET_CHILDREN): Kind(lambda i: zk.get_children(f"{root}/data")),
        "getChildren + watch": Kind(lambda i: zk.get_children(f"{root}/data", watch=lambda _e: None)),
        str(RequestKind.EXISTS): Kind(lambda i: zk.exists(f"{root}/data/c{i % 50}")),
        str(RequestKind.MULTI_READ): Kind(lambda i: multiread.read_data(zk, paths)),
        str(RequestKind.CREATE): Kind(lambda i: zk.create(f"{root}/e/n{i}", b"lab_c1-0", ephemeral=True)),
        str(RequestKind.SET_DATA): Kind(lambda i: zk.set(f"{root}/data/c{i % 50}",
                                                         b'{"version":1,"subscription":{"a":1}}')),
        str(RequestKind.DELETE): Kind(lambda i: zk.delete(f"{root}/d/n{i}"), to_delete),
        str(RequestKind.MULTI): Kind(multi),
        "session open + close": Kind(session),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000, help="requests per kind and pass (default 2000)")
    ap.add_argument("--sessions", type=int, default=100, help="sessions opened and closed per pass (default 100)")
    ap.add_argument("--concurrency", type=int, default=8, help="threads of the second pass (default 8)")
    ap.add_argument("--elections", type=int, default=3, help="rounds of the ensemble's timing (0: none)")
    ap.add_argument("--record", type=Path, metavar="FILE", help="write the result record (results/README.md) there")
    args = ap.parse_args()
    console = make_console()
    table = Table(title="ZooKeeper's service time per request (µs; the server's own latency, mntr)")
    for col in ("kind", "alone", "client p50", "server share", f"{args.concurrency} at a time",
                "wall per request", "work", "delay", "simulator", "measured ÷ simulator"):
        table.add_column(col, justify="left" if col == "kind" else "right")
    with running_zookeeper() as server:
        host, port = "127.0.0.1", server.nodes[0].client_port
        zk = KazooClient(hosts=server.connect_string)
        zk.start()
        try:
            next_id = 0
            fitted: dict[str, tuple[float, float]] = {}
            rows: list[dict[str, Any]] = []
            for name, kind in kinds(zk, f"/bench-{uuid.uuid4().hex[:6]}", server.connect_string).items():
                n = args.sessions if name.startswith("session") else args.requests
                measured = []
                for threads in (1, 1, args.concurrency):  # the first pass only warms the server's JIT
                    ids = range(next_id, next_id + n)
                    next_id += n
                    kind.prepare(ids)
                    measured.append(batch(host, port, ids, threads, kind.request))
                (alone, rtt, _wall), (busy, _rtt, wall) = measured[1], measured[2]
                work, delay = split(name, alone, wall)
                fitted[name] = (work, delay)
                simulated = _simulated(name)
                table.add_row(name, f"{alone:.0f}", f"{rtt:.0f}", f"{alone / rtt:.0%}", f"{busy:.0f}", f"{wall:.0f}",
                              f"{work:.0f}", f"{delay:.0f}", "-" if simulated is None else str(simulated),
                              "-" if not simulated else f"{alone / simulated:.2f}")
                rows.append({"kind": name, "alone_us": alone, "client_p50_us": rtt, "server_share": alone / rtt,
                             "concurrent_us": busy, "wall_per_request_us": wall, "work_us": work, "delay_us": delay,
                             "simulator_us": simulated,
                             "measured_to_simulator": alone / simulated if simulated else None})
        finally:
            zk.stop()
            zk.close()
    console.print(table)
    console.print("As zkconsumer/sim/zk_service.py's table (work, delay):")
    console.print({k: (round(w), round(d)) for k, (w, d) in fitted.items()})
    ensemble = ensemble_timing(args.elections, console) if args.elections else None
    if args.record:
        write_record(args.record, vars(args),
                     {"rows": rows, "ensemble": ensemble}, Scope.SIM_AND_LAB)


def _serving(port: int) -> bool:
    try:
        return "Mode:" in four_letter_word("127.0.0.1", port, "srvr", 0.2)
    except OSError:
        return False


def _until(condition: Callable[[], bool], timeout: float = 60.0) -> float:
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout:
            raise SystemExit("the ensemble did not serve again within 60 s")
        time.sleep(0.01)
    return (time.perf_counter() - started) * 1000.0


def ensemble_timing(rounds: int, console) -> list[dict[str, Any]]:  # noqa: ANN001
    """The leader's election and a server's start, on a real 3-server ensemble, against the simulator's figures
    (returned as the record's rows)."""
    elections, starts = [], []
    with running_zookeeper(servers=3) as zk:
        for _ in range(rounds):
            leader = next(int(s["server"]) for s in zk.status() if s.get("mode") == "leader")
            survivors = [n for n in zk.nodes if n.server_id != leader]
            zk.stop_node(leader, kill=True)
            elections.append(_until(lambda s=survivors: all(_serving(n.client_port) for n in s)))
            t0 = time.perf_counter()
            zk.start_node(leader)  # returns once every running server serves a session
            starts.append((time.perf_counter() - t0) * 1000.0)
    table = Table(title=f"the ensemble's faults (3 servers, {rounds} rounds; ms)")
    for col in ("fault", "measured p50", "min–max", "simulator"):
        table.add_column(col, justify="left" if col == "fault" else "right")
    rows = []
    faults = (("election", "leader killed → survivors serve (election)", elections, ELECTION_MS),
              ("server_start", "a server started → it serves (start and sync)", starts, NODE_START_MS))
    for key, name, xs, sim in faults:
        table.add_row(name, f"{statistics.median(xs):.0f}", f"{min(xs):.0f}–{max(xs):.0f}", str(sim))
        rows.append({"fault": key, "p50_ms": statistics.median(xs), "min_ms": min(xs), "max_ms": max(xs),
                     "simulator_ms": sim, "samples_ms": xs})
    console.print(table)
    return rows


WRITES = {str(k) for k in RequestKind if k.is_write} | {"session open + close"}


def split(name: str, alone: float, wall: float) -> tuple[float, float]:
    """A write's time alone is its work plus an fsync that writes arriving meanwhile share: under concurrency the
    server gets through one every ``wall`` µs, so its work is at most that and the rest is the shared delay. A
    read has no log to wait for: its time alone is all work."""
    if name not in WRITES:
        return alone, 0.0
    work = min(alone, wall)
    return work, alone - work


def _simulated(name: str) -> int | None:
    """The simulator's charge for a row (None: a row the simulator folds into another kind)."""
    if name == "session open + close":
        return LAB_SERVICE.of(RequestKind.CREATE_SESSION) + LAB_SERVICE.of(RequestKind.CLOSE_SESSION)
    try:
        return LAB_SERVICE.of(RequestKind(name))
    except ValueError:
        return None


if __name__ == "__main__":
    main()
