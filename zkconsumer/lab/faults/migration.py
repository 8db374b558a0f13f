"""The migration faults (``zkconsumer lab --mode migrate --faults``): each strikes a live migration of three
``--migratable`` members from ZooKeeper mode to the coordinator, driven by ``zkconsumer migrate`` in its own
process, and follows it to its end.

For these faults *healed* is the moment the system is whole again by the fault's own measure, and the analysis then
checks that every partition is owned (by a member of either mode) session timeout + 1 s later:

* ``migrate-kill``: the ``migrate`` process ``kill -9``-ed mid-step, run again: healed when the second run says
  ``migration done``, which must not have moved again a member the first run had moved (it resumed);
* ``member-kill-switching``: c2 ``kill -9``-ed while it switches mode; the migration goes on without it; healed when
  c2, started again after ``done``, acknowledges coordinator mode (it reads the plan);
* ``bridge-zk-expiry``: c1 moved alone (``migrate --members c1``), then, bridged and owning partitions, cut off
  from ZooKeeper by the proxy until its session expired on the server, the others owned its partitions and a
  session timeout more went by; healed when c1, back on a new session, owns partitions through the bridge again
  and the rest of the migration completed;
* ``broker-restart``: the broker ``kill -9``-ed mid-migration and started again on its port and log; healed
  when the migration completes;
* ``rollback-mid``: ``migrate --rollback`` started while the forward ``migrate`` runs: the rollback takes the
  group over, the forward driver stops (non-zero, "taken over"); healed when the rollback is done;
* ``stranger-joins``: c4 started without ``--migratable`` mid-migration: refused at once with a message naming
  the migration (non-zero exit, nothing claimed); healed when the migration completes.
"""

from __future__ import annotations

import time

from zkconsumer.lab.faults.lab import FaultLab, FaultTimeout
from zkconsumer.lab.faults.proxy import LinkMode
from zkconsumer.scenario.plan import GROUP
from zkconsumer.types import GroupMode

#: Generous: a step is a member's switch plus two rebalances, and the lab's machine is busy with the whole group.
MIGRATION_TIMEOUT = 240.0


def _planned(lab: FaultLab) -> int:
    """How many members the plan puts in coordinator mode so far."""
    return sum(mode == GroupMode.COORDINATOR for mode in lab.migration().plan().members.values())


def _bridged_and_owning(lab: FaultLab, name: str) -> bool:
    """``name`` runs bridged in coordinator mode and holds owner nodes: it is consuming through the bridge."""
    assert lab.registry is not None
    return lab.acked(name) == (GroupMode.COORDINATOR, True) and any(
        t.startswith(f"{GROUP}_{name}-") for t in lab.registry.owners(GROUP).values())


def migrate_kill(lab: FaultLab) -> None:
    first = lab.run_migrate()
    lab.wait(lambda: _planned(lab) >= 2, 120, "the migration's second step")
    lab.injected("migrate-kill", f"migrate pid {first.pid}", "migrate killed with SIGKILL in its second step")
    first.kill()
    first.wait()
    again = lab.run_migrate()
    text = lab.finish_migrate(again, MIGRATION_TIMEOUT, "migration done")
    if f"{GROUP}_c1: to coordinator mode" in text:
        raise FaultTimeout("the second migrate moved lab_c1 again: it did not resume from the plan")
    lab.healed("migrate-kill", "migrate run again: resumed and done")


def member_kill_switching(lab: FaultLab) -> None:
    proc = lab.run_migrate()
    lab.wait(lambda: lab.migration().plan().mode_of(f"{GROUP}_c2") == GroupMode.COORDINATOR, 120, "c2's step")
    state = lab.acked("c2")
    lab.injected("member-kill-switching", f"{GROUP}_c2",
                 f"c2 killed with SIGKILL while it switches (it last acknowledged {state})")
    lab.members.stop("c2", kill=True)
    lab.finish_migrate(proc, MIGRATION_TIMEOUT, "migration done")
    lab.procs["c2"].wait(30)
    lab.members.restart("c2")
    lab.wait(lambda: lab.acked("c2") == (GroupMode.COORDINATOR, False), 60, "c2 started again, in coordinator mode")
    lab.healed("member-kill-switching", "c2 back, in the mode the plan gives it")


