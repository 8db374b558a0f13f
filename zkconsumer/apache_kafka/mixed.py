"""A mixed group: Kafka 0.8.2.2's own high-level consumers and zkconsumer members in ONE group, through churn.

Each Kafka member runs alone in a JVM (:class:`~.processes.HighLevelConsumers`), so ``kill -9`` hits one member;
each zkconsumer member is a ``zkconsumer consume`` process printing every record it hands out. After a step (a
join, a graceful leave, a ``kill -9``) :meth:`MixedGroup.settle` waits until the registrations show it (a killed
member's session has expired) and the owner nodes are the assignment zkconsumer's assignor computes for the
registered members: Kafka's members claim what Kafka computed, ours what we computed, so the two agree or the
group never settles. An :class:`OffsetWatch` samples the committed offsets throughout and keeps any that went
backwards. tests/test_kafka_mixed_groups.py judges with it; benchmarks/mixed_groups.py times it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.apache_kafka.processes import HighLevelConsumers
from zkconsumer.apache_kafka.race import Moment, join_race, kafka_log_moments, trace_moments
from zkconsumer.assignment.assignors import AssignmentContext, assign
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.registry import Registry, connect

#: What every member of both kinds runs with unless told otherwise: a session that expires soon after kill -9,
#: a shorter backoff than 0.8's 2 s, retries enough for six members' conflicts, frequent commits.
TEST_SETTINGS = {"zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 500, "rebalance.max.retries": 10,
                 "auto.commit.enable": "true", "auto.commit.interval.ms": 300, "auto.offset.reset": "smallest"}


class GroupDidNotSettle(ZkConsumerError, AssertionError):
    """The owner nodes never became the computed assignment (or the registrations never showed the step)."""


class InconsistentGroup(ZkConsumerError, AssertionError):
    """What the two kinds of members wrote breaks a promise of the 0.8 layout: a registration in another format
    than the subscription's, a partition without an owner node, an owner that is no live member's thread."""


@dataclass
class Subscription:
    """Static topics, or one whitelist over ``topics`` (every topic matched), with ``streams`` per member."""

    topics: Mapping[str, int]  # topic → partitions
    streams: int = 2
    whitelist: str | None = None

    def registration(self) -> tuple[str, dict[str, int]]:
        """What both kinds must write in ``/consumers/<g>/ids/<id>``: (pattern, subscription)."""
        if self.whitelist:
            return "white_list", {self.whitelist: self.streams}
        return "static", {t: self.streams for t in self.topics}


class KafkaMember:
    """One of Kafka's own consumers, alone in its JVM; ``warm_up`` rounds of a throwaway member's join and leave
    run in that JVM before it is ready, as in an application that has run for a while."""

    kind = "kafka"

    def __init__(self, zk: str, group: str, name: str, sub: Subscription, strategy: str, work: Path,
                 settings: Mapping[str, object], warm_up: int = 0) -> None:
        self.name = name
        self.tag = f"[{group}_{name}]"  # how its log lines begin after the time stamp (not the warm-up members')
        self.jvm = HighLevelConsumers(zk, group, [] if sub.whitelist else list(sub.topics), whitelist=sub.whitelist,
                                      streams=sub.streams, strategy=strategy, properties=settings,
                                      report_records=True, work_dir=work / name, warm_up=warm_up)

    def start(self) -> None:
        self.jvm.start()
        self.jvm.start_member(self.name, wait=False)

    def leave(self) -> None:
        """``shutdown()`` without waiting for it to return: it deregisters at once, but when a rebalance is in
        flight it returns only once that rebalance has spent its retries (0.8.2's ``shutdown`` waits for the
        watcher thread), 20 s with 10 retries of 2 s; the group's convergence is measured from the registrations,
        and the JVM is stopped with the group."""
        self.jvm.stop_member(self.name, wait=False)

    def kill(self) -> None:
        self.jvm.kill()

    def consumed(self) -> set[tuple[str, int, int]]:
        return {(r["topic"], r["partition"], r["offset"]) for r in self.jvm.records()}

    def problem(self) -> str | None:
        """Why this member cannot take part, if it said so (an exception from createMessageStreams, a dead JVM)."""
        for e in self.jvm.events:
            if e["event"] in ("error", "exited"):
                return f"Kafka member {self.name}: {e.get('error', 'its JVM exited')}"
        return None

    def failed_attempts(self) -> int:
        """Kafka's own count: 'Rebalancing attempt failed' lines in its log (a conflict, then a backoff), while the
        member is in the group. A rebalance still running when ``shutdown()`` starts goes on failing on the closed
        ZooKeeper client until its retries are spent (0.8.2 checks for a shutdown only before the first attempt,
        and ``shutdown()`` waits for it: up to ``rebalance.max.retries`` x ``rebalance.backoff.ms``); those
        attempts come after the member left and are not counted."""
        try:
            text = self.jvm.log_file.read_text(errors="replace")
        except OSError:
            return 0
        mine = "\n".join(line for line in text.splitlines() if self.tag in line)
        return mine.split("ZKConsumerConnector shutting down", 1)[0].count("Rebalancing attempt failed")

    def moments(self) -> list[tuple[float, Moment]]:
        """(epoch seconds, moment) from its log, in order."""
        return kafka_log_moments(self.jvm.log_file, self.tag)

    def warm_up_ms(self) -> list[int]:
        """createMessageStreams of each warm-up round, alone in its group (the first is the cold JVM's)."""
        return [int(e["ms"]) for e in self.jvm.events if e["event"] == "warmed"]

    def close(self) -> None:
        self.jvm.kill()
        self.jvm.stop()


class ZkMember:
    """One ``zkconsumer consume`` process printing every record it hands out, with a trace."""

    kind = "zkconsumer"

    def __init__(self, zk: str, group: str, name: str, sub: Subscription, strategy: str, profile: str, work: Path,
                 settings: Mapping[str, object]) -> None:
        self.name = name
        self.out = work / f"{name}.out"
        self.err = work / f"{name}.err"
        self.trace_dir = work / f"{name}-trace"
        topics = ["--whitelist", sub.whitelist] if sub.whitelist else [a for t in sub.topics for a in ("--topic", t)]
        self.args = [sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", zk, "--group", group,
                     "--consumer-id", name, *topics, "--streams", str(sub.streams), "--strategy", strategy,
                     "--profile", profile, "--output", "record", "--trace-dir", str(self.trace_dir)]
        self.args += [a for k, v in settings.items() for a in ("--property", f"{k}={v}")]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def leave(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)  # the CLI shuts the connector down: commit, release, deregister
        self.proc.wait(30)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def consumed(self) -> set[tuple[str, int, int]]:
        got = set()
        for line in self.out.read_text(errors="replace").splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[1].isdigit() and parts[2].isdigit():
                got.add((parts[0], int(parts[1]), int(parts[2])))
        return got

    def problem(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            err = self.err.read_text(errors="replace").strip().splitlines()[-5:]
            return f"zkconsumer member {self.name} exited with {self.proc.returncode}: " + " | ".join(err)
        return None

    def failed_attempts(self) -> int:
        """Attempts that did not end the rebalance, from the trace (attempts - 1 per finished rebalance)."""
        failed = 0
        for path in self.trace_dir.glob("*.jsonl"):
            for line in path.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("event") in ("rebalance_done", "rebalance_failed"):
                        failed += max(0, int(event.get("attempts", 1)) - (event["event"] == "rebalance_done"))
        return failed

    def moments(self) -> list[tuple[float, Moment]]:
        """(epoch seconds, moment) from its trace, in order."""
        return sorted((m for path in self.trace_dir.glob("*.jsonl") for m in trace_moments(path)),
                      key=lambda m: m[0])

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class OffsetWatch:
    """Reads the group's committed offsets every 50 ms and remembers any that went backwards."""

    def __init__(self, zk: str, group: str, interval: float = 0.05) -> None:
        self.group = group
        self.client = connect(zk)
        self.reg = Registry(self.client)
        self.last: dict[tuple[str, int], int] = {}
        self.backwards: list[tuple[tuple[str, int], int, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), name="offset-watch", daemon=True)
        self._thread.start()

    def sample(self) -> dict[tuple[str, int], int]:
        offsets = self.reg.offsets(self.group)
        with self._lock:
            for tp, off in offsets.items():
                if off < self.last.get(tp, -1):
                    self.backwards.append((tp, self.last[tp], off))
                self.last[tp] = max(off, self.last.get(tp, -1))
        return offsets

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # a read racing a delete; the next sample sees it
                self.sample()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.client.stop()
        self.client.close()


@dataclass
class StepResult:
    """One membership change: how long the group took to show it and to own everything as computed."""

    action: str
    member: str
    kind: str
    registered_s: float  # from the action to the registrations showing it (a kill: the session's expiry)
    converged_s: float  # from the registrations showing it to the owners being the computed assignment
    owners: dict[tuple[str, int], str] = field(repr=False, default_factory=dict)


class MixedGroup:
    """A group of Kafka's and zkconsumer's members over one ZooKeeper (chroot included) and one broker."""

    def __init__(self, zk: str, group: str, sub: Subscription, strategy: str, profile: str, work: Path,
                 settings: Mapping[str, object] = TEST_SETTINGS, kafka_warm_up: int = 0) -> None:
        self.zk, self.group, self.sub, self.strategy, self.profile = zk, group, sub, strategy, profile
        self.kafka_warm_up = kafka_warm_up
        self.work = Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.settings = dict(settings)
        self.members: dict[str, KafkaMember | ZkMember] = {}
        self.live: list[str] = []
        self.steps: list[StepResult] = []
        self.client = connect(zk)
        self.reg = Registry(self.client)
        self.offsets = OffsetWatch(zk, group)

    def kafka(self, name: str) -> KafkaMember:
        m = self.members[name] = KafkaMember(self.zk, self.group, name, self.sub, self.strategy, self.work,
                                             self.settings, self.kafka_warm_up)
        return m

    def zkconsumer(self, name: str) -> ZkMember:
        m = self.members[name] = ZkMember(self.zk, self.group, name, self.sub, self.strategy, self.profile,
                                          self.work, self.settings)
        return m

    def expected_owners(self) -> dict[tuple[str, int], str]:
        """The assignment of the members registered now, as zkconsumer's assignor computes it; every registration
        must be the subscription both kinds were given, in the same format."""
        ids = self.reg.consumer_ids(self.group)
        want = self.sub.registration()
        for cid in ids:
            r = self.reg.registration(self.group, cid)
            if r is None:
                continue  # gone between the listing and the read; the next poll sees the group without it
            if (r.pattern, dict(r.subscription)) != want:
                raise InconsistentGroup(f"{cid} registered {(r.pattern, dict(r.subscription))}, not {want}")
        ctx = AssignmentContext({cid: {t: self.sub.streams for t in self.sub.topics} for cid in ids},
                                {t: range(n) for t, n in self.sub.topics.items()})
        return {(tp.topic, tp.partition): tid for tp, tid in assign(self.strategy, ctx).owners.items()}

    def step(self, action: str, name: str, timeout: float = 45.0) -> StepResult:
        """``start``, ``leave`` or ``kill`` one member, then :meth:`settle`."""
        member = self.members[name]
        t0 = time.monotonic()
        getattr(member, action)()
        if action == "start":
            self.live.append(name)
        else:
            self.live.remove(name)
        registered, converged, owners = self.settle(timeout)
        result = StepResult(action, name, member.kind, registered - t0, converged - registered, owners)
        self.steps.append(result)
        return result

    def settle(self, timeout: float = 45.0) -> tuple[float, float, dict[tuple[str, int], str]]:
        """Wait until exactly the live members are registered, then until the owner nodes are the computed
        assignment with one owner per partition naming a live thread. Returns (registered, converged) monotonic
        times and the owners."""
        deadline = time.monotonic() + timeout
        want_ids = sorted(f"{self.group}_{n}" for n in self.live)
        while sorted(self.reg.consumer_ids(self.group)) != want_ids:
            self._check_members()
            if time.monotonic() > deadline:
                raise GroupDidNotSettle(f"registrations {sorted(self.reg.consumer_ids(self.group))}, "
                                        f"expected {want_ids}")
            time.sleep(0.01)
        registered = time.monotonic()
        while True:
            owners = self.reg.owners(self.group)
            if owners == self.expected_owners():
                converged = time.monotonic()
                break
            self._check_members()
            if time.monotonic() > deadline:
                raise GroupDidNotSettle(f"after {[f'{s.action} {s.member}' for s in self.steps]} + {self.live}: "
                                        f"owners {owners} != computed {self.expected_owners()}")
            time.sleep(0.01)
        every = sorted((t, p) for t, n in self.sub.topics.items() for p in range(n))
        if sorted(owners) != every:
            raise InconsistentGroup(f"owned {sorted(owners)}, expected one owner node for each of {every}")
        threads = {f"{self.group}_{n}-{i}" for n in self.live for i in range(self.sub.streams)}
        if not set(owners.values()) <= threads:
            raise InconsistentGroup(f"owners {set(owners.values()) - threads} are not threads of live members")
        return registered, converged, owners

    def _check_members(self) -> None:
        for name in self.live:
            problem = self.members[name].problem()
            if problem:
                raise GroupDidNotSettle(problem)

    def consumed(self) -> set[tuple[str, int, int]]:
        return set().union(*(m.consumed() for m in self.members.values()))

    def join_race(self, joiner: str, holders: list[str]) -> tuple[float | None, float | None]:
        """:func:`join_race` of ``joiner`` against ``holders``, the members in the group before it."""
        return join_race(self.members[joiner].moments(), [self.members[h].moments() for h in holders])

    def failed_attempts(self) -> dict[str, int]:
        out = {"kafka": 0, "zkconsumer": 0}
        for m in self.members.values():
            out[m.kind] += m.failed_attempts()
        return out

    def close(self) -> None:
        self.offsets.close()
        for m in self.members.values():
            with contextlib.suppress(Exception):
                m.close()
        self.client.stop()
        self.client.close()

    def __enter__(self) -> MixedGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
