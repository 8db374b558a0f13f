"""Kafka 0.8.2.2's own high-level consumer and zkconsumer members in ONE group: Kafka's code is the judge.

Each test runs a group over one real ZooKeeper and a real broker, with three of Kafka's own consumers
(``ZookeeperConsumerConnector`` from the published 0.8.2.2 jars, each in its own JVM so that ``kill -9`` hits one
member) and three ``zkconsumer consume`` processes, two streams each, through joins, graceful leaves and ``kill -9``
of either kind. After every step, once the registrations show the step (a killed member's session has expired):

* every partition has exactly one owner node, naming a thread of a live member;
* the owner nodes are the assignment zkconsumer's assignor computes for the registered members: Kafka's members
  claimed what Kafka computed, ours what we computed, and the two agree;
* committed offsets never went backwards (sampled throughout);

and at the end every record produced (before and during the churn) was consumed by someone.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import wait_until
from kafka import KafkaProducer

from zkconsumer.apache_kafka.processes import HighLevelConsumers
from zkconsumer.assignors import AssignmentContext, assign
from zkconsumer.records import encode_value
from zkconsumer.registry import Registry, connect
from zkconsumer.topics import create_topic

pytestmark = pytest.mark.slow

GROUP = "mixed"
TOPIC = "t"
PARTITIONS = 10
STREAMS = 2
#: the wildcard case: a second topic, both matched by one whitelist (Kafka registers it as pattern white_list)
OTHER, OTHER_PARTITIONS, WHITELIST = "u", 4, "[tu]"
#: Both kinds get the same settings: a session that expires within a test's patience after kill -9, a backoff
#: shorter than 0.8's 2 s default (the churn here has 6 steps), and retries enough for six members' conflicts.
COMMON = {"zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 500, "rebalance.max.retries": 10,
          "auto.commit.enable": "true", "auto.commit.interval.ms": 300, "auto.offset.reset": "smallest"}


class KafkaMember:
    """One of Kafka's own consumers, alone in its JVM."""

    kind = "kafka"

    def __init__(self, zk: str, name: str, strategy: str, work: Path, wildcard: bool) -> None:
        self.name = name
        self.jvm = HighLevelConsumers(zk, GROUP, [] if wildcard else [TOPIC], whitelist=WHITELIST if wildcard else None,
                                      streams=STREAMS, strategy=strategy, properties=COMMON, report_records=True,
                                      work_dir=work / name)

    def start(self) -> None:
        self.jvm.start()
        self.jvm.start_member(self.name)

    def leave(self) -> None:
        self.jvm.stop_member(self.name)
        self.jvm.stop()

    def kill(self) -> None:
        self.jvm.kill()

    def consumed(self) -> set[tuple[str, int, int]]:
        return {(r["topic"], r["partition"], r["offset"]) for r in self.jvm.records()}

    def close(self) -> None:
        self.jvm.kill()
        self.jvm.stop()


