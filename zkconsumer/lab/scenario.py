"""A lab run as data: a scenario file (TOML) says what runs, for how long, and what happens when (docs/scenarios.md).

Pure: parsing, checking and expanding a scenario into timed :class:`Step` objects does no I/O beyond reading the
file, so every rule is unit-tested alone; the lab (runner.py) carries the steps out, and for the fault and topic
actions (a ZooKeeper server or the leader killed, quorum loss, a member's ZooKeeper link cut or slowed, its session
expired, the broker killed, a topic created or grown) a ScenarioLab does (lab/faults/scenario_lab.py), whose
ensemble, broker process and proxies follow from the actions. The built-in workloads (``churn``,
``rolling-restart``, ``scale-out``, ``migration``) and the fault matrix's faults (``zk-leader``, ``zk-cut``, ...)
are scenario files shipped in the package (zkconsumer/lab/scenarios/), read the same way as a user's.

A malformed file raises one :class:`ScenarioError` naming the file, the line and the key, e.g.
``churn.toml:14: actions[2].do: unknown action 'kil'; one of: join, stop, kill, ...``.

Times: ``at`` is seconds after the members started (``at = 4.5``) or a share of the run (``at = "15%"``), so a
workload keeps its shape when ``--duration`` changes. A member is named (``"c2"``), or ``"new"`` (the next name not
used yet: a join), or ``"each"`` (every member started at the beginning, one after the other, spread evenly from
``at`` to ``until``). ``count`` repeats a join (``"to-partitions"``: until there are as many members as the
largest topic has partitions), spread the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from zkconsumer.config import ConfigError, ConsumerConfig, property_kind, property_names
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.layout import LayoutError, whitelist


class ActionKind(StrEnum):
    """What a step does. Member actions name a member; the others act on the group's topics, on the servers or on
    the run. The values are what a scenario file writes in ``do`` (and what ``--nemesis`` draws from)."""

    JOIN = "join"  # start a member (a new one, or one that left, under its old id)
    STOP = "stop"  # SIGTERM: a graceful leave
    KILL = "kill"  # SIGKILL: a crash, healed by the session's expiry
    RESTART = "restart"  # start a stopped or killed member again under the same id
    BOUNCE = "bounce"  # stop, wait for the exit, start again: one member's deploy
    PAUSE = "pause"  # SIGSTOP for ``seconds``, then SIGCONT: a long garbage-collection pause
    MIGRATE = "migrate"  # ``zkconsumer migrate`` on the whole group (lab mode migrate)
    ROLLBACK = "rollback"  # ``zkconsumer migrate --rollback``
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
        return self in _MEMBER_ACTIONS

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


_MEMBER_ACTIONS = {ActionKind.JOIN, ActionKind.STOP, ActionKind.KILL, ActionKind.RESTART, ActionKind.BOUNCE,
                   ActionKind.PAUSE, ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.EXPIRE, ActionKind.CUT_BROKER,
                   ActionKind.SLOW_BROKER}
#: Actions that last ``seconds`` (required), and those where ``seconds`` is optional (the heal comes with it;
#: without it a later restart-zk / restart-broker heals).
_TIMED = {ActionKind.PAUSE, ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.CUT_BROKER, ActionKind.SLOW_BROKER,
          ActionKind.QUORUM_LOSS, ActionKind.KILL_COORDINATOR}
_OPTIONALLY_TIMED = {ActionKind.KILL_ZK, ActionKind.KILL_BROKER}
#: ``node`` of a kill-zk: a server id, or the role the node has when the step runs.
LEADER, FOLLOWER = "leader", "follower"
ZOOKEEPER_NODES = (1, 3, 5)
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_NODE_ACTIONS = {k.value for k in ActionKind if k.on_zookeeper_nodes}
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
                raise ScenarioError(self.source, self.lines.get(f"{table}.{name}"), _Locator._name((table, name)),
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


# ---------------------------------------------------------------------------------------------- reading
_TOP = {"name": str, "description": str, "duration": (int, float), "members": int, "rate": (int, float),
        "initial_records": int, "session_timeout_ms": int, "commit_interval_ms": int, "strategy": str,
        "topics": dict, "whitelist": str, "zookeeper_nodes": int, "actions": list, "properties": dict,
        "subscriptions": dict, "kinds": dict}
_ACTION_KEYS = {"at", "do", "member", "until", "count", "seconds", "node", "topic", "partitions", "latency_ms"}
_STRATEGIES = ("range", "roundrobin", "roundrobin-relaxed")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def builtin(name: str) -> Scenario:
    """A scenario shipped in the package (zkconsumer/lab/scenarios/NAME.toml)."""
    files = resources.files("zkconsumer.lab") / "scenarios"
    path = files / f"{name}.toml"
    if not path.is_file():
        raise ScenarioError(f"{name}.toml", None, "", f"no built-in scenario {name!r}; built in: "
                                                      f"{', '.join(builtin_names()) or 'none in this installation'}")
    return dataclasses.replace(loads(path.read_text(), f"scenarios/{name}.toml"), strict=False)


def builtin_names() -> list[str]:
    """The shipped scenarios' names; none where the package came without its data (a zip of .py files only): the
    CLI, which lists them in its help, must still start there."""
    files = resources.files("zkconsumer.lab") / "scenarios"
    if not files.is_dir():
        return []
    return sorted(p.name.removesuffix(".toml") for p in files.iterdir() if p.name.endswith(".toml"))


def load(path: str | Path) -> Scenario:
    """Read a scenario file; any problem is one :class:`ScenarioError` naming the file, line and key."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ScenarioError(str(path), None, "", f"cannot read it: {e.strerror or e}") from None
    return loads(text, str(path))


