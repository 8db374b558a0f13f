"""A kazoo handler on simulated tasks, time and network: an unmodified ``KazooClient`` (its connection loop,
pings, read timeouts, reconnects, watches and recipes) runs against the simulated ZooKeeper, deterministically.

kazoo takes every thread, queue, event, lock, result, socket and ``select`` from its handler (the interface
``SequentialThreadingHandler`` implements): here threads are :mod:`.tasks`, sockets are :mod:`.network`
endpoints, and ``select`` parks the calling task until an endpoint is readable or the (virtual) timeout passes.

Two things kazoo does not take from its handler: its connection loop and its retry read ``time.monotonic()`` and
the ``random`` module at module level (ping deadlines, jitter, host shuffling, backoff). :func:`kazoo_routed`
swaps those module attributes for the simulation's clock and a seeded ``random.Random`` while a simulation runs,
and restores them after. So **a simulation owns the process while it runs**: no live kazoo client (one talking
to a real ZooKeeper on a thread) may run in the same process at the same time, since it would read virtual time.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Iterator
from queue import Empty
from types import ModuleType, SimpleNamespace
from typing import Any

import kazoo.client
import kazoo.protocol.connection
import kazoo.recipe.lock
import kazoo.recipe.watchers
import kazoo.retry
from kazoo.handlers import utils
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer.sim import kazoo_codecs, tasks
from zkconsumer.sim.network import Endpoint, Network, local_pair
from zkconsumer.sim.scheduler import Clock
from zkconsumer.sim.tasks import Condition, Event, Queue, RLock, Runtime, Task

log = logging.getLogger(__name__)

_STOP = object()

#: The kazoo modules that read ``time`` (and ``random``) themselves, and what of them: the names swapped.
ROUTED_MODULES: dict[ModuleType, tuple[str, ...]] = {
    kazoo.protocol.connection: ("time", "random"),  # ping deadline and jitter, host shuffle, r/w pinger
    kazoo.retry: ("time", "random"),  # the connection retry's deadline and backoff jitter
    kazoo.recipe.lock: ("time",),  # lock acquisition timeouts
    kazoo.recipe.watchers: ("time",),  # PatientChildrenWatch
}

#: Modules whose sets of callables (kazoo.client: the state listeners, the data and child watchers of a path) are
#: made insertion-ordered while a simulation runs: a ``set`` of functions iterates in the order of their memory
#: addresses, which differ from run to run, and kazoo calls the listeners of one state change, and the watchers of
#: one path, in that order.
ORDERED_SETS = (kazoo.client,)


class OrderedSet:
    """The part of ``set`` kazoo uses, iterating in insertion order (a dict's keys)."""

    __slots__ = ("_items",)

    def __init__(self, items: Any = ()) -> None:
        self._items = dict.fromkeys(items)

    def add(self, item: Any) -> None:
        self._items[item] = None

    def discard(self, item: Any) -> None:
        self._items.pop(item, None)

    def remove(self, item: Any) -> None:
        del self._items[item]

    def update(self, items: Any) -> None:
        self._items.update(dict.fromkeys(items))

    def copy(self) -> OrderedSet:
        return OrderedSet(self._items)

    def clear(self) -> None:
        self._items.clear()

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __repr__(self) -> str:
        return f"OrderedSet({list(self._items)!r})"


@contextlib.contextmanager
def kazoo_routed(clock: Clock, rng: random.Random) -> Iterator[None]:
    """Route kazoo's module-level ``time`` to ``clock`` (``monotonic``, ``time``, ``sleep``: virtual) and its
    ``random`` to ``rng`` for the duration; restore the real modules after, even on an error. Not re-entrant."""
    shim = SimpleNamespace(monotonic=clock.monotonic, time=clock.time, sleep=tasks.sleep,
                           perf_counter=clock.monotonic)
    saved: list[tuple[ModuleType, str, Any]] = []
    for module, names in ROUTED_MODULES.items():
        for name in names:
            current = getattr(module, name)
            if isinstance(current, (SimpleNamespace, random.Random)):
                raise tasks.SimulationError("kazoo is already routed to a simulation")
            saved.append((module, name, current))
            setattr(module, name, shim if name == "time" else rng)
    for module in ORDERED_SETS:
        module.set = OrderedSet  # a module global shadows the builtin for the module's own code
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
        for module in ORDERED_SETS:
            with contextlib.suppress(AttributeError):
                del module.set


class SimAsyncResult(utils.AsyncResult):
    """kazoo's own ``AsyncResult`` on a simulated condition: ``get`` and ``wait`` park the task."""

    def __init__(self, handler: SimHandler) -> None:
        super().__init__(handler, handler.condition_object, KazooTimeoutError)


class SimHandler:
    """kazoo's handler interface on a :class:`~zkconsumer.sim.tasks.Runtime` and a
    :class:`~zkconsumer.sim.network.Network`, for one client host (``host``: what the network's faults name).

    As kazoo's threading handler: watch callbacks run one at a time on a worker task, ``rawlink`` completions on
    another, so a callback may block (read ZooKeeper again) without stalling the connection loop."""

    name = "zkconsumer_sim_handler"
    timeout_exception = KazooTimeoutError
    sleep_func = staticmethod(tasks.sleep)
    queue_empty = Empty

    def __init__(self, runtime: Runtime, network: Network, host: str) -> None:
        kazoo_codecs.install()  # a herd's getChildren answers decode once (sim/kazoo_codecs.py)
        self.runtime = runtime
        self.network = network
        self.host = host
        self.callback_queue = Queue(runtime)
        self.completion_queue = Queue(runtime)
        self._running = False
        self._workers: list[Task] = []

    @property
    def running(self) -> bool:
        return self._running

    def queue_impl(self) -> Queue:
        return Queue(self.runtime)

    # ------------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        if self._running:
            return
        for name, work in (("completion", self.completion_queue), ("callback", self.callback_queue)):
            self._workers.append(self.spawn(self._worker, work, _name=f"{self.host}-{name}"))
        self._running = True

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        for work in (self.completion_queue, self.callback_queue):
            work.put(_STOP)
        while self._workers:
            self._workers.pop().join()
        self.callback_queue = Queue(self.runtime)
        self.completion_queue = Queue(self.runtime)

    @staticmethod
    def _worker(work: Queue) -> None:
        while True:
            func = work.get()
            if func is _STOP:
                return
            try:
                func()
            except Exception:  # noqa: BLE001 - as kazoo's workers do: log, and serve the next callback
                log.exception("exception in a simulated kazoo worker")

    # ------------------------------------------------------------------------------------------- primitives
    def event_object(self) -> Event:
        return Event(self.runtime)

    def lock_object(self) -> tasks.Lock:
        return tasks.Lock(self.runtime)  # by its module: a bare ``Lock(`` reads as kazoo's recipe to the checks

    def rlock_object(self) -> RLock:
        return RLock(self.runtime)

    def condition_object(self) -> Condition:
        return Condition(self.runtime)

    def async_result(self) -> SimAsyncResult:
        return SimAsyncResult(self)

    def spawn(self, func: Callable[..., Any], *args: Any, _name: str | None = None, **kwargs: Any) -> Task:
        return self.runtime.spawn(func, *args, name=_name or f"{self.host}-{getattr(func, '__name__', 'task')}",
                                  **kwargs)

    def dispatch_callback(self, callback: Any) -> None:
        self.callback_queue.put(lambda: callback.func(*callback.args))

    # ------------------------------------------------------------------------------------------- sockets
    def four_letter_word(self, host: str, port: int, word: str, timeout: float = 1.0) -> str:
        """zk/server.py's ``four_letter_word`` over the simulated network: what zk/multiread.py asks (``srvr``)
        through the client's handler, so that a simulation never opens a real socket."""
        endpoint = self.network.connect(self.host, (host, port), timeout)
        endpoint.send(word.encode())
        chunks = []
        try:
            while True:
                self.select([endpoint], [], [], timeout)
                chunk = endpoint.recv(4096) if endpoint.readable() else b""
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            endpoint.close()
        return b"".join(chunks).decode("utf-8", "replace")

    def create_connection(self, address: tuple[str, int], timeout: float | None = None, **_: Any) -> Endpoint:
        """A connection to the simulated server at ``address`` (TLS and the rest of kazoo's options ignored)."""
        return self.network.connect(self.host, (address[0], int(address[1])), timeout)

    def create_socket_pair(self) -> tuple[Endpoint, Endpoint]:
        """kazoo's wake-up pipe: the client writes a byte to it per request queued; no network in between."""
        return local_pair(self.runtime)

    def select(self, rlist: list, wlist: list, xlist: list, timeout: float | None = None) -> tuple[list, list, list]:
        """Which endpoints are readable (every open one is writable: buffers are unbounded); parks the task until
        one is, or ``timeout`` seconds of virtual time."""
        readable = [s for s in rlist if s.readable()]
        writable = [s for s in wlist if not s.closed]
        if readable or writable or (timeout is not None and timeout <= 0):
            return readable, writable, []
        self.runtime.block([s.readers for s in rlist], timeout)
        return [s for s in rlist if s.readable()], [s for s in wlist if not s.closed], []
