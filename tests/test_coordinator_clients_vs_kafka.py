"""The same client groups on two group coordinators, step by step: Apache Kafka 3.9.1's (its jars, ZooKeeper mode)
and zkconsumer's broker. Kafka's is the judge.

Each group is ``zkconsumer consume --mode coordinator`` processes (kafka-python, or ``--client librdkafka``) with
range, roundrobin, cooperative-sticky, or static members (``group.instance.id``). One scenario runs on each
coordinator: members join one by one, one leaves, one is restarted (static), one is killed with ``kill -9``.
Exact generation numbers and rebalance counts depend on the members' timing, so each step's line says whether the
generation advanced and who rebalanced (:func:`timing_free`).
After each step the group is left to settle (DescribeGroups says Stable with the members expected, and the members'
traces say together that they own every partition once). Then one line is written down:

* the group's state and protocol (DescribeGroups);
* whether kafka-python's generation advanced (its trace carries it; librdkafka's does not);
* which members rebalanced;
* the sizes of the shares;
* how many partitions moved (only for cooperative-sticky and static restarts, where it is deterministic; range and
  roundrobin deal by member ids, which are random).

The two transcripts must be equal. Where Kafka's answer differs from ours, docs/coordinator.md says so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import fresh_chroot
from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from zkconsumer.apache_kafka.processes import KafkaBroker
from zkconsumer.broker import Broker
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

pytestmark = pytest.mark.slow

TOPIC, PARTITIONS, GROUP = "t", 6, "g"
SESSION_MS = 2000


@pytest.fixture(scope="module")
def kafka(zk_server, tmp_path_factory) -> Iterator[KafkaBroker]:
    """Kafka 3.9.1's broker, its coordinator set as zkconsumer's is below: no initial delay, sessions from 1 s."""
    zk_connect = fresh_chroot(zk_server.connect_string, "kafka391_clients")
    with KafkaBroker(zk_connect, version="3.9.1", data_dir=tmp_path_factory.mktemp("kafka391c"),
                     properties={"group.initial.rebalance.delay.ms": 0,
                                 "group.min.session.timeout.ms": 1000}) as broker:
        with Registry.open(zk_connect) as reg:
            create_topic(reg, TOPIC, PARTITIONS)
        broker.wait_topic(TOPIC, PARTITIONS)
        yield broker


@pytest.fixture(scope="module")
def ours(zk_server, tmp_path_factory) -> Iterator[Broker]:
    zk_connect = fresh_chroot(zk_server.connect_string, "zkc_clients")
    with Registry.open(zk_connect) as reg:
        create_topic(reg, TOPIC, PARTITIONS)
    with Broker(zk_connect, data_dir=tmp_path_factory.mktemp("zkc-broker"), group_initial_rebalance_delay_ms=0,
                group_min_session_timeout_ms=1000) as broker:
        yield broker


@dataclass(frozen=True)
class Scenario:
    client: str  # kafka-python | librdkafka
    strategy: str
    static: bool = False

    @property
    def steps(self) -> list[tuple[str, str]]:
        joins = [("join", "a"), ("join", "b"), ("join", "c")]
        if self.static:  # a static member's SIGTERM does not leave: it comes back under its instance id
            return [*joins, ("restart", "b"), ("kill", "c")]
        return [*joins, ("leave", "b"), ("kill", "c")]


class Group:
    """The scenario's member processes on one coordinator, and what their traces and DescribeGroups say."""

    def __init__(self, scenario: Scenario, bootstrap: str, work: Path, group: str) -> None:
        self.scenario, self.bootstrap, self.work, self.group = scenario, bootstrap, work, group
        self.traces = work / "traces"
        self.procs: dict[str, subprocess.Popen] = {}
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="oracle-admin")
        self.owners: dict[str, str] = {}  # partition → member, at the last step

    def start(self, name: str) -> None:
        args = [sys.executable, "-m", "zkconsumer", "consume", "--mode", "coordinator", "--group", self.group,
                "--bootstrap-server", self.bootstrap, "--topic", TOPIC, "--consumer-id", name, "--output", "none",
                "--from-beginning", "--trace-dir", str(self.traces), "--strategy", self.scenario.strategy,
                "--property", f"session.timeout.ms={SESSION_MS}", "--property", "heartbeat.interval.ms=300",
                "--property", "max.poll.interval.ms=20000", "--property", f"client.id={name}"]
        if self.scenario.client != "kafka-python":
            args += ["--client", self.scenario.client]
        if self.scenario.static:
            args += ["--property", f"group.instance.id={name}"]
        log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()

    def signal(self, name: str, sig: int) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait(30)

    def events(self, name: str) -> list[dict]:
        path = self.traces / f"{self.group}_{name}.jsonl"
        if not path.exists():
            return []
        return [e for e in map(json.loads, path.read_text().splitlines())
                if e["event"] in ("rebalance_done", "released")]

    def dones(self, name: str) -> list[dict]:
        return [e for e in self.events(name) if e["event"] == "rebalance_done"]

    def owned(self, name: str) -> set[str]:
        """What the member owns now: its last share, less what it released since (a cooperative revocation is
        followed by a rebalance_done only when partitions are added)."""
        owned: set[str] = set()
        for e in self.events(name):
            owned = set(e["owned"]) if e["event"] == "rebalance_done" else owned - set(e["partitions"])
        return owned

    def settled(self, live: list[str], after: dict[str, int]) -> dict | None:
        """The step's line once the group has settled, else None. ``after``: a member must have more
        ``rebalance_done`` lines than this (a restarted member's new life)."""
        try:
            info = self.admin.describe_groups([self.group])[self.group]
        except KafkaError as e:  # Kafka creates its offsets topic at the first FindCoordinator
            if e.retriable:
                return None
            raise
        if info["group_state"] != "Stable" or len(info["members"]) != len(live):
            return None
        dones = {m: self.dones(m) for m in live}
        if any(len(dones[m]) <= after.get(m, -1) or not dones[m] for m in live):
            return None
        shares = {m: self.owned(m) for m in live}
        owned = Counter(tp for m in live for tp in shares[m])
        if sorted(owned) != sorted(f"{TOPIC}-{p}" for p in range(PARTITIONS)) or set(owned.values()) != {1}:
            return None
        # the generation the group reached (kafka-python's cooperative members write rebalance_done only when
        # partitions are added, so not every member's last line carries it)
        generation = max((dones[m][-1].get("generation") or 0 for m in live), default=0) or None
        owners = {tp: m for m in live for tp in shares[m]}
        moved = sum(1 for tp, m in owners.items() if self.owners.get(tp, m) != m)
        self.owners = owners
        deterministic = self.scenario.strategy == "cooperative-sticky" or self.scenario.static
        return {"state": info["group_state"], "protocol": info["protocol_data"], "generation": generation,
                "rebalances": {m: len(dones[m]) for m in live},
                "shares": sorted(len(shares[m]) for m in live),
                "moved": moved if deterministic else None}

    def run(self) -> list[tuple[str, str, dict]]:
        transcript = []
        live: list[str] = []
        seen: dict | None = None  # the last step's line as measured
        for action, name in self.scenario.steps:
            after: dict[str, int] = {}
            if action == "join":
                self.start(name)
                live.append(name)
            elif action == "leave":
                self.signal(name, signal.SIGTERM)
                live.remove(name)
            elif action == "restart":
                after[name] = len(self.dones(name))
                self.signal(name, signal.SIGTERM)
                self.start(name)
            elif action == "kill":
                self.signal(name, signal.SIGKILL)
                live.remove(name)
            deadline = time.monotonic() + 45
            while (line := self.settled(live, after)) is None:
                if time.monotonic() > deadline:
                    info = self.admin.describe_groups([self.group])[self.group]
                    raise AssertionError(f"{self.scenario} on {self.bootstrap}: no settled group after {action} "
                                         f"{name}: {info['group_state']}, {len(info['members'])} members, traces "
                                         f"{ {m: sorted(self.owned(m)) for m in live} }")
                time.sleep(0.1)
            seen, previous = line, seen
            if previous is not None:
                line = timing_free(previous, line)
            transcript.append((action, name, line))
        return transcript

    def close(self) -> None:
        for proc in self.procs.values():
            proc.kill()
            proc.wait()
        self.admin.close()


