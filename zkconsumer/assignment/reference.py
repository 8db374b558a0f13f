"""A line-by-line port of Kafka's assignor loops: the oracle for tests and the baseline for benchmarks.

It keeps Kafka's data flow on purpose — thread lists built by prepending and then sorted, ``indexOf`` to
find a thread's position, ``String.hashCode`` computed character by character, a circular iterator — so that
:mod:`zkconsumer.assignment.assignors` can be checked against it for equality and measured against it for speed.
``consumer_id=None`` computes for every thread (Kafka 0.10.2's whole-group form); a consumer id gives that
consumer's share only (what each 0.8.2 consumer computes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zkconsumer.errors import IllegalArgument
from zkconsumer.javacompat import java_sorted

Decision = dict[tuple[str, int], str]


def _java_hash(s: str) -> int:
    h = 0
    for ch in s if s.isascii() else _utf16_units(s):  # a Java char is a UTF-16 code unit
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def _utf16_units(s: str) -> str:
    """``s`` with each character beyond U+FFFF as its two surrogates, one per Java ``char``."""
    data = s.encode("utf-16-be", "surrogatepass")
    return "".join(chr(int.from_bytes(data[i:i + 2], "big")) for i in range(0, len(data), 2))


def _consumers_per_topic(subs: Mapping[str, Mapping[str, int]]) -> dict[str, list[str]]:
    per_topic: dict[str, list[str]] = {}
    for consumer in subs:
        for topic, n in subs[consumer].items():
            for i in range(n):
                per_topic[topic] = [f"{consumer}-{i}"] + per_topic.get(topic, [])
    return {t: java_sorted(threads) for t, threads in per_topic.items()}


def _my_topics(subs: Mapping[str, Mapping[str, int]], consumer_id: str | None) -> dict[str, list[str]]:
    if consumer_id is None:
        return _consumers_per_topic(subs)
    return {t: [f"{consumer_id}-{i}" for i in range(n)] for t, n in subs.get(consumer_id, {}).items()}


def range_port(subs: Mapping[str, Mapping[str, int]], partitions: Mapping[str, Sequence[int]],
               consumer_id: str | None = None) -> Decision:
    decision: Decision = {}
    consumers_for_topic = _consumers_per_topic(subs)
    for topic, my_threads in _my_topics(subs, consumer_id).items():
        cur_consumers = consumers_for_topic[topic]
        cur_partitions = sorted(partitions.get(topic, []))
        n_parts_per_consumer = len(cur_partitions) // len(cur_consumers)
        n_with_extra = len(cur_partitions) % len(cur_consumers)
        for thread in my_threads:
            pos = cur_consumers.index(thread)
            start = n_parts_per_consumer * pos + min(pos, n_with_extra)
            n_parts = n_parts_per_consumer + (0 if pos + 1 > n_with_extra else 1)
            for i in range(start, start + n_parts):
                decision[(topic, cur_partitions[i])] = thread
    return decision


def _circular(items: Sequence[str]):
    while True:
        yield from items


def roundrobin_port(subs: Mapping[str, Mapping[str, int]], partitions: Mapping[str, Sequence[int]],
                    consumer_id: str | None = None) -> Decision:
    decision: Decision = {}
    consumers_for_topic = _consumers_per_topic(subs)
    if not consumers_for_topic:
        return decision
    head_topic = sorted(consumers_for_topic)[0]
    head_set = set(consumers_for_topic[head_topic])
    for topic, threads in consumers_for_topic.items():
        if set(threads) != head_set:
            raise IllegalArgument(f"requirement failed: topic {topic} vs {head_topic}")
    assignor = _circular(java_sorted(head_set))
    my_topics = sorted(_my_topics(subs, consumer_id))
    all_tps = [(t, p) for t in my_topics for p in sorted(partitions.get(t, []))]
    all_tps.sort(key=lambda tp: _java_hash(f"[{tp[0]},{tp[1]}]"))
    for tp in all_tps:
        thread = next(assignor)
        if consumer_id is None or thread.rsplit("-", 1)[0] == consumer_id:
            decision[tp] = thread
    return decision


def roundrobin_relaxed_port(subs: Mapping[str, Mapping[str, int]], partitions: Mapping[str, Sequence[int]],
                            consumer_id: str | None = None) -> Decision:
    decision: Decision = {}
    consumers_for_topic = _consumers_per_topic(subs)
    if not consumers_for_topic:
        return decision
    all_threads = java_sorted({t for threads in consumers_for_topic.values() for t in threads})
    assignor = _circular(all_threads)
    all_tps = [(t, p) for t in sorted(consumers_for_topic) for p in sorted(partitions.get(t, []))]
    all_tps.sort(key=lambda tp: _java_hash(f"[{tp[0]},{tp[1]}]"))
    for tp in all_tps:
        thread = next(assignor)
        while thread not in consumers_for_topic[tp[0]]:
            thread = next(assignor)
        if consumer_id is None or thread.rsplit("-", 1)[0] == consumer_id:
            decision[tp] = thread
    return decision


PORTS = {"range": range_port, "roundrobin": roundrobin_port, "roundrobin-relaxed": roundrobin_relaxed_port}
