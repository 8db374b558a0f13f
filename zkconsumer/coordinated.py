"""Coordinator mode: the ZooKeeper connector's streams API on Kafka 0.9+'s broker-side group coordinator.

:class:`CoordinatorConsumerConnector` has the surface of
:class:`~zkconsumer.connector.ZookeeperConsumerConnector` (``create_message_streams``,
``create_message_streams_by_filter``, :class:`KafkaStream` iteration where asking for the next record marks
the previous one processed, ``commit_offsets``, :class:`RebalanceListener`, ``ConsumerTimeout``,
``shutdown``) so that a program, the CLI and the lab can switch modes with one setting. Membership is
kafka-python's group machinery (``KafkaConsumer(group_id=…)`` + ``subscribe(listener=…)``: FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/OffsetFetch v1+), not a second client.

Threads: kafka-python's consumer is not thread-safe, so one *poller* thread owns it (polls, commits on the
auto-commit interval and on request) and streams read from queues, as connector.py + fetcher.py do.
kafka-python runs the rebalance callbacks on its IO thread while the poller waits in ``poll()``; they only
touch the state below (under ``state_lock``) and await the revocation commit without blocking that loop.

Ownership carries a local *generation* (connector.py's scheme): a revocation bumps it before offsets are
committed, so a record fetched before a revocation is never handed out after it, and only records the
caller finished (processed) are committed: at-least-once, committed before the partitions are given up.

Kafka's assignors hand partitions to *members*; a member with several streams deals its share of each topic
over them (sorted partitions, round robin), which is where the 0.8 thread ids come back:
``<consumer id>-<stream index>``. The trace's consumer stays ``<group>_<consumer.id or host-ts-uuid8>``;
the coordinator's member id and generation are extra fields (docs/trace.md).
"""

from __future__ import annotations

import inspect
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener

from . import broker_version, layout
from .assignors import TopicPartition
from .config import ConfigError, ConsumerConfig
from .connector import KafkaStream, RebalanceListener
from .consumer_base import ConsumerBase
from .errors import code_name
from .fetcher import FetchedRecord
from .layout import TopicFilter
from .offsets import PartitionProgress
from .trace import TraceWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Queued:
    """A record in a stream's queue, with the local ownership generation it was fetched under (the fields
    KafkaStream hands back to :meth:`CoordinatorConsumerConnector.hand_out`)."""

    record: FetchedRecord
    generation: int

#: Kafka's ``partition.assignment.strategy`` names → kafka-python's assignor classes (imported lazily).
#: Kafka 0.9+'s RoundRobinAssignor already has 0.10.2's relaxed semantics (unequal subscriptions are fine),
#: so ``roundrobin`` and ``roundrobin-relaxed`` are the same class here.
ASSIGNORS = {
    "range": "kafka.coordinator.assignors.range:RangePartitionAssignor",
    "roundrobin": "kafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "roundrobin-relaxed": "kafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "sticky": "kafka.coordinator.assignors.sticky.sticky_assignor:StickyPartitionAssignor",
}


def assignor_class(strategy: str) -> type:
    """kafka-python's assignor for a Kafka strategy name."""
    import importlib

    try:
        module, _, name = ASSIGNORS[strategy].partition(":")
    except KeyError:
        raise ConfigError(f"partition.assignment.strategy {strategy!r} has no coordinator-mode assignor; "
                          f"choose one of {', '.join(ASSIGNORS)}") from None
    return getattr(importlib.import_module(module), name)


def filter_pattern(topic_filter: TopicFilter) -> str:
    """A regex for kafka-python's ``subscribe(pattern=…)`` (it uses ``re.match``) that accepts exactly the
    topics the 0.8 filter allows (a full match for a whitelist, anything but one for a blacklist)."""
    if topic_filter.pattern == layout.WHITE_LIST:
        return f"(?:{topic_filter.regex})$"
    return f"(?!(?:{topic_filter.regex})$).*"


#: Decides, for a newly assigned partition, whether it must be *held* (not fetched nor handed out) for now:
#: the hook the ZooKeeper → coordinator migration uses to wait until the partition's 0.8 owner node is gone.
#: Called again for held partitions until it returns False.
HoldHook = Callable[[TopicPartition], bool]


class Handover(Protocol):
    """What a member of a group that is migrating from ZooKeeper needs around each partition
    (zkconsumer.migration.bridge.ZkBridge): every assigned partition starts held until :meth:`hold` says it is
    free, is consumed from :meth:`start_offset`, and is given back through :meth:`released` after the revocation
    commit; every commit goes to :meth:`committed` first, and to the broker only if that did not raise."""

    def hold(self, tp: TopicPartition, thread_id: str) -> bool: ...

    def start_offset(self, tp: TopicPartition, kafka_committed: int | None) -> int | None: ...

    def committed(self, values: Mapping[TopicPartition, int]) -> None: ...

    def released(self, tps: Iterable[TopicPartition], committed: Mapping[TopicPartition, int]) -> None: ...


