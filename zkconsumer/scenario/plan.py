"""The plan a run follows, in either world: the group's settings, its members' client and properties, and the timed
steps of its scenario. ``zkconsumer lab`` carries a plan out on real processes (lab/runner.py), ``zkconsumer sim`` on
simulated ones (sim/world.py); ``compare`` and the catalogue build one per variant.

Pure: a dataclass and the rules that read it; nothing here starts a process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkconsumer.apache_kafka import lab_members
from zkconsumer.errors import IllegalArgument
from zkconsumer.scenario.model import ActionKind, LabMode, Scenario, Step
from zkconsumer.scenario.properties import member_kind, member_properties, merge_properties, property_text
from zkconsumer.scenario.reader import builtin as builtin_scenario


@dataclass(frozen=True)
class GroupSettings:
    """What a run's broker sets for its group coordinator (Kafka's property names in comments)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms


#: The group every run's members join (ids ``lab_c1``, ``lab_c2``, ...), in either world.
GROUP = "lab"


#: The workloads a lab (and ``zkconsumer compare``) can run: built-in scenario files (scenario/shipped/).
WORKLOADS = ("churn", "rolling-restart", "scale-out")


@dataclass
class RunPlan:
    """What one run does: how many members of which kind and profile, on which topics, for how long, with which
    settings, and its timed steps (:meth:`schedule`). Built from a scenario (:meth:`from_scenario`), a workload, or
    given steps; the same plan runs on the lab's processes and in the simulator."""

    consumers: int = 3
    duration: float = 30.0
    profile: str = "default"
    strategy: str = "range"
    mode: LabMode = LabMode.ZOOKEEPER
    topics: dict[str, int] = field(default_factory=lambda: {"orders": 8, "payments": 4})
    rate: float = 200.0  # records per second, all partitions together
    initial_records: int = 400  # per topic, before consumers start
    session_timeout_ms: int = 6000
    commit_interval_ms: int = 1000
    #: The local broker's group.initial.rebalance.delay.ms (Kafka's default; coordinator mode and migrations).
    initial_rebalance_delay_ms: int = 3000
    #: Coordinator-mode members' max.poll.interval.ms, the rebalance timeout they send in JoinGroup: how long a
    #: coordinator may hold a rebalance for a member that does not rejoin or sync, and after how long a member whose
    #: join has not completed says so (``join_stalled``). Kafka's 5-minute default is longer than a lab run.
    rebalance_timeout_ms: int = 20000
    #: What happens to the group (:data:`WORKLOADS`): ``churn`` (a join, a graceful stop, a ``kill -9``, a join),
    #: ``rolling-restart`` (every member stopped and started again in turn, as a deploy does) or ``scale-out``
    #: (members added one by one until there are as many as the largest topic has partitions).
    workload: str = "churn"
    #: Coordinator mode: each member joins with ``group.instance.id`` = its name (static membership, KIP-345).
    static_members: bool = False
    #: The members' client: in coordinator mode ``kafka-python`` (the streams connector) or ``librdkafka``
    #: (consumer/librdkafka.py); in ZooKeeper mode zkconsumer's connector or ``kafka-0.8.2.2``, Apache Kafka
    #: 0.8.2.2's own high-level consumer (one JVM per member; its trace is rebuilt from its log, see
    #: apache_kafka/consumer_trace.py).
    client: str = "kafka-python"
    #: Extra consumer properties, e.g. ``(("group.protocol", "consumer"),)`` for KIP-848 on librdkafka, and a
    #: scenario's ``[properties]``; each member takes those its client has a counterpart for (member_properties.py)
    properties: tuple[tuple[str, str], ...] = ()
    #: Members that consume only some of :attr:`topics` (a scenario's ``[subscriptions]``); the others consume all
    subscriptions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Members of another kind than the run's (a scenario's ``[kinds]``: ``default``, ``kafka-0.8``,
    #: ``kafka-0.8.2.2``), in ZooKeeper mode: one 0.8 group of mixed members (see :meth:`kind_of`)
    kinds: dict[str, str] = field(default_factory=dict)
    steps: list[Step] | None = None
    #: A scenario file's actions (scenario/model.py), instead of the workload's; see :meth:`from_scenario`.
    scenario: Scenario | None = None
    #: Members subscribe by this regex (Kafka's whitelist) instead of naming :attr:`topics`, where their client can
    #: (zkconsumer's, in either mode); a scenario's ``whitelist``.
    whitelist: str | None = None
    #: Actions with no counterpart in this run, and why (``compare`` fills it from Variant.no_counterpart): their
    #: steps are skipped and reported n/a.
    absent: tuple[tuple[ActionKind, str], ...] = ()

    def __post_init__(self) -> None:
        self.mode = LabMode(self.mode)  # given as a string by a flag or a caller: checked here

    @classmethod
    def from_scenario(cls, scenario: Scenario, **settings) -> RunPlan:
        """A plan running ``scenario``: its settings where it sets them, else ``settings``, else the defaults."""
        own = {"duration": scenario.duration, "consumers": scenario.members, "rate": scenario.rate,
               "initial_records": scenario.initial_records, "session_timeout_ms": scenario.session_timeout_ms,
               "commit_interval_ms": scenario.commit_interval_ms, "strategy": scenario.strategy,
               "topics": dict(scenario.topics) or None, "whitelist": scenario.whitelist}
        merged = {**{k: v for k, v in own.items() if v is not None}, **{k: v for k, v in settings.items()
                                                                         if v is not None}}
        # the scenario's properties, then the given ones (a variant's: they make the variant, so they win)
        merged["properties"] = merge_properties(((k, property_text(v)) for k, v in scenario.properties.items()),
                                                merged.get("properties", ()))
        return cls(**merged, scenario=scenario, subscriptions=dict(scenario.subscriptions),
                   kinds={name: str(kind) for name, kind in scenario.kinds.items()})

    def kind_of(self, member: str) -> str:
        """What ``member`` runs: a zkconsumer profile's name, or ``kafka-0.8.2.2`` (Kafka's own consumer). Its
        ``[kinds]`` entry in ZooKeeper mode, else the run's own kind (a coordinator group takes no 0.8 member)."""
        if self.mode is LabMode.ZOOKEEPER and member in self.kinds:
            return self.kinds[member]
        return lab_members.CLIENT if self.client == lab_members.CLIENT else self.profile

    @property
    def mixed_kinds(self) -> dict[str, str]:
        """The members of another kind than the run's ([kinds], in ZooKeeper mode), with their kinds; else empty."""
        kinds = {m: self.kind_of(m) for m in self.kinds}
        return kinds if any(k != self.kind_of("") for k in kinds.values()) else {}

    @property
    def commits_untraced(self) -> bool:
        """Some member's commits are not in its trace: Kafka 0.8.2.2's own consumer, rebuilt from its log."""
        return lab_members.CLIENT in {self.kind_of(""), *map(self.kind_of, self.kinds)}

    def topics_of(self, member: str) -> list[str]:
        """The topics ``member`` subscribes to by name: its subscription, else every topic of the run."""
        return list(self.subscriptions.get(member) or self.topics)

    @property
    def subscribes_by_regex(self) -> bool:
        """The members subscribe by :attr:`whitelist`: zkconsumer's members can (librdkafka's and Kafka 0.8.2.2's,
        as the lab runs them, name their topics)."""
        return self.whitelist is not None and self.client == "kafka-python"

    def member_settings(self, name: str) -> list[tuple[str, str]]:
        """The consumer properties zkconsumer's member ``name`` runs with, in either world: the group, its id, its
        profile and strategy, where it starts, its commit interval and sessions (the group's too in coordinator and
        migrate modes), then the run's properties its kind takes (:func:`member_properties`). In order, a later one
        winning, as ``--property`` flags do. Not the run's addresses and directories (``zookeeper.connect``,
        ``bootstrap.servers``, ``zkconsumer.trace.dir``): each world gives its own, the lab's sometimes a proxy's.
        The lab passes these on ``zkconsumer consume``'s command line, the simulator builds its members'
        ConsumerConfig from them: the two cannot drift apart (tests/test_sim_world.py checks it)."""
        own = [("group.id", GROUP), ("consumer.id", name), ("auto.offset.reset", "smallest"),
               ("zkconsumer.profile", self.kind_of(name)), ("partition.assignment.strategy", self.strategy),
               ("auto.commit.interval.ms", str(self.commit_interval_ms)),
               ("zookeeper.session.timeout.ms", str(self.session_timeout_ms))]
        if self.mode is not LabMode.ZOOKEEPER:
            own += [("session.timeout.ms", str(self.session_timeout_ms)),
                    ("heartbeat.interval.ms", str(max(100, self.session_timeout_ms // 6))),
                    ("max.poll.interval.ms", str(self.rebalance_timeout_ms))]
        if self.mode is LabMode.COORDINATOR and self.static_members:
            own.append(("group.instance.id", name))
        taken, _ = member_properties(member_kind(self.mode, self.client), self.properties,
                                     self.scenario.properties if self.scenario is not None else None)
        return own + list(taken)

    def group_settings(self) -> GroupSettings:
        """The broker's coordinator settings this plan needs (its sessions may be under Kafka's 6 s minimum)."""
        return GroupSettings(self.initial_rebalance_delay_ms, min(6000, self.session_timeout_ms))

    def schedule(self) -> list[Step]:
        """The timed steps: given ones, the scenario's, or the built-in scenario of the workload (``migration`` in
        migrate mode: churn before, the migration, churn in coordinator mode after)."""
        if self.steps is not None:
            return self.steps
        scenario = self.scenario
        if scenario is None:
            if self.mode is not LabMode.MIGRATE and self.workload not in WORKLOADS:
                raise IllegalArgument(f"unknown workload {self.workload!r}; choose from {', '.join(WORKLOADS)}")
            scenario = builtin_scenario("migration" if self.mode is LabMode.MIGRATE else self.workload)
        return scenario.steps(self.duration, self.consumers, self.topics)


