"""Host processes for the benchmarks that spread many consumers over several processes (rebalance.py, herd.py):
a child process holds a host object and runs its methods as the parent calls them over a pipe."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any


def _serve(conn, make: Callable[..., Any], args: tuple) -> None:
    host = make(*args)
    while True:
        method, call_args = conn.recv()
        try:
            conn.send(("ok", getattr(host, method)(*call_args)))
        except Exception as e:  # noqa: BLE001 - reported to the parent
            conn.send(("error", repr(e)))
        if method == "close":
            return


class RemoteHost:
    """``make(*args)`` in a spawned process; ``call`` runs one of its methods there (``send`` then ``result`` to
    start several hosts' calls at once)."""

    def __init__(self, make: Callable[..., Any], *args: Any) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, make, args), daemon=True)
        self.proc.start()

    def send(self, method: str, *args: Any) -> None:
        self.conn.send((method, args))

    def result(self) -> Any:
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(value)
        return value

    def call(self, method: str, *args: Any) -> Any:
        self.send(method, *args)
        return self.result()
