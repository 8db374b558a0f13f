"""The consumer's exceptions, in a module of their own so the connector, the rebalancer and the streams (and a
future coordinator-mode consumer) can all raise them without importing one another.

``zkconsumer.connector`` re-exports every name here: ``from zkconsumer.connector import ConsumerRebalanceFailed``
keeps working.
"""

from __future__ import annotations


class ConsumerRebalanceFailed(RuntimeError):
    """Kafka's ``ConsumerRebalanceFailedException``: every attempt of a rebalance failed."""


class MessageStreamsExist(RuntimeError):
    """Kafka's ``MessageStreamsExistException``: streams can be created once per connector."""


class ConsumerTimeout(Exception):
    """Kafka's ``ConsumerTimeoutException``: no record within ``consumer.timeout.ms``."""


class ConsumerIdInUse(RuntimeError):
    """Another live ZooKeeper session holds this consumer's registration node (two processes, one ``consumer.id``).

    Kafka 0.8 waited for such a node forever, assuming it was its own from an expired session (ZOOKEEPER-1740);
    we wait as long as a dead session can linger and then say so (docs/profiles.md).
    """
