"""Run traces: every consumer appends JSON-lines events to its own file in a trace directory.

The schema is documented in docs/trace.md; it is the input of the Spark analysis (``zkconsumer analyze``).
Writing is thread-safe (fetcher, rebalance and commit threads all record) and each line is flushed as it is
written, so a consumer killed with SIGKILL leaves every event up to its last complete line.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from zkconsumer import runtime
from zkconsumer.errors import IllegalArgument
from zkconsumer.types import GroupMode

#: Every event name a consumer may write (docs/trace.md describes their fields).
EVENTS = frozenset({
    "registered", "rebalance_triggered", "attempt_started", "released", "assigned", "claim_conflict",
    "claimed", "rebalance_done", "rebalance_failed", "session_expired", "connection_suspended", "reconnected",
    "offset_committed", "offset_reset", "record_delivered", "shutdown",
    "join_stalled",  # coordinator mode: a join that has not completed within the rebalance timeout
    "fault_injected", "fault_healed",  # written by the lab's fault matrix (zkconsumer.lab.faults), not by consumers
    "lab_step",  # written by the lab: a step that changes the group (a join, stop, kill -9, restart, topic action)
})
#: The lab's own events: they describe the run, not a consumer (the analysis keeps them apart).
LAB_EVENTS = frozenset({"fault_injected", "fault_healed", "lab_step"})
SCHEMA_VERSION = 1


#: Who else sees every event as it is written: the simulator's checkers (zkconsumer/sim/), which judge a run after
#: every step, and its in-memory trace. Empty live. See :func:`observed`.
_OBSERVERS: list[Callable[[dict[str, Any]], None]] = []


@contextlib.contextmanager
def observed(observer: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Hand every event any :class:`TraceWriter` emits to ``observer`` as well, for the duration of the block;
    meanwhile a writer without a directory emits too (to the observers only), so a simulation need not write files."""
    _OBSERVERS.append(observer)
    try:
        yield
    finally:
        _OBSERVERS.remove(observer)


def now_ms() -> int:
    return int(runtime.time() * 1000)


def _tail_of(path: Path, tail: int = 65536) -> tuple[int, bool]:
    """The last ``seq`` written to ``path`` by an earlier process (0: none), and whether the file ends with a
    newline (a killed writer may have torn its last line). A member restarted under its consumer id appends to its
    file; its events must sort after the earlier life's, or the analysis would put the new life's deliveries inside
    the old life's stints (found by the migration fault matrix: a member killed and started again showed as two
    owners at once)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail))
            data = f.read()
    except FileNotFoundError:
        return 0, True
    for line in reversed(data.splitlines()):
        try:
            seq = json.loads(line).get("seq")
        except (ValueError, AttributeError):
            continue
        if isinstance(seq, int):
            return seq, data.endswith(b"\n")
    return 0, not data or data.endswith(b"\n")


class TraceWriter:
    """Appends events for one consumer to ``<dir>/<consumer id>.jsonl``; a no-op when ``directory`` is None.

    A later writer for the same file (a member that switched mode during a migration keeps its consumer id; a
    process started again under its consumer id) continues the sequence numbers, which the analysis orders a
    consumer's events by."""

    _last_seq: dict[Path, int] = {}
    _last_seq_lock = runtime.Lock()  # made at import, so a live lock: it guards a dict update, never a wait

    def __init__(self, directory: str | os.PathLike | None, group: str, consumer: str,
                 mode: GroupMode | None = None) -> None:
        self.group = group
        self.consumer = consumer
        # Written on every line when given: ``coordinator`` for consumer/coordinated/; absent means ``zookeeper``.
        self._mode = {"mode": mode} if mode else {}
        self._lock = runtime.Lock()
        self._seq = 0
        self._closed = False
        self._file: IO[str] | None = None
        self.path: Path | None = None
        if directory is not None:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.path = Path(directory) / f"{consumer}.jsonl"
            with TraceWriter._last_seq_lock:
                self._seq = TraceWriter._last_seq.get(self.path.resolve(), 0)
            torn = False
            if not self._seq:
                self._seq, whole = _tail_of(self.path)
                torn = not whole
            self._file = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives with us
            if torn:
                self._file.write("\n")  # a killed writer's torn last line stays one bad line, not two

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def emit(self, event: str, at_ms: int | None = None, **fields: Any) -> None:
        """Append one event, stamped now or at ``at_ms`` (a trace rebuilt from another program's log)."""
        if self._closed or (self._file is None and not _OBSERVERS):
            return
        if event not in EVENTS:
            raise IllegalArgument(f"unknown trace event {event!r}")
        with self._lock:
            self._seq += 1
            record = {"v": SCHEMA_VERSION, "ts": now_ms() if at_ms is None else at_ms, "event": event,
                      "group": self.group,
                      "consumer": self.consumer, "seq": self._seq, **self._mode, **fields}
            if self._file is not None:
                self._file.write(json.dumps(record, separators=(",", ":"), sort_keys=False) + "\n")
            for observer in _OBSERVERS:
                observer(record)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()
                self._file = None
                with TraceWriter._last_seq_lock:
                    TraceWriter._last_seq[self.path.resolve()] = self._seq
