"""Kafka 0.8.2.2's own high-level consumer and zkconsumer members in ONE group: Kafka's code is the judge.

Each test runs a group over one real ZooKeeper and a real broker, with three of Kafka's own consumers (from the
published 0.8.2.2 jars, each in its own JVM so that ``kill -9`` hits one member) and three ``zkconsumer consume``
processes, two streams each, through joins, graceful leaves and ``kill -9`` of either kind
(zkconsumer/apache_kafka/mixed.py). After every step, once the registrations show it:

* every partition has exactly one owner node, naming a thread of a live member;
* the owner nodes are the assignment zkconsumer's assignor computes for the registered members: Kafka's members
  claimed what Kafka computed, ours what we computed, and the two agree;
* every registration is the subscription both kinds were given, in the same format;

and throughout, committed offsets never went backwards; at the end every record produced (before and during the
churn) was consumed by someone, and the survivors committed the log end. Records come from zkconsumer's broker,
and in one case from Kafka 0.8.2.2's own broker (then only the zkconsumer members are not Kafka's code).
"""

from __future__ import annotations

import contextlib
import json

import pytest
from helpers import wait_until
from kafka import KafkaProducer

from zkconsumer.apache_kafka.mixed import MixedGroup, Subscription
from zkconsumer.apache_kafka.processes import KafkaBroker
from zkconsumer.apache_kafka.race import Moment, claim_delays, join_race, kafka_log_moments, trace_moments
from zkconsumer.records import encode_value
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

pytestmark = pytest.mark.slow

GROUP = "mixed"
STATIC = Subscription({"t": 10}, streams=2)  # 12 threads at most over 10 partitions: some get none
WILDCARD = Subscription({"t": 10, "u": 4}, streams=2, whitelist="[tu]")


def produce(bootstrap: str, topics: dict[str, int], start: int, count: int, api_version=None) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2, api_version=api_version)
    for seq in range(start, start + count):
        for topic, partitions in topics.items():
            for p in range(partitions):
                producer.send(topic, value=encode_value(topic, p, seq), partition=p)
    producer.flush()
    producer.close()


@contextlib.contextmanager
def records_from(kind: str, zk_connect: str, registry: Registry, topics: dict[str, int], request, tmp_path):
    """zkconsumer's broker (the conftest fixture) or Kafka 0.8.2.2's own, with the topics created through
    ZooKeeper and served; yields (bootstrap, api_version for our producer)."""
    for t, n in topics.items():
        create_topic(registry, t, n)
    if kind == "zkconsumer":
        yield request.getfixturevalue("broker").bootstrap, None
        return
    with KafkaBroker(zk_connect, data_dir=tmp_path / "kafka-broker") as kafka:
        for t, n in topics.items():
            kafka.wait_topic(t, n)
        yield kafka.bootstrap, (0, 8, 2)


#: Extended (make full): the default profile under RoundRobin claims the same way as under Range, and Range in the
#: default profile runs in make test with Kafka's own broker serving the records (the last cell); RoundRobin in the
#: kafka-0.8 profile (RoundRobin runs in make test in the whitelist's cell, the kafka-0.8 profile in Range's).
@pytest.mark.parametrize(("strategy", "profile", "sub", "records"), [
    pytest.param("range", "default", STATIC, "zkconsumer", marks=pytest.mark.extended),
    ("range", "kafka-0.8", STATIC, "zkconsumer"),
    pytest.param("roundrobin", "default", STATIC, "zkconsumer", marks=pytest.mark.extended),
    pytest.param("roundrobin", "kafka-0.8", STATIC, "zkconsumer", marks=pytest.mark.extended),
    ("roundrobin", "default", WILDCARD, "zkconsumer"),  # a whitelist over two topics: the format both must read
    ("range", "default", STATIC, "kafka"),  # everything Kafka's but the zkconsumer members: its broker too
], ids=["range-default", "range-kafka08", "roundrobin-default", "roundrobin-kafka08", "whitelist-default",
        "range-default-on-kafka-broker"])
def test_kafka_and_zkconsumer_members_share_a_group(zk_connect: str, registry: Registry, request, tmp_path,
                                                    strategy: str, profile: str, sub: Subscription,
                                                    records: str) -> None:
    topics = dict(sub.topics)
    with records_from(records, zk_connect, registry, topics, request, tmp_path) as (bootstrap, api_version):
        run_churn(zk_connect, bootstrap, api_version, topics, strategy, profile, sub, tmp_path)