class ZkMember:
    """One ``zkconsumer consume`` process printing every record it hands out."""

    kind = "zkconsumer"

    def __init__(self, zk: str, name: str, strategy: str, profile: str, work: Path, wildcard: bool) -> None:
        self.name = name
        self.out = work / f"{name}.out"
        self.err = work / f"{name}.err"
        self.args = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", zk, "--group", GROUP,
                     "--consumer-id", name, *(["--whitelist", WHITELIST] if wildcard else ["--topic", TOPIC]),
                     "--streams", str(STREAMS), "--strategy", strategy, "--profile", profile, "--output", "record"]
        self.args += [a for k, v in COMMON.items() for a in ("--property", f"{k}={v}")]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def leave(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)  # the CLI shuts the connector down: commit, release, deregister
        self.proc.wait(30)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def consumed(self) -> set[tuple[str, int, int]]:
        got = set()
        for line in self.out.read_text(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[0] in (TOPIC, OTHER):
                got.add((parts[0], int(parts[1]), int(parts[2])))
        return got

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class OffsetWatch:
    """Reads the group's committed offsets every 50 ms and remembers any that went backwards."""

    def __init__(self, zk: str) -> None:
        self.client = connect(zk)
        self.reg = Registry(self.client)
        self.last: dict[tuple[str, int], int] = {}
        self.backwards: list[tuple[tuple[str, int], int, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def sample(self) -> dict[tuple[str, int], int]:
        offsets = self.reg.offsets(GROUP)
        for tp, off in offsets.items():
            if off < self.last.get(tp, -1):
                self.backwards.append((tp, self.last[tp], off))
            self.last[tp] = max(off, self.last.get(tp, -1))
        return offsets

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            with contextlib.suppress(Exception):  # a read racing a delete; the next sample sees it
                self.sample()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.client.stop()
        self.client.close()


def expected_owners(reg: Registry, strategy: str, topics: dict[str, int]) -> dict[tuple[str, int], str]:
    """The assignment of the members registered now, as zkconsumer's assignor computes it."""
    ids = reg.consumer_ids(GROUP)
    wildcard = len(topics) > 1
    for cid in ids:  # both kinds must have registered the same subscription, in the same format
        r = reg.registration(GROUP, cid)
        assert r is not None, cid
        if wildcard:
            assert (r.pattern, dict(r.subscription)) == ("white_list", {WHITELIST: STREAMS}), (cid, r)
        else:
            assert (r.pattern, dict(r.subscription)) == ("static", {TOPIC: STREAMS}), (cid, r)
    ctx = AssignmentContext({cid: {t: STREAMS for t in topics} for cid in ids},
                            {t: range(n) for t, n in topics.items()})
    return {(tp.topic, tp.partition): tid for tp, tid in assign(strategy, ctx).owners.items()}


def settle(reg: Registry, strategy: str, topics: dict[str, int], live: list[str],
           timeout: float = 45.0) -> dict[tuple[str, int], str]:
    """Wait until exactly ``live`` are registered and the owner nodes are the assignment computed for them."""
    want_ids = sorted(f"{GROUP}_{n}" for n in live)

    def converged():
        if sorted(reg.consumer_ids(GROUP)) != want_ids:
            return None
        owners = reg.owners(GROUP)
        return owners if owners == expected_owners(reg, strategy, topics) else None

    owners = wait_until(converged, timeout=timeout, interval=0.1,
                        message=f"owners = the computed assignment for {live}: owners now {reg.owners(GROUP)}")
    assert sorted(owners) == [(t, p) for t in sorted(topics) for p in range(topics[t])]  # one owner per partition
    live_threads = {f"{GROUP}_{n}-{i}" for n in live for i in range(STREAMS)}
    assert set(owners.values()) <= live_threads
    return owners


def produce(bootstrap: str, topics: dict[str, int], start: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for seq in range(start, start + count):
        for topic, partitions in topics.items():
            for p in range(partitions):
                producer.send(topic, value=encode_value(topic, p, seq), partition=p)
    producer.flush()
    producer.close()


@pytest.mark.parametrize(("strategy", "profile", "wildcard"), [
    ("range", "default", False), ("range", "kafka-0.8", False),
    ("roundrobin", "default", False), ("roundrobin", "kafka-0.8", False),
    ("roundrobin", "default", True),  # a whitelist over two topics: the registration format both must read
])
def test_kafka_and_zkconsumer_members_share_a_group(zk_connect: str, registry: Registry, broker, tmp_path: Path,
                                                    strategy: str, profile: str, wildcard: bool) -> None:
    topics = {TOPIC: PARTITIONS, OTHER: OTHER_PARTITIONS} if wildcard else {TOPIC: PARTITIONS}
    for t, n in topics.items():
        create_topic(registry, t, n)
    produce(broker.bootstrap, topics, 0, 20)
    k = {n: KafkaMember(zk_connect, n, strategy, tmp_path, wildcard) for n in ("k1", "k2", "k3")}
    z = {n: ZkMember(zk_connect, n, strategy, profile, tmp_path, wildcard) for n in ("z1", "z2", "z3")}
    members = {**k, **z}
    watch = OffsetWatch(zk_connect)
    live: list[str] = []

    def step(what: str, name: str) -> None:
        getattr(members[name], what)()
        if what == "start":
            live.append(name)
        else:
            live.remove(name)
        settle(registry, strategy, topics, live)

    try:
        step("start", "k1")
        step("start", "z1")
        step("start", "k2")
        step("start", "z2")
        produce(broker.bootstrap, topics, 20, 20)
        step("start", "k3")
        step("start", "z3")
        step("leave", "z1")   # graceful, ours
        step("leave", "k1")   # graceful, Kafka's
        produce(broker.bootstrap, topics, 40, 20)
        step("kill", "k2")    # kill -9 of Kafka's JVM: its session expires
        step("kill", "z2")    # kill -9 of ours
        produce(broker.bootstrap, topics, 60, 20)
        end = {(t, p): 80 for t, n in topics.items() for p in range(n)}

        def all_consumed():
            seen = set().union(*(m.consumed() for m in members.values()))
            return not {(t, p, o) for (t, p), n in end.items() for o in range(n)} - seen

        wait_until(all_consumed, timeout=30, interval=0.2, message="every record consumed by some member")
        wait_until(lambda: watch.sample() == end, timeout=15, message=f"the survivors to commit the log end {end}")
        assert watch.backwards == [], f"committed offsets went backwards: {watch.backwards}"
        per_kind: dict[str, int] = defaultdict(int)  # both kinds took part in consuming
        for m in members.values():
            per_kind[m.kind] += len(m.consumed())
        assert per_kind["kafka"] > 0 and per_kind["zkconsumer"] > 0, per_kind
    finally:
        watch.close()
        for m in members.values():
            m.close()
