"""A simulated network between client hosts and servers: TCP-like connections with a delay per direction, and
the faults the lab injects (a host cut off from the servers for a span, then healed).

A connection is two :class:`Endpoint` objects joined by two :class:`_Pipe` objects, one per direction. The
client's end is socket-like (``send``, ``recv``, ``close``, ``setblocking``), which is all kazoo's connection
loop asks of a socket; the server's end calls the server back (``on_data``, ``on_close``), since the simulated
server is a state machine, not a task.

Each pipe is a FIFO stream, as TCP is: a byte sent arrives ``delay`` later, never before a byte sent earlier.
Delays are whole microseconds: a hop over the loopback takes a few hundred.
A *partition* of a host holds every byte of its connections, both ways, where it is; at the heal what was held
arrives ``delay`` later, in order (TCP's retransmission: a connection does not lose bytes, it stalls). Whether
a stall is fatal is the endpoints' business: kazoo's read timeout drops the connection, the server expires the
session, and bytes reaching an end closed meanwhile are discarded. A connection *attempt* from a partitioned
host waits, as a SYN retransmitted would, until the heal or its timeout.

Only the client's tasks block here (``connect``, and ``select`` through the handler); every delivery is a
scheduler event in its pipe's lane, so one connection's packets keep their order and the seed orders the rest.
"""

from __future__ import annotations

import errno
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from zkconsumer.errors import ZkConsumerError
from zkconsumer.sim.cpu import ClientCost, Cores
from zkconsumer.sim.scheduler import Timer
from zkconsumer.sim.tasks import Event, Runtime, _Waiter

Address = tuple[str, int]


class ConnectFailed(ZkConsumerError, ConnectionError):
    """A connection attempt failed: nothing listens there, or the host stayed cut off until the timeout. An
    ``OSError``, as a socket's would be, so kazoo turns it into a dropped connection and retries."""


class WouldBlock(ZkConsumerError, BlockingIOError):
    """``recv`` on a non-blocking socket with nothing to read, as a real socket raises ``BlockingIOError``."""


_EOF = object()  # the FIN: what a pipe carries when its sender closed


@dataclass
class HostLink:
    """A client host's link to the servers: the delay each way (µs) and whether it is cut off now."""

    to_server_us: int = 1000
    to_client_us: int = 1000
    #: the lab's slow link (``slow-zk``): its TCP proxy holds every chunk of data this long each way, but not a
    #: connection's handshake (the client connects to the proxy on its own host) nor a close (the proxy closes the
    #: other side at once and drops what it still held) - zkconsumer/lab/faults/proxy.py
    proxy_us: int = 0
    partitioned: bool = False
    healed: Event | None = None
    pipes: list[_Pipe] = field(default_factory=list)
    #: the host's own ends of its connections (what a killed process's operating system closes)
    endpoints: list[Endpoint] = field(default_factory=list)
    #: what each frame received costs the host's CPU (None: nothing; :mod:`.cpu`, on the network's ``cores``)
    cost: ClientCost | None = None


class _Pipe:
    """One direction of one connection: a FIFO of (due time, payload) delivered to ``target`` in order."""

    def __init__(self, network: Network, link: HostLink, delay_us: Callable[[], int], target: Endpoint) -> None:
        self._network = network
        self._link = link
        self._delay_us = delay_us
        self._target = target
        self._queue: deque[tuple[int, object]] = deque()
        self._timer: Timer | None = None

    def push(self, payload: object) -> None:
        now = self._network.scheduler.now_us
        if payload is _EOF and self._link.proxy_us and not self._link.partitioned:
            # the proxy sees the close at once and closes the other side, dropping the chunks it still holds
            due = now + self._link.to_server_us
            self._queue = deque(item for item in self._queue if item[0] <= due)
            if self._timer is not None:  # its head may be gone
                self._timer.cancel()
                self._timer = None
        else:
            due = now + self._delay_us()
        if self._queue:
            due = max(due, self._queue[-1][0])  # a stream: never overtake what was sent before
        self._queue.append((due, payload))
        self._arm()

    def heal(self) -> None:
        """The partition is over: what was held (or was due meanwhile) arrives one delay from now."""
        floor = self._network.scheduler.now_us + self._delay_us()
        self._queue = deque((max(due, floor), payload) for due, payload in self._queue)
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None or not self._queue or self._link.partitioned:
            return
        self._timer = self._network.scheduler.call_at_us(self._queue[0][0], self._deliver, lane=self)

    def _deliver(self) -> None:
        self._timer = None
        scheduler = self._network.scheduler
        while self._queue and not self._link.partitioned and self._queue[0][0] <= scheduler.now_us:
            _, payload = self._queue.popleft()
            self._network.delivered += 1
            if payload is _EOF:
                self._target._peer_closed()
            else:
                self._target._receive(payload)  # type: ignore[arg-type]
        self._arm()