def bridge_zk_expiry(lab: FaultLab) -> None:
    """c1 alone moved first (``migrate --members c1``, a canary), so the group stays mixed while c1 is cut off: no
    driver step and no coordinator rebalance comes to interrupt what c1 does with its partitions meanwhile."""
    assert lab.registry is not None
    proxy = lab.proxies["c1"]
    lab.finish_migrate(lab.run_migrate("--members", "c1"), MIGRATION_TIMEOUT, "the group stays mixed")
    lab.wait(lambda: _bridged_and_owning(lab, "c1"), 60, "c1 bridged in coordinator mode, owning partitions")
    lab.injected("bridge-zk-expiry", f"{GROUP}_c1", "c1 (bridged) cut off from ZooKeeper: blackholed by the proxy")
    proxy.set_mode(LinkMode.BLACKHOLE)
    lab.wait(lambda: f"{GROUP}_c1" not in lab.registry.consumer_ids(GROUP), 60, "c1's session to expire")
    others = [m for m in lab.live_members() if m != "c1"]
    lab.wait(lambda: lab.settled(others) and not any(t.startswith(f"{GROUP}_c1-")
                                                     for t in lab.registry.owners(GROUP).values()), 60,
             "the others to own c1's partitions")
    time.sleep(lab.plan.session_timeout_ms / 1000)  # c1 stays cut off while the others consume its partitions
    proxy.set_mode(LinkMode.PASS)
    lab.wait(lambda: _bridged_and_owning(lab, "c1"), 60, "c1 bridged again on a new session, owning partitions")
    lab.finish_migrate(lab.run_migrate(), MIGRATION_TIMEOUT, "migration done")
    lab.healed("bridge-zk-expiry", "c1 back on a new session; the migration completed")


def broker_restart(lab: FaultLab) -> None:
    assert lab.registry is not None
    proc = lab.run_migrate()
    lab.wait(lambda: _bridged_and_owning(lab, "c1"), 120, "c1 bridged in coordinator mode, owning partitions")
    lab.injected("broker-restart", "broker-0", "broker killed with SIGKILL mid-migration")
    lab.kill_broker(hard=True)
    lab.wait(lambda: lab.registry.broker_ids() == [], 60, "the broker's registration to vanish")
    lab.start_broker()
    lab.wait(lambda: lab.registry.broker_ids() == [0], 60, "the broker registered again")
    lab.finish_migrate(proc, MIGRATION_TIMEOUT, "migration done")
    lab.healed("broker-restart", "broker restarted; the migration completed")


def rollback_mid(lab: FaultLab) -> None:
    forward = lab.run_migrate()
    lab.wait(lambda: _planned(lab) >= 2, 120, "the migration's second step")
    lab.injected("rollback-mid", "migrate --rollback", "migrate --rollback started while the migration runs")
    back = lab.run_migrate("--rollback")
    lab.finish_migrate(back, MIGRATION_TIMEOUT, "rollback done")
    try:
        code = forward.wait(60)
    except Exception:  # noqa: BLE001 - still running: it did not notice
        forward.kill()
        raise FaultTimeout("the forward migrate did not stop after the rollback took the group over") from None
    text = forward.log.read_text(errors="replace")  # type: ignore[attr-defined]
    if code == 0 or "taken over" not in text:
        raise FaultTimeout(f"the forward migrate exited {code} without saying it was taken over")
    lab.healed("rollback-mid", "rollback done; the forward driver stopped, taken over")


def stranger_joins(lab: FaultLab) -> None:
    proc = lab.run_migrate()
    lab.wait(lambda: _bridged_and_owning(lab, "c1"), 120, "c1 bridged in coordinator mode, owning partitions")
    lab.injected("stranger-joins", f"{GROUP}_c4", "c4 started without --migratable mid-migration")
    code = lab.join_plain("c4")
    text = (lab.logs / "c4.log").read_text(errors="replace")
    if code in (None, 0) or "without --migratable" not in text:
        raise FaultTimeout(f"c4 was not refused (exit {code}): {text.strip()[-300:]}")
    lab.finish_migrate(proc, MIGRATION_TIMEOUT, "migration done")
    lab.healed("stranger-joins", "c4 refused; the migration completed")
