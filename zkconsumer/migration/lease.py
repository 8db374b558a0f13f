"""One driver at a time: the ephemeral node ``/consumers/<group>/migration-driver`` names the running ``migrate``.

Two drivers writing one plan would undo each other's steps, so a forward migration refuses to start while another
driver runs. A rollback is the emergency brake and always gets the group: it takes the lease over from a forward
driver, which notices at its next wait (the lease is checked while it waits) or write (every plan write is a
versioned set that fails once another driver wrote the plan) and stops without touching the plan again
(:class:`Superseded`). A lease left by a driver that was killed (``kill -9``) goes with its session; on the same
host a dead holder's lease is taken over at once, so running the command again resumes right away.
"""

from __future__ import annotations

import json

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from zkconsumer import runtime
from zkconsumer.errors import ZkConsumerError
from zkconsumer.types import GroupMode
from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.registry import Registry


class LeaseError(ZkConsumerError, RuntimeError):
    """Another driver holds the group."""


class Superseded(LeaseError):
    """This driver's lease was taken over (a rollback started): it must stop without writing the plan again."""


def lease_path(group: str) -> str:
    return f"{GroupPaths(group).root}/migration-driver"


def _alive_here(holder: dict) -> bool | None:
    """Whether the holder's process is alive, if it ran on this host (None: another host, cannot tell)."""
    if holder.get("host") != runtime.hostname() or not isinstance(holder.get("pid"), int):
        return None
    return runtime.process_alive(holder["pid"])


class DriverLease:
    """``direction``: ``coordinator`` (forward) or ``zookeeper`` (rollback)."""

    def __init__(self, registry: Registry, group: str, direction: GroupMode, wait_s: float = 30.0) -> None:
        assert direction in tuple(GroupMode)
        self.registry = registry
        self.group = group
        self.direction = direction
        self.path = lease_path(group)
        self.wait_s = wait_s
        self.plan_version: int | None = None  # the plan node's version as this driver last wrote or read it
        self.took_over: dict | None = None

    def holder(self) -> dict | None:
        try:
            data, _ = self.registry.zk.get(self.path)
        except NoNodeError:
            return None
        try:
            return json.loads(data or b"{}")
        except ValueError:
            return {}

    def acquire(self) -> None:
        data = json.dumps({"direction": self.direction, "host": runtime.hostname(), "pid": runtime.getpid(),
                           "started": int(runtime.time() * 1000)}).encode()
        self.registry.ensure_paths([GroupPaths(self.group).root])
        deadline = runtime.monotonic() + self.wait_s
        while True:
            try:
                self.registry.zk.create(self.path, data, ephemeral=True)
                return
            except NodeExistsError:
                pass
            holder = self.holder()
            if holder is None:
                continue  # gone meanwhile
            alive = _alive_here(holder)
            if alive is False or (self.direction == GroupMode.ZOOKEEPER
                                  and holder.get("direction") == GroupMode.COORDINATOR):
                # a dead driver's lease (kill -9: its session lingers), or a rollback taking a forward one over
                self.took_over = holder
                try:
                    self.registry.zk.delete(self.path)
                except NoNodeError:
                    pass
                continue
            who = f"{holder.get('direction', '?')} driver pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
            if runtime.monotonic() > deadline:
                raise LeaseError(f"another `zkconsumer migrate` holds group {self.group} ({who}, {self.path}); "
                                 "wait for it to finish, or stop it; a rollback (--rollback) takes over a forward "
                                 "migration")
            runtime.sleep(0.5)  # a holder on another host whose session may be expiring

    def check(self) -> None:
        """Raise :class:`Superseded` when the lease is no longer this driver's."""
        try:
            _, stat = self.registry.zk.get(self.path)
        except NoNodeError:
            stat = None
        if stat is None or stat.ephemeralOwner != self.registry.zk.client_id[0]:
            holder = self.holder() or {}
            raise Superseded(f"this driver's lease on group {self.group} was taken over"
                             + (f" by a {holder.get('direction')} driver (pid {holder.get('pid')})" if holder else "")
                             + ": stopping without changing the plan again")

    def write(self, path: str, data: bytes) -> None:
        """Set the plan node ``path`` to ``data`` if nobody else wrote it since this driver last did (a versioned
        set: a rollback that took over writes it first, and this driver then stops)."""
        if self.plan_version is None:
            self.registry.zk.ensure_path(path)
            self.plan_version = self.registry.zk.get(path)[1].version
        try:
            stat = self.registry.zk.set(path, data, version=self.plan_version)
        except BadVersionError:
            self.check()
            raise Superseded(f"{path} was changed by someone else while this driver held the group: stopping "
                             "without changing it again") from None
        self.plan_version = stat.version

    def release(self) -> None:
        try:
            _, stat = self.registry.zk.get(self.path)
            if stat.ephemeralOwner == self.registry.zk.client_id[0]:
                self.registry.zk.delete(self.path, version=stat.version)
        except NoNodeError:
            pass
