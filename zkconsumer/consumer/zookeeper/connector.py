"""Kafka 0.8's ``ZookeeperConsumerConnector``, in Python: streams, ownership state, commits, shutdown.

The connector registers under ``/consumers/<g>/ids``, hands records to the caller through one
:class:`KafkaStream` per consumer thread, and commits offsets to ZooKeeper. Deciding who owns what is the
:class:`~zkconsumer.consumer.zookeeper.rebalance.Rebalancer`'s job; the connector is its ``RebalanceHost`` — stop
fetching a set of partitions (dropping what is buffered and committing what was consumed), start fetching a new share,
and reset everything after a session expiry.

Records carry the *generation* of their partition's ownership: releasing a partition bumps it under the state
lock, so a record fetched before the release can never be handed out after it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from kazoo.client import KazooState

from zkconsumer import runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.base import ConsumerBase
from zkconsumer.consumer.fetcher import FetchedRecord, Fetcher
from zkconsumer.consumer.listener import RebalanceListener
from zkconsumer.consumer.member_io import LIVE, MemberIO
from zkconsumer.consumer.progress import PartitionProgress
from zkconsumer.consumer.streams import KafkaStream, Queued
from zkconsumer.consumer.zookeeper.kafka_offsets import offset_store
from zkconsumer.consumer.zookeeper.offsets import ZkOffsetStore
from zkconsumer.consumer.zookeeper.rebalance import Rebalancer
from zkconsumer.consumer.zookeeper.triggers import TriggerCause
from zkconsumer.errors import (
    ConsumerIdInUse,
    ConsumerRebalanceFailed,
    ConsumerTimeout,
    IllegalArgument,
    MessageStreamsExist,
)
from zkconsumer.trace import TraceWriter
from zkconsumer.types import GroupMode
from zkconsumer.zk import layout
from zkconsumer.zk.handler import session_lease
from zkconsumer.zk.layout import ConsumerRegistration, TopicFilter
from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.server import ZooKeeperServer

# Re-exported: users import these from the connector, as from Kafka's consumer package.
__all__ = ["ConsumerIdInUse", "ConsumerRebalanceFailed", "ConsumerTimeout", "KafkaStream", "MessageStreamsExist",
           "RebalanceListener", "ZookeeperConsumerConnector"]

log = logging.getLogger(__name__)


class ZookeeperConsumerConnector(ConsumerBase):
    """One consumer instance of a Kafka 0.8 ZooKeeper group.

    ``ZookeeperConsumerConnector(ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": zk}))``;
    without ``zookeeper.connect`` an embedded ZooKeeper is started for this process (the lab's default).
    """

    def __init__(self, config: ConsumerConfig, listener: RebalanceListener | None = None, *,
                 io: MemberIO = LIVE) -> None:
        self.config = config
        self.io = io  # real sockets, or the simulator's network (consumer/member_io.py)
        self.profile = config.profile
        self.group = config.group_id
        self.consumer_id = layout.make_consumer_id(self.group, config.consumer_id)
        self.listener = listener or RebalanceListener()
        self.trace = TraceWriter(config.trace_dir, self.group, self.consumer_id)
        for warning in config.warnings():
            log.warning(warning)
        config.check_mode(GroupMode.ZOOKEEPER)
        self._embedded = None
        zk_connect = config.zookeeper_connect
        if not zk_connect:
            self._embedded = ZooKeeperServer().start()
            zk_connect = self._embedded.connect_string
            log.info("no zookeeper.connect given: started an embedded ZooKeeper at %s", zk_connect)
        self.zk_connect = zk_connect
        self.zk = connect(zk_connect, session_timeout_ms=config.session_timeout_ms,
                          connection_timeout_ms=config.connection_timeout_ms, security=config.zk_security,
                          timing=self.profile.zk_client_timing, handler=io.zk_handler)
        self.registry = Registry(self.zk)
        zk_offsets = ZkOffsetStore(self.registry, self.group, self.trace, skip_broken=self.profile.skip_broken_nodes)
        self.offsets = offset_store(config, zk_offsets, self.trace,
                                    lambda: config.bootstrap_servers or self.registry.bootstrap_servers() or "")
        self._init_streams()  # state_lock, owned, the streams (consumer/base.py)
        self._commit_lock = runtime.Lock()
        self._generation = 0
        self.failure: BaseException | None = None
        self.connected = runtime.Event()
        self.connected.set()
        # What the streams wait for: the default pauses delivery while the connection is suspended; Kafka 0.8's
        # streams keep handing out what is already queued (an event that stays set).
        self.deliverable = self.connected if self.profile.pause_when_suspended else runtime.Event()
        self.deliverable.set()
        # ... and, in the default profile, only while the session is known alive by our own clock (zk/lease.py)
        self._lease = session_lease(self.zk) if self.profile.fence_on_session_lease else None
        self.closed = False
        self.registration: ConsumerRegistration | None = None
        self.fetcher: Fetcher | None = None
        self.rebalancer = Rebalancer(self)
        self._commit_thread: runtime.Task | None = None
        self._stop = runtime.Event()
        #: partitions whose owner nodes died with an expired session, until the rebalancer resets (default profile)
        self._lost: set[TopicPartition] = set()
        self._session_id = self.zk.client_id[0] if self.zk.client_id else None
        self._sessions: set[int] = {self._session_id} if self._session_id is not None else set()
        self.zk.add_listener(self._on_zk_state)

    # ------------------------------------------------------------------------------------ stream creation
    def create_message_streams(self, topic_count: Mapping[str, int], *, rebalance: bool = True
                               ) -> dict[str, list[KafkaStream]]:
        """Static subscription: topic → number of streams (threads); returns topic → streams.

        ``rebalance=False`` registers and stops there: :meth:`start_rebalancing` does the rest of the start (the
        watches and the first rebalance). The simulator's herd registers 10,000 members so before any of them
        rebalances (sim/herd.py); a start in one piece is the same two steps back to back."""
        self._new_static_streams(topic_count)
        self.registration = ConsumerRegistration.static(dict(topic_count))
        self._start(rebalance)
        return self._static_streams

    def create_message_streams_by_filter(self, topic_filter: TopicFilter | str, num_streams: int = 1
                                         ) -> list[KafkaStream]:
        """Wildcard subscription (white_list / black_list regex); new matching topics are picked up."""
        topic_filter, _ = self._new_wildcard_streams(topic_filter, num_streams)
        self.registration = ConsumerRegistration.wildcard(topic_filter, num_streams)
        self._start()
        return self._wildcard_streams

    def _start(self, rebalance: bool = True) -> None:
        self.registry.setup_common_paths()  # the group's ids path: register() makes sure of it
        if self.config.fetch_enabled:
            self._start_fetcher()
        self.register()
        if rebalance:
            self.start_rebalancing()

    def start_rebalancing(self) -> None:
        """The start after the registration: the group's watches, the first rebalance (on this thread: its
        :class:`ConsumerRebalanceFailed` is the start's), the auto-commit thread."""
        if self.registration is None:
            raise IllegalArgument("start_rebalancing() comes after create_message_streams(..., rebalance=False)")
        self.rebalancer.start()
        if self.config.auto_commit:
            self._commit_thread = runtime.spawn(self._auto_commit_loop, name=f"{self.consumer_id}-autocommit")

    @property
    def needs_registered_brokers(self) -> bool:
        """Records come from the brokers registered in ZooKeeper (no ``bootstrap.servers``, fetching on)."""
        return self.config.fetch_enabled and not self.config.bootstrap_servers

    def _start_fetcher(self) -> None:
        """Start the fetcher; with no broker registered yet, start none (Kafka's rebalance finds no brokers,
        counts as done and watches ``/brokers/ids``; :meth:`start_fetching` starts it once one registers)."""
        bootstrap = self.config.bootstrap_servers or self.registry.bootstrap_servers()
        if not bootstrap:
            log.warning("no brokers registered under /brokers/ids and no bootstrap.servers given: waiting for one "
                        "('zkconsumer broker start' starts one)")
            return
        self.fetcher = Fetcher(bootstrap, self.config.client_id, self.config.auto_offset_reset, self._deliver,
                               fetch_max_wait_ms=self.config.get("fetch.wait.max.ms"),
                               fetch_min_bytes=self.config.get("fetch.min.bytes"),
                               max_partition_fetch_bytes=self.config.get("fetch.message.max.bytes"),
                               request_timeout_ms=self.config.get("socket.timeout.ms"), on_reset=self._on_reset,
                               api_version=self.config.broker_api_version,
                               registrations=() if self.config.bootstrap_servers else self.registry.brokers().values(),
                               client_factory=self.io.kafka_client)
        self.fetcher.start()

    def register(self) -> None:
        """Write our registration node (again after a session expiry)."""
        assert self.registration is not None
        reg = self.registration
        self.registration = ConsumerRegistration(reg.subscription, reg.pattern, str(int(runtime.time() * 1000)))
        # A dead session lingers at most its timeout (we assume the same configuration as ours), plus a margin.
        self.registry.register_consumer(self.group, self.consumer_id, self.registration,
                                        stale_wait_s=2 * self.config.session_timeout_ms / 1000.0,
                                        own_sessions=self._sessions)
        self.trace.emit("registered", subscription=dict(self.registration.subscription),
                        pattern=self.registration.pattern)

    # ------------------------------------------------------------------------------------- stream lookup
    # ---------------------------------------------------------------------------------------- data path
    def _deliver(self, records: list[FetchedRecord]) -> None:
        """Fetcher thread: queue each record for its owning stream, unless ownership moved meanwhile."""
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            while True:
                with self.state_lock:
                    progress = self.owned.get(tp)
                    if progress is None or progress.generation < 0:
                        break  # not ours, or being released: drop it
                    stream = self.stream_for(tp, progress.thread_id)
                    generation = progress.generation
                if stream is None:
                    break
                try:
                    stream.queue.put(Queued(record, generation), timeout=0.1)
                    break
                except runtime.Full:
                    if self._stop.is_set():
                        return

    def may_hand_out(self) -> bool:
        """Default profile: not while suspended, and not once the session may have expired unseen (a pause longer
        than two thirds of the session timeout): the lease holds again at the next answer from ZooKeeper, or the
        session is reported lost and the partitions are disowned (:meth:`_disown_now`)."""
        return self.deliverable.is_set() and (self._lease is None or self._lease.holds())

    def await_deliverable(self, timeout: float) -> None:
        """Both waits share the one ``timeout``."""
        deadline = runtime.monotonic() + timeout
        if self.deliverable.wait(timeout) and self._lease is not None:
            self._lease.wait(max(0.0, deadline - runtime.monotonic()))

    # ------------------------------------------------------------------------------ used by the rebalancer
    def next_generation(self) -> int:
        with self.state_lock:
            self._generation += 1
            return self._generation

    def stop_fetching(self, tps: set[TopicPartition] | None = None, commit: bool = True) -> None:
        """Stop delivering ``tps`` (all when None): invalidate buffered records, stop the fetcher for them,
        and commit what was consumed (before ownership is released, as Kafka does)."""
        with self.state_lock:
            targets = set(self.owned) if tps is None else set(tps) & set(self.owned)
            if not targets:
                return
            generation = self.next_generation()
            for tp in targets:
                self.owned[tp].generation = -generation  # queued records of these partitions are now stale
            if tps is None:
                for stream in self.all_streams():
                    stream.clear()
        if self.fetcher is not None:
            with self.state_lock:
                keep = {tp: None for tp in self.owned if tp not in targets}
            self.fetcher.assign(keep)
        if commit and self.config.auto_commit:
            self.commit_offsets(only=targets)

    def drop_ownership(self, tps: set[TopicPartition]) -> None:
        with self.state_lock:
            for tp in tps:
                self.owned.pop(tp, None)

    def start_fetching(self, gained: Mapping[TopicPartition, str], offsets: Mapping[TopicPartition, int]) -> None:
        """Own ``gained`` (tp → thread id) from ``offsets`` and (re)start the fetcher on the whole share.

        A partition without a committed offset starts where ``auto.offset.reset`` puts it; that position is
        resolved now and becomes committable at once (Kafka's fetcher resolves it when it takes the partition
        and the next commit writes it), so the next owner does not resolve ``largest`` again and skip what
        arrived in between."""
        with self.state_lock:
            generation = self.next_generation()
            for tp, tid in gained.items():
                start = offsets.get(tp, -1)
                self.owned[tp] = PartitionProgress(tp, tid, generation, start,
                                                   handed=start if start >= 0 else None,
                                                   processed=start if start >= 0 else None)
            positions = {tp: (None if tp not in gained else p.start) for tp, p in self.owned.items()}
        if self.fetcher is None and self.config.fetch_enabled:
            self._start_fetcher()  # the first broker registered since we started
        if self.fetcher is None:
            return
        resolved = self.fetcher.assign(positions)
        with self.state_lock:
            for tp, position in resolved.items():
                progress = self.owned.get(tp)
                if progress is not None and progress.generation == generation and progress.handed is None:
                    progress.start = progress.handed = progress.processed = position
        if resolved and self.config.auto_commit and self.profile.commit_processed_only:
            self.commit_offsets(only=set(resolved))  # default profile: right away, a crash must not lose it

    def _on_reset(self, tp: TopicPartition, old: int, new: int) -> None:
        """Fetcher thread: the broker said OffsetOutOfRange and ``auto.offset.reset`` moved the position down.

        Kafka (ConsumerFetcherThread.handleOffsetOutOfRange) resets both the fetch and the consume position, so
        the group consumes from the new position and the next commit writes it, lower or not. So do we:
        records queued before the reset are dropped (new generation), and the offset store is told that the
        next, lower commit is a real reset rather than an offset going backwards."""
        with self.state_lock:
            progress = self.owned.get(tp)
            if progress is None or progress.generation < 0:
                return
            progress.generation = self.next_generation()
            progress.handed = progress.processed = new
        log.warning("offset %d of %s-%d is out of range for group %s: reset to %d (auto.offset.reset=%s); "
                    "records between are not consumed", old, tp.topic, tp.partition, self.group, new,
                    self.config.auto_offset_reset)
        self.offsets.reset(tp, new)
        self.trace.emit("offset_reset", topic=tp.topic, partition=tp.partition, from_offset=old, to_offset=new,
                        reset=self.config.auto_offset_reset)

    def reset_after_expiry(self) -> None:
        """Our owner nodes died with the session: stop everything without committing (others may own it)."""
        with self.state_lock:
            tps = set(self.owned)
        self.stop_fetching(tps, commit=False)
        self.drop_ownership(tps)
        with self.state_lock:
            self._lost.clear()

    def forget_after_expiry(self) -> None:
        """Kafka 0.8's ``resetState`` after an expiry: what we owned is forgotten (never committed again, its
        nodes died with the session), but its fetchers run on until the next rebalance stops them
        (:meth:`drop_lost`), as Kafka's ``closeFetchers`` does after the new registration."""
        with self.state_lock:
            self._lost = set(self.owned)

    def drop_lost(self) -> None:
        """Forget partitions owned under an expired session (after their fetchers were stopped): their owner
        nodes died with it, so nothing is deleted or committed for them; the nodes may be someone else's now."""
        with self.state_lock:
            for tp in self._lost:
                self.owned.pop(tp, None)
            self._lost.clear()

    # -------------------------------------------------------------------------------------------- commits
    def commit_offsets(self, only: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Commit consumed offsets to ZooKeeper (only what changed; never backwards; only owned partitions).

        Commits are serialised: the auto-commit thread and a rebalance must not interleave a snapshot taken
        earlier with a write made later."""
        processed_only = self.profile.commit_processed_only
        with self._commit_lock:
            with self.state_lock:
                values = {tp: p.committable(processed_only) for tp, p in self.owned.items()
                          if (only is None or tp in only) and tp not in self._lost}
            if self.profile.commit_processed_only and not self.connected.is_set():
                return {}  # we may not own them any more; the next owner starts from the last commit
            try:
                return self.offsets.commit({tp: v for tp, v in values.items() if v is not None})
            except Exception as e:  # noqa: BLE001 - a failed commit is retried by the next one
                log.warning("offset commit failed: %s", e)
                return {}

    def _auto_commit_loop(self) -> None:
        interval = self.config.auto_commit_interval_ms / 1000.0
        while not self._stop.wait(interval):
            self.commit_offsets()

    # ------------------------------------------------------------------------------------ session events
    def _on_zk_state(self, state: str) -> None:
        """kazoo's connection listener: runs on its event thread, so it only flags."""
        if state == KazooState.SUSPENDED:
            self.connected.clear()
            self.trace.emit("connection_suspended")
        elif state == KazooState.LOST:
            self.connected.clear()
            if self.profile.pause_when_suspended:
                self._disown_now()
            self.trace.emit("session_expired")
            self.rebalancer.trigger(TriggerCause.SESSION_EXPIRED)
        elif state == KazooState.CONNECTED:
            session = self.zk.client_id[0] if self.zk.client_id else None
            if not self.connected.is_set():
                self.trace.emit("reconnected", same_session=session == self._session_id)
            self._session_id = session
            if session is not None:
                self._sessions.add(session)
            self.connected.set()

    def _disown_now(self) -> None:
        """The session is known lost: its owner nodes are gone, others may own the partitions already.

        Default profile: queued records become stale at once, here on kazoo's event thread (no ZooKeeper call),
        and these partitions are never committed again. Otherwise the new session's CONNECTED, which kazoo
        reports right after LOST, would resume the streams on stale records before the rebalancer thread
        resets — a delivery from a partition another consumer owns (found by the fault matrix's zk-cut).
        Kafka 0.8 keeps handing them out until its rebalance clears the queues; the kafka-0.8 profile too."""
        with self.state_lock:
            generation = self.next_generation()
            for progress in self.owned.values():
                progress.generation = -generation
            self._lost = set(self.owned)

    # ------------------------------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        """Stop fetching, commit, release owners, delete the registration, close the session."""
        if self.closed:
            return
        self._stop.set()
        self.rebalancer.stop()
        committed = False
        with contextlib.suppress(Exception):
            if self.fetcher is not None:
                self.fetcher.stop_fetching()
            if self.config.auto_commit:
                self.commit_offsets()
                committed = True
        # Without a confirmed session our requests would queue until a server answers (maybe never): the
        # ephemeral owner and registration nodes die with the session anyway.
        if self.connected.wait(min(5.0, self.config.session_timeout_ms / 1000.0)):
            self.drop_lost()  # owned under an expired session: those nodes are not ours to delete
            with contextlib.suppress(Exception):
                self.rebalancer.release_all()
            with contextlib.suppress(Exception):
                self.registry.deregister_consumer(self.group, self.consumer_id)  # never a twin's node
        self.closed = True
        for stream in self.all_streams():
            stream.close()
        if self.fetcher is not None:
            self.fetcher.close()
        self.trace.emit("shutdown", committed=committed)
        self.trace.close()
        with contextlib.suppress(Exception):
            getattr(self.offsets, "close", lambda: None)()  # the broker-side offset store's client, if any
        with contextlib.suppress(Exception):
            self.zk.stop()
            self.zk.close()
        if self._embedded is not None:
            self._embedded.stop()
