"""The fault matrix (docs/faults.md): each fault driven against a live lab group, judged by the analysis.

Real everything: ZooKeeper servers (a 3-node ensemble for the ZooKeeper faults), the broker (its own process
for broker-kill), consumer processes (``zkconsumer consume``), a loopback proxy for the cut-off consumer, and
Spark for the verdict. Sessions are 4 s. Each fault starts its own lab: the faults kill the very servers
others would share.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from zkconsumer.lab.faults.matrix import FAULTS, run_fault
from zkconsumer.lab.faults.verdict import judge

pytestmark = [pytest.mark.slow, pytest.mark.faults]


def lab_events(out) -> list[dict]:
    return [json.loads(line) for line in (out / "traces" / "lab.jsonl").read_text().splitlines()]


#: In ``make test``: the cut-off consumer and the broker's kill -9 (half a minute each on 2 cores). The rest of the
#: matrix runs with ``make faults`` (``pytest -m faults_full``), and every fault with ``zkconsumer lab --faults``; a
#: ZooKeeper node's loss under a live group runs in make test through the scenario format (tests/test_scenarios.py,
#: on an ensemble) and the ensemble's own faults in tests/test_ensemble_faults.py.
FULL_ONLY = pytest.mark.faults_full


@pytest.mark.parametrize("name", [pytest.param("zk-leader", marks=FULL_ONLY),
                                  pytest.param("zk-follower", marks=FULL_ONLY),
                                  pytest.param("zk-quorum", marks=FULL_ONLY),
                                  # a member cut past its session: in make test through the scenario format
                                  # (tests/test_scenarios.py, on an ensemble), and here in make faults
                                  pytest.param("zk-cut", marks=FULL_ONLY), "broker-kill",
                                  pytest.param("consumers-kill", marks=FULL_ONLY),
                                  pytest.param("herd-30", marks=FULL_ONLY),
                                  pytest.param("consumer-pause", marks=FULL_ONLY)])
def test_fault_keeps_the_invariants_in_the_default_profile(spark, tmp_path, name: str) -> None:
    run = run_fault(FAULTS[name], tmp_path / name, "default")
    assert run.error is None, run.error
    events = [e["event"] for e in lab_events(tmp_path / name)]
    assert events == ["fault_injected", "fault_healed"]
    verdict = judge(spark, run)
    assert verdict.status == "PASS", verdict.line
    assert verdict.figures["lost"] == 0 and verdict.figures["overlaps"] == 0
    assert verdict.figures["reowned_ms_after_heal"] is not None


def test_cut_off_consumer_in_the_kafka_08_profile_is_reported_as_kafka_does(spark, tmp_path) -> None:
    """Kafka 0.8's famous case: a consumer whose session expired keeps handing out the records it fetched for
    partitions ZooKeeper already gave to others. The verdict names it instead of hiding it."""
    run = run_fault(FAULTS["zk-cut"], tmp_path / "cut", "kafka-0.8")
    assert run.error is None, run.error
    verdict = judge(spark, run)
    assert verdict.status in ("PASS", "KAFKA-0.8"), verdict.line
    assert verdict.figures["lost"] == 0, verdict.line  # never, in any profile
    if verdict.status == "KAFKA-0.8":
        # What Kafka 0.8 does here, and nothing else: the cut-off c1 keeps delivering what the others now own
        # (overlaps, duplicates), commits its stale positions for them once it reconnects (its rebalance commits
        # before it releases), and the group's retries with backoff may re-own late. Every overlap and every
        # backwards commit must be c1's.
        tables = Path(run.out) / "report" / "tables"
        overlaps = list(csv.DictReader((tables / "overlaps.csv").open()))
        backwards = list(csv.DictReader((tables / "commits_backwards.csv").open()))
        assert overlaps or backwards or verdict.figures["duplicates"] or verdict.figures["unowned_after_heal"], \
            verdict.line
        assert all("lab_c1" in (row["consumer_a"], row["consumer_b"]) for row in overlaps), overlaps
        assert all(row["consumer"] == "lab_c1" for row in backwards), backwards
