"""A minimal blocking Kafka protocol client: one request, one answer, the version chosen by the caller.

Real clients negotiate versions and hide errors; tests of the broker (and of handlers added later, such as
a group coordinator) need to send exactly one request at exactly one version and see the raw answer.
"""

from __future__ import annotations

import socket
import struct

from kafka.protocol.api_message import ApiMessage

from zkconsumer.errors import UnexpectedResponse, ZkConsumerError


class ConnectionClosed(ZkConsumerError, ConnectionError):
    """The broker closed the connection before a whole answer came. Retriable: a new connection may be
    answered (a broker restarting, one closing idle connections). A ``ConnectionError`` still."""

    retriable = True


class RawClient:
    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "zkconsumer-raw") -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._correlation_id = 0

    @classmethod
    def to(cls, bootstrap: str, **kwargs) -> RawClient:
        host, _, port = bootstrap.rpartition(":")
        return cls(host, int(port), **kwargs)

    def send(self, request: ApiMessage, version: int) -> int:
        """Send without reading an answer (Produce with acks=0); returns the correlation id."""
        self._correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self._correlation_id, client_id=self.client_id)
        self.sock.sendall(request.encode(header=True, framed=True))
        return self._correlation_id

    def receive(self, request: ApiMessage, version: int) -> ApiMessage:
        frame = self.read_frame()
        response_class = request.header.get_response_class()
        response = response_class.decode(frame, version=version, header=True)
        if response.header.correlation_id != request.header.correlation_id:
            raise UnexpectedResponse(f"correlation id {response.header.correlation_id}, expected "
                                     f"{request.header.correlation_id}")
        return response

    def call(self, request: ApiMessage, version: int) -> ApiMessage:
        self.send(request, version)
        return self.receive(request, version)

    def send_raw(self, payload: bytes) -> None:
        """Send bytes as they are (for malformed-frame tests)."""
        self.sock.sendall(payload)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionClosed("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
