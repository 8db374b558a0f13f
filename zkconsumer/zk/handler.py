"""kazoo's threading handler, made cheaper for dozens of clients in one process (the lab, the benchmarks).

Every ZooKeeper request and response passes through two pieces of the handler: the ``select`` kazoo's
connection loop waits in, and the ``AsyncResult`` each request is answered through. kazoo's versions of both
allocate per call what can be allocated once (an epoll selector per wait) or more cheaply (a ``Condition``
with its re-entrant lock and waiter deque per request); in a rebalance of 50 consumers on two cores that was
CPU taken from the rebalance itself. :class:`PollHandler` keeps kazoo's behaviour and threading model for
every callback but those marked with :func:`runs_inline`.

kazoo hands every watch event and every ``rawlink`` completion to a worker thread through a queue, so that a
callback may block (read ZooKeeper again, as its ``ChildrenWatch`` recipe does) without stalling the connection.
Most of ours only flag the rebalancer and return; for them the hand-off is a thread wake-up per event on the
rebalance's busiest moment (about 150 events per crash of one consumer among 50, most of them our own owner
watches firing on our own deletes). A callback marked :func:`runs_inline` runs on the connection thread itself.

The connection itself (:class:`EagerConnection`) reads and writes before asking ``poll`` whether it may, and
tells how its first handshake ended (:func:`start_session`): kazoo's ``start`` cannot say that a server refused
the credentials.

What zkconsumer's own code here takes of threads, time and chance comes from the runtime seam (zkconsumer/runtime.py):
the locks of :class:`LatchResult`, the per-thread poll sets, the connection's send and receive times (which feed the
session lease, zk/lease.py) and its reconnect wait. What the inherited kazoo handler does itself (its worker threads
and queues, built by ``SequentialThreadingHandler``) and the ``poll`` of the connection loop stay kazoo's threading
model, live: a simulation replaces the whole handler (sim/kazoo_handler.py), not these pieces.
"""

from __future__ import annotations

import functools
import logging
import select
import ssl
from collections import deque
from collections.abc import Callable

from kazoo.exceptions import AuthFailedError, SessionExpiredError, SessionMovedError
from kazoo.handlers import utils
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd
from kazoo.protocol.connection import WATCH_XID, ConnectionDropped, ConnectionHandler

from zkconsumer import runtime
from zkconsumer.errors import IllegalArgument
from zkconsumer.zk.lease import SessionLease
from zkconsumer.zk.timing import FIRST_CONNECT_RETRY_S, ClientTiming

_READ_MASK = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
_WRITE_MASK = select.POLLOUT | select.POLLHUP | select.POLLERR | select.POLLNVAL

_PENDING = utils._NONE  # kazoo's "no value or exception yet" marker (its ready() and exception read it)

log = logging.getLogger(__name__)

_INLINE = "_zkconsumer_runs_inline"


def runs_inline(func: Callable) -> Callable:
    """Mark a watch or ``rawlink`` callback to be run on kazoo's connection thread, without the hand-off to its
    worker thread. Only for callbacks that never block and never wait for ZooKeeper (a synchronous request from
    the connection thread would wait for an answer only that thread can read): flag something, send an
    asynchronous request, return. Such a callback may run before other callbacks of the same client still
    queued for the worker thread (kazoo otherwise runs them one at a time, in order)."""
    setattr(func, _INLINE, True)
    return func


def _run_inline(func: Callable, *args) -> None:
    try:
        func(*args)
    except Exception:  # noqa: BLE001 - as kazoo's worker thread does: the connection thread must go on
        log.exception("exception in a callback run on the connection thread")


