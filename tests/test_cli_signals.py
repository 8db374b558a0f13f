"""SIGTERM to a command that started processes: it cleans up as after Ctrl-C, and nothing it started survives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import wait_until

pytestmark = pytest.mark.slow


def children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc), zombies left out."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_sigterm_to_a_lab_stops_what_it_started(tmp_path) -> None:
    log = (tmp_path / "lab.log").open("w")
    lab = subprocess.Popen([sys.executable, "-m", "zkconsumer", "lab", "--consumers", "1", "--duration", "120",
                            "--out", str(tmp_path / "run")], stdout=log, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
    started: set[int] = set()
    try:
        # ZooKeeper, the broker's process or threads, and the consumer process: wait for the consumer's trace.
        wait_until(lambda: any((tmp_path / "run" / "traces").glob("*.jsonl")) and len(children(lab.pid)) >= 2,
                   timeout=90, message="the lab's ZooKeeper and consumer processes")
        started |= children(lab.pid)
        lab.send_signal(signal.SIGTERM)
        try:
            code = lab.wait(60)
        except subprocess.TimeoutExpired:
            code = None
        log.flush()
        assert code == 143, f"exit {code}; the lab's output:\n{(tmp_path / 'lab.log').read_text()[-6000:]}"
        wait_until(lambda: not [p for p in started if alive(p)], timeout=30,
                   message="every process the lab started to end")
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
        for pid in started:
            if alive(pid):  # do not leave them to the next tests
                os.kill(pid, signal.SIGKILL)
        log.close()
