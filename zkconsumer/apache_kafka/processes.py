"""Kafka's own processes on loopback: the broker (``kafka.Kafka``), its high-level consumers, its tools.

In the style of :mod:`zkconsumer.zk.server`: each is a real JVM running Apache Kafka's published jars
(:mod:`.jars`), started here and stopped here, and "ready" means what Kafka itself shows, never a fixed sleep:
a broker is ready when its registration is in ZooKeeper and its port answers; a topic when its controller has
written every partition's leader state; a consumer member when ``createMessageStreams`` returned (its
registration, watches and first rebalance are done then).

Kafka 0.8.2.2 on Java 17 needs no JVM flag: its start scripts pass CMS and ParNew options that Java 17 removed,
so we do not use the scripts and give each JVM a small heap and (``quick_start``) the serial GC and C1 only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

from zkconsumer.apache_kafka.jars import DEFAULT_VERSION, KafkaDist, fetch
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.server import find_java, free_port, port_in_use, tail, time_left

log = logging.getLogger(__name__)

_LOG4J = """log4j.rootLogger={level}, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.consumer.ZookeeperConsumerConnector={consumer_level}
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.org.I0Itec.zkclient=WARN
"""


class KafkaProcessError(ZkConsumerError, RuntimeError):
    """A Kafka process did not start, answer or stop as expected; the message carries its log's tail."""


def jvm_command(dist: KafkaDist, main: str, args: Iterable[str], log4j: Path | None = None,
                quick_start: bool = True, heap: str = "256m", extra_classpath: Iterable[str] = (),
                jvm_options: Iterable[str] = ()) -> list[str]:
    """The command line of one of Kafka's JVM programs. ``quick_start``: serial GC and C1 only (a test's JVM is
    up in about a second); without it the JVM's defaults, as a production consumer runs (benchmarks)."""
    tuning = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"] if quick_start else []
    cp = os.pathsep.join([*extra_classpath, dist.classpath])
    props = [f"-Dlog4j.configuration={log4j.as_uri()}"] if log4j else ["-Dlog4j.configuration=file:/dev/null"]
    return [find_java(), f"-Xmx{heap}", *tuning, "-Djava.awt.headless=true", *props, *jvm_options, "-cp", cp, main,
            *args]


def harness_command(dist: KafkaDist, zk_connect: str, group: str, topics: Iterable[str] = (),
                    whitelist: str | None = None, streams: int = 1, strategy: str = "range",
                    properties: Mapping[str, object] | None = None, fetch_records: bool = True,
                    report_records: bool = False, start: Iterable[str] = (), log4j: Path | None = None,
                    quick_start: bool = True, jvm_options: Iterable[str] = (), until_signal: bool = False,
                    warm_up: int = 0) -> list[str]:
    """The command line of the JVM running Kafka's high-level consumers (``java/HighLevelConsumers.java``, its
    arguments documented there); ``start``: members started at once; ``until_signal``: the JVM then reads no
    commands and its members run until it is signalled (one process per member, as the lab runs them);
    ``warm_up``: rounds of a throwaway member's join and leave before the JVM is ready (a warm JVM)."""
    args = ["--zookeeper", zk_connect, "--group", group, "--streams", str(streams), "--strategy", strategy]
    for t in topics:
        args += ["--topic", t]
    if whitelist:
        args += ["--whitelist", whitelist]
    for k, v in (properties or {}).items():
        args += ["--property", f"{k}={v}"]
    if not fetch_records:
        args.append("--no-fetch")
    if report_records:
        args.append("--records")
    for member in start:
        args += ["--start", member]
    if until_signal:
        args.append("--until-signal")
    if warm_up:
        args += ["--warm-up", str(warm_up)]
    return jvm_command(dist, "HighLevelConsumers", args, log4j, quick_start=quick_start,
                       extra_classpath=[str(dist.harness_classes())], jvm_options=jvm_options)


def write_log4j(path: Path, log_file: Path, level: str = "INFO", consumer_level: str = "INFO") -> Path:
    path.write_text(_LOG4J.format(level=level, path=log_file, consumer_level=consumer_level))
    return path


