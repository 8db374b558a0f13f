"""A lab run in simulation: the project's own consumer members, a simulated ZooKeeper and broker, the lab's steps.

One :class:`SimWorld` is one seed of one :class:`~zkconsumer.scenario.plan.RunPlan`: the same plan the real lab runs
(a scenario file, a workload, a nemesis schedule), carried out the way the real lab carries it out, on virtual time:

- **ZooKeeper**: the ZooKeeper 3.4 model behind its wire protocol (``KazooWorld``), with the lab's server settings
  (tickTime 500 ms, sessions of 1–60 s: zk/server.py's);
- **the broker**: :class:`~zkconsumer.sim.broker.SimBroker`, registered under ``/brokers/ids/0`` (by a process of its
  own, with its own session) and its topics under ``/brokers/topics`` by the project's own
  :class:`~zkconsumer.zk.registry.Registry`, as a broker and the lab's admin write them;
- **members**: each one a process of tasks running :class:`ZookeeperConsumerConnector` itself (its kazoo client on
  the simulated network through its handler, its fetcher on the simulated broker, ``consumer/member_io.py``), with
  the settings ``zkconsumer consume`` gets from the lab, and an application that processes each record it is handed
  (``stream.ack()``), as ``zkconsumer consume --output none`` does;
- **the producer**: the lab's: ``initial_records`` per topic round-robin over the partitions before the members
  start, then ``rate`` records a second;
- **the steps**: join, stop (a graceful shutdown), kill -9 (the process's tasks never run again, its connections
  are closed), restart, bounce, pause (the process's tasks are not scheduled, a SIGSTOP), cut-zk and slow-zk
  (the member's ZooKeeper link held or delayed), expire (its session closed on the server), cut-broker and
  slow-broker, create-topic, add-partitions, and the ensemble's faults (kill-zk, restart-zk, quorum-loss:
  ``sim/zk_ensemble.py``: a plan whose scenario needs an ensemble gets three servers' addresses in every connect
  string), and the broker's process (kill-broker, restart-broker: it registers under ``/brokers/ids/0`` through a
  session of its own, which outlives a kill -9 as the real broker's does); with the lab's
  ``lab_step``/``fault_injected``/``fault_healed`` lines;
- **coordinator mode** (issue 54; ``zkconsumer sim --variant coordinator|cooperative-sticky|static``): the members
  are :class:`~zkconsumer.consumer.coordinated.connector.CoordinatorConsumerConnector` (kafka-python's group client),
  the broker is the project's own :class:`~zkconsumer.broker.broker.Broker` and the producer the lab's
  (``KafkaSide``, sim/kafka_side.py), kafka-python and the broker's server routed to this world for the run
  (sim/kafka_io.py). A member's link is its broker link (``cut-broker`` and ``slow-broker`` hold or slow the whole
  host); the actions a variant has no counterpart for (``expire``, ``cut-zk``: ``RunPlan.absent``) are skipped, as
  the lab skips them; the run is caught up when the members' traced commits reach what was produced;
- **migrate mode** (issue 54 item 2; ``zkconsumer sim --mode migrate``): the members are
  :class:`~zkconsumer.migration.member.MigratableConsumer` (``zkconsumer consume --migratable``: both connectors, the
  bridge), the broker and producer as in coordinator mode, and ``migrate``/``rollback`` run
  :class:`~zkconsumer.migration.driver.MigrationDriver` as the lab runs it, in a process of its own (``driver``): it
  waits for every running member's acknowledgement (at most 60 s), then moves the group member by member. The run
  ends as the lab's does, the driver given 90 s to finish, then the driver's own ownership verdict read for up to
  three session timeouts (:class:`MigrationOutcome`);
- **the end**: the lab's: at ``duration`` the producer stops, the group is given until every partition's committed
  offset reaches its log end (at most ``max(20, 3 × session timeout)`` seconds), then every member is stopped.

Every trace line goes to the world's observers as it is written (``trace.observed``): the checkers judge the run
after every step, and the trace is kept in memory (hashed: one seed, one trace) or written to ``trace_dir``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from zkconsumer import broker_version, trace
from zkconsumer.analysis.deadlines import judged_deadlines
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.consumer.member_io import MemberIO
from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
from zkconsumer.errors import ZkConsumerError
from zkconsumer.migration.member import MigratableConsumer
from zkconsumer.scenario.model import ActionKind, LabMode, Step
from zkconsumer.scenario.plan import GROUP, RunPlan
from zkconsumer.sim import tasks
from zkconsumer.sim.broker import SimBroker
from zkconsumer.sim.kafka_io import KafkaIO, kafka_routed
from zkconsumer.sim.kafka_side import KafkaSide
from zkconsumer.sim.kazoo_handler import SimHandler
from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.migration_side import MigrationOutcome, MigrationSide
from zkconsumer.sim.tasks import Process
from zkconsumer.sim.zk_ensemble import SimEnsemble
from zkconsumer.sim.zk_service import INSTANT, ServiceTimes
from zkconsumer.sim.zookeeper import ServerConfig
from zkconsumer.trace import TraceWriter
from zkconsumer.zk import layout
from zkconsumer.zk.layout import BrokerInfo, TopicAssignment
from zkconsumer.zk.registry import BrokerAlreadyRegistered, Registry

#: the lab's ZooKeeper (zk/server.py): tickTime 500 ms, sessions between 1 s and 60 s, 3.9.5 (so it serves
#: ``multiRead``, the one request of 3.6+ the members use)
LAB_ZOOKEEPER = ServerConfig(tick_ms=500, min_session_timeout_ms=1000, max_session_timeout_ms=60000, version="3.9.5")
#: one way between a member and ZooKeeper before any fault (µs). The simulated client spends no time of its own, so
#: a hop carries half of what a kazoo round trip over the loopback takes in the lab, kazoo's threads included:
#: 456 µs (getData) to 1,174 µs (multi), benchmarks/zk_service_time.py. A millisecond a hop plus 0-2 ms of jitter
#: (the first calibration) made every race a round trip decides several times wider than on the lab.
BASE_DELAY_US = 200
#: each packet takes 0..this much longer (drawn from the seed): which of two members' requests reaches ZooKeeper
#: first is the seed's to decide, as the loopback's scheduling decides it in a real run
JITTER_US = 300
#: one way between a member and the broker (ms): a fetch's round trip
BROKER_DELAY_MS = 1
#: the broker's own ZooKeeper session (broker/broker.py's default): its registration outlives a kill -9 this long
BROKER_SESSION_TIMEOUT_MS = 6000
#: the broker's registration (the lab's one broker, as zk/registry.py writes it)
BROKER_INFO = BrokerInfo(0, "127.0.0.1", 9092, endpoints=("PLAINTEXT://127.0.0.1:9092",))
#: what members are given as ``bootstrap.servers``, as the lab gives them its broker's (``--bootstrap-server``)
BOOTSTRAP = f"{BROKER_INFO.host}:{BROKER_INFO.port}"
#: a process takes up to this long from its start to its first request (an interpreter starting up, its imports)
START_SKEW_MS = 1000
#: a lab member's first request comes this long after the lab started it (its interpreter and imports, the
#: connection, the registration), drawn uniformly: measured on the lab's process backend, 2 members each of 29 runs
#: of a 2-member scenario on an otherwise idle machine (2026-12-06, this 2-core machine, sources not
#: byte-compiled): registered 0.58–1.15 s after the schedule's zero (up to 1.5 s with a simulation running beside).
#: The phase it gives the members' 1 s offset commits decides whether a 2 s pause outlasts the read timeout
#: (docs/simulation.md, "Shrunk breaches on the real lab"); 0–1 s, as before, made every phase as likely.
MEMBER_START_MS = (550, 1150)
#: the producer's clock: records due by then are written each tick
PRODUCER_TICK_MS = 20

#: Why each action kind the simulated world has no handler for is refused (the others: :data:`STEP_HANDLERS`).
NOT_SIMULATED: dict[ActionKind, str] = {
    ActionKind.KILL_COORDINATOR: "a cluster of Apache Kafka's brokers does not run in simulation",
}


class SimRefused(ZkConsumerError, ValueError):
    """A plan the simulator cannot carry out as written (it says which action or setting, and why)."""


def unsupported(plan: RunPlan) -> list[str]:
    """Why ``plan`` cannot run in simulation, one line per reason (empty: it can)."""
    reasons = []
    if plan.mode is LabMode.MIGRATE:
        reasons += [f"{s.action} at {s.at:g} s: a migrating member's broker link is not simulated apart from its "
                    "ZooKeeper link yet" for s in plan.schedule() if s.action.on_broker_link]
    elif any(s.action.on_migration for s in plan.schedule()):
        reasons.append("migrate, rollback and kill-driver steps need mode migrate (zkconsumer sim --mode migrate; "
                       f"this plan's mode: {plan.mode})")
    if plan.client not in ("kafka-python", "zkconsumer"):
        reasons.append(f"client {plan.client}: only zkconsumer's own connector runs in simulation")
    if plan.kinds:
        reasons.append("[kinds]: a mixed group needs Kafka 0.8.2.2's own consumer, which does not run in simulation")
    absent = {kind for kind, _ in plan.absent}
    for step in plan.schedule():
        if step.action not in STEP_HANDLERS and step.action not in absent:
            reasons.append(f"{step.action} at {step.at:g} s: no simulated counterpart yet "
                           f"({NOT_SIMULATED.get(step.action, 'no handler')})")
    props = dict(plan.properties)
    if plan.mode is LabMode.ZOOKEEPER and props.get("offsets.storage", "zookeeper") != "zookeeper":
        reasons.append("offsets.storage=kafka: the simulated broker keeps no offsets")
    return list(dict.fromkeys(reasons))


class MemberState(StrEnum):
    RUNNING = "running"
    STOPPING = "stopping"
    EXITED = "exited"  # stopped gracefully, or its start failed (``error``)
    KILLED = "killed"


@dataclass
class SimMember:
    """One member process: its tasks, its connector, how it ended."""

    name: str
    process: Process
    stop: tasks.Event
    exited: tasks.Event
    state: MemberState = MemberState.RUNNING
    connector: ZookeeperConsumerConnector | CoordinatorConsumerConnector | MigratableConsumer | None = None
    error: str | None = None
    #: started without ``--migratable`` in a migrate-mode run (``join-stranger``)
    stranger: bool = False


@dataclass
class SimOutcome:
    """What one simulated run left: its trace (every line, in the order written), the log ends, the members' ends."""

    seed: int
    lines: list[dict[str, Any]]
    log_end: dict[tuple[str, int], int]
    started_ms: int
    ended_ms: int
    virtual_ms: int
    member_errors: dict[str, str] = field(default_factory=dict)
    zookeeper_requests: int = 0
    scheduler_events: int = 0
    migration: MigrationOutcome | None = None

    @property
    def trace_sha256(self) -> str:
        """One seed, one trace: the hash of every line as the trace files hold them, in the order written."""
        h = hashlib.sha256()
        for line in self.lines:
            h.update(json.dumps(line, separators=(",", ":")).encode())
            h.update(b"\n")
        return h.hexdigest()

    def write(self, directory: Path) -> None:
        """The trace as the lab leaves it: one ``<consumer>.jsonl`` per writer, ``lab.jsonl`` for the lab's lines,
        and a ``summary.json`` with what ``zkconsumer analyze`` and the report read of a run."""
        directory.mkdir(parents=True, exist_ok=True)
        by_writer: dict[str, list[str]] = {}
        for line in self.lines:
            by_writer.setdefault(line["consumer"], []).append(json.dumps(line, separators=(",", ":")))
        for writer, rows in by_writer.items():
            (directory / f"{writer}.jsonl").write_text("\n".join(rows) + "\n")
        summary = {"simulated": True, "seed": self.seed, "started_ms": self.started_ms, "ended_ms": self.ended_ms,
                   "produced": sum(self.log_end.values()),
                   "log_end": {f"{t}-{p}": n for (t, p), n in sorted(self.log_end.items())},
                   "member_errors": self.member_errors, "zookeeper_requests": self.zookeeper_requests}
        (directory / "summary.json").write_text(json.dumps(summary, indent=2))


