"""zkhandler.PollHandler: the select() kazoo's connection loop waits in (right answers, poll sets kept between
calls for the same objects: kazoo's loop alternates three combinations dozens of times per rebalance), and
LatchResult, the answer of each request (kazoo's AsyncResult contract), alone and under a real client, and the
callbacks marked runs_inline, which skip kazoo's worker threads; EagerConnection, which reads and writes before
it polls."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.connection import ConnectionDropped

from zkconsumer.zk.handler import EagerConnection, LatchResult, PollHandler, runs_inline
from zkconsumer.zk.registry import new_client


def test_readiness_is_reported_and_poll_sets_are_kept_per_combination() -> None:
    h = PollHandler()
    a, b = socket.socketpair()
    try:
        assert h.select([a, b], [], [], 0.01) == ([], [], [])
        b.send(b"x")
        assert h.select([a, b], [], [], 1.0)[0] == [a]
        assert h.select([a], [], [], 1.0)[0] == [a]
        assert h.select([], [a], [], 1.0)[1] == [a]
        pollers = [entry[2] for entry in h._polls.sets]
        for _ in range(5):  # the loop's pattern: the same three combinations again
            assert h.select([a, b], [], [], 0)[0] == [a]
            assert h.select([a], [], [], 0)[0] == [a]
            assert h.select([], [a], [], 0)[1] == [a]
        assert sorted(map(id, (e[2] for e in h._polls.sets))) == sorted(map(id, pollers))  # none built again
        a.recv(1)
        assert h.select([a], [], [], 0.01) == ([], [], [])
    finally:
        a.close()
        b.close()


def test_a_new_socket_gets_its_own_poll_set_and_old_ones_are_dropped() -> None:
    h = PollHandler()
    pairs = [socket.socketpair() for _ in range(6)]
    try:
        for a, b in pairs:
            b.send(b"x")
            assert h.select([a], [], [], 1.0)[0] == [a]  # never the answer for an earlier socket's set
        assert len(h._polls.sets) == PollHandler._KEPT
    finally:
        for a, b in pairs:
            a.close()
            b.close()


def test_each_thread_polls_with_its_own_sets() -> None:
    h = PollHandler()
    a, b = socket.socketpair()
    seen: list = []
    try:
        t = threading.Thread(target=lambda: seen.append(h.select([a], [], [], 0.3)))
        t.start()  # waits in poll() while this thread polls the same objects: separate poll objects
        assert h.select([a], [], [], 0.05) == ([], [], [])
        b.send(b"x")
        t.join(5)
        assert seen == [([a], [], [])]
    finally:
        a.close()
        b.close()


def test_tuples_find_the_same_poll_set_as_lists() -> None:
    h = PollHandler()
    a, b = socket.socketpair()
    try:
        b.send(b"x")
        assert h.select((a,), (), (), 1.0)[0] == [a]
        assert h.select([a], [], [], 1.0)[0] == [a]
        assert len(h._polls.sets) == 1
    finally:
        a.close()
        b.close()


def test_a_pending_result_times_out_and_an_answer_wakes_every_waiter() -> None:
    r = PollHandler().async_result()
    assert isinstance(r, LatchResult) and not r.ready()
    with pytest.raises(KazooTimeoutError):
        r.get(block=False)
    t0 = time.monotonic()
    with pytest.raises(KazooTimeoutError):
        r.get(timeout=0.05)
    assert time.monotonic() - t0 >= 0.04
    assert r.wait(0.01) is False
    got: list = []
    waiters = [threading.Thread(target=lambda: got.append(r.get(timeout=5))) for _ in range(3)]
    for w in waiters:
        w.start()
    r.set("answer")
    r.set("ignored")  # a second answer changes nothing
    for w in waiters:
        w.join(5)
    assert got == ["answer"] * 3
    assert r.ready() and r.successful() and r.wait(0) and r.get() == "answer" and r.exception is None


def test_an_exception_is_raised_to_every_reader() -> None:
    r = PollHandler().async_result()
    error = NoNodeError("gone")
    r.set_exception(error)
    for _ in range(2):
        with pytest.raises(NoNodeError):
            r.get()
    assert r.ready() and not r.successful() and r.exception is error


def test_callbacks_run_on_the_handler_linked_before_or_after_the_answer_and_unlinked_ones_do_not() -> None:
    h = PollHandler()
    h.start()
    try:
        r = h.async_result()
        seen: list = []
        done = threading.Event()
        first = lambda res: seen.append(("first", res.get()))  # noqa: E731
        dropped = lambda res: seen.append(("dropped", res.get()))  # noqa: E731
        r.rawlink(first)
        r.rawlink(first)  # linked once
        r.rawlink(dropped)
        r.unlink(dropped)
        r.set(7)
        r.rawlink(lambda res: (seen.append(("late", res.get())), done.set()))
        assert done.wait(5)
        assert seen[0] == ("first", 7) and ("late", 7) in seen and ("dropped", 7) not in seen
    finally:
        h.stop()


def test_a_real_client_answers_through_latch_results(zk_connect: str) -> None:
    zk: KazooClient = new_client(zk_connect, timeout=10.0)
    zk.start()
    try:
        zk.ensure_path("/latch/a")
        pending = [zk.get_async("/latch/a") for _ in range(50)] + [zk.get_async("/latch/missing")]
        assert all(isinstance(p, LatchResult) for p in pending)
        assert [p.get(timeout=10)[0] for p in pending[:-1]] == [b""] * 50
        with pytest.raises(NoNodeError):
            pending[-1].get(timeout=10)
        fired = threading.Event()
        zk.exists("/latch/b", watch=lambda event: fired.set())
        zk.create("/latch/b")
        assert fired.wait(10)  # watches still reach their callbacks
    finally:
        zk.stop()
        zk.close()


def test_marked_callbacks_run_on_the_connection_thread_and_the_others_on_kazoos_workers(zk_connect: str) -> None:
    zk: KazooClient = new_client(zk_connect, timeout=10.0)
    zk.start()
    try:
        connection_thread = zk._connection._connection_routine
        ran: dict[str, threading.Thread] = {}
        done = {name: threading.Event() for name in ("watch", "inline watch", "link", "inline link")}

        def note(name: str) -> None:
            ran[name] = threading.current_thread()
            done[name].set()

        @runs_inline
        def broken(event) -> None:
            raise RuntimeError("a bug in an inline callback")

        zk.ensure_path("/inline")
        zk.exists("/inline/a", watch=lambda event: note("watch"))
        zk.exists("/inline/a", watch=runs_inline(lambda event: note("inline watch")))
        zk.exists("/inline/a", watch=broken)
        zk.get_async("/inline").rawlink(lambda result: note("link"))
        # A link made after the answer arrived runs at once on the linking thread (kazoo's rawlink): on a loaded
        # machine the answer can beat the link, so link to an answer that is still pending (a CI run saw the race).
        for _ in range(100):
            pending = zk.get_async("/inline")
            if not pending.ready():
                pending.rawlink(runs_inline(lambda result: note("inline link")))
                break
        else:
            raise AssertionError("every answer arrived before its link: nothing to learn about the link's thread")
        zk.create("/inline/a")
        assert all(event.wait(10) for event in done.values())
        assert ran["inline watch"] is connection_thread and ran["inline link"] is connection_thread
        assert ran["watch"] is not connection_thread and ran["link"] is not connection_thread
        # The exception was logged, not raised into kazoo's loop: the connection still answers and delivers.
        fired = threading.Event()
        zk.exists("/inline/b", watch=runs_inline(lambda event: fired.set()))
        zk.create("/inline/b")
        assert fired.wait(10) and zk.connected
    finally:
        zk.stop()
        zk.close()


def _eager_over(sock: socket.socket) -> EagerConnection:
    """An EagerConnection over one end of a socket pair (its _read and _write need only the socket and handler)."""
    conn = EagerConnection.__new__(EagerConnection)
    sock.setblocking(False)  # as kazoo sets its socket
    conn._socket, conn.handler = sock, PollHandler()
    return conn


def test_a_read_waits_for_the_bytes_still_missing_and_a_closed_peer_is_a_dropped_connection() -> None:
    ours, peer = socket.socketpair()
    conn = _eager_over(ours)
    with peer:
        peer.sendall(b"abcd")
        assert conn._read(4, 5.0) == b"abcd"  # all there: no wait
        peer.sendall(b"xyz")
        got: list = []
        reader = threading.Thread(target=lambda: got.append(conn._read(10, 5.0)))
        reader.start()  # 3 of 10 bytes there: the rest is waited for
        peer.sendall(b"0123456")
        reader.join(10)
        assert got == [b"xyz0123456"]
        with pytest.raises(KazooTimeoutError):  # nothing arrives: kazoo's timeout, as before
            conn._read(1, 0.05)
    with pytest.raises(ConnectionDropped):
        conn._read(4, 5.0)
    ours.close()


def test_a_write_larger_than_the_socket_buffer_arrives_whole() -> None:
    ours, peer = socket.socketpair()
    conn = _eager_over(ours)
    message = bytes(range(256)) * 40_000  # ~10 MB: the first send takes part of it, kazoo's loop the rest
    received = bytearray()

    def drain() -> None:
        while len(received) < len(message):
            chunk = peer.recv(1 << 16)
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    conn._write(message, 10.0)
    reader.join(30)
    assert bytes(received) == message
    peer.close()
    with pytest.raises(ConnectionDropped):
        conn._write(b"x" * (1 << 20), 5.0)  # the peer is gone
    ours.close()


def test_a_real_client_uses_the_eager_connection_for_large_and_pipelined_requests(zk_connect: str) -> None:
    zk: KazooClient = new_client(zk_connect, timeout=10.0)
    assert type(zk._connection) is EagerConnection
    zk.start()
    try:
        big = bytes(range(256)) * 3_500  # ~900 KB, under ZooKeeper's 1 MB jute.maxbuffer: many reads per reply
        zk.create("/eager/big", big, makepath=True)
        assert zk.get("/eager/big")[0] == big
        pending = [zk.get_async("/eager/big") for _ in range(5)] + [zk.exists_async(f"/eager/n{i}") for i in range(200)]
        assert all(p.get(timeout=10)[0] == big for p in pending[:5])
        assert [p.get(timeout=10) for p in pending[5:]] == [None] * 200
    finally:
        zk.stop()
        zk.close()
