"""The loopback TCP proxy between a ZooKeeper client and a real server: pass, drop, blackhole.

The point of the proxy is the blackhole: the client's session expires on the server while the client itself
only notices that its connection went quiet (kazoo: SUSPENDED), and learns of the expiry (LOST) once it can
reach the server again.
"""

from __future__ import annotations

import socket

import pytest
from helpers import wait_until
from kazoo.client import KazooClient, KazooState

from zkconsumer.lab.faults.proxy import LinkMode, TcpProxy
from zkconsumer.zk.registry import connect


@pytest.fixture
def proxy(zk_server):
    node = zk_server.nodes[0]
    with TcpProxy(("127.0.0.1", node.client_port)) as p:
        yield p


def client_through(proxy: TcpProxy, chroot: str, timeout_ms: int = 2000) -> tuple[KazooClient, list[str]]:
    client = KazooClient(hosts=proxy.address + chroot, timeout=timeout_ms / 1000.0,
                         connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.3})
    states: list[str] = []
    client.add_listener(states.append)
    client.start(timeout=10)
    return client, states


def test_pass_forwards_and_drop_resets(proxy: TcpProxy, zk_connect: str) -> None:
    chroot = "/" + zk_connect.split("/", 1)[1]
    client, states = client_through(proxy, chroot)
    try:
        client.create("/a", b"1")
        assert client.get("/a")[0] == b"1"
        proxy.set_mode(LinkMode.DROP)
        wait_until(lambda: KazooState.SUSPENDED in states, timeout=10, message="SUSPENDED after the reset")
        accepted = proxy.accepted
        wait_until(lambda: proxy.accepted > accepted + 1, timeout=10, message="reconnects refused by the proxy")
        assert proxy.connections() == 0
        proxy.set_mode(LinkMode.PASS)
        wait_until(lambda: client.connected and states[-1] == KazooState.CONNECTED, timeout=10,
                   message="reconnected on the same session")
        assert KazooState.LOST not in states
        assert client.get("/a")[0] == b"1"
    finally:
        proxy.set_mode(LinkMode.PASS)
        client.stop()
        client.close()


def test_blackhole_lets_the_session_expire_on_the_server(proxy: TcpProxy, zk_connect: str) -> None:
    chroot = "/" + zk_connect.split("/", 1)[1]
    client, states = client_through(proxy, chroot)
    observer = connect(zk_connect)
    try:
        client.create("/eph", b"x", ephemeral=True)
        assert observer.exists("/eph") is not None
        proxy.set_mode(LinkMode.BLACKHOLE)
        wait_until(lambda: KazooState.SUSPENDED in states, timeout=10, message="the client notices the silence")
        accepted = proxy.accepted
        wait_until(lambda: proxy.accepted > accepted, timeout=10, message="a reconnect accepted, never answered")
        wait_until(lambda: observer.exists("/eph") is None, timeout=15, message="the server expired the session")
        assert KazooState.LOST not in states  # the client cannot know yet
        proxy.set_mode(LinkMode.PASS)
        wait_until(lambda: KazooState.LOST in states, timeout=15, message="LOST once it reaches the server")
    finally:
        proxy.set_mode(LinkMode.PASS)
        client.stop()
        client.close()
        observer.stop()
        observer.close()


def test_blackhole_accepts_new_connections_without_answering(proxy: TcpProxy) -> None:
    proxy.set_mode(LinkMode.BLACKHOLE)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=2) as s:
        s.sendall(b"ruok")
        s.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s.recv(10)
    with pytest.raises(ValueError):
        proxy.set_mode("cut")  # type: ignore[arg-type]


def test_latency_delays_every_answer_and_keeps_their_order(proxy: TcpProxy, zk_connect: str) -> None:
    """slow-zk's link: each request and its answer held back, in order; back at full speed once set to 0."""
    import time

    chroot = "/" + zk_connect.split("/", 1)[1]
    client, _states = client_through(proxy, chroot, timeout_ms=6000)
    try:
        client.create("/slow", b"0")

        def round_trip() -> float:
            started = time.monotonic()
            client.get("/slow")
            return time.monotonic() - started

        proxy.set_latency(150)
        assert proxy.latency_ms == 150
        assert round_trip() >= 0.29  # 150 ms each way
        asyncs = [client.set_async("/slow", str(i).encode()) for i in range(1, 21)]
        assert [a.get(10).version for a in asyncs] == list(range(1, 21))  # in order, every one
        proxy.set_latency(0)
        assert round_trip() < 0.15
        with pytest.raises(ValueError):
            proxy.set_latency(-1)
    finally:
        proxy.set_latency(0)
        client.stop()
        client.close()
