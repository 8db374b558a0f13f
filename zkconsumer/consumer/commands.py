"""Calls that other threads hand to the one thread owning a kafka-python client.

kafka-python's clients are not thread-safe. The fetcher (ZooKeeper mode) and the poller (coordinator mode) each
own one on a thread of their own. Anyone else queues a function here, and the owner runs it between two polls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkconsumer import runtime


class CommandQueue:
    """Functions of the client, queued by any thread, run by the owner's thread in :meth:`run_pending`."""

    def __init__(self) -> None:
        self._queue: runtime.Queue = runtime.Queue()
        self._arrived = runtime.Event()

    def submit(self, fn: Callable[[Any], object]) -> None:
        """Queue ``fn(client)`` without waiting for it."""
        self._queue.put((fn, runtime.Event(), []))
        self._arrived.set()

    def call(self, fn: Callable[[Any], object], timeout: float, timed_out: Callable[[], Exception]) -> object:
        """Queue ``fn(client)`` and wait for its result; what it raised is raised here, and ``timed_out()``
        if the owner did not get to it within ``timeout`` seconds."""
        done = runtime.Event()
        box: list = []
        self._queue.put((fn, done, box))
        self._arrived.set()
        if not done.wait(timeout):
            raise timed_out()
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[0] if box else None

    def wait(self, timeout: float) -> bool:
        """Owner, when it has nothing to poll: until a command arrives (True) or ``timeout`` passes."""
        return self._arrived.wait(timeout)

    def run_pending(self, client: object) -> None:
        """Owner: run every queued command on ``client``."""
        self._arrived.clear()
        while True:
            try:
                fn, done, box = self._queue.get_nowait()
            except runtime.Empty:
                return
            try:
                box.append(fn(client))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box.append(e)
            finally:
                done.set()
