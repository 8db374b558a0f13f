"""An unmodified kazoo ``KazooClient`` on the simulator (issue 39's second piece): simulated tasks, time, network
and ZooKeeper (zkconsumer/sim/kazoo_handler.py, network.py, zk_wire.py), one seed one run. No real sleeps: every
test runs minutes of virtual time in milliseconds of wall time."""

from __future__ import annotations

import dataclasses
import time

import kazoo.protocol.connection
import kazoo.retry
import pytest
from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import KazooState

from zkconsumer.sim.kazoo_world import KazooWorld
from zkconsumer.sim.tasks import SimulationError
from zkconsumer.sim.zookeeper import ServerConfig
from zkconsumer.zk import multiread

#: zkconsumer's own test server's settings (zk/server.py): tickTime 500 ms, sessions of 1 s to 60 s
CONFIG = ServerConfig(tick_ms=500, min_session_timeout_ms=1000, max_session_timeout_ms=60_000)


def world(seed: int | None = 1) -> KazooWorld:
    return KazooWorld(seed=seed, config=CONFIG)


def test_a_client_connects_and_every_basic_request_answers_as_kazoo_expects() -> None:
    w = world()
    client = w.client("c1", timeout=10.0)
    states: list[KazooState] = []
    client.add_listener(states.append)

    def main() -> dict:
        client.start()
        out = {"connected": client.connected, "negotiated": client._session_timeout}
        out["created"] = client.create("/a", b"one")
        out["seq"] = [client.create("/a/n-", sequence=True) for _ in range(2)]
        with pytest.raises(NodeExistsError):
            client.create("/a", b"again")
        data, stat = client.get("/a")
        out["get"] = (data, stat.version, stat.numChildren)
        out["set"] = client.set("/a", b"two", version=0).version
        out["children"] = sorted(client.get_children("/a"))
        out["exists"] = (client.exists("/a") is not None, client.exists("/nope"))
        client.delete("/a/n-0000000000")
        with pytest.raises(NoNodeError):
            client.get("/a/n-0000000000")
        out["ephemeral"] = client.create("/eph", ephemeral=True)
        out["owner"] = client.exists("/eph").ephemeralOwner == client.client_id[0]
        client.stop()
        return out

    out = w.run(main, limit_ms=60_000)
    assert out == {"connected": True, "negotiated": 10_000, "created": "/a",
                   "seq": ["/a/n-0000000000", "/a/n-0000000001"], "get": (b"one", 0, 2), "set": 1,
                   "children": ["n-0000000000", "n-0000000001"], "exists": (True, None), "ephemeral": "/eph",
                   "owner": True}
    assert states == [KazooState.CONNECTED, KazooState.LOST]  # LOST: the client closed its session
    assert "/eph" not in w.model.tree.nodes  # closing the session took its ephemeral


def test_a_transaction_is_all_or_nothing_through_kazoo() -> None:
    w = world()
    client = w.client("c1")

    def main() -> tuple[list, list]:
        client.start()
        client.create("/x")
        tx = client.transaction()
        tx.create("/y", b"1")
        tx.set_data("/x", b"2")
        tx.check("/x", 1)
        good = tx.commit()
        tx = client.transaction()
        tx.create("/z")
        tx.delete("/missing")
        tx.create("/w")
        bad = tx.commit()
        client.stop()
        return good, bad

    good, bad = w.run(main, limit_ms=60_000)
    assert good[0] == "/y" and good[1].version == 1 and good[2] is True
    assert [type(r).__name__ for r in bad] == ["RolledBackError", "NoNodeError", "RuntimeInconsistency"]
    assert isinstance(bad[0], RolledBackError)
    assert "/z" not in w.model.tree.nodes and "/w" not in w.model.tree.nodes


def test_kazoo_recipes_see_data_and_child_watches_in_order() -> None:
    w = world()
    client, other = w.client("c1"), w.client("c2")
    seen: list[tuple] = []

    def main() -> None:
        client.start()
        other.start()
        client.ensure_path("/group")
        client.DataWatch("/config", lambda data, stat: seen.append(("data", data)))
        client.ChildrenWatch("/group", lambda children: seen.append(("children", sorted(children))))
        other.create("/config", b"v1")
        w.runtime.sleep(0.1)
        other.set("/config", b"v2")
        w.runtime.sleep(0.1)
        other.create("/group/m1", ephemeral=True)
        w.runtime.sleep(0.1)
        other.create("/group/m2")
        w.runtime.sleep(0.1)
        other.stop()  # closes its session: m1 goes
        w.runtime.sleep(0.1)
        client.stop()

    w.run(main, limit_ms=60_000)
    assert seen == [("data", None), ("children", []), ("data", b"v1"), ("data", b"v2"), ("children", ["m1"]),
                    ("children", ["m1", "m2"]), ("children", ["m2"])]


