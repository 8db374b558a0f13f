"""The simulated broker's client (zkconsumer/sim/broker.py) as kafka-python's ``KafkaConsumer`` behaves: one fetch in
flight, a poll that waits no longer than its timeout however slow the link, and an answer kept only for partitions
still assigned at the offsets it was fetched from."""

from __future__ import annotations

from collections import namedtuple

from zkconsumer.sim.broker import SimBroker
from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.tasks import Runtime

TP = namedtuple("TP", "topic partition")


def test_a_poll_on_a_slow_link_returns_at_its_timeout_and_a_later_one_collects_the_answer() -> None:
    rt = Runtime(Scheduler(seed=None))
    broker = SimBroker(rt, delay_ms=1)
    broker.create_topic("t", 2)
    broker.produce("t", 0, 5)
    broker.produce("t", 1, 3)
    client = broker.client("m", {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100})
    seen: list[tuple[int, dict]] = []

    def main() -> None:
        client.assign([TP("t", 0), TP("t", 1)])
        rt.sleep(0.1)  # the client's metadata for t (RETRY_BACKOFF_MS), learned before the link slows
        broker.latency_ms["m"] = 2300  # the lab's slow-broker: 2.3 s each way
        for _ in range(3):
            got = client.poll(timeout_ms=100)
            seen.append((rt.scheduler.now_ms, {tp.partition: [r.offset for r in rs] for tp, rs in got.items()}))
        client.assign([TP("t", 0)])  # a rebalance took t-1 away while the fetch was in flight
        rt.sleep(5.0)
        got = client.poll(timeout_ms=100)
        seen.append((rt.scheduler.now_ms, {tp.partition: [r.offset for r in rs] for tp, rs in got.items()}))
        broker.latency_ms.clear()
        got = client.poll(timeout_ms=100)  # t-0 goes on from where the kept answer left it
        seen.append((rt.scheduler.now_ms, {tp.partition: [r.offset for r in rs] for tp, rs in got.items()}))

    rt.run(main)
    assert seen[:3] == [(200, {}), (300, {}), (400, {})]  # never held longer than its timeout
    assert seen[3] == (5400, {0: [0, 1, 2, 3, 4]})  # the answer for t-1 was dropped: no longer assigned
    assert seen[4][1] == {} and seen[4][0] - seen[3][0] <= 105  # nothing past offset 5 yet: the long poll


def test_a_caught_up_fetch_is_answered_when_a_record_arrives_not_when_its_long_poll_ends() -> None:
    """fetch.min.bytes is 1: a broker holding a fetch in its long poll answers as soon as one of its partitions gets
    a record. The simulated broker once waited out the whole fetch.wait.max.ms, so a caught-up member received
    every new record up to 100 ms late, and a woken zombie lagged its partitions' new owner on live records."""
    rt = Runtime(Scheduler(seed=None))
    broker = SimBroker(rt, delay_ms=1)
    broker.create_topic("t", 2)
    client = broker.client("m", {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100})
    seen: list[tuple[int, dict]] = []

    def producer() -> None:
        rt.sleep(0.030)
        broker.produce("t", 1, 1)  # on the fetch's partition: wakes it
        rt.sleep(0.500)
        broker.produce("t", 0, 1)  # another fetch is parked by then

    def main() -> None:
        client.assign([TP("t", 0), TP("t", 1)])
        rt.sleep(0.1)  # the client's metadata for t
        rt.spawn(producer, name="producer")
        for _ in range(2):
            got: dict = {}
            while not got:
                got = client.poll(timeout_ms=1000)
            seen.append((rt.scheduler.now_ms, {tp.partition: [r.offset for r in rs] for tp, rs in got.items()}))

    rt.run(main)
    assert seen == [(131, {1: [0]}), (631, {0: [0]})]  # the record's time and one link delay, not the long poll's end


def test_a_partition_the_client_has_no_metadata_for_is_first_fetched_after_the_backoff() -> None:
    """kafka-python asks for a new topic's metadata on ``assign`` and fetches its partitions when its poll loop next
    turns, after the shorter of the poll's timeout and retry_backoff_ms: the lab's first records of a claimed
    partition came 116-128 ms after the claim, and in simulation 2 ms after (seed 81's reproducer then over-counted
    duplicates of committed records). A further partition of a topic the client knows is fetched at once; one the
    topic gained since (``partitions-added``) waits for the metadata again."""
    rt = Runtime(Scheduler(seed=None))
    broker = SimBroker(rt, delay_ms=1)
    broker.create_topic("t", 2)
    for p in (0, 1):
        broker.produce("t", p, 3)
    client = broker.client("m", {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100})
    first: dict[int, int] = {}

    def poll_until(partition: int) -> None:
        while partition not in first:
            for tp in client.poll(timeout_ms=100):
                first.setdefault(tp.partition, rt.scheduler.now_ms)

    def main() -> None:
        client.assign([TP("t", 0)])  # t is new to the client: t-0 waits the backoff
        poll_until(0)
        start = rt.scheduler.now_ms
        client.assign([TP("t", 0), TP("t", 1)])  # t-1 was in the same metadata answer: fetched at once
        poll_until(1)
        first[1] -= start
        broker.add_partitions("t", 3)
        broker.produce("t", 2, 1)
        start = rt.scheduler.now_ms
        client.assign([TP("t", 0), TP("t", 1), TP("t", 2)])  # a partition the metadata did not list
        poll_until(2)
        first[2] -= start
        assert client.position(TP("t", 2)) == 1

    rt.run(main)
    assert first[0] == 102  # the backoff, then a round trip
    assert first[1] <= 102 + 2 and first[1] < 100  # no backoff: at most the in-flight long poll's round trip
    assert 100 <= first[2] <= 204
