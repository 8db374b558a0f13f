"""``zkconsumer kafka fetch|info|broker|tool``: Apache Kafka's own jars and processes, the project's judge."""

from __future__ import annotations

import argparse
import subprocess
import threading

from zkconsumer.apache_kafka.jars import DEFAULT_VERSION, KNOWN_VERSIONS, KafkaDistError, cache_root, cached, fetch
from zkconsumer.apache_kafka.processes import KafkaBroker, KafkaProcessError, jvm_command
from zkconsumer.cli.output import CliError, console


def register(sub: argparse._SubParsersAction) -> None:
    kafka = sub.add_parser("kafka", help="Apache Kafka's own jars (fetched by Maven): its 0.8.2.2 broker and tools")
    ksub = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)

    def version(p: argparse.ArgumentParser) -> None:
        p.add_argument("--version", choices=KNOWN_VERSIONS, default=DEFAULT_VERSION, help="Kafka version")

    f = ksub.add_parser("fetch", help="fetch Kafka's jars with Maven into the cache and compile the consumer "
                                      "harness (make setup does it)")
    version(f)
    f.set_defaults(func=cmd_fetch)

    i = ksub.add_parser("info", help="where Kafka's jars come from (ZKCONSUMER_KAFKA_HOME or the cache)")
    version(i)
    i.set_defaults(func=cmd_info)

    b = ksub.add_parser("broker", help="run Kafka's own broker (kafka.Kafka) registered in ZooKeeper, until Ctrl-C")
    b.add_argument("--zookeeper", "--zookeeper.connect", dest="zookeeper", required=True, metavar="HOST:PORT[/CHROOT]")
    b.add_argument("--broker-id", "--broker.id", dest="broker_id", type=int, default=0)
    b.add_argument("--port", type=int, default=9092)
    b.add_argument("--data-dir", help="log.dirs and the broker's own log (default: a temporary directory)")
    b.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="any server.properties setting, e.g. num.partitions=4")
    version(b)
    b.set_defaults(func=cmd_broker)

    t = ksub.add_parser("tool", help="run one of Kafka's tools, e.g. 'kafka tool ConsumerOffsetChecker -- --group g "
                                     "--zookeeper localhost:2181'")
    t.add_argument("tool", help="a class under kafka.tools (ConsumerOffsetChecker, VerifyConsumerRebalance, "
                                "ExportZkOffsets, ImportZkOffsets, ...) or a fully qualified class")
    t.add_argument("args", nargs=argparse.REMAINDER, help="the tool's own arguments (after --)")
    version(t)
    t.set_defaults(func=cmd_tool)


def _dist(version: str):
    try:
        dist = cached(version)
        if dist is None:
            with console.status(f"fetching Kafka {version}'s jars with Maven into {cache_root()}..."):
                dist = fetch(version)
        return dist
    except KafkaDistError as e:
        raise CliError(str(e)) from None


def cmd_fetch(args: argparse.Namespace) -> int:
    dist = _dist(args.version)
    try:
        classes = dist.harness_classes()
    except KafkaDistError as e:
        raise CliError(str(e)) from None
    console.print(f"Kafka {dist.version}: {len(dist.jars)} jars from {dist.source}; consumer harness in {classes}",
                  highlight=False)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    try:
        dist = cached(args.version)
    except KafkaDistError as e:
        raise CliError(str(e)) from None
    if dist is None:
        console.print(f"Kafka {args.version}: not fetched yet (cache {cache_root()}); 'zkconsumer kafka fetch' "
                      "or set ZKCONSUMER_KAFKA_HOME to an unpacked release", highlight=False)
        return 1
    console.print(f"Kafka {dist.version} from {dist.source}", highlight=False)
    for jar in dist.jars:
        console.print(f"  {jar}", highlight=False)
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    props: dict[str, object] = {}
    for item in args.property:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CliError(f"--property wants KEY=VALUE, got {item!r}")
        props[key] = value
    _dist(args.version)
    broker = KafkaBroker(args.zookeeper, broker_id=args.broker_id, port=args.port, data_dir=args.data_dir,
                         version=args.version, properties=props)
    try:
        with console.status(f"starting Kafka {args.version}'s broker..."):
            broker.start()
    except KafkaProcessError as e:
        raise CliError(str(e)) from None
    console.print(f"Kafka {args.version} broker {args.broker_id} serving on {broker.bootstrap}, registered in "
                  f"{args.zookeeper}; log {broker.log_file}. Ctrl-C stops it.", highlight=False)
    try:
        assert broker.proc is not None
        while broker.proc.poll() is None:
            threading.Event().wait(0.5)
        raise CliError(f"the broker exited with code {broker.proc.returncode}; log {broker.log_file}")
    finally:
        broker.stop()


def cmd_tool(args: argparse.Namespace) -> int:
    dist = _dist(args.version)
    rest = args.args[1:] if args.args[:1] == ["--"] else args.args
    tool = args.tool if "." in args.tool else f"kafka.tools.{args.tool}"
    return subprocess.call(jvm_command(dist, tool, rest))
