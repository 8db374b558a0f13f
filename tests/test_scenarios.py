"""Scenario files (scenario/model.py, docs/scenarios.md): the format, its errors (file, line, key), the built-in
workloads as shipped files, and a lab run driven by one (a pause, a step with no counterpart said n/a)."""

from __future__ import annotations

import dataclasses
import io
import json
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from zkconsumer.cli import main
from zkconsumer.config import property_names
from zkconsumer.lab.backends import BackendError, ProcessBackend
from zkconsumer.lab.faults.scenario_lab import ScenarioLab, lab_for, session_password
from zkconsumer.lab.runner import Lab, planned_assignments
from zkconsumer.lab.variants import VARIANTS
from zkconsumer.scenario.model import ActionKind, LabMode, MemberKind, ScenarioError, Step
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.scenario.properties import KINDS, member_kind, member_properties, merge_properties
from zkconsumer.scenario.reader import _SET_BY_THE_LAB as SET_BY_THE_LAB
from zkconsumer.scenario.reader import builtin, builtin_names, load, loads


def scenario(text: str):
    return loads(textwrap.dedent(text), "s.toml")


def error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as e:
        scenario(text).steps(30.0, 3, {"orders": 8})
    return e.value


# ------------------------------------------------------------------------------------------- the format
def test_every_setting_and_action_is_read() -> None:
    s = scenario("""
        name = "gc"
        description = "a long pause"
        duration = 20
        members = 2
        rate = 50
        initial_records = 10
        session_timeout_ms = 4000
        commit_interval_ms = 300
        strategy = "roundrobin"
        whitelist = "orders|audit.*"
        zookeeper_nodes = 3

        [topics]
        orders = 6

        [[actions]]
        at = 2
        do = "join"
        member = "new"

        [[actions]]
        at = "25%"
        do = "pause"
        member = "c1"
        seconds = 6.5

        [[actions]]
        at = 8
        do = "kill"
        member = "c3"

        [[actions]]
        at = 9
        do = "restart"
        member = "c3"

        [[actions]]
        at = 10
        do = "bounce"
        member = "c2"

        [[actions]]
        at = 11
        do = "stop"
        member = "c2"

        [[actions]]
        at = 12
        do = "migrate"

        [[actions]]
        at = 13
        do = "rollback"

        [[actions]]
        at = 13.5
        do = "kill-driver"

        [[actions]]
        at = 13.75
        do = "join-stranger"
        member = "c5"
    """ + FAULTS_AND_TOPICS)
    assert (s.name, s.duration, s.members, s.rate, s.initial_records, s.session_timeout_ms, s.commit_interval_ms,
            s.strategy, s.topics, s.whitelist, s.zookeeper_nodes) == (
        "gc", 20.0, 2, 50.0, 10, 4000, 300, "roundrobin", {"orders": 6}, "orders|audit.*", 3)
    assert s.steps(20.0, 2, s.topics) == [
        Step(0.5, ActionKind.CUT_ZK, "c1", 2.0), Step(0.75, ActionKind.CUT_BROKER, "c2", 1.0),
        Step(1.0, ActionKind.SLOW_ZK, "c2", 3.0, latency_ms=250.0),
        Step(1.25, ActionKind.SLOW_BROKER, "c1", 2.0, latency_ms=100.0), Step(1.5, ActionKind.EXPIRE, "c1"),
        Step(2.0, ActionKind.JOIN, "c3"),
        Step(3.0, ActionKind.KILL_ZK, node="leader", seconds=2.0), Step(5.0, ActionKind.PAUSE, "c1", 6.5),
        Step(6.0, ActionKind.KILL_ZK, node=2), Step(7.0, ActionKind.RESTART_ZK, node=2),
        Step(7.5, ActionKind.QUORUM_LOSS, seconds=1.5), Step(8.0, ActionKind.KILL, "c3"),
        Step(9.0, ActionKind.RESTART, "c3"), Step(10.0, ActionKind.BOUNCE, "c2"), Step(11.0, ActionKind.STOP, "c2"),
        Step(12.0, ActionKind.MIGRATE, ""), Step(13.0, ActionKind.ROLLBACK, ""),
        Step(13.5, ActionKind.KILL_DRIVER, ""), Step(13.75, ActionKind.JOIN_STRANGER, "c5"),
        Step(14.0, ActionKind.KILL_BROKER),
        Step(15.0, ActionKind.RESTART_BROKER), Step(15.5, ActionKind.KILL_COORDINATOR, seconds=2.0),
        Step(16.0, ActionKind.CREATE_TOPIC, topic="audit.log", partitions=2),
        Step(17.0, ActionKind.ADD_PARTITIONS, topic="orders", partitions=9),
        Step(18.0, ActionKind.ADD_PARTITIONS, topic="audit.log", partitions=3)]
    assert {a.kind for a in s.actions} == set(ActionKind)  # every action the format knows is covered here
    assert (s.ensemble, s.needs_fault_lab) == (3, True)


#: One of each fault and topic action, appended to the file above (the lab carries them out on a ScenarioLab).
FAULTS_AND_TOPICS = """
        [[actions]]
        at = 0.5
        do = "cut-zk"
        member = "c1"
        seconds = 2

        [[actions]]
        at = 1
        do = "slow-zk"
        member = "c2"
        seconds = 3
        latency_ms = 250

        [[actions]]
        at = 0.75
        do = "cut-broker"
        member = "c2"
        seconds = 1

        [[actions]]
        at = 1.25
        do = "slow-broker"
        member = "c1"
        seconds = 2
        latency_ms = 100

        [[actions]]
        at = 1.5
        do = "expire"
        member = "c1"

        [[actions]]
        at = 3
        do = "kill-zk"
        node = "leader"
        seconds = 2

        [[actions]]
        at = 6
        do = "kill-zk"
        node = 2

        [[actions]]
        at = 7
        do = "restart-zk"
        node = 2

        [[actions]]
        at = 7.5
        do = "quorum-loss"
        seconds = 1.5

        [[actions]]
        at = 14
        do = "kill-broker"

        [[actions]]
        at = 15
        do = "restart-broker"

        [[actions]]
        at = 15.5
        do = "kill-coordinator"
        seconds = 2

        [[actions]]
        at = 16
        do = "create-topic"
        topic = "audit.log"
        partitions = 2

        [[actions]]
        at = 17
        do = "add-partitions"
        topic = "orders"
        partitions = 9

        [[actions]]
        at = 18
        do = "add-partitions"
        topic = "audit.log"
        partitions = 3
"""


