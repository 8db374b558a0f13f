"""``zkconsumer lab --backend docker`` against a real Docker engine started by the test.

The test starts its own dockerd (host networking only: no bridge, no iptables; data root cached in
/var/tmp/zkconsumer-dockerd or $ZKCONSUMER_DOCKER_ROOT), builds the base and zkconsumer images when missing, runs
a short lab — a 3-node ZooKeeper ensemble, the broker and three consumers, each in a container, one of them
killed with SIGKILL and one killed then restarted — and checks the traces the containers wrote: nothing lost,
every partition owned. Every container and the daemon are stopped at the end. It skips (one line) only where
dockerd cannot start: not root, no overlay filesystem or cgroups. A cold run (base image bootstrap and image
build) takes minutes; later runs reuse the cached images.

On the same daemon and image, docker/compose.yaml is brought up as a user would with Debian's docker-compose
(installed with docker.io): the ensemble, the broker, the producer and ``--scale consumer=2``; every record must be
consumed and committed, ``zkconsumer verify`` must pass, and ``down`` must leave no container or network behind.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_until
from rich.console import Console

from zkconsumer.lab.backends import RUN_LABEL, DockerBackend
from zkconsumer.lab.containers.engine import DockerEngine, DockerUnavailable, install_engine, why_not_available
from zkconsumer.lab.containers.images import IMAGE_REPO, SOURCE_ROOT, ensure_image
from zkconsumer.lab.runner import Lab
from zkconsumer.scenario.model import Step
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.zk.registry import Registry

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
    plan = RunPlan(consumers=2, duration=22, session_timeout_ms=4000, commit_interval_ms=500, rate=100,
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
    assert lab.members.status["c2"] == "killed (-9)" and lab.members.status["c1"] in ("running", "stopped")
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


# ------------------------------------------------------------------------------------------ docker/compose.yaml
COMPOSE_FILE = SOURCE_ROOT / "docker" / "compose.yaml"
#: What compose.yaml binds on 127.0.0.1 (fixed, as a user expects): ZooKeeper clients, quorum and election, broker.
COMPOSE_PORTS = (2181, 2182, 2183, 2888, 2889, 2890, 3888, 3889, 3890, 9092)
COMPOSE_ZK = "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183/lab"
PROJECT_LABEL = "com.docker.compose.project"


@pytest.fixture(scope="module")
def docker_compose() -> list[str]:
    """Debian's docker-compose, installed beside docker.io; a skip only where it could not be installed."""
    install_engine()
    exe = shutil.which("docker-compose")
    if exe is None:
        if os.geteuid() == 0 and shutil.which("apt-get"):
            pytest.fail("apt-get install docker-compose did not provide docker-compose")
        pytest.skip("docker-compose is not installed (Debian: apt-get install docker-compose; as root the test does)")
    return [exe]