def partition_scenario(seed: int, span_s: float) -> tuple[list[tuple], dict]:
    """c1 holds an ephemeral node that c2 watches; c1's host is cut off for ``span_s`` seconds after 20 s of
    idling. The log: state changes and watch events with their virtual times."""
    w = world(seed)
    c1, c2 = w.client("c1", timeout=10.0), w.client("c2", timeout=10.0)
    log: list[tuple] = []

    def now() -> int:
        return w.scheduler.now_ms

    c1.add_listener(lambda state: log.append((now(), "c1", str(state))))
    c2.add_listener(lambda state: log.append((now(), "c2", str(state))))

    def main() -> dict:
        c1.start()
        c2.start()
        c1.create("/owner", ephemeral=True)
        session = c1.client_id[0]
        c2.exists("/owner", watch=lambda ev: log.append((now(), "c2 watch", ev.type, ev.path)))
        # the scenario's timeline in virtual time: 20 s settled, the partition's span, 10 s after the heal
        w.advance(20)
        log.append((now(), "partition c1"))
        w.network.partition("c1")
        w.advance(span_s)
        log.append((now(), "heal c1"))
        w.network.heal("c1")
        w.advance(10)
        out = {"same_session": c1.client_id is not None and c1.client_id[0] == session,
               "ephemeral_kept": c2.exists("/owner") is not None}
        c1.stop()
        c2.stop()
        return out

    return log, w.run(main, limit_ms=600_000)


def _states(log: list[tuple], who: str) -> list[str]:
    return [entry[2] for entry in log if entry[1] == who]


def test_a_partition_shorter_than_the_session_suspends_then_reconnects_to_the_same_session() -> None:
    log, out = partition_scenario(seed=1, span_s=8)
    assert _states(log, "c1") == ["CONNECTED", "SUSPENDED", "CONNECTED", "LOST"]  # the last: its own stop()
    assert out == {"same_session": True, "ephemeral_kept": True}
    suspended = next(t for t, *rest in log if rest == ["c1", "SUSPENDED"])
    healed = next(t for t, *rest in log if rest == ["heal c1"])
    # kazoo gives up on the connection when the ping it sent is not answered by its next ping time
    assert 20_000 < suspended < 20_000 + 2 * 10_000 / 3
    reconnected = [t for t, *rest in log if rest == ["c1", "CONNECTED"]][1]
    assert healed < reconnected < healed + 100  # the pending connect attempt completes at the heal
    watched = [entry for entry in log if entry[1] == "c2 watch"]
    assert watched[0][0] >= healed + 10_000  # the node went only with c1's own stop() at the end


def test_a_partition_longer_than_the_session_suspends_then_loses_it() -> None:
    log, out = partition_scenario(seed=1, span_s=30)
    assert _states(log, "c1") == ["CONNECTED", "SUSPENDED", "LOST", "CONNECTED", "LOST"]
    assert out == {"same_session": False, "ephemeral_kept": False}
    deleted = next(t for t, *rest in log if rest[:1] == ["c2 watch"])
    assert next(e for e in log if e[1] == "c2 watch")[2:] == ("DELETED", "/owner")
    lost = next(t for t, *rest in log if rest == ["c1", "LOST"])
    # the server expired the session (10 s after it last heard from c1, rounded up to its 500 ms tick) while c1
    # was cut off; c1 learns it only at the heal, when its reconnect is refused
    assert 20_000 < deleted < 20_000 + 10_000 + 500 + 50
    assert lost > 50_000


def test_one_seed_gives_one_trace_and_another_seed_another() -> None:
    assert partition_scenario(7, 30) == partition_scenario(7, 30)
    logs = {str(partition_scenario(seed, 30)[0]) for seed in range(4)}
    assert len(logs) > 1  # kazoo's jitter comes from the seed: pings, hence timings, move