def loads(text: str, source: str = "<scenario>") -> Scenario:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = getattr(e, "lineno", None) or _line_of_decode_error(str(e), text)
        problem = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)$", "", getattr(e, "msg", None) or str(e))
        raise ScenarioError(source, line, "", f"not valid TOML: {problem}") from None
    where = _Locator(text, source)
    for key, value in data.items():
        if key not in _TOP:
            where.fail((key,), f"unknown key; expected one of: {', '.join(_TOP)}")
        if not isinstance(value, _TOP[key]) or isinstance(value, bool):
            where.fail((key,), f"expected {_type_name(_TOP[key])}, got {value!r}")
    name = data.get("name") or Path(source).stem
    duration = data.get("duration")
    if duration is not None and duration <= 0:
        where.fail(("duration",), "must be > 0 seconds")
    members = data.get("members")
    if members is not None and members < 1:
        where.fail(("members",), "must be at least 1")
    for key in ("rate",):
        if key in data and data[key] < 0:
            where.fail((key,), "must be >= 0")
    for key in ("initial_records", "session_timeout_ms", "commit_interval_ms"):
        if key in data and data[key] < (0 if key == "initial_records" else 1):
            where.fail((key,), "must be positive")
    strategy = data.get("strategy")
    if strategy is not None and strategy not in _STRATEGIES:
        where.fail(("strategy",), f"unknown strategy {strategy!r}; one of: {', '.join(_STRATEGIES)}")
    topics = {}
    for topic, n in (data.get("topics") or {}).items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            where.fail(("topics", topic), f"partitions must be an integer >= 1, got {n!r}")
        topics[topic] = n
    nodes = data.get("zookeeper_nodes")
    if nodes is not None and nodes not in ZOOKEEPER_NODES:
        where.fail(("zookeeper_nodes",), f"an ensemble has an odd number of servers: one of "
                                         f"{', '.join(map(str, ZOOKEEPER_NODES))}, got {nodes!r}")
    raw_whitelist = data.get("whitelist")
    if raw_whitelist is not None:
        try:
            allows = whitelist(raw_whitelist).allows
        except LayoutError as e:
            where.fail(("whitelist",), str(e))
        for topic in topics:
            if not allows(topic):
                where.fail(("topics", topic), f"does not match the whitelist {raw_whitelist!r}: no member would "
                                              "consume it")
    raw_actions = data.get("actions") or []
    ensemble = nodes if nodes is not None else (
        3 if any(isinstance(a, dict) and a.get("do") in _NODE_ACTIONS for a in raw_actions) else 1)
    actions = tuple(_action(where, i, a, ensemble, nodes is not None, raw_whitelist)
                    for i, a in enumerate(raw_actions))
    properties = _properties(where, data.get("properties") or {})
    subscriptions = _subscriptions(where, data.get("subscriptions") or {}, topics, raw_whitelist)
    kinds = _kinds(where, data.get("kinds") or {}, raw_whitelist)
    lines = {"subscriptions": where.line(("subscriptions",)),
             **{f"subscriptions.{m}": where.line(("subscriptions", m)) for m in subscriptions},
             **{f"kinds.{m}": where.line(("kinds", m)) for m in kinds}}
    return Scenario(name=name, description=data.get("description", ""), source=source,
                    duration=float(duration) if duration is not None else None, members=members,
                    rate=float(data["rate"]) if "rate" in data else None,
                    initial_records=data.get("initial_records"), session_timeout_ms=data.get("session_timeout_ms"),
                    commit_interval_ms=data.get("commit_interval_ms"), strategy=strategy, topics=topics,
                    whitelist=raw_whitelist, zookeeper_nodes=nodes, actions=actions, properties=properties,
                    subscriptions=subscriptions, kinds=kinds, lines=lines)


