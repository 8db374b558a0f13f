"""Rebalance speed: Kafka 0.8.2.2's own consumer, its reproduction (profile kafka-0.8) and zkconsumer's default.

One real ZooKeeper (run as in production: the JVM's default JIT, not the quick-start flags tests use), one topic
of 200 partitions, groups of 10 and 50 consumers spread over ``--processes`` host processes (4 by default; 1 keeps
them all in this process), fetching disabled: this measures coordination, not records. Convergence is read from
ZooKeeper itself: the creation time (``ctime``) of the last owner node of the new assignment, once every owner
node holds the thread the assignor names (then Kafka's verify must pass); waiting for it costs one listing every
10 ms. For each profile and size it measures

* cold start: every consumer started at the same moment, until the group owns every partition as the
  assignor says;
* join: one more consumer joins, until the new assignment is fully owned;
* crash: one consumer's session ends without a shutdown (its ephemeral nodes vanish, as after kill -9 once
  the session timed out), until the survivors own everything;

and counts failed claim attempts (claim conflicts), failed attempts and failed rebalances, and prints where each
consumer's rebalance spent its time (zkconsumer/consumer/zookeeper/phases.py), the ZooKeeper round trip measured
alone (--floor), and
the CPU one rebalance costs the consumers' processes and ZooKeeper (with the part ZooKeeper's JIT compiler took).
Unmeasured scenarios run first until that compiler is quiet (--warmup), as in a ZooKeeper that has been serving.
Each join and crash starts on a quiet group: after the previous one converged, the benchmark waits until the
consumers and ZooKeeper are idle again (the default profile sets its owner watches 300 ms after a claim; charged to
the next action, they had slowed it). Its CPU is read when it converged and once all is quiet again, and in
zkconsumer's hosts split into the rebalance threads, kazoo's connection threads and the rest. A CPU-bound rebalance
cannot beat the CPU until convergence over the cores by much (read 30-40 ms after convergence, it runs a little
high).

The third row, ``kafka-0.8.2.2``, is the oracle: Apache Kafka 0.8.2.2's own ``ZookeeperConsumerConnector`` from its
published jars (zkconsumer/apache_kafka), several members per JVM, one JVM per host process, the same placement,
settings, scenarios and convergence measure; its JVMs run an unmeasured cold start, joins and crashes first
(--kafka-warmup) so that their JIT has compiled Kafka's rebalance before anything is measured. Its attempts,
failed attempts, claim conflicts and failed rebalances are counted from its own log (INFO). The output ends with
the ratios against it and the answer: is the kafka-0.8 profile's timing Kafka's?
Run: .venv/bin/python benchmarks/rebalance.py [--sizes 10 50] [--rounds 5] [--implementations ...]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import statistics
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

from hosts import RemoteHost
from kazoo.exceptions import NoNodeError
from rich.table import Table

from zkconsumer.apache_kafka.processes import HighLevelConsumers, KafkaProcessError
from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.config import ConsumerConfig
from zkconsumer.consoles import make_console
from zkconsumer.consumer.zookeeper.claims import OWNER_WATCH_DELAY_S
from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
from zkconsumer.consumer.zookeeper.phases import PHASES
from zkconsumer.tools.groups import verify
from zkconsumer.zk.layout import BrokerInfo
from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.server import ZooKeeperServer, four_letter_word, packets_received
from zkconsumer.zk.topics import create_topic

TOPIC = "bench"
GROUP = "g"
#: Apache Kafka 0.8.2.2's own high-level consumer, the oracle (zkconsumer/apache_kafka)
KAFKA = "kafka-0.8.2.2"
PROFILES = ("kafka-0.8", "default")
IMPLEMENTATIONS = (KAFKA, *PROFILES)
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
#: What every member runs with, whatever its implementation (Kafka 0.8's property names). Everything else is
#: Kafka's default on both sides: range, rebalance.backoff.ms = zookeeper.sync.time.ms = 2000,
#: zookeeper.connection.timeout.ms = the session timeout, offsets in ZooKeeper, one stream.
SETTINGS = {"auto.commit.enable": False, "rebalance.max.retries": 10, "zookeeper.session.timeout.ms": 6000}
#: A broker registration as Kafka 0.8.2's brokers write it. Kafka's rebalance claims nothing without one ("no
#: brokers found when trying to rebalance"); with fetching disabled nothing connects to it. Every implementation's
#: tree has it (the kafka-0.8 profile reads it, as Kafka's getCluster does).
BROKER = BrokerInfo(0, "127.0.0.1", 9092, jmx_port=-1, version=1)


def new_consumer(zk: str, name: str, profile: str) -> ZookeeperConsumerConnector:
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties({
        **SETTINGS, "group.id": GROUP, "consumer.id": name, "zookeeper.connect": zk,
        "zkconsumer.fetch.enable": False, "zkconsumer.profile": profile}))


def kafka_properties() -> dict[str, str]:
    """SETTINGS as Kafka's ConsumerConfig reads them. The harness sets group.id, consumer.id, zookeeper.connect and
    partition.assignment.strategy=range; ``fetch_records=False`` runs the connector without fetchers (Kafka's own
    ``enableFetcher=false``), as zkconsumer.fetch.enable=false does for ours."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in SETTINGS.items()}


def prepare_tree(reg: Registry, partitions: int) -> None:
    """The tree every scenario starts from: the common paths and the group's ids (as a running cluster and group
    have them), the topic, one registered broker (ephemeral, on the benchmark's own session)."""
    reg.setup_common_paths(f"/consumers/{GROUP}/ids")
    create_topic(reg, TOPIC, partitions)
    reg.register_broker(dataclasses.replace(BROKER, timestamp=str(int(time.time() * 1000))))


def expected_owners(names: list[str], partitions: int) -> dict:
    ctx = AssignmentContext({f"{GROUP}_{n}": {TOPIC: 1} for n in names}, {TOPIC: range(partitions)})
    return {(tp.topic, tp.partition): tid for tp, tid in assign("range", ctx).owners.items()}


def zk_owners(reg: Registry) -> tuple[dict, int]:
    """Every owner node of the topic and the latest creation time among them (ZooKeeper's ``ctime``, epoch ms),
    read with pipelined requests."""
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    pending = [(int(c), reg.zk.get_async(f"{base}/{c}")) for c in reg.children(base)]
    owners, latest = {}, 0
    for partition, result in pending:
        with contextlib.suppress(Exception):  # deleted between the listing and the read
            data, stat = result.get()
            owners[(TOPIC, partition)] = data.decode()
            latest = max(latest, stat.ctime)
    return owners, latest


