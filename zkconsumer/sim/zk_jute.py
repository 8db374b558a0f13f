"""ZooKeeper's wire format (jute) as the *server* reads and writes it: pure functions from bytes to requests and
from replies to bytes, nothing else.

kazoo (``kazoo.protocol.serialization``) writes requests and reads replies; a simulated server needs the other
direction, for the requests kazoo sends. Every frame is a 4-byte big-endian length and a body. The first frame
of a connection is a ``ConnectRequest`` (no header) answered by a ``ConnectResponse``; after it each request is
``xid, type`` then its record, and each reply ``xid, zxid, err`` then its record (none when ``err`` is not OK,
except in a ``multi``, whose per-op errors travel in its body). Watch notifications are replies with xid -1.

Jute's encodings: int (4 bytes), long (8), boolean (1), buffer and ustring (length then bytes; length -1 for
null), vector (count then elements; -1 for null).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from zkconsumer.errors import ZkConsumerError
from zkconsumer.sim.zk_tree import Stat

_INT = struct.Struct("!i")
_LONG = struct.Struct("!q")
_STAT = struct.Struct("!qqqqiiiqiiq")
_REPLY_HEADER = struct.Struct("!iqi")
_MULTI_HEADER = struct.Struct("!i?i")  # a multi op's header: type, done, err
_MULTI_HEADER = struct.Struct("!iBi")


class MalformedFrame(ZkConsumerError, ValueError):
    """Bytes that are not the record they should be: a short frame, a bad length. The real server closes the
    connection on one; so does the simulated one."""


class OpCode(IntEnum):
    """``ZooDefs.OpCode``: a request's type on the wire."""

    ERROR = -1  # a multi's failed op
    CREATE = 1
    DELETE = 2
    EXISTS = 3
    GET_DATA = 4
    SET_DATA = 5
    GET_ACL = 6
    SET_ACL = 7
    GET_CHILDREN = 8
    SYNC = 9
    PING = 11
    GET_CHILDREN2 = 12
    CHECK = 13
    MULTI = 14
    CREATE2 = 15
    MULTI_READ = 22  # 3.6+: getData of many nodes in one request
    AUTH = 100
    SET_WATCHES = 101
    SASL = 102
    CLOSE_SESSION = -11


class Xid(IntEnum):
    """The reserved xids: notifications, pings, auth and setWatches travel outside the request numbering."""

    WATCH = -1
    PING = -2
    AUTH = -4
    SET_WATCHES = -8


class KeeperState(IntEnum):
    """``Watcher.Event.KeeperState``: the state a notification carries (always SyncConnected for a node's)."""

    SYNC_CONNECTED = 3


