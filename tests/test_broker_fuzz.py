"""Random, truncated and mutated frames (a bounded number, loopback only): the broker closes the offending
connections, keeps serving the others, and still works for a real client afterwards."""

from __future__ import annotations

import random
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from zkconsumer.broker import Broker
from zkconsumer.broker.client import RawClient
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

CASES = 400
SEED = 20240617


@pytest.fixture
def broker(zk_connect: str, registry: Registry) -> Iterator[Broker]:
    create_topic(registry, "fuzz", 2)
    with Broker(zk_connect) as b:
        assert b.cluster.wait_for(lambda s: "fuzz" in s.topics, 10)
        yield b


def valid_requests() -> list[tuple[object, int]]:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    builder.append(timestamp=1, key=b"k", value=b"v", headers=[])
    builder.close()
    records = bytes(builder.buffer())
    produce = ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="fuzz", partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    FT = FetchRequest.FetchTopic
    fetch = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                         session_id=0, session_epoch=-1, topics=[FT(topic="fuzz", partitions=[
                             FT.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                         forgotten_topics_data=[], rack_id="")
    LT = ListOffsetsRequest.ListOffsetsTopic
    list_offsets = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LT(name="fuzz", partitions=[
        LT.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    out = []
    for request, versions in ((ApiVersionsRequest(client_software_name="f", client_software_version="1"), (0, 3)),
                              (MetadataRequest(topics=None), (1, 9, 12)),
                              (produce, (3, 9)), (fetch, (4, 12)), (list_offsets, (1, 6)),
                              (InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1), (0, 4))):
        for v in versions:
            request.API_VERSION = v
            request.with_header(correlation_id=7, client_id="fuzz")
            out.append(request.encode(header=True, framed=True))
    return out


def fuzz_frames(rng: random.Random, templates: list[bytes]) -> Iterator[bytes]:
    for _ in range(CASES):
        kind = rng.randrange(7)
        template = rng.choice(templates)
        if kind == 0:  # pure noise
            yield rng.randbytes(rng.randrange(1, 200))
        elif kind == 1:  # a sane size, random payload
            payload = rng.randbytes(rng.randrange(0, 300))
            yield struct.pack(">i", len(payload)) + payload
        elif kind == 2:  # a real header of a known API, random body
            body = template[4:12] + rng.randbytes(rng.randrange(0, 200))
            yield struct.pack(">i", len(body)) + body
        elif kind == 3:  # a real request cut short (the size still claims the whole frame)
            yield template[:rng.randrange(1, len(template))]
        elif kind == 4:  # a real request with a few bytes flipped (size and api key kept)
            frame = bytearray(template)
            for _ in range(rng.randrange(1, 6)):
                frame[rng.randrange(8, len(frame))] = rng.randrange(256)
            yield bytes(frame)
        elif kind == 5:  # absurd or negative sizes
            yield struct.pack(">i", rng.choice([-1, -(2**31), 2**31 - 1, 200 * 1024 * 1024, 0]))
        else:  # a real request whose size is shrunk to cut the body
            frame = bytearray(template)
            struct.pack_into(">i", frame, 0, rng.randrange(0, len(template) - 4))
            yield bytes(frame)


def send_and_drain(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        try:
            s.sendall(frame)
            s.shutdown(socket.SHUT_WR)  # a truncated frame then reads as a connection cut mid-request
            while s.recv(65536):
                pass
        except OSError:
            pass  # reset or timeout: the broker dropped us, which is allowed


def test_fuzzed_frames_do_not_take_the_broker_down(broker: Broker) -> None:
    rng = random.Random(SEED)
    templates = valid_requests()
    with RawClient.to(broker.bootstrap) as bystander:
        for frame in fuzz_frames(rng, templates):
            send_and_drain(broker.port, frame)
        # a connection opened before the storm was never disturbed
        assert bystander.call(ApiVersionsRequest(), 0).error_code == 0

    # and a real client still produces and consumes
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=-1)
    md = producer.send("fuzz", value=b"still alive", partition=1).get(timeout=30)
    producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition("fuzz", 1)
    consumer.assign([tp])
    consumer.seek(tp, md.offset)
    deadline = time.monotonic() + 30
    values = []
    while not values and time.monotonic() < deadline:
        values = [r.value for recs in consumer.poll(timeout_ms=500).values() for r in recs]
    consumer.close()
    assert values == [b"still alive"]


def test_malformed_frame_closes_only_that_connection(broker: Broker) -> None:
    with RawClient.to(broker.bootstrap) as good, RawClient.to(broker.bootstrap) as bad:
        bad.send_raw(struct.pack(">i", -5))
        with pytest.raises(ConnectionError):
            bad.read_frame()
        assert good.call(ApiVersionsRequest(), 3).error_code == 0
    with RawClient.to(broker.bootstrap) as bad:
        body = struct.pack(">hhi", 3, 12, 1) + b"\xff" * 3  # Metadata v12 header, then garbage
        bad.send_raw(struct.pack(">i", len(body)) + body)
        with pytest.raises(ConnectionError):
            bad.read_frame()
    with RawClient.to(broker.bootstrap) as again:
        assert again.call(MetadataRequest(topics=None), 12).brokers[0].port == broker.port
