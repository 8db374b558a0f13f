"""The simulator running the project's own consumer (zkconsumer/sim/world.py, runs.py, cli/sim.py).

Behaviour tests of the consumer run on real ZooKeeper elsewhere; these check the simulator as a tool: one seed is one
trace (in this process and in others, under any string-hash seed), a shipped scenario's simulated verdict is the
catalogue's, a consumer broken on purpose is caught and its breach shrunk, and what it cannot simulate is refused.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys

import pytest

from zkconsumer.cli import consume
from zkconsumer.lab.runner import Lab
from zkconsumer.records import encode_value
from zkconsumer.scenario import nemesis
from zkconsumer.scenario import reader as scenarios
from zkconsumer.scenario.model import ActionKind, Step
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.sim.broker import value_encoder
from zkconsumer.sim.runs import SimJob, SourceKind, run_seed, shrink
from zkconsumer.sim.world import SimRefused, SimWorld, unsupported


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


GC_PAUSE = SimJob("kafka-0.8", SourceKind.SCENARIO, scenario="gc-pause")


def test_one_seed_one_trace_in_this_process() -> None:
    a, b = run_seed(GC_PAUSE, 4), run_seed(GC_PAUSE, 4)
    assert a.trace_sha256 == b.trace_sha256 and a.trace_lines == b.trace_lines > 1000
    assert run_seed(GC_PAUSE, 5).trace_sha256 != a.trace_sha256  # the seed does choose the interleaving


def _sim_json(*args: str, hash_seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-m", "zkconsumer", "sim", *args, "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_one_seed_one_trace_across_processes_and_hash_seeds() -> None:
    """kazoo keeps its state listeners and watchers in sets of functions, ordered by memory address; the simulator
    makes them insertion-ordered, so another process (a Spark worker) gets the same trace."""
    runs = [_sim_json("--scenario", "gc-pause", "--profile", "kafka-0.8", "--seed", "4", hash_seed=h) for h in "12"]
    assert runs[0]["trace_sha256"] == runs[1]["trace_sha256"] == run_seed(GC_PAUSE, 4).trace_sha256


def test_gc_pause_verdict_is_the_catalogues() -> None:
    """Catalogue mode a (docs/failure-modes.md): Kafka 0.8's profile hands out what it fetched before a pause past
    its session (two live owners, duplicates of committed records); the default profile's lease fences it."""
    faithful = [run_seed(GC_PAUSE, s) for s in range(4)]
    assert all("overlaps" in r.broken and "duplicates_committed" in r.broken for r in faithful)
    fenced = [run_seed(SimJob("default", SourceKind.SCENARIO, scenario="gc-pause"), s) for s in range(4)]
    assert [r.broken for r in fenced] == [[]] * 4


def test_a_consumer_without_its_fence_is_caught_and_shrunk() -> None:
    """The default profile with its session-lease fence turned off (``zkconsumer.profile.disable``, an ablation): the
    simulator must find the pause zombie in some nemesis seed, and shrink the schedule to a pause alone, which still
    breaks."""
    settings = nemesis.NemesisSettings(kinds=(ActionKind.PAUSE, ActionKind.JOIN, ActionKind.STOP), max_actions=3)
    job = SimJob("default", SourceKind.NEMESIS, nemesis=settings,
                 properties=(("zkconsumer.profile.disable", "fence_on_session_lease"),))
    # seeds 56 and 69 of 0-79 breach since the broker's long poll answers at the first record (2026-12-07; 19, 30 and
    # 38 did before): the search starts at the first, not to spend 56 runs finding it (a simulator that changes the
    # interleavings still finds one within 40 seeds from there, or the test says so)
    breaching = next(r for r in (run_seed(job, s) for s in range(56, 96)) if not r.ok)
    assert {"overlaps", "zombie_deliveries"} & set(breaching.broken)
    assert "lost" not in breaching.broken and shrink(job, breaching, keep=frozenset({"lost"})) is None  # not its kind
    small = shrink(job, breaching, budget=30)
    assert small is not None
    kinds = [a.kind for a in small.scenario.actions]
    assert ActionKind.PAUSE in kinds and len(kinds) <= len(job.scenario_for(breaching.seed).actions)
    again = run_seed(job, breaching.seed, scenario=scenarios.loads(small.toml, "shrunk.toml"))
    assert set(small.invariants) & set(again.broken)  # the reproducer, read back from its TOML, still breaks
    fenced = run_seed(SimJob("default", SourceKind.NEMESIS, nemesis=settings), breaching.seed)
    assert fenced.ok, fenced.broken  # with the fence, the same schedule and interleaving hold


