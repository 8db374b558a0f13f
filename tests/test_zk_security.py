"""ZooKeeper security (zookeeper.set.acl): digest and SASL DIGEST-MD5 credentials, group nodes writable by the
group's principal only, an unauthenticated client refused (NoAuth) with the group unharmed, tools authenticating
like the consumers. Real ZooKeeper servers, real consumers."""

from __future__ import annotations

import os
import socket
import stat
import time
from collections.abc import Iterator

import pytest
from helpers import consumer, fresh_chroot, wait_until
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

from zkconsumer.cli import main
from zkconsumer.config import ConfigError, ConsumerConfig
from zkconsumer.errors import ConsumerRebalanceFailed, NotAuthorized
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry, ZkAuthFailed
from zkconsumer.zk.security import Credentials, ZkSecurity
from zkconsumer.zk.server import ZooKeeperServer
from zkconsumer.zk.topics import create_topic

SECURE = {"zookeeper.set.acl": "true", "zkconsumer.zookeeper.digest": "alice:s3cret"}
ALICE = ZkSecurity(digest=Credentials("alice", "s3cret"), set_acl=True)
G = GroupPaths("g")


# ------------------------------------------------------------------------------------------ pure: the layout
def test_acl_layout_keeps_consumers_open_and_protects_each_group() -> None:
    group_acl = [make_digest_acl("alice", "s3cret", all=True), *READ_ACL_UNSAFE]
    assert ALICE.group_acl() == group_acl
    for path in ("/consumers/g", G.ids, G.registration("g_a"), G.owner("t", 0), G.offset("t", 3)):
        assert ALICE.acl_for(path) == group_acl, path
    # /consumers is shared by every group (Kafka kept it open too); nodes outside groups stay open
    for path in ("/consumers", "/consumers/", "/brokers/ids", "/brokers/topics/t", "/consumersx/g"):
        assert ALICE.acl_for(path) == OPEN_ACL_UNSAFE, path
    # credentials without zookeeper.set.acl: authenticate only, nodes as before
    assert ZkSecurity(digest=Credentials("alice", "s3cret")).acl_for(G.ids) is None
    assert ZkSecurity(sasl=Credentials("bob", "pw"), set_acl=True).principal_acls()[0].id.scheme == "sasl"


def test_security_properties_validated_and_masked() -> None:
    base = {"group.id": "g"}
    config = ConsumerConfig.from_properties({**base, **SECURE})
    assert config.zk_security == ALICE
    assert config.as_dict()["zkconsumer.zookeeper.digest"] == "alice:******"
    assert "s3cret" not in repr(config.zk_security)
    assert not config.warnings() or all("zookeeper" not in w for w in config.warnings())
    assert ConsumerConfig.from_properties(base).zk_security == ZkSecurity()
    with pytest.raises(ConfigError, match="needs credentials"):
        ConsumerConfig.from_properties({**base, "zookeeper.set.acl": "true"})
    with pytest.raises(ConfigError, match="user:password"):
        ConsumerConfig.from_properties({**base, "zkconsumer.zookeeper.digest": "alice"})
    with pytest.raises(ConfigError, match="true or false"):
        ConsumerConfig.from_properties({**base, "zookeeper.set.acl": "yes"})


