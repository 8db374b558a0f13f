"""``zkconsumer consume --max-messages N`` against the local broker, as Kafka's console consumer behaves: the process
exits right after the N-th record (not when an N+1-th arrives, which may never happen), prints exactly N records and
commits exactly what it processed, in every way ``consume`` runs (ZooKeeper mode, ``--migratable``, coordinator mode
on kafka-python and on librdkafka). Each run is a real subprocess over several partitions and streams."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest
from kafka import KafkaProducer

from zkconsumer.migration.verify import committed
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic

#: Broker settings that keep a coordinator group fast: no initial rebalance delay, short sessions allowed.
FAST_GROUPS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 500}
PARTITIONS = 3
#: records per partition: uneven, so no stream's share is a multiple of another's
PER_PARTITION = (7, 11, 5)
TOTAL = sum(PER_PARTITION)

#: how each way of running ``consume`` is started, and where its commits land
MODES = {
    "zookeeper": ["--streams", "2"],
    "migratable": ["--migratable", "--streams", "2"],
    "coordinator": ["--mode", "coordinator", "--streams", "2"],
    "librdkafka": ["--mode", "coordinator", "--client", "librdkafka"],
}


@pytest.fixture(scope="module")
def cbroker(zk_server, tmp_path_factory):
    """One broker (with its group coordinator) and one topic for the module: every test uses its own group."""
    from helpers import fresh_chroot

    from zkconsumer.broker import Broker

    zk = fresh_chroot(zk_server.connect_string, "consume_max_messages")
    b = Broker(zk, data_dir=tmp_path_factory.mktemp("broker"), **FAST_GROUPS).start()
    with Registry.open(zk) as reg:
        create_topic(reg, "t", PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks=1, linger_ms=2)
    for p, n in enumerate(PER_PARTITION):
        for i in range(n):
            producer.send("t", value=f"p{p}-{i}".encode(), partition=p)
    producer.flush()
    producer.close()
    try:
        yield zk, b
    finally:
        b.stop()


def run_consume(zk: str, bootstrap: str, mode: str, group: str, max_messages: int) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "zkconsumer", "consume", "--group", group, "--topic", "t", "--from-beginning",
           "--max-messages", str(max_messages), "--property", "auto.commit.interval.ms=60000", *MODES[mode]]
    cmd += ["--bootstrap-server", bootstrap] if mode in ("coordinator", "librdkafka") else ["--zookeeper", zk]
    # a bounded wait: before the fix the process waited for an N+1-th record forever
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def committed_offsets(zk: str, bootstrap: str, mode: str, group: str) -> dict[tuple[str, int], int]:
    if mode in ("coordinator", "librdkafka"):
        return committed(bootstrap, group)
    with Registry.open(zk) as reg:
        return reg.offsets(group)


@pytest.mark.parametrize("mode", list(MODES))
def test_exactly_n_records_exits_after_the_last_and_commits_them(cbroker, mode: str) -> None:
    zk, broker = cbroker
    group = f"exact-{mode}"
    done = run_consume(zk, broker.bootstrap, mode, group, TOTAL)
    assert done.returncode == 0, done.stderr
    values = done.stdout.split()
    assert sorted(values) == sorted(f"p{p}-{i}" for p, n in enumerate(PER_PARTITION) for i in range(n))
    assert f"Processed a total of {TOTAL} messages" in done.stderr
    # the periodic commit never ran (60 s): everything committed was committed on the way out, every record in
    assert committed_offsets(zk, broker.bootstrap, mode, group) == {("t", p): n for p, n in enumerate(PER_PARTITION)}


@pytest.mark.parametrize("mode", ["zookeeper", "coordinator"])
def test_fewer_than_available_commits_exactly_what_was_printed(cbroker, mode: str) -> None:
    """Two streams race for the last record: the one that loses must not print it, nor commit what it holds."""
    zk, broker = cbroker
    group = f"fewer-{mode}"
    n = TOTAL - 6
    done = run_consume(zk, broker.bootstrap, mode, group, n)
    assert done.returncode == 0, done.stderr
    values = done.stdout.split()
    assert len(values) == n and len(set(values)) == n
    assert f"Processed a total of {n} messages" in done.stderr
    offsets = committed_offsets(zk, broker.bootstrap, mode, group)
    # per partition, the commit is the count of that partition's records printed (they are read in order)
    printed = Counter(int(v.split("-")[0][1:]) for v in values)
    assert {tp: o for tp, o in offsets.items() if o} == {("t", p): c for p, c in printed.items()}