class LatchResult(utils.AsyncResult):
    """kazoo's ``AsyncResult`` contract (set / set_exception once, get / wait with a timeout, rawlink / unlink)
    on two plain locks instead of a ``threading.Condition``: ``_latch`` is held from creation until the answer
    arrives, so a waiter blocks by acquiring it (and releases it at once for the next waiter); ``_guard``
    orders the answer against callbacks being linked, as kazoo's condition did."""

    def __init__(self, handler: SequentialThreadingHandler) -> None:  # noqa: D107 - no super(): no Condition
        self._handler = handler
        self._exception = _PENDING
        self._callbacks: list = []
        self.value = None
        self._guard = runtime.Lock()  # live: _thread's plain lock (allocate_lock), the cheap one
        self._latch = runtime.Lock()
        self._latch.acquire()

    def set(self, value=None) -> None:  # noqa: ANN001 - kazoo's signature
        with self._guard:
            if self._exception is not _PENDING:
                return  # answered already (kazoo never answers twice; a second release would raise)
            self.value = value
            self._exception = None
            if self._callbacks:
                self._do_callbacks()
        self._latch.release()

    def set_exception(self, exception: BaseException) -> None:
        with self._guard:
            if self._exception is not _PENDING:
                return
            self._exception = exception
            if self._callbacks:
                self._do_callbacks()
        self._latch.release()

    def _await(self, timeout: float | None) -> None:
        if self._exception is _PENDING and self._latch.acquire(True, -1 if timeout is None else max(timeout, 0)):
            self._latch.release()

    def get(self, block: bool = True, timeout: float | None = None):  # noqa: ANN201 - kazoo's signature
        if block:
            self._await(timeout)
        exception = self._exception
        if exception is None:
            return self.value
        if exception is _PENDING:
            raise KazooTimeoutError()
        raise exception

    def wait(self, timeout: float | None = None) -> bool:
        self._await(timeout)
        return self._exception is not _PENDING

    def rawlink(self, callback) -> None:  # noqa: ANN001
        with self._guard:
            if callback not in self._callbacks:
                self._callbacks.append(callback)
            if self._exception is not _PENDING:  # answered already: dispatch now, as kazoo does
                self._do_callbacks()

    def unlink(self, callback) -> None:  # noqa: ANN001
        with self._guard:
            if self._exception is _PENDING and callback in self._callbacks:
                self._callbacks.remove(callback)

    def _do_callbacks(self) -> None:
        """kazoo's dispatch of the linked callbacks (to its completion thread while the handler runs, at once
        otherwise), except that those marked :func:`runs_inline` run at once on the answering thread."""
        running = self._handler.running
        for callback in self._callbacks:
            if running and not getattr(callback, _INLINE, False):
                self._handler.completion_queue.put(functools.partial(callback, self))
            elif running:
                _run_inline(callback, self)
            else:
                callback(self)


class PollHandler(SequentialThreadingHandler):
    """kazoo's threading handler with a ``poll()``-based select that keeps its poll sets between calls, and
    requests answered through :class:`LatchResult`.

    kazoo's own ``selector_select`` builds and closes an epoll selector for every wait of its connection loop;
    with dozens of clients in one process (the lab, the benchmarks) that dominated the CPU profile. ``poll``
    needs no kernel object per call and, unlike ``select``, has no 1024-descriptor limit. The connection loop
    waits on the same few combinations of objects (socket and wake-up pipe; the socket to read; the socket to
    write) a few dozen times per rebalance, so the poll sets built for them are kept, per thread (a poll object
    serves one caller at a time). A new connection brings a new socket object, hence new sets; kazoo never
    waits on a socket it has closed (it leaves the connection loop and opens another).
    """

    _KEPT = 4  # poll sets kept per thread: kazoo's loop uses three

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._polls = runtime.local()

    def async_result(self) -> LatchResult:
        return LatchResult(self)

    def dispatch_callback(self, callback) -> None:  # noqa: ANN001 - kazoo's Callback
        """A watch event: to kazoo's callback thread, or run here (the connection thread) if marked
        :func:`runs_inline`."""
        if getattr(callback.func, _INLINE, False):
            _run_inline(callback.func, *callback.args)
        else:
            super().dispatch_callback(callback)

    def select(self, rlist, wlist, xlist, timeout=None):  # noqa: D401 - kazoo's signature
        if timeout is not None and timeout < 0:
            raise IllegalArgument("timeout must be non-negative")
        if type(rlist) is not list or type(wlist) is not list:  # kazoo passes lists; compared as lists below
            rlist, wlist = list(rlist), list(wlist)
        kept = getattr(self._polls, "sets", None)
        if kept is None:
            kept = self._polls.sets = []
        for entry in kept:
            # Sockets compare by identity; the objects themselves are kept, not their ids (an id is only unique
            # while its object lives).
            if entry[0] == rlist and entry[1] == wlist:
                break
        else:
            entry = (rlist.copy(), wlist.copy(), *_poll_set(rlist, wlist))
            kept.insert(0, entry)
            del kept[self._KEPT:]
        poller, objs = entry[2], entry[3]
        # a real poll of real sockets, on kazoo's connection thread: kazoo's handler's business, left as it is (a
        # simulation replaces the handler, and with it this wait, by sim/kazoo_handler.py's)
        while True:
            try:
                ready = poller.poll(None if timeout is None else timeout * 1000.0)
                break
            except InterruptedError:
                continue
        readable, writable = [], []
        for fd, events in ready:
            if events & _READ_MASK:
                readable.extend(objs[fd][0])
            if events & _WRITE_MASK:
                writable.extend(objs[fd][1])
        return readable, writable, []