#: Properties the lab sets for each member itself, and what to write instead.
_SET_BY_THE_LAB = {
    "group.id": "the lab names the group", "consumer.id": "each member's id is its name",
    "zookeeper.connect": "the lab's ZooKeeper", "bootstrap.servers": "the lab's broker",
    "zkconsumer.trace.dir": "the run directory's traces/", "zkconsumer.profile": "--profile, or compare's variant",
    "group.instance.id": "compare's static variant, one per member", "partition.assignment.strategy": "use strategy",
    "zookeeper.session.timeout.ms": "use session_timeout_ms", "session.timeout.ms": "use session_timeout_ms",
    "auto.commit.interval.ms": "use commit_interval_ms",
    "auto.offset.reset": "smallest: the lab checks that every record produced is consumed",
}


def _properties(where: _Locator, raw: dict) -> dict[str, int | bool | str]:
    """``[properties]``: Kafka consumer properties by Kafka's names (config.py knows them), each value of its
    property's type and accepted by the consumer's own checks (ConsumerConfig.validate)."""
    for name, value in raw.items():
        key = ("properties", name)
        kind = property_kind(name)
        if kind is None:
            close = difflib.get_close_matches(name, property_names(), n=1)
            where.fail(key, "not a consumer property" + (f"; did you mean {close[0]!r}?" if close else
                                                         " (docs/profiles.md lists them)"))
        if name in _SET_BY_THE_LAB:
            where.fail(key, f"set by the lab for each member ({_SET_BY_THE_LAB[name]})")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            where.fail(key, f"expected {_type_name(kind)}, got {value!r}")
    try:
        ConsumerConfig.from_properties({"group.id": "lab", **raw})
    except ConfigError as whole:  # the property to blame: the first one refused alone, else the table
        for name, value in raw.items():
            try:
                ConsumerConfig.from_properties({"group.id": "lab", name: value})
            except ConfigError as e:
                where.fail(("properties", name), str(e))
        where.fail(("properties",), str(whole))
    return dict(raw)


def _subscriptions(where: _Locator, raw: dict, topics: Mapping[str, int],
                   topic_filter: str | None) -> dict[str, tuple[str, ...]]:
    """``[subscriptions]``: a member's name and the topics of ``[topics]`` it consumes (the names are checked
    against the run's members when it is expanded: :meth:`Scenario.steps`)."""
    if raw and topic_filter is not None:
        where.fail(("subscriptions",), "the members subscribe by the whitelist regex here: a list of topics per "
                                       "member needs the topics named in [topics] and no whitelist")
    if raw and not topics:
        where.fail(("subscriptions",), "name the run's topics in [topics]: a subscription is a list of some of them")
    out = {}
    for name, value in raw.items():
        key = ("subscriptions", name)
        if name in (NEW, EACH):
            where.fail(key, f"a member's name such as 'c3' ({name!r} names no member by itself)")
        if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
            where.fail(key, f"expected an array of topic names (at least one), got {value!r}")
        for topic in value:
            if topic not in topics:
                where.fail(key, f"no topic {topic!r} in [topics] ({', '.join(topics)})")
        if len(set(value)) != len(value):
            where.fail(key, f"a topic named twice: {value!r}")
        out[name] = tuple(value)
    return out