def race_scenario(seed: int) -> tuple[str, ...]:
    """Two clients, same delays, each creates a sequential node at the same virtual instant: which request the
    server takes first is a tie the seed breaks."""
    w = world(seed)
    clients = [w.client(f"c{i}") for i in range(2)]
    got: dict[str, str] = {}

    def main() -> tuple[str, ...]:
        for c in clients:
            c.start()
        clients[0].ensure_path("/q")
        w.runtime.sleep(1)
        tasks = [w.runtime.spawn(lambda c=c, i=i: got.__setitem__(f"c{i}", c.create("/q/n-", sequence=True)))
                 for i, c in enumerate(clients)]
        for t in tasks:
            t.join()
        for c in clients:
            c.stop()
        return tuple(sorted(got, key=got.__getitem__))

    return w.run(main, limit_ms=60_000)


def test_ties_are_broken_by_the_seed() -> None:
    orders = [race_scenario(seed) for seed in range(12)]
    assert orders == [race_scenario(seed) for seed in range(12)]  # each seed its own order, every time
    assert set(orders) == {("c0", "c1"), ("c1", "c0")}


def test_ten_idle_minutes_take_milliseconds_and_ping_at_kazoos_interval() -> None:
    """kazoo's connection loop (connection.py, _connect_attempt) pings when nothing was sent for
    ``read_timeout / 2 - jitter``, read_timeout = 2/3 of the negotiated session timeout and jitter a fresh
    ``randint(1, 40) / 100`` s each pass of the loop: with a 10 s session, every 3.333 - U{0.01..0.40} s, on
    average 3.128 s, so 600 s hold about 192 pings (181 to 204 at the extremes)."""
    w = world(3)
    client = w.client("c1", timeout=10.0)

    def main() -> None:
        client.start()
        w.advance(600)  # ten virtual minutes idle: the pings counted are the subject, the wall time the check

    started = time.perf_counter()
    w.run(main, limit_ms=700_000)
    wall = time.perf_counter() - started
    w.close()
    pings = w.model.requests["ping"]
    read_timeout = 10.0 * 2 / 3
    assert 600 / (read_timeout / 2 - 0.01) - 1 <= pings <= 600 / (read_timeout / 2 - 0.40) + 1
    assert abs(pings - 600 / (read_timeout / 2 - 0.205)) < 6
    assert wall < 0.5, wall


def test_kazoo_is_routed_only_while_the_simulation_runs() -> None:
    real_time, real_random = kazoo.protocol.connection.time, kazoo.protocol.connection.random
    w = world()
    seen = {}

    def main() -> None:
        seen["time"] = kazoo.protocol.connection.time.monotonic()
        seen["retry"] = kazoo.retry.random is kazoo.protocol.connection.random

    w.runtime.scheduler.run_until(1234)
    w.run(main)
    assert seen == {"time": 1.234, "retry": True}
    assert kazoo.protocol.connection.time is real_time and kazoo.protocol.connection.random is real_random

    def nested() -> None:
        w.run(lambda: None)

    with pytest.raises(SimulationError):
        world().run(nested)
    assert kazoo.protocol.connection.time is real_time


@pytest.mark.parametrize(("version", "serves"), [("3.4.14", False), ("3.9.5", True)])
def test_multi_read_is_served_from_36_and_the_version_is_asked_over_the_simulated_network(version: str,
                                                                                           serves: bool) -> None:
    """zk/multiread.py asks ``srvr`` through the client's handler (never a real socket in a simulation), and a
    3.6+ server answers ``multiRead`` as one request: data per node, an error result for a missing one."""
    w = KazooWorld(seed=1, config=dataclasses.replace(CONFIG, version=version))
    client = w.client("c1", timeout=10.0)

    def main() -> tuple:
        client.start()
        client.create("/a", b"one")
        client.create("/b", b"two")
        asked = multiread.supports_multi_read(client.hosts, ask=client.handler.four_letter_word)
        before = w.model.requests.copy()
        read = multiread.read_data(client, ["/a", "/missing", "/b"]) if asked else None
        counted = {k.value: n - before[k] for k, n in w.model.requests.items() if n != before[k]}
        client.stop()
        return asked, read, counted

    asked, read, counted = w.run(main, limit_ms=60_000)
    assert asked is serves
    if serves:
        assert read == {"/a": b"one", "/missing": None, "/b": b"two"}
        assert counted == {"multiRead": 1}
