"""The broker in a simulation: the partitions' logs, and the client a member's fetcher polls them through.

What a 0.8 group's correctness depends on at the broker is small: which records exist (each partition's log end
offset), where ``auto.offset.reset`` puts a partition nobody committed, and whether a member can reach the broker at
all. So a log here is a count: record ``o`` of ``orders-3`` exists once the log end is past ``o``, and its value is
what the lab's producer writes for it (``records.encode_value``), so a simulated run reads
like a real one (the same bytes, :func:`value_encoder`).

:class:`SimKafkaClient` stands in for the fetcher's kafka-python ``KafkaConsumer`` (consumer/fetcher.py's
``ClientFactory``): the same seven calls, on virtual time. The fetcher's own code (its command queue, its reset
check, its hand-off to the connector) runs unchanged around it. A fetch that finds nothing new waits, as a broker's
long poll does, for the first record of one of its partitions or its ``fetch.wait.max.ms`` (``timeout_ms``),
whichever comes first, and answers one link delay later. A partition the client has no metadata for is first
fetched one ``retry_backoff_ms`` after it was assigned, as kafka-python's is (:data:`RETRY_BACKOFF_MS`). A member
whose broker link is cut gets nothing (its polls time out, a position it asks for is not resolved), and so does
every member while the broker's process is down (``down``: killed, not yet started again); a slowed link adds its
latency each way.
"""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from zkconsumer.errors import OperationTimedOut
from zkconsumer.sim import tasks

#: A fetched record as kafka-python's ``ConsumerRecord`` has the fields the fetcher reads.
SimRecord = namedtuple("SimRecord", "topic partition offset key value timestamp headers")

#: kafka-python's default max.poll.records: one poll returns at most this many
MAX_POLL_RECORDS = 500
#: a fetch whose request or answer was lost (a cut link, a killed broker) is given up this long after its answer
#: was due, and sent again (kafka-python's connection notices a dead peer and fails the request)
LOST_FETCH_US = 1_000_000
#: kafka-python's ``retry_backoff_ms`` (the fetcher leaves its default). A partition the client has no metadata for
#: (its topic is new to the client, or the partition is) is not fetched at once: ``assign`` sends a metadata
#: request, and the partition's first fetch goes when the consumer's poll loop next turns, after the shorter of the
#: poll's timeout and this backoff. Measured on the lab's broker (kafka-python 3.0, fetch.wait.max.ms and the
#: fetcher's poll 100 ms): 116-128 ms to the first record of a new topic, 5-10 ms for a further partition of a known
#: one; with the poll's timeout at 500 ms and the backoff at 300 ms, 319 ms (docs/simulation.md)
RETRY_BACKOFF_MS = 100


class LogEnds:
    """What a world's producer has written: each partition's log end (records ``0..end-1``), by topic."""

    def __init__(self) -> None:
        self.log_end: dict[tuple[str, int], int] = {}

    def create_topic(self, topic: str, partitions: int) -> None:
        for p in range(partitions):
            self.log_end.setdefault((topic, p), 0)

    def add_partitions(self, topic: str, total: int) -> None:
        self.create_topic(topic, total)

    def partitions(self, topic: str) -> int:
        return sum(1 for t, _ in self.log_end if t == topic)


class SimBroker(LogEnds):
    """Every partition's log end offset, and each member host's link to the broker (cut or slowed)."""

    def __init__(self, runtime: tasks.Runtime, delay_ms: int = 1) -> None:
        super().__init__()
        self.runtime = runtime
        self.delay_ms = delay_ms
        self.cut: set[str] = set()
        self.latency_ms: dict[str, int] = {}
        #: the broker's process is not running: nothing is answered (its log is kept for the restart)
        self.down = False
        #: fetches the broker holds in their long poll, each woken by the first record for one of its partitions
        self._parked: list[tuple[frozenset[tuple[str, int]], Callable[[], None]]] = []

    def unreachable(self, host: str) -> bool:
        """No answer reaches ``host``: its link is cut, or the broker is down."""
        return self.down or host in self.cut

    def produce(self, topic: str, partition: int, count: int = 1) -> None:
        self.log_end[(topic, partition)] += count
        key = (topic, partition)
        woken = [wake for keys, wake in self._parked if key in keys]
        if woken:
            self._parked = [(keys, wake) for keys, wake in self._parked if key not in keys]
            for wake in woken:
                self.runtime.scheduler.call_later(0, wake)

    def park(self, keys: Iterable[tuple[str, int]], wake: Callable[[], None]) -> Callable[[], None]:
        """Hold a fetch in its long poll until a record arrives for one of ``keys`` (``wake`` is then called, once);
        returns what forgets it (its wait ran out first)."""
        entry = (frozenset(keys), wake)
        self._parked.append(entry)

        def forget() -> None:
            if entry in self._parked:
                self._parked.remove(entry)

        return forget

    def client(self, host: str, settings: dict[str, Any]) -> SimKafkaClient:
        return SimKafkaClient(self, host, settings)

    def read(self, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, int]]:
        """A fetch's answer: per partition, the offsets it returns (start, end), at most ``MAX_POLL_RECORDS`` in
        all, in the request's order."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        budget = MAX_POLL_RECORDS
        for key, start in offsets.items():
            if budget <= 0:
                break
            n = min(self.log_end.get(key, 0) - start, budget)
            if n > 0:
                out[key] = (start, start + n)
                budget -= n
        return out

    def one_way_ms(self, host: str) -> int:
        """``host``'s link to the broker, one way: the base delay plus a slowed link's latency."""
        return self.delay_ms + self.latency_ms.get(host, 0)

    def round_trip(self, host: str) -> None:
        """One request and its answer over ``host``'s link (the caller checks for a cut first)."""
        tasks.sleep(2 * self.one_way_ms(host) / 1000.0)


