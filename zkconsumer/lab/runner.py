"""``zkconsumer lab``: a whole 0.8 group on one machine, with churn, watched live.

It starts a real ZooKeeper and the local broker (or uses the ones given), creates two topics, produces
numbered records, starts N consumer *processes* (``zkconsumer consume``, so that ``kill -9`` is real), then
adds, stops and kills consumers on a schedule while a live table shows owners, lag and rebalances. It ends
with Kafka's verify, a summary (rebalances and their durations, records delivered, duplicates, lost) and,
with ``--analyze``, the Spark report. Every consumer writes a trace (docs/trace.md) under the run directory.

``mode``: ``zookeeper`` (0.8 members), ``coordinator`` (the same workload on the broker's group coordinator), or
``migrate`` (0.8 members started ``--migratable``, moved to the coordinator by ``zkconsumer migrate`` mid-run).

Where the servers and consumers run is a backend's business (zkconsumer/lab/backends.py): local processes
(``ProcessBackend``, the default) or Docker containers (``DockerBackend``, ``zkconsumer lab --backend docker``).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from kafka import KafkaProducer
from kafka.admin import NewTopic
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from zkconsumer import broker_version
from zkconsumer.analysis import unseen
from zkconsumer.analysis.unseen import Unseen
from zkconsumer.apache_kafka import lab_members
from zkconsumer.assignment.assignors import AssignmentContext, RoundRobinPreconditionError, TopicPartition, assign
from zkconsumer.consoles import make_console
from zkconsumer.consumer.zookeeper.kafka_offsets import KafkaOffsetStore
from zkconsumer.errors import IllegalArgument
from zkconsumer.kafka_admin import AdminClient
from zkconsumer.lab import report
from zkconsumer.lab.backends import LabBackend, ProcessBackend
from zkconsumer.lab.migrations import MigrationRuns
from zkconsumer.lab.processes import MemberProcesses
from zkconsumer.lab.steps import STEP_HANDLERS
from zkconsumer.migration.driver import MigrationDriver, Ownership
from zkconsumer.records import encode_value
from zkconsumer.scenario.model import ActionKind, LabMode, Step
from zkconsumer.scenario.plan import GROUP, RunPlan
from zkconsumer.scenario.properties import member_kind, member_properties
from zkconsumer.tools.groups import verify
from zkconsumer.trace import TraceWriter, now_ms
from zkconsumer.types import GroupMode, tp_str
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import packets_received
from zkconsumer.zk.topics import create_topic

#: Seconds between two refreshes of the live view (and of the churn loop when no step is due sooner).
VIEW_PERIOD_S = 0.5


class LiveHook(Protocol):
    """What ``lab --ui`` hooks into the lab's loop (lab/live.py's LabSource): the page's actions are carried out on
    the loop's thread (the lab is not thread-safe), and the page may end the churn early or hold it open."""

    #: The churn lasts until the page says (its "finish"), not the plan's duration.
    open_ended: bool

    def churning(self, elapsed: float) -> bool:
        """Whether the churn goes on ``elapsed`` seconds after the members started."""
        ...

    def turn(self, reg: Registry, elapsed: float, wait: float) -> None:
        """Carry out the page's queued actions, read the group for the page, then wait up to ``wait`` seconds
        (less when the page asks for something)."""
        ...


def mark_label(e: dict) -> str | None:
    """A lab.jsonl line as the pages name it: ``kill -9 c1``, ``pause c2``, ``healed: pause c2``; None for a line
    that is no step or fault."""
    target = str(e.get("target") or "").removeprefix(f"{GROUP}_")
    match e.get("event"):
        case "lab_step":
            step = str(e.get("step", ""))
            what = "kill -9" if step == ActionKind.KILL else step
        case "fault_injected":
            what = str(e.get("fault", ""))
        case "fault_healed":
            what = f"healed: {e.get('fault', '')}"
        case _:
            return None
    return f"{what} {target}".strip()


