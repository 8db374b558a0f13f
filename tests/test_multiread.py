"""ZooKeeper's multiRead (zk/multiread.py) against a real server: the same answers as one getData per node."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from zkconsumer.zk import multiread
from zkconsumer.zk.registry import MULTI_READ_CHUNK, Registry


def test_the_test_server_serves_multi_read(registry: Registry) -> None:
    assert multiread.supports_multi_read(registry.zk.hosts)


def test_one_multi_read_answers_as_reads_one_by_one_do(registry: Registry) -> None:
    """Data, empty data and missing nodes, under the test's chroot: the same dictionary as pipelined reads."""
    zk = registry.zk
    zk.create("/r/a", b"alpha", makepath=True)
    zk.create("/r/empty", b"")
    zk.create("/r/none", None)
    paths = ["/r/a", "/r/empty", "/r/none", "/r/missing", "/r"]
    one_by_one = {}
    for path in paths:
        one_by_one[path] = registry.read(path)
    assert multiread.read_data(zk, paths) == one_by_one
    assert one_by_one["/r/a"] == b"alpha" and one_by_one["/r/missing"] is None


def test_read_many_splits_large_reads_into_chunks(registry: Registry) -> None:
    zk = registry.zk
    n = MULTI_READ_CHUNK + 7
    tx = zk.transaction()
    zk.create("/many")
    for i in range(n):
        tx.create(f"/many/n{i}", str(i).encode())
    assert all(r == f"/many/n{i}" for i, r in enumerate(tx.commit()))
    got = registry.read_many([f"/many/n{i}" for i in range(n)] + ["/many/gone"])
    assert len(got) == n + 1 and got["/many/gone"] is None
    assert all(got[f"/many/n{i}"] == str(i).encode() for i in range(n))


def test_a_node_we_may_not_read_raises_as_a_read_does(registry: Registry) -> None:
    """One node's error other than 'no node' fails the whole read, as the pipelined reads did."""
    registry.zk.create("/open", b"1")
    registry.zk.create("/secret", b"2", acl=[make_digest_acl("someone", "pw", all=True)])
    with pytest.raises(NoAuthError):
        registry.read("/secret")
    with pytest.raises(NoAuthError):
        registry.read_many(["/open", "/secret"])


@pytest.mark.parametrize(("answer", "serves"), [
    ("Zookeeper version: 3.9.5-1234, built on 2025-01-01\nLatency min/avg/max: 0/0/0\n", True),
    ("Zookeeper version: 3.6.0--1, built on 02/25/2020\n", True),
    ("Zookeeper version: 3.5.10-1, built on 2022\n", False),
    ("Zookeeper version: 3.4.14-4c25d480e66aadd371de8bd2fd8da255ac140bcf, built on 03/06/2019\n", False),
    ("srvr is not executed because it is not in the whitelist.\n", False),
    ("", False),
])
def test_the_server_version_decides(answer: str, serves: bool) -> None:
    assert multiread.serves_multi_read(answer) is serves


def test_an_ensemble_nobody_answers_for_gets_pipelined_reads() -> None:
    assert multiread.supports_multi_read([("127.0.0.1", 1)], timeout=0.2) is False
