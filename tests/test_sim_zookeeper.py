"""The simulator's foundation alone (docs/simulation.md): the deterministic scheduler, and the ZooKeeper 3.4 model
rule by rule. No server here; tests/test_sim_zookeeper_agreement.py holds the model against a real one."""

from __future__ import annotations

import time

import pytest

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim.scheduler import Clock, Scheduler
from zkconsumer.sim.zk_codes import CreateMode, EventType, RequestKind, ZkCode
from zkconsumer.sim.zk_tree import WatchEvent
from zkconsumer.sim.zookeeper import (
    CheckOp,
    CreateOp,
    DeleteOp,
    Expiry,
    ServerConfig,
    SetDataOp,
    ZooKeeperModel,
    run_session_tracker,
)

# ----------------------------------------------------------------------------------------------- scheduler


def _order(seed: int | None, lanes: bool = False) -> list[int]:
    sched = Scheduler(seed)
    out: list[int] = []
    for i in range(8):
        sched.call_at(10, lambda i=i: out.append(i), lane=("l", i % 2) if lanes else None)
    sched.run()
    return out


def test_same_seed_same_order_and_different_seeds_differ_on_ties() -> None:
    assert _order(7) == _order(7)
    assert len({tuple(_order(seed)) for seed in range(20)}) > 1


def test_no_seed_is_fifo_and_time_orders_before_ties() -> None:
    assert _order(None) == list(range(8))
    sched = Scheduler(3)
    out: list[str] = []
    sched.call_at(20, lambda: out.append("late"))
    sched.call_at(5, lambda: out.append("early"))
    sched.run()
    assert out == ["early", "late"]


def test_a_lane_keeps_its_order_whatever_the_seed() -> None:
    for seed in range(10):
        out = _order(seed, lanes=True)
        assert [i for i in out if i % 2 == 0] == [0, 2, 4, 6]
        assert [i for i in out if i % 2 == 1] == [1, 3, 5, 7]


def test_cancel_run_until_and_call_later() -> None:
    sched = Scheduler(1)
    clock = Clock(sched, epoch_ms=1_000_000)
    out: list[int] = []
    cancelled = sched.call_later(5, lambda: out.append(-1))
    sched.call_later(5, lambda: sched.call_later(0, lambda: out.append(clock.now_ms())))
    sched.call_later(50, lambda: out.append(50))
    sched.cancel(cancelled)
    sched.run_until(20)
    assert out == [5] and clock.now_ms() == 20 and clock.monotonic() == 0.02 and clock.time() == 1000.02
    sched.run()
    assert out == [5, 50]
    with pytest.raises(IllegalArgument):
        sched.call_at(10, lambda: None)  # the past
    with pytest.raises(IllegalArgument):
        sched.call_later(1.5, lambda: None)  # type: ignore[arg-type]


def test_microseconds_for_the_network_and_whole_milliseconds_for_the_consumer() -> None:
    """The clock keeps microseconds (a hop over the loopback is a few hundred); a millisecond call means that
    millisecond, and the one running now means now, whatever part of it has passed."""
    sched = Scheduler(None)
    clock = Clock(sched, epoch_ms=1_000_000)
    out: list[tuple[str, int]] = []
    sched.call_later_us(250, lambda: out.append(("hop", sched.now_us)))
    sched.call_later_us(999, lambda: out.append(("hop", sched.now_us)))
    sched.call_at(1, lambda: out.append(("ms", sched.now_us)))
    sched.run_until(0)
    assert out == [] and sched.now_us == 0
    sched.step()
    assert out == [("hop", 250)] and sched.now_ms == 0 and clock.now_ms() == 0 and clock.monotonic() == 0.00025
    assert clock.time() == 1000.00025
    sched.call_at(0, lambda: out.append(("this ms", sched.now_us)))  # the current millisecond: now, not 0 µs
    sched.call_later(1, lambda: out.append(("1 ms later", sched.now_us)))  # from now, to the microsecond
    sched.run()
    assert out[1:] == [("this ms", 250), ("hop", 999), ("ms", 1000), ("1 ms later", 1250)]
    with pytest.raises(IllegalArgument, match="before now"):
        sched.call_at_us(1249, lambda: None)
    with pytest.raises(IllegalArgument, match="whole number of microseconds"):
        sched.call_later_us(0.5, lambda: None)  # type: ignore[arg-type]