class CoordinatorConsumerConnector(ConsumerBase):
    """One member of a coordinator-managed group, with the ZooKeeper connector's streams API.

    ``CoordinatorConsumerConnector(ConsumerConfig.from_properties({"group.id": "g",
    "bootstrap.servers": "127.0.0.1:9092"}))``; without ``bootstrap.servers`` the brokers registered in
    ``zookeeper.connect`` are used.
    """

    mode = "coordinator"

    def __init__(self, config: ConsumerConfig, listener: RebalanceListener | None = None,
                 hold: HoldHook | None = None, handover: Handover | None = None,
                 assignors: Sequence[object] | None = None) -> None:
        config.check_mode("coordinator")
        self.config = config
        self.group = config.group_id
        self.consumer_id = layout.make_consumer_id(self.group, config.consumer_id)
        self.listener = listener or RebalanceListener()
        self.hold = hold
        self.handover = handover
        self.strategy = config.strategy
        self._assignors = tuple(assignors) if assignors else (assignor_class(self.strategy),)
        self.bootstrap = config.bootstrap_servers or self._brokers_from_zookeeper()
        # Kafka 0.8 has no group coordinator (JoinGroup came in 0.9): a clear error now, not a join that never ends
        broker_version.require(self.bootstrap, (0, 9), "coordinator mode (the broker's group coordinator)",
                               config.broker_api_version)
        self.trace = TraceWriter(config.trace_dir, self.group, self.consumer_id, mode=self.mode)
        self._init_streams()  # state_lock, owned, the streams (consumer_base.py)
        self._held: set[TopicPartition] = set()
        #: Assigned partitions whose fetch position must be set to the committed offset before any delivery:
        #: kafka-python (like Kafka's consumer) keeps the position of a partition that comes back to the same
        #: member, and that position is past records we fetched but dropped at the revocation.
        self._needs_seek: set[TopicPartition] = set()
        #: The first offset polled (and not buffered) for a partition still waiting for that seek.
        self._dropped_from: dict[TopicPartition, int] = {}
        self._backlog: dict[TopicPartition, deque[_Queued]] = {}
        self._generation = 0
        self._committed: dict[TopicPartition, int] = {}
        self.failure: BaseException | None = None
        self.deliverable = threading.Event()
        self.deliverable.set()  # the coordinator session has no "suspended" state a stream must wait out
        self.closed = False
        self.member_id: str | None = None
        self.group_generation = -1
        self._rebalance_started: float | None = None
        self._rebalance_number = 0  # this consumer's rebalances, as the trace counts them
        self._commands: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._consumer = None
        #: Joins that take longer than the rebalance timeout are reported (log, trace, :attr:`stall`).
        self.join_watch = JoinWatch(self)

    @property
    def rebalance_timeout_ms(self) -> int:
        """The rebalance timeout this member sends in JoinGroup (kafka-python sends ``max.poll.interval.ms``): how
        long the coordinator may wait for members to rejoin and sync, and after which a join that has not completed
        is reported as stalled (:class:`JoinWatch`)."""
        return self.config.get("max.poll.interval.ms")

    @property
    def stall(self) -> JoinStall | None:
        """The last report of a join that has not completed within the rebalance timeout; None once joined."""
        return self.join_watch.current

    @property
    def _call_timeout_ms(self) -> int:
        """Bound of one blocking client call on the poller (committed offsets, a commit): the poller must keep
        polling, or kafka-python's heartbeats keep an idle member in the group while it never rejoins."""
        return max(1000, min(self.config.get("socket.timeout.ms"), self.rebalance_timeout_ms // 4))

    def _brokers_from_zookeeper(self) -> str:
        if not self.config.zookeeper_connect:
            raise ConfigError("coordinator mode needs bootstrap.servers (--bootstrap-server) or zookeeper.connect "
                              "with registered brokers")
        from .registry import Registry, connect

        zk = connect(self.config.zookeeper_connect, session_timeout_ms=self.config.session_timeout_ms,
                     connection_timeout_ms=self.config.connection_timeout_ms)
        try:
            bootstrap = Registry(zk).bootstrap_servers()
        finally:
            zk.stop()
            zk.close()
        if not bootstrap:
            raise RuntimeError("no brokers registered under /brokers/ids and no bootstrap.servers given")
        return bootstrap

    # ------------------------------------------------------------------------------------ stream creation
    def create_message_streams(self, topic_count: Mapping[str, int]) -> dict[str, list[KafkaStream]]:
        """Static subscription: topic → number of streams; returns topic → streams."""
        self._new_static_streams(topic_count)
        self.trace.emit("registered", subscription=dict(topic_count), pattern=layout.STATIC)
        self._start(lambda c, listener: c.subscribe(topics=sorted(topic_count), listener=listener))
        return self._static_streams

    def create_message_streams_by_filter(self, topic_filter: TopicFilter | str, num_streams: int = 1
                                         ) -> list[KafkaStream]:
        """Wildcard subscription; kafka-python re-checks the pattern against new topics on metadata refresh."""
        topic_filter, _ = self._new_wildcard_streams(topic_filter, num_streams)
        self.trace.emit("registered", subscription={topic_filter.regex: num_streams}, pattern=topic_filter.pattern)
        pattern = filter_pattern(topic_filter)
        self._start(lambda c, listener: c.subscribe(pattern=pattern, listener=listener))
        return self._wildcard_streams

    def _start(self, subscribe: Callable) -> None:
        self._thread = threading.Thread(target=self._run, args=(subscribe,), daemon=True,
                                        name=f"{self.consumer_id}-poller")
        self._thread.start()
        timeout = max(30.0, self.config.get("socket.timeout.ms") / 1000.0)
        if not self._started.wait(timeout) or self._start_error is not None:
            self.closed = True
            raise RuntimeError(f"could not connect to Kafka at {self.bootstrap}: "
                               f"{self._start_error or 'timed out'}")

    # ------------------------------------------------------------------------------------ the poller thread
    def _client_settings(self) -> dict:
        c = self.config
        return dict(bootstrap_servers=self.bootstrap, client_id=c.client_id, group_id=self.group,
                    enable_auto_commit=False,  # we commit processed offsets ourselves
                    auto_offset_reset="earliest" if c.auto_offset_reset == "smallest" else "latest",
                    partition_assignment_strategy=self._assignors,
                    session_timeout_ms=c.get("session.timeout.ms"),
                    heartbeat_interval_ms=c.heartbeat_interval_ms,
                    max_poll_interval_ms=c.get("max.poll.interval.ms"),
                    metadata_max_age_ms=c.get("metadata.max.age.ms"),
                    fetch_max_wait_ms=c.get("fetch.wait.max.ms"), fetch_min_bytes=c.get("fetch.min.bytes"),
                    max_partition_fetch_bytes=c.get("fetch.message.max.bytes"),
                    request_timeout_ms=max(c.get("socket.timeout.ms"), c.get("fetch.wait.max.ms") + 1000),
                    exclude_internal_topics=c.exclude_internal_topics,
                    **broker_version.client_settings(self.bootstrap, c.broker_api_version))

    def _run(self, subscribe: Callable) -> None:
        from kafka import KafkaConsumer

        try:
            consumer = KafkaConsumer(**self._client_settings())
            subscribe(consumer, _Listener(self))
            self._prime_metadata(consumer)
        except Exception as e:  # noqa: BLE001 - reported to _start()
            self._start_error = e
            self._started.set()
            return
        self._consumer = consumer
        self.join_watch.attach(consumer)
        self._started.set()
        interval = self.config.auto_commit_interval_ms / 1000.0
        next_commit = time.monotonic() + interval
        failures = 0
        try:
            while not self._stop.is_set():
                self._run_commands(consumer)
                self._flow_control(consumer)
                if self.config.auto_commit and time.monotonic() >= next_commit:
                    self._commit_now(consumer)
                    next_commit = time.monotonic() + interval
                try:
                    batches = consumer.poll(timeout_ms=100)
                except Exception as e:  # noqa: BLE001 - a coordinator or broker error: log, back off, retry
                    if self._stop.is_set():
                        break
                    failures += 1
                    self.join_watch.poll_failed(e)
                    self.join_watch.check(consumer)
                    # e.g. INCONSISTENT_GROUP_PROTOCOL: kafka-python gives up the join; we keep asking, backing off
                    self._stop.wait(min(0.2 * 2 ** min(failures - 1, 4), 2.0))
                    continue
                failures = 0
                self._unstick_join(consumer)
                self.join_watch.check(consumer)
                self._buffer(batches)
        finally:
            self._run_commands(consumer)
            # close() revokes our partitions through the listener (which commits) and leaves the group.
            try:
                consumer.close(autocommit=False)
            except Exception:  # noqa: BLE001 - best effort at shutdown
                log.debug("closing the kafka consumer failed", exc_info=True)

    def _prime_metadata(self, consumer) -> None:
        """Fetch the subscribed topics' metadata before the first join. Otherwise a leader elected before the
        metadata answer assigns the topics to nobody ("No partition metadata for topic ...") and the group sits
        idle until the next refresh (``metadata.max.age.ms``, 5 minutes by default) makes it rejoin."""
        try:
            if self.topic_filter is not None:
                consumer.topics()  # every topic: the pattern is matched against them
            else:
                for topic in self._static_streams:
                    consumer.partitions_for_topic(topic)
        except Exception as e:  # noqa: BLE001 - the join goes on; kafka-python refreshes metadata itself
            log.warning("%s: could not fetch topic metadata before joining: %r", self.consumer_id, e)

    @staticmethod
    def _unstick_join(consumer) -> None:
        """Work around a kafka-python 3.0 bug (the one Kafka fixed as KAFKA-9815): a leader that rejoins because
        topic metadata changed does not set its rejoin flag, so once its assignment snapshot catches up, a join
        that completes after ``poll()``'s timeout is never picked up and the member stays REBALANCING without
        heartbeats until the coordinator evicts it. Asking for the rejoin, as Kafka's fix does, lets the next
        ``poll()`` finish it."""
        from kafka.structs import MemberState

        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None or consumer.group_metadata().state != MemberState.REBALANCING:
            return
        if not coordinator.need_rejoin():
            coordinator.request_rejoin()

    def _buffer(self, batches: Mapping) -> None:
        """Poller: append polled records to their partition's backlog, tagged with the current generation."""
        with self.state_lock:
            for ktp, records in batches.items():
                tp = TopicPartition(ktp.topic, ktp.partition)
                progress = self.owned.get(tp)
                if progress is None or progress.generation < 0:
                    continue  # revoked while the fetch was in flight
                if tp in self._needs_seek:  # fetched before the seek: fetched again from where it leads
                    if records:
                        self._dropped_from.setdefault(tp, min(r.offset for r in records))
                    continue
                backlog = self._backlog.setdefault(tp, deque())
                for r in records:
                    backlog.append(_Queued(FetchedRecord(r.topic, r.partition, r.offset, r.key, r.value,
                                                         r.timestamp, tuple(r.headers or ())),
                                           progress.generation))
        self._drain_backlog()

    def _drain_backlog(self) -> None:
        """Move buffered records into their streams' queues without blocking: a full queue leaves the rest
        buffered and its partition paused, so the poller keeps polling (heartbeats, rebalances) meanwhile."""
        with self.state_lock:
            for tp, backlog in list(self._backlog.items()):
                progress = self.owned.get(tp)
                if progress is None or progress.generation < 0:
                    del self._backlog[tp]
                    continue
                if tp in self._held:
                    continue
                stream = self.stream_for(tp, progress.thread_id)
                while backlog and stream is not None:
                    try:
                        stream.queue.put_nowait(backlog[0])
                    except queue.Full:
                        break
                    backlog.popleft()
                if not backlog:
                    del self._backlog[tp]

    def _flow_control(self, consumer) -> None:
        """Poller: re-ask the hold hook, deliver what fits, pause partitions that are held or backed up."""
        from kafka import TopicPartition as KTP

        with self.state_lock:
            to_seek = set(self._needs_seek)
        # each call is bounded; all of them together too: what is left is done on the next loop
        budget = time.monotonic() + self._call_timeout_ms / 1000.0
        for tp in sorted(to_seek):
            if time.monotonic() > budget:
                break
            self._seek_to_committed(consumer, tp)
        handover = self.handover  # once: drop_handover() may clear it meanwhile
        if self.hold is not None or handover is not None:
            with self.state_lock:
                held = set(self._held)
            freed = {tp for tp in held if not self._ask_hold(tp, handover)}
            if handover is not None:
                freed = {tp for tp in sorted(freed)
                         if time.monotonic() <= budget and self._resume_from_handover(consumer, tp, handover)}
            with self.state_lock:
                self._held -= freed
        self._drain_backlog()
        with self.state_lock:
            stop = {tp for tp in self.owned if tp in self._held or tp in self._backlog}
        assigned = consumer.assignment()
        want_paused = {KTP(tp.topic, tp.partition) for tp in stop} & assigned
        paused = consumer.paused()
        if want_paused - paused:
            consumer.pause(*(want_paused - paused))
        if paused - want_paused:
            consumer.resume(*(paused - want_paused))

    def _seek_to_committed(self, consumer, tp: TopicPartition) -> None:
        """Poller: consume a newly assigned partition from its committed offset (at-least-once), whatever position
        the client kept for it."""
        from kafka import TopicPartition as KTP

        ktp = KTP(tp.topic, tp.partition)
        try:
            committed = consumer.committed(ktp, timeout_ms=self._call_timeout_ms)
            with self.state_lock:
                dropped = self._dropped_from.get(tp)
            # nothing committed (None, or -1 from the broker): auto.offset.reset placed the position; rewind only
            # to what was polled meanwhile. Never seek to -1: to kafka-python that means "latest".
            target = committed if committed is not None and committed >= 0 else dropped
            if target is not None and ktp in consumer.assignment():
                consumer.seek(ktp, target)
        except Exception as e:  # noqa: BLE001 - tried again on the next loop; nothing is delivered meanwhile
            log.warning("%s: could not read the committed offset of %s: %r", self.consumer_id, tp, e)
            return
        with self.state_lock:
            self._needs_seek.discard(tp)
            self._dropped_from.pop(tp, None)
            self._backlog.pop(tp, None)

    def _resume_from_handover(self, consumer, tp: TopicPartition, handover: Handover) -> bool:
        """Poller: a partition the handover just freed is consumed from its start offset (the larger of both
        stores'), which becomes committable at once so the broker store catches up with ZooKeeper's. False: the
        broker's committed offset could not be read in time; the partition stays held and is tried again."""
        from kafka import TopicPartition as KTP

        ktp = KTP(tp.topic, tp.partition)
        try:
            kafka = consumer.committed(ktp, timeout_ms=self._call_timeout_ms)
        except Exception as e:  # noqa: BLE001 - tried again on the next loop; nothing is delivered meanwhile
            log.warning("%s: could not read the committed offset of %s: %r", self.consumer_id, tp, e)
            return False
        if kafka is not None and kafka < 0:
            kafka = None
        start = handover.start_offset(tp, kafka)
        if start is None or start < 0:
            return True
        consumer.seek(ktp, start)
        with self.state_lock:
            self._backlog.pop(tp, None)  # fetched before the hand-off, from an older position
            progress = self.owned.get(tp)
            if progress is not None and progress.generation > 0:
                progress.start = start
                if kafka is None or start > kafka:
                    progress.processed = start
        return True

    def _ask_hold(self, tp: TopicPartition, handover: Handover | None = None) -> bool:
        try:
            if handover is not None:
                with self.state_lock:
                    progress = self.owned.get(tp)
                return progress is None or bool(handover.hold(tp, progress.thread_id))
            return bool(self.hold(tp)) if self.hold is not None else False
        except Exception:  # noqa: BLE001 - a failing hook holds the partition (safe side) and is logged
            log.warning("%s: hold hook failed for %s", self.consumer_id, tp, exc_info=True)
            return True

    def _run_commands(self, consumer) -> None:
        while True:
            try:
                fn, done, box = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                box.append(fn(consumer))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box.append(e)
            finally:
                done.set()

    def _call(self, fn: Callable, timeout: float = 30.0):
        """Run ``fn(consumer)`` on the poller thread and wait for its result."""
        if self._thread is None or not self._thread.is_alive():
            return None
        done = threading.Event()
        box: list = []
        self._commands.put((fn, done, box))
        if not done.wait(timeout):
            raise TimeoutError("the poller did not run a command in time")
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[0] if box else None

    # ---------------------------------------------------------------------------------------- streams side
    def hand_out(self, item: _Queued, stream: KafkaStream) -> bool:
        """Stream thread: the record is handed out only if its partition is still ours, same generation."""
        rec = item.record
        tp = TopicPartition(rec.topic, rec.partition)
        with self.state_lock:
            progress = self.owned.get(tp)
            if progress is None or progress.generation != item.generation:
                return False
            if progress.handed is not None and rec.offset < progress.handed:
                return False
            progress.handed = rec.offset + 1
            thread = progress.thread_id
        self.trace.emit("record_delivered", topic=rec.topic, partition=rec.partition, offset=rec.offset,
                        thread=thread)
        return True

    # ----------------------------------------------------------------------------- the rebalance callbacks
    def _threads_for(self, tps: set[TopicPartition]) -> dict[TopicPartition, str]:
        """Deal this member's share over its streams: per topic (static) or all together (wildcard)."""
        out = {}
        if self.topic_filter is not None:
            n = len(self._wildcard_streams)
            for i, tp in enumerate(sorted(tps)):
                out[tp] = f"{self.consumer_id}-{i % n}"
            return out
        for topic in {tp.topic for tp in tps}:
            n = len(self._static_streams.get(topic, [])) or 1
            for i, tp in enumerate(sorted(tp for tp in tps if tp.topic == topic)):
                out[tp] = f"{self.consumer_id}-{i % n}"
        return out

    def _begin_rebalance(self, cause: str) -> None:
        with self.state_lock:
            self._rebalance_number += 1
            self._rebalance_started = time.monotonic()
            number = self._rebalance_number
        self.trace.emit("rebalance_triggered", cause=cause, generation=self.group_generation,
                        member_id=self.member_id)
        self.trace.emit("attempt_started", rebalance=number, attempt=1, generation=self.group_generation,
                        member_id=self.member_id)

    def revoke(self, tps: set[TopicPartition], lost: bool) -> dict[TopicPartition, int]:
        """IO thread, before JoinGroup: stop handing out ``tps`` and return the offsets to commit (none when
        the membership was lost: another member may own them already)."""
        if not self._stop.is_set():  # at shutdown it is a release, not a rebalance (as in ZooKeeper mode)
            self._begin_rebalance("session_expired" if lost else
                                  ("startup" if self.group_generation < 0 else "coordinator"))
        with self.state_lock:
            self._generation += 1
            targets = set(tps) & set(self.owned)
            for tp in targets:
                self.owned[tp].generation = -self._generation  # queued records of these are stale now
                self._backlog.pop(tp, None)
            values = {} if lost or not self.config.auto_commit else {
                tp: p.processed for tp, p in self.owned.items() if tp in targets and p.processed is not None}
        return {tp: v for tp, v in values.items() if self._committed.get(tp) != v}

    def released(self, tps: set[TopicPartition], committed: Mapping[TopicPartition, int], lost: bool) -> None:
        """IO thread, after the revocation commit: tell the listener (unless lost), forget ``tps``."""
        with self.state_lock:
            mine = {tp for tp in tps if tp in self.owned}
        if mine and not lost:
            by_topic: dict[str, set[int]] = {}
            for tp in mine:
                by_topic.setdefault(tp.topic, set()).add(tp.partition)
            try:
                self.listener.before_releasing_partitions(by_topic)
            except Exception:  # noqa: BLE001 - a listener's failure must not stop the rebalance
                log.warning("%s: before_releasing_partitions failed", self.consumer_id, exc_info=True)
        handover = self.handover
        if handover is not None:
            try:  # after the commit, before forgetting: the next owner must find the final offset
                handover.released(tps, {} if lost else committed)
            except Exception:  # noqa: BLE001 - owner nodes are ephemeral: they go with the session at worst
                log.warning("%s: handing partitions back failed", self.consumer_id, exc_info=True)
        with self.state_lock:
            for tp in tps:
                self.owned.pop(tp, None)
                self._held.discard(tp)
                self._needs_seek.discard(tp)
                self._dropped_from.pop(tp, None)
            self._committed.update(committed)
        for tp, value in committed.items():
            self.trace.emit("offset_committed", topic=tp.topic, partition=tp.partition, offset=value, store="kafka",
                            generation=self.group_generation, member_id=self.member_id)
        self.trace.emit("released", rebalance=self._rebalance_number,
                        partitions=sorted(f"{tp.topic}-{tp.partition}" for tp in tps),
                        generation=self.group_generation, member_id=self.member_id)

    def assign(self, tps: set[TopicPartition], generation: int, member_id: str) -> None:
        """IO thread, after SyncGroup: own ``tps`` (kafka-python positions them at the committed offsets)."""
        if self._rebalance_started is None:
            self._begin_rebalance("coordinator")
        self.group_generation, self.member_id = generation, member_id
        threads = self._threads_for(set(tps))
        with self.state_lock:
            self._generation += 1
            for tp, tid in threads.items():
                self.owned[tp] = PartitionProgress(tp, tid, self._generation, -1)
        asked = {tp for tp in tps if self._ask_hold(tp)} if self.hold is not None else set()
        with self.state_lock:  # one look at the handover, under the lock drop_handover() takes
            if self.handover is not None:
                self._held |= set(tps)  # the poller claims them through the handover and seeks before any delivery
            else:
                self._held |= asked
                self._needs_seek |= set(tps)
            started = self._rebalance_started
            self._rebalance_started = None
        share = {f"{tp.topic}-{tp.partition}": tid for tp, tid in sorted(threads.items())}
        common = dict(rebalance=self._rebalance_number, generation=generation, member_id=member_id)
        self.trace.emit("assigned", attempt=1, assignment=share, strategy=self.strategy, **common)
        by_topic: dict[str, dict[int, str]] = {}
        for tp, tid in threads.items():
            by_topic.setdefault(tp.topic, {})[tp.partition] = tid
        try:  # records reach the streams only after this callback returns
            self.listener.before_starting_fetchers(self.consumer_id, by_topic)
        except Exception:  # noqa: BLE001 - a listener's failure must not stop the rebalance
            log.warning("%s: before_starting_fetchers failed", self.consumer_id, exc_info=True)
        duration = int((time.monotonic() - started) * 1000) if started is not None else 0
        self.trace.emit("rebalance_done", attempts=1, duration_ms=duration, owned=sorted(share), **common)

    # -------------------------------------------------------------------------------------------- commits
    def _committable(self) -> dict[TopicPartition, int]:
        with self.state_lock:
            return {tp: p.processed for tp, p in self.owned.items()
                    if p.generation > 0 and p.processed is not None and self._committed.get(tp) != p.processed}

    def _commit_now(self, consumer) -> dict[TopicPartition, int]:
        """Poller: commit processed offsets of owned partitions (OffsetCommit with our generation)."""
        from kafka import TopicPartition as KTP
        from kafka.structs import OffsetAndMetadata

        values = self._committable()
        if not values:
            return {}
        if not self._commit_to_handover_first(values):
            return {}
        try:
            consumer.commit({KTP(tp.topic, tp.partition): OffsetAndMetadata(v, "", -1) for tp, v in values.items()},
                            timeout_ms=self._call_timeout_ms)
        except Exception as e:  # noqa: BLE001 - e.g. a rebalance in progress: the revocation commits instead
            log.warning("%s: offset commit failed: %r", self.consumer_id, e)
            return {}
        with self.state_lock:
            self._committed.update(values)
        for tp, value in values.items():
            self.trace.emit("offset_committed", topic=tp.topic, partition=tp.partition, offset=value, store="kafka",
                            generation=self.group_generation, member_id=self.member_id)
        return values

    def _commit_to_handover_first(self, values: Mapping[TopicPartition, int]) -> bool:
        """While the group migrates, commit to ZooKeeper first, and to the broker only if that worked: the next
        owner may be a ZooKeeper-mode member, which reads ZooKeeper alone, so an offset only the broker has would
        be committed for some members and not for others (found by the migration fault matrix: a bridged member
        cut off from ZooKeeper committed to the broker only, and its ZooKeeper-mode successor delivered those
        committed records again). False: nothing is committed now; the next commit tries again."""
        handover = self.handover
        if handover is None:
            return True
        try:
            handover.committed(values)
            return True
        except Exception as e:  # noqa: BLE001 - e.g. ZooKeeper suspended: both stores wait for the next commit
            log.warning("%s: committing to ZooKeeper failed (%r): not committing to the broker either",
                        self.consumer_id, e)
            return False

    # ------------------------------------------------------------------- the handover's ZooKeeper session
    def drop_handover(self) -> None:
        """The migration is done: ZooKeeper takes no part any more, and this member stays in its group (same member
        id, same partitions: no rebalance). A partition still held for its owner node is consumed from the
        broker's committed offset: its previous owner was a coordinator-mode member, which commits there."""
        with self.state_lock:
            self.handover = None
            self._needs_seek |= self._held
            self._held.clear()
        self.deliverable.set()

    def handover_suspended(self) -> None:
        """The handover's ZooKeeper connection is suspended: its owner nodes may expire any moment and others may
        claim them, so the streams hand out nothing until the session is confirmed or known lost (as a ZooKeeper
        member's streams do, zkconsumer/streams.py). Called from kazoo's event thread: it only flags."""
        self.deliverable.clear()
        self.trace.emit("connection_suspended", member_id=self.member_id)

    def handover_confirmed(self) -> None:
        """The same session again: every owner node is still ours, deliveries go on."""
        self.deliverable.set()

    def handover_lost(self) -> None:
        """The handover's session expired: its owner nodes are gone and others may own the partitions already.
        Every owned partition is held again (the poller pauses it and claims it anew through the handover, then
        seeks to the larger committed offset); records queued for it are stale (a new generation); nothing
        processed under the lost session is committed (the next owner may be further on)."""
        with self.state_lock:
            self._generation += 1
            for progress in self.owned.values():
                progress.generation = self._generation
                progress.handed = progress.processed = None
            self._held |= set(self.owned)
            self._backlog.clear()
        self.deliverable.set()
        self.trace.emit("session_expired", member_id=self.member_id)

    def request_rejoin(self) -> None:
        """Ask the coordinator for a new generation (from any thread; the poller does it)."""
        def rejoin(consumer) -> None:
            coordinator = getattr(consumer, "_coordinator", None)
            if coordinator is not None:
                coordinator.request_rejoin()

        self._commands.put((rejoin, threading.Event(), []))

    def commit_offsets(self) -> dict[TopicPartition, int]:
        """Commit the offsets of processed records now (from any thread; the poller sends them)."""
        try:
            return self._call(self._commit_now) or {}
        except TimeoutError:
            return {}

    # ------------------------------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Commit processed offsets, leave the group (LeaveGroup), end the streams."""
        if self.closed:
            return
        self._stop.set()
        if self._thread is not None:
            wait = max(10.0, self.config.get("socket.timeout.ms") / 1000.0)
            self._thread.join(wait)
            if self._thread.is_alive():  # its client may still heartbeat: the group waits for it to rejoin or leave
                log.warning("%s: the poller did not stop within %.0fs; the coordinator keeps this member until it "
                            "leaves or its session times out", self.consumer_id, wait)
        self.closed = True  # streams end once their queue is empty
        for stream in self.all_streams():
            stream.clear()
        self.trace.emit("shutdown", committed=self.config.auto_commit)
        self.trace.close()

    def owned_partitions(self) -> dict[TopicPartition, str]:
        with self.state_lock:
            return {tp: p.thread_id for tp, p in self.owned.items() if p.generation > 0}


@dataclass(frozen=True)
class JoinStall:
    """A join (JoinGroup, then SyncGroup) of this member that has not completed within the rebalance timeout: what
    the member saw of it and what the coordinator says of the group (DescribeGroups)."""

    consumer_id: str
    waited_ms: int
    rebalance_timeout_ms: int
    state: str  # kafka-python's member state: UNJOINED (no join in flight, or rejected) | REBALANCING (in flight)
    waiting_for: str | None  # "coordinator" | "JoinGroup" | "SyncGroup": the step in flight; None: between tries
    errors: Mapping[str, str | None]  # JoinGroup / SyncGroup → the coordinator's last answer ("NAME(code)")
    error: str | None  # the last error the client raised (poll failed), if any
    group_state: str | None  # DescribeGroups: Empty | PreparingRebalance | CompletingRebalance | Stable | Dead
    protocol: str | None  # DescribeGroups: the group's assignor (protocol) when it has one
    members: Sequence[Mapping[str, object]]  # DescribeGroups: member_id, client_id, client_host
    describe_error: str | None = None

    def summary(self) -> str:
        answers = ", ".join(f"{api} {code}" for api, code in self.errors.items() if code) or "no answer yet"
        group = (f"{self.group_state} with {len(self.members)} member(s)"
                 + (f", protocol {self.protocol}" if self.protocol else "")) if self.group_state else \
            f"not described ({self.describe_error or 'no answer'})"
        step = f"waiting for {self.waiting_for}" if self.waiting_for else self.state
        return (f"join not complete after {self.waited_ms / 1000:.0f}s (rebalance timeout "
                f"{self.rebalance_timeout_ms / 1000:.0f}s): {step}; coordinator answered {answers}"
                + (f"; client error {self.error}" if self.error else "") + f"; group {group}")


def _code(error_code: int) -> str:
    return code_name(error_code)


class JoinWatch:
    """Says so when this member's join does not complete within the rebalance timeout, instead of waiting silently.

    kafka-python retries JoinGroup and SyncGroup on its own and logs their errors at INFO at most (a JoinGroup the
    coordinator parks while it waits for other members logs nothing at all), so a member can sit for minutes
    without an assignment and without a word. The watch records the coordinator's answer to every JoinGroup and
    SyncGroup this member sends (by wrapping the client's response handlers: ``KafkaConsumer._coordinator``, as
    :meth:`CoordinatorConsumerConnector._unstick_join` uses it), and the poller calls :meth:`check` after every
    ``poll()``: once the member has been out of the STABLE state for a rebalance timeout, the group is described
    (DescribeGroups) on a thread of its own, and the report is logged at WARNING, written to the trace
    (``join_stalled``) and kept in :attr:`current` (``zkconsumer consume --output rate`` shows it), once per
    rebalance timeout while it lasts. The member keeps trying meanwhile."""

    def __init__(self, connector: CoordinatorConsumerConnector) -> None:
        self.c = connector
        self.current: JoinStall | None = None
        self.reports = 0
        #: Called with each report (from the reporting thread); ``consume`` prints it.
        self.listeners: list[Callable[[JoinStall], None]] = []
        self._lock = threading.Lock()
        self._since: float | None = None
        self._next_report = 0.0
        self._reporting = False
        self._answers: dict[str, str | None] = {"JoinGroup": None, "SyncGroup": None}
        self._in_flight: str | None = None
        self._error: str | None = None
        self._error_logged: tuple[str, float] | None = None

    # ----------------------------------------------------------------------------- hooks into the client
    def attach(self, consumer) -> None:
        """Record the coordinator's answers to JoinGroup and SyncGroup (kafka-python's handlers, wrapped)."""
        import kafka.errors as errors

        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None:
            return
        for api, name in (("JoinGroup", "_process_join_group_response"),
                          ("SyncGroup", "_process_sync_group_response")):
            handler = getattr(coordinator, name, None)
            if callable(handler):
                setattr(coordinator, name, self._recording(api, handler))
        attempt = getattr(coordinator, "_do_join_and_sync_async", None)
        if attempt is not None and inspect.iscoroutinefunction(attempt):
            watch = self

            async def join_and_sync(*args, **kwargs):
                watch._in_flight = "JoinGroup"
                try:
                    return await attempt(*args, **kwargs)
                except BaseException as e:  # noqa: BLE001 - recorded, re-raised to kafka-python's retry loop
                    if not isinstance(e, errors.BrokerResponseError):  # those are the answers recorded above
                        watch._error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    raise
                finally:
                    watch._in_flight = None

            coordinator._do_join_and_sync_async = join_and_sync

    def _recording(self, api: str, handler: Callable) -> Callable:
        def record(response, *args, **kwargs):
            code = getattr(response, "error_code", None)
            if code is not None:
                with self._lock:
                    self._answers[api] = _code(code)
                if api == "JoinGroup" and code == 0:
                    self._in_flight = "SyncGroup"
            return handler(response, *args, **kwargs)

        return record

    def poll_failed(self, e: BaseException) -> None:
        """The poller's ``poll()`` raised (kafka-python gave up a join on a fatal answer, or a broker error): logged
        once, then again at most once per rebalance timeout while it repeats (the stall report names it too)."""
        import kafka.errors as errors

        text = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        with self._lock:
            answered = isinstance(e, errors.BrokerResponseError) and _code(e.errno) in self._answers.values()
        if not answered:  # an answer to JoinGroup/SyncGroup is in the report already
            self._error = text
        now = time.monotonic()
        last = self._error_logged
        if last is None or last[0] != text or now - last[1] >= self.c.rebalance_timeout_ms / 1000.0:
            self._error_logged = (text, now)
            log.warning("%s: poll failed: %s (retrying)", self.c.consumer_id, text)
        else:
            log.debug("%s: poll failed again: %s", self.c.consumer_id, text)

    # ------------------------------------------------------------------------------------------ watching
    def check(self, consumer) -> None:
        """Poller, after every ``poll()``: start the clock when the member leaves STABLE, report past the timeout."""
        from kafka.structs import MemberState

        try:
            state = consumer.group_metadata().state
        except Exception:  # noqa: BLE001 - no metadata: nothing to judge
            return
        now = time.monotonic()
        timeout = self.c.rebalance_timeout_ms / 1000.0
        if state == MemberState.STABLE:
            if self._since is not None and self.reports:
                log.warning("%s: joined group %s (generation %s) after %.0fs", self.c.consumer_id, self.c.group,
                            self.c.group_generation, now - self._since)
            self._since, self.current, self.reports, self._error, self._error_logged = None, None, 0, None, None
            with self._lock:
                self._answers = dict.fromkeys(self._answers)
            return
        if self._since is None:
            self._since, self._next_report = now, now + timeout
            return
        if now < self._next_report or self._reporting or self.c._stop.is_set():
            return
        self._next_report = now + timeout
        self._reporting = True
        coordinator_known = getattr(getattr(consumer, "_coordinator", None), "coordinator_id", 0) is not None
        with self._lock:
            answers = dict(self._answers)
        snapshot = dict(waited_ms=int((now - self._since) * 1000), state=str(state).strip("<>").upper(),
                        waiting_for=self._in_flight or (None if coordinator_known else "coordinator"),
                        errors=answers, error=self._error)
        threading.Thread(target=self._report, args=(snapshot,), daemon=True,
                         name=f"{self.c.consumer_id}-join-watch").start()

    def _report(self, snapshot: dict) -> None:
        try:
            group_state, protocol, members, describe_error = self._describe()
            stall = JoinStall(self.c.consumer_id, rebalance_timeout_ms=self.c.rebalance_timeout_ms,
                              group_state=group_state, protocol=protocol, members=members,
                              describe_error=describe_error, **snapshot)
            self.current = stall
            self.reports += 1
            log.warning("%s: %s", self.c.consumer_id, stall.summary())
            self.c.trace.emit("join_stalled", waited_ms=stall.waited_ms,
                              rebalance_timeout_ms=stall.rebalance_timeout_ms, member_state=stall.state,
                              waiting_for=stall.waiting_for, join_errors=dict(stall.errors), error=stall.error,
                              group_state=stall.group_state, group_protocol=stall.protocol,
                              group_members=[dict(m) for m in stall.members], describe_error=stall.describe_error,
                              generation=self.c.group_generation, member_id=self.c.member_id)
            for listener in list(self.listeners):
                try:
                    listener(stall)
                except Exception:  # noqa: BLE001 - a display must not stop the watch
                    log.debug("a join-stall listener failed", exc_info=True)
        except Exception:  # noqa: BLE001 - the watch must never take the member down
            log.warning("%s: reporting a stalled join failed", self.c.consumer_id, exc_info=True)
        finally:
            self._reporting = False

    def _describe(self) -> tuple[str | None, str | None, list[dict], str | None]:
        """DescribeGroups through a short-lived admin client (not the member's own client: its poller must not
        wait): the group's state, protocol and members as the coordinator sees them."""
        from kafka import KafkaAdminClient

        c = self.c
        admin = None
        try:
            admin = KafkaAdminClient(bootstrap_servers=c.bootstrap, client_id=f"{c.config.client_id}-join-watch",
                                     request_timeout_ms=max(1000, min(10000, c.rebalance_timeout_ms // 2)),
                                     **broker_version.client_settings(c.bootstrap, c.config.broker_api_version))
            described = admin.describe_groups([c.group]).get(c.group) or {}
        except Exception as e:  # noqa: BLE001 - the report goes out without the coordinator's view
            return None, None, [], f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        finally:
            if admin is not None:
                try:
                    admin.close()
                except Exception:  # noqa: BLE001
                    log.debug("closing the admin client failed", exc_info=True)
        if described.get("error"):
            return None, None, [], str(described["error"])
        members = [{"member_id": m.get("member_id"), "client_id": m.get("client_id"),
                    "client_host": m.get("client_host")} for m in described.get("members") or ()]
        return described.get("group_state"), described.get("protocol_data") or None, members, None


class _Listener(AsyncConsumerRebalanceListener):
    """kafka-python's rebalance listener, on its IO thread: async, so the revocation commit is awaited
    without blocking the loop that also sends heartbeats."""

    def __init__(self, connector: CoordinatorConsumerConnector) -> None:
        self.c = connector

    async def on_partitions_revoked(self, revoked) -> None:
        await self._give_up(revoked, lost=False)

    async def on_partitions_lost(self, lost) -> None:
        await self._give_up(lost, lost=True)

    async def _give_up(self, ktps, lost: bool) -> None:
        from kafka import TopicPartition as KTP
        from kafka.structs import OffsetAndMetadata

        tps = {TopicPartition(k.topic, k.partition) for k in ktps}
        values = self.c.revoke(tps, lost)
        committed: dict[TopicPartition, int] = {}
        consumer = self.c._consumer
        if values and consumer is not None and self.c._commit_to_handover_first(values):
            try:
                await consumer.commit_async({KTP(tp.topic, tp.partition): OffsetAndMetadata(v, "", -1)
                                             for tp, v in values.items()})
                committed = values
            except Exception as e:  # noqa: BLE001 - the next owner restarts from the last commit
                log.warning("%s: commit before revocation failed: %r", self.c.consumer_id, e)
        if lost:
            self.c.trace.emit("session_expired", generation=self.c.group_generation, member_id=self.c.member_id)
        self.c.released(tps, committed, lost)

    async def on_partitions_assigned(self, assigned) -> None:
        consumer = self.c._consumer
        meta = consumer.group_metadata() if consumer is not None else None
        generation = meta.generation_id if meta is not None else -1
        member_id = meta.member_id if meta is not None else ""
        self.c.assign({TopicPartition(k.topic, k.partition) for k in assigned}, generation, member_id)
