"""pykafka 2.8 (a real 0.8-era Python client) against the local broker, from its own environment.

pykafka pins kazoo==2.5.0, so it cannot be a dev extra beside zkconsumer's kazoo>=2.9; scripts/bootstrap.sh
installs it in .venv/pykafka and these tests run it there (tests/pykafka_client.py) as a subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from zkconsumer.topics import create_topic

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
