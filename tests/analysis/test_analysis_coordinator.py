"""A coordinator-mode run (real ZooKeeper, the local broker's group coordinator, kafka-python members) analysed by
Spark with the same pipeline as ZooKeeper-mode runs."""

from __future__ import annotations

import importlib.util
import io
import json
import threading

import pytest
from helpers import wait_until
from kafka import KafkaProducer
from rich.console import Console

from zkconsumer.analysis.pipeline import run_analysis
from zkconsumer.config import ConsumerConfig
from zkconsumer.consumer.coordinated.connector import CoordinatorConsumerConnector
from zkconsumer.records import encode_value
from zkconsumer.zk.topics import create_topic

pytestmark = pytest.mark.skipif(importlib.util.find_spec("zkconsumer.coordinator.manager") is None,
                                reason="the broker has no group coordinator yet (branch coord)")


def start_member(bootstrap: str, name: str, traces, seen: set) -> CoordinatorConsumerConnector:
    c = CoordinatorConsumerConnector(ConsumerConfig.from_properties({
        "group.id": "g", "bootstrap.servers": bootstrap, "consumer.id": name, "auto.offset.reset": "smallest",
        "session.timeout.ms": 3000, "heartbeat.interval.ms": 300, "metadata.max.age.ms": 500,
        "auto.commit.interval.ms": 200, "zkconsumer.trace.dir": str(traces)}))
    [stream] = c.create_message_streams({"t": 1})["t"]

    def drain() -> None:
        for r in stream:
            seen.add((r.partition, r.offset))

    threading.Thread(target=drain, daemon=True).start()
    return c


@pytest.mark.slow
def test_coordinator_mode_trace_is_analysed(spark, zk_connect, registry, tmp_path) -> None:
    from zkconsumer.broker import Broker

    traces = tmp_path / "traces"
    create_topic(registry, "t", 4)
    with Broker(zk_connect, data_dir=tmp_path / "broker", group_initial_rebalance_delay_ms=0,
                group_min_session_timeout_ms=500) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
        for seq in range(50):
            for p in range(4):
                producer.send("t", value=encode_value("t", p, seq), partition=p)
        producer.flush()
        producer.close()
        seen: set = set()
        members = [start_member(broker.bootstrap, n, traces, seen) for n in ("a", "b")]
        try:
            wait_until(lambda: sum(len(m.owned_partitions()) for m in members) == 4, message="a, b share t")
            members.append(start_member(broker.bootstrap, "c", traces, seen))
            wait_until(lambda: all(m.owned_partitions() for m in members) and
                       sum(len(m.owned_partitions()) for m in members) == 4, message="c joined")
            members.pop(0).shutdown()
            wait_until(lambda: sum(len(m.owned_partitions()) for m in members) == 4, message="a left")
            wait_until(lambda: len(seen) == 200, message="all records consumed")
        finally:
            for m in members:
                m.shutdown()
    lines = [json.loads(line) for f in traces.glob("*.jsonl") for line in f.read_text().splitlines()]
    assert {e["mode"] for e in lines} == {"coordinator"}
    delivered = sum(e["event"] == "record_delivered" for e in lines)
    result = run_analysis(spark, str(traces), tmp_path / "report", Console(file=io.StringIO()))
    assert result.bad_lines == 0
    assert result.summary["consumers"] == 3
    assert result.summary["deliveries"] == delivered >= 200
    assert result.summary["lost_below_committed"] == 0 and result.summary["lost_gap"] == 0
    assert result.summary["overlaps"] == 0, "an eager rebalance revokes everywhere before it assigns anywhere"
    assert result.summary["group_rebalances"] >= 3  # first join, c's join, a's leave
    assert result.report_md.exists()
