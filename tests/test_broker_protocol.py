"""The broker on the wire and in ZooKeeper: registration, versions, errors, Metadata, Produce/Fetch/ListOffsets."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator

import pytest
from helpers import expire_session
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from zkconsumer.broker import Broker
from zkconsumer.broker.client import RawClient
from zkconsumer.broker.handlers import VERSIONS
from zkconsumer.coordinator import kip848
from zkconsumer.coordinator.apis import VERSIONS as GROUP_VERSIONS
from zkconsumer.zk import layout
from zkconsumer.zk.registry import Registry, connect, split_connect
from zkconsumer.zk.topics import add_partitions, create_topic


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    done = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        done.wait(0.02)


@pytest.fixture
def broker(zk_connect: str) -> Iterator[Broker]:
    with Broker(zk_connect) as b:
        yield b


def make_topic(broker: Broker, registry: Registry, topic: str, partitions: int) -> None:
    create_topic(registry, topic, partitions)
    assert broker.cluster.wait_for(lambda s: len(s.topics.get(topic, layout.TopicAssignment({})).partitions)
                                   == partitions, 10)


def records(*values: bytes, ts0: int = 1000) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i, v in enumerate(values):
        builder.append(timestamp=ts0 + i, key=None, value=v, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce_request(topic: str, partition: int, data: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=data)])])


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 0, min_bytes: int = 0,
                  max_bytes: int = 1 << 20) -> FetchRequest:
    Topic = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            Topic(topic=topic, partitions=[Topic.FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])],
                        forgotten_topics_data=[], rack_id="")


def list_offsets_request(topic: str, partition: int, timestamp: int) -> ListOffsetsRequest:
    Topic = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[Topic(name=topic, partitions=[
        Topic.ListOffsetsPartition(partition_index=partition, timestamp=timestamp, max_num_offsets=1)])])


# ----------------------------------------------------------------------------------------------- ZooKeeper

def test_registers_version_4_json_as_ephemeral_node(broker: Broker, registry: Registry) -> None:
    data, stat = registry.zk.get("/brokers/ids/0")
    info = layout.BrokerInfo.decode("/brokers/ids/0", data)
    assert info.version == 4
    assert info.endpoints == (f"PLAINTEXT://127.0.0.1:{broker.port}",)
    assert (info.host, info.port) == ("127.0.0.1", broker.port)
    assert info.listener_security_protocol_map == {"PLAINTEXT": "PLAINTEXT"}
    assert stat.ephemeralOwner == broker.zk.client_id[0]
    expected = layout.BrokerInfo.plaintext(0, "127.0.0.1", broker.port, timestamp_ms=int(info.timestamp))
    assert data == expected.encode()


def test_stop_removes_the_registration(zk_connect: str, registry: Registry) -> None:
    b = Broker(zk_connect, broker_id=3).start()
    assert registry.broker_ids() == [3]
    b.stop()
    assert registry.broker_ids() == []


def test_reregisters_after_session_expiry(broker: Broker, registry: Registry, zk_connect: str) -> None:
    old_session = broker.zk.client_id
    expire_session(zk_connect, old_session, lambda: (broker.zk.client_id or old_session)[0] != old_session[0])

    def registered_by_new_session() -> bool:
        stat = registry.zk.exists("/brokers/ids/0")
        return stat is not None and stat.ephemeralOwner == (broker.zk.client_id or (None,))[0]

    wait_until(registered_by_new_session, what="re-registration")
    with RawClient.to(broker.bootstrap) as c:
        assert c.call(MetadataRequest(topics=None), 12).brokers[0].node_id == 0


def test_waits_for_a_stale_registration_of_its_id(zk_connect: str, registry: Registry) -> None:
    hosts, chroot = split_connect(zk_connect)
    stale = connect(zk_connect)
    Registry(stale).register_broker(layout.BrokerInfo.plaintext(0, "127.0.0.1", 1))
    threading.Timer(0.5, lambda: (stale.stop(), stale.close())).start()
    with Broker(zk_connect) as b:
        data, stat = registry.zk.get("/brokers/ids/0")
        assert stat.ephemeralOwner == b.zk.client_id[0]


# ---------------------------------------------------------------------------------------------- versions

def test_api_versions_lists_the_table(broker: Broker) -> None:
    with RawClient.to(broker.bootstrap) as c:
        for version in (0, 1, 2, 3):
            r = c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), version)
            assert r.error_code == 0
            listed = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
            expected = {cls.API_KEY: (lo, hi) for cls, lo, hi in [*VERSIONS.values(), *GROUP_VERSIONS.values()]}
            expected[kip848.API_KEY] = (kip848.MIN_VERSION, kip848.MAX_VERSION)  # listed to be refused out loud
            assert listed == expected


def test_api_versions_too_new_gets_v0_error_35(broker: Broker) -> None:
    with RawClient.to(broker.bootstrap) as c:
        r = c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
        assert r.error_code == 35 and r.version == 0
        assert {k.api_key for k in r.api_keys} >= {0, 1, 2, 3, 18}


def test_unknown_api_key_gets_35_and_connection_stays_usable(broker: Broker) -> None:
    with RawClient.to(broker.bootstrap) as c:
        request = DescribeConfigsRequest(resources=[])  # the configs APIs are not served
        c.send(request, 0)
        frame = c.read_frame()
        assert struct.unpack(">ih", frame) == (request.header.correlation_id, 35)
        assert c.call(ApiVersionsRequest(), 0).error_code == 0


def test_unsupported_version_of_known_api_answers_35_per_partition(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "t", 1)
    with RawClient.to(broker.bootstrap) as c:
        r = c.call(produce_request("t", 0, records(b"x")), 10)  # above Produce v9 (v0-v2: test_broker_legacy)
        assert r.responses[0].partition_responses[0].error_code == 35
        assert c.call(list_offsets_request("t", 0, -1), 6).topics[0].partitions[0].offset == 0


# ---------------------------------------------------------------------------------------------- Metadata

@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_metadata_lists_broker_controller_and_partitions(broker: Broker, registry: Registry, version: int) -> None:
    make_topic(broker, registry, "orders", 3)
    assert broker.cluster.wait_for(lambda s: s.controller_id == 0, 10)
    with RawClient.to(broker.bootstrap) as c:
        r = c.call(MetadataRequest(topics=None if version else []), version)
    assert [(b.node_id, b.host, b.port) for b in r.brokers] == [(0, "127.0.0.1", broker.port)]
    if version >= 1:
        assert r.controller_id == 0
    if version >= 2:
        assert r.cluster_id
    (topic,) = [t for t in r.topics if t.name == "orders"]
    assert topic.error_code == 0
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in topic.partitions] == [
        (0, 0, [0], [0]), (1, 0, [0], [0]), (2, 0, [0], [0])]


def test_metadata_unknown_topic_is_error_3_and_not_created(broker: Broker, registry: Registry) -> None:
    with RawClient.to(broker.bootstrap) as c:
        r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="nope")],
                                   allow_auto_topic_creation=True), 12)
    assert [(t.name, t.error_code) for t in r.topics] == [("nope", 3)]
    assert registry.topic("nope") is None


def test_metadata_auto_creates_when_enabled(zk_connect: str, registry: Registry) -> None:
    with Broker(zk_connect, auto_create_topics=True, num_partitions=2) as b, RawClient.to(b.bootstrap) as c:
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                              allow_auto_topic_creation=True)
        assert c.call(req, 12).topics[0].error_code == 5  # LEADER_NOT_AVAILABLE while it is being created
        assert registry.topic("auto").partition_ids == [0, 1]
        assert b.cluster.wait_for(lambda s: "auto" in s.topics, 10)
        assert c.call(req, 12).topics[0].error_code == 0


def test_partition_growth_is_picked_up(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "grow", 2)
    add_partitions(registry, "grow", 5)
    assert broker.cluster.wait_for(lambda s: s.topics["grow"].partition_ids == [0, 1, 2, 3, 4], 10)
    with RawClient.to(broker.bootstrap) as c:
        r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="grow")]), 12)
        assert [p.partition_index for p in r.topics[0].partitions] == [0, 1, 2, 3, 4]
        assert c.call(produce_request("grow", 4, records(b"new")), 9).responses[0] \
            .partition_responses[0].error_code == 0


def test_two_brokers_split_leadership_by_assignment(zk_connect: str, registry: Registry) -> None:
    registry.create_topic_node("split", layout.TopicAssignment({0: [0], 1: [1]}))
    with Broker(zk_connect, broker_id=0) as b0, Broker(zk_connect, broker_id=1) as b1:
        for b in (b0, b1):
            assert b.cluster.wait_for(lambda s: s.live_ids == {0, 1} and "split" in s.topics, 10)
        with RawClient.to(b0.bootstrap) as c:
            r = c.call(MetadataRequest(topics=None), 12)
            assert sorted((b.node_id, b.port) for b in r.brokers) == [(0, b0.port), (1, b1.port)]
            assert {p.partition_index: p.leader_id for p in r.topics[0].partitions} == {0: 0, 1: 1}
            assert c.call(produce_request("split", 1, records(b"x")), 9).responses[0] \
                .partition_responses[0].error_code == 6
        with RawClient.to(b1.bootstrap) as c:
            assert c.call(produce_request("split", 1, records(b"x")), 9).responses[0] \
                .partition_responses[0].error_code == 0


# --------------------------------------------------------------------------------- Produce, Fetch, offsets

def test_produce_fetch_and_list_offsets(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "t", 2)
    with RawClient.to(broker.bootstrap) as c:
        for version in (3, 5, 8, 9):
            r = c.call(produce_request("t", 1, records(b"a", b"b", ts0=1000 * version)), version)
            part = r.responses[0].partition_responses[0]
            assert part.error_code == 0
        assert part.base_offset == 6
        for version in (4, 7, 11, 12):
            r = c.call(fetch_request("t", 1, 3), version)
            p = r.responses[0].partitions[0]
            assert (p.error_code, p.high_watermark) == (0, 8)
            got = [(rec.offset, rec.value) for batch in MemoryRecords(p.records) for rec in batch]
            assert got[0][0] <= 3 and got[-1] == (7, b"b")
        for version in (1, 4, 6):
            offsets = {ts: c.call(list_offsets_request("t", 1, ts), version).topics[0].partitions[0]
                       for ts in (-1, -2, 5000, 5001, 10_000)}
            assert {ts: (p.offset, p.timestamp) for ts, p in offsets.items()} == {
                -1: (8, -1), -2: (0, -1), 5000: (2, 5000), 5001: (3, 5001), 10_000: (-1, -1)}
        assert c.call(list_offsets_request("t", 1, -1), 0).topics[0].partitions[0].old_style_offsets == [8]


def test_unknown_topic_and_partition_and_out_of_range(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "t", 1)
    with RawClient.to(broker.bootstrap) as c:
        assert c.call(produce_request("nope", 0, records(b"x")), 9).responses[0] \
            .partition_responses[0].error_code == 3
        assert c.call(produce_request("t", 7, records(b"x")), 9).responses[0] \
            .partition_responses[0].error_code == 3
        assert c.call(fetch_request("nope", 0, 0), 12).responses[0].partitions[0].error_code == 3
        assert c.call(fetch_request("t", 0, 5), 12).responses[0].partitions[0].error_code == 1
        assert c.call(list_offsets_request("nope", 0, -1), 6).topics[0].partitions[0].error_code == 3
        bad = c.call(produce_request("t", 0, records(b"x")[:-2]), 9).responses[0].partition_responses[0]
        assert bad.error_code == 2


def test_acks_0_gets_no_answer(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "t", 1)
    with RawClient.to(broker.bootstrap) as c:
        c.send(produce_request("t", 0, records(b"fire-and-forget"), acks=0), 9)
        r = c.call(ApiVersionsRequest(), 0)  # the next frame on the wire is this answer
        assert r.error_code == 0
        wait_until(lambda: c.call(list_offsets_request("t", 0, -1), 6).topics[0].partitions[0].offset == 1)


def test_fetch_long_poll_waits_for_max_wait_then_for_data(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "t", 1)
    with RawClient.to(broker.bootstrap) as c:
        started = time.monotonic()
        r = c.call(fetch_request("t", 0, 0, max_wait_ms=300, min_bytes=1), 12)
        assert r.responses[0].partitions[0].records == b""
        assert time.monotonic() - started >= 0.29
        fetch = fetch_request("t", 0, 0, max_wait_ms=20_000, min_bytes=1)
        started = time.monotonic()
        c.send(fetch, 12)
        with RawClient.to(broker.bootstrap) as producer:
            producer.call(produce_request("t", 0, records(b"wake")), 9)
        r = c.receive(fetch, 12)
        assert time.monotonic() - started < 10
        assert [rec.value for b in MemoryRecords(r.responses[0].partitions[0].records) for rec in b] == [b"wake"]


def test_fetch_max_bytes_returns_at_least_one_batch(broker: Broker, registry: Registry) -> None:
    make_topic(broker, registry, "t", 1)
    with RawClient.to(broker.bootstrap) as c:
        for i in range(3):
            c.call(produce_request("t", 0, records(b"v" * 500, ts0=i)), 9)
        r = c.call(fetch_request("t", 0, 0, max_bytes=10), 12)
        batches = list(MemoryRecords(r.responses[0].partitions[0].records))
        assert len(batches) == 1
