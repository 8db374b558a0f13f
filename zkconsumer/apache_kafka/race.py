"""A join's race, read from the members' own records: when a member that has just registered (joining, or back on
a new session) reaches for owner nodes, and when the members already there released theirs. A claim that comes
first finds nodes still held and costs its attempt a ``rebalance.backoff.ms`` (issue 40, item 4: the `kafka-0.8`
profile against Kafka 0.8.2.2's own consumer). Kafka's side comes from its INFO log, ours from the trace; both
stamp this machine's clock. Pure: files in, numbers out.
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from enum import Enum
from pathlib import Path


class Moment(Enum):
    """What a member's own record (Kafka's log, zkconsumer's trace) says it did at a time: the join's race is
    between a joiner's first claim and the holders' releases."""

    REGISTERED = "registered"  # its registration node was written
    CLAIM = "claim"  # the first owner node of an attempt was tried (created, or found held)
    RELEASE = "release"  # it released its owner nodes (Kafka's line comes just before its deletes, our trace's after)


#: Kafka 0.8.2.2's INFO lines (ZookeeperConsumerConnector) for each moment, and the time stamp log4j puts first
KAFKA_MOMENTS = ((Moment.REGISTERED, "end registering consumer"), (Moment.CLAIM, "successfully owned partition"),
                 (Moment.CLAIM, "waiting for the partition ownership to be deleted"),
                 (Moment.RELEASE, "Releasing partition ownership"))
#: zkconsumer's trace events for each moment
TRACE_MOMENTS = {"registered": Moment.REGISTERED, "claim_conflict": Moment.CLAIM, "claimed": Moment.CLAIM,
                 "released": Moment.RELEASE}


def kafka_log_moments(log: Path, tag: str) -> list[tuple[float, Moment]]:
    """(epoch seconds, moment) from Kafka 0.8.2.2's log, the lines of the member whose lines carry ``tag``
    (``[<group>_<id>]``), in order; log4j's stamp is local time to the millisecond."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        for moment, text in KAFKA_MOMENTS:
            if text in line and tag in line and line.startswith("["):
                out.append((datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").timestamp(), moment))
                break
    return out


def trace_moments(path: Path) -> list[tuple[float, Moment]]:
    """(epoch seconds, moment) from one zkconsumer trace file, in order; an attempt's claim is its first conflict
    or its success, whichever it wrote first."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            moment = TRACE_MOMENTS.get(event.get("event"))
            if moment is not None:
                out.append((event["ts"] / 1000.0, moment))
    return sorted(out, key=lambda m: m[0])


def claim_delays(moments: list[tuple[float, Moment]]) -> list[tuple[float, bool]]:
    """Each registration's wait for the member's next claim (ms), and whether it was the member's first (a start:
    for Kafka's consumer, a cold JVM) or a later one (back on a new session after an expiry): how soon it reaches
    for owner nodes the others may not have released yet."""
    out, registered, first = [], None, True
    for t, m in moments:
        if m is Moment.REGISTERED:
            if registered is not None:
                first = False  # registered again before claiming anything
            registered = t
        elif m is Moment.CLAIM and registered is not None:
            out.append(((t - registered) * 1000, first))
            registered, first = None, False
    return out


def join_race(joiner: list[tuple[float, Moment]], holders: list[list[tuple[float, Moment]]]
              ) -> tuple[float | None, float | None]:
    """A join's race, from the joiner's first registration: (ms until its first claim, ms until the last of the
    holders released after it), from each member's own record (Kafka's log, zkconsumer's trace: one clock, this
    machine's); None where one is missing. A claim before the release finds nodes still held."""
    registered = next((t for t, m in joiner if m is Moment.REGISTERED), None)
    if registered is None:
        return None, None
    claim = next((t for t, m in joiner if m is Moment.CLAIM and t >= registered), None)
    releases = [next((t for t, m in holder if m is Moment.RELEASE and t >= registered), None) for holder in holders]
    released = max((t for t in releases if t is not None), default=None)
    return (None if claim is None else (claim - registered) * 1000,
            None if released is None else (released - registered) * 1000)