# ------------------------------------------------------------------------------- real ZooKeeper and consumers
@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])  # atomic (multi-op) and one-by-one claims
def test_unauthenticated_client_refused_and_group_unharmed(registry: Registry, zk_connect: str, profile) -> None:
    create_topic(registry, "t", 4)
    with Registry.open(zk_connect, security=ALICE) as alice, \
            consumer(zk_connect, "g", "a", zkconsumer_profile=profile, **SECURE) as a, \
            consumer(zk_connect, "g", "b", zkconsumer_profile=profile, **SECURE) as b:
        alice.write_offset("g", "t", 0, 42)
        a.create_message_streams({"t": 1})
        b.create_message_streams({"t": 1})
        owners = wait_until(lambda: (o := registry.owners("g")) and len(o) == 4 and len(set(o.values())) == 2 and o,
                            message="both members own partitions")
        protected = ["/consumers/g", G.ids, G.registration("g_a"), G.owners, G.owners_topic("t"), G.owner("t", 0),
                     G.offsets, G.offsets_topic("t"), G.offset("t", 0)]
        for path in protected:
            assert alice.zk.get_acls(path)[0] == ALICE.group_acl(), path
        assert registry.zk.get_acls("/consumers")[0] == OPEN_ACL_UNSAFE

        # anyone may read: the tools work without credentials
        assert registry.offset("g", "t", 0) == 42
        # nobody else may write, create, delete or re-open a node
        attacks = {
            "steal an owner node": lambda: registry.zk.set(G.owner("t", 0), b"mallory-0"),
            "delete an owner node": lambda: registry.zk.delete(G.owner("t", 1)),
            "claim a partition": lambda: registry.zk.create(G.owner("t", 9), b"mallory-0", ephemeral=True),
            "rewind an offset": lambda: registry.zk.set(G.offset("t", 0), b"0"),
            "register": lambda: registry.zk.create(G.registration("mallory"), b"{}", ephemeral=True),
            "evict a member": lambda: registry.zk.delete(G.registration("g_a")),
            "open the ACL": lambda: registry.zk.set_acls("/consumers/g", OPEN_ACL_UNSAFE),
            "delete the group": lambda: registry.zk.delete("/consumers/g", recursive=True),
        }
        for name, attack in attacks.items():
            with pytest.raises(NoAuthError):
                attack()
                pytest.fail(f"{name} was allowed")
        with pytest.raises(NotAuthorized, match="NoAuth"):
            registry.write_offset("g", "t", 0, 0)
        # consumers without the group's credentials, or with a wrong password, cannot join
        for props in ({}, {"zkconsumer.zookeeper.digest": "alice:wrong"}):
            with consumer(zk_connect, "g", "mallory", **props) as mallory, \
                    pytest.raises(NotAuthorized, match="ids/g_mallory"):
                mallory.create_message_streams({"t": 1})

        assert registry.owners("g") == owners
        assert registry.consumer_ids("g") == ["g_a", "g_b"]
        assert registry.offset("g", "t", 0) == 42
        b.shutdown()
        # the group still works: a takes over b's partitions (deleting and creating owner nodes under the ACL)
        wait_until(lambda: set(registry.owners("g").values()) == {"g_a-0"} and len(registry.owners("g")) == 4,
                   message="a owns every partition")


def test_tools_authenticate_like_the_consumers(registry: Registry, zk_connect: str, tmp_path, capsys) -> None:
    create_topic(registry, "t", 2)
    with Registry.open(zk_connect, security=ALICE) as alice:
        alice.write_offset("g", "t", 0, 5)
    export = tmp_path / "offsets.txt"
    export.write_text(f"{G.offset('t', 0)}:7\n{G.offset('t', 1)}:3\n")
    props = tmp_path / "consumer.properties"
    props.write_text("group.id=g\nzookeeper.set.acl=true\nzkconsumer.zookeeper.digest=alice:s3cret\n")

    assert main(["offsets", "import", "--zookeeper", zk_connect, "--input-file", str(export)]) == 1
    assert "NoAuth" in capsys.readouterr().err
    assert registry.offsets("g") == {("t", 0): 5}
    assert main(["offsets", "import", "--zookeeper", zk_connect, "--input-file", str(export),
                 "--consumer.config", str(props)]) == 0
    assert registry.offsets("g") == {("t", 0): 7, ("t", 1): 3}
    with Registry.open(zk_connect, security=ALICE) as alice:
        assert alice.zk.get_acls(G.offset("t", 1))[0] == ALICE.group_acl()  # created by the tool, group's ACL

    capsys.readouterr()
    assert main(["offsets", "export", "--zookeeper", zk_connect, "--group", "g"]) == 0  # reading needs nothing
    assert capsys.readouterr().out.splitlines() == [f"{G.offset('t', 0)}:7", f"{G.offset('t', 1)}:3"]

    assert main(["groups", "delete", "--zookeeper", zk_connect, "--group", "g"]) == 1
    assert "NoAuth" in capsys.readouterr().err
    assert registry.offsets("g") == {("t", 0): 7, ("t", 1): 3}
    assert main(["groups", "delete", "--zookeeper", zk_connect, "--group", "g",
                 "--property", "zkconsumer.zookeeper.digest=alice:s3cret"]) == 0
    assert "g" not in registry.groups()
    assert main(["groups", "delete", "--zookeeper", zk_connect, "--group", "g",
                 "--property", "zookeeper.set.acl=true"]) == 1
    assert "needs credentials" in capsys.readouterr().err


