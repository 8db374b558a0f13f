"""CPU measures (Linux ``/proc``): of the consumers' host processes, of ZooKeeper and of the JVMs' JIT
compilers; waiting until all is quiet again; the floor a CPU-bound rebalance cannot beat."""

from __future__ import annotations

import os
import statistics
import time

from zkconsumer.consumer.zookeeper.claims import OWNER_WATCH_DELAY_S

CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _cpu_ms(stat_path: str) -> tuple[str, float]:
    """(name, CPU ms used so far: user + system) of a process or thread, from its ``/proc/.../stat``."""
    with open(stat_path) as f:
        stat = f.read()
    fields = stat.rsplit(")", 1)[1].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf(
        "SC_CLK_TCK")


def process_cpu_ms(pids: list[int]) -> float | None:
    """CPU time (ms) these processes have used so far (Linux /proc; None elsewhere)."""
    try:
        return sum(_cpu_ms(f"/proc/{pid}/stat")[1] for pid in pids)
    except OSError:
        return None


#: Per JVM thread, the CPU ns last read, and the running totals (all, JIT) per process: a thread that ended since
#: (the JVM starts and stops compiler threads as needed) keeps what was read of it.
_task_clocks: dict[int, tuple[dict[int, tuple[bool, int]], float, float]] = {}


def zookeeper_cpu_ms(pid: int | None) -> tuple[float, float] | None:
    """CPU time (ms) a JVM (the ZooKeeper server, or a Kafka consumer host) has used since first asked, and the
    part of it its JIT compiler threads used (Linux /proc; None elsewhere). Per thread from ``schedstat``
    (nanoseconds; ``stat`` counts 10 ms ticks, truncated per thread). A production ZooKeeper has compiled its hot
    paths long ago; a fresh one spends more CPU compiling than serving during its first thousands of rebalance
    requests."""
    if pid is None:
        return None
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    last, total, jit = _task_clocks.get(pid, ({}, 0.0, 0.0))
    seen: dict[int, tuple[bool, int]] = {}
    for task in tasks:
        tid = int(task)
        try:
            compiler = last[tid][0] if tid in last else "CompilerThre" in _comm(pid, tid)  # "C2 CompilerThre"
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended
        seen[tid] = (compiler, ns)
        ms = (ns - last.get(tid, (compiler, 0))[1]) / 1e6
        total += ms
        if compiler:
            jit += ms
    _task_clocks[pid] = (seen, total, jit)
    return total, jit


def _comm(pid: int, tid: int) -> str:
    with open(f"/proc/{pid}/task/{tid}/comm") as f:
        return f.read()


def cpu_sample(host_pids: list[int], zk_pid: int | None) -> dict[str, float | None]:
    """CPU ms used so far by the consumers' host processes, ZooKeeper, and ZooKeeper's JIT (None: no /proc)."""
    zk = zookeeper_cpu_ms(zk_pid)
    return {"consumers": process_cpu_ms(host_pids), "zookeeper": zk and zk[0], "jit": zk and zk[1]}


#: A measured join or crash starts on a quiet group: at least this long after the previous one converged (the
#: default profile sets the exists-watches on the owner nodes it gained OWNER_WATCH_DELAY_S after its claim) and
#: once the consumers and ZooKeeper used under QUIET_MS of CPU in the last QUIET_WINDOW_S.
SETTLE_MIN_S = OWNER_WATCH_DELAY_S + 0.1
QUIET_WINDOW_S = 0.1
QUIET_MS = 20.0


def settle(pids: list[int], since: float, timeout: float = 5.0) -> float:
    """Wait until the previous join or crash is over everywhere, not only converged: without this, the work a
    rebalance leaves for later (the default's owner-node watches, 300 ms after its claim) lands in the next one and
    is charged to it. Returns the seconds waited after ``since`` (monotonic); gives up quietly after ``timeout``."""
    time.sleep(max(0.0, since + SETTLE_MIN_S - time.monotonic()))
    deadline = time.monotonic() + timeout
    last = process_cpu_ms(pids)
    while last is not None and time.monotonic() < deadline:
        time.sleep(QUIET_WINDOW_S)
        now = process_cpu_ms(pids)
        if now is None or now - last <= QUIET_MS:
            break
        last = now
    return time.monotonic() - since


def cpu_delta(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if before.get(k) is None or after.get(k) is None else after[k] - before[k] for k in after}


def cpu_mean(samples: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Per-key mean of per-action CPU (None where any action could not be measured)."""
    keys = dict.fromkeys(k for s in samples for k in s)
    return {k: None if not samples or any(s.get(k) is None for s in samples)
            else statistics.mean(s[k] for s in samples) for k in keys}


def jvm_jit_ms(pids: list[int]) -> float | None:
    """CPU ms the JIT compiler threads of these JVMs have used so far (None: no /proc)."""
    samples = [zookeeper_cpu_ms(pid) for pid in pids]
    return None if any(s is None for s in samples) else sum(s[1] for s in samples)


def floor_ms(cpu: dict[str, float | None]) -> float | None:
    """The shortest a rebalance can take on this machine when CPU-bound: the CPU the consumers and ZooKeeper used
    until it converged (read when the benchmark saw it, 30-40 ms later), spread over the cores."""
    consumers, zookeeper = cpu.get("consumers_to_converged"), cpu.get("zookeeper_to_converged")
    if consumers is None or zookeeper is None:
        return None
    return (consumers + zookeeper) / CORES
