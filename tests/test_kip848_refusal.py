"""KIP-848's consumer protocol (``group.protocol=consumer``) on zkconsumer's broker: refused out loud.

Before, librdkafka's consumer got no assignment and no error. Now the broker lists ConsumerGroupHeartbeat and answers
it with UNSUPPORTED_VERSION and a message that names the cure; the client reports it as a fatal error.
"""

from __future__ import annotations

import logging
import struct
import time

import pytest
from helpers import read_exactly

from zkconsumer.coordinator import kip848
from zkconsumer.errors import KafkaCode
from zkconsumer.zk.topics import create_topic


def _compact(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    assert len(raw) + 1 < 128
    return bytes([len(raw) + 1]) + raw


def heartbeat_frame(correlation_id: int = 7, group: str = "g", member: str = "m-1", epoch: int = 0,
                    version: int = 0, client_id: str | None = "rdkafka") -> bytes:
    """A ConsumerGroupHeartbeat request as a client writes it (header v2, then the body's first fields)."""
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id.encode()
    header = struct.pack(">hhi", kip848.API_KEY, version, correlation_id) + cid + b"\x00"
    body = (_compact(group) + _compact(member) + struct.pack(">i", epoch) + _compact(None) + _compact(None)
            + struct.pack(">i", 300000) + b"\x02" + _compact("t") + _compact("uniform") + b"\x00" + b"\x00")
    return header + body


def test_a_request_is_read_up_to_what_the_refusal_needs() -> None:
    req = kip848.decode_request(heartbeat_frame(correlation_id=42, group="orders", member="", epoch=0))
    assert (req.correlation_id, req.group_id, req.member_id, req.member_epoch, req.client_id) == (
        42, "orders", "", 0, "rdkafka")
    assert kip848.decode_request(heartbeat_frame(client_id=None)).client_id is None


@pytest.mark.parametrize("frame", [b"", b"\x00\x44\x00\x00", heartbeat_frame()[:14]])
def test_a_garbled_request_is_a_clear_error(frame: bytes) -> None:
    with pytest.raises(kip848.Kip848DecodeError):
        kip848.decode_request(frame)


def test_the_answer_is_unsupported_version_with_a_message_naming_the_cure() -> None:
    frame = kip848.encode_error_response(99, member_id="m-1")
    correlation_id, error, message = kip848.decode_error_response(frame)
    assert (correlation_id, error) == (99, KafkaCode.UNSUPPORTED_VERSION)
    assert "group.protocol=classic" in message and "Kafka 4" in message


def test_the_broker_lists_the_api_and_refuses_it(broker) -> None:
    """Over a real socket: ApiVersions lists key 68; a heartbeat gets the refusal; the broker stays up."""
    import socket

    host, port = broker.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        frame = heartbeat_frame(correlation_id=5)
        s.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", read_exactly(s, 4))[0]
        answer = struct.pack(">i", size) + read_exactly(s, size)
    assert kip848.decode_error_response(answer)[:2] == (5, KafkaCode.UNSUPPORTED_VERSION)
    assert (kip848.API_KEY, 0, 1) in broker.apis.versions()




def test_librdkafka_with_group_protocol_consumer_reports_the_refusal(broker, registry, caplog) -> None:
    """The user's case: a confluent-kafka consumer with group.protocol=consumer. It gets a fatal error naming the
    cure within seconds, and the broker logs the refusal once."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    create_topic(registry, "kip848", 2)
    caplog.set_level(logging.WARNING, logger="zkconsumer.coordinator.apis")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "next-gen",
                                         "group.protocol": "consumer"})
    try:
        consumer.subscribe(["kip848"])
        deadline = time.monotonic() + 30
        error = None
        while time.monotonic() < deadline and error is None:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                error = msg.error()
        assert error is not None, "no error reported within 30 s"
        # librdkafka: "Fatal error: Broker: API version not supported: ConsumerGroupHeartbeat fatal error: ..."
        # (the _FATAL event announces the client's fatal error; the error object itself is not flagged fatal)
        assert error.code() == confluent_kafka.KafkaError._FATAL and "ConsumerGroupHeartbeat" in error.str(), error
    finally:
        consumer.close()
    assert any("KIP-848" in r.getMessage() and "next-gen" in r.getMessage() for r in caplog.records)
