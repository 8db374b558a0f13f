"""The one place that talks to ZooKeeper: typed reads and writes of the Kafka 0.8 tree through kazoo.

Everything else works with :mod:`zkconsumer.zk.layout` values (``TopicAssignment``, ``BrokerInfo``,
``ConsumerRegistration``, offsets, owners); this module turns them into znodes and back, so path spelling,
encoding and error handling live in a single module.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, TypeVar

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import AuthFailedError, BadVersionError, NoAuthError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry
from kazoo.security import ACL

from zkconsumer import runtime
from zkconsumer.errors import ConsumerIdInUse, NotAuthorized, ZkConsumerError
from zkconsumer.zk import layout, multiread
from zkconsumer.zk.handler import PollHandler, start_session, use_eager_connection
from zkconsumer.zk.layout import BrokerInfo, ConsumerRegistration, GroupPaths, MalformedNodeError, TopicAssignment
from zkconsumer.zk.security import NO_SECURITY, ZkSecurity
from zkconsumer.zk.timing import ClientTiming

log = logging.getLogger(__name__)
T = TypeVar("T")


class ZkConnectError(ZkConsumerError, RuntimeError):
    """ZooKeeper could not be reached within the connection timeout (retriable: a server starting, or back)."""

    retriable = True


class ZkAuthFailed(ZkConnectError):
    """ZooKeeper refused this client's SASL credentials (AUTH_FAILED) and closed the session."""

    retriable = False


class BrokerAlreadyRegistered(ZkConsumerError, RuntimeError):
    """``/brokers/ids/<id>`` exists. Retriable: a broker restarted within its old session's timeout registers
    once that session's node is gone (zk/cluster.py waits for it)."""

    retriable = True


class TopicExistsError(ZkConsumerError, RuntimeError):
    pass


class UnknownTopicError(ZkConsumerError, LookupError):
    pass


