"""The machine's costs (:mod:`.cpu`) fitted to what a real run spent: the CPU per join or crash that
benchmarks/rebalance.py's scenario measured, against what the simulated group received and served per action.

Why a fit: the costs are the CPU of real code paths under a real herd (kazoo's reader thread, the rebalance's work,
ZooKeeper's request processors), which no single-request microbenchmark reproduces: an idle server takes 82 µs over
a read, a busy one spends 29 µs of CPU on it (its pipeline's hand-offs overlap). So each side is a non-negative
least-squares fit, per action, of the CPU measured on the real group over the counts simulated for the same group:

- a profile's member hosts: ``consumers CPU ≈ notification_us × notifications + reply_us × replies + byte_ns ×
  bytes received``;
- the server, one fit over both profiles: ``ZooKeeper CPU ≈ read_us × reads + write_us × writes``.

Each error counts absolutely, so the large groups weigh most: a fit of relative errors matched the 10-member CPU
better (its fixed costs, timers and pings, are no frame's) and the 50-member crash time worse (1.29 of the real).

The fitted figures are CPU; the times they give are not fitted, which is what the validation compares
(benchmarks/herd_sim.py). Pure: numpy only.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from zkconsumer.sim.cpu import ClientCost, Machine
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_service import ServiceTimes


@dataclass(frozen=True)
class CpuSample:
    """One real group's CPU per action beside the simulated group's traffic per action."""

    profile: str
    size: int
    notifications: float
    replies: float
    bytes_received: float
    reads: float
    writes: float
    consumers_us: float
    server_us: float


def nonnegative_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with every coefficient ≥ 0: the best of the fits over each subset of the columns whose
    coefficients all come out non-negative (a handful of columns: every subset is cheap)."""
    best: tuple[float, np.ndarray] | None = None
    columns = range(x.shape[1])
    for k in range(1, x.shape[1] + 1):
        for subset in itertools.combinations(columns, k):
            coef, *_ = np.linalg.lstsq(x[:, subset], y, rcond=None)
            if (coef < 0).any():
                continue
            full = np.zeros(x.shape[1])
            full[list(subset)] = coef
            err = float(np.sum((x @ full - y) ** 2))
            if best is None or err < best[0]:
                best = (err, full)
    return best[1] if best is not None else np.zeros(x.shape[1])


def fit_machine(samples: Sequence[CpuSample], cores: int, source: str) -> Machine:
    """The costs that best explain ``samples`` (at least as many per profile as a profile has costs, three)."""
    client: dict[str, ClientCost] = {}
    for profile in sorted({s.profile for s in samples}):
        mine = [s for s in samples if s.profile == profile]
        x = np.array([[s.notifications, s.replies, s.bytes_received / 1000.0] for s in mine])
        n_us, r_us, b_ns = nonnegative_lstsq(x, np.array([s.consumers_us for s in mine]))
        client[profile] = ClientCost(round(n_us), round(r_us), round(b_ns))
    x = np.array([[s.reads, s.writes] for s in samples])
    read_us, write_us = nonnegative_lstsq(x, np.array([s.server_us for s in samples]))
    # every request holds the line for a read's work; a write's rest is its log's (another thread: a core, not the
    # line), so a herd's writes overlap as ZooKeeper's pipeline overlaps them
    line = {k: round(read_us) for k in RequestKind}
    log = {k: round(write_us - read_us) for k in RequestKind if k.is_write and write_us > read_us}
    return Machine(cores, client, ServiceTimes(line, default_us=round(read_us), delay_us=log, source=source), source)


def explained(machine: Machine, sample: CpuSample) -> tuple[float, float]:
    """What ``machine`` charges ``sample``'s traffic (consumers µs, server µs): the fit's residuals, shown beside
    the measured."""
    c = machine.cost_for(sample.profile)
    consumers = (c.notification_us * sample.notifications + c.reply_us * sample.replies
                 + c.byte_ns * sample.bytes_received / 1000.0)
    read_us = machine.server.total(RequestKind.GET_DATA)
    write_us = machine.server.total(RequestKind.CREATE)
    return consumers, read_us * sample.reads + write_us * sample.writes


def reads_and_writes(by_kind: Mapping[str, float]) -> tuple[float, float]:
    """Requests per action by kind (``RequestKind`` values) as (reads, writes)."""
    writes = sum(n for k, n in by_kind.items() if RequestKind(k).is_write)
    return sum(by_kind.values()) - writes, writes
