"""``KafkaStream``: the iterator a consumer thread reads records from, independent of how ownership is decided.

A stream needs only a :class:`StreamSource` — whoever decides which records are still ours (the ZooKeeper
connector today; a coordinator-mode consumer can implement the same few members) — so the same class serves
every consumer mode behind one streams interface.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from zkconsumer import runtime
from zkconsumer.consumer.fetcher import FetchedRecord
from zkconsumer.errors import ConsumerTimeout

#: Put in a stream's queue at shutdown; the stream ends when it reaches it.
SHUTDOWN = object()


@dataclass(frozen=True)
class Queued:
    """A fetched record and the ownership generation it was fetched under."""

    record: FetchedRecord
    generation: int


class StreamSource(Protocol):
    """What a :class:`KafkaStream` asks of its consumer."""

    failure: BaseException | None
    closed: bool

    def may_hand_out(self) -> bool:
        """Whether records may be handed out now (not while the consumer cannot be sure they are still its own)."""

    def await_deliverable(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for :meth:`may_hand_out` to hold."""

    @property
    def consumer_timeout_ms(self) -> int: ...

    def hand_out(self, item: Queued, stream: KafkaStream) -> bool:
        """Atomically check the record is still ours and record that it was handed out."""

    def mark_processed(self, record: FetchedRecord, generation: int) -> None:
        """The caller finished with ``record``: it becomes committable."""


class KafkaStream:
    """An iterator of records for one consumer thread (or one wildcard stream index).

    ``next()`` marks the record handed out before as processed: in the default profile only processed
    records are committed. Call :meth:`ack` to mark the current one processed without asking for more.
    """

    def __init__(self, source: StreamSource, index: int, maxsize: int) -> None:
        self._source = source
        self.index = index
        self.queue: runtime.Queue = runtime.Queue(maxsize)
        self._in_flight: FetchedRecord | None = None
        self._in_flight_gen = -1
        self._held: Queued | None = None  # taken from the queue while the connection was being suspended

    def __iter__(self) -> Iterator[FetchedRecord]:
        return self

    def __next__(self) -> FetchedRecord:
        c = self._source
        self.ack()
        timeout_ms = c.consumer_timeout_ms
        deadline = None if timeout_ms < 0 else runtime.monotonic() + timeout_ms / 1000.0
        while True:
            if c.failure is not None:
                raise c.failure
            if not c.may_hand_out():
                # e.g. ZooKeeper SUSPENDED, or a session not known alive after a pause: our partitions may be gone
                # with it; hand out nothing until it is confirmed again (or replaced, after which a rebalance
                # decides again).
                c.await_deliverable(0.1)
                self._check_deadline(deadline)
                continue
            item, self._held = self._held, None
            if item is None:
                wait = 0.1 if deadline is None else max(0.0, min(0.1, deadline - runtime.monotonic()))
                try:
                    item = self.queue.get(timeout=wait)
                except runtime.Empty:
                    if c.closed:
                        raise StopIteration from None
                    self._check_deadline(deadline)
                    continue
            if item is SHUTDOWN:
                self.queue.put(SHUTDOWN)
                raise StopIteration
            if not c.may_hand_out():
                self._held = item  # suspended while we waited for it: hold it until the session is confirmed
                continue
            if c.hand_out(item, self):
                self._in_flight = item.record
                self._in_flight_gen = item.generation
                return item.record

    @staticmethod
    def _check_deadline(deadline: float | None) -> None:
        if deadline is not None and runtime.monotonic() >= deadline:
            raise ConsumerTimeout()

    def ack(self) -> None:
        """Mark the record handed out last as processed (it becomes committable)."""
        if self._in_flight is not None:
            self._source.mark_processed(self._in_flight, self._in_flight_gen)
            self._in_flight = None

    def clear(self) -> None:
        """Drop everything queued (a rebalance released these partitions); a shutdown marker stays."""
        self._held = None
        with contextlib.suppress(runtime.Empty):
            while True:
                item = self.queue.get_nowait()
                if item is SHUTDOWN:
                    self.queue.put_nowait(SHUTDOWN)
                    return

    def close(self) -> None:
        """End the stream: whoever iterates it gets StopIteration once it reaches this point."""
        self.clear()
        with contextlib.suppress(runtime.Full):
            self.queue.put_nowait(SHUTDOWN)
