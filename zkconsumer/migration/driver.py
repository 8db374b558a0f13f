"""``zkconsumer migrate``: move a live group between ZooKeeper mode and coordinator mode, one member at a time.

Forward: every member must run with ``--migratable`` (it acknowledges under the plan node); the driver writes
the plan with one more member in coordinator mode, waits for that member's acknowledgement and for every
partition to be owned again, and goes on; at the end it sets the ``done`` phase, in which members drop their
ZooKeeper bridge. Rollback walks the same steps backwards. Each step is idempotent: a driver stopped half-way
is run again and resumes from the plan in ZooKeeper.

A forward step that does not hold (its member never acknowledges, partitions stay unowned, the coordinator's view
does not hold) rolls the **whole group** back to ZooKeeper mode, as ``--rollback`` does (issue 38): a group is left
mixed only by a ``--members`` canary whose every step held, or by a driver stopped between steps, never half way
through a step that failed. Ownership is judged only on evidence the group's state makes authoritative
(:meth:`MigrationDriver.ownership`): owner nodes held by registered members while any member uses ZooKeeper, the
coordinator's answers (member ids, and assignments from DescribeGroups or the members' acknowledgements) once done.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import NoReturn

from kazoo.exceptions import NoNodeError

from zkconsumer import broker_version, runtime
from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.errors import ZkConsumerError
from zkconsumer.migration import verify
from zkconsumer.migration.lease import DriverLease
from zkconsumer.migration.plan import MigrationPhase, MigrationPlan, plan_path
from zkconsumer.tools.groups import read_log_ends
from zkconsumer.types import GroupMode
from zkconsumer.zk.layout import ConsumerRegistration, GroupPaths, consumer_of_thread
from zkconsumer.zk.registry import Registry


class MigrationError(ZkConsumerError, RuntimeError):
    """A step did not complete: the plan in ZooKeeper says how far it got."""


class StepDidNotHold(MigrationError):
    """A step's checks on the coordinator did not hold within the step timeout (``check`` says which failed)."""

    def __init__(self, message: str, check: verify.GroupCheck | None = None) -> None:
        super().__init__(message)
        self.check = check


@dataclass(frozen=True)
class MemberState:
    consumer_id: str
    mode: str | None      # a GroupMode as acknowledged; None: not migratable (no acknowledgement)
    bridged: bool
    registered: bool      # has a node under ids
    plan_version: int | None = None  # the plan version the acknowledgement answers (None: not said)
    #: A coordinator-mode member's own report (member id, generation, partitions); None: ZooKeeper mode, or an
    #: older member that publishes no member id (verify.py identifies it by the old fields then)
    report: verify.ReportedMember | None = None


class OwnershipEvidence(StrEnum):
    """What an ownership verdict (:meth:`MigrationDriver.ownership`) read; the value is how the verdict says so."""

    #: Some member still uses ZooKeeper (ZooKeeper mode, or bridged): the owner nodes are the lock every member
    #: obeys, so each partition must have one, held by a thread of a registered member (Kafka's verify).
    OWNER_NODES = "ZooKeeper's owner nodes"
    #: The migration is done: no owner nodes any more; the coordinator's group (DescribeGroups, by member id) and
    #: the assignments it or the members report.
    COORDINATOR = "the coordinator"


@dataclass(frozen=True)
class Ownership:
    """Whether every partition of the group is owned, once, and on which evidence."""

    evidence: OwnershipEvidence
    problems: list[str] = field(default_factory=list)
    detail: str = ""  # the coordinator check's summary, when it was asked

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        said = f"by {self.evidence}" + (f"; {self.detail}" if self.detail else "")
        if self.ok:
            return f"every partition owned once ({said})"
        return f"ownership check failed ({said}): " + "; ".join(self.problems)


