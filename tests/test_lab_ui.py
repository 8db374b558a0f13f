"""``zkconsumer lab --ui``: the lab page's data (lab/live.py), its buttons carried out on the lab's loop, and the page
in a real browser on a real lab: a click on "kill" shows the rebalance and the new owners within the session timeout
+ 2 s."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from browser import chromium, open_page
from helpers import wait_until

from zkconsumer.cli import main
from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.backends import ProcessBackend
from zkconsumer.lab.faults.scenario_lab import CutAnyLab, lab_for
from zkconsumer.lab.live import FINISH, JOIN, LabSource, LiveGroup, Reading, actions, member_of, plain
from zkconsumer.lab.runner import Lab
from zkconsumer.scenario.model import ActionKind, LabMode, Step
from zkconsumer.scenario.plan import RunPlan

TOPICS = {"orders": 2, "payments": 1}
PRODUCED = {("orders", 0): 10, ("orders", 1): 12, ("payments", 0): 5}


def reading(ts: int, states: dict[str, str], owners: dict | None = None, **fields) -> Reading:
    fields.setdefault("expected", frozenset(PRODUCED))
    return Reading(ts, states, owners=owners or {}, produced=dict(PRODUCED), **fields)


def test_the_page_shows_members_partitions_and_owners_by_member_name() -> None:
    group = LiveGroup("lab", actions(12))
    snap = group.take(reading(1000, {"c2": "running", "c10": "paused", "c1": "killed (-9)"},
                              {("orders", 1): "lab_c1-0", ("orders", 0): "lab_c10-0", ("payments", 0): "elsewhere"},
                              committed={("orders", 0): 7}, actions={"c2": ["stop", "kill"], "c1": ["restart"]},
                              subscriptions={"c2": {"orders": 1}}, clients={"c2": "default"}))
    assert snap.status.ok
    assert [(m.id, m.state, m.owned, m.actions) for m in snap.members] == [
        ("c1", "killed", ["orders-1"], ["restart"]), ("c2", "running", [], ["stop", "kill"]),
        ("c10", "paused", ["orders-0"], [])]
    assert snap.members[1].subscription == {"orders": 1} and snap.members[1].client == "default"
    assert [(p.topic, p.partition, p.owner, p.offset, p.end, p.lag) for p in snap.partitions] == [
        ("orders", 0, "c10 (paused)", 7, 10, 3), ("orders", 1, "c1 (killed)", None, 12, 12),
        ("payments", 0, "elsewhere", None, 5, 5)]  # an owner node outliving its consumer shows its member's state
    assert [a.name for a in snap.actions if not a.member] == [JOIN, FINISH]
    # the churn over: the same page, no buttons
    closed = group.take(reading(2000, {"c2": "running"}, actions={"c2": ["stop"]}, open=False))
    assert closed.actions == [] and closed.members[0].actions == []


def test_ownership_changes_are_timestamped_and_the_group_settling_is_an_event() -> None:
    group = LiveGroup("lab", [])
    running = {"c1": "running", "c2": "running"}
    first = {("orders", 0): "lab_c1-0", ("orders", 1): "lab_c1-0", ("payments", 0): "lab_c2-0"}
    group.take(reading(1000, running, {("orders", 0): "lab_c1-0"}))
    group.take(reading(1500, running, first))
    snap = group.take(reading(2000, running, first))  # no change: settled, every partition owned by a live member
    assert [(c.ts, c.partition, c.owner) for c in snap.changes] == [
        (1000, "orders-0", "c1"), (1500, "orders-1", "c1"), (1500, "payments-0", "c2")]
    assert [e.text for e in snap.events if e.kind == "rebalance"] == [
        "group settled: 3 partitions changed hands, 500 ms from the first claim to the last claim; longest a "
        "partition sat unowned: 0 ms; every partition owned (c1 2, c2 1)"]
    # c1 killed: its owner nodes stay until its session expires (shown as the killed member's), then go, then to c2;
    # the partitions count as unowned from the kill on (no one consumes them)
    killed = {"c1": "killed (-9)", "c2": "running"}
    group.take(reading(3000, killed, first, lab_events=["12:00:03 c1 killed with SIGKILL"],
                       steps=[(1200, "join c2"), (2990, "kill -9 c1")]))
    group.take(reading(9000, killed, {("payments", 0): "lab_c2-0"}))
    snap = group.take(reading(9500, killed, {tp: "lab_c2-0" for tp in first}, rebalances=[
        {"ts": 9400, "consumer": "lab_c2", "duration_ms": 80, "attempts": 2, "owned": ["payments-0", "orders-1",
                                                                                       "orders-0"]},
        {"ts": 9300, "consumer": "lab_c2", "duration_ms": 20, "attempts": 1, "owned": []}]))
    assert [(c.ts, c.partition, c.owner) for c in snap.changes][3:] == [
        (3000, "orders-0", "c1 (killed)"), (3000, "orders-1", "c1 (killed)"), (9000, "orders-0", None),
        (9000, "orders-1", None), (9500, "orders-0", "c2"), (9500, "orders-1", "c2")]
    assert [(e.ts, e.kind, e.text) for e in snap.events][1:] == [
        (3000, "action", "c1 killed with SIGKILL"), (9300, "rebalance", "c2 rebalanced in 20 ms: owns 0"),
        (9400, "rebalance", "c2 rebalanced in 80 ms, 2 attempts: owns 3 (orders-0, orders-1, payments-0)")]
    group.take(reading(9600, killed, {tp: "lab_c2-0" for tp in first}))  # quiet: settled, and after what
    assert group.events[-1].text == (
        "group settled 6.5 s after kill -9 c1: 2 partitions changed hands, 6500 ms from the first release to the "
        "last claim; longest a partition sat unowned: 6500 ms; every partition owned (c2 3)")
    snap = group.take(reading(10000, {"c1": "killed (-9)", "c2": "stopped"}, {tp: "lab_c2-0" for tp in first}))
    assert [e.text for e in snap.events][-1:] == ["c2 exited (stopped)"]  # and not settled: c2 no longer runs
    # a step an earlier rebalance answered is not the next one's cause, nor one longer than cause_ms before it
    group.take(reading(20000, running, first))
    group.take(reading(20100, running, first))
    assert group.events[-1].text.startswith("group settled: 2 partitions changed hands")
    late = LiveGroup("lab", [], cause_ms=1000)
    late.take(reading(1000, running, first, steps=[(500, "pause c1")]))
    late.take(reading(2000, running, first))
    assert late.events[-1].text.startswith("group settled 0.5 s after pause c1: 3 partitions")
    late.take(reading(9000, running, {tp: "lab_c2-0" for tp in first}, steps=[(3000, "pause c2")]))
    late.take(reading(9500, running, {tp: "lab_c2-0" for tp in first}))
    assert late.events[-1].text.startswith("group settled: 2 partitions changed hands")


def test_a_group_that_cannot_be_read_keeps_its_last_data_under_a_banner() -> None:
    group = LiveGroup("lab", [])
    assert not group.snapshot.status.ok  # before the first reading: starting
    group.take(reading(1000, {"c1": "running"}, {("orders", 0): "lab_c1-0"}))
    group.failed(1500, "cannot read the group since 12:00:01: ConnectionLoss")
    snap = group.failed(2000, "cannot read the group since 12:00:01: ConnectionLoss")
    assert snap.status.message.endswith("ConnectionLoss") and not snap.status.ok
    assert [m.owned for m in snap.members] == [["orders-0"]]
    assert [e.kind for e in snap.events] == ["source"]  # said once
    assert group.take(reading(2500, {"c1": "running"})).status.ok


def test_owner_ids_and_lab_events_read_as_the_page_shows_them() -> None:
    names = ["c1", "c12"]
    assert [member_of(o, names) for o in ("lab_c1-0", "lab_c12-0", "lab_c12", "lab_c3-0")] == [
        "c1", "c12", "c12", "lab_c3-0"]
    assert plain("12:00:01 [red]failed[/] cut-zk c1 at 3.0 s: boom") == "failed cut-zk c1 at 3.0 s: boom"
    assert plain("not markup: [/red] closes nothing") == "not markup: [/red] closes nothing"


class _Names(ProcessBackend):
    """Members that are names only: started, signalled and exiting as told, no process behind them."""

    def __init__(self) -> None:
        super().__init__()
        self.codes: dict[str, int | None] = {}

    def start(self, name: str, args: list[str], log: Path) -> None:
        self.codes[name] = None

    def restart(self, name: str) -> None:
        self.codes[name] = None

    def signal(self, name: str, kill: bool) -> None:
        self.codes[name] = -9 if kill else 0

    def freeze(self, name: str, frozen: bool) -> None:
        pass

    def exit_code(self, name: str) -> int | None:
        return self.codes[name]


class _Tree:
    """The registry as the lab reads it: owner nodes, no offsets."""

    def __init__(self) -> None:
        self.owner_nodes: dict[tuple[str, int], str] = {}

    def owners(self, group: str) -> dict[tuple[str, int], str]:
        return dict(self.owner_nodes)

    def offsets(self, group: str) -> dict[tuple[str, int], int]:
        return {}


def test_a_button_is_a_lab_step_carried_out_on_the_labs_loop(tmp_path: Path) -> None:
    plan = RunPlan(consumers=2, topics=TOPICS, steps=[Step(20.0, ActionKind.JOIN, "c3")])
    lab = Lab(plan, tmp_path, backend=_Names())
    source = LabSource(lab, open_ended=True)
    assert lab.ui is source
    tree = _Tree()
    lab.members.start("c1")
    lab.members.start("c2")
    source.turn(tree, 1.0, 0)
    assert {m.id: m.actions for m in source.snapshot().members} == {
        "c1": ["stop", "kill", "pause"], "c2": ["stop", "kill", "pause"]}  # no cut: a plain lab has no proxies
    with pytest.raises(IllegalArgument, match="cut-zk c1: this lab has no handle on servers, links"):
        source.act("cut-zk", "c1")
    with pytest.raises(IllegalArgument, match="no member 'c7' in this run; members: c1, c2"):
        source.act("kill", "c7")
    with pytest.raises(IllegalArgument, match="unknown action 'explode'"):
        source.act("explode", "c1")

    def press(action: str, member: str | None) -> str:
        """The web server's thread presses; the lab's loop turns until it has carried the button out."""
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(source.act, action, member)
            while not answer.done():
                source.turn(tree, 2.5, 0.05)
            return answer.result()

    assert press("kill", "c1") == "c1 killed with SIGKILL"
    assert press(JOIN, None) == "c4 joined"  # c3 is the schedule's
    source.turn(tree, 3.0, 0)
    members = {m.id: m for m in source.snapshot().members}
    assert (members["c1"].state, members["c1"].actions) == ("killed", ["restart"])
    with pytest.raises(IllegalArgument, match="kill c1: not while c1 is killed"):
        source.act("kill", "c1")
    steps = [json.loads(line) for line in (tmp_path / "traces" / "lab.jsonl").read_text().splitlines()]
    assert [(s["event"], s["step"], s["target"]) for s in steps] == [("lab_step", "kill", "lab_c1"),
                                                                      ("lab_step", "join", "lab_c4")]
    assert lab.marks == [(steps[0]["ts"], "kill -9 c1"), (steps[1]["ts"], "join c4")]  # what a rebalance follows
    assert any(e.text == "c4 joined" for e in source.snapshot().events)
    # open-ended: the churn lasts past the plan's duration, until the page's finish
    assert source.churning(plan.duration + 100)
    assert source.act(FINISH, None).startswith("finishing")
    assert not source.churning(1.0)
    source.turn(tree, 4.0, 0)
    assert source.snapshot().actions == []
    with pytest.raises(IllegalArgument, match="the churn is over"):
        source.act("kill", "c2")
    # without open_ended the plan's duration ends it, and finish ends it sooner
    timed = LabSource(Lab(plan, tmp_path / "timed", backend=_Names()))
    assert timed.churning(plan.duration - 1) and not timed.churning(plan.duration)


def test_the_ui_lab_links_every_member_to_zookeeper_where_it_can(tmp_path: Path) -> None:
    """The page's cut button on any member: each reaches ZooKeeper through a proxy of its own, made as it starts."""
    assert type(lab_for(RunPlan(), tmp_path, cut_any=True)) is CutAnyLab
    assert type(lab_for(RunPlan(mode=LabMode.COORDINATOR), tmp_path, cut_any=True)) is Lab  # no ZooKeeper session
    assert type(lab_for(RunPlan(), tmp_path, cut_any=True, backend=_Names())) is CutAnyLab
    assert type(lab_for(RunPlan(), tmp_path)) is Lab


