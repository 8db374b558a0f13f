"""Fetching records for the partitions ZooKeeper gave us, through kafka-python with manual assignment.

In a 0.8 group ZooKeeper decides who owns what, not the broker: the fetcher is a plain
``KafkaConsumer`` without a group (``assign()`` + ``seek()``), so it works against our local broker and
against a real Kafka cluster alike. kafka-python clients are not thread-safe, so one thread owns the client
and every change of assignment is a command it applies between polls; the caller waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

from zkconsumer import broker_version, runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.consumer.commands import CommandQueue
from zkconsumer.consumer.progress import INVALID_OFFSET
from zkconsumer.errors import OperationTimedOut, ZkConsumerError
from zkconsumer.types import FetchedRecord  # defined in types.py (neutral); importable from here as before

#: how long one assign() may spend asking the broker where auto.offset.reset puts new partitions
RESOLVE_BUDGET_S = 1.0

log = logging.getLogger(__name__)


class FetcherError(ZkConsumerError, RuntimeError):
    pass


#: Called on the fetcher thread when a partition's position moved below where it was (the broker answered
#: OffsetOutOfRange and ``auto.offset.reset`` chose a lower offset): (partition, old position, new position).
ResetCallback = Callable[[TopicPartition, int, int], None]


#: Makes the fetcher's client from the bootstrap servers and kafka-python's settings: anything with the six methods
#: the fetcher calls on a ``KafkaConsumer`` (assign, seek, seek_to_beginning, seek_to_end, position, poll, close).
#: kafka-python's own live; the simulator's broker client (zkconsumer/sim/) in a simulation.
ClientFactory = Callable[[str | list[str], dict], object]


class Fetcher:
    """A thread polling one kafka-python client; ``deliver`` gets each batch of records."""

    def __init__(self, bootstrap_servers: str | list[str], client_id: str, auto_offset_reset: str,
                 deliver: Callable[[list[FetchedRecord]], None], fetch_max_wait_ms: int = 100,
                 fetch_min_bytes: int = 1, max_partition_fetch_bytes: int = 1024 * 1024,
                 request_timeout_ms: int = 30000, on_reset: ResetCallback | None = None,
                 api_version: str | tuple[int, ...] | None = "auto", registrations: Sequence[object] = (),
                 client_factory: ClientFactory | None = None) -> None:
        self._bootstrap = bootstrap_servers
        #: ``zkconsumer.broker.api.version`` and the brokers' registrations (a hint): broker_version decides
        self._api_version, self._registrations = api_version, tuple(registrations)
        self._settings = dict(client_id=client_id, group_id=None, enable_auto_commit=False,
                              auto_offset_reset="earliest" if auto_offset_reset == "smallest" else "latest",
                              fetch_max_wait_ms=fetch_max_wait_ms, fetch_min_bytes=fetch_min_bytes,
                              max_partition_fetch_bytes=max_partition_fetch_bytes,
                              request_timeout_ms=max(request_timeout_ms, 1000))
        self._deliver = deliver
        self._on_reset = on_reset
        self._client_factory = client_factory
        #: next offset expected per partition: kafka-python never returns a record below its position, so a
        #: record below this one means the position was reset (OffsetOutOfRange + auto.offset.reset)
        self._expected: dict[TopicPartition, int] = {}
        self._commands = CommandQueue()
        self._stop = runtime.Event()
        self._client_id = client_id
        self._thread: runtime.Task | None = None  # started by start()
        self._started = runtime.Event()
        self._error: BaseException | None = None
        self.assigned: dict[TopicPartition, int | None] = {}

    def start(self, timeout: float = 30.0) -> None:
        self._thread = runtime.spawn(self._run, name=f"{self._client_id}-fetcher")
        if not self._started.wait(timeout):
            raise FetcherError(f"could not connect to Kafka at {self._bootstrap} within {timeout:.0f}s")
        if self._error is not None:
            raise FetcherError(f"could not connect to Kafka at {self._bootstrap}: {self._error}")

    def _call(self, fn: Callable, timeout: float = 30.0) -> None:
        if self._thread is None or not self._thread.is_alive():
            return
        self._commands.call(fn, timeout, lambda: FetcherError("fetcher did not apply a command in time"))

    def assign(self, positions: Mapping[TopicPartition, int | None]) -> dict[TopicPartition, int]:
        """Fetch exactly these partitions, from these offsets (``INVALID_OFFSET``: auto.offset.reset;
        ``None``: a partition already fetched keeps its position, so nothing buffered is fetched twice).

        Returns the start position ``auto.offset.reset`` resolved for each ``INVALID_OFFSET`` partition: like
        Kafka's fetcher when it takes a partition, we ask the broker now, so the next commit can record it."""
        wanted = dict(positions)
        resolved: dict[TopicPartition, int] = {}
        # The rebalance waits for this: with the broker down, asking it for each partition in turn (up to
        # socket.timeout.ms each) would hold the group's next rebalance for as long. What is not resolved within
        # the budget is resolved by the fetch itself, as Kafka's fetcher does.
        deadline = runtime.monotonic() + min(RESOLVE_BUDGET_S, self._settings["request_timeout_ms"] / 1000.0)

        def apply(consumer) -> None:
            consumer.assign([KTP(tp.topic, tp.partition) for tp in wanted])
            self._expected = {tp: off for tp, off in self._expected.items() if tp in wanted}
            for tp, offset in wanted.items():
                ktp = KTP(tp.topic, tp.partition)
                if offset is None:
                    if tp in self.assigned:
                        continue
                    offset = INVALID_OFFSET
                if offset >= 0:
                    consumer.seek(ktp, offset)
                    self._expected[tp] = offset
                    continue
                if self._settings["auto_offset_reset"] == "earliest":
                    consumer.seek_to_beginning(ktp)
                else:
                    consumer.seek_to_end(ktp)
                remaining_ms = int((deadline - runtime.monotonic()) * 1000)
                try:
                    if remaining_ms <= 0:
                        raise OperationTimedOut(f"no answer within {RESOLVE_BUDGET_S:.0f} s for the partitions "
                                                "before it")
                    position = consumer.position(ktp, timeout_ms=remaining_ms)
                except Exception as e:  # noqa: BLE001 - unknown for now: the first record tells
                    log.warning("could not resolve the start position of %s: %s", tp, e)
                    position = None
                if position is not None:
                    resolved[tp] = self._expected[tp] = position
                else:
                    self._expected.pop(tp, None)
            self.assigned = wanted

        self._call(apply)
        return resolved

    def stop_fetching(self) -> None:
        """No more records for any partition until the next :meth:`assign`."""
        self.assign({})

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        try:
            if self._client_factory is not None:
                consumer = self._client_factory(self._bootstrap, self._settings)
            else:
                version = broker_version.client_settings(self._bootstrap, self._api_version, self._registrations)
                consumer = KafkaConsumer(bootstrap_servers=self._bootstrap, **self._settings, **version)
        except Exception as e:  # noqa: BLE001 - reported to start()
            self._error = e
            self._started.set()
            return
        self._started.set()
        try:
            while not self._stop.is_set():
                self._commands.run_pending(consumer)
                if not self.assigned:
                    self._commands.wait(0.1)
                    continue
                try:
                    batches = consumer.poll(timeout_ms=100)
                except Exception as e:  # noqa: BLE001 - a broker hiccup: log, back off, keep going
                    log.warning("fetch failed: %s", e)
                    self._stop.wait(0.2)
                    continue
                records = [FetchedRecord(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                                         tuple(r.headers or ()))
                           for batch in batches.values() for r in batch]
                if records:
                    self._check_resets(records)
                    self._deliver(records)
        finally:
            self._commands.run_pending(consumer)
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001
                log.debug("closing the kafka client failed", exc_info=True)

    def _check_resets(self, records: list[FetchedRecord]) -> None:
        """Report a partition whose records restart below the expected position (before they are delivered)."""
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            expected = self._expected.get(tp)
            if expected is not None and record.offset < expected and self._on_reset is not None:
                self._on_reset(tp, expected, record.offset)
            self._expected[tp] = record.offset + 1


__all__ = ["Fetcher", "FetchedRecord", "FetcherError", "INVALID_OFFSET"]
