"""A ZooKeeper 3.4 server as a pure state machine: requests and the passing of time in, replies and watch
notifications out. No sockets, no threads, no clock of its own: it reads the time from the callable it is given
(the simulator's :class:`~zkconsumer.sim.scheduler.Clock`), and its driver calls :meth:`ZooKeeperModel.expire_due`
when :meth:`ZooKeeperModel.next_expiry_ms` comes (:func:`run_session_tracker` does that on a scheduler).

What it models, each rule as the real server applies it (``PrepRequestProcessor``'s checks, in their order;
``DataTree``'s changes; ``SessionTrackerImpl``'s buckets): the tree and its stats, the four create modes, versioned
delete and setData, getData / exists / getChildren with one-shot watches, all-or-nothing ``multi`` with check-version
ops, sessions with negotiated timeouts that expire in tick buckets, and one zxid per write — failed writes
included, since the real server logs an error transaction for them. What it leaves out (docs/simulation.md):
connections (a disconnect, SUSPENDED, reconnecting are the client side's business; watches here belong to the
session until :meth:`ZooKeeperModel.drop_watches` and :meth:`ZooKeeperModel.set_watches`), per-request
service time (a later queueing layer; :attr:`ZooKeeperModel.requests` and
:meth:`ZooKeeperModel.add_request_listener` are its inputs), ACLs, quotas, ensembles.

Where the real server's order is free (the sessions of one expiry bucket, the watchers of one path, the children
of a node: Java hash sets), the model is deterministic: sorted, or shuffled by the ``rng`` it is given.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.zk_codes import CreateMode, EventType, RequestKind, ZkCode
from zkconsumer.sim.zk_sessions import SessionTracker
from zkconsumer.sim.zk_tree import Change, DataTree, Node, Stat, WatchEvent, parent_of

T = TypeVar("T")


@dataclass(frozen=True)
class Reply(Generic[T]):
    """A reply: its error code, its value when OK (a failed ``multi`` has its per-op results too), the zxid of
    the transaction (or the last one, for a read), and the watch notifications the request set off."""

    code: ZkCode
    value: T | None = None
    zxid: int = 0
    events: tuple[WatchEvent, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code is ZkCode.OK


# ----------------------------------------------------------------------------------------------- multi ops
@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    mode: CreateMode = CreateMode.PERSISTENT


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    path: str
    version: int


Op = CreateOp | DeleteOp | SetDataOp | CheckOp


@dataclass(frozen=True)
class OpResult:
    """One op's result in a ``multi``: ``code`` OK with the created path or the new stat; in a failed multi,
    OK for the ops before the failing one (rolled back), the failure's code, RUNTIME_INCONSISTENCY after it."""

    code: ZkCode
    path: str | None = None
    stat: Stat | None = None


@dataclass(frozen=True)
class Expiry:
    """A session the server expired, and the notifications its ephemerals' deletion sent."""

    session_id: int
    zxid: int
    events: tuple[WatchEvent, ...]


class ChildOrder(StrEnum):
    """The order of a ``getChildren`` answer. The real server lists a ``HashSet``: one order for a given set of
    children, changing only when the set does. ``per-request`` draws a fresh order for every answer (more
    interleavings per seed, and the order every recorded verdict was measured with); ``per-version`` draws one per
    set of children, as the real server keeps it, and lets a herd of thousands share one answer (the wire encodes
    it once per version, not once per member)."""

    PER_REQUEST = "per-request"
    PER_VERSION = "per-version"


@dataclass(frozen=True)
class ServerConfig:
    """The settings of zoo.cfg the model obeys. Session timeouts are clamped to [min, max], by default
    [2, 20] × tickTime as in ZooKeeper; zkconsumer's own test server sets min 2 × tick and max 60 s."""

    tick_ms: int = 2000
    min_session_timeout_ms: int | None = None
    max_session_timeout_ms: int | None = None
    server_id: int = 0
    #: the version ``srvr`` reports; from 3.6 on, the server also serves ``multiRead`` (``multi_read``)
    version: str = "3.4.14"
    child_order: ChildOrder = ChildOrder.PER_REQUEST

    @property
    def serves_multi_read(self) -> bool:
        major, minor = (int(x) for x in self.version.split(".")[:2])
        return (major, minor) >= (3, 6)

    @property
    def min_timeout(self) -> int:
        return self.min_session_timeout_ms if self.min_session_timeout_ms is not None else 2 * self.tick_ms

    @property
    def max_timeout(self) -> int:
        return self.max_session_timeout_ms if self.max_session_timeout_ms is not None else 20 * self.tick_ms


