"""The next-generation consumer protocol (KIP-848, ``group.protocol=consumer``) where it runs: Apache Kafka 4.1.1 in
KRaft mode (zkconsumer.apache_kafka.kraft), with librdkafka (confluent-kafka) members.

A group with the server-side ``uniform`` or ``range`` assignor joins, splits the partitions, rebalances when a
member leaves and when one comes back, and a restarted member resumes from the group's committed offsets: nothing
below a commit is delivered again, nothing above it is skipped. The coordinator, not a client leader, computes the
assignment; DescribeConsumerGroups (the admin client) shows the group as a ``consumer``-protocol group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from zkconsumer.apache_kafka.kraft import KraftBroker

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.slow
PARTITIONS = 4


@pytest.fixture(scope="module")
def kraft(tmp_path_factory) -> Iterator[KraftBroker]:
    with KraftBroker(data_dir=tmp_path_factory.mktemp("kraft")) as broker:
        yield broker


def make_topic(kraft: KraftBroker, topic: str, records_per_partition: int) -> set[tuple[int, int]]:
    admin = AdminClient({"bootstrap.servers": kraft.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": kraft.bootstrap})
    for p in range(PARTITIONS):
        for i in range(records_per_partition):
            producer.produce(topic, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    return {(p, i) for p in range(PARTITIONS) for i in range(records_per_partition)}


def member(kraft: KraftBroker, group: str, topic: str, assignor: str) -> Consumer:
    c = Consumer({"bootstrap.servers": kraft.bootstrap, "group.id": group, "group.protocol": "consumer",
                  "group.remote.assignor": assignor, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    return c


def poll_until(consumers: list[Consumer], seen: list, until, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            if m is None:
                continue
            assert m.error() is None, m.error()
            seen.append((m.partition(), m.offset()))
            c.commit(message=m, asynchronous=False)
        if until():
            return
    raise AssertionError(f"timed out; {len(seen)} records, assignments "
                         f"{[sorted(tp.partition for tp in c.assignment()) for c in consumers]}")


def owned(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_a_consumer_protocol_group_joins_rebalances_and_resumes_from_its_commits(kraft: KraftBroker,
                                                                                 assignor: str) -> None:
    topic, group = f"kip848-{assignor}", f"g-{assignor}"
    expected = make_topic(kraft, topic, 20)
    a, b = member(kraft, group, topic, assignor), member(kraft, group, topic, assignor)
    seen: list = []
    try:
        # both join; the coordinator splits the partitions 2 + 2 and every record is consumed once
        poll_until([a, b], seen, lambda: set(seen) >= expected and len(owned(a)) == len(owned(b)) == 2)
        assert sorted(owned(a) + owned(b)) == list(range(PARTITIONS))
        assert len(seen) == len(set(seen)), "a record delivered twice without a rebalance in between"
        # b leaves: a gets everything
        b.close()
        poll_until([a], seen, lambda: owned(a) == list(range(PARTITIONS)))
    finally:
        a.close()
    # the group's commits are where the records end; a new member resumes there: nothing is delivered again
    more = {(p, i) for p in range(PARTITIONS) for i in range(20, 25)}
    producer = Producer({"bootstrap.servers": kraft.bootstrap})
    for p, i in sorted(more):
        producer.produce(topic, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0
    c = member(kraft, group, topic, assignor)
    resumed: list = []
    try:
        poll_until([c], resumed, lambda: set(resumed) >= more)
        assert set(resumed) == more, sorted(set(resumed) - more)[:10]
        committed = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [25] * PARTITIONS
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": kraft.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert str(described.type).upper().endswith("CONSUMER"), described.type


def test_the_librdkafka_member_traces_a_consumer_protocol_group_like_any_member(kraft: KraftBroker,
                                                                                 tmp_path) -> None:
    """zkconsumer's librdkafka member (``consume --client librdkafka``, the lab's KIP-848 variant): the trace has
    the events the analysis reads, and what it committed is what it processed."""
    import json
    import threading

    from zkconsumer.config import ConsumerConfig
    from zkconsumer.consumer.librdkafka import RdkafkaMember

    expected = make_topic(kraft, "traced", 5)
    config = ConsumerConfig.from_properties({
        "group.id": "traced", "consumer.id": "m1", "bootstrap.servers": kraft.bootstrap,
        "group.protocol": "consumer", "group.remote.assignor": "uniform", "auto.offset.reset": "smallest",
        "auto.commit.interval.ms": 200, "zkconsumer.trace.dir": str(tmp_path)})
    member = RdkafkaMember(config, ["traced"])
    stop, seen = threading.Event(), []

    def on_record(msg) -> bool:
        seen.append((msg.partition(), msg.offset()))
        if set(seen) >= expected:
            stop.set()
        return True

    runner = threading.Thread(target=member.run, args=(stop, on_record), daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive() and set(seen) == expected
    events = [json.loads(line) for line in (tmp_path / "traced_m1.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "registered" and kinds[-1] == "shutdown" and "rebalance_done" in kinds
    done = next(e for e in events if e["event"] == "rebalance_done")
    assert sorted(done["owned"]) == [f"traced-{p}" for p in range(PARTITIONS)]
    assert sum(e["event"] == "record_delivered" for e in events) == len(seen)
    last = {}
    for e in events:
        if e["event"] == "offset_committed":
            last[e["partition"]] = e["offset"]
    assert last == {p: 5 for p in range(PARTITIONS)}
