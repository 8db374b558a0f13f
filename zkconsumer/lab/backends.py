"""Where the lab's servers and consumers run: local processes, or Docker containers.

The lab (zkconsumer/lab/runner.py) decides *what* happens — which consumer joins, stops or is killed when, and what the
traces say; a backend decides *where*: it starts ZooKeeper and the broker, runs the consumer command the lab builds
(``Lab._consumer_args``), delivers signals and reports exits. ``ProcessBackend`` is the lab as it always was (a JVM
per ZooKeeper server, the broker in-process, a ``python -m zkconsumer consume`` process per consumer);
``DockerBackend`` runs each of them in a container of the zkconsumer image through the ``docker`` SDK.

Containers use host networking only: ZooKeeper, the broker and the consumers bind to 127.0.0.1, exactly as the
process backend does, so the lab's producer and monitor on the host reach them unchanged. The run directory is
bind-mounted at the same path inside every container, so traces and data land where ``zkconsumer analyze`` and
the lab read them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

from zkconsumer.broker import Broker
from zkconsumer.broker.state import read_state
from zkconsumer.errors import ZkConsumerError
from zkconsumer.scenario.plan import GroupSettings
from zkconsumer.zk.server import ZooKeeperServer, four_letter_word, free_port


class BackendError(ZkConsumerError, RuntimeError):
    """A server or consumer could not be started where the backend runs them; the message says why."""


class LabBackend(ABC):
    """Starts the lab's servers and consumers somewhere; every method is called from the lab's main thread."""

    #: what the backend is called on the command line (``zkconsumer lab --backend NAME``)
    name: str
    #: the argv prefix that runs the zkconsumer CLI where this backend runs consumers
    zkconsumer_command: list[str]

    def open(self, run_dir: Path) -> None:
        """Called once before anything starts: the run directory (traces, logs, data) is ``run_dir``."""
        self.run_dir = run_dir

    @abstractmethod
    def start_zookeeper(self, data_dir: Path) -> str:
        """Start ZooKeeper and return its connect string once it serves clients."""

    @abstractmethod
    def start_broker(self, zk_connect: str, data_dir: Path, group: GroupSettings) -> str:
        """Start the local broker registered in ``zk_connect`` and return its bootstrap address."""

    @abstractmethod
    def start(self, name: str, args: list[str], log: Path) -> None:
        """Start consumer ``name`` running ``args`` (output to ``log``)."""

    @abstractmethod
    def restart(self, name: str) -> None:
        """Start an exited consumer again with the same command (a process, or the same container)."""

    @abstractmethod
    def signal(self, name: str, kill: bool) -> None:
        """SIGTERM (a clean stop) or, with ``kill``, SIGKILL (a crash: no shutdown hook runs)."""

    @abstractmethod
    def freeze(self, name: str, frozen: bool) -> None:
        """Stop the consumer's process where it stands (SIGSTOP: a long garbage-collection pause), or let it go
        on (SIGCONT); nothing of it runs in between, its sockets stay open."""

    @abstractmethod
    def exit_code(self, name: str) -> int | None:
        """The consumer's exit code, or None while it runs."""

    @abstractmethod
    def wait(self, name: str, timeout: float) -> bool:
        """Wait for the consumer to exit; False if it still runs after ``timeout`` seconds."""

    def zookeeper_address(self) -> tuple[str, int] | None:
        """A ZooKeeper server the backend started (for ``mntr``), or None."""
        return None

    def broker_request_counts(self) -> dict[str, int] | None:
        """Requests the broker served, by API, when the backend can see inside it."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Stop and clean up everything this backend started (consumers first, then the broker, ZooKeeper)."""