def timing_free(before: dict, line: dict) -> dict:
    """A step's line, with the counts that depend on the members' timing replaced by what does not.

    * After a kill: the members learn of the expiry at their next heartbeat, each on its own 300 ms cycle. When a
      heartbeat answer REBALANCE_IN_PROGRESS is still on its way as the new generation completes, kafka-python
      rejoins once more. If that member is the leader, the coordinator starts another generation, as Kafka's does
      for a leader's join in Stable. Seen once in fourteen runs, on Kafka 3.9.1's coordinator.
    * Under cooperative-sticky: every member that gave partitions up asks for a follow-up rebalance on its own.
      When one asks after the follow-up generation already completed, there is one more. Seen once in five runs,
      on zkconsumer's coordinator.

    * After a join: kafka-python's joining member now and then rejoins once more as its first generation completes,
      on Kafka's coordinator as often as on ours (2026-11-25); under a fresh machine's load (CI, 2026-11-28) Kafka
      3.9.1's took generation 4 where ours took 3 when static member c joined, three runs in a row.

    So every step's line after the first keeps the outcome (state, protocol, shares, partitions moved) and says
    only whether the generation advanced and which members rebalanced: exact generation numbers are the clients'
    timing, not the coordinator's rules."""
    out = dict(line)
    if before.get("generation") is not None:
        out["generation"] = "advanced" if line["generation"] > before["generation"] else "same"
    out["rebalances"] = {m: "again" if n > before["rebalances"].get(m, 0) else "no" for m, n in
                         line["rebalances"].items()}
    return out