def wait_converged(expected: dict, reg: Registry, since: float, timeout: float = 120.0) -> float:
    """Seconds from ``since`` (epoch seconds) until ZooKeeper held the expected assignment fully owned.

    The moment is read from ZooKeeper itself: once every owner node holds the thread the assignor names, the
    latest owner node's creation time (``ctime``, stamped by the server on this same host) is when the
    assignment became complete. Waiting costs the consumers next to nothing: one listing of the owner nodes
    every 10 ms, whose child version counts every create and delete; all nodes are read only once there is one
    per partition, the listing has stayed still for 30 ms and it changed since the last full read. (Reading all
    200 nodes in the lull before the consumers' first writes took CPU from them exactly when they needed it.)
    Kafka's verify must pass.
    """
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    t0 = time.monotonic()
    last, still_since, read_at = None, time.monotonic(), None
    while True:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the group did not converge")
        try:
            children, stat = reg.zk.get_children(base, include_data=True)
            version = stat.cversion
        except NoNodeError:
            children, version = [], None
        now = time.monotonic()
        if version != last:
            last, still_since = version, now
        elif now - still_since >= 0.03 and len(children) == len(expected) and version != read_at:
            owners, latest = zk_owners(reg)
            if owners == expected:
                break
            read_at = version
        time.sleep(0.01)
    assert verify(reg, GROUP).ok
    return max(0.0, latest / 1000.0 - since)


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


