"""The migration plan node ``/consumers/<group>/migration``: which member runs in which mode.

Kafka 0.8 tools list a group's ``ids``, ``owners`` and ``offsets`` children only, so one more child leaves the
group readable as a 0.8 group. Pure codec, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from zkconsumer.errors import IllegalArgument
from zkconsumer.types import GroupMode
from zkconsumer.zk.layout import GroupPaths, MalformedNodeError


class MigrationPhase(StrEnum):
    """Where a migration stands; the value is the plan node's ``phase``."""

    #: Members run in the mode ``members`` gives them (absent: zookeeper); coordinator-mode members keep a ZooKeeper
    #: registration and owner nodes so both halves agree.
    MIXED = "mixed"
    #: Every member is in coordinator mode and ZooKeeper is no longer used by the group.
    DONE = "done"


#: Every phase and mode, for the checks on a plan (their messages list them).
PHASES, MODES = tuple(MigrationPhase), tuple(GroupMode)
VERSION = 1


def plan_path(group: str) -> str:
    return f"{GroupPaths(group).root}/migration"


@dataclass(frozen=True)
class MigrationPlan:
    members: Mapping[str, GroupMode] = field(default_factory=dict)
    phase: MigrationPhase = MigrationPhase.MIXED
    #: ``bootstrap.servers`` for coordinator-mode members; None: the brokers registered in ZooKeeper.
    bootstrap: str | None = None
    #: The group's subscribed topics when the migration started (after ``done`` no registration says them any
    #: more): what a driver run again checks the coordinator group against.
    topics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Checks the vocabulary, and turns the strings a decoded node gives into its enums."""
        if self.phase not in PHASES:
            raise IllegalArgument(f"migration phase must be one of {', '.join(PHASES)}, got {self.phase!r}")
        for cid, mode in self.members.items():
            if mode not in MODES:
                raise IllegalArgument(f"mode of {cid} must be one of {', '.join(MODES)}, got {mode!r}")
        object.__setattr__(self, "phase", MigrationPhase(self.phase))
        object.__setattr__(self, "members", {cid: GroupMode(mode) for cid, mode in self.members.items()})

    def mode_of(self, consumer_id: str) -> GroupMode:
        if self.phase is MigrationPhase.DONE:
            return GroupMode.COORDINATOR
        return self.members.get(consumer_id, GroupMode.ZOOKEEPER)

    @property
    def bridged(self) -> bool:
        """Whether coordinator-mode members must still keep ZooKeeper ownership (the group may be mixed)."""
        return self.phase is not MigrationPhase.DONE

    def with_member(self, consumer_id: str, mode: GroupMode) -> MigrationPlan:
        return replace(self, members={**self.members, consumer_id: mode})

    def encode(self) -> bytes:
        obj = {"version": VERSION, "phase": self.phase, "bootstrap": self.bootstrap,
               "members": dict(sorted(self.members.items()))}
        if self.topics:
            obj["topics"] = list(self.topics)
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, path: str, data: bytes | None) -> MigrationPlan:
        try:
            obj = json.loads(data or b"")
        except ValueError as e:
            raise MalformedNodeError(path, data, f"not JSON ({e})") from None
        if not isinstance(obj, dict) or obj.get("version") != VERSION:
            raise MalformedNodeError(path, data, f"expected a version {VERSION} migration plan")
        members = obj.get("members") or {}
        if not isinstance(members, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in members.items()):
            raise MalformedNodeError(path, data, "members must map consumer ids to modes")
        topics = obj.get("topics") or []
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            raise MalformedNodeError(path, data, "topics must be a list of topic names")
        try:
            return cls(members, obj.get("phase", MigrationPhase.MIXED), obj.get("bootstrap"), tuple(topics))
        except ValueError as e:
            raise MalformedNodeError(path, data, str(e)) from None


def refusal(plan: MigrationPlan, group: str, mode: GroupMode) -> str | None:
    """Why a member started *without* ``--migratable`` in ``mode`` must not join ``group`` now (None: it may).

    It would not read the plan: in ZooKeeper mode it stays behind when the group leaves ZooKeeper (``done``), and
    while members are bridged it is a second assignment the bridge does not know of; in coordinator mode, while
    the group is mixed, it would fetch partitions ZooKeeper-mode members own (it claims no owner node)."""
    moved = sorted(cid for cid, m in plan.members.items() if m is GroupMode.COORDINATOR)
    if plan.phase is MigrationPhase.DONE:
        if mode == GroupMode.COORDINATOR:
            return None
        where = "has left ZooKeeper (migration done)"
    elif moved:
        where = f"is being migrated ({len(moved)} member(s) in coordinator mode: {', '.join(moved)})"
    else:
        return None
    return (f"group {group} {where}: a member without --migratable would consume partitions other members own. "
            "Start it with --migratable (it runs in the mode the plan gives it), or roll the migration back first "
            f"(zkconsumer migrate --group {group} --rollback)")
