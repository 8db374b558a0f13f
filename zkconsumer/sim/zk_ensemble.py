"""A ZooKeeper ensemble's faults on the simulated server: a node killed or started, the leader's election, the
quorum lost and regained.

The simulated ensemble is one data tree behind several addresses (:class:`~zkconsumer.sim.zk_wire.WireServer`):
what a client sees of an ensemble is which servers accept it and when none serve. ZooKeeper's rules for that:

- a follower's death closes its own clients' connections; they reconnect to another server in their connect
  string, their sessions intact, and nobody else notices;
- the leader's death makes every follower drop its clients and elect a new leader (Fast Leader Election: the
  highest zxid, then the highest server id; with one shared tree every zxid is equal, so the highest id alive);
  no one is served meanwhile;
- fewer than a majority alive: nobody is served, and no session expires (no leader tracks them); when a majority is
  back, they elect a leader, which gives every session in its log a full timeout again.

Timing (docs/simulation.md): a killed server comes back :data:`NODE_START_MS` after it is started (its JVM), and an
election takes :data:`ELECTION_MS`. The servers' ids are 1..N, as the lab numbers them (zk/server.py).
"""

from __future__ import annotations

from zkconsumer.errors import IllegalArgument
from zkconsumer.scenario.model import FOLLOWER, LEADER
from zkconsumer.sim import tasks
from zkconsumer.sim.zk_wire import WireServer

#: from a server's start until it serves (its JVM, loading its snapshot, joining): 1,450–1,777 ms, p50 1,614, on
#: the lab's real ensemble (benchmarks/zk_service_time.py, 2026-11-28)
NODE_START_MS = 1600
#: a leader election, from the leader's death to the survivors serving: 371–386 ms, p50 384, measured the same way
#: (FLE's 200 ms finalize wait, then the followers' sync)
ELECTION_MS = 380


class SimEnsemble:
    """The servers of :class:`WireServer` ``server`` as an ensemble: which are up, which leads."""

    def __init__(self, server: WireServer) -> None:
        self.server = server
        self.size = len(server.addresses)
        self.up: list[int] = list(range(1, self.size + 1))
        self.leader: int | None = self.size

    @property
    def has_quorum(self) -> bool:
        return len(self.up) > self.size // 2

    def resolve(self, node: int | str | None) -> int:
        """A step's ``node``: a server id, ``leader`` or ``follower`` (the lowest id that is not the leader)."""
        if node == LEADER and self.leader is not None:
            return self.leader
        if node == FOLLOWER:
            followers = [n for n in self.up if n != self.leader]
            if followers:
                return min(followers)
        if isinstance(node, int) and 1 <= node <= self.size:
            return node
        raise IllegalArgument(f"no ZooKeeper node {node!r} to act on (up: {self.up}, leader: {self.leader})")

    def kill(self, node: int) -> None:
        """kill -9 of server ``node``: its clients move; the leader's death costs everyone an election; without a
        majority nobody is served. Runs in a task (an election takes time)."""
        if node not in self.up:
            return
        self.up.remove(node)
        self.server.kill_node(node - 1)
        if not self.has_quorum:
            self.leader = None
            self.server.stop_serving()
        elif node == self.leader:
            self._elect()

    def start(self, nodes: list[int]) -> None:
        """Servers ``nodes`` started together: each joins after its start; a majority regained elects a leader."""
        nodes = [n for n in nodes if n not in self.up]
        if not nodes:
            return
        tasks.sleep(NODE_START_MS / 1000.0)
        had_quorum = self.has_quorum
        for node in nodes:
            self.up.append(node)
            self.server.start_node(node - 1)
        if not had_quorum and self.has_quorum:
            self._elect()

    def down(self) -> list[int]:
        return [n for n in range(1, self.size + 1) if n not in self.up]

    def _elect(self) -> None:
        self.leader = None
        self.server.stop_serving()
        tasks.sleep(ELECTION_MS / 1000.0)
        self.leader = max(self.up)
        self.server.resume_serving()
