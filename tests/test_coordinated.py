"""Coordinator mode: groups of CoordinatorConsumerConnector members against the local broker's group coordinator
(real ZooKeeper, real broker, kafka-python's group machinery): ownership, delivery, commits, kill -9."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import wait_until
from kafka import KafkaAdminClient, KafkaProducer

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector, assignor_class, filter_pattern
from zkconsumer.consumer.zookeeper.connector import ConsumerTimeout, RebalanceListener
from zkconsumer.records import encode_value
from zkconsumer.types import GroupMode
from zkconsumer.zk.layout import blacklist, whitelist
from zkconsumer.zk.topics import create_topic

HAS_COORDINATOR = importlib.util.find_spec("zkconsumer.coordinator.manager") is not None
needs_coordinator = pytest.mark.skipif(not HAS_COORDINATOR, reason="the broker has no group coordinator yet "
                                                                   "(zkconsumer.coordinator, branch coord)")

#: Broker settings that keep a test's group fast: no initial rebalance delay, short sessions allowed.
FAST_GROUPS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 500}


# ------------------------------------------------------------------------------------------- pure pieces
def test_strategy_names_map_to_kafka_python_assignors() -> None:
    assert assignor_class("range").name == "range"
    assert assignor_class("roundrobin").name == "roundrobin"
    assert assignor_class("sticky").name == "sticky"


def test_filters_become_match_patterns_with_full_match_semantics() -> None:
    import re

    white = re.compile(filter_pattern(whitelist("orders.*, pay")))
    assert white.match("orders-eu") and white.match("pay") and not white.match("payment")
    black = re.compile(filter_pattern(blacklist("orders.*")))
    assert black.match("pay") and not black.match("orders") and black.match("xorders")


def test_sticky_is_refused_by_the_zookeeper_connector_only() -> None:
    config = ConsumerConfig.from_properties({"group.id": "g", "partition.assignment.strategy": "sticky"})
    config.check_mode(GroupMode.COORDINATOR)
    with pytest.raises(ConfigError, match="coordinator mode only"):
        config.check_mode(GroupMode.ZOOKEEPER)
    with pytest.raises(ConfigError, match="heartbeat.interval.ms"):
        config.with_overrides(**{"session.timeout.ms": 1000, "heartbeat.interval.ms": 1000}
                              ).check_mode(GroupMode.COORDINATOR)


def test_consume_cli_needs_brokers_in_coordinator_mode_and_refuses_sticky_with_zookeeper(capsys) -> None:
    from zkconsumer.cli import main

    assert main(["consume", "--mode", "coordinator", "--group", "g", "--topic", "t"]) == 1
    assert "bootstrap.servers" in capsys.readouterr().err
    assert main(["consume", "--group", "g", "--topic", "t", "--strategy", "sticky"]) == 1
    assert "coordinator mode only" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture
def cbroker(zk_connect: str, tmp_path):
    """The local broker with its group coordinator, tuned for fast tests where it offers the settings."""
    from zkconsumer.broker import Broker

    accepted = inspect.signature(Broker).parameters
    options = {k: v for k, v in FAST_GROUPS.items() if k in accepted}
    b = Broker(zk_connect, data_dir=tmp_path / "broker", **options).start()
    try:
        yield b
    finally:
        b.stop()


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for seq in range(start, start + per_partition):
        for p in range(partitions):
            producer.send(topic, value=encode_value(topic, p, seq), partition=p)
    producer.flush()
    producer.close()


def member(bootstrap: str, group: str, name: str, trace_dir: Path | None = None, **props) -> \
        CoordinatorConsumerConnector:
    settings = {"group.id": group, "bootstrap.servers": bootstrap, "consumer.id": name,
                "auto.offset.reset": "smallest", "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                "metadata.max.age.ms": 500, "auto.commit.interval.ms": 200, "consumer.timeout.ms": -1}
    if trace_dir is not None:
        settings["zkconsumer.trace.dir"] = str(trace_dir)
    settings.update({k.replace("_", "."): v for k, v in props.items()})
    return CoordinatorConsumerConnector(ConsumerConfig.from_properties(settings))


class Reader:
    """Drains a member's streams on threads, recording every (partition, offset) handed out."""

    def __init__(self, connector: CoordinatorConsumerConnector, topic: str, streams: int = 1) -> None:
        self.connector = connector
        self.seen: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._drain, args=(s,), daemon=True)
                        for s in connector.create_message_streams({topic: streams})[topic]]
        for t in self.threads:
            t.start()

    def _drain(self, stream) -> None:
        try:
            for record in stream:
                with self._lock:
                    self.seen.append((record.partition, record.offset))
        except ConsumerTimeout:
            pass

    def owned(self) -> set[TopicPartition]:
        return set(self.connector.owned_partitions())


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from kafka import TopicPartition as KTP

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: [KTP(topic, p) for p in range(partitions)]})[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


def exactly_once_each(readers: list[Reader], topic: str, partitions: int) -> bool:
    """Every partition owned by exactly one member."""
    owned = [tp for r in readers for tp in r.owned()]
    return len(owned) == partitions and set(owned) == {TopicPartition(topic, p) for p in range(partitions)}


# ------------------------------------------------------------------------------------------- the group
@needs_coordinator
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky"])
def test_members_join_and_leave_every_partition_owned_once_nothing_lost(zk_connect, registry, cbroker, strategy,
                                                                          tmp_path) -> None:
    create_topic(registry, "t", 6)
    produce(cbroker.bootstrap, "t", 6, 50)
    readers = [Reader(member(cbroker.bootstrap, "g", name, tmp_path / "traces",
                             partition_assignment_strategy=strategy), "t") for name in ("a", "b")]
    try:
        wait_until(lambda: exactly_once_each(readers, "t", 6), message="two members sharing 6 partitions")
        readers.append(Reader(member(cbroker.bootstrap, "g", "c", tmp_path / "traces",
                                     partition_assignment_strategy=strategy), "t"))
        wait_until(lambda: exactly_once_each(readers, "t", 6) and all(len(r.owned()) == 2 for r in readers),
                   message="three members with 2 partitions each")
        produce(cbroker.bootstrap, "t", 6, 50, start=50)
        leaving = readers.pop(0)
        leaving.connector.shutdown()
        wait_until(lambda: exactly_once_each(readers, "t", 6), message="the two left own everything")
        produce(cbroker.bootstrap, "t", 6, 50, start=100)
        everything = {(p, o) for p in range(6) for o in range(150)}
        wait_until(lambda: everything <= set(leaving.seen + [x for r in readers for x in r.seen]),
                   message="every produced record consumed")
        wait_until(lambda: committed(cbroker.bootstrap, "g", "t", 6) == {p: 150 for p in range(6)},
                   message="processed offsets committed")
    finally:
        for r in readers:
            r.connector.shutdown()
    events = [json.loads(line) for f in (tmp_path / "traces").glob("*.jsonl") for line in f.read_text().splitlines()]
    done = [e for e in events if e["event"] == "rebalance_done"]
    assert done and all(e["mode"] == "coordinator" and e["generation"] >= 1 and e["member_id"] for e in done)


@needs_coordinator
def test_commits_resume_where_they_left_off(zk_connect, registry, cbroker) -> None:
    create_topic(registry, "t", 2)
    produce(cbroker.bootstrap, "t", 2, 40)
    first = member(cbroker.bootstrap, "g", "a", auto_commit_enable=False, consumer_timeout_ms=5000)
    [stream] = first.create_message_streams({"t": 1})["t"]
    taken = [next(stream) for _ in range(30)]
    stream.ack()
    first.commit_offsets()
    first.shutdown()
    done = defaultdict(int)
    for r in taken:
        done[r.partition] = max(done[r.partition], r.offset + 1)
    assert committed(cbroker.bootstrap, "g", "t", 2) == dict(done)
    second = member(cbroker.bootstrap, "g", "b", consumer_timeout_ms=3000)
    try:
        [stream] = second.create_message_streams({"t": 1})["t"]
        rest = []
        with pytest.raises(ConsumerTimeout):
            for r in stream:
                rest.append((r.partition, r.offset))
        firsts = {p: min(o for q, o in rest if q == p) for p in {q for q, _ in rest}}
        assert firsts == {p: done.get(p, 0) for p in firsts}, "resumed from the committed offsets"
        assert {(r.partition, r.offset) for r in taken} | set(rest) == {(p, o) for p in range(2) for o in range(40)}
    finally:
        second.shutdown()


@needs_coordinator
@pytest.mark.slow
def test_a_member_killed_with_sigkill_is_replaced_after_its_session(zk_connect, registry, cbroker,
                                                                    tmp_path) -> None:
    create_topic(registry, "t", 4)
    produce(cbroker.bootstrap, "t", 4, 100)
    traces = tmp_path / "traces"
    proc = subprocess.Popen(
        [sys.executable, "-m", "zkconsumer", "consume", "--mode", "coordinator", "--bootstrap-server",
         cbroker.bootstrap, "--group", "g", "--consumer-id", "victim", "--topic", "t", "--from-beginning",
         "--output", "none", "--trace-dir", str(traces), "--property", "session.timeout.ms=2000",
         "--property", "heartbeat.interval.ms=300", "--property", "metadata.max.age.ms=500",
         "--property", "auto.commit.interval.ms=200"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    survivor = None
    try:
        def victim_owns() -> bool:
            path = traces / "g_victim.jsonl"
            return path.exists() and any(json.loads(line).get("event") == "rebalance_done"
                                         and json.loads(line)["owned"] for line in path.read_text().splitlines())

        wait_until(victim_owns, message="the subprocess member owns partitions")
        survivor = Reader(member(cbroker.bootstrap, "g", "survivor", traces), "t")
        wait_until(lambda: 0 < len(survivor.owned()) < 4, message="the group split the partitions")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        wait_until(lambda: len(survivor.owned()) == 4, timeout=30, message="the survivor owns all after expiry")
        produce(cbroker.bootstrap, "t", 4, 20, start=100)
        victim_seen = {(e["partition"], e["offset"]) for e in map(json.loads, (traces / "g_victim.jsonl")
                                                                   .read_text().splitlines())
                       if e["event"] == "record_delivered"}
        everything = {(p, o) for p in range(4) for o in range(120)}
        wait_until(lambda: everything <= victim_seen | set(survivor.seen), message="no record lost")
    finally:
        if proc.poll() is None:
            proc.kill()
        if survivor is not None:
            survivor.connector.shutdown()


PAUSED_VICTIM = """
import sys, time
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
bootstrap, traces = sys.argv[1:3]
c = CoordinatorConsumerConnector(ConsumerConfig.from_properties({
    "group.id": "g", "consumer.id": "victim", "bootstrap.servers": bootstrap, "auto.offset.reset": "smallest",
    "session.timeout.ms": 2000, "heartbeat.interval.ms": 300, "metadata.max.age.ms": 500,
    "auto.commit.interval.ms": 200, "consumer.timeout.ms": -1, "zkconsumer.trace.dir": traces}))
for record in c.create_message_streams({"t": 1})["t"][0]:
    time.sleep(0.02)  # an application at work: the queue stays full
"""


@needs_coordinator
@pytest.mark.slow
def test_a_member_woken_from_a_pause_past_its_session_hands_out_nothing_before_its_rebalance(
        zk_connect, registry, cbroker, tmp_path) -> None:
    """Failure modes a and b of docs/failure-modes.md in coordinator mode: a member SIGSTOPped past its session
    while another takes its partitions and commits past it. Woken, its streams hand out nothing of what it had
    queued until its next assignment (before the fence, 150 records in 25 ms went out before kafka-python's
    heartbeat noticed the session was gone)."""
    create_topic(registry, "t", 2)
    produce(cbroker.bootstrap, "t", 2, 2000)
    traces = tmp_path / "traces"
    trace = traces / "g_victim.jsonl"

    def events() -> list[dict]:
        return [json.loads(line) for line in trace.read_text().splitlines() if line.strip()] if trace.exists() else []

    victim = subprocess.Popen([sys.executable, "-c", PAUSED_VICTIM, cbroker.bootstrap, str(traces)],
                              stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    survivor = None
    try:
        wait_until(lambda: sum(e["event"] == "record_delivered" for e in events()) > 20, timeout=60,
                   message="the victim delivering")
        victim.send_signal(signal.SIGSTOP)  # a GC pause
        time.sleep(0.2)  # not a synchronisation: a line the victim was writing as the signal came is complete
        paused_at = len(events())
        try:
            survivor = Reader(member(cbroker.bootstrap, "g", "survivor"), "t")
            wait_until(lambda: len(survivor.owned()) == 2, timeout=30, message="the survivor owning both")
            victim_at = {e["partition"]: e["offset"] for e in events() if e["event"] == "record_delivered"}

            def committed_past() -> bool:
                survivor.connector.commit_offsets()
                done = committed(cbroker.bootstrap, "g", "t", 2)
                return all(done.get(p, -1) > victim_at.get(p, -1) + 1 for p in range(2))

            wait_until(committed_past, message="the survivor committing past where the victim stood")
        finally:
            victim.send_signal(signal.SIGCONT)
        # woken: it finds its session gone, rejoins and gets a share again
        wait_until(lambda: any(e["event"] == "rebalance_done" for e in events()[paused_at:]), timeout=30,
                   message="the victim's rebalance after waking")
        woken = events()[paused_at:]
        assert any(e["event"] == "session_expired" for e in woken), woken[:5]
        first_rebalance = next(i for i, e in enumerate(woken) if e["event"] == "rebalance_done")
        zombie = [e for e in woken[:first_rebalance] if e["event"] == "record_delivered"]
        assert zombie == [], f"handed out after waking, of partitions the survivor owns: {zombie[:3]} " \
                             f"{[(e['event'], e['ts']) for e in woken[:6]]}"
    finally:
        victim.kill()
        victim.wait(30)
        if survivor is not None:
            survivor.connector.shutdown()


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def before_releasing_partitions(self, partitions) -> None:
        self.calls.append(("release", {t: sorted(ps) for t, ps in partitions.items()}))

    def before_starting_fetchers(self, consumer_id, assignment) -> None:
        self.calls.append(("start", {t: dict(ps) for t, ps in assignment.items()}))


class HoldPartitionZero:
    """A handover that holds every partition 0 until ``free`` is set and starts each at the broker's commit."""

    def __init__(self, free: threading.Event) -> None:
        self.free = free

    def hold(self, tp: TopicPartition, thread_id: str) -> bool:
        return tp.partition == 0 and not self.free.is_set()

    def start_offset(self, tp: TopicPartition, kafka_committed: int | None) -> int | None:
        return kafka_committed

    def committed(self, values) -> None:
        pass

    def released(self, tps, committed) -> None:
        pass


@needs_coordinator
def test_held_partitions_wait_for_the_hook_and_the_listener_sees_each_step(zk_connect, registry, cbroker) -> None:
    create_topic(registry, "t", 2)
    produce(cbroker.bootstrap, "t", 2, 20)
    released = threading.Event()
    recorder = Recorder()
    config = ConsumerConfig.from_properties({"group.id": "g", "bootstrap.servers": cbroker.bootstrap,
                                             "consumer.id": "a", "auto.offset.reset": "smallest",
                                             "session.timeout.ms": 3000, "heartbeat.interval.ms": 300,
                                             "metadata.max.age.ms": 500, "auto.commit.interval.ms": 200})
    c = CoordinatorConsumerConnector(config, listener=recorder, handover=HoldPartitionZero(released))
    reader = Reader(c, "t", streams=2)
    try:
        wait_until(lambda: {o for p, o in reader.seen if p == 1} == set(range(20)), message="partition 1 consumed")
        assert not [x for x in reader.seen if x[0] == 0], "a held partition was handed out"
        released.set()
        wait_until(lambda: {o for p, o in reader.seen if p == 0} == set(range(20)), message="partition 0 after release")
        assert ("start", {"t": {0: "g_a-0", 1: "g_a-1"}}) in recorder.calls, "one stream per partition, in order"
    finally:
        c.shutdown()
    assert recorder.calls[-1] == ("release", {"t": [0, 1]})
    assert committed(cbroker.bootstrap, "g", "t", 2) == {0: 20, 1: 20}


@needs_coordinator
def test_wildcard_members_share_matching_topics_only(zk_connect, registry, cbroker) -> None:
    for topic in ("ta", "tb", "other"):
        create_topic(registry, topic, 2)
        produce(cbroker.bootstrap, topic, 2, 10)
    seen: dict[str, set] = defaultdict(set)
    members = [member(cbroker.bootstrap, "g", name) for name in ("a", "b")]

    def drain(stream) -> None:
        for r in stream:
            seen[r.topic].add((r.partition, r.offset))

    try:
        for m in members:
            for s in m.create_message_streams_by_filter(whitelist("t.*"), 1):
                threading.Thread(target=drain, args=(s,), daemon=True).start()
        matching = {TopicPartition(t, p) for t in ("ta", "tb") for p in range(2)}
        wait_until(lambda: sorted(tp for m in members for tp in m.owned_partitions()) == sorted(matching),
                   message="the 4 matching partitions owned once each")
        wait_until(lambda: all(len(seen[t]) == 20 for t in ("ta", "tb")), message="matching topics consumed")
        assert "other" not in seen
    finally:
        for m in members:
            m.shutdown()


@needs_coordinator
def test_a_topic_created_after_the_group_formed_is_shared(zk_connect, registry, cbroker) -> None:
    """Members subscribed to a topic that does not exist yet share it once it is created (metadata refresh)."""
    readers = [Reader(member(cbroker.bootstrap, "g", name), "late") for name in ("a", "b")]
    try:
        create_topic(registry, "late", 4)
        produce(cbroker.bootstrap, "late", 4, 10)
        wait_until(lambda: exactly_once_each(readers, "late", 4) and all(r.owned() for r in readers),
                   message="both members own part of the new topic")
        wait_until(lambda: {(p, o) for p in range(4) for o in range(10)} <= {x for r in readers for x in r.seen},
                   message="the new topic consumed")
    finally:
        for r in readers:
            r.connector.shutdown()


@needs_coordinator
def test_a_partition_that_comes_back_to_its_member_resumes_at_the_commit_not_at_the_clients_position(
        cbroker, registry) -> None:
    """Found by ``zkconsumer compare``: after an eager rebalance that gave a member its own partition back,
    kafka-python kept the fetch position, past records the member had fetched but dropped at the revocation,
    and one record was never delivered. The partition must resume at the committed offset."""
    create_topic(registry, "t", 1)
    produce(cbroker.bootstrap, "t", 1, 200)
    c = member(cbroker.bootstrap, "g", "a", **{"queued.max.message.chunks": 1})
    [stream] = c.create_message_streams({"t": 1})["t"]
    try:
        first = [next(stream).offset for _ in range(10)]  # the rest waits in the queue and in the backlog
        assert first == list(range(10))
        generation = c.group_generation
        c.request_rejoin()  # revoke (commit 9: offset 9 was handed out, not processed) and get t-0 back
        wait_until(lambda: c.group_generation > generation and c.owned_partitions(), message="t-0 back")
        rest = []
        while len(first) + len(rest) < 200 or rest[-1] < 199:
            rest.append(next(stream).offset)
        assert rest[0] == 9  # the record in flight comes again (it was not processed), nothing is skipped
        assert set(first) | set(rest) == set(range(200))
    finally:
        c.shutdown()


@needs_coordinator
def test_a_join_that_cannot_complete_is_reported_not_waited_out_silently(cbroker, registry, tmp_path, caplog) -> None:
    """Issue 20: a member whose join does not complete within its rebalance timeout logs a WARNING (the
    coordinator's answers, the group's state from DescribeGroups), writes ``join_stalled``, and keeps trying.
    Forced with an assignor the group does not use (INCONSISTENT_GROUP_PROTOCOL on every JoinGroup); the same
    against Kafka 3.9.1's coordinator: tests/test_kafka_coordinator.py."""
    import logging

    create_topic(registry, "t", 2)
    traces = tmp_path / "traces"
    first = Reader(member(cbroker.bootstrap, "g", "a"), "t")
    second = None
    try:
        wait_until(lambda: len(first.owned()) == 2, message="the range member owns both")
        caplog.set_level(logging.WARNING, logger="zkconsumer.consumer.coordinated")
        second = member(cbroker.bootstrap, "g", "b", traces, partition_assignment_strategy="roundrobin",
                        max_poll_interval_ms=2000)
        second.create_message_streams({"t": 1})
        path = traces / "g_b.jsonl"

        def stalled() -> list[dict]:
            return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "join_stalled"] \
                if path.exists() else []

        [report, *_] = wait_until(stalled, timeout=10, message="join_stalled")
        assert report["join_errors"]["JoinGroup"] == "INCONSISTENT_GROUP_PROTOCOL(23)" and report["waited_ms"] >= 2000
        assert report["group_state"] == "Stable" and len(report["group_members"]) == 1, report
        assert any("g_b: join not complete" in r.getMessage() and "INCONSISTENT_GROUP_PROTOCOL(23)" in r.getMessage()
                   for r in caplog.records)
        assert second.stall is not None and not second.owned_partitions()
    finally:
        first.connector.shutdown()
        if second is not None:
            second.shutdown()
