"""The server's service time: how long ZooKeeper takes over each request, as a queue in front of the model.

A real server is not instant. Every request goes through one pipeline (``PrepRequestProcessor`` → the log's
``SyncRequestProcessor`` for writes → ``FinalRequestProcessor``), so a burst of requests (a herd of members
re-reading the group at once) waits in line. The model (:mod:`.zookeeper`) applies a request at once; this module
decides *when* it is applied. A request's time at the server has two parts:

- **service** (``us``): the server's own work, one request at a time, first come first served: a request that
  arrives while the server is busy waits for the ones before it;
- **delay** (``delay_us``): time that does not hold the line: a write's fsync of the transaction log, which
  ``SyncRequestProcessor`` shares among the writes that arrive meanwhile (group commit), so a write takes about a
  millisecond alone but a herd's writes do not queue a millisecond each.

Replies leave in the order requests arrived, as ZooKeeper 3.4's ``CommitProcessor`` keeps them (a read that
arrives behind a write waits for the write's commit): a request is never done before the one before it.

Time is kept in microseconds, as the scheduler keeps it (a read on the loopback takes tens of them), so that a
thousand reads of 60 µs cost 60 ms, not a thousand.

Pure: no scheduler, no I/O. :class:`~zkconsumer.sim.zk_wire.WireServer` asks :meth:`ServiceQueue.admit` when a
request arrives and schedules its serving at the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim.zk_codes import RequestKind


class Cores(Protocol):
    """The machine's cores (:class:`zkconsumer.sim.cpu.Cores`), on which the server's work takes one."""

    def admit(self, cost_us: int, at_us: int) -> int: ...


@dataclass(frozen=True)
class ServiceTimes:
    """Microseconds per request kind: the server's own work (``us``; a kind not listed costs ``default_us``) and
    the delay that does not hold the line (``delay_us``: a write's share of an fsync)."""

    us: Mapping[RequestKind, int] = field(default_factory=dict)
    default_us: int = 0
    delay_us: Mapping[RequestKind, int] = field(default_factory=dict)
    #: where the figures come from (a benchmark's run, or "none")
    source: str = "none"

    def __post_init__(self) -> None:
        bad = {str(k): v for k, v in [*self.us.items(), *self.delay_us.items()] if not isinstance(v, int) or v < 0}
        if bad or self.default_us < 0:
            raise IllegalArgument(f"service times are non-negative whole microseconds, got {bad or self.default_us}")
        object.__setattr__(self, "us", MappingProxyType(dict(self.us)))
        object.__setattr__(self, "delay_us", MappingProxyType(dict(self.delay_us)))

    def of(self, kind: RequestKind) -> int:
        """The server's own work on a request of ``kind``."""
        return self.us.get(kind, self.default_us)

    def total(self, kind: RequestKind) -> int:
        """What a request of ``kind`` takes alone: its work and its delay."""
        return self.of(kind) + self.delay_us.get(kind, 0)

    @property
    def zero(self) -> bool:
        return self.default_us == 0 and not any(self.us.values()) and not any(self.delay_us.values())


#: A server that answers at once: the model as it was before service time (every request served on arrival).
INSTANT = ServiceTimes()


class ServiceQueue:
    """One server's line of requests: when each one arrived, when the server is free, when each is done.

    ``busy_until_us`` and ``done_us`` only move forward: requests are served and answered in the order they
    arrived, and a request that arrives while the server is idle starts at once."""

    def __init__(self, times: ServiceTimes, cores: Cores | None = None) -> None:
        self.times = times
        #: the machine's cores (:mod:`.cpu`), which the server's work takes one of, beside the member hosts
        self.cores = cores
        self.busy_until_us = 0
        self.done_us = 0
        self.served = 0
        #: microseconds requests spent waiting for the ones before them (the herd's queueing delay)
        self.waited_us = 0
        self.busy_us = 0

    def admit(self, kind: RequestKind, now_us: int) -> int:
        """A request of ``kind`` arrives at ``now_us``: the microsecond its serving is due (never before now)."""
        arrived = now_us
        start = max(arrived, self.busy_until_us)
        cost = self.times.of(kind)
        self.waited_us += start - arrived
        self.busy_us += cost
        delay = self.times.delay_us.get(kind, 0)
        if self.cores is None:
            self.busy_until_us = start + cost
            finish = self.busy_until_us + delay
        else:  # on a machine the delay is CPU too (the log's thread): a core's, not the line's
            self.busy_until_us = self.cores.admit(cost, start)
            finish = self.cores.admit(delay, self.busy_until_us)
        self.done_us = max(self.done_us, finish)
        self.served += 1
        return self.done_us


#: The lab's ZooKeeper 3.9.5 on this machine, one request at a time, 2,000 of each kind (benchmarks/zk_service_time.py,
#: 2026-11-28: the server's own latency from reading a request to writing its reply, ``mntr``). Writes show no
#: shared delay: with 8 client threads the Python client, not the server, set the pace, so a write's whole time is
#: counted as work (an upper bound under a herd: docs/simulation.md). A session's open and close were measured
#: together (690 µs) and split evenly; a ping and a setWatches were not measured and cost a read's time.
LAB_SERVICE = ServiceTimes({
    RequestKind.GET_DATA: 82, RequestKind.GET_CHILDREN: 117, RequestKind.EXISTS: 108, RequestKind.MULTI_READ: 120,
    RequestKind.CREATE: 475, RequestKind.SET_DATA: 407, RequestKind.DELETE: 426, RequestKind.MULTI: 584,
    RequestKind.CREATE_SESSION: 345, RequestKind.CLOSE_SESSION: 345, RequestKind.PING: 82,
    RequestKind.SET_WATCHES: 117,
}, default_us=100, source="benchmarks/zk_service_time.py, 2026-11-28")


class ServiceModel(StrEnum):
    """Which service times a simulated lab's ZooKeeper charges (``zkconsumer sim --zk-service``)."""

    NONE = "none"  # every request served on arrival: what the recorded agreement was measured with
    LAB = "lab"  # :data:`LAB_SERVICE`, measured on the lab's real server

    @property
    def times(self) -> ServiceTimes:
        return LAB_SERVICE if self is ServiceModel.LAB else INSTANT