class Host:
    """Consumers living in one process: commands arrive over a pipe (or are called directly in-process)."""

    def __init__(self, zk: str, profile: str) -> None:
        self.zk, self.profile = zk, profile
        self.consumers: dict[str, ZookeeperConsumerConnector] = {}
        self.gone: list[ZookeeperConsumerConnector] = []

    def create(self, names: list[str]) -> None:
        for n in names:
            self.consumers[n] = new_consumer(self.zk, n, self.profile)

    def start_at(self, names: list[str], at: float) -> None:
        """Start these consumers' streams at wall-clock time ``at`` (all hosts at the same moment)."""
        def start(c) -> None:
            time.sleep(max(0.0, at - time.time()))
            with contextlib.suppress(Exception):  # counted through the stats
                c.create_message_streams({TOPIC: 1})

        threads = [threading.Thread(target=start, args=(self.consumers[n],)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def join(self, name: str) -> None:
        self.create([name])
        self.consumers[name].create_message_streams({TOPIC: 1})

    def crash(self, name: str) -> None:
        c = self.consumers.pop(name)
        c.rebalancer.stop()
        c.zk.stop()  # the session ends: its registration and owner nodes vanish at once
        self.gone.append(c)

    def thread_cpu(self) -> dict[str, float]:
        """CPU ms this process used since the last call, by kind of thread: the consumers' rebalance threads
        (``<id>_watcher_executor``), kazoo's connection threads (``zk_loop``), and the rest (this host's own
        threads, and the last slice of threads that ended, such as a crashed consumer's). Per thread from
        ``/proc/self/task/<tid>/schedstat`` (nanoseconds, where ``/proc/.../stat`` counts 10 ms ticks)."""
        seen: dict[int, tuple[str, int]] = {}
        for t in threading.enumerate():
            kind = ("rebalance" if t.name.endswith("_watcher_executor")
                    else "connection" if "zk_loop" in t.name else "other")
            try:
                with open(f"/proc/self/task/{t.native_id}/schedstat") as f:
                    seen[t.native_id] = (kind, int(f.read().split()[0]))
            except (OSError, TypeError):
                continue  # ended meanwhile, or no /proc
        process_ns = time.process_time_ns()
        last, last_process = getattr(self, "_threads_seen", {}), getattr(self, "_process_ns", process_ns)
        out = {"rebalance": 0.0, "connection": 0.0}
        for tid, (kind, ns) in seen.items():
            if kind in out:
                out[kind] += (ns - last.get(tid, (kind, 0))[1]) / 1e6
        out["other"] = (process_ns - last_process) / 1e6 - out["rebalance"] - out["connection"]
        self._threads_seen, self._process_ns = seen, process_ns
        return out

    def stats(self) -> Counter:
        total: Counter = Counter()
        for c in list(self.consumers.values()) + self.gone:
            total.update(c.rebalancer.stats)
        return total

    def phases(self) -> list[tuple[float, float | None, dict[str, int]]]:
        """(monotonic start, trigger time, phases in ms) of every consumer's recent rebalances (phases.py)."""
        return [(start, triggered, phases) for c in list(self.consumers.values()) + self.gone
                for _, start, triggered, phases in c.rebalancer.phase_log]

    def close(self) -> None:
        for c in list(self.consumers.values()) + self.gone:
            with contextlib.suppress(Exception):
                c.shutdown()


class ZkconsumerGroup:
    """zkconsumer's consumers of one profile, over ``processes`` host processes (1: all in this process)."""

    def __init__(self, zk: str, profile: str, processes: int) -> None:
        self.hosts = [RemoteHost(Host, zk, profile) for _ in range(processes)] if processes > 1 else None
        self.local = Host(zk, profile) if self.hosts is None else None
        self.starter: threading.Thread | None = None

    def call(self, host: int, method: str, *args):
        return getattr(self.local, method)(*args) if self.hosts is None else self.hosts[host].call(method, *args)

    @property
    def host_count(self) -> int:
        return len(self.hosts) if self.hosts else 1

    def prepare(self, placement: dict[str, int]) -> None:
        """The consumers are built (connected to ZooKeeper, not yet registered) before the cold start."""
        for h in range(self.host_count):
            self.call(h, "create", [n for n in placement if placement[n] == h])

    def start_at(self, placement: dict[str, int], at: float) -> None:
        """Every host starts its consumers' streams at wall-clock time ``at``; returns at once."""
        if self.hosts is None:
            self.starter = threading.Thread(target=self.local.start_at, args=(list(placement), at))
            self.starter.start()
        else:
            for h, host in enumerate(self.hosts):
                host.send("start_at", [n for n in placement if placement[n] == h], at)

    def started(self) -> None:
        if self.hosts is None:
            self.starter.join()
        else:
            for host in self.hosts:
                host.result()

    def join(self, host: int, name: str) -> None:
        self.call(host, "join", name)

    def crash(self, host: int, name: str) -> None:
        self.call(host, "crash", name)

    def pids(self) -> list[int]:
        return [h.proc.pid for h in self.hosts] if self.hosts else [os.getpid()]

    def jit_ms(self) -> float | None:
        return None  # CPython compiles nothing

    def thread_cpu(self) -> dict[str, float] | None:
        """CPU ms since the last call, by kind of thread, summed over the hosts (Host.thread_cpu)."""
        total: Counter = Counter()
        for h in range(self.host_count):
            total.update(self.call(h, "thread_cpu"))
        return dict(total)

    def results(self) -> tuple[Counter, list[tuple[float, float | None, dict[str, int]]]]:
        counts: Counter = Counter()
        logged: list[tuple[float, float | None, dict[str, int]]] = []
        for h in range(self.host_count):
            counts.update(self.call(h, "stats"))
            logged += self.call(h, "phases")
        return counts, logged

    def close(self) -> None:
        for h in range(self.host_count):
            with contextlib.suppress(Exception):
                self.call(h, "close")
        for host in self.hosts or []:
            host.proc.join(30)


#: Kafka 0.8.2.2's log lines (kafka.consumer.ZookeeperConsumerConnector at INFO, each prefixed with the member's
#: consumer id string) → what they count: every attempt of syncedRebalance starts with "begin rebalancing", a failed
#: one ends with "Rebalancing attempt failed" (then it sleeps rebalance.backoff.ms), every owner node found taken in
#: reflectPartitionOwnershipDecision logs "waiting for the partition ownership to be deleted", and a rebalance that
#: ran out of retries in the watcher thread logs "error during syncedRebalance".
KAFKA_LOG = re.compile(rf"\] \w+ \[{GROUP}_([\w.-]+)\], (begin rebalancing consumer|Rebalancing attempt failed|"
                       r"waiting for the partition ownership to be deleted|error during syncedRebalance)")
KAFKA_COUNTS = {"begin rebalancing consumer": "attempts", "Rebalancing attempt failed": "failed_attempts",
                "waiting for the partition ownership to be deleted": "claim_conflicts",
                "error during syncedRebalance": "failed_rebalances"}


def jvm_jit_ms(pids: list[int]) -> float | None:
    """CPU ms the JIT compiler threads of these JVMs have used so far (None: no /proc)."""
    samples = [zookeeper_cpu_ms(pid) for pid in pids]
    return None if any(s is None for s in samples) else sum(s[1] for s in samples)


class KafkaGroup:
    """Kafka 0.8.2.2's own high-level consumers (``ZookeeperConsumerConnector`` without fetchers): one JVM
    (zkconsumer/apache_kafka/processes.py's HighLevelConsumers, JVM defaults, no quick-start flags) per host
    process, each holding the members the zkconsumer rows place on that host."""

    def __init__(self, zk: str, processes: int, reg: Registry, partitions: int, warmup_rounds: int,
                 logs: Path | None = None) -> None:
        self.reg, self.partitions, self.warmup_rounds = reg, partitions, warmup_rounds
        self.jvms = [HighLevelConsumers(zk, GROUP, [TOPIC], streams=1, strategy="range",
                                        properties=kafka_properties(), fetch_records=False, quick_start=False,
                                        work_dir=None if logs is None else logs / f"host{h}")
                     for h in range(max(processes, 1))]
        self.placement: dict[str, int] = {}  # the measured members (the warm-up's are left out)
        self.marks: list[int] = []  # where each JVM's log stood when the measured group started
        self.crashed: set[str] = set()
        self.errors: Counter = Counter()  # members whose createMessageStreams failed (ConsumerRebalanceFailed)
        self.warm_jit_ms: float | None = None  # JIT CPU of the whole warm-up
        self.warm_jit_last: float | None = None  # JIT CPU per rebalance in its last join and crash
        self.warm_pairs = 0

    @property
    def host_count(self) -> int:
        return len(self.jvms)

    def prepare(self, placement: dict[str, int]) -> None:
        """The JVMs start, then warm up (unmeasured) with members of their own."""
        for jvm in self.jvms:
            jvm.start()
        jit = jvm_jit_ms(self.pids())
        if self.warmup_rounds > 0:
            self.warm_up(len(placement))
        after = jvm_jit_ms(self.pids())
        self.warm_jit_ms = None if jit is None or after is None else after - jit
        self.marks = [jvm.log_file.stat().st_size if jvm.log_file.exists() else 0 for jvm in self.jvms]
        self.placement, self.crashed = dict(placement), set()

    def warm_up(self, size: int) -> None:
        """As many members as the measured group start together, then joins and crashes until the JVMs' JIT
        compiler threads use under 5 ms of CPU per rebalance over the last 3 pairs (ZooKeeper's criterion) or
        ``warmup_rounds`` pairs have run, then all of them crash: the JVMs have compiled Kafka's rebalance before
        the measured cold start, as in a consumer that has been running (the zkconsumer rows run on a warm
        ZooKeeper; CPython compiles nothing). Without it Kafka's JVMs spent more CPU compiling than rebalancing:
        at 10 members on 2 cores, 400-700 ms of JIT per rebalance in the first joins and crashes, 70-150 ms after
        40, quiet after about 100 (at 50 members after about 125), while the join and crash times fell from
        800-1800 to about 200 ms. Even then the JVMs recompile now and then (Scala's collections "made not
        entrant" and compiled again): the row's line shows the JIT's CPU per measured rebalance. The warm-up's
        ids start with "w" and are left out of every count."""
        place = {f"w{i:03d}": i % self.host_count for i in range(size)}
        at = time.time() + 0.2
        self.start_at(place, at)
        members = list(place)
        wait_converged(expected_owners(members, self.partitions), self.reg, since=at)
        self.started(place)
        recent: list[float] = []
        for r in range(self.warmup_rounds):
            jit = jvm_jit_ms(self.pids())
            name = f"wj{r:03d}"
            place[name] = r % self.host_count
            self.join(place[name], name)
            members.append(name)
            wait_converged(expected_owners(members, self.partitions), self.reg, since=time.time())
            victim = sorted(members)[r % len(members)]
            members.remove(victim)
            self.crash(place[victim], victim)
            wait_converged(expected_owners(members, self.partitions), self.reg, since=time.time())
            after = jvm_jit_ms(self.pids())
            self.warm_pairs = r + 1
            if jit is None or after is None:
                continue  # no /proc: every pair asked for
            recent = [*recent[-2:], (after - jit) / 2]
            self.warm_jit_last = statistics.mean(recent)
            if len(recent) == 3 and self.warm_jit_last < 5:
                break
        self.crash_all({n: place[n] for n in members})
        deadline = time.monotonic() + 30
        while self.reg.children(f"/consumers/{GROUP}/ids") or self.reg.children(f"/consumers/{GROUP}/owners/{TOPIC}"):
            if time.monotonic() > deadline:
                raise TimeoutError("the warm-up members' nodes did not vanish")
            time.sleep(0.01)
        self.wait_quiet()

    def wait_quiet(self, timeout: float = 60.0) -> None:
        """Until the JVMs' logs have been still for longer than rebalance.backoff.ms (2 s). Members crashed in the
        middle of a rebalance go on with it in their JVM: every attempt fails at once on the closed ZooKeeper
        client, sleeps rebalance.backoff.ms and is retried, rebalance.max.retries times (up to 20 s); they must be
        over before anything is measured."""
        sizes, still_since, deadline = None, time.monotonic(), time.monotonic() + timeout
        while time.monotonic() - still_since < 3.0 and time.monotonic() < deadline:
            now = [jvm.log_file.stat().st_size if jvm.log_file.exists() else 0 for jvm in self.jvms]
            if now != sizes:
                sizes, still_since = now, time.monotonic()
            time.sleep(0.2)

    def start_at(self, placement: dict[str, int], at: float) -> None:
        """At wall-clock time ``at`` every member's start command goes to its JVM, which starts each on a thread of
        its own (``spawn``): all members start at once, as zkconsumer's hosts start theirs."""
        time.sleep(max(0.0, at - time.time()))
        for name, h in placement.items():
            self.jvms[h].start_member(name, wait=False, concurrently=True)

    def started(self, placement: dict[str, int] | None = None) -> None:
        for name, h in (placement or self.placement).items():
            try:
                self.jvms[h].wait_event("started", name, timeout=120)
            except KafkaProcessError:
                self.errors[name] += 1  # its first rebalance ran out of retries: the member stays registered

    def join(self, host: int, name: str) -> None:
        self.placement[name] = host
        self.jvms[host].start_member(name)

    def crash(self, host: int, name: str) -> None:
        self.crashed.add(name)
        self.jvms[host].crash_member(name)

    def crash_all(self, placement: dict[str, int]) -> None:
        """Every one of these members' sessions closes (their nodes vanish at once), all commands sent first."""
        marks = [len(jvm.events) for jvm in self.jvms]
        for name, h in placement.items():
            self.jvms[h].crash_member(name, wait=False)
        for name, h in placement.items():
            with contextlib.suppress(KafkaProcessError):
                self.jvms[h].wait_event("crashed", name, timeout=30, after=marks[h])

    def pids(self) -> list[int]:
        return [jvm.pid for jvm in self.jvms]

    def jit_ms(self) -> float | None:
        return jvm_jit_ms(self.pids())

    def thread_cpu(self) -> dict[str, float] | None:
        return None  # one JVM's threads are not told apart here

    def results(self) -> tuple[Counter, list]:
        """Counts of the measured members, from the JVMs' logs since the measured cold start; no phases."""
        counts: Counter = Counter({k: 0 for k in KAFKA_COUNTS.values()})
        for jvm, mark in zip(self.jvms, self.marks, strict=True):
            with open(jvm.log_file, errors="replace") as f:
                f.seek(mark)
                for line in f:
                    m = KAFKA_LOG.search(line)
                    if m and m.group(1) in self.placement:
                        counts[KAFKA_COUNTS[m.group(2)]] += 1
        counts["failed_rebalances"] += sum(n for name, n in self.errors.items() if name in self.placement)
        return counts, []

    def close(self) -> None:
        """Every member's session closes (their nodes vanish now, not a session timeout later, in the middle of
        the next scenario), then the JVMs are killed."""
        with contextlib.suppress(Exception):
            self.crash_all({n: h for n, h in self.placement.items() if n not in self.crashed})
        for jvm in self.jvms:
            jvm.kill()
            jvm.stop()


def run_scenario(zk_root: str, implementation: str, size: int, partitions: int, rounds: int, processes: int,
                 zk_pid: int | None = None, kafka_warmup: int = 150, kafka_logs: Path | None = None) -> dict:
    zk = f"{zk_root}/{implementation.replace('.', '')}-{size}-{uuid.uuid4().hex[:6]}"
    client = connect(zk)
    reg = Registry(client)
    prepare_tree(reg, partitions)
    names = [f"c{i:03d}" for i in range(size)]
    placement = {n: i % max(processes, 1) for i, n in enumerate(names)}
    group: ZkconsumerGroup | KafkaGroup
    if implementation == KAFKA:
        group = KafkaGroup(zk, processes, reg, partitions, kafka_warmup,
                           None if kafka_logs is None else kafka_logs / zk.rsplit("/", 1)[1])
    else:
        group = ZkconsumerGroup(zk, implementation, processes)
    hosts = group.host_count
    try:
        group.prepare(placement)
        at = time.time() + 1.0
        group.start_at(placement, at)
        time.sleep(max(0.0, at - time.time()))
        members = list(names)
        cold = wait_converged(expected_owners(members, partitions), reg, since=at)
        group.started()
        joins, crashes = [], []
        actions: list[float] = []  # monotonic (system-wide on Linux, so comparable across host processes)
        host_pids = group.pids()
        quiet_pids = host_pids + ([zk_pid] if zk_pid else [])
        settle(quiet_pids, time.monotonic())
        packets_before = zk_packets(zk_root, client.client_id[0])
        spent: dict[str, list[dict[str, float | None]]] = {"join": [], "crash": []}  # CPU per measured action
        settles: list[float] = []

        def measure(action: str, act, expected_after: dict, moves: bool) -> float:
            """Run one join or crash on a quiet group; the CPU it cost, up to when the group is quiet again."""
            before = {**cpu_sample(host_pids, zk_pid), "jit_consumers": group.jit_ms()}
            group.thread_cpu()
            t0 = time.time()
            actions.append(time.monotonic())
            act()
            took = wait_converged(expected_after, reg, since=t0)
            converged = cpu_sample(host_pids, zk_pid)
            settles.append(settle(quiet_pids, time.monotonic()))
            after = {**cpu_sample(host_pids, zk_pid), "jit_consumers": group.jit_ms()}
            split = group.thread_cpu()
            used = cpu_delta(before, after)
            used.update({f"{k}_to_converged": v for k, v in cpu_delta(before, converged).items() if k != "jit"})
            used.update({f"consumers_{k}": v for k, v in (split or {}).items()})
            if moves:
                spent[action].append(used)
            return took

        unmoved = Counter()  # joins and crashes after which no partition changed hands: not measured
        for r in range(rounds):
            name = f"j{r:03d}"
            placement[name] = r % hosts
            before = expected_owners(members, partitions)
            after = expected_owners([*members, name], partitions)
            moves = bool(moved(before, after))
            took = measure("join", lambda n=name: group.join(placement[n], n), after, moves)
            members.append(name)
            if moves:
                joins.append(took)
            else:
                unmoved["join"] += 1
            victim = sorted(members)[r % len(members)]
            members.remove(victim)
            before, after = after, expected_owners(members, partitions)
            moves = bool(moved(before, after))
            took = measure("crash", lambda v=victim: group.crash(placement[v], v), after, moves)
            if moves:
                crashes.append(took)
            else:
                unmoved["crash"] += 1
        packets_after = zk_packets(zk_root, client.client_id[0])
        per_action = {action: cpu_mean(samples) for action, samples in spent.items()}
        both = spent["join"] + spent["crash"]
        cpu = cpu_mean(both)
        cpu = {"consumers": cpu.get("consumers"), "zookeeper": cpu.get("zookeeper"), "jit": cpu.get("jit"),
               "consumers_jit": cpu.get("jit_consumers")}
        counts, logged = group.results()
        return {"phases": phase_summary(logged, actions), "profile": implementation, "size": size, "cold_s": cold,
                "partitions": partitions, "unmoved": dict(unmoved),
                "join_p50_ms": p50_ms(joins), "join_max_ms": max_ms(joins),
                "crash_p50_ms": p50_ms(crashes), "crash_max_ms": max_ms(crashes),
                "attempts": counts["attempts"], "claim_conflicts": counts["claim_conflicts"],
                "failed_attempts": counts["failed_attempts"], "failed_rebalances": counts["failed_rebalances"],
                "zk_requests": None if packets_before is None or packets_after is None
                else (packets_after - packets_before) / (2 * rounds),
                "cpu_ms": cpu, "cpu_join_ms": per_action["join"], "cpu_crash_ms": per_action["crash"],
                "settle_s": statistics.median(settles) if settles else None,
                "joins_ms": [j * 1000 for j in joins], "crashes_ms": [c * 1000 for c in crashes],
                "warm_jit_ms": getattr(group, "warm_jit_ms", None), "warm_pairs": getattr(group, "warm_pairs", 0),
                "warm_jit_last": getattr(group, "warm_jit_last", None)}
    finally:
        group.close()
        client.stop()
        client.close()


def zk_packets(zk_root: str, own_session: int) -> int | None:
    """Requests ZooKeeper has received so far from everyone but the benchmark's own session: ``mntr``'s
    zk_packets_received less what ``cons`` says that session sent (it lists every owner node every 10 ms while
    it waits for convergence, more than a group's own requests)."""
    host, _, port = zk_root.split(",")[0].split("/")[0].rpartition(":")
    total = packets_received(host, int(port))
    try:
        ours = 0
        for line in four_letter_word(host, int(port), "cons").splitlines():
            m = re.search(r"recved=(\d+).*sid=0x([0-9a-f]+)", line)
            if m and int(m.group(2), 16) == own_session:
                ours = int(m.group(1))
        return None if total is None else total - ours
    except (OSError, ValueError):
        return None


def moved(before: dict, after: dict) -> int:
    """How many partitions change hands between two assignments. A join or crash that moves none (more consumers
    than partitions) is no rebalance to measure: the benchmark says so instead of reporting it as 0 ms."""
    return sum(1 for tp in after.keys() | before.keys() if before.get(tp) != after.get(tp))


def p50_ms(seconds: list[float]) -> float | None:
    return statistics.median(seconds) * 1000 if seconds else None


def max_ms(seconds: list[float]) -> float | None:
    return max(seconds) * 1000 if seconds else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b where both were measured and b is not 0; None otherwise (printed as "–", never a ZeroDivisionError)."""
    return a / b if a is not None and b else None


def fmt(value: float | None, spec: str = ".0f") -> str:
    return "–" if value is None else format(value, spec)


def measure_floor(zk_root: str, repeats: int = 50) -> dict[str, float]:
    """ZooKeeper's own latencies on this machine, idle, from one client, p50 in ms: a synchronous get, a create
    (ephemeral), a multi-op of 4 creates, and the shortest chain a rebalance can be: a change made by a second
    session reaches our watch, then a listing, a multi-op delete of 4 owner nodes and a multi-op create of 4."""
    zk = f"{zk_root}/floor-{uuid.uuid4().hex[:6]}"
    a, b = connect(zk), connect(zk)
    out: dict[str, list[float]] = {"get": [], "create": [], "multi of 4 creates": [], "rebalance chain": []}
    try:
        a.ensure_path("/ids")
        a.ensure_path("/owners")
        for i in range(repeats):
            t0 = time.perf_counter()
            a.get("/ids")
            out["get"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            a.create(f"/owners/x{i}", b"x", ephemeral=True)
            out["create"].append(time.perf_counter() - t0)
            txn = a.transaction()
            for p in range(4):
                txn.create(f"/owners/{i}-{p}", b"x", ephemeral=True)
            t0 = time.perf_counter()
            txn.commit()
            out["multi of 4 creates"].append(time.perf_counter() - t0)
            fired = threading.Event()
            a.get_children("/ids", watch=lambda event, fired=fired: fired.set())
            t0 = time.perf_counter()
            b.create(f"/ids/m{i}", b"", ephemeral=True)
            fired.wait(5)
            a.get_children("/ids", include_data=True)
            txn = a.transaction()
            for p in range(4):
                txn.delete(f"/owners/{i}-{p}")
            txn.commit()
            txn = a.transaction()
            for p in range(4):
                txn.create(f"/owners/{i}-{p}", b"y", ephemeral=True)
            txn.commit()
            out["rebalance chain"].append(time.perf_counter() - t0)
    finally:
        for c in (a, b):
            c.stop()
            c.close()
    return {k: statistics.median(v) * 1000 for k, v in out.items()}


def phase_summary(logged: list[tuple[float, float | None, dict[str, int]]], actions: list[float]
                  ) -> dict[str, tuple[float, float]]:
    """Phase → (p50, max) in ms over every consumer rebalance that followed a join or crash (not the cold start).

    ``watch`` is watch delivery: from the benchmark's change (the join call, or ending the victim's session) to
    the consumer's watch callback. For a join it includes the joiner's own start (connect, register).
    """
    values: dict[str, list[float]] = {}
    first = actions[0] if actions else float("inf")
    for start, triggered, phases in logged:
        if start < first:
            continue
        if triggered is not None:
            action = max(a for a in actions if a <= start)
            values.setdefault("watch", []).append(max(0.0, (triggered - action) * 1000))
        for name, ms in phases.items():
            values.setdefault(name, []).append(ms)
    return {name: (statistics.median(v), max(v)) for name, v in values.items() if v}


def warm_up(console, zk: str, zk_pid: int | None, args: argparse.Namespace) -> None:
    """Unmeasured scenarios (every profile measured, the largest size up to 200) until ZooKeeper's JIT compiler
    threads use under 5 ms of CPU per rebalance, or ``--warmup`` scenarios have run. Kafka's own consumer warms
    ZooKeeper only when it is measured alone (its rows warm their own JVMs first, which serves ZooKeeper's compiler
    too).

    A fresh JVM compiles ZooKeeper's request paths during its first thousands of requests: measured from a cold
    start, its compiler threads took 100-230 ms of CPU per rebalance on these 2 cores, as much as the consumers
    and ZooKeeper's own request processing together. A production ZooKeeper compiled them long ago.
    """
    size = min(max(args.sizes), 200)  # enough requests to compile ZooKeeper's paths; kafka-0.8 at 500 takes minutes
    cycle = [i for i in args.implementations if i != KAFKA] or [KAFKA]
    for n in range(args.warmup):
        implementation = cycle[n % len(cycle)]
        with console.status(f"warming ZooKeeper up ({implementation}, {size} consumers, scenario {n + 1})..."):
            r = run_scenario(zk, implementation, size, partitions_for(args, size), 3, processes_for(args, size), zk_pid,
                             kafka_warmup=0)
        cpu = r["cpu_ms"]
        if cpu["zookeeper"] is None:
            console.print("warm-up: no /proc to read ZooKeeper's CPU from; one scenario only", highlight=False)
            return
        console.print(f"warm-up {n + 1} ({implementation}): ZooKeeper CPU {cpu['zookeeper']:.0f} ms per rebalance, "
                      f"{cpu['jit']:.0f} ms of it compiling", highlight=False)
        if cpu["jit"] < 5 and n + 1 >= len(cycle):
            return
    if args.warmup:
        console.print(f"warm-up: ZooKeeper still compiling after {args.warmup} scenarios; the figures include it "
                      "(see the JIT column)", highlight=False)


#: How far a measure of the kafka-0.8 profile may lie from Kafka's own (either way) and still count as the same
#: timing: 5 joins and 5 crashes per row on a shared 2-core machine move a p50 by a third between runs.
TOLERANCE = 1.5


def faithfulness(console, by: dict, sizes: list[int]) -> None:
    """The ratios against Kafka 0.8.2.2's own consumer, and the answer: is the kafka-0.8 profile's timing Kafka's?"""
    measures = (("join p50", "join_p50_ms"), ("join max", "join_max_ms"), ("crash p50", "crash_p50_ms"),
                ("crash max", "crash_max_ms"), ("cold start", "cold_s"))
    judged = ("join p50", "crash p50", "cold start")
    verdicts: dict[int, dict[str, float]] = {}  # size → judged measure → kafka-0.8 / Kafka's own
    totals: dict[str, Counter] = {KAFKA: Counter(), "kafka-0.8": Counter()}
    for size in sizes:
        kafka = by.get((KAFKA, size))
        if kafka is None:
            continue
        profile, default = by.get(("kafka-0.8", size)), by.get(("default", size))
        if profile:
            ratios = {label: ratio(profile[key], kafka[key]) for label, key in measures}
            verdicts[size] = {label: ratios[label] for label in judged if ratios[label] is not None}
            cpu, ours, theirs = "", profile["cpu_ms"]["consumers"], kafka["cpu_ms"]["consumers"]
            if ours and theirs:
                cpu = f"; consumers' CPU per rebalance {ours / theirs:.2f}x"
            console.print(f"{size} consumers: kafka-0.8 profile / Kafka 0.8.2.2's own (1.00x = the same time, below 1 "
                          "= the profile is faster) — " + ", ".join(f"{k} {fmt(v, '.2f')}x" for k, v in ratios.items())
                          + cpu,
                          highlight=False)
        if default:
            console.print(f"{size} consumers: default vs Kafka 0.8.2.2's own — " + ", ".join(
                f"{label} {ratio(kafka[key], default[key]):.1f}x faster" for label, key in measures
                if ratio(kafka[key], default[key]) is not None), highlight=False)
        for name, r in ((KAFKA, kafka), ("kafka-0.8", profile), ("default", default)):
            if r:
                if name in totals:
                    totals[name].update({k: r[k] for k in ("attempts", "failed_attempts", "claim_conflicts")})
                console.print(f"    {name:13s} {size:3d}: {r['attempts']} attempts, {r['failed_attempts']} failed "
                              f"(each followed by rebalance.backoff.ms = 2000 ms asleep), {r['claim_conflicts']} claim "
                              f"conflicts, {r['failed_rebalances']} failed rebalances; joins (ms) "
                              + " ".join(f"{v:.0f}" for v in r["joins_ms"]) + ", crashes (ms) "
                              + " ".join(f"{v:.0f}" for v in r["crashes_ms"]), highlight=False)
    if not verdicts:
        return
    console.print(f"Cold start: each of {KAFKA}'s members connects to ZooKeeper within it (the harness builds and "
                  "starts a member in one command); zkconsumer's consumers were connected before it.", highlight=False)

    def within(ratio: float) -> bool:
        return 1 / TOLERANCE <= ratio <= TOLERANCE

    oks = [within(r) for per_size in verdicts.values() for r in per_size.values()]
    answer = "YES" if all(oks) else "NO" if not any(oks) else "PARTLY"
    detail = "; ".join(
        f"{size} consumers: " + ", ".join(f"{label} {r:.2f}x {'(same)' if within(r) else '(differs)'}"
                                          for label, r in per_size.items()) for size, per_size in verdicts.items())
    k, p = totals[KAFKA], totals["kafka-0.8"]
    console.print(f"Is kafka-0.8 a faithful reproduction of Kafka 0.8.2.2's timing? {answer}: the same time means "
                  f"within {TOLERANCE}x either way — {detail}. The mechanism, summed over the sizes (Kafka's own / "
                  f"kafka-0.8): attempts {k['attempts']} / {p['attempts']}, failed attempts (a 2 s sleep each) "
                  f"{k['failed_attempts']} / {p['failed_attempts']}, claim conflicts {k['claim_conflicts']} / "
                  f"{p['claim_conflicts']}.", highlight=False)


def floor_ms(cpu: dict[str, float | None]) -> float | None:
    """The shortest a rebalance can take on this machine when CPU-bound: the CPU the consumers and ZooKeeper used
    until it converged (read when the benchmark saw it, 30-40 ms later), spread over the cores."""
    consumers, zookeeper = cpu.get("consumers_to_converged"), cpu.get("zookeeper_to_converged")
    if consumers is None or zookeeper is None:
        return None
    return (consumers + zookeeper) / CORES


def cpu_table(results: list[dict]) -> Table:
    """CPU per join and per crash, until convergence and in all, and where the consumers' share went."""
    table = Table(title="CPU per join and per crash (ms): until the group converged, and in all (until it is quiet "
                        f"again); CPU ÷ cores = CPU until converged / {CORES} cores")
    for col in ("implementation", "consumers", "action", "p50", "CPU ÷ cores", "consumers, to converged",
                "ZooKeeper, to converged", "consumers, in all", "rebalance threads", "connection threads", "other",
                "ZooKeeper, in all"):
        table.add_column(col, justify="right")
    for r in results:
        for action in ("join", "crash"):
            cpu = r[f"cpu_{action}_ms"]

            def cell(key: str, cpu=cpu) -> str:
                return "–" if cpu.get(key) is None else f"{cpu[key]:.0f}"
            table.add_row(r["profile"], str(r["size"]), action, fmt(r[f"{action}_p50_ms"]), fmt(floor_ms(cpu)),
                          cell("consumers_to_converged"), cell("zookeeper_to_converged"), cell("consumers"),
                          cell("consumers_rebalance"), cell("consumers_connection"), cell("consumers_other"),
                          cell("zookeeper"))
    return table


def plot_scaling(results: list[dict], path: Path, floor: dict[str, float] | None = None) -> Path:
    """ZooKeeper requests per rebalance and convergence time against the group's size, one line per
    implementation, log-log: a line of slope 1 grows linearly, of slope 2 quadratically (the references drawn).

    Beside the convergence, two floors measured in the same run: ZooKeeper's own (the shortest rebalance chain,
    idle, one client) and, per implementation, the CPU a rebalance cost (consumers and ZooKeeper) spread over
    this machine's cores: no convergence can be shorter, so where a line meets it the group is CPU-bound."""
    from zkconsumer.analysis import plots  # matplotlib with the Agg backend

    plt = plots.plt
    fig, (req, lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for implementation in dict.fromkeys(r["profile"] for r in results):
        rows = sorted((r for r in results if r["profile"] == implementation), key=lambda r: r["size"])
        sizes = [r["size"] for r in rows]
        if any(r["zk_requests"] is not None for r in rows):
            req.plot(sizes, [r["zk_requests"] for r in rows], marker="o", label=implementation)
        lat.plot(sizes, [r["crash_p50_ms"] for r in rows], marker="o", label=f"{implementation}, crash p50")
        lat.plot(sizes, [r["join_p50_ms"] for r in rows], marker="s", linestyle="--",
                 label=f"{implementation}, join p50")
        cpu = [(r["size"], floor_ms(r["cpu_crash_ms"])) for r in rows if floor_ms(r["cpu_crash_ms"]) is not None]
        if cpu:
            lat.plot(*zip(*cpu, strict=True), linestyle=":", color=lat.lines[-2].get_color(),
                     label=f"{implementation}: CPU until a crash converged ÷ {CORES} cores")
    sizes = sorted({r["size"] for r in results})
    base = [r for r in results if r["size"] == sizes[0] and r["zk_requests"]]
    if base and len(sizes) > 1:
        y0 = min(r["zk_requests"] for r in base)
        req.plot(sizes, [y0 * s / sizes[0] for s in sizes], color="grey", linestyle=":", label="linear (slope 1)")
        req.plot(sizes, [y0 * (s / sizes[0]) ** 2 for s in sizes], color="black", linestyle=":",
                 label="quadratic (slope 2)")
    if floor and "rebalance chain" in floor and len(sizes) > 1:
        lat.plot([sizes[0], sizes[-1]], [floor["rebalance chain"]] * 2, color="black", linestyle="-.",
                 label=f"ZooKeeper alone: the shortest rebalance chain ({floor['rebalance chain']:.1f} ms)")
    for ax, title in ((req, "ZooKeeper requests per join or crash"), (lat, "convergence after a join or crash (ms)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("consumers in the group")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
    return plots._save(fig, path)


def partitions_for(args: argparse.Namespace, size: int) -> int:
    return args.partitions_per_consumer * size if args.partitions_per_consumer else args.partitions


def processes_for(args: argparse.Namespace, size: int) -> int:
    """Host processes for a group of ``size``: fixed, or one per ``--consumers-per-process`` consumers."""
    if args.consumers_per_process:
        return max(1, -(-size // args.consumers_per_process))
    return args.processes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--partitions", type=int, default=200, help="partitions of the topic (default 200)")
    ap.add_argument("--partitions-per-consumer", type=int, metavar="K",
                    help="instead: K partitions per consumer of each size (2: a join at 200 consumers moves some)")
    ap.add_argument("--rounds", type=int, default=5, help="joins and crashes per scenario")
    ap.add_argument("--implementations", "--profiles", dest="implementations", nargs="+", choices=IMPLEMENTATIONS,
                    default=list(IMPLEMENTATIONS),
                    help=f"what to measure: zkconsumer's profiles and {KAFKA}, Apache Kafka's own consumer")
    ap.add_argument("--no-floor", dest="floor", action="store_false", help="skip measuring ZooKeeper's own latencies")
    ap.add_argument("--warmup", type=int, default=8, metavar="N",
                    help="at most N unmeasured scenarios first, until ZooKeeper's JIT compiler is quiet (0: none)")
    ap.add_argument("--kafka-warmup", type=int, default=150, metavar="N",
                    help=f"{KAFKA}: its JVMs first run an unmeasured cold start, then joins and crashes until their "
                         "JIT is quiet, at most N of them (0: no warm-up)")
    ap.add_argument("--kafka-logs", type=Path, metavar="DIR",
                    help=f"keep the logs of {KAFKA}'s JVMs under DIR (default: deleted)")
    ap.add_argument("--plot", type=Path, metavar="PNG",
                    help="draw ZooKeeper requests and convergence time against the group size (log-log)")
    ap.add_argument("--processes", type=int, default=4,
                    help="consumer host processes (1: all consumers in this process, sharing one GIL); "
                         f"{KAFKA}: as many JVMs")
    ap.add_argument("--consumers-per-process", type=int, metavar="K",
                    help="instead of --processes: one host process per K consumers of each size (25: 8 processes "
                         "at 200 consumers, 20 at 500)")
    ap.add_argument("--max-size", action="append", default=[], metavar="IMPLEMENTATION=N",
                    help="run IMPLEMENTATION only up to N consumers (kafka-0.8=200: its quadratic reads make 500 "
                         "take tens of minutes); repeatable")
    args = ap.parse_args()
    try:
        largest = {impl: int(n) for impl, n in (item.split("=", 1) for item in args.max_size)}
    except ValueError:
        ap.error("--max-size takes IMPLEMENTATION=N, e.g. kafka-0.8=200")
    if args.consumers_per_process is not None and args.consumers_per_process < 1:
        ap.error("--consumers-per-process must be at least 1")
    if unknown := sorted(set(largest) - set(IMPLEMENTATIONS)):
        ap.error(f"--max-size: unknown implementation {unknown[0]} (one of {', '.join(IMPLEMENTATIONS)})")
    console = make_console()
    results = []
    floor = None
    with ZooKeeperServer(quick_start=False) as server:
        if args.floor:
            measure_floor(server.connect_string, 20)  # warm the JIT first
            floor = measure_floor(server.connect_string)
        zk_pid = server.nodes[0].pid
        warm_up(console, server.connect_string, zk_pid, args)
        for size in args.sizes:
            for implementation in args.implementations:
                if size > largest.get(implementation, size):
                    console.print(f"{implementation:13s} {size:3d}: not run (--max-size {implementation}="
                                  f"{largest[implementation]})", highlight=False)
                    continue
                with console.status(f"{implementation}, {size} consumers..."):
                    results.append(run_scenario(server.connect_string, implementation, size, partitions_for(args, size),
                                                args.rounds, processes_for(args, size), zk_pid, args.kafka_warmup,
                                                args.kafka_logs))
                r = results[-1]
                jit = ""
                if r["cpu_ms"]["consumers_jit"] is not None:
                    jit = f", JVMs' JIT {r['cpu_ms']['consumers_jit']:.0f} ms per rebalance"
                    if r["warm_jit_ms"] is not None:
                        jit += (f" (warm-up: cold start + {r['warm_pairs']} joins and crashes, {r['warm_jit_ms']:.0f} "
                                f"ms of JIT; its last 3 pairs {r['warm_jit_last'] or 0:.0f} ms per rebalance)")
                unmoved = "".join(f", {n} {what}s moved no partition (not measured)"
                                  for what, n in r["unmoved"].items())
                console.print(f"{implementation:13s} {size:3d}: cold {r['cold_s']:.2f}s, join p50 "
                              f"{fmt(r['join_p50_ms'])} ms, crash p50 {fmt(r['crash_p50_ms'])} ms{unmoved}, attempts "
                              f"{r['attempts']}, conflicts {r['claim_conflicts']}, failed attempts "
                              f"{r['failed_attempts']}, failed rebalances {r['failed_rebalances']}{jit}",
                              highlight=False)
    table = Table(title=f"rebalance, range, {args.rounds} joins + {args.rounds} crashes (a join or crash that moves no "
                        "partition is not measured)")
    for col in ("implementation", "consumers", "partitions", "cold start (s)", "join p50 (ms)", "join max (ms)",
                "crash p50 (ms)", "crash max (ms)", "attempts", "claim conflicts", "failed attempts",
                "failed rebalances", "ZooKeeper requests / rebalance", "consumers' CPU / rebalance (ms)",
                "ZooKeeper CPU / rebalance (ms)", "of it JIT (ms)"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(r["profile"], str(r["size"]), str(r["partitions"]), f"{r['cold_s']:.2f}",
                      fmt(r["join_p50_ms"]), fmt(r["join_max_ms"]), fmt(r["crash_p50_ms"]), fmt(r["crash_max_ms"]),
                      *(str(r[k]) for k in ("attempts", "claim_conflicts", "failed_attempts", "failed_rebalances")),
                      fmt(r["zk_requests"]),
                      *("–" if r["cpu_ms"][k] is None else f"{r['cpu_ms'][k]:.0f}"
                        for k in ("consumers", "zookeeper", "jit")))
    console.print(table)
    console.print(cpu_table(results))
    if any(r["profile"] == KAFKA for r in results):
        console.print(f"{KAFKA}: Apache Kafka's own ZookeeperConsumerConnector, one JVM per host process, counts from "
                      "its log; its JVMs ran an unmeasured cold start and joins and crashes first until their JIT was "
                      f"quiet (at most {args.kafka_warmup}). Consumers' CPU includes the JVMs' JIT and GC threads.",
                      highlight=False)
    phases = Table(title="where the time goes: ms per consumer rebalance after a join or crash, p50 / max "
                         "(consumer/zookeeper/phases.py; watch = from the change to the consumer's watch callback)")
    names = ["watch", *PHASES]
    for col in ("profile", "consumers", *names):
        phases.add_column(col, justify="right")
    for r in results:
        if r["profile"] == KAFKA:
            continue  # Kafka's connector has no phase clock
        cells = [f"{r['phases'][n][0]:.0f} / {r['phases'][n][1]:.0f}" if n in r["phases"] else "–" for n in names]
        phases.add_row(r["profile"], str(r["size"]), *cells)
    if phases.row_count:
        console.print(phases)
    if floor:
        console.print("ZooKeeper alone (idle, one client, p50): "
                      + ", ".join(f"{k} {v:.1f} ms" for k, v in floor.items()), highlight=False)
    by = {(r["profile"], r["size"]): r for r in results}
    for size in args.sizes:
        if ("kafka-0.8", size) in by and ("default", size) in by:
            a, b = by[("kafka-0.8", size)], by[("default", size)]
            console.print(f"{size} consumers: default vs kafka-0.8 — join p50 "
                          f"{fmt(ratio(a['join_p50_ms'], b['join_p50_ms']), '.1f')}x faster, crash p50 "
                          f"{fmt(ratio(a['crash_p50_ms'], b['crash_p50_ms']), '.1f')}x faster, cold start "
                          f"{fmt(ratio(a['cold_s'], b['cold_s']), '.1f')}x faster (– : not measured on both sides)",
                          highlight=False)
    faithfulness(console, by, args.sizes)
    if args.plot:
        console.print(f"figure: {plot_scaling(results, args.plot, floor)}", highlight=False)


if __name__ == "__main__":
    main()
