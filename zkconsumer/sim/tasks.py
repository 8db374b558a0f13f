"""Cooperative tasks on the simulator's scheduler: what threads become when code that was written for threads
(kazoo's connection loop and workers, later the consumer's) runs on virtual time.

A task is a greenlet. It runs until it blocks (an :class:`Event`, a :class:`Lock`, a :class:`Queue`, a sleep,
a socket wait), and then parks: it hands control back to the *hub*, the greenlet running :meth:`Runtime.run`,
which steps the :class:`~zkconsumer.sim.scheduler.Scheduler`. Every wake-up is a scheduler event, so which of
two tasks made ready at the same instant runs first is the seed's choice, and when every task is parked the
scheduler jumps to the next timer: virtual time never waits.

Only one task runs at a time and a task is never pre-empted, so code that is correct under threads stays correct
here, while races that need a pre-emption *between two bytecodes* cannot happen (the simulator explores the
orders of blocking points, not of instructions: FoundationDB's actors have the same granularity).

Timeouts are seconds (float), as in ``threading``; the scheduler counts whole microseconds, so a timeout becomes
the smallest whole number of microseconds at least as long (a 0.3333333 s wait wakes at 333,334 µs).

One runtime runs per process at a time (:func:`active`): :func:`sleep`, which kazoo takes as a plain function,
finds it there.
"""

from __future__ import annotations

import math
import weakref
from collections import deque
from collections.abc import Callable
from queue import Empty, Full
from typing import Any

from greenlet import GreenletExit, getcurrent, greenlet

from zkconsumer.errors import ZkConsumerError
from zkconsumer.sim.scheduler import Clock, Scheduler, Timer


class SimulationError(ZkConsumerError, RuntimeError):
    """The simulation cannot go on: a deadlock (the main task waits and nothing is scheduled), a step limit
    passed, blocking outside a task, a task that died of an unexpected exception, a second runtime at once."""


_ACTIVE: list[Runtime] = []


def active() -> Runtime:
    """The runtime whose :meth:`Runtime.run` is under way (a simulation owns the process while it runs)."""
    if not _ACTIVE:
        raise SimulationError("no simulation is running")
    return _ACTIVE[-1]


def to_us(seconds: float) -> int:
    """A wait in seconds as whole virtual microseconds, never shorter (rounded to a nanosecond first, so that
    float noise such as ``0.1 + 0.2`` does not add a microsecond), and at least 1 µs when positive at all."""
    us = max(0, math.ceil(round(seconds * 1e6, 3)))
    # A positive wait lasts at least a microsecond: a deadline computed in float seconds may lie a femtosecond
    # past the clock ("due in 1e-15 s"), which live time passes at once and virtual time never would.
    return us if us or seconds <= 0 else 1


def sleep(seconds: float) -> None:
    """``time.sleep`` for the running task: park for ``seconds`` of virtual time (0: let the others run first)."""
    active().sleep(seconds)


class _Waiter:
    """One park of one task: woken once, by whichever comes first (a wake-up or its timeout)."""

    __slots__ = ("task", "timer", "fired")

    def __init__(self, task: Task) -> None:
        self.task = task
        self.timer: Timer | None = None
        self.fired = False