class SimKafkaClient:
    """The seven ``KafkaConsumer`` calls the fetcher makes (assign, seek, seek_to_beginning, seek_to_end, position,
    poll, close), on a :class:`SimBroker`."""

    def __init__(self, broker: SimBroker, host: str, settings: dict[str, Any]) -> None:
        self.broker = broker
        self.host = host
        self.earliest = settings.get("auto_offset_reset", "latest") == "earliest"
        self._assigned: list[tuple[str, int]] = []
        self._position: dict[tuple[str, int], int | None] = {}  # None: reset to the end when next asked
        #: the broker's long poll (kafka-python's fetch_max_wait_ms; the fetcher sets it)
        self.max_wait_ms = int(settings.get("fetch_max_wait_ms", 500))
        self._in_flight: _Fetch | None = None
        #: when each partition the client has metadata for may first be fetched (virtual µs)
        self._fetchable_at: dict[tuple[str, int], int] = {}
        self.closed = False

    @staticmethod
    def _key(tp: Any) -> tuple[str, int]:
        return (tp.topic, tp.partition)

    def assign(self, partitions: Iterable[Any]) -> None:
        keys = sorted({self._key(tp) for tp in partitions})  # the broker's order, not the caller's set's
        self._position = {k: v for k, v in self._position.items() if k in keys}
        for k in keys:
            self._position.setdefault(k, 0 if self.earliest else None)
        self._assigned = keys
        self._learn(keys)

    def _learn(self, keys: Iterable[tuple[str, int]]) -> None:
        """The metadata request kafka-python sends when it knows nothing of one of ``keys``: it asks for their
        topics, and every partition the broker has of them becomes fetchable one backoff from now (the poll loop's
        next turn); a request the broker cannot answer (a cut link, a broker down) teaches nothing, and the next
        call asks again."""
        broker = self.broker
        if all(k in self._fetchable_at for k in keys) or broker.unreachable(self.host):
            return
        topics = {topic for topic, _ in keys}
        unknown = [k for k in broker.log_end if k[0] in topics and k not in self._fetchable_at]
        if not unknown:
            return
        at = broker.runtime.scheduler.now_us + max(RETRY_BACKOFF_MS, 2 * broker.one_way_ms(self.host)) * 1000
        for key in unknown:
            self._fetchable_at[key] = at

    def _wait_fetchable(self, key: tuple[str, int]) -> None:
        """Hold a call that needs ``key``'s leader until the client has its metadata (``position``)."""
        self._learn([key])
        at = self._fetchable_at.get(key)
        now = self.broker.runtime.scheduler.now_us
        if at is not None and at > now:
            tasks.sleep((at - now) / 1e6)

    def seek(self, tp: Any, offset: int) -> None:
        self._position[self._key(tp)] = offset

    def seek_to_beginning(self, tp: Any) -> None:
        self._position[self._key(tp)] = 0

    def seek_to_end(self, tp: Any) -> None:
        self._position[self._key(tp)] = None

    def position(self, tp: Any, timeout_ms: int | None = None) -> int:
        key = self._key(tp)
        if self.broker.unreachable(self.host):
            tasks.sleep((timeout_ms or 30000) / 1000.0)
            raise OperationTimedOut(f"no answer from the broker for {key[0]}-{key[1]} within {timeout_ms} ms")
        self._wait_fetchable(key)
        self.broker.round_trip(self.host)
        return self._resolve(key)

    def _resolve(self, key: tuple[str, int]) -> int:
        pos = self._position.get(key)
        end = self.broker.log_end.get(key, 0)
        if pos is None or pos > end:  # reset to the end, or out of range (auto.offset.reset decides)
            pos = 0 if (pos is not None and self.earliest) else end
            self._position[key] = pos
        return pos

    def poll(self, timeout_ms: int = 0) -> dict[Any, list[SimRecord]]:
        """What the assigned partitions have past their positions, waiting up to ``timeout_ms`` for it.

        As kafka-python's ``poll``: one fetch in flight at a time, answered *by the broker*, on the scheduler, not
        by the calling task (the request arrives one link delay after it is sent; the broker answers at once if it
        has records, else at the first record for one of its partitions or when its long poll, ``fetch.wait.max.ms``,
        ends; the answer arrives one delay later). A
        poll waits for that answer at most ``timeout_ms`` and then returns empty, the fetch still in flight: the
        next poll collects it. So a slow link never holds the fetcher's loop (and its commands: a rebalance's
        ``assign``) longer than ``timeout_ms``, and a member paused mid-fetch finds the answer waiting when it wakes,
        records and all (the pause zombie's buffered records). An answer's records are kept only for partitions
        still assigned at the offsets they were fetched from (kafka-python drops the rest)."""
        broker = self.broker
        fetch = self._in_flight
        if fetch is not None and not fetch.arrived.is_set() and broker.runtime.scheduler.now_us >= fetch.give_up_us:
            self._in_flight = fetch = None  # lost with the link or the broker: kafka-python's request timed out
        if fetch is None:
            if broker.unreachable(self.host):
                tasks.sleep(timeout_ms / 1000.0)
                return {}
            self._learn(self._assigned)
            now = broker.runtime.scheduler.now_us
            ready = [k for k in self._assigned if self._fetchable_at.get(k, now + 1) <= now]
            if not ready:  # nothing has its metadata yet: the poll loop turns again when the first has
                waits = [at - now for k in self._assigned if (at := self._fetchable_at.get(k)) is not None]
                tasks.sleep(min([timeout_ms * 1000, *waits]) / 1e6)
                return {}
            fetch = self._in_flight = self._send_fetch(ready)
        if not fetch.arrived.is_set() and not fetch.arrived.wait(max(timeout_ms, 0) / 1000.0):
            return {}
        self._in_flight = None
        return self._accept(fetch.answer)

    def _send_fetch(self, keys: list[tuple[str, int]]) -> _Fetch:
        broker = self.broker
        scheduler = broker.runtime.scheduler
        one_way = broker.one_way_ms(self.host)
        offsets = {key: self._resolve(key) for key in keys}  # what the request asks for
        fetch = _Fetch(tasks.Event(broker.runtime), {},
                       scheduler.now_us + (self.max_wait_ms + 2 * one_way) * 1000 + LOST_FETCH_US)

        def respond() -> None:
            if broker.down:
                return  # killed while it held the fetch: the answer is lost with the connection
            fetch.answer = broker.read(offsets)
            scheduler.call_later(one_way, fetch.arrived.set)

        def at_broker() -> None:
            if broker.unreachable(self.host):
                return  # the request is lost with the link (or with the broker)
            if any(o < broker.log_end.get(k, 0) for k, o in offsets.items()):
                respond()
                return
            # the broker's long poll: the answer goes as soon as a record arrives for a partition the fetch asks for
            # (fetch.min.bytes is 1), else when fetch.wait.max.ms ends. It once always waited the whole of it, so a
            # caught-up member received each new record up to 100 ms after it was written where a real one
            # receives it within milliseconds (a woken zombie then lagged its partitions' new owner on live records)
            answered = False

            def finish() -> None:  # whichever comes first: a record, or the wait's end (both may fall on one instant)
                nonlocal answered
                if not answered:
                    answered = True
                    timer.cancel()
                    forget()
                    respond()

            timer = scheduler.call_later(self.max_wait_ms, finish)
            forget = broker.park(offsets, finish)

        scheduler.call_later(one_way, at_broker)
        return fetch

    def _accept(self, answer: dict[tuple[str, int], tuple[int, int]]) -> dict[Any, list[SimRecord]]:
        """The records of an answer the client keeps: for partitions still assigned, fetched from the position
        they are at now (a rebalance's ``assign`` or a ``seek`` in between makes kafka-python drop them)."""
        out: dict[Any, list[SimRecord]] = {}
        for key, (start, end) in answer.items():
            if self._position.get(key) != start:
                continue
            topic, partition = key
            value = value_encoder(topic, partition)
            out[_TP(topic, partition)] = [SimRecord(topic, partition, o, None, value(o), 0, ())
                                          for o in range(start, end)]
            self._position[key] = end
        return out

    def close(self, autocommit: bool = False) -> None:
        self.closed = True


_TP = namedtuple("_TP", "topic partition")


@dataclass
class _Fetch:
    """A fetch in flight: set ``arrived`` when its answer reaches the client; given up at ``give_up_us``."""

    arrived: tasks.Event
    answer: dict[tuple[str, int], tuple[int, int]]
    give_up_us: int


def value_encoder(topic: str, partition: int) -> Callable[[int], bytes]:
    """``records.encode_value`` for one partition, as a cheap format: the same bytes (a topic name is letters,
    digits, ``.``, ``_`` and ``-``, nothing JSON escapes), without a JSON encoder per record."""
    head = f'{{"topic":{json.dumps(topic)},"partition":{int(partition)},"seq":'.encode()
    return lambda offset: b"%s%d}" % (head, offset)
