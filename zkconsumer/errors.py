"""The consumer's exceptions, in a module of their own so the connector, the rebalancer and the streams (and a
future coordinator-mode consumer) can all raise them without importing one another.

``zkconsumer.connector`` re-exports every name here: ``from zkconsumer.connector import ConsumerRebalanceFailed``
keeps working.
"""

from __future__ import annotations

from kazoo.exceptions import NoAuthError


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


class NotAuthorized(NoAuthError):
    """ZooKeeper refused a write (NoAuth): the node's ACL does not name this client's principal.

    A group created with ``zookeeper.set.acl=true`` lets only its principal write; other clients may read
    (README, "Security"). A kazoo ``NoAuthError`` still, so code catching that keeps working.
    """

    def __init__(self, path: str, action: str = "write") -> None:
        super().__init__(f"ZooKeeper refused to {action} {path} (NoAuth): its ACL does not allow this client; "
                         "authenticate as the group's principal with zkconsumer.zookeeper.digest=user:password "
                         "or zkconsumer.zookeeper.sasl=user:password")
        self.path = path
