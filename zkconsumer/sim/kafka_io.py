"""kafka-python, unmodified, on simulated tasks, time and network; and the broker's own TCP server beside it.

kafka-python 3's client is an event loop (``kafka.net.selector.NetworkSelector``) that an IO thread drives: it
takes ``threading``, ``time``, ``socket``, ``selectors`` and ``random`` as module attributes, with no handler
to pass as kazoo has. :func:`kafka_routed` swaps those attributes, in every loaded ``kafka.*`` module, for
the simulation's for the duration of a run, as :func:`~zkconsumer.sim.kazoo_handler.kazoo_routed` does for
kazoo's clocks:

- ``threading``: its IO thread is a task (:mod:`.tasks`), its locks, events and conditions park tasks;
- ``time`` and ``random``: the scheduler's clock and a seeded generator;
- ``socket`` and ``selectors``: a :class:`SimSocket` is a connection on the simulated network (its connect
  takes a round trip, a cut link holds it, a refused one fails), and :class:`SimSelector` parks the IO task until
  one of its sockets is ready or the (virtual) timeout passes.

The broker's server (``zkconsumer/broker/server.py``: one thread per connection reading size-prefixed frames)
takes ``socket`` and ``selectors`` the same way, and is routed too (and so is the broker-version probe,
``zkconsumer/broker_version.py``): its listener is :class:`SimListener`, so
the project's real broker (its dispatcher, its handlers, its group coordinator, its log) serves the simulated
members on the simulated network.

Three things are routed beyond module attributes: the ``selector`` default of kafka-python's config dicts (bound at
import); the tie-break of its scheduled tasks (``Task.__lt__`` compares ``id()``, memory addresses, which differ
from run to run; here tasks scheduled for the same instant run in the order they were scheduled); and the
producer's sender thread, a ``threading.Thread`` subclass, whose ``start``, ``join`` and ``is_alive`` become a
task's. Like kazoo's routing, this makes **a simulation own the process while it runs**.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import random
import selectors
import socket
import sys
from collections import deque
from collections.abc import Iterator, Mapping
from types import ModuleType, SimpleNamespace
from typing import Any

import kafka  # noqa: F401 - its modules loaded before a run routes them (KafkaConsumer, KafkaProducer, the admin)
import kafka.admin
import kafka.net.selector
import kafka.producer.sender

from zkconsumer import broker_version
from zkconsumer.broker import server as broker_server
from zkconsumer.errors import ZkConsumerError
from zkconsumer.sim import tasks
from zkconsumer.sim.network import ConnectFailed, Endpoint, Network, WouldBlock, local_pair

#: the real modules swapped, by the attribute name a module imports them under
_REAL: dict[str, ModuleType] = {"threading": sys.modules["threading"], "time": sys.modules["time"],
                                "socket": socket, "selectors": selectors, "random": random}
#: the first port a listener asking for port 0 gets (Kafka's)
FIRST_PORT = 9092
#: virtual CPU time a turn of an event loop's ``select`` costs when it comes at the instant the loop's previous turn
#: ended (a turn after time has passed is charged nothing: it is the spin below this guards against, and parking
#: every turn cost a fifth of a run's wall). Live, every turn of a loop takes some time; on
#: virtual time a turn that does not block takes none, and a loop that polls until a deadline (kafka-python's
#: ``poll`` while its JoinGroup is in flight: ``Timer.timeout_ms`` truncates the last sub-millisecond to 0 while
#: ``expired`` is still false) would spin forever at one instant, and so would a thread and the IO loop handing
#: work to each other (``net.run`` wakes the loop, which answers at once). An estimate of one turn of kafka-python's
#: loop.
SELECT_COST_S = 20e-6


class SocketError(ZkConsumerError, OSError):
    """A simulated socket's failure, as ``socket`` raises it (an ``OSError`` with its errno): not connected, a
    connect refused or timed out."""


class SocketTimeout(ZkConsumerError, TimeoutError):
    """A blocking read on a simulated socket outlasted its timeout (``socket.timeout``)."""


class AlreadyRegistered(ZkConsumerError, KeyError):
    """A selector was asked to watch a socket it already watches (``selectors`` raises ``KeyError``)."""


class SimSocket:
    """A TCP socket on the simulated network, on host ``host``: the surface of ``socket.socket`` kafka-python's
    transport and the broker's server use. Non-blocking (kafka-python: a connect returns ``EINPROGRESS`` and
    completes on a task of its own) or blocking with a timeout (the broker: a read waits, and raises
    ``TimeoutError`` when the timeout passes first)."""

    def __init__(self, io: KafkaIO, host: str, endpoint: Endpoint | None = None) -> None:
        self._io = io
        self.host = host
        self.endpoint = endpoint
        self._fd = next(io.fds)
        self._blocking = True
        self._timeout: float | None = None
        self._connecting = False
        self._error = 0
        self._options: dict[tuple[int, int], Any] = {}
        #: tasks waiting for this socket's connect to end
        self.waiters: deque = deque()

    # ----------------------------------------------------------------------------------------- options
    def fileno(self) -> int:
        return -1 if self.endpoint is not None and self.endpoint.closed else self._fd

    def setblocking(self, flag: bool) -> None:
        self._blocking = bool(flag)
        self._timeout = None

    def settimeout(self, timeout: float | None) -> None:
        self._blocking = timeout != 0
        self._timeout = timeout

    def setsockopt(self, level: int, option: int, value: Any) -> None:
        self._options[(level, option)] = value

    def getsockopt(self, level: int, option: int, *_: Any) -> Any:
        if (level, option) == (socket.SOL_SOCKET, socket.SO_ERROR):
            return self._error
        return self._options.get((level, option), 0)

    def getpeername(self) -> tuple[str, int]:
        if self.endpoint is None:
            raise SocketError(errno.ENOTCONN, "not connected")
        return self.endpoint.peer_name

    def getsockname(self) -> tuple[str, int]:
        return (self.host, 40000 + self._fd)

    # ----------------------------------------------------------------------------------------- connecting
    def connect_ex(self, address: tuple[str, int]) -> int:
        if self.endpoint is not None:
            return errno.EISCONN
        if self._error:
            return self._error
        if self._connecting:
            return errno.EALREADY
        self._connecting = True
        self._io.runtime.spawn(self._connect, (address[0], int(address[1])), name=f"{self.host}-connect")
        if self._blocking:
            self._io.runtime.block([self.waiters], self._timeout)
            return self.connect_ex(address) if not self._connecting else errno.ETIMEDOUT
        return errno.EINPROGRESS

    def connect(self, address: tuple[str, int]) -> None:
        code = self.connect_ex(address)
        if code not in (0, errno.EISCONN):
            raise SocketError(code, errno.errorcode.get(code, "connect failed"))

    def _connect(self, address: tuple[str, int]) -> None:
        try:
            self.endpoint = self._io.network.connect(self.host, address, None)
        except ConnectFailed as e:
            self._error = e.errno or errno.ECONNREFUSED
        finally:
            self._connecting = False
            self._io.runtime.wake_all(self.waiters)

    # ----------------------------------------------------------------------------------------- data
    def readable(self) -> bool:
        return self.endpoint is not None and self.endpoint.readable()

    def writable(self) -> bool:
        """Connected (every buffer is unbounded), or its connect failed (the caller then reads the error)."""
        return (self.endpoint is not None and not self.endpoint.closed) or bool(self._error)

    def waitlists(self) -> list[deque]:
        return [self.waiters] if self.endpoint is None else [self.waiters, self.endpoint.readers]

    def _endpoint(self) -> Endpoint:
        if self.endpoint is None:
            raise SocketError(errno.ENOTCONN, "not connected")
        return self.endpoint

    def send(self, data: bytes | bytearray | memoryview, *_: Any) -> int:
        return self._endpoint().send(data)

    def sendall(self, data: bytes | bytearray | memoryview, *_: Any) -> None:
        self._endpoint().send(data)

    def recv(self, n: int, *_: Any) -> bytes:
        endpoint = self._endpoint()
        if self._blocking and not endpoint.readable():
            if not self._io.runtime.block([endpoint.readers], self._timeout) and not endpoint.readable():
                raise SocketTimeout("timed out")
        return endpoint.recv(n)

    def recv_into(self, buffer: Any, nbytes: int = 0, *_: Any) -> int:
        view = memoryview(buffer)
        chunk = self.recv(nbytes or len(view))
        view[:len(chunk)] = chunk
        return len(chunk)

    def shutdown(self, how: int) -> None:
        if self.endpoint is not None:
            self.endpoint.close()

    def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
        self._io.runtime.wake_all(self.waiters)

    def __enter__(self) -> SimSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        peer = None if self.endpoint is None else self.endpoint.peer_name
        return f"<SimSocket {self.host} fd={self._fd} peer={peer}>"


class SimListener:
    """A listening socket on the simulated network (``socket.create_server``): each connection the network
    brings waits in the backlog until :meth:`accept` takes it."""

    def __init__(self, io: KafkaIO, address: tuple[str, int]) -> None:
        self._io = io
        self.address = address
        self._fd = next(io.fds)
        self.backlog: deque[Endpoint] = deque()
        #: the server's end of every connection it was brought (a killed process's are closed with it)
        self.accepted: list[Endpoint] = []
        self.waiters: deque = deque()
        self.closed = False
        io.network.listen(address, self._arrived)
        io.listeners[address] = self

    def _arrived(self, endpoint: Endpoint) -> None:
        self.accepted = [e for e in self.accepted if not e.closed] + [endpoint]
        self.backlog.append(endpoint)
        self._io.runtime.wake_all(self.waiters)

    def fileno(self) -> int:
        return -1 if self.closed else self._fd

    def getsockname(self) -> tuple[str, int]:
        return self.address

    def setblocking(self, flag: bool) -> None:
        """Accepting never blocks here: the server's selector waits."""

    def accept(self) -> tuple[SimSocket, tuple[str, int]]:
        if not self.backlog:
            raise WouldBlock(errno.EAGAIN, "no connection waiting")
        endpoint = self.backlog.popleft()
        return SimSocket(self._io, self.address[0], endpoint), endpoint.peer_name

    def readable(self) -> bool:
        return bool(self.backlog) or self.closed

    def writable(self) -> bool:
        return False

    def waitlists(self) -> list[deque]:
        return [self.waiters]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._io.network.unlisten(self.address)
            for endpoint in self.backlog:
                endpoint.close()
            self._io.runtime.wake_all(self.waiters)


