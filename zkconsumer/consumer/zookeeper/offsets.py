"""Offsets in ZooKeeper (``/consumers/<g>/offsets/<t>/<p>``), committed at-least-once and never backwards.

Kafka 0.8 committed the offset after the last record *handed out* by a stream, so a record the caller was
still processing could be committed and lost on a crash. The ``kafka-0.8`` profile keeps that; the default
commits only what the caller has finished with (it asked for the next record, or acked). Either way the
committed value is the next offset to read, it is written only when it changed (Kafka's checkpoint cache),
and a value lower than the last one written or read is refused: a committed offset never moves backwards —
except after a real reset (the broker said OffsetOutOfRange and ``auto.offset.reset`` moved the position
down, :meth:`ZkOffsetStore.reset`), where Kafka commits the lower position and so do we.

An offset node holding something that is not a decimal integer (written by some other tool) fails the rebalance
attempt in Kafka 0.8 (``offsetStr.toLong`` throws), and so it does with ``skip_broken=False`` (the ``kafka-0.8``
profile). The default reports it, treats it as absent (``auto.offset.reset`` decides) and says so again when the
first commit replaces it. A negative value is out of range for any log: both treat it as absent, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from zkconsumer import runtime
from zkconsumer.consumer.progress import INVALID_OFFSET
from zkconsumer.trace import TraceWriter, now_ms
from zkconsumer.types import TopicPartition
from zkconsumer.zk.layout import GroupPaths, MalformedNodeError, decode_offset
from zkconsumer.zk.registry import Registry

log = logging.getLogger(__name__)

class ZkOffsetStore:
    """Reads and writes a group's offsets in ZooKeeper with Kafka's checkpoint cache."""

    #: a read sent right behind a claim sees the claim's outcome (:meth:`fetch_async`): same session, same order
    reads_with_claims = True

    def __init__(self, registry: Registry, group: str, trace: TraceWriter | None = None,
                 skip_broken: bool = True) -> None:
        self.registry = registry
        self.group = group
        self.trace = trace
        self.skip_broken = skip_broken
        self._checkpoints: dict[TopicPartition, int] = {}
        self._replacing: set[TopicPartition] = set()  # read as garbage: the next write replaces it
        self._lock = runtime.Lock()

    def fetch(self, tps: Iterable[TopicPartition], pipelined: bool = True) -> dict[TopicPartition, int]:
        """The committed offsets (``INVALID_OFFSET`` when none); they become the checkpoints."""
        if pipelined:
            return self.fetch_async(tps)()
        tps = list(tps)
        paths = {tp: GroupPaths(self.group).offset(tp.topic, tp.partition) for tp in tps}
        return self._offsets(tps, paths, {p: self.registry.read(p) for p in paths.values()})

    def fetch_async(self, tps: Iterable[TopicPartition]) -> Callable[[], dict[TopicPartition, int]]:
        """:meth:`fetch` (pipelined), sent now; the function returned waits for it. Sent right behind a claim,
        the read sees the claim's outcome (ZooKeeper answers a session's requests in order)."""
        tps = list(tps)
        paths = {tp: GroupPaths(self.group).offset(tp.topic, tp.partition) for tp in tps}
        pending = self.registry.read_many_async(paths.values())
        return lambda: self._offsets(tps, paths, pending())

    def _offsets(self, tps: list[TopicPartition], paths: Mapping[TopicPartition, str],
                 raw: Mapping[str, bytes | None]) -> dict[TopicPartition, int]:
        out = {}
        for tp in tps:
            data = raw[paths[tp]]
            value = None if data is None else self._decode(tp, paths[tp], data)
            out[tp] = INVALID_OFFSET if value is None else value
            with self._lock:
                if value is not None:
                    self._checkpoints[tp] = max(value, self._checkpoints.get(tp, value))
        return out

    def _decode(self, tp: TopicPartition, path: str, data: bytes) -> int | None:
        """The committed offset, or None for a node to be treated as absent (reported here)."""
        try:
            value = decode_offset(path, data)
        except MalformedNodeError as e:
            if not self.skip_broken:
                log.error("group %s: %s", self.group, e)
                raise
            log.error("group %s: %s; treating it as absent: auto.offset.reset decides, and the first commit "
                      "replaces it", self.group, e)
            with self._lock:
                self._replacing.add(tp)
            if self.trace is not None:
                self.trace.emit("offset_malformed", topic=tp.topic, partition=tp.partition, path=path,
                                value=data[:100].decode("utf-8", "replace"))
            return None
        if value < 0:
            log.warning("group %s: %s holds %d, an offset no log has: treating it as absent (auto.offset.reset "
                        "decides)", self.group, path, value)
            return None
        return value

    def commit(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Write the offsets that changed and do not go backwards; returns what was written."""
        written = {}
        for tp, value in sorted(offsets.items()):
            if value is None or value < 0:
                continue
            with self._lock:
                last = self._checkpoints.get(tp)
                if last is not None and value <= last:
                    if value < last:
                        log.warning("not committing %s=%d for group %s: below the committed %d", tp, value,
                                    self.group, last)
                    continue
            sent_ts = now_ms()  # the write takes effect between this and its answer (traced as ts)
            self.registry.write_offset(self.group, tp.topic, tp.partition, value)
            with self._lock:
                self._checkpoints[tp] = value
                replaced = tp in self._replacing
                self._replacing.discard(tp)
            if replaced:
                log.warning("group %s: replaced the malformed offset at %s with %d", self.group,
                            GroupPaths(self.group).offset(tp.topic, tp.partition), value)
            written[tp] = value
            if self.trace is not None:
                self.trace.emit("offset_committed", topic=tp.topic, partition=tp.partition, offset=value,
                                sent_ts=sent_ts)
        return written

    def reset(self, tp: TopicPartition, value: int) -> None:
        """The fetch position was reset (OffsetOutOfRange): the next commit may be lower than the last one.

        The "never backwards" guard protects against stale snapshots, not against a log that really moved
        below the committed offset; Kafka commits the reset position, and so do we."""
        with self._lock:
            last = self._checkpoints.get(tp)
            if last is not None and value < last:
                self._checkpoints[tp] = value - 1  # anything from ``value`` on is written

    def checkpoint(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._checkpoints.get(tp)
