"""A run as data: what runs, for how long, and what happens when (docs/scenarios.md).

Pure: the types of a scenario and its expansion into timed :class:`Step` objects; reading and writing the TOML
file are reader.py and writer.py. Both worlds carry the steps out: the lab on real processes (lab/runner.py, and
for the fault and topic actions lab/faults/scenario_lab.py), the simulator on simulated ones (sim/world.py). The
built-in workloads (``churn``, ``rolling-restart``, ``scale-out``, ``migration``) and the fault matrix's faults
(``zk-leader``, ``zk-cut``, ...) are scenario files shipped in the package (zkconsumer/scenario/shipped/).

Times: ``at`` is seconds after the members started (``at = 4.5``) or a share of the run (``at = "15%"``), so a
workload keeps its shape when ``--duration`` changes. A member is named (``"c2"``), or ``"new"`` (the next name not
used yet: a join), or ``"each"`` (every member started at the beginning, one after the other, spread evenly from
``at`` to ``until``). ``count`` repeats a join (``"to-partitions"``: until there are as many members as the
largest topic has partitions), spread the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NoReturn

from zkconsumer.errors import ZkConsumerError


class ActionKind(StrEnum):
    """What a step does. Member actions name a member; the others act on the group's topics, on the servers or on
    the run. The values are what a scenario file writes in ``do`` (and what ``--nemesis`` draws from)."""

    JOIN = "join"  # start a member (a new one, or one that left, under its old id)
    #: start a member without ``--migratable`` (lab mode migrate: someone who did not know of the migration);
    #: ``zkconsumer consume`` refuses to join a group in the middle of a migration, and says why
    JOIN_STRANGER = "join-stranger"
    STOP = "stop"  # SIGTERM: a graceful leave
    KILL = "kill"  # SIGKILL: a crash, healed by the session's expiry
    RESTART = "restart"  # start a stopped or killed member again under the same id
    BOUNCE = "bounce"  # stop, wait for the exit, start again: one member's deploy
    PAUSE = "pause"  # SIGSTOP for ``seconds``, then SIGCONT: a long garbage-collection pause
    MIGRATE = "migrate"  # ``zkconsumer migrate`` on the whole group (lab mode migrate)
    ROLLBACK = "rollback"  # ``zkconsumer migrate --rollback``
    #: SIGKILL of every running ``zkconsumer migrate`` (lab mode migrate): the plan stays where the driver left it,
    #: the members run on as it says; a later ``migrate`` resumes (the dead driver's lease is taken over at once)
    KILL_DRIVER = "kill-driver"
    CUT_ZK = "cut-zk"  # a member's ZooKeeper link blackholed in its proxy for ``seconds``, then passing again
    SLOW_ZK = "slow-zk"  # a member's ZooKeeper link delayed by ``latency_ms`` each way for ``seconds``
    EXPIRE = "expire"  # a member's ZooKeeper session closed from outside (a twin client on its id and password)
    CUT_BROKER = "cut-broker"  # a member's every broker connection blackholed in its proxy for ``seconds``
    SLOW_BROKER = "slow-broker"  # a member's broker connections delayed by ``latency_ms`` each way for ``seconds``
    KILL_ZK = "kill-zk"  # SIGKILL of a ZooKeeper node (``node``: 1..N, leader, follower), restarted after ``seconds``
    RESTART_ZK = "restart-zk"  # a killed ZooKeeper node started again (``node``, or every node down)
    QUORUM_LOSS = "quorum-loss"  # a majority of the ensemble SIGKILLed for ``seconds``, then started again
    KILL_BROKER = "kill-broker"  # SIGKILL of the broker process, restarted (same port, same log) after ``seconds``
    RESTART_BROKER = "restart-broker"  # the killed broker started again on its port and log
    #: SIGKILL of the broker that coordinates the group, in a 3-broker Apache Kafka cluster with every internal
    #: topic replicated three times, restarted after ``seconds``: the coordinator fails over to another broker
    KILL_COORDINATOR = "kill-coordinator"
    CREATE_TOPIC = "create-topic"  # a new ``topic`` with ``partitions``, matched by the run's ``whitelist``
    ADD_PARTITIONS = "add-partitions"  # ``topic`` grown to ``partitions`` in total, under a live group

    @property
    def on_member(self) -> bool:
        return self in MEMBER_ACTIONS

    @property
    def on_zookeeper_session(self) -> bool:
        """Strikes a member's own ZooKeeper session or link: nothing to strike for a coordinator-mode member."""
        return self in (ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.EXPIRE)

    @property
    def on_broker_link(self) -> bool:
        """Strikes one member's link to the broker (fetches, and the coordinator's traffic where it has one): the
        member connects through a proxy that the lab's broker advertises to it alone."""
        return self in (ActionKind.CUT_BROKER, ActionKind.SLOW_BROKER)

    @property
    def on_zookeeper_nodes(self) -> bool:
        """Stops or starts ZooKeeper servers: the run needs an ensemble the lab started itself."""
        return self in (ActionKind.KILL_ZK, ActionKind.RESTART_ZK, ActionKind.QUORUM_LOSS)

    @property
    def on_broker(self) -> bool:
        """Kills or starts the broker: the run needs the broker as a process of the lab's own."""
        return self in (ActionKind.KILL_BROKER, ActionKind.RESTART_BROKER)

    @property
    def on_cluster(self) -> bool:
        """Kills a broker of a replicated Apache Kafka cluster that compare starts for the run: only a cluster of
        several brokers has another broker to take the group over."""
        return self is ActionKind.KILL_COORDINATOR

    @property
    def on_migration(self) -> bool:
        """Runs or kills ``zkconsumer migrate``: only a lab in migrate mode has a migration to drive."""
        return self in (ActionKind.MIGRATE, ActionKind.ROLLBACK, ActionKind.KILL_DRIVER, ActionKind.JOIN_STRANGER)

    @property
    def starts_member(self) -> bool:
        """Starts a member that is not running (a new name, or one that left)."""
        return self in (ActionKind.JOIN, ActionKind.JOIN_STRANGER)

    @property
    def on_topics(self) -> bool:
        return self in (ActionKind.CREATE_TOPIC, ActionKind.ADD_PARTITIONS)

    @property
    def fault(self) -> bool:
        """Written to the lab's trace as ``fault_injected`` / ``fault_healed`` (docs/trace.md), so the analysis
        judges "owned again within session timeout + 1 s of the heal"; a fault lab carries these out
        (zkconsumer/lab/faults/scenario_lab.py)."""
        return (self.on_zookeeper_session or self.on_broker_link or self.on_zookeeper_nodes or self.on_broker
                or self.on_cluster or self is ActionKind.PAUSE)

    @property
    def needs_fault_lab(self) -> bool:
        """Needs handles a plain lab lacks (an ensemble, a broker process, proxies, the lab's trace)."""
        return self.fault and self is not ActionKind.PAUSE or self.on_topics