#: Where each world puts its own servers and files: the rest of a member's configuration must be the same.
ADDRESSES = ("zookeeper.connect", "bootstrap.servers", "zkconsumer.trace.dir")


@pytest.mark.parametrize(("name", "profile", "properties"), [
    ("churn", "default", ()), ("gc-pause", "kafka-0.8", ()),
    ("session-expiry", "default", (("rebalance.max.retries", "7"), ("heartbeat.interval.ms", "900")))])
def test_a_simulated_member_is_configured_as_the_labs(tmp_path, name: str, profile: str, properties: tuple) -> None:
    """The lab's command line for a member, read by ``zkconsumer consume``'s own parser, and the simulated member's
    ConsumerConfig hold the same properties but the addresses (both built from RunPlan.member_settings): before
    issue 54 the simulated members had no bootstrap.servers and took properties their kind has no counterpart for."""
    plan = RunPlan.from_scenario(scenarios.builtin(name), profile=profile, properties=properties or None)
    real = Lab(plan, tmp_path)
    real.zk_connect, real.bootstrap = "127.0.0.1:2181/lab", "127.0.0.1:9092"  # what its servers' start sets
    argv = real._consumer_args("c2")
    parser = argparse.ArgumentParser()
    consume.register(parser.add_subparsers())
    lab = consume.build_config(parser.parse_args(argv[argv.index("consume"):])).props
    sim = SimWorld(plan, 1).member_config("c2").props
    assert sim["bootstrap.servers"] and lab["bootstrap.servers"]
    assert {k: v for k, v in sim.items() if k not in ADDRESSES} == {k: v for k, v in lab.items() if k not in ADDRESSES}
    assert ("heartbeat.interval.ms" in sim) is False  # a coordinator property: a 0.8 member is not given it


