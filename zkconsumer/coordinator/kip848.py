"""The next-generation consumer group protocol (KIP-848, ``group.protocol=consumer``), refused out loud.

zkconsumer's coordinator is the classic group coordinator (JoinGroup, SyncGroup, Heartbeat) and not KIP-848's
server-side one. A client configured with ``group.protocol=consumer`` and pointed at a broker that does not list
``ConsumerGroupHeartbeat`` (API key 68) in ApiVersions may just wait: librdkafka, for one, never gets an
assignment and reports nothing (found trying it, issue 22). So the broker lists the API and answers every
ConsumerGroupHeartbeat with ``UNSUPPORTED_VERSION`` and an error message naming the cure. That is the answer
Kafka 3.x brokers give when the protocol is switched off. The clients take it as fatal and say so:
librdkafka raises a fatal consumer error, Kafka's Java consumer an ``UnsupportedVersionException``.

kafka-python has no schema for this API, so this module reads and writes its few fields itself. It is pure and
does no I/O. Layouts (flexible versions: compact strings, unsigned varints, tagged fields):

* request header v2: api key int16, version int16, correlation id int32, client id (int16-length nullable
  string), tagged fields; body: group id, member id (compact strings), member epoch int32, then fields we do
  not need.
* response header v1: correlation id int32, tagged fields; body v0 and v1: throttle ms int32, error int16,
  error message, member id (compact nullable strings), member epoch int32, heartbeat interval ms int32,
  assignment (nullable struct: int8 -1 when absent), tagged fields.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from zkconsumer.errors import KafkaCode, ZkConsumerError

API_KEY = 68
NAME = "ConsumerGroupHeartbeat"
#: Versions listed in ApiVersions: 0 (Kafka 3.7+, librdkafka 2.4+) and 1 (Kafka 4.0, topic regex).
MIN_VERSION, MAX_VERSION = 0, 1

REFUSAL = ("this broker (zkconsumer's) has no consumer group protocol (KIP-848, group.protocol=consumer): use "
           "group.protocol=classic here, or run the consumer protocol on Kafka 4.x (docs/coordinator.md)")


class Kip848DecodeError(ZkConsumerError, ValueError):
    """A ConsumerGroupHeartbeat frame too short or garbled to read its header and group id."""


@dataclass(frozen=True)
class HeartbeatRequest:
    """What the refusal needs from a ConsumerGroupHeartbeat request."""

    version: int
    correlation_id: int
    client_id: str | None
    group_id: str
    member_id: str
    member_epoch: int


class _Reader:
    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data, self.pos = data, offset

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Kip848DecodeError(f"ConsumerGroupHeartbeat: {n} bytes wanted at {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> int:
        s = struct.Struct(fmt)
        return s.unpack(self.take(s.size))[0]

    def varint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise Kip848DecodeError("ConsumerGroupHeartbeat: an unsigned varint longer than 5 bytes")

    def nullable_string(self) -> str | None:
        n = self.unpack(">h")
        return None if n < 0 else self.take(n).decode("utf-8", "replace")

    def compact_string(self) -> str | None:
        n = self.varint()
        return None if n == 0 else self.take(n - 1).decode("utf-8", "replace")

    def skip_tagged_fields(self) -> None:
        for _ in range(self.varint()):
            self.varint()  # tag
            self.take(self.varint())


def decode_request(frame: bytes) -> HeartbeatRequest:
    """The header and the first fields of a ConsumerGroupHeartbeat request frame (without its size prefix)."""
    r = _Reader(frame)
    api_key, version, correlation_id = r.unpack(">h"), r.unpack(">h"), r.unpack(">i")
    if api_key != API_KEY:
        raise Kip848DecodeError(f"API key {api_key} is not ConsumerGroupHeartbeat ({API_KEY})")
    client_id = r.nullable_string()
    r.skip_tagged_fields()
    group_id = r.compact_string() or ""
    member_id = r.compact_string() or ""
    member_epoch = r.unpack(">i")
    return HeartbeatRequest(version, correlation_id, client_id, group_id, member_id, member_epoch)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _compact_nullable(s: str | None) -> bytes:
    if s is None:
        return _varint(0)
    raw = s.encode("utf-8")
    return _varint(len(raw) + 1) + raw


def encode_error_response(correlation_id: int, error: int = KafkaCode.UNSUPPORTED_VERSION,
                          message: str | None = REFUSAL, member_id: str | None = None) -> bytes:
    """A framed ConsumerGroupHeartbeat response (v0 and v1 share the layout) carrying only an error."""
    body = (struct.pack(">i", correlation_id) + _varint(0)  # header v1: no tagged fields
            + struct.pack(">ih", 0, int(error))  # throttle ms, error code
            + _compact_nullable(message) + _compact_nullable(member_id)
            + struct.pack(">ii", -1, 0)  # member epoch, heartbeat interval ms
            + struct.pack(">b", -1)  # assignment: null
            + _varint(0))  # no tagged fields
    return struct.pack(">i", len(body)) + body


def decode_error_response(frame: bytes) -> tuple[int, int, str | None]:
    """(correlation id, error code, error message) of a response :func:`encode_error_response` wrote (tests)."""
    r = _Reader(frame)
    size = r.unpack(">i")
    if size != len(frame) - 4:
        raise Kip848DecodeError(f"frame says {size} bytes, has {len(frame) - 4}")
    correlation_id = r.unpack(">i")
    r.skip_tagged_fields()
    r.unpack(">i")
    error = r.unpack(">h")
    return correlation_id, error, r.compact_string()
