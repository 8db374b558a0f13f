"""registry.PollHandler, the select() kazoo's connection loop waits in: right answers, and poll sets kept
between calls for the same objects (kazoo's loop alternates three combinations dozens of times per rebalance)."""

from __future__ import annotations

import socket
import threading

from zkconsumer.registry import PollHandler


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
