"""The consumer's one source of concurrency, time and chance: threads, locks, events, queues, clocks, sleeps,
random draws, random ids, the host's name and process ids, so that the simulator (issue 39, docs/simulation.md)
can replace them all at once.

Why: the simulator runs the consumer's own code (the connector, both profiles' rebalance attempts, claims,
offsets, streams) on virtual time, one seed giving one interleaving. That needs every source of order the
consumer has to go through the simulator's scheduler: a thread it starts becomes a task, a wait parks that task
on virtual time, a clock reading answers virtual time, a random draw comes from the seed. kazoo takes its own
threads and clocks from its handler (the simulator has one); this module is the same seam for the code above it.

Live, nothing changes: the names below *are* ``time.monotonic``, ``time.time``, ``time.sleep``, ``threading``'s
classes (``threading.local`` too), ``queue.Queue`` and ``random``'s functions, bound at import, so
``uuid.uuid4``, ``socket.gethostname`` and ``os.getpid`` too; ``runtime.monotonic()`` costs the one module attribute
lookup ``time.monotonic()`` costs, with no wrapper in between.
:func:`spawn` is the only new function: ``threading.Thread(..., daemon=True).start()`` in one call.

The simulator swaps them for the duration of a run (:func:`installed`) and restores them after, even on an
error; one simulation per process at a time, so installing refuses to nest. Hence the two rules for callers
(tests/test_architecture.py checks the first):

* ``from zkconsumer import runtime`` and call ``runtime.monotonic()`` (``runtime.Event()``…) where it is needed.
  Never ``from zkconsumer.runtime import monotonic``, nor a default argument ``clock=runtime.monotonic``: either
  binds the live function once, at import, and a simulation would never reach that code.
* An object made at import time (a module-level lock) is a live one whatever runs later. Keep such objects to
  critical sections that never block (a dict read or update): in a simulation every task runs on one OS thread,
  one at a time and never pre-empted, so such a lock is never contended there.
"""

from __future__ import annotations

import contextlib
import os
import queue
import random as _random
import socket
import threading
import time as _time
import uuid as _uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any, Protocol

from zkconsumer.errors import ZkConsumerError

#: What a :class:`Queue` raises, live and simulated alike (the simulator's queue raises these same classes).
Empty = queue.Empty
Full = queue.Full


class RuntimeAlreadyInstalled(ZkConsumerError, RuntimeError):
    """A second implementation installed while one is: a simulation owns the process while it runs."""


class Task(Protocol):
    """What :func:`spawn` returns: the part of ``threading.Thread`` the consumer uses."""

    name: str

    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


def _process_alive(pid: int) -> bool:
    """Live :func:`process_alive`: signal 0 reaches it (or it is someone else's, which is alive too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _spawn_thread(target: Callable[..., Any], *args: Any, name: str, daemon: bool = True, **kwargs: Any) -> Task:
    """Live :func:`spawn`: a started ``threading.Thread`` (daemon by default, as every consumer thread is)."""
    thread = threading.Thread(target=target, args=args, kwargs=kwargs, name=name, daemon=daemon)
    thread.start()
    return thread


# ----------------------------------------------------------------------------------------------- the seam
# Live values, bound at import. installed() replaces these module attributes and puts these values back.

#: Seconds on a clock that never goes back: deadlines, timeouts, durations.
monotonic: Callable[[], float] = _time.monotonic
#: Seconds since the epoch: timestamps written out (trace lines, a registration's timestamp).
time: Callable[[], float] = _time.time
#: Block the calling thread (task) for this many seconds.
sleep: Callable[[float], None] = _time.sleep
#: ``spawn(target, *args, name=..., daemon=True, **kwargs)``: start ``target`` as a thread (task); returns a
#: :class:`Task` to join.
spawn: Callable[..., Task] = _spawn_thread
#: The calling thread (task): compare it with what :func:`spawn` returned (a thread must not join itself).
current_task: Callable[[], Any] = threading.current_thread
#: ``threading``'s primitives and ``queue.Queue``; the simulator's have the same methods. ``Lock`` is the
#: interpreter's plain lock (``threading.Lock`` *is* ``_thread.allocate_lock``, or on 3.13 the class it returns):
#: the cheap one, as kazoo's handler wants per request.
Event = threading.Event
Lock = threading.Lock
RLock = threading.RLock
Condition = threading.Condition
Queue = queue.Queue
#: ``local()``: an object whose attributes each thread (task) sees its own of, as ``threading.local``.
local: Callable[[], Any] = threading.local
#: A float in [0, 1), and a generator of one's own (``Random(seed)``) for a stream of draws.
random: Callable[[], float] = _random.random
Random = _random.Random
#: A random UUID (version 4): a coordinator member id's suffix, a consumer id's (zk/layout.py); seeded in a simulation.
uuid4: Callable[[], _uuid.UUID] = _uuid.uuid4
#: This host's name, as Kafka writes it into consumer ids and a lease's holder (``InetAddress.getLocalHost``).
hostname: Callable[[], str] = socket.gethostname
#: This process's id: who holds a migration's lease (with :func:`hostname`), so a restarted driver knows its own.
getpid: Callable[[], int] = os.getpid
#: Whether a process of this host with this id runs (a lease holder's, to tell a dead driver from a live one).
process_alive: Callable[[int], bool] = _process_alive


@dataclass(frozen=True)
class Implementation:
    """One value for every name of the seam. :data:`LIVE` is this module's own; the simulator builds another
    (``zkconsumer.sim.runtime_impl``) and installs it."""

    monotonic: Callable[[], float]
    time: Callable[[], float]
    sleep: Callable[[float], None]
    spawn: Callable[..., Task]
    current_task: Callable[[], Any]
    Event: Callable[[], Any]
    Lock: Callable[[], Any]
    RLock: Callable[[], Any]
    Condition: Callable[..., Any]
    Queue: Callable[..., Any]
    local: Callable[[], Any]
    random: Callable[[], float]
    Random: Callable[..., Any]
    uuid4: Callable[[], _uuid.UUID]
    hostname: Callable[[], str]
    getpid: Callable[[], int]
    process_alive: Callable[[int], bool]


#: The names :func:`installed` swaps: every field of :class:`Implementation`.
NAMES: tuple[str, ...] = tuple(f.name for f in fields(Implementation))
#: The live implementation: threading, time, queue and random themselves.
LIVE = Implementation(**{name: globals()[name] for name in NAMES})

_installed: Implementation | None = None


def current() -> Implementation:
    """The implementation in use: the installed one during a simulation, else :data:`LIVE`."""
    return _installed or LIVE


@contextlib.contextmanager
def installed(impl: Implementation) -> Iterator[Implementation]:
    """Make ``impl`` the source of every name of the seam until the block ends, then restore the live ones (even
    on an error). Refuses to nest: two simulations at once would read each other's clocks."""
    global _installed
    if _installed is not None:
        raise RuntimeAlreadyInstalled("a runtime implementation is already installed (one simulation at a time)")
    module = globals()
    _installed = impl
    module.update({name: getattr(impl, name) for name in NAMES})
    try:
        yield impl
    finally:
        module.update({name: getattr(LIVE, name) for name in NAMES})
        _installed = None
