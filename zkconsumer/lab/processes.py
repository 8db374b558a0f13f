"""The lab's consumer processes, by member name: started, stopped (SIGTERM) or killed (SIGKILL), started again under
the same id, bounced as a deploy restarts one, frozen (SIGSTOP) and thawed, and the state each is in as the live
view shows it.

Kept apart from the lab (runner.py) so that one object owns the processes and their states: the lab decides what a
member runs (its command line, given here as ``command``) and when a step strikes it; where a process runs is the
backend's business (backends.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from zkconsumer.lab.backends import LabBackend


class MemberProcesses:
    """The members' processes on ``backend``, each running ``command(name)``, its output in ``logs/<name>.log``;
    ``event`` says what happened (the lab's event list)."""

    def __init__(self, backend: LabBackend, logs: Path, command: Callable[[str], list[str]],
                 event: Callable[[str], None]) -> None:
        self.backend = backend
        self.logs = logs
        self.command = command
        self.event = event
        #: each member started so far → its state as the view shows it: running, stopping, stopped, paused,
        #: killed (-9), exit <code>
        self.status: dict[str, str] = {}
        self.paused: set[str] = set()

    def started(self, name: str) -> bool:
        return name in self.status

    def alive(self, name: str) -> bool:
        """Started, and its process has not exited (a frozen one is alive)."""
        return name in self.status and self.backend.exit_code(name) is None

    def running(self) -> list[str]:
        """The members in the ``running`` state (as of the last :meth:`reap`)."""
        return [n for n, st in self.status.items() if st == "running"]

    def start(self, name: str, command: list[str] | None = None) -> None:
        """Start ``name`` with its command line, or ``command`` (a stranger to a migration: without --migratable)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        self.backend.start(name, command or self.command(name), self.logs / f"{name}.log")
        self.status[name] = "running"
        self.event(f"{name} joined")

    def restart(self, name: str) -> None:
        """Start a stopped or killed consumer again under the same id (same container with Docker)."""
        if name not in self.status or self.backend.exit_code(name) is None:
            return
        self.backend.restart(name)
        self.status[name] = "running"
        self.event(f"{name} restarted")

    def bounce(self, name: str) -> None:
        """A deploy's restart of one member: SIGTERM, wait for it to exit (it leaves the group, or as a static
        member it does not), start it again under the same id. On a thread: the lab keeps watching meanwhile."""
        if not self.alive(name):
            return

        def run() -> None:
            self.stop(name)
            deadline = time.monotonic() + 30
            while self.backend.exit_code(name) is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.backend.exit_code(name) is None:
                self.event(f"{name} did not stop within 30 s; not restarted")
                return
            self.restart(name)

        threading.Thread(target=run, daemon=True, name=f"lab-bounce-{name}").start()

    def stop(self, name: str, kill: bool = False) -> None:
        if not self.alive(name):
            return
        self.backend.signal(name, kill)
        self.status[name] = "killed (-9)" if kill else "stopping"
        self.event(f"{name} {'killed with SIGKILL' if kill else 'stopped (SIGTERM)'}")

    def freeze(self, name: str) -> None:
        """SIGSTOP: the process keeps its connections and answers nothing, as in a long garbage-collection pause."""
        self.backend.freeze(name, True)
        self.paused.add(name)
        self.status[name] = "paused"

    def thaw(self, name: str) -> bool:
        """SIGCONT, once: False when ``name`` is not frozen (a timer and the lab's cleanup may both ask)."""
        try:
            self.paused.remove(name)  # atomic: only one caller gets past it
        except KeyError:
            return False
        self.backend.freeze(name, False)
        if self.status.get(name) == "paused":
            self.status[name] = "running"
        return True

    def reap(self) -> None:
        """Take the exits of processes that ended into their states."""
        for name in self.status:
            code = self.backend.exit_code(name)
            if code is not None and self.status[name] in ("running", "stopping"):
                self.status[name] = "stopped" if code == 0 or self.status[name] == "stopping" else f"exit {code}"

    def stop_all(self, timeout: float = 30.0) -> None:
        """SIGTERM to every member, SIGKILL to those still there ``timeout`` later (the lab thaws frozen ones
        first: a stopped process cannot act on SIGTERM)."""
        for name in list(self.status):
            self.stop(name)
        for name in list(self.status):
            if not self.backend.wait(name, timeout):
                self.backend.signal(name, kill=True)
                self.backend.wait(name, timeout)
        self.reap()
