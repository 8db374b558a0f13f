"""The consumer's configuration: one parser (:class:`ConsumerConfig`) over the property tables, its settings read
by concern.

Kafka 0.8's own settings (:class:`Kafka08Settings`: the group, ZooKeeper, the rebalance, offsets, fetching), the
coordinator mode's (:class:`CoordinatorSettings`) and zkconsumer's own (:class:`ZkconsumerSettings`: the profile,
traces, where brokers are found, ZooKeeper security) are each a class of accessors and checks; ``ConsumerConfig``
is all three over one mapping of Kafka property names, built and validated once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from zkconsumer import broker_version
from zkconsumer.assignment.assignors import STRATEGIES
from zkconsumer.config.profiles import PROFILE_SETTINGS, PROFILES, Profile
from zkconsumer.config.properties import (
    _BY_NAME,
    _ZK_REFUSED,
    COORDINATOR_ONLY_STRATEGIES,
    KAFKA_PROPERTIES,
    SECRET_PROPERTIES,
    ConfigError,
    UnknownProperty,
    _coerce,
    _validate_chars,
)
from zkconsumer.config.properties_file import read_properties
from zkconsumer.errors import IllegalArgument
from zkconsumer.types import GroupMode
from zkconsumer.zk import security as zksecurity
from zkconsumer.zk.security import Credentials, ZkSecurity


class _Properties:
    """What every group of settings reads: the coerced properties, and each one's value or default."""

    props: Mapping[str, Any]

    def get(self, name: str) -> Any:
        if name in self.props:
            return self.props[name]
        prop = _BY_NAME.get(name)
        if prop is None:
            raise UnknownProperty(name)
        return prop.default

    def _at_least_one(self, *names: str) -> None:
        """Kafka checks none of these ranges; without them our queues, timers and sessions cannot work
        (docs/profiles.md, "Configuration")."""
        for name in names:
            if self.get(name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {self.get(name)}")


class Kafka08Settings(_Properties):
    """Kafka 0.8.2's consumer settings (ConsumerConfig.scala): names, defaults and checks as Kafka has them."""

    def _check_kafka_08(self) -> None:
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
        self._at_least_one("zookeeper.session.timeout.ms", "auto.commit.interval.ms", "fetch.message.max.bytes",
                           "queued.max.message.chunks")
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
    def consumer_timeout_ms(self) -> int:
        return self.get("consumer.timeout.ms")


class CoordinatorSettings(_Properties):
    """The coordinator mode's settings (Kafka 0.9+'s consumer; the librdkafka member's protocol choice)."""

    def _check_coordinator(self) -> None:
        if self.get("group.protocol") not in ("classic", "consumer"):
            raise ConfigError(f"group.protocol must be classic or consumer, got {self.get('group.protocol')!r}")
        self._at_least_one("session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms")

    @property
    def group_instance_id(self) -> str | None:
        return self.get("group.instance.id")

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.get("heartbeat.interval.ms")


class ZkconsumerSettings(_Properties):
    """zkconsumer's own settings: the profile (and an ablation of it), traces, fetching, where brokers are found,
    the broker protocol, ZooKeeper security."""

    def _check_zkconsumer(self) -> None:
        if self.profile_name not in PROFILES:
            raise ConfigError(f"zkconsumer.profile must be one of {', '.join(PROFILES)}, got {self.profile_name!r}")
        switches = [f.name for f in fields(Profile) if f.type in (bool, "bool")]
        unknown = [n for n in self.profile_disabled if n not in switches]
        if unknown:
            raise ConfigError(f"zkconsumer.profile.disable: no switch {', '.join(unknown)}; the profile's switches: "
                              f"{', '.join(switches)}")
        zk_security_from_properties(self.props)
        try:
            broker_version.parse_setting(self.get(broker_version.PROPERTY))
        except IllegalArgument as e:
            raise ConfigError(str(e)) from None

    @property
    def profile_name(self) -> str:
        return self.get("zkconsumer.profile")

    @property
    def profile_disabled(self) -> tuple[str, ...]:
        """The profile's switches ``zkconsumer.profile.disable`` turns off (an ablation)."""
        return tuple(n.strip() for n in (self.get("zkconsumer.profile.disable") or "").split(",") if n.strip())

    @property
    def profile(self) -> Profile:
        """The named profile, with the switches ``zkconsumer.profile.disable`` names turned off."""
        base = PROFILE_SETTINGS[self.profile_name]
        if not self.profile_disabled:
            return base
        return dataclasses.replace(base, **dict.fromkeys(self.profile_disabled, False))

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


@dataclass(frozen=True)
class ConsumerConfig(Kafka08Settings, CoordinatorSettings, ZkconsumerSettings):
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

    # ---------------------------------------------------------------------------------------- validation
    def validate(self) -> None:
        """Each concern's checks, then those across them."""
        self._check_kafka_08()
        self._check_zkconsumer()
        known = (*STRATEGIES, *COORDINATOR_ONLY_STRATEGIES)
        if self.strategy_name not in known and self.profile_name != "kafka-0.8":
            raise ConfigError(f"partition.assignment.strategy must be one of {', '.join(known)}, "
                              f"got {self.strategy_name!r}")
        self._check_coordinator()

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


