"""``zkconsumer migrate``: move a live 0.8 group to the broker's group coordinator, member by member, or back."""

from __future__ import annotations

import argparse

from rich.table import Table

from zkconsumer import broker_version
from zkconsumer.cli.output import CliError, console, err_console
from zkconsumer.cli.topics import add_zookeeper_arg, open_registry
from zkconsumer.migration.driver import MigrationDriver, MigrationError
from zkconsumer.migration.lease import DriverLease, LeaseError
from zkconsumer.types import GroupMode
from zkconsumer.zk.layout import LayoutError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="move a running ZooKeeper group to coordinator mode member by member "
                                        "(members run `consume --migratable`), or back with --rollback")
    add_zookeeper_arg(p)
    p.add_argument("--group", "--group.id", dest="group", required=True)
    p.add_argument("--bootstrap-server", help="brokers coordinator-mode members join (default: from /brokers/ids)")
    p.add_argument("--rollback", action="store_true", help="move every member back to ZooKeeper mode")
    p.add_argument("--status", action="store_true", help="only show the plan and each member's mode")
    p.add_argument("--members", metavar="ID[,ID...]",
                   help="move only these members (consumer ids, or their part after '<group>_') and leave the group "
                        "mixed: a canary, or a migration in stages; run migrate again to go on")
    p.add_argument("--step-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="longest wait for one member to switch, for the group to own every partition again and for "
                        "the coordinator's view of the group to hold; a step that does not is rolled back")
    p.add_argument("--no-rollback", action="store_true",
                   help="leave a step that did not hold as it is (default: undo it, back to the last state that held)")
    p.add_argument("--no-verify", action="store_true",
                   help="do not check the group on the coordinator (DescribeGroups, offsets moving) before a step "
                        "is called done")
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args: argparse.Namespace) -> int:
    with open_registry(args) as reg:
        driver = MigrationDriver(reg, args.group, args.bootstrap_server, args.step_timeout,
                                 progress=lambda msg: err_console.print(f"• {msg}", highlight=False),
                                 verify_steps=not args.no_verify, rollback_on_failure=not args.no_rollback)
        try:
            if not args.status and not args.rollback:  # Kafka 0.8 has no group coordinator to move to
                bootstrap = args.bootstrap_server or reg.bootstrap_servers()
                if bootstrap:
                    broker_version.require(bootstrap, (0, 9), "moving a group to coordinator mode")
            if args.members and (args.rollback or args.status):
                raise CliError("--members moves members to coordinator mode: not with --rollback or --status")
            if args.rollback:
                driver.to_zookeeper()
            elif not args.status:
                driver.to_coordinator(_member_ids(args.group, args.members) if args.members else None)
            plan = driver.plan()
            table = Table(title=f"group {args.group}: migration phase {plan.phase}")
            for col in ("consumer", "planned mode", "running mode", "bridged", "registered in ZooKeeper"):
                table.add_column(col)
            for m in driver.members():
                table.add_row(m.consumer_id, plan.mode_of(m.consumer_id), m.mode or "(not migratable)",
                              "yes" if m.bridged else "no", "yes" if m.registered else "no")
            console.print(table)
            if args.status:
                _show_checks(driver, plan)
        except (MigrationError, LeaseError, LayoutError, broker_version.BrokerTooOld) as e:
            raise CliError(str(e)) from None
    return 0


def _member_ids(group: str, members: str) -> list[str]:
    """``c1,lab_c2`` → ``[lab_c1, lab_c2]``: Kafka's consumer ids are ``<group>_<consumer.id>``."""
    names = [m.strip() for m in members.split(",") if m.strip()]
    return [m if m.startswith(f"{group}_") else f"{group}_{m}" for m in names]


def _show_checks(driver: MigrationDriver, plan) -> None:
    """``--status``: the checks a step must pass, on the group as it is now."""
    holder = DriverLease(driver.registry, driver.group, GroupMode.COORDINATOR).holder()
    rollback = holder is not None and holder.get("direction") == GroupMode.ZOOKEEPER
    console.print("driver: none running" if holder is None else
                  f"driver: {'rollback' if rollback else 'migration'} running (pid "
                  f"{holder.get('pid')} on {holder.get('host')})", highlight=False)
    members = driver.members()
    expected = [m.consumer_id for m in members if plan.mode_of(m.consumer_id) is GroupMode.COORDINATOR]
    unowned = driver.unowned() if plan.bridged else []
    console.print(f"ZooKeeper: {'every partition owned' if not unowned else 'unowned: ' + ', '.join(unowned)}",
                  highlight=False)
    if not expected:
        console.print("coordinator: no member is planned in coordinator mode", highlight=False)
        return
    check = driver.check(expected, None if plan.bridged else driver.subscribed_partitions() or None)
    console.print(check.summary(), highlight=False)
    table = Table(title=f"the coordinator group's members (DescribeGroups), assignments {check.evidence}")
    table.add_column("member")
    table.add_column("partitions")
    for name, tps in sorted(check.members.items()):
        table.add_row(name, ", ".join(tps) or "-")
    console.print(table)