def _kinds(where: _Locator, raw: dict, topic_filter: str | None) -> dict[str, MemberKind]:
    """``[kinds]``: a member's name and what it runs (the names are checked against the run's members when it is
    expanded: :meth:`Scenario.steps`)."""
    out = {}
    for name, value in raw.items():
        key = ("kinds", name)
        if name in (NEW, EACH):
            where.fail(key, f"a member's name such as 'c3' ({name!r} names no member by itself)")
        try:
            out[name] = MemberKind(value)
        except ValueError:
            where.fail(key, f"unknown kind {value!r}; one of: {', '.join(k.value for k in MemberKind)}")
        if out[name] is MemberKind.KAFKA_0822 and topic_filter is not None:
            where.fail(key, "Kafka 0.8.2.2's consumer names its topics as the lab runs it: not in a run whose "
                            "members subscribe by the whitelist")
    return out


def _action(where: _Locator, i: int, raw: Any, ensemble: int = 1, ensemble_set: bool = False,
            topic_filter: str | None = None) -> Action:
    if not isinstance(raw, dict):
        where.fail(("actions", i), "each action is a table: [[actions]] with at = ..., do = ...")
    for key in raw:
        if key not in _ACTION_KEYS:
            where.fail(("actions", i, key), f"unknown key; an action has: {', '.join(sorted(_ACTION_KEYS))}")
    for key in ("at", "do"):
        if key not in raw:
            where.fail(("actions", i, key), "missing")
    try:
        kind = ActionKind(raw["do"])
    except ValueError:
        where.fail(("actions", i, "do"), f"unknown action {raw['do']!r}; one of: "
                                         f"{', '.join(k.value for k in ActionKind)}")
    at = _time(where, ("actions", i, "at"), raw["at"])
    until = _time(where, ("actions", i, "until"), raw["until"]) if "until" in raw else None
    member = raw.get("member", "")
    if not isinstance(member, str):
        where.fail(("actions", i, "member"), f"expected a member name, {NEW!r} or {EACH!r}, got {member!r}")
    if kind.on_member and not member:
        where.fail(("actions", i, "member"), f"'{kind}' needs a member (a name, {NEW!r} or {EACH!r})")
    if not kind.on_member and member:
        where.fail(("actions", i, "member"), f"'{kind}' acts on the whole group, not on a member")
    if member == NEW and kind is not ActionKind.JOIN:
        where.fail(("actions", i, "member"), f"{NEW!r} names the next member to join: only with do = 'join'")
    if member == EACH and kind is ActionKind.JOIN:
        where.fail(("actions", i, "member"), f"{EACH!r} names the members started at the beginning, which have "
                                             "joined already; use 'new' with count")
    count = raw.get("count", 1)
    if count != TO_PARTITIONS and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        where.fail(("actions", i, "count"), f"expected a number >= 1 or {TO_PARTITIONS!r}, got {count!r}")
    if count != 1 and member != NEW:
        where.fail(("actions", i, "count"), "repeats a join of new members only (member = 'new')")
    if until is not None and member != EACH and count == 1:
        where.fail(("actions", i, "until"), "spreads repeated actions (member = 'each', or count); here there is "
                                            "one")
    seconds = raw.get("seconds", 0)
    if kind in _TIMED or (kind in _OPTIONALLY_TIMED and "seconds" in raw):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            where.fail(("actions", i, "seconds"), f"'{kind}' lasts a number of seconds > 0, got {seconds!r}")
    elif "seconds" in raw:
        where.fail(("actions", i, "seconds"), f"only {_names(_TIMED | _OPTIONALLY_TIMED)} have seconds, not "
                                              f"'{kind}'")
    if kind.on_zookeeper_nodes and ensemble_set and ensemble == 1:
        where.fail(("actions", i, "do"), f"'{kind}' needs a ZooKeeper ensemble: this run has zookeeper_nodes = 1 "
                                         "(leave it out, or 3)")
    node = _node(where, i, kind, raw, ensemble)
    topic, partitions = _topic_change(where, i, kind, raw, topic_filter)
    latency = raw.get("latency_ms", 0)
    if kind in (ActionKind.SLOW_ZK, ActionKind.SLOW_BROKER):
        if isinstance(latency, bool) or not isinstance(latency, int | float) or latency <= 0:
            where.fail(("actions", i, "latency_ms"), f"a slowed link adds a number of milliseconds > 0, got "
                                                     f"{latency!r}")
    elif "latency_ms" in raw:
        where.fail(("actions", i, "latency_ms"), f"only 'slow-zk' and 'slow-broker' have latency_ms, not '{kind}'")
    return Action(at=at, kind=kind, member=member, until=until, count=count, seconds=float(seconds), node=node,
                  topic=topic, partitions=partitions, latency_ms=float(latency), line=where.line(("actions", i)))