def test_the_plan_takes_the_files_settings_and_flags_given_on_top() -> None:
    s = scenario("""
        duration = 20
        members = 2
        rate = 50
        [topics]
        orders = 6
    """)
    plan = RunPlan.from_scenario(s, duration=None, consumers=4)
    assert (plan.duration, plan.consumers, plan.rate, plan.topics, plan.strategy) == (20.0, 4, 50.0, {"orders": 6},
                                                                                     "range")


@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("duration", [20.0, 30.0, 61.0])
def test_the_built_in_workloads_are_the_schedules_the_lab_always_ran(n: int, duration: float) -> None:
    """The files reproduce the lab's former hard-coded schedules (for 2 members or more; with one, churn now
    stops the member that joined and skips the kill of one that never ran, and says so)."""
    d, topics = duration, {"a": 8, "b": 4}

    def steps(workload: str, mode: LabMode = LabMode.ZOOKEEPER) -> list[tuple[float, str, str]]:
        return [(round(s.at, 6), str(s.action), s.consumer)
                for s in RunPlan(consumers=n, duration=d, workload=workload, mode=mode, topics=topics).schedule()]

    added = max(0, 8 - n)
    assert steps("churn") == [(round(0.15 * d, 6), "join", f"c{n + 1}"), (round(0.35 * d, 6), "stop", "c2"),
                              (round(0.55 * d, 6), "kill", "c3"), (round(0.75 * d, 6), "join", f"c{n + 2}")]
    assert steps("rolling-restart") == [(round(d * (0.15 + 0.6 * i / n), 6), "bounce", f"c{i + 1}")
                                        for i in range(n)]
    assert steps("scale-out") == [(round(d * (0.1 + 0.7 * i / max(1, added)), 6), "join", f"c{n + i + 1}")
                                  for i in range(added)]
    assert steps("churn", mode=LabMode.MIGRATE) == [(round(0.1 * d, 6), "join", f"c{n + 1}"),
                                              (round(0.25 * d, 6), "migrate", ""), (round(0.8 * d, 6), "kill", "c1")]


def test_the_built_in_scenarios_are_shipped_files() -> None:
    names = builtin_names()
    assert names == ["broker-cut", "broker-kill", "churn", "consumer-pause", "coordinator-kill", "gc-pause",
                     "migration", "migration-broker-restart", "migration-driver-kill", "migration-member-kill",
                     "migration-rollback-mid", "migration-stranger", "migration-zk-expiry", "mixed-gc-pause",
                     "owner-held", "partitions-added", "quorum-loss", "reconnect-mid-rebalance", "rolling-restart",
                     "scale-out", "session-expiry", "shared-group-id", "stale-view", "topic-created", "zk-cut",
                     "zk-follower", "zk-leader"]
    gc = builtin("gc-pause")
    assert gc.steps(gc.duration, 3, {}) == [Step(10.0, ActionKind.PAUSE, "c1", 8.0)]
    assert builtin("churn").description and not builtin("churn").strict
    with pytest.raises(ScenarioError, match="no built-in scenario 'nope'"):
        builtin("nope")


def test_the_fault_matrix_faults_are_shipped_scenarios_with_the_matrix_settings(tmp_path: Path) -> None:
    """What each shipped fault scenario starts (an ensemble, the broker as a process, proxies) follows from its
    actions; the settings are the fault matrix's (docs/faults.md: 4 s sessions, commits every 500 ms, 40/s).
    Nothing starts before ``run``: the lab's handles are read right after it is made."""
    expected = {"zk-leader": (3, False, [], ActionKind.KILL_ZK), "zk-follower": (3, False, [], ActionKind.KILL_ZK),
                "quorum-loss": (3, False, [], ActionKind.QUORUM_LOSS), "zk-cut": (1, False, ["c1"], ActionKind.CUT_ZK),
                "broker-kill": (1, True, [], ActionKind.KILL_BROKER),
                "consumer-pause": (1, False, [], ActionKind.PAUSE),
                "session-expiry": (1, False, [], ActionKind.EXPIRE),
                "partitions-added": (1, False, [], ActionKind.ADD_PARTITIONS),
                "topic-created": (1, False, [], ActionKind.CREATE_TOPIC)}
    for name, (ensemble, broker_process, proxied, kind) in expected.items():
        s = builtin(name)
        lab = lab_for(RunPlan.from_scenario(s), tmp_path)  # a pause needs no fault lab: the plain lab has none
        handles = (lab.zk_servers, lab.broker_process, lab.proxied) if isinstance(lab, ScenarioLab) else (1, False, [])
        assert (*handles, [a.kind for a in s.actions]) == (ensemble, broker_process, proxied, [kind]), name
        assert isinstance(lab, ScenarioLab) == (kind is not ActionKind.PAUSE), name
        assert (s.session_timeout_ms, s.commit_interval_ms, s.rate, s.topics) == (4000, 500, 40.0, {"orders": 6})
        assert s.steps(s.duration, 3, s.topics)  # every heal comes before the run's end


