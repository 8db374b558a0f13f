"""A further listener of zkconsumer's broker (Kafka's ``listeners`` / ``advertised.listeners`` for one more name):
what the lab's ``cut-broker`` and ``slow-broker`` rest on. A client that comes through it is told the broker is at
the advertised address, in Metadata and in FindCoordinator, so a proxy there carries all its connections; a
client of the main listener is told the registered address as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from zkconsumer.broker import Broker
from zkconsumer.broker.broker import BrokerConfigError
from zkconsumer.broker.client import RawClient
from zkconsumer.cli import CliError
from zkconsumer.cli.broker import listener_options
from zkconsumer.lab.faults.proxy import TcpProxy
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import free_port
from zkconsumer.zk.topics import create_topic


def _broker_address(bootstrap: str) -> tuple[str, int]:
    with RawClient.to(bootstrap) as raw:
        answer = raw.call(MetadataRequest(topics=[]), 1)
    (node,) = answer.brokers
    return node[1], node[2]


def _coordinator_address(bootstrap: str) -> tuple[str, int]:
    with RawClient.to(bootstrap) as raw:
        answer = raw.call(FindCoordinatorRequest(key="g"), 1)
    assert answer.error_code == 0, answer
    return answer.host, answer.port


def test_a_client_of_a_further_listener_reaches_the_broker_only_through_its_advertised_address(
        zk_connect: str, tmp_path: Path) -> None:
    port = free_port()
    with TcpProxy(("127.0.0.1", port)) as proxy, \
            Broker(zk_connect, data_dir=tmp_path / "b", listeners={"c1": (port, proxy.address)}) as broker:
        assert broker.listener_port("c1") == port
        main = ("127.0.0.1", broker.port)
        advertised = ("127.0.0.1", int(proxy.address.rpartition(":")[2]))
        assert _broker_address(broker.bootstrap) == main
        assert _coordinator_address(broker.bootstrap) == main
        assert _broker_address(f"127.0.0.1:{port}") == advertised  # straight to the listener: named by the proxy
        assert _coordinator_address(proxy.address) == advertised
        with Registry.open(zk_connect) as reg:
            create_topic(reg, "t", 1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        producer.send("t", b"x", partition=0).get(10)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=proxy.address, auto_offset_reset="earliest",
                                 consumer_timeout_ms=10000)
        try:
            consumer.assign([TopicPartition("t", 0)])
            assert [m.value for m in consumer] == [b"x"]
            accepted = proxy.accepted
            assert accepted >= 2  # the bootstrap, then the broker by the address Metadata gave: the proxy again
        finally:
            consumer.close()


def test_a_listener_that_cannot_be_served_is_refused(zk_connect: str) -> None:
    with pytest.raises(BrokerConfigError, match="host:port, not 'nowhere'"):
        Broker(zk_connect, listeners={"c1": (0, "nowhere")})
    assert listener_options(["c1=41234,127.0.0.1:51234"]) == {"c1": (41234, "127.0.0.1:51234")}
    for bad in ("c1", "c1=41234", "c1=x,127.0.0.1:1", "c1=1,127.0.0.1", "=1,h:2"):
        with pytest.raises(CliError, match="NAME=PORT,HOST:PORT"):
            listener_options([bad])
    with pytest.raises(CliError, match="given twice"):
        listener_options(["c1=1,h:2", "c1=3,h:4"])
