"""Coordinator mode: the ZooKeeper connector's streams API on Kafka 0.9+'s broker-side group coordinator.

:class:`CoordinatorConsumerConnector` has the surface of
:class:`~zkconsumer.consumer.zookeeper.connector.ZookeeperConsumerConnector` (``create_message_streams``,
``create_message_streams_by_filter``, :class:`KafkaStream` iteration where asking for the next record marks
the previous one processed, ``commit_offsets``, :class:`RebalanceListener`, ``ConsumerTimeout``,
``shutdown``) so that a program, the CLI and the lab can switch modes with one setting. Membership is
kafka-python's group machinery (``KafkaConsumer(group_id=…)`` + ``subscribe(listener=…)``: FindCoordinator,
JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit/OffsetFetch v1+), not a second client.

Threads: kafka-python's consumer is not thread-safe, so one *poller* thread owns it (poller.py) (polls, commits on the
auto-commit interval and on request) and streams read from queues, as the ZooKeeper connector and its fetcher do.
kafka-python runs the rebalance callbacks on its IO thread while the poller waits in ``poll()``; they only
touch the state below (under ``state_lock``) and await the revocation commit without blocking that loop.

Ownership carries a local *generation* (the ZooKeeper connector's scheme): a revocation bumps it before offsets are
committed, so a record fetched before a revocation is never handed out after it, and only records the
caller finished (processed) are committed: at-least-once, committed before the partitions are given up.

Kafka's assignors hand partitions to *members*; a member with several streams deals its share of each topic
over them (sorted partitions, round robin), which is where the 0.8 thread ids come back:
``<consumer id>-<stream index>``. The trace's consumer stays ``<group>_<consumer.id or host-ts-uuid8>``;
the coordinator's member id and generation are extra fields (docs/trace.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from kafka import TopicPartition as KTP
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.coordinator.base import DEFAULT_GENERATION_ID, MemberState
from kafka.structs import OffsetAndMetadata

from zkconsumer import broker_version, runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.consumer.base import ConsumerBase
from zkconsumer.consumer.coordinated.backlog import Backlog
from zkconsumer.consumer.coordinated.holds import Handover, Holds
from zkconsumer.consumer.coordinated.join_watch import JoinStall, JoinWatch
from zkconsumer.consumer.coordinated.poller import Poller
from zkconsumer.consumer.fetcher import FetchedRecord
from zkconsumer.consumer.listener import RebalanceListener
from zkconsumer.consumer.progress import PartitionProgress
from zkconsumer.consumer.streams import KafkaStream
from zkconsumer.errors import KafkaUnavailable
from zkconsumer.trace import TraceWriter
from zkconsumer.types import GroupMode, chosen, owners_by_topic, partitions_by_topic, tp_str
from zkconsumer.zk import layout
from zkconsumer.zk.layout import TopicFilter
from zkconsumer.zk.registry import Registry, connect

log = logging.getLogger(__name__)


#: Kafka's ``partition.assignment.strategy`` names → kafka-python's assignor classes.
#: Kafka 0.9+'s RoundRobinAssignor already has 0.10.2's relaxed semantics (unequal subscriptions are fine),
#: so ``roundrobin`` and ``roundrobin-relaxed`` are the same class here.
ASSIGNORS: dict[str, type] = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "roundrobin-relaxed": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def assignor_class(strategy: str) -> type:
    """kafka-python's assignor for a Kafka strategy name."""
    return chosen(ASSIGNORS, strategy, ConfigError,
                  f"partition.assignment.strategy {strategy!r} has no coordinator-mode assignor")


def filter_pattern(topic_filter: TopicFilter) -> str:
    """A regex for kafka-python's ``subscribe(pattern=…)`` (it uses ``re.match``) that accepts exactly the
    topics the 0.8 filter allows (a full match for a whitelist, anything but one for a blacklist)."""
    if topic_filter.pattern == layout.WHITE_LIST:
        return f"(?:{topic_filter.regex})$"
    return f"(?!(?:{topic_filter.regex})$).*"


