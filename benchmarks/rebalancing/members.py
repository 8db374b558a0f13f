"""The groups under measure: zkconsumer's consumers in host processes (one profile each), and Kafka 0.8.2.2's
own consumers in JVMs, both driven through the same calls."""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

from hosts import RemoteHost

from rebalancing.convergence import wait_converged
from rebalancing.cpu import jvm_jit_ms
from rebalancing.tree import GROUP, SETTINGS, TOPIC, expected_owners
from zkconsumer.apache_kafka.processes import HighLevelConsumers, KafkaProcessError
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
from zkconsumer.zk.registry import Registry


def new_consumer(zk: str, name: str, profile: str) -> ZookeeperConsumerConnector:
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties({
        **SETTINGS, "group.id": GROUP, "consumer.id": name, "zookeeper.connect": zk,
        "zkconsumer.fetch.enable": False, "zkconsumer.profile": profile}))


def kafka_properties() -> dict[str, str]:
    """SETTINGS as Kafka's ConsumerConfig reads them. The harness sets group.id, consumer.id, zookeeper.connect and
    partition.assignment.strategy=range; ``fetch_records=False`` runs the connector without fetchers (Kafka's own
    ``enableFetcher=false``), as zkconsumer.fetch.enable=false does for ours."""
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in SETTINGS.items()}


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
