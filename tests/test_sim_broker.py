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
    broker.latency_ms["m"] = 2300  # the lab's slow-broker: 2.3 s each way
    client = broker.client("m", {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100})
    seen: list[tuple[int, dict]] = []

    def main() -> None:
        client.assign([TP("t", 0), TP("t", 1)])
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
    assert seen[:3] == [(100, {}), (200, {}), (300, {})]  # never held longer than its timeout
    assert seen[3] == (5300, {0: [0, 1, 2, 3, 4]})  # the answer for t-1 was dropped: no longer assigned
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
        rt.spawn(producer, name="producer")
        for _ in range(2):
            got: dict = {}
            while not got:
                got = client.poll(timeout_ms=1000)
            seen.append((rt.scheduler.now_ms, {tp.partition: [r.offset for r in rs] for tp, rs in got.items()}))

    rt.run(main)
    assert seen == [(31, {1: [0]}), (531, {0: [0]})]  # the record's time and one link delay, not the long poll's end