class ProcessBackend(LabBackend):
    """Consumers as local processes (so ``kill -9`` is real); ZooKeeper as JVMs, the broker in-process."""

    name = "process"
    zkconsumer_command = [sys.executable, "-m", "zkconsumer"]

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self._args: dict[str, tuple[list[str], Path]] = {}
        self._zk_server = None
        self._broker = None

    def start_zookeeper(self, data_dir: Path) -> str:
        self._zk_server = ZooKeeperServer(data_dir=data_dir).start()
        return self._zk_server.connect_string

    def start_broker(self, zk_connect: str, data_dir: Path, group: GroupSettings) -> str:
        self._broker = Broker(zk_connect, data_dir=data_dir,
                              group_initial_rebalance_delay_ms=group.initial_rebalance_delay_ms,
                              group_min_session_timeout_ms=group.min_session_timeout_ms).start()
        return self._broker.bootstrap

    def start(self, name: str, args: list[str], log: Path) -> None:
        self._args[name] = (args, log)
        with open(log, "ab") as out:
            self.procs[name] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def restart(self, name: str) -> None:
        self.start(name, *self._args[name])

    def signal(self, name: str, kill: bool) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)

    def freeze(self, name: str, frozen: bool) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)

    def exit_code(self, name: str) -> int | None:
        return self.procs[name].poll()

    def wait(self, name: str, timeout: float) -> bool:
        try:
            self.procs[name].wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def zookeeper_address(self) -> tuple[str, int] | None:
        if self._zk_server is None:
            return None
        host, _, port = self._zk_server.connect_string.split(",")[0].rpartition(":")
        return host, int(port)

    def broker_request_counts(self) -> dict[str, int] | None:
        return self._broker.request_counts() if self._broker is not None else None

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        if self._zk_server is not None:
            self._zk_server.stop()
            self._zk_server = None


#: Labels on every container a DockerBackend starts: which lab run, which role (zookeeper, broker, consumer).
RUN_LABEL = "org.zkconsumer.lab.runner"
ROLE_LABEL = "org.zkconsumer.role"


