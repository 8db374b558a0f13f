"""The project starts real ZooKeeper servers: standalone, a 3-node ensemble, clear errors when it cannot."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from zkconsumer.cli import main
from zkconsumer.zk.registry import Registry, ZkConnectError, connect
from zkconsumer.zk.server import ZooKeeperError, ZooKeeperServer, find_classpath, free_port


def test_fixture_server_serves_sessions(zk_server: ZooKeeperServer, zk_connect: str) -> None:
    client = connect(zk_connect)
    try:
        client.create("/hello", b"world")
        assert client.get("/hello")[0] == b"world"
    finally:
        client.stop()
        client.close()
    # the chroot isolates: the node lives under the test's chroot on the real server
    root = connect(zk_server.connect_string)
    try:
        chroot = "/" + zk_connect.split("/", 1)[1]
        assert root.exists(chroot + "/hello")
        assert not root.exists("/hello")
    finally:
        root.stop()
        root.close()
    assert zk_server.status()[0]["mode"] == "standalone"


def test_registry_setup_common_paths(registry: Registry) -> None:
    registry.setup_common_paths()
    for path in ("/consumers", "/brokers/ids", "/brokers/topics", "/config/topics"):
        assert registry.zk.exists(path)


def test_connect_error_is_clear() -> None:
    port = free_port()
    with pytest.raises(ZkConnectError, match=f"127.0.0.1:{port}.*zk start"):
        connect(f"127.0.0.1:{port}", connection_timeout_ms=300)


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ZooKeeperError, match="apt-get install -y default-jre-headless"):
        ZooKeeperServer().start()


def test_jar_search_order(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("ZOOKEEPER_CLASSPATH", "/x/y.jar")
    assert find_classpath() == ("/x/y.jar", "ZOOKEEPER_CLASSPATH")
    monkeypatch.delenv("ZOOKEEPER_CLASSPATH")
    monkeypatch.setenv("ZOOKEEPER_PATH", str(tmp_path))
    with pytest.raises(ZooKeeperError, match="holds no zookeeper"):
        find_classpath()
    (tmp_path / "zookeeper-3.9.0.jar").write_bytes(b"")
    assert find_classpath()[1].startswith("ZOOKEEPER_PATH")
    monkeypatch.delenv("ZOOKEEPER_PATH")
    cp, source = find_classpath()
    assert source.startswith(("Debian", "pyspark"))


def test_busy_port_is_refused(zk_server: ZooKeeperServer) -> None:
    with pytest.raises(ZooKeeperError, match="already in use"):
        ZooKeeperServer(port=zk_server.nodes[0].client_port).start()


@pytest.mark.ensemble
def test_a_start_that_fails_or_is_interrupted_leaves_no_jvm(tmp_path) -> None:
    """A start cut short (here: not serving within the time allowed; Ctrl-C or SIGTERM while waiting takes the
    same path) stops the JVM it spawned: the caller never got the server to stop it."""
    server = ZooKeeperServer(data_dir=tmp_path / "zk")
    with pytest.raises(ZooKeeperError):
        server.start(timeout=0.0)
    [node] = server.nodes
    assert node.pid is None and not server._procs, "the spawned JVM was stopped"


def test_ensemble_survives_one_node_and_rejoins() -> None:
    with ZooKeeperServer(servers=3) as zk:
        modes = sorted(s["mode"] for s in zk.status())
        assert modes == ["follower", "follower", "leader"]
        client = KazooClient(hosts=zk.connect_string, timeout=10)
        client.start(10)
        try:
            client.create("/before", b"1")
            leader = next(s["server"] for s in zk.status() if s["mode"] == "leader")
            zk.stop_node(leader, kill=True)
            # a quorum of 2 still serves writes; the client may have to reconnect first (ConnectionLoss)
            def create_during() -> None:
                with contextlib.suppress(NodeExistsError):  # an attempt lost with the connection may have landed
                    client.create("/during", b"2")

            client.retry(create_during)
            zk.start_node(leader)
            assert sorted(s["mode"] for s in zk.status()) == ["follower", "follower", "leader"]
            assert client.retry(client.get, "/during")[0] == b"2"
        finally:
            client.stop()
            client.close()


def test_cli_start_status_stop(tmp_path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = Path("zk")  # a relative --data-dir, as a user types it
    assert main(["zk", "start", "--port", "0", "--data-dir", str(data), "--json"]) == 0
    started = json.loads(capsys.readouterr().out)
    try:
        assert main(["zk", "start", "--port", "0", "--data-dir", str(data)]) == 1  # already running
        assert main(["zk", "status", "--data-dir", str(data), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["connect"] == started["connect"] and status["servers"][0]["mode"] == "standalone"
        client = connect(started["connect"])  # a real, detached server
        client.stop()
        client.close()
    finally:
        assert main(["zk", "stop", "--data-dir", str(data)]) == 0
    assert main(["zk", "status", "--data-dir", str(data)]) == 3
    assert not os.path.exists(data / "zkconsumer-zk.json")
