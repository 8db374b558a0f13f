"""The ZooKeeper model against a real ZooKeeper server (docs/simulation.md, "Agreement").

Hypothesis draws sequences of requests by three sessions on a few paths; each runs on the real server through
kazoo (synchronous calls, a fresh chroot per example) and on the model; the results, the errors, the stats'
deterministic fields, the children and every session's watch notifications must be identical. zxids are compared
relative to a node each example creates first, so "a failed write takes a zxid" is checked too. A second test lets
a real session expire (its socket closed, the session not) and checks the moment against the model's tick window.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from helpers import fresh_chroot, read_exactly
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import ZookeeperError
from kazoo.protocol.serialization import Connect, Create, ReplyHeader, int_int_struct, int_struct
from kazoo.protocol.states import Callback, WatchedEvent
from kazoo.protocol.states import EventType as KazooEvent
from kazoo.security import OPEN_ACL_UNSAFE

from zkconsumer.sim.scheduler import Clock, Scheduler
from zkconsumer.sim.zk_codes import CreateMode, EventType, ZkCode
from zkconsumer.sim.zookeeper import CheckOp, CreateOp, DeleteOp, ServerConfig, SetDataOp, ZooKeeperModel
from zkconsumer.zk.server import ZooKeeperServer

SESSIONS = 3
PATHS = ["/a/x", "/a/y", "/b/x", "/a", "/b"]
MORE_PATHS = ["/", "/a/x/z"]
SEQUENTIAL = ["/a/s", "/b/s"]
DATA = [b"", b"x", b"yy"]
VERSIONS = [-1, -1, -1, 0, 1, 2]  # mostly unconditional, so that deletes and sets happen
KAZOO_EVENTS = {KazooEvent.CREATED: EventType.NODE_CREATED, KazooEvent.DELETED: EventType.NODE_DELETED,
                KazooEvent.CHANGED: EventType.NODE_DATA_CHANGED, KazooEvent.CHILD: EventType.NODE_CHILDREN_CHANGED}

#: Mostly persistent nodes, so that children get created and deleted under them (an ephemeral parent has none).
modes = st.sampled_from([CreateMode.PERSISTENT] * 3 + list(CreateMode))
creates = st.tuples(st.just("create"), st.integers(0, 2), st.sampled_from(PATHS + ["/a/x/z"] + SEQUENTIAL),
                    st.sampled_from(DATA), modes)
sub_ops = st.one_of(
    st.builds(CreateOp, st.sampled_from(PATHS + SEQUENTIAL), st.sampled_from(DATA),
              st.sampled_from([CreateMode.PERSISTENT, CreateMode.EPHEMERAL])),
    st.builds(DeleteOp, st.sampled_from(PATHS), st.sampled_from(VERSIONS)),
    st.builds(SetDataOp, st.sampled_from(PATHS), st.sampled_from(DATA), st.sampled_from(VERSIONS)),
    st.builds(CheckOp, st.sampled_from(PATHS), st.sampled_from(VERSIONS)),
)
sessions = st.integers(0, SESSIONS - 1)
requests = st.one_of(
    creates, creates,
    st.tuples(st.just("delete"), sessions, st.sampled_from(PATHS), st.sampled_from(VERSIONS)),
    st.tuples(st.just("set"), sessions, st.sampled_from(PATHS), st.sampled_from(DATA), st.sampled_from(VERSIONS)),
    st.tuples(st.just("get"), sessions, st.sampled_from(MORE_PATHS + PATHS), st.booleans()),
    st.tuples(st.just("exists"), sessions, st.sampled_from(MORE_PATHS + PATHS), st.booleans()),
    st.tuples(st.just("children"), sessions, st.sampled_from(MORE_PATHS + PATHS), st.booleans()),
    st.tuples(st.just("multi"), sessions, st.lists(sub_ops, min_size=1, max_size=3)),
)


class Stats:
    """A stat's deterministic fields: zxids relative to the example's first node, the owner as a session index."""

    def __init__(self, owners: dict[int, int]) -> None:
        self.owners = owners
        self.zero = 0

    def __call__(self, stat: Any, path: str) -> tuple:
        owner = getattr(stat, "ephemeral_owner", getattr(stat, "ephemeralOwner", 0))
        zxids = (stat.mzxid - self.zero, stat.czxid - self.zero) if path != "/" else ()
        return (stat.version, stat.cversion, getattr(stat, "num_children", getattr(stat, "numChildren", 0)),
                getattr(stat, "data_length", getattr(stat, "dataLength", 0)), self.owners.get(owner),
                stat.pzxid - self.zero, *zxids)


# ----------------------------------------------------------------------------------------------- the real side
class Real:
    def __init__(self, connect: str) -> None:
        self.clients = [KazooClient(connect, timeout=20.0) for _ in range(SESSIONS)]
        for c in self.clients:
            c.start()
        self.events: list[list[tuple[EventType, str]]] = [[] for _ in range(SESSIONS)]
        self.last: list[WatchedEvent | None] = [None] * SESSIONS
        self.stats = Stats({c.client_id[0]: i for i, c in enumerate(self.clients)})

    def watcher(self, i: int):
        def record(event: WatchedEvent) -> None:
            if event is not self.last[i]:  # kazoo hands one NodeDeleted to a data and a child watcher alike
                self.last[i] = event
                self.events[i].append((KAZOO_EVENTS[event.type], event.path))
        return record

    def run(self, req: tuple) -> tuple:
        kind, i, *args = req
        zk = self.clients[i]
        stat = self.stats
        try:
            if kind == "create":
                path, data, mode = args
                return ("ok", zk.create(path, data, ephemeral=mode.ephemeral, sequence=mode.sequential))
            if kind == "delete":
                zk.delete(args[0], args[1])
                return ("ok",)
            if kind == "set":
                return ("ok", stat(zk.set(args[0], args[1], args[2]), args[0]))
            if kind == "get":
                data, s = zk.get(args[0], watch=self.watcher(i) if args[1] else None)
                return ("ok", data, stat(s, args[0]))
            if kind == "exists":
                s = zk.exists(args[0], watch=self.watcher(i) if args[1] else None)
                return ("err", ZkCode.NO_NODE) if s is None else ("ok", stat(s, args[0]))
            if kind == "children":
                names, s = zk.get_children(args[0], watch=self.watcher(i) if args[1] else None, include_data=True)
                return ("ok", sorted(names), stat(s, args[0]))
            txn = zk.transaction()
            for op in args[0]:
                if isinstance(op, CreateOp):
                    txn.create(op.path, op.data, ephemeral=op.mode.ephemeral)
                elif isinstance(op, DeleteOp):
                    txn.delete(op.path, op.version)
                elif isinstance(op, SetDataOp):
                    txn.set_data(op.path, op.data, op.version)
                else:
                    txn.check(op.path, op.version)
            results = txn.commit()
            if any(isinstance(r, Exception) for r in results):
                return ("err", [ZkCode(r.code) for r in results])
            return ("ok", [r if isinstance(r, str) else stat(r, op.path) if not isinstance(r, bool) else r
                           for r, op in zip(results, args[0], strict=True)])
        except ZookeeperError as e:
            return ("err", ZkCode(e.code))

    def settle(self) -> None:
        """Every notification in: a read on each connection answers after the events sent before it, and a marker
        queued behind them on kazoo's callback thread says they were all handed over."""
        for c in self.clients:
            c.exists("/")
            done = threading.Event()
            c.handler.dispatch_callback(Callback("watch", done.set, ()))
            assert done.wait(10)

    def close(self) -> None:
        for c in self.clients:
            c.stop()
            c.close()


