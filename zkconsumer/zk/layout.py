"""The Kafka 0.8 ZooKeeper layout: every path and every node codec, in one place, free of I/O.

A tree written through this module must read as a Kafka 0.8 group to 0.8 tools, so the encoders reproduce
Kafka's ``Json.encode`` byte for byte (no spaces, Kafka's key order, numbers bare, the timestamp a string).
Decoders are strict where Kafka relied on a field and lenient where later Kafka versions added keys: a
malformed node raises :class:`MalformedNodeError`, which names the path and shows the bad value, so a bad
write by some other tool is reported instead of crashing a consumer somewhere deep in a rebalance.
"""

from __future__ import annotations

import functools
import json
import re
import uuid as uuidlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from zkconsumer import runtime
from zkconsumer.errors import NotEncodable, ZkConsumerError
from zkconsumer.javacompat import java_sorted, long_to_hex_string

T = TypeVar("T")

CONSUMERS_PATH = "/consumers"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
CONFIG_TOPICS_PATH = "/config/topics"
#: Paths Kafka's ``ZkUtils.setupCommonPaths`` makes sure exist.
COMMON_PATHS = (CONSUMERS_PATH, BROKER_IDS_PATH, BROKER_TOPICS_PATH, "/config/changes", CONFIG_TOPICS_PATH,
                "/admin/delete_topics")

OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka 0.8.2's ``Topic.InternalTopics``.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC})

STATIC, WHITE_LIST, BLACK_LIST = "static", "white_list", "black_list"
PATTERNS = (STATIC, WHITE_LIST, BLACK_LIST)

#: Kafka 0.8.2 allowed 255; 0.10+ allows 249 so that "<topic>-<partition>" directory names stay legal.
MAX_TOPIC_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._\-]+")


class LayoutError(ZkConsumerError, ValueError):
    """Base class of every error about ZooKeeper paths, names and node contents."""


class MalformedNodeError(LayoutError):
    """A node's data could not be decoded; carries the path and the raw value so the message can show both."""

    def __init__(self, path: str, raw: bytes | str | None, reason: str) -> None:
        self.path = path
        self.raw = raw
        self.reason = reason
        shown = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if shown is not None and len(shown) > 300:
            shown = shown[:300] + "..."
        super().__init__(f"malformed data at {path}: {reason}; value was {shown!r}")


class InvalidTopicError(LayoutError):
    """A topic name Kafka would refuse (``kafka.common.InvalidTopicException``)."""


# --------------------------------------------------------------------------------------------- JSON encoding

#: The characters ``Utils.JSONEscapeString`` writes as a two-character escape.
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                 "\t": "\\t"}


def _escape_char(c: str) -> str:
    """One character as Kafka writes it: a short escape, ``\\uXXXX`` for the other C0 and C1 controls, else itself."""
    if c in _JSON_ESCAPES:
        return _JSON_ESCAPES[c]
    if "\x00" <= c <= "\x1f" or "\x7f" <= c <= "\x9f":
        return f"\\u{ord(c):04x}"
    return c


def _escape(s: str) -> str:
    """Kafka's ``Utils.JSONEscapeString``: used for wildcard regexes in registrations.

    Kafka escapes ``/`` too, which Python's ``json`` does not, so the registration bytes match Kafka's only this way.
    """
    return "".join(_escape_char(c) for c in s)


def kafka_json(obj: object) -> str:
    """Kafka 0.8's ``Json.encode``: compact, insertion order, strings *not* escaped (callers escape first).

    Booleans are checked before numbers because Python's ``bool`` is an ``int``.
    """
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, str):
        return '"' + obj + '"'
    if isinstance(obj, int | float):
        return str(obj)
    if isinstance(obj, Mapping):
        return "{" + ",".join(kafka_json(str(k)) + ":" + kafka_json(v) for k, v in obj.items()) + "}"
    if isinstance(obj, Iterable):
        return "[" + ",".join(kafka_json(v) for v in obj) + "]"
    raise NotEncodable(f"cannot encode {type(obj).__name__} as Kafka JSON: {obj!r}")