def _poll_set(rlist, wlist) -> tuple[select.poll, dict[int, tuple[list, list]]]:
    """A poll object registered for these objects, and which objects each descriptor stands for."""
    poller = select.poll()
    masks: dict[int, int] = {}
    objs: dict[int, tuple[list, list]] = {}
    for obj in rlist:
        fd = fileobj_to_fd(obj)
        masks[fd] = masks.get(fd, 0) | select.POLLIN | select.POLLPRI
        objs.setdefault(fd, ([], []))[0].append(obj)
    for obj in wlist:
        fd = fileobj_to_fd(obj)
        masks[fd] = masks.get(fd, 0) | select.POLLOUT
        objs.setdefault(fd, ([], []))[1].append(obj)
    for fd, mask in masks.items():
        poller.register(fd, mask)
    return poller, objs


class EagerConnection(ConnectionHandler):
    """kazoo's connection, which asks ``poll`` before each ``recv`` and ``send`` whether the socket is ready:
    three system calls per request (the reply's length, the reply, the request) that almost never wait, since
    the connection loop reads only once its own ``poll`` saw data arrive, and a request fits the socket's
    buffer. The socket is non-blocking (kazoo sets it so), so this class tries first and falls back to kazoo's
    own loop (wait, with its timeout) only when the socket is not ready or took part of the bytes. One client,
    four pipelined reads at a time: 56 → 44 µs of the connection thread's CPU per request. TLS sockets, whose
    framing kazoo handles on its own, keep kazoo's path."""

    # the session lease (zk/lease.py): the send time of each request and ping, until its answer confirms the session
    _lease: SessionLease
    _sent: deque[tuple[int, float]]
    _term_s: float
    # the timing model (zk/timing.py) and what it needs: when the server was last heard from, whether a socket
    # was ever connected (the Java client's first attempt waits nothing), how many attempts found no server yet,
    # and the session this client life is connected to (an expiry starts a new life, as zkclient's new ZooKeeper)
    _timing: ClientTiming
    _last_heard: float
    _connected_once: bool
    _attempts: int
    _last_server: tuple[str, int] | None
    _life_session: int | None
    # how the first handshake ended, for start_session: the handler's event, set once a session is established and
    # authenticated (_ready), once the server refused the credentials (_refusal), or once the loop ended
    _settled: object
    _ready: bool
    _refusal: AuthFailedError | None

    def _connect(self, host, hostip, port):  # noqa: ANN001, ANN202 - kazoo's signature
        if self._timing is ClientTiming.ZOOKEEPER_3_4:
            self._wait_before_attempt((hostip, port))
        sent = runtime.monotonic()
        self._sent.clear()  # a new connection: nothing sent on the last one will be answered
        try:
            # kazoo's handshake: the session (it reports CONNECTED already), then SASL and the digest credentials
            read_timeout, connect_timeout = super()._connect(host, hostip, port)
        except AuthFailedError as e:
            # refused (an AUTH_FAILED answer, or the server hanging up in the SASL exchange): kazoo stops for good
            self._refusal = e
            self._settled.set()
            raise
        finally:
            self._connected_once |= self._socket is not None  # the socket connected, whatever came next
        self._last_server = (hostip, port)
        self._life_session = self.client._session_id
        self._term_s = read_timeout / 1000.0  # kazoo's read timeout: two thirds of the negotiated session timeout
        self._last_heard = runtime.monotonic()
        self._lease.confirm(sent, self._term_s)  # the server accepted the session: alive when it answered
        self._ready = True
        self._settled.set()
        return read_timeout, connect_timeout

    def zk_loop(self) -> None:
        try:
            super().zk_loop()
        finally:
            self._settled.set()  # the loop ended (the client stopped, or it gave up): nothing more will come

    def _wait_before_attempt(self, server: tuple[str, int]) -> None:
        """The Java client's wait before a connection attempt: a uniformly random 0–1 s once a socket has ever
        connected, and 1 s more on the server it was last connected to; none before the first connection (bar a
        small floor between failed first attempts, zk/timing.py). A client being stopped meanwhile leaves at once.

        An expired session starts the count again: zkclient answers Expired by closing its ZooKeeper and making a
        new one (``ZkClient.reconnect``), whose first attempt, like any new client's, waits nothing, so a 0.8 member
        re-registers as soon as it hears of the expiry (kazoo keeps one client and would wait 1–2 s there)."""
        if self.client._session_id is None and self._life_session is not None:
            self._connected_once, self._attempts, self._last_server, self._life_session = False, 0, None, None
        if self._connected_once:
            wait = runtime.random() * self._timing.reconnect_wait_max_s  # random.uniform(0, max), as it computes it
            if server == self._last_server:
                wait += self._timing.same_server_wait_s
        else:
            wait = FIRST_CONNECT_RETRY_S if self._attempts else 0.0
            self._attempts += 1
        if wait and self.client._stopped.wait(wait):
            raise ConnectionDropped("client stopped while waiting to reconnect")

    def _submit(self, request, timeout, xid=None):  # noqa: ANN001, ANN202 - kazoo's signature
        if xid is not None:
            self._sent.append((xid, runtime.monotonic()))
        super()._submit(request, timeout, xid)

    def _read_header(self, timeout):  # noqa: ANN001, ANN202 - kazoo's signature
        header, buffer, offset = super()._read_header(timeout)
        self._last_heard = runtime.monotonic()
        if header.xid != WATCH_XID and header.err not in _SESSION_GONE:
            self._answered(header.xid)
        return header, buffer, offset

    def _send_ping(self, connect_timeout):  # noqa: ANN001, ANN202 - kazoo's signature
        self._unless_silent()
        super()._send_ping(connect_timeout)

    def _send_request(self, read_timeout, connect_timeout):  # noqa: ANN001, ANN202 - kazoo's signature
        self._unless_silent()
        super()._send_request(read_timeout, connect_timeout)

    def _unless_silent(self) -> None:
        """In the ZOOKEEPER_3_4 model, drop the connection before sending anything if the server has not been
        heard from for the read timeout: what the Java client's loop checks each time round, before its socket
        sends (so a process waking from a pause longer than the read timeout reconnects instead of pinging).
        kazoo's loop reaches a send first thing after a wait, having read what arrived meanwhile."""
        if not self._timing.drops_silent_connection or self.client._stopped.is_set():
            return
        silent = runtime.monotonic() - self._last_heard
        if silent >= self._term_s:
            session = self.client._session_id or 0
            raise ConnectionDropped(f"nothing heard from the server for {silent * 1000:.0f} ms, past the read "
                                    f"timeout of {self._term_s * 1000:.0f} ms (session 0x{session:x})")

    def _answered(self, xid: int) -> None:
        """ZooKeeper answers a session's requests in order, so the answer's send time is that of the oldest request
        sent with its xid (almost always the first in line); the ones before it will get no answer. An xid never
        sent on this connection (an answer to the last one) confirms nothing."""
        sent = self._sent
        for i, (x, at) in enumerate(sent):
            if x == xid:
                for _ in range(i + 1):
                    sent.popleft()
                self._lease.confirm(at, self._term_s)
                return

    def _read(self, length: int, timeout: float) -> bytes:
        sock = self._socket
        if isinstance(sock, ssl.SSLSocket):
            return super()._read(length, timeout)
        with self._socket_error_handling():  # kazoo's: a socket error is a dropped connection
            try:
                chunk = sock.recv(length)
            except BlockingIOError:
                chunk = None
        if chunk is None:
            return super()._read(length, timeout)
        if len(chunk) == length:
            return chunk
        if not chunk:
            raise ConnectionDropped("socket connection broken")
        return chunk + super()._read(length - len(chunk), timeout)

    def _write(self, msg: bytes, timeout: float) -> None:
        sock = self._socket
        if isinstance(sock, ssl.SSLSocket):
            super()._write(msg, timeout)
            return
        with self._socket_error_handling():
            try:
                sent = sock.send(msg)
            except BlockingIOError:
                sent = 0
        if sent < len(msg):
            super()._write(memoryview(msg)[sent:], timeout)