# ------------------------------------------------------------------------------------- errors: file, line, key
@pytest.mark.parametrize(("text", "where", "says"), [
    ('duration = 10\ncolour = "red"\n', "s.toml:2: colour", "unknown key"),
    ('duration = "long"\n', "s.toml:1: duration", "expected a number"),
    ("duration = 0\n", "s.toml:1: duration", "must be > 0"),
    ('strategy = "sticky"\n', "s.toml:1: strategy", "unknown strategy 'sticky'"),
    ("[topics]\norders = 0\n", "s.toml:2: topics.orders", "partitions must be an integer >= 1"),
    ('[[actions]]\nat = 1\ndo = "kil"\nmember = "c1"\n', "s.toml:3: actions[0].do", "unknown action 'kil'"),
    ('[[actions]]\ndo = "kill"\nmember = "c1"\n', "s.toml:1: actions[0].at", "missing"),
    ('[[actions]]\nat = 1\ndo = "join"\nmember = "new"\n\n[[actions]]\nat = "150%"\ndo = "stop"\nmember = "c1"\n',
     "s.toml:7: actions[1].at", "a share of the run such as '15%'"),
    ('[[actions]]\nat = 1\ndo = "kill"\n', "s.toml:1: actions[0].member", "'kill' needs a member"),
    ('[[actions]]\nat = 1\ndo = "migrate"\nmember = "c1"\n', "s.toml:4: actions[0].member", "acts on the whole"),
    ('[[actions]]\nat = 1\ndo = "pause"\nmember = "c1"\n', "s.toml:1: actions[0].seconds",
     "'pause' lasts a number of seconds > 0"),
    ('[[actions]]\nat = 1\ndo = "stop"\nmember = "c1"\nseconds = 3\n', "s.toml:5: actions[0].seconds",
     "only 'pause', 'cut-zk', 'slow-zk', 'cut-broker', 'slow-broker', 'kill-zk', 'quorum-loss', 'kill-broker' and "
     "'kill-coordinator' have seconds, not 'stop'"),
    ('[[actions]]\nat = 1\nuntil = 5\ndo = "stop"\nmember = "c1"\n', "s.toml:3: actions[0].until",
     "spreads repeated actions"),
    ('[[actions]]\nat = 1\ndo = "stop"\nmember = "new"\n', "s.toml:4: actions[0].member", "only with do = 'join'"),
    ('[[actions]]\nat = 1\ndo = "join"\nmember = "c4"\ncount = 2\n', "s.toml:5: actions[0].count",
     "new members only"),
    ('[[actions]]\nat = 1\ndo = "join"\nmember = "new"\n\n[[actions]]\nat = 0.5\ndo = "kill"\nmember = "c4"\n',
     "s.toml:6: actions[1].member", "'c4' is not running at 0.5 s"),
    # the fault and topic actions
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 4\n', "s.toml:4: actions[0].node",
     "unknown node 4: the ensemble's servers are 1..3, 'leader' or 'follower'"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\n', "s.toml:1: actions[0].node", "'kill-zk' needs a node"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 1\n\n[[actions]]\nat = 2\ndo = "restart-zk"\nnode = "leader"\n',
     "s.toml:9: actions[1].node", "a killed node is neither leader nor follower"),
    ('zookeeper_nodes = 1\n[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 1\n', "s.toml:4: actions[0].do",
     "'kill-zk' needs a ZooKeeper ensemble: this run has zookeeper_nodes = 1"),
    ('zookeeper_nodes = 1\n[[actions]]\nat = 1\ndo = "quorum-loss"\nseconds = 2\n', "s.toml:4: actions[0].do",
     "needs a ZooKeeper ensemble"),
    ("zookeeper_nodes = 2\n", "s.toml:1: zookeeper_nodes", "an odd number of servers"),
    ('[[actions]]\nat = 1\ndo = "kill-broker"\nnode = 1\n', "s.toml:4: actions[0].node",
     "only 'kill-zk' and 'restart-zk' name a ZooKeeper node"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nmember = "c1"\nnode = 1\n', "s.toml:4: actions[0].member",
     "acts on the whole group"),
    ('[[actions]]\nat = 1\ndo = "cut-zk"\nmember = "c1"\n', "s.toml:1: actions[0].seconds",
     "'cut-zk' lasts a number of seconds > 0"),
    ('[[actions]]\nat = 1\ndo = "expire"\nmember = "c1"\nseconds = 2\n', "s.toml:5: actions[0].seconds",
     "not 'expire'"),
    ('[[actions]]\nat = 1\ndo = "expire"\n', "s.toml:1: actions[0].member", "'expire' needs a member"),
    ('[[actions]]\nat = 1\ndo = "slow-zk"\nmember = "c1"\nseconds = 2\nlatency_ms = -5\n',
     "s.toml:6: actions[0].latency_ms", "adds a number of milliseconds > 0, got -5"),
    ('[[actions]]\nat = 1\ndo = "slow-zk"\nmember = "c1"\nseconds = 2\n', "s.toml:1: actions[0].latency_ms",
     "adds a number of milliseconds > 0"),
    ('[[actions]]\nat = 1\ndo = "cut-zk"\nmember = "c1"\nseconds = 2\nlatency_ms = 5\n',
     "s.toml:6: actions[0].latency_ms", "only 'slow-zk' and 'slow-broker' have latency_ms"),
    ('[[actions]]\nat = 1\ndo = "cut-zk"\nmember = "c7"\nseconds = 2\n', "s.toml:1: actions[0].member",
     "'c7' is not running at 1.0 s"),
    ('[[actions]]\nat = 28\ndo = "cut-zk"\nmember = "c1"\nseconds = 5\n', "s.toml:1: actions[0].seconds",
     "heals at 33.0 s, after the run's end at 30.0 s"),
    ('whitelist = "orders.*"\n[[actions]]\nat = 1\ndo = "create-topic"\npartitions = 2\n',
     "s.toml:2: actions[0].topic", "missing"),
    ('[[actions]]\nat = 1\ndo = "create-topic"\ntopic = "orders2"\npartitions = 2\n', "s.toml:3: actions[0].do",
     "set whitelist"),
    ('whitelist = "orders.*"\n[[actions]]\nat = 1\ndo = "create-topic"\ntopic = "audit"\npartitions = 2\n',
     "s.toml:5: actions[0].topic", "does not match the whitelist 'orders.*': no member would consume it"),
    ('whitelist = "orders.*"\n[[actions]]\nat = 1\ndo = "create-topic"\ntopic = "orders"\npartitions = 2\n',
     "s.toml:2: actions[0].topic", "'orders' exists already at 1.0 s"),
    ('whitelist = "orders.*"\n[[actions]]\nat = 1\ndo = "create-topic"\ntopic = "orders x"\npartitions = 2\n',
     "s.toml:5: actions[0].topic", "not a topic name"),
    ('whitelist = "orders.*"\n[[actions]]\nat = 1\ndo = "create-topic"\ntopic = "orders2"\npartitions = 0\n',
     "s.toml:6: actions[0].partitions", "expected an integer >= 1, got 0"),
    ('whitelist = "orders.*"\n[topics]\naudit = 2\n', "s.toml:3: topics.audit", "does not match the whitelist"),
    ('whitelist = "orders("\n', "s.toml:1: whitelist", "invalid regex"),
    ('[[actions]]\nat = 1\ndo = "add-partitions"\ntopic = "orders"\n', "s.toml:1: actions[0].partitions",
     "missing: the new total"),
    ('[[actions]]\nat = 1\ndo = "add-partitions"\ntopic = "nope"\npartitions = 3\n', "s.toml:1: actions[0].topic",
     "no topic 'nope' at 1.0 s: the run has orders"),
    ('[[actions]]\nat = 1\ndo = "add-partitions"\ntopic = "orders"\npartitions = 8\n',
     "s.toml:1: actions[0].partitions", "'orders' has 8 partitions at 1.0 s"),
    ('[[actions]]\nat = 1\ndo = "stop"\nmember = "c1"\npartitions = 3\n', "s.toml:5: actions[0].partitions",
     "only 'create-topic' and 'add-partitions' have partitions"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 1\n\n[[actions]]\nat = 2\ndo = "kill-zk"\nnode = "follower"\n',
     "s.toml:6: actions[1].do", "1 of 3 ZooKeeper nodes are down at 2.0 s already: another loses the quorum"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 1\nseconds = 2\n\n[[actions]]\nat = 4\ndo = "restart-zk"\n',
     "s.toml:7: actions[1].do", "no ZooKeeper node is down at 4.0 s"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 1\n\n[[actions]]\nat = 4\ndo = "restart-zk"\nnode = 3\n',
     "s.toml:6: actions[1].node", "node 3 is not down at 4.0 s (down: 1)"),
    ('[[actions]]\nat = 1\ndo = "kill-zk"\nnode = 1\n\n[[actions]]\nat = 2\ndo = "quorum-loss"\nseconds = 3\n',
     "s.toml:6: actions[1].do", "quorum-loss stops a majority of a whole ensemble"),
    ('[[actions]]\nat = 1\ndo = "restart-broker"\n', "s.toml:1: actions[0].do", "the broker runs at 1.0 s"),
    ('[[actions]]\nat = 1\ndo = "kill-broker"\n', "s.toml:1: actions[0].do", "the run ends with the broker down"),
    ('[[actions]]\nat = 1\ndo = "kill-broker"\nseconds = 3\n\n[[actions]]\nat = 2\ndo = "kill-broker"\n',
     "s.toml:6: actions[1].do", "the broker is down already at 2.0 s"),
    ('[[actions]]\nat = 1\ndo = "kill-coordinator"\n', "s.toml:1: actions[0].seconds",
     "'kill-coordinator' lasts a number of seconds > 0"),
    ('[[actions]]\nat = 1\ndo = "kill-coordinator"\nseconds = 5\n\n[[actions]]\nat = 2\ndo = "kill-coordinator"\n'
     'seconds = 3\n', "s.toml:6: actions[1].do", "a coordinator's broker is down already at 2.0 s"),
    ('[kinds]\nc1 = "kafka-0.9"\n', "s.toml:2: kinds.c1", "unknown kind 'kafka-0.9'; one of: default, kafka-0.8, "
     "kafka-0.8.2.2"),
    ('[kinds]\nnew = "default"\n', "s.toml:2: kinds.new", "a member's name such as 'c3'"),
    ('[kinds]\nc7 = "default"\n', "s.toml:2: kinds.c7", "'c7' never runs: the run starts c1..c3"),
    ('whitelist = "o.*"\n[topics]\norders = 2\n[kinds]\nc1 = "kafka-0.8.2.2"\n', "s.toml:5: kinds.c1",
     "not in a run whose members subscribe by the whitelist"),
    ("duration = [1\n", "s.toml:1", "not valid TOML"),
    ("duration = 10\nrate = = 3\n", "s.toml:2", "not valid TOML: Invalid value"),
    # [properties]: Kafka's names (config/properties.py's), of their type, accepted by ConsumerConfig, not the lab's own
    ('[properties]\n"rebalance.max.retry" = 2\n', 's.toml:2: properties."rebalance.max.retry"',
     "not a consumer property; did you mean 'rebalance.max.retries'?"),
    ('[properties]\n"rebalance.max.retries" = "2"\n', 's.toml:2: properties."rebalance.max.retries"',
     "expected an integer, got '2'"),
    ('[properties]\n"auto.commit.enable" = "yes"\n', 's.toml:2: properties."auto.commit.enable"',
     "expected a boolean (true or false), got 'yes'"),
    ('[properties]\n"rebalance.backoff.ms" = 1000\n"rebalance.max.retries" = -1\n',
     's.toml:3: properties."rebalance.max.retries"', "rebalance.max.retries must be >= 0, got -1"),
    ('[properties]\n"offsets.storage" = "redis"\n', 's.toml:2: properties."offsets.storage"',
     "Wrong value redis of offsets.storage in consumer config; Valid values are 'zookeeper' and 'kafka'"),
    ('[properties]\n"auto.offset.reset" = "largest"\n', 's.toml:2: properties."auto.offset.reset"',
     "set by the lab for each member (smallest: the lab checks that every record produced is consumed)"),
    ('[properties]\n"fetch.wait.max.ms" = 40000\n', 's.toml:2: properties."fetch.wait.max.ms"',
     "socket.timeout.ms should always be at least fetch.wait.max.ms"),
    ('[properties]\n"zookeeper.session.timeout.ms" = 4000\n', 's.toml:2: properties."zookeeper.session.timeout.ms"',
     "set by the lab for each member (use session_timeout_ms)"),
    ('[properties]\n"group.id" = "mine"\n', 's.toml:2: properties."group.id"', "set by the lab"),
    ('properties = 3\n', "s.toml:1: properties", "expected a table, got 3"),
    # [subscriptions]: topics of [topics], a member that runs, no whitelist, every topic consumed by someone
    ('[topics]\norders = 2\n[subscriptions]\nc1 = ["payments"]\n', "s.toml:4: subscriptions.c1",
     "no topic 'payments' in [topics] (orders)"),
    ('[topics]\norders = 2\n[subscriptions]\nc1 = []\n', "s.toml:4: subscriptions.c1",
     "expected an array of topic names (at least one), got []"),
    ('[topics]\norders = 2\n[subscriptions]\nc1 = "orders"\n', "s.toml:4: subscriptions.c1",
     "expected an array of topic names"),
    ('[topics]\norders = 2\n[subscriptions]\nc1 = ["orders", "orders"]\n', "s.toml:4: subscriptions.c1",
     "a topic named twice"),
    ('[topics]\norders = 2\n[subscriptions]\nnew = ["orders"]\n', "s.toml:4: subscriptions.new",
     "a member's name such as 'c3'"),
    ('[subscriptions]\nc1 = ["orders"]\n', "s.toml:1: subscriptions", "name the run's topics in [topics]"),
    ('whitelist = "o.*"\n[topics]\norders = 2\n[subscriptions]\nc1 = ["orders"]\n', "s.toml:4: subscriptions",
     "the members subscribe by the whitelist regex here"),
    ('[topics]\norders = 2\n[subscriptions]\nc7 = ["orders"]\n[[actions]]\nat = 1\ndo = "join"\nmember = "new"\n',
     "s.toml:4: subscriptions.c7", "'c7' never runs: the run starts c1..c3 and joins c4"),
    ('[topics]\norders = 2\npay = 1\n[subscriptions]\nc1 = ["orders"]\nc2 = ["orders"]\nc3 = ["orders"]\n',
     "s.toml:4: subscriptions", "no member subscribes to pay: every member of the run is listed"),
])
def test_a_malformed_file_is_one_error_naming_file_line_and_key(text: str, where: str, says: str) -> None:
    e = error(text)
    assert str(e).startswith(where + ":") or str(e).startswith(where + " "), str(e)
    assert says in str(e), str(e)