class Endpoint:
    """One end of a connection. On the client's side it is the socket kazoo reads and writes; on the server's
    side ``on_data`` and ``on_close`` are called as bytes and the peer's close arrive."""

    def __init__(self, runtime: Runtime, peer_name: Address) -> None:
        self._runtime = runtime
        self.peer_name = peer_name
        self.readers: deque[_Waiter] = deque()
        self.on_data: Callable[[bytes], None] | None = None
        self.on_close: Callable[[], None] | None = None
        self.closed = False
        self._out: _Pipe | None = None
        self._buffer = bytearray()
        self._eof = False
        #: a client end on a machine (:mod:`.cpu`): its host's link (whose ``cost`` it pays per frame), the cores it
        #: pays on, and the instant the last frame it received is through (read in order, each after the one before)
        self._link: HostLink | None = None
        self._cores: Cores | None = None
        self._ready_us = 0

    # -------------------------------------------------------------------------------------- socket surface
    def setblocking(self, flag: bool) -> None:
        """Every endpoint is non-blocking (waits happen in the handler's ``select``)."""

    def getpeername(self) -> Address:
        return self.peer_name

    def send(self, data: bytes | bytearray | memoryview) -> int:
        if self.closed:
            raise ConnectFailed(errno.EPIPE, "send on a closed connection")
        payload = bytes(data)
        if self._out is not None:
            self._out.push(payload)
        return len(payload)

    sendall = send

    def recv(self, n: int) -> bytes:
        if self._buffer:
            chunk = bytes(self._buffer[:n])
            del self._buffer[:n]
            return chunk
        if self._eof or self.closed:
            return b""
        raise WouldBlock(errno.EAGAIN, "nothing to read")

    def close(self) -> None:
        """Close this end: the peer learns of it one delay later (unless the link holds it)."""
        if self.closed:
            return
        self.closed = True
        self._buffer.clear()
        if self._out is not None:
            self._out.push(_EOF)
        self._runtime.wake_all(self.readers)

    def readable(self) -> bool:
        """``select`` would report it: data waiting, or the peer's close (a read then returns b"")."""
        return bool(self._buffer) or self._eof or self.closed

    # -------------------------------------------------------------------------------------- from the pipe
    def _receive(self, data: bytes) -> None:
        if self.closed:
            return
        if self.on_data is not None:
            self.on_data(data)
            return
        cost = None if self._link is None else self._link.cost
        if cost is not None and self._cores is not None:  # the host's CPU reads it first
            now = self._runtime.scheduler.now_us
            self._ready_us = max(self._cores.admit(cost.of(data), now), self._ready_us)
            if self._ready_us > now:
                self._runtime.scheduler.call_at_us(self._ready_us, lambda: self._read(data), lane=self)
                return
        self._read(data)

    def _read(self, data: bytes) -> None:
        if self.closed:
            return
        self._buffer += data
        self._runtime.wake_all(self.readers)

    def _peer_closed(self) -> None:
        if self.closed or self._eof:
            return
        if self._ready_us > self._runtime.scheduler.now_us:  # after the frames its CPU is still reading
            self._runtime.scheduler.call_at_us(self._ready_us, self._closed_by_peer, lane=self)
            return
        self._closed_by_peer()

    def _closed_by_peer(self) -> None:
        if self.closed or self._eof:
            return
        self._eof = True
        if self.on_close is not None:
            self.on_close()
        self._runtime.wake_all(self.readers)