def test_group_created_open_is_reported_then_secured(registry: Registry, zk_connect: str, caplog, capsys) -> None:
    create_topic(registry, "t", 2)
    registry.write_offset("g", "t", 0, 3)  # a group from before zookeeper.set.acl: every node open
    secure_cli = ["groups", "secure", "--zookeeper", zk_connect, "--group", "g"]
    with consumer(zk_connect, "g", "a", **SECURE) as a:
        a.create_message_streams({"t": 1})
        assert "is not protected by the group's ACL" in caplog.text
        wait_until(lambda: len(registry.owners("g")) == 2, message="a owns both partitions")
        with Registry.open(zk_connect, security=ALICE) as alice:
            assert alice.unprotected_group_nodes("g", ALICE.group_acl()) == ["/consumers/g", G.offsets,
                                                                             G.offsets_topic("t"), G.offset("t", 0)]
            registry.zk.set(G.offset("t", 0), b"1")  # still open: anyone may rewind it

            assert main([*secure_cli, "--property", "zkconsumer.zookeeper.digest=alice:s3cret"]) == 1
            assert "needs zookeeper.set.acl=true" in capsys.readouterr().err
            assert main([*secure_cli, *sum((["--property", f"{k}={v}"] for k, v in SECURE.items()), [])]) == 0
            assert "4 node(s) of group g protected (digest alice" in capsys.readouterr().out
            assert alice.unprotected_group_nodes("g", ALICE.group_acl()) == []
        with pytest.raises(NoAuthError):
            registry.zk.set(G.offset("t", 0), b"0")
        with consumer(zk_connect, "g", "b", **SECURE) as b:  # the group still rebalances under its ACL
            b.create_message_streams({"t": 1})
            wait_until(lambda: set(registry.owners("g").values()) == {"g_a-0", "g_b-0"}, message="a and b own one")
    assert main([*secure_cli, "--unsecure"]) == 1  # only the principal may change the ACL
    assert main([*secure_cli, "--unsecure", "--property", "zkconsumer.zookeeper.digest=alice:s3cret"]) == 0
    registry.zk.set(G.offset("t", 0), b"0")


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_squatted_owners_node_fails_the_rebalance(registry: Registry, zk_connect: str, profile) -> None:
    """In a group not yet secured, another principal creates owners/t closed to us: the claims are refused
    (NoAuth) and the rebalance fails after its retries, instead of waiting for a holder that does not exist
    (the multi-op claim used to retry at once, forever)."""
    create_topic(registry, "t", 2)
    registry.zk.ensure_path(G.owners)  # open, as a group from before zookeeper.set.acl
    mallory = ZkSecurity(digest=Credentials("mallory", "pw"), set_acl=True)
    with Registry.open(zk_connect, security=mallory) as m:
        m.zk.create(G.owners_topic("t"), acl=mallory.group_acl())
    with consumer(zk_connect, "g", "a", zkconsumer_profile=profile, rebalance_max_retries=2, **SECURE) as a, \
            pytest.raises(ConsumerRebalanceFailed, match="NoAuth"):
        a.create_message_streams({"t": 1})
    assert registry.owners("g") == {}


# --------------------------------------------------------------------------- SASL DIGEST-MD5 (its own server)
@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory) -> Iterator[ZooKeeperServer]:
    """Started as a user would: ``zkconsumer zk start --sasl-user ...`` (detached), then re-attached."""
    data = tmp_path_factory.mktemp("zk-sasl")
    assert main(["zk", "start", "--port", "0", "--data-dir", str(data), "--sasl-user", "alice:s3cret",
                 "--sasl-user", "bob:hunter2"]) == 0
    server = ZooKeeperServer.from_state(data)
    try:
        yield server
    finally:
        server.stop()


def test_sasl_server_restarts_with_sasl(sasl_server: ZooKeeperServer) -> None:
    assert stat.S_IMODE(os.stat(sasl_server.jaas_file).st_mode) == 0o600  # it holds the passwords
    assert "s3cret" not in (sasl_server.data_dir / "zkconsumer-zk.json").read_text()
    sasl_server.stop_node(1)
    sasl_server.start_node(1)  # from the state file: the JAAS file is reused
    with Registry.open(sasl_server.connect_string, security=ZkSecurity(sasl=Credentials("bob", "hunter2"))) as bob:
        assert bob.zk.exists("/") is not None
    with pytest.raises(ZkAuthFailed):
        Registry.open(sasl_server.connect_string, security=ZkSecurity(sasl=Credentials("bob", "x"))).__enter__()