MEMBER_ACTIONS = {ActionKind.JOIN, ActionKind.JOIN_STRANGER, ActionKind.STOP, ActionKind.KILL, ActionKind.RESTART,
                  ActionKind.BOUNCE, ActionKind.PAUSE, ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.EXPIRE,
                  ActionKind.CUT_BROKER, ActionKind.SLOW_BROKER}
#: Actions that last ``seconds`` (required), and those where ``seconds`` is optional (the heal comes with it;
#: without it a later restart-zk / restart-broker heals).
TIMED = {ActionKind.PAUSE, ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.CUT_BROKER, ActionKind.SLOW_BROKER,
          ActionKind.QUORUM_LOSS, ActionKind.KILL_COORDINATOR}
OPTIONALLY_TIMED = {ActionKind.KILL_ZK, ActionKind.KILL_BROKER}
#: ``node`` of a kill-zk: a server id, or the role the node has when the step runs.
LEADER, FOLLOWER = "leader", "follower"
ZOOKEEPER_NODES = (1, 3, 5)
TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
NODE_ACTIONS = {k.value for k in ActionKind if k.on_zookeeper_nodes}
#: A member reference that names no member by itself.
NEW, EACH = "new", "each"
#: ``count`` for a join: as many members as the largest topic has partitions.
TO_PARTITIONS = "to-partitions"


class LabMode(StrEnum):
    """How a lab run's group runs (``lab --mode``, a compare variant's mode, a summary's ``mode``). It names a
    scenario's surroundings, not its steps: the same scenario runs in either mode, and only a lab in migrate mode
    carries out ``migrate`` and ``rollback``."""

    ZOOKEEPER = "zookeeper"  # 0.8 members: the rebalance in ZooKeeper
    COORDINATOR = "coordinator"  # the same workload on the broker's group coordinator
    MIGRATE = "migrate"  # 0.8 members started ``--migratable``, moved to the coordinator by ``zkconsumer migrate``


class MemberKind(StrEnum):
    """What a member named in ``[kinds]`` runs in a run in ZooKeeper mode: one 0.8 group may mix them, as Kafka
    0.8.2.2's own consumers and zkconsumer's share groups (the values are what the file writes)."""

    DEFAULT = "default"  # zkconsumer, its default profile
    KAFKA_08 = "kafka-0.8"  # zkconsumer, the profile faithful to Kafka 0.8
    KAFKA_0822 = "kafka-0.8.2.2"  # Apache Kafka 0.8.2.2's own high-level consumer, a JVM


