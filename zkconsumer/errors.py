"""zkconsumer's error model: the root :class:`ZkConsumerError` every exception of ours derives from, the table of
Kafka's protocol error codes (:class:`KafkaCode`) the broker and the coordinator answer with, and the consumer's
own exceptions, here so that the connectors, the rebalancer and the streams can raise them without importing one
another. The bottom layer: it imports nothing of zkconsumer.

The package exports the consumer's errors: ``from zkconsumer import ConsumerRebalanceFailed``.

The rules (docs/architecture.md, "One error root"; tests/test_architecture.py checks them): the library raises its
own classes, never a bare builtin such as ``ValueError`` (Python's protocols aside: ``AttributeError`` in a
``__getattr__``, ``StopIteration``, ``NotImplementedError``); a class is ``retriable`` when the same call, made
again later, may succeed; the CLI catches ``ZkConsumerError``. A class of one module's concern stays beside the
code that raises it, and is listed here.

Every error class of zkconsumer, by module (``*``: retriable)::

    zkconsumer.errors                      ZkConsumerError, ConsumerRebalanceFailed, MessageStreamsExist,
                                           ConsumerTimeout*, ConsumerIdInUse, NotAuthorized, IllegalArgument,
                                           NotEncodable, UnexpectedResponse, OperationTimedOut*, KafkaUnavailable*
    zkconsumer.records                     RecordValueError
    zkconsumer.runtime                     RuntimeAlreadyInstalled
    zkconsumer.broker_version              BrokerTooOld
    zkconsumer.config.properties           ConfigError, UnknownProperty
    zkconsumer.zk.layout                   LayoutError, MalformedNodeError, InvalidTopicError
    zkconsumer.zk.registry                 ZkConnectError*, ZkAuthFailed, BrokerAlreadyRegistered*,
                                           TopicExistsError, UnknownTopicError
    zkconsumer.zk.topics                   AdminOperationError
    zkconsumer.zk.server                   ZooKeeperError
    zkconsumer.assignment.assignors        AssignmentError, RoundRobinPreconditionError
    zkconsumer.consumer.fetcher            FetcherError
    zkconsumer.consumer.zookeeper.kafka_offsets  KafkaOffsetError
    zkconsumer.log.batches                 InvalidBatchError
    zkconsumer.log.storage                 StorageError, DataDirInUse, OffsetOutOfRange
    zkconsumer.wire.protocol               MalformedRequest
    zkconsumer.broker.broker               BrokerConfigError, BrokerNotStarted
    zkconsumer.broker.client               ConnectionClosed*
    zkconsumer.coordinator.group           IllegalStateTransition
    zkconsumer.coordinator.kip848          Kip848DecodeError
    zkconsumer.coordinator.offsets_codec   CodecError
    zkconsumer.coordinator.offsets_log     OffsetsAppendFailed
    zkconsumer.migration.driver            MigrationError, StepDidNotHold
    zkconsumer.migration.lease             LeaseError, Superseded
    zkconsumer.tools.groups                GroupError
    zkconsumer.apache_kafka.jars           KafkaDistError
    zkconsumer.apache_kafka.processes      KafkaProcessError
    zkconsumer.apache_kafka.mixed          GroupDidNotSettle, InconsistentGroup
    zkconsumer.lab.backends                BackendError
    zkconsumer.scenario.model              ScenarioError
    zkconsumer.lab.faults.lab              FaultTimeout
    zkconsumer.lab.containers.engine       DockerUnavailable
    zkconsumer.lab.containers.images       ImageBuildError
    zkconsumer.sim.tasks                   SimulationError
    zkconsumer.sim.network                 ConnectFailed, WouldBlock
    zkconsumer.sim.kafka_io                SocketError, SocketTimeout, AlreadyRegistered
    zkconsumer.sim.zk_jute                 MalformedFrame
    zkconsumer.sim.world                   SimRefused
    zkconsumer.sim.herd                    HerdCollapsed
    zkconsumer.sim.coordinator_fit         MeasurementFailed
    zkconsumer.analysis.traces             TraceInputError
    zkconsumer.analysis.tables             NotPlain
    zkconsumer.analysis.settings_grid      GridInputError
    zkconsumer.analysis.herd_report        HerdInputError
    zkconsumer.web.serve                   AddressInUse
    zkconsumer.cli.output                  CliError
"""

from __future__ import annotations

from enum import IntEnum

from kazoo.exceptions import NoAuthError


class ZkConsumerError(Exception):
    """The root of every exception zkconsumer raises: ``except ZkConsumerError`` catches all of them, and nothing
    from a library underneath (kazoo, kafka-python) is mistaken for ours. A class may derive from a builtin too
    (``RuntimeError``, ``ValueError``, ``LookupError``…), so that code catching that keeps working.

    ``retriable`` (aiokafka's and kafka-python's attribute, by the same name): the same call, made again later
    with nothing changed, may succeed (a connection not up yet, a timeout, an old session's node not gone yet).
    False unless a class says otherwise; a caller that retries asks ``error.retriable``, not a list of classes.
    """

    retriable: bool = False


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
    """Kafka's ``ConsumerTimeoutException``: no record within ``consumer.timeout.ms``. Retriable: the stream
    stays usable, and asking it again waits for the next record as long again."""

    retriable = True


class ConsumerIdInUse(ZkConsumerError, RuntimeError):
    """Another live ZooKeeper session holds this consumer's registration node (two processes, one ``consumer.id``).

    Kafka 0.8 waited for such a node forever, assuming it was its own from an expired session (ZOOKEEPER-1740);
    we wait as long as a dead session can linger and then say so (docs/profiles.md).
    """


class NotAuthorized(ZkConsumerError, NoAuthError):
    """ZooKeeper refused a write (NoAuth): the node's ACL does not name this client's principal.

    A group created with ``zookeeper.set.acl=true`` lets only its principal write; other clients may read
    (docs/security.md). A kazoo ``NoAuthError`` still, so code catching that keeps working.
    """

    def __init__(self, path: str, action: str = "write") -> None:
        super().__init__(f"ZooKeeper refused to {action} {path} (NoAuth): its ACL does not allow this client; "
                         "authenticate as the group's principal with zkconsumer.zookeeper.digest=user:password "
                         "or zkconsumer.zookeeper.sasl=user:password")
        self.path = path


class IllegalArgument(ZkConsumerError, ValueError):
    """A value the function refuses (Java's ``IllegalArgumentException``, as Scala's ``require`` throws it): a
    stream count below 1, an unknown variant, a clock going back. A consumer property refused is a
    :class:`~zkconsumer.config.ConfigError`. A ``ValueError`` still, as Python's own refusals are."""


class NotEncodable(ZkConsumerError, TypeError):
    """A value of a type an encoder has no form for (Kafka's JSON in ZooKeeper, a scenario's TOML). A
    ``TypeError`` still, as ``json.dumps`` raises it."""


class UnexpectedResponse(ZkConsumerError, ValueError):
    """A server answered what the protocol does not allow there: a response to another request (its
    correlation id), a result type ZooKeeper's ``multiRead`` does not have."""


class OperationTimedOut(ZkConsumerError, TimeoutError):
    """No answer within the time given (Kafka's ``TimeoutException``, retriable as it is). A ``TimeoutError``
    still, so code waiting on sockets and on us catches one class."""

    retriable = True


class KafkaUnavailable(ZkConsumerError, RuntimeError):
    """No Kafka broker to talk to: none registered in ZooKeeper, none answering at ``bootstrap.servers``
    (kafka-python's ``NoBrokersAvailable``, retriable as it is: brokers start and come back)."""

    retriable = True
