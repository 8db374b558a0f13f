"""How a ZooKeeper client times its connection: when it pings, when it gives up on a server it has not heard
from, how long it waits before connecting again. The profiles differ here (docs/profiles.md), and the difference
decides whether a process pause shorter than the session costs the session (docs/failure-modes.md, "a pause
shorter than the session").

Pure: the connection (zk/handler.py) acts on it; the profile (config.py) chooses it.
"""

from __future__ import annotations

from enum import Enum


class ClientTiming(Enum):
    """The timing model of the client's connection loop. Both have a read timeout of two thirds of the negotiated
    session timeout, ping when nothing was sent for about half of it, and bound the session handshake by the
    session timeout divided by the number of servers."""

    #: kazoo's own loop: a ping is due half a read timeout (less 10–400 ms of jitter) after the last send, and is
    #: sent as soon as the loop finds it due, also on waking from a pause; the connection is dropped only when the
    #: previous ping is still unanswered when the next one is due. Reconnects follow the client's retry backoff
    #: (zk/registry.py: 0.1 s, doubling, at most a third of the session timeout).
    KAZOO = "kazoo"
    #: ZooKeeper 3.4's Java client (``ClientCnxn.SendThread``), which Kafka 0.8 runs through zkclient: before it
    #: sends anything the loop compares the time since it last heard from the server with the read timeout, and
    #: past it drops its own connection ("session timed out, have not heard from server"), also on waking from a
    #: pause during which it could send no ping. Every connection attempt but the first of the client's life
    #: waits a random 0–1 s first, and 1 s more when it goes back to the server it was last connected to
    #: (``StaticHostProvider.next(1000)``: with one server in the connect string, every reconnect). The session
    #: survives only if that reconnect reaches the server before the server's expiry of it. Once it has expired,
    #: zkclient replaces the client with a new one, whose first attempt waits nothing: the new session comes at
    #: once.
    ZOOKEEPER_3_4 = "zookeeper-3.4"

    @property
    def drops_silent_connection(self) -> bool:
        """Whether the client drops its connection itself once it has heard nothing for the read timeout."""
        return self is ClientTiming.ZOOKEEPER_3_4

    @property
    def reconnect_wait_max_s(self) -> float:
        """The upper bound of the uniformly random wait before a connection attempt (0: kazoo's retry decides)."""
        return 1.0 if self is ClientTiming.ZOOKEEPER_3_4 else 0.0

    @property
    def same_server_wait_s(self) -> float:
        """The further wait before an attempt on the server the client was last connected to."""
        return 1.0 if self is ClientTiming.ZOOKEEPER_3_4 else 0.0


#: Between two attempts on a client never connected yet, the ZOOKEEPER_3_4 model waits this long (the Java client
#: waits nothing there and spins on a refused port; a floor, so that a server not up yet is not hammered).
FIRST_CONNECT_RETRY_S = 0.05