def test_what_cannot_be_simulated_is_refused_by_name() -> None:
    plan = RunPlan.from_scenario(scenarios.builtin("migration"))  # the migration, outside migrate mode
    with pytest.raises(SimRefused,
                       match=r"migrate, rollback and kill-driver steps need mode migrate \(zkconsumer sim --mode"):
        SimWorld(plan, 1)
    plan = RunPlan(steps=[Step(1.0, ActionKind.KILL_COORDINATOR)], consumers=2)
    with pytest.raises(SimRefused, match=r"kill-coordinator at 1 s: no simulated counterpart yet \(a cluster"):
        SimWorld(plan, 1)


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", "0"], "--seeds takes a number of seeds, 1 or more"),
    (["--profile", "kafka-0.9", "--seed", "1"], "unknown profile 'kafka-0.9'"),
    (["--seed", "1", "--seeds", "3"], "not both"),
    (["--scenario", "migration", "--seed", "1"], "need mode migrate (zkconsumer sim --mode migrate"),
    (["--mode", "migrate", "--variant", "coordinator", "--seed", "1"], "leave out --variant"),
    (["--seeds", "3", "--actions", "pause,kill-coordinator"], "no drawing rule yet for kill-coordinator"),
    (["--seeds", "2", "--shrink-keep", "overlaps,nope"], "--shrink-keep: unknown kind nope; one of: commits_backwards"),
])
def test_bad_input_is_one_clear_line(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "zkconsumer", "sim", *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr


def test_many_seeds_in_process_as_json(tmp_path) -> None:
    out = _sim_json("--seeds", "4", "--first-seed", "2", "--in-process", "--actions", "pause,join,stop",
                    "--out", str(tmp_path), "--shrink", "0", hash_seed="0")
    assert out["runs"] == 4 and [s["seed"] for s in out["seeds"]] == [2, 3, 4, 5]
    assert set(out["breaches"]) >= {"lost", "overlaps", "zombie_deliveries", "poll_skips", "nonmonotonic_polls"}
    assert out["schedules_per_minute"] > 0 and all(len(s["trace_sha256"]) == 64 for s in out["seeds"])
    assert json.loads((tmp_path / "results.json").read_text())["runs"] == 4


def test_every_shipped_scenario_it_can_express_runs_and_the_default_profile_holds() -> None:
    """Each action the simulator carries out (joins, stops, kill -9, restarts, bounces, pauses, cut and slowed
    links to ZooKeeper and the broker, expiries, topics created and grown, ZooKeeper's leader, a follower and the
    quorum lost, the broker's process killed) appears in some shipped scenario: each runs to its end with every
    member started, and the default profile holds in it."""
    names = [n for n in scenarios.builtin_names()
             if not unsupported(RunPlan.from_scenario(scenarios.builtin(n)))]
    assert {"gc-pause", "stale-view", "session-expiry", "zk-cut", "broker-cut", "topic-created",
            "partitions-added", "churn", "rolling-restart", "quorum-loss", "zk-leader", "zk-follower",
            "broker-kill"} <= set(names)
    for name in names:
        result = run_seed(SimJob("default", SourceKind.SCENARIO, scenario=name), 1)
        assert (name, result.broken, result.member_errors) == (name, [], {})


def test_the_broker_killed_and_restarted_holds_and_no_profile_rebalances_on_its_return() -> None:
    """Catalogue mode k's broker-kill (docs/failure-modes.md: every ZooKeeper variant holds): the killed broker's
    registration outlives it by its session (6 s), the restarted one registers once it is gone, and the lab's heal
    is that registration. The members have the broker's address (``bootstrap.servers``, as the lab gives it), so
    neither profile watches ``/brokers/ids`` for it and neither rebalances when it registers again: the fetcher
    reconnects to the same address. (Before the simulated members were configured as the lab's, they found the
    broker through ZooKeeper, and the default profile rebalanced on its return.) What was produced while the broker
    was down is delivered after (nothing lost)."""
    plan = RunPlan.from_scenario(scenarios.builtin("broker-kill"))
    for profile, rebalances_on_return in (("default", False), ("kafka-0.8", False)):
        plan.profile = profile
        world = SimWorld(plan, 3)
        out = world.run()
        lab = {line["event"]: line["ts"] - out.started_ms for line in out.lines if line["consumer"] == "lab"
               and line.get("fault") == "kill-broker"}
        assert 8000 <= lab["fault_injected"] < 8100
        assert 3000 < lab["fault_healed"] - lab["fault_injected"] <= 6000 + 500 + 1000  # session, tick, skew
        causes = {str(c) for line in out.lines if line["event"] == "rebalance_triggered"
                  and line["ts"] - out.started_ms >= lab["fault_healed"] for c in [line.get("cause")]}
        assert ("brokers_changed" in causes) is rebalances_on_return, (profile, causes)
        result = run_seed(SimJob(profile, SourceKind.SCENARIO, scenario="broker-kill"), 3)
        assert result.broken == [] and result.member_errors == {}, (profile, result.broken)


@pytest.mark.parametrize(("topic", "partition", "offset"), [("orders", 3, 0), ("pay-ments.x_1", 11, 123456789)])
def test_simulated_records_carry_the_lab_producers_bytes(topic: str, partition: int, offset: int) -> None:
    assert value_encoder(topic, partition)(offset) == encode_value(topic, partition, offset)