def test_the_cli_refuses_ui_with_several_runs(capsys) -> None:
    assert main(["lab", "--ui", "--compare"]) != 0
    assert "--ui watches one lab run" in capsys.readouterr().err


#: The lab's default session timeout (RunPlan.session_timeout_ms): the killed member's partitions move when it ends.
#: The kill test's run: two members on four partitions and 3 s sessions (the lab's default is 6 s; a shorter
#: session is a shorter test, and the bound below is the session's), nothing scheduled (the page drives it).
SESSION_TIMEOUT_S = 3.0
UI_SCENARIO = f"""name = "ui-kill"
description = "two members, nothing scheduled: the page's kill -9 is the run's only step"
members = 2
rate = 50
initial_records = 20
session_timeout_ms = {int(SESSION_TIMEOUT_S * 1000)}

[topics]
orders = 4
"""


def _page_state(page) -> dict:
    return page.evaluate("""() => ({
        owners: Object.fromEntries([...document.querySelectorAll('#partitions tr[data-partition]')]
                                   .map(r => [r.dataset.partition, r.dataset.owner || null])),
        states: Object.fromEntries([...document.querySelectorAll('#members tr[data-member]')]
                                   .map(r => [r.dataset.member, r.dataset.state])),
        rebalances: [...document.querySelectorAll('#events li[data-kind=rebalance]')].map(li => li.textContent),
    })""")