class Process:
    """The tasks of one simulated OS process (a member), for the faults a process suffers as a whole.

    A task belongs to the process of the task that spawned it, so a member's kazoo connection loop, its
    rebalancer, fetcher and stream threads all share its fate:

    - **paused** (SIGSTOP): none of its tasks runs; a wake-up meanwhile (a timer, a byte arriving, a lock freed) is
      kept and delivered at :meth:`Runtime.resume_process`, so the process finds on waking what a real one finds
      — its timers all due at once, its socket's bytes waiting — while its ZooKeeper session ages unseen;
    - **killed** (SIGKILL): none of its tasks runs again during the run. :meth:`Runtime.close` still unwinds them
      (a greenlet cannot be dropped without it) once the run is over, when nothing they do can be seen: the world
      closes a killed process's connections and its trace ignores it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.paused = False
        self.killed = False
        self.deferred: list[tuple[Task, bool]] = []

    def __repr__(self) -> str:
        return f"<Process {self.name}{' paused' if self.paused else ''}{' killed' if self.killed else ''}>"


#: how many times :meth:`Runtime.close` tells a task to end (each ``finally`` that parks again takes one)
CLOSE_ATTEMPTS = 100


class Task:
    """A cooperative thread: ``join``, ``is_alive`` and ``name`` as ``threading.Thread`` has them."""

    def __init__(self, runtime: Runtime, fn: Callable[..., Any], args: tuple, kwargs: dict, name: str,
                 process: Process | None = None) -> None:
        self.name = name
        self.process = process
        self.result: Any = None
        self.exception: BaseException | None = None
        self._runtime = runtime
        self._finished = Event(runtime)
        self._glet = greenlet(lambda _started: self._main(fn, args, kwargs))

    def _main(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            self.result = fn(*args, **kwargs)
        except GreenletExit:
            pass
        except BaseException as exc:  # noqa: BLE001 - a thread's death is reported, not raised in the hub
            self.exception = exc
            self._runtime.failures.append((self, exc))
        finally:
            self._finished.set()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def is_alive(self) -> bool:
        return not self.done

    def join(self, timeout: float | None = None) -> None:
        self._finished.wait(timeout)

    def __repr__(self) -> str:
        return f"<Task {self.name} {'done' if self.done else 'alive'}>"


class Runtime:
    """Tasks on a scheduler. Build everything, then :meth:`run` a main function as a task: it returns what the
    main function returned once it has, the other tasks left parked where they are (a later :meth:`run` goes on
    with them). ``failures`` lists tasks that died of an exception; ``strict`` (the default) makes :meth:`run`
    raise at the first one, since in a simulation an unexpected exception is a finding, not noise."""

    def __init__(self, scheduler: Scheduler, strict: bool = True) -> None:
        self.scheduler = scheduler
        self.clock = Clock(scheduler)
        self.strict = strict
        self.failures: list[tuple[Task, BaseException]] = []
        self.switches = 0
        self._hub: greenlet | None = None
        self._current: Task | None = None
        self._tasks: list[Task] = []
        self._prune_at = 64
        self._names = 0

    # ------------------------------------------------------------------------------------------- tasks
    def spawn(self, fn: Callable[..., Any], *args: Any, name: str | None = None, process: Process | None = None,
              **kwargs: Any) -> Task:
        """Start ``fn(*args, **kwargs)`` as a task: it first runs once the current one parks (now, in virtual time).
        It belongs to ``process``, else to the spawning task's process (a thread starts in its own process)."""
        self._names += 1
        if process is None and self._current is not None:
            process = self._current.process
        task = Task(self, fn, args, kwargs, name or f"task-{self._names}", process)
        if len(self._tasks) >= self._prune_at:  # forget ended tasks now and then: every spawn would be O(tasks)
            self._tasks = [t for t in self._tasks if not t.done]
            self._prune_at = max(64, 2 * len(self._tasks))
        self._tasks.append(task)
        self.scheduler.call_later(0, lambda: self._resume(task, True))
        return task

    def current(self) -> Task | None:
        return self._current

    def sleep(self, seconds: float) -> None:
        """Park the running task for ``seconds`` of virtual time; 0 yields to whatever else is ready now."""
        self.block((), max(seconds, 0.0))

    # ------------------------------------------------------------------------------------------- parking
    def block(self, waitlists: tuple[deque, ...] | list[deque], timeout: float | None) -> bool:
        """Park the running task on ``waitlists`` until :meth:`wake` (True) or ``timeout`` seconds (False)."""
        task = self._current
        if task is None or self._hub is None:
            raise SimulationError("only a task can block (run the code under Runtime.run)")
        waiter = _Waiter(task)
        for waitlist in waitlists:
            waitlist.append(waiter)
        if timeout is not None:
            waiter.timer = self.scheduler.call_later_us(to_us(timeout), lambda: self._expire(waiter))
        try:
            return self._hub.switch()
        finally:
            for waitlist in waitlists:
                try:
                    waitlist.remove(waiter)
                except ValueError:
                    pass

    def wake(self, waiter: _Waiter) -> bool:
        """Make a parked task ready (it runs at the current instant, in the seed's order); False if it was already."""
        if waiter.fired:
            return False
        waiter.fired = True
        if waiter.timer is not None:
            waiter.timer.cancel()
        self.scheduler.call_later(0, lambda: self._resume(waiter.task, True))
        return True

    def wake_one(self, waitlist: deque) -> bool:
        while waitlist:
            if self.wake(waitlist.popleft()):
                return True
        return False

    def wake_all(self, waitlist: deque) -> None:
        while waitlist:
            self.wake(waitlist.popleft())

    def _expire(self, waiter: _Waiter) -> None:
        if not waiter.fired:
            waiter.fired = True
            self._resume(waiter.task, False)

    def _resume(self, task: Task, value: bool) -> None:
        if task.done:
            return
        process = task.process
        if process is not None and (process.paused or process.killed):
            if not process.killed:
                process.deferred.append((task, value))
            return
        hub = getcurrent()
        if task._glet.parent is not hub:  # first run, or a later run() from elsewhere: come back here
            task._glet.parent = hub
        self._current = task
        self.switches += 1
        try:
            task._glet.switch(value)
        finally:
            self._current = None
        if self.strict and self.failures:
            failed, exc = self.failures[0]
            raise SimulationError(f"task {failed.name} died: {exc!r}") from exc

    # ----------------------------------------------------------------------------------------- processes
    def pause_process(self, process: Process) -> None:
        """SIGSTOP: from now on none of ``process``'s tasks runs (the running one, if it is one, runs to its next
        blocking point first: a signal lands between instructions, and the simulator's grain is a blocking point)."""
        process.paused = True

    def resume_process(self, process: Process) -> None:
        """SIGCONT: the wake-ups kept meanwhile are delivered, in the order they came, at the current instant."""
        process.paused = False
        deferred, process.deferred = process.deferred, []
        for task, value in deferred:
            self.scheduler.call_later(0, lambda t=task, v=value: self._resume(t, v))

    def kill_process(self, process: Process) -> None:
        """SIGKILL: none of ``process``'s tasks runs again."""
        process.killed = True
        process.deferred.clear()

    # ------------------------------------------------------------------------------------------- running
    def run(self, main: Callable[..., Any], *args: Any, limit_ms: int | None = None, **kwargs: Any) -> Any:
        """Run ``main`` as a task until it returns (its value) or raises (re-raised here), stepping the scheduler
        meanwhile. ``limit_ms``: fail if virtual time would pass it first (a guard against a run that never
        ends, since a connected client's pings keep the scheduler busy forever)."""
        if self._hub is not None or _ACTIVE:
            raise SimulationError("a simulation is already running in this process")
        self._hub = getcurrent()
        _ACTIVE.append(self)
        try:
            task = self.spawn(main, *args, name="main", **kwargs)
            while not task.done:
                due = self.scheduler.next_due_us()
                if due is None:
                    raise SimulationError(f"deadlock at {self.scheduler.now_ms} ms: every task waits, nothing is due")
                if limit_ms is not None and due > limit_ms * 1000:
                    raise SimulationError(f"the main task had not finished by {limit_ms} ms")
                self.scheduler.step()
        finally:
            _ACTIVE.pop()
            self._hub = None
        if task.exception is not None:
            raise task.exception
        return task.result

    def close(self) -> None:
        """End every task still parked (``GreenletExit`` raised where it waits), so none lingers after the run.

        A task may park again on its way out (a ``finally`` that joins a thread, as a connector's shutdown does):
        it is told again, until it ends. One left parked would never be freed (a suspended greenlet in a cycle with
        its task is no garbage to Python), and with it its whole world: a Spark worker running thousands of seeds
        grew by a megabyte a seed, and its collector slowed with every seed."""
        self._hub = getcurrent()
        _ACTIVE.append(self)
        try:
            for task in list(self._tasks):  # a task told to end may spawn: those are not waited for
                for _ in range(CLOSE_ATTEMPTS):
                    if task.done or task._glet.dead or not task._glet:
                        break
                    task._glet.parent = self._hub
                    self._current = task
                    try:
                        task._glet.throw(GreenletExit)
                    finally:
                        self._current = None
        finally:
            _ACTIVE.pop()
            self._hub = None
            self._tasks = []


