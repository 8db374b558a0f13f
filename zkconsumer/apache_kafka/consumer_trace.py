"""A trace (docs/trace.md) for Apache Kafka 0.8.2.2's own high-level consumer, which writes none.

Kafka's ``ZookeeperConsumerConnector`` says what its rebalance does in its INFO log, in fixed words: ``begin
rebalancing consumer <id> try #<n>``, ``Releasing partition ownership``, ``<thread> successfully owned partition
<p> for topic <t>``, ``waiting for the partition ownership to be deleted: <p>``, ``Consumer <id> selected
partitions : …``, ``end rebalancing consumer <id> try #<n>``, ``ZKConsumerConnector shutting down`` … The harness
(``java/HighLevelConsumers.java``) prints each record a stream hands out as a JSON line. :class:`MemberTrace` is
the pure step from those two sources, in time order, to trace events; :class:`KafkaMemberTrace` tails the two files
of one member (its log4j file and its harness output) and writes the trace while the member runs.

What Kafka does not log, the trace does not invent: a rebalance's ``cause`` is ``watch`` (its log does not say
which watch fired; ``session_expired`` after its "ZK expired" line), a ``claim_conflict`` has an empty ``topic``
(the log line names only the partition), and there are no ``offset_committed`` lines (Kafka logs its ZooKeeper
commits at DEBUG only; the lab reads the committed offsets from ZooKeeper itself).
"""

from __future__ import annotations

import bisect
import calendar
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zkconsumer.trace import TraceWriter

#: A line of the log4j layout ``[%d] %p %m (%c)%n`` written by a JVM running with ``-Duser.timezone=UTC``.
_LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] (\w+) (.*) \(([\w.$]+)\)$")
_BEGIN = re.compile(r"begin rebalancing consumer (\S+) try #(\d+)$")
_END = re.compile(r"end rebalancing consumer (\S+) try #(\d+)$")
_OWNED = re.compile(r"(\S+) successfully owned partition (\d+) for topic (\S+)$")
_WAITING = re.compile(r"waiting for the partition ownership to be deleted: (\d+)$")
_SELECTED = re.compile(r"Consumer (\S+) selected partitions : ")

#: One trace event: (name, epoch ms, fields).
Event = tuple[str, int, dict[str, Any]]


def parse_log_line(line: str) -> tuple[int, str, str] | None:
    """(epoch ms, level, message without the ``[<consumer id>], `` prefix), or None for a line of another shape
    (a stack trace's continuation)."""
    m = _LOG_LINE.match(line.rstrip("\n"))
    if m is None:
        return None
    stamp, millis, level, message, _logger = m.groups()
    ts = calendar.timegm(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) * 1000 + int(millis)
    if message.startswith("[") and "], " in message:
        message = message.split("], ", 1)[1]
    return ts, level, message