#: Error codes in an answer that say the session is not alive (kazoo raises these; they renew no lease).
_SESSION_GONE = frozenset({SessionExpiredError.code, SessionMovedError.code})


def use_eager_connection(client, timing: ClientTiming = ClientTiming.KAZOO) -> None:  # noqa: ANN001 - a KazooClient
    """Give a new (not yet started) kazoo client an :class:`EagerConnection`, with its session lease
    (:func:`session_lease`) and the connection ``timing`` (zk/timing.py). Only kazoo's own connection class is
    replaced (a client built with another one keeps it, and has no lease: ``timing`` other than kazoo's is then
    refused)."""
    if type(client._connection) is ConnectionHandler:
        connection = client._connection
        connection.__class__ = EagerConnection
        connection._lease = SessionLease()
        connection._sent = deque()
        connection._term_s = client._session_timeout / 1000.0 * 2.0 / 3.0  # the requested timeout until negotiated
        connection._timing = timing
        connection._last_heard = runtime.monotonic()
        connection._connected_once = False
        connection._attempts = 0
        connection._last_server = None
        connection._life_session = None
        connection._settled = client.handler.event_object()  # the handler's own, so a simulation's handler runs it
        connection._ready = False
        connection._refusal = None
    elif timing is not ClientTiming.KAZOO:
        raise IllegalArgument(f"the {timing.value} connection timing needs kazoo's own connection class")