class _DecodedByBytes:
    """Values decoded from node data, by the exact bytes (a node read again unchanged is not parsed again).

    Why: a Kafka 0.8 member reads every registration and the topic's node at every rebalance, so a group of N
    parses the same N nodes N times over; in the simulator's herd of thousands that parsing was most of the run.
    Only successes are kept (a malformed node raises every time, with its own path in the message), the values are
    frozen dataclasses that nobody changes, and the table is emptied when full, so it stays bounded."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.capacity = capacity
        self._values: dict[bytes, object] = {}

    def get(self, data: bytes | str | None) -> object | None:
        return self._values.get(data) if isinstance(data, bytes) else None

    def put(self, data: bytes | str | None, value: T) -> T:
        if isinstance(data, bytes):
            if len(self._values) >= self.capacity:
                self._values.clear()
            self._values[data] = value
        return value


_REGISTRATIONS = _DecodedByBytes()
_TOPIC_NODES = _DecodedByBytes()


def _load_json_object(path: str, data: bytes | str | None) -> dict:
    if data is None:
        raise MalformedNodeError(path, data, "node has no data")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        obj = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MalformedNodeError(path, data, f"not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise MalformedNodeError(path, data, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _require(obj: dict, key: str, kind: type | tuple[type, ...], path: str, raw: bytes | str | None):
    if key not in obj:
        raise MalformedNodeError(path, raw, f"missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise MalformedNodeError(path, raw, f"field {key!r} should be {names}, got {value!r}")
    return value


# ------------------------------------------------------------------------------------------------------ paths

def _check_segment(kind: str, value: str) -> str:
    if not value or "/" in value or value in (".", ".."):
        raise LayoutError(f"illegal {kind} for a ZooKeeper path segment: {value!r}")
    return value


@dataclass(frozen=True)
class GroupPaths:
    """Kafka's ``ZKGroupDirs`` / ``ZKGroupTopicDirs`` for one group."""

    group: str

    def __post_init__(self) -> None:
        _check_segment("group id", self.group)

    @property
    def root(self) -> str:
        return f"{CONSUMERS_PATH}/{self.group}"

    @property
    def ids(self) -> str:
        return f"{self.root}/ids"

    @property
    def owners(self) -> str:
        return f"{self.root}/owners"

    @property
    def offsets(self) -> str:
        return f"{self.root}/offsets"

    def registration(self, consumer_id: str) -> str:
        return f"{self.ids}/{_check_segment('consumer id', consumer_id)}"

    def owners_topic(self, topic: str) -> str:
        return f"{self.owners}/{topic}"

    def owner(self, topic: str, partition: int) -> str:
        return f"{self.owners}/{topic}/{int(partition)}"

    def offsets_topic(self, topic: str) -> str:
        return f"{self.offsets}/{topic}"

    def offset(self, topic: str, partition: int) -> str:
        return f"{self.offsets}/{topic}/{int(partition)}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{_check_segment('topic', topic)}"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{topic}"


# ----------------------------------------------------------------------------------------------- names & ids

