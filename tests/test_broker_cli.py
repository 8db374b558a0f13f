"""``zkconsumer broker start --daemon|status|stop`` and ``zkconsumer produce``, plus the record value codec."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

from zkconsumer.cli import main
from zkconsumer.cli.broker import pid_alive, read_state
from zkconsumer.cli.produce import choose_partition
from zkconsumer.records import RecordValueError, decode_value, encode_value
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def test_value_codec_round_trip_and_errors() -> None:
    raw = encode_value("orders", 3, 41)
    assert raw == b'{"topic":"orders","partition":3,"seq":41}'
    assert decode_value(raw) == {"topic": "orders", "partition": 3, "seq": 41}
    assert decode_value(memoryview(raw)) == decode_value(raw)
    for bad in (None, b"", b"\xff", b"[]", b'{"topic":1,"partition":0,"seq":0}',
                b'{"topic":"t","partition":-1,"seq":0}', b'{"topic":"t","partition":0,"seq":true}',
                b'{"topic":"t","partition":0}'):
        with pytest.raises(RecordValueError):
            decode_value(bad)


def test_key_patterns_choose_partitions_like_the_java_client() -> None:
    from kafka.partitioner import murmur2

    assert [choose_partition("none", n, 3) for n in range(4)] == [(0, None), (1, None), (2, None), (0, None)]
    assert [choose_partition("partition", n, 2) for n in range(3)] == [(0, b"0"), (1, b"1"), (0, b"0")]
    for n in range(50):
        partition, key = choose_partition("seq", n, 7)
        assert key == str(n).encode() and partition == (murmur2(key) & 0x7FFFFFFF) % 7


def test_daemon_start_produce_status_stop(zk_connect: str, registry: Registry, tmp_path: Path, capsys) -> None:
    from kafka import KafkaConsumer, TopicPartition

    data_dir = tmp_path / "broker"
    create_topic(registry, "cli", 3)
    assert main(["broker", "start", "--zookeeper", zk_connect, "--data-dir", str(data_dir), "--daemon",
                 "--flush-interval-ms", "50"]) == 0
    state = read_state(data_dir)
    try:
        assert state and pid_alive(state["pid"])
        assert state["bootstrap"] in capsys.readouterr().out
        assert main(["broker", "status", "--data-dir", str(data_dir)]) == 0
        assert main(["broker", "start", "--zookeeper", zk_connect, "--data-dir", str(data_dir)]) == 1  # running
        assert main(["produce", "--bootstrap-server", state["bootstrap"], "--topic", "cli", "--count", "3000",
                     "--key-pattern", "seq", "--acks", "all", "--no-progress"]) == 0
        assert "acknowledged 3000" in capsys.readouterr().out

        consumer = KafkaConsumer(bootstrap_servers=state["bootstrap"], group_id=None, enable_auto_commit=False)
        tps = [TopicPartition("cli", p) for p in range(3)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        seen: dict[int, list[dict]] = defaultdict(list)
        deadline = time.monotonic() + 60
        while sum(map(len, seen.values())) < 3000 and time.monotonic() < deadline:
            for tp, recs in consumer.poll(timeout_ms=500).items():
                seen[tp.partition].extend(decode_value(r.value) for r in recs)
        consumer.close()
        for partition, values in seen.items():
            assert [v["seq"] for v in values] == list(range(len(values)))
            assert {(v["topic"], v["partition"]) for v in values} == {("cli", partition)}
        assert sum(map(len, seen.values())) == 3000
    finally:
        assert main(["broker", "stop", "--data-dir", str(data_dir)]) == 0
    assert not pid_alive(state["pid"])
    assert main(["broker", "status", "--data-dir", str(data_dir)]) == 1
    assert main(["broker", "stop", "--data-dir", str(data_dir)]) == 1


def test_produce_to_an_unreachable_broker_is_a_clear_error(capsys) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    code = main(["produce", "--bootstrap-server", f"127.0.0.1:{port}", "--topic", "t", "--count", "1",
                 "--timeout", "2", "--no-progress"])
    assert code == 1
    assert "error" in capsys.readouterr().err
