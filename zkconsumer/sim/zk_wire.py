"""The server end of ZooKeeper's wire protocol in front of :class:`~zkconsumer.sim.zookeeper.ZooKeeperModel`:
what a real client (kazoo, unmodified) connects to in a simulation.

It owns what the model leaves to connections (docs/simulation.md): the handshake (a new session, a reconnect
to a live one, or "expired": a timeout of 0, then the close, as ``NIOServerCnxn.finishSessionInit`` does), one
connection per session (a reconnect closes the session's old connection and drops its watches, which the
client sets again), notifications written to the watching session's connection before the reply of the request
that set them off (ZooKeeper queues them while applying the transaction), and the close of an expired or closed
session's connection. When a request is served is :mod:`.zk_service`'s: at once (``INSTANT``), or in one line
behind the requests that came before it, each taking its kind's service time.

Codecs are :mod:`.zk_jute`'s; the session tracker's expiries are driven by
:func:`~zkconsumer.sim.zookeeper.run_session_tracker`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from zkconsumer.sim.cpu import Cores
from zkconsumer.sim.network import Address, Endpoint, Network
from zkconsumer.sim.zk_codes import CreateMode, RequestKind, ZkCode
from zkconsumer.sim.zk_jute import (
    CheckRequest,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    DeleteRequest,
    MalformedFrame,
    MultiRequest,
    OpCode,
    PathRequest,
    Request,
    SetDataRequest,
    SetWatchesRequest,
    Writer,
    Xid,
    decode_connect,
    decode_request,
    encode_connect_response,
    encode_notification,
    encode_reply,
    multi_header,
    split_frames,
)
from zkconsumer.sim.zk_service import INSTANT, ServiceQueue, ServiceTimes
from zkconsumer.sim.zk_tree import Node, WatchEvent
from zkconsumer.sim.zookeeper import (
    CheckOp,
    CreateOp,
    DeleteOp,
    Expiry,
    Op,
    OpResult,
    Reply,
    SetDataOp,
    ZooKeeperModel,
    run_session_tracker,
)

log = logging.getLogger(__name__)


def session_password(session_id: int) -> bytes:
    """The 16-byte password a session is handed: a function of its id (no secret to keep in a simulation)."""
    return session_id.to_bytes(8, "big") * 2


#: The kind of service a request's opcode asks for (what it costs the server: :mod:`.zk_service`).
KIND_OF_OP = {
    OpCode.PING: RequestKind.PING, OpCode.CLOSE_SESSION: RequestKind.CLOSE_SESSION,
    OpCode.CREATE: RequestKind.CREATE, OpCode.CREATE2: RequestKind.CREATE, OpCode.DELETE: RequestKind.DELETE,
    OpCode.SET_DATA: RequestKind.SET_DATA, OpCode.GET_DATA: RequestKind.GET_DATA, OpCode.EXISTS: RequestKind.EXISTS,
    OpCode.GET_CHILDREN: RequestKind.GET_CHILDREN, OpCode.GET_CHILDREN2: RequestKind.GET_CHILDREN,
    OpCode.MULTI: RequestKind.MULTI, OpCode.MULTI_READ: RequestKind.MULTI_READ,
    OpCode.SET_WATCHES: RequestKind.SET_WATCHES, OpCode.SYNC: RequestKind.PING,
}

#: Commands a ZooKeeper server answers in place of a session handshake (the first four bytes of a connection).
FOUR_LETTER_WORDS = frozenset({b"srvr", b"stat", b"ruok", b"mntr", b"cons", b"conf", b"envi", b"wchs"})


class _Connection:
    """One client connection as the server sees it: awaiting its ConnectRequest, then serving one session."""

    def __init__(self, server: WireServer, endpoint: Endpoint, node: int = 0) -> None:
        self.server = server
        self.endpoint = endpoint
        self.node = node  # which of the ensemble's servers accepted it
        self.session_id: int | None = None
        self.handshaking = False  # its ConnectRequest is in the server's line
        self.open = True
        self.lost = False  # its server died (or lost its quorum): what it sent that waits in line is gone
        self._buffer = bytearray()
        server._connections[self] = None
        endpoint.on_data = self._on_data
        endpoint.on_close = self._on_close

    def send(self, frame: bytes) -> None:
        if self.open:
            self.server.bytes_out += len(frame)
            self.endpoint.send(frame)

    def close(self) -> None:
        """The server closes this connection (its session ended, or a newer connection took it over)."""
        if self.open:
            self.open = False
            self.endpoint.close()

    def _on_close(self) -> None:
        self.open = False
        self.server._connection_closed(self)

    def _on_data(self, data: bytes) -> None:
        self.server.bytes_in += len(data)
        self._buffer += data
        if self.session_id is None and bytes(self._buffer[:4]) in FOUR_LETTER_WORDS:
            self.send(self.server.four_letter_answer(bytes(self._buffer[:4]).decode()).encode())
            self.close()  # as the real server does after answering one
            return
        try:
            for frame in split_frames(self._buffer):
                if not self.open:
                    return
                if self.session_id is None and not self.handshaking:
                    self.handshaking = True
                    connect = decode_connect(frame)
                    self.server._arrive(self, RequestKind.CREATE_SESSION,
                                        lambda c=connect: self.server._handshake(self, c))
                elif self.session_id is not None:
                    request = decode_request(frame)
                    self.server._arrive(self, KIND_OF_OP.get(request.op, RequestKind.PING),
                                        lambda r=request: self.server._serve(self, r))
                # else: a request sent before the handshake's answer (no real client does): dropped
        except MalformedFrame as exc:
            log.warning("closing a connection that sent a malformed frame: %s", exc)
            self.close()
            self.server._connection_closed(self)


class WireServer:
    """A ZooKeeper server listening at ``address`` on a simulated network; or, given several addresses, an
    ensemble's servers answering from one data tree (a quorum's view: no follower lags behind the leader), each
    of which can be down (:meth:`kill_node`) while the others serve."""

    def __init__(self, model: ZooKeeperModel, network: Network,
                 address: Address | Sequence[Address] = ("127.0.0.1", 2181), service: ServiceTimes = INSTANT,
                 cores: Cores | None = None) -> None:
        self.model = model
        self.network = network
        self.addresses: tuple[Address, ...] = (address,) if isinstance(address[0], str) else tuple(address)  # type: ignore[assignment]
        self.address = self.addresses[0]
        self.frames_in = 0
        #: what crossed the wire, for the herd's report: bytes each way (frames whole) and watch notifications sent
        self.bytes_in = self.bytes_out = self.notifications = 0
        #: None: every request served the instant it arrives (no event of its own: the traces of a world without
        #: service time are what they were before it existed)
        self.queue = None if service.zero else ServiceQueue(service, cores)
        self._by_session: dict[int, _Connection] = {}
        #: a children list's jute encoding, by path, while the model hands out the same list (ChildOrder.PER_VERSION)
        self._encoded_children: dict[str, tuple[list[str], bytearray]] = {}
        #: a node's multiRead result, encoded, while the node stays as it was (by the node's id, the node kept with
        #: it so the id stays its own; emptied when it outgrows the tree)
        self._encoded_results: dict[int, tuple[Node, tuple[int, ...], bytes]] = {}
        #: every open connection, in the order accepted (a dict as an ordered set: the seed decides, not a hash)
        self._connections: dict[_Connection, None] = {}
        self.serving = True
        self.alive = [True] * len(self.addresses)
        self._listen()
        self._rearm = run_session_tracker(network.scheduler, model, self._expired, paused=lambda: not self.serving)

    def _listen(self) -> None:
        """Listen where a live server serves; refuse connections everywhere else."""
        for node, address in enumerate(self.addresses):
            if self.serving and self.alive[node]:
                self.network.listen(address, lambda endpoint, n=node: _Connection(self, endpoint, n))
            else:
                self.network.unlisten(address)

    def _drop(self, node: int | None = None) -> None:
        """Close every connection (of server ``node`` only, if given): what waited in line with them is lost."""
        for conn in list(self._connections):
            if node is None or conn.node == node:
                conn.lost = True
                conn.close()
                self._connection_closed(conn)

    # ------------------------------------------------------------------------------------------- the quorum
    def stop_serving(self) -> None:
        """No quorum (or no leader yet): every connection is closed, new ones are refused, and no session
        expires (no leader tracks them) until :meth:`resume_serving`. Requests waiting in line are lost with the
        servers that held them."""
        self.serving = False
        self._listen()
        self._drop()

    def resume_serving(self) -> None:
        """A leader again: it takes every live session over from the log with a full timeout (as
        ``ZooKeeperServer.loadData`` re-adds the sessions it finds), and clients may connect to the live servers."""
        now = self.network.scheduler.now_ms
        for session_id in sorted(self.model.sessions.sessions):
            self.model.sessions.touch(session_id, now)
        self.serving = True
        self._listen()
        self._rearm()

    def kill_node(self, node: int) -> None:
        """Server ``node`` (0-based) dies: its connections close, its address refuses (its clients move on to the
        others in their connect strings). Whether the rest still serve is the ensemble's business
        (:mod:`.zk_ensemble`)."""
        self.alive[node] = False
        self._listen()
        self._drop(node)

    def start_node(self, node: int) -> None:
        """Server ``node`` is back: it accepts connections once the ensemble serves."""
        self.alive[node] = True
        self._listen()

    def _arrive(self, conn: _Connection, kind: RequestKind, serve: Callable[[], None]) -> None:
        """A request reaches the server: served now, or in the server's line (the session counts as heard from on
        arrival, as ``ZooKeeperServer.submitRequest`` touches it before the pipeline runs)."""
        if self.queue is None:
            serve()
            return
        scheduler = self.network.scheduler
        if conn.session_id is not None:
            self.model.sessions.touch(conn.session_id, scheduler.now_ms)  # a gone session stays gone
        scheduler.call_at_us(self.queue.admit(kind, scheduler.now_us), lambda: None if conn.lost else serve(),
                          lane="zk-server")

    # ------------------------------------------------------------------------------------------- sessions
    def _handshake(self, conn: _Connection, request: ConnectRequest) -> None:
        if not conn.open:
            return  # the client gave up while the ConnectRequest waited in line
        model = self.model
        if request.session_id == 0:
            reply = model.create_session(request.timeout_ms)
            assert reply.value is not None
            session_id, timeout = reply.value
        elif model.is_live(request.session_id):
            session_id = request.session_id
            model.sessions.touch(session_id, self.network.scheduler.now_ms)  # revalidation counts as hearing from it
            timeout = model.session_timeout_ms(session_id) or 0
            old = self._by_session.pop(session_id, None)
            if old is not None and old is not conn:
                old.close()
                model.drop_watches(session_id)
        else:
            conn.session_id = request.session_id
            conn.send(encode_connect_response(ConnectResponse(0, 0, 0, bytes(16))))
            conn.close()
            return
        conn.session_id = session_id
        self._by_session[session_id] = conn
        conn.send(encode_connect_response(ConnectResponse(0, timeout, session_id, session_password(session_id))))

    def expire(self, session_id: int) -> bool:
        """Close ``session_id`` from outside, as the lab's twin client on its id and password does: its ephemerals
        go (their watchers told), its connection is closed, and its client learns at its reconnect that the session
        is gone. False if it was not live."""
        reply = self.model.close_session(session_id)
        if not reply.ok:
            return False
        self._expired(Expiry(session_id, reply.zxid, reply.events))
        return True

    def _connection_closed(self, conn: _Connection) -> None:
        """The client closed (or the server dropped) a connection: the session keeps ticking, its watches go."""
        self._connections.pop(conn, None)
        sid = conn.session_id
        if sid is not None and self._by_session.get(sid) is conn:
            del self._by_session[sid]
            self.model.drop_watches(sid)

    def _expired(self, expiry: Expiry) -> None:
        self._notify(expiry.events)
        conn = self._by_session.pop(expiry.session_id, None)
        if conn is not None:
            conn.close()

    def _notify(self, events: Sequence[WatchEvent]) -> None:
        for event in events:
            conn = self._by_session.get(event.session_id)
            if conn is not None:
                self.notifications += 1
                conn.send(encode_notification(int(event.type), event.path))

    # ------------------------------------------------------------------------------------------- requests
    def _serve(self, conn: _Connection, request: Request) -> None:
        self.frames_in += 1
        sid = conn.session_id
        assert sid is not None
        model, op, body = self.model, request.op, request.body
        out = Writer()
        if op is OpCode.PING:
            reply: Reply = model.ping(sid)
        elif op is OpCode.CLOSE_SESSION:
            reply = model.close_session(sid)
            self._notify(reply.events)
            conn.send(encode_reply(request.xid, reply.zxid, int(reply.code)))
            self._by_session.pop(sid, None)
            conn.close()
            return
        elif isinstance(body, CreateRequest):
            reply = model.create(sid, body.path, body.data, _mode(body.flags))
            out.string(reply.value)
            if op is OpCode.CREATE2 and reply.ok:
                out.stat(model.tree.nodes[reply.value].stat())
        elif isinstance(body, DeleteRequest):
            reply = model.delete(sid, body.path, body.version)
        elif isinstance(body, SetDataRequest):
            reply = model.set_data(sid, body.path, body.data, body.version)
            if reply.ok:
                out.stat(reply.value)
        elif op is OpCode.GET_DATA:
            reply = model.get_data(sid, body.path, body.watch)
            if reply.ok:
                out.buffer(reply.value[0]).stat(reply.value[1])
        elif op is OpCode.EXISTS:
            reply = model.exists(sid, body.path, body.watch)
            if reply.ok:
                out.stat(reply.value)
        elif op in (OpCode.GET_CHILDREN, OpCode.GET_CHILDREN2):
            reply = model.get_children(sid, body.path, body.watch)
            if reply.ok:
                names = reply.value[0]
                cached = self._encoded_children.get(body.path)
                if cached is None or cached[0] is not names:  # the model hands out one list per version, or more
                    cached = self._encoded_children[body.path] = (names, Writer().strings(names).out)
                out.out += cached[1]
                if op is OpCode.GET_CHILDREN2:
                    out.stat(reply.value[1])
        elif op is OpCode.SYNC and isinstance(body, PathRequest):
            reply = Reply(ZkCode.OK, None, model.zxid)  # one server: everything is already in sync
            out.string(body.path)
        elif op is OpCode.MULTI_READ and isinstance(body, MultiRequest) and model.config.serves_multi_read:
            reply = self._multi_read(sid, body, out)
        elif op is OpCode.MULTI and isinstance(body, MultiRequest):
            reply = self._multi(sid, body, out)
        elif isinstance(body, SetWatchesRequest):
            reply = model.set_watches(sid, body.relative_zxid, body.data, body.exist, body.child)
        else:
            reply = Reply(ZkCode.UNIMPLEMENTED, None, model.zxid)
        self._notify(reply.events)
        xid = Xid.PING if op is OpCode.PING else request.xid
        conn.send(encode_reply(xid, reply.zxid, int(reply.code), out))

    def _multi_read(self, sid: int, body: MultiRequest, out: Writer) -> Reply:
        """``multiRead`` (3.6+): a getData result per op, or an error result for a node that is not there."""
        reply = self.model.multi_read(sid, [rec.path for _op, rec in body.ops])
        if not reply.ok:
            return reply
        encoded = self._encoded_results
        for result in reply.value or []:
            if isinstance(result, ZkCode):
                multi_header(out, OpCode.ERROR, False, int(result)).int(int(result))
                continue
            # a herd reads the same registrations thousands of times: encode a node once per state of it
            state = (result.mzxid, result.pzxid, result.creates, len(result.children))
            cached = encoded.get(id(result))
            if cached is None or cached[0] is not result or cached[1] != state:
                if len(encoded) > 2 * len(self.model.tree.nodes) + 1024:
                    encoded.clear()
                w = multi_header(Writer(), OpCode.GET_DATA, False, 0).buffer(result.data).stat(result.stat())
                cached = encoded[id(result)] = (result, state, bytes(w.out))
            out.out += cached[2]
        multi_header(out, -1, True, -1)
        return Reply(ZkCode.OK, None, reply.zxid)

    def four_letter_answer(self, word: str) -> str:
        """What the server says to a four-letter word on a fresh connection (``srvr`` is what clients ask: the
        version decides whether they may send ``multiRead``)."""
        if word in ("srvr", "stat"):
            return (f"Zookeeper version: {self.model.config.version}-zkconsumer-sim, built on 1970-01-01 00:00 GMT\n"
                    f"Latency min/avg/max: 0/0.0/0\nReceived: {self.frames_in}\nSent: {self.frames_in}\n"
                    f"Connections: {len(self._by_session)}\nOutstanding: 0\nZxid: 0x{self.model.zxid:x}\n"
                    f"Mode: standalone\nNode count: {len(self.model.tree.nodes)}\n")
        if word == "ruok":
            return "imok"
        return f"{word} is not executed because it is not in the whitelist.\n"

    def _multi(self, sid: int, body: MultiRequest, out: Writer) -> Reply:
        """A multi's results go in its body, one header each, whatever happened; the reply header's err stays OK
        (``FinalRequestProcessor`` does not throw a multi's error) unless the session itself is gone."""
        ops: list[Op] = []
        for _op, rec in body.ops:
            if isinstance(rec, CreateRequest):
                ops.append(CreateOp(rec.path, rec.data, _mode(rec.flags)))
            elif isinstance(rec, DeleteRequest):
                ops.append(DeleteOp(rec.path, rec.version))
            elif isinstance(rec, SetDataRequest):
                ops.append(SetDataOp(rec.path, rec.data, rec.version))
            elif isinstance(rec, CheckRequest):
                ops.append(CheckOp(rec.path, rec.version))
        reply = self.model.multi(sid, ops)
        if reply.code is ZkCode.SESSION_EXPIRED and not reply.value:
            return reply
        results: list[OpResult] = list(reply.value or [])
        failed = not reply.ok
        for (op, _rec), result in zip(body.ops, results, strict=True):
            if failed:
                multi_header(out, OpCode.ERROR, False, int(result.code)).int(int(result.code))
                continue
            multi_header(out, op, False, 0)
            if op in (OpCode.CREATE, OpCode.CREATE2):
                out.string(result.path)
                if op is OpCode.CREATE2 and result.path is not None:
                    out.stat(self.model.tree.nodes[result.path].stat())
            elif op is OpCode.SET_DATA and result.stat is not None:
                out.stat(result.stat)
        multi_header(out, -1, True, -1)
        return Reply(ZkCode.OK, None, reply.zxid, reply.events)


def _mode(flags: int) -> CreateMode:
    return CreateMode(flags & 3)
