"""The migration's side of a migrate-mode world (issue 54 item 2, ``zkconsumer sim --mode migrate``): the members as
``zkconsumer consume --migratable`` runs them, and ``zkconsumer migrate``'s driver as the lab runs it.

- **a member** is :class:`~zkconsumer.migration.member.MigratableConsumer`, unchanged: the plan's watch, both
  connectors and the switch between them, the bridge; its connections are the world's (``MemberIO``);
- **the driver** is :class:`~zkconsumer.migration.driver.MigrationDriver`, unchanged, started by a ``migrate`` or
  ``rollback`` step the way lab/runner.py's ``Lab.migrate`` starts it: in the background, after the previous one
  ended, in a process of its own (``driver``) with its own ZooKeeper session, waiting up to 60 s for every running
  member's acknowledgement;
- **the end** is the lab's: the driver given 90 s, then its own ownership verdict read for up to three session
  timeouts, and the plan's end (:class:`MigrationOutcome`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zkconsumer.analysis.deadlines import MIGRATION_ENDED_STEP
from zkconsumer.errors import ZkConsumerError
from zkconsumer.migration.driver import MigrationDriver
from zkconsumer.migration.guard import refusal_now
from zkconsumer.migration.lease import Superseded
from zkconsumer.migration.member import MigratableConsumer, Subscription
from zkconsumer.migration.outcome import DriverEnd, combined, result_text
from zkconsumer.migration.plan import MigrationPhase
from zkconsumer.scenario.model import ActionKind, Step
from zkconsumer.scenario.plan import GROUP
from zkconsumer.sim import tasks
from zkconsumer.sim.tasks import Process
from zkconsumer.types import GroupMode
from zkconsumer.zk.registry import Registry

#: How long the lab gives ``zkconsumer migrate`` at the end of a run (lab/runner.py joins its thread so long), and
#: how long the driver waits for the members' acknowledgements before it starts (the lab's 60 s)
DRIVER_FINISH_S = 90.0
DRIVER_ACK_WAIT_S = 60.0
#: the driver's step timeout, the lab's
STEP_TIMEOUT_S = 60.0


@dataclass
class MigrationOutcome:
    """How a migrate-mode run's migration ended (the lab's ``migration`` and ``verify_ok``): ``result`` as the lab
    words it (``done``, ``rolled back``, ``migration failed: …``, ``unfinished``), the plan's end (``whole``: every
    running member in one mode, or the ``done`` phase; a mixed group with no held step is a breach) and the driver's
    own ownership verdict at the end (``ownership``: its summary; ``owned``: whether it held)."""

    result: str = "not started"
    whole: bool = True
    plan: str = ""
    owned: bool = True
    ownership: str = ""

    @property
    def ok(self) -> bool:
        return self.whole and self.owned


class MigrationSide:
    """The migratable members' main and the driver's steps, on ``world`` (a :class:`~zkconsumer.sim.world.SimWorld`,
    which imports this module: it is used by the names it has, not imported back)."""

    def __init__(self, world: Any, bootstrap: str) -> None:
        self.world = world
        self.bootstrap = bootstrap
        self.outcome = MigrationOutcome()
        self._driver: tasks.Task | None = None
        #: every driver started, with its process: ``kill-driver`` kills those still running
        self._drivers: list[tuple[tasks.Task, Process, bool]] = []

    # ------------------------------------------------------------------------------------------ members
    def run_member(self, member: Any) -> None:
        """``zkconsumer consume --migratable``: the connector the migration plan asks for, switched when it changes;
        each stream handed to the application until the stream ends (its connector shut down for a switch). The
        world marks the member's exit."""
        world, plan = self.world, self.world.plan
        subscription = (Subscription(topic_filter=plan.whitelist, streams=1) if plan.subscribes_by_regex
                        else Subscription(topics={t: 1 for t in plan.topics_of(member.name)}))
        try:
            migratable = MigratableConsumer(world.member_config(member.name), subscription,
                                            io=world.member_io(member.name))
            member.connector = migratable
            migratable.run(lambda stream: world._application(member, stream), member.stop)
        except ZkConsumerError as e:
            member.error = f"{type(e).__name__}: {e}"

    def may_join(self, member: Any) -> bool:
        """``join-stranger``: ``zkconsumer consume`` without ``--migratable`` reads the group's migration plan first,
        on a session of its own, and refuses to start in the middle of a migration (the member's error, as the CLI's
        exit 1 says it); otherwise it runs as a plain ZooKeeper-mode member."""
        kw = self.world.kw
        client = kw.client(member.name, timeout=self.world.plan.session_timeout_ms / 1000.0)
        client.start()
        try:
            reason = refusal_now(Registry(client), GROUP, GroupMode.ZOOKEEPER)
        except ZkConsumerError as e:
            reason = f"cannot tell whether group {GROUP} is being migrated: {e}"
        finally:
            client.stop()
            client.close()
        if reason:
            member.error = f"CliError: {reason}"
        return reason is None

    # ------------------------------------------------------------------------------------------ the driver
    def start(self, step: Step) -> None:
        """``zkconsumer migrate`` (``--rollback``) as the lab starts it: a forward driver after the one before it has
        ended, a rollback at once (it takes the group over from a forward driver still running: lab/migrations.py)."""
        rollback = step.action is ActionKind.ROLLBACK
        previous = None if rollback else self._driver
        self.world.network.set_delay_us("driver", self.world.base_delay_us)
        process = Process("driver")
        self._driver = self.world.rt.spawn(self._drive, previous, rollback, name=f"driver-{step.at:g}",
                                           process=process)
        self._drivers.append((self._driver, process, rollback))

    def running(self) -> bool:
        """A driver runs, or waits to (the lab's ``kill-driver`` is skipped without one)."""
        return any(task.is_alive() and not process.killed for task, process, _ in self._drivers)

    def kill(self) -> None:
        """``kill-driver``: SIGKILL of every driver running or waiting to start. Its connections close, its
        ZooKeeper session (and with it the lease) lingers until it expires; each writes the end of its stretch
        of migration, as the lab's thread does when its process exits. The next ``migrate`` resumes."""
        for task, process, rollback in self._drivers:
            if task.is_alive() and not process.killed:
                self.world.rt.kill_process(process)
                self._ended(result_text(rollback, DriverEnd.KILLED))
        self.world.network.close_host("driver")
        self._driver = None  # a killed task never finishes: the next step does not wait for it

    def _running(self) -> int:
        return len(self.world.running_names())

    @staticmethod
    def _acknowledged(driver: MigrationDriver) -> int:
        return len([m for m in driver.members() if m.mode])

    def _drive(self, previous: tasks.Task | None, rollback: bool) -> None:
        if previous is not None:
            previous.join()
        kw = self.world.kw
        try:
            zk = kw.client("driver", timeout=30.0)
            zk.start()
            try:
                driver = MigrationDriver(Registry(zk), GROUP, self.bootstrap, step_timeout_s=STEP_TIMEOUT_S)
                deadline = kw.scheduler.now_ms + DRIVER_ACK_WAIT_S * 1000
                while kw.scheduler.now_ms < deadline and self._acknowledged(driver) < self._running():
                    tasks.sleep(0.1)
                driver.to_zookeeper() if rollback else driver.to_coordinator()
            finally:
                zk.stop()
                zk.close()
            result = result_text(rollback, DriverEnd.ROLLED_BACK if rollback else DriverEnd.DONE)
        except Superseded:
            result = result_text(rollback, DriverEnd.TAKEN_OVER)
        except Exception as e:  # noqa: BLE001 - the lab's summary says it, so does the outcome
            result = result_text(rollback, DriverEnd.FAILED, str(e))
        self._ended(result)

    def _ended(self, result: str) -> None:
        """One driver ended: the run's line (as the lab's summary words it), and the lab's end of the migration's
        disturbance, for the heals' deadlines (analysis/deadlines.py)."""
        previous = None if self.outcome.result == "not started" else self.outcome.result
        self.outcome.result = combined(previous, result)
        self.world._lab_line("lab_step", step=MIGRATION_ENDED_STEP, target="")

    # ------------------------------------------------------------------------------------------ the end
    def judge(self, reg: Registry) -> MigrationOutcome:
        """The lab's end of a migrate run: the driver given :data:`DRIVER_FINISH_S` to finish, then its ownership
        verdict read until it holds (three session timeouts at most, as the lab waits), and the plan's end."""
        world, out = self.world, self.outcome
        deadline = world.kw.scheduler.now_ms + DRIVER_FINISH_S * 1000
        for task, process, _ in self._drivers:  # a killed one never finishes: not waited for
            if not process.killed:
                task.join(max(0.0, (deadline - world.kw.scheduler.now_ms) / 1000))
        if self.running():
            out.result = "unfinished"
        driver = MigrationDriver(reg, GROUP, self.bootstrap, step_timeout_s=STEP_TIMEOUT_S)
        deadline = world.kw.scheduler.now_ms + max(15.0, 3 * world.plan.session_timeout_ms / 1000) * 1000
        while not (verdict := driver.ownership()).ok and world.kw.scheduler.now_ms < deadline:
            tasks.sleep(0.5)
        plan = driver.plan()
        # the running members' modes as the plan gives them (a member it does not name: ZooKeeper mode)
        modes = {plan.mode_of(f"{GROUP}_{name}") for name in world.running_names()}
        out.whole = plan.phase is MigrationPhase.DONE or len(modes) <= 1
        out.plan = plan.encode().decode()
        out.owned, out.ownership = verdict.ok, verdict.summary()
        return out

