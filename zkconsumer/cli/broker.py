"""``zkconsumer broker start|stop|status``: run the local Kafka-protocol broker against a ZooKeeper.

In the foreground the broker runs until Ctrl-C or SIGTERM. ``--daemon`` re-runs the same command as a
detached process logging to ``broker.log`` in the data directory; either way a state file there
(``zkconsumer-broker.json``: pid, address) lets ``broker stop --data-dir D`` find it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from zkconsumer.broker import Broker
from zkconsumer.broker.state import STATE_FILE, read_state, write_state  # noqa: F401 - read_state re-exported
from zkconsumer.cli.output import CliError, console
from zkconsumer.cli.topics import add_zookeeper_arg
from zkconsumer.log.storage import DataDirInUse
from zkconsumer.zk.registry import BrokerAlreadyRegistered, ZkConnectError
from zkconsumer.zk.server import pid_alive

LOG_FILE = "broker.log"


def default_data_dir(broker_id: int) -> Path:
    return Path(os.environ.get("ZKCONSUMER_HOME", Path.home() / ".zkconsumer")) / f"broker-{broker_id}"


def register(sub: argparse._SubParsersAction) -> None:
    broker = sub.add_parser("broker", help="run a local Kafka-protocol broker registered in ZooKeeper")
    bsub = broker.add_subparsers(dest="broker_command", metavar="ACTION", required=True)

    start = bsub.add_parser("start", help="start a broker (foreground until Ctrl-C, or --daemon)")
    add_zookeeper_arg(start)
    start.add_argument("--broker-id", type=int, default=0)
    start.add_argument("--host", default="127.0.0.1", help="address to listen on and register")
    start.add_argument("--port", type=int, default=0, help="0 picks a free port (the default)")
    start.add_argument("--data-dir", type=Path, help="log directory (default $ZKCONSUMER_HOME/broker-<id>)")
    start.add_argument("--flush-interval-ms", type=int, default=None,
                       help="0: fsync every append before acknowledging it; N: every N ms; unset: leave it to "
                            "the OS")
    start.add_argument("--auto-create-topics", action="store_true",
                       help="create unknown topics asked for in Metadata requests (off, as topics come from "
                            "ZooKeeper)")
    start.add_argument("--num-partitions", type=int, default=1, help="partitions of auto-created topics")
    start.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                       help="a broker property of the group coordinator (Kafka's names): "
                            + ", ".join(GROUP_PROPERTIES))
    start.add_argument("--socket-request-max-bytes", type=int, default=100 * 1024 * 1024,
                       help="Kafka's socket.request.max.bytes: a request claiming more closes its connection")
    start.add_argument("--connections-max-idle-ms", type=int, default=600_000,
                       help="Kafka's connections.max.idle.ms: a connection silent that long is closed")
    start.add_argument("--listener", action="append", default=[], metavar="NAME=PORT,HOST:PORT",
                       help="a further listener (Kafka's listeners and advertised.listeners for one more name): "
                            "bound to PORT, it names this broker HOST:PORT in Metadata and FindCoordinator answers "
                            "(a proxy there carries one client's every connection)")
    start.add_argument("--daemon", action="store_true", help="run in the background")
    start.add_argument("--timeout", type=float, default=60.0, help="seconds --daemon waits for the broker")
    start.set_defaults(func=cmd_start)

    stop = bsub.add_parser("stop", help="stop the broker started from a data directory")
    stop.add_argument("--data-dir", type=Path, help="as given to start (default $ZKCONSUMER_HOME/broker-0)")
    stop.add_argument("--timeout", type=float, default=30.0, help="seconds to wait before SIGKILL")
    stop.set_defaults(func=cmd_stop)

    status = bsub.add_parser("status", help="show the broker started from a data directory")
    status.add_argument("--data-dir", type=Path)
    status.set_defaults(func=cmd_status)


# ---------------------------------------------------------------------------------------------- state file

# -------------------------------------------------------------------------------------------------- start

def cmd_start(args: argparse.Namespace) -> int:
    data_dir = (args.data_dir or default_data_dir(args.broker_id)).resolve()
    state = read_state(data_dir)
    if state and pid_alive(int(state.get("pid", -1))):
        raise CliError(f"a broker (pid {state['pid']}, {state.get('bootstrap')}) already runs from {data_dir}")
    if args.daemon:
        return _start_daemon(args, data_dir)
    return _run_foreground(args, data_dir)


#: Broker properties of the group coordinator: Kafka name → Broker keyword (all integers), with Kafka's defaults.
GROUP_PROPERTIES = {
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "log.cleaner.backoff.ms": "log_cleaner_backoff_ms",
    # the broker's default of the topics' delete.retention.ms; here it applies to __consumer_offsets
    "log.cleaner.delete.retention.ms": "offsets_delete_retention_ms",
}


def group_options(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in GROUP_PROPERTIES:
            raise CliError(f"--property wants KEY=VALUE with KEY one of {', '.join(GROUP_PROPERTIES)}; got {item!r}")
        try:
            out[GROUP_PROPERTIES[key]] = int(value)
        except ValueError:
            raise CliError(f"{key} must be an integer, got {value!r}") from None
        if out[GROUP_PROPERTIES[key]] < (0 if key == "group.initial.rebalance.delay.ms" else 1):
            raise CliError(f"{key} must be positive, got {value}")
    return out


def listener_options(items: list[str]) -> dict[str, tuple[int, str]]:
    """``--listener NAME=PORT,HOST:PORT`` values as Broker takes them."""
    out: dict[str, tuple[int, str]] = {}
    for item in items:
        name, eq, rest = item.partition("=")
        port, comma, advertised = rest.partition(",")
        host, colon, aport = advertised.rpartition(":")
        if not (eq and comma and colon and name.strip() and host and port.isdigit() and aport.isdigit()):
            raise CliError(f"--listener wants NAME=PORT,HOST:PORT (e.g. c1=41234,127.0.0.1:51234); got {item!r}")
        if name.strip() in out:
            raise CliError(f"--listener {name.strip()!r} is given twice")
        out[name.strip()] = (int(port), advertised)
    return out


def _run_foreground(args: argparse.Namespace, data_dir: Path) -> int:
    broker = Broker(args.zookeeper, broker_id=args.broker_id, port=args.port, data_dir=data_dir, host=args.host,
                    flush_interval_ms=args.flush_interval_ms, auto_create_topics=args.auto_create_topics,
                    num_partitions=args.num_partitions, socket_request_max_bytes=args.socket_request_max_bytes,
                    connections_max_idle_ms=args.connections_max_idle_ms, listeners=listener_options(args.listener),
                    **group_options(args.property))
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        try:
            broker.start()
        except (ZkConnectError, BrokerAlreadyRegistered, DataDirInUse, OSError) as e:
            raise CliError(str(e)) from None
        write_state(data_dir, {"pid": os.getpid(), "broker_id": args.broker_id, "host": args.host,
                                "port": broker.port, "bootstrap": broker.bootstrap, "zookeeper": args.zookeeper,
                                "data_dir": str(data_dir)})
        console.print(f"broker {args.broker_id} serving at {broker.bootstrap} (data in {data_dir})",
                      highlight=False, soft_wrap=True)
        sys.stdout.flush()
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        broker.stop()
        state = read_state(data_dir)
        if state and state.get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                (data_dir / STATE_FILE).unlink()


def _start_daemon(args: argparse.Namespace, data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "zkconsumer", "broker", "start", "--zookeeper", args.zookeeper,
           "--broker-id", str(args.broker_id), "--host", args.host, "--port", str(args.port),
           "--data-dir", str(data_dir), "--num-partitions", str(args.num_partitions),
           "--socket-request-max-bytes", str(args.socket_request_max_bytes),
           "--connections-max-idle-ms", str(args.connections_max_idle_ms)]
    if args.flush_interval_ms is not None:
        cmd += ["--flush-interval-ms", str(args.flush_interval_ms)]
    if args.auto_create_topics:
        cmd.append("--auto-create-topics")
    group_options(args.property)  # refuse a bad property or listener before forking
    listener_options(args.listener)
    for item in args.property:
        cmd += ["--property", item]
    for item in args.listener:
        cmd += ["--listener", item]
    log_path = data_dir / LOG_FILE
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        state = read_state(data_dir)
        if state and state.get("pid") == proc.pid:
            console.print(f"broker {args.broker_id} serving at {state['bootstrap']} (pid {proc.pid}, log "
                          f"{log_path})", highlight=False, soft_wrap=True)
            return 0
        if proc.poll() is not None:
            raise CliError(f"the broker exited with code {proc.returncode}; see {log_path}:\n"
                           + _tail(log_path))
        time.sleep(0.1)
    proc.terminate()
    raise CliError(f"the broker did not start within {args.timeout:.0f}s; see {log_path}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------- stop/status

def cmd_stop(args: argparse.Namespace) -> int:
    data_dir = (args.data_dir or default_data_dir(0)).resolve()
    state = read_state(data_dir)
    if state is None:
        raise CliError(f"no broker was started from {data_dir} (no {STATE_FILE})")
    pid = int(state["pid"])
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.05)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            console.print(f"broker pid {pid} did not stop within {args.timeout:.0f}s: killed", highlight=False)
    with contextlib.suppress(FileNotFoundError):
        (data_dir / STATE_FILE).unlink()
    console.print(f"broker {state.get('broker_id', '?')} ({state.get('bootstrap')}) stopped", highlight=False)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    data_dir = (args.data_dir or default_data_dir(0)).resolve()
    state = read_state(data_dir)
    if state is None or not pid_alive(int(state.get("pid", -1))):
        console.print(f"no broker running from {data_dir}", highlight=False)
        return 1
    console.print(f"broker {state['broker_id']} serving at {state['bootstrap']} (pid {state['pid']})",
                  highlight=False)
    return 0
