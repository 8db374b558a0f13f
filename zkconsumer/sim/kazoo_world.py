"""One simulated world for kazoo clients: a scheduler (the seed), tasks, a network and a ZooKeeper server
speaking the wire protocol, wired together, so that a test or the simulator says only what it runs.

    world = KazooWorld(seed=7)
    client = world.client("c1", timeout=10.0)      # an unmodified kazoo KazooClient
    world.run(lambda: (client.start(), client.create("/a"), client.stop()))

:meth:`KazooWorld.run` routes kazoo's module-level time and random to the world for its duration
(:func:`~zkconsumer.sim.kazoo_handler.kazoo_routed`), and installs the world's implementation of the consumer's
runtime seam (:mod:`zkconsumer.runtime`, :mod:`.runtime_impl`): one simulation per process at a time.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient

from zkconsumer.sim import runtime_impl
from zkconsumer.sim.cpu import Cores, Machine
from zkconsumer.sim.kazoo_handler import SimHandler, kazoo_routed
from zkconsumer.sim.network import Address, Network
from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.tasks import Runtime
from zkconsumer.sim.zk_service import INSTANT, ServiceTimes
from zkconsumer.sim.zk_wire import WireServer
from zkconsumer.sim.zookeeper import ServerConfig, ZooKeeperModel


class KazooWorld:
    """Scheduler, runtime, network, ZooKeeper model and its wire server for one seed.

    Four independent streams of randomness come from the seed, so that a draw added to one does not reshuffle
    the others: the scheduler's (the order of simultaneous events), the model's (hash-set orders), kazoo's (its
    jitter, backoff and host shuffle), the consumer's (what it draws through the runtime seam)."""

    def __init__(self, seed: int | None = 0, config: ServerConfig | None = None,
                 address: Address | Sequence[Address] = ("127.0.0.1", 2181), service: ServiceTimes = INSTANT,
                 machine: Machine | None = None) -> None:
        self.seed = seed
        self.scheduler = Scheduler(seed)
        self.runtime = Runtime(self.scheduler)
        self.clock = self.runtime.clock
        self.network = Network(self.runtime)
        #: the machine's cores (None: CPU is free): the server's service and the hosts given a cost take them
        self.machine = machine
        self.cores = None if machine is None else Cores(machine.cores)
        self.network.cores = self.cores
        model_rng = random.Random(f"zookeeper-{seed}") if seed is not None else None
        self.model = ZooKeeperModel(lambda: self.scheduler.now_ms, config or ServerConfig(), model_rng)
        self.server = WireServer(self.model, self.network, address, service, self.cores)
        self.address = self.server.address
        #: the connect string of every server (one, or an ensemble's)
        self.hosts = ",".join(f"{host}:{port}" for host, port in self.server.addresses)
        self.kazoo_rng = random.Random(f"kazoo-{seed}")
        self.consumer_rng = random.Random(f"consumer-{seed}")

    def client(self, host: str, timeout: float = 10.0, **kwargs: Any) -> KazooClient:
        """A real ``KazooClient`` on host ``host`` of the simulated network (``timeout``: the session timeout it
        asks for, seconds)."""
        handler = SimHandler(self.runtime, self.network, host)
        return KazooClient(hosts=self.hosts, handler=handler, timeout=timeout, **kwargs)

    def run(self, main: Callable[..., Any], *args: Any, limit_ms: int | None = None, **kwargs: Any) -> Any:
        """Run ``main`` as the simulation's main task until it returns (see :meth:`Runtime.run`)."""
        with kazoo_routed(self.clock, self.kazoo_rng), runtime_impl.installed(self.runtime, self.consumer_rng):
            return self.runtime.run(main, *args, limit_ms=limit_ms, **kwargs)

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` of virtual time pass in the calling task: a scenario's own timeline (a partition's span,
        an idle hour), which returns at once in wall time; not a wait for something to happen."""
        self.runtime.sleep(seconds)

    def close(self) -> None:
        """End the tasks still parked (a client never stopped), kazoo routed meanwhile: their unwinding may read
        the time."""
        with kazoo_routed(self.clock, self.kazoo_rng), runtime_impl.installed(self.runtime, self.consumer_rng):
            self.runtime.close()
