"""Kafka requests in, responses out: the API table and the dispatcher, over kafka-python's protocol classes.

Every API is one :class:`ApiHandler` row in an :class:`ApiTable` (request class, version range, handler,
error answer), so a later group coordinator adds JoinGroup, SyncGroup and the rest by registering rows; the
dispatcher, ApiVersions and the error paths need no change. Encoding and decoding, including flexible
versions, tagged fields and the two request/response header versions, is kafka-python's.

Error rules, as a Kafka broker applies them:

* ApiVersions at a version we do not speak → a v0 ApiVersionsResponse with UNSUPPORTED_VERSION (35) and our
  version table, so the client retries with a version we list.
* Any other known API at an unsupported version → that API's error answer with UNSUPPORTED_VERSION for
  every topic/partition asked about, encoded at the client's version when kafka-python can encode it.
* An unknown API key (or a version kafka-python cannot read) → a response header and an int16 35.
* A frame that cannot be decoded → :class:`MalformedRequest`; the server closes that connection.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from zkconsumer import runtime
from zkconsumer.errors import IllegalArgument, KafkaCode, ZkConsumerError

log = logging.getLogger(__name__)

UNSUPPORTED_VERSION = KafkaCode.UNSUPPORTED_VERSION
#: Kafka's ``socket.request.max.bytes``.
MAX_FRAME_BYTES = 100 * 1024 * 1024
_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every header version


class MalformedRequest(ZkConsumerError):
    """The bytes are not a request we can answer; the connection that sent them must be closed."""


@dataclass(frozen=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    peer: str
    #: the broker's further listener the request came through (None: its main one); Metadata and FindCoordinator
    #: then name this broker by that listener's advertised address, as Kafka does per listener name
    listener: str | None = None


Handler = Callable[[RequestContext, ApiMessage], ApiMessage | None]
#: A handler of an API kafka-python has no schema for: the request frame (without its size) and the peer in, a
#: framed response out (coordinator/kip848.py).
RawHandler = Callable[[bytes, str], bytes]
ErrorAnswer = Callable[[RequestContext, ApiMessage, int], ApiMessage]


@dataclass(frozen=True)
class ApiHandler:
    """One row of the API table. ``handle`` returns None when no response is due (Produce with acks=0)."""

    request_class: type[ApiMessage]
    min_version: int
    max_version: int
    handle: Handler
    error_answer: ErrorAnswer | None = None

    @property
    def api_key(self) -> int:
        return self.request_class.API_KEY

    @property
    def name(self) -> str:
        return self.request_class.name


class ApiTable:
    """API key → handler. Version ranges are clamped to what kafka-python can encode."""

    def __init__(self) -> None:
        self._apis: dict[int, ApiHandler] = {}
        self._raw: dict[int, tuple[str, int, int, RawHandler]] = {}

    def register(self, request_class: type[ApiMessage], min_version: int, max_version: int, handle: Handler,
                 error_answer: ErrorAnswer | None = None) -> None:
        if not 0 <= min_version <= max_version <= request_class.max_version:
            raise IllegalArgument(f"{request_class.name}: versions {min_version}..{max_version} outside what "
                                  f"kafka-python supports (0..{request_class.max_version})")
        self._apis[request_class.API_KEY] = ApiHandler(request_class, min_version, max_version, handle,
                                                       error_answer)

    def register_raw(self, api_key: int, name: str, min_version: int, max_version: int, handle: RawHandler) -> None:
        """An API kafka-python cannot decode, answered from its frame (only ConsumerGroupHeartbeat's refusal)."""
        self._raw[api_key] = (name, min_version, max_version, handle)

    def get(self, api_key: int) -> ApiHandler | None:
        return self._apis.get(api_key)

    def raw(self, api_key: int) -> tuple[str, int, int, RawHandler] | None:
        return self._raw.get(api_key)

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._apis or api_key in self._raw

    def versions(self) -> list[tuple[int, int, int]]:
        """(api key, min version, max version), sorted, as ApiVersions lists them."""
        return sorted([(k, h.min_version, h.max_version) for k, h in self._apis.items()]
                      + [(k, lo, hi) for k, (_, lo, hi, _) in self._raw.items()])


def api_versions_response(table: ApiTable, error_code: int = 0) -> ApiVersionsResponse:
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in table.versions()]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys, throttle_time_ms=0)