class MigrationDriver:
    def __init__(self, registry: Registry, group: str, bootstrap: str | None = None, step_timeout_s: float = 60.0,
                 progress: Callable[[str], None] | None = None, verify_steps: bool = True,
                 rollback_on_failure: bool = True, progress_bound_s: float | None = None) -> None:
        """``verify_steps``: check each step on the coordinator before calling it done (:mod:`.verify`);
        ``rollback_on_failure``: undo a step that does not hold within ``step_timeout_s``, back to the last state
        that held; ``progress_bound_s``: how long committed offsets may stand still where records wait
        (default: half the step timeout, at least 10 s)."""
        self.registry = registry
        self.group = group
        self.bootstrap = bootstrap
        self.step_timeout_s = step_timeout_s
        self.progress = progress or (lambda message: None)
        self.paths = GroupPaths(group)
        self.verify_steps = verify_steps
        self.rollback_on_failure = rollback_on_failure
        self.progress_bound_s = progress_bound_s or max(10.0, step_timeout_s / 2)
        self.last_check: verify.GroupCheck | None = None
        #: Members that vanished while the driver was waiting for them: not waited for, nor expected, any longer.
        self.gone: list[str] = []
        #: Held while to_coordinator / to_zookeeper run (:mod:`.lease`): one driver per group at a time.
        self.lease: DriverLease | None = None
        self._written_version = -1  # the plan node's version after this driver's last write
        self._lease_checked = 0.0

    # ----------------------------------------------------------------------------------------- reading
    def plan(self) -> MigrationPlan:
        data = self.registry.read(plan_path(self.group))
        return MigrationPlan() if not data else MigrationPlan.decode(plan_path(self.group), data)

    def _write(self, plan: MigrationPlan) -> None:
        """Write the plan (only under the driver lease: :meth:`to_coordinator` and :meth:`to_zookeeper` hold it)."""
        if self.lease is None:
            raise MigrationError("the migration plan is written only by a driver holding the group's lease")
        self.lease.write(plan_path(self.group), plan.encode())
        self._written_version = self.lease.plan_version or 0

    @contextlib.contextmanager
    def _leased(self, direction: GroupMode) -> Iterator[None]:
        self.lease = DriverLease(self.registry, self.group, direction, wait_s=self.step_timeout_s)
        self.lease.acquire()
        if self.lease.took_over:
            held = self.lease.took_over
            self.progress(f"took the group over from a {held.get('direction')} driver (pid {held.get('pid')} on "
                          f"{held.get('host')}){' that is gone' if held.get('direction') == direction else ''}")
        try:
            yield
        finally:
            lease, self.lease = self.lease, None
            with contextlib.suppress(Exception):  # ephemeral: it goes with the session anyway
                lease.release()

    def _still_ours(self) -> None:
        """While waiting: stop at once if a rollback took the group over (at most one ZooKeeper read a second)."""
        if self.lease is not None and runtime.monotonic() - self._lease_checked >= 1.0:
            self._lease_checked = runtime.monotonic()
            self.lease.check()

    def members(self) -> list[MemberState]:
        """Every member that is registered in ZooKeeper or acknowledged the plan."""
        ids = set(self.registry.children(self.paths.ids))
        acks: dict[str, dict] = {}
        for cid in self.registry.children(plan_path(self.group)):
            try:
                acks[cid] = json.loads(self.registry.read(f"{plan_path(self.group)}/{cid}") or b"{}")
            except (ValueError, NoNodeError):
                continue
        return [MemberState(cid, acks.get(cid, {}).get("mode"), bool(acks.get(cid, {}).get("bridged")), cid in ids,
                            acks.get(cid, {}).get("plan_version"),
                            verify.reported_member(cid, acks[cid]) if isinstance(acks.get(cid), dict) else None)
                for cid in sorted(ids | set(acks))]

    def unowned(self) -> list[str]:
        """Partitions of the group's topics (subscribed, else the plan's) without an owner node held by a thread of
        a registered member (mixed phase and ZooKeeper mode), as Kafka's verify counts them: a node whose member is
        no longer registered is a lock nobody consumes under (found by issue 38: the driver counted any node)."""
        owners = self.registry.owners(self.group)
        registered = set(self.registry.children(self.paths.ids))
        partitions = self.subscribed_partitions()
        if not partitions and (topics := self.plan().topics):
            partitions = {t: list(ps) for t, ps in self.registry.partitions_for_topics(list(topics)).items()}
        return [f"{t}-{p}" for t, parts in sorted(partitions.items()) for p in parts
                if (t, p) not in owners or consumer_of_thread(owners[(t, p)]) not in registered]

    def ownership(self) -> Ownership:
        """Every partition owned once, judged on what the group's state makes authoritative: ZooKeeper's owner nodes
        while any member uses ZooKeeper (the plan is not ``done``; the bridged members' coordinator share is checked
        for double assignment too), the coordinator once it is ``done``. The lab's final check and the driver's
        steps both read this, so they cannot disagree (issue 38: the lab judged the members' traces instead)."""
        plan = self.plan()
        members = self.members()  # one read of the acknowledgements per look, shared with the coordinator's check
        coordinator = [m.consumer_id for m in members if m.mode == GroupMode.COORDINATOR]
        if plan.phase is MigrationPhase.DONE:
            topics = list(plan.topics) or sorted(self.subscribed_partitions())
            partitions = {t: list(ps) for t, ps in self.registry.partitions_for_topics(topics).items()}
            check = self.check(coordinator, partitions, members)
            return Ownership(OwnershipEvidence.COORDINATOR, list(check.problems), check.summary())
        unowned = self.unowned()
        problems = [f"unowned {', '.join(unowned)}"] if unowned else []
        if not coordinator or not self.verify_steps:
            return Ownership(OwnershipEvidence.OWNER_NODES, problems)
        check = self.check(coordinator, None, members)
        return Ownership(OwnershipEvidence.OWNER_NODES, problems + list(check.problems), check.summary())

    # ---------------------------------------------------------------------------------------- stepping
    def _await(self, what: str, done: Callable[[], bool]) -> None:
        deadline = runtime.monotonic() + self.step_timeout_s
        while not done():
            self._still_ours()
            if runtime.monotonic() > deadline:
                raise MigrationError(f"timed out after {self.step_timeout_s:.0f}s waiting for {what}; the plan in "
                                     f"{plan_path(self.group)} keeps the progress: run the command again")
            runtime.sleep(0.1)  # polling ZooKeeper state several nodes deep; a watch per node would not be simpler

    def _acked(self, cid: str, mode: GroupMode, bridged: bool) -> bool:
        """``cid`` runs in ``mode`` and says so for the plan this driver last wrote (or a later one)."""
        return any(m.consumer_id == cid and m.mode == mode and m.bridged == bridged
                   and (m.plan_version is None or m.plan_version >= self._written_version) for m in self.members())

    def _present(self, consumer_ids: list[str]) -> list[str]:
        """``consumer_ids`` but the members that are gone: neither an acknowledgement nor a registration is left
        (both are ephemeral: the process ended, or its ZooKeeper session expired; a ``kill -9`` of a member). A gone
        member cannot switch, and waiting for it would hold the migration of every other member until the step
        timeout; if it comes back, it reads the plan and starts in the mode the plan gives it."""
        here = {m.consumer_id for m in self.members()}
        for cid in consumer_ids:
            if cid in here and cid in self.gone:  # its session expired and it came back on a new one
                self.gone.remove(cid)
                self.progress(f"{cid} is back")
            elif cid not in here and cid not in self.gone:
                self.gone.append(cid)
                self.progress(f"{cid} is gone (its acknowledgement and registration went with its session): not "
                              "waited for")
        return [cid for cid in consumer_ids if cid not in self.gone]

    def _await_member(self, cid: str, what: str, mode: GroupMode, bridged: bool) -> bool:
        """Wait for ``cid`` to acknowledge ``mode``; False if it is gone (:meth:`_present`) instead."""
        if cid in self.gone and not self._present([cid]):
            return False
        self._await(what, lambda: self._acked(cid, mode, bridged) or not self._present([cid]))
        return cid not in self.gone

    def _settled(self) -> bool:
        return not self.unowned()

    # ------------------------------------------------------------------------------------ coordinator checks
    def _bootstrap(self) -> str | None:
        return self.bootstrap or self.plan().bootstrap or self.registry.bootstrap_servers()

    def subscribed_partitions(self) -> dict[str, list[int]]:
        """Topic → partitions of every topic a registered member subscribes to (read while members still register
        in ZooKeeper: before ``done``)."""
        topics: set[str] = set()
        for cid in self.registry.children(self.paths.ids):
            data = self.registry.read(self.paths.registration(cid))
            if data:
                reg = ConsumerRegistration.decode(self.paths.registration(cid), data)
                topics |= set(reg.topic_streams(self.registry.topics() if reg.is_wildcard else []))
        return {t: list(ps) for t, ps in self.registry.partitions_for_topics(sorted(topics)).items()}

    def offsets_behind(self, partitions: dict[str, list[int]]) -> list[str]:
        """The group's partitions whose ZooKeeper offset is ahead of the broker's committed offset, each as
        ``topic-p (ZooKeeper z, broker b)``. Once the bridge is dropped (``done``) members read the broker's alone,
        so ``done`` waits for this to be empty: a bridged member makes a partition's start (the larger of both)
        committable as soon as it takes the partition over, and its next commit carries it to the broker. Without
        the wait, a partition whose last ZooKeeper-mode commit no bridged member had carried over yet (its new owner
        stopped while the partition was still held) was read back from the broker's older offset after ``done``,
        and its records delivered twice (found by ``zkconsumer sim --mode migrate``, issue 54)."""
        bootstrap = self._bootstrap()
        if not bootstrap:
            return ["no bootstrap server: give --bootstrap-server"]
        wanted = {(t, p) for t, ps in partitions.items() for p in ps}
        zk = {tp: v for tp, v in self.registry.offsets(self.group).items() if tp in wanted}
        if not zk:
            return []
        try:
            broker = verify.committed(bootstrap, self.group, broker_version.api_version(bootstrap))
        except Exception as e:  # noqa: BLE001 - a broker restarting: read again until the step timeout
            return [f"cannot read the broker's offsets: {e}"]
        return [f"{t}-{p} (ZooKeeper {v}, broker {broker.get((t, p), 'none')})" for (t, p), v in sorted(zk.items())
                if v > broker.get((t, p), -1)]

    def _offsets_to_zookeeper(self) -> None:
        """The rollback's counterpart of ``offsets_behind``: ZooKeeper-mode members read ZooKeeper's offsets alone,
        and what coordinator-mode members committed to the broker alone (after ``done``; a bridged member writes
        ZooKeeper again only with its next new offset, never for an idle partition) would be read back from an older
        ZooKeeper offset and delivered twice (found by ``zkconsumer sim --mode migrate``, issue 54). So each offset
        the broker holds ahead of ZooKeeper's is written there, forward only (``Registry.raise_offset``)."""
        bootstrap = self._bootstrap()
        if not bootstrap:
            return
        broker = verify.committed(bootstrap, self.group, broker_version.api_version(bootstrap))
        carried = [f"{t}-{p} {v}" for (t, p), v in sorted(broker.items())
                   if self.registry.raise_offset(self.group, t, p, v)]
        if carried:
            self.progress(f"offsets carried from the broker to ZooKeeper: {', '.join(carried)}")

    def check(self, expected: list[str], partitions: dict[str, list[int]] | None,
              members: list[MemberState] | None = None) -> verify.GroupCheck:
        """One look at the coordinator: DescribeGroups judged against the plan (see :mod:`.verify`), with the
        members' acknowledgements as ``members`` gives them (read now when not given)."""
        bootstrap = self._bootstrap()
        if not bootstrap:
            return verify.GroupCheck("unknown", {}, ["no bootstrap server: give --bootstrap-server"])
        try:
            version = broker_version.api_version(bootstrap)
        except Exception as e:  # noqa: BLE001 - a broker restarting: not yet, checked again until the step timeout
            return verify.GroupCheck("unknown", {}, [f"cannot reach {bootstrap}: {e}"])
        members = self.members() if members is None else members
        reported = [m.report for m in members if m.report is not None and m.mode == GroupMode.COORDINATOR]
        self.last_check = verify.judge(verify.describe(bootstrap, self.group, version), expected, partitions,
                                       reported)
        return self.last_check

    def _hold(self, what: str, expected: list[str], partitions: dict[str, list[int]] | None,
              offsets_must_move: bool) -> None:
        """Wait until the coordinator's view holds (within the step timeout), then, with ``offsets_must_move``,
        until every partition with records waiting has its committed offset move (within the progress bound)."""
        if not self.verify_steps:
            return
        deadline = runtime.monotonic() + self.step_timeout_s
        while not (check := self.check(self._present(expected), partitions)).ok:
            self._still_ours()
            if runtime.monotonic() > deadline:
                raise StepDidNotHold(f"{what} did not hold within {self.step_timeout_s:.0f}s: {check.summary()}",
                                     check)
            runtime.sleep(0.5)
        self.last_check = check
        self.progress(f"{what}: {check.summary()}")
        if not offsets_must_move or not partitions:
            return
        bootstrap = self._bootstrap()
        assert bootstrap is not None
        tps = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
        before = verify.committed(bootstrap, self.group)
        deadline = runtime.monotonic() + self.progress_bound_s
        while True:
            try:
                ends = {(tp.topic, tp.partition): off for tp, off in read_log_ends(bootstrap, tps).offsets.items()}
                break
            except Exception as e:  # noqa: BLE001 - a broker restarting: tried again within the bound
                if runtime.monotonic() > deadline:
                    raise StepDidNotHold(f"{what}: cannot read the log end offsets from {bootstrap}: {e}",
                                         self.last_check) from e
                runtime.sleep(0.5)
        while True:
            stalled = verify.stalled_partitions(before, verify.committed(bootstrap, self.group), ends)
            if not stalled:
                break
            self._still_ours()
            if runtime.monotonic() > deadline:
                names = ", ".join(f"{t}-{p}" for t, p in stalled[:8])
                raise StepDidNotHold(f"{what}: committed offsets did not move within {self.progress_bound_s:.0f}s "
                                     f"for {len(stalled)} partitions with records waiting ({names}); members "
                                     f"{self.last_check.members if self.last_check else {}}", self.last_check)
            runtime.sleep(0.5)
        self.progress(f"{what}: committed offsets move")

    def _strangers(self) -> list[str]:
        """Registered members that do not acknowledge the plan (started without ``--migratable``), after giving
        members that registered a moment ago the step timeout to acknowledge."""
        deadline = runtime.monotonic() + self.step_timeout_s
        while True:
            strangers = [m.consumer_id for m in self.members() if m.mode is None and m.consumer_id not in self.gone]
            if not strangers or runtime.monotonic() > deadline:
                return strangers
            self._still_ours()
            runtime.sleep(0.1)

    def to_coordinator(self, only: list[str] | None = None) -> MigrationPlan:
        """Move every member, then drop the bridge (``done``). ``only``: move just these consumer ids (a canary,
        or a migration in stages) and leave the group mixed, every step checked as usual; run again to go on."""
        with self._leased(GroupMode.COORDINATOR):
            return self._to_coordinator(only)

    def _to_move(self, plan: MigrationPlan, only: list[str] | None, handled: set[str],
                 members: list[MemberState] | None = None) -> list[MemberState]:
        """The members still to move to coordinator mode (of ``members``, else read now): neither moved by this run
        nor planned and running there, bridged, already (a driver resuming); with ``only``, just those."""
        return [m for m in (self.members() if members is None else members)
                if m.consumer_id not in handled and m.consumer_id not in self.gone
                and (m.registered or m.mode is not None)
                and not (plan.mode_of(m.consumer_id) == m.mode == GroupMode.COORDINATOR and m.bridged)
                and (only is None or m.consumer_id in only)]

    def _to_coordinator(self, only: list[str] | None = None) -> MigrationPlan:
        strangers = self._strangers()
        if strangers:
            raise MigrationError(f"members without --migratable cannot switch: {', '.join(strangers)}; restart them "
                                 "with `zkconsumer consume --migratable` (or stop them) first")
        members = self.members()
        if not members:
            raise MigrationError(f"group {self.group} has no running members")
        unknown = sorted(set(only or ()) - {m.consumer_id for m in members})
        if unknown:
            raise MigrationError(f"no such member of group {self.group}: {', '.join(unknown)} (members: "
                                 f"{', '.join(m.consumer_id for m in members)})")
        plan = self.plan()
        partitions = self.subscribed_partitions()  # read now: after done, members leave ZooKeeper
        if not partitions and plan.topics:
            partitions = {t: list(ps) for t, ps in self.registry.partitions_for_topics(list(plan.topics)).items()}
        if plan.phase is MigrationPhase.DONE:  # a driver stopped after done: only the last check is left
            self.progress("resuming: the plan is done already; checking the coordinator group")
            self._hold("the coordinator group", [m.consumer_id for m in members], partitions, True)
            self.progress("migration done: the group is managed by the broker's coordinator")
            return plan
        plan = replace(plan, phase=MigrationPhase.MIXED, bootstrap=self.bootstrap or plan.bootstrap,
                       topics=tuple(sorted(partitions)) or plan.topics)
        moved: list[str] = [m.consumer_id for m in members
                            if plan.mode_of(m.consumer_id) == GroupMode.COORDINATOR]
        if moved:  # a driver stopped mid-way: check what it did before going on (its last step may not have held)
            self.progress(f"resuming: {', '.join(moved)} planned in coordinator mode already")
            try:
                for cid in moved:
                    self._await_member(cid, f"{cid} to run in coordinator mode", GroupMode.COORDINATOR, True)
                self._await("every partition to be owned again", self._settled)
                self._hold(f"{', '.join(moved)} in coordinator mode", moved, None, False)
            except MigrationError as e:
                self._roll_back_group(f"the previous run's steps ({', '.join(moved)} in coordinator mode)", e)
        handled: set[str] = set()
        while True:
            # the members are read again on every pass: one that joins mid-way starts in ZooKeeper mode and must be
            # moved before done (found by zkconsumer sim --mode migrate, seed 17: a member joined after the last
            # move, done was written while it consumed in ZooKeeper mode, and the coordinator members, their
            # bridges dropped, consumed its partitions from the broker's older offsets: its records delivered twice)
            for m in self._to_move(plan, only, handled):
                handled.add(m.consumer_id)
                self._refuse_strangers_midway(m.consumer_id)
                plan = plan.with_member(m.consumer_id, GroupMode.COORDINATOR)
                self._write(plan)
                self.progress(f"{m.consumer_id}: to coordinator mode")
                try:
                    self._await_member(m.consumer_id, f"{m.consumer_id} to run in coordinator mode",
                                       GroupMode.COORDINATOR, True)
                    self._await("every partition to be owned again", self._settled)
                    self._hold(f"{m.consumer_id} in coordinator mode", [*moved, m.consumer_id], None, False)
                except MigrationError as e:
                    self._roll_back_group(f"moving {m.consumer_id} to coordinator mode", e)
                moved.append(m.consumer_id)
                self.progress(f"{m.consumer_id}: in coordinator mode, every partition owned")
            current = self.members()
            members = [m for m in current if m.registered or m.consumer_id in handled]
            if only is not None and any(plan.mode_of(m.consumer_id) != GroupMode.COORDINATOR for m in members):
                self.progress(f"{', '.join(only)} in coordinator mode; the group stays mixed "
                              f"({len(moved)} of {len(members)} members moved): run migrate again to go on")
                return plan
            if self._to_move(plan, only, handled, current):
                continue  # joined during this pass: moved first (a ZooKeeper-mode member commits to ZooKeeper alone)
            self._refuse_strangers_midway("the ZooKeeper bridge is dropped")
            partitions = self.subscribed_partitions() or partitions
            try:
                self._await("the broker's committed offsets to reach ZooKeeper's",
                            lambda ps=partitions: not self.offsets_behind(ps))
            except MigrationError as e:
                self._roll_back_group(
                    f"moving the offsets to the broker ({'; '.join(self.offsets_behind(partitions))})", e)
            if not self._to_move(plan, only, handled):
                break
            self.progress("members joined meanwhile: moving them before the bridge is dropped")
        plan = replace(plan, phase=MigrationPhase.DONE)
        self._write(plan)
        self.progress("every member in coordinator mode: dropping the ZooKeeper bridge")
        try:
            for m in members:
                self._await_member(m.consumer_id, f"{m.consumer_id} to leave ZooKeeper", GroupMode.COORDINATOR,
                                   False)
            self._hold("the coordinator group", [m.consumer_id for m in members], partitions, True)
        except MigrationError as e:
            self._roll_back_group("dropping the ZooKeeper bridge (done)", e)
        gone = f" ({', '.join(self.gone)} gone meanwhile)" if self.gone else ""
        self.progress(f"migration done: the group is managed by the broker's coordinator{gone}")
        return plan

    def _refuse_strangers_midway(self, before: str) -> None:
        """A member that joined during the migration without ``--migratable`` (a library user's plain connector,
        Kafka's own 0.8 consumer: ``zkconsumer consume`` refuses to start) stops the migration where it stands:
        every step so far held, and the group is consistent as it is (the stranger runs in ZooKeeper mode)."""
        strangers = self._strangers()
        if strangers:
            raise MigrationError(f"{', '.join(strangers)} joined group {self.group} without --migratable during "
                                 f"the migration; stopped before {before}: the plan stays as it is (every step so far "
                                 "held, every partition owned). Stop them or restart them with --migratable, then run "
                                 "migrate again (it resumes), or --rollback")

    def _roll_back_group(self, failed: str, error: MigrationError) -> NoReturn:
        """A forward step did not hold: roll the **whole group** back to ZooKeeper mode (what ``--rollback`` does:
        every member the plan or its acknowledgement puts in coordinator mode, one by one, each time every partition
        owned again), then raise naming the step and the check that failed.

        Why the whole group and not just the member whose step failed (issue 38): that left the members moved before
        it in coordinator mode, a half-migrated group nobody had asked for, whose members' and driver's views of
        ownership then disagreed; a member of it that died kept its coordinator entry in the plan, and would have
        come back bridged. A group is left mixed only when every step held (``--members``, a stranger joining)."""
        if not self.rollback_on_failure:
            raise MigrationError(f"{failed} did not hold: {error}; the group is left as that step left it "
                                 "(--no-rollback): run migrate again (it resumes), or --rollback") from error
        self.progress(f"{failed} did not hold ({error}); rolling the whole group back to ZooKeeper mode")
        try:
            self._to_zookeeper()
        except MigrationError as undo:
            raise MigrationError(f"{failed} did not hold: {error}; rolling the whole group back to ZooKeeper mode "
                                 f"did not complete either: {undo}; run migrate --rollback") from error
        raise MigrationError(f"{failed} did not hold: {error}; rolled back: the whole group runs in ZooKeeper mode "
                             "again (no member in coordinator mode) and every partition is owned (an owner node held "
                             "by a registered member)") from error

    def to_zookeeper(self) -> MigrationPlan:
        """The rollback: bridge every coordinator-mode member again, then move members back one by one; the plan
        ends with no member in coordinator mode, gone ones included. It takes the group over from a forward driver
        that is still running (:mod:`.lease`)."""
        with self._leased(GroupMode.ZOOKEEPER):
            return self._to_zookeeper()

    def _to_zookeeper(self) -> MigrationPlan:
        members = self.members()
        plan = self.plan()
        # acknowledged in coordinator mode, or planned there and still switching (a forward step interrupted)
        coordinator_members = [m for m in members
                               if GroupMode.COORDINATOR in (m.mode, plan.mode_of(m.consumer_id))]
        if plan.phase is MigrationPhase.DONE:
            plan = replace(plan, members={m.consumer_id: GroupMode.COORDINATOR for m in coordinator_members},
                           phase=MigrationPhase.MIXED)
            self._write(plan)
            self.progress("bridging coordinator-mode members to ZooKeeper again")
            for m in coordinator_members:
                self._await_member(m.consumer_id, f"{m.consumer_id} to register in ZooKeeper",
                                   GroupMode.COORDINATOR, True)
        if coordinator_members:
            self._offsets_to_zookeeper()
        for m in coordinator_members:
            plan = plan.with_member(m.consumer_id, GroupMode.ZOOKEEPER)
            self._write(plan)
            self.progress(f"{m.consumer_id}: back to ZooKeeper mode")
            self._await_member(m.consumer_id, f"{m.consumer_id} to run in ZooKeeper mode", GroupMode.ZOOKEEPER,
                               False)
            self._await("every partition to be owned again", self._settled)
        left = {cid for cid, mode in plan.members.items() if mode is GroupMode.COORDINATOR}
        if left:  # planned in coordinator mode but gone (killed, session expired): they come back in ZooKeeper mode
            plan = replace(plan, members={**plan.members, **dict.fromkeys(left, GroupMode.ZOOKEEPER)})
            self._write(plan)
            self.progress(f"{', '.join(sorted(left))} (gone) planned back in ZooKeeper mode")
        self.progress("rollback done: the group is a ZooKeeper (0.8) group")
        return plan