def run_churn(zk_connect: str, bootstrap: str, api_version, topics: dict[str, int], strategy: str, profile: str,
              sub: Subscription, tmp_path) -> None:
    produce(bootstrap, topics, 0, 20, api_version)
    with MixedGroup(zk_connect, GROUP, sub, strategy, profile, tmp_path) as group:
        for n in ("k1", "k2", "k3"):
            group.kafka(n)
        for n in ("z1", "z2", "z3"):
            group.zkconsumer(n)
        group.step("start", "k1")
        group.step("start", "z1")
        group.step("start", "k2")
        group.step("start", "z2")
        produce(bootstrap, topics, 20, 20, api_version)
        group.step("start", "k3")
        group.step("start", "z3")
        group.step("leave", "z1")   # graceful, ours
        group.step("leave", "k1")   # graceful, Kafka's
        produce(bootstrap, topics, 40, 20, api_version)
        group.step("kill", "k2")    # kill -9 of Kafka's JVM: its session expires
        group.step("kill", "z2")    # kill -9 of ours
        produce(bootstrap, topics, 60, 20, api_version)

        end = {(t, p): 80 for t, n in topics.items() for p in range(n)}
        every = {(t, p, o) for (t, p), n in end.items() for o in range(n)}
        wait_until(lambda: not every - group.consumed(), timeout=30, interval=0.2,
                   message="every record consumed by some member")
        wait_until(lambda: group.offsets.sample() == end, timeout=15,
                   message=f"the survivors to commit the log end {end}")
        assert group.offsets.backwards == [], f"committed offsets went backwards: {group.offsets.backwards}"
        by_kind = {kind: sum(len(m.consumed()) for m in group.members.values() if m.kind == kind)
                   for kind in ("kafka", "zkconsumer")}
        assert by_kind["kafka"] > 0 and by_kind["zkconsumer"] > 0, by_kind  # both kinds consumed
        assert [(s.action, s.member) for s in group.steps] == [
            ("start", "k1"), ("start", "z1"), ("start", "k2"), ("start", "z2"), ("start", "k3"), ("start", "z3"),
            ("leave", "z1"), ("leave", "k1"), ("kill", "k2"), ("kill", "z2")]
        # each join's race, read back from both kinds' own records (Kafka's log, our trace; one clock): the joiner
        # tried its first claim after it registered, and the members before it released after that (k1, Kafka's,
        # releases everything at every rebalance; z3, the sixth, gets no partition under range, so no claim)
        order = ["k1", "z1", "k2", "z2", "k3"]
        for i in range(1, len(order)):
            claim, released = group.join_race(order[i], order[:i])
            assert claim is not None and claim >= 0, (order[i], claim)
            assert released is not None and released >= 0, (order[i], released)


def test_a_join_race_reads_the_first_claim_and_the_last_holders_release() -> None:
    r, c, x = Moment.REGISTERED, Moment.CLAIM, Moment.RELEASE
    joiner = [(99.0, c), (100.0, r), (100.06, c), (102.1, c)]  # a claim of an earlier life comes before
    holders = [[(99.5, x), (100.05, x), (100.3, x)], [(100.2, x)], []]  # the first release after it, each
    claim, released = join_race(joiner, holders)
    assert round(claim) == 60 and round(released) == 200  # claimed before the last release: a conflict
    assert join_race([(1.0, c)], holders) == (None, None)  # never registered
    assert join_race([(1.0, r)], [[(0.5, x)]]) == (None, None)


def test_the_race_is_read_from_kafkas_log_and_from_our_trace(tmp_path) -> None:
    log = tmp_path / "c1.kafka.log"
    log.write_text(
        "[2026-11-29 02:33:24,063] INFO [lab_c1], end registering consumer lab_c1 in ZK (kafka.consumer.Zoo...)\n"
        "[2026-11-29 02:33:24,070] INFO [g-warm-up_warm-up-1], end registering consumer x in ZK (...)\n"
        "[2026-11-29 02:33:24,148] INFO [lab_c1], Releasing partition ownership (kafka.consumer.Zoo...)\n"
        "[2026-11-29 02:33:24,184] INFO [lab_c1], lab_c1-0 successfully owned partition 2 for topic orders (...)\n"
        "[2026-11-29 02:33:24,190] INFO [lab_c1], lab_c1-0 successfully owned partition 1 for topic orders (...)\n")
    moments = kafka_log_moments(log, "[lab_c1]")  # not the warm-up member's lines
    assert [m for _, m in moments] == [Moment.REGISTERED, Moment.RELEASE, Moment.CLAIM, Moment.CLAIM]
    assert [(round(ms), first) for ms, first in claim_delays(moments)] == [(121, True)]  # the start, its claim
    trace = tmp_path / "lab_c1.jsonl"
    trace.write_text("\n".join(json.dumps(e) for e in [
        {"ts": 1000, "event": "registered"}, {"ts": 1008, "event": "attempt_started"},
        {"ts": 1013, "event": "claim_conflict"}, {"ts": 1015, "event": "claim_conflict"},
        {"ts": 3020, "event": "claimed"}, {"ts": 5000, "event": "registered"}, {"ts": 5040, "event": "claimed"}]))
    # a start, then a registration on a new session
    assert [(round(ms), first) for ms, first in claim_delays(trace_moments(trace))] == [(13, True), (40, False)]
    assert kafka_log_moments(tmp_path / "missing.log", "[x]") == []
