"""A private Docker engine: ``dockerd`` started by us, on its own socket and data root, stopped by us.

Why our own daemon: the lab and its test must not depend on (or disturb) a system Docker, and a machine without
one can still run the lab after ``apt-get install docker.io``. The daemon is started with ``--bridge=none
--iptables=false --ip6tables=false``: every container runs with host networking, so all traffic stays on
127.0.0.1 and the host's network configuration is never touched. Its data root is kept between runs (the base
image takes minutes to bootstrap); a lock file makes concurrent users of one root wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from zkconsumer.errors import ZkConsumerError

#: Where the data root lives unless ZKCONSUMER_DOCKER_ROOT says otherwise: /var/tmp survives reboots on Debian,
#: so the cached base image does too.
DEFAULT_ROOT = Path(os.environ.get("ZKCONSUMER_DOCKER_ROOT", "/var/tmp/zkconsumer-dockerd"))


class DockerUnavailable(ZkConsumerError, RuntimeError):
    """dockerd cannot run here (not root, no dockerd binary, no overlay/cgroups); the message says why."""


def why_not_available() -> str | None:
    """A one-line reason the engine cannot start on this machine, or None when it probably can."""
    if os.geteuid() != 0:
        return "dockerd needs root (run as root, or install docker.io and use the system engine)"
    if not shutil.which("dockerd"):
        return "no dockerd binary (Debian: apt-get install docker.io)"
    try:
        filesystems = Path("/proc/filesystems").read_text()
    except OSError:
        filesystems = ""
    if "overlay" not in filesystems:
        return "the kernel has no overlay filesystem (modprobe overlay)"
    if not Path("/sys/fs/cgroup").is_dir() or not any(Path("/sys/fs/cgroup").iterdir()):
        return "no cgroup filesystem mounted at /sys/fs/cgroup"
    return None


def install_engine() -> None:
    """Install Debian's docker.io, debootstrap and docker-compose with apt-get when missing (as root, where
    apt-get exists): what the docker lab test does on a fresh CI machine, so that it can also bring
    docker/compose.yaml up. Does nothing where they are installed or cannot be."""
    missing = [pkg for pkg, binary in (("docker.io", "dockerd"), ("debootstrap", "debootstrap"),
                                       ("docker-compose", "docker-compose"))
               if not shutil.which(binary)]
    if not missing or os.geteuid() != 0 or not shutil.which("apt-get"):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=300",
                    *missing], check=False, env=env, stdout=subprocess.DEVNULL)


class DockerEngine:
    """``with DockerEngine() as engine: engine.client`` — a running dockerd and a ``docker.DockerClient`` for it."""

    def __init__(self, root: str | os.PathLike = DEFAULT_ROOT, start_timeout: float = 60.0) -> None:
        self.root = Path(root).resolve()
        self.start_timeout = start_timeout
        # containerd's sockets live under the exec root: a Unix socket path must stay short (108 bytes).
        tag = hashlib.sha1(str(self.root).encode()).hexdigest()[:8]
        self.exec_root = Path("/run") / f"zkcd-{tag}"
        self.socket = self.root / "docker.sock"
        self.proc: subprocess.Popen | None = None
        self.client = None
        self._lock_file = None

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> DockerEngine:
        reason = why_not_available()
        if reason:
            raise DockerUnavailable(reason)
        import docker

        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.root / "lock", "w")  # noqa: SIM115 - held while the daemon runs
        fcntl.flock(self._lock_file, fcntl.LOCK_EX)  # another run on this root: wait for it to finish
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - handed to the daemon
        self.proc = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-forward=false",
             "--ip-masq=false", f"--data-root={self.root / 'data'}", f"--exec-root={self.exec_root}",
             f"--pidfile={self.root / 'dockerd.pid'}", f"--host={self.base_url}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self._release()
                raise DockerUnavailable(f"dockerd exited with code {self.proc.returncode}: {tail}")
            if self.socket.exists():
                with contextlib.suppress(Exception):
                    client = docker.DockerClient(base_url=self.base_url, timeout=300)
                    client.ping()
                    self.client = client
                    return self
            if time.monotonic() > deadline:
                self.stop()
                raise DockerUnavailable(f"dockerd did not answer within {self.start_timeout:.0f}s")
            time.sleep(0.1)

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join((self.root / "dockerd.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the daemon (SIGTERM, SIGKILL after ``timeout``); containers must be removed before."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
            self.client = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.proc is not None:
            self._remove_exec_root()
        self._release()

    def _remove_exec_root(self) -> None:
        """dockerd leaves its default network namespace bind-mounted under the exec root: unmount, then remove."""
        for mount in sorted(self.exec_root.glob("netns/*")):
            subprocess.run(["umount", str(mount)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(self.exec_root, ignore_errors=True)

    def _release(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing drops the flock
            self._lock_file = None

    def __enter__(self) -> DockerEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def docker_client(base_url: str | None = None, log=print):
    """A Docker client for the lab: ``base_url`` if given, else the engine ``DOCKER_HOST`` or the system socket
    points at when it answers, else a private engine started here (and stopped on leaving the block)."""
    import docker

    if base_url:
        client = docker.DockerClient(base_url=base_url, timeout=300)
        try:
            client.ping()
        except Exception as e:  # noqa: BLE001 - shown to the user as one line
            raise DockerUnavailable(f"no Docker engine answers at {base_url}: {e}") from None
        with contextlib.closing(client):
            yield client
        return
    try:
        client = docker.from_env(timeout=300)
        client.ping()
    except Exception:  # noqa: BLE001 - no system engine: start ours
        client = None
    if client is not None:
        with contextlib.closing(client):
            yield client
        return
    log(f"no Docker engine is running: starting a private dockerd (data root {DEFAULT_ROOT})")
    with DockerEngine() as engine:
        yield engine.client
