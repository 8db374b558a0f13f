"""Consumer configuration with Kafka 0.8's property names, defaults and validation, plus two profiles.

``kafka-0.8`` reproduces the original connector's behaviour and timing exactly, weaknesses included, so the
lab can show them. ``default`` (zkconsumer's own) keeps the same ZooKeeper layout, ids and assignments but
avoids needless waiting and failed claims; every difference is a named switch below and in docs/profiles.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer import broker_version
from zkconsumer.assignment.assignors import STRATEGIES
from zkconsumer.errors import IllegalArgument, ZkConsumerError
from zkconsumer.types import GroupMode
from zkconsumer.zk import security as zksecurity
from zkconsumer.zk.security import Credentials, ZkSecurity
from zkconsumer.zk.timing import ClientTiming

PROFILES = ("default", "kafka-0.8")
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


#: Kafka 0.8.2 consumer properties we honour (name, type, default). ``None`` default = unset.
KAFKA_PROPERTIES: tuple[Prop, ...] = (
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
    # Coordinator mode (Kafka 0.9+'s consumer, zkconsumer.consumer.coordinated): its own names and 0.9/0.10.1
    # defaults.
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
    # Not Kafka 0.8's: how zkconsumer finds brokers when they are not registered in ZooKeeper.
    Prop("bootstrap.servers", str, None, "host:port list of a Kafka cluster; default: brokers from ZooKeeper"),
    Prop(broker_version.PROPERTY, str, broker_version.AUTO,
         "auto | a broker version (0.8.2, 0.9, 0.10.2 ...): the protocol kafka-python speaks to the brokers; auto "
         "probes them (a broker older than 0.10 gets no ApiVersions request; docs/broker.md)"),
    Prop("zkconsumer.profile", str, "default", "default | kafka-0.8 (see docs/profiles.md)"),
    Prop("zkconsumer.trace.dir", str, None, "directory for JSON-lines traces (docs/trace.md)"),
    Prop("zkconsumer.fetch.enable", bool, True, "false: take part in rebalances and own partitions without "
                                               "fetching records (ownership studies, benchmarks)"),
    # ZooKeeper security (README, "Security"): Kafka 0.9+'s switch; credentials under our own names (Kafka: JAAS).
    Prop(zksecurity.SET_ACL, bool, False, "create the group's nodes writable by the authenticated principal only "
                                          "(world-readable); needs one of the credentials below"),
    Prop(zksecurity.DIGEST, str, None, "user:password for ZooKeeper digest authentication"),
    Prop(zksecurity.SASL, str, None, "user:password for ZooKeeper SASL DIGEST-MD5 authentication"),
)
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


@dataclass(frozen=True)
class Profile:
    """Behaviour switches that differ between Kafka 0.8 and zkconsumer's default (docs/profiles.md)."""

    name: str
    #: read the group pipelined and only what changed (registrations by the ids child version, partitions from the
    #: topics' data watches), each read setting the one-shot ids watch again, instead of one synchronous round
    #: trip per node after ZkClient's re-read
    pipelined_reads: bool
    #: claim every owner node of an attempt at once (multi-ops, free partitions first, nothing left behind when
    #: the attempt gives up), the release of what moves sent with the claim's first requests, instead of one
    #: synchronous create per node
    pipelined_claims: bool
    #: a claim on a partition whose previous owner is still a member waits (with a watch) for that owner to
    #: delete its node instead of failing the attempt on the conflict
    wait_for_release: bool
    #: read the start offsets after the claim (sent with its last write) instead of before it: the previous owner
    #: may commit between Kafka's read and its claim, and the new owner restarts from a stale offset
    offsets_after_claim: bool
    #: a release deletes only owner nodes that name this member's thread; Kafka deletes each one it thinks it
    #: owns without looking
    release_only_ours: bool
    #: keep partitions this consumer keeps after the rebalance (no release, no fetch stop) instead of
    #: stopping the world; the attempt's whole sequence follows it (attempt.py: Incremental or StopTheWorld)
    keep_unmoved: bool
    #: commit only records the caller has finished with (it asked for the next one, or committed), instead
    #: of every record handed out
    commit_processed_only: bool
    #: before claiming, re-read the membership; if it changed, recompute at once instead of claiming stale
    recheck_membership: bool
    #: while the ZooKeeper connection is suspended, hand out nothing (Kafka's streams keep handing out what is
    #: already queued: the partitions may already belong to someone else)
    pause_when_suspended: bool = True
    #: hand out nothing while the session is not known alive by this process's own clock (zk/lease.py): a member
    #: woken from a pause longer than its session (a GC pause) must not deliver what others own now; Kafka 0.8's
    #: streams hand out whatever is queued until ZooKeeper tells them otherwise
    fence_on_session_lease: bool = True
    #: a member whose registration cannot be decoded is left out (its node watched until fixed) and an offset
    #: node holding garbage is treated as absent; Kafka fails the rebalance attempt instead (docs/profiles.md)
    skip_broken_nodes: bool = True
    #: watch our own owner nodes and registration: someone deleting or overwriting them triggers a rebalance
    #: that puts them back (Kafka 0.8 watches neither)
    watch_own_nodes: bool = True
    #: a rebalance whose claims wait on owner nodes another session holds goes on trying until a session timeout
    #: has passed since it began, whatever ``rebalance.max.retries`` x ``rebalance.backoff.ms`` says: Kafka's FAQ
    #: rule (that product must exceed zookeeper.session.timeout.ms, so a dead holder's nodes expire first)
    #: enforced instead of advised. Kafka 0.8 gives up after its retries ("can't rebalance after 4 retries")
    claims_outlast_session: bool = True
    #: a rebalance that gives up after the start raises ConsumerRebalanceFailed through the streams; Kafka 0.8's
    #: watcher thread only logs it ("error during syncedRebalance") and the consumer sits registered with no
    #: partitions until the next change of the group (failure mode b, docs/failure-modes.md)
    surface_rebalance_failure: bool = True
    #: after the session expired, stop the old session's fetchers before registering again; Kafka 0.8's
    #: ``handleNewSession`` only forgets what it owned (``resetState``), registers, and leaves the fetchers to its
    #: rebalance's ``closeFetchers``: they go on handing out records through the registration and the rebalance's
    #: first reads, and that work comes between the new registration and the claims (docs/failure-modes.md, a)
    stop_fetchers_before_registering: bool = True
    #: the ZooKeeper client's connection timing (zk/timing.py): kazoo's pings on waking from a pause and keeps a
    #: session the pause did not outlast; ZooKeeper 3.4's Java client (Kafka 0.8's, through zkclient) first drops a
    #: connection it has heard nothing on for two thirds of the session and reconnects after a random 0–1 s, which
    #: a pause of 2.5–3.5 s with a 4 s session often does not survive (docs/failure-modes.md)
    zk_client_timing: ClientTiming = ClientTiming.KAZOO


