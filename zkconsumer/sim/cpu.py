"""The lab's machine in a simulation: a few cores that ZooKeeper and every member host share.

Why: on the lab's machine a herd is CPU-bound. benchmarks/rebalance.py measured every join and crash, both profiles,
10 to 500 members, converging at about the CPU spent until then divided by the 2 cores (benchmarks/README.md,
"Scaling"): most of it the members' own (kazoo reading and decoding each reply, the rebalance working on what it
read), the rest ZooKeeper's. A simulated server that charges only its own line (:mod:`.zk_service`) lets every
member think for free, so its times were a floor under the real ones (`kafka-0.8` at 50 members: 360 ms against
615). Here both sides queue for the same cores:

- **a member host** pays :class:`ClientCost` for each frame its ZooKeeper client receives (a reply or a watch
  notification), before the client sees it: a fixed part per frame and a part per byte. The rebalance's own work
  (deciding over N members) is not a frame, but it follows the frames that carry the N members in, so it is folded
  into them; the costs are per profile because the two profiles do different work per frame (the default pipelines
  its requests and writes more of its trace, `kafka-0.8` reads one registration a round trip);
- **the server** takes a core for each request's work while it holds its one line; a write's log work (the
  service times' ``delay_us``) takes a core too, off the line, as ZooKeeper's log thread runs beside its pipeline.

A core is taken first come, first served, by whichever is due first (:class:`Cores`). The costs are fitted to the
CPU benchmarks/herd_sim.py's real groups spent (:data:`LAB_MACHINE`, :mod:`.cpu_fit`); the times they give, which
nothing was fitted to, are checked against the real ones (benchmarks/herd_sim.py, docs/simulation.md "Calibrated
time").

Pure: no scheduler, no I/O. The network (a client endpoint's delivery) and the server's line ask
:meth:`Cores.admit`.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_service import INSTANT, ServiceTimes

#: a watch notification's xid, in the frame's header after its length (ZooKeeper's ``ReplyHeader``)
_WATCH_XID = (-1).to_bytes(4, "big", signed=True)


@dataclass(frozen=True)
class ClientCost:
    """What a member host's CPU spends on one frame its ZooKeeper client receives.

    ``notification_us`` for a watch notification: what a member does on hearing of a change, its rebalance's own
    work (stopping, deciding, writing its trace) beside the reads it sends; ``reply_us`` for any other frame (a
    reply: kazoo reading and decoding it, and the caller woken with it); ``byte_ns`` nanoseconds per byte of either
    (a children list of N members costs its N names)."""

    notification_us: int
    reply_us: int
    byte_ns: int = 0

    def __post_init__(self) -> None:
        if min(self.notification_us, self.reply_us, self.byte_ns) < 0:
            raise IllegalArgument(f"a client's costs are non-negative, got {self}")

    def of(self, frame: bytes) -> int:
        """Microseconds for ``frame`` (a whole frame as the server sent it: length, then header)."""
        base = self.notification_us if frame[4:8] == _WATCH_XID else self.reply_us
        return base + (self.byte_ns * len(frame)) // 1000


@dataclass(frozen=True)
class Machine:
    """``cores`` shared by the server and the member hosts, and each profile's cost per frame received."""

    cores: int
    client: Mapping[str, ClientCost] = field(default_factory=dict)
    #: the server's CPU per request, which it spends on a core and in its one line (replaces the service times
    #: measured on an idle server, which count the pipeline's hand-offs a busy server overlaps)
    server: ServiceTimes = INSTANT
    #: where the figures come from
    source: str = "none"

    def __post_init__(self) -> None:
        if self.cores < 1:
            raise IllegalArgument(f"a machine has at least one core, got {self.cores}")
        object.__setattr__(self, "client", MappingProxyType(dict(self.client)))

    def cost_for(self, profile: str) -> ClientCost:
        try:
            return self.client[profile]
        except KeyError:
            raise IllegalArgument(f"no client cost measured for profile {profile!r} on {self.source}") from None


class Cores:
    """``n`` cores, each busy until some microsecond: a job due at ``at_us`` takes the core free first, waits for
    it if every core is busy then, and holds it for its cost. Jobs are admitted in the order they are asked for,
    which is the order they become due in a simulation (a job is asked for when it is due, or for the server, when
    its line reaches it)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise IllegalArgument(f"at least one core, got {n}")
        self._free = [0] * n  # a heap of the instants each core is free
        self.jobs = 0
        self.busy_us = 0
        #: microseconds jobs spent waiting for a core (the machine's queue)
        self.waited_us = 0

    def admit(self, cost_us: int, at_us: int) -> int:
        """A job of ``cost_us`` due at ``at_us``: the microsecond it is done (``at_us`` itself for a free job)."""
        if cost_us <= 0:
            return at_us
        start = max(at_us, self._free[0])
        heapq.heapreplace(self._free, start + cost_us)
        self.jobs += 1
        self.busy_us += cost_us
        self.waited_us += start - at_us
        return start + cost_us


#: The lab's machine: 2 cores, at the costs fitted (``benchmarks/herd_sim.py --fit``) to the real groups of
#: 2026-11-29 (benchmarks/herd_sim.py's real side at 10, 50 and 200 members, both profiles, 3 joins and 3 crashes
#: each, ZooKeeper warmed first: benchmarks/README.md, "Calibrated time"). Per frame a member receives: the default
#: profile 530 µs a reply and 196 ns a byte (its children lists and pipelined reads); `kafka-0.8` 3.5 ms a
#: notification (its stop-the-world rebalance) and 272 µs a reply (one synchronous read a registration). The server
#: 27 µs a read and 1,144 µs a write: every request holds its one line for 27 µs, a write's other 1,117 µs are its
#: log's thread, a core but not the line (ZooKeeper's pipeline). Fitted to CPU; the times are the check.
LAB_MACHINE = Machine(2, {"default": ClientCost(notification_us=0, reply_us=530, byte_ns=196),
                          "kafka-0.8": ClientCost(notification_us=3511, reply_us=272, byte_ns=0)},
                      ServiceTimes({k: 27 for k in RequestKind}, default_us=27,
                                   delay_us={k: 1144 - 27 for k in RequestKind if k.is_write},
                                   source="benchmarks/herd_sim.py --fit, 2026-11-29"),
                      "benchmarks/herd_sim.py --fit, 2026-11-29")