# ----------------------------------------------------------------------------------------------- primitives
class Event:
    """``threading.Event`` on virtual time."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._flag = False
        self._waiters: deque[_Waiter] = deque()

    def is_set(self) -> bool:
        return self._flag

    isSet = is_set  # noqa: N815 - threading's old name, which some callers still use

    def set(self) -> None:
        self._flag = True
        self._runtime.wake_all(self._waiters)

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag or (timeout is not None and timeout <= 0):
            return self._flag
        self._runtime.block((self._waiters,), timeout)
        return self._flag


class Lock:
    """``threading.Lock``: a task that finds it held parks until it is released (FIFO among the waiters)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._held = False
        self._waiters: deque[_Waiter] = deque()

    def _free_for(self, task: Task | None) -> bool:
        return not self._held

    def _take(self, task: Task | None) -> None:
        self._held = True

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._held:  # free for anyone (the common case: a simulation has no pre-emption)
            self._take(self._runtime._current)
            return True
        runtime = self._runtime
        task = runtime.current()
        if self._free_for(task):
            self._take(task)
            return True
        if not blocking or timeout == 0:
            return False
        deadline = None if timeout is None or timeout < 0 else runtime.scheduler.now_us + to_us(timeout)
        while True:
            left = None if deadline is None else (deadline - runtime.scheduler.now_us) / 1e6
            if left is not None and left <= 0:
                return False
            runtime.block((self._waiters,), left)
            if self._free_for(task):
                self._take(task)
                return True

    def release(self) -> None:
        if not self._held:
            raise SimulationError("release of an unheld lock")
        self._held = False
        self._runtime.wake_one(self._waiters)

    def locked(self) -> bool:
        return self._held

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # Condition's hooks: a plain lock is released and re-taken once
    def _release_save(self) -> int:
        self.release()
        return 1

    def _acquire_restore(self, saved: int) -> None:
        self.acquire()


