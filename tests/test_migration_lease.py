"""One migration driver at a time, a rollback that takes over, and members that may not join mid-migration.

Real ZooKeeper; the drivers are :class:`MigrationDriver` objects (the lease logic) or ``zkconsumer`` processes
(what a user runs). Whole migrations under these faults run in the fault matrix (tests/test_migration_faults.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from zkconsumer.migration.lease import DriverLease, LeaseError, Superseded, lease_path
from zkconsumer.migration.plan import MigrationPhase, MigrationPlan, plan_path, refusal
from zkconsumer.trace import TraceWriter
from zkconsumer.types import GroupMode
from zkconsumer.zk.registry import Registry, connect


def test_the_plan_keeps_the_topics_it_started_with() -> None:
    plan = MigrationPlan({"g_a": GroupMode.COORDINATOR}, MigrationPhase.MIXED, None, ("orders", "payments"))
    assert MigrationPlan.decode("/p", plan.encode()) == plan
    assert plan.with_member("g_b", GroupMode.COORDINATOR).topics == ("orders", "payments")
    assert b"topics" not in MigrationPlan().encode()  # a plan without them reads as before


@pytest.mark.parametrize(("plan", "mode", "refused"), [
    (MigrationPlan(), GroupMode.ZOOKEEPER, False),
    (MigrationPlan({"g_a": GroupMode.ZOOKEEPER}), GroupMode.ZOOKEEPER, False),  # rolled back: a 0.8 group again
    (MigrationPlan({"g_a": GroupMode.COORDINATOR}), GroupMode.ZOOKEEPER, True),
    (MigrationPlan({"g_a": GroupMode.COORDINATOR}), GroupMode.COORDINATOR, True),
    (MigrationPlan({"g_a": GroupMode.COORDINATOR}, MigrationPhase.DONE), GroupMode.ZOOKEEPER, True),
    # the group is the coordinator's now
    (MigrationPlan({"g_a": GroupMode.COORDINATOR}, MigrationPhase.DONE), GroupMode.COORDINATOR, False),
])
def test_who_may_join_without_migratable(plan: MigrationPlan, mode: str, refused: bool) -> None:
    reason = refusal(plan, "g", mode)
    assert (reason is not None) == refused
    if reason:
        assert "--migratable" in reason and "--rollback" in reason


def test_a_second_forward_driver_is_refused_and_a_rollback_takes_over(zk_connect: str, registry: Registry) -> None:
    registry.zk.ensure_path(plan_path("g"))
    forward = DriverLease(registry, "g", GroupMode.COORDINATOR, wait_s=0.5)
    forward.acquire()
    forward.write(plan_path("g"), MigrationPlan({"g_a": GroupMode.COORDINATOR}).encode())
    other = connect(zk_connect)
    try:
        with pytest.raises(LeaseError, match="another `zkconsumer migrate` holds group g"):
            DriverLease(Registry(other), "g", GroupMode.COORDINATOR, wait_s=0.5).acquire()
        rollback = DriverLease(Registry(other), "g", GroupMode.ZOOKEEPER, wait_s=0.5)
        rollback.acquire()
        assert rollback.took_over is not None and rollback.took_over["direction"] == GroupMode.COORDINATOR
        rollback.write(plan_path("g"), MigrationPlan({"g_a": GroupMode.ZOOKEEPER}).encode())
        with pytest.raises(Superseded, match="taken over"):
            forward.check()
        with pytest.raises(Superseded):  # nor can it write the plan again
            forward.write(plan_path("g"),
                          MigrationPlan({"g_a": GroupMode.COORDINATOR, "g_b": GroupMode.COORDINATOR}).encode())
        assert MigrationPlan.decode("/p", registry.read(plan_path("g"))).members == {"g_a": GroupMode.ZOOKEEPER}
        rollback.release()
        assert registry.zk.exists(lease_path("g")) is None
    finally:
        other.stop()
        other.close()


def test_the_lease_of_a_killed_driver_is_taken_over_at_once(zk_connect: str, registry: Registry) -> None:
    """A driver killed with SIGKILL leaves its ephemeral lease for a session timeout; run again on the same host,
    migrate sees that its holder's process is dead and goes on at once (it resumes)."""
    code = ("import sys; from zkconsumer.zk.registry import Registry, connect;"
            "from zkconsumer.migration.lease import DriverLease;"
            "zk = connect(sys.argv[1], session_timeout_ms=30000);"
            "DriverLease(Registry(zk), 'g', 'coordinator').acquire(); print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, zk_connect], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        proc.kill()
        proc.wait()
        assert registry.zk.exists(lease_path("g")) is not None  # its session lives on for 30 s
        lease = DriverLease(registry, "g", GroupMode.COORDINATOR, wait_s=1.0)
        lease.acquire()
        assert lease.took_over is not None and lease.took_over["pid"] == proc.pid
        lease.release()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_consume_without_migratable_is_refused_mid_migration(zk_connect: str, registry: Registry) -> None:
    registry.zk.ensure_path(plan_path("g"))
    registry.zk.set(plan_path("g"), MigrationPlan({"g_a": GroupMode.COORDINATOR}).encode())
    out = subprocess.run([sys.executable, "-m", "zkconsumer", "consume", "--zookeeper", zk_connect, "--group", "g",
                          "--topic", "t", "--bootstrap-server", "127.0.0.1:1"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "group g is being migrated (1 member(s) in coordinator mode: g_a)" in out.stderr
    assert "without --migratable" in out.stderr
    assert registry.children("/consumers/g/ids") == []  # it never registered


def test_a_member_started_again_continues_its_trace_sequence(tmp_path) -> None:
    """A member restarted under its consumer id appends to its trace: its events sort after the earlier life's
    (the analysis orders a consumer's events by seq), also after a torn last line left by ``kill -9``."""
    first = TraceWriter(tmp_path, "g", "g_c1")
    first.emit("registered")
    first.emit("shutdown")
    first._file.write('{"v":1,"ts":1,"event":"rec')  # killed mid-line; its file is never closed properly
    first._file.flush()
    TraceWriter._last_seq.clear()  # a new process knows nothing of the first
    again = TraceWriter(tmp_path, "g", "g_c1")
    again.emit("registered")
    again.close()
    lines = (tmp_path / "g_c1.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1])["seq"] == 3
