"""Real ZooKeeper servers, started by the project: standalone or a 3-node ensemble on loopback.

Why not ``kazoo.testing.ManagedZooKeeper`` as is: it always configures TLS (generating keystores through
pyOpenSSL and pyjks), the Netty connection factory and SASL, and keeps the JVM attached to the Python process,
while ``zkconsumer zk start`` must leave a plain server running in the background. We keep its conventions
(``ZOOKEEPER_CLASSPATH``, ``ZOOKEEPER_PATH`` and its jar layout) and its approach (``QuorumPeerMain`` with a
generated ``zoo.cfg`` and ``myid``), and add the two other places a ZooKeeper server can come from here:
Debian's ``zookeeper`` package and the jars inside the pyspark wheel.

Readiness is a real session: :meth:`ZooKeeperServer.start` returns once every node answers a client, never
after a fixed sleep.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from glob import glob
from pathlib import Path

from kazoo.client import KazooClient

from zkconsumer import runtime
from zkconsumer.errors import ZkConsumerError

STATE_FILE = "zkconsumer-zk.json"
DEFAULT_DATA_DIR = Path(os.environ.get("ZKCONSUMER_HOME", Path.home() / ".zkconsumer")) / "zookeeper"

#: Jars Debian's libzookeeper-java needs beside zookeeper.jar (whichever of them are installed).
_DEBIAN_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar", "slf4j-log4j12.jar",
                "log4j-1.2.jar", "commons-cli.jar", "commons-io.jar", "metrics-core.jar", "snappy-java.jar",
                "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar")


class ZooKeeperError(ZkConsumerError, RuntimeError):
    """A ZooKeeper server could not be found, started or reached; the message says what to do."""


def find_java() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    java = shutil.which("java")
    if not java:
        raise ZooKeeperError(
            "no Java runtime found: ZooKeeper is a Java server. Install one "
            "(Debian/Ubuntu: 'sudo apt-get install -y default-jre-headless') or set JAVA_HOME.")
    return java


def _pyspark_jars() -> str | None:
    try:
        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = os.path.join(list(spec.submodule_search_locations)[0], "jars")
    if glob(os.path.join(jars, "zookeeper-[0-9]*.jar")):
        return jars
    return None


def find_classpath() -> tuple[str, str]:
    """The ZooKeeper server classpath and where it came from, in the documented order.

    1. ``ZOOKEEPER_CLASSPATH`` (used as is), 2. ``ZOOKEEPER_PATH`` (a ZooKeeper release directory, as in
    kazoo.testing), 3. Debian's package in ``/usr/share/java``, 4. the jars shipped inside the pyspark wheel.
    """
    cp = os.environ.get("ZOOKEEPER_CLASSPATH")
    if cp:
        return cp, "ZOOKEEPER_CLASSPATH"
    install = os.environ.get("ZOOKEEPER_PATH")
    if install:
        jars = glob(os.path.join(install, "zookeeper-*.jar")) + glob(os.path.join(install, "lib", "*.jar"))
        if not jars:
            raise ZooKeeperError(f"ZOOKEEPER_PATH={install} holds no zookeeper-*.jar nor lib/*.jar")
        return os.pathsep.join(jars), f"ZOOKEEPER_PATH ({install})"
    debian = "/usr/share/java"
    if os.path.exists(os.path.join(debian, "zookeeper.jar")):
        jars = [os.path.join(debian, j) for j in _DEBIAN_JARS if os.path.exists(os.path.join(debian, j))]
        jars += sorted(glob(os.path.join(debian, "netty-*.jar")))
        return os.pathsep.join(jars), "Debian package (/usr/share/java)"
    spark = _pyspark_jars()
    if spark:
        return os.path.join(spark, "*"), f"pyspark wheel ({spark})"
    raise ZooKeeperError(
        "no ZooKeeper server jars found. Install one of: Debian's package ('sudo apt-get install -y zookeeper'), "
        "the pyspark wheel ('pip install pyspark', it ships ZooKeeper), or point ZOOKEEPER_CLASSPATH / "
        "ZOOKEEPER_PATH at a ZooKeeper release.")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def tail(path: str | Path, lines: int = 30) -> str:
    """The last ``lines`` of a server's log, for the message of an error about it ("(no log)" before it has one)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def time_left(deadline: float, timed_out: Callable[[], Exception]) -> float:
    """The seconds left until ``deadline`` (on ``time.monotonic()``); raises ``timed_out()`` once there are none.

    A waiting start-up (ZooKeeper's, a Kafka JVM's) polls until it is ready; the error is made only when it is
    raised, because its message reads the server's log, which is not worth reading on every poll."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise timed_out()
    return remaining


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``, ``mntr``) and return the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def server_command(java: str, classpath: str, config: str | os.PathLike, log_dir: str | os.PathLike,
                   jaas_file: str | os.PathLike | None = None, quick_start: bool = True) -> list[str]:
    """The JVM command line of one ZooKeeper server (here, and inside a container by ``zkconsumer zk run``).

    ``quick_start``: a small heap, the serial GC and C1 only, so ZooKeeper for a lab or a test starts in about
    a second. Without it, the JVM's defaults as a production ZooKeeper runs (C2 compiles the hot paths: each
    request costs the server less CPU once warm); benchmarks measure against that.
    """
    tuning = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"] if quick_start else ["-Xmx512m"]
    args = [java, *tuning, "-Djava.awt.headless=true",
            f"-Dzookeeper.log.dir={log_dir}", "-Dzookeeper.root.logger=INFO,CONSOLE"]
    if jaas_file:
        args.append(f"-Djava.security.auth.login.config={jaas_file}")
    return args + ["-cp", classpath, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)]


@dataclass
class ZkNode:
    """One server of a standalone setup or an ensemble."""

    server_id: int
    client_port: int
    peer_port: int
    election_port: int
    data_dir: str
    pid: int | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"


class ZooKeeperServer:
    """A real ZooKeeper (standalone or ensemble) on loopback, as a context manager.

    ``detach=True`` starts the JVMs in their own session so they outlive this process (the CLI's ``zk start``);
    the state file in ``data_dir`` then lets a later process stop them.
    """

    def __init__(self, servers: int = 1, port: int | None = None, data_dir: str | os.PathLike | None = None,
                 tick_time: int = 500, detach: bool = False, classpath: str | None = None,
                 java: str | None = None, sasl_users: Mapping[str, str] | None = None,
                 quick_start: bool = True) -> None:
        """``sasl_users`` (user → password) turns on SASL DIGEST-MD5: a JAAS ``Server`` section and ZooKeeper's
        SASLAuthenticationProvider, so clients can authenticate as ``sasl:<user>`` (unauthenticated clients are
        still served; the ACLs decide what they may do). ``quick_start``: see :func:`server_command`."""
        self.quick_start = quick_start
        if servers not in (1, 3, 5):
            raise ZooKeeperError(f"servers must be 1, 3 or 5 (an odd quorum), got {servers}")
        self.servers = servers
        self.tick_time = tick_time
        self.detach = detach
        self._owns_dir = data_dir is None
        # absolute: the JVM runs with the node's directory as its working directory
        self.data_dir = (Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="zkconsumer-zk-"))).resolve()
        self._classpath = classpath
        self._java = java
        self.sasl_users = dict(sasl_users or {})
        for name in self.sasl_users:
            if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
                raise ZooKeeperError(f"SASL user name {name!r}: use letters, digits, '.', '_' and '-'")
        self.sasl = bool(self.sasl_users)
        self.source = ""
        self.nodes: list[ZkNode] = []
        self._procs: dict[int, subprocess.Popen] = {}
        base = port
        for i in range(servers):
            cport = (base + i) if base else free_port()
            self.nodes.append(ZkNode(i + 1, cport, free_port(), free_port(),
                                     str(self.data_dir / f"server{i + 1}")))

    # ------------------------------------------------------------------------------------------- lifecycle
    @property
    def connect_string(self) -> str:
        return ",".join(n.address for n in self.nodes)

    def write_config(self, node: ZkNode) -> str:
        """Write the node's zoo.cfg (and myid in an ensemble) and return its path."""
        os.makedirs(node.data_dir, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time}", "initLimit=20", "syncLimit=10",
            f"dataDir={node.data_dir}", f"clientPort={node.client_port}", "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0", "admin.enableServer=false", "4lw.commands.whitelist=*",
            f"minSessionTimeout={2 * self.tick_time}", "maxSessionTimeout=60000",
            "autopurge.purgeInterval=0",
        ]
        if self.sasl:
            lines.append("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
        if self.servers > 1:
            for n in self.nodes:
                lines.append(f"server.{n.server_id}=127.0.0.1:{n.peer_port}:{n.election_port}")
            with open(os.path.join(node.data_dir, "myid"), "w") as f:
                f.write(str(node.server_id))
        cfg = os.path.join(node.data_dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        return cfg

    @property
    def jaas_file(self) -> Path:
        return self.data_dir / "zookeeper-jaas.conf"

    def _write_jaas(self) -> None:
        """The JAAS ``Server`` section ZooKeeper's DigestLoginModule reads (``user_<name>="<password>"``),
        readable by its owner only: it holds the passwords."""
        def quoted(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        users = "".join(f"\n    user_{name}={quoted(pw)}" for name, pw in self.sasl_users.items())
        os.makedirs(self.data_dir, exist_ok=True)
        fd = os.open(self.jaas_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"Server {{\n    org.apache.zookeeper.server.auth.DigestLoginModule required{users};\n}};\n")

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Start every node and wait until each serves a client session."""
        java = self._java or find_java()
        if self._classpath:
            cp, self.source = self._classpath, "given classpath"
        else:
            cp, self.source = find_classpath()
        for node in self.nodes:
            if port_in_use(node.client_port):
                raise ZooKeeperError(f"port {node.client_port} is already in use (another ZooKeeper?); "
                                     "choose another with --port")
        try:
            for node in self.nodes:
                self._spawn(node, java, cp)
            self.wait_serving(timeout)
        except BaseException:  # a failed start, or Ctrl-C / SIGTERM while waiting: leave no JVM behind
            with contextlib.suppress(Exception):
                self.stop()
            raise
        if self.detach:
            self.save_state()
        return self

    def _spawn(self, node: ZkNode, java: str, cp: str) -> None:
        cfg = self.write_config(node)
        log_path = os.path.join(node.data_dir, "zookeeper.log")
        logf = open(log_path, "ab")  # noqa: SIM115 - handed to the child
        if self.sasl_users:
            self._write_jaas()
        args = server_command(java, cp, cfg, node.data_dir, self.jaas_file if self.sasl else None,
                              quick_start=self.quick_start)
        proc = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=self.detach, cwd=node.data_dir)
        logf.close()
        node.pid = proc.pid
        self._procs[node.server_id] = proc

    def _alive(self, node: ZkNode) -> bool:
        proc = self._procs.get(node.server_id)
        if proc is not None:
            return proc.poll() is None
        return node.pid is not None and pid_alive(node.pid)

    def log_tail(self, node: ZkNode, lines: int = 25) -> str:
        return tail(os.path.join(node.data_dir, "zookeeper.log"), lines)

    def wait_serving(self, timeout: float = 60.0, nodes: list[ZkNode] | None = None) -> None:
        """Block until each node (or the given ones) answers a real client session."""
        deadline = time.monotonic() + timeout
        quiet = logging.getLogger("zkconsumer.zk.server.probe")
        quiet.propagate = False
        quiet.addHandler(logging.NullHandler())
        for node in nodes or self.nodes:
            self._wait_node_serving(node, deadline, timeout, quiet)

    def _wait_node_serving(self, node: ZkNode, deadline: float, timeout: float, quiet: logging.Logger) -> None:
        """One node of :meth:`wait_serving`, within what is left of the shared ``timeout``."""
        while True:
            if not self._alive(node):
                raise ZooKeeperError(f"ZooKeeper server {node.server_id} exited during start-up "
                                     f"(jars from {self.source}); log:\n{self.log_tail(node)}")
            remaining = time_left(deadline, lambda: ZooKeeperError(
                f"ZooKeeper server {node.server_id} on {node.address} did not serve within {timeout:.0f}s; "
                f"log:\n{self.log_tail(node)}"))
            # Cheap probe first: 'srvr' names a Mode only once the node serves (in a quorum, for ensembles).
            try:
                serving = "Mode:" in four_letter_word("127.0.0.1", node.client_port, "srvr", 0.5)
            except OSError:
                serving = False
            if serving and self._session_ok(node, min(5.0, remaining), quiet):
                return
            time.sleep(0.05)

    @staticmethod
    def _session_ok(node: ZkNode, timeout: float, logger: logging.Logger) -> bool:
        """Open a real client session and read the root: the proof that the node serves."""
        client = KazooClient(hosts=node.address, timeout=timeout, connection_retry={"max_tries": 0},
                             logger=logger)
        try:
            client.start(timeout=timeout)
            client.get("/")
            return True
        except Exception:  # noqa: BLE001 - any failure means "not yet"
            return False
        finally:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()

    def stop_node(self, server_id: int, kill: bool = False) -> None:
        """Stop one node (SIGTERM, or SIGKILL with ``kill``); the others keep running."""
        node = self.nodes[server_id - 1]
        proc = self._procs.pop(server_id, None)
        if proc is not None:
            (proc.kill if kill else proc.terminate)()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        elif node.pid and pid_alive(node.pid):
            _terminate_pid(node.pid, kill)
        node.pid = None

    def start_node(self, server_id: int, timeout: float = 60.0) -> None:
        """Restart a node stopped by :meth:`stop_node`, keeping its data."""
        node = self.nodes[server_id - 1]
        cp = self._classpath or find_classpath()[0]
        self._spawn(node, self._java or find_java(), cp)
        # Wait for every running node, not only this one: a node rejoining an ensemble can make its peers
        # answer 'not currently serving' for a moment, and callers expect the whole ensemble back.
        self.wait_serving(timeout, [n for n in self.nodes if n.pid])

    def stop(self) -> None:
        for node in self.nodes:
            self.stop_node(node.server_id)
        state = self.data_dir / STATE_FILE
        with contextlib.suppress(FileNotFoundError):
            state.unlink()
        if self._owns_dir and not self.detach:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --------------------------------------------------------------------------------------------- state
    def save_state(self) -> None:
        state = {"servers": self.servers, "connect": self.connect_string, "source": self.source,
                 "tick_time": self.tick_time, "sasl": self.sasl, "nodes": [asdict(n) for n in self.nodes]}
        os.makedirs(self.data_dir, exist_ok=True)
        (self.data_dir / STATE_FILE).write_text(json.dumps(state, indent=2))

    @classmethod
    def from_state(cls, data_dir: str | os.PathLike) -> ZooKeeperServer:
        """Re-attach to servers started with ``detach=True`` (by ``zkconsumer zk start``)."""
        path = Path(data_dir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise ZooKeeperError(f"no ZooKeeper started from {data_dir} (no {STATE_FILE})") from None
        server = cls.__new__(cls)
        server.servers = state["servers"]
        server.tick_time = state.get("tick_time", 500)
        server.detach = True
        server._owns_dir = False
        server.data_dir = Path(data_dir).resolve()
        server._classpath = None
        server._java = None
        server.quick_start = True
        server.sasl_users = {}  # the passwords stay in the JAAS file (a restarted node reads it), not in the state
        server.sasl = bool(state.get("sasl"))
        server.source = state.get("source", "")
        server.nodes = [ZkNode(**n) for n in state["nodes"]]
        server._procs = {}
        return server

    def status(self) -> list[dict]:
        """Per node: pid alive, and the server's own ``srvr`` answer (mode, znode count, latency)."""
        out = []
        for node in self.nodes:
            info: dict = {"server": node.server_id, "address": node.address, "pid": node.pid,
                          "alive": bool(node.pid and self._alive(node))}
            try:
                srvr = four_letter_word("127.0.0.1", node.client_port, "srvr")
                for line in srvr.splitlines():
                    key, _, value = line.partition(":")
                    if key in ("Mode", "Node count", "Zookeeper version", "Connections"):
                        info[key.lower().replace(" ", "_")] = value.strip()
            except OSError as e:
                info["error"] = str(e)
            out.append(info)
        return out


def packets_received(host: str, port: int) -> int | None:
    """Requests the server has received so far (``mntr``'s zk_packets_received), or None if it cannot say."""
    try:
        for line in four_letter_word(host, port, "mntr").splitlines():
            key, _, value = line.partition("\t")
            if key == "zk_packets_received":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def pid_alive(pid: int) -> bool:
    """Is this process alive (a zombie counts as dead)? A real process always: this module starts real servers, so
    it asks the live seam even inside a simulation."""
    if not runtime.LIVE.process_alive(pid):
        return False
    # a zombie child still answers kill(0); look at its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _terminate_pid(pid: int, kill: bool = False) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running_zookeeper(servers: int = 1, **kwargs) -> Iterator[ZooKeeperServer]:
    """``with running_zookeeper() as zk: zk.connect_string`` — a real server for the duration of the block."""
    server = ZooKeeperServer(servers=servers, **kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