PROFILE_SETTINGS = {
    "kafka-0.8": Profile("kafka-0.8", pipelined_reads=False, pipelined_claims=False, wait_for_release=False,
                         offsets_after_claim=False, release_only_ours=False, keep_unmoved=False,
                         commit_processed_only=False, recheck_membership=False, pause_when_suspended=False,
                         fence_on_session_lease=False, skip_broken_nodes=False, watch_own_nodes=False,
                         claims_outlast_session=False, surface_rebalance_failure=False,
                         stop_fetchers_before_registering=False, zk_client_timing=ClientTiming.ZOOKEEPER_3_4),
    "default": Profile("default", pipelined_reads=True, pipelined_claims=True, wait_for_release=True,
                       offsets_after_claim=True, release_only_ours=True, keep_unmoved=True,
                       commit_processed_only=True, recheck_membership=True),
}


@dataclass(frozen=True)
class ConsumerConfig:
    """Validated consumer properties. Build with :meth:`from_properties` or :meth:`load`."""

    props: Mapping[str, Any] = field(default_factory=dict)

    # ----------------------------------------------------------------------------------------- building
    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None = None, **kwargs: Any) -> ConsumerConfig:
        """From a mapping of Kafka property names; keyword arguments use ``_`` for ``.`` (``group_id=``)."""
        merged: dict[str, Any] = {}
        for key, value in {**(props or {}), **{k.replace("_", "."): v for k, v in kwargs.items()}}.items():
            prop = _BY_NAME.get(key)
            if prop is None:
                # Kafka logs unknown properties and goes on; so do we, keeping them for the record.
                merged[key] = value
                continue
            coerced = _coerce(prop, value)
            if coerced is not None:
                merged[key] = coerced
        config = cls(merged)
        config.validate()
        return config

    @classmethod
    def load(cls, path: str | Path, overrides: Mapping[str, Any] | None = None) -> ConsumerConfig:
        """Read a Java ``consumer.properties`` file, then apply ``overrides``."""
        return cls.from_properties({**read_properties(path), **(overrides or {})})

    def with_overrides(self, **props: Any) -> ConsumerConfig:
        return ConsumerConfig.from_properties({**self.props, **props})

    def get(self, name: str) -> Any:
        if name in self.props:
            return self.props[name]
        prop = _BY_NAME.get(name)
        if prop is None:
            raise UnknownProperty(name)
        return prop.default

    # ---------------------------------------------------------------------------------------- validation
    def validate(self) -> None:
        group = self.props.get("group.id")
        if not group:
            raise ConfigError("group.id is required")
        _validate_chars("group.id", group)
        _validate_chars("client.id", self.client_id)
        if self.auto_offset_reset not in ("smallest", "largest"):
            raise ConfigError(f"Wrong value {self.auto_offset_reset} of auto.offset.reset in ConsumerConfig; "
                              "Valid values are smallest and largest")
        if self.offsets_storage not in ("zookeeper", "kafka"):
            raise ConfigError(f"Wrong value {self.offsets_storage} of offsets.storage in consumer config; "
                              "Valid values are 'zookeeper' and 'kafka'")
        if self.profile_name not in PROFILES:
            raise ConfigError(f"zkconsumer.profile must be one of {', '.join(PROFILES)}, got {self.profile_name!r}")
        known = (*STRATEGIES, *COORDINATOR_ONLY_STRATEGIES)
        if self.strategy_name not in known and self.profile_name != "kafka-0.8":
            raise ConfigError(f"partition.assignment.strategy must be one of {', '.join(known)}, "
                              f"got {self.strategy_name!r}")
        if self.get("group.protocol") not in ("classic", "consumer"):
            raise ConfigError(f"group.protocol must be classic or consumer, got {self.get('group.protocol')!r}")
        # Kafka checks none of these ranges; without them our queues, timers and sessions cannot work
        # (docs/profiles.md, "Configuration").
        for name in ("zookeeper.session.timeout.ms", "auto.commit.interval.ms", "fetch.message.max.bytes",
                     "queued.max.message.chunks", "session.timeout.ms", "heartbeat.interval.ms",
                     "max.poll.interval.ms"):
            if self.get(name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {self.get(name)}")
        if self.rebalance_max_retries < 0:  # Kafka took a negative count as 0: no attempt
            raise ConfigError(f"rebalance.max.retries must be >= 0, got {self.rebalance_max_retries}")
        if self.rebalance_backoff_ms < 0:
            raise ConfigError(f"rebalance.backoff.ms must be >= 0, got {self.rebalance_backoff_ms}")
        # ConsumerConfig's require. In 0.8.2 it ran before fetchWaitMaxMs was initialised (Scala field order), so
        # it compared 0 and passed for any socket.timeout.ms >= 0; 0.9 moved it after. We check what it meant.
        if self.get("fetch.wait.max.ms") > self.get("socket.timeout.ms"):
            raise ConfigError("requirement failed: socket.timeout.ms should always be at least fetch.wait.max.ms "
                              "to prevent unnecessary socket timeouts "
                              f"({self.get('socket.timeout.ms')} < {self.get('fetch.wait.max.ms')})")
        cid = self.props.get("consumer.id")
        if cid is not None and ("/" in cid or not cid.strip()):
            raise ConfigError(f"consumer.id {cid!r} cannot be used in a ZooKeeper path")
        bad = _ZK_REFUSED.search(cid or "")
        if bad:  # Kafka failed later, at registration; a lone surrogate even kills kazoo's connection thread
            raise ConfigError(f"consumer.id {cid!r} cannot be used in a ZooKeeper path: ZooKeeper refuses "
                              f"character U+{ord(bad.group()):04X}")
        zk_security_from_properties(self.props)
        try:
            broker_version.parse_setting(self.get(broker_version.PROPERTY))
        except IllegalArgument as e:
            raise ConfigError(str(e)) from None

    def check_mode(self, mode: GroupMode) -> None:
        """Refuse settings the chosen mode cannot honour."""
        if mode == GroupMode.ZOOKEEPER and self.strategy in COORDINATOR_ONLY_STRATEGIES:
            raise ConfigError(f"partition.assignment.strategy={self.strategy} is offered in coordinator mode only")
        if mode == GroupMode.COORDINATOR and self.heartbeat_interval_ms >= self.get("session.timeout.ms"):
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")

    def warnings(self) -> list[str]:
        """What the connector logs once at start: properties nobody reads (Kafka's ``VerifiableProperties.verify``
        warned per key; one line naming them all is easier to act on), settings Kafka would quietly replace, and
        advice Kafka's FAQ gives, e.g. retries x backoff must outlast a session timeout."""
        out = []
        unknown = sorted(k for k in self.props if k not in _BY_NAME and not str(k).startswith("external"))
        if unknown:
            out.append(f"Properties {', '.join(map(str, unknown))} are not valid (ignored)")
        if self.strategy_name not in STRATEGIES and self.strategy_name not in COORDINATOR_ONLY_STRATEGIES:
            out.append(f"partition.assignment.strategy {self.strategy_name!r} is not a strategy; Kafka 0.8 uses "
                       "range for it, and so does the kafka-0.8 profile")
        if self.rebalance_max_retries == 0:
            out.append("rebalance.max.retries=0 makes no rebalance attempt: every rebalance fails at once "
                       "(ConsumerRebalanceFailed), as in Kafka 0.8")
        elif self.rebalance_max_retries * self.rebalance_backoff_ms <= self.session_timeout_ms:
            out.append(f"rebalance.max.retries * rebalance.backoff.ms ({self.rebalance_max_retries} x "
                       f"{self.rebalance_backoff_ms}) should exceed zookeeper.session.timeout.ms "
                       f"({self.session_timeout_ms}): a crashed owner's nodes live that long")
        return out

    # ---------------------------------------------------------------------------------------- accessors
    @property
    def group_id(self) -> str:
        return self.props["group.id"]

    @property
    def consumer_id(self) -> str | None:
        return self.props.get("consumer.id")

    @property
    def zookeeper_connect(self) -> str | None:
        return self.props.get("zookeeper.connect")

    @property
    def client_id(self) -> str:
        return self.props.get("client.id") or self.props["group.id"]

    @property
    def strategy_name(self) -> str:
        """The configured ``partition.assignment.strategy``, as written."""
        return self.get("partition.assignment.strategy")

    @property
    def strategy(self) -> str:
        """The strategy used: in the kafka-0.8 profile an unknown name means range, as in Kafka's
        ``PartitionAssignor.createInstance`` (anything but "roundrobin"); the default profile refuses it."""
        name = self.strategy_name
        return name if name in STRATEGIES or name in COORDINATOR_ONLY_STRATEGIES else "range"

    @property
    def rebalance_max_retries(self) -> int:
        return self.get("rebalance.max.retries")

    @property
    def rebalance_backoff_ms(self) -> int:
        value = self.get("rebalance.backoff.ms")
        return self.get("zookeeper.sync.time.ms") if value is None else value

    @property
    def session_timeout_ms(self) -> int:
        return self.get("zookeeper.session.timeout.ms")

    @property
    def connection_timeout_ms(self) -> int:
        value = self.get("zookeeper.connection.timeout.ms")
        return self.session_timeout_ms if value is None else value

    @property
    def auto_commit(self) -> bool:
        return self.get("auto.commit.enable")

    @property
    def auto_commit_interval_ms(self) -> int:
        return self.get("auto.commit.interval.ms")

    @property
    def auto_offset_reset(self) -> str:
        return self.get("auto.offset.reset")

    @property
    def exclude_internal_topics(self) -> bool:
        return self.get("exclude.internal.topics")

    @property
    def offsets_storage(self) -> str:
        return self.get("offsets.storage")

    @property
    def dual_commit(self) -> bool:
        value = self.get("dual.commit.enabled")
        return self.offsets_storage == "kafka" if value is None else value

    @property
    def kafka_offsets(self) -> bool:
        """Offsets go to the broker (``offsets.storage=kafka``), maybe to ZooKeeper as well (:attr:`dual_commit`)."""
        return self.offsets_storage == "kafka"

    @property
    def group_instance_id(self) -> str | None:
        return self.get("group.instance.id")

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.get("heartbeat.interval.ms")

    @property
    def consumer_timeout_ms(self) -> int:
        return self.get("consumer.timeout.ms")

    @property
    def profile_name(self) -> str:
        return self.get("zkconsumer.profile")

    @property
    def profile(self) -> Profile:
        return PROFILE_SETTINGS[self.profile_name]

    @property
    def trace_dir(self) -> str | None:
        return self.get("zkconsumer.trace.dir")

    @property
    def fetch_enabled(self) -> bool:
        return self.get("zkconsumer.fetch.enable")

    @property
    def bootstrap_servers(self) -> str | None:
        return self.get("bootstrap.servers")

    @property
    def broker_api_version(self) -> str:
        """``zkconsumer.broker.api.version`` as written (``auto``, or a version): :mod:`.broker_version` reads it."""
        return self.get(broker_version.PROPERTY)

    @property
    def zk_security(self) -> ZkSecurity:
        """ZooKeeper credentials and whether group nodes get ACLs (``zookeeper.set.acl``)."""
        return zk_security_from_properties(self.props)

    def as_dict(self) -> dict[str, Any]:
        """Every known property with its effective value (defaults filled in), secrets masked."""
        out = {p.name: self.get(p.name) for p in KAFKA_PROPERTIES}
        out["rebalance.backoff.ms"] = self.rebalance_backoff_ms
        out["zookeeper.connection.timeout.ms"] = self.connection_timeout_ms
        out["client.id"] = self.client_id
        out["dual.commit.enabled"] = self.dual_commit
        out.update({k: v for k, v in self.props.items() if k not in out})
        for name in SECRET_PROPERTIES:
            if out.get(name):
                out[name] = Credentials.parse(name, out[name]).masked()
        return out


def zk_security_from_properties(props: Mapping[str, Any]) -> ZkSecurity:
    """The ZooKeeper security settings among ``props`` (raw or coerced): what the consumer and the tools use.

    The tools take no ``group.id``, so this reads the three properties without building a ConsumerConfig.
    """
    values = {}
    for name in (zksecurity.SET_ACL, zksecurity.DIGEST, zksecurity.SASL):
        values[name] = _coerce(_BY_NAME[name], props.get(name))
    try:
        return ZkSecurity(
            digest=Credentials.parse(zksecurity.DIGEST, values[zksecurity.DIGEST]) if values[zksecurity.DIGEST]
            else None,
            sasl=Credentials.parse(zksecurity.SASL, values[zksecurity.SASL]) if values[zksecurity.SASL] else None,
            set_acl=bool(values[zksecurity.SET_ACL]))
    except IllegalArgument as e:
        raise ConfigError(str(e)) from None


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value`` / ``key: value`` / ``key value``, ``#``/``!`` comments,
    backslash line continuations and escapes. Missing file → ConfigError."""
    try:
        text = Path(path).read_text(encoding="latin-1")
    except OSError as e:
        raise ConfigError(f"cannot read properties file {path}: {e.strerror}") from None
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()  # a continuation line loses its leading blanks too
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", entry)
        if not m:
            continue
        key = _unescape(m.group(1))
        if key:
            out[key] = _unescape(m.group(2))
    return out


def _unescape(s: str) -> str:
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                  and len(m.group(1)) == 5 else {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m.group(1),
                                                                                                 m.group(1)), s)


def property_names() -> list[str]:
    return [p.name for p in KAFKA_PROPERTIES]


def property_kind(name: str) -> type | None:
    """The type of a known property's value (``int``, ``bool`` or ``str``); None for a name this consumer does not
    know (a scenario's ``[properties]`` refuses those, where a properties file keeps and ignores them)."""
    prop = _BY_NAME.get(name)
    return prop.kind if prop is not None else None