#: Left to ``make full`` (extended): RoundRobin, the client's assignor over the same eager protocol as Range (the
#: coordinator sees the same requests in the same order), librdkafka's static members (static membership on the
#: coordinator's side runs in make test with kafka-python's), and kafka-python's dynamic Range (its eager steps run in
#: make test with kafka-python's static members and librdkafka's dynamic ones).
EXTENDED = pytest.mark.extended
SCENARIOS = [pytest.param(Scenario("kafka-python", "range"), marks=EXTENDED),
             pytest.param(Scenario("kafka-python", "roundrobin"), marks=EXTENDED),
             Scenario("kafka-python", "cooperative-sticky"), Scenario("kafka-python", "range", static=True),
             Scenario("librdkafka", "range"), pytest.param(Scenario("librdkafka", "roundrobin"), marks=EXTENDED),
             Scenario("librdkafka", "cooperative-sticky"),
             pytest.param(Scenario("librdkafka", "range", static=True), marks=EXTENDED)]


def run_on_both(scenario: Scenario, kafka: KafkaBroker, ours: Broker, work: Path) -> dict[str, list]:
    transcripts = {}
    for name, bootstrap in (("kafka-3.9.1", kafka.bootstrap), ("zkconsumer", ours.bootstrap)):
        (work / name).mkdir(parents=True)
        group = Group(scenario, bootstrap, work / name,
                      f"{GROUP}-{scenario.client}-{scenario.strategy}-{scenario.static}-{work.name}")
        try:
            transcripts[name] = group.run()
        finally:
            group.close()
    return transcripts


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.client}-{s.strategy}{'-static' * s.static}")
def test_the_same_group_steps_the_same_way_on_both_coordinators(scenario: Scenario, kafka: KafkaBroker,
                                                                 ours: Broker, tmp_path: Path) -> None:
    """A difference must show three times in a row. kafka-python's own timing now and then adds a generation on
    either coordinator, outside the steps :func:`timing_free` covers: under CI's load a leave once took two
    generations on Kafka's (a member's rejoin raced the generation's end), and in whole-suite runs a joining member
    of the range scenario rejoined once more, on Kafka's side as often as on ours (three runs of 2026-11-25). A
    coordinator that behaves otherwise differs every time."""
    differed = []
    for attempt in ("first", "again", "third"):
        transcripts = run_on_both(scenario, kafka, ours, tmp_path / attempt)
        if transcripts["zkconsumer"] == transcripts["kafka-3.9.1"]:
            break
        differed.append(transcripts)
    assert len(differed) < 3, f"differed three times; the first time: {differed[0]}"
    steps = transcripts["kafka-3.9.1"]
    if scenario.static:  # the restarted static member: no rebalance for the others, its share back, nothing moved
        restart = next(line for action, _, line in steps if action == "restart")
        assert restart["generation"] == "same" and restart["moved"] == 0
        assert {m: n for m, n in restart["rebalances"].items() if m != "b"} == \
            {m: "no" for m in restart["rebalances"] if m != "b"}