class ScenarioError(ZkConsumerError, ValueError):
    """A scenario file that cannot be run as written; the message names the file, the line and the key."""

    def __init__(self, source: str, line: int | None, key: str, problem: str) -> None:
        self.source, self.line, self.key, self.problem = source, line, key, problem
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")


@dataclass(frozen=True)
class Step:
    """One timed action, as the lab carries it out: ``at`` seconds after the members started."""

    at: float
    action: ActionKind
    consumer: str = ""
    seconds: float = 0.0  # pause, cut-zk, slow-zk, quorum-loss (and kill-zk / kill-broker if given): how long
    node: int | str | None = None  # kill-zk / restart-zk: a server id, "leader" or "follower" (None: every one down)
    topic: str = ""  # create-topic / add-partitions
    partitions: int = 0  # create-topic: its partitions; add-partitions: the new total
    latency_ms: float = 0.0  # slow-zk: added each way

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", ActionKind(self.action))


@dataclass(frozen=True)
class Action:
    """One ``[[actions]]`` entry as written (before expansion)."""

    at: float | str  # seconds, or "15%"
    kind: ActionKind
    member: str = ""
    until: float | str | None = None
    count: int | str = 1
    seconds: float = 0.0
    node: int | str | None = None
    topic: str = ""
    partitions: int = 0
    latency_ms: float = 0.0
    line: int | None = None  # where it is written, for errors found when it is expanded


@dataclass(frozen=True)
class Scenario:
    """A whole run. Unset settings keep the lab's defaults (``None``)."""

    name: str
    description: str = ""
    source: str = "<scenario>"
    duration: float | None = None
    members: int | None = None
    rate: float | None = None
    initial_records: int | None = None
    session_timeout_ms: int | None = None
    commit_interval_ms: int | None = None
    strategy: str | None = None
    topics: dict[str, int] = field(default_factory=dict)
    #: members subscribe by this regex (Kafka's whitelist) instead of naming the topics: what create-topic needs
    whitelist: str | None = None
    #: ZooKeeper servers the run starts; None: 3 when an action stops a node, else 1 (see :attr:`ensemble`)
    zookeeper_nodes: int | None = None
    actions: tuple[Action, ...] = ()
    #: Kafka consumer properties given to every member (``[properties]``, by Kafka's names, values as written)
    properties: dict[str, int | bool | str] = field(default_factory=dict)
    #: members that consume only some of the topics (``[subscriptions]``); the others consume every topic
    subscriptions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: members of another kind than the run's (``[kinds]``), in a run in ZooKeeper mode: a mixed 0.8 group
    kinds: dict[str, MemberKind] = field(default_factory=dict)
    #: where the subscriptions and kinds are written (``"subscriptions"``, ``"subscriptions.c3"``, ``"kinds.c1"``),
    #: for errors found when the run's members are known; not part of what the scenario says
    lines: dict[str, int | None] = field(default_factory=dict, compare=False, repr=False)
    #: a member action on a member not running by then is an error (a user's file); the built-in workloads are
    #: written for three members and adapt to fewer: such a step is skipped by the lab, which says so
    strict: bool = True

    def steps(self, duration: float, members: int, topics: Mapping[str, int]) -> list[Step]:
        """The actions as timed steps for a run of ``duration`` seconds that starts ``members`` members (c1..cN)
        on ``topics``, in time order (the file's order among equal times). The subscriptions are checked against
        the members the run starts and joins (known only now: ``--consumers`` may change how many start)."""
        steps = expand(self.actions, duration, members, topics, self.source, self.strict, self.ensemble)
        if self.strict:
            self._check_subscriptions(steps, members)
            self._check_named("kinds", self.kinds, steps, members)
        return steps

    def _check_named(self, table: str, names: Mapping[str, object], steps: list[Step], members: int) -> None:
        """Every member named in ``[table]`` runs at some time."""
        first = [f"c{n}" for n in range(1, members + 1)]
        joined = [s.consumer for s in steps if s.action is ActionKind.JOIN and s.consumer not in first]
        for name in names:
            if name not in set(first) | set(joined):
                raise ScenarioError(self.source, self.lines.get(f"{table}.{name}"), key_name((table, name)),
                                    f"{name!r} never runs: the run starts c1..c{members} and joins "
                                    f"{', '.join(dict.fromkeys(joined)) or 'nobody'}")

    def _check_subscriptions(self, steps: list[Step], members: int) -> None:
        """Every member named in ``[subscriptions]`` runs at some time; and, when every member of the run is named
        there, every topic is consumed by one of them (else its records would all count as lost)."""
        if not self.subscriptions:
            return
        self._check_named("subscriptions", self.subscriptions, steps, members)
        first = [f"c{n}" for n in range(1, members + 1)]
        running = set(first) | {s.consumer for s in steps if s.action is ActionKind.JOIN}
        if running <= set(self.subscriptions):
            consumed = {t for name in running for t in self.subscriptions[name]}
            missing = [t for t in self.topics if t not in consumed]
            if missing:
                raise ScenarioError(self.source, self.lines.get("subscriptions"), "subscriptions",
                                    f"no member subscribes to {', '.join(missing)}: every member of the run is listed "
                                    "and none has it, so its records would all count as lost")

    @property
    def ensemble(self) -> int:
        """ZooKeeper servers the run needs: as set, or 3 when an action stops a node (a quorum survives one)."""
        if self.zookeeper_nodes is not None:
            return self.zookeeper_nodes
        return 3 if any(a.kind.on_zookeeper_nodes for a in self.actions) else 1

    @property
    def needs_fault_lab(self) -> bool:
        """Some action needs a fault lab's handles (zkconsumer/lab/faults/scenario_lab.py)."""
        return any(a.kind.needs_fault_lab for a in self.actions) or self.ensemble > 1



