"""A process pause shorter than the session (zk/timing.py; docs/failure-modes.md, "a pause shorter than the
session"): with a 4 s session, a member of the kafka-0.8 profile paused 3 s loses its session, as Kafka 0.8.2.2's
consumer does, and a member of the default profile keeps it.

Real ZooKeeper (tickTime 500 ms, as in the lab), a real SIGSTOP of a client process. The pause starts 0.75 s after
the client's last request reached the server, inside the window where no ping of its own can intervene (kazoo's
next is due 0.93–1.32 s after its last send), so the outcome does not depend on chance:

* the server expires the session 4.0–4.5 s after that request (its expiry is rounded up to a tick), i.e. 3.25–3.75 s
  after the pause began;
* a kazoo-timed client pings as soon as it wakes, 3.0 s after the pause began: in time;
* a Java-timed client wakes having heard nothing for 3.75 s, past its read timeout (2.67 s): it drops its
  connection and reconnects to the one server after 1 s + a random 0–1 s, 4.0–5.0 s after the pause began: late.
  Told its session expired, it opens the next one at once, as zkclient's new ZooKeeper does (no second wait).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from zkconsumer.config import PROFILE_SETTINGS
from zkconsumer.zk.registry import connect
from zkconsumer.zk.timing import ClientTiming

SESSION_MS = 4000
PAUSE_S = 3.0
SINCE_LAST_REQUEST_S = 0.75

MEMBER = textwrap.dedent("""
    import logging, os, signal, sys, time
    from kazoo.retry import KazooRetry
    from zkconsumer.zk.registry import connect
    from zkconsumer.zk.timing import ClientTiming
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")
    zk, timing, session_ms = sys.argv[1], ClientTiming(sys.argv[2]), int(sys.argv[3])
    client = connect(zk, session_timeout_ms=session_ms, timing=timing)
    client.add_listener(lambda state: print(f"state {state}", f"at {state} {time.monotonic():.3f}", sep=chr(10),
                                            flush=True))
    session = client.client_id[0]
    client.create("/member", ephemeral=True)
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)  # SIGCONT may reach any thread; its C handler writes here whichever it is
    signal.signal(signal.SIGCONT, lambda *_: None)
    client.exists("/member")  # the last request before the pause: the server touches the session now
    print("touched", flush=True)
    os.read(woken, 1)  # until SIGCONT
    stat = KazooRetry(max_tries=-1, delay=0.05, backoff=1, ignore_expire=True)(client.exists, "/member")
    kept = client.client_id[0] == session and stat is not None and stat.ephemeralOwner == session
    print("kept" if kept else "lost", flush=True)
    sys.stdin.readline()  # the test has looked at the node: only now may the session end and take it
    client.stop()
""")


def _lines(proc: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _await(lines: queue.Queue, wanted: set[str], timeout: float = 20.0) -> tuple[str, list[str]]:
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        assert line is not None, f"the member exited; it printed {seen}"
        seen.append(line)
        if line in wanted:
            return line, seen


@pytest.mark.parametrize(("profile", "outcome"), [("kafka-0.8", "lost"), ("default", "kept")])
def test_a_pause_shorter_than_the_session(zk_connect: str, profile: str, outcome: str) -> None:
    timing = PROFILE_SETTINGS[profile].zk_client_timing
    observer = connect(zk_connect)
    member = subprocess.Popen([sys.executable, "-c", MEMBER, zk_connect, timing.value, str(SESSION_MS)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = _lines(member)
        _await(lines, {"touched"})
        gone = threading.Event()
        assert observer.exists("/member", watch=lambda event: gone.set()) is not None
        time.sleep(SINCE_LAST_REQUEST_S)  # where the pause starts: timed, not a synchronisation
        member.send_signal(signal.SIGSTOP)
        time.sleep(PAUSE_S)  # the pause itself
        member.send_signal(signal.SIGCONT)
        verdict, seen = _await(lines, {"kept", "lost"})
        assert verdict == outcome, seen
        if outcome == "lost":
            assert gone.wait(10), "the server expired the session: its ephemeral node goes"
            assert "state SUSPENDED" in seen and "state LOST" in seen, seen
            at = {line.split()[1]: float(line.split()[2]) for line in seen if line.startswith("at ")}
            assert at["CONNECTED"] - at["LOST"] < 0.5, seen  # the new session at once, not after 1-2 s
            member.stdin.close()
            member.wait(20)
            # the client dropped the connection itself on waking, before sending anything
            assert "nothing heard from the server for" in member.stderr.read()
        else:
            assert not gone.is_set() and "state SUSPENDED" not in seen, seen
    finally:
        if not member.stdin.closed:
            member.stdin.close()
        if member.poll() is None:
            member.send_signal(signal.SIGCONT)
            member.kill()
        member.wait(20)
        observer.stop()
        observer.close()


def test_the_profiles_time_their_zookeeper_client_as_their_clients_do() -> None:
    assert PROFILE_SETTINGS["kafka-0.8"].zk_client_timing is ClientTiming.ZOOKEEPER_3_4
    assert PROFILE_SETTINGS["default"].zk_client_timing is ClientTiming.KAZOO
