"""The runtime seam (zkconsumer/runtime.py): live it is threading, time and random themselves; a simulation
installs its own (zkconsumer/sim/runtime_impl.py) for the duration of a run, and the consumer's code, unchanged,
then reads virtual time, blocks on simulated primitives and draws from the seed."""

from __future__ import annotations

import os
import queue
import random
import socket
import threading
import time
import uuid

import pytest

from zkconsumer import runtime, trace
from zkconsumer.consumer.zookeeper.phases import PhaseClock
from zkconsumer.runtime import RuntimeAlreadyInstalled
from zkconsumer.sim import runtime_impl
from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.tasks import Runtime
from zkconsumer.zk.handler import LatchResult
from zkconsumer.zk.layout import make_consumer_id
from zkconsumer.zk.lease import SessionLease

EPOCH_S = 1_600_000_000.0  # the simulated Clock's wall time at virtual zero


def test_live_the_seam_is_threading_time_queue_and_random_themselves() -> None:
    """No wrapper in between: the same functions and classes, so nothing changes and nothing costs more."""
    assert runtime.current() is runtime.LIVE
    assert runtime.monotonic is time.monotonic and runtime.time is time.time and runtime.sleep is time.sleep
    assert runtime.Event is threading.Event and runtime.Lock is threading.Lock and runtime.RLock is threading.RLock
    assert runtime.Condition is threading.Condition and runtime.Queue is queue.Queue
    assert runtime.random is random.random and runtime.Random is random.Random
    assert runtime.current_task is threading.current_thread and runtime.local is threading.local
    assert runtime.uuid4 is uuid.uuid4 and runtime.hostname is socket.gethostname and runtime.getpid is os.getpid
    assert runtime.process_alive(os.getpid()) and not runtime.process_alive(2**22 + 1)  # above Linux's pid_max
    done = runtime.Event()
    task = runtime.spawn(lambda value: done.set() if value == 1 else None, 1, name="seam-live")
    task.join(5)
    assert done.is_set() and isinstance(task, threading.Thread) and task.daemon and task.name == "seam-live"


def test_installing_swaps_every_name_and_restores_them_even_on_an_error_and_refuses_to_nest() -> None:
    rt = Runtime(Scheduler(seed=1))
    impl = runtime_impl.implementation(rt, random.Random(1))
    with pytest.raises(KeyError), runtime.installed(impl):
        assert runtime.current() is impl
        assert all(getattr(runtime, name) is getattr(impl, name) for name in runtime.NAMES)
        with pytest.raises(RuntimeAlreadyInstalled), runtime.installed(impl):
            pass
        raise KeyError("the run failed")
    assert runtime.current() is runtime.LIVE
    assert all(getattr(runtime, name) is getattr(runtime.LIVE, name) for name in runtime.NAMES)
    assert runtime.monotonic is time.monotonic


def test_the_consumers_own_code_reads_virtual_time_inside_a_simulation() -> None:
    """The rebalance's phase clock, the trace's timestamps and the session lease are consumer-path code reading
    ``runtime.monotonic()``/``runtime.time()``: in a simulation they see virtual time, exact to the millisecond,
    and an hour of it passes in no wall time at all."""
    world = KazooWorld(seed=3)

    def main() -> dict:
        phases = PhaseClock()
        with phases.phase("owner_wait"):
            runtime.sleep(2.5)
            with phases.phase("claim"):
                runtime.sleep(0.75)
        stamped = trace.now_ms()
        lease = SessionLease()
        lease.confirm(runtime.monotonic(), 2.0)
        holds_at_once = lease.holds()
        world.advance(3600)  # a virtual hour, passing at once in wall time: the lease must lapse on it
        lapsed = not lease.holds()
        # a member thread (a task here) renews the lease one second later; the waiter wakes then, on virtual time
        renewer = runtime.spawn(lambda: (runtime.sleep(1.0), lease.confirm(runtime.monotonic(), 2.0)),
                                name="renewer")
        before = runtime.monotonic()
        renewed = lease.wait(5.0)
        waited = runtime.monotonic() - before
        renewer.join()
        return dict(phases=phases.as_ms(), stamped=stamped, holds=holds_at_once, lapsed=lapsed, renewed=renewed,
                    waited=waited, now=runtime.monotonic())

    started = time.monotonic()
    out = world.run(main, limit_ms=4_000_000)
    assert time.monotonic() - started < 5.0
    assert out["phases"]["owner_wait"] == 2500 and out["phases"]["claim"] == 750
    assert out["stamped"] == int(EPOCH_S * 1000) + 3250
    assert out["holds"] and out["lapsed"] and out["renewed"]
    assert out["waited"] == pytest.approx(1.0) and out["now"] == pytest.approx(3.25 + 3600 + 1.0)
    assert runtime.monotonic is time.monotonic  # restored after the run


