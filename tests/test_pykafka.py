"""pykafka 2.8 (a real 0.8-era Python client) against the local broker, from its own environment.

pykafka pins kazoo==2.5.0, so it cannot be a dev extra beside zkconsumer's kazoo>=2.9; scripts/bootstrap.sh
installs it in .venv/pykafka and these tests run it there (tests/pykafka_client.py) as a subprocess.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import consumer, wait_until
from kazoo.exceptions import NoNodeError

from zkconsumer.zk.layout import GroupPaths
from zkconsumer.zk.topics import create_topic

PYKAFKA_PYTHON = Path(sys.prefix) / "pykafka" / "bin" / "python"
CLIENT = Path(__file__).resolve().parent / "pykafka_client.py"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not PYKAFKA_PYTHON.exists(),
                                reason="pykafka's environment is missing: run `make setup` (scripts/bootstrap.sh)")]


def run_pykafka(*args: str, timeout: float = 60) -> dict:
    done = subprocess.run([str(PYKAFKA_PYTHON), str(CLIENT), *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# 0.8.2 makes pykafka send Produce v0 / Fetch v0 (message format v0); 0.9.0 (its default) Produce v1 / Fetch v1.
@pytest.mark.parametrize("broker_version", ["0.8.2", "0.9.0"])
def test_pykafka_produces_and_consumes_without_a_group(broker, registry, broker_version: str) -> None:
    create_topic(registry, "pk", 3)
    assert broker.cluster.wait_for(lambda s: "pk" in s.topics, 10)
    records = run_pykafka("produce-consume", broker.bootstrap, "pk", "60", broker_version)["records"]
    by_partition = defaultdict(list)
    for partition, offset, value in records:
        by_partition[partition].append((offset, value))
    assert sorted(v for _, _, v in records) == sorted(f"value-{i}" for i in range(60))
    assert len(by_partition) == 3  # pykafka's hashing partitioner spread the keys
    for rows in by_partition.values():
        assert [o for o, _ in rows] == list(range(len(rows)))  # contiguous offsets from 0, in order


FIND_COORDINATOR, OFFSET_COMMIT = 10, 8  # ConsumerMetadata and OffsetCommit, as Kafka 0.8.2 named them


def ownership(registry, group: str, topic: str) -> dict[int, list[str]]:
    """Partition → every owner, from Kafka's ``<partition>`` nodes and pykafka's ``<leader>-<partition>`` nodes."""
    owners: dict[int, list[str]] = defaultdict(list)
    path = GroupPaths(group).owners_topic(topic)
    for child in (registry.zk.get_children(path) if registry.zk.exists(path) else []):
        with contextlib.suppress(NoNodeError):
            owners[int(child.rsplit("-", 1)[-1])].append(registry.zk.get(f"{path}/{child}")[0].decode())
    return dict(owners)


class PykafkaMember:
    """A pykafka BalancedConsumer in its own process; it leaves the group when :meth:`leave` closes its stdin."""

    def __init__(self, broker, zk_connect: str, group: str, topic: str) -> None:
        self.proc = subprocess.Popen([str(PYKAFKA_PYTHON), str(CLIENT), "balanced", broker.bootstrap, zk_connect,
                                      group, topic], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()[-3000:]
        self.consumer_id = json.loads(line)["consumer_id"]

    def leave(self) -> str:
        """Leave the group; returns what pykafka logged (warnings and errors), for failure messages."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(30)
        return self.proc.stderr.read() if not self.proc.stderr.closed else ""


def test_group_mixing_zkconsumer_and_pykafka_balanced_consumers(broker, registry, zk_connect) -> None:
    """pykafka's members take the whole topic (they never see Kafka-format members); zkconsumer steps aside, so
    each partition has exactly one owner; when they leave zkconsumer takes it all back (docs/old-clients.md)."""
    commit = broker.apis.get(OFFSET_COMMIT)
    if FIND_COORDINATOR not in broker.apis or commit is None or commit.min_version > 1:
        # pykafka (broker_version 0.8.2) asks ConsumerMetadata v0 and commits with OffsetCommit v1 on every
        # rebalance and after resetting a partition without an offset, even with auto_commit_enable=False; any
        # error it does not expect (35) stops the BalancedConsumer.
        pytest.skip("pykafka's BalancedConsumer needs ConsumerMetadata (FindCoordinator v0) and OffsetCommit v1 "
                    "from the group coordinator (zkconsumer/coordinator/)")

    create_topic(registry, "mix", 6)
    assert broker.cluster.wait_for(lambda s: "mix" in s.topics, 10)
    c = consumer(zk_connect, "mixed", "zk1")
    members: list[PykafkaMember] = []
    try:
        c.create_message_streams({"mix": 1})
        assert ownership(registry, "mixed", "mix") == {p: ["mixed_zk1-0"] for p in range(6)}
        members = [PykafkaMember(broker, zk_connect, "mixed", "mix") for _ in range(2)]
        ids = sorted(m.consumer_id for m in members)

        def split_by_pykafka() -> bool:
            owners = ownership(registry, "mixed", "mix")
            return (sorted(owners) == list(range(6)) and all(len(o) == 1 for o in owners.values())
                    and sorted(o[0] for o in owners.values()) == sorted(ids * 3) and not c.owned_partitions())

        try:
            wait_until(split_by_pykafka, 60, message="pykafka members owning 3 partitions each, zkconsumer none")
        except AssertionError as e:
            owners = ownership(registry, "mixed", "mix")
            ids_now = registry.zk.get_children(GroupPaths("mixed").ids)
            logs = "\n".join(f"--- {m.consumer_id}:\n{m.leave()[-3000:]}" for m in members)
            raise AssertionError(f"{e}\nowners: {owners}\nids: {ids_now}\nzkconsumer owns: "
                                 f"{c.owned_partitions()}\n{logs}") from None


        for m in members:
            m.leave()
        wait_until(lambda: ownership(registry, "mixed", "mix") == {p: ["mixed_zk1-0"] for p in range(6)}, 30,
                   message="zkconsumer owning the topic again")
    finally:
        for m in members:
            m.leave()
        c.shutdown()
