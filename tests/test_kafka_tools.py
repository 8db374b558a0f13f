"""Apache Kafka 0.8.2.2's own group tools and zkconsumer's, on the same ZooKeeper trees: Kafka is the judge.

Kafka's ``ConsumerOffsetChecker``, ``VerifyConsumerRebalance``, ``ExportZkOffsets`` and ``ImportZkOffsets`` run
as JVMs from the published jars (zkconsumer/apache_kafka), ours through the CLI, against

* a group of zkconsumer members (range and roundrobin, three members, several streams) whose records are in
  Kafka 0.8.2.2's own broker; the members do not fetch (``zkconsumer.fetch.enable=false``): each commits
  offsets for the partitions it owns through its own offset store (``member.offsets.commit``, the path its
  commits take), so lag, ``-1`` and a negative lag are chosen, not raced;
* a group of Kafka's own 0.8.2.2 high-level consumers that consumed from that broker with auto-commit on.

Rows, verdicts and files are compared whole: equal, or the difference asserted exactly (docs/profiles.md,
"Kafka 0.8.2.2's own tools on zkconsumer's trees"). One Kafka broker serves the module from its own chroot;
each test has its own topics and groups there, and the imports their own fresh chroots.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import consumer, fresh_chroot, wait_until
from kafka import KafkaProducer

from zkconsumer.apache_kafka.jars import fetch
from zkconsumer.apache_kafka.processes import HighLevelConsumers, KafkaBroker, jvm_command, run_tool, write_log4j
from zkconsumer.assignment.assignors import AssignmentContext, TopicPartition, assign
from zkconsumer.cli import main
from zkconsumer.tools.groups import subscribed_topics
from zkconsumer.zk.layout import TopicAssignment
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

pytestmark = pytest.mark.slow

#: ConsumerOffsetChecker's println format
FMT = "%-15s %-30s %-3s %-15s %-15s %-15s %s"
HEADER = FMT % ("Group", "Topic", "Pid", "Offset", "logSize", "Lag", "Owner")


@pytest.fixture(scope="module")
def kafka(zk_server) -> Iterator[KafkaBroker]:
    """Kafka 0.8.2.2's broker for the whole module, registered in a chroot of its own."""
    with KafkaBroker(fresh_chroot(zk_server.connect_string, "kafka_tools")) as broker:
        yield broker


@pytest.fixture
def reg(kafka: KafkaBroker) -> Iterator[Registry]:
    with Registry.open(kafka.zk_connect) as r:
        yield r


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=2, api_version=(0, 8, 2))
    for p, n in counts.items():
        for i in range(n):
            producer.send(topic, value=b"%d" % i, partition=p)
    producer.flush()
    producer.close()


def kafka_tool(tool: str, *args: str) -> subprocess.CompletedProcess:
    """One of Kafka's tools, its log4j output discarded (the results are on stdout)."""
    return run_tool(tool, list(args))


