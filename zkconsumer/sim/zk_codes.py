"""ZooKeeper's vocabularies as the simulated server speaks them: error codes, watch event types, create modes,
and the kinds of request a later queueing layer will give a service time. The values are ZooKeeper's own wire
values (``KeeperException.Code``, ``Watcher.Event.EventType``, ``CreateMode``), so a simulated connection can
hand them to kazoo unchanged and a trace shows the numbers a packet capture would."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class ZkCode(IntEnum):
    """``KeeperException.Code``: the ``err`` of a reply header, and of each result of a failed ``multi``.

    ``OK`` inside a failed multi marks an op that would have succeeded but was rolled back (kazoo's
    ``RolledBackError``); ``RUNTIME_INCONSISTENCY`` marks the ops after the failing one, never tried."""

    OK = 0
    SYSTEM_ERROR = -1
    RUNTIME_INCONSISTENCY = -2
    DATA_INCONSISTENCY = -3
    CONNECTION_LOSS = -4
    MARSHALLING_ERROR = -5
    UNIMPLEMENTED = -6
    OPERATION_TIMEOUT = -7
    BAD_ARGUMENTS = -8
    API_ERROR = -100
    NO_NODE = -101
    NO_AUTH = -102
    BAD_VERSION = -103
    NO_CHILDREN_FOR_EPHEMERALS = -108
    NODE_EXISTS = -110
    NOT_EMPTY = -111
    SESSION_EXPIRED = -112
    INVALID_CALLBACK = -113
    INVALID_ACL = -114
    AUTH_FAILED = -115
    SESSION_MOVED = -118


class EventType(IntEnum):
    """``Watcher.Event.EventType``: what a watch notification says happened to its path."""

    NODE_CREATED = 1
    NODE_DELETED = 2
    NODE_DATA_CHANGED = 3
    NODE_CHILDREN_CHANGED = 4


class CreateMode(IntEnum):
    """``CreateMode``, valued by its wire flags (bit 0 ephemeral, bit 1 sequential)."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3

    @property
    def ephemeral(self) -> bool:
        return bool(self.value & 1)

    @property
    def sequential(self) -> bool:
        return bool(self.value & 2)


class RequestKind(StrEnum):
    """What a request asks of the server: the key of the per-kind request counter, and of the service time the
    queueing layer will add (a write costs the leader a log append; a read does not)."""

    CREATE_SESSION = "createSession"
    CLOSE_SESSION = "closeSession"
    PING = "ping"
    CREATE = "create"
    DELETE = "delete"
    SET_DATA = "setData"
    GET_DATA = "getData"
    EXISTS = "exists"
    GET_CHILDREN = "getChildren"
    MULTI = "multi"
    MULTI_READ = "multiRead"
    SET_WATCHES = "setWatches"

    @property
    def is_write(self) -> bool:
        """A write takes a zxid (even when it fails: ZooKeeper logs an error transaction for it)."""
        return self in _WRITES


_WRITES = frozenset({RequestKind.CREATE_SESSION, RequestKind.CLOSE_SESSION, RequestKind.CREATE, RequestKind.DELETE,
                     RequestKind.SET_DATA, RequestKind.MULTI})
