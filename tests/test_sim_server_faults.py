"""The simulated ZooKeeper's service time and its ensemble (zkconsumer/sim/zk_service.py, zk_ensemble.py,
zk_wire.py): requests wait in one line and take their kind's time, a write's fsync does not hold the line, replies
keep their order; a follower's death moves only its own clients, the leader's costs everyone an election, a quorum
loss serves nobody and expires nobody, and every session survives all three."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.states import KazooState

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim.kazoo_handler import SimHandler
from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.zk_codes import RequestKind
from zkconsumer.sim.zk_ensemble import SimEnsemble
from zkconsumer.sim.zk_service import INSTANT, ServiceQueue, ServiceTimes
from zkconsumer.sim.zookeeper import ServerConfig
from zkconsumer.zk.registry import new_client

CONFIG = ServerConfig(tick_ms=500, min_session_timeout_ms=1000, max_session_timeout_ms=60_000)
READ, WRITE = RequestKind.GET_DATA, RequestKind.CREATE


def test_requests_wait_in_one_line_and_replies_keep_their_order() -> None:
    q = ServiceQueue(ServiceTimes({READ: 300, WRITE: 200}, delay_us={WRITE: 900}))
    assert q.admit(READ, 10_000) == 10_300  # µs, as the scheduler keeps them
    assert q.admit(READ, 10_000) == 10_600  # it waited 0.3 ms behind the first
    assert q.waited_us == 300
    assert q.admit(WRITE, 10_000) == 11_700  # work until 10.8 ms, then its fsync
    assert q.admit(READ, 10_000) == 11_700  # its work ends at 11.1 ms, but it leaves after the write before it
    assert q.busy_until_us == 11_100  # the fsync did not hold the line
    assert q.admit(READ, 50_000) == 50_300  # an idle server starts at once
    assert q.served == 5


def test_a_herd_of_reads_costs_their_sum_not_a_millisecond_each() -> None:
    q = ServiceQueue(ServiceTimes({READ: 60}))
    done = [q.admit(READ, 0) for _ in range(1000)]
    assert done[-1] == 60_000 and done == sorted(done)


def test_service_times_are_whole_non_negative_microseconds() -> None:
    with pytest.raises(IllegalArgument, match="non-negative whole microseconds"):
        ServiceTimes({READ: -1})
    with pytest.raises(IllegalArgument):
        ServiceTimes({READ: 1.5})  # type: ignore[dict-item]
    assert INSTANT.zero and not ServiceTimes(delay_us={WRITE: 1}).zero
    assert ServiceTimes({READ: 5}, delay_us={READ: 7}).total(READ) == 12


def _get_round_trip(service: ServiceTimes) -> int:
    w = KazooWorld(seed=None, config=CONFIG, service=service)
    client = w.client("c1")

    def main() -> int:
        client.start()
        client.create("/a", b"x")
        t0 = w.scheduler.now_ms
        client.get("/a")
        took = w.scheduler.now_ms - t0
        client.stop()
        return took

    return w.run(main, limit_ms=60_000)


def test_a_slow_server_answers_later_by_its_service_time() -> None:
    instant = _get_round_trip(INSTANT)
    assert _get_round_trip(ServiceTimes({READ: 7_000})) == instant + 7


ENSEMBLE = [("127.0.0.1", 2181), ("127.0.0.1", 2182), ("127.0.0.1", 2183)]


def ensemble_run(seed: int, fault: Callable[[KazooWorld, SimEnsemble, dict[str, KazooClient]], None]) -> dict:
    """Three of the consumer's own clients on a 3-server ensemble, each owning an ephemeral node; ``fault`` runs,
    then 5 s pass. Per client: its states, whether its session and node survived, the server it ended on."""
    w = KazooWorld(seed=seed, config=CONFIG, address=ENSEMBLE)
    ensemble = SimEnsemble(w.server)
    # the consumer's own clients: their reconnect delay is bounded by a third of the session (kazoo's own doubles
    # up to an hour, and would come back after the session the new leader kept for them ran out)
    clients = {f"c{i}": new_client(w.hosts, 4.0, handler=SimHandler(w.runtime, w.network, f"c{i}")) for i in range(3)}
    states: dict[str, list[str]] = {name: [] for name in clients}
    for name, c in clients.items():
        c.add_listener(lambda s, name=name: states[name].append(str(s)))

    def main() -> dict:
        sessions = {}
        for name, c in clients.items():
            c.start()
            c.create(f"/{name}", b"", ephemeral=True)
            sessions[name] = c.client_id
        w.advance(1)
        fault(w, ensemble, clients)
        w.advance(5)
        out = {name: {"states": list(states[name]), "same_session": c.client_id == sessions[name],
                      "node_kept": c.exists(f"/{name}") is not None} for name, c in clients.items()}
        for c in clients.values():
            c.stop()
        return out

    return w.run(main, limit_ms=120_000)


def _on(w: KazooWorld, client: KazooClient) -> int:
    """The server (1-based) a client is connected to."""
    return next(conn.node for conn in w.server._connections if conn.session_id == client.client_id[0]) + 1


CONNECTED, SUSPENDED = str(KazooState.CONNECTED), str(KazooState.SUSPENDED)


def test_a_followers_death_moves_only_its_own_clients() -> None:
    moved: list[str] = []

    def kill_a_follower(w: KazooWorld, ens: SimEnsemble, clients: dict[str, KazooClient]) -> None:
        victim = next(_on(w, c) for c in clients.values() if _on(w, c) != ens.leader)
        moved.extend(name for name, c in clients.items() if _on(w, c) == victim)
        ens.kill(victim)
        w.advance(2)
        assert all(_on(w, c) != victim for c in clients.values())

    out = ensemble_run(4, kill_a_follower)
    assert moved
    for name, o in out.items():
        assert o["same_session"] and o["node_kept"]
        assert o["states"] == ([CONNECTED, SUSPENDED, CONNECTED] if name in moved else [CONNECTED])


def test_the_leaders_death_costs_everyone_an_election_and_no_session() -> None:
    def kill_the_leader(w: KazooWorld, ens: SimEnsemble, _clients: dict[str, KazooClient]) -> None:
        leader = ens.leader
        ens.kill(leader)  # returns after the election
        assert ens.leader == 2 and w.server.serving

    out = ensemble_run(5, kill_the_leader)
    assert all(o == {"states": [CONNECTED, SUSPENDED, CONNECTED], "same_session": True, "node_kept": True}
               for o in out.values())


def test_a_quorum_loss_longer_than_the_session_keeps_every_session() -> None:
    """No leader, no session tracker: nobody expires during the loss, and the new leader gives every session a
    full timeout, so clients that reconnect at once find their sessions and ephemerals (the catalogue's mode k)."""
    def lose_the_quorum(w: KazooWorld, ens: SimEnsemble, clients: dict[str, KazooClient]) -> None:
        ens.kill(2)
        ens.kill(3)
        w.advance(10)  # 2.5 session timeouts without a quorum
        assert not w.server.serving and all(c.state == KazooState.SUSPENDED for c in clients.values())
        ens.start([2, 3])

    out = ensemble_run(6, lose_the_quorum)
    assert all(o == {"states": [CONNECTED, SUSPENDED, CONNECTED], "same_session": True, "node_kept": True}
               for o in out.values())


def test_requests_waiting_in_line_when_the_quorum_goes_are_lost_with_it() -> None:
    w = KazooWorld(seed=None, config=CONFIG, service=ServiceTimes({WRITE: 50_000}))
    client = w.client("c1", timeout=10.0)

    def main() -> tuple[bool, object]:
        client.start()
        pending = client.create_async("/lost", b"")
        w.advance(0.01)  # the create is in line (50 ms of work) when the servers die
        w.server.stop_serving()
        w.advance(1)
        w.server.resume_serving()
        w.advance(5)
        gone = client.exists("/lost") is None
        client.stop()
        return gone, pending.exception

    gone, error = w.run(main, limit_ms=60_000)
    assert gone and isinstance(error, ConnectionLoss)


# ------------------------------------------------------------------------------------ drawn by Hypothesis
class ServiceLine(RuleBasedStateMachine):
    """Requests of any kind arriving at any pace: replies never overtake one another, none is served before its
    work and delay have passed, and the server is never busy longer than the work it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.times = ServiceTimes({READ: 70, WRITE: 300, RequestKind.MULTI: 450}, default_us=40,
                                  delay_us={WRITE: 900, RequestKind.MULTI: 900})
        self.queue = ServiceQueue(self.times)
        self.now_ms = 0
        self.last_done = 0
        self.work_us = 0

    @rule(ms=st.integers(0, 5))
    def time_passes(self, ms: int) -> None:
        self.now_ms += ms

    @rule(kind=st.sampled_from([READ, WRITE, RequestKind.MULTI, RequestKind.PING]))
    def a_request_arrives(self, kind: RequestKind) -> None:
        done = self.queue.admit(kind, self.now_ms * 1000)
        self.work_us += self.times.of(kind)
        assert done >= self.last_done  # in order
        assert done >= self.now_ms * 1000 + self.times.total(kind)  # not before its own time has passed
        self.last_done = done

    @invariant()
    def busy_no_longer_than_the_work(self) -> None:
        assert self.queue.busy_us == self.work_us
        assert self.queue.busy_until_us <= self.now_ms * 1000 + self.work_us


TestServiceLine = ServiceLine.TestCase
TestServiceLine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["kill", "start"]), st.integers(1, 3), st.integers(0, 3000)),
                      min_size=1, max_size=8))
def test_any_sequence_of_server_deaths_serves_exactly_when_a_majority_is_up(steps) -> None:
    """Servers killed and started in any order, at any pace: the ensemble serves exactly when a majority is up
    and no election is under way, a leader is up whenever there is a quorum, and no session expires while nobody
    serves."""
    w = KazooWorld(seed=2, config=CONFIG, address=ENSEMBLE)
    ensemble = SimEnsemble(w.server)
    client = new_client(w.hosts, 4.0, handler=SimHandler(w.runtime, w.network, "c1"))

    def main() -> None:
        client.start()
        session = client.client_id
        for action, node, pause_ms in steps:
            ensemble.kill(node) if action == "kill" else ensemble.start([node])
            assert w.server.serving == ensemble.has_quorum
            # a leader is up while there is a quorum (a server coming back joins as a follower, whatever its id)
            assert (ensemble.leader in ensemble.up) if ensemble.has_quorum else ensemble.leader is None
            assert w.model.is_live(session[0])  # nobody expires: not without a quorum, not across an election
            w.advance(pause_ms / 1000)
        ensemble.start(ensemble.down())
        w.advance(5)
        assert client.client_id == session and client.exists("/") is not None
        client.stop()

    w.run(main, limit_ms=600_000)