def encode_response(response: ApiMessage, version: int, correlation_id: int) -> bytes:
    response.API_VERSION = version  # before the header exists: kafka-python mirrors it into request headers only
    response.with_header(correlation_id=correlation_id)
    return response.encode(header=True, framed=True)


def bare_error_frame(correlation_id: int, error_code: int) -> bytes:
    """A v0 response header and an int16 error: the answer for requests we cannot even parse the body of."""
    return struct.pack(">iih", 6, correlation_id, error_code)


class Dispatcher:
    """Turns one request frame (without its size prefix) into one response frame, or None."""

    def __init__(self, table: ApiTable) -> None:
        self.table = table
        #: Requests served, by API name: what ``zkconsumer compare`` counts per rebalance.
        self.requests: Counter[str] = Counter()
        self._count_lock = runtime.Lock()

    def dispatch(self, frame: bytes, peer: str = "", listener: str | None = None) -> bytes | None:
        if len(frame) < _HEADER_START.size:
            raise MalformedRequest(f"frame of {len(frame)} bytes is shorter than a request header")
        api_key, version, correlation_id = _HEADER_START.unpack_from(frame)
        raw = self.table.raw(api_key)
        if raw is not None:
            name, lo, hi, handle = raw
            with self._count_lock:
                self.requests[name] += 1
            if not lo <= version <= hi:
                log.info("%s: unsupported %s v%d", peer or "client", name, version)
                return bare_error_frame(correlation_id, UNSUPPORTED_VERSION)
            return handle(frame, peer)
        api = self.table.get(api_key)
        with self._count_lock:
            self.requests[api.name if api is not None else f"api-{api_key}"] += 1
        if api is None or not api.min_version <= version <= api.max_version:
            return self._unsupported(api_key, version, correlation_id, frame, api, peer)
        request = self._decode(api, frame, version)
        ctx = RequestContext(api_key, version, correlation_id, request.header.client_id, peer, listener)
        response = api.handle(ctx, request)
        if response is None:
            return None
        return encode_response(response, version, correlation_id)

    @staticmethod
    def _decode(api: ApiHandler, frame: bytes, version: int) -> ApiMessage:
        try:
            return api.request_class.decode(frame, version=version, header=True)
        except Exception as e:  # kafka-python raises ValueError, struct.error, IndexError, UnicodeError ...
            raise MalformedRequest(f"cannot decode {api.name} v{version}: {type(e).__name__}: {e}") from None

    def _unsupported(self, api_key: int, version: int, correlation_id: int, frame: bytes,
                     api: ApiHandler | None, peer: str) -> bytes:
        if api_key == ApiVersionsRequest.API_KEY:
            # Real brokers answer in v0, whose layout every client can read whatever version it sent.
            return encode_response(api_versions_response(self.table, UNSUPPORTED_VERSION), 0, correlation_id)
        name = api.name if api is not None else f"API key {api_key}"
        log.info("%s: unsupported %s v%d", peer or "client", name, version)
        if api is not None and api.error_answer is not None and 0 <= version <= api.request_class.max_version:
            request = self._decode(api, frame, version)
            ctx = RequestContext(api_key, version, correlation_id, request.header.client_id, peer)
            try:
                return encode_response(api.error_answer(ctx, request, UNSUPPORTED_VERSION), version,
                                       correlation_id)
            except Exception:  # kafka-python cannot encode this version of the response: fall through
                log.debug("cannot encode an error answer for %s v%d", name, version, exc_info=True)
        return bare_error_frame(correlation_id, UNSUPPORTED_VERSION)
