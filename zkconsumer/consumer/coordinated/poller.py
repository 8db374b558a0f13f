"""The one thread that owns a coordinator-mode member's kafka-python ``KafkaConsumer``.

kafka-python's consumer is not thread-safe, and its heartbeats, joins and rebalance callbacks only progress
while someone calls ``poll()``. So one *poller* thread creates the client, subscribes, and loops: run the
commands other threads queued (a commit, a rejoin), let its host gate the partitions (flow control), commit on
the auto-commit interval, ``poll()``, hand the records to its host. Other threads never touch the client; they
queue a command and, if they need its result, wait for it (:meth:`Poller.call`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from kafka import KafkaConsumer
from kafka.structs import MemberState

from zkconsumer import runtime
from zkconsumer.consumer.commands import CommandQueue
from zkconsumer.consumer.coordinated.join_watch import JoinWatch
from zkconsumer.errors import OperationTimedOut

log = logging.getLogger(__name__)


class PollerHost(Protocol):
    """What the poller asks of its member on each loop
    (:class:`~zkconsumer.consumer.coordinated.connector.CoordinatorConsumerConnector`)."""

    consumer_id: str
    join_watch: JoinWatch

    def flow_control(self, consumer: KafkaConsumer) -> None: ...

    def buffer(self, batches: Mapping) -> None: ...

    def commit_now(self, consumer: KafkaConsumer) -> Mapping: ...


class Poller:
    """Starts the client on its thread, runs the poll loop, and runs other threads' commands on it."""

    def __init__(self, host: PollerHost) -> None:
        self.host = host
        self.consumer: KafkaConsumer | None = None
        self._commands = CommandQueue()
        self._stop = runtime.Event()
        self._started = runtime.Event()
        self._start_error: BaseException | None = None
        self._thread: runtime.Task | None = None

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self, settings: dict, subscribe: Callable[[KafkaConsumer], None], topics: Sequence[str] | None,
              auto_commit_ms: int | None, timeout: float) -> BaseException | None:
        """Create the client and subscribe on the poller thread, then loop. ``topics``: those to fetch metadata
        for before the first join (None: every topic, for a pattern). ``auto_commit_ms``: None for no automatic
        commits. Returns None once started, or why it could not (the error, or OperationTimedOut)."""
        self._thread = runtime.spawn(self._run, settings, subscribe, topics, auto_commit_ms,
                                     name=f"{self.host.consumer_id}-poller")
        if not self._started.wait(timeout):
            return OperationTimedOut("timed out")
        return self._start_error

    def _run(self, settings: dict, subscribe: Callable, topics: Sequence[str] | None,
             auto_commit_ms: int | None) -> None:
        try:
            consumer = KafkaConsumer(**settings)
            subscribe(consumer)
            self._prime_metadata(consumer, topics)
        except Exception as e:  # noqa: BLE001 - reported to start()
            self._start_error = e
            self._started.set()
            return
        host = self.host
        self.consumer = consumer
        host.join_watch.attach(consumer)
        self._started.set()
        interval = (auto_commit_ms or 0) / 1000.0
        next_commit = runtime.monotonic() + interval
        failures = 0
        try:
            while not self._stop.is_set():
                self._commands.run_pending(consumer)
                host.flow_control(consumer)
                if auto_commit_ms is not None and runtime.monotonic() >= next_commit:
                    host.commit_now(consumer)
                    next_commit = runtime.monotonic() + interval
                try:
                    batches = consumer.poll(timeout_ms=100)
                except Exception as e:  # noqa: BLE001 - a coordinator or broker error: log, back off, retry
                    if self._stop.is_set():
                        break
                    failures += 1
                    host.join_watch.poll_failed(e)
                    host.join_watch.check(consumer)
                    # e.g. INCONSISTENT_GROUP_PROTOCOL: kafka-python gives up the join; we keep asking, backing off
                    self._stop.wait(min(0.2 * 2 ** min(failures - 1, 4), 2.0))
                    continue
                failures = 0
                self.unstick_join(consumer)
                host.join_watch.check(consumer)
                host.buffer(batches)
        finally:
            self._commands.run_pending(consumer)
            # close() revokes our partitions through the listener (which commits) and leaves the group.
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                log.debug("closing the kafka consumer failed", exc_info=True)

    def _prime_metadata(self, consumer: KafkaConsumer, topics: Sequence[str] | None) -> None:
        """Fetch the subscribed topics' metadata before the first join. Otherwise a leader elected before the
        metadata answer assigns the topics to nobody ("No partition metadata for topic ...") and the group sits
        idle until the next refresh (``metadata.max.age.ms``, 5 minutes by default) makes it rejoin."""
        try:
            if topics is None:
                consumer.topics()  # every topic: the pattern is matched against them
            else:
                for topic in topics:
                    consumer.partitions_for_topic(topic)
        except Exception as e:  # noqa: BLE001 - the join goes on; kafka-python refreshes metadata itself
            log.warning("%s: could not fetch topic metadata before joining: %r", self.host.consumer_id, e)

    @staticmethod
    def unstick_join(consumer: KafkaConsumer) -> None:
        """Work around a kafka-python 3.0 bug (the one Kafka fixed as KAFKA-9815): a leader that rejoins because
        topic metadata changed does not set its rejoin flag, so once its assignment snapshot catches up, a join
        that completes after ``poll()``'s timeout is never picked up and the member stays REBALANCING without
        heartbeats until the coordinator evicts it. Asking for the rejoin, as Kafka's fix does, lets the next
        ``poll()`` finish it."""
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None or consumer.group_metadata().state != MemberState.REBALANCING:
            return
        if not coordinator.need_rejoin():
            coordinator.request_rejoin()

    # ------------------------------------------------------------------------- commands from other threads
    def submit(self, fn: Callable[[KafkaConsumer], object]) -> None:
        """Run ``fn(consumer)`` on the poller thread, without waiting for it."""
        self._commands.submit(fn)

    def call(self, fn: Callable[[KafkaConsumer], object], timeout: float = 30.0):
        """Run ``fn(consumer)`` on the poller thread and wait for its result (None when the poller is not
        running; OperationTimedOut, a TimeoutError, when it did not get to it in time)."""
        if self._thread is None or not self._thread.is_alive():
            return None
        return self._commands.call(fn, timeout, lambda: OperationTimedOut("the poller did not run a command in time"))

    def stop(self, wait: float) -> bool:
        """Stop the loop (the client leaves the group as it closes); False if the thread is still alive after
        ``wait`` seconds."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(wait)
        return not self._thread.is_alive()
