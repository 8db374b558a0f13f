"""The lab with the handles the fault matrix needs, as a subclass: :class:`~zkconsumer.lab.runner.Lab` stays as it is.

What it adds: a 3-node ensemble (``zk_servers=3``), the broker in its own process (``zkconsumer broker start``,
so that ``kill -9`` is real and a restart keeps its port and log), consumers that reach ZooKeeper through a
:class:`~zkconsumer.lab.faults.proxy.TcpProxy`, a producer that survives a dead broker, the lab's own trace file
(``lab.jsonl``: ``fault_injected`` / ``fault_healed``) and condition waits on the group's state in ZooKeeper.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from rich.console import Console

from zkconsumer import broker_version
from zkconsumer.broker import Broker
from zkconsumer.broker.state import STATE_FILE, read_state
from zkconsumer.errors import ZkConsumerError
from zkconsumer.lab.backends import ProcessBackend
from zkconsumer.lab.faults.proxy import TcpProxy
from zkconsumer.lab.runner import Lab
from zkconsumer.migration.driver import MigrationDriver
from zkconsumer.migration.plan import MigrationPhase
from zkconsumer.records import encode_value
from zkconsumer.scenario.model import LabMode
from zkconsumer.scenario.plan import GROUP, RunPlan
from zkconsumer.tools.groups import verify
from zkconsumer.trace import TraceWriter
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import ZooKeeperServer
from zkconsumer.zk.topics import create_topic


class FaultTimeout(ZkConsumerError, RuntimeError):
    """A condition the fault waits for did not come: the verdict reports it as a failure."""


def quiet_logger(name: str) -> logging.Logger:
    """A logger for a kazoo client of the lab's own, kept off the console: the faults make kazoo warn on purpose
    (reconnects, lost sessions)."""
    quiet = logging.getLogger(name)
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return quiet


class FaultLab(Lab):
    """One group under one fault. ``with FaultLab(plan, out, zk_servers=3) as lab: ...``"""

    def __init__(self, plan: RunPlan, out_dir: Path, zk_servers: int = 1, broker_process: bool = False,
                 console: Console | None = None, backend: ProcessBackend | None = None) -> None:
        super().__init__(plan, Path(out_dir), console=console, backend=backend)  # processes: kill -9 is real
        self._broker = None  # the in-process broker, when the broker does not run as its own process
        self.zk_servers = zk_servers
        self.broker_process = broker_process
        self.zk: ZooKeeperServer | None = None
        self.registry: Registry | None = None
        self._registry_cm = None
        self.broker_proc: subprocess.Popen | None = None
        self.broker_port = 0
        self.proxies: dict[str, TcpProxy] = {}
        self.zk_override: dict[str, str] = {}
        #: the broker's further listeners (name: port to bind, address advertised), one per member whose broker
        #: link goes through a proxy (ScenarioLab); given to the broker however it runs
        self.broker_listeners: dict[str, tuple[int, str]] = {}
        self.lab_trace: TraceWriter | None = None
        self._producer_thread: threading.Thread | None = None
        self.producer_errors = 0

    @property
    def procs(self) -> dict[str, subprocess.Popen]:
        """The consumer processes (the process backend's)."""
        return self.backend.procs

    # ------------------------------------------------------------------------------------ infrastructure
    def __enter__(self) -> FaultLab:
        self.out.mkdir(parents=True, exist_ok=True)
        self.traces.mkdir(parents=True, exist_ok=True)
        self.lab_trace = TraceWriter(self.traces, GROUP, "lab")
        self.zk = ZooKeeperServer(servers=self.zk_servers, data_dir=self.out / "zookeeper").start()
        self.zk_connect = self.zk.connect_string + "/lab"
        # The lab's own view of the tree: a long session (it outlives every outage), and kazoo's reconnect
        # warnings kept off the console (the faults cause them on purpose).
        quiet = quiet_logger("zkconsumer.lab.faults.lab.kazoo")
        self._registry_cm = Registry.open(self.zk_connect, session_timeout_ms=30000, logger=quiet)
        self.registry = self._registry_cm.__enter__()
        self.start_lab_broker()
        existing = set(self.registry.topics())  # a run directory used again keeps its ZooKeeper data
        for topic, n in self.plan.topics.items():
            if topic not in existing:
                create_topic(self.registry, topic, n)
        for topic, n in self.plan.topics.items():
            for p in range(n):
                self.produced[(topic, p)] = 0
        return self

    def start_lab_broker(self) -> None:
        """The broker in its own process when a fault kills it (``broker_process``), else in this one."""
        if self.broker_process:
            self.start_broker()
            return
        group = self.plan.group_settings()
        self._broker = Broker(self.zk_connect, data_dir=self.out / "broker",
                              group_initial_rebalance_delay_ms=group.initial_rebalance_delay_ms,
                              group_min_session_timeout_ms=group.min_session_timeout_ms,
                              listeners=self.broker_listeners).start()
        self.bootstrap = self._broker.bootstrap

    def __exit__(self, *exc: object) -> None:
        self._stop_producing.set()
        for name in list(self.procs):
            self.members.stop(name)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._producer_thread is not None:
            self._producer_thread.join(10)
        for proxy in self.proxies.values():
            proxy.stop()
        if self.broker_proc is not None:
            self.kill_broker(hard=False)
        if self._broker is not None:
            self._broker.stop()
        if self._registry_cm is not None:
            with contextlib.suppress(Exception):
                self._registry_cm.__exit__(None, None, None)
        if self.zk is not None:
            self.zk.stop()
        if self.lab_trace is not None:
            self.lab_trace.close()

    def start_broker(self, timeout: float = 60.0) -> None:
        """``zkconsumer broker start`` in the foreground of a child process (same port and log on a restart)."""
        data = self.out / "broker"
        data.mkdir(parents=True, exist_ok=True)
        state = data / STATE_FILE
        with contextlib.suppress(FileNotFoundError):
            state.unlink()
        cmd = [sys.executable, "-m", "zkconsumer", "broker", "start", "--zookeeper", self.zk_connect,
               "--data-dir", str(data), "--port", str(self.broker_port)]
        group = self.plan.group_settings()  # the fault matrix's 4 s sessions are under Kafka's 6 s minimum
        cmd += ["--property", f"group.initial.rebalance.delay.ms={group.initial_rebalance_delay_ms}",
                "--property", f"group.min.session.timeout.ms={group.min_session_timeout_ms}"]
        for name, (port, advertised) in self.broker_listeners.items():
            cmd += ["--listener", f"{name}={port},{advertised}"]
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / "broker.log", "ab") as log:
            self.broker_proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        info = self.wait(lambda: read_state(data), timeout, "the broker's state file")
        self.broker_port = int(info["port"])
        self.bootstrap = info["bootstrap"]

    def kill_broker(self, hard: bool = True) -> None:
        assert self.broker_proc is not None
        if hard:
            self.broker_proc.kill()
        else:
            self.broker_proc.terminate()
        try:
            self.broker_proc.wait(30)
        except subprocess.TimeoutExpired:
            self.broker_proc.kill()
            self.broker_proc.wait()

    def behind_proxy(self, name: str) -> TcpProxy:
        """Route consumer ``name``'s ZooKeeper connection through a proxy to the ensemble's first node."""
        assert self.zk is not None
        proxy = TcpProxy(("127.0.0.1", self.zk.nodes[0].client_port)).start()
        self.proxies[name] = proxy
        self.zk_override[name] = proxy.address + "/lab"
        return proxy

    def _consumer_args(self, name: str) -> list[str]:
        args = super()._consumer_args(name)
        if name in self.zk_override:
            args[args.index("--zookeeper") + 1] = self.zk_override[name]
        return args

    # ------------------------------------------------------------------------------------------ producing
    def start_producing(self) -> None:
        self._producer_thread = threading.Thread(target=self._produce, daemon=True, name="fault-producer")
        self._producer_thread.start()

    def _produce(self) -> None:
        """Numbered records at ``plan.rate``; sends that fail (broker down) are counted, not retried: what the
        consumers must deliver is what the broker's log holds (read at the end), not what was attempted."""

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5, max_block_ms=2000,
                                 retries=0, request_timeout_ms=3000, reconnect_backoff_max_ms=500,
                                 **broker_version.client_settings(self.bootstrap))
        parts = sorted(self.produced)
        interval = 1.0 / self.plan.rate
        i = 0
        try:
            for _ in range(self.plan.initial_records):
                for tp in parts:
                    self._send(producer, encode_value, tp)
            while not self._stop_producing.wait(interval):
                self._send(producer, encode_value, parts[i % len(parts)])
                i += 1
            with contextlib.suppress(Exception):
                producer.flush(10)
        finally:
            with contextlib.suppress(Exception):
                producer.close(5)

    def _send(self, producer, encode_value, tp: tuple[str, int]) -> None:
        seq = self.produced[tp]
        try:
            producer.send(tp[0], value=encode_value(tp[0], tp[1], seq), partition=tp[1])
            self.produced[tp] = seq + 1
        except Exception:  # noqa: BLE001 - the broker is down: this record never existed
            self.producer_errors += 1

    def log_end_offsets(self) -> dict[tuple[str, int], int]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, request_timeout_ms=10000,
                                 **broker_version.client_settings(self.bootstrap))
        try:
            tps = [TopicPartition(t, p) for (t, p) in self.produced]
            return {(tp.topic, tp.partition): off for tp, off in consumer.end_offsets(tps).items()}
        finally:
            consumer.close()

    # -------------------------------------------------------------------------------------- fault events
    # -------------------------------------------------------------------------------------------- waits
    def wait(self, condition: Callable[[], object], timeout: float, what: str) -> object:
        """Poll ``condition`` (exceptions count as "not yet": ZooKeeper may be down) until it holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                value = condition()
            except Exception:  # noqa: BLE001 - e.g. no quorum right now
                value = None
            if value:
                return value
            time.sleep(0.1)
        raise FaultTimeout(f"timed out after {timeout:.0f}s waiting for {what}")

    def partitions(self) -> set[tuple[str, int]]:
        return set(self.produced)

    def live_members(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.poll() is None and self.members.status.get(n) == "running"]

    # ---------------------------------------------------------------------------------------- migrations
    def migration(self) -> MigrationDriver:
        """A read-only view of the group's migration (plan, acknowledgements, the coordinator's view); nothing is
        written through it."""
        assert self.registry is not None
        return MigrationDriver(self.registry, GROUP, self.bootstrap, step_timeout_s=30.0)

    def acked(self, name: str) -> tuple[str | None, bool] | None:
        """``name``'s acknowledged (mode, bridged), None when it has no acknowledgement."""
        return next(((m.mode, m.bridged) for m in self.migration().members() if m.consumer_id == f"{GROUP}_{name}"
                     and m.mode is not None), None)

    def run_migrate(self, *extra: str, step_timeout_s: float = 30.0) -> subprocess.Popen:
        """``zkconsumer migrate`` as its own process (so that ``kill -9`` is real), its output in logs/."""
        self.logs.mkdir(parents=True, exist_ok=True)
        n = len(list(self.logs.glob("migrate-*.log"))) + 1
        cmd = [sys.executable, "-m", "zkconsumer", "migrate", "--zookeeper", self.zk_connect, "--group", GROUP,
               "--bootstrap-server", self.bootstrap, "--step-timeout", str(step_timeout_s), *extra]
        log = open(self.logs / f"migrate-{n}.log", "wb")  # noqa: SIM115 - the child writes it; closed with the file
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        proc.log = self.logs / f"migrate-{n}.log"  # type: ignore[attr-defined]
        self._event(f"migrate{' ' + ' '.join(extra) if extra else ''} started (pid {proc.pid})")
        return proc

    def finish_migrate(self, proc: subprocess.Popen, timeout: float, expect: str) -> str:
        """Wait for a ``migrate`` process; its output when it exited 0, else :class:`FaultTimeout` with its tail."""
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        text = proc.log.read_text(errors="replace")  # type: ignore[attr-defined]
        if code != 0:
            tail = " | ".join(line.strip() for line in text.strip().splitlines()[-4:])
            raise FaultTimeout(f"migrate exited {'(timed out)' if code is None else code}: {tail}")
        if expect not in text:
            raise FaultTimeout(f"migrate exited 0 without saying {expect!r}")
        self._event(f"migrate: {expect}")
        return text

    def join_plain(self, name: str) -> int | None:
        """Start ``name`` without ``--migratable`` (as a member started by someone who did not know of the
        migration) and return its exit code if it ended within 30 s."""
        args = self._consumer_args(name)
        args.remove("--migratable")
        self.logs.mkdir(parents=True, exist_ok=True)
        with open(self.logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            self.backend.procs[name] = proc
            self.members.status[name] = "running"
            return None

    def coordinator_settled(self, members: list[str]) -> bool:
        """After ``done``: DescribeGroups shows every given member and every partition assigned exactly once."""
        check = self.migration().check([f"{GROUP}_{m}" for m in members],
                                       {t: list(range(n)) for t, n in self.plan.topics.items()})
        return check.ok

    def settled(self, members: list[str] | None = None) -> bool:
        """Every partition owned by a live member's thread, the group verifies, every given member registered;
        in a group whose migration is done, the coordinator's view instead (no owner nodes any more)."""
        assert self.registry is not None
        members = self.live_members() if members is None else members
        if self.plan.mode is LabMode.MIGRATE and self.migration().plan().phase is MigrationPhase.DONE:
            return self.coordinator_settled(members)
        owners = self.registry.owners(GROUP)
        ids = set(self.registry.consumer_ids(GROUP))
        if not {f"{GROUP}_{m}" for m in members} <= ids or set(owners) != self.partitions():
            return False
        return verify(self.registry, GROUP).ok

    def wait_settled(self, timeout: float, members: list[str] | None = None) -> None:
        self.wait(lambda: self.settled(members), timeout, "the group to settle (every partition owned, verified)")

    def wait_caught_up(self, timeout: float) -> dict[tuple[str, int], int]:
        """Stop producing, then wait until every partition's commit reached the log's end."""
        self._stop_producing.set()
        if self._producer_thread is not None:
            self._producer_thread.join(30)
        ends = self.wait(self.log_end_offsets, 30, "the log end offsets")
        assert self.registry is not None

        def caught_up() -> bool:
            # a migrating group commits to ZooKeeper, to the broker or both: the larger of the two counts
            offsets = (self.committed(self.registry) if self.plan.mode is LabMode.MIGRATE
                       else self.registry.offsets(GROUP))
            return all(offsets.get(tp, 0) >= end for tp, end in ends.items())

        self.wait(caught_up, timeout, "every commit at the log's end")
        return ends  # type: ignore[return-value]