def test_a_kill_clicked_on_the_lab_page_shows_the_rebalance_and_the_new_owners(tmp_path: Path) -> None:
    log_path = tmp_path / "lab.log"
    with log_path.open("w") as log:
        scenario = tmp_path / "ui-kill.toml"
        scenario.write_text(UI_SCENARIO)
        lab = subprocess.Popen([sys.executable, "-m", "zkconsumer", "lab", "--ui", "--port", "0", "--scenario",
                                str(scenario), "--out", str(tmp_path / "run")], stdout=log, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        def printed() -> re.Match | None:
            assert lab.poll() is None, f"the lab ended: {log_path.read_text()[-4000:]}"
            return re.search(r"live page: (http://127\.0\.0\.1:\d+/)", log_path.read_text())

        url = wait_until(printed, timeout=60, message="the lab to print its page's URL").group(1)
        with chromium() as browser, open_page(browser, url) as (page, page_log):
            # every partition owned by a running member, and the group said to have settled
            wait_until(lambda: (s := _page_state(page))["owners"] and all(
                s["states"].get(o) == "running" for o in s["owners"].values()) and any(
                "group settled" in r for r in s["rebalances"]), timeout=60, interval=0.2,
                message="every partition owned on the page")
            # the client each member runs, and no column a lab member has no value for (a 0.8 registration's)
            assert page.evaluate("[...document.querySelectorAll('#members th[data-column]')]"
                                 ".map(th => th.dataset.column)") == ["member-id", "state", "client", "subscription",
                                                                      "owned"]
            assert page.locator("#events-none").is_hidden()  # a rebalance seen: no "no rebalance seen" line
            before = _page_state(page)
            victim = sorted(set(before["owners"].values()))[0]
            moved = sorted(tp for tp, owner in before["owners"].items() if owner == victim)
            clicked = time.monotonic()
            page.click(f"#members button.act[data-action=kill][data-member={victim}]")
            page.wait_for_selector("#answer[data-status=ok]:has-text('killed with SIGKILL')", timeout=5000)

            def moved_on() -> dict | None:
                s = _page_state(page)
                new = [r for r in s["rebalances"] if r not in before["rebalances"] and "rebalanced in" in r]
                owners = {s["owners"][tp] for tp in moved}
                live = all(s["states"].get(o) == "running" for o in owners) and victim not in owners
                return s if new and live else None

            after = wait_until(moved_on, timeout=SESSION_TIMEOUT_S + 2 - (time.monotonic() - clicked), interval=0.1,
                               message=f"a rebalance and new owners of {victim}'s partitions {moved} on the page")
            assert after["states"][victim] == "killed"
            # the group settled, said after the click; the kill marked on the timeline, where the owners moved
            page.wait_for_selector(f"#events li[data-kind=rebalance]:has-text('s after kill -9 {victim}: ')",
                                   timeout=5000)
            marks = page.evaluate("""() => {
                const layout = document.getElementById('timeline').layout;
                return {labels: layout.annotations.map(a => [a.text, a.x]),
                        lines: layout.shapes.filter(s => s.line.dash === 'dot').map(s => s.x0)};
            }""")
            [at] = [x for text, x in marks["labels"] if text == f"{victim} killed with SIGKILL"]
            assert at in marks["lines"], marks
            # the two members started together: one mark, one label for both
            assert "c1, c2 joined" in [text for text, _ in marks["labels"]], marks
            page.click("#actions button.act[data-action=finish]")
            page.wait_for_selector("#answer[data-status=ok]:has-text('finishing')", timeout=5000)
            assert page_log.errors == [] and page_log.remote == []
        code = lab.wait(120)
        output = log_path.read_text()
        assert code == 0, output[-4000:]
        assert "Rebalance operation successful" in output and "lab summary" in output
        with pytest.raises(urllib.error.URLError):  # the page ends with the run
            urllib.request.urlopen(url, timeout=5)
    finally:
        if lab.poll() is None:
            lab.send_signal(signal.SIGTERM)  # the lab stops what it started
            try:
                lab.wait(60)
            except subprocess.TimeoutExpired:
                lab.kill()
                lab.wait()


def test_a_coordinator_groups_generation_comes_from_its_members_traces() -> None:
    """A watcher outside the group cannot read a classic group's generation (web/coordinator_source.py); the lab's
    page can: every coordinator-mode trace line carries it, and the newest one seen is the group's."""
    group = LiveGroup("lab", [])
    assert group.take(reading(1000, {"c1": "running"})).group.generation is None  # ZooKeeper mode: none
    done = [{"event": "rebalance_done", "ts": 900, "consumer": "lab_c1", "generation": 3, "owned": []},
            {"event": "rebalance_done", "ts": 950, "consumer": "lab_c2", "generation": 4, "owned": []}]
    assert group.take(reading(2000, {"c1": "running", "c2": "running"}, rebalances=done)).group.generation == 4
    assert group.take(reading(3000, {"c1": "running"})).group.generation == 4  # kept until a newer one