# ---------------------------------------------------------------------------------------------- expanding
def expand(actions: Iterable[Action], duration: float, members: int, topics: Mapping[str, int],
           source: str = "<scenario>", strict: bool = True, ensemble: int | None = None) -> list[Step]:
    """Resolve shares of the run, ``new``, ``each`` and ``count`` into steps, sorted by time (stable; ``new``
    numbers the joins in the file's order). A member action on a name not running by then (not started at the
    beginning, not joined before) is an error: the lab would otherwise skip it without a word. So is a server or
    topic action that cannot happen then (see :func:`_check_servers_and_topics`)."""
    actions = list(actions)
    timed: list[tuple[Step, int]] = []
    next_member = members + 1
    for i, action in enumerate(actions):
        start = _seconds(action.at, duration)
        end = _seconds(action.until, duration) if action.until is not None else None
        if action.member == EACH:
            names = [f"c{n}" for n in range(1, members + 1)]
        elif action.member == NEW:
            n = max(0, max(topics.values(), default=0) - (next_member - 1)) if action.count == TO_PARTITIONS \
                else int(action.count)
            names = [f"c{next_member + k}" for k in range(n)]
            next_member += n
        else:
            names = [action.member]
        span = (end - start) if end is not None else 0.0
        for k, name in enumerate(names):
            at = start + span * k / max(1, len(names))
            timed.append((Step(at, action.kind, name, action.seconds, action.node, action.topic, action.partitions,
                               action.latency_ms), i))
    timed.sort(key=lambda pair: pair[0].at)
    first = {f"c{n}" for n in range(1, members + 1)}
    known = set(first)
    for step, i in timed:
        if step.action.starts_member:
            known.add(step.consumer)
        elif strict and step.action.on_member and step.consumer not in known:
            raise ScenarioError(source, actions[i].line, f"actions[{i}].member",
                                f"{step.consumer!r} is not running at {step.at:.1f} s: the run starts "
                                f"c1..c{members} and joins {', '.join(sorted(known - first)) or 'nobody'}"
                                " before then")
    if ensemble is None:
        ensemble = 3 if any(a.kind.on_zookeeper_nodes for a in actions) else 1
    _check_servers_and_topics(timed, actions, duration, topics, source, ensemble)
    return [step for step, _ in timed]