class _Failed(Exception):  # noqa: N818 - private control flow, never escapes this module
    """A check failed with ``code``: unwinds one op's validation."""

    def __init__(self, code: ZkCode) -> None:
        super().__init__(code.name)
        self.code = code


@dataclass
class _Request:
    session_id: int
    zxid: int
    change: Change = field(default_factory=Change)


class ZooKeeperModel:
    """One standalone ZooKeeper server. Every public request method takes the session it comes from first."""

    def __init__(self, clock: Callable[[], int], config: ServerConfig | None = None,
                 rng: random.Random | None = None, system_nodes: bool = True,
                 ) -> None:
        self.config = config or ServerConfig()
        self._child_orders: dict[str, tuple[tuple[int, int], list[str]]] = {}  # ChildOrder.PER_VERSION's
        self.tree = DataTree()
        self.sessions = SessionTracker(self.config.tick_ms)
        self.zxid = 0
        #: Requests served, by kind: the queueing layer's input, and what the agreement with benchmarks counts.
        self.requests: Counter[RequestKind] = Counter()
        self._clock = clock
        self._rng = rng
        self._listeners: list[Callable[[RequestKind, int], None]] = []
        self._next_session_id = (self.config.server_id << 56) + 1
        if system_nodes:  # ZooKeeper's own subtree, present in every real server
            change = Change()
            self.tree.create(change, "/zookeeper", b"", 0, 0, 0)
            self.tree.create(change, "/zookeeper/quota", b"", 0, 0, 0)

    def add_request_listener(self, listener: Callable[[RequestKind, int], None]) -> None:
        """Call ``listener(kind, session_id)`` as each request arrives, before it is served: the hook of the
        queueing layer (service time) and of the session tracker's driver."""
        self._listeners.append(listener)

    # ------------------------------------------------------------------------------------------- sessions
    def create_session(self, requested_timeout_ms: int) -> Reply[tuple[int, int]]:
        """Open a session: the value is (session id, negotiated timeout), the timeout clamped to the server's
        bounds. A write (``createSession`` takes a zxid)."""
        timeout = min(max(requested_timeout_ms, self.config.min_timeout), self.config.max_timeout)
        session_id = self._next_session_id
        self._next_session_id += 1
        self._count(RequestKind.CREATE_SESSION, session_id)
        self.zxid += 1
        self.sessions.add(session_id, timeout, self._clock())
        return Reply(ZkCode.OK, (session_id, timeout), self.zxid)

    def close_session(self, session_id: int) -> Reply[None]:
        """The client closes its session: its ephemerals go, their watchers are notified."""
        self._count(RequestKind.CLOSE_SESSION, session_id)
        if not self._live(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        expiry = self._close(session_id)
        return Reply(ZkCode.OK, None, expiry.zxid, expiry.events)

    def ping(self, session_id: int) -> Reply[None]:
        self._count(RequestKind.PING, session_id)
        if not self._touch(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        return Reply(ZkCode.OK, None, self.zxid)

    def next_expiry_ms(self) -> int | None:
        """When the session tracker next has a bucket to expire."""
        return self.sessions.next_expiry_ms()

    def expire_due(self) -> list[Expiry]:
        """Expire every session whose bucket has come by now, each one a ``closeSession`` transaction of its own."""
        due = self.sessions.due(self._clock())
        if self._rng is not None:
            self._rng.shuffle(due)
        return [self._close(session_id) for session_id in due]

    def session_timeout_ms(self, session_id: int) -> int | None:
        session = self.sessions.sessions.get(session_id)
        return session.timeout_ms if session else None

    def is_live(self, session_id: int) -> bool:
        return self._live(session_id)

    # ------------------------------------------------------------------------------------------- writes
    def create(self, session_id: int, path: str, data: bytes = b"",
               mode: CreateMode = CreateMode.PERSISTENT) -> Reply[str]:
        """Create a node; the value is its path (with the sequence suffix for a sequential mode)."""
        return self._write(RequestKind.CREATE, session_id, lambda req: self._create(req, path, data, mode))

    def delete(self, session_id: int, path: str, version: int = -1) -> Reply[None]:
        return self._write(RequestKind.DELETE, session_id, lambda req: self._delete(req, path, version))

    def set_data(self, session_id: int, path: str, data: bytes, version: int = -1) -> Reply[Stat]:
        return self._write(RequestKind.SET_DATA, session_id, lambda req: self._set(req, path, data, version))

    def multi(self, session_id: int, ops: Sequence[Op]) -> Reply[list[OpResult]]:
        """All or nothing: the ops run in order, each seeing the ones before; at the first failure everything is
        undone and no watch fires. The reply's code is the first failure's; its value lists every op's result."""
        self._count(RequestKind.MULTI, session_id)
        if not self._touch(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        self.zxid += 1
        req = _Request(session_id, self.zxid)
        results: list[OpResult] = []
        failed: ZkCode | None = None
        for op in ops:
            if failed is not None:
                results.append(OpResult(ZkCode.RUNTIME_INCONSISTENCY))
                continue
            try:
                results.append(self._apply_op(req, op))
            except _Failed as failure:
                failed = failure.code
                req.change.rollback()
                results = [OpResult(ZkCode.OK) for _ in results] + [OpResult(failure.code)]
        if failed is not None:
            return Reply(failed, results, self.zxid)
        return Reply(ZkCode.OK, results, self.zxid, self._fire(req.change))

    # ------------------------------------------------------------------------------------------- reads
    def get_data(self, session_id: int, path: str, watch: bool = False) -> Reply[tuple[bytes, Stat]]:
        """The data and stat; a watch is left only on a node that exists."""
        if (failed := self._read(RequestKind.GET_DATA, session_id, path)) is not None:
            return failed
        node = self.tree.nodes[path]
        if watch:
            self.tree.watch_data(session_id, path)
        return Reply(ZkCode.OK, (node.data, node.stat()), self.zxid)

    def multi_read(self, session_id: int, paths: Sequence[str]) -> Reply[list[Node | ZkCode]]:
        """``multiRead`` of getData ops (3.6+): one request, one result per path (a missing node is a result of its
        own, not a failed request), no watches. Counted once, as ZooKeeper receives one packet. Each result is the
        stored node itself (read it, never change it: the wire encodes its data and stat) or the error's code."""
        self._count(RequestKind.MULTI_READ, session_id)
        if not self._touch(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        nodes = self.tree.nodes
        results: list[Node | ZkCode] = []
        for path in paths:
            node = nodes.get(path)  # a stored node's path is valid: only a miss needs the check
            results.append(node if node is not None else
                           ZkCode.NO_NODE if _valid_path(path) else ZkCode.BAD_ARGUMENTS)
        return Reply(ZkCode.OK, results, self.zxid)

    def exists(self, session_id: int, path: str, watch: bool = False) -> Reply[Stat]:
        """The stat, or NO_NODE; the watch is left either way: on a missing node it fires at its creation."""
        if (failed := self._read(RequestKind.EXISTS, session_id, path, missing_ok=True)) is not None:
            return failed
        if watch:
            self.tree.watch_data(session_id, path)
        node = self.tree.nodes.get(path)
        if node is None:
            return Reply(ZkCode.NO_NODE, zxid=self.zxid)
        return Reply(ZkCode.OK, node.stat(), self.zxid)

    def get_children(self, session_id: int, path: str,
                     watch: bool = False) -> Reply[tuple[list[str], Stat]]:
        """The children's names (sorted, or in the rng's order: the real server's is a hash set's) and the stat."""
        if (failed := self._read(RequestKind.GET_CHILDREN, session_id, path)) is not None:
            return failed
        node = self.tree.nodes[path]
        if watch:
            self.tree.watch_children(session_id, path)
        if self.config.child_order is ChildOrder.PER_REQUEST:
            return Reply(ZkCode.OK, (self._order(node.children), node.stat()), self.zxid)
        version = (node.creates, len(node.children))  # changes whenever the set does
        cached = self._child_orders.get(path)
        if cached is None or cached[0] != version:
            cached = self._child_orders[path] = (version, self._order(node.children))
        return Reply(ZkCode.OK, (cached[1], node.stat()), self.zxid)  # the same list each time: read, never change

    # ------------------------------------------------------------------------------------------- watches
    def drop_watches(self, session_id: int) -> None:
        """The session's connection closed: the server forgets its watches (the client sets them again)."""
        self.tree.drop_watches(session_id)

    def set_watches(self, session_id: int, relative_zxid: int, data: Sequence[str] = (),
                    exist: Sequence[str] = (), child: Sequence[str] = ()) -> Reply[None]:
        """A reconnected client's ``setWatches``: each watch is set again, or fires at once if what it watched
        changed after ``relative_zxid`` (the last zxid the client saw)."""
        self._count(RequestKind.SET_WATCHES, session_id)
        if not self._touch(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        events: list[WatchEvent] = []
        nodes = self.tree.nodes

        def rewatch(path: str, changed: EventType, zxid_of: Callable[[Node], int],
                    watch: Callable[[int, str], None]) -> None:
            """Fire at once what the client missed (the node gone, or changed after what it saw), else watch."""
            node = nodes.get(path)
            if node is None:
                events.append(WatchEvent(session_id, EventType.NODE_DELETED, path))
            elif zxid_of(node) > relative_zxid:
                events.append(WatchEvent(session_id, changed, path))
            else:
                watch(session_id, path)

        for path in data:
            rewatch(path, EventType.NODE_DATA_CHANGED, lambda n: n.mzxid, self.tree.watch_data)
        for path in exist:
            if path in nodes:
                events.append(WatchEvent(session_id, EventType.NODE_CREATED, path))
            else:
                self.tree.watch_data(session_id, path)
        for path in child:
            rewatch(path, EventType.NODE_CHILDREN_CHANGED, lambda n: n.pzxid, self.tree.watch_children)
        return Reply(ZkCode.OK, None, self.zxid, tuple(events))

    # ------------------------------------------------------------------------------------------- internals
    def _count(self, kind: RequestKind, session_id: int) -> None:
        self.requests[kind] += 1
        for listener in self._listeners:
            listener(kind, session_id)

    def _live(self, session_id: int) -> bool:
        session = self.sessions.sessions.get(session_id)
        return session is not None and not session.closing

    def _touch(self, session_id: int) -> bool:
        return self.sessions.touch(session_id, self._clock())

    def _order(self, items: set[int] | set[str]) -> list:
        out = sorted(items)
        if self._rng is not None:
            self._rng.shuffle(out)
        return out

    def _fire(self, change: Change) -> tuple[WatchEvent, ...]:
        return tuple(self.tree.fire(change.triggers, self._order))

    def _close(self, session_id: int) -> Expiry:
        """One ``closeSession`` transaction: the session's watches dropped first (its connection goes with it),
        then its ephemerals deleted, all at one zxid."""
        self.sessions.sessions[session_id].closing = True
        self.tree.drop_watches(session_id)
        self.zxid += 1
        change = Change()
        for path in self._order(self.tree.ephemerals.pop(session_id, set())):
            if path in self.tree.nodes:
                self.tree.delete(change, path, self.zxid)
        self.sessions.remove(session_id)
        return Expiry(session_id, self.zxid, self._fire(change))

    def _read(self, kind: RequestKind, session_id: int, path: str, missing_ok: bool = False) -> Reply | None:
        """The checks every read makes: a live session, a valid path, a node (unless ``missing_ok``)."""
        self._count(kind, session_id)
        if not self._touch(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        if not _valid_path(path):
            return Reply(ZkCode.BAD_ARGUMENTS, zxid=self.zxid)
        if not missing_ok and path not in self.tree.nodes:
            return Reply(ZkCode.NO_NODE, zxid=self.zxid)
        return None

    def _write(self, kind: RequestKind, session_id: int, body: Callable[[_Request], T]) -> Reply[T]:
        """One write: a live session, a zxid (taken even if the write then fails), the body's checks and
        change, the watches it triggers."""
        self._count(kind, session_id)
        if not self._touch(session_id):
            return Reply(ZkCode.SESSION_EXPIRED, zxid=self.zxid)
        self.zxid += 1
        req = _Request(session_id, self.zxid)
        try:
            value = body(req)
        except _Failed as failure:
            req.change.rollback()
            return Reply(failure.code, zxid=self.zxid)
        return Reply(ZkCode.OK, value, self.zxid, self._fire(req.change))

    def _apply_op(self, req: _Request, op: Op) -> OpResult:
        if isinstance(op, CreateOp):
            return OpResult(ZkCode.OK, path=self._create(req, op.path, op.data, op.mode))
        if isinstance(op, DeleteOp):
            self._delete(req, op.path, op.version)
            return OpResult(ZkCode.OK)
        if isinstance(op, SetDataOp):
            return OpResult(ZkCode.OK, stat=self._set(req, op.path, op.data, op.version))
        self._node(op.path)
        if op.version != -1 and self.tree.nodes[op.path].version != op.version:
            raise _Failed(ZkCode.BAD_VERSION)
        return OpResult(ZkCode.OK)

    def _node(self, path: str):
        if not _valid_path(path):
            raise _Failed(ZkCode.BAD_ARGUMENTS)
        node = self.tree.nodes.get(path)
        if node is None:
            raise _Failed(ZkCode.NO_NODE)
        return node

    def _create(self, req: _Request, path: str, data: bytes, mode: CreateMode) -> str:
        """``PrepRequestProcessor``'s create: path, parent, sequence suffix (the parent's create count), name
        free, parent not ephemeral — in that order."""
        if not _valid_path(path + "1" if mode.sequential else path) or path == "/":
            raise _Failed(ZkCode.BAD_ARGUMENTS if path != "/" else ZkCode.NODE_EXISTS)
        parent = self.tree.nodes.get(parent_of(path))
        if parent is None:
            raise _Failed(ZkCode.NO_NODE)
        if mode.sequential:
            path = f"{path}{parent.creates:010d}"
        if path in self.tree.nodes:
            raise _Failed(ZkCode.NODE_EXISTS)
        if parent.ephemeral_owner:
            raise _Failed(ZkCode.NO_CHILDREN_FOR_EPHEMERALS)
        owner = req.session_id if mode.ephemeral else 0
        self.tree.create(req.change, path, data, owner, req.zxid, self._clock())
        return path

    def _delete(self, req: _Request, path: str, version: int) -> None:
        if path == "/":
            raise _Failed(ZkCode.BAD_ARGUMENTS)
        if not _valid_path(path):
            raise _Failed(ZkCode.BAD_ARGUMENTS)
        if parent_of(path) not in self.tree.nodes:
            raise _Failed(ZkCode.NO_NODE)
        node = self._node(path)
        if version != -1 and node.version != version:
            raise _Failed(ZkCode.BAD_VERSION)
        if node.children:
            raise _Failed(ZkCode.NOT_EMPTY)
        self.tree.delete(req.change, path, req.zxid)

    def _set(self, req: _Request, path: str, data: bytes, version: int) -> Stat:
        node = self._node(path)
        if version != -1 and node.version != version:
            raise _Failed(ZkCode.BAD_VERSION)
        self.tree.set_data(req.change, path, data, req.zxid, self._clock())
        return node.stat()


def _valid_path(path: str) -> bool:
    """ZooKeeper's ``PathUtils.validatePath``, the parts a simulated client can get wrong: absolute, no empty
    segment, no trailing slash, no ``.`` or ``..`` segment, no NUL."""
    if not path.startswith("/") or "\0" in path:
        return False
    if path == "/":
        return True
    return all(part not in ("", ".", "..") for part in path[1:].split("/"))


def run_session_tracker(scheduler: Scheduler, model: ZooKeeperModel, deliver: Callable[[Expiry], None],
                        paused: Callable[[], bool] = lambda: False) -> Callable[[], None]:
    """Drive the model's expiries on a scheduler, as ``SessionTrackerImpl``'s thread does: wake when the earliest
    bucket is due, expire it, hand each expiry to ``deliver``. Every request may file a session in an earlier
    bucket than the one awaited (a new session's first), so the model's request listener re-arms the wake-up.

    While ``paused()`` (no quorum: no leader tracks the sessions) nothing expires; the function returned re-arms
    the tracker when that ends."""
    armed: list = [None, None]  # [bucket time awaited, its timer]

    def wake() -> None:
        armed[0] = armed[1] = None
        if paused():
            return
        for expiry in model.expire_due():
            deliver(expiry)
        arm()

    def arm(*_: object) -> None:
        due = model.next_expiry_ms()
        if due is None or due == armed[0]:
            return
        if armed[1] is not None:
            scheduler.cancel(armed[1])
        armed[0] = due
        armed[1] = scheduler.call_at(max(due, scheduler.now_ms), wake, lane="zk-session-tracker")

    model.add_request_listener(arm)
    arm()
    return arm