class AclClient(KazooClient):
    """A KazooClient whose every created node (create, makepath parents, ensure_path, multi-op) gets the ACL a
    per-path policy names (:meth:`ZkSecurity.acl_for`), so callers such as the rebalancer need not know about it.

    kazoo hands a child's ACL down to the parents it creates; the policy overrides that per path.
    """

    def __init__(self, *args, acl_for: Callable[[str], list | None], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.acl_for = acl_for

    def create_async(self, path, value=b"", acl=None, *args, **kwargs):
        return super().create_async(path, value, self.acl_for(path) or acl, *args, **kwargs)

    def transaction(self) -> TransactionRequest:
        return _AclTransaction(self)


class _AclTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        return super().create(path, value, self.client.acl_for(path) or acl, ephemeral, sequence)


def new_client(hosts: str, timeout: float, logger: logging.Logger | None = None,
               security: ZkSecurity = NO_SECURITY, timing: ClientTiming = ClientTiming.KAZOO,
               handler: Any = None, **kwargs) -> KazooClient:
    """A KazooClient with :class:`PollHandler`, an :class:`EagerConnection` (zk/handler.py) timed as ``timing``
    says (zk/timing.py) and a reconnect delay bounded by a third of the session timeout, authenticated and creating
    nodes with ACLs as ``security`` says.

    kazoo's default reconnect backoff doubles up to an hour: after a 30 s outage a client could wait longer than
    its session timeout once the servers are back, and lose a session ZooKeeper had kept for it. The Java client's
    timing has no backoff: its connection waits a random 0–1 s before each attempt itself, so kazoo's retry adds
    nothing.

    ``handler``: kazoo's handler (threads, sockets, select); :class:`PollHandler` unless given (the simulator gives
    its own, so the same client and connection run on simulated time and network).
    """
    handler = handler if handler is not None else PollHandler()
    if timing is ClientTiming.ZOOKEEPER_3_4:
        kwargs.setdefault("connection_retry", KazooRetry(max_tries=-1, delay=0.0, backoff=1, max_jitter=0.0,
                                                         sleep_func=handler.sleep_func))
    kwargs.setdefault("connection_retry", KazooRetry(max_tries=-1, delay=0.1, backoff=2,
                                                     max_delay=max(timeout / 3.0, 0.2), sleep_func=handler.sleep_func))
    kwargs.update(security.client_kwargs())
    if security.set_acl:
        client = AclClient(hosts=hosts, timeout=timeout, logger=logger, handler=handler,
                           acl_for=security.acl_for, **kwargs)
    else:
        client = KazooClient(hosts=hosts, timeout=timeout, logger=logger, handler=handler, **kwargs)
    use_eager_connection(client, timing)
    return client


def broker_ids_of(children: Iterable[str]) -> list[int]:
    """The broker ids among the children of ``/brokers/ids`` (anything else there is not a broker), sorted."""
    out = []
    for child in children:
        with contextlib.suppress(ValueError):
            out.append(int(child))
    return sorted(out)


def split_connect(zk_connect: str) -> tuple[str, str]:
    """``host:port,host:port/chroot`` → (hosts, chroot or "")."""
    zk_connect = zk_connect.strip()
    if not zk_connect:
        raise ZkConnectError("zookeeper.connect is empty")
    hosts, slash, chroot = zk_connect.partition("/")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot


def connect(zk_connect: str, session_timeout_ms: int = 6000, connection_timeout_ms: int = 6000,
            logger: logging.Logger | None = None, create_chroot: bool = True,
            security: ZkSecurity = NO_SECURITY, timing: ClientTiming = ClientTiming.KAZOO,
            handler: Callable[[], Any] | None = None) -> KazooClient:
    """A started KazooClient for ``zookeeper.connect`` (chroot created when missing, as a convenience).

    ``zookeeper.session.timeout.ms`` becomes the requested session timeout; the server may negotiate it into
    its own [min, max] bounds. ``zookeeper.connection.timeout.ms`` bounds the wait for the first session.
    ``security`` (credentials, ``zookeeper.set.acl``) applies to the session; the chroot itself is created open.
    ``timing`` is the connection's timing model (zk/timing.py; the profile's ``zk_client_timing``).
    ``handler`` makes each client's kazoo handler (:func:`new_client`; the simulator's member I/O).
    """
    hosts, chroot = split_connect(zk_connect)
    timeout = connection_timeout_ms / 1000.0
    if chroot and create_chroot:
        root = new_client(hosts, session_timeout_ms / 1000.0, logger, ZkSecurity(security.digest, security.sasl),
                          handler=handler() if handler else None)
        _start(root, hosts, timeout, probe=security.sasl is not None)
        try:
            root.ensure_path(chroot)
        finally:
            root.stop()
            root.close()
    client = new_client(hosts + chroot, session_timeout_ms / 1000.0, logger, security, timing,
                        handler=handler() if handler else None)
    _start(client, zk_connect, timeout, probe=security.sasl is not None)
    return client


def _start(client: KazooClient, shown: str, timeout: float, probe: bool = False) -> None:
    """Start the session and wait for its whole handshake (zk/handler.py's :func:`start_session`): refused SASL
    credentials fail here, at once and always as :class:`ZkAuthFailed`, not as a connection timeout nor in the
    middle of a rebalance. ``probe``: one request after the start when kazoo's own ``start`` ran (a client without
    an ``EagerConnection``), which returns before the SASL exchange: a refusal surfaces at the first request."""
    try:
        if not start_session(client, timeout) and probe:
            client.exists("/")
    except KazooTimeoutError:
        with contextlib.suppress(Exception):
            client.stop()
            client.close()
        raise ZkConnectError(f"could not connect to ZooKeeper at {shown} within {timeout:.1f}s "
                             "(zookeeper.connection.timeout.ms); is a server running there? "
                             "'zkconsumer zk start' starts one.") from None
    except AuthFailedError:
        with contextlib.suppress(Exception):
            client.stop()
            client.close()
        raise ZkAuthFailed(f"ZooKeeper at {shown} refused this client's credentials (AUTH_FAILED): check "
                           "zkconsumer.zookeeper.sasl (user:password) and the server's JAAS users") from None


#: nodes per ``multiRead``: a response stays far below ZooKeeper's 1 MB packet limit (jute.maxbuffer)
MULTI_READ_CHUNK = 1000


class Registry:
    """Typed access to the Kafka tree over one kazoo client."""

    def __init__(self, client: KazooClient) -> None:
        self.zk = client
        self._multi_read: bool | None = None  # whether the ensemble serves multiRead; asked at the first need

    @classmethod
    @contextlib.contextmanager
    def open(cls, zk_connect: str, **kwargs) -> Iterator[Registry]:
        client = connect(zk_connect, **kwargs)
        try:
            yield cls(client)
        finally:
            client.stop()
            client.close()

    # ------------------------------------------------------------------------------------------ plumbing
    def setup_common_paths(self, *more: str) -> None:
        """Kafka's ``setupCommonPaths`` (and ``more``): make sure the persistent paths exist."""
        self.ensure_paths([*layout.COMMON_PATHS, *more])

    def ensure_paths(self, paths: Iterable[str]) -> None:
        """``ensure_path`` for many paths, their existence checked with pipelined requests: one round trip when
        they all exist, as they do for every consumer but the first. A cold start of a hundred consumers would
        otherwise queue a thousand synchronous requests at ZooKeeper before the first one registers."""
        pending = [(p, self.zk.exists_async(p)) for p in paths]
        missing = [self.zk.ensure_path_async(p) for p, result in pending if result.get() is None]
        for result in missing:
            result.get()

    def children(self, path: str, watch=None) -> list[str]:
        """Children, or [] when the parent does not exist (``getChildrenParentMayNotExist``)."""
        try:
            return self.zk.get_children(path, watch=watch)
        except NoNodeError:
            return []

    def read(self, path: str, watch=None) -> bytes | None:
        try:
            data, _ = self.zk.get(path, watch=watch)
            return data
        except NoNodeError:
            return None

    def _decoded(self, path: str, decode: Callable[[str, bytes], T], watch=None) -> T | None:
        """The node at ``path`` decoded (a malformed one raises the codec's LayoutError); None when it is absent."""
        data = self.read(path, watch=watch)
        return None if data is None else decode(path, data)

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        """Read many nodes in one round trip: one ``multiRead`` per 1,000 nodes where the ensemble serves it
        (ZooKeeper 3.6+, zk/multiread.py), else pipelined ``getData`` requests."""
        return self.read_many_async(paths)()

    def read_many_async(self, paths: Iterable[str]) -> Callable[[], dict[str, bytes | None]]:
        """:meth:`read_many`, sent now; the function returned waits for the answers (a read sent right behind a
        write of this session sees it: ZooKeeper answers a session's requests in order)."""
        paths = list(paths)
        if len(paths) > 1 and self._multi_read is None:
            self._multi_read = multiread.supports_multi_read(  # through the handler's network where it has one
                self.zk.hosts, ask=getattr(self.zk.handler, "four_letter_word", None))
        if len(paths) > 1 and self._multi_read:
            chunks = [multiread.read_data_async(self.zk, paths[start:start + MULTI_READ_CHUNK])
                      for start in range(0, len(paths), MULTI_READ_CHUNK)]

            def read() -> dict[str, bytes | None]:
                out: dict[str, bytes | None] = {}
                for chunk in chunks:
                    out.update(chunk())
                return out
            return read
        pending = [(p, self.zk.get_async(p)) for p in paths]

        def got() -> dict[str, bytes | None]:
            out: dict[str, bytes | None] = {}
            for path, result in pending:
                try:
                    out[path] = result.get()[0]
                except NoNodeError:
                    out[path] = None
            return out
        return got

    def delete_many(self, paths: Iterable[str]) -> None:
        """Delete many nodes, pipelined; nodes already gone are fine."""
        pending = [self.zk.delete_async(p) for p in paths]
        for result in pending:
            with contextlib.suppress(NoNodeError):
                result.get()

    def deregister_consumer(self, group: str, consumer_id: str) -> None:
        """Delete this session's registration of ``consumer_id``; never another session's node (a twin process
        with the same ``consumer.id``, or a new session's own)."""
        path = GroupPaths(group).registration(consumer_id)
        stat = self.zk.exists(path)
        session = self.zk.client_id[0] if self.zk.client_id else None
        if stat is not None and stat.ephemeralOwner == session:
            self.zk.delete(path, version=stat.version)

    def delete_tree(self, path: str) -> None:
        """Delete ``path`` and everything under it (kazoo's recursive delete: children first). Raises kazoo's
        ``NotEmptyError`` when a child appears meanwhile, e.g. a consumer registering in a group being deleted."""
        self.zk.delete(path, recursive=True)

    # ------------------------------------------------------------------------------------------- brokers
    def broker_ids(self) -> list[int]:
        return broker_ids_of(self.children(layout.BROKER_IDS_PATH))

    def any_broker_async(self) -> Callable[[], bool]:
        """Whether any broker is registered: the listing is sent now (to travel with other reads), the function
        returned waits for it (a missing ``/brokers/ids`` names none)."""
        pending = self.zk.get_children_async(layout.BROKER_IDS_PATH)

        def answer() -> bool:
            try:
                return bool(broker_ids_of(pending.get()))
            except NoNodeError:
                return False
        return answer

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._decoded(layout.broker_path(broker_id), BrokerInfo.decode)

    def brokers(self) -> dict[int, BrokerInfo]:
        out = {}
        for bid in self.broker_ids():
            info = self.broker(bid)
            if info is not None:
                out[bid] = info
        return out

    def bootstrap_servers(self) -> str | None:
        """``host:port,...`` of the registered brokers' PLAINTEXT endpoints, or None when none is registered."""
        brokers = self.brokers()
        if not brokers:
            return None
        return ",".join("{}:{}".format(*b.plaintext_address()) for b in brokers.values())

    def register_broker(self, info: BrokerInfo) -> str:
        """Create ``/brokers/ids/<id>`` (ephemeral); an existing registration is Kafka's startup error."""
        path = layout.broker_path(info.broker_id)
        self.zk.ensure_path(layout.BROKER_IDS_PATH)
        try:
            self.zk.create(path, info.encode(), ephemeral=True)
        except NodeExistsError:
            raise BrokerAlreadyRegistered(
                f"A broker is already registered on the path {path}. This probably indicates that you either "
                "have configured a brokerid that is already in use, or else you have shutdown this broker and "
                "restarted it faster than the zookeeper timeout so it appears to be re-registering.") from None
        return path

    # -------------------------------------------------------------------------------------------- topics
    def topics(self, watch=None) -> list[str]:
        return sorted(self.children(layout.BROKER_TOPICS_PATH, watch=watch))

    def topic(self, topic: str, watch=None) -> TopicAssignment | None:
        return self._decoded(layout.topic_path(topic), TopicAssignment.decode, watch=watch)

    def partitions_for_topics(self, topics: Iterable[str]) -> dict[str, list[int]]:
        """Topic → numerically sorted partition ids; a missing topic has none (Kafka's behaviour).

        A topic node that cannot be decoded has none either, with an error naming it: one broken topic must
        not stop a group's other topics (Kafka 0.8 reads unparsable JSON as no partitions, silently)."""
        out = {}
        for t in topics:
            path = layout.topic_path(t)
            out[t] = partitions_of_topic_node(path, self.read(path))
        return out

    def create_topic_node(self, topic: str, assignment: TopicAssignment, config: dict[str, str] | None = None) -> None:
        """``/brokers/topics/<t>`` and, as Kafka's AdminUtils writes it, ``/config/topics/<t>`` (overrides)."""
        layout.validate_topic(topic)
        self.zk.ensure_path(layout.BROKER_TOPICS_PATH)
        try:
            self.zk.create(layout.topic_path(topic), assignment.encode())
        except NodeExistsError:
            raise TopicExistsError(f"Topic \"{topic}\" already exists.") from None
        self.zk.ensure_path(layout.CONFIG_TOPICS_PATH)
        with contextlib.suppress(NodeExistsError):
            body = layout.kafka_json({"version": 1, "config": config or {}})
            self.zk.create(layout.topic_config_path(topic), body.encode())

    def update_topic_node(self, topic: str, assignment: TopicAssignment) -> None:
        try:
            self.zk.set(layout.topic_path(topic), assignment.encode())
        except NoNodeError:
            raise UnknownTopicError(f"The topic {topic} does not exist") from None

    # --------------------------------------------------------------------------------------------- groups
    def groups(self) -> list[str]:
        return sorted(self.children(layout.CONSUMERS_PATH))

    def consumer_ids(self, group: str, watch=None) -> list[str]:
        return sorted(self.children(GroupPaths(group).ids, watch=watch))

    def consumer_ids_with_version(self, group: str, watch=None) -> tuple[list[str], int]:
        """The members and the child version of ``ids``: equal versions mean the same membership was seen."""
        try:
            children, stat = self.zk.get_children(GroupPaths(group).ids, watch=watch, include_data=True)
        except NoNodeError:
            return [], -1
        return sorted(children), stat.cversion

    def register_consumer(self, group: str, consumer_id: str, registration: ConsumerRegistration,
                          stale_wait_s: float, own_sessions: Collection[int] = ()) -> None:
        """Create the ephemeral registration, as Kafka's ``createEphemeralPathExpectConflictHandleZKBug`` does.

        A node already there is never deleted: it is either ours (this session: a create retried over a
        connection loss — we make it say what we mean), or left by one of our expired sessions (ZOOKEEPER-1740:
        it goes by itself, we wait for it), or another session's. Kafka's consumer waits for the latter forever,
        assuming it is its own; it is also what a process restarted faster than its session timeout sees, so
        we wait ``stale_wait_s`` (longer than a dead session can live) and then raise :class:`ConsumerIdInUse`:
        a second live process has the same ``consumer.id``.
        """
        path = GroupPaths(group).registration(consumer_id)
        data = registration.encode()
        try:
            self.ensure_paths([GroupPaths(group).ids])
        except NoAuthError:
            raise NotAuthorized(GroupPaths(group).ids, "create") from None
        self._warn_if_unprotected(group)
        deadline = runtime.monotonic() + stale_wait_s
        while True:
            try:
                self.zk.create(path, data, ephemeral=True)
                return
            except NodeExistsError:
                pass
            except NoAuthError:
                raise NotAuthorized(path, "create") from None
            try:
                _, stat = self.zk.get(path)
            except NoNodeError:
                continue  # gone meanwhile: create it now
            session = self.zk.client_id[0] if self.zk.client_id else None
            if stat.ephemeralOwner == session:
                self.zk.set(path, data)
                return
            remaining = deadline - runtime.monotonic()
            if stat.ephemeralOwner not in own_sessions and remaining <= 0:
                raise ConsumerIdInUse(
                    f"{path} is held by another live ZooKeeper session (0x{stat.ephemeralOwner:x}) for more than "
                    f"{stale_wait_s:.1f}s: another consumer process runs with consumer.id of {consumer_id}")
            log.info("%s exists (session 0x%x); waiting for it to be deleted", path, stat.ephemeralOwner)
            gone = runtime.Event()
            if self.zk.exists(path, watch=lambda event, gone=gone: gone.set()) is not None:
                gone.wait(max(0.05, min(remaining, 1.0)) if stat.ephemeralOwner not in own_sessions else 1.0)

    def wait_gone(self, path: str, timeout: float) -> bool:
        """Until ``path`` does not exist (an exists-watch wakes the wait, no poll); False when it still does after
        ``timeout`` seconds."""
        deadline = runtime.monotonic() + timeout
        while True:
            gone = runtime.Event()
            if self.zk.exists(path, watch=lambda event, gone=gone: gone.set()) is None:
                return True
            remaining = deadline - runtime.monotonic()
            if remaining <= 0:
                return False
            gone.wait(remaining)

    def registration(self, group: str, consumer_id: str) -> ConsumerRegistration | None:
        return self._decoded(GroupPaths(group).registration(consumer_id), ConsumerRegistration.decode)

    def registration_session(self, group: str, consumer_id: str) -> int | None:
        """The session holding a consumer's registration (the node's ephemeralOwner), None when it has none: what
        the lab's ``expire`` closes from outside (zkconsumer/lab/faults/scenario_lab.py)."""
        stat = self.zk.exists(GroupPaths(group).registration(consumer_id))
        return stat.ephemeralOwner if stat is not None else None

    def owner(self, group: str, topic: str, partition: int) -> str | None:
        return self._decoded(GroupPaths(group).owner(topic, partition), layout.decode_owner)

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        """(topic, partition) → owning thread id, for every owner node of the group."""
        g = GroupPaths(group)
        return self._per_partition(g.owners, g.owners_topic, lambda topic, p: self.owner(group, topic, p))

    def offset(self, group: str, topic: str, partition: int) -> int | None:
        return self._decoded(GroupPaths(group).offset(topic, partition), layout.decode_offset)

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, partition) → committed offset, for every offset node of the group."""
        g = GroupPaths(group)
        return self._per_partition(g.offsets, g.offsets_topic, lambda topic, p: self.offset(group, topic, p))

    def _per_partition(self, root: str, topic_path: Callable[[str], str],
                       read: Callable[[str, int], T | None]) -> dict[tuple[str, int], T]:
        """``read(topic, partition)`` for every ``root/<topic>/<partition>`` node that holds a value: the walk the
        owners and offsets trees share. A child that is not a partition number, or whose node does not decode
        (a :class:`LayoutError` is a ValueError), is left out."""
        out = {}
        for topic in self.children(root):
            for child in self.children(topic_path(topic)):
                with contextlib.suppress(ValueError):
                    p = int(child)
                    value = read(topic, p)
                    if value is not None:
                        out[(topic, p)] = value
        return out

    def write_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """``ZkUtils.updatePersistentPath``: set, creating parents when the node is new."""
        path = GroupPaths(group).offset(topic, partition)
        data = layout.encode_offset(offset)
        try:
            try:
                self.zk.set(path, data)
            except NoNodeError:
                try:
                    self.zk.create(path, data, makepath=True)
                except NodeExistsError:
                    self.zk.set(path, data)
        except NoAuthError:
            raise NotAuthorized(path) from None

    def raise_offset(self, group: str, topic: str, partition: int, offset: int) -> bool:
        """Set the committed offset to ``offset`` only if that moves it forward (a node that does not decode counts
        as none), by versioned compare-and-set: a member committing meanwhile wins and the value is compared again.
        True if this wrote it. For a writer that is not the partition's owner (the migration's rollback)."""
        path = GroupPaths(group).offset(topic, partition)
        data = layout.encode_offset(offset)
        try:
            while True:
                try:
                    current, stat = self.zk.get(path)
                except NoNodeError:
                    try:
                        self.zk.create(path, data, makepath=True)
                        return True
                    except NodeExistsError:
                        continue
                try:
                    if layout.decode_offset(path, current) >= offset:
                        return False
                except ValueError:
                    pass  # malformed: replaced
                try:
                    self.zk.set(path, data, version=stat.version)
                    return True
                except BadVersionError:
                    continue
        except NoAuthError:
            raise NotAuthorized(path) from None

    # ----------------------------------------------------------------------------------------- security
    def group_nodes(self, group: str) -> list[str]:
        """Every node of the group's tree, parents before children (nodes vanishing meanwhile are skipped)."""
        out, todo = [], [GroupPaths(group).root]
        while todo:
            path = todo.pop(0)
            if self.zk.exists(path) is None:
                continue
            out.append(path)
            todo.extend(f"{path}/{child}" for child in sorted(self.children(path)))
        return out

    def unprotected_group_nodes(self, group: str, acl: list[ACL]) -> list[str]:
        """The group's nodes whose ACL is not ``acl``: created before ``zookeeper.set.acl``, or by someone else."""
        out = []
        for path in self.group_nodes(group):
            with contextlib.suppress(NoNodeError):
                if sorted(self.zk.get_acls(path)[0]) != sorted(acl):
                    out.append(path)
        return out

    def set_group_acl(self, group: str, acl: list[ACL]) -> int:
        """Give every node of the group's tree ``acl`` (Kafka's zookeeper-security-migration for one group);
        how many nodes were changed. Needs ADMIN on each: open nodes, or the group's principal."""
        changed = 0
        for path in self.group_nodes(group):
            try:
                if sorted(self.zk.get_acls(path)[0]) != sorted(acl):
                    self.zk.set_acls(path, acl)
                    changed += 1
            except NoNodeError:
                continue  # an ephemeral node gone meanwhile
            except NoAuthError:
                raise NotAuthorized(path, "change the ACL of") from None
        return changed

    def _warn_if_unprotected(self, group: str) -> None:
        """With ``zookeeper.set.acl``, say so when the group's own nodes are not protected: a group created before
        (or squatted by another client) keeps its open ACLs until ``zkconsumer groups secure`` changes them."""
        acl_for = getattr(self.zk, "acl_for", None)
        if acl_for is None:
            return
        g = GroupPaths(group)
        for path in (g.root, g.ids):
            with contextlib.suppress(NoNodeError):
                if sorted(self.zk.get_acls(path)[0]) != sorted(acl_for(path)):
                    log.warning("zookeeper.set.acl=true but %s is not protected by the group's ACL (created "
                                "without it?); 'zkconsumer groups secure --group %s' with the group's credentials "
                                "protects the whole group", path, group)
                    return


def partitions_of_topic_node(path: str, data: bytes | None) -> list[int]:
    """The partition ids a ``/brokers/topics/<t>`` node lists; none when it is absent or broken (logged)."""
    if data is None:
        return []
    try:
        return TopicAssignment.decode(path, data).partition_ids
    except MalformedNodeError as e:
        log.error("%s: the topic has no partitions until the node is fixed", e)
        return []