def test_compose_file_is_valid_for_docker_compose(docker_compose: list[str]) -> None:
    """docker-compose reads the file (no engine needed); startup is ordered by conditions, as a broker answering
    before it is registered fails its clients' requests."""
    out = subprocess.run([*docker_compose, "-f", str(COMPOSE_FILE), "config"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("network_mode: host") >= 7  # every service, anchors expanded
    assert "condition: service_healthy" in out.stdout and "condition: service_completed_successfully" in out.stdout


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _group_settled(records: int) -> dict[tuple[str, int], int] | None:
    """The committed offsets of group `lab` once those of `orders` add up to every record produced and both
    consumers are registered and own partitions (no rebalance half done), else None."""
    with Registry.open(COMPOSE_ZK, create_chroot=False) as reg:
        offsets, owners, ids = reg.offsets("lab"), reg.owners("lab"), reg.consumer_ids("lab")
    orders = {tp: o for tp, o in offsets.items() if tp[0] == "orders"}
    owning = {thread.rsplit("-", 1)[0] for thread in owners.values()}  # thread id: <consumer id>-<n>
    settled = len(owners) == 12 and len(ids) == 2 and owning == set(ids)
    return offsets if settled and len(orders) == 8 and sum(orders.values()) == records else None


def test_compose_file_brings_the_topology_up_and_down(engine: DockerEngine, image: str, docker_compose: list[str],
                                                      tmp_path: Path) -> None:
    """`docker-compose -f docker/compose.yaml up -d --scale consumer=2` on the test's dockerd: every record the
    producer wrote is delivered and committed, `zkconsumer verify` passes, `down` leaves nothing behind."""
    busy = [port for port in COMPOSE_PORTS if _listening(port)]
    assert not busy, f"docker/compose.yaml's fixed loopback ports are taken on this machine: {busy}"
    # compose.yaml runs the `latest` tag: it must be the image of these sources, built by the fixture
    assert engine.client.images.get(f"{IMAGE_REPO}:latest").id == engine.client.images.get(image).id
    records, runs = 400, tmp_path / "runs"
    runs.mkdir()
    project = f"zkctest{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
    env.update(DOCKER_HOST=engine.base_url, ZKCONSUMER_RECORDS=str(records), ZKCONSUMER_RATE="0",
               ZKCONSUMER_RUNS_DIR=str(runs))
    compose = [*docker_compose, "-f", str(COMPOSE_FILE), "-p", project]
    labelled = {"label": f"{PROJECT_LABEL}={project}"}

    def run(*args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run([*compose, *args], env=env, capture_output=True, text=True, timeout=timeout)

    def logs() -> str:
        return run("logs", "--no-color", "--tail", "20", timeout=60).stdout

    def service(name: str):
        found = engine.client.containers.list(
            all=True, filters={"label": [f"{PROJECT_LABEL}={project}", f"com.docker.compose.service={name}"]})
        return sorted(found, key=lambda c: c.name)

    try:
        up = run("up", "-d", "--scale", "consumer=2", timeout=240)
        assert up.returncode == 0, up.stderr + logs()
        assert len(service("consumer")) == 2 and len(service("zk1") + service("zk2") + service("zk3")) == 3

        producer = service("producer")[0]

        def producer_exited() -> bool:
            producer.reload()
            return producer.status == "exited"

        wait_until(producer_exited, timeout=60, interval=0.2, message="the producer to finish")
        state = producer.attrs["State"]
        assert state["ExitCode"] == 0 and producer.attrs["RestartCount"] == 0, logs()
        assert f"{records} records to orders (8 partitions)" in producer.logs().decode(), logs()
        assert f"acknowledged {records}, failed 0" in producer.logs().decode()

        # every record committed: the group's offsets of `orders` reach the producer's count (commits every 1 s),
        # all 12 partitions owned by the two consumers
        offsets = wait_until(lambda: _group_settled(records), timeout=60, interval=0.5,
                             message="both consumers to own the partitions and commit every record")
        assert all(offsets[("orders", p)] == records // 8 for p in range(8))  # round-robin: 50 per partition
        # ... and delivered: the consumers' traces (on the bind mount) hold every offset of every partition
        delivered = set()
        traces = sorted((runs / "traces").glob("*.jsonl"))
        assert len(traces) == 2, traces  # one per consumer, each its own consumer id
        for trace in traces:
            for event in map(json.loads, trace.read_text().splitlines()):
                if event["event"] == "record_delivered" and event["topic"] == "orders":
                    delivered.add((event["partition"], event["offset"]))
        assert delivered == {(p, o) for p in range(8) for o in range(records // 8)}

        # Kafka's VerifyConsumerRebalance, as a user runs it against the compose's ZooKeeper
        verify = subprocess.run([sys.executable, "-m", "zkconsumer", "verify", "--zookeeper", COMPOSE_ZK,
                                 "--group", "lab"], capture_output=True, text=True, timeout=60)
        assert verify.returncode == 0 and "Rebalance operation successful" in verify.stdout, verify.stdout + logs()

        down = run("down", timeout=120)
        assert down.returncode == 0, down.stderr
        assert not engine.client.containers.list(all=True, filters=labelled)
        assert not engine.client.networks.list(filters=labelled)
        for trace in traces:  # down stopped each consumer cleanly (SIGTERM through init): offsets committed
            last = json.loads(trace.read_text().splitlines()[-1])
            assert last["event"] == "shutdown" and last["committed"], last
    finally:
        if engine.client.containers.list(all=True, filters=labelled):
            run("down", "--remove-orphans", "-t", "5", timeout=120)
        for container in engine.client.containers.list(all=True, filters=labelled):
            container.remove(force=True)
        for network in engine.client.networks.list(filters=labelled):
            network.remove()
