"""Serving the live view: uvicorn in a thread of ours, on a socket we bind first.

Binding first is what lets port 0 pick a free port and still print the real address, and what turns a port in use
into one clear error (:class:`AddressInUse`) before anything starts. The server always runs in a background
thread: the lab goes on driving its members meanwhile, and ``zkconsumer watch`` waits on it in the foreground
(:meth:`Served.wait`), so that Ctrl-C reaches the main thread and shuts the server down cleanly in both.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time

import uvicorn

from zkconsumer.errors import ZkConsumerError
from zkconsumer.web.app import make_app
from zkconsumer.web.snapshot import LiveSource

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


class AddressInUse(ZkConsumerError, OSError):
    """The host and port asked for cannot be bound (in use, or not an address of this machine)."""


def exposure_warning(host: str, lab: bool = False) -> str | None:
    """What to tell someone who binds beyond the loopback: the page has no login."""
    if host in (LOOPBACK, "localhost", "::1"):
        return None
    what = "see the group and kill its members" if lab else "see the group"
    return f"warning: serving on {host}: anyone who can reach this address can {what} (no authentication)"


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        reason = "the port is in use" if e.errno == errno.EADDRINUSE else e.strerror or str(e)
        raise AddressInUse(f"cannot serve on {host}:{port}: {reason}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


class Served:
    """A running server: its ``url``, and :meth:`stop` (idempotent) to shut it down."""

    def __init__(self, source: LiveSource, host: str = LOOPBACK, port: int = 0, **app_options) -> None:
        self._sock = bind(host, port)
        self.url = url_of(self._sock)
        self.stopping = threading.Event()
        app = make_app(source, stopping=self.stopping, **app_options)
        # lifespan off: the app has no startup work; a short graceful timeout: open event streams end on
        # ``stopping`` within a beat, anything else is not worth waiting for
        config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2,
                                access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=f"web {self.url}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise AddressInUse(f"the server on {self.url} did not start")

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        except Exception:  # noqa: BLE001 - a thread's last words: say them in the log, not on stderr
            log.exception("the web server on %s stopped", self.url)

    def wait(self) -> None:
        """Block until the server stops; a Ctrl-C here stops it and is raised again."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            self.stop()
            raise

    def stop(self) -> None:
        self.stopping.set()
        self._server.should_exit = True
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(10)
        self._sock.close()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(source: LiveSource, host: str = LOOPBACK, port: int = 0, **app_options) -> Served:
    """Start serving ``source`` on ``host:port`` (0: a free port) in a background thread; the returned
    :class:`Served` has the bound ``url``."""
    return Served(source, host, port, **app_options)