def _names(kinds: Iterable[ActionKind]) -> str:
    ordered = [k for k in ActionKind if k in set(kinds)]
    return ", ".join(f"'{k}'" for k in ordered[:-1]) + f" and '{ordered[-1]}'" if len(ordered) > 1 else \
        f"'{ordered[0]}'"


def _node(where: _Locator, i: int, kind: ActionKind, raw: dict, ensemble: int) -> int | str | None:
    """``node`` of kill-zk (required: a server id or a role) and restart-zk (a server id; none: every node down)."""
    key = ("actions", i, "node")
    if kind not in (ActionKind.KILL_ZK, ActionKind.RESTART_ZK):
        if "node" in raw:
            where.fail(key, f"only 'kill-zk' and 'restart-zk' name a ZooKeeper node, not '{kind}'")
        return None
    if "node" not in raw:
        if kind is ActionKind.KILL_ZK:
            where.fail(key, f"'kill-zk' needs a node: 1..{ensemble}, {LEADER!r} or {FOLLOWER!r}")
        return None
    node = raw["node"]
    roles = (LEADER, FOLLOWER) if kind is ActionKind.KILL_ZK else ()
    if isinstance(node, str) and node in roles:
        return node
    if isinstance(node, bool) or not isinstance(node, int) or not 1 <= node <= ensemble:
        choices = f"1..{ensemble}" + (f", {LEADER!r} or {FOLLOWER!r}" if roles else
                                      " (a killed node is neither leader nor follower; leave node out to restart "
                                      "every node down)")
        where.fail(key, f"unknown node {node!r}: the ensemble's servers are {choices}")
    return node


def _topic_change(where: _Locator, i: int, kind: ActionKind, raw: dict, topic_filter: str | None) -> tuple[str, int]:
    """``topic`` and ``partitions`` of create-topic and add-partitions (both required there, refused elsewhere)."""
    if not kind.on_topics:
        for key in ("topic", "partitions"):
            if key in raw:
                where.fail(("actions", i, key), f"only 'create-topic' and 'add-partitions' have {key}, not '{kind}'")
        return "", 0
    for key in ("topic", "partitions"):
        if key not in raw:
            where.fail(("actions", i, key), "missing" + (": the new total" if kind is ActionKind.ADD_PARTITIONS and
                                                          key == "partitions" else ""))
    topic, partitions = raw["topic"], raw["partitions"]
    if not isinstance(topic, str) or not _TOPIC_NAME.match(topic) or topic in (".", ".."):
        where.fail(("actions", i, "topic"), f"not a topic name (letters, digits, '.', '_', '-'): {topic!r}")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        where.fail(("actions", i, "partitions"), f"expected an integer >= 1, got {partitions!r}")
    if kind is ActionKind.CREATE_TOPIC:
        if topic_filter is None:
            where.fail(("actions", i, "do"), "a created topic is consumed only by members subscribed by a regex: "
                                             "set whitelist (top level) to one the new topic matches")
        if not whitelist(topic_filter).allows(topic):
            where.fail(("actions", i, "topic"), f"does not match the whitelist {topic_filter!r}: no member would "
                                                "consume it")
    return topic, partitions