def _check_servers_and_topics(timed: list[tuple[Step, int]], actions: list[Action], duration: float,
                              topics: Mapping[str, int], source: str, ensemble: int) -> None:
    """Follow the servers and topics through the run and refuse what cannot happen when it is written: a second
    ZooKeeper node down where that loses the quorum (quorum-loss is the action for that), a node restarted that is
    not down, the broker killed twice or restarted while it runs, a run that ends with the broker down (its
    catch-up reads the broker's log), a fault healed after the run's end, a topic created twice or grown that does
    not exist, or grown by no partition. Roles (``leader``) are resolved when the step runs, so a node killed by
    role counts as one node down, whichever it is."""

    def fail(i: int, key: str, problem: str) -> NoReturn:
        raise ScenarioError(source, actions[i].line, f"actions[{i}].{key}", problem)

    ends = [(step.at + step.seconds, 0, step, i) for step, i in timed
            if step.action in (TIMED | OPTIONALLY_TIMED) - {ActionKind.PAUSE} and step.seconds > 0]
    for end, _, step, i in ends:
        if end > duration + 1e-9:
            fail(i, "seconds", f"'{step.action}' at {step.at:.1f} s heals at {end:.1f} s, after the run's end at "
                               f"{duration:.1f} s: the run must end whole")
    # ends before starts at the same instant: a node restarted at 10 s may be killed again at 10 s
    timeline = sorted([*ends, *((step.at, 1, step, i) for step, i in timed)], key=lambda e: (e[0], e[1]))
    quorum = ensemble // 2 + 1
    down: list[int | str] = []  # ZooKeeper nodes down: server ids, or roles resolved when the step runs
    broker_down: int | None = None  # the action that killed it
    coordinator_down = False  # a kill-coordinator not healed yet
    sizes = dict(topics)
    for t, is_start, step, i in timeline:
        kind = step.action
        if not is_start:  # a timed fault heals
            if kind is ActionKind.KILL_ZK and step.node in down:
                down.remove(step.node)
            elif kind is ActionKind.QUORUM_LOSS:
                down.clear()
            elif kind is ActionKind.KILL_BROKER:
                broker_down = None
            elif kind is ActionKind.KILL_COORDINATOR:
                coordinator_down = False
            continue
        if kind is ActionKind.KILL_ZK:
            if isinstance(step.node, int) and step.node in down:
                fail(i, "node", f"node {step.node} is down already at {t:.1f} s")
            if len(down) + 1 >= quorum:
                fail(i, "do", f"{len(down)} of {ensemble} ZooKeeper nodes are down at {t:.1f} s already: another "
                              "loses the quorum (quorum-loss does that on purpose)")
            down.append(step.node)  # type: ignore[arg-type]
        elif kind is ActionKind.RESTART_ZK:
            if not down:
                fail(i, "do", f"no ZooKeeper node is down at {t:.1f} s")
            if step.node is None:
                down.clear()
            elif step.node in down:
                down.remove(step.node)
            elif all(isinstance(n, int) for n in down):
                fail(i, "node", f"node {step.node} is not down at {t:.1f} s (down: "
                                f"{', '.join(map(str, down))})")
            else:
                down.remove(next(n for n in down if isinstance(n, str)))  # the node killed by its role, maybe
        elif kind is ActionKind.QUORUM_LOSS:
            if down:
                fail(i, "do", f"ZooKeeper nodes are down at {t:.1f} s already: quorum-loss stops a majority of a "
                              "whole ensemble")
            down.extend([LEADER] * quorum)
        elif kind is ActionKind.KILL_BROKER:
            if broker_down is not None:
                fail(i, "do", f"the broker is down already at {t:.1f} s")
            broker_down = i
        elif kind is ActionKind.KILL_COORDINATOR:
            if coordinator_down:
                fail(i, "do", f"a coordinator's broker is down already at {t:.1f} s: one broker of three at a time")
            coordinator_down = True
        elif kind is ActionKind.RESTART_BROKER:
            if broker_down is None:
                fail(i, "do", f"the broker runs at {t:.1f} s: nothing to restart")
            broker_down = None
        elif kind is ActionKind.CREATE_TOPIC:
            if step.topic in sizes:
                fail(i, "topic", f"{step.topic!r} exists already at {t:.1f} s")
            sizes[step.topic] = step.partitions
        elif kind is ActionKind.ADD_PARTITIONS:
            if step.topic not in sizes:
                fail(i, "topic", f"no topic {step.topic!r} at {t:.1f} s: the run has "
                                 f"{', '.join(sorted(sizes)) or 'none'}")
            if step.partitions <= sizes[step.topic]:
                fail(i, "partitions", f"{step.topic!r} has {sizes[step.topic]} partitions at {t:.1f} s: partitions "
                                      "is the new total, and a topic only grows")
            sizes[step.topic] = step.partitions
    if broker_down is not None:
        fail(broker_down, "do", "the run ends with the broker down (its catch-up reads the broker's log): give the "
                                "kill seconds, or restart it with restart-broker")


def _seconds(value: float | str, duration: float) -> float:
    if isinstance(value, str):
        return duration * float(value.rstrip("%")) / 100.0
    return float(value)


# ------------------------------------------------------------------------------------- error locations

def key_name(key: tuple) -> str:
    """A key as TOML writes it: ``actions[2].do``, ``properties."rebalance.max.retries"``."""
    out = ""
    for part in key:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        name = str(part) if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f'"{part}"'
        out += f".{name}" if out else name
    return out