class SimSelector(selectors.BaseSelector):
    """``selectors.DefaultSelector`` over simulated sockets: :meth:`select` parks the calling task until one of
    the registered sockets is ready for what it was registered for, or ``timeout`` seconds of virtual time."""

    def __init__(self) -> None:
        self._runtime = tasks.active()
        self._map: dict[Any, selectors.SelectorKey] = {}
        self._last_turn_us = -1

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if fileobj in self._map:
            raise AlreadyRegistered(f"{fileobj!r} is already registered")
        key = selectors.SelectorKey(fileobj, fileobj.fileno(), events, data)
        self._map[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._map.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self._map.pop(fileobj)
        return self.register(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._map

    def _ready(self) -> list[tuple[selectors.SelectorKey, int]]:
        ready = []
        for key in list(self._map.values()):
            mask = (selectors.EVENT_READ if key.events & selectors.EVENT_READ and key.fileobj.readable() else 0) | (
                selectors.EVENT_WRITE if key.events & selectors.EVENT_WRITE and key.fileobj.writable() else 0)
            if mask:
                ready.append((key, mask))
        return ready

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        clock = self._runtime.scheduler
        if clock.now_us == self._last_turn_us:  # a second turn at one instant: it takes its time (SELECT_COST_S)
            self._runtime.sleep(SELECT_COST_S)
            timeout = None if timeout is None else timeout - SELECT_COST_S
        ready = self._ready()
        if not ready and (timeout is None or timeout > 0):
            self._runtime.block([w for key in self._map.values() for w in key.fileobj.waitlists()], timeout)
            ready = self._ready()
        self._last_turn_us = clock.now_us
        return ready

    def close(self) -> None:
        self._map.clear()


class SimThread:
    """``threading.Thread`` as a task (kafka-python's IO thread)."""

    def __init__(self, io: KafkaIO, group: None = None, target: Any = None, name: str | None = None,
                 args: tuple = (), kwargs: dict | None = None, *, daemon: bool | None = None) -> None:
        self._io = io
        self._target, self._args, self._kwargs = target, args, kwargs or {}
        self.name = name or "kafka-thread"
        self.daemon = bool(daemon)
        self._task: tasks.Task | None = None

    def start(self) -> None:
        self._task = self._io.runtime.spawn(self.run, name=self.name)
        self._io.threads[self._task] = self

    def run(self) -> None:
        if self._target is not None:
            self._target(*self._args, **self._kwargs)

    def join(self, timeout: float | None = None) -> None:
        if self._task is not None:
            self._task.join(timeout)

    def is_alive(self) -> bool:
        return self._task is not None and self._task.is_alive()


class KafkaIO:
    """The simulated ``threading``, ``time``, ``socket``, ``selectors`` and ``random`` one world gives the modules
    routed to it (:func:`kafka_routed`)."""

    def __init__(self, runtime: tasks.Runtime, network: Network, rng: random.Random) -> None:
        self.runtime = runtime
        self.network = network
        self.rng = rng
        self.fds = itertools.count(100)
        self.ports = itertools.count(FIRST_PORT)
        #: the task of each :class:`SimThread`, for ``current_thread``
        self.threads: dict[tasks.Task, SimThread] = {}
        #: the listening socket at each address (the last opened there)
        self.listeners: dict[tuple[str, int], SimListener] = {}
        rt = runtime
        self.threading = SimpleNamespace(
            Thread=lambda *a, **kw: SimThread(self, *a, **kw), Lock=lambda: tasks.Lock(rt),
            RLock=lambda: tasks.RLock(rt), Event=lambda: tasks.Event(rt),
            Condition=lambda lock=None: tasks.Condition(rt, lock), local=lambda: tasks.Local(rt),
            current_thread=self.current_thread, TIMEOUT_MAX=_REAL["threading"].TIMEOUT_MAX)
        self.time = SimpleNamespace(monotonic=rt.clock.monotonic, time=rt.clock.time, sleep=tasks.sleep,
                                    perf_counter=rt.clock.monotonic)
        self.socket = _SocketModule(self)
        self.selectors = SimpleNamespace(**{name: getattr(selectors, name) for name in dir(selectors)
                                            if not name.startswith("_")})
        self.selectors.DefaultSelector = SimSelector

    def close_listener(self, address: tuple[str, int]) -> None:
        """What the kernel does when the process listening at ``address`` is killed: the listener closes (a connect
        is refused) and so does every connection it accepted (each peer reads its end)."""
        listener = self.listeners.pop(address, None)
        if listener is not None:
            listener.close()
            for endpoint in listener.accepted:
                endpoint.close()
            listener.accepted.clear()

    def current_thread(self) -> Any:
        task = self.runtime.current()
        return self.threads.get(task, task)

    def process(self) -> Any:
        """The simulated process the current task belongs to (None: the lab's own code)."""
        task = self.runtime.current()
        return None if task is None else task.process

    def host(self) -> str:
        """The host a socket opened now belongs to: its process's (a member's, the broker's), as the network's
        faults name it."""
        task = self.runtime.current()
        process = None if task is None else task.process
        return "lab" if process is None else process.name


class _ProcessCache(dict):
    """``broker_version``'s probe cache as each simulated process sees it: live, the cache lives as long as the
    process, so every member process probes once and a restarted one probes again. One dict for the whole run
    would let the first member's probe stand for all of them (and the next run's, in one interpreter), so the
    timing of a member's start would depend on who started first: keyed here by (process, bootstrap)."""

    def __init__(self, io: KafkaIO) -> None:
        super().__init__()
        self._io = io

    def _key(self, key: Any) -> tuple[Any, Any]:
        return (self._io.process(), key)  # the process by identity: looked up, never iterated

    def __contains__(self, key: object) -> bool:
        return super().__contains__(self._key(key))

    def __getitem__(self, key: Any) -> Any:
        return super().__getitem__(self._key(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(self._key(key), value)


class _SocketModule(SimpleNamespace):
    """The ``socket`` module as routed: its constants and exceptions, with sockets, pairs, listeners and name
    lookups on the simulated network."""

    def __init__(self, io: KafkaIO) -> None:
        # the real module's names, but those simulated here (an instance attribute would shadow the method)
        simulated = {name for name in vars(_SocketModule) if not name.startswith("_")}
        super().__init__(**{name: getattr(socket, name) for name in dir(socket)
                            if not name.startswith("_") and name not in simulated})
        self._io = io

    def socket(self, family: int = -1, type: int = -1, proto: int = -1, *_: Any) -> SimSocket:  # noqa: A002
        return SimSocket(self._io, self._io.host())

    def socketpair(self, *_: Any) -> tuple[SimSocket, SimSocket]:
        a, b = local_pair(self._io.runtime)
        host = self._io.host()
        return SimSocket(self._io, host, a), SimSocket(self._io, host, b)

    def getaddrinfo(self, host: str, port: int, *_: Any, **__: Any) -> list[tuple]:
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, int(port)))]

    def create_server(self, address: tuple[str, int], **_: Any) -> SimListener:
        host, port = address
        return SimListener(self._io, (host, int(port) or next(self._io.ports)))

    def create_connection(self, address: tuple[str, int], timeout: float | None = None, *_: Any) -> SimSocket:
        sock = SimSocket(self._io, self._io.host())
        sock.settimeout(timeout)
        sock.connect(address)
        return sock


#: zkconsumer's own modules that open sockets themselves: the broker's server (it serves the simulated members), and
#: the broker-version probe a coordinator-mode member sends before its client starts (left live, it opened a real
#: socket to 127.0.0.1:9092 from inside a simulation)
OWN_SOCKET_MODULES: tuple[ModuleType, ...] = (broker_server, broker_version)


def _routed_modules() -> list[ModuleType]:
    """kafka-python's loaded modules (its vendored six aside) and :data:`OWN_SOCKET_MODULES`."""
    names = sorted(n for n in sys.modules if (n == "kafka" or n.startswith("kafka.")) and ".vendor" not in n)
    return [sys.modules[n] for n in names if sys.modules[n] is not None] + list(OWN_SOCKET_MODULES)


def _selector_defaults(modules: list[ModuleType]) -> list[dict]:
    """kafka-python's config dicts that bind ``selectors.DefaultSelector`` at import (the consumer's, the
    producer's, the admin client's, the event loop's)."""
    found = []
    for module in modules:
        for value in list(vars(module).values()):
            config = getattr(value, "DEFAULT_CONFIG", None) if isinstance(value, type) else None
            if isinstance(config, dict) and config.get("selector") is selectors.DefaultSelector and not any(
                    config is f for f in found):
                found.append(config)
    return found



def _ordered_lt(self: Any, other: Any) -> bool:
    """kafka-python's scheduled tasks tie-broken by the order they were made, not by their memory address."""
    return _seq(self) < _seq(other)


def _seq(task: Any) -> int:
    seq = task.__dict__.get("_sim_seq")
    if seq is None:
        seq = task.__dict__["_sim_seq"] = next(_TASK_SEQ)
    return seq


_TASK_SEQ = itertools.count()


#: kafka-python's classes that *subclass* ``threading.Thread`` (bound at import, so routing the module attribute does
#: not reach them): the producer's sender. Their ``start``, ``join`` and ``is_alive`` are a task's while routed.
_THREAD_CLASSES = (kafka.producer.sender.Sender,)
_INHERITED = object()


def _task_methods(io: KafkaIO) -> dict[str, Any]:
    """``start``/``join``/``is_alive`` of a ``threading.Thread`` subclass, on a task of ``io``'s runtime."""

    def start(thread: Any) -> None:
        task = io.runtime.spawn(thread.run, name=thread.name)
        thread.__dict__["_sim_task"] = task
        io.threads[task] = thread

    def join(thread: Any, timeout: float | None = None) -> None:
        task = thread.__dict__.get("_sim_task")
        if task is not None:
            task.join(timeout)

    def is_alive(thread: Any) -> bool:
        task = thread.__dict__.get("_sim_task")
        return task is not None and task.is_alive()

    return {"start": start, "join": join, "is_alive": is_alive}


@contextlib.contextmanager
def kafka_routed(io: KafkaIO) -> Iterator[None]:
    """Route kafka-python's (and the broker server's) ``threading``, ``time``, ``socket``, ``selectors`` and
    ``random`` to ``io`` for the duration; restore the real modules after, even on an error. Not re-entrant."""
    saved: list[tuple[Any, str, Any]] = []
    shims = {"threading": io.threading, "time": io.time, "socket": io.socket, "selectors": io.selectors,
             "random": io.rng}
    try:
        for module in _routed_modules():
            for name, real in _REAL.items():
                current = module.__dict__.get(name)
                if current is shims[name]:
                    raise tasks.SimulationError("kafka-python is already routed to a simulation")
                if current is real:
                    saved.append((module, name, current))
                    setattr(module, name, shims[name])
        saved.append((broker_version, "_cache", broker_version._cache))
        broker_version._cache = _ProcessCache(io)
        for config in _selector_defaults(_routed_modules()):
            saved.append((config, "selector", config["selector"]))
            config["selector"] = SimSelector
        task_class = kafka.net.selector.Task
        saved.append((task_class, "__lt__", task_class.__dict__["__lt__"]))
        task_class.__lt__ = _ordered_lt
        for thread_class in _THREAD_CLASSES:
            for name, method in _task_methods(io).items():
                saved.append((thread_class, name, thread_class.__dict__.get(name, _INHERITED)))
                setattr(thread_class, name, method)
        yield
    finally:
        for target, name, original in reversed(saved):
            if isinstance(target, dict):
                target[name] = original
            elif original is _INHERITED:
                delattr(target, name)
            else:
                setattr(target, name, original)
