"""The per-phase breakdown of a rebalance: in the trace (``phases_ms``) and on the rebalancer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import consumer, wait_until

from zkconsumer.consumer.zookeeper.phases import PHASES, PhaseClock
from zkconsumer.zk.registry import Registry
from zkconsumer.zk.topics import create_topic


def test_phase_clock_subtracts_nested_phases() -> None:
    clock = PhaseClock()
    with clock.phase("claim"):
        with clock.phase("owner_wait"):
            clock.add("trigger", 0)  # nothing
    clock.add("trigger", 0.0126)
    ms = clock.as_ms()
    assert list(ms) == list(PHASES)
    assert ms["trigger"] == 13
    assert ms["claim"] >= 0 and ms["owner_wait"] >= 0 and ms["backoff"] == 0


def _done_lines(trace_dir: Path) -> list[dict]:
    lines = []
    for path in trace_dir.glob("*.jsonl"):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            if line["event"] == "rebalance_done":
                lines.append(line)
    return lines


@pytest.mark.parametrize("profile", ["default", "kafka-0.8"])
def test_rebalance_done_carries_phases(registry: Registry, zk_connect: str, tmp_path: Path, profile: str) -> None:
    create_topic(registry, "phased", 4)
    traces = tmp_path / "traces"
    a = consumer(zk_connect, "pg", "a", zkconsumer_profile=profile, zkconsumer_trace_dir=str(traces))
    b = consumer(zk_connect, "pg", "b", zkconsumer_profile=profile, zkconsumer_trace_dir=str(traces))
    try:
        a.create_message_streams({"phased": 1})
        b.create_message_streams({"phased": 1})
        # a: startup, then b's join (triggered by a watch); b: startup
        wait_until(lambda: len(_done_lines(traces)) >= 3 and not a.rebalancer.busy and not b.rebalancer.busy,
                   timeout=30, message="three rebalances done")
    finally:
        b.shutdown()
        a.shutdown()
    lines = _done_lines(traces)
    for line in lines:
        phases = line["phases_ms"]
        assert list(phases) == list(PHASES)
        assert all(isinstance(v, int) and v >= 0 for v in phases.values())
        # every phase but the wait for the trigger to be picked up lies within the rebalance
        assert sum(v for k, v in phases.items() if k != "trigger") <= line["duration_ms"] + len(PHASES)
    assert any(line["phases_ms"]["claim"] > 0 or line["phases_ms"]["reads"] > 0 for line in lines)
    # the join rebalance of a was started by a watch: it knows when the trigger fired, and logs its phases
    watched = [entry for entry in a.rebalancer.phase_log if entry[2] is not None]
    assert watched and all(entry[1] >= entry[2] for entry in watched)