def test_an_hour_of_virtual_time_takes_no_wall_time() -> None:
    sched = Scheduler(42)
    ticks: list[int] = []

    def every_second() -> None:
        ticks.append(sched.now_ms)
        sched.call_later(1000, every_second)

    sched.call_later(0, every_second)
    started = time.monotonic()
    sched.run_until(3_600_000)
    assert time.monotonic() - started < 1.0
    assert len(ticks) == 3601 and sched.now_ms == 3_600_000


# ----------------------------------------------------------------------------------------------- the model


@pytest.fixture
def world() -> tuple[Scheduler, ZooKeeperModel]:
    sched = Scheduler(0)
    model = ZooKeeperModel(Clock(sched).now_ms, ServerConfig(tick_ms=500), system_nodes=False)
    return sched, model


def _session(model: ZooKeeperModel, timeout_ms: int = 4000) -> int:
    return model.create_session(timeout_ms).value[0]


def test_create_modes_and_their_errors(world) -> None:
    _, zk = world
    s = _session(zk)
    assert zk.create(s, "/a", b"x").value == "/a"
    assert zk.create(s, "/a").code is ZkCode.NODE_EXISTS
    assert zk.create(s, "/missing/b").code is ZkCode.NO_NODE
    assert zk.create(s, "/e", mode=CreateMode.EPHEMERAL).ok
    assert zk.create(s, "/e/child").code is ZkCode.NO_CHILDREN_FOR_EPHEMERALS
    assert zk.create(s, "/a/s", mode=CreateMode.PERSISTENT_SEQUENTIAL).value == "/a/s0000000000"
    assert zk.create(s, "/a/q", mode=CreateMode.EPHEMERAL_SEQUENTIAL).value == "/a/q0000000001"
    assert zk.exists(s, "/a/q0000000001").value.ephemeral_owner == s
    assert zk.create(s, "/bad/").code is ZkCode.BAD_ARGUMENTS


def test_cversion_counts_creates_and_deletes_but_the_suffix_counts_creates(world) -> None:
    _, zk = world
    s = _session(zk)
    zk.create(s, "/p")
    zk.create(s, "/p/a")
    zk.delete(s, "/p/a")
    stat = zk.exists(s, "/p").value
    assert (stat.cversion, stat.num_children) == (2, 0)
    assert zk.create(s, "/p/s", mode=CreateMode.PERSISTENT_SEQUENTIAL).value == "/p/s0000000001"
    assert zk.exists(s, "/p").value.cversion == 3


def test_stat_fields_and_zxids(world) -> None:
    _, zk = world
    s = _session(zk)
    created = zk.create(s, "/n", b"abc")
    stat = zk.exists(s, "/n").value
    assert (stat.czxid, stat.mzxid, stat.pzxid, stat.version, stat.data_length) == (created.zxid,) * 3 + (0, 3)
    failed = zk.create(s, "/n")
    assert failed.zxid == created.zxid + 1  # a failed write takes a zxid too
    changed = zk.set_data(s, "/n", b"zz")
    assert changed.value.version == 1 and changed.value.mzxid == changed.zxid == failed.zxid + 1
    child = zk.create(s, "/n/c")
    assert zk.exists(s, "/n").value.pzxid == child.zxid
    assert zk.get_data(s, "/n").zxid == child.zxid  # a read takes none