class SimWorld:
    """One seed of one lab plan, run on the simulator. ``observers`` see every trace line as it is written."""

    def __init__(self, plan: RunPlan, seed: int, observers: tuple[Callable[[dict], None], ...] = (),
                 settle_s: float | None = None,
                 service: ServiceTimes = INSTANT) -> None:
        reasons = unsupported(plan)
        if reasons:
            raise SimRefused("cannot simulate this run: " + "; ".join(reasons))
        self.plan = plan
        self.seed = seed
        servers = plan.scenario.ensemble if plan.scenario is not None else 1
        self.kw = KazooWorld(seed, LAB_ZOOKEEPER, service=service,
                             address=[("127.0.0.1", 2181 + i) for i in range(servers)])
        self.ensemble = SimEnsemble(self.kw.server)
        self.rt = self.kw.runtime
        self.network = self.kw.network
        #: coordinator mode: kafka-python and the broker's server on this world (kafka_io), the project's broker
        self.coordinated = plan.mode is LabMode.COORDINATOR
        #: migrate mode: members that switch between the two connectors, the driver on the lab's steps
        self.migrating = plan.mode is LabMode.MIGRATE
        kafka_side = self.coordinated or self.migrating
        self.kafka_io = KafkaIO(self.rt, self.network, random.Random(f"kafka-{seed}")) if kafka_side else None
        self.broker: SimBroker | KafkaSide = (
            KafkaSide(self.kw, self.kafka_io, plan.group_settings()) if self.kafka_io
            else SimBroker(self.rt, BROKER_DELAY_MS))
        self._absent = {kind for kind, _ in plan.absent}
        #: coordinator mode: each partition's highest commit as the members' trace lines report it (the lab's count)
        self.committed: dict[tuple[str, int], int] = {}
        #: the world's own chance (its stream of the seed): packet jitter, when each process gets going
        self.rng = random.Random(f"world-{seed}")
        self.network.rng, self.network.jitter_us = self.rng, JITTER_US
        self.members: dict[str, SimMember] = {}
        self.lines: list[dict[str, Any]] = []
        self.observers = observers
        self.lab_process = Process("lab")
        self.lab_trace = TraceWriter(None, GROUP, "lab")
        self.registry: Registry | None = None
        self.settle_s = settle_s if settle_s is not None else max(20.0, plan.session_timeout_ms / 1000 * 3)
        #: migrate mode: the members' main and the driver (sim/migration_side.py)
        self.migration_side = MigrationSide(self, BOOTSTRAP) if self.migrating else None
        self.base_delay_us = BASE_DELAY_US
        self._producing = True
        self._finished = False
        self._started_ms = 0
        self._broker_process: Process | None = None
        self._broker_registered = tasks.Event(self.rt)

    # ------------------------------------------------------------------------------------------ running
    def run(self) -> SimOutcome:
        routed = kafka_routed(self.kafka_io) if self.kafka_io is not None else contextlib.nullcontext()
        broker_version.clear_cache()  # each run probes its broker once, as a fresh process does
        with trace.observed(self._observe), routed:
            try:
                ended_ms = self.kw.run(self._main)
            finally:
                self._finished = True
                quiet = logging.root.manager.disable  # the tasks unwound now log their end (kafka-python's IO loops)
                logging.disable(logging.CRITICAL)
                try:
                    self.kw.close()
                finally:
                    logging.disable(quiet)
                broker_version.clear_cache()
                if isinstance(self.broker, KafkaSide):
                    self.broker.close()
        return SimOutcome(self.seed, self.lines, dict(self.broker.log_end), self._started_ms, ended_ms,
                          self.kw.scheduler.now_ms,
                          {m.name: m.error for m in self.members.values() if m.error},
                          sum(self.kw.model.requests.values()), self.kw.scheduler.executed,
                          self.migration_side.outcome if self.migration_side is not None else None)

    def _observe(self, line: dict[str, Any]) -> None:
        if self._finished:
            return
        task = self.rt.current()
        if task is not None and task.process is not None and task.process.killed:
            return  # a killed process writes nothing (its file ends at its last complete line)
        self.lines.append(line)
        if line.get("event") == "offset_committed":
            tp = (line["topic"], int(line["partition"]))
            self.committed[tp] = max(self.committed.get(tp, 0), int(line["offset"]))
        for observer in self.observers:
            observer(line)

    def _main(self) -> int:
        self.rt.spawn(self._lab, name="lab", process=self.lab_process).join()
        return trace.now_ms()

    def _lab(self) -> None:
        plan = self.plan
        for host in ("lab", *self._all_member_names()):
            self.network.set_delay_us(host, BASE_DELAY_US)
        admin = self.kw.client("lab", timeout=30.0)
        admin.start()
        self.registry = reg = Registry(admin)
        reg.setup_common_paths()
        self._start_broker(skew=False)
        self._broker_registered.wait()
        for topic, n in plan.topics.items():
            self._create_topic(topic, n)
        parts = [(t, p) for t, n in plan.topics.items() for p in range(n)]
        for i in range(plan.initial_records * len(plan.topics)):
            self.broker.produce(*parts[i % len(parts)])
        self.rt.spawn(self._producer, name="lab-producer")
        for i in range(1, plan.consumers + 1):
            self.start_member(f"c{i}")
        self._started_ms = trace.now_ms()
        started = self.kw.scheduler.now_ms
        for step in sorted(plan.schedule(), key=lambda s: s.at):
            wait_ms = started + round(step.at * 1000) - self.kw.scheduler.now_ms
            if wait_ms > 0:
                tasks.sleep(wait_ms / 1000.0)
            self.perform(step)
        left = started + round(plan.duration * 1000) - self.kw.scheduler.now_ms
        if left > 0:
            tasks.sleep(left / 1000.0)
        self._producing = False
        if isinstance(self.broker, KafkaSide):
            self.broker.flush()
            self.broker.stop_producing()
        self._settle(lambda: self._caught_up() and self._heals_judged())
        if self.migration_side is not None:
            self.migration_side.judge(reg)
            # the migration's end (a lab line now) moves a heal's deadline inside it there: run on to that deadline
            self._settle(self._heals_judged)
        for member in self.members.values():
            if member.process.paused:
                self._resume(member)
        for member in list(self.members.values()):
            self._stop_member(member)
        for member in list(self.members.values()):
            member.exited.wait(30.0)
        admin.stop()
        admin.close()

    def _settle(self, done: Callable[[], bool]) -> None:
        """Let the world run until ``done()``, for :attr:`settle_s` at most."""
        deadline = self.kw.scheduler.now_ms + round(self.settle_s * 1000)
        while self.kw.scheduler.now_ms < deadline and not done():
            tasks.sleep(0.25)

    def running_names(self) -> list[str]:
        return [m.name for m in self.members.values() if m.state is MemberState.RUNNING]

    def _all_member_names(self) -> list[str]:
        names = [f"c{i}" for i in range(1, self.plan.consumers + 1)]
        names += [s.consumer for s in self.plan.schedule() if s.consumer and s.consumer not in names]
        return list(dict.fromkeys(names))

    def _heals_judged(self) -> bool:
        """Every heal's deadline (analysis/deadlines.py, the judges' own) has passed. A group caught up before its
        last heal's deadline would otherwise be stopped first, and its members' releases at the stop read as
        partitions unowned at that deadline (found on a coordinator-mode run, issue 54)."""
        lab = [line for line in self.lines if line.get("consumer") == "lab"]
        return all(deadline < trace.now_ms() for *_, deadline in judged_deadlines(lab))

    def _caught_up(self) -> bool:
        """Every partition's committed offset at its log end (read from the server's tree, not through a client:
        the lab's own check, without its traffic)."""
        if self.kafka_io is not None:  # committed to the broker (and ZooKeeper): the members' trace lines say how far
            return all(self.committed.get(tp, 0) >= end for tp, end in self.broker.log_end.items())
        nodes = self.kw.model.tree.nodes
        for (topic, partition), end in self.broker.log_end.items():
            node = nodes.get(layout.GroupPaths(GROUP).offset(topic, partition))
            try:
                if node is None or int(node.data) < end:
                    return False
            except ValueError:
                return False
        return True

    def _producer(self) -> None:
        plan = self.plan
        if plan.rate <= 0:
            return
        start = self.kw.scheduler.now_ms
        written = 0
        while self._producing:
            tasks.sleep(PRODUCER_TICK_MS / 1000.0)
            if self.broker.down:
                continue  # buffered: sent, and caught up, once the broker is back
            parts = [(t, p) for t in plan.topics for p in range(self.broker.partitions(t))]
            due = int((self.kw.scheduler.now_ms - start) * plan.rate // 1000)
            while written < due:
                self.broker.produce(*parts[written % len(parts)])
                written += 1

    # ------------------------------------------------------------------------------------------ members
    def member_io(self, host: str) -> MemberIO:
        """A member's connections on this world: kazoo's through the simulated handler; its fetcher's client is the
        simulated broker's, or kafka-python's own (routed) where the project's broker serves (migrate mode)."""
        if isinstance(self.broker, KafkaSide):
            return MemberIO(zk_handler=lambda: SimHandler(self.rt, self.network, host))
        return MemberIO(zk_handler=lambda: SimHandler(self.rt, self.network, host),
                        kafka_client=lambda _bootstrap, settings: self.broker.client(host, settings))

    def member_config(self, name: str) -> ConsumerConfig:
        """What ``zkconsumer consume`` is given by the lab: the plan's settings for the member
        (``RunPlan.member_settings``, the lab's ``--property`` flags), this world's ZooKeeper and the broker's
        address (the lab's ``--bootstrap-server``)."""
        props: dict[str, Any] = dict(self.plan.member_settings(name))
        props.update({"zookeeper.connect": self.kw.hosts, "bootstrap.servers": BOOTSTRAP})
        return ConsumerConfig.from_properties(props)

    def start_member(self, name: str, stranger: bool = False) -> SimMember:
        process = Process(name)
        member = SimMember(name, process, tasks.Event(self.rt), tasks.Event(self.rt), stranger=stranger)
        self.members[name] = member
        self.network.set_delay_us(name, BASE_DELAY_US)
        self.rt.spawn(self._member_main, member, name=f"{name}-main", process=process)
        return member

    def _member_main(self, member: SimMember) -> None:
        """``zkconsumer consume``: connect, subscribe, hand every record to the application, stop when told."""
        plan = self.plan
        tasks.sleep(self.rng.randint(*MEMBER_START_MS) / 1000.0)
        if member.stranger and self.migration_side is not None and not self.migration_side.may_join(member):
            member.state = MemberState.EXITED
            member.exited.set()
            return
        if self.migration_side is not None and not member.stranger:
            try:
                self.migration_side.run_member(member)
            finally:
                member.state = MemberState.EXITED
                member.exited.set()
            return
        try:
            config = self.member_config(member.name)
            connector = (CoordinatorConsumerConnector(config) if self.coordinated
                         else ZookeeperConsumerConnector(config, io=self.member_io(member.name)))
        except ZkConsumerError as e:
            member.error = f"{type(e).__name__}: {e}"
            member.state = MemberState.EXITED
            member.exited.set()
            return
        member.connector = connector
        try:
            if plan.subscribes_by_regex:  # one stream per topic, as `zkconsumer consume` starts by default
                streams = connector.create_message_streams_by_filter(plan.whitelist, 1)
            else:
                by_topic = connector.create_message_streams({t: 1 for t in plan.topics_of(member.name)})
                streams = [s for ss in by_topic.values() for s in ss]
            for i, stream in enumerate(streams):
                self.rt.spawn(self._application, member, stream, name=f"{member.name}-stream-{i}")
            member.stop.wait()
        except ZkConsumerError as e:  # the first rebalance failed, as `zkconsumer consume` reports and exits
            member.error = f"{type(e).__name__}: {e}"
        finally:
            member.state = MemberState.STOPPING
            connector.shutdown()
            member.state = MemberState.EXITED
            member.exited.set()

    @staticmethod
    def _application(member: SimMember, stream: Any) -> None:
        for _record in stream:
            stream.ack()  # processed: committable now
            if member.stop.is_set():
                return

    # ------------------------------------------------------------------------------------------ the steps
    def perform(self, step: Step) -> None:
        """Carry out one step as the real lab does, with its trace lines; a member step on a member that is not
        running is skipped, as the lab skips it. The handler is :data:`STEP_HANDLERS`'s for the step's kind: one
        that lasts (:data:`LASTING`) runs on a task of its own, so the schedule goes on meanwhile."""
        if step.action in self._absent:  # no counterpart in this run (the plan says why): skipped, as the lab skips it
            return
        member = self.members.get(step.consumer)
        running = member is not None and member.state is MemberState.RUNNING
        starts = step.action.starts_member or step.action is ActionKind.RESTART
        if step.action.on_member and not starts and not running:
            return
        if starts and running:
            return
        if step.action is ActionKind.KILL_DRIVER and not (self.migration_side and self.migration_side.running()):
            return  # the lab's: "no zkconsumer migrate is running"
        handler = STEP_HANDLERS[step.action]
        if not step.action.fault:
            self._lab_line("lab_step", step=str(step.action),
                           target=f"{GROUP}_{step.consumer}" if step.consumer else "")
        if step.action in LASTING:
            self.rt.spawn(handler, self, step, member, name=f"lab-{step.action}-{step.at:g}")
        else:
            handler(self, step, member)

    def _join(self, step: Step, member: SimMember | None) -> None:
        self.start_member(step.consumer)

    def _join_stranger(self, step: Step, member: SimMember | None) -> None:
        self.start_member(step.consumer, stranger=True)

    def _stop(self, step: Step, member: SimMember) -> None:
        self._stop_member(member)

    @staticmethod
    def _stop_member(member: SimMember) -> None:
        """A graceful stop: the application loop ends, the connector shuts down."""
        if member.state is MemberState.RUNNING:
            member.stop.set()

    def _kill(self, step: Step, member: SimMember) -> None:
        self.rt.kill_process(member.process)
        member.state = MemberState.KILLED
        self.network.close_host(member.name)
        member.exited.set()

    def _bounce(self, step: Step, member: SimMember) -> None:
        self._stop_member(member)
        member.exited.wait(30.0)
        if member.state is MemberState.EXITED:
            self.start_member(member.name)

    def _resume(self, member: SimMember) -> None:
        if member.process.paused:
            self.rt.resume_process(member.process)
            self._healed(ActionKind.PAUSE, member.name)

    def _injected(self, step: Step, target: str | None = None) -> None:
        """The lab's ``fault_injected`` line: its target is the member's consumer id unless given."""
        if target is None:
            target = f"{GROUP}_{step.consumer}" if step.consumer else ""
        self._lab_line("fault_injected", fault=str(step.action), target=target)

    def _pause(self, step: Step, member: SimMember) -> None:
        self.rt.pause_process(member.process)
        self._injected(step)
        tasks.sleep(step.seconds)
        self._resume(member)

    def _held(self, step: Step, apply: Callable[[], None], undo: Callable[[], None]) -> None:
        """A fault that holds for ``step.seconds``: injected, held, healed (the lab's fault lines around it)."""
        self._injected(step)
        apply()
        tasks.sleep(step.seconds)
        undo()
        self._healed(step.action, step.consumer)

    def _cut_zk(self, step: Step, member: SimMember | None) -> None:
        self._held(step, lambda: self.network.partition(step.consumer), lambda: self.network.heal(step.consumer))

    def _slow_zk(self, step: Step, member: SimMember | None) -> None:
        latency_us = round(step.latency_ms * 1000)  # the lab's proxy: added each way
        self._held(step, lambda: self.network.set_proxy_latency_us(step.consumer, latency_us),
                   lambda: self.network.set_proxy_latency_us(step.consumer, 0))

    def _expire(self, step: Step, member: SimMember) -> None:
        assert member.connector is not None
        if self.migrating:  # the lab's: the session holding the member's registration (ZooKeeper mode, or its bridge)
            node = self.kw.model.tree.nodes.get(layout.GroupPaths(GROUP).registration(f"{GROUP}_{step.consumer}"))
            session = node.ephemeral_owner if node is not None else 0
            if not session:
                return  # not registered (a coordinator-mode member after done): nothing to expire, as the lab says
        else:
            client_id = member.connector.zk.client_id
            if client_id is None:
                return
            session = client_id[0]
        self._injected(step)
        self.kw.server.expire(session)
        self._healed(step.action, step.consumer)

    def _cut_broker(self, step: Step, member: SimMember | None) -> None:
        if self.coordinated:  # a coordinator-mode member talks to the broker only: its whole link is the broker's
            self._cut_zk(step, member)
            return
        self._held(step, lambda: self.broker.cut.add(step.consumer), lambda: self.broker.cut.discard(step.consumer))

    def _slow_broker(self, step: Step, member: SimMember | None) -> None:
        if self.coordinated:
            self._slow_zk(step, member)
            return

        def apply() -> None:
            self.broker.latency_ms[step.consumer] = round(step.latency_ms)
        self._held(step, apply, lambda: self.broker.latency_ms.pop(step.consumer, None))

    def _migrate(self, step: Step, member: None) -> None:
        assert self.migration_side is not None  # unsupported() refuses these steps outside migrate mode
        self.migration_side.start(step)

    def _kill_driver(self, step: Step, member: None) -> None:
        assert self.migration_side is not None
        self.migration_side.kill()

    def _quorum_loss(self, step: Step, member: None) -> None:
        ens = self.ensemble
        victims = list(range(1, ens.size + 1))[-(ens.size // 2 + 1):]  # the lab's: all but the first ones
        self._injected(step, ",".join(f"zk{n}" for n in victims))
        for node in victims:
            ens.kill(node)
        tasks.sleep(step.seconds)
        ens.start(victims)
        self._healed(step.action)

    def _kill_zk(self, step: Step, member: None) -> None:
        node = self.ensemble.resolve(step.node)
        self._injected(step, f"zk{node}")
        self.ensemble.kill(node)
        if step.seconds:
            tasks.sleep(step.seconds)
            self._restart_zk([node])

    def _restart_zk_step(self, step: Step, member: None) -> None:
        self._restart_zk([self.ensemble.resolve(step.node)] if step.node is not None else self.ensemble.down())

    def _kill_broker_step(self, step: Step, member: None) -> None:
        self._injected(step, "broker-0")
        self._kill_broker()
        if step.seconds:
            tasks.sleep(step.seconds)
            self._restart_broker()

    def _restart_broker_step(self, step: Step, member: None) -> None:
        if self.broker.down:
            self._restart_broker()

    def _create_topic_step(self, step: Step, member: None) -> None:
        self._create_topic(step.topic, step.partitions)

    def _add_partitions(self, step: Step, member: None) -> None:
        assert self.registry is not None
        self.broker.add_partitions(step.topic, step.partitions)
        self.registry.update_topic_node(step.topic, TopicAssignment({p: [0] for p in range(step.partitions)}))

    # ------------------------------------------------------------------------------------------ the broker
    def _start_broker(self, skew: bool = True) -> None:
        """The broker's process: it answers fetches once it runs, and registers under ``/brokers/ids/0`` through a
        ZooKeeper session of its own (``BROKER_SESSION_TIMEOUT_MS``) as soon as no registration holds the node: a
        restart after a kill -9 waits for the killed process's session to expire, as the real broker waits
        (Kafka's "a broker is already registered" at startup, retried)."""
        self._broker_registered = registered = tasks.Event(self.rt)
        self.network.set_delay_us("broker", BASE_DELAY_US)
        if isinstance(self.broker, KafkaSide):  # the project's broker: it registers itself
            delay_s = self.rng.randint(0, START_SKEW_MS) / 1000.0 if skew else 0.0
            self._broker_process = self.broker.start(registered, delay_s)
            return
        self._broker_process = process = Process("broker")

        def main() -> None:
            if skew:  # an interpreter starting up, its imports (the first start is awaited by the lab)
                tasks.sleep(self.rng.randint(0, START_SKEW_MS) / 1000.0)
            self.broker.down = False
            client = self.kw.client("broker", timeout=BROKER_SESSION_TIMEOUT_MS / 1000.0)
            client.start()
            reg = Registry(client)
            path = layout.broker_path(BROKER_INFO.broker_id)
            while True:
                try:
                    reg.register_broker(BROKER_INFO)
                    break
                except BrokerAlreadyRegistered:  # the killed process's session holds it until it expires
                    reg.wait_gone(path, 1.0)
            registered.set()

        self.rt.spawn(main, name="broker-main", process=process)

    def _kill_broker(self) -> None:
        """SIGKILL of the broker: no fetch is answered (those under way are lost with their connections), nothing
        is produced (the lab's producer buffers, as kafka-python's does while no broker answers), and its
        registration stays until its session expires."""
        if isinstance(self.broker, KafkaSide):
            self.broker.kill()
            return
        if self._broker_process is not None:
            self.rt.kill_process(self._broker_process)
        self.network.close_host("broker")
        self.broker.down = True

    def _restart_broker(self) -> None:
        """The broker started again on its port and log; healed once it is registered again, as the lab heals."""
        self._start_broker()
        self._broker_registered.wait(60.0)
        self._healed(ActionKind.KILL_BROKER)

    def _restart_zk(self, nodes: list[int]) -> None:
        """Killed servers started again (the lab's ``restart-zk``, or a ``kill-zk`` with ``seconds``): a line per
        server back, as the lab writes one when each serves again."""
        self.ensemble.start(nodes)
        for _node in nodes:
            self._healed(ActionKind.KILL_ZK)

    def _create_topic(self, topic: str, partitions: int) -> None:
        assert self.registry is not None
        self.broker.create_topic(topic, partitions)
        self.registry.create_topic_node(topic, TopicAssignment({p: [0] for p in range(partitions)}))

    def _healed(self, kind: ActionKind, name: str = "") -> None:
        """The lab's ``fault_healed`` line: on a member (``name``), or on the servers (no target)."""
        self._lab_line("fault_healed", fault=str(kind), target=f"{GROUP}_{name}" if name else "",
                       session_timeout_ms=self.plan.session_timeout_ms)

    def _lab_line(self, event: str, **fields: Any) -> None:
        self.lab_trace.emit(event, **fields)


#: The simulated world's handler of each action kind it carries out: one table, keyed by the scenario model's enum
#: (the lab's is in lab/steps.py). A kind missing here is refused with its reason in :data:`NOT_SIMULATED`;
#: tests/test_fault_vocabulary.py fails when a kind of the model is in neither.
STEP_HANDLERS: dict[ActionKind, Callable[[SimWorld, Step, SimMember | None], None]] = {
    ActionKind.JOIN: SimWorld._join, ActionKind.RESTART: SimWorld._join, ActionKind.STOP: SimWorld._stop,
    ActionKind.KILL: SimWorld._kill, ActionKind.BOUNCE: SimWorld._bounce, ActionKind.PAUSE: SimWorld._pause,
    ActionKind.MIGRATE: SimWorld._migrate, ActionKind.ROLLBACK: SimWorld._migrate,
    ActionKind.KILL_DRIVER: SimWorld._kill_driver, ActionKind.JOIN_STRANGER: SimWorld._join_stranger,
    ActionKind.CUT_ZK: SimWorld._cut_zk, ActionKind.SLOW_ZK: SimWorld._slow_zk, ActionKind.EXPIRE: SimWorld._expire,
    ActionKind.CUT_BROKER: SimWorld._cut_broker, ActionKind.SLOW_BROKER: SimWorld._slow_broker,
    ActionKind.QUORUM_LOSS: SimWorld._quorum_loss, ActionKind.KILL_ZK: SimWorld._kill_zk,
    ActionKind.RESTART_ZK: SimWorld._restart_zk_step, ActionKind.KILL_BROKER: SimWorld._kill_broker_step,
    ActionKind.RESTART_BROKER: SimWorld._restart_broker_step, ActionKind.CREATE_TOPIC: SimWorld._create_topic_step,
    ActionKind.ADD_PARTITIONS: SimWorld._add_partitions,
}
#: The kinds whose handler lasts (a fault held for seconds, a bounce waiting for its member to exit, a topic change's
#: writes): carried out on a task of their own, as the lab runs them on a thread. The others run in the schedule.
LASTING = frozenset(k for k in STEP_HANDLERS if not k.on_member or k.fault or k is ActionKind.BOUNCE)
