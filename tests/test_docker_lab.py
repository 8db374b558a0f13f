"""``zkconsumer lab --backend docker`` against a real Docker engine started by the test.

The test starts its own dockerd (host networking only: no bridge, no iptables; data root cached in
/var/tmp/zkconsumer-dockerd or $ZKCONSUMER_DOCKER_ROOT), builds the base and zkconsumer images when missing, runs
a short lab — a 3-node ZooKeeper ensemble, the broker and three consumers, each in a container, one of them
killed with SIGKILL and one killed then restarted — and checks the traces the containers wrote: nothing lost,
every partition owned. Every container and the daemon are stopped at the end. It skips (one line) only where
dockerd cannot start: not root, no overlay filesystem or cgroups. A cold run (base image bootstrap and image
build) takes minutes; later runs reuse the cached images.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from rich.console import Console

from zkconsumer.lab.backends import RUN_LABEL, DockerBackend
from zkconsumer.lab.containers.engine import DockerEngine, DockerUnavailable, install_engine, why_not_available
from zkconsumer.lab.containers.images import ensure_image
from zkconsumer.lab.runner import Lab, LabPlan, Step

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def engine() -> Iterator[DockerEngine]:
    install_engine()  # docker.io and debootstrap on a fresh Debian machine (as root)
    reason = why_not_available()
    if reason:
        pytest.skip(f"dockerd cannot start here: {reason}")
    engine = DockerEngine()
    try:
        engine.start()
    except DockerUnavailable as e:
        pytest.skip(f"dockerd cannot start here: {e}")
    try:
        yield engine
    finally:
        engine.stop()
        assert engine.proc.poll() is not None, "dockerd still runs"


@pytest.fixture(scope="module")
def image(engine: DockerEngine) -> str:
    return ensure_image(engine.client, log=lambda text: None)


def test_docker_lab_survives_kill_9_and_restart(engine: DockerEngine, image: str, tmp_path) -> None:
    plan = LabPlan(consumers=2, duration=22, session_timeout_ms=4000, commit_interval_ms=500, rate=100,
                   initial_records=100, topics={"orders": 4, "payments": 2},
                   steps=[Step(2, "join", "c3"), Step(7, "kill", "c2"), Step(12, "kill", "c1"),
                          Step(15, "restart", "c1")])
    backend = DockerBackend(engine.client, image, zookeeper_servers=3)
    out = tmp_path / "run"
    lab = Lab(plan, out, console=Console(file=io.StringIO(), width=200), backend=backend)
    summary = lab.run()

    assert summary["produced"] > plan.initial_records * 2
    assert summary["lost"] == 0, summary
    assert summary["verify_ok"], summary  # Kafka's verify: every partition has an owner node, of a live consumer
    assert summary["malformed_trace_lines"] == 0
    # c2 really crashed (SIGKILL, no shutdown hook); c1 crashed, then its container was started again
    assert backend.exit_codes["c2"] == 137
    assert lab.status["c2"] == "killed (-9)" and lab.status["c1"] in ("running", "stopped")
    events = [json.loads(line) for line in (out / "traces" / "lab_c2.jsonl").read_text().splitlines()]
    assert events and not any(e["event"] == "shutdown" for e in events)
    c1 = [json.loads(line)["event"] for line in (out / "traces" / "lab_c1.jsonl").read_text().splitlines()]
    assert c1.count("rebalance_done") >= 2 and c1[-1] == "shutdown"
    # every partition owned: the survivors' last assignments (from their traces) cover them all
    owned = set()
    for name in ("lab_c1", "lab_c3"):
        done = [json.loads(line) for line in (out / "traces" / f"{name}.jsonl").read_text().splitlines()
                if '"rebalance_done"' in line]
        owned |= set(done[-1]["owned"])
    assert owned == {f"{t}-{p}" for t, n in plan.topics.items() for p in range(n)}
    # ZooKeeper ran as an ensemble, in the containers (their logs were collected into the run directory)
    roles = [(out / "logs" / f"zk{i}.log").read_text(errors="replace") for i in (1, 2, 3)]
    assert sum("LEADING" in log for log in roles) >= 1 and sum("FOLLOWING" in log for log in roles) >= 1
    assert not engine.client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={backend.run_id}"})