def _time(where: _Locator, key: tuple, value: Any) -> float | str:
    if isinstance(value, bool):
        where.fail(key, f"expected seconds or a share such as '15%', got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            where.fail(key, "must be >= 0 seconds")
        return float(value)
    if isinstance(value, str):
        m = _PERCENT.match(value)
        if m and float(m.group(1)) <= 100:
            return f"{float(m.group(1))}%"
    where.fail(key, f"expected seconds (a number) or a share of the run such as '15%', got {value!r}")


# ------------------------------------------------------------------------------------------- expanding
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
        if step.action is ActionKind.JOIN:
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
            if step.action in (_TIMED | _OPTIONALLY_TIMED) - {ActionKind.PAUSE} and step.seconds > 0]
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
def _type_name(t: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", dict: "a table", list: "an array of tables",
             bool: "a boolean (true or false)"}
    types = t if isinstance(t, tuple) else (t,)
    return names[float] if float in types else names[types[0]]


def _line_of_decode_error(message: str, text: str) -> int | None:
    """tomllib before Python 3.14 says where only in its message: "(at line 3, column 5)" or "(at end of
    document)"."""
    m = re.search(r"line (\d+)", message)
    if m:
        return int(m.group(1))
    return max(1, len(text.splitlines())) if "end of document" in message else None


class _Locator:
    """Finds the line of a key in the file's text (tomllib keeps none): top-level keys, ``[table]`` keys and keys
    of the n-th ``[[array]]`` table; a missing key points at its table's header."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"']+)\s*\]\]?")
    _KEY = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)\s*=")  # bare, or quoted (dots and all)

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self._found, self._headers = self._index(text.splitlines())

    def fail(self, key: tuple, problem: str) -> NoReturn:
        raise ScenarioError(self.source, self.line(key), self._name(key), problem)

    @staticmethod
    def _name(key: tuple) -> str:
        """As TOML writes the key: ``actions[2].do``, ``properties."rebalance.max.retries"``."""
        out = ""
        for part in key:
            if isinstance(part, int):
                out += f"[{part}]"
                continue
            name = str(part) if re.fullmatch(r"[A-Za-z0-9_-]+", str(part)) else f'"{part}"'
            out += f".{name}" if out else name
        return out

    @classmethod
    def _index(cls, lines: list[str]) -> tuple[dict[tuple[str | None, int, str], int], dict[tuple[str, int], int]]:
        """One pass over the file: the line of each key, by (table, n-th table of that name, key), and of each
        table header, by (table, n)."""
        table: str | None = None  # None: top level
        seen: dict[str, int] = {}
        headers: dict[tuple[str, int], int] = {}
        found: dict[tuple[str | None, int, str], int] = {}
        for number, text in enumerate(lines, start=1):
            m = cls._HEADER.match(text)
            if m:
                table = m.group(2).strip("\"'")
                seen[table] = seen.get(table, -1) + 1 if m.group(1) == "[[" else 0
                headers[(table, seen[table])] = number
                continue
            k = cls._KEY.match(text)
            if k:
                found.setdefault((table, seen.get(table, 0) if table else 0, k.group(1).strip("\"'")), number)
        return found, headers

    def line(self, key: tuple) -> int | None:
        found, headers = self._found, self._headers
        if len(key) == 1:
            return found.get((None, 0, key[0])) or headers.get((key[0], 0))
        table_name, rest = key[0], key[1:]
        index = rest[0] if isinstance(rest[0], int) else 0
        leaf = rest[-1] if not isinstance(rest[-1], int) else None
        if leaf is not None and (line := found.get((table_name, index, leaf))):
            return line
        return headers.get((table_name, index)) or found.get((None, 0, table_name))
