"""zkconsumer: the Kafka 0.8 ZooKeeper-coordinated consumer group, reimplemented in Python, and a lab to study it
beside the broker-side group coordinator that replaced it.

The public API is what ``__all__`` lists: the two connectors over one streams surface (ZooKeeper mode, Kafka 0.8's
``ZookeeperConsumerConnector``; coordinator mode, Kafka 0.9+'s group protocol), their configuration with Kafka's
property names, the pure 0.8 assignors, the ZooKeeper layout codecs, a real ZooKeeper server for tests and labs,
and the one error root. The layers below it (docs/architecture.md)::

    cli → lab, sim, analysis → scenario → consumer, broker, coordinator, migration, apache_kafka
        → zk, assignment, config → errors, types, trace, records

Example::

    from zkconsumer import ConsumerConfig, ZookeeperConsumerConnector

    config = ConsumerConfig.from_properties({"group.id": "g", "zookeeper.connect": "127.0.0.1:2181"})
    with ZookeeperConsumerConnector(config) as connector:
        for record in connector.create_message_streams({"events": 1})["events"][0]:
            print(record.offset, record.value)
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zkconsumer.assignment.assignors import (
        Assignment,
        AssignmentContext,
        AssignmentError,
        RoundRobinPreconditionError,
        assign,
        assign_for_consumer,
        range_assign,
        roundrobin_assign,
        roundrobin_relaxed_assign,
        sticky_assign,
    )
    from zkconsumer.config import ConfigError, ConsumerConfig
    from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
    from zkconsumer.consumer.listener import RebalanceListener
    from zkconsumer.consumer.streams import KafkaStream
    from zkconsumer.consumer.zookeeper.connector import ZookeeperConsumerConnector
    from zkconsumer.errors import (
        ConsumerIdInUse,
        ConsumerRebalanceFailed,
        ConsumerTimeout,
        IllegalArgument,
        KafkaCode,
        KafkaUnavailable,
        MessageStreamsExist,
        NotAuthorized,
        ZkConsumerError,
    )
    from zkconsumer.types import FetchedRecord, TopicPartition
    from zkconsumer.zk.layout import (
        BrokerInfo,
        ConsumerRegistration,
        GroupPaths,
        MalformedNodeError,
        TopicAssignment,
        TopicFilter,
        blacklist,
        whitelist,
    )
    from zkconsumer.zk.server import ZooKeeperServer, running_zookeeper

#: Each public name → the module that defines it, imported on first use (PEP 562): ``import zkconsumer.analysis``
#: on a Spark worker, or ``zkconsumer assign``, does not load kazoo, kafka-python and both connectors.
_EXPORTS = {
    "Assignment": "zkconsumer.assignment.assignors",
    "AssignmentContext": "zkconsumer.assignment.assignors",
    "AssignmentError": "zkconsumer.assignment.assignors",
    "RoundRobinPreconditionError": "zkconsumer.assignment.assignors",
    "assign": "zkconsumer.assignment.assignors",
    "assign_for_consumer": "zkconsumer.assignment.assignors",
    "range_assign": "zkconsumer.assignment.assignors",
    "roundrobin_assign": "zkconsumer.assignment.assignors",
    "roundrobin_relaxed_assign": "zkconsumer.assignment.assignors",
    "sticky_assign": "zkconsumer.assignment.assignors",
    "ConfigError": "zkconsumer.config",
    "ConsumerConfig": "zkconsumer.config",
    "CoordinatorConsumerConnector": "zkconsumer.consumer.coordinated.connector",
    "RebalanceListener": "zkconsumer.consumer.listener",
    "KafkaStream": "zkconsumer.consumer.streams",
    "ZookeeperConsumerConnector": "zkconsumer.consumer.zookeeper.connector",
    "ConsumerIdInUse": "zkconsumer.errors",
    "ConsumerRebalanceFailed": "zkconsumer.errors",
    "ConsumerTimeout": "zkconsumer.errors",
    "IllegalArgument": "zkconsumer.errors",
    "KafkaCode": "zkconsumer.errors",
    "KafkaUnavailable": "zkconsumer.errors",
    "MessageStreamsExist": "zkconsumer.errors",
    "NotAuthorized": "zkconsumer.errors",
    "ZkConsumerError": "zkconsumer.errors",
    "FetchedRecord": "zkconsumer.types",
    "TopicPartition": "zkconsumer.types",
    "BrokerInfo": "zkconsumer.zk.layout",
    "ConsumerRegistration": "zkconsumer.zk.layout",
    "GroupPaths": "zkconsumer.zk.layout",
    "MalformedNodeError": "zkconsumer.zk.layout",
    "TopicAssignment": "zkconsumer.zk.layout",
    "TopicFilter": "zkconsumer.zk.layout",
    "blacklist": "zkconsumer.zk.layout",
    "whitelist": "zkconsumer.zk.layout",
    "ZooKeeperServer": "zkconsumer.zk.server",
    "running_zookeeper": "zkconsumer.zk.server",
}

__version__ = "0.1.0"

__all__ = [
    # the consumer, both modes
    "ZookeeperConsumerConnector", "CoordinatorConsumerConnector", "KafkaStream", "RebalanceListener",
    "ConsumerConfig", "TopicPartition", "FetchedRecord",
    # the 0.8 assignors (pure)
    "AssignmentContext", "Assignment", "assign", "assign_for_consumer", "range_assign", "roundrobin_assign",
    "roundrobin_relaxed_assign", "sticky_assign",
    # the ZooKeeper layout (pure codecs) and a real server
    "GroupPaths", "ConsumerRegistration", "TopicAssignment", "BrokerInfo", "TopicFilter", "whitelist",
    "blacklist", "ZooKeeperServer", "running_zookeeper",
    # errors
    "ZkConsumerError", "ConfigError", "ConsumerRebalanceFailed", "ConsumerTimeout", "ConsumerIdInUse",
    "MessageStreamsExist", "NotAuthorized", "MalformedNodeError", "AssignmentError", "RoundRobinPreconditionError",
    "IllegalArgument", "KafkaUnavailable", "KafkaCode",
    "__version__",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'zkconsumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
