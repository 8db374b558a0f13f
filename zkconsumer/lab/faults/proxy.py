"""A TCP proxy on loopback that can pass, drop or blackhole the connections through it.

Put between one consumer and ZooKeeper it cuts that consumer off while everything else (its fetches from the
broker, the other consumers' sessions) goes on — the situation in which a Kafka 0.8 consumer whose session
expired keeps consuming partitions already given to others.

Modes:

* ``pass``: bytes flow both ways.
* ``drop``: every connection is reset (RST, via ``SO_LINGER`` 0) and new ones are accepted then reset at once:
  the client learns at once that it is disconnected and keeps failing to reconnect.
* ``blackhole``: connections stay open but nothing is forwarded (bytes read are discarded) and new connections
  are accepted without any upstream: the client only notices through its own timeouts, as with a dead network.

Leaving ``blackhole`` resets the connections it swallowed (their byte streams lost data and cannot resume).
One selector thread serves every connection; the proxy only moves small ZooKeeper packets.

Latency (:meth:`TcpProxy.set_latency`) holds every chunk read, in either direction, that long before forwarding it
(in order per direction), in ``pass`` mode: a slow link rather than a cut one, so a session's pings and answers
arrive late and the client's view of the tree lags (scenario action ``slow-zk``).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import selectors
import socket
import struct
import threading
import time
from enum import StrEnum

from zkconsumer.errors import IllegalArgument


class LinkMode(StrEnum):
    """What the proxy does with the connections through it (the module's docstring says each in full)."""

    PASS = "pass"  # bytes flow both ways
    DROP = "drop"  # every connection reset, new ones too
    BLACKHOLE = "blackhole"  # connections kept open, nothing forwarded


MODES: tuple[str, ...] = tuple(mode.value for mode in LinkMode)  # what set_mode's error lists


def _reset(sock: socket.socket) -> None:
    """Close with RST rather than FIN: the peer sees ``ECONNRESET``, as when a middlebox drops a flow."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    """``TcpProxy(("127.0.0.1", 2181)).start()``; ``proxy.address`` is what the client connects to."""

    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = target
        self._listener = socket.create_server((host, port))
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._peer: dict[socket.socket, socket.socket | None] = {}  # each side → the other (None: no upstream)
        self._mode = LinkMode.PASS
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tcpproxy-{self.port}")
        self.accepted = 0  # connections accepted in any mode (tests read it)
        self._latency_s = 0.0
        #: chunks held back by the latency: (due, order, destination, data), and the last due time per destination
        #: (a chunk never overtakes the one before it when the latency is lowered)
        self._delayed: list[tuple[float, int, socket.socket, bytes]] = []
        self._order = itertools.count()
        self._last_due: dict[socket.socket, float] = {}

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def mode(self) -> LinkMode:
        return self._mode

    def start(self) -> TcpProxy:
        self._sel.register(self._listener, selectors.EVENT_READ, "accept")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread.start()
        return self

    def set_mode(self, mode: LinkMode) -> None:
        """Switch mode; the selector thread applies it (resets what ``drop``/leaving ``blackhole`` must)."""
        if mode not in MODES:
            raise IllegalArgument(f"mode must be one of {MODES}, got {mode!r}")
        mode = LinkMode(mode)
        with self._lock:
            previous, self._mode = self._mode, mode
            self._pending_reset = mode is LinkMode.DROP or (previous is LinkMode.BLACKHOLE
                                                            and mode is not LinkMode.BLACKHOLE)
        self._wake_w.send(b"x")

    @property
    def latency_ms(self) -> float:
        return self._latency_s * 1000.0

    def set_latency(self, ms: float) -> None:
        """Hold every chunk this many milliseconds before forwarding it (0: forward at once)."""
        if ms < 0:
            raise IllegalArgument(f"latency must be >= 0 ms, got {ms!r}")
        self._latency_s = ms / 1000.0
        self._wake_w.send(b"x")

    def connections(self) -> int:
        with self._lock:
            return sum(1 for s, p in self._peer.items() if p is None or s.fileno() < p.fileno())

    # ---------------------------------------------------------------------------------------- the loop
    _pending_reset = False

    def _loop(self) -> None:
        while not self._stopping:
            timeout = 0.5
            if self._delayed:
                timeout = min(timeout, max(0.0, self._delayed[0][0] - time.monotonic()))
            for key, _ in self._sel.select(timeout):
                if key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    self._apply_mode()
                elif key.data == "accept":
                    self._accept()
                else:
                    self._pump(key.fileobj)  # type: ignore[arg-type]
            self._release_due()
        for sock in list(self._peer):
            self._close(sock, reset=True)

    def _apply_mode(self) -> None:
        with self._lock:
            reset, self._pending_reset = self._pending_reset, False
        if reset:
            for sock in list(self._peer):
                self._close(sock, reset=True)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        self.accepted += 1
        mode = self._mode
        if mode is LinkMode.DROP:
            _reset(client)
            return
        upstream = None
        if mode is LinkMode.PASS:
            try:
                upstream = socket.create_connection(self.target, timeout=2.0)
            except OSError:
                _reset(client)
                return
            upstream.setblocking(False)
        client.setblocking(False)
        with self._lock:
            self._peer[client] = upstream
            if upstream is not None:
                self._peer[upstream] = client
        self._sel.register(client, selectors.EVENT_READ, "conn")
        if upstream is not None:
            self._sel.register(upstream, selectors.EVENT_READ, "conn")

    def _pump(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock, reset=False)
            return
        peer = self._peer.get(sock)
        if self._mode is not LinkMode.PASS or peer is None:
            return  # blackhole: swallowed
        if self._latency_s > 0 or self._last_due.get(peer, 0.0) > time.monotonic():
            due = max(time.monotonic() + self._latency_s, self._last_due.get(peer, 0.0))
            self._last_due[peer] = due
            heapq.heappush(self._delayed, (due, next(self._order), peer, data))
            return
        self._forward(sock, peer, data)

    def _release_due(self) -> None:
        """Forward the held chunks whose time came (those of connections closed meanwhile are dropped)."""
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, peer, data = heapq.heappop(self._delayed)
            source = self._peer.get(peer)
            if source is None or self._mode is not LinkMode.PASS:
                continue
            self._forward(source, peer, data)

    def _forward(self, sock: socket.socket, peer: socket.socket, data: bytes) -> None:
        try:
            peer.setblocking(True)
            peer.settimeout(2.0)
            peer.sendall(data)
            peer.setblocking(False)
        except OSError:
            self._close(sock, reset=True)

    def _close(self, sock: socket.socket, reset: bool) -> None:
        with self._lock:
            peer = self._peer.pop(sock, None)
            if peer is not None:
                self._peer.pop(peer, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._last_due.pop(s, None)
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(s)
            if reset:
                _reset(s)
            else:
                with contextlib.suppress(OSError):
                    s.close()

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(5)
        for s in (self._listener, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()
        self._sel.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
