"""kazoo's threading handler, made cheaper for dozens of clients in one process (the lab, the benchmarks).

Every ZooKeeper request and response passes through two pieces of the handler: the ``select`` kazoo's
connection loop waits in, and the ``AsyncResult`` each request is answered through. kazoo's versions of both
allocate per call what can be allocated once (an epoll selector per wait) or more cheaply (a ``Condition``
with its re-entrant lock and waiter deque per request); in a rebalance of 50 consumers on two cores that was
CPU taken from the rebalance itself. :class:`PollHandler` keeps kazoo's behaviour and threading model; only
those two allocations change.
"""

from __future__ import annotations

import select
import threading
from _thread import allocate_lock

from kazoo.handlers import utils
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.handlers.utils import fileobj_to_fd

_READ_MASK = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR | select.POLLNVAL
_WRITE_MASK = select.POLLOUT | select.POLLHUP | select.POLLERR | select.POLLNVAL

_PENDING = utils._NONE  # kazoo's "no value or exception yet" marker (its ready() and exception read it)


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
        self._guard = allocate_lock()
        self._latch = allocate_lock()
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
        self._polls = threading.local()

    def async_result(self) -> LatchResult:
        return LatchResult(self)

    def select(self, rlist, wlist, xlist, timeout=None):  # noqa: D401 - kazoo's signature
        if timeout is not None and timeout < 0:
            raise ValueError("timeout must be non-negative")
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
