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
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from typing import Literal

Mode = Literal["pass", "drop", "blackhole"]
MODES: tuple[str, ...] = ("pass", "drop", "blackhole")


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
        self._mode: Mode = "pass"
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"tcpproxy-{self.port}")
        self.accepted = 0  # connections accepted in any mode (tests read it)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def mode(self) -> Mode:
        return self._mode

    def start(self) -> TcpProxy:
        self._sel.register(self._listener, selectors.EVENT_READ, "accept")
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread.start()
        return self

    def set_mode(self, mode: Mode) -> None:
        """Switch mode; the selector thread applies it (resets what ``drop``/leaving ``blackhole`` must)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        with self._lock:
            previous, self._mode = self._mode, mode
            self._pending_reset = mode == "drop" or (previous == "blackhole" and mode != "blackhole")
        self._wake_w.send(b"x")

    def connections(self) -> int:
        with self._lock:
            return sum(1 for s, p in self._peer.items() if p is None or s.fileno() < p.fileno())

    # ---------------------------------------------------------------------------------------- the loop
    _pending_reset = False

    def _loop(self) -> None:
        while not self._stopping:
            for key, _ in self._sel.select(0.5):
                if key.data == "wake":
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    self._apply_mode()
                elif key.data == "accept":
                    self._accept()
                else:
                    self._pump(key.fileobj)  # type: ignore[arg-type]
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
        if mode == "drop":
            _reset(client)
            return
        upstream = None
        if mode == "pass":
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
        if self._mode != "pass" or peer is None:
            return  # blackhole: swallowed
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