def wait_or_kill(proc: subprocess.Popen, timeout: float) -> None:
    """Wait for a process asked to stop; SIGKILL it after ``timeout``."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_tool(tool: str, args: Iterable[str], dist: KafkaDist | None = None, timeout: float = 120.0,
             input: str | None = None) -> subprocess.CompletedProcess:
    """Run one of Kafka's command-line tools (``kafka.tools.ConsumerOffsetChecker`` …) to completion.

    Its log4j output goes nowhere (the tools print their results on stdout; their log lines would mix in)."""
    dist = dist or fetch()
    cmd = jvm_command(dist, tool if "." in tool else f"kafka.tools.{tool}", args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)


class KafkaServer:
    """What Kafka's server processes share: one JVM (``proc``), a data directory (removed at stop when it was a
    temporary one), a controlled stop, and the context manager."""

    proc: subprocess.Popen | None
    port: int
    data_dir: Path
    _owns_dir: bool

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def start(self, timeout: float = 60.0) -> Self:
        """Launch, then wait until the server serves; a server that does not is stopped before the error."""
        self.launch()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> None:
        """Start the JVM and return at once (a cluster launches every node before waiting for any)."""
        raise NotImplementedError

    def wait_ready(self, timeout: float) -> None:
        """Until the server serves, by what it answers (never a fixed sleep)."""
        raise NotImplementedError

    def stop(self, kill: bool = False, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), SIGKILL after ``timeout`` or with ``kill``."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            wait_or_kill(proc, timeout)
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KafkaBroker(KafkaServer):
    """Kafka's own broker (``kafka.Kafka``) on 127.0.0.1, registered in the given ZooKeeper (chroot included).

    >>> with KafkaBroker("127.0.0.1:2181/k") as b: b.bootstrap   # doctest: +SKIP
    """

    def __init__(self, zk_connect: str, broker_id: int = 0, port: int | None = None,
                 data_dir: str | os.PathLike | None = None, version: str = DEFAULT_VERSION,
                 properties: Mapping[str, object] | None = None, quick_start: bool = True) -> None:
        self.zk_connect = zk_connect
        self.broker_id = broker_id
        self.port = port or free_port()
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="zkconsumer-kafka-")).resolve()
        self.version = version
        self.properties = dict(properties or {})
        self.quick_start = quick_start
        self.proc: subprocess.Popen | None = None
        self.dist: KafkaDist | None = None

    def server_properties(self) -> dict[str, object]:
        """What the broker runs with: loopback, one log dir, one replica, short intervals for a test or a lab.

        0.8.x names its address ``host.name``/``port``; later versions ``listeners``. 3.x (ZooKeeper mode) also
        gets the single-broker settings of its coordinators (offsets and transaction topics with one replica, no
        initial rebalance delay, as Kafka's own quick-start config has)."""
        props: dict[str, object] = {
            "broker.id": self.broker_id, "log.dirs": self.data_dir / "logs",
            "zookeeper.connect": self.zk_connect, "zookeeper.connection.timeout.ms": 15000,
            "zookeeper.session.timeout.ms": 6000, "num.partitions": 1, "auto.create.topics.enable": "false",
            "delete.topic.enable": "true", "controlled.shutdown.enable": "true",
            "offsets.topic.replication.factor": 1, "offsets.topic.num.partitions": 4,
            "num.network.threads": 2, "num.io.threads": 2,
        }
        if self.version.startswith("0."):
            props.update({"host.name": "127.0.0.1", "port": self.port, "advertised.host.name": "127.0.0.1",
                          "log.flush.interval.messages": 10000})
        else:
            props.update({"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                          "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
                          "transaction.state.log.num.partitions": 4, "group.initial.rebalance.delay.ms": 0})
        props.update(self.properties)
        return props

    def launch(self) -> None:
        if port_in_use(self.port):
            raise KafkaProcessError(f"port {self.port} is already in use")
        self.dist = fetch(self.version)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        log4j = write_log4j(self.data_dir / "log4j.properties", self.log_file, consumer_level="INFO")
        out = open(self.data_dir / "stdout.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            jvm_command(self.dist, "kafka.Kafka", [str(config)], log4j, quick_start=self.quick_start, heap="512m"),
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.data_dir)
        out.close()

    def wait_ready(self, timeout: float) -> None:
        """Until its registration under /brokers/ids names this process's port and the port answers."""
        deadline = time.monotonic() + timeout
        with Registry.open(self.zk_connect) as reg:
            while True:
                if self.proc is None or self.proc.poll() is not None:
                    raise KafkaProcessError(f"Kafka {self.version} broker exited during start-up; log:\n"
                                            f"{tail(self.log_file)}{tail(self.data_dir / 'stdout.log')}")
                info = reg.broker(self.broker_id)
                if info is not None and info.port == self.port and port_in_use(self.port):
                    return
                time_left(deadline, lambda: KafkaProcessError(
                    f"Kafka {self.version} broker {self.broker_id} did not register in {self.zk_connect} within "
                    f"{timeout:.0f}s; log:\n{tail(self.log_file)}"))
                time.sleep(0.05)

    def wait_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """Until the controller has written the leader state of each partition (the broker then serves it)."""
        deadline = time.monotonic() + timeout
        with Registry.open(self.zk_connect) as reg:
            base = f"/brokers/topics/{topic}/partitions"
            while True:
                states = reg.read_many(f"{base}/{p}/state" for p in range(partitions))
                if all(states.values()):
                    return
                if time.monotonic() > deadline:
                    missing = sorted(p for p in states if not states[p])
                    raise KafkaProcessError(f"Kafka's controller wrote no leader for {missing} within {timeout:.0f}s")
                time.sleep(0.05)



class HighLevelConsumers:
    """One JVM running Kafka's own high-level consumers (``ZookeeperConsumerConnector``) of one group.

    Members are started, stopped gracefully and crashed by consumer id (``java/HighLevelConsumers.java``); the
    JVM's events arrive on a reader thread. :meth:`kill` is ``kill -9`` of the whole JVM.
    """

    def __init__(self, zk_connect: str, group: str, topics: Iterable[str] = (), whitelist: str | None = None,
                 streams: int = 1, strategy: str = "range", properties: Mapping[str, object] | None = None,
                 fetch_records: bool = True, report_records: bool = False, version: str = DEFAULT_VERSION,
                 quick_start: bool = True, work_dir: str | os.PathLike | None = None, warm_up: int = 0) -> None:
        self.zk_connect, self.group = zk_connect, group
        self.warm_up = warm_up
        self.topics, self.whitelist = list(topics), whitelist
        self.streams, self.strategy = streams, strategy
        self.properties = dict(properties or {})
        self.fetch_records, self.report_records = fetch_records, report_records
        self.version, self.quick_start = version, quick_start
        self._owns_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="zkconsumer-kafka-consumer-")).resolve()
        self.proc: subprocess.Popen | None = None
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None

    @property
    def log_file(self) -> Path:
        return self.work_dir / "consumer.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self, timeout: float = 60.0) -> HighLevelConsumers:
        dist = fetch(self.version)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log4j = write_log4j(self.work_dir / "log4j.properties", self.log_file, level="WARN")
        cmd = harness_command(dist, self.zk_connect, self.group, self.topics, self.whitelist, self.streams,
                              self.strategy, self.properties, self.fetch_records, self.report_records, log4j=log4j,
                              quick_start=self.quick_start, warm_up=self.warm_up)
        err = open(self.work_dir / "stderr.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=self.work_dir, text=True, bufsize=1)
        err.close()
        self._reader = threading.Thread(target=self._read, name=f"kafka-consumers-{self.group}", daemon=True)
        self._reader.start()
        self.wait_event("ready", timeout=timeout)
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                log.warning("Kafka consumer harness printed %r", line.rstrip())
                continue
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self.events.append({"event": "exited", "ts": int(time.time() * 1000)})
            self._cond.notify_all()

    def _send(self, line: str) -> None:
        if self.proc is None or self.proc.poll() is not None or self.proc.stdin is None:
            raise KafkaProcessError(f"the Kafka consumer JVM is not running; stderr:\n"
                                    f"{tail(self.work_dir / 'stderr.log')}")
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_event(self, event: str, member: str | None = None, timeout: float = 60.0, after: int = 0) -> dict:
        """The first ``event`` (for ``member``) at index ≥ ``after`` in :attr:`events`; errors are raised."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for e in self.events[after:]:
                    if e.get("id", member) != member and member is not None:
                        continue
                    if e["event"] == event:
                        return e
                    if e["event"] == "error" or e["event"] == "exited":
                        raise KafkaProcessError(f"Kafka consumer {member or ''}: {e.get('error', 'JVM exited')}; "
                                                f"log:\n{tail(self.log_file)}{tail(self.work_dir / 'stderr.log')}")
                self._cond.wait(time_left(deadline, lambda: KafkaProcessError(
                    f"no {event!r} from Kafka consumer {member or ''} within {timeout:.0f}s; log:\n"
                    f"{tail(self.log_file)}")))

    def _do(self, command: str, member: str, done: str, wait: bool, timeout: float) -> dict | None:
        with self._cond:
            mark = len(self.events)
        self._send(f"{command} {member}")
        return self.wait_event(done, member, timeout, after=mark) if wait else None

    def start_member(self, member: str, wait: bool = True, timeout: float = 120.0,
                     concurrently: bool = False) -> dict | None:
        """A member with ``consumer.id=member``; returns once ``createMessageStreams`` did (with ``wait``).
        ``concurrently``: the JVM starts it on a thread of its own and reads its next command at once, so members
        started one after the other without ``wait`` start together, as separate processes would."""
        return self._do("spawn" if concurrently else "start", member, "started", wait, timeout)

    def stop_member(self, member: str, wait: bool = True, timeout: float = 60.0) -> dict | None:
        """A graceful leave: ``shutdown()`` (commits with auto.commit.enable, deletes its registration)."""
        return self._do("stop", member, "stopped", wait, timeout)

    def crash_member(self, member: str, wait: bool = True, timeout: float = 30.0) -> dict | None:
        """The member's ZooKeeper session is closed without a shutdown: its ephemeral nodes vanish at once."""
        return self._do("crash", member, "crashed", wait, timeout)

    def records(self, member: str | None = None) -> list[dict]:
        with self._cond:
            return [e for e in self.events if e["event"] == "record" and (member is None or e["id"] == member)]

    def kill(self) -> None:
        """``kill -9`` of the JVM: every member in it dies without a word; its sessions time out."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 60.0) -> None:
        """Every member leaves gracefully (``exit``), then the JVM ends; killed after ``timeout``."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self._send("exit")
            wait_or_kill(proc, timeout)
        if self._reader is not None:
            self._reader.join(5)
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if self._owns_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> HighLevelConsumers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