def test_delete_and_set_with_versions(world) -> None:
    _, zk = world
    s = _session(zk)
    zk.create(s, "/d")
    zk.create(s, "/d/c")
    assert zk.delete(s, "/d").code is ZkCode.NOT_EMPTY
    assert zk.delete(s, "/nope").code is ZkCode.NO_NODE
    assert zk.set_data(s, "/nope", b"").code is ZkCode.NO_NODE
    assert zk.set_data(s, "/d/c", b"1", version=3).code is ZkCode.BAD_VERSION
    assert zk.set_data(s, "/d/c", b"1", version=0).value.version == 1
    assert zk.delete(s, "/d/c", version=0).code is ZkCode.BAD_VERSION
    assert zk.delete(s, "/d/c", version=1).ok and zk.delete(s, "/d").ok


def test_watches_are_one_shot_and_typed(world) -> None:
    _, zk = world
    a, b = _session(zk), _session(zk)
    assert zk.exists(b, "/w", watch=True).code is ZkCode.NO_NODE  # the watch stays on a missing node
    assert zk.get_data(b, "/x", watch=True).code is ZkCode.NO_NODE  # ... not this one
    zk.get_children(b, "/", watch=True)
    created = zk.create(a, "/w")
    assert created.events == (WatchEvent(b, EventType.NODE_CREATED, "/w"),
                              WatchEvent(b, EventType.NODE_CHILDREN_CHANGED, "/"))
    assert zk.create(a, "/x").events == ()  # both fired once already, and getData left none
    zk.get_data(b, "/w", watch=True)
    zk.get_data(b, "/w", watch=True)  # a set: one notification
    assert zk.set_data(a, "/w", b"1").events == (WatchEvent(b, EventType.NODE_DATA_CHANGED, "/w"),)
    zk.get_data(b, "/w", watch=True)
    zk.get_children(b, "/w", watch=True)
    zk.get_children(a, "/", watch=True)
    deleted = zk.delete(a, "/w")
    assert deleted.events == (WatchEvent(b, EventType.NODE_DELETED, "/w"),
                              WatchEvent(a, EventType.NODE_CHILDREN_CHANGED, "/"))


def test_multi_is_all_or_nothing(world) -> None:
    _, zk = world
    a, b = _session(zk), _session(zk)
    zk.create(a, "/m")
    zk.exists(b, "/m/x", watch=True)
    before = zk.zxid
    failed = zk.multi(a, [CreateOp("/m/x"), SetDataOp("/m", b"v"), CheckOp("/m", 5), DeleteOp("/m")])
    assert failed.code is ZkCode.BAD_VERSION and failed.events == () and failed.zxid == before + 1
    assert [r.code for r in failed.value] == [ZkCode.OK, ZkCode.OK, ZkCode.BAD_VERSION,
                                              ZkCode.RUNTIME_INCONSISTENCY]
    assert zk.exists(a, "/m/x").code is ZkCode.NO_NODE and zk.get_data(a, "/m").value[0] == b""
    assert zk.exists(a, "/m").value.cversion == 0
    done = zk.multi(a, [CheckOp("/m", 0), CreateOp("/m/x"), CreateOp("/m/x/y"), SetDataOp("/m", b"v", 0)])
    assert done.ok and [r.path for r in done.value][1:3] == ["/m/x", "/m/x/y"]
    assert done.value[3].stat.version == 1
    assert done.events == (WatchEvent(b, EventType.NODE_CREATED, "/m/x"),)
    assert zk.requests[RequestKind.MULTI] == 2


def _expiry_world(tick: int = 500) -> tuple[Scheduler, ZooKeeperModel, list[Expiry]]:
    sched = Scheduler(1)
    model = ZooKeeperModel(Clock(sched).now_ms, ServerConfig(tick_ms=tick), system_nodes=False)
    expired: list[Expiry] = []
    run_session_tracker(sched, model, expired.append)
    return sched, model, expired


