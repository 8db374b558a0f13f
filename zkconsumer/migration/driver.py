"""``zkconsumer migrate``: move a live group between ZooKeeper mode and coordinator mode, one member at a time.

Forward: every member must run with ``--migratable`` (it acknowledges under the plan node); the driver writes
the plan with one more member in coordinator mode, waits for that member's acknowledgement and for every
partition to be owned again, and goes on; at the end it sets the ``done`` phase, in which members drop their
ZooKeeper bridge. Rollback walks the same steps backwards. Each step is idempotent: a driver stopped half-way
is run again and resumes from the plan in ZooKeeper.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from ..layout import ConsumerRegistration, GroupPaths
from ..registry import Registry
from .plan import COORDINATOR, ZOOKEEPER, MigrationPlan, plan_path


class MigrationError(RuntimeError):
    """A step did not complete: the plan in ZooKeeper says how far it got."""


@dataclass(frozen=True)
class MemberState:
    consumer_id: str
    mode: str | None      # as acknowledged; None: not migratable (no acknowledgement)
    bridged: bool
    registered: bool      # has a node under ids


class MigrationDriver:
    def __init__(self, registry: Registry, group: str, bootstrap: str | None = None, step_timeout_s: float = 60.0,
                 progress: Callable[[str], None] | None = None) -> None:
        self.registry = registry
        self.group = group
        self.bootstrap = bootstrap
        self.step_timeout_s = step_timeout_s
        self.progress = progress or (lambda message: None)
        self.paths = GroupPaths(group)

    # ----------------------------------------------------------------------------------------- reading
    def plan(self) -> MigrationPlan:
        data = self.registry.read(plan_path(self.group))
        return MigrationPlan() if not data else MigrationPlan.decode(plan_path(self.group), data)

    def _write(self, plan: MigrationPlan) -> None:
        path = plan_path(self.group)
        self.registry.zk.ensure_path(path)
        self.registry.zk.set(path, plan.encode())

    def members(self) -> list[MemberState]:
        """Every member that is registered in ZooKeeper or acknowledged the plan."""
        ids = set(self.registry.children(self.paths.ids))
        acks: dict[str, dict] = {}
        for cid in self.registry.children(plan_path(self.group)):
            try:
                acks[cid] = json.loads(self.registry.read(f"{plan_path(self.group)}/{cid}") or b"{}")
            except (ValueError, NoNodeError):
                continue
        return [MemberState(cid, acks.get(cid, {}).get("mode"), bool(acks.get(cid, {}).get("bridged")), cid in ids)
                for cid in sorted(ids | set(acks))]

    def unowned(self) -> list[str]:
        """Partitions of the group's subscribed topics without an owner node (mixed phase and ZooKeeper mode)."""
        topics: set[str] = set()
        for cid in self.registry.children(self.paths.ids):
            data = self.registry.read(self.paths.registration(cid))
            if data:
                reg = ConsumerRegistration.decode(self.paths.registration(cid), data)
                topics |= set(reg.topic_streams(self.registry.topics() if reg.is_wildcard else []))
        owners = self.registry.owners(self.group)
        return [f"{t}-{p}" for t, parts in sorted(self.registry.partitions_for_topics(sorted(topics)).items())
                for p in parts if (t, p) not in owners]

    # ---------------------------------------------------------------------------------------- stepping
    def _await(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.step_timeout_s
        while not done():
            if time.monotonic() > deadline:
                raise MigrationError(f"timed out after {self.step_timeout_s:.0f}s waiting for {what}; the plan in "
                                     f"{plan_path(self.group)} keeps the progress: run the command again")
            time.sleep(0.1)  # polling ZooKeeper state several nodes deep; a watch per node would not be simpler

    def _acked(self, cid: str, mode: str, bridged: bool) -> bool:
        return any(m.consumer_id == cid and m.mode == mode and m.bridged == bridged for m in self.members())

    def _settled(self) -> bool:
        return not self.unowned()

    def to_coordinator(self) -> MigrationPlan:
        # members that registered a moment ago acknowledge the plan right after: give them the step timeout
        deadline = time.monotonic() + self.step_timeout_s
        while True:
            members = self.members()
            strangers = [m.consumer_id for m in members if m.mode is None]
            if not strangers or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if strangers:
            raise MigrationError(f"members without --migratable cannot switch: {', '.join(strangers)}; restart them "
                                 "with `zkconsumer consume --migratable` (or stop them) first")
        if not members:
            raise MigrationError(f"group {self.group} has no running members")
        plan = self.plan()
        plan = MigrationPlan(plan.members, "mixed", self.bootstrap or plan.bootstrap)
        for m in members:
            if plan.mode_of(m.consumer_id) == COORDINATOR and m.mode == COORDINATOR and m.bridged:
                continue
            plan = plan.with_member(m.consumer_id, COORDINATOR)
            self._write(plan)
            self.progress(f"{m.consumer_id}: to coordinator mode")
            self._await(f"{m.consumer_id} to run in coordinator mode",
                        lambda cid=m.consumer_id: self._acked(cid, COORDINATOR, True))
            self._await("every partition to be owned again", self._settled)
            self.progress(f"{m.consumer_id}: in coordinator mode, every partition owned")
        plan = MigrationPlan(plan.members, "done", plan.bootstrap)
        self._write(plan)
        self.progress("every member in coordinator mode: dropping the ZooKeeper bridge")
        for m in members:
            self._await(f"{m.consumer_id} to leave ZooKeeper",
                        lambda cid=m.consumer_id: self._acked(cid, COORDINATOR, False))
        self.progress("migration done: the group is managed by the broker's coordinator")
        return plan

    def to_zookeeper(self) -> MigrationPlan:
        """The rollback: bridge every coordinator-mode member again, then move members back one by one."""
        members = self.members()
        plan = self.plan()
        coordinator_members = [m for m in members if m.mode == COORDINATOR]
        if plan.phase == "done":
            plan = MigrationPlan({m.consumer_id: COORDINATOR for m in coordinator_members}, "mixed", plan.bootstrap)
            self._write(plan)
            self.progress("bridging coordinator-mode members to ZooKeeper again")
            for m in coordinator_members:
                self._await(f"{m.consumer_id} to register in ZooKeeper",
                            lambda cid=m.consumer_id: self._acked(cid, COORDINATOR, True))
        for m in coordinator_members:
            plan = plan.with_member(m.consumer_id, ZOOKEEPER)
            self._write(plan)
            self.progress(f"{m.consumer_id}: back to ZooKeeper mode")
            self._await(f"{m.consumer_id} to run in ZooKeeper mode",
                        lambda cid=m.consumer_id: self._acked(cid, ZOOKEEPER, False))
            self._await("every partition to be owned again", self._settled)
        self.progress("rollback done: the group is a ZooKeeper (0.8) group")
        return plan