class RLock(Lock):
    """``threading.RLock``: re-entrant for the task holding it."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self._owner: Task | None = None
        self._count = 0

    def _free_for(self, task: Task | None) -> bool:
        return not self._held or self._owner is task

    def _take(self, task: Task | None) -> None:
        self._held = True
        self._owner = task
        self._count += 1

    def release(self) -> None:
        if not self._held or self._owner is not self._runtime.current():
            raise SimulationError("release of an RLock this task does not hold")
        self._count -= 1
        if self._count == 0:
            self._owner = None
            super().release()

    def _release_save(self) -> int:
        count, self._count, self._owner = self._count, 1, self._owner
        self.release()
        return count

    def _acquire_restore(self, saved: int) -> None:
        self.acquire()
        self._count = saved


class Condition:
    """``threading.Condition`` over a :class:`Lock` or :class:`RLock` (an RLock by default)."""

    def __init__(self, runtime: Runtime, lock: Lock | None = None) -> None:
        self._runtime = runtime
        self._lock = lock if lock is not None else RLock(runtime)
        self._waiters: deque[_Waiter] = deque()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        saved = self._lock._release_save()
        try:
            return self._runtime.block((self._waiters,), timeout)
        finally:
            self._lock._acquire_restore(saved)

    def wait_for(self, predicate: Callable[[], Any], timeout: float | None = None) -> Any:
        """``threading.Condition.wait_for``: wait until ``predicate()`` is true or ``timeout`` seconds pass."""
        deadline = None if timeout is None else self._runtime.clock.monotonic() + timeout
        result = predicate()
        while not result:
            remaining = None if deadline is None else deadline - self._runtime.clock.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self.wait(remaining)
            result = predicate()
        return result

    def notify(self, n: int = 1) -> None:
        for _ in range(n):
            if not self._runtime.wake_one(self._waiters):
                break

    def notify_all(self) -> None:
        self._runtime.wake_all(self._waiters)


class Local:
    """``threading.local`` for tasks: each task sees its own attributes (code outside any task, the hub, has one set
    too). A task's attributes go when the task does."""

    __slots__ = ("_runtime", "_per_task", "_outside")

    def __init__(self, runtime: Runtime) -> None:
        object.__setattr__(self, "_runtime", runtime)
        object.__setattr__(self, "_per_task", weakref.WeakKeyDictionary())
        object.__setattr__(self, "_outside", {})

    def _attrs(self) -> dict[str, Any]:
        task = self._runtime.current()
        if task is None:
            return self._outside
        attrs = self._per_task.get(task)
        if attrs is None:
            attrs = self._per_task[task] = {}
        return attrs

    def __getattr__(self, name: str) -> Any:
        try:
            return self._attrs()[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self._attrs()[name] = value

    def __delattr__(self, name: str) -> None:
        getattr(self, name)  # AttributeError, as threading.local's, when this task has none
        del self._attrs()[name]


class Queue:
    """``queue.Queue`` on virtual time: unbounded, or bounded by ``maxsize`` (> 0), where ``put`` parks while the
    queue is full; ``get`` raises ``queue.Empty`` and ``put`` ``queue.Full`` as the real ones do."""

    def __init__(self, runtime: Runtime, maxsize: int = 0) -> None:
        self._runtime = runtime
        self.maxsize = maxsize
        self._items: deque[Any] = deque()
        self._getters: deque[_Waiter] = deque()
        self._putters: deque[_Waiter] = deque()

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._items)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        runtime = self._runtime
        if self.full():
            self._wait_for_room(block, timeout)
        self._items.append(item)
        runtime.wake_one(self._getters)
        if not self.full():  # room for the next putter, who may have been passed over
            runtime.wake_one(self._putters)

    def _wait_for_room(self, block: bool, timeout: float | None) -> None:
        runtime = self._runtime
        deadline = None if timeout is None else runtime.scheduler.now_us + to_us(timeout)
        while self.full():
            left = None if deadline is None else (deadline - runtime.scheduler.now_us) / 1e6
            if not block or (left is not None and left <= 0):
                raise Full
            runtime.block((self._putters,), left)

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        runtime = self._runtime
        if not self._items:
            deadline = None if timeout is None else runtime.scheduler.now_us + to_us(timeout)
            while not self._items:
                left = None if deadline is None else (deadline - runtime.scheduler.now_us) / 1e6
                if not block or (left is not None and left <= 0):
                    raise Empty
                runtime.block((self._getters,), left)
        item = self._items.popleft()
        if self._items:  # more for the next getter, who may have been passed over
            runtime.wake_one(self._getters)
        runtime.wake_one(self._putters)
        return item

    def get_nowait(self) -> Any:
        return self.get(False)

    def task_done(self) -> None:
        """Nothing to count: no caller of ours joins a queue."""

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)
