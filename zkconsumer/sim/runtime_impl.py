"""The runtime seam (zkconsumer/runtime.py) on the simulator: what the consumer's threads, locks, queues, clocks,
sleeps and random draws become while a simulation runs.

Why: the consumer takes all of those from :mod:`zkconsumer.runtime`, live ``threading``/``time``/``random``. Here
each name is its counterpart in :mod:`.tasks` on one :class:`~zkconsumer.sim.tasks.Runtime`: a spawned thread is a
task, a thread-local is task-local, a wait parks it on virtual time, the clocks read the scheduler, and random draws
come from a generator seeded by the simulation's seed (its own stream, so that a draw the consumer adds does not
reshuffle the scheduler's or kazoo's). :func:`installed` installs it for the duration of a run and restores the live
one after; :class:`~zkconsumer.sim.kazoo_world.KazooWorld` does so around every run.
"""

from __future__ import annotations

import contextlib
import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from zkconsumer import runtime as seam
from zkconsumer.sim import tasks

#: Every simulated process runs on this host (the lab's processes share one machine too).
SIM_HOST = "sim-host"


def implementation(rt: tasks.Runtime, rng: random.Random) -> seam.Implementation:
    """Every name of the seam on ``rt`` (tasks, primitives, its clock) and ``rng`` (random draws)."""

    def spawn(target: Callable[..., Any], *args: Any, name: str, daemon: bool = True, **kwargs: Any) -> tasks.Task:
        # daemon or not: a task left parked when the main task returns is simply not resumed (Runtime.close ends it)
        return rt.spawn(target, *args, name=name, **kwargs)

    def generator(seed: Any = None) -> random.Random:
        """``random.Random(seed)``; unseeded (from the OS, live), seeded from ``rng`` instead."""
        return random.Random(rng.getrandbits(64) if seed is None else seed)

    pids: dict[int, tasks.Process | None] = {}

    def getpid() -> int:
        """A simulated process's id: stable for the run, numbered in the order processes first ask."""
        task = rt.current()
        process = task.process if task is not None else None
        for pid, known in pids.items():
            if known is process:
                return pid
        pid = 1000 + len(pids)
        pids[pid] = process
        return pid

    def process_alive(pid: int) -> bool:
        """A process that asked for its id and was not killed since (an unknown id: none ran here)."""
        process = pids.get(pid, False)
        return process is not False and (process is None or not process.killed)

    return seam.Implementation(
        monotonic=rt.clock.monotonic,
        time=rt.clock.time,
        sleep=rt.sleep,
        spawn=spawn,
        current_task=rt.current,
        Event=lambda: tasks.Event(rt),
        Lock=lambda: tasks.Lock(rt),
        RLock=lambda: tasks.RLock(rt),
        Condition=lambda lock=None: tasks.Condition(rt, lock),
        Queue=lambda maxsize=0: tasks.Queue(rt, maxsize),
        local=lambda: tasks.Local(rt),
        random=rng.random,
        Random=generator,
        uuid4=lambda: uuid.UUID(int=rng.getrandbits(128), version=4),
        hostname=lambda: SIM_HOST,
        getpid=getpid,
        process_alive=process_alive,
    )


@contextlib.contextmanager
def installed(rt: tasks.Runtime, rng: random.Random) -> Iterator[seam.Implementation]:
    """The seam on ``rt`` and ``rng`` for the duration of the block (refused inside another installation)."""
    with seam.installed(implementation(rt, rng)) as impl:
        yield impl
