"""The TCP side: accept connections, read size-prefixed frames, hand them to the dispatcher, write answers.

One thread per connection. Kafka answers a connection's requests strictly in order, and a Fetch long poll
may block for ``max_wait_ms``: a thread per connection gives both for free, and blocking in one connection
never delays another. Anything wrong with a connection (a bad frame size, an undecodable request, a reset)
closes that connection only; frames are read incrementally, so a huge claimed size costs nothing until the
bytes actually arrive.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import struct
from collections.abc import Callable

from zkconsumer import runtime
from zkconsumer.wire.protocol import MAX_FRAME_BYTES, MalformedRequest

log = logging.getLogger(__name__)

FrameHandler = Callable[[bytes, str], "bytes | None"]
_SIZE = struct.Struct(">i")
_READ_CHUNK = 1 << 20


class _Closed(Exception):
    """The peer went away (or we are stopping) after ``got`` of the ``wanted`` bytes being read."""

    def __init__(self, got: int = 0, wanted: int = 0) -> None:
        super().__init__(f"{got} of {wanted} bytes")
        self.got = got
        self.wanted = wanted


class Server:
    def __init__(self, handler: FrameHandler, host: str = "127.0.0.1", port: int = 0,
                 max_frame_bytes: int = MAX_FRAME_BYTES, idle_timeout_s: float = 600.0,
                 max_connections: int = 1000) -> None:
        self.handler = handler
        self.host = host
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s  # Kafka's connections.max.idle.ms
        self.max_connections = max_connections
        self._listener = socket.create_server((host, port), backlog=128, reuse_port=False)
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._conns: dict[socket.socket, runtime.Task] = {}
        self._lock = runtime.Lock()
        self._stopping = runtime.Event()
        self._acceptor: runtime.Task | None = None

    def start(self) -> None:
        self._acceptor = runtime.spawn(self._accept_loop, name=f"acceptor-{self.port}")

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self._conns)

    # ---------------------------------------------------------------------------------------- accepting
    def _accept_loop(self) -> None:
        self._listener.setblocking(False)
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in sel.select():
                    if key.fileobj is self._wake_r:
                        return
                    self._accept_one()

    def _accept_one(self) -> None:
        try:
            sock, addr = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:  # e.g. EMFILE: keep serving the connections we have
            log.warning("accept failed: %s", e)
            return
        sock.setblocking(True)
        sock.settimeout(self.idle_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:  # held while the thread starts: it removes itself under this lock, after this adds it
            if len(self._conns) >= self.max_connections or self._stopping.is_set():
                log.warning("refusing connection from %s: %d connections open", addr, len(self._conns))
                sock.close()
                return
            peer = f"{addr[0]}:{addr[1]}"
            self._conns[sock] = runtime.spawn(self._serve, sock, peer, name=f"conn-{peer}")

    # ------------------------------------------------------------------------------------------ serving
    def _serve(self, sock: socket.socket, peer: str) -> None:
        try:
            while not self._stopping.is_set():
                size = _SIZE.unpack(self._recv_exact(sock, 4))[0]
                if size <= 0 or size > self.max_frame_bytes:
                    # Kafka's InvalidReceiveException; the bytes that follow are not read at all.
                    log.warning("%s: closing, invalid request size %d (socket.request.max.bytes is %d)", peer,
                                size, self.max_frame_bytes)
                    return
                try:
                    frame = self._recv_exact(sock, size)
                except _Closed as e:
                    log.info("%s: connection closed in the middle of a request (%d of %d bytes)", peer, e.got,
                             e.wanted)
                    return
                try:
                    answer = self.handler(frame, peer)
                except MalformedRequest as e:
                    log.warning("%s: closing, malformed request: %s", peer, e)
                    return
                except Exception:
                    log.exception("%s: closing, request failed", peer)
                    return
                if answer is not None:
                    sock.sendall(answer)
        except _Closed as e:
            if e.got:
                log.info("%s: connection closed in the middle of a request size (%s)", peer, e)
        except TimeoutError:
            log.info("%s: closing idle connection (nothing received for %.1fs)", peer, self.idle_timeout_s)
        except OSError as e:
            if not self._stopping.is_set():
                log.debug("%s: connection error: %s", peer, e)
        finally:
            with self._lock:
                self._conns.pop(sock, None)
            with contextlib.suppress(OSError):
                sock.close()

    @staticmethod
    def _recv_exact(sock: socket.socket, n: int) -> bytes:
        if n <= _READ_CHUNK:
            buf = bytearray(n)
            view = memoryview(buf)
            got = 0
            while got < n:
                k = sock.recv_into(view[got:])
                if k == 0:
                    raise _Closed(got, n)
                got += k
            return bytes(buf)
        parts, got = [], 0  # a big claimed size: grow only as bytes arrive
        while got < n:
            chunk = sock.recv(min(_READ_CHUNK, n - got))
            if not chunk:
                raise _Closed(got, n)
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    # ----------------------------------------------------------------------------------------- stopping
    def stop(self, timeout: float = 10.0) -> None:
        """Stop accepting, cut every connection, and wait for their threads."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._acceptor is not None:
            self._acceptor.join(timeout)
        self._listener.close()
        with self._lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in conns:
            thread.join(timeout)
        self._wake_r.close()
        self._wake_w.close()
