"""ZooKeeper's ``multiRead`` (3.6+): many ``getData`` in one request and one response.

A member meeting its group for the first time reads every registration under ``ids``: N reads for each of N
members, a quarter of a million at 500 members in a cold start. Pipelined (one ``getData`` each) every read costs
the member a request, a response, a wake-up and a result object, and ZooKeeper a trip through its request
pipeline; that was 21 of the 22 seconds of a 500-member cold start on two cores. ``multiRead`` carries them all
in one request, answered by one response with a result per node (a missing node is an error result of its own,
not a failed request), and leaves the ZooKeeper tree and what every member reads exactly as they were.

kazoo (2.11) has no ``multiRead``; :class:`MultiRead` is a request in kazoo's own form (``type``,
``serialize``, ``deserialize``) sent through its connection. A server older than 3.6 does not know the opcode:
it answers "unimplemented" and drops the connection, so :func:`supports_multi_read` asks the server's version
first (the ``srvr`` command, allowed by default since 3.5) and the registry falls back to pipelined reads when it
cannot tell. The wire format is ZooKeeper's ``MultiOperationRecord`` / ``MultiResponse``.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Callable

from kazoo.exceptions import EXCEPTIONS, NoNodeError
from kazoo.protocol.serialization import int_struct, multiheader_struct, stat_struct, write_string
from kazoo.protocol.states import ZnodeStat

from zkconsumer import runtime
from zkconsumer.errors import UnexpectedResponse
from zkconsumer.zk.server import four_letter_word

#: (host, port, word, timeout) → the server's answer: zk/server.py's ``four_letter_word``, or a handler's own
FourLetterWord = Callable[[str, int, str, float], str]

_GET_DATA = 4  # ZooKeeper's OpCode.getData
_ERROR = -1  # OpCode.error: a failed operation's result
_FALSE = b"\x00"  # GetDataRequest.watch: no watch
_END = multiheader_struct.pack(-1, True, -1)


class MultiRead(namedtuple("MultiRead", "paths")):
    """``getData`` of every path in ``paths`` (chroot applied), no watches. The response is one entry per path,
    in order: ``(data, ZnodeStat)``, or the kazoo exception of that node's error (``NoNodeError`` for a node
    that is gone)."""

    type = 22  # OpCode.multiRead

    def serialize(self) -> bytearray:
        b = bytearray()
        op = multiheader_struct.pack(_GET_DATA, False, -1)
        for path in self.paths:
            b += op
            b += write_string(path)
            b += _FALSE
        b += _END
        return b

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list:
        unpack_int, unpack_header, unpack_stat = int_struct.unpack_from, multiheader_struct.unpack_from, \
            stat_struct.unpack_from
        results: list = []
        while True:
            kind, done, err = unpack_header(buf, offset)
            offset += multiheader_struct.size
            if done:
                return results
            if kind == _GET_DATA:
                (length,) = unpack_int(buf, offset)
                offset += 4
                data = None if length < 0 else bytes(buf[offset:offset + length])
                offset += max(length, 0)
                results.append((data, ZnodeStat._make(unpack_stat(buf, offset))))
                offset += stat_struct.size
            elif kind == _ERROR:
                (code,) = unpack_int(buf, offset)
                offset += 4
                results.append(EXCEPTIONS[code]())
            else:
                raise UnexpectedResponse(f"multiRead: unexpected result type {kind} (error {err})")


def read_data(zk, paths: list[str]) -> dict[str, bytes | None]:
    """Path → data (None: no such node) of every path, in one ``multiRead``; any other error is raised."""
    return read_data_async(zk, paths)()


def read_data_async(zk, paths: list[str]) -> Callable[[], dict[str, bytes | None]]:
    """Send the ``multiRead`` now; the function returned waits for its answer (as :func:`read_data`). Lets a read
    travel in the same flush as the write before it: ZooKeeper answers a session's requests in order."""
    prefix = zk.chroot or ""
    result = zk.handler.async_result()
    zk._call(MultiRead([prefix + p for p in paths]), result)  # kazoo's own submission path, as its calls do

    def answer() -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for path, entry in zip(paths, result.get(), strict=True):
            if isinstance(entry, NoNodeError):
                out[path] = None
            elif isinstance(entry, Exception):
                raise entry
            else:
                out[path] = entry[0]
        return out
    return answer


_VERSION = re.compile(r"Zookeeper version: (\d+)\.(\d+)")
_known: dict[str, bool] = {}
_known_lock = runtime.Lock()  # made at import, so a live lock: it guards the dict only, never the question


def supports_multi_read(servers: list[tuple[str, int]], timeout: float = 1.0,
                        ask: FourLetterWord | None = None) -> bool:
    """Whether the ZooKeeper ensemble of ``servers`` (kazoo's ``client.hosts``) serves ``multiRead``: every server
    that answers ``srvr`` says 3.6 or later. Asked once per ensemble per process; unknown counts as no.

    ``ask``: how to send the four-letter word, when the client's handler has its own way (the simulator's network,
    sim/kazoo_handler.py); then nothing is cached in the process, as each simulated world is a server of its own."""
    if ask is not None:
        return _ask(servers, timeout, ask)
    key = ",".join(f"{h}:{p}" for h, p in sorted(servers))
    with _known_lock:
        if key in _known:
            return _known[key]
    answer = _ask(servers, timeout)
    with _known_lock:
        _known[key] = answer
    return answer


def _ask(servers: list[tuple[str, int]], timeout: float, ask: FourLetterWord | None = None) -> bool:
    seen = False
    for host, port in servers:
        try:
            answer = (ask or four_letter_word)(host, port, "srvr", timeout)
        except OSError:
            continue  # down or unreachable now: the others decide
        if "not currently serving" in answer:
            continue  # starting, or cut off from its quorum: it says nothing of its version, the others decide
        if not serves_multi_read(answer):
            return False
        seen = True
    return seen


def serves_multi_read(srvr: str) -> bool:
    """Whether a server whose ``srvr`` answer is ``srvr`` serves ``multiRead`` (3.6 or later). No version in
    it (the command is not whitelisted, or not a ZooKeeper): cannot tell, so no."""
    match = _VERSION.search(srvr)
    return match is not None and (int(match.group(1)), int(match.group(2))) >= (3, 6)