def test_sasl_refusal_is_auth_failed_whichever_thread_runs_first(sasl_server: ZooKeeperServer, monkeypatch) -> None:
    """kazoo reports CONNECTED before its SASL exchange, and AUTH_FAILED (not connected) right after a refusal. Its
    ``start`` waited for the first and then checked for the second, so a loaded machine, where the connection
    thread ran the whole refused handshake before the starting thread looked, turned a refusal into a connection
    timeout: at once, or after the whole wait when the starting thread had not begun to wait yet. That last
    ordering, forced: the connection thread runs to its end before the start waits. Still AUTH_FAILED, at once."""
    start_async = KazooClient.start_async

    def start_then_let_the_connection_run(self: KazooClient):  # noqa: ANN202 - kazoo's event
        started = start_async(self)
        self._connection._connection_routine.join(30)  # a refused handshake ends the connection loop: kazoo stops
        assert not self._connection._connection_routine.is_alive(), "the connection loop did not end on a refusal"
        return started

    monkeypatch.setattr(KazooClient, "start_async", start_then_let_the_connection_run)
    began = time.monotonic()
    with pytest.raises(ZkAuthFailed, match="AUTH_FAILED"):
        Registry.open(sasl_server.connect_string, security=ZkSecurity(sasl=Credentials("bob", "x")),
                      connection_timeout_ms=60_000).__enter__()
    assert time.monotonic() - began < 30  # not the connection timeout's 60 s: the refusal was seen, not waited out


def test_tools_take_the_zookeeper_timeouts_from_their_properties(capsys) -> None:
    with socket.socket() as s:  # a port nothing listens on: every attempt is refused, until the timeout
        s.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{s.getsockname()[1]}"
    assert main(["groups", "list", "--zookeeper", nowhere, "--property", "zookeeper.connection.timeout.ms=300"]) == 1
    assert "within 0.3s (zookeeper.connection.timeout.ms)" in capsys.readouterr().err
    assert main(["groups", "delete", "--zookeeper", nowhere, "--group", "g",
                 "--property", "zookeeper.session.timeout.ms=400"]) == 1  # the connection timeout follows it
    assert "within 0.4s" in capsys.readouterr().err
    assert main(["groups", "list", "--zookeeper", nowhere, "--property", "zookeeper.connection.timeout.ms=x"]) == 1
    assert "zookeeper.connection.timeout.ms must be an integer" in capsys.readouterr().err


def test_sasl_group_protected_from_other_principals(sasl_server: ZooKeeperServer, request, capsys) -> None:
    zk_connect = fresh_chroot(sasl_server.connect_string, request.node.name)
    secure = {"zookeeper.set.acl": "true", "zkconsumer.zookeeper.sasl": "alice:s3cret"}
    with Registry.open(zk_connect) as anyone:
        create_topic(anyone, "t", 2)
    with Registry.open(zk_connect, security=ZkSecurity(sasl=Credentials("bob", "hunter2"))) as bob, \
            consumer(zk_connect, "g", "a", **secure) as a:
        a.create_message_streams({"t": 1})
        owners = wait_until(lambda: len(o := bob.owners("g")) == 2 and o, message="a owns both partitions")
        acl = bob.zk.get_acls(G.owner("t", 0))[0]
        assert acl == ZkSecurity(sasl=Credentials("alice", "s3cret"), set_acl=True).group_acl()
        assert acl[0].id.scheme == "sasl" and acl[0].id.id == "alice"
        # bob is authenticated, but not the group's principal: read yes, write no
        with pytest.raises(NoAuthError):
            bob.zk.set(G.owner("t", 0), b"bob-0")
        with pytest.raises(NotAuthorized):
            bob.write_offset("g", "t", 0, 1)
        # a wrong password is refused at connection, before anything is touched
        with pytest.raises(ZkAuthFailed, match="AUTH_FAILED"):
            consumer(zk_connect, "g", "m", **{**secure, "zkconsumer.zookeeper.sasl": "alice:wrong"})
        assert main(["verify", "--zookeeper", zk_connect, "--group", "g"]) == 0
        assert bob.owners("g") == owners
    # the tools authenticate the same way: refused without credentials, with a wrong password, then done
    delete = ["groups", "delete", "--zookeeper", zk_connect, "--group", "g"]
    capsys.readouterr()
    assert main(delete) == 1
    assert "NoAuth" in capsys.readouterr().err
    assert main([*delete, "--property", "zkconsumer.zookeeper.sasl=alice:wrong"]) == 1
    assert "AUTH_FAILED" in capsys.readouterr().err
    assert main([*delete, "--property", "zkconsumer.zookeeper.sasl=alice:s3cret"]) == 0
    with Registry.open(zk_connect) as anyone:
        assert "g" not in anyone.groups()
