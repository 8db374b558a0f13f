"""The lab's machine in a simulation (zkconsumer/sim/cpu.py, cpu_fit.py): cores shared by the members' hosts and the
server, the cost of a frame, the fit of the costs to a real run's CPU, and what a machine does to a herd's times."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim.cpu import ClientCost, Cores, Machine
from zkconsumer.sim.cpu_fit import CpuSample, explained, fit_machine, nonnegative_lstsq, reads_and_writes
from zkconsumer.sim.herd import measure
from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_jute import encode_notification, encode_reply
from zkconsumer.sim.zk_service import ServiceTimes


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_cores_serve_first_come_and_a_job_waits_when_all_are_busy() -> None:
    cores = Cores(2)
    assert [cores.admit(100, 0), cores.admit(100, 0), cores.admit(100, 0), cores.admit(50, 250)] == [100, 100, 200, 300]
    assert (cores.jobs, cores.busy_us, cores.waited_us) == (4, 350, 100)
    assert cores.admit(0, 120) == 120 and cores.jobs == 4  # a free job takes no core
    with pytest.raises(IllegalArgument):
        Cores(0)


def test_a_frame_costs_its_kind_and_its_bytes() -> None:
    cost = ClientCost(notification_us=900, reply_us=40, byte_ns=500)
    reply = encode_reply(7, 1, 0)
    notification = encode_notification(4, "/consumers/g/ids")
    assert cost.of(reply) == 40 + len(reply) // 2
    assert cost.of(notification) == 900 + len(notification) // 2
    with pytest.raises(IllegalArgument):
        ClientCost(-1, 0)
    with pytest.raises(IllegalArgument, match="kafka-0.8"):
        Machine(2, {"default": cost}).cost_for("kafka-0.8")


def test_the_fit_recovers_the_costs_that_made_the_samples() -> None:
    truth = {"default": ClientCost(2000, 300, 50), "kafka-0.8": ClientCost(9000, 100, 0)}
    read_us, write_us = 25, 900
    samples = []
    for profile, cost in truth.items():
        for n, replies, kb, reads, writes in [(10, 60, 8, 45, 12), (50, 240, 60, 180, 50), (200, 900, 500, 700, 200)]:
            consumers = cost.notification_us * n + cost.reply_us * replies + cost.byte_ns * kb
            samples.append(CpuSample(profile, n, n, replies, kb * 1000, reads, writes, consumers,
                                     read_us * reads + write_us * writes))
    machine = fit_machine(samples, cores=2, source="test")
    assert dict(machine.client) == truth
    # every request holds the server's line for a read's work; a write's rest is its log's, beside the line
    assert machine.server.of(RequestKind.GET_DATA) == machine.server.of(RequestKind.MULTI) == read_us
    assert machine.server.total(RequestKind.MULTI) == write_us and machine.server.total(RequestKind.GET_DATA) == read_us
    assert machine.server.total(RequestKind.CREATE_SESSION) == write_us  # a session's open is logged: a write
    assert explained(machine, samples[0]) == pytest.approx((samples[0].consumers_us, samples[0].server_us))
    # a column that would come out negative is left out rather than fitted below zero
    x = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    assert (nonnegative_lstsq(x, np.array([3.0, 2.0, 1.0])) >= 0).all()
    assert reads_and_writes({"getData": 10, "multi": 2, "ping": 1}) == (11, 2)


def test_a_client_host_reads_a_reply_only_after_its_cpu_has() -> None:
    """One core, a reply costing 5 ms of it: a get takes its round trip and the 5 ms; two hosts asking at once take
    turns on the core."""

    def one_get(hosts: list[str]) -> list[float]:
        machine = Machine(1, server=ServiceTimes(default_us=0))
        world = KazooWorld(seed=1, machine=machine)
        clients = [world.client(h) for h in hosts]
        took: list[float] = []

        def main() -> None:
            for c in clients:
                c.start()
            clients[0].ensure_path("/a")
            for h in hosts:
                world.network.link(h).cost = ClientCost(notification_us=0, reply_us=5000)
            t0 = world.clock.monotonic()
            results = [c.get_async("/a") for c in clients]
            for r in results:
                r.rawlink(lambda _r: took.append(world.clock.monotonic() - t0))
            for r in results:
                r.get()
            for c in clients:
                c.stop()

        world.run(main)
        world.close()
        return sorted(took)

    [alone] = one_get(["h1"])
    assert 0.005 <= alone < 0.010
    first, second = one_get(["h1", "h2"])
    assert second - first >= 0.005 - 1e-6  # the second host waited for the core


def test_a_machine_slows_a_herd_and_changes_none_of_its_requests() -> None:
    free = measure("kafka-0.8", 10, rounds=1)
    machine = Machine(2, {"kafka-0.8": ClientCost(notification_us=5000, reply_us=200)},
                      ServiceTimes(default_us=30))
    busy = measure("kafka-0.8", 10, rounds=1, machine=machine)
    assert busy.per_action() == pytest.approx(free.per_action(), rel=0.05)
    # nine or more members each hearing of the change (5 ms) before they read and claim, on 2 cores: 20 ms at least
    assert busy.converge_ms["join"][0] >= free.converge_ms["join"][0] + 20
    assert busy.converge_ms["crash"][0] >= free.converge_ms["crash"][0] + 20
