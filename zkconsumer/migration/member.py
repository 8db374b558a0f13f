"""A consumer process that follows the migration plan: ZooKeeper mode, or coordinator mode with a bridge.

The application gives a subscription and a function that consumes one stream; :class:`MigratableConsumer`
runs the streams of whichever connector the plan asks for and, when the plan changes this member's mode,
shuts that connector down (commit, release, deregister) and starts the other one under the same consumer id,
so the group, the trace and the 0.8 tools see one member that changed mode. It acknowledges every mode it
runs in with an ephemeral node ``/consumers/<g>/migration/<consumer id>`` that ``zkconsumer migrate`` awaits; in
coordinator mode the acknowledgement also carries the member's coordinator member id, generation and the partitions
the coordinator assigned it (re-written when they change): a coordinator need not return more than member ids in
DescribeGroups, so that is how the driver ties a coordinator member to a consumer id (migration/verify.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafka.coordinator.assignors.range import RangePartitionAssignor
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import DataWatch

from zkconsumer import runtime
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.consumer.member_io import LIVE, MemberIO
from zkconsumer.consumer.streams import KafkaStream
from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
from zkconsumer.migration.bridge import BridgeAssignor, ZkBridge
from zkconsumer.migration.plan import MigrationPlan, plan_path
from zkconsumer.types import GroupMode
from zkconsumer.zk import layout
from zkconsumer.zk.layout import ConsumerRegistration, TopicFilter
from zkconsumer.zk.registry import Registry, connect

log = logging.getLogger(__name__)

#: how soon a switch's acknowledgement that ZooKeeper could not take is written again
ACK_RETRY_S = 0.2


@dataclass(frozen=True)
class Subscription:
    """What the member consumes: ``topics`` (topic → streams) or ``topic_filter`` with ``streams`` streams."""

    topics: Mapping[str, int] | None = None
    topic_filter: TopicFilter | None = None
    streams: int = 1

    def registration(self) -> ConsumerRegistration:
        if self.topics is not None:
            return ConsumerRegistration.static(self.topics)
        return ConsumerRegistration.wildcard(self.topic_filter, self.streams)

    def streams_of(self) -> Mapping[str, int] | int:
        return dict(self.topics) if self.topics is not None else self.streams

    def create(self, connector) -> list[KafkaStream]:
        if self.topics is not None:
            return [s for ss in connector.create_message_streams(dict(self.topics)).values() for s in ss]
        return connector.create_message_streams_by_filter(self.topic_filter, self.streams)


def ack_path(group: str, consumer_id: str) -> str:
    return f"{plan_path(group)}/{consumer_id}"


class MigratableConsumer:
    """One group member that switches mode when ``/consumers/<g>/migration`` tells it to."""

    def __init__(self, config: ConsumerConfig, subscription: Subscription, io: MemberIO = LIVE) -> None:
        """``io``: where the member's ZooKeeper connections (its own, for the plan and the bridge, and its
        ZooKeeper-mode connector's) and its fetcher's broker client come from: live by default, the simulator's
        network in ``zkconsumer sim --mode migrate`` (consumer/member_io.py)."""
        # One consumer id for both modes: generated once, here, when consumer.id is not set.
        suffix = config.consumer_id or layout.consumer_uuid()
        self.config = config.with_overrides(**{"consumer.id": suffix})
        self.group = self.config.group_id
        self.consumer_id = layout.make_consumer_id(self.group, suffix)
        self.subscription = subscription
        self.io = io
        self.zk = connect(self.config.zookeeper_connect, session_timeout_ms=self.config.session_timeout_ms,
                          connection_timeout_ms=self.config.connection_timeout_ms, handler=io.zk_handler)
        self.registry = Registry(self.zk)
        self._plan = MigrationPlan()
        self._plan_version = -1  # the plan node's data version this member last read
        self._changed = runtime.Event()
        self._lock = runtime.Lock()
        self.connector = None
        self._assignor: BridgeAssignor | None = None  # the coordinator-mode connector's, while there is one
        self.mode: GroupMode | None = None
        self.bridged = False
        self.switches = 0
        #: The coordinator facts (member id, generation, partitions) the acknowledgement last carried.
        self._acked_facts: dict | None = None
        self._session = self.zk.client_id[0] if self.zk.client_id else None
        self.zk.add_listener(self._on_state)
        DataWatch(self.zk, plan_path(self.group), self._on_plan)

    def _on_state(self, state: str) -> None:
        """The acknowledgement is ephemeral: after a session expired it is created again on the new session, or
        ``zkconsumer migrate`` would take a member that is running for one that is gone."""
        if state != KazooState.CONNECTED:
            return
        session = self.zk.client_id[0] if self.zk.client_id else None
        if session != self._session:
            self._session = session
            mode, bridged = self.mode, self.bridged
            if mode is not None:
                self.zk.handler.spawn(self._ack_again, mode, bridged)

    def _on_plan(self, data, stat) -> None:
        path = plan_path(self.group)
        try:
            plan = MigrationPlan() if not data else MigrationPlan.decode(path, data)
        except Exception as e:  # noqa: BLE001 - a broken plan changes nothing; said loudly
            log.error("%s: ignoring the migration plan: %s", self.consumer_id, e)
            return
        with self._lock:
            self._plan = plan
            self._plan_version = stat.version if stat is not None else -1
        self._changed.set()

    @property
    def plan(self) -> MigrationPlan:
        with self._lock:
            return self._plan

    def _wanted(self) -> tuple[GroupMode, bool]:
        plan = self.plan
        mode = plan.mode_of(self.consumer_id)
        return mode, mode is GroupMode.COORDINATOR and plan.bridged

    # ------------------------------------------------------------------------------------------- running
    def run(self, consume: Callable[[KafkaStream], None], stop: runtime.Event,
            on_start: Callable[[object], None] | None = None) -> None:
        """Consume until ``stop`` is set: each stream in its own thread running ``consume(stream)``, which
        returns when the stream ends (its connector shut down)."""
        try:
            while not stop.is_set():
                self._changed.clear()
                mode, bridged = self._wanted()
                connector, bridge = self._start(mode, bridged)
                self.connector, self.mode, self.bridged = connector, mode, bridged
                streams = self.subscription.create(connector)
                self._ack_until_written(mode, bridged, stop)
                if on_start is not None:
                    on_start(connector)
                threads = [runtime.spawn(consume, s, name=f"{self.consumer_id}-stream-{i}")
                           for i, s in enumerate(streams)]
                while not stop.is_set():
                    if self._changed.wait(0.2):
                        self._changed.clear()
                        wanted = self._wanted()
                        if wanted == (GroupMode.COORDINATOR, False) and bridge is not None:
                            # done: drop the bridge and stay in the coordinator group, same member id and partitions
                            # (restarting every member at once would be a stop-the-world rebalance of the group)
                            connector.holds.drop_handover()
                            bridge.stop()
                            bridge, bridged = None, False
                            self.bridged = False
                            log.info("%s: migration done: the ZooKeeper bridge is dropped", self.consumer_id)
                            if self._assignor is not None and self._assignor.orphaned:
                                # this generation gave a share to a registration no member stands for (a member
                                # killed: its ZooKeeper session outlived its last generation); the bridge's ids
                                # watch is gone, so nothing else would ever hand that share out (found by
                                # zkconsumer sim --mode migrate, seed 17: 5 partitions assigned to nobody after done)
                                log.info("%s: the last generation left partitions to a member that is gone: "
                                         "asking for a new one", self.consumer_id)
                                connector.request_rejoin()
                        elif wanted != (mode, bridged):
                            break
                        self._ack(mode, bridged)  # (also for the same mode under a newer plan: it read that plan)
                    elif self._coordinator_facts(connector) != self._acked_facts:
                        self._ack_facts(mode, bridged)  # a new generation or assignment: the driver matches on it
                    if not any(t.is_alive() for t in threads):
                        stop.set()  # every stream ended by itself (consumer timeout, an error)
                log.info("%s: leaving %s mode%s", self.consumer_id, mode, " (stopping)" if stop.is_set() else "")
                connector.shutdown()
                if bridge is not None:
                    bridge.stop()
                for t in threads:
                    t.join(10.0)
                if not stop.is_set():
                    self.switches += 1
        finally:
            self.close()

    def _start(self, mode: GroupMode, bridged: bool):
        if mode is GroupMode.ZOOKEEPER:
            return ZookeeperConsumerConnector(self.config, io=self.io), None
        plan = self.plan
        config = self.config
        if plan.bootstrap and not config.bootstrap_servers:
            config = config.with_overrides(**{"bootstrap.servers": plan.bootstrap})
        assignor = self._assignor = BridgeAssignor(self.registry, self.group, self.consumer_id,
                                                   self.subscription.streams_of(), config.strategy,
                                                   config.exclude_internal_topics)
        # The bridge assignor first (it must be chosen while any member is bridged); Range after it, so members
        # started later in plain coordinator mode can join once the migration is done.
        if not bridged:
            connector = CoordinatorConsumerConnector(config, assignors=[assignor, RangePartitionAssignor()])
            return connector, None
        bridge = ZkBridge(self.registry, self.group, self.consumer_id, self.subscription.registration(),
                          stale_wait_s=config.session_timeout_ms / 1000.0 + 2.0)
        connector = CoordinatorConsumerConnector(config, handover=bridge,
                                                 assignors=[assignor, RangePartitionAssignor()])
        bridge.offsets.trace = connector.trace  # ZooKeeper commits show in this member's trace

        def on_ids(cversion: int) -> None:
            # not once the plan is done: members dropping their bridges delete their registrations, which is no
            # reason for a new generation (the plan's change reaches this session's watches first)
            if cversion > assignor.assigned_cversion and self.plan.bridged:
                connector.request_rejoin()

        bridge.start(on_ids, gate=connector.holds)
        return connector, bridge

    @staticmethod
    def _coordinator_facts(connector) -> dict | None:
        """What a coordinator-mode member adds to its acknowledgement: the member id and generation of its last
        SyncGroup and the partitions the coordinator assigned it then, as it itself knows them (None in ZooKeeper
        mode). DescribeGroups must return member ids; it need not return assignments (issue 38)."""
        if not isinstance(connector, CoordinatorConsumerConnector):
            return None
        partitions: dict[str, list[int]] = {}
        for tp in sorted(connector.owned_partitions()):
            partitions.setdefault(tp.topic, []).append(tp.partition)
        generation = connector.group_generation
        return {"member_id": connector.member_id or None, "generation": generation if generation >= 0 else None,
                "partitions": partitions}

    def _ack(self, mode: GroupMode, bridged: bool) -> None:
        path = ack_path(self.group, self.consumer_id)
        with self._lock:
            version = self._plan_version
        facts = self._coordinator_facts(self.connector) if mode is GroupMode.COORDINATOR else None
        # plan_version: which plan this acknowledgement answers (the driver waits for the version it wrote, so an
        # acknowledgement of an older plan, e.g. by a member still switching the other way, is not taken for it)
        data = json.dumps({"mode": mode, "bridged": bridged, "switches": self.switches,
                           "plan_version": version, **(facts or {})}).encode()
        try:
            self.zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            self.zk.set(path, data)
        self._acked_facts = facts

    def _ack_until_written(self, mode: GroupMode, bridged: bool, stop: runtime.Event) -> None:
        """A switch's acknowledgement, however long ZooKeeper takes to accept it: a session that expires or a
        connection lost under the write (an ``expire`` in the middle of a switch) must not end the member, as it
        did in simulation (the migrate nemesis's seeds 159 and 174: ``SessionExpiredError`` out of ``run``, the
        member gone). kazoo opens a new session by itself, and the write goes again on it."""
        while True:
            try:
                self._ack(mode, bridged)
                return
            except KazooException as e:
                if stop.is_set():
                    return
                log.warning("%s: could not acknowledge %s mode (%r); trying again", self.consumer_id, mode, e)
                stop.wait(ACK_RETRY_S)

    def _ack_facts(self, mode: GroupMode, bridged: bool) -> None:
        """Re-acknowledge for new coordinator facts; a ZooKeeper that cannot be written now (suspended, expiring)
        must not end the member: the facts still differ, so the next loop tries again."""
        try:
            self._ack(mode, bridged)
        except Exception as e:  # noqa: BLE001 - retried on the next loop (0.2 s)
            self._acked_facts = None
            log.debug("%s: could not update the acknowledgement: %r", self.consumer_id, e)

    def _ack_again(self, mode: GroupMode, bridged: bool) -> None:
        try:
            self._ack(mode, bridged)
            log.info("%s: acknowledged %s mode again on the new ZooKeeper session", self.consumer_id, mode)
        except Exception:  # noqa: BLE001 - a spawned greenlet/thread: said loudly instead of lost
            log.error("%s: could not acknowledge %s mode again", self.consumer_id, mode, exc_info=True)

    def close(self) -> None:
        try:
            self.zk.delete(ack_path(self.group, self.consumer_id))
        except NoNodeError:
            pass
        except Exception:  # noqa: BLE001 - ephemeral: it goes with the session
            log.debug("could not delete the ack node", exc_info=True)
        self.zk.stop()
        self.zk.close()