def kafka_checker(zk: str, group: str, *more: str) -> list[str]:
    # --retry.backoff.ms: the first query of the module waits for the broker to create its offsets topic
    done = kafka_tool("ConsumerOffsetChecker", "--zookeeper", zk, "--group", group, "--retry.backoff.ms", "100",
                      *more)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def kafka_verify(zk: str, group: str, tmp_path: Path) -> tuple[list[str], list[str]]:
    """VerifyConsumerRebalance's stdout and the ERROR lines it logs (through log4j, so a file is configured)."""
    log_file = tmp_path / f"verify-{group}.log"
    log4j = write_log4j(tmp_path / f"verify-{group}.log4j.properties", log_file, level="ERROR")
    done = subprocess.run(jvm_command(fetch(), "kafka.tools.VerifyConsumerRebalance",
                                      ["--zookeeper.connect", zk, "--group", group], log4j),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr  # Kafka's verify exits 0 whatever it finds
    errors = []
    for line in (log_file.read_text().splitlines() if log_file.exists() else []):
        m = re.fullmatch(r"\[[^]]*\] ERROR (.*) \(kafka\.tools\.VerifyConsumerRebalance\$\)", line)
        errors.append(m.group(1) if m else line)
    return done.stdout.splitlines(), errors


def ours(capsys, *argv: str) -> tuple[int, list[str], str]:
    """zkconsumer's CLI in this process: exit code, stdout lines, stderr."""
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def kafkas_verify_errors(group: str, owners: dict[tuple[str, int], str]) -> list[str]:
    """What 0.8.2.2's VerifyConsumerRebalance logs for a group whose every partition is owned by a live thread:
    it compares the owner nodes' names (strings) with partition ids (ints), and the owner (a string) with the
    members' thread ids (``ConsumerThreadId`` objects), so both checks fail for every partition."""
    return sorted(line for (t, p), owner in owners.items()
                  for line in (f"No owner for partition [{t},{p}]",
                               f"Owner {owner} for partition [{t},{p}] is not a valid member of consumer group "
                               f"{group}"))


def expected_owners(reg: Registry, group: str, strategy: str) -> dict[tuple[str, int], str]:
    """The owner nodes the registered members must end up with (zkconsumer's assignors, which
    tests/test_kafka_mixed_groups.py holds to Kafka's): waiting for them, not for a count, waits out a member
    still rebalancing, so the tree holds still while both tools read it."""
    subs = subscribed_topics(reg, group)
    topics = sorted({t for s in subs.values() for t in s})
    return dict(assign(strategy, AssignmentContext(subs, reg.partitions_for_topics(topics))).owners)


def zk_tree(zk: str) -> dict[str, tuple[bytes | None, int]]:
    """Every node under the chroot: path → (data as read, with None for a node created without data; version)."""
    out = {}
    with Registry.open(zk) as r:
        todo = ["/"]
        while todo:
            path = todo.pop()
            data, stat = r.zk.get(path)
            out[path] = (data, stat.version)
            todo += [f"{path.rstrip('/')}/{child}" for child in r.zk.get_children(path)]
    return out


# ----------------------------------------------------------------------------------- zkconsumer's members

SUBSCRIPTIONS = {"range": [{"a": 2, "b": 1, "c": 1}, {"a": 2, "b": 1, "c": 1}, {"a": 1, "b": 1, "c": 1}],
                 # roundrobin (0.8.2): every member the same topics, the same stream count for each
                 "roundrobin": [{"a": 2, "b": 2, "c": 2}] * 3}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_kafkas_tools_on_a_zkconsumer_group(kafka: KafkaBroker, reg: Registry, strategy: str, tmp_path: Path,
                                            capsys) -> None:
    zk = kafka.zk_connect
    group = f"zk-{strategy}"
    a, b, c = (f"{strategy[:2]}-{name}" for name in "abc")
    create_topic(reg, a, 12)  # 12 partitions: ZooKeeper lists partition 11 right after 0
    create_topic(reg, b, 3)
    # partition 0's only replica is a broker that never registered: no leader, ever
    reg.create_topic_node(c, TopicAssignment({0: [7], 1: [kafka.broker_id]}))
    kafka.wait_topic(a, 12)
    kafka.wait_topic(b, 3)
    wait_until(lambda: reg.read(f"/brokers/topics/{c}/partitions/1/state"), message="the leader of c/1")
    produce(kafka.bootstrap, a, {0: 10, 1: 4, 2: 7, 5: 3, 11: 5})
    produce(kafka.bootstrap, b, {0: 5, 1: 6, 2: 1})
    produce(kafka.bootstrap, c, {1: 2})

    members = [consumer(zk, group, f"m{i}", partition_assignment_strategy=strategy)
               for i in range(len(SUBSCRIPTIONS[strategy]))]
    try:
        for member, subscription in zip(members, SUBSCRIPTIONS[strategy], strict=True):
            member.create_message_streams({{"a": a, "b": b, "c": c}[t]: n for t, n in subscription.items()})
        expected = expected_owners(reg, group, strategy)
        assert len(expected) == 17

        def settled() -> bool:
            views = {tp: tid for m in members for tp, tid in m.owned_partitions().items()}
            return reg.owners(group) == expected == views

        wait_until(settled, message=f"the {strategy} assignment owned")
        owners = reg.owners(group)
        # each member commits for what it owns: lag 7, 0, a negative lag (an offset past the log end), lag 4;
        # b/1 and b/2 have no offset under an existing offsets node (-1); c/0 has no leader
        commits = {(a, 0): 3, (a, 1): 4, (a, 2): 9, (a, 11): 1, (b, 0): 2, (c, 1): 1}
        for member in members:
            mine = {TopicPartition(*tp): v for tp, v in commits.items() if tp in member.owned_partitions()}
            assert member.offsets.commit(mine) == mine
        assert reg.offsets(group) == commits

        # ConsumerOffsetChecker: the same rows, the same BROKER INFO
        code, rows, _ = ours(capsys, "offset-checker", "--zookeeper", zk, "--group", group, "--broker-info")
        assert code == 0
        theirs = kafka_checker(zk, group, "--broker-info")
        # Kafka asked the broker's offset manager first; for a partition without a leader it answered an error,
        # which Kafka printed before the header. Offsets live in ZooKeeper only here: we ask nobody else.
        assert theirs == [f"Could not fetch offset for [{c},0] due to kafka.common.UnknownTopicOrPartitionException."
                          ] + rows
        row = {(t, p): FMT % (group, t, p, *rest, owners[(t, p)]) for (t, p), rest in {
            (a, 0): (3, 10, 7), (a, 1): (4, 4, 0), (a, 2): (9, 7, -2), (a, 3): (-1, 0, "unknown"),
            (a, 11): (1, 5, 4), (b, 1): (-1, 6, "unknown"), (c, 1): (1, 2, 1)}.items()}
        assert rows[0] == HEADER and set(row.values()) < set(rows)
        assert f"No broker for partition {c} - 0" in rows
        assert rows[-2:] == ["BROKER INFO", f"{kafka.broker_id} -> {kafka.bootstrap}"]
        # --topic instead of the owners' topics
        code, some, _ = ours(capsys, "offset-checker", "--zookeeper", zk, "--group", group, "--topic", f"{b},{a}")
        assert code == 0 and some == kafka_checker(zk, group, "--topic", f"{b},{a}") and len(some) == 16

        # VerifyConsumerRebalance: Kafka fails every correctly owned group (docs/profiles.md "Tools")
        code, verdict, _ = ours(capsys, "verify", "--zookeeper", zk, "--group", group)
        assert (code, verdict) == (0, ["Rebalance operation successful !"])
        out, errors = kafka_verify(zk, group, tmp_path)
        assert out == ["Rebalance operation failed !"]
        assert sorted(errors) == kafkas_verify_errors(group, owners)

        # ExportZkOffsets: byte for byte, in ZooKeeper's order of children (not sorted)
        mine, their = tmp_path / "ours.txt", tmp_path / "kafka.txt"
        code, said, _ = ours(capsys, "offsets", "export", "--zookeeper", zk, "--group", group,
                             "--output-file", str(mine))
        assert code == 0 and said == [f"exported 6 offsets to {mine}"]  # Kafka's export prints nothing
        done = kafka_tool("ExportZkOffsets", "--zkconnect", zk, "--group", group, "--output-file", str(their))
        assert done.returncode == 0 and done.stdout == ""
        assert mine.read_bytes() == their.read_bytes()
        lines = their.read_text().splitlines()
        assert sorted(lines) == sorted(f"/consumers/{group}/offsets/{t}/{p}:{v}" for (t, p), v in commits.items())
        assert lines.index(f"/consumers/{group}/offsets/{a}/11:1") < lines.index(f"/consumers/{group}/offsets/{a}/1:4")
    finally:
        for member in members:
            member.shutdown()


# ----------------------------------------------------------------------------------- Kafka's own consumers

def test_zkconsumers_tools_on_a_group_of_kafkas_consumers(kafka: KafkaBroker, reg: Registry, tmp_path: Path,
                                                          capsys) -> None:
    zk = kafka.zk_connect
    group = "kafka-hl"
    create_topic(reg, "hl", 5)
    create_topic(reg, "hl1", 1)
    kafka.wait_topic("hl", 5)
    kafka.wait_topic("hl1", 1)
    produce(kafka.bootstrap, "hl", {0: 10, 1: 4, 2: 7, 3: 1, 4: 3})
    produce(kafka.bootstrap, "hl1", {0: 3})
    ends = {("hl", 0): 10, ("hl", 1): 4, ("hl", 2): 7, ("hl", 3): 1, ("hl", 4): 3, ("hl1", 0): 3}
    with HighLevelConsumers(zk, group, ["hl", "hl1"], streams=2, report_records=True, warm_up=1,
                            properties={"auto.offset.reset": "smallest", "auto.commit.enable": "true",
                                        "auto.commit.interval.ms": 200, "zookeeper.session.timeout.ms": 4000}
                            ) as members:
        # the JVM warmed up first (benchmarks/mixed_groups.py's warm JVMs): a member of another group joined, read
        # and left before this group's members started, and left nothing of itself in ZooKeeper
        warmed = [e for e in members.events if e["event"] == "warmed"]
        assert [(e["id"], e["round"]) for e in warmed] == [("warm-up-1", 1)] and warmed[0]["ms"] > 0
        assert reg.consumer_ids(f"{group}-warm-up") == [] and reg.owners(f"{group}-warm-up") == {}
        members.start_member("k1")
        members.start_member("k2")
        # the range assignment owned, everything consumed and committed: the tree holds still while both read it
        expected = expected_owners(reg, group, "range")
        assert sorted(expected) == sorted(ends)
        wait_until(lambda: reg.owners(group) == expected and reg.offsets(group) == ends,
                   message="Kafka's consumers to own their shares and commit the log ends")
        owners = reg.owners(group)

        code, rows, _ = ours(capsys, "offset-checker", "--zookeeper", zk, "--group", group, "--broker-info")
        assert code == 0
        assert rows == kafka_checker(zk, group, "--broker-info")
        assert rows[1:7] == [FMT % (group, t, p, n, n, 0, owners[(t, p)]) for (t, p), n in ends.items()]

        code, verdict, _ = ours(capsys, "verify", "--zookeeper", zk, "--group", group)
        assert (code, verdict) == (0, ["Rebalance operation successful !"])
        out, errors = kafka_verify(zk, group, tmp_path)  # Kafka's verdict on its own consumers
        assert out == ["Rebalance operation failed !"]
        assert sorted(errors) == kafkas_verify_errors(group, owners)

        mine, their = tmp_path / "ours.txt", tmp_path / "kafka.txt"
        assert ours(capsys, "offsets", "export", "--zookeeper", zk, "--group", group,
                    "--output-file", str(mine))[0] == 0
        assert kafka_tool("ExportZkOffsets", "--zkconnect", zk, "--group", group,
                          "--output-file", str(their)).returncode == 0
        assert mine.read_bytes() == their.read_bytes()
        assert sorted(their.read_text().splitlines()) == sorted(f"/consumers/{group}/offsets/{t}/{p}:{n}"
                                                                for (t, p), n in ends.items())
        assert reg.offsets(group) == ends  # nothing moved while the tools read


# ----------------------------------------------------------------------------------- where Kafka stops

def test_where_kafkas_tools_stop_and_ours_go_on(kafka: KafkaBroker, reg: Registry, tmp_path: Path, capsys) -> None:
    """A topic without any offsets node, a group without one, a group that does not exist."""
    zk = kafka.zk_connect
    group = "no-offsets"
    create_topic(reg, "d", 1)
    kafka.wait_topic("d", 1)
    produce(kafka.bootstrap, "d", {0: 2})
    with consumer(zk, group, "m") as member:
        member.create_message_streams({"d": 1})
        wait_until(lambda: reg.owners(group), message="d/0 owned")
        code, rows, _ = ours(capsys, "offset-checker", "--zookeeper", zk, "--group", group)
        assert (code, rows) == (0, [HEADER, FMT % (group, "d", 0, "unknown", 2, "unknown", f"{group}_m-0")])
        assert kafka_checker(zk, group) == ["Exiting due to: org.apache.zookeeper.KeeperException$NoNodeException: "
                                            f"KeeperErrorCode = NoNode for /consumers/{group}/offsets/d/0."]

        mine, their = tmp_path / "ours.txt", tmp_path / "kafka.txt"
        code, said, _ = ours(capsys, "offsets", "export", "--zookeeper", zk, "--group", group,
                             "--output-file", str(mine))
        assert (code, said, mine.read_bytes()) == (0, [f"exported 0 offsets to {mine}"], b"")
        done = kafka_tool("ExportZkOffsets", "--zkconnect", zk, "--group", group, "--output-file", str(their))
        assert done.returncode == 1 and their.read_bytes() == b""  # an uncaught exception, its stack trace
        assert (f"Exception in thread \"main\" org.I0Itec.zkclient.exception.ZkNoNodeException: "
                f"org.apache.zookeeper.KeeperException$NoNodeException: KeeperErrorCode = NoNode for "
                f"/consumers/{group}/offsets") in done.stderr

    code, rows, err = ours(capsys, "offset-checker", "--zookeeper", zk, "--group", "nobody")
    assert (code, rows) == (1, []) and "Consumer group nobody does not exist." in err
    assert kafka_checker(zk, "nobody") == ["Exiting due to: org.apache.zookeeper.KeeperException$NoNodeException: "
                                           "KeeperErrorCode = NoNode for /consumers/nobody/owners."]
    code, rows, err = ours(capsys, "verify", "--zookeeper", zk, "--group", "nobody")
    assert (code, rows) == (1, []) and "Consumer group nobody does not exist." in err
    assert kafka_verify(zk, "nobody", tmp_path) == (["Rebalance operation successful !"], [])


# ----------------------------------------------------------------------------------- ImportZkOffsets

def test_import_leaves_the_same_nodes(zk_server, tmp_path: Path, capsys) -> None:
    """Kafka's ImportZkOffsets into one fresh chroot, ours into another, from the same files: the same nodes and
    bytes, but for the parents created on the way and the lines after a blank one."""
    theirs, mine = (fresh_chroot(zk_server.connect_string, name) for name in ("import_kafka", "import_ours"))
    for zk in (theirs, mine):
        with Registry.open(zk) as r:
            r.write_offset("g1", "t", 1, 100)  # an existing node is overwritten
    exported = tmp_path / "offsets.txt"
    exported.write_text("/consumers/g1/offsets/t/0:5\n/consumers/g1/offsets/t/11:7\n/consumers/g1/offsets/t/1:8\n"
                        "/consumers/g2/offsets/u/2:0\n/consumers/g1/offsets/t/0:6\n")  # a path twice: the last wins
    done = kafka_tool("ImportZkOffsets", "--zkconnect", theirs, "--input-file", str(exported))
    assert (done.returncode, done.stdout) == (0, "")
    code, said, _ = ours(capsys, "offsets", "import", "--zookeeper", mine, "--input-file", str(exported))
    assert (code, said) == (0, ["imported 5 offsets"])
    kafka_tree, our_tree = zk_tree(theirs), zk_tree(mine)
    assert sorted(kafka_tree) == sorted(our_tree)
    offsets = {p: v for p, v in kafka_tree.items() if re.fullmatch(r"/consumers/[^/]+/offsets/[^/]+/\d+", p)}
    assert {p: v[0] for p, v in offsets.items()} == {p: our_tree[p][0] for p in offsets} == {
        "/consumers/g1/offsets/t/0": b"6", "/consumers/g1/offsets/t/1": b"8", "/consumers/g1/offsets/t/11": b"7",
        "/consumers/g2/offsets/u/2": b"0"}
    # Kafka read the file into a map first and wrote each path once; we write line by line
    assert (kafka_tree["/consumers/g1/offsets/t/0"][1], our_tree["/consumers/g1/offsets/t/0"][1]) == (0, 1)
    # parents Kafka created on the way (ZkClient.createPersistent(path, true)) have no data at all; ours b""
    new_parents = ["/consumers/g2", "/consumers/g2/offsets", "/consumers/g2/offsets/u"]
    assert [kafka_tree[p][0] for p in new_parents] == [None] * 3
    assert [our_tree[p][0] for p in new_parents] == [b""] * 3
    assert {p for p in kafka_tree if kafka_tree[p][0] != our_tree[p][0]} == set(new_parents)

    # Kafka stops reading at the first empty line; we skip blank lines (and # comments) and go on
    gap = tmp_path / "gap.txt"
    gap.write_text("/consumers/g3/offsets/t/0:1\n\n/consumers/g3/offsets/t/1:2\n")
    assert kafka_tool("ImportZkOffsets", "--zkconnect", theirs, "--input-file", str(gap)).returncode == 0
    assert ours(capsys, "offsets", "import", "--zookeeper", mine, "--input-file", str(gap))[0] == 0
    with Registry.open(theirs) as k, Registry.open(mine) as o:
        assert (k.offsets("g3"), o.offsets("g3")) == ({("t", 0): 1}, {("t", 0): 1, ("t", 1): 2})

    # a negative offset: Kafka writes it as it is; we refuse the whole file before writing anything
    negative = tmp_path / "negative.txt"
    negative.write_text("/consumers/g4/offsets/t/0:3\n/consumers/g4/offsets/t/1:-1\n")
    assert kafka_tool("ImportZkOffsets", "--zkconnect", theirs, "--input-file", str(negative)).returncode == 0
    code, _, err = ours(capsys, "offsets", "import", "--zookeeper", mine, "--input-file", str(negative))
    assert code == 1 and "line 2: offset must be >= 0, got -1" in err
    with Registry.open(theirs) as k, Registry.open(mine) as o:
        assert k.read("/consumers/g4/offsets/t/1") == b"-1" and k.read("/consumers/g4/offsets/t/0") == b"3"
        assert o.groups() == ["g1", "g2", "g3"]