@dataclass
class MemberTrace:
    """What one Kafka 0.8.2.2 member did, from its log and its records: the pure core, no I/O.

    Feed it the member's lines in time order (:meth:`log` for its log4j lines, :meth:`harness` for the harness's
    JSON events); each call returns the trace events that line implies."""

    consumer: str  # Kafka's consumerIdString: <group>_<consumer.id>
    subscription: dict[str, int]
    auto_commit: bool = True
    rebalance: int = 0
    attempt: int = 0
    owned: list[str] = field(default_factory=list)
    claimed: dict[str, str] = field(default_factory=dict)  # "topic-partition" → thread, in this attempt
    threads: dict[str, str] = field(default_factory=dict)  # "topic-partition" → thread, since the last success
    began_ms: int = 0
    succeeded: bool = False
    registered: bool = False
    expired: bool = False

    def log(self, ts: int, level: str, message: str) -> list[Event]:
        out: list[Event] = []
        if m := _BEGIN.search(message):
            try_no = int(m.group(2))
            if not self.registered:
                self.registered = True
                out.append(("registered", ts, {"subscription": dict(self.subscription), "pattern": "static"}))
            if try_no == 0:
                self.rebalance += 1
                self.began_ms = ts
                cause = "startup" if self.rebalance == 1 else "session_expired" if self.expired else "watch"
                self.expired = False
                out.append(("rebalance_triggered", ts, {"cause": cause}))
            self.attempt = try_no + 1
            self.claimed, self.succeeded = {}, False
            out.append(("attempt_started", ts, {"rebalance": self.rebalance, "attempt": self.attempt}))
        elif message == "Releasing partition ownership" or message.startswith("ZKConsumerConnector shutting down"):
            if self.owned:  # fetchers are stopped first in both cases: delivery from these partitions ends here
                out.append(("released", ts, {"rebalance": self.rebalance, "partitions": self.owned}))
                self.owned = []
        elif m := _OWNED.search(message):
            thread, partition, topic = m.groups()
            self.claimed[f"{topic}-{partition}"] = thread
        elif m := _WAITING.search(message):
            out.append(("claim_conflict", ts, {"rebalance": self.rebalance, "attempt": self.attempt, "topic": "",
                                               "partition": int(m.group(1)), "thread": None, "holder": None}))
        elif _SELECTED.search(message):  # every owner node of the attempt is created; fetchers start next
            self.succeeded = True
            self.threads = dict(self.claimed)
            out.append(("claimed", ts, {"rebalance": self.rebalance, "attempt": self.attempt,
                                        "partitions": dict(sorted(self.claimed.items()))}))
        elif (m := _END.search(message)) and self.succeeded:
            self.owned = sorted(self.claimed)
            self.succeeded = False
            out.append(("rebalance_done", ts, {"rebalance": self.rebalance, "attempts": int(m.group(2)) + 1,
                                               "duration_ms": ts - self.began_ms, "owned": self.owned}))
        elif message.startswith("ZK expired"):
            self.expired = True
            out.append(("session_expired", ts, {}))
        elif message.startswith("ZKConsumerConnector shutdown completed"):
            out.append(("shutdown", ts, {"committed": self.auto_commit}))
        elif level == "ERROR" and "error during syncedRebalance" in message:
            out.append(("rebalance_failed", ts, {"rebalance": self.rebalance, "attempts": self.attempt,
                                                 "error": message}))
        return out

    def harness(self, event: dict[str, Any]) -> list[Event]:
        kind = event.get("event")
        if kind == "ready":  # a new JVM for this member: what a killed one held died with its session; it
            # counts its rebalances from 1 again, as a restarted zkconsumer member does
            self.registered, self.owned, self.claimed, self.threads = False, [], {}, {}
            self.rebalance = 0
            return []
        if kind == "error" and str(event.get("command", "")).startswith("start") \
                and "ConsumerRebalanceFailedException" in str(event.get("error", "")):
            # createMessageStreams threw: the start's rebalance spent rebalance.max.retries. Kafka logs nothing of
            # it (the exception leaves through the application's call), so the harness's word is the only sign
            return [("rebalance_failed", int(event["ts"]), {"rebalance": self.rebalance, "attempts": self.attempt,
                                                            "error": str(event["error"])})]
        if kind != "record":
            return []
        tp = f"{event['topic']}-{event['partition']}"
        thread = self.threads.get(tp) or f"{self.consumer}-{event.get('stream', 0)}"
        return [("record_delivered", int(event["ts"]), {"topic": event["topic"], "partition": event["partition"],
                                                        "offset": event["offset"], "thread": thread})]


class _Tail:
    """New complete lines of a growing file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pos = 0
        self._partial = ""

    def lines(self) -> list[str]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self._pos)
                chunk = self._partial + f.read()
                self._pos = f.tell()
        except FileNotFoundError:
            return []
        lines = chunk.split("\n")
        self._partial = lines.pop()
        return lines


class KafkaMemberTrace:
    """Writes ``<trace dir>/<consumer>.jsonl`` for one Kafka member from its log4j file and its harness output.

    The two files are written by different threads of the JVM, so a line of one may land after a later line of
    the other: :meth:`poll` holds back the last ``holdback_ms`` of lines and orders the rest by time; ``final``
    (the member's JVM has exited) writes everything."""

    def __init__(self, trace_dir: Path, group: str, consumer_id: str, subscription: dict[str, int],
                 log4j_file: Path, harness_output: Path, auto_commit: bool = True, holdback_ms: int = 1000) -> None:
        consumer = f"{group}_{consumer_id}"
        self.core = MemberTrace(consumer, subscription, auto_commit)
        self.writer = TraceWriter(trace_dir, group, consumer)
        self._log, self._out = _Tail(log4j_file), _Tail(harness_output)
        self._pending: list[tuple[int, int, int, Any]] = []  # (ts, source, arrival, payload)
        self._arrival = 0
        self.holdback_ms = holdback_ms

    def poll(self, final: bool = False) -> int:
        """Read what the member wrote since the last poll; write the trace events that are due. Returns how many."""
        for line in self._log.lines():
            parsed = parse_log_line(line)
            if parsed is not None:
                self._queue(parsed[0], 0, parsed)
        for line in self._out.lines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # the JVM's own warnings share the harness's stdout
            if isinstance(event, dict) and "ts" in event:
                self._queue(int(event["ts"]), 1, event)
        self._pending.sort(key=lambda p: p[:3])
        horizon = None if final else int(time.time() * 1000) - self.holdback_ms
        due = len(self._pending) if horizon is None else bisect.bisect_right(self._pending, horizon,
                                                                               key=lambda p: p[0])
        ready, self._pending = self._pending[:due], self._pending[due:]
        written = 0
        for _ts, source, _n, payload in ready:
            events = self.core.log(*payload) if source == 0 else self.core.harness(payload)
            for name, at, fields in events:
                self.writer.emit(name, at_ms=at, **fields)
                written += 1
        return written

    def _queue(self, ts: int, source: int, payload: Any) -> None:
        self._arrival += 1
        self._pending.append((ts, source, self._arrival, payload))

    def close(self) -> None:
        self.poll(final=True)
        self.writer.close()
