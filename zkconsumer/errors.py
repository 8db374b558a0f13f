"""zkconsumer's error model: the root :class:`ZkConsumerError` every exception of ours derives from, the table of
Kafka's protocol error codes (:class:`KafkaCode`) the broker and the coordinator answer with, and the consumer's
own exceptions, here so that the connectors, the rebalancer and the streams can raise them without importing one
another. The bottom layer: it imports nothing of zkconsumer.

The package exports the consumer's errors: ``from zkconsumer import ConsumerRebalanceFailed``.
"""

from __future__ import annotations

from enum import IntEnum

from kazoo.exceptions import NoAuthError


class ZkConsumerError(Exception):
    """The root of every exception zkconsumer raises: ``except ZkConsumerError`` catches all of them, and nothing
    from a library underneath (kazoo, kafka-python) is mistaken for ours. Each class keeps the builtin base it had
    (``RuntimeError``, ``ValueError``, ``LookupError``…) beside this one, so code catching those keeps working."""


class KafkaCode(IntEnum):
    """Kafka's protocol error codes, the one table zkconsumer's broker and coordinator answer with (the names are
    Kafka's ``Errors`` enum's; the values are on the wire, so this is an ``IntEnum``: a member *is* its code).
    Only the codes zkconsumer sends are here; :func:`code_name` names any code."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    MESSAGE_TOO_LARGE = 10
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    KAFKA_STORAGE_ERROR = 56
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    FENCED_INSTANCE_ID = 82
    INVALID_RECORD = 87


def code_name(code: int) -> str:
    """``UNKNOWN_MEMBER_ID(25)``: how logs and traces name a code, ours or not."""
    try:
        return f"{KafkaCode(code).name}({code})"
    except ValueError:
        from kafka import errors  # only for codes zkconsumer never sends

        return f"{getattr(errors.for_code(code), 'message', 'UNKNOWN')}({code})"


class ConsumerRebalanceFailed(ZkConsumerError, RuntimeError):
    """Kafka's ``ConsumerRebalanceFailedException``: every attempt of a rebalance failed."""


class MessageStreamsExist(ZkConsumerError, RuntimeError):
    """Kafka's ``MessageStreamsExistException``: streams can be created once per connector."""


class ConsumerTimeout(ZkConsumerError):
    """Kafka's ``ConsumerTimeoutException``: no record within ``consumer.timeout.ms``."""


class ConsumerIdInUse(ZkConsumerError, RuntimeError):
    """Another live ZooKeeper session holds this consumer's registration node (two processes, one ``consumer.id``).

    Kafka 0.8 waited for such a node forever, assuming it was its own from an expired session (ZOOKEEPER-1740);
    we wait as long as a dead session can linger and then say so (docs/profiles.md).
    """


class NotAuthorized(ZkConsumerError, NoAuthError):
    """ZooKeeper refused a write (NoAuth): the node's ACL does not name this client's principal.

    A group created with ``zookeeper.set.acl=true`` lets only its principal write; other clients may read
    (README, "Security"). A kazoo ``NoAuthError`` still, so code catching that keeps working.
    """

    def __init__(self, path: str, action: str = "write") -> None:
        super().__init__(f"ZooKeeper refused to {action} {path} (NoAuth): its ACL does not allow this client; "
                         "authenticate as the group's principal with zkconsumer.zookeeper.digest=user:password "
                         "or zkconsumer.zookeeper.sasl=user:password")
        self.path = path