def test_ids_host_names_and_pids_come_from_the_seed_in_a_simulation() -> None:
    """A consumer id (host-millis-uuid8, zk/layout.py), a coordinator member id and a migration lease's holder read
    the seam: in a simulation one seed gives the same ids, the simulated host's name and a process's own pid."""
    def ids(seed: int) -> tuple:
        world = KazooWorld(seed=seed)
        return world.run(lambda: (make_consumer_id("g"), runtime.hostname(), runtime.getpid() == runtime.getpid(),
                                  runtime.process_alive(runtime.getpid()), runtime.process_alive(1)))

    first = ids(5)
    assert first == ids(5) and first[0] != ids(6)[0]
    assert first[0].startswith(f"g_{runtime_impl.SIM_HOST}-") and first[1:] == (runtime_impl.SIM_HOST, True, True,
                                                                                    False)


def test_the_simulated_primitives_behave_as_threadings_do() -> None:
    """A bounded queue (a stream's) parks a full put until a get makes room; put_nowait and a timed-out put raise
    ``runtime.Full``; a task is not the current task of another; the consumer's random draws follow the seed."""
    def main() -> dict:
        q = runtime.Queue(1)
        q.put("a")
        with pytest.raises(runtime.Full):
            q.put_nowait("b")
        with pytest.raises(runtime.Full):
            q.put("b", timeout=0.5)
        got: list[tuple[float, str]] = []
        taker = runtime.spawn(lambda: (runtime.sleep(1.0), got.append((runtime.monotonic(), q.get()))),
                              name="taker")
        start = runtime.monotonic()
        q.put("c")  # parks until the taker makes room
        put_after = runtime.monotonic() - start
        taker.join()
        assert taker is not runtime.current_task()
        return dict(put_after=put_after, got=[v for _, v in got], left=q.get_nowait(),
                    draws=[runtime.random() for _ in range(3)], own=runtime.Random().random(), local=task_local())

    def task_local() -> tuple:
        """``runtime.local()``: each task its own attributes, as each thread has them live."""
        seen = runtime.local()
        seen.name = "main"
        other = runtime.spawn(lambda: (setattr(seen, "name", "other"), seen.name), name="other")
        other.join()
        return seen.name, other.result, hasattr(seen, "missing")

    one, again, other = (KazooWorld(seed=s).run(main) for s in (7, 7, 8))
    assert one["put_after"] == pytest.approx(1.0) and one["got"] == ["a"] and one["left"] == "c"
    assert one["local"] == ("main", (None, "other"), False)
    assert one["draws"] == again["draws"] and one["own"] == again["own"]
    assert one["draws"] != other["draws"]


def test_the_zk_handlers_own_answer_latch_parks_a_task_on_virtual_time() -> None:
    """zk/handler.py's LatchResult takes its locks from the seam: in a simulation a waiter parks until another task
    answers a virtual second later, and a timed wait with no answer gives up on virtual time."""
    def main() -> tuple:
        answered, unanswered = LatchResult(None), LatchResult(None)
        runtime.spawn(lambda: (runtime.sleep(1.0), answered.set("v")), name="answerer")
        start = runtime.monotonic()
        value = answered.get(timeout=5.0)
        after = runtime.monotonic() - start
        return value, after, unanswered.wait(2.0), runtime.monotonic() - start

    assert KazooWorld(seed=5).run(main) == ("v", pytest.approx(1.0), False, pytest.approx(3.0))


def test_closing_a_runtime_ends_a_task_that_parks_again_on_its_way_out() -> None:
    """A member's main task parked at the end of a run, whose ``finally`` joins a thread that never ends (a
    connector's shutdown joining its rebalancer): told once, it parks again. It must be told until it ends, or its
    greenlet and the whole world it holds are never freed (a Spark worker grew a megabyte a seed)."""
    world = KazooWorld(seed=1)
    rt = world.runtime
    spawned = []

    def member() -> None:
        forever = rt.spawn(lambda: world.runtime.sleep(10**6), name="rebalancer")
        try:
            world.runtime.sleep(10**6)
        finally:
            forever.join(30)  # parks again under the first GreenletExit

    def main() -> None:
        spawned.append(rt.spawn(member, name="member"))
        world.advance(1)

    world.run(main)
    world.close()
    assert spawned[0].done and spawned[0]._glet.dead
