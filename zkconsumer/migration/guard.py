"""The check a member started without ``--migratable`` makes before it joins (``zkconsumer consume``; the simulator's
``join-stranger``): a group in the middle of a migration, or one that has left ZooKeeper, is not joined in ZooKeeper
mode, where it would consume partitions other members own (:func:`~zkconsumer.migration.plan.refusal` says why)."""

from __future__ import annotations

from zkconsumer.migration.plan import MigrationPlan, plan_path, refusal
from zkconsumer.types import GroupMode
from zkconsumer.zk.registry import Registry


def refusal_now(reg: Registry, group: str, mode: GroupMode) -> str | None:
    """Why a member of ``group`` in ``mode`` must not start now (None: it may). A malformed plan raises
    :class:`~zkconsumer.errors.MalformedNodeError`: whether the group is being migrated cannot be told."""
    data = reg.read(plan_path(group))
    return refusal(MigrationPlan.decode(plan_path(group), data), group, mode) if data else None
