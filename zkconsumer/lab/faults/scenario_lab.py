"""The lab that carries out a scenario's fault and topic actions (docs/scenarios.md): Lab.run's loop and live view,
FaultLab's handles.

:func:`lab_for` gives a :class:`ScenarioLab` when the plan's scenario has such an action, a plain
:class:`~zkconsumer.lab.runner.Lab` otherwise: ``lab --scenario``, ``compare --scenario`` and the nemesis build their
labs through it. What the run starts follows from the scenario: a
ZooKeeper ensemble (``zookeeper_nodes``, or 3 when an action stops a node), the broker as its own process when an
action kills it, and a proxy per ZooKeeper server in front of each member whose link an action cuts or slows (the
member connects through its proxies from the start, so the cut needs no restart).

A fault action runs on a thread of its own (the live view and the schedule go on meanwhile) and writes the lab's
trace (``lab.jsonl``): ``fault_injected`` when it strikes, ``fault_healed`` when the system is whole again, so the
analysis judges "every partition owned again within session timeout + 1 s of the heal" (docs/faults.md). What
"healed" means per action: the link passes again at full speed (cut-zk, slow-zk); the session is gone from the
server (expire: the member can react from then on); the node or nodes restarted and serving (kill-zk with
``seconds``, restart-zk, quorum-loss); the broker restarted on its port and log, registered (kill-broker with
``seconds``, restart-broker); the member sent SIGCONT (pause).

Not here: a member's *broker* link through a proxy. Members learn the broker's address from its registration in
ZooKeeper (or from a Metadata answer, whatever they bootstrap from) and connect there, so a proxy given as their
bootstrap would carry only the first request; a per-member broker address would need the broker to advertise one
per client.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import NewPartitions, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from rich.console import Console, Group

from zkconsumer import broker_version
from zkconsumer.apache_kafka.cluster import KafkaCluster
from zkconsumer.kafka_admin import AdminClient
from zkconsumer.lab.backends import BackendError, LabBackend, ProcessBackend
from zkconsumer.lab.faults.lab import FaultLab, FaultTimeout, quiet_logger
from zkconsumer.lab.faults.proxy import LinkMode, TcpProxy
from zkconsumer.lab.runner import Lab
from zkconsumer.lab.steps import STEP_HANDLERS
from zkconsumer.records import encode_value
from zkconsumer.scenario.model import FOLLOWER, LEADER, ActionKind, LabMode, Step
from zkconsumer.scenario.plan import GROUP, RunPlan
from zkconsumer.trace import TraceWriter
from zkconsumer.zk.registry import Registry, split_connect
from zkconsumer.zk.server import ZooKeeperServer, free_port, packets_received
from zkconsumer.zk.topics import add_partitions, create_topic

#: ZooKeeper's session password is derived from the session id (ZooKeeperServer.generatePasswd: a java.util.Random
#: seeded with the id XOR this constant, 16 bytes), so a session can be opened, and closed, from outside knowing
#: only its id, which every ephemeral node it created shows as its ephemeralOwner.
_SUPER_SECRET = 0xB3415C00


def session_password(session_id: int) -> bytes:
    """The password ZooKeeper gave session ``session_id``: java.util.Random(id ^ superSecret).nextBytes(16)."""
    mask = (1 << 48) - 1
    seed = ((session_id ^ _SUPER_SECRET) ^ 0x5DEECE66D) & mask
    out = bytearray()
    while len(out) < 16:
        seed = (seed * 0x5DEECE66D + 0xB) & mask
        word = seed >> 16  # Random.next(32): nextBytes takes each int's bytes low first
        for _ in range(min(4, 16 - len(out))):
            out.append(word & 0xFF)
            word >>= 8
    return bytes(out)


def lab_for(plan: RunPlan, out_dir: Path, zookeeper: str | None = None, bootstrap: str | None = None,
            console: Console | None = None, backend: LabBackend | None = None,
            cluster: KafkaCluster | None = None, cut_any: bool = False) -> Lab:
    """The lab ``plan`` needs: a :class:`ScenarioLab` when its scenario (or its steps) strikes servers, links,
    sessions or topics, else a plain Lab (which reports such a step n/a). ``cluster``: Apache Kafka's brokers
    that compare started for the run (``bootstrap`` names them), whose coordinator the lab may kill. ``cut_any``
    (``lab --ui``, whose page cuts any member from ZooKeeper): a ScenarioLab with a link for every member, on the
    process backend (the one its proxies run on)."""
    needs = plan.scenario.needs_fault_lab if plan.scenario is not None else any(
        step.action.needs_fault_lab for step in plan.steps or ())
    cut_any = cut_any and (backend is None or backend.name == "process") and plan.mode is not LabMode.COORDINATOR
    if needs or cut_any:
        kind = CutAnyLab if cut_any else ScenarioLab
        return kind(plan, out_dir, zookeeper, bootstrap, console, backend=backend, cluster=cluster)
    return Lab(plan, out_dir, zookeeper, bootstrap, console, backend=backend)


class _Backend(ProcessBackend):
    """The process backend, reporting the requests of the lab's in-process broker (the lab starts it, not the
    backend), so a scenario run counts broker requests as every other lab run does."""

    def __init__(self, lab: ScenarioLab) -> None:
        super().__init__()
        self._lab = lab

    def broker_request_counts(self) -> dict[str, int] | None:
        broker = self._lab._broker
        return broker.request_counts() if broker is not None else None


class ScenarioLab(FaultLab):
    """A lab run of a scenario whose actions strike servers, links, sessions or topics."""

    fault_handles = True

    def __init__(self, plan: RunPlan, out_dir: Path, zookeeper: str | None = None, bootstrap: str | None = None,
                 console: Console | None = None, backend: LabBackend | None = None,
                 cluster: KafkaCluster | None = None) -> None:
        if backend is not None and backend.name != "process":
            raise BackendError(f"a scenario with fault or topic actions runs on the process backend only (asked: "
                             f"{backend.name})")
        # what to start follows from the steps (a scenario's, or steps given as they are, e.g. drawn by a nemesis)
        steps = plan.schedule()
        ensemble = plan.scenario.ensemble if plan.scenario is not None else (
            3 if any(s.action.on_zookeeper_nodes for s in steps) else 1)
        super().__init__(plan, Path(out_dir), zk_servers=ensemble,
                         broker_process=any(s.action.on_broker for s in steps), console=console,
                         backend=_Backend(self))
        #: the members whose ZooKeeper link a step cuts or slows: they connect through proxies from the start
        self.proxied = list(dict.fromkeys(s.consumer for s in steps
                                          if s.action in (ActionKind.CUT_ZK, ActionKind.SLOW_ZK)))
        #: the members whose broker link a step cuts or slows (on the lab's own broker: it advertises their proxy)
        self.broker_proxied = [] if bootstrap else list(dict.fromkeys(s.consumer for s in steps
                                                                      if s.action.on_broker_link))
        #: each such member's proxy in front of the broker's listener for it
        self.broker_links: dict[str, TcpProxy] = {}
        self._zk_given, self._bootstrap_given = zookeeper, bootstrap
        #: Apache Kafka's brokers compare started (kill-coordinator's handle): topics get a replica on each
        self.cluster = cluster
        self.replication_factor = len(cluster.brokers) if cluster is not None else 1
        self.zk_connect = zookeeper or ""
        self.bootstrap = bootstrap or ""
        #: each proxied member's link: one proxy per ZooKeeper server, all switched together
        self.links: dict[str, list[TcpProxy]] = {}
        self.down: list[int] = []  # ZooKeeper servers killed and not started again
        #: False when the cluster keeps nothing in the lab's ZooKeeper (Kafka 4 in KRaft mode): its topics are
        #: changed through the Admin API, and stopping the lab's ZooKeeper strikes nothing of the group's
        self.group_zookeeper = True
        self._workers: list[threading.Thread] = []
        self._closing = threading.Event()
        self._last_view: Group | None = None
        #: per fault action carried out: what, on what, when it struck and healed (seconds into the run)
        self.faults: list[dict] = []
        self.fault_errors: list[str] = []
        self._started_at = time.monotonic()

    # ------------------------------------------------------------------------------------ infrastructure
    def _start_infrastructure(self) -> None:
        """What the scenario needs: FaultLab's ensemble, broker (a process when an action kills it), the lab's
        trace and registry; a given ZooKeeper or cluster is used as Lab uses it."""
        self.lab_trace = TraceWriter(self.traces, GROUP, "lab")
        quiet = quiet_logger("zkconsumer.lab.faults.scenario.kazoo")
        if not self._zk_given:
            self.zk = ZooKeeperServer(servers=self.zk_servers, data_dir=self.out / "zookeeper").start()
            self.zk_connect = self.zk.connect_string + "/lab"
        # a long session: the lab's own view outlives every outage the scenario causes
        self._registry_cm = Registry.open(self.zk_connect, session_timeout_ms=30000, logger=quiet)
        self.registry = self._registry_cm.__enter__()
        for name in self.broker_proxied:  # before the broker starts: it binds a listener per proxied member
            self._broker_link(name)
        if not self._bootstrap_given:
            self.start_lab_broker()
        elif self.plan.mode is not LabMode.ZOOKEEPER:
            broker_version.require(self.bootstrap, (0, 9), f"lab --mode {self.plan.mode} (the broker's group "
                                                           "coordinator)")
        if self._bootstrap_given and not self.registry.broker_ids():
            self.group_zookeeper = False
            self._create_topics_by_admin()
        else:
            existing = set(self.registry.topics())
            for topic, n in self.plan.topics.items():
                if topic not in existing:
                    create_topic(self.registry, topic, n, self.replication_factor)
        for name in self.proxied:
            self._link(name)
        self._started_at = time.monotonic()

    def _link(self, name: str) -> None:
        """Put a proxy in front of every ZooKeeper server for member ``name`` (a member keeps its whole ensemble
        through the proxies: a node killed meanwhile is failed over as without them)."""
        hosts, chroot = split_connect(self.zk_connect)
        proxies = []
        for host in hosts.split(","):
            address, _, port = host.rpartition(":")
            proxy = TcpProxy((address or "127.0.0.1", int(port))).start()
            self.proxies[f"{name}/{host}"] = proxy  # FaultLab's cleanup stops them
            proxies.append(proxy)
        self.links[name] = proxies
        self.zk_override[name] = ",".join(p.address for p in proxies) + chroot

    def _broker_link(self, name: str) -> None:
        """A proxy for member ``name`` in front of a listener of the broker's own for it, which names the proxy
        as the broker in its Metadata and FindCoordinator answers: every connection the member makes to the
        broker (fetches, commits, the coordinator's heartbeats) then passes through the proxy, however it
        bootstraps, as with Kafka's per-listener ``advertised.listeners``."""
        port = free_port()
        proxy = TcpProxy(("127.0.0.1", port)).start()
        self.proxies[f"{name}/broker"] = proxy  # FaultLab's cleanup stops it
        self.broker_links[name] = proxy
        self.broker_listeners[name] = (port, proxy.address)

    def _consumer_args(self, name: str) -> list[str]:
        """The member's command line, its ZooKeeper connect string pointing at its proxies when it has some
        (wherever the string is: a flag's value for zkconsumer, a property for Kafka's own consumer), and its
        bootstrap at its broker proxy when it has one."""
        args = super(FaultLab, self)._consumer_args(name)
        override = self.zk_override.get(name)
        if override:
            args = [a.replace(self.zk_connect, override) for a in args]
        link = self.broker_links.get(name)
        if link is not None and "--bootstrap-server" in args:
            args[args.index("--bootstrap-server") + 1] = link.address
        return args

    def run(self, analyze: bool = False, master: str | None = None) -> dict:
        # the lab's own producer and monitors talk to servers the scenario kills on purpose: kafka-python's
        # connection errors would bury the run's view (the members' logs keep theirs, under <out>/logs)
        kafka_log = logging.getLogger("kafka")
        level = kafka_log.level
        kafka_log.setLevel(logging.CRITICAL)
        try:
            return super().run(analyze, master)
        finally:
            self._closing.set()
            for worker in self._workers:
                worker.join(60)
            self.__exit__(None, None, None)
            kafka_log.setLevel(level)

    def _zk_requests(self) -> int:
        """Packets the lab's ZooKeeper servers received so far (a restarted server counts from zero again)."""
        if self.zk is None:
            return 0
        return sum(packets_received("127.0.0.1", n.client_port) or 0 for n in self.zk.nodes if n.pid)

    # ------------------------------------------------------------------------------- what the view reads
    def _view(self, reg: Registry, elapsed: float) -> Group:
        """The live view; while ZooKeeper has no quorum or the broker is down it cannot be read: the last one
        stays up (the run must not stop because its picture of the group cannot be drawn)."""
        try:
            self._last_view = super()._view(reg, elapsed)
        except Exception:  # noqa: BLE001 - the outage the scenario causes
            if self._last_view is None:
                return Group("[dim](waiting for ZooKeeper and the broker)[/]")
        return self._last_view

    def committed(self, reg: Registry) -> dict[tuple[str, int], int]:
        """Nothing committed as far as the lab can tell while ZooKeeper or the broker cannot answer."""
        try:
            return super().committed(reg)
        except Exception:  # noqa: BLE001 - no quorum right now
            return {}

    # ------------------------------------------------------------------------------------------ producing
    def _producer(self) -> None:
        """Numbered records, as the lab's producer sends them, to every partition known when each is sent (topics
        created and partitions added during the run too). A send that fails (the broker down) is counted, not
        retried; at the end, once the fault actions still running are over, the lab takes the broker's log ends
        as what was produced: what the group must deliver is what the log holds."""
        # metadata every second: kafka-python refuses a send to a partition its metadata does not list yet and
        # asks for none by itself (5 minutes by default), so added partitions would get no record in the run
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5, max_block_ms=2000,
                                 retries=0, request_timeout_ms=3000, reconnect_backoff_max_ms=500,
                                 metadata_max_age_ms=1000, enable_idempotence=False,
                                 **broker_version.client_settings(self.bootstrap))
        try:
            initial = sorted(self.produced)
            for i in range(self.plan.initial_records * len(self.plan.topics)):
                self._send(producer, encode_value, initial[i % len(initial)])
            with contextlib.suppress(Exception):
                producer.flush(10)
            interval = 1.0 / self.plan.rate if self.plan.rate > 0 else None
            i = 0
            next_at = time.monotonic()
            while interval and not self._stop_producing.is_set():
                parts = sorted(self.produced)
                self._send(producer, encode_value, parts[i % len(parts)])
                i += 1
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    self._stop_producing.wait(delay)
            with contextlib.suppress(Exception):
                producer.flush(10)
        finally:
            with contextlib.suppress(Exception):
                producer.close(5)
        for worker in self._workers:  # a heal still under way: the log's end is read once the broker is back
            worker.join(25)
        with contextlib.suppress(Exception):
            self.produced.update(self.log_end_offsets())

    # ------------------------------------------------------------------------------------------- steps
    def not_applicable(self, step: Step) -> str | None:
        """The variant's reason first (compare's ``RunPlan.absent``), then what this run lacks for the step."""
        kind = step.action
        if dict(self.plan.absent).get(kind):
            return super().not_applicable(step)
        if kind.on_zookeeper_nodes and self.zk is None:
            return "the lab did not start this ZooKeeper: it stops only the servers of its own ensemble"
        if kind.on_zookeeper_nodes and not self.group_zookeeper:
            return "the group uses no ZooKeeper (Kafka 4 in KRaft mode): the lab's own has nothing of it"
        if kind.on_zookeeper_nodes and self.zk is not None and self.zk.servers == 1:
            return "one ZooKeeper server: stopping it is a quorum loss (zookeeper_nodes = 3 for an ensemble)"
        if kind.on_cluster and self.cluster is None:
            return ("no cluster of Apache Kafka's brokers was started for this run: compare starts one for "
                    "coordinator-kafka-3.9 and consumer-protocol-kafka-4")
        if kind.on_broker and self.broker_proc is None:
            return "the broker is not a process of the lab's own (a cluster given to it): it kills only its own"
        if kind.on_zookeeper_session and self.plan.mode is LabMode.COORDINATOR:
            return "a coordinator-mode member has no ZooKeeper session or link"
        if kind in (ActionKind.CUT_ZK, ActionKind.SLOW_ZK) and step.consumer not in self.links:
            return f"{step.consumer} does not reach ZooKeeper through a proxy"
        if kind.on_broker_link and self._bootstrap_given:
            return ("the broker is not the lab's own (a cluster given to it): the lab gives a member a listener of "
                    "its own only on its broker")
        if kind.on_broker_link and step.consumer not in self.broker_links:
            return f"{step.consumer} does not reach the broker through a proxy"
        if kind is ActionKind.CREATE_TOPIC and not self.plan.subscribes_by_regex:
            return "the members subscribe to topics by name here: nobody would consume a new one"
        return super().not_applicable(step)

    def perform(self, step: Step) -> None:
        """A fault or topic action on a thread of its own (a fault lasts seconds; the schedule goes on meanwhile);
        the others as Lab does them."""
        if step.action.needs_fault_lab and not self.not_applicable(step):
            if step.action.on_topics:
                self.stepped(step)
            worker = threading.Thread(target=self._carry_out, args=(step,), daemon=True,
                                      name=f"lab-{step.action}-{step.at:.0f}")
            self._workers.append(worker)
            worker.start()
            return
        super().perform(step)

    def _carry_out(self, step: Step) -> None:
        try:
            STEP_HANDLERS[step.action](self, step)
        except Exception as e:  # noqa: BLE001 - reported in the summary, the run goes on
            text = f"{step.action} {step.consumer}".strip() + f" at {step.at:.1f} s: {type(e).__name__}: {e}"
            self.fault_errors.append(text)
            self._event(f"[red]failed[/] {text}")

    def _since_start(self) -> float:
        return round(time.monotonic() - self._started_at, 2)

    def injected(self, fault: str, target: str = "", text: str = "") -> None:
        super().injected(fault, target, text)
        self.faults.append({"fault": fault, "target": target, "injected_s": self._since_start(), "healed_s": None})

    def healed(self, fault: str, text: str = "", target: str = "") -> None:
        super().healed(fault, text, target)
        open_one = next((f for f in self.faults if f["fault"] == fault and f["healed_s"] is None
                         and (not target or f["target"] == target)), None)
        if open_one is not None:
            open_one["healed_s"] = self._since_start()

    def _hold(self, seconds: float) -> None:
        """The fault's own duration (not a wait for a condition): cut short only when the lab closes."""
        self._closing.wait(seconds)

    # ------------------------------------------------------------------------------------ the faults
    def _cut(self, name: str, seconds: float) -> None:
        self.injected(str(ActionKind.CUT_ZK), f"{GROUP}_{name}",
                      f"{name}'s ZooKeeper link blackholed for {seconds:g} s (it still fetches)")
        for proxy in self.links[name]:
            proxy.set_mode(LinkMode.BLACKHOLE)
        self._hold(seconds)
        for proxy in self.links[name]:
            proxy.set_mode(LinkMode.PASS)
        self.healed(str(ActionKind.CUT_ZK), f"{name}'s ZooKeeper link passes again", f"{GROUP}_{name}")

    def _slow(self, name: str, seconds: float, latency_ms: float) -> None:
        self.injected(str(ActionKind.SLOW_ZK), f"{GROUP}_{name}",
                      f"{name}'s ZooKeeper link delayed {latency_ms:g} ms each way for {seconds:g} s")
        for proxy in self.links[name]:
            proxy.set_latency(latency_ms)
        self._hold(seconds)
        for proxy in self.links[name]:
            proxy.set_latency(0)
        self.healed(str(ActionKind.SLOW_ZK), f"{name}'s ZooKeeper link at full speed again", f"{GROUP}_{name}")

    def _cut_broker(self, name: str, seconds: float) -> None:
        link = self.broker_links[name]
        self.injected(str(ActionKind.CUT_BROKER), f"{GROUP}_{name}",
                      f"{name}'s broker link blackholed for {seconds:g} s (its ZooKeeper session goes on)")
        link.set_mode(LinkMode.BLACKHOLE)
        self._hold(seconds)
        link.set_mode(LinkMode.PASS)
        self.healed(str(ActionKind.CUT_BROKER), f"{name}'s broker link passing again", f"{GROUP}_{name}")

    def _slow_broker(self, name: str, seconds: float, latency_ms: float) -> None:
        link = self.broker_links[name]
        self.injected(str(ActionKind.SLOW_BROKER), f"{GROUP}_{name}",
                      f"{name}'s broker link delayed {latency_ms:g} ms each way for {seconds:g} s")
        link.set_latency(latency_ms)
        self._hold(seconds)
        link.set_latency(0)
        self.healed(str(ActionKind.SLOW_BROKER), f"{name}'s broker link at full speed again", f"{GROUP}_{name}")

    def _session_of(self, name: str) -> int | None:
        assert self.registry is not None
        return self.registry.registration_session(GROUP, f"{GROUP}_{name}")

    def _expire(self, name: str, attempts: int = 5) -> None:
        """Close ``name``'s session from a twin client opened on its id and password, as kazoo's and Curator's
        tests expire sessions. Opening it moves the session's connection to the twin, and the member's client may
        take it back before the twin's close goes out: the move is tried again until the session is gone."""
        session = self._session_of(name)
        if not session:
            raise FaultTimeout(f"{name} is not registered: no session to expire")
        self.injected(str(ActionKind.EXPIRE), f"{GROUP}_{name}", f"{name}'s session 0x{session:x} expired from "
                                                                  "outside")
        hosts, _chroot = split_connect(self.zk_connect)  # no chroot: no round trip before the close
        quiet = quiet_logger("zkconsumer.lab.faults.scenario.twin")
        for _ in range(attempts):
            twin = KazooClient(hosts=hosts, client_id=(session, session_password(session)), logger=quiet)
            try:
                twin.start(10)
            except (KazooException, KazooTimeoutError):
                pass  # the member took the session back first
            finally:
                with contextlib.suppress(Exception):
                    twin.stop()
                    twin.close()
            with contextlib.suppress(FaultTimeout):
                self.wait(lambda: self._session_of(name) != session, 6, f"{name}'s session to end")
                self.healed(str(ActionKind.EXPIRE), f"{name}'s session 0x{session:x} gone from the server",
                             f"{GROUP}_{name}")
                return
        raise FaultTimeout(f"{name}'s session 0x{session:x} did not end after {attempts} attempts")

    def _modes(self) -> dict[int, str | None]:
        assert self.zk is not None
        return {s["server"]: s.get("mode") for s in self.zk.status() if s["server"] not in self.down}

    def _kill_zk(self, node: int | str | None, seconds: float) -> None:
        assert self.zk is not None
        if node in (LEADER, FOLLOWER):
            role = node
            node = self.wait(lambda: next((n for n, m in self._modes().items() if m == role), None), 30, f"a {role}")
        assert isinstance(node, int)
        self.injected(str(ActionKind.KILL_ZK), f"zk{node}", f"ZooKeeper node {node} killed with SIGKILL")
        self.zk.stop_node(node, kill=True)
        self.down.append(node)
        if seconds:
            self._hold(seconds)
            self._restart_zk([node])

    def _restart_zk(self, nodes: list[int]) -> None:
        assert self.zk is not None
        for node in nodes:
            if node not in self.down:
                raise FaultTimeout(f"ZooKeeper node {node} is not down (down: {self.down or 'none'})")
            self.zk.start_node(node)  # returns once every running node serves again
            self.down.remove(node)
            self.healed(str(ActionKind.KILL_ZK), f"ZooKeeper node {node} back")

    def _quorum_loss(self, seconds: float) -> None:
        """A majority of the servers killed (all but the first ones), held down ``seconds``, started again."""
        assert self.zk is not None
        victims = [n.server_id for n in self.zk.nodes][-(self.zk.servers // 2 + 1):]
        self.injected(str(ActionKind.QUORUM_LOSS), ",".join(f"zk{n}" for n in victims),
                      f"ZooKeeper nodes {', '.join(map(str, victims))} killed: no quorum for {seconds:g} s")
        for node in victims:
            self.zk.stop_node(node, kill=True)
            self.down.append(node)
        self._hold(seconds)
        for node in victims:
            self._start_quietly(node)
        self.zk.wait_serving(60)
        self.healed(str(ActionKind.QUORUM_LOSS), "quorum back, every server serving")

    def _start_quietly(self, node: int) -> None:
        """Start a server without waiting for it alone to serve: a minority of an ensemble serves nobody until
        enough of the others are back (the caller then waits for all of them)."""
        assert self.zk is not None
        with contextlib.suppress(Exception):
            self.zk.start_node(node, timeout=1.0)
        self.down.remove(node)

    def _kill_broker(self, seconds: float) -> None:
        self.injected(str(ActionKind.KILL_BROKER), "broker-0", "broker killed with SIGKILL")
        self.kill_broker(hard=True)
        if seconds:
            self._hold(seconds)
            self._restart_broker()

    def _restart_broker(self) -> None:
        """The broker started again on its port and log; it registers once its former registration (held by the
        killed process's session until it expires) is gone."""
        assert self.registry is not None
        self.start_broker()
        self.wait(lambda: self.registry.broker_ids(), 60, "the broker registered again")
        self.healed(str(ActionKind.KILL_BROKER), "broker restarted")

    def _kill_coordinator(self, seconds: float) -> None:
        """SIGKILL of the broker FindCoordinator names for the group now. Healed when another broker answers as
        the group's coordinator (the failover: from then on the group can be whole again); the killed broker is
        started again on its port and log ``seconds`` after the kill, to end the run with the cluster whole."""
        assert self.cluster is not None
        node = self.cluster.coordinator(GROUP)
        target = f"broker-{node}"
        killed_at = time.monotonic()
        self.injected(str(ActionKind.KILL_COORDINATOR), target,
                      f"the group's coordinator, broker {node} of {len(self.cluster.brokers)}, killed with SIGKILL")
        self.cluster.kill(node)
        after = self.cluster.coordinator(GROUP, other_than=node)
        self.healed(str(ActionKind.KILL_COORDINATOR), f"the coordinator moved from broker {node} to broker {after} "
                    f"in {time.monotonic() - killed_at:.1f} s", target=target)
        self._hold(max(0.0, seconds - (time.monotonic() - killed_at)))
        self.cluster.restart(node)
        self._event(f"broker {node} restarted")

    # ------------------------------------------------------------------------------------------- topics
    def _admin(self) -> AdminClient:
        return AdminClient(bootstrap_servers=self.bootstrap, client_id="zkconsumer-lab")

    def _by_admin(self) -> bool:
        """Topic changes go through the Admin API on a cluster given to the lab (Kafka's controller then writes
        ZooKeeper itself, keeping what it keeps there, topic ids since 2.8, which a rewrite of the topic's node in
        0.8's format would drop), through ZooKeeper as Kafka 0.8's tools did on the lab's own broker and on a cluster
        too old for the API (CreatePartitions: Kafka 1.0)."""
        if not self._bootstrap_given:
            return False
        return not self.group_zookeeper or broker_version.supports(broker_version.api_version(self.bootstrap),
                                                                   (1, 0))

    def _create_topic(self, topic: str, partitions: int) -> None:
        """The topic created (see :meth:`_by_admin` for how); produced to from now on, since the members' whitelist
        matches it."""
        if not self._by_admin():
            assert self.registry is not None
            create_topic(self.registry, topic, partitions, self.replication_factor)
        else:
            admin = self._admin()
            try:
                admin.create_topics([NewTopic(topic, partitions, self.replication_factor)])
            finally:
                admin.close()
        for p in range(partitions):
            self.produced.setdefault((topic, p), 0)
        self._event(f"topic {topic} created with {partitions} partitions")

    def _add_partitions(self, topic: str, total: int) -> None:
        if not self._by_admin():
            assert self.registry is not None
            before = len(self.registry.topic(topic).partitions)  # type: ignore[union-attr]
            add_partitions(self.registry, topic, total)
        else:
            admin = self._admin()
            try:
                before = len(admin.describe_topics([topic])[0]["partitions"])
                admin.create_partitions({topic: NewPartitions(total)})
            finally:
                admin.close()
        if any(t == topic for t, _ in self.produced):  # consumed: produced to as well
            for p in range(before, total):
                self.produced.setdefault((topic, p), 0)
        self._event(f"topic {topic} grown from {before} to {total} partitions")

    # -------------------------------------------------------------------------------------------- summary
    def summarize(self) -> dict:
        summary = super().summarize()
        summary["faults"] = [dict(f) for f in self.faults]
        summary["fault_errors"] = list(self.fault_errors)
        summary["zookeeper_servers"] = self.zk.servers if self.zk is not None else None
        return summary


class CutAnyLab(ScenarioLab):
    """A ScenarioLab whose every member reaches ZooKeeper through a link of its own, made as the member starts
    (``lab --ui``: the page's cut button works on any member, those the page adds too)."""

    def _consumer_args(self, name: str) -> list[str]:
        if name not in self.links:
            self._link(name)
        return super()._consumer_args(name)
