"""The broker's view of the cluster, kept in step with ZooKeeper as a Kafka 0.8+ broker keeps it.

* ``/brokers/ids/<id>``: our registration (ephemeral, version-4 JSON); redone when a lost session comes back.
  After a crash the previous session's node lingers until ZooKeeper expires it, so registration waits for it
  (bounded) instead of failing the way Kafka does when restarted "faster than the zookeeper timeout".
* ``/brokers/ids`` and ``/brokers/topics/<t>`` are watched: live brokers, and every topic's replica
  assignment (partition growth arrives as a data change of the topic node).
* ``/controller``: Kafka 0.8's election by ephemeral node; Metadata reports its owner as controller. The
  winner bumps ``/controller_epoch`` and, while it is controller, keeps every partition's state node
  (``/brokers/topics/<t>/partitions/<p>/state``, partition_state.py) in step with topics and live brokers,
  as Kafka's controller does: 0.8-era clients (pykafka) and tools read leaders from there.
* ``/cluster/id`` (Kafka 0.10.1+) gives Metadata its cluster id; created when missing.
* ``/latest_producer_id_block`` (Kafka 1.0+): blocks of producer ids for InitProducerId, claimed with a
  versioned write so several brokers never hand out the same id.

Leadership without a controller doing elections: a partition's leader is the first live replica of its
assignment; when this broker is the only live broker it leads every partition, whatever the assignment says,
so topics created before it registered (replicas ``[0]`` by default) are served by a broker of any id.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from dataclasses import dataclass, field

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from zkconsumer import runtime
from zkconsumer.zk import layout
from zkconsumer.zk import partition_state as PS
from zkconsumer.zk.layout import BrokerInfo, LayoutError, TopicAssignment
from zkconsumer.zk.registry import BrokerAlreadyRegistered, Registry

log = logging.getLogger(__name__)

CONTROLLER_PATH = "/controller"
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdManager.PidBlockSize


@dataclass(frozen=True)
class ClusterSnapshot:
    """An immutable picture for one request: answers stay consistent while watches update the live view."""

    broker_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicAssignment]
    controller_id: int
    cluster_id: str | None
    self_info: BrokerInfo

    def leader(self, topic: str, partition: int) -> int:
        """The first live replica; this broker when it is the only live one; -1 when none is live."""
        ta = self.topics.get(topic)
        if ta is None or partition not in ta.partitions:
            return -1
        live = self.live_ids
        if live <= {self.broker_id}:
            return self.broker_id
        for replica in ta.partitions[partition]:
            if replica in live:
                return replica
        return -1

    @property
    def live_ids(self) -> set[int]:
        return set(self.brokers) | {self.broker_id}

    def serves(self, topic: str, partition: int) -> bool:
        return self.leader(topic, partition) == self.broker_id

    def broker_list(self) -> list[BrokerInfo]:
        brokers = dict(self.brokers)
        brokers.setdefault(self.broker_id, self.self_info)
        return [brokers[b] for b in sorted(brokers)]


@dataclass
class _State:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicAssignment] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None


class ClusterView:
    def __init__(self, client: KazooClient, info: BrokerInfo, registration_timeout_s: float = 30.0) -> None:
        self.zk = client
        self.registry = Registry(client)
        self.info = info
        self.broker_id = info.broker_id
        self.registration_timeout_s = registration_timeout_s
        self._state = _State()
        self._lock = runtime.Lock()
        self._watched_topics: set[str] = set()
        self._session_lost = False
        self._stopped = runtime.Event()
        self._changed = runtime.Condition()
        self._pid_lock = runtime.Lock()
        self._pid_next = 0
        self._pid_end = -1
        self._controller_epoch = 0  # > 0 while this broker is the controller
        self._states_dirty = runtime.Event()

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Register, then install the watches; returns once the first topic and broker lists are read."""
        self.registry.setup_common_paths()
        self._state.cluster_id = self._ensure_cluster_id()
        self.register()
        self.zk.add_listener(self._on_state)
        ChildrenWatch(self.zk, layout.BROKER_IDS_PATH, self._on_brokers)
        ChildrenWatch(self.zk, layout.BROKER_TOPICS_PATH, self._on_topics)
        DataWatch(self.zk, CONTROLLER_PATH, self._on_controller)
        runtime.spawn(self._state_writer, name="partition-states")

    def stop(self) -> None:
        """Stop reacting to ZooKeeper; closing the client (the caller's job) removes the ephemeral nodes."""
        self._stopped.set()
        self._states_dirty.set()
        with contextlib.suppress(Exception):
            self.zk.remove_listener(self._on_state)

    # --------------------------------------------------------------------------------------- registration
    def register(self) -> None:
        path = layout.broker_path(self.broker_id)
        deadline = runtime.monotonic() + self.registration_timeout_s
        warned = False
        while True:
            try:
                self.registry.register_broker(self.info)
                log.info("registered broker %d at %s as %s", self.broker_id, path, self.info.encode().decode())
                return
            except BrokerAlreadyRegistered:
                gone = runtime.Event()
                stat = self.zk.exists(path, watch=lambda _event, gone=gone: gone.set())
                if stat is None:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    return  # ours already: an earlier attempt succeeded before a connection loss
                remaining = deadline - runtime.monotonic()
                if remaining <= 0 or self._stopped.is_set():
                    raise
                if not warned:
                    log.warning("%s is held by another session (a previous run of this broker?); waiting up to "
                                "%.0fs for ZooKeeper to expire it", path, remaining)
                    warned = True
                gone.wait(min(remaining, 1.0))

    def _on_state(self, state: str) -> None:
        # Runs in kazoo's connection thread: never block here, hand the work to a thread.
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost; broker %d will re-register when a new session starts",
                        self.broker_id)
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            runtime.spawn(self._reregister, name="zk-reregister")

    def _reregister(self) -> None:
        try:
            self.register()
            self._elect_controller()
        except Exception:
            if not self._stopped.is_set():
                log.exception("re-registering broker %d after a session loss failed", self.broker_id)

    # -------------------------------------------------------------------------------------------- watches
    def _on_brokers(self, children: list[str]) -> bool:
        if self._stopped.is_set():
            return False
        brokers = {}
        for child in children:
            try:
                info = self.registry.broker(int(child))
            except (ValueError, LayoutError) as e:
                log.warning("ignoring broker registration %s: %s", child, e)
                continue
            if info is not None:
                brokers[info.broker_id] = info
        with self._lock:
            self._state.brokers = brokers
        self._notify()
        return True

    def _on_topics(self, children: list[str]) -> bool:
        if self._stopped.is_set():
            return False
        for topic in children:
            with self._lock:
                if topic in self._watched_topics:
                    continue
                self._watched_topics.add(topic)
            DataWatch(self.zk, layout.topic_path(topic), self._topic_watcher(topic))
        return True

    def _topic_watcher(self, topic: str):
        def on_change(data: bytes | None, _stat, _event=None) -> bool:
            if self._stopped.is_set():
                return False
            assignment = None
            if data is not None:
                try:
                    assignment = self.registry.topic(topic)
                except LayoutError as e:
                    log.warning("ignoring topic %s: %s", topic, e)
            with self._lock:
                if assignment is not None:
                    self._state.topics[topic] = assignment
                else:
                    self._state.topics.pop(topic, None)
                if data is None:
                    self._watched_topics.discard(topic)
            self._notify()
            return data is not None  # a deleted topic's watch ends; re-creation starts a new one
        return on_change

    def _on_controller(self, data: bytes | None, _stat, _event=None) -> bool:
        if self._stopped.is_set():
            return False
        if data is None:
            runtime.spawn(self._elect_controller, name="controller-election")
            return True
        controller = decode_controller(data)
        with self._lock:
            self._state.controller_id = controller
            if controller != self.broker_id:
                self._controller_epoch = 0
        self._notify()
        return True

    def _elect_controller(self) -> None:
        with contextlib.suppress(NodeExistsError, KazooException):
            self.zk.create(CONTROLLER_PATH, encode_controller(self.broker_id), ephemeral=True)
            epoch = self._bump_controller_epoch()
            with self._lock:
                self._controller_epoch = epoch
            log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
            self._states_dirty.set()

    def _bump_controller_epoch(self) -> int:
        """Kafka's ``incrementControllerEpoch``: a conditional write of epoch + 1, or "1" when there is none."""
        while True:
            try:
                data, stat = self.zk.get(PS.CONTROLLER_EPOCH_PATH)
            except NoNodeError:
                try:
                    self.zk.create(PS.CONTROLLER_EPOCH_PATH, b"1")
                    return 1
                except NodeExistsError:
                    continue
            epoch = PS.decode_controller_epoch(data) + 1
            try:
                self.zk.set(PS.CONTROLLER_EPOCH_PATH, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:
                continue

    # ----------------------------------------------------------------------------------- partition states
    def _state_writer(self) -> None:
        """One thread writes state nodes whenever the controller's view changed (never in a watch callback)."""
        while not self._stopped.is_set():
            self._states_dirty.wait()
            self._states_dirty.clear()
            if self._stopped.is_set():
                return
            try:
                self._write_partition_states()
            except Exception:  # ZooKeeper trouble: the next change, or a session's return, writes again
                if not self._stopped.is_set():
                    log.warning("writing partition state nodes failed", exc_info=True)

    def _write_partition_states(self) -> None:
        snap = self.snapshot()
        with self._lock:
            epoch = self._controller_epoch
        if snap.controller_id != self.broker_id or epoch <= 0:
            return
        for topic, assignment in snap.topics.items():
            if self.zk.exists(layout.topic_path(topic)) is None:
                continue  # deleted meanwhile: makepath must not bring the topic node back
            for partition in assignment.partition_ids:
                path = PS.state_path(topic, partition)
                try:
                    data, stat = self.zk.get(path)
                except NoNodeError:
                    data, stat = None, None
                new = PS.next_state(PS.PartitionState.decode(data), snap.leader(topic, partition), epoch)
                if new is None:
                    continue
                try:
                    if stat is None:
                        self.zk.create(path, new.encode(), makepath=True)
                    else:
                        self.zk.set(path, new.encode(), version=stat.version)
                except (NodeExistsError, BadVersionError):
                    self._states_dirty.set()  # written by someone else meanwhile: read it again

    def _ensure_cluster_id(self) -> str | None:
        with contextlib.suppress(NodeExistsError):
            self.zk.create(CLUSTER_ID_PATH, json.dumps({"version": "1", "id": new_cluster_id()},
                                                       separators=(",", ":")).encode(), makepath=True)
        try:
            data, _ = self.zk.get(CLUSTER_ID_PATH)
            return json.loads(data.decode())["id"]
        except (NoNodeError, ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None

    def _notify(self) -> None:
        if self._controller_epoch > 0:
            self._states_dirty.set()
        with self._changed:

            self._changed.notify_all()

    # ------------------------------------------------------------------------------------------- queries
    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            s = self._state
            return ClusterSnapshot(self.broker_id, dict(s.brokers), dict(s.topics), s.controller_id,
                                   s.cluster_id, self.info)

    def wait_for(self, predicate, timeout: float) -> bool:
        """Wait until ``predicate(snapshot)`` holds (for tests and tools that must not race the watches)."""
        deadline = runtime.monotonic() + timeout
        with self._changed:
            while not predicate(self.snapshot()):
                remaining = deadline - runtime.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.5))
        return True

    # ------------------------------------------------------------------------------------- producer ids
    def next_producer_id(self) -> int:
        with self._pid_lock:
            if self._pid_next > self._pid_end:
                self._pid_next, self._pid_end = self._claim_producer_id_block()
            pid = self._pid_next
            self._pid_next += 1
            return pid

    def _claim_producer_id_block(self) -> tuple[int, int]:
        """Kafka's ``ProducerIdManager.getNewProducerIdBlock``: read, extend, conditional write, retry."""
        while True:
            try:
                data, stat = self.zk.get(PRODUCER_ID_BLOCK_PATH)
            except NoNodeError:
                start = 0
                version = None
            else:
                obj = json.loads(data.decode()) if data else {}
                start = int(obj.get("block_end", -1)) + 1
                version = stat.version
            end = start + PRODUCER_ID_BLOCK_SIZE - 1
            body = json.dumps({"version": 1, "broker": self.broker_id, "block_start": str(start),
                               "block_end": str(end)}, separators=(",", ":")).encode()
            try:
                if version is None:
                    self.zk.create(PRODUCER_ID_BLOCK_PATH, body)
                else:
                    self.zk.set(PRODUCER_ID_BLOCK_PATH, body, version=version)
                return start, end
            except (NodeExistsError, BadVersionError):
                continue  # another broker claimed a block meanwhile: read again


def encode_controller(broker_id: int) -> bytes:
    return layout.kafka_json({"version": 1, "brokerid": broker_id,
                              "timestamp": str(int(runtime.time() * 1000))}).encode()


def decode_controller(data: bytes) -> int:
    """Kafka 0.8 wrote the JSON above; some versions wrote the bare id."""
    try:
        obj = json.loads(data.decode())
    except (UnicodeDecodeError, ValueError):
        return -1
    if isinstance(obj, int):
        return obj
    if isinstance(obj, dict) and isinstance(obj.get("brokerid"), int):
        return obj["brokerid"]
    return -1


def new_cluster_id() -> str:
    """Kafka's cluster id: a random UUID, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(runtime.uuid4().bytes).decode().rstrip("=")