class TraceTail:
    """Reads the consumers' trace files incrementally (they keep growing while the lab runs)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pos: dict[Path, int] = {}
        self._partial: dict[Path, str] = {}
        self.delivered: Counter = Counter()  # (topic, partition, offset) -> times
        self.per_consumer: Counter = Counter()
        self.rebalances: list[dict] = []
        self.failed: list[dict] = []
        self.stalls: list[dict] = []  # join_stalled: coordinator-mode joins not complete within the rebalance timeout
        self.conflicts = 0
        self.bad_lines = 0
        self.owned: dict[str, set[str]] = {}  # consumer → "topic-partition" it last reported owning
        self.committed: dict[tuple[str, int], int] = {}  # (topic, partition) → highest offset committed
        self.reset_to: dict[tuple[str, int], int] = {}  # (topic, partition) → highest offset reset target

    def poll(self) -> None:
        for path in sorted(self.directory.glob("*.jsonl")):
            with open(path, encoding="utf-8") as f:
                f.seek(self._pos.get(path, 0))
                chunk = self._partial.pop(path, "") + f.read()
                self._pos[path] = f.tell()
            lines = chunk.split("\n")
            if lines[-1]:
                self._partial[path] = lines[-1]
            for line in lines[:-1]:
                if line:
                    self._line(line)

    def _line(self, line: str) -> None:
        try:
            e = json.loads(line)
            kind = e["event"]
        except (json.JSONDecodeError, KeyError, TypeError):
            self.bad_lines += 1
            return
        if kind == "record_delivered":
            self.delivered[(e["topic"], e["partition"], e["offset"])] += 1
            self.per_consumer[e["consumer"]] += 1
        elif kind == "rebalance_done":
            self.rebalances.append(e)
            self.owned[e["consumer"]] = set(e.get("owned") or ())
        elif kind == "released":
            self.owned[e["consumer"]] = self.owned.get(e["consumer"], set()) - set(e.get("partitions") or ())
        elif kind == "shutdown":
            self.owned.pop(e["consumer"], None)
        elif kind == "rebalance_failed":
            self.failed.append(e)
        elif kind == "join_stalled":
            self.stalls.append(e)
        elif kind == "claim_conflict":
            self.conflicts += 1
        elif kind == "offset_committed":
            tp = (e["topic"], e["partition"])
            self.committed[tp] = max(self.committed.get(tp, 0), int(e["offset"]))
        elif kind == "offset_reset":
            tp = (e["topic"], e["partition"])
            self.reset_to[tp] = max(self.reset_to.get(tp, 0), int(e["to_offset"]))

    def unseen(self, produced: Mapping[tuple[str, int], int]) -> Unseen:
        """Records produced and never delivered, split at each partition's frontier (analysis/unseen.py)."""
        offsets: dict[tuple[str, int], list[int]] = defaultdict(list)
        for (t, p, o) in self.delivered:
            offsets[(t, p)].append(o)
        total = Unseen()
        for tp, end in produced.items():
            total += unseen.split(offsets.get(tp, ()), end, self.committed.get(tp, 0), self.reset_to.get(tp, 0))
        return total


def planned_assignments(plan: RunPlan) -> Table:
    """What the first consumers will own under Range and RoundRobin (the assignors, as each member runs them)."""
    subs = {f"{GROUP}_c{i}": {t: 1 for t in plan.topics_of(f"c{i}")} for i in range(1, plan.consumers + 1)}
    ctx = AssignmentContext(subs, {t: range(n) for t, n in plan.topics.items()})
    table = Table(title=f"assignments of the first {plan.consumers} consumers (this run uses {plan.strategy})")
    table.add_column("consumer thread id")
    results: dict[str, dict[str, list[str]]] = {}
    for strategy in ("range", "roundrobin"):
        table.add_column(strategy)
        try:
            results[strategy] = assign(strategy, ctx).by_thread()
        except RoundRobinPreconditionError:  # every member on the same topics: not so with subscriptions
            results[strategy] = {}
    for tid in results["range"]:
        table.add_row(tid, *(" ".join(results[s].get(tid, ["(refused: members on different topics)"]))
                             for s in ("range", "roundrobin")))
    return table


def _mixed_members(plan: RunPlan, backend: str, given: tuple[tuple[str, str], ...],
                   notes: list[str]) -> tuple[tuple[str, str], ...]:
    """The properties Kafka 0.8.2.2's members of a mixed group ([kinds]) take; added to ``notes``, what is n/a
    about the kinds: all of them in a coordinator run (its group takes no 0.8 member), a property Kafka's consumer
    lacks."""
    if plan.kinds and plan.mode is not LabMode.ZOOKEEPER:
        notes.append(f"kinds ({', '.join(f'{m} {k}' for m, k in plan.kinds.items())}): a group in {plan.mode} mode "
                     "takes no 0.8 member; they run as the others do")
    kafka = [m for m in plan.kinds if plan.kind_of(m) == lab_members.CLIENT]
    if not kafka or plan.client == lab_members.CLIENT:
        return given
    if backend != "process":
        raise IllegalArgument(f"{', '.join(kafka)}: Kafka 0.8.2.2's own consumer runs on the process backend only "
                              f"(asked: {backend})")
    taken, dropped = member_properties(member_kind(LabMode.ZOOKEEPER, lab_members.CLIENT), plan.properties,
                                       plan.scenario.properties if plan.scenario is not None else None)
    notes += [f"{note} ({', '.join(kafka)})" for note in dropped]
    return taken


