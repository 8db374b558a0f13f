"""Coordinator-mode worlds in the simulator (issue 54, item 1): ``zkconsumer sim --variant NAME`` runs the project's
coordinator-mode member (``consumer/coordinated``, kafka-python's group client, unchanged) against the project's
broker (``broker.Broker``: its server, group coordinator and log), with the lab's producer, on simulated time and
network (sim/kafka_io.py, sim/kafka_side.py). One seed is one trace per variant, in this process and another with
another string-hash seed."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from zkconsumer.cli.sim import SIM_VARIANTS, variant_settings
from zkconsumer.sim.runs import SimJob, SourceKind, run_seed

#: A short run: two members, a third joins, the first is killed, the second paused past its session.
SHORT = """
name = "short"
duration = 10
members = 2
rate = 50
session_timeout_ms = 3000

[[actions]]
at = 4
do = "join"
member = "c3"

[[actions]]
at = 6
do = "kill"
member = "c1"

[[actions]]
at = 7
do = "pause"
member = "c2"
seconds = 4
"""
COORDINATOR_VARIANTS = ("coordinator", "cooperative-sticky", "static")


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def job(variant: str, scenario_text: str = SHORT) -> SimJob:
    settings = variant_settings(variant)
    profile = settings.pop("profile")
    return SimJob(profile, SourceKind.SCENARIO, scenario_text=scenario_text, scenario_source="short.toml",
                  **settings)


@pytest.fixture(scope="module")
def runs() -> dict[str, object]:
    logging.disable(logging.WARNING)
    try:
        return {v: run_seed(job(v), 1) for v in COORDINATOR_VARIANTS}
    finally:
        logging.disable(logging.NOTSET)


def test_each_coordinator_variant_runs_the_projects_member_and_broker_and_is_judged(runs) -> None:
    """Every member started, and the run was judged line by line as a 0.8 one is: a join, a kill -9 and a pause past
    the session break no invariant of the coordinator's."""
    for variant, result in runs.items():
        assert (variant, result.member_errors, result.broken) == (variant, {}, [])
        assert result.trace_lines > 500


def test_one_seed_is_one_trace_per_variant_across_processes_and_hash_seeds(runs) -> None:
    """kafka-python's sets of topics and partitions follow the string hash; its event loop breaks ties by memory
    address; the members' commits were emitted in a dict's order: each is routed or sorted, so another process
    with another ``PYTHONHASHSEED`` gets the same trace, variant by variant."""
    code = ("import json, logging, sys; logging.disable(logging.WARNING)\n"
            f"sys.path.insert(0, {os.path.dirname(__file__)!r})\n"
            "from test_sim_coordinator_world import job, COORDINATOR_VARIANTS\n"
            "from zkconsumer.sim.runs import run_seed\n"
            "print(json.dumps({v: run_seed(job(v), 1).trace_sha256 for v in COORDINATOR_VARIANTS}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONHASHSEED": "4242"})
    assert done.returncode == 0, done.stderr[-2000:]
    there = json.loads(done.stdout.strip().splitlines()[-1])
    assert there == {v: r.trace_sha256 for v, r in runs.items()}
    assert len(set(there.values())) == 3  # three variants, three different runs


def test_the_variants_are_compares_and_the_others_are_refused_with_why() -> None:
    assert set(SIM_VARIANTS) >= {"zookeeper-default", "zookeeper-kafka-0.8", *COORDINATOR_VARIANTS}
    settings = variant_settings("cooperative-sticky")
    assert (settings["strategy"], str(settings["mode"])) == ("cooperative-sticky", "coordinator")
    absent = dict(variant_settings("coordinator")["absent"])
    assert "no ZooKeeper session" in absent[next(k for k in absent if str(k) == "expire")]
    done = subprocess.run([sys.executable, "-m", "zkconsumer", "sim", "--variant", "coordinator-kafka-3.9",
                           "--seed", "1"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "not the project's code" in done.stderr and "Traceback" not in done.stderr


def test_routing_kafka_python_is_undone_after_a_run_and_refuses_to_nest() -> None:
    """A simulation owns the process while it runs: after it, every kafka-python module has its real ``time``,
    ``socket``, ``selectors`` and ``threading`` again, and so have the broker's server, the config defaults and the
    producer's sender thread, even when the run failed; routing twice at once is refused."""
    import selectors
    import socket
    import threading
    import time

    import kafka.consumer.group
    import kafka.net.selector
    import kafka.producer.sender

    from zkconsumer import broker_version
    from zkconsumer.broker import server
    from zkconsumer.sim import tasks
    from zkconsumer.sim.kafka_io import KafkaIO, kafka_routed
    from zkconsumer.sim.kazoo_world import KazooWorld

    world = KazooWorld(seed=1)
    io = KafkaIO(world.runtime, world.network, __import__("random").Random(1))
    lt, start = kafka.net.selector.Task.__lt__, kafka.producer.sender.Sender.start
    with pytest.raises(RuntimeError, match="inside"), kafka_routed(io):
        assert kafka.net.selector.time is io.time and server.socket is io.socket
        assert kafka.consumer.group.KafkaConsumer.DEFAULT_CONFIG["selector"] is not selectors.DefaultSelector
        with pytest.raises(tasks.SimulationError, match="already routed"), kafka_routed(io):
            pass
        raise RuntimeError("a run failing inside")
    assert (kafka.net.selector.time, kafka.net.selector.threading, server.socket, server.selectors) == (
        time, threading, socket, selectors)
    assert broker_version.socket is socket  # the version probe is routed too, and given back
    assert kafka.consumer.group.KafkaConsumer.DEFAULT_CONFIG["selector"] is selectors.DefaultSelector
    assert kafka.net.selector.Task.__lt__ is lt and kafka.producer.sender.Sender.start is start
    assert "start" not in vars(kafka.producer.sender.Sender)  # inherited from threading.Thread, as before


GROWN = """
name = "grown"
duration = 9
members = 2
rate = 40
session_timeout_ms = 3000

[topics]
orders = 2

[[actions]]
at = 3
do = "add-partitions"
topic = "orders"
partitions = 4
"""


def test_partitions_added_under_a_coordinator_group_are_produced_to_and_consumed(tmp_path) -> None:
    """The simulated producer is kafka-python's: it refuses a send to a partition its metadata does not list yet, and
    that once killed the world's producer (the catalogue's partitions-added cell). It now refreshes its metadata as the
    lab's does and counts such a send as never made: the added partitions get records and the group reads them."""
    result = run_seed(job("coordinator", GROWN), 1, trace_dir=tmp_path)
    assert (result.member_errors, result.broken) == ({}, [])
    delivered = {json.loads(x)["partition"] for p in tmp_path.glob("lab_c*.jsonl") for x in p.read_text().splitlines()
                 if '"record_delivered"' in x}
    assert delivered == {0, 1, 2, 3}