def test_negotiated_timeout_is_clamped() -> None:
    zk = ZooKeeperModel(lambda: 0, ServerConfig(tick_ms=2000))
    assert [zk.create_session(t).value[1] for t in (100, 6000, 90_000)] == [4000, 6000, 40_000]
    custom = ZooKeeperModel(lambda: 0, ServerConfig(tick_ms=500, min_session_timeout_ms=1000,
                                                    max_session_timeout_ms=60_000))
    assert custom.create_session(90_000).value[1] == 60_000


def test_session_expires_in_the_tick_after_its_timeout() -> None:
    sched, zk, expired = _expiry_world(tick=500)
    sched.run_until(130)
    s = _session(zk, 2000)  # touched at 130: 2130 rounds up to 2500
    watcher = _session(zk, 20_000)
    zk.create(s, "/e", mode=CreateMode.EPHEMERAL)
    zk.get_children(s, "/", watch=True)  # its own watches go with it
    zk.exists(watcher, "/e", watch=True)
    sched.run_until(2499)
    assert expired == [] and zk.is_live(s)
    sched.run_until(2500)
    assert [e.session_id for e in expired] == [s]
    assert expired[0].events == (WatchEvent(watcher, EventType.NODE_DELETED, "/e"),)
    assert zk.exists(watcher, "/e").code is ZkCode.NO_NODE
    assert zk.create(s, "/again").code is ZkCode.SESSION_EXPIRED


def test_any_request_or_ping_moves_the_deadline() -> None:
    sched, zk, expired = _expiry_world(tick=500)
    s = _session(zk, 2000)  # due at 2500
    sched.run_until(1999)
    zk.ping(s)  # 1999 + 2000 = 3999 → 4000
    sched.run_until(3999)
    zk.exists(s, "/")  # → 6000
    sched.run_until(5999)
    assert expired == []
    sched.run_until(6000)
    assert [e.session_id for e in expired] == [s]


def test_close_session_deletes_ephemerals_at_one_zxid() -> None:
    _, zk, _ = _expiry_world()
    a, b = _session(zk), _session(zk)
    zk.create(a, "/x", mode=CreateMode.EPHEMERAL)
    zk.create(a, "/y", mode=CreateMode.EPHEMERAL)
    zk.get_children(b, "/", watch=True)
    closed = zk.close_session(a)
    assert closed.ok and closed.events == (WatchEvent(b, EventType.NODE_CHILDREN_CHANGED, "/"),)
    assert zk.get_children(b, "/").value[0] == [] and zk.exists(b, "/").value.pzxid == closed.zxid
    assert zk.close_session(a).code is ZkCode.SESSION_EXPIRED


def test_set_watches_after_a_reconnect() -> None:
    zk = ZooKeeperModel(lambda: 0, system_nodes=False)
    a, b = _session(zk), _session(zk)
    zk.create(a, "/k")
    seen = zk.zxid
    zk.create(a, "/gone")
    zk.delete(a, "/gone")
    zk.set_data(a, "/k", b"1")
    reply = zk.set_watches(b, seen, data=["/k"], exist=["/new"], child=["/gone"])
    assert reply.events == (WatchEvent(b, EventType.NODE_DATA_CHANGED, "/k"),
                            WatchEvent(b, EventType.NODE_DELETED, "/gone"))
    assert zk.create(a, "/new").events == (WatchEvent(b, EventType.NODE_CREATED, "/new"),)


def test_a_seeded_model_is_deterministic() -> None:
    import random

    def run(seed: int) -> list:
        zk = ZooKeeperModel(lambda: 0, rng=random.Random(seed), system_nodes=False)
        sessions = [_session(zk) for _ in range(4)]
        for s in sessions:
            zk.get_children(s, "/", watch=True)
        zk.create(sessions[0], "/c")
        return [zk.create(sessions[0], f"/c/{i}").zxid for i in range(5)] + [
            zk.get_children(sessions[1], "/c").value[0], zk.create(sessions[0], "/z").events]

    assert run(3) == run(3)
