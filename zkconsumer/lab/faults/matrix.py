"""The faults, each driving a :class:`FaultLab` from a settled group through the fault and back.

Every fault writes ``fault_injected`` when it strikes and ``fault_healed`` when the system is whole again
(docs/trace.md); the analysis then checks that every partition was owned again within session timeout + 1 s
of the heal. What "healed" means per fault:

* ``zk-leader`` / ``zk-follower``: the killed node restarted and serving again;
* ``zk-quorum``: two of three nodes killed, held down for a session timeout, both back and serving;
* ``zk-cut``: consumer c1's ZooKeeper connection blackholed by the proxy until its session expired on the
  server and the others took its partitions, then passed again;
* ``broker-kill``: the broker process ``kill -9``-ed, then restarted on the same port and log;
* ``consumers-kill``: ``kill -9`` of two consumers at once; healed when ZooKeeper has removed both
  registrations (a crash heals by itself, through session expiry: that moment is when the group *can* react);
* ``herd-30``: 30 consumers started together; healed when all 30 are registered;
* ``consumer-pause``: consumer c1 stopped with SIGSTOP (a GC pause) until its session expired, the others own its
  partitions and committed past where it stood; healed when it is sent SIGCONT (it wakes still holding what it
  fetched: the default profile's session lease keeps it from handing any of it out, Kafka 0.8 does not).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from zkconsumer.lab.faults import migration
from zkconsumer.lab.faults.lab import FaultLab
from zkconsumer.lab.faults.proxy import LinkMode
from zkconsumer.scenario.model import LabMode
from zkconsumer.scenario.plan import GROUP, RunPlan
from zkconsumer.types import tp_str


@dataclass
class Fault:
    name: str
    description: str
    drive: Callable[[FaultLab], None]
    consumers: int = 3
    zk_servers: int = 1
    broker_process: bool = False
    proxied: tuple[str, ...] = ()
    #: under the kafka-0.8 profile this fault shows Kafka 0.8's own behaviour (two owners, duplicates)
    kafka08_known: bool = False
    #: the lab's mode: ``migrate`` faults strike a live migration (zkconsumer/lab/faults/migration.py)
    mode: LabMode = LabMode.ZOOKEEPER


def _modes(lab: FaultLab) -> dict[int, str | None]:
    assert lab.zk is not None
    return {s["server"]: s.get("mode") for s in lab.zk.status()}


def _kill_zk_node(role: str) -> Callable[[FaultLab], None]:
    def drive(lab: FaultLab) -> None:
        assert lab.zk is not None
        victim = lab.wait(lambda: next((n for n, m in _modes(lab).items() if m == role), None), 30, f"a {role}")
        lab.injected(f"zk-{role}", f"zk{victim}", f"ZooKeeper {role} (node {victim}) killed with SIGKILL")
        lab.zk.stop_node(victim, kill=True)
        lab.wait(lambda: sum(m in ("leader", "follower") for m in _modes(lab).values()) == 2, 60,
                 "the two other nodes serving")
        lab.zk.start_node(victim)
        lab.healed(f"zk-{role}", f"node {victim} back")
    return drive


def _quorum_loss(lab: FaultLab) -> None:
    assert lab.zk is not None
    victims = [2, 3]
    lab.injected("zk-quorum", "zk2,zk3", "ZooKeeper nodes 2 and 3 killed: no quorum")
    for node in victims:
        lab.zk.stop_node(node, kill=True)
    lab.wait(lambda: _modes(lab)[1] is None, 30, "the survivor to stop serving")
    time.sleep(lab.plan.session_timeout_ms / 1000)  # the outage itself lasts a session timeout
    for node in victims:
        lab.zk.start_node(node)
    lab.zk.wait_serving(60)
    lab.healed("zk-quorum", "quorum back")


def _cut(lab: FaultLab) -> None:
    proxy = lab.proxies["c1"]
    assert lab.registry is not None
    lab.injected("zk-cut", f"{GROUP}_c1", "c1's ZooKeeper connection blackholed (it still fetches)")
    proxy.set_mode(LinkMode.BLACKHOLE)
    lab.wait(lambda: f"{GROUP}_c1" not in lab.registry.consumer_ids(GROUP), 60, "c1's session to expire")
    lab.wait(lambda: lab.settled([m for m in lab.live_members() if m != "c1"]) and not any(
        t.startswith(f"{GROUP}_c1-") for t in lab.registry.owners(GROUP).values()), 60,
        "the others to own c1's partitions")
    proxy.set_mode(LinkMode.PASS)
    lab.healed("zk-cut", "c1's connection passes again")


def _broker_kill(lab: FaultLab) -> None:
    assert lab.registry is not None
    lab.injected("broker-kill", "broker-0", "broker killed with SIGKILL")
    lab.kill_broker(hard=True)
    lab.wait(lambda: lab.registry.broker_ids() == [], 60, "the broker's registration to vanish")
    lab.start_broker()
    lab.wait(lambda: lab.registry.broker_ids() == [0], 60, "the broker registered again")
    lab.healed("broker-kill", "broker restarted")


def _consumers_kill(lab: FaultLab) -> None:
    assert lab.registry is not None
    victims = ["c1", "c2"]
    lab.injected("consumers-kill", ",".join(f"{GROUP}_{v}" for v in victims), "c1 and c2 killed with SIGKILL")
    for v in victims:
        lab.members.stop(v, kill=True)
    lab.wait(lambda: not {f"{GROUP}_{v}" for v in victims} & set(lab.registry.consumer_ids(GROUP)), 60,
             "the killed consumers' sessions to expire")
    lab.healed("consumers-kill", "their sessions expired")


def _pause(lab: FaultLab) -> None:
    assert lab.registry is not None
    victim = f"{GROUP}_c1"
    held = {tp for tp, thread in lab.registry.owners(GROUP).items() if thread.startswith(f"{victim}-")}
    before = lab.registry.offsets(GROUP)
    lab.injected("consumer-pause", victim, "c1 paused with SIGSTOP past its session (a GC pause)")
    lab.backend.freeze("c1", True)
    try:
        lab.wait(lambda: victim not in lab.registry.consumer_ids(GROUP), 60, "c1's session to expire")
        lab.wait(lambda: lab.settled([m for m in lab.live_members() if m != "c1"]) and not any(
            t.startswith(f"{victim}-") for t in lab.registry.owners(GROUP).values()), 60,
            "the others to own c1's partitions")
        offsets = lab.registry.offsets
        lab.wait(lambda: all(offsets(GROUP).get(tp, 0) > before.get(tp, 0) for tp in held), 60,
                 "the new owners to commit past where c1 stood")
    finally:
        lab.backend.freeze("c1", False)
    lab.healed("consumer-pause", "c1 resumed (SIGCONT)")


def _herd(lab: FaultLab) -> None:
    assert lab.registry is not None
    n = lab.plan.consumers
    lab.injected("herd-30", f"{n} consumers", f"{n} consumers started together")
    for i in range(1, n + 1):
        lab.members.start(f"c{i}")
    lab.wait(lambda: len(lab.registry.consumer_ids(GROUP)) == n, 120, f"all {n} registered")
    lab.healed("herd-30", f"all {n} registered")


FAULTS: dict[str, Fault] = {f.name: f for f in [
    Fault("zk-leader", "ZooKeeper leader kill -9 (3-node ensemble)", _kill_zk_node("leader"), zk_servers=3),
    Fault("zk-follower", "ZooKeeper follower kill -9 (3-node ensemble)", _kill_zk_node("follower"), zk_servers=3),
    Fault("zk-quorum", "quorum loss for a session timeout, then recovery", _quorum_loss, zk_servers=3),
    Fault("zk-cut", "one consumer cut off from ZooKeeper (blackhole) while it fetches", _cut, proxied=("c1",),
          kafka08_known=True),
    Fault("broker-kill", "broker kill -9 and restart under a live group", _broker_kill, broker_process=True),
    Fault("consumers-kill", "kill -9 of two of four consumers at once", _consumers_kill, consumers=4),
    Fault("herd-30", "30 consumers started together", _herd, consumers=30),
    Fault("consumer-pause", "one consumer paused (SIGSTOP) past its session, then resumed", _pause,
          kafka08_known=True),
    Fault("migrate-kill", "the migrate process kill -9 mid-step, then run again", migration.migrate_kill,
          mode=LabMode.MIGRATE),
    Fault("member-kill-switching", "a member kill -9 while it switches mode", migration.member_kill_switching,
          mode=LabMode.MIGRATE),
    Fault("bridge-zk-expiry", "a bridged member's ZooKeeper session expiring (proxy cut)", migration.bridge_zk_expiry,
          proxied=("c1",), mode=LabMode.MIGRATE),
    Fault("broker-restart", "the broker kill -9 and restart mid-migration", migration.broker_restart,
          broker_process=True, mode=LabMode.MIGRATE),
    Fault("rollback-mid", "migrate --rollback started while the migration runs", migration.rollback_mid,
          mode=LabMode.MIGRATE),
    Fault("stranger-joins", "a member without --migratable joining mid-way", migration.stranger_joins,
          mode=LabMode.MIGRATE),
]}


def faults_of(mode: LabMode) -> list[str]:
    """The faults of one lab mode: ``migrate`` strikes migrations, every other mode a running group."""
    return [n for n, f in FAULTS.items() if (f.mode is LabMode.MIGRATE) == (mode == LabMode.MIGRATE)]


@dataclass
class FaultRun:
    """What running one fault produced: where its traces are, and what went wrong while driving it."""

    fault: str
    profile: str
    out: str
    seconds: float
    error: str | None = None
    log_ends: dict = field(default_factory=dict)


def fault_plan(fault: Fault, profile: str, session_timeout_ms: int = 4000, herd: int | None = None) -> RunPlan:
    consumers = herd if (herd and fault.name == "herd-30") else fault.consumers
    # migrations: Kafka's initial rebalance delay scaled down with the sessions (3 s against 10 s sessions)
    delay_ms = 1000 if fault.mode is LabMode.MIGRATE else 3000
    return RunPlan(consumers=consumers, profile=profile, topics={"orders": 12 if fault.name == "herd-30" else 6},
                   rate=40.0, initial_records=20, session_timeout_ms=session_timeout_ms, commit_interval_ms=500,
                   steps=[], mode=fault.mode, initial_rebalance_delay_ms=delay_ms)


def run_fault(fault: Fault, out, profile: str = "default", session_timeout_ms: int = 4000,
              herd: int | None = None, on_event: Callable[[str], None] | None = None) -> FaultRun:
    """Drive ``fault`` once on a fresh lab under ``out``: settle, fault, settle, catch up, stop everyone."""

    started = time.monotonic()
    plan = fault_plan(fault, profile, session_timeout_ms, herd)
    lab = FaultLab(plan, Path(out), zk_servers=fault.zk_servers, broker_process=fault.broker_process,
                   console=Console(quiet=True))
    run = FaultRun(fault.name, profile, str(Path(out)), 0.0)
    settle = 30 + plan.consumers * 2
    try:
        with lab:
            for name in fault.proxied:
                lab.behind_proxy(name)
            lab.start_producing()
            if fault.name != "herd-30":
                for i in range(1, plan.consumers + 1):
                    lab.members.start(f"c{i}")
                lab.wait_settled(settle)
            fault.drive(lab)
            healed = time.monotonic()
            lab.wait_settled(settle)
            # The group keeps running past the deadline the analysis checks (heal + session timeout + 1 s):
            # ownership is judged at that instant, so everyone must still be there.
            window = plan.session_timeout_ms / 1000 + 2.0 - (time.monotonic() - healed)
            if window > 0:
                time.sleep(window)
            run.log_ends = {tp_str(tp): v for tp, v in lab.wait_caught_up(settle).items()}
    except Exception as e:  # noqa: BLE001 - reported in the verdict
        run.error = f"{type(e).__name__}: {e}"
    finally:
        if on_event:
            for text in lab.events:
                on_event(text)
    run.seconds = time.monotonic() - started
    return run
