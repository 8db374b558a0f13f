"""Which of a lab run's consumer properties each kind of member takes (docs/scenarios.md, ``[properties]``).

A scenario's ``[properties]`` go to every member of the run under Kafka 0.8's names. The members are of one kind per
run (the variant's): zkconsumer's ZooKeeper connector, Kafka 0.8.2.2's own consumer, a coordinator-mode member on
kafka-python or on librdkafka, or a ``--migratable`` member (both of zkconsumer's connectors). A property a kind has
no counterpart for (``rebalance.max.retries`` on a coordinator-mode member) is not given to it: the run goes on, and
its summary lists the property under ``not_applicable``, as a step with no counterpart is.

Pure: the lab calls :func:`member_properties` once per run, the tests call it alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from zkconsumer import broker_version
from zkconsumer.apache_kafka.lab_members import CLIENT as KAFKA_08_CLIENT
from zkconsumer.scenario.model import LabMode
from zkconsumer.zk import security as zksecurity

#: Kafka 0.8's consumer settings every kind has a counterpart for (kafka-python's and librdkafka's under their
#: own names where they have one; see the sets below for librdkafka).
_COMMON = frozenset({"auto.commit.enable", "auto.commit.interval.ms", "auto.offset.reset", "client.id",
                     "consumer.timeout.ms", "exclude.internal.topics", "fetch.message.max.bytes", "fetch.min.bytes",
                     "fetch.wait.max.ms", "queued.max.message.chunks", "socket.timeout.ms"})
#: The ZooKeeper connector's own: its rebalance, its ZooKeeper link, its offsets and fetchers.
_ZOOKEEPER = frozenset({"rebalance.max.retries", "rebalance.backoff.ms", "zookeeper.sync.time.ms",
                        "zookeeper.connection.timeout.ms", "offsets.storage", "dual.commit.enabled",
                        "offsets.channel.backoff.ms", "offsets.channel.socket.timeout.ms", "offsets.commit.max.retries",
                        "num.consumer.fetchers", "refresh.leader.backoff.ms", "socket.receive.buffer.bytes"})
#: zkconsumer's own, not Kafka 0.8.2.2's (ZooKeeper ACLs came with 0.9).
_ZOOKEEPER_ZKCONSUMER = frozenset({zksecurity.SET_ACL, zksecurity.DIGEST, zksecurity.SASL,
                                   "zkconsumer.fetch.enable", "zkconsumer.profile.disable", broker_version.PROPERTY})
#: The group coordinator's (Kafka 0.9+), as a coordinator-mode member takes them.
_COORDINATOR = frozenset({"heartbeat.interval.ms", "max.poll.interval.ms", "metadata.max.age.ms"})
#: A librdkafka member: what consumer/librdkafka.py's client_settings passes on (the group settings under the
#: classic protocol only: under KIP-848 the broker decides them).
_LIBRDKAFKA = frozenset({"auto.commit.enable", "auto.commit.interval.ms", "auto.offset.reset", "client.id",
                         "group.protocol", "group.remote.assignor", "heartbeat.interval.ms", "max.poll.interval.ms"})
_LIBRDKAFKA_CLASSIC_ONLY = frozenset({"heartbeat.interval.ms", "max.poll.interval.ms"})

ZOOKEEPER, KAFKA_08, COORDINATOR, LIBRDKAFKA, MIGRATABLE = (
    "zookeeper", KAFKA_08_CLIENT, "coordinator", "librdkafka", "migratable")
#: Each kind: what it is called in a report, and the properties it takes.
KINDS: dict[str, tuple[str, frozenset[str]]] = {
    ZOOKEEPER: ("zkconsumer's ZooKeeper connector", _COMMON | _ZOOKEEPER | _ZOOKEEPER_ZKCONSUMER),
    KAFKA_08: ("Kafka 0.8.2.2's own consumer", _COMMON | _ZOOKEEPER),
    COORDINATOR: ("a coordinator-mode member (kafka-python)",
                  _COMMON | _COORDINATOR | {broker_version.PROPERTY}),
    LIBRDKAFKA: ("a librdkafka member", _LIBRDKAFKA),
    MIGRATABLE: ("a --migratable member (both connectors)",
                 _COMMON | _ZOOKEEPER | _ZOOKEEPER_ZKCONSUMER | _COORDINATOR),
}


def member_kind(mode: LabMode, client: str) -> str:
    """The kind of the members a lab plan of ``mode`` and ``client`` starts."""
    if mode == LabMode.MIGRATE:
        return MIGRATABLE
    if mode == LabMode.COORDINATOR:
        return LIBRDKAFKA if client == "librdkafka" else COORDINATOR
    return KAFKA_08 if client == KAFKA_08_CLIENT else ZOOKEEPER


def property_text(value: object) -> str:
    """A property's value as a properties file or ``--property`` writes it (TOML's ``true`` is Java's ``true``)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def merge_properties(base: Iterable[tuple[str, str]], over: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``base`` with ``over`` on top (a name in both takes ``over``'s value, at ``base``'s place)."""
    merged = dict(base)
    merged.update(over)
    return tuple(merged.items())


def member_properties(kind: str, properties: Iterable[tuple[str, str]],
                      asked: Mapping[str, object] | None = None) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """What members of ``kind`` are given of the run's ``properties``, and what is reported n/a: each property
    the kind has no counterpart for, and each of ``asked`` (the scenario's ``[properties]``) that the run sets
    otherwise (a variant's own properties win: they are what makes the variant, e.g. KIP-848's group.protocol).
    A name none of the kinds knows is passed on as it is (a variant may name a client's own setting)."""
    properties = tuple(properties)
    label, takes = KINDS[kind]
    known = frozenset().union(*(names for _, names in KINDS.values()))
    if kind == LIBRDKAFKA and dict(properties).get("group.protocol") == "consumer":
        takes = takes - _LIBRDKAFKA_CLASSIC_ONLY
    given, notes = [], []
    for name, value in properties:
        if name in takes or name not in known:
            given.append((name, value))
        else:
            notes.append(f"property {name}={value}: {label} has no counterpart; not given to its members")
    final = dict(properties)
    for name, value in (asked or {}).items():
        if name in final and final[name] != property_text(value):
            notes.append(f"property {name}={property_text(value)}: the run sets {name}={final[name]} (the "
                         "variant's own properties win)")
    return tuple(given), notes
