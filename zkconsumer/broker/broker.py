"""The broker: storage, the socket server and the ZooKeeper view, started and stopped in Kafka's order.

Start: recover the logs (a broker must not serve before its data is consistent), bind the socket, register
in ZooKeeper (clients learn about the broker from there), then watch topics. Stop: leave ZooKeeper first so
clients stop choosing this broker, then close connections, then flush and checkpoint the logs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from zkconsumer.broker.handlers import BrokerOptions, CoreApis
from zkconsumer.broker.server import Server
from zkconsumer.coordinator.apis import DESCRIBE_REQUIRED_ONLY_ENV, GroupApis
from zkconsumer.coordinator.manager import CoordinatorConfig, GroupCoordinator
from zkconsumer.coordinator.offsets_log import OffsetsLog
from zkconsumer.errors import ZkConsumerError
from zkconsumer.log.storage import LogConfig, LogManager
from zkconsumer.wire.protocol import MAX_FRAME_BYTES, ApiTable, Dispatcher
from zkconsumer.zk.cluster import ClusterView
from zkconsumer.zk.layout import OFFSETS_TOPIC, BrokerInfo
from zkconsumer.zk.registry import connect

log = logging.getLogger(__name__)


class BrokerNotStarted(ZkConsumerError, RuntimeError):
    """Asked for what only a started broker has (its port)."""


class BrokerConfigError(ZkConsumerError, ValueError):
    """A broker setting that cannot be served (an advertised address that is not host:port)."""


class Broker:
    """A single-node Kafka broker registered in ZooKeeper; see ``docs/broker.md``.

    ``flush_interval_ms``: None leaves flushing to the OS, 0 fsyncs every append before acknowledging it,
    N > 0 fsyncs every N ms. ``data_dir=None`` uses a temporary directory removed by :meth:`stop`.
    ``socket_request_max_bytes`` and ``connections_max_idle_ms`` are Kafka's settings of the same names: a
    request claiming a larger size, or a connection silent for longer, is closed (and logged with its peer).
    """

    def __init__(self, zk_connect: str, broker_id: int = 0, port: int = 0, data_dir: str | os.PathLike | None = None,
                 host: str = "127.0.0.1", flush_interval_ms: int | None = None, *,
                 log_config: LogConfig | None = None, auto_create_topics: bool = False, num_partitions: int = 1,
                 session_timeout_ms: int = 6000, registration_timeout_s: float = 30.0,
                 group_initial_rebalance_delay_ms: int = 3000, group_min_session_timeout_ms: int = 6000,
                 group_max_session_timeout_ms: int = 1800000, offsets_topic_num_partitions: int = 50,
                 offsets_retention_minutes: int = 10080, offset_store=None,
                 offsets_topic_segment_bytes: int = 104857600, log_cleaner_backoff_ms: int = 15_000,
                 offsets_delete_retention_ms: int = 86_400_000,
                 socket_request_max_bytes: int = MAX_FRAME_BYTES, connections_max_idle_ms: int = 600_000,
                 listeners: Mapping[str, tuple[int, str]] | None = None,
                 test_describe_groups_required_only: bool | None = None,
                 zk_handler: Callable[[], Any] | None = None) -> None:
        """``test_describe_groups_required_only`` (TEST-ONLY; None: the environment variable
        :data:`~zkconsumer.coordinator.apis.DESCRIBE_REQUIRED_ONLY_ENV`): DescribeGroups answers carry only the fields
        Kafka's protocol requires a coordinator to fill, as an independent Kafka-compatible coordinator's did (issue
        38); ``self.group_apis.describe_required_only`` switches it on a running broker.

        ``zk_handler`` makes the broker's kazoo handler (None: kazoo's threads): the simulator's, so that the
        broker's own code serves a simulated world (sim/kafka_io.py routes its server's sockets)."""
        if socket_request_max_bytes < 1 or connections_max_idle_ms < 1:
            raise BrokerConfigError("socket.request.max.bytes and connections.max.idle.ms must be >= 1")

        self.zk_connect = zk_connect
        self._zk_handler = zk_handler
        #: further listeners, by name: (port to bind, "host:port" advertised to the clients that come through it),
        #: Kafka's ``listeners`` / ``advertised.listeners`` for one more name. The lab puts a proxy at the
        #: advertised address, so that one member's every connection to this broker passes through it.
        self.listeners = {name: (int(port), _host_port(advertised)) for name, (port, advertised) in
                          (listeners or {}).items()}
        self._extra: dict[str, Server] = {}
        self.broker_id = int(broker_id)
        self.host = host
        self._requested_port = int(port)
        self._own_data_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        config = log_config or LogConfig()
        if log_config is None or flush_interval_ms is not None:
            config = dataclasses.replace(config, flush_interval_ms=flush_interval_ms)
        # __consumer_offsets is compacted (Kafka's offsetsTopicConfigs), in its own segment size
        config = dataclasses.replace(
            config, compacted_topics=config.compacted_topics | {OFFSETS_TOPIC},
            topic_segment_bytes=(*config.topic_segment_bytes, (OFFSETS_TOPIC, offsets_topic_segment_bytes)),
            cleaner=dataclasses.replace(config.cleaner, backoff_ms=log_cleaner_backoff_ms,
                                        delete_retention_ms=offsets_delete_retention_ms))
        self.log_config = config
        self.options = BrokerOptions(auto_create_topics, num_partitions)
        self.session_timeout_ms = session_timeout_ms
        self.registration_timeout_s = registration_timeout_s
        self.socket_request_max_bytes = socket_request_max_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.apis = ApiTable()
        CoreApis(self).install(self.apis)
        # The group coordinator (zkconsumer/coordinator/): its own package; the broker only routes to it.
        self.coordinator = GroupCoordinator(CoordinatorConfig(
            offsets_topic_num_partitions, group_initial_rebalance_delay_ms, group_min_session_timeout_ms,
            group_max_session_timeout_ms, offsets_retention_minutes), offset_store)
        self._offset_store = offset_store
        if test_describe_groups_required_only is None:
            test_describe_groups_required_only = os.environ.get(DESCRIBE_REQUIRED_ONLY_ENV, "") not in ("", "0")
        self.group_apis = GroupApis(self, self.coordinator, test_describe_groups_required_only)
        self.group_apis.install(self.apis)
        self.logs: LogManager | None = None
        self.cluster: ClusterView | None = None
        self.zk: KazooClient | None = None
        self._server: Server | None = None
        self.dispatcher: Dispatcher | None = None
        self._started = False

    # ------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> Broker:
        if self._started:
            return self
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix=f"zkconsumer-broker-{self.broker_id}-"))
        try:
            self.logs = LogManager(self.data_dir, self.log_config).open()
            self.dispatcher = Dispatcher(self.apis)
            self._server = Server(self.handle_frame, self.host, self._requested_port,
                                  max_frame_bytes=self.socket_request_max_bytes,
                                  idle_timeout_s=self.connections_max_idle_ms / 1000.0)
            for name, (port, _) in self.listeners.items():
                self._extra[name] = Server(functools.partial(self.handle_frame, listener=name), self.host, port,
                                           max_frame_bytes=self.socket_request_max_bytes,
                                           idle_timeout_s=self.connections_max_idle_ms / 1000.0)
            self.zk = connect(self.zk_connect, session_timeout_ms=self.session_timeout_ms, handler=self._zk_handler)
            info = BrokerInfo.plaintext(self.broker_id, self.host, self._server.port)
            self.cluster = ClusterView(self.zk, info, self.registration_timeout_s)
            self.cluster.start()
            if self._offset_store is None:  # committed offsets in __consumer_offsets, in this broker's log
                self.coordinator.store = OffsetsLog(self.logs, self.coordinator.config.offsets_topic_num_partitions,
                                                    self.coordinator.config.offsets_retention_minutes * 60_000)
            self.coordinator.start()
            # Bound above (the registration names its port), accepting only now: a client that connects as soon as
            # the registration appears waits in the listen backlog instead of reaching a broker without its
            # cluster view (a Metadata request there failed on it, and the connection was closed).
            self._server.start()
            for server in self._extra.values():
                server.start()
        except BaseException:
            self._teardown()
            raise
        self._started = True
        log.info("broker %d serving %s from %s", self.broker_id, self.bootstrap, self.data_dir)
        return self

    def handle_frame(self, frame: bytes, peer: str, listener: str | None = None) -> bytes | None:
        """One request frame in, its answer out: what every connection's thread calls. A subclass may wrap it: the
        simulator's herd charges the broker's CPU per request around it (sim/coordinator_herd.py)."""
        assert self.dispatcher is not None
        return self.dispatcher.dispatch(frame, peer, listener=listener)

    def request_counts(self) -> dict[str, int]:
        """Requests served since start, by API name (ApiVersions, Fetch, JoinGroup, ...)."""
        if self.dispatcher is None:
            return {}
        with self.dispatcher._count_lock:
            return dict(self.dispatcher.requests)

    def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        self._teardown()
        log.info("broker %d stopped", self.broker_id)

    def _teardown(self) -> None:
        self.coordinator.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
        if self.logs is not None:
            self.logs.wake_waiters()  # long-polling fetches return now instead of at their max_wait
        if self._server is not None:
            self._server.stop()
        for server in self._extra.values():
            server.stop()
        self._extra.clear()
        if self.logs is not None:
            self.logs.close()
        if self._own_data_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------- address
    @property
    def port(self) -> int:
        if self._server is None:
            raise BrokerNotStarted("the broker is not started")
        return self._server.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def advertised(self, listener: str | None) -> tuple[str, int] | None:
        """The (host, port) this broker is to the clients of a further listener (None: its registration's)."""
        return self.listeners[listener][1] if listener in self.listeners else None

    def listener_port(self, name: str) -> int:
        """The port a further listener is bound to."""
        return self._extra[name].port

    def __repr__(self) -> str:
        where = self.bootstrap if self._server is not None else "stopped"
        return f"Broker(id={self.broker_id}, {where}, data_dir={self.data_dir})"


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BrokerConfigError(f"an advertised listener address is host:port, not {address!r}")
    return host, int(port)
