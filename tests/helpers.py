"""Test helpers: consumers against a real ZooKeeper, and awaiting conditions with a deadline (no blind sleeps)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from kafka import KafkaProducer
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.zookeeper.connector import ConsumerTimeout, ZookeeperConsumerConnector
from zkconsumer.zk.registry import connect, split_connect


def wait_until(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
               message: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail with ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value: {last!r})")


def read_exactly(sock, n: int) -> bytes:
    """``n`` bytes from a blocking socket (a frame's length, then its body), failing if the peer closes first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "the peer closed the connection"
        buf += chunk
    return buf


def fresh_chroot(connect_string: str, test_name: str) -> str:
    """``connect_string/chroot`` with a new chroot node named after the test, so tests can share a server."""
    name = "".join(c if c.isalnum() else "_" for c in test_name)[:60]
    chroot = f"/t_{name}_{uuid.uuid4().hex[:8]}"
    client = connect(connect_string)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return connect_string + chroot


def expire_session(zk_connect: str, client_id: tuple[int, bytes], expired: Callable[[], Any],
                   attempts: int = 5) -> None:
    """Expire the session ``client_id`` the way kazoo's docs do: open it from a second client and close it there.

    Opening it moves the session's connection to the twin, which can make its owner reconnect and take it back
    before the twin's close request goes out; so the twin connects without a chroot (no ``exists("/")`` round trip
    to lose) and the whole move is retried until ``expired()`` holds.
    """
    hosts, _chroot = split_connect(zk_connect)
    for _ in range(attempts):
        twin = KazooClient(hosts=hosts, client_id=client_id)
        try:
            twin.start(10)
        except (KazooException, KazooTimeoutError):
            pass  # the owner took the session back first; try again
        finally:
            twin.stop()
            twin.close()
        try:
            wait_until(expired, timeout=6.0, message="the session to expire")
            return
        except AssertionError:
            continue
    raise AssertionError(f"session 0x{client_id[0]:x} did not expire after {attempts} attempts")


def consumer(zk_connect: str, group: str, consumer_id: str | None = None, fetch: bool = False,
             **props: Any) -> ZookeeperConsumerConnector:
    settings = {"group.id": group, "zookeeper.connect": zk_connect, "zkconsumer.fetch.enable": fetch,
                "zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 300, "auto.commit.enable": False}
    if consumer_id:
        settings["consumer.id"] = consumer_id
    settings.update({k.replace("_", "."): v for k, v in props.items()})
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties(settings))


@contextmanager
def streaming_members(zk_connect: str, *consumer_ids: str, topics: dict[str, int] | None = None,
                      **props: Any) -> Iterator[list[ZookeeperConsumerConnector]]:
    """Consumers of group g (:func:`consumer`), each with its streams of ``topics`` (one stream of t), made in order;
    every one shut down on the way out however the test ends, even one whose streams failed to start."""
    with ExitStack() as stack:
        members = [stack.enter_context(consumer(zk_connect, "g", cid, **props)) for cid in consumer_ids]
        for member in members:
            member.create_message_streams(topics or {"t": 1})
        yield members


def drain(stream, limit: int | None = None) -> list:
    """Records from ``stream`` until ``limit`` or its ``consumer.timeout.ms`` passes without one."""
    out = []
    try:
        for record in stream:
            out.append(record)
            if limit is not None and len(out) >= limit:
                break
    except ConsumerTimeout:
        pass
    return out


def send_authorized_operations(broker, bits: set[int]) -> None:
    """Make the local ``broker`` answer every DescribeGroups and Metadata with these authorized-operation bits, asked
    for or not, as some Kafka-compatible coordinators do (issue 30: bit 15 is past kafka-python's ACLOperation)."""
    from kafka.protocol.admin import DescribeGroupsRequest
    from kafka.protocol.metadata import MetadataRequest

    def wrap(request_class, stamp: Callable[[Any], None]) -> None:
        handler = broker.apis.get(request_class.API_KEY)

        def handle(ctx, req):
            response = handler.handle(ctx, req)
            stamp(response)
            return response

        broker.apis.register(request_class, handler.min_version, handler.max_version, handle, handler.error_answer)

    def groups(response) -> None:
        for group in response.groups:
            group.authorized_operations = set(bits)

    def metadata(response) -> None:
        response.authorized_operations = set(bits)  # kafka-python's name for the cluster's and each topic's
        for topic in response.topics:
            topic.authorized_operations = set(bits)

    wrap(DescribeGroupsRequest, groups)
    wrap(MetadataRequest, metadata)


def produce_counts(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """``counts[p]`` records (values ``b"0"``, ``b"1"``...) into each partition ``p`` of ``topic``."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2)
    for p, n in counts.items():
        for i in range(n):
            producer.send(topic, value=b"%d" % i, partition=p)
    producer.flush()
    producer.close()
