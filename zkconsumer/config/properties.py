"""The consumer properties zkconsumer knows, by concern, with their types and defaults, and how a value is read.

Three tables: Kafka 0.8.2's own consumer properties (names and defaults as ConsumerConfig.scala has them), the
coordinator mode's (Kafka 0.9+'s names), and zkconsumer's own. :data:`KAFKA_PROPERTIES` is all of them, the one
table the parser (:class:`~zkconsumer.config.consumer.ConsumerConfig`) reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from zkconsumer import broker_version
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk import security as zksecurity

#: Strategies only the coordinator mode offers (kafka-python's assignors); the ZooKeeper connector refuses them.
#: ``cooperative-sticky`` is KIP-429's incremental protocol: a rebalance revokes only the partitions that move.
COORDINATOR_ONLY_STRATEGIES = ("sticky", "cooperative-sticky")


class ConfigError(ZkConsumerError, ValueError):
    """An invalid or missing consumer property (Kafka's ``InvalidConfigException``), with the property name."""


class UnknownProperty(ZkConsumerError, KeyError):
    """:meth:`ConsumerConfig.get` of a name no property has: a ``KeyError`` still, as a mapping's lookup."""


_LEGAL_CHARS = re.compile(r"[a-zA-Z0-9._\-]*")


def _validate_chars(prop: str, value: str) -> None:
    """Kafka's ``ConsumerConfig.validateChars``: ASCII alphanumerics, '.', '_' and '-'."""
    if not _LEGAL_CHARS.fullmatch(value):
        raise ConfigError(f"{prop} {value} is illegal, contains a character other than ASCII alphanumerics, "
                          "'.', '_' and '-'")


@dataclass(frozen=True)
class Prop:
    name: str
    kind: type
    default: Any
    doc: str


#: Kafka 0.8.2's consumer properties we honour (name, type, default). ``None`` default = unset.
KAFKA_08_PROPERTIES: tuple[Prop, ...] = (
    Prop("group.id", str, None, "the consumer group (required)"),
    Prop("zookeeper.connect", str, None, "host:port[,host:port][/chroot]; none starts an embedded ZooKeeper"),
    Prop("consumer.id", str, None, "fixed consumer id suffix; default host-millis-uuid8"),
    Prop("partition.assignment.strategy", str, "range", "range | roundrobin | roundrobin-relaxed"),
    Prop("rebalance.max.retries", int, 4, "attempts per rebalance; 0 makes none, so every rebalance fails"),
    Prop("rebalance.backoff.ms", int, None, "sleep between attempts; defaults to zookeeper.sync.time.ms"),
    Prop("zookeeper.sync.time.ms", int, 2000, "how far a ZK follower may lag the leader"),
    Prop("zookeeper.session.timeout.ms", int, 6000, "ZooKeeper session timeout"),
    Prop("zookeeper.connection.timeout.ms", int, None, "wait for the first connection; defaults to the session "
                                                       "timeout"),
    Prop("auto.commit.enable", bool, True, "commit offsets periodically"),
    Prop("auto.commit.interval.ms", int, 60000, "auto-commit period"),
    Prop("auto.offset.reset", str, "largest", "smallest | largest: where to start without a committed offset"),
    Prop("exclude.internal.topics", bool, True, "wildcards never match __consumer_offsets"),
    Prop("offsets.storage", str, "zookeeper", "zookeeper | kafka"),
    Prop("dual.commit.enabled", bool, None, "with offsets.storage=kafka, also commit to ZooKeeper and read the "
                                            "larger of both; defaults to offsets.storage == kafka"),
    Prop("offsets.channel.backoff.ms", int, 1000, "wait before retrying an offset request to the coordinator"),
    Prop("offsets.commit.max.retries", int, 5, "retries of a failed offset commit to the coordinator"),
    Prop("consumer.timeout.ms", int, -1, "a stream raises ConsumerTimeout after this long without a record; "
                                         "-1 waits forever"),
    Prop("client.id", str, None, "defaults to group.id"),
    Prop("fetch.message.max.bytes", int, 1024 * 1024, "max bytes per partition per fetch"),
    Prop("fetch.min.bytes", int, 1, "broker waits for this many bytes"),
    Prop("fetch.wait.max.ms", int, 100, "or this long"),
    Prop("queued.max.message.chunks", int, 2, "chunks buffered per stream"),
    Prop("socket.timeout.ms", int, 30000, "network request timeout; at least fetch.wait.max.ms"),
    # Kafka 0.8.2's, accepted and type-checked but without effect: kafka-python runs the fetches and talks to the
    # offsets coordinator (offsets.storage=kafka), so there is no fetcher pool or offsets channel of our own.
    Prop("socket.receive.buffer.bytes", int, 64 * 1024, "no effect here"),
    Prop("num.consumer.fetchers", int, 1, "no effect here (one fetcher thread per consumer)"),
    Prop("refresh.leader.backoff.ms", int, 200, "no effect here (kafka-python refreshes leaders)"),
    Prop("offsets.channel.socket.timeout.ms", int, 10000, "no effect here"),
)
#: The coordinator mode's (Kafka 0.9+'s consumer, zkconsumer.consumer.coordinated), and the librdkafka member's.
COORDINATOR_PROPERTIES: tuple[Prop, ...] = (
    # Kafka 0.9/0.10.1's defaults.
    Prop("session.timeout.ms", int, 30000, "coordinator mode: the group coordinator's session timeout"),
    Prop("heartbeat.interval.ms", int, 3000, "coordinator mode: heartbeat period"),
    # The rebalance timeout kafka-python sends in JoinGroup, and the longest gap between polls. Kafka's 300000 (0.10.1)
    # leaves room for processing between polls; the poller never processes (records go through the streams' queues)
    # and polls every 100 ms, so 5 minutes only lets one member that stops polling, or a member a coordinator keeps
    # waiting for, hold every rebalance of the group that long, silently. 30000: Kafka 0.9's bound (its session
    # timeout); a join that takes longer is reported (coordinated.JoinWatch).
    Prop("max.poll.interval.ms", int, 30000, "coordinator mode: rebalance timeout, longest gap between polls"),
    Prop("group.instance.id", str, None, "coordinator mode: static membership (KIP-345): a member restarted "
                                         "within session.timeout.ms gets its partitions back without a rebalance"),
    # The librdkafka member only (zkconsumer consume --client librdkafka; kafka-python has neither).
    Prop("group.protocol", str, "classic", "librdkafka member: classic | consumer (KIP-848, Kafka 4.0+)"),
    Prop("group.remote.assignor", str, None, "librdkafka member, group.protocol=consumer: the broker's assignor "
                                             "(uniform | range)"),
    Prop("metadata.max.age.ms", int, 300000, "coordinator mode: metadata refresh period (new partitions, topics "
                                             "matching a wildcard, a topic unknown at the first join)"),
)
#: zkconsumer's own: how it finds brokers outside ZooKeeper, its profile, traces, and ZooKeeper security.
ZKCONSUMER_PROPERTIES: tuple[Prop, ...] = (
    # Not Kafka 0.8's: how zkconsumer finds brokers when they are not registered in ZooKeeper.
    Prop("bootstrap.servers", str, None, "host:port list of a Kafka cluster; default: brokers from ZooKeeper"),
    Prop(broker_version.PROPERTY, str, broker_version.AUTO,
         "auto | a broker version (0.8.2, 0.9, 0.10.2 ...): the protocol kafka-python speaks to the brokers; auto "
         "probes them (a broker older than 0.10 gets no ApiVersions request; docs/broker.md)"),
    Prop("zkconsumer.profile", str, "default", "default | kafka-0.8 (see docs/profiles.md)"),
    Prop("zkconsumer.profile.disable", str, None, "comma-separated switches of the profile turned off, e.g. "
         "fence_on_session_lease: an ablation, to see what one fix cures (docs/profiles.md)"),
    Prop("zkconsumer.trace.dir", str, None, "directory for JSON-lines traces (docs/trace.md)"),
    Prop("zkconsumer.fetch.enable", bool, True, "false: take part in rebalances and own partitions without "
                                               "fetching records (ownership studies, benchmarks)"),
    # ZooKeeper security (docs/security.md): Kafka 0.9+'s switch; credentials under our own names (Kafka: JAAS).
    Prop(zksecurity.SET_ACL, bool, False, "create the group's nodes writable by the authenticated principal only "
                                          "(world-readable); needs one of the credentials below"),
    Prop(zksecurity.DIGEST, str, None, "user:password for ZooKeeper digest authentication"),
    Prop(zksecurity.SASL, str, None, "user:password for ZooKeeper SASL DIGEST-MD5 authentication"),
)
#: Every property, the parser's one table.
KAFKA_PROPERTIES: tuple[Prop, ...] = KAFKA_08_PROPERTIES + COORDINATOR_PROPERTIES + ZKCONSUMER_PROPERTIES
#: Properties whose value is a secret: shown masked.
SECRET_PROPERTIES = (zksecurity.DIGEST, zksecurity.SASL)
_BY_NAME = {p.name: p for p in KAFKA_PROPERTIES}
_JAVA_INT = range(-(2**31), 2**31)
#: Characters ZooKeeper's PathUtils.validatePath refuses in a node name (beyond U+FFFF: Java's surrogates).
_ZK_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")


def _coerce(prop: Prop, value: Any) -> Any:
    if value is None or (isinstance(value, str) and value.strip() == "" and prop.kind is not str):
        return None
    if prop.kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "false"):
            return text == "true"
        raise ConfigError(f"{prop.name} must be true or false, got {value!r}")
    if prop.kind is int:
        if isinstance(value, bool):
            raise ConfigError(f"{prop.name} must be an integer, got {value!r}")
        try:
            number = int(str(value).strip())
        except ValueError:
            number = None
        if number is None or number not in _JAVA_INT:  # Kafka reads ints with Java's String.toInt
            raise ConfigError(f"{prop.name} must be an integer (32-bit, as Kafka reads it), got {value!r}")
        return number
    text = str(value).strip()
    return text.lower() if prop.name == "offsets.storage" else text  # Kafka lower-cases this one alone


def property_names() -> list[str]:
    return [p.name for p in KAFKA_PROPERTIES]


def property_kind(name: str) -> type | None:
    """The type of a known property's value (``int``, ``bool`` or ``str``); None for a name this consumer does not
    know (a scenario's ``[properties]`` refuses those, where a properties file keeps and ignores them)."""
    prop = _BY_NAME.get(name)
    return prop.kind if prop is not None else None