# ----------------------------------------------------------------------------------------------- reading
class Reader:
    """Reads jute records from one frame's body."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data = data
        self.offset = offset

    def _take(self, fmt: struct.Struct) -> int:
        try:
            (value,) = fmt.unpack_from(self.data, self.offset)
        except struct.error as exc:
            raise MalformedFrame(f"frame ends at {self.offset} of {len(self.data)} bytes") from exc
        self.offset += fmt.size
        return value

    def int(self) -> int:
        return self._take(_INT)

    def long(self) -> int:
        return self._take(_LONG)

    def bool(self) -> bool:
        if self.offset >= len(self.data):
            raise MalformedFrame("frame ends before a boolean")
        self.offset += 1
        return self.data[self.offset - 1] != 0

    def buffer(self) -> bytes | None:
        length = self.int()
        if length < 0:
            return None
        if self.offset + length > len(self.data):
            raise MalformedFrame(f"a {length}-byte field runs past the frame")
        chunk = self.data[self.offset:self.offset + length]
        self.offset += length
        return bytes(chunk)

    def string(self) -> str | None:
        raw = self.buffer()
        return None if raw is None else raw.decode("utf-8")

    def strings(self) -> list[str]:
        count = self.int()
        return [self.string() or "" for _ in range(max(count, 0))]

    def skip_acls(self) -> None:
        """An ACL vector: read past it (the model leaves ACLs out)."""
        for _ in range(max(self.int(), 0)):
            self.int()
            self.string()
            self.string()


# ----------------------------------------------------------------------------------------------- writing
class Writer:
    """Builds a jute record; :meth:`frame` prefixes its length."""

    def __init__(self) -> None:
        self.out = bytearray()

    def int(self, value: int) -> Writer:
        self.out += _INT.pack(value)
        return self

    def long(self, value: int) -> Writer:
        self.out += _LONG.pack(value)
        return self

    def bool(self, value: bool) -> Writer:
        self.out.append(1 if value else 0)
        return self

    def buffer(self, value: bytes | None) -> Writer:
        if value is None:
            return self.int(-1)
        self.int(len(value))
        self.out += value
        return self

    def string(self, value: str | None) -> Writer:
        return self.buffer(None if value is None else value.encode("utf-8"))

    def strings(self, values: list[str]) -> Writer:
        self.int(len(values))
        for value in values:
            self.string(value)
        return self

    def stat(self, stat: Stat) -> Writer:
        self.out += _STAT.pack(stat.czxid, stat.mzxid, stat.ctime, stat.mtime, stat.version, stat.cversion,
                               stat.aversion, stat.ephemeral_owner, stat.data_length, stat.num_children, stat.pzxid)
        return self

    def frame(self) -> bytes:
        return _INT.pack(len(self.out)) + bytes(self.out)


def split_frames(buffer: bytearray) -> list[bytes]:
    """Take every complete frame off the front of ``buffer`` (a stream may split or join frames anywhere)."""
    frames = []
    while len(buffer) >= 4:
        (length,) = _INT.unpack_from(buffer, 0)
        if length < 0:
            raise MalformedFrame(f"frame length {length}")
        if len(buffer) < 4 + length:
            break
        frames.append(bytes(buffer[4:4 + length]))
        del buffer[:4 + length]
    return frames


# ----------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class ConnectRequest:
    protocol_version: int
    last_zxid_seen: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: bool


@dataclass(frozen=True)
class ConnectResponse:
    """A timeout of 0 tells the client its session is gone (expired, or never existed here)."""

    protocol_version: int
    timeout_ms: int
    session_id: int
    passwd: bytes
    read_only: bool = False


@dataclass(frozen=True)
class PathRequest:
    """getData, exists, getChildren(2), sync: a path and (but sync) a watch flag."""

    path: str
    watch: bool = False


@dataclass(frozen=True)
class CreateRequest:
    path: str
    data: bytes
    flags: int


@dataclass(frozen=True)
class DeleteRequest:
    path: str
    version: int


@dataclass(frozen=True)
class SetDataRequest:
    path: str
    data: bytes
    version: int


@dataclass(frozen=True)
class CheckRequest:
    path: str
    version: int


@dataclass(frozen=True)
class MultiRequest:
    ops: tuple[tuple[OpCode, CreateRequest | DeleteRequest | SetDataRequest | CheckRequest], ...]


@dataclass(frozen=True)
class SetWatchesRequest:
    relative_zxid: int
    data: tuple[str, ...]
    exist: tuple[str, ...]
    child: tuple[str, ...]


@dataclass(frozen=True)
class Request:
    """One request after the handshake: its xid, its type (an :class:`OpCode`, or the raw number of a type this
    server does not know) and its record (None for a body-less one: ping, closeSession, or an unknown type)."""

    xid: int
    op: OpCode | int
    body: object = None


def decode_connect(frame: bytes) -> ConnectRequest:
    r = Reader(frame)
    version, last_zxid, timeout, session_id = r.int(), r.long(), r.int(), r.long()
    passwd = r.buffer() or b""
    read_only = r.bool() if r.offset < len(frame) else False  # old clients omit it
    return ConnectRequest(version, last_zxid, timeout, session_id, passwd, read_only)


def encode_connect_response(resp: ConnectResponse) -> bytes:
    w = Writer().int(resp.protocol_version).int(resp.timeout_ms).long(resp.session_id).buffer(resp.passwd)
    return w.bool(resp.read_only).frame()


def _decode_create(r: Reader) -> CreateRequest:
    path, data = r.string() or "", r.buffer() or b""
    r.skip_acls()
    return CreateRequest(path, data, r.int())


def _decode_op(op: OpCode, r: Reader) -> object:
    if op in (OpCode.CREATE, OpCode.CREATE2):
        return _decode_create(r)
    if op is OpCode.DELETE:
        return DeleteRequest(r.string() or "", r.int())
    if op is OpCode.SET_DATA:
        return SetDataRequest(r.string() or "", r.buffer() or b"", r.int())
    if op is OpCode.CHECK:
        return CheckRequest(r.string() or "", r.int())
    if op in (OpCode.EXISTS, OpCode.GET_DATA, OpCode.GET_CHILDREN, OpCode.GET_CHILDREN2):
        return PathRequest(r.string() or "", r.bool())
    if op is OpCode.SYNC:
        return PathRequest(r.string() or "")
    if op is OpCode.MULTI_READ:
        return _decode_multi_read(r)
    if op is OpCode.MULTI:
        allowed = (OpCode.CREATE, OpCode.CREATE2, OpCode.DELETE, OpCode.SET_DATA, OpCode.CHECK)
        ops = []
        while True:
            kind, done, _err = r.int(), r.bool(), r.int()
            if done:
                return MultiRequest(tuple(ops))
            sub = OpCode(kind) if kind in OpCode._value2member_map_ else kind
            if sub not in allowed:
                raise MalformedFrame(f"op type {kind} in a {op.name.lower()}")
            ops.append((sub, _decode_op(sub, r)))
    if op is OpCode.SET_WATCHES:
        return SetWatchesRequest(r.long(), tuple(r.strings()), tuple(r.strings()), tuple(r.strings()))
    return None


def _decode_multi_read(r: Reader) -> MultiRequest:
    """A ``multiRead``'s getData/getChildren ops, read in one loop: a herd's member sends thousands of paths in one
    (what :func:`_decode_op` reads op by op, with the same checks)."""
    data, offset, size = r.data, r.offset, len(r.data)
    unpack_header, unpack_int, header_size = _MULTI_HEADER.unpack_from, _INT.unpack_from, _MULTI_HEADER.size
    allowed = {OpCode.GET_DATA.value: OpCode.GET_DATA, OpCode.GET_CHILDREN.value: OpCode.GET_CHILDREN}
    ops = []
    try:
        while True:
            kind, done, _err = unpack_header(data, offset)
            offset += header_size
            if done:
                r.offset = offset
                return MultiRequest(tuple(ops))
            sub = allowed.get(kind)
            if sub is None:
                raise MalformedFrame(f"op type {kind} in a multi_read")
            (length,) = unpack_int(data, offset)
            offset += 4
            if length < 0:
                path = ""
            elif offset + length >= size:  # the path, then its watch flag's byte
                raise MalformedFrame(f"a {length}-byte field runs past the frame")
            else:
                path = data[offset:offset + length].decode("utf-8")
                offset += length
            watch = data[offset] != 0
            offset += 1
            ops.append((sub, PathRequest(path, watch)))
    except struct.error as exc:
        raise MalformedFrame(f"frame ends at {offset} of {size} bytes") from exc
    except IndexError as exc:
        raise MalformedFrame("frame ends before a boolean") from exc


def decode_request(frame: bytes) -> Request:
    r = Reader(frame)
    xid, kind = r.int(), r.int()
    if kind not in OpCode._value2member_map_:
        return Request(xid, kind)
    op = OpCode(kind)
    return Request(xid, op, _decode_op(op, r))


def encode_reply(xid: int, zxid: int, err: int, body: Writer | None = None) -> bytes:
    """A reply frame: the header, then the record (only when ``err`` is 0, as the server writes it)."""
    head = _REPLY_HEADER.pack(xid, zxid, err)
    rest = bytes(body.out) if body is not None and err == 0 else b""
    return _INT.pack(len(head) + len(rest)) + head + rest


def encode_notification(event_type: int, path: str, state: int = KeeperState.SYNC_CONNECTED) -> bytes:
    """A watch notification (``WatcherEvent``): xid -1, zxid -1, then type, state, path."""
    return encode_reply(Xid.WATCH, -1, 0, Writer().int(event_type).int(state).string(path))


def multi_header(w: Writer, op: int, done: bool, err: int) -> Writer:
    w.out += _MULTI_HEADER.pack(op, 1 if done else 0, err)
    return w