def test_an_unreadable_file_is_said(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"missing\.toml: cannot read it"):
        load(tmp_path / "missing.toml")


def test_the_cli_reports_the_error_and_runs_nothing(tmp_path: Path, capsys) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[actions]]\nat = 1\ndo = "explode"\n')
    assert main(["lab", "--scenario", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:3: actions[0].do: unknown action 'explode'" in " ".join(err.split())
    assert main(["compare", "--scenario", str(path), "--workload", "churn"]) == 1
    assert "give one" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ n/a, per lab and variant
def test_a_scenario_with_fault_or_topic_actions_gets_a_fault_lab(tmp_path: Path) -> None:
    faulty = RunPlan.from_scenario(builtin("zk-cut"))
    assert type(lab_for(faulty, tmp_path)) is ScenarioLab
    assert type(lab_for(RunPlan.from_scenario(builtin("gc-pause")), tmp_path)) is Lab
    assert type(lab_for(RunPlan(), tmp_path, backend=ProcessBackend())) is Lab
    # a plain lab given such a step reports it n/a instead of failing
    plain = Lab(faulty, tmp_path)
    assert "no handle" in plain.not_applicable(Step(1.0, ActionKind.CUT_ZK, "c1", 2.0))
    # a coordinator is killed only in a cluster of Apache Kafka's brokers that compare started for the run
    killing = lab_for(RunPlan.from_scenario(builtin("coordinator-kill")), tmp_path)
    assert type(killing) is ScenarioLab and killing.replication_factor == 1
    assert "no cluster of Apache Kafka's brokers" in killing.not_applicable(Step(1.0, ActionKind.KILL_COORDINATOR,
                                                                                 seconds=3.0))

    class Elsewhere(ProcessBackend):
        name = "docker"

    with pytest.raises(BackendError, match="process backend only"):
        lab_for(faulty, tmp_path, backend=Elsewhere())


def test_each_variant_says_which_actions_have_no_counterpart() -> None:
    session = {ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.EXPIRE}
    nodes = {ActionKind.KILL_ZK, ActionKind.RESTART_ZK, ActionKind.QUORUM_LOSS}
    broker = {ActionKind.KILL_BROKER, ActionKind.RESTART_BROKER}
    cluster = {ActionKind.KILL_COORDINATOR}  # only Apache Kafka's brokers, three of them, fail a group over
    link = {ActionKind.CUT_BROKER, ActionKind.SLOW_BROKER}  # a listener per member: zkconsumer's broker only
    expected = {"zookeeper-default": cluster, "zookeeper-kafka-0.8": cluster,
                "kafka-0.8.2.2": cluster | link | {ActionKind.CREATE_TOPIC},
                "coordinator": session | cluster, "cooperative-sticky": session | cluster, "static": session | cluster,
                "coordinator-kafka-3.9": session | nodes | broker | link,
                "consumer-protocol-kafka-4": session | nodes | broker | link | {ActionKind.CREATE_TOPIC}}
    assert {name: {kind for kind, _ in v.absent()} for name, v in VARIANTS.items()} == expected
    assert "ZooKeeper coordinates it" in VARIANTS["zookeeper-default"].no_counterpart(ActionKind.KILL_COORDINATOR)
    assert "replicates nothing" in VARIANTS["static"].no_counterpart(ActionKind.KILL_COORDINATOR)
    assert "KRaft" in VARIANTS["consumer-protocol-kafka-4"].no_counterpart(ActionKind.KILL_ZK)
    assert "no ZooKeeper session" in VARIANTS["coordinator"].no_counterpart(ActionKind.EXPIRE)


def test_a_step_without_counterpart_is_skipped_and_said(tmp_path: Path) -> None:
    """compare passes the variant's absent actions in the plan; a plain lab (no fault handles) skips fault steps."""
    plan = RunPlan(absent=VARIANTS["coordinator"].absent(), steps=[])
    lab = Lab(plan, tmp_path)
    lab.perform(Step(4.0, ActionKind.EXPIRE, "c1"))
    lab.perform(Step(5.0, ActionKind.KILL_ZK, node="leader"))
    assert lab.skipped == ["expire c1 at 4.0 s: a coordinator-mode member has no ZooKeeper session or link",
                           "kill-zk at 5.0 s: this lab has no handle on servers, links or topics (a ScenarioLab has, "
                           "on the process backend)"]


def test_a_sessions_password_follows_from_its_id(zk_connect: str) -> None:
    """What ``expire`` relies on: ZooKeeper derives the password from the session id, so the id seen as a node's
    ephemeralOwner is enough to open (and close) the session from outside."""
    from kazoo.client import KazooClient

    client = KazooClient(zk_connect)
    client.start(10)
    try:
        session, password = client.client_id
        assert session_password(session) == password
    finally:
        client.stop()
        client.close()


# ---------------------------------------------------------------------------- [properties] and [subscriptions]
SHARED = """
    members = 2
    [topics]
    orders = 6
    payments = 2
    [properties]
    "rebalance.max.retries" = 2
    "rebalance.backoff.ms" = 1000
    "auto.commit.enable" = true
    "heartbeat.interval.ms" = 500
    [subscriptions]
    c1 = ["orders"]
    c3 = ["payments"]
    [[actions]]
    at = 8
    do = "join"
    member = "c3"
"""


def test_properties_and_subscriptions_are_read_into_the_plan() -> None:
    s = scenario(SHARED)
    assert s.properties == {"rebalance.max.retries": 2, "rebalance.backoff.ms": 1000, "auto.commit.enable": True,
                            "heartbeat.interval.ms": 500}
    assert s.subscriptions == {"c1": ("orders",), "c3": ("payments",)}
    plan = RunPlan.from_scenario(s)
    assert plan.properties == (("rebalance.max.retries", "2"), ("rebalance.backoff.ms", "1000"),
                               ("auto.commit.enable", "true"), ("heartbeat.interval.ms", "500"))
    assert [plan.topics_of(m) for m in ("c1", "c2", "c3")] == [["orders"], ["orders", "payments"], ["payments"]]
    # a variant's properties (compare's, the nemesis') go on top: they are what makes the variant
    kip848 = RunPlan.from_scenario(s, properties=(("heartbeat.interval.ms", "900"), ("group.protocol", "consumer")))
    assert dict(kip848.properties)["heartbeat.interval.ms"] == "900" and dict(kip848.properties)["group.protocol"]
    assert merge_properties(plan.properties, (("rebalance.backoff.ms", "5"),))[1] == ("rebalance.backoff.ms", "5")


def test_each_member_kind_takes_the_properties_it_has_a_counterpart_for() -> None:
    """The pure decision: what each kind of member is given, and what the run's summary reports n/a."""
    props = (("rebalance.max.retries", "2"), ("auto.offset.reset", "smallest"), ("heartbeat.interval.ms", "500"),
             ("zkconsumer.fetch.enable", "true"), ("group.protocol", "classic"))
    taken = {kind: [name for name, _ in member_properties(kind, props)[0]] for kind in KINDS}
    assert taken == {
        "zookeeper": ["rebalance.max.retries", "auto.offset.reset", "zkconsumer.fetch.enable"],
        "kafka-0.8.2.2": ["rebalance.max.retries", "auto.offset.reset"],
        "coordinator": ["auto.offset.reset", "heartbeat.interval.ms"],
        "librdkafka": ["auto.offset.reset", "heartbeat.interval.ms", "group.protocol"],
        "migratable": ["rebalance.max.retries", "auto.offset.reset", "heartbeat.interval.ms",
                       "zkconsumer.fetch.enable"],
    }
    _, notes = member_properties("coordinator", props)
    assert notes[0] == ("property rebalance.max.retries=2: a coordinator-mode member (kafka-python) has no "
                        "counterpart; not given to its members")
    # under KIP-848 the broker decides the group's timings: librdkafka takes none of them
    given, _ = member_properties("librdkafka", (("group.protocol", "consumer"), ("heartbeat.interval.ms", "500")))
    assert given == (("group.protocol", "consumer"),)
    # a scenario's property the variant sets otherwise is said; a name no kind knows is passed on
    given, notes = member_properties("zookeeper", (("rebalance.backoff.ms", "5"), ("x.y", "1")),
                                     {"rebalance.backoff.ms": 1000})
    assert given == (("rebalance.backoff.ms", "5"), ("x.y", "1"))
    assert notes == ["property rebalance.backoff.ms=1000: the run sets rebalance.backoff.ms=5 (the variant's own "
                     "properties win)"]
    assert [member_kind(m, c) for m, c in [(LabMode.ZOOKEEPER, "kafka-python"), (LabMode.ZOOKEEPER, "kafka-0.8.2.2"),
                                           (LabMode.COORDINATOR, "kafka-python"), (LabMode.COORDINATOR, "librdkafka"),
                                           (LabMode.MIGRATE, "kafka-python")]] == list(KINDS)
    settable = set(property_names()) - set(SET_BY_THE_LAB)
    assert settable <= frozenset().union(*(names for _, names in KINDS.values())), "a property no member takes"


def test_the_failure_mode_scenarios_break_the_retry_rule_and_share_a_group() -> None:
    """owner-held: retries x backoff under the session (Kafka's FAQ rule broken), the pause past the session and the
    join inside it, healed with the deadline inside the run; shared-group-id: the orders members and c3 on payments."""
    held = builtin("owner-held")
    retries, backoff = held.properties["rebalance.max.retries"], held.properties["rebalance.backoff.ms"]
    assert retries * backoff < held.session_timeout_ms
    pause, join = held.steps(held.duration, 3, held.topics)
    assert (pause.action, join.action, join.consumer) == (ActionKind.PAUSE, ActionKind.JOIN, "c4")
    assert pause.at < join.at < pause.at + held.session_timeout_ms / 1000 < pause.at + pause.seconds
    assert pause.at + pause.seconds + held.session_timeout_ms / 1000 + 1 < held.duration
    shared = dataclasses.replace(builtin("shared-group-id"), strict=True)
    plan = RunPlan.from_scenario(shared)
    assert [plan.topics_of(m) for m in ("c1", "c2", "c3")] == [["orders"], ["orders"], ["payments"]]
    assert [(s.action, s.consumer) for s in shared.steps(plan.duration, plan.consumers, plan.topics)] == [
        (ActionKind.JOIN, "c3"), (ActionKind.STOP, "c3"), (ActionKind.JOIN, "c3")]


def _arg_values(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args) if a == flag]


@pytest.mark.parametrize(("mode", "client"), [(LabMode.ZOOKEEPER, "kafka-python"),
                                              (LabMode.COORDINATOR, "kafka-python"),
                                              (LabMode.COORDINATOR, "librdkafka"), (LabMode.MIGRATE, "kafka-python")])
def test_every_zkconsumer_member_gets_its_topics_and_the_properties_it_takes(mode: LabMode, client: str,
                                                                             tmp_path: Path) -> None:
    plan = dataclasses.replace(RunPlan.from_scenario(scenario(SHARED)), mode=mode, client=client)
    lab = Lab(plan, tmp_path)
    assert [_arg_values(lab._consumer_args(m), "--topic") for m in ("c1", "c2", "c3")] == [
        ["orders"], ["orders", "payments"], ["payments"]]
    kind = member_kind(mode, client)
    expected = [f"{k}={v}" for k, v in member_properties(kind, plan.properties)[0]]
    given = _arg_values(lab._consumer_args("c1"), "--property")
    assert given[-len(expected):] == expected  # after the lab's own: a later --property wins (heartbeat.interval.ms)
    retries_taken = kind in ("zookeeper", "migratable")
    assert ("rebalance.max.retries=2" in given) == retries_taken
    assert any(line.startswith("property rebalance.max.retries=2:") for line in lab.skipped) != retries_taken
    assert lab.summarize()["not_applicable"] == lab.skipped  # the summary's list, where n/a steps are said too


def test_kafkas_own_members_get_their_topics_and_the_properties_it_takes(tmp_path: Path, monkeypatch) -> None:
    """Kafka 0.8.2.2's harness gets each member's own topics (and its trace that subscription); no JVM is run."""
    from zkconsumer.apache_kafka import lab_members

    calls = []
    monkeypatch.setattr(lab_members, "fetch", lambda version: object())
    monkeypatch.setattr(lab_members, "harness_command",
                        lambda dist, zk, group, topics, **kw: calls.append((list(topics), kw["properties"])) or [])
    plan = dataclasses.replace(RunPlan.from_scenario(scenario(SHARED)), client=lab_members.CLIENT)
    lab = Lab(plan, tmp_path)
    for m in ("c1", "c2", "c3"):
        lab._consumer_args(m)
    assert [topics for topics, _ in calls] == [["orders"], ["orders", "payments"], ["payments"]]
    assert calls[0][1]["rebalance.max.retries"] == "2" and "heartbeat.interval.ms" not in calls[0][1]
    assert lab.skipped == ["property heartbeat.interval.ms=500: Kafka 0.8.2.2's own consumer has no counterpart; "
                           "not given to its members"]
    assert lab._kafka_members.traces["c3"].core.subscription == {"payments": 1}


def test_members_of_other_kinds_make_one_mixed_0_8_group(tmp_path: Path, monkeypatch) -> None:
    """[kinds]: in ZooKeeper mode each named member runs its kind (Kafka's own consumer, a zkconsumer profile), the
    others the run's; a coordinator run takes no 0.8 member and says so. No process is started."""
    from zkconsumer.apache_kafka import lab_members

    calls = []
    monkeypatch.setattr(lab_members, "fetch", lambda version: object())
    monkeypatch.setattr(lab_members, "harness_command",
                        lambda dist, zk, group, topics, **kw: calls.append((list(topics), kw["properties"])) or [])
    mixed = builtin("mixed-gc-pause")
    assert mixed.kinds == {"c1": MemberKind.KAFKA_0822, "c2": MemberKind.KAFKA_08, "c3": MemberKind.DEFAULT}
    plan = RunPlan.from_scenario(mixed, properties=(("heartbeat.interval.ms", "500"),))
    assert [plan.kind_of(m) for m in ("c1", "c2", "c3", "c4")] == ["kafka-0.8.2.2", "kafka-0.8", "default", "default"]
    assert plan.mixed_kinds
    lab = Lab(plan, tmp_path)
    assert lab._consumer_args("c1") == [] and calls[0][0] == ["orders"]  # Kafka's harness (stubbed here)
    assert "heartbeat.interval.ms" not in calls[0][1]
    c2 = lab._consumer_args("c2")
    assert "zkconsumer.profile=kafka-0.8" in _arg_values(c2, "--property") and "consume" in c2
    c3 = lab._consumer_args("c3")
    assert "zkconsumer.profile=default" in _arg_values(c3, "--property")
    assert any("Kafka 0.8.2.2's own consumer has no counterpart" in note and "(c1)" in note for note in lab.skipped)
    # a coordinator run: every member runs as the variant's, and the kinds are reported n/a
    coordinator = dataclasses.replace(plan, mode=LabMode.COORDINATOR)
    assert {coordinator.kind_of(m) for m in ("c1", "c2")} == {"default"} and not coordinator.mixed_kinds
    assert any(note.startswith("kinds (c1 kafka-0.8.2.2") for note in Lab(coordinator, tmp_path / "c").skipped)


def test_the_lab_plans_and_verifies_by_the_subscriptions(tmp_path: Path) -> None:
    """The expected assignment printed at the start (RoundRobin refuses members on different topics, as Kafka's
    does) and the ownership check of a coordinator-mode run: a topic no live member subscribes to is not checked."""
    out = io.StringIO()
    plan = dataclasses.replace(RunPlan.from_scenario(scenario(SHARED)), consumers=3, mode=LabMode.COORDINATOR)
    lab = Lab(plan, tmp_path, console=Console(file=out, width=200))
    lab.console.print(planned_assignments(plan))
    text = " ".join(out.getvalue().split())
    for line in ("lab_c1-0 │ orders-0 orders-1 orders-2 │", "lab_c2-0 │ orders-3 orders-4 orders-5 payments-0 │",
                 "lab_c3-0 │ payments-1 │"):
        assert line in text, text
    assert text.count("(refused: members on different topics)") == 3, text
    lab.produced.update({("orders", p): 0 for p in range(6)} | {("payments", p): 0 for p in range(2)})
    lab.members.status = {"c1": "running", "c2": "stopped"}
    lab.members.reap = lambda: None
    lab.tail.owned = {"lab_c1": {f"orders-{p}" for p in range(6)}}
    assert lab._verify_by_traces()  # only c1 runs: payments is nobody's now
    lab.members.status["c3"] = "running"
    assert not lab._verify_by_traces()  # c3 runs and owns nothing


# ------------------------------------------------------------------------------------------- a real run
#: The group the real runs below share: short enough to run in a test, its 4 s session outlived by their faults.
REAL_RUN_GROUP = """
    members = 2
    rate = 40
    initial_records = 20
    session_timeout_ms = 4000
    commit_interval_ms = 300

    [topics]
    orders = 4
"""

GC_PAUSE = """
    name = "gc-pause"
    duration = 16
""" + REAL_RUN_GROUP + """
    [[actions]]
    at = 5
    do = "pause"
    member = "c1"
    seconds = 6

    [[actions]]
    at = 6
    do = "migrate"
"""


@pytest.mark.slow
def test_a_lab_runs_a_scenario_file_pausing_a_member_past_its_session(zk_connect: str, tmp_path: Path) -> None:
    path = tmp_path / "gc.toml"
    path.write_text(textwrap.dedent(GC_PAUSE))
    plan = RunPlan.from_scenario(load(path))
    summary = Lab(plan, tmp_path / "run", zookeeper=zk_connect, console=Console(file=io.StringIO())).run()
    assert summary["scenario"] == "gc-pause" and summary["lost"] == 0 and summary["verify_ok"], summary
    # the migration has no counterpart in a ZooKeeper-mode lab: skipped, and said
    assert summary["not_applicable"] == ["migrate at 6.0 s: only a lab in migrate mode migrates its group"]
    events = [json.loads(line) for line in (tmp_path / "run" / "traces" / "lab_c1.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    # c1 owned partitions before its pause (at 5 s, its rebalance done long before); paused 6 s against a 4 s
    # session, it learnt of the expiry on waking and joined the group again
    assert kinds.index("rebalance_done") < kinds.index("session_expired"), kinds
    assert kinds.count("registered") == 2, kinds


FAULTS_ON_AN_ENSEMBLE = """
    name = "ensemble-faults"
    duration = 17
""" + REAL_RUN_GROUP + """
    [[actions]]
    at = 3
    do = "kill-zk"
    node = "follower"
    seconds = 2

    [[actions]]
    at = 4
    do = "cut-zk"
    member = "c1"
    seconds = 6

    [[actions]]
    at = 11
    do = "add-partitions"
    topic = "orders"
    partitions = 6
"""


@pytest.mark.slow
@pytest.mark.ensemble
def test_a_scenario_kills_a_zookeeper_node_cuts_a_member_off_and_adds_partitions(tmp_path: Path) -> None:
    """A real 3-node ensemble started because an action kills a node, c1 behind a proxy per server because an action
    cuts it off (past its session), and partitions added to the live topic: each fault written to the lab's trace
    as struck and healed, the new partitions owned and consumed, nothing lost."""
    path = tmp_path / "faults.toml"
    path.write_text(textwrap.dedent(FAULTS_ON_AN_ENSEMBLE))
    lab = lab_for(RunPlan.from_scenario(load(path)), tmp_path / "run", console=Console(file=io.StringIO()))
    assert isinstance(lab, ScenarioLab)
    summary = lab.run()
    assert summary["zookeeper_servers"] == 3 and summary["fault_errors"] == [], summary
    # the follower is found when the step runs (its role asked of each server): the cut may strike first
    assert sorted((f["fault"], f["target"].startswith("zk")) for f in summary["faults"]) == [
        ("cut-zk", False), ("kill-zk", True)], summary["faults"]
    assert all(f["healed_s"] is not None for f in summary["faults"]), summary["faults"]
    lines = [json.loads(line) for line in (tmp_path / "run" / "traces" / "lab.jsonl").read_text().splitlines()]
    # the topic action is a step of the lab's trace, not a fault
    assert [(e["step"], e["target"]) for e in lines if e["event"] == "lab_step"] == [("add-partitions", "")]
    lines = [e for e in lines if e["event"] != "lab_step"]
    assert sorted((e["event"], e["fault"]) for e in lines) == [
        ("fault_healed", "cut-zk"), ("fault_healed", "kill-zk"), ("fault_injected", "cut-zk"),
        ("fault_injected", "kill-zk")]
    assert all(e["session_timeout_ms"] == 4000 for e in lines if e["event"] == "fault_healed")
    # the new partitions were produced to, consumed and committed to the end; verify saw all six owned
    assert summary["lost"] == 0 and summary["verify_ok"], summary
    assert {("orders", 4), ("orders", 5)} <= set(lab.produced) and lab.produced[("orders", 5)] > 0
    assert {(t, p) for (t, p, _o) in lab.tail.delivered} == {("orders", p) for p in range(6)}
    # c1 was cut past its session: it learnt of the expiry once the link passed again, and registered anew
    c1 = [json.loads(line)["event"] for line in (tmp_path / "run" / "traces" / "lab_c1.jsonl").read_text().splitlines()]
    assert "session_expired" in c1 and c1.count("registered") == 2, c1


SHIPPED_FAULTS = ["zk-leader", "zk-follower", "quorum-loss", "zk-cut", "broker-kill", "consumer-pause",
                  "session-expiry", "partitions-added", "topic-created"]


@pytest.mark.faults_full
@pytest.mark.parametrize("name", SHIPPED_FAULTS)
def test_each_shipped_fault_scenario_passes_the_invariants_in_the_default_profile(name: str, tmp_path: Path,
                                                                                  spark) -> None:
    """The shipped fault scenarios, run as ``lab --scenario NAME`` runs them, judged as the fault matrix judges its
    runs (zero lost, never two live owners, duplicates only uncommitted, commits never backwards, owned again within
    session timeout + 1 s of each heal)."""
    import time

    from zkconsumer.lab.faults.matrix import FaultRun
    from zkconsumer.lab.faults.verdict import judge

    started = time.monotonic()
    summary = lab_for(RunPlan.from_scenario(builtin(name)), tmp_path, console=Console(file=io.StringIO())).run()
    assert summary["lost"] == 0 and summary["verify_ok"] and not summary.get("fault_errors"), summary
    verdict = judge(spark, FaultRun(name, "default", str(tmp_path), time.monotonic() - started))
    if name in ("partitions-added", "topic-created"):  # topic actions are not faults: no heal to judge from
        assert verdict.line == "no fault_healed line in the trace", verdict.line
    else:
        assert verdict.status == "PASS", verdict.line


# ------------------------------------------------------------------------------- shipped as package data
ZIPPED = """
import sys, zipfile
sys.path.insert(0, sys.argv[1])
import zkconsumer.scenario.reader as s
assert s.__file__.startswith(sys.argv[1]), s.__file__  # imported from the zip, not from the checkout
print(",".join(s.builtin_names()))
from zkconsumer.cli import main
try:
    main(["lab", "--help"])
except SystemExit as e:
    assert e.code == 0
"""


def test_the_scenarios_travel_in_the_package_zip_and_the_cli_starts_without_them(tmp_path: Path) -> None:
    """Spark's --py-files zip carries the shipped scenarios; a zip without them still runs the CLI (spark-submit
    runs zkconsumer's __main__ from one)."""
    import subprocess
    import sys
    import zipfile

    from zkconsumer.analysis.spark import package_zip

    full = package_zip(tmp_path)
    bare = tmp_path / "bare.zip"
    with zipfile.ZipFile(full) as src, zipfile.ZipFile(bare, "w") as dst:
        for name in src.namelist():
            if name.endswith(".py"):
                dst.writestr(name, src.read(name))
    for zipped, names in ((full, ",".join(builtin_names())), (bare, "")):
        run = subprocess.run([sys.executable, "-c", ZIPPED, str(zipped)], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.splitlines()[0] == names