def start_session(client, timeout: float) -> bool:  # noqa: ANN001 - a KazooClient
    """Start a new (or stopped) client and wait at most ``timeout`` seconds for its session, credentials included;
    whether the credentials are known accepted (False: kazoo's own ``start`` ran, see below).

    kazoo's ``start(timeout)`` waits for the ``CONNECTED`` state, which its connection reports as soon as the server
    has answered the session request, before the SASL exchange (kazoo/protocol/connection.py, ``_connect``). When
    the server then refuses the credentials, the connection goes to ``AUTH_FAILED`` and stops, and ``start`` either
    finds itself no longer connected and raises its *timeout* exception at once, or, when the connection thread did
    all of it before ``start`` began to wait, misses the whole ``CONNECTED`` moment and waits out the timeout to
    raise the same. This waits instead for what :class:`EagerConnection` records of its handshake, so the outcome
    does not depend on which thread runs first:

    * a session established and authenticated: returns True;
    * credentials refused: raises kazoo's ``AuthFailedError`` (kazoo never reconnects after that);
    * nothing of either within ``timeout`` (no server; the connection loop gave up): raises the handler's timeout
      exception, as kazoo's ``start`` does. The client is left to the caller to stop and close in both cases.

    A client without an :class:`EagerConnection`, or already started, gets kazoo's ``start`` and False: a refusal
    of its SASL credentials may then surface only at its first request.
    """
    connection = client._connection
    if not isinstance(connection, EagerConnection) or not client._stopped.is_set():
        client.start(timeout=timeout)
        return False
    # a stopped client has no connection loop left to set the event (kazoo's stop waits for it to end)
    connection._settled.clear()
    connection._ready = False
    connection._refusal = None
    client.start_async()
    connection._settled.wait(timeout)
    if connection._refusal is not None:
        raise AuthFailedError(str(connection._refusal) or "the server refused the credentials")
    if not connection._ready:
        raise client.handler.timeout_exception("Connection time-out")
    return True


def session_lease(client) -> SessionLease | None:  # noqa: ANN001 - a KazooClient
    """How long ``client``'s session is known alive (zk/lease.py); None for a client without an EagerConnection."""
    connection = client._connection
    return connection._lease if isinstance(connection, EagerConnection) else None