class CoordinatorConsumerConnector(ConsumerBase):
    """One member of a coordinator-managed group, with the ZooKeeper connector's streams API.

    ``CoordinatorConsumerConnector(ConsumerConfig.from_properties({"group.id": "g",
    "bootstrap.servers": "127.0.0.1:9092"}))``; without ``bootstrap.servers`` the brokers registered in
    ``zookeeper.connect`` are used.
    """

    mode = GroupMode.COORDINATOR
    releasing_counts_as_owned = False  # the coordinator has taken a revoked partition back already

    def __init__(self, config: ConsumerConfig, listener: RebalanceListener | None = None,
                 handover: Handover | None = None, assignors: Sequence[object] | None = None) -> None:
        """``handover``: the hook of a member whose partitions are also guarded elsewhere (the migration's
        ZooKeeper bridge; holds.py)."""
        config.check_mode(GroupMode.COORDINATOR)
        self.config = config
        self.group = config.group_id
        self.consumer_id = layout.make_consumer_id(self.group, config.consumer_id)
        self.listener = listener or RebalanceListener()
        self.strategy = config.strategy
        self._assignors = tuple(assignors) if assignors else (assignor_class(self.strategy),)
        self.bootstrap = config.bootstrap_servers or self._brokers_from_zookeeper()
        # Kafka 0.8 has no group coordinator (JoinGroup came in 0.9): a clear error now, not a join that never ends
        broker_version.require(self.bootstrap, (0, 9), "coordinator mode (the broker's group coordinator)",
                               config.broker_api_version)
        self.trace = TraceWriter(config.trace_dir, self.group, self.consumer_id, mode=self.mode)
        self._init_streams()  # state_lock, owned, the streams (consumer/base.py)
        #: Records polled and not yet queued to their stream (the poller never blocks on a full queue).
        self.backlog = Backlog()
        #: Held partitions, those waiting for their seek, and the handover: where each new partition starts.
        self.holds = Holds(self, handover)
        self._generation = 0
        self._committed: dict[TopicPartition, int] = {}
        self.failure: BaseException | None = None
        self.deliverable = runtime.Event()
        self.deliverable.set()  # the coordinator session has no "suspended" state a stream must wait out
        self.closed = False
        self.member_id: str | None = None
        self.group_generation = -1
        self._rebalance_started: float | None = None
        #: when the last SyncGroup gave us a share (monotonic): a proof of a live session, as a heartbeat answer is
        self._joined_at = float("-inf")
        self._rebalance_number = 0  # this consumer's rebalances, as the trace counts them
        #: Joins that take longer than the rebalance timeout are reported (log, trace, :attr:`stall`).
        self.join_watch = JoinWatch(self)
        #: The thread that owns kafka-python's client (poller.py); the rebalance callbacks below run on its IO.
        self.poller = Poller(self)

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
        zk = connect(self.config.zookeeper_connect, session_timeout_ms=self.config.session_timeout_ms,
                     connection_timeout_ms=self.config.connection_timeout_ms)
        try:
            bootstrap = Registry(zk).bootstrap_servers()
        finally:
            zk.stop()
            zk.close()
        if not bootstrap:
            raise KafkaUnavailable("no brokers registered under /brokers/ids and no bootstrap.servers given")
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
        listener = _Listener(self)
        error = self.poller.start(self._client_settings(), lambda consumer: subscribe(consumer, listener),
                                  topics=None if self.topic_filter is not None else sorted(self._static_streams),
                                  auto_commit_ms=self.config.auto_commit_interval_ms if self.config.auto_commit
                                  else None,
                                  timeout=max(30.0, self.config.get("socket.timeout.ms") / 1000.0))
        if error is not None:
            self.closed = True
            raise KafkaUnavailable(f"could not connect to Kafka at {self.bootstrap}: {error}")

    @property
    def stopping(self) -> bool:
        """Shutting down: revocations are releases, not rebalances, and the join watch reports nothing."""
        return self.poller.stopping

    # ------------------------------------------------------------ the client, and delivery (on the poller thread)
    def _client_settings(self) -> dict:
        c = self.config
        static = {"group_instance_id": c.group_instance_id} if c.group_instance_id else {}
        return dict(bootstrap_servers=self.bootstrap, client_id=c.client_id, group_id=self.group, **static,
                    enable_auto_commit=False,  # we commit processed offsets ourselves
                    metrics_enabled=False,  # nobody reads kafka-python's sensors; recording them costs each request
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

    def buffer(self, batches: Mapping) -> None:
        """Poller: append polled records to their partition's backlog, tagged with the current generation."""
        with self.state_lock:
            for ktp, records in batches.items():
                tp = TopicPartition(ktp.topic, ktp.partition)
                progress = self.owned.get(tp)
                if progress is None or progress.generation < 0:
                    continue  # revoked while the fetch was in flight
                if self.holds.polled_before_seek(tp, [r.offset for r in records]):
                    continue
                self.backlog.add(tp, (FetchedRecord(r.topic, r.partition, r.offset, r.key, r.value, r.timestamp,
                                                    tuple(r.headers or ())) for r in records), progress.generation)
        self._drain_backlog()

    def _drain_backlog(self) -> None:
        with self.state_lock:
            self.backlog.drain(self.owned, self.holds.is_held, self.stream_for)

    def flow_control(self, consumer) -> None:
        """Poller: seek or free new partitions, deliver what fits, pause partitions that are held or backed up."""
        self.holds.settle(consumer, self._call_timeout_ms)
        self._drain_backlog()
        with self.state_lock:
            stop = {tp for tp in self.owned if self.holds.is_held(tp) or tp in self.backlog}
        assigned = consumer.assignment()
        want_paused = {KTP(tp.topic, tp.partition) for tp in stop} & assigned
        paused = consumer.paused()
        if want_paused - paused:
            consumer.pause(*(want_paused - paused))
        if paused - want_paused:
            consumer.resume(*(paused - want_paused))

    # ---------------------------------------------------------------------------------------- streams side
    def may_hand_out(self) -> bool:
        """Not while the group session is not known alive by this process's own clock (:meth:`session_lapsed`):
        a member woken from a pause longer than its session would otherwise hand out what it had queued, of
        partitions the others own by now (found by the failure catalogue, modes a and b: 150 records in 25 ms
        before kafka-python's heartbeat noticed). The next heartbeat answer lifts it, or the session is found lost
        and the partitions are revoked, which makes what is queued stale."""
        return self.deliverable.is_set() and not self.session_lapsed()

    def await_deliverable(self, timeout: float) -> None:
        if self.deliverable.wait(timeout) and self.session_lapsed():
            runtime.sleep(min(timeout, 0.02))  # the heartbeat thread's answer, or the revocation, comes soon

    def session_lapsed(self) -> bool:
        """A stable member has had no heartbeat answer (nor joined) for two thirds of its session timeout, as the
        ZooKeeper members' lease counts (zk/lease.py): the coordinator expires a session a full timeout after the
        last heartbeat it heard, so within two thirds of it from our last answer the session is alive. While the
        member rebalances the coordinator holds it by the rebalance timeout instead, and heartbeats pause."""
        coordinator = getattr(self.poller.consumer, "_coordinator", None)
        heartbeat = getattr(coordinator, "heartbeat", None)
        if heartbeat is None:
            return False
        if coordinator._generation.generation_id == DEFAULT_GENERATION_ID and self.owned:
            # A heartbeat answered "unknown member" or "illegal generation" (a member woken from a pause past its
            # session): kafka-python resets the generation at once, and the revocation follows on the poller's
            # thread. Until it does, what we still own is another member's already.
            return True
        if coordinator.state != MemberState.STABLE:
            return False
        # Not kafka-python's ``last_reset``: finding the coordinator again resets it, and a member woken from a pause
        # finds its coordinator "dead" (no answer for a session) and rediscovers it before any heartbeat is answered.
        heard = max(heartbeat.last_receive, self._joined_at)
        return runtime.monotonic() - heard > heartbeat.config["session_timeout_ms"] / 1000.0 * 2 / 3

    # ----------------------------------------------------------------------------- the rebalance callbacks
    def next_generation(self) -> int:
        """The next local ownership generation (under the state lock): records queued under an older one are
        stale."""
        with self.state_lock:
            self._generation += 1
            return self._generation

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
            self._rebalance_started = runtime.monotonic()
            number = self._rebalance_number
        self.trace.emit("rebalance_triggered", cause=cause, generation=self.group_generation,
                        member_id=self.member_id)
        self.trace.emit("attempt_started", rebalance=number, attempt=1, generation=self.group_generation,
                        member_id=self.member_id)

    def revoke(self, tps: set[TopicPartition], lost: bool) -> dict[TopicPartition, int]:
        """IO thread, before JoinGroup: stop handing out ``tps`` and return the offsets to commit (none when
        the membership was lost: another member may own them already)."""
        if not self.stopping:  # at shutdown it is a release, not a rebalance (as in ZooKeeper mode)
            self._begin_rebalance("session_expired" if lost else
                                  ("startup" if self.group_generation < 0 else "coordinator"))
        with self.state_lock:
            generation = self.next_generation()
            targets = set(tps) & set(self.owned)
            for tp in targets:
                self.owned[tp].generation = -generation  # queued records of these are stale now
                self.backlog.drop(tp)
            values = {} if lost or not self.config.auto_commit else {
                tp: p.processed for tp, p in self.owned.items() if tp in targets and p.processed is not None}
        return {tp: v for tp, v in values.items() if self._committed.get(tp) != v}

    def released(self, tps: set[TopicPartition], committed: Mapping[TopicPartition, int], lost: bool) -> None:
        """IO thread, after the revocation commit: tell the listener (unless lost), forget ``tps``."""
        with self.state_lock:
            mine = {tp for tp in tps if tp in self.owned}
        if mine and not lost:
            try:
                self.listener.before_releasing_partitions(partitions_by_topic(mine))
            except Exception:  # noqa: BLE001 - a listener's failure must not stop the rebalance
                log.warning("%s: before_releasing_partitions failed", self.consumer_id, exc_info=True)
        self.holds.give_back(tps, {} if lost else committed)
        with self.state_lock:
            for tp in tps:
                self.owned.pop(tp, None)
            self.holds.forget(tps)
            self._committed.update(committed)
        for tp, value in sorted(committed.items()):
            self.trace.emit("offset_committed", topic=tp.topic, partition=tp.partition, offset=value, store="kafka",
                            generation=self.group_generation, member_id=self.member_id)
        self.trace.emit("released", rebalance=self._rebalance_number,
                        partitions=sorted(map(tp_str, tps)),
                        generation=self.group_generation, member_id=self.member_id)

    def assign(self, tps: set[TopicPartition], generation: int, member_id: str) -> None:
        """IO thread, after SyncGroup: own ``tps`` (kafka-python positions them at the committed offsets)."""
        if self._rebalance_started is None:  # no revocation came first (cooperative-sticky revokes nothing to join)
            self._begin_rebalance("startup" if self.group_generation < 0 else "coordinator")
        self.group_generation, self.member_id = generation, member_id
        threads = self._threads_for(set(tps))
        with self.state_lock:
            local = self.next_generation()
            for tp, tid in sorted(threads.items()):
                self.owned[tp] = PartitionProgress(tp, tid, local, -1)
            self.holds.assigned(tps)
            started = self._rebalance_started
            self._rebalance_started = None
            self._joined_at = runtime.monotonic()
        # The share after this rebalance: under cooperative-sticky (KIP-429) ``tps`` are only the partitions added,
        # and those kept stay owned in their old generation; the trace records the whole share either way.
        whole = self.owned_partitions()
        share = {tp_str(tp): tid for tp, tid in sorted(whole.items())}
        common = dict(rebalance=self._rebalance_number, generation=generation, member_id=member_id)
        self.trace.emit("assigned", attempt=1, assignment=share, strategy=self.strategy, **common)
        try:  # records reach the streams only after this callback returns
            self.listener.before_starting_fetchers(self.consumer_id, owners_by_topic(whole))
        except Exception:  # noqa: BLE001 - a listener's failure must not stop the rebalance
            log.warning("%s: before_starting_fetchers failed", self.consumer_id, exc_info=True)
        duration = int((runtime.monotonic() - started) * 1000) if started is not None else 0
        self.trace.emit("rebalance_done", attempts=1, duration_ms=duration, owned=sorted(share), **common)

    # -------------------------------------------------------------------------------------------- commits
    def _committable(self) -> dict[TopicPartition, int]:
        with self.state_lock:
            # in partition order: the commit's request and its trace lines do not follow a set's hash order
            return {tp: p.processed for tp, p in sorted(self.owned.items())
                    if p.generation > 0 and p.processed is not None and self._committed.get(tp) != p.processed}

    def commit_now(self, consumer) -> dict[TopicPartition, int]:
        """Poller: commit processed offsets of owned partitions (OffsetCommit with our generation)."""
        values = self._committable()
        if not values:
            return {}
        if not self.holds.commit_first(values):
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

    def request_rejoin(self) -> None:
        """Ask the coordinator for a new generation (from any thread; the poller does it)."""
        def rejoin(consumer) -> None:
            coordinator = getattr(consumer, "_coordinator", None)
            if coordinator is not None:
                coordinator.request_rejoin()

        self.poller.submit(rejoin)

    def commit_offsets(self) -> dict[TopicPartition, int]:
        """Commit the offsets of processed records now (from any thread; the poller sends them)."""
        try:
            return self.poller.call(self.commit_now) or {}
        except TimeoutError:
            return {}

    # ------------------------------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Commit processed offsets, leave the group (LeaveGroup), end the streams."""
        if self.closed:
            return
        wait = max(10.0, self.config.get("socket.timeout.ms") / 1000.0)
        if not self.poller.stop(wait):  # its client may still heartbeat: the group waits for it to rejoin or leave
            log.warning("%s: the poller did not stop within %.0fs; the coordinator keeps this member until it "
                        "leaves or its session times out", self.consumer_id, wait)
        self.closed = True  # streams end once their queue is empty
        for stream in self.all_streams():
            stream.clear()
        self.trace.emit("shutdown", committed=self.config.auto_commit)
        self.trace.close()


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
        tps = {TopicPartition(k.topic, k.partition) for k in ktps}
        consumer = self.c.poller.consumer
        # Under cooperative-sticky a revocation comes after SyncGroup, with the new share already in place, and
        # kafka-python calls the assign callback only when partitions were added (Java always calls it). A
        # rebalance that only took partitions away must still end with rebalance_done, or the trace leaves it open.
        ends_here = False
        if not lost and self.c.strategy == "cooperative-sticky" and not self.c.stopping and consumer is not None:
            now = {TopicPartition(k.topic, k.partition) for k in consumer.assignment()}
            with self.c.state_lock:
                ends_here = not (now - set(self.c.owned))
        values = self.c.revoke(tps, lost)
        committed: dict[TopicPartition, int] = {}
        if values and consumer is not None and self.c.holds.commit_first(values):
            try:
                await consumer.commit_async({KTP(tp.topic, tp.partition): OffsetAndMetadata(v, "", -1)
                                             for tp, v in values.items()})
                committed = values
            except Exception as e:  # noqa: BLE001 - the next owner restarts from the last commit
                log.warning("%s: commit before revocation failed: %r", self.c.consumer_id, e)
        if lost:
            self.c.trace.emit("session_expired", generation=self.c.group_generation, member_id=self.c.member_id)
        self.c.released(tps, committed, lost)
        if ends_here:
            await self.on_partitions_assigned([])

    async def on_partitions_assigned(self, assigned) -> None:
        consumer = self.c.poller.consumer
        meta = consumer.group_metadata() if consumer is not None else None
        generation = meta.generation_id if meta is not None else -1
        member_id = meta.member_id if meta is not None else ""
        self.c.assign({TopicPartition(k.topic, k.partition) for k in assigned}, generation, member_id)