class DockerBackend(LabBackend):
    """ZooKeeper (an ensemble by default), the broker and each consumer in its own container, host networking.

    ``client`` is a ``docker.DockerClient``; ``image`` the zkconsumer image (zkconsumer.lab.containers.images builds
    it). Stopping is ``docker kill -s TERM``, a crash ``docker kill -s KILL``: each container runs Docker's init
    as PID 1, which forwards SIGTERM to the command and, killed, takes the whole container down with it.
    """

    name = "docker"
    zkconsumer_command = ["zkconsumer"]  # on PATH in the image

    def __init__(self, client, image: str, zookeeper_servers: int = 3, run_id: str | None = None,
                 start_timeout: float = 90.0) -> None:
        self.client = client
        self.image = image
        self.zookeeper_servers = zookeeper_servers
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.start_timeout = start_timeout
        self.containers: dict[str, object] = {}  # consumers
        self.servers: dict[str, object] = {}  # zk1.., broker
        self._exit: dict[str, int] = {}
        self._logs: dict[str, Path] = {}
        self._zk_address: tuple[str, int] | None = None

    # ---------------------------------------------------------------------------------------- containers
    def _run(self, name: str, role: str, args: list[str]):
        container = self.client.containers.run(
            self.image, entrypoint=args[:1], command=args[1:], name=f"zkconsumer-{self.run_id}-{name}",
            detach=True, network_mode="host", init=True, stdin_open=False,
            volumes={str(self.run_dir): {"bind": str(self.run_dir), "mode": "rw"}},
            environment={"PYTHONUNBUFFERED": "1", "ZKCONSUMER_HOME": str(self.run_dir / "home")},
            labels={RUN_LABEL: self.run_id, ROLE_LABEL: role})
        return container

    def _failed(self, container, what: str) -> BackendError:
        logs = container.logs(tail=25).decode("utf-8", "replace")
        return BackendError(f"{what} (container {container.name}); its log:\n{logs}")

    def _check_running(self, container, what: str) -> None:
        container.reload()
        if container.status in ("exited", "dead"):
            raise self._failed(container, f"{what} exited with code {container.attrs['State']['ExitCode']}")

    # ------------------------------------------------------------------------------------------- servers
    def start_zookeeper(self, data_dir: Path) -> str:
        # ZooKeeperServer only lays out the ensemble here (free loopback ports, zoo.cfg, myid): the JVMs run in
        # the containers, each from its own config on the bind-mounted run directory.
        layout = ZooKeeperServer(servers=self.zookeeper_servers, data_dir=data_dir)
        for node in layout.nodes:
            cfg = layout.write_config(node)
            self.servers[f"zk{node.server_id}"] = self._run(f"zk{node.server_id}", "zookeeper",
                                                            ["zkconsumer", "zk", "run", cfg])
        deadline = time.monotonic() + self.start_timeout
        for node in layout.nodes:
            container = self.servers[f"zk{node.server_id}"]
            while True:
                self._check_running(container, f"ZooKeeper server {node.server_id}")
                with contextlib.suppress(OSError):
                    if "Mode:" in four_letter_word("127.0.0.1", node.client_port, "srvr", 0.5):
                        break
                if time.monotonic() > deadline:
                    raise self._failed(container, f"ZooKeeper server {node.server_id} did not serve within "
                                                  f"{self.start_timeout:.0f}s")
                time.sleep(0.2)
        self._zk_address = ("127.0.0.1", layout.nodes[0].client_port)
        return layout.connect_string

    def start_broker(self, zk_connect: str, data_dir: Path, group: GroupSettings) -> str:
        data_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        container = self._run("broker", "broker", [
            "zkconsumer", "broker", "start", "--zookeeper", zk_connect, "--host", "127.0.0.1", "--port", str(port),
            "--data-dir", str(data_dir),
            "--property", f"group.initial.rebalance.delay.ms={group.initial_rebalance_delay_ms}",
            "--property", f"group.min.session.timeout.ms={group.min_session_timeout_ms}"])
        self.servers["broker"] = container
        deadline = time.monotonic() + self.start_timeout
        while True:  # the broker writes its state file once it is registered in ZooKeeper and serving
            state = read_state(data_dir)
            if state and state.get("port") == port:
                return state["bootstrap"]
            self._check_running(container, "the broker")
            if time.monotonic() > deadline:
                raise self._failed(container, f"the broker did not start within {self.start_timeout:.0f}s")
            time.sleep(0.2)

    def zookeeper_address(self) -> tuple[str, int] | None:
        return self._zk_address

    # ----------------------------------------------------------------------------------------- consumers
    def start(self, name: str, args: list[str], log: Path) -> None:
        self._logs[name] = log
        self.containers[name] = self._run(name, "consumer", args)

    @property
    def exit_codes(self) -> dict[str, int]:
        """Exit codes of the consumers seen exiting (137: SIGKILL), kept after their containers are removed."""
        return dict(self._exit)

    def restart(self, name: str) -> None:
        self._exit.pop(name, None)
        self.containers[name].start()  # the same container, as `docker start` after a crash

    def signal(self, name: str, kill: bool) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):  # already exited
            self.containers[name].kill(signal="SIGKILL" if kill else "SIGTERM")

    def freeze(self, name: str, frozen: bool) -> None:
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):  # already exited
            self.containers[name].kill(signal="SIGSTOP" if frozen else "SIGCONT")

    def exit_code(self, name: str) -> int | None:
        if name in self._exit:
            return self._exit[name]
        container = self.containers[name]
        container.reload()
        if container.status in ("exited", "dead"):
            self._exit[name] = int(container.attrs["State"]["ExitCode"])
            return self._exit[name]
        return None

    def wait(self, name: str, timeout: float) -> bool:
        import requests.exceptions

        try:
            self.containers[name].wait(timeout=timeout)
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            return False
        return self.exit_code(name) is not None

    def close(self) -> None:
        """Stop consumers, the broker, then ZooKeeper; keep each container's log in the run directory; remove
        every container of this run (found by label, so none is left behind even after an error)."""
        import docker.errors

        logs_dir = self.run_dir / "logs"
        logs_dir.mkdir(parents=True, exist_ok=True)
        for group in (self.containers, {k: v for k, v in self.servers.items() if k == "broker"},
                      {k: v for k, v in self.servers.items() if k != "broker"}):
            for name, container in group.items():
                with contextlib.suppress(docker.errors.APIError):
                    container.stop(timeout=10)
                with contextlib.suppress(docker.errors.APIError):
                    (self._logs.get(name) or logs_dir / f"{name}.log").write_bytes(container.logs())
        for container in self.client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={self.run_id}"}):
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
        self.containers.clear()
        self.servers.clear()