# ----------------------------------------------------------------------------------------------- the model side
class Model:
    def __init__(self) -> None:
        config = ServerConfig(tick_ms=500, min_session_timeout_ms=1000, max_session_timeout_ms=60_000)
        self.zk = ZooKeeperModel(lambda: 0, config, system_nodes=False)
        self.ids = [self.zk.create_session(20_000).value[0] for _ in range(SESSIONS)]
        self.index = {s: i for i, s in enumerate(self.ids)}
        self.events: list[list[tuple[EventType, str]]] = [[] for _ in range(SESSIONS)]
        self.stats = Stats(self.index)

    def run(self, req: tuple) -> tuple:
        kind, i, *args = req
        s, zk, stat = self.ids[i], self.zk, self.stats
        if kind == "create":
            reply = zk.create(s, args[0], args[1], args[2])
            out = ("ok", reply.value)
        elif kind == "delete":
            reply = zk.delete(s, args[0], args[1])
            out = ("ok",)
        elif kind == "set":
            reply = zk.set_data(s, args[0], args[1], args[2])
            out = ("ok", reply.value and stat(reply.value, args[0]))
        elif kind == "get":
            reply = zk.get_data(s, args[0], args[1])
            out = ("ok", *(reply.value and (reply.value[0], stat(reply.value[1], args[0])) or ()))
        elif kind == "exists":
            reply = zk.exists(s, args[0], args[1])
            out = ("ok", reply.value and stat(reply.value, args[0]))
        elif kind == "children":
            reply = zk.get_children(s, args[0], args[1])
            out = ("ok", *(reply.value and (reply.value[0], stat(reply.value[1], args[0])) or ()))
        else:
            reply = zk.multi(s, args[0])
            if not reply.ok:
                return ("err", [r.code for r in reply.value])
            out = ("ok", [r.path if isinstance(op, CreateOp) else stat(r.stat, op.path) if r.stat else True
                          for r, op in zip(reply.value, args[0], strict=True)])
        for event in reply.events:
            self.events[self.index[event.session_id]].append((event.type, event.path))
        return out if reply.ok else ("err", reply.code)