def _commits_not_judged(plan: RunPlan) -> str:
    """What ``lab --analyze`` adds when members' commits are not in their traces (Kafka 0.8.2.2's own)."""
    kafka = "every member" if plan.client == lab_members.CLIENT else ", ".join(
        m for m in plan.kinds if plan.kind_of(m) == lab_members.CLIENT)
    return ("[yellow]not judged:[/] duplicates only inside uncommitted windows, commits never backwards. The "
            f"commits of Kafka 0.8.2.2's members ({kafka}) are not in their traces, rebuilt from their logs; the "
            "analysis above judged them without.")


class Lab:
    #: Whether this lab has the handles fault and topic actions need (ScenarioLab, in zkconsumer/lab/faults/, has;
    #: ``lab_for`` there picks the lab a plan needs). A lab without them reports such a step n/a.
    fault_handles = False

    def __init__(self, plan: RunPlan, out_dir: Path, zookeeper: str | None = None,
                 bootstrap: str | None = None, console: Console | None = None,
                 backend: LabBackend | None = None) -> None:
        self.plan = plan
        #: replicas of each topic the lab creates (a cluster of several brokers puts one on each)
        self.replication_factor = 1
        self.out = Path(out_dir).resolve()
        self.traces = self.out / "traces"  # absolute: the same path inside containers (bind-mounted)
        self.logs = self.out / "logs"
        self.console = console or make_console()
        self._zk_given, self._bootstrap_given = zookeeper, bootstrap
        self.zk_connect = zookeeper or ""
        self.bootstrap = bootstrap or ""
        self.backend = backend or ProcessBackend()
        self.members = MemberProcesses(self.backend, self.logs, self._consumer_args, self._event)
        self.produced: dict[tuple[str, int], int] = defaultdict(int)
        self._stop_producing = threading.Event()
        self.tail = TraceTail(self.traces)
        self.events: list[str] = []
        self._kafka_offsets = None
        self._kafka_cache: tuple[float, dict] = (0.0, {})
        self.migrations = MigrationRuns(lambda: (self.zk_connect, self.bootstrap), self.logs, self._event,
                                        self._lab_line, lambda: len(self.members.running()))
        self.requests: dict[str, dict[str, int]] = {}
        self._stalls_shown = 0
        self.lab_trace: TraceWriter | None = None  # lab.jsonl: fault_injected / fault_healed, from the first fault
        #: the lab.jsonl lines as written, (ts, label) (:func:`mark_label`): what the live page names a rebalance after
        self.marks: list[tuple[int, str]] = []
        #: steps that had no counterpart in this run, and why; and properties no member of this run takes
        self.skipped: list[str] = []
        #: the run's properties this run's members take (each kind of member has counterparts for some)
        self.member_properties, dropped = member_properties(
            member_kind(plan.mode, plan.client), plan.properties,
            plan.scenario.properties if plan.scenario is not None else None)
        self.skipped += dropped
        self._kafka_members: lab_members.KafkaLabMembers | None = None
        if plan.client == lab_members.CLIENT and (plan.mode is not LabMode.ZOOKEEPER
                                                  or self.backend.name != "process"):
            raise IllegalArgument(f"the {lab_members.CLIENT} client runs in ZooKeeper mode on the process backend only "
                                  f"(asked: mode {plan.mode}, backend {self.backend.name})")
        self._kafka_properties = _mixed_members(plan, self.backend.name, self.member_properties, self.skipped)
        #: ``lab --ui``'s live page, when one watches this run (it sets itself here)
        self.ui: LiveHook | None = None
        #: the owners and committed offsets the last view read: the live page shows them, not a second read of its own
        self.read: tuple[dict[tuple[str, int], str], dict[tuple[str, int], int]] | None = None

    # ---------------------------------------------------------------------------------------- setup
    def _start_infrastructure(self) -> None:
        if not self._zk_given:
            self.zk_connect = self.backend.start_zookeeper(self.out / "zookeeper") + "/lab"
        if not self._bootstrap_given:
            self.bootstrap = self.backend.start_broker(self.zk_connect, self.out / "broker", self.plan.group_settings())
        elif self.plan.mode is not LabMode.ZOOKEEPER:  # Kafka 0.8 has no group coordinator: say so, do not hang
            broker_version.require(self.bootstrap, (0, 9), f"lab --mode {self.plan.mode} (the broker's group "
                                                           "coordinator)")
        with Registry.open(self.zk_connect) as reg:
            if self._bootstrap_given and not reg.broker_ids():
                self._create_topics_by_admin()  # a cluster not in this ZooKeeper (Kafka 4, KRaft)
                return
            existing = set(reg.topics())
            for topic, n in self.plan.topics.items():
                if topic not in existing:
                    create_topic(reg, topic, n)

    def _create_topics_by_admin(self) -> None:
        """CreateTopics through the cluster's own API: it keeps its metadata elsewhere than in ZooKeeper."""
        admin = AdminClient(bootstrap_servers=self.bootstrap, client_id="zkconsumer-lab")
        try:
            existing = set(admin.list_topics())
            wanted = [NewTopic(t, n, self.replication_factor) for t, n in self.plan.topics.items() if t not in existing]
            if wanted:
                admin.create_topics(wanted)
        finally:
            admin.close()

    def _producer(self) -> None:

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5, metrics_enabled=False,
                                 **broker_version.client_settings(self.bootstrap))
        parts = [(t, p) for t, n in self.plan.topics.items() for p in range(n)]

        def send(t: str, p: int) -> None:
            seq = self.produced[(t, p)]
            producer.send(t, value=encode_value(t, p, seq), partition=p)
            self.produced[(t, p)] = seq + 1

        try:
            for i in range(self.plan.initial_records * len(self.plan.topics)):
                send(*parts[i % len(parts)])
            producer.flush()
            interval = 1.0 / self.plan.rate if self.plan.rate > 0 else None
            i = 0
            next_at = time.monotonic()
            while interval and not self._stop_producing.is_set():
                send(*parts[i % len(parts)])
                i += 1
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    self._stop_producing.wait(delay)
            producer.flush()
        finally:
            producer.close()

    # ------------------------------------------------------------------------------------- consumers
    def _consumer_args(self, name: str) -> list[str]:
        """The consumer's command line, the same for every backend (each runs the zkconsumer CLI its own way)."""
        if self.plan.kind_of(name) == lab_members.CLIENT:
            return self._kafka_member_args(name)
        # the addresses and the trace directory as flags (a fault lab points them at its proxies); every other
        # setting is the plan's, the same the simulator gives its members (RunPlan.member_settings)
        args = [*self.backend.zkconsumer_command, "consume", "--zookeeper", self.zk_connect,
                "--bootstrap-server", self.bootstrap, "--trace-dir", str(self.traces), "--output", "none"]
        if self.plan.mode is LabMode.COORDINATOR:
            args += ["--mode", GroupMode.COORDINATOR]
            if self.plan.client != "kafka-python":
                args += ["--client", self.plan.client]
        elif self.plan.mode is LabMode.MIGRATE:
            args += ["--migratable"]
        for key, value in self.plan.member_settings(name):
            args += ["--property", f"{key}={value}"]
        if self.plan.strategy.startswith("roundrobin"):
            args += ["--streams", "1"]
        if self.plan.subscribes_by_regex:
            return [*args, "--whitelist", self.plan.whitelist]
        for topic in self.plan.topics_of(name):
            args += ["--topic", topic]
        return args

    def _kafka_member_args(self, name: str) -> list[str]:
        """Kafka 0.8.2.2's own consumer as this member: the same settings under Kafka's names."""
        if self._kafka_members is None:
            props = {"auto.offset.reset": "smallest", "auto.commit.interval.ms": self.plan.commit_interval_ms,
                     "zookeeper.session.timeout.ms": self.plan.session_timeout_ms, **dict(self._kafka_properties)}
            self._kafka_members = lab_members.KafkaLabMembers(
                self.zk_connect, GROUP, self.plan.topics, self.traces, self.logs, strategy=self.plan.strategy,
                properties=props)
        return self._kafka_members.command(name, self.plan.topics_of(name))

    def _poll_traces(self) -> None:
        """Bring the traces up to date: Kafka's members' are rebuilt from their logs, then all are read."""
        if self._kafka_members is not None:
            self._kafka_members.poll()
        self.tail.poll()

    def perform(self, step: Step) -> None:
        """Carry out one step; one that cannot apply here is skipped and said (``not_applicable`` in the summary)."""
        why = self.not_applicable(step)
        if why:
            self.skipped.append(f"{step.action} {step.consumer}".strip() + f" at {step.at:.1f} s: {why}")
            self._event(f"{step.action} {step.consumer}: skipped ({why})".replace("  ", " "))
            return
        if not step.action.fault:
            self.stepped(step)
        STEP_HANDLERS[step.action](self, step)

    def not_applicable(self, step: Step) -> str | None:
        """Why ``step`` has no counterpart in this run (None: it applies)."""
        absent = dict(self.plan.absent).get(step.action)
        if absent:
            return absent
        if step.action.needs_fault_lab and not self.fault_handles:
            return "this lab has no handle on servers, links or topics (a ScenarioLab has, on the process backend)"
        if step.action.on_migration and self.plan.mode is not LabMode.MIGRATE:
            return "only a lab in migrate mode migrates its group"
        if step.action is ActionKind.KILL_DRIVER and not self.migrations.running:
            return "no zkconsumer migrate is running"
        if not step.action.on_member or step.action.starts_member:
            return None
        started, running = self.members.started(step.consumer), self.members.alive(step.consumer)
        if step.action is ActionKind.RESTART:
            return None if started and not running else f"{step.consumer} {'runs' if running else 'never started'}"
        return None if running else f"{step.consumer} is not running"

    def pause(self, name: str, seconds: float) -> None:
        """SIGSTOP now, SIGCONT ``seconds`` later (a timer: the lab goes on meanwhile), as a GC pause does."""
        self.members.freeze(name)
        self.injected(str(ActionKind.PAUSE), f"{GROUP}_{name}", f"{name} paused (SIGSTOP) for {seconds:g} s")
        timer = threading.Timer(seconds, self.resume, args=(name,))
        timer.daemon = True
        timer.start()

    def resume(self, name: str) -> None:
        """SIGCONT, once: the timer and the lab's cleanup may both call it."""
        if self.members.thaw(name):
            self.healed(str(ActionKind.PAUSE), f"{name} resumed (SIGCONT)", target=f"{GROUP}_{name}")

    def stepped(self, step: Step) -> None:
        """A step that changes the group (not a fault: those write their own lines) in the lab's trace, so the
        analysis judges a fault's heal on the group settled after the steps that followed it."""
        self._lab_line("lab_step", step=str(step.action), target=f"{GROUP}_{step.consumer}" if step.consumer else "")

    def _lab_line(self, event: str, **fields: object) -> None:
        if self.lab_trace is None:
            self.lab_trace = TraceWriter(self.traces, GROUP, "lab")
        at = now_ms()
        self.lab_trace.emit(event, at_ms=at, **fields)
        label = mark_label({"event": event, **fields})
        if label is not None:
            self.marks.append((at, label))

    def injected(self, fault: str, target: str = "", text: str = "") -> None:
        """A fault struck: a line in the lab's trace (lab.jsonl, opened at its first line) and an event."""
        self._lab_line("fault_injected", fault=fault, target=target)
        self._event(text or f"{fault}: injected {target}".strip())

    def healed(self, fault: str, text: str = "", target: str = "") -> None:
        """The system is whole again after ``fault`` (on ``target``, where several may be open): the analysis
        judges every partition owned again within session timeout + 1 s of this line."""
        self._lab_line("fault_healed", fault=fault, target=target, session_timeout_ms=self.plan.session_timeout_ms)
        self._event(text or f"{fault}: healed")

    def _event(self, text: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {text}")

    def migrate(self, rollback: bool = False) -> None:
        """``zkconsumer migrate`` (``--rollback``) in the background, in a process of its own (lab/migrations.py)."""
        self.migrations.start(rollback)

    def kill_driver(self) -> None:
        self.migrations.kill()

    def join_stranger(self, name: str) -> None:
        """``join-stranger``: ``name`` started without ``--migratable`` (zkconsumer consume refuses a group being
        migrated: its log says why, and it exits 1)."""
        self.members.start(name, [a for a in self._consumer_args(name) if a != "--migratable"])

    # ---------------------------------------------------------------------------------- where things are
    def committed(self, reg: Registry) -> dict[tuple[str, int], int]:
        """Committed offsets: ZooKeeper's, the broker's (coordinator mode), the larger of both (migration)."""
        out: dict[tuple[str, int], int] = {} if self.plan.mode is LabMode.COORDINATOR else dict(reg.offsets(GROUP))
        if self.plan.mode is not LabMode.ZOOKEEPER:
            for tp, value in self._broker_offsets().items():
                out[tp] = max(value, out.get(tp, value))
        return out

    def _broker_offsets(self) -> dict[tuple[str, int], int]:
        at, cached = self._kafka_cache
        if time.monotonic() - at < 1.0:
            return cached
        try:
            if self._kafka_offsets is None:
                self._kafka_offsets = KafkaOffsetStore(self.bootstrap, GROUP, "lab-monitor")
            got = self._kafka_offsets.fetch([TopicPartition(t, p) for (t, p) in self.produced])
            cached = {(tp.topic, tp.partition): v for tp, v in got.items() if v is not None and v >= 0}
        except Exception:  # noqa: BLE001 - the coordinator may not be up yet: shown as not committed
            pass
        self._kafka_cache = (time.monotonic(), cached)
        return cached

    def owners(self, reg: Registry) -> dict[tuple[str, int], str]:
        """Owner nodes in ZooKeeper mode; in coordinator mode what each member's trace last said it owns."""
        if self.plan.mode is LabMode.ZOOKEEPER:
            return reg.owners(GROUP)
        out = {} if self.plan.mode is LabMode.COORDINATOR else dict(reg.owners(GROUP))
        for consumer, owned in self.tail.owned.items():
            for tp in owned:
                t, _, p = tp.rpartition("-")
                out.setdefault((t, int(p)), consumer)
        return out

    # -------------------------------------------------------------------------------------------- view
    def _view(self, reg: Registry, elapsed: float) -> Group:
        self._poll_traces()
        self.members.reap()
        for e in self.tail.stalls[self._stalls_shown:]:
            errors = ", ".join(f"{api} {code}" for api, code in (e.get("join_errors") or {}).items() if code)
            self._event(f"{e['consumer']}: join not complete after {e['waited_ms'] / 1000:.0f}s "
                        f"({errors or 'no answer yet'}; group {e.get('group_state') or 'not described'})")
        self._stalls_shown = len(self.tail.stalls)
        title = (f"group {GROUP} — {self.plan.mode} mode, {self.plan.profile} profile, {self.plan.strategy} — "
                 f"{elapsed:4.0f}s" + (" (until finish)" if self.ui is not None and self.ui.open_ended
                                       else f" / {self.plan.duration:.0f}s"))
        rebalances = Counter(e["consumer"] for e in self.tail.rebalances)
        members = {name: (state, self.tail.per_consumer[f"{GROUP}_{name}"], rebalances[f"{GROUP}_{name}"])
                   for name, state in self.members.status.items()}
        events = "\n".join(self.events[-6:])
        self.read = (self.owners(reg), self.committed(reg))
        return Group(report.partitions_table(title, self.produced, *self.read),
                     report.members_table(members), f"[dim]{events}[/]")

    # --------------------------------------------------------------------------------------------- run
    def run(self, analyze: bool = False, master: str | None = None) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        self.traces.mkdir(parents=True, exist_ok=True)
        self.backend.open(self.out)
        try:
            with self.console.status(f"starting ZooKeeper and the broker ({self.backend.name} backend)..."):
                self._start_infrastructure()
        except BaseException:
            self.backend.close()
            raise
        self.console.print(f"ZooKeeper {self.zk_connect}, broker {self.bootstrap}, run directory {self.out}",
                           highlight=False)
        for topic, n in self.plan.topics.items():
            for p in range(n):
                self.produced[(topic, p)] = 0
        self.console.print(planned_assignments(self.plan))
        producer = threading.Thread(target=self._producer, daemon=True, name="lab-producer")
        producer.start()
        summary: dict = {}
        try:
            with Registry.open(self.zk_connect) as reg:
                zk_requests_at_start = self._zk_requests()
                for i in range(1, self.plan.consumers + 1):
                    self.members.start(f"c{i}")
                summary["started_ms"] = now_ms()  # the schedule's 0 on the traces' clock (compare.html's t = 0)
                self._churn_and_catch_up(reg, producer)
                if self.migrations.started:
                    summary["migration"] = self.migrations.join(90)
                summary.update(self._verify(reg))
                summary["zookeeper_requests"] = self._zk_requests() - zk_requests_at_start
                counts = self.backend.broker_request_counts()
                if counts is not None:
                    summary["broker_requests"] = sum(counts.values())
                    self.requests["broker"] = counts
        finally:
            # the churn, the catch-up and the verify are over, the members still run: what follows (every member
            # stopped) is the lab's doing, no rebalance; compare.html cuts each variant's series here
            summary["ended_ms"] = now_ms()
            self._stop_producing.set()
            for name in list(self.members.paused):  # a stopped process cannot act on SIGTERM
                self.resume(name)
            self.members.stop_all()
            self.migrations.close()  # a driver still running when the run ends (its thread was given 90 s)
            if self.lab_trace is not None:
                self.lab_trace.close()
            if self._kafka_offsets is not None:
                with contextlib.suppress(Exception):
                    self._kafka_offsets.close()
            self.backend.close()
            if self._kafka_members is not None:  # every JVM has exited: the rest of their logs is final
                self._kafka_members.close()
        summary.update(self.summarize())
        report.print_summary(self.console, summary, self.traces, self.out)
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        if analyze:
            summary["report"] = report.analyze(self.console, self.traces, self.out, master)
            if summary["commits_untraced"]:  # the analysis reads traces only: say what it could not see
                self.console.print(_commits_not_judged(self.plan), highlight=False)
        return summary

    def _churn_and_catch_up(self, reg: Registry, producer: threading.Thread) -> None:
        """The schedule's steps as their times come, the live view meanwhile; then the producer stopped and the
        group given until every partition's committed offset reaches its log end (at most ``max(20 s, 3 ×
        session timeout)``)."""
        steps = sorted(self.plan.schedule(), key=lambda s: s.at)
        started = time.monotonic()
        with Live(self._view(reg, 0), console=self.console, refresh_per_second=2) as live:
            while self._churning(elapsed := time.monotonic() - started):
                while steps and steps[0].at <= elapsed:
                    self.perform(steps.pop(0))
                live.update(self._view(reg, elapsed))
                # woken for the next step on time, not at the view's next refresh: a step's time decides races
                # (a pause's start against the last answer a member had, docs/simulation.md)
                due = steps[0].at - (time.monotonic() - started) if steps else VIEW_PERIOD_S
                self._idle(reg, elapsed, min(VIEW_PERIOD_S, max(0.0, due)))
            self._stop_producing.set()
            producer.join(30)
            self._event("producer stopped; waiting for the group to catch up")
            deadline = time.monotonic() + max(20.0, self.plan.session_timeout_ms / 1000 * 3)
            while time.monotonic() < deadline:
                live.update(self._view(reg, time.monotonic() - started))
                offsets = self.committed(reg)
                if all(offsets.get(tp, -1) >= end for tp, end in self.produced.items()):
                    break
                self._idle(reg, time.monotonic() - started)
            live.update(self._view(reg, time.monotonic() - started))

    def _verify(self, reg: Registry) -> dict:
        """The group's end state judged by its mode: the migration's own ownership check, Kafka's
        VerifyConsumerRebalance on the owner nodes, or (no owner nodes) the traces."""
        if self.plan.mode is LabMode.MIGRATE:  # the migration's own verdict: the two cannot disagree
            ownership = self._verify_migration(reg)
            # a migration that failed (rolled back or not) still fails the run: it is said in "migration"
            return {"ownership": ownership.summary(),
                    "verify_ok": ownership.ok and self.migrations.settled}
        if self.plan.mode is LabMode.ZOOKEEPER:
            result = verify(reg, GROUP)
            self.console.print()
            self.console.print("Rebalance operation successful !" if result.ok else
                               "Rebalance operation failed !\n" + "\n".join(
                                   result.problems or [str(result.error)]), highlight=False)
            return {"verify_ok": result.ok}
        # no owner nodes to verify: every partition must be owned by exactly one live member
        return {"verify_ok": self._verify_by_traces()}

    def _churning(self, elapsed: float) -> bool:
        return self.ui.churning(elapsed) if self.ui is not None else elapsed < self.plan.duration

    def _idle(self, reg: Registry, elapsed: float, wait: float = 0.5) -> None:
        """``wait`` seconds (half a second between two views, less when a step is due sooner); the live page's turn
        when one watches (woken by a click)."""
        if self.ui is None:
            time.sleep(wait)
        else:
            self.ui.turn(reg, elapsed, wait)

    def _zk_requests(self) -> int:
        """Packets the embedded ZooKeeper received so far (``mntr``); 0 with an external ZooKeeper."""
        address = self.backend.zookeeper_address()
        return (packets_received(*address) or 0) if address is not None else 0

    def _verify_migration(self, reg: Registry) -> Ownership:
        """Migrate mode: the ownership verdict ``zkconsumer migrate`` itself reaches (MigrationDriver.ownership), on
        the evidence the group's state makes authoritative: owner nodes held by registered members while any member
        uses ZooKeeper (before the migration, mixed, failed and rolled back, or rolled back), the coordinator once
        done. Waited for up to three session timeouts (a rebalance may still be settling after the last step, a killed
        member may still be in the coordinator's group until its session times out).

        Until issue 38 this read the members' traces whenever the migration's result was not exactly "rolled back",
        so after a failed step it judged owner-node holders by the ``rebalance_done`` lines of their traces and
        disagreed with the driver (docs/migration.md says how)."""
        driver = MigrationDriver(reg, GROUP, self.bootstrap, step_timeout_s=60.0)
        deadline = time.monotonic() + max(15.0, 3 * self.plan.session_timeout_ms / 1000)
        while not (verdict := driver.ownership()).ok and time.monotonic() < deadline:
            time.sleep(0.5)  # ZooKeeper and the coordinator are read again: nothing here to watch for both
        self.console.print()
        self.console.print(verdict.summary(), highlight=False)
        return verdict

    def _verify_by_traces(self) -> bool:
        """Every partition owned, once, by a member still running (what verify checks with owner nodes)."""
        self._poll_traces()
        self.members.reap()
        running = self.members.running()
        live = {f"{GROUP}_{n}" for n in running}
        seen: Counter = Counter()
        for consumer, owned in self.tail.owned.items():
            if consumer in live:
                seen.update(owned)
        # with subscriptions, a topic no live member subscribes to has no owner to check (as verify's, by owner nodes)
        subscribed = {t for n in running for t in self.plan.topics_of(n)} if self.plan.subscriptions else None
        expected = {tp_str(tp) for tp in self.produced if subscribed is None or tp[0] in subscribed}
        ok = set(seen) == expected and all(n == 1 for n in seen.values())
        self.console.print()
        self.console.print("every partition owned once by a live member" if ok else
                           f"ownership check failed: unowned {sorted(expected - set(seen))}, "
                           f"shared {sorted(tp for tp, n in seen.items() if n > 1)}", highlight=False)
        return ok

    def summarize(self) -> dict:
        self._poll_traces()
        delivered = self.tail.delivered
        produced = sum(self.produced.values())
        unique = sum(1 for (t, p, o) in delivered if o < self.produced.get((t, p), 0))
        duplicates = sum(n - 1 for n in delivered.values() if n > 1)
        durations = [e["duration_ms"] for e in self.tail.rebalances]
        split = self.tail.unseen(self.produced)
        return {
            "mode": self.plan.mode, "profile": self.plan.profile, "strategy": self.plan.strategy,
            "client": self.plan.client, "produced": produced,
            "kinds": self.plan.mixed_kinds, "commits_untraced": self.plan.commits_untraced,
            "delivered": sum(delivered.values()), "unique_delivered": unique, "duplicates": duplicates,
            # "lost": produced and never delivered; split: never readable (skipped by a reset, committed past: a
            # real loss) and unread when the run ended (a stall: analysis/unseen.py)
            "lost": produced - unique, "lost_never_readable": split.never_readable, "unread_at_end": split.unread,
            "consumer_rebalances": len(durations),
            "failed_rebalances": len(self.tail.failed), "claim_conflicts": self.tail.conflicts,
            "join_stalls": len(self.tail.stalls),
            "rebalance_ms_p50": statistics.median(durations) if durations else None,
            "rebalance_ms_max": max(durations) if durations else None,
            "malformed_trace_lines": self.tail.bad_lines, "trace_dir": str(self.traces),
            "scenario": self.plan.scenario.name if self.plan.scenario is not None else self.plan.workload,
            "not_applicable": list(self.skipped),
        }