def validate_topic(topic: str) -> str:
    """Kafka's ``Topic.validate`` (with the 249-character limit of Kafka 0.10+); returns the name."""
    if not topic:
        raise InvalidTopicError("topic name is illegal, can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError('topic name cannot be "." or ".."')
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is illegal, can't be longer than {MAX_TOPIC_LENGTH} characters")
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise InvalidTopicError(
            f"topic name {topic} is illegal, contains a character other than ASCII alphanumerics, '.', '_' and '-'")
    return topic


def consumer_uuid(hostname: str | None = None, now_ms: int | None = None,
                  uuid: uuidlib.UUID | None = None) -> str:
    """Kafka 0.8's generated consumer id suffix ``host-epochMillis-XXXXXXXX``.

    The 8 hex digits are the first eight of ``Long.toHexString(uuid.getMostSignificantBits)``, which has no
    leading zeros, so they are exactly what Java prints even when the top nibble is zero.
    """
    hostname = runtime.hostname() if hostname is None else hostname
    now_ms = int(runtime.time() * 1000) if now_ms is None else now_ms
    uuid = runtime.uuid4() if uuid is None else uuid
    msb = uuid.int >> 64
    return f"{hostname}-{now_ms}-{long_to_hex_string(msb)[:8]}"


def make_consumer_id(group: str, consumer_id: str | None = None, **uuid_parts) -> str:
    """``group + "_" + (consumer.id or host-millis-uuid8)``, as ZookeeperConsumerConnector does."""
    suffix = consumer_id if consumer_id else consumer_uuid(**uuid_parts)
    return _check_segment("consumer id", f"{group}_{suffix}")


def thread_id(consumer_id: str, index: int) -> str:
    """Kafka's ``ConsumerThreadId.toString``: ``"%s-%d"``."""
    return f"{consumer_id}-{index}"


def thread_ids(consumer_id: str, streams: int) -> list[str]:
    if streams < 1:
        raise LayoutError(f"stream count must be >= 1, got {streams} for {consumer_id}")
    return [f"{consumer_id}-{i}" for i in range(streams)]


def consumer_of_thread(tid: str) -> str:
    """The consumer id part of a thread id (everything before the last ``-``)."""
    consumer, sep, index = tid.rpartition("-")
    if not sep or not index.isdigit():
        raise LayoutError(f"not a consumer thread id: {tid!r}")
    return consumer


def sort_thread_ids(tids: Iterable[str]) -> list[str]:
    """Thread ids ordered as ``ConsumerThreadId.compare`` does: Java strings (so ``c-10`` < ``c-2``, and
    UTF-16 code units, not code points, beyond U+FFFF)."""
    return java_sorted(tids)


# ----------------------------------------------------------------------------------------- topic filters

@dataclass(frozen=True)
class TopicFilter:
    """Kafka's ``Whitelist`` / ``Blacklist``: the raw regex is normalised the way property files need.

    Matching is a full match, as Java's ``String.matches``. Python's ``re`` and ``java.util.regex`` agree on
    the constructs topic filters use; exotic Java-only syntax (possessive quantifiers before 3.11, ``\\p{}``
    classes) is a documented limit.
    """

    raw: str = field(compare=False)
    pattern: str = WHITE_LIST
    regex: str = field(init=False)

    def __post_init__(self) -> None:
        if self.pattern not in (WHITE_LIST, BLACK_LIST):
            raise LayoutError(f"a topic filter is white_list or black_list, not {self.pattern!r}")
        regex = self.raw.strip().replace(",", "|").replace(" ", "")
        regex = re.sub(r"""^["']+""", "", regex)
        regex = re.sub(r"""["']+$""", "", regex)
        try:
            re.compile(regex)
        except re.error:
            raise LayoutError(f"{regex} is an invalid regex.") from None
        object.__setattr__(self, "regex", regex)

    def allows(self, topic: str, exclude_internal: bool = True) -> bool:
        if exclude_internal and topic in INTERNAL_TOPICS:
            return False
        matched = re.fullmatch(self.regex, topic) is not None
        return matched if self.pattern == WHITE_LIST else not matched

    def select(self, topics: Iterable[str], exclude_internal: bool = True) -> list[str]:
        return sorted(t for t in topics if self.allows(t, exclude_internal))


def whitelist(raw: str) -> TopicFilter:
    return TopicFilter(raw, WHITE_LIST)


def blacklist(raw: str) -> TopicFilter:
    return TopicFilter(raw, BLACK_LIST)


# ------------------------------------------------------------------------------ consumer registration node

@dataclass(frozen=True)
class ConsumerRegistration:
    """The data of ``/consumers/<g>/ids/<consumerId>``.

    ``subscription`` maps topic (static) or the normalised regex (wildcards, exactly one entry) to the stream
    count. Key order in the JSON is Kafka's: version, subscription, pattern, timestamp.
    """

    subscription: Mapping[str, int]
    pattern: str = STATIC
    timestamp: str = ""
    version: int = 1

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise LayoutError(f"unknown subscription pattern {self.pattern!r}")
        for key, streams in self.subscription.items():
            if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
                raise LayoutError(f"stream count for {key!r} must be an integer >= 1, got {streams!r}")
        if self.pattern != STATIC and len(self.subscription) != 1:
            raise LayoutError("a wildcard registration has exactly one regex entry")

    @classmethod
    def static(cls, topic_streams: Mapping[str, int], timestamp_ms: int | None = None) -> ConsumerRegistration:
        ts = int(runtime.time() * 1000) if timestamp_ms is None else timestamp_ms
        return cls(dict(topic_streams), STATIC, str(ts))

    @classmethod
    def wildcard(cls, topic_filter: TopicFilter, streams: int,
                 timestamp_ms: int | None = None) -> ConsumerRegistration:
        ts = int(runtime.time() * 1000) if timestamp_ms is None else timestamp_ms
        return cls({topic_filter.regex: streams}, topic_filter.pattern, str(ts))

    @property
    def is_wildcard(self) -> bool:
        return self.pattern != STATIC and bool(self.subscription)

    @property
    def topic_filter(self) -> TopicFilter | None:
        if not self.is_wildcard:
            return None
        return TopicFilter(next(iter(self.subscription)), self.pattern)

    def encode(self) -> bytes:
        # Kafka escapes only the wildcard regex (WildcardTopicCount.getTopicCountMap); static topic names are
        # legal characters only and go out as they are.
        sub = {(_escape(k) if self.pattern != STATIC else k): v for k, v in self.subscription.items()}
        return kafka_json({"version": self.version, "subscription": sub, "pattern": self.pattern,
                           "timestamp": self.timestamp}).encode("utf-8")

    @classmethod
    def decode(cls, path: str, data: bytes | str | None) -> ConsumerRegistration:
        if (known := _REGISTRATIONS.get(data)) is not None:
            return known  # type: ignore[return-value]
        obj = _load_json_object(path, data)
        pattern = _require(obj, "pattern", str, path, data)
        sub = _require(obj, "subscription", dict, path, data)
        for k, v in sub.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise MalformedNodeError(path, data, f"stream count for {k!r} should be an integer >= 1, got {v!r}")
        if pattern not in PATTERNS:
            raise MalformedNodeError(path, data, f"unknown pattern {pattern!r}")
        if pattern != STATIC and len(sub) > 1:
            raise MalformedNodeError(path, data, "a wildcard subscription has more than one entry")
        ts = obj.get("timestamp", "")
        version = obj.get("version", 1)
        # Kafka treats an empty wildcard subscription as an empty static one (TopicCount.constructTopicCount).
        return _REGISTRATIONS.put(data, cls(dict(sub), pattern if sub else STATIC, str(ts),
                                            int(version) if isinstance(version, int) else 1))

    def topic_streams(self, all_topics: Iterable[str] = (), exclude_internal: bool = True) -> dict[str, int]:
        """Topic → stream count; a wildcard is resolved against the children of ``/brokers/topics``."""
        tf = self.topic_filter
        if tf is None:
            return dict(self.subscription)
        streams = next(iter(self.subscription.values()))
        return {t: streams for t in tf.select(all_topics, exclude_internal)}


# --------------------------------------------------------------------------------- owner and offset nodes

def encode_owner(tid: str) -> bytes:
    return tid.encode("utf-8")


def decode_owner(path: str, data: bytes | None) -> str:
    if not data:
        raise MalformedNodeError(path, data, "owner node holds no consumer thread id")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedNodeError(path, data, "owner node is not UTF-8") from None


def encode_offset(offset: int) -> bytes:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise LayoutError(f"offset must be an integer, got {offset!r}")
    return str(offset).encode("ascii")


def decode_offset(path: str, data: bytes | None) -> int:
    try:
        text = (data or b"").decode("ascii").strip()
        return int(text, 10)
    except (UnicodeDecodeError, ValueError):
        raise MalformedNodeError(path, data, "offset node does not hold a decimal integer") from None


# ------------------------------------------------------------------------------------ /brokers/topics/<t>

@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<topic>``: partition → replica broker ids. Versions 1–3 read; version 1 written."""

    partitions: Mapping[int, Sequence[int]]
    version: int = 1
    extra: Mapping[str, object] = field(default_factory=dict)

    @functools.cached_property
    def partition_ids(self) -> list[int]:
        """Numerically sorted, like ``ZkUtils.getPartitionsForTopics``. One list per decoded node, shared by
        every reader of the same bytes (:data:`_TOPIC_NODES`): read it, do not change it. A herd of N members
        on N·k partitions would otherwise hold N copies of it."""
        return sorted(self.partitions)

    def encode(self) -> bytes:
        parts = {str(p): list(self.partitions[p]) for p in sorted(self.partitions)}
        return kafka_json({"version": 1, "partitions": parts}).encode("utf-8")

    @classmethod
    def decode(cls, path: str, data: bytes | str | None) -> TopicAssignment:
        if (known := _TOPIC_NODES.get(data)) is not None:
            return known  # type: ignore[return-value]
        obj = _load_json_object(path, data)
        version = obj.get("version", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise MalformedNodeError(path, data, f"unsupported version {version!r}")
        raw_parts = _require(obj, "partitions", dict, path, data)
        parts: dict[int, list[int]] = {}
        for key, replicas in raw_parts.items():
            try:
                pid = int(key, 10)
            except ValueError:
                raise MalformedNodeError(path, data, f"partition id {key!r} is not an integer") from None
            if pid < 0:
                raise MalformedNodeError(path, data, f"partition id {key!r} is negative")
            if not isinstance(replicas, list) or not all(isinstance(r, int) and not isinstance(r, bool)
                                                         for r in replicas):
                raise MalformedNodeError(path, data, f"replicas of partition {key} should be a list of ints")
            parts[pid] = replicas
        extra = {k: v for k, v in obj.items() if k not in ("version", "partitions")}
        return _TOPIC_NODES.put(data, cls(parts, version, extra))


# --------------------------------------------------------------------------------------- /brokers/ids/<id>

@dataclass(frozen=True)
class BrokerInfo:
    """``/brokers/ids/<id>``: versions 1–5 read, version 4 written (as Kafka 0.10.0+ brokers do)."""

    broker_id: int
    host: str
    port: int
    endpoints: tuple[str, ...] = ()
    jmx_port: int = -1
    timestamp: str = ""
    rack: str | None = None
    listener_security_protocol_map: Mapping[str, str] | None = None
    version: int = 4

    @classmethod
    def plaintext(cls, broker_id: int, host: str, port: int, timestamp_ms: int | None = None,
                  rack: str | None = None) -> BrokerInfo:
        ts = int(runtime.time() * 1000) if timestamp_ms is None else timestamp_ms
        return cls(broker_id, host, port, (f"PLAINTEXT://{host}:{port}",), -1, str(ts), rack,
                   {"PLAINTEXT": "PLAINTEXT"}, 4)

    def encode(self) -> bytes:
        obj: dict[str, object] = {"version": self.version, "host": self.host, "port": self.port}
        if self.version >= 2:
            obj["endpoints"] = list(self.endpoints)
        obj["jmx_port"] = self.jmx_port
        obj["timestamp"] = self.timestamp
        if self.version >= 3 and self.rack is not None:
            obj["rack"] = self.rack
        if self.version >= 4:
            obj["listener_security_protocol_map"] = dict(self.listener_security_protocol_map or {})
        return kafka_json(obj).encode("utf-8")

    def plaintext_address(self) -> tuple[str, int]:
        """The (host, port) a PLAINTEXT client connects to."""
        protocols = dict(self.listener_security_protocol_map or {})
        for ep in self.endpoints:
            name, _, hostport = ep.partition("://")
            if protocols.get(name, name) == "PLAINTEXT":
                host, _, port = hostport.rpartition(":")
                return host.strip("[]") or self.host, int(port)
        return self.host, self.port

    @classmethod
    def decode(cls, path: str, data: bytes | str | None) -> BrokerInfo:
        obj = _load_json_object(path, data)
        try:
            broker_id = int(path.rsplit("/", 1)[-1])
        except ValueError:
            broker_id = -1
        version = _require(obj, "version", int, path, data)
        if version < 1:
            raise MalformedNodeError(path, data, f"unsupported version {version}")
        endpoints: tuple[str, ...] = ()
        host = obj.get("host")
        port = obj.get("port")
        if version == 1:
            host = _require(obj, "host", str, path, data)
            port = _require(obj, "port", int, path, data)
        else:
            eps = _require(obj, "endpoints", list, path, data)
            if not all(isinstance(e, str) and "://" in e for e in eps):
                raise MalformedNodeError(path, data, "endpoints should be a list of 'LISTENER://host:port'")
            endpoints = tuple(eps)
        lspm = obj.get("listener_security_protocol_map")
        if lspm is not None and not isinstance(lspm, dict):
            raise MalformedNodeError(path, data, "listener_security_protocol_map should be an object")
        info = cls(broker_id, host if isinstance(host, str) else "", port if isinstance(port, int) else -1,
                   endpoints, obj.get("jmx_port", -1), str(obj.get("timestamp", "")), obj.get("rack"), lspm,
                   version)
        if version > 1:
            h, p = info.plaintext_address()
            if not info.host or info.port < 0:
                info = cls(broker_id, h, p, endpoints, info.jmx_port, info.timestamp, info.rack, lspm, version)
        return info