AGREEMENT = {"examples": 0, "requests": 0, "seconds": 0.0}
#: Every example starts from the same small tree, so that most requests find their parent and do something.
PRELUDE = [("create", 0, "/_zero", b"", CreateMode.PERSISTENT), ("create", 1, "/a", b"", CreateMode.PERSISTENT),
           ("create", 2, "/b", b"", CreateMode.PERSISTENT)]
#: The facts a naive model gets wrong, pinned whatever Hypothesis draws: cversion counts deletes, the sequence
#: suffix does not; failed writes take a zxid; a failed multi leaves no trace but its zxid; deletes notify once.
KNOWN = [("create", 0, "/a/x", b"", CreateMode.EPHEMERAL), ("children", 1, "/a", True), ("get", 2, "/a/x", True),
         ("children", 2, "/a/x", True), ("delete", 1, "/a/x", 0), ("exists", 0, "/a", False),
         ("create", 0, "/a/s", b"q", CreateMode.PERSISTENT_SEQUENTIAL),
         ("create", 0, "/a/s", b"", CreateMode.EPHEMERAL),
         ("set", 1, "/a/x", b"x", -1), ("exists", 2, "/a/x", True), ("children", 0, "/a", False),
         ("multi", 1, [CreateOp("/a/x"), CheckOp("/a", 7), DeleteOp("/b")]), ("exists", 0, "/b", False),
         ("multi", 1, [CreateOp("/a/x"), CreateOp("/a/x/z"), SetDataOp("/a/x", b"yy", 0), DeleteOp("/a/x/z")]),
         ("get", 0, "/a/x", False), ("create", 2, "/a/s", b"", CreateMode.EPHEMERAL_SEQUENTIAL),
         ("children", 1, "/a", False), ("get", 1, "/a", False)]


