"""The generations of the rebalance protocol ``zkconsumer compare`` runs side by side: one :class:`Variant` each.

Kept apart from compare.py (which needs pandas) so the CLI can name them without importing the analysis.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from enum import Enum

from zkconsumer.apache_kafka.jars import cached, find_javac
from zkconsumer.apache_kafka.lab_members import CLIENT as KAFKA_08_CLIENT
from zkconsumer.errors import ZkConsumerError
from zkconsumer.scenario.model import ActionKind, LabMode
from zkconsumer.types import LabelledStrEnum


class Measure(LabelledStrEnum):
    """What ``compare`` reports for each variant, in the table's order. The value is the key in compare.json, the
    label the row's name in the table, the CSV and the figure; it lives here, beside :class:`Variant`, so a variant
    can say which measures mean nothing for it."""

    GROUP_REBALANCES = "group_rebalances", "group rebalances"
    STOP_THE_WORLD_MS = "stop_the_world_ms", "longest the whole group consumed nothing (ms)"
    REBALANCE_MS_P50 = "rebalance_ms_p50", "rebalance latency p50 (ms)"
    REBALANCE_MS_MAX = "rebalance_ms_max", "rebalance latency max (ms)"
    UNOWNED_MS_TOTAL = "unowned_ms_total", "partition-time unowned (ms, sum)"
    UNOWNED_MS_MAX = "unowned_ms_max", "longest a partition sat unowned (ms)"
    DUPLICATES = "duplicates", "duplicate deliveries"
    OVERLAPS = "overlaps", "two consumers on one partition at once"
    LOST = "lost", "records lost (never readable)"
    UNREAD_AT_END = "unread_at_end", "records unread when the run ended"
    FAILED_REBALANCES = "failed_rebalances", "rebalances given up (retries spent)"
    ZOOKEEPER_REQUESTS_PER_REBALANCE = "zookeeper_requests_per_rebalance", "ZooKeeper requests per rebalance"
    GROUP_REQUESTS_PER_REBALANCE = "group_requests_per_rebalance", "broker group requests per rebalance"
    VERIFY_OK = "verify_ok", "every partition owned once at the end"


class NotApplicable(Enum):
    """Why a measure means nothing for a variant: a run still yields a number, but it does not measure what the
    row says, so ``compare`` shows "n/a" with this reason (the value) as a footnote instead of the number."""

    NO_HOOK_BEFORE_ASSIGNMENT = ("the client tells a member nothing before its new assignment arrives, so the "
                                 "latency covers only its callbacks and compares with no other variant's; "
                                 "compare the time unowned instead")
    NO_ZOOKEEPER = ("the group uses no ZooKeeper (Kafka 4 in KRaft mode): the only ZooKeeper counted is the lab's "
                    "own, which has nothing to do with the group")


#: Rebalance latency starts at a member's first sign of a rebalance; a client that gives none has no latency.
_NO_LATENCY = ((Measure.REBALANCE_MS_P50, NotApplicable.NO_HOOK_BEFORE_ASSIGNMENT),
               (Measure.REBALANCE_MS_MAX, NotApplicable.NO_HOOK_BEFORE_ASSIGNMENT))


@dataclass(frozen=True)
class Variant:
    """One generation of the rebalance protocol, as a lab runs it."""

    mode: LabMode  # zookeeper or coordinator: compare runs no migration
    about: str
    profile: str = "default"
    strategy: str | None = None  # None: the plan's (range by default)
    static_members: bool = False
    #: Where the group coordinator runs: zkconsumer's broker, or Apache Kafka's own (its jars, by Maven): a 3.x
    #: version runs in ZooKeeper mode, a 4.x version in KRaft mode
    kafka: str | None = None
    client: str = "kafka-python"
    properties: tuple[tuple[str, str], ...] = ()
    #: Kafka's jars the members run (its own consumer), wherever the broker is
    consumer_jars: str | None = None
    #: The measures that mean nothing for this variant, and why (a tuple of pairs: the dataclass stays hashable)
    not_applicable: tuple[tuple[Measure, NotApplicable], ...] = ()
    #: Its members' commits are not in their traces (Kafka 0.8.2.2's, rebuilt from a log that does not show them):
    #: the invariants about commits (duplicates inside uncommitted windows, commits never backwards) are not judged
    commits_untraced: bool = False

    @property
    def kraft(self) -> bool:
        return self.kafka is not None and int(self.kafka.split(".")[0]) >= 4

    def no_counterpart(self, action: ActionKind) -> str | None:
        """Why a scenario action has nothing to strike in this variant's runs (None: it has). ``compare
        --scenario`` skips such steps and reports them n/a instead of failing the variant's run."""
        if action.on_zookeeper_session and self.mode is LabMode.COORDINATOR:
            return "a coordinator-mode member has no ZooKeeper session or link"
        if action.on_broker_link and self.consumer_jars is not None:
            return ("Kafka 0.8.2.2's consumer takes the broker's address from its registration in ZooKeeper: no "
                    "address of its own for a proxy")
        if action.on_broker_link and self.kafka is not None:
            return (f"the broker is Apache Kafka {self.kafka}, started by compare: the lab gives a member a "
                    "listener of its own only on zkconsumer's broker")
        if action.on_zookeeper_nodes and self.kraft:
            return "the group uses no ZooKeeper (Kafka 4 in KRaft mode)"
        if action.on_zookeeper_nodes and self.kafka is not None:
            return (f"Apache Kafka {self.kafka}'s ZooKeeper is the single server compare starts for it: the lab stops "
                    "only the servers of an ensemble of its own")
        if action.on_broker and self.kafka is not None:
            return (f"the broker is Apache Kafka {self.kafka}, started by compare: the lab kills and restarts only "
                    "its own broker process")
        if action.on_cluster and self.mode is LabMode.ZOOKEEPER:
            return ("a 0.8 group has no coordinator broker: ZooKeeper coordinates it (quorum-loss strikes that, "
                    "kill-broker its broker)")
        if action.on_cluster and self.kafka is None:
            return ("zkconsumer's broker runs alone and replicates nothing: no other broker could take the group "
                    "over (kill-broker kills its coordinator)")
        if action is ActionKind.CREATE_TOPIC and self.client != "kafka-python":
            return "its members subscribe to topics by name as the lab runs them: nobody would consume a new one"
        return None

    def absent(self) -> tuple[tuple[ActionKind, str], ...]:
        """Every action without a counterpart here, with why (what RunPlan.absent takes)."""
        return tuple((kind, why) for kind in ActionKind if (why := self.no_counterpart(kind)))


