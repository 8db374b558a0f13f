"""Shared fixtures: a real ZooKeeper server per test module, a fresh chroot per test.

Starting a JVM costs about a second, so each module shares one server; isolation comes from giving every
test its own chroot, which is how Kafka deployments share an ensemble too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from helpers import fresh_chroot

from zkconsumer.zk.registry import Registry, connect
from zkconsumer.zk.server import ZooKeeperServer


@pytest.fixture(scope="module")
def zk_server() -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(servers=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_connect(zk_server: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """``host:port/chroot`` unique to this test (the chroot node is created)."""
    return fresh_chroot(zk_server.connect_string, request.node.name)


@pytest.fixture
def registry(zk_connect: str) -> Iterator[Registry]:
    client = connect(zk_connect)
    try:
        yield Registry(client)
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="session", autouse=True)
def _quiet_env() -> None:
    """Default data directories (a broker's, ZooKeeper's) under the checkout, one tree per xdist worker: two test
    files that start a server with its default directory may run at once."""
    home = os.path.join(os.getcwd(), ".pytest-zkconsumer-home", os.environ.get("PYTEST_XDIST_WORKER", "main"))
    os.environ.setdefault("ZKCONSUMER_HOME", home)


#: Terminal size variables: an xdist worker is started with COLUMNS=80 and LINES=24 whatever the controller had,
#: and zkconsumer's consoles (zkconsumer/consoles.py) honour COLUMNS, so tests that read what a command printed
#: would see it wrapped at 80 columns only when run in parallel.
TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist, in the controller: hand each worker the controller's terminal size variables (None: unset)."""
    node.workerinput["terminal_size"] = {name: os.environ.get(name) for name in TERMINAL_SIZE}


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker: the controller's terminal size variables, as a run without xdist would have them."""
    given = getattr(config, "workerinput", {}).get("terminal_size")
    for name, value in (given or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def broker(zk_connect: str, tmp_path):
    """The local Kafka-protocol broker, registered in this test's chroot."""
    from zkconsumer.broker import Broker

    b = Broker(zk_connect, data_dir=tmp_path / "broker").start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def spark() -> Iterator:
    """Spark for the fault matrices' verdicts: the run's session when the analysis tests started one already (their
    own fixture, tests/analysis/conftest.py, takes precedence there), else one for this module."""
    from pyspark.sql import SparkSession  # heavy: imported only by the tests that judge with Spark

    from zkconsumer.analysis.spark import build_session

    existing = SparkSession.getActiveSession()
    session = existing or build_session("local[2]", "zkconsumer-tests", shuffle_partitions=2, driver_memory="2g",
                                        extra_conf={"spark.sql.adaptive.enabled": "false"})
    yield session
    if existing is None:
        session.stop()