def agree(connect: str, script: list[tuple]) -> None:
    """Run ``script`` on a real server (kazoo) and on the model; assert every reply and notification agree."""
    started = time.monotonic()
    real, model = Real(connect), Model()
    try:
        for req in PRELUDE:
            assert model.run(req) == real.run(req)
        real.stats.zero = real.clients[0].exists("/_zero").czxid
        model.stats.zero = model.zk.exists(model.ids[0], "/_zero").value.czxid
        for n, req in enumerate(script):
            assert (n, req, model.run(req)) == (n, req, real.run(req))
        real.settle()
        assert model.events == real.events
    finally:
        real.close()
    AGREEMENT["examples"] += 1
    AGREEMENT["requests"] += len(script)
    AGREEMENT["seconds"] += time.monotonic() - started


def test_known_facts_agree(zk_server: ZooKeeperServer) -> None:
    agree(fresh_chroot(zk_server.connect_string, "sim_known"), KNOWN)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(requests, min_size=5, max_size=30))
def test_model_agrees_with_a_real_server(zk_server: ZooKeeperServer, script: list[tuple]) -> None:
    agree(fresh_chroot(zk_server.connect_string, "sim_agreement"), script)


def test_agreement_ran(zk_server: ZooKeeperServer) -> None:
    """Runs after the property (file order): says how much was compared, for docs/simulation.md."""
    print(f"\nagreement: {AGREEMENT['examples']} examples, {AGREEMENT['requests']} requests, "
          f"{AGREEMENT['seconds']:.1f} s")


# ----------------------------------------------------------------------------------------------- session expiry
def _frame(sock: socket.socket) -> bytes:
    return read_exactly(sock, int_struct.unpack(read_exactly(sock, 4))[0])


def _raw_session(host: str, port: int, timeout_ms: int) -> tuple[socket.socket, int, int]:
    """A session on a bare socket, with kazoo's own packet classes: unlike a kazoo client, it will not reconnect or
    ping once we stop talking, so the server last hears from it exactly when we say."""
    sock = socket.create_connection((host, port), timeout=10)
    body = Connect(0, 0, timeout_ms, 0, b"\x00" * 16, False).serialize()
    sock.sendall(int_struct.pack(len(body)) + body)
    answer, _ = Connect.deserialize(_frame(sock), 0)
    return sock, answer.session_id, answer.time_out


def test_session_expiry_agrees_with_the_models_tick_window(zk_server: ZooKeeperServer) -> None:
    host, port = zk_server.connect_string.split(",")[0].split(":")
    observer = KazooClient(zk_server.connect_string)
    observer.start()
    try:
        sock, _, negotiated = _raw_session(host, int(port), 2000)
        assert negotiated == 2000
        path = f"/sim_expiry_{time.monotonic_ns()}"
        body = int_int_struct.pack(1, Create.type) + Create(path, b"", OPEN_ACL_UNSAFE, 1).serialize()
        sock.sendall(int_struct.pack(len(body)) + body)
        header, _ = ReplyHeader.deserialize(_frame(sock), 0)
        last_heard = time.monotonic()  # the server touched the session just before answering
        assert header.err == 0
        deleted = threading.Event()
        observer.exists(path, watch=lambda event: deleted.set() if event.type == KazooEvent.DELETED else None)
        sock.close()  # the connection goes, the session stays until it expires
        assert deleted.wait(10)
        real_ms = (time.monotonic() - last_heard) * 1000
        assert observer.exists(path) is None
    finally:
        observer.stop()
        observer.close()

    # The model, same tick and timeout: expiry strictly after the timeout, at most one tick later.
    tick = zk_server.tick_time
    delays = []
    for touched in range(0, tick, 37):
        sched = Scheduler(0)
        zk = ZooKeeperModel(Clock(sched).now_ms, ServerConfig(tick, 2 * tick, 60_000), system_nodes=False)
        sched.run_until(touched)
        s = zk.create_session(2000).value[0]
        sched.run_until(zk.next_expiry_ms())
        assert [e.session_id for e in zk.expire_due()] == [s]
        delays.append(sched.now_ms - touched)
    assert 2000 < min(delays) and max(delays) <= 2000 + tick
    print(f"\nexpiry: real {real_ms:.0f} ms after the last request; model window (2000, {2000 + tick}] ms")
    assert 2000 - 50 < real_ms <= 2000 + tick + 250