#: Names are what ``--variants`` takes and what the table's columns are called.
VARIANTS: dict[str, Variant] = {
    "zookeeper-default": Variant(LabMode.ZOOKEEPER, "0.8 group in ZooKeeper, zkconsumer's default profile"),
    "zookeeper-kafka-0.8": Variant(LabMode.ZOOKEEPER, "0.8 group in ZooKeeper, Kafka 0.8's own behaviour",
                                   profile="kafka-0.8"),
    "kafka-0.8.2.2": Variant(LabMode.ZOOKEEPER, "0.8 group in ZooKeeper, Apache Kafka 0.8.2.2's own consumer (a JVM "
                             "per member; trace rebuilt from its log), on zkconsumer's broker", profile="kafka-0.8",
                             client=KAFKA_08_CLIENT, consumer_jars="0.8.2.2", commits_untraced=True),
    "coordinator": Variant(LabMode.COORDINATOR, "classic protocol, eager, on zkconsumer's coordinator"),
    "coordinator-kafka-3.9": Variant(LabMode.COORDINATOR, "classic protocol, eager, on Kafka 3.9.1's coordinator",
                                     kafka="3.9.1"),
    "cooperative-sticky": Variant(LabMode.COORDINATOR, "classic protocol, incremental (KIP-429), zkconsumer's "
                                  "coordinator", strategy="cooperative-sticky", not_applicable=_NO_LATENCY),
    "static": Variant(LabMode.COORDINATOR, "classic protocol, eager, static members (KIP-345), zkconsumer's "
                      "coordinator", static_members=True),
    "consumer-protocol-kafka-4": Variant(LabMode.COORDINATOR, "consumer protocol (KIP-848), server-side uniform "
                                         "assignor, librdkafka members, Kafka 4.1.1 in KRaft mode", kafka="4.1.1",
                                         client="librdkafka",
                                         properties=(("group.protocol", "consumer"),
                                                     ("group.remote.assignor", "uniform")),
                                         not_applicable=(*_NO_LATENCY, (Measure.ZOOKEEPER_REQUESTS_PER_REBALANCE,
                                                                        NotApplicable.NO_ZOOKEEPER))),
}
#: What ``zkconsumer compare`` runs without ``--variants`` (under 5 minutes on a 2-core machine).
DEFAULT_VARIANTS = ("zookeeper-default", "zookeeper-kafka-0.8", "coordinator")


def unavailable(name: str) -> str | None:
    """Why a variant cannot run on this machine (one line), or None."""
    variant = VARIANTS[name]
    if variant.client == "librdkafka" and importlib.util.find_spec("confluent_kafka") is None:
        return f"{name}: needs confluent-kafka (librdkafka) installed: pip install confluent-kafka"
    if variant.consumer_jars is not None:
        try:
            find_javac()  # the harness around Kafka's consumer is compiled on this machine
        except ZkConsumerError as e:  # no Java at all, or a runtime without javac
            return f"{name}: needs a JDK to compile the harness around Kafka's consumer ({e})"
    for version in filter(None, (variant.kafka, variant.consumer_jars)):
        if cached(version) is None and not shutil.which("mvn"):
            return (f"{name}: Kafka {version}'s jars are not cached and Maven (mvn) is not installed to fetch them "
                    f"(or set ZKCONSUMER_KAFKA_HOME)")
    return None