class Network:
    """Client hosts, listening servers, and the links between them."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.scheduler = runtime.scheduler
        self.delivered = 0
        self._hosts: dict[str, HostLink] = {}
        self._listeners: dict[Address, Callable[[Endpoint], None]] = {}
        #: each packet's delay is its link's plus 0..``jitter_us`` drawn from ``rng`` (none without one): how a seed
        #: reorders what different connections deliver, while each connection stays a FIFO stream
        self.jitter_us = 0
        self.rng: random.Random | None = None
        #: the machine's cores (:mod:`.cpu`): a host with a ``cost`` pays for each frame it receives on them
        self.cores: Cores | None = None

    def _jitter(self) -> int:
        return self.rng.randint(0, self.jitter_us) if self.rng is not None and self.jitter_us else 0

    def link(self, host: str) -> HostLink:
        link = self._hosts.get(host)
        if link is None:
            link = self._hosts[host] = HostLink()
        return link

    def listen(self, address: Address, accept: Callable[[Endpoint], None]) -> None:
        """A server at ``address``: ``accept(endpoint)`` is called with the server's end of each new connection."""
        self._listeners[address] = accept

    def unlisten(self, address: Address) -> None:
        """Nothing listens at ``address`` any more: a connect is refused (the servers there are down)."""
        self._listeners.pop(address, None)

    # -------------------------------------------------------------------------------------- faults
    def set_proxy_latency_us(self, host: str, latency_us: int) -> None:
        """The lab's slow link for ``host`` (``HostLink.proxy_us``): data held ``latency_us`` more each way."""
        self.link(host).proxy_us = latency_us

    def set_delay_us(self, host: str, to_server_us: int, to_client_us: int | None = None) -> None:
        """``host``'s one-way delays from now on (a slow link, or the link healed back to its base)."""
        link = self.link(host)
        link.to_server_us = to_server_us
        link.to_client_us = to_server_us if to_client_us is None else to_client_us

    def partition(self, host: str) -> None:
        """Cut ``host`` off from every server: its connections' bytes are held, its connection attempts wait."""
        link = self.link(host)
        if not link.partitioned:
            link.partitioned = True
            link.healed = Event(self.runtime)

    def heal(self, host: str) -> None:
        link = self.link(host)
        if not link.partitioned:
            return
        link.partitioned = False
        link.pipes = [p for p in link.pipes if p._queue or not p._target.closed]
        for pipe in link.pipes:
            pipe.heal()
        if link.healed is not None:
            link.healed.set()

    def close_host(self, host: str) -> None:
        """Close every connection ``host`` has open, as the kernel does for a process killed with SIGKILL: each
        server sees the close one delay later (or at the heal, if the host is cut off)."""
        link = self.link(host)
        for endpoint in link.endpoints:
            endpoint.close()
        link.endpoints = []

    # -------------------------------------------------------------------------------------- connecting
    def connect(self, host: str, address: Address, timeout: float | None) -> Endpoint:
        """Open a connection from ``host`` to ``address`` (blocks the calling task for the handshake's round
        trip; while the host is cut off, until the heal or ``timeout``)."""
        link = self.link(host)
        if link.partitioned:
            if link.healed is not None and not link.healed.wait(timeout):
                raise ConnectFailed(errno.ETIMEDOUT,
                                    f"connect to {address[0]}:{address[1]} timed out (host {host} cut off)")
        self.runtime.sleep((link.to_server_us + link.to_client_us) / 1e6)  # SYN, SYN-ACK
        accept = self._listeners.get(address)
        if accept is None:
            raise ConnectFailed(errno.ECONNREFUSED, f"connection refused: nothing listens at {address[0]}:{address[1]}")
        client = Endpoint(self.runtime, address)
        client._link, client._cores = link, self.cores
        server = Endpoint(self.runtime, (host, 0))
        client._out = _Pipe(self, link, lambda: link.to_server_us + link.proxy_us + self._jitter(), server)
        server._out = _Pipe(self, link, lambda: link.to_client_us + link.proxy_us + self._jitter(), client)
        link.pipes = [p for p in link.pipes if p._queue or not p._target.closed] + [client._out, server._out]
        link.endpoints = [e for e in link.endpoints if not e.closed] + [client]
        accept(server)
        return client


class LocalPipe:
    """One direction of an in-process socket pair (a wake-up pipe): instantaneous, no network, no faults."""

    def __init__(self, target: Endpoint) -> None:
        self._target = target

    def push(self, payload: object) -> None:
        if isinstance(payload, bytes):
            self._target._receive(payload)
        else:
            self._target._peer_closed()


def local_pair(runtime: Runtime) -> tuple[Endpoint, Endpoint]:
    """``socket.socketpair()``'s two ends: what one writes the other reads at once (a client's wake-up pipe)."""
    a = Endpoint(runtime, ("wakeup", 0))
    b = Endpoint(runtime, ("wakeup", 1))
    a._out = LocalPipe(b)  # type: ignore[assignment]
    b._out = LocalPipe(a)  # type: ignore[assignment]
    return a, b
