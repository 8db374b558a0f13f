"""Fixtures for the Spark analysis tests: one real local SparkSession for the whole run, trace builders.

Starting the JVM costs seconds, so the session is session-scoped (local[2], two shuffle partitions, UI
off); tests that need other settings change runtime SQL confs and restore them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator:
    from zkconsumer.analysis.spark import build_session

    session = build_session("local[2]", "zkconsumer-tests", shuffle_partitions=2, driver_memory="2g",
                            extra_conf={"spark.sql.adaptive.enabled": "false"})
    yield session
    session.stop()


class TraceBuilder:
    """Writes hand-built traces: ``emit`` appends a valid line (seq counted per consumer), ``raw`` any
    text; both return the 1-based line number in that consumer's file."""

    def __init__(self, directory: Path, group: str = "g") -> None:
        self.dir = directory
        self.group = group
        self.seq: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        directory.mkdir(parents=True, exist_ok=True)

    def _write(self, consumer: str, text: str) -> int:
        with open(self.dir / f"{consumer}.jsonl", "a", encoding="utf-8") as f:
            f.write(text + "\n")
        self.lines[consumer] = self.lines.get(consumer, 0) + 1
        return self.lines[consumer]

    def emit(self, consumer: str, ts: int, event: str, **fields) -> int:
        self.seq[consumer] = self.seq.get(consumer, 0) + 1
        record = {"v": 1, "ts": ts, "event": event, "group": self.group, "consumer": consumer,
                  "seq": self.seq[consumer], **fields}
        return self._write(consumer, json.dumps(record))

    def raw(self, consumer: str, text: str) -> int:
        return self._write(consumer, text)

    def deliver(self, consumer: str, ts: int, topic: str, partition: int, offset: int) -> int:
        return self.emit(consumer, ts, "record_delivered", topic=topic, partition=partition, offset=offset,
                         thread=f"{consumer}-0")

    def commit(self, consumer: str, ts: int, topic: str, partition: int, offset: int) -> int:
        return self.emit(consumer, ts, "offset_committed", topic=topic, partition=partition, offset=offset)

    def rebalance(self, consumer: str, ts: int, number: int, owned: list[str], cause: str = "ids_changed",
                  released: list[str] | None = None, conflicts: int = 0, done_ts: int | None = None) -> None:
        """trigger, attempts (one per conflict + 1), release, assign, claim, done: a 0.8 rebalance."""
        t = ts
        self.emit(consumer, t, "rebalance_triggered", cause=cause)
        for attempt in range(1, conflicts + 2):
            t += 1
            self.emit(consumer, t, "attempt_started", rebalance=number, attempt=attempt, ids_cversion=number)
            if released and attempt == 1:
                t += 1
                self.emit(consumer, t, "released", rebalance=number, partitions=released)
            share = {p: f"{consumer}-0" for p in owned}
            self.emit(consumer, t, "assigned", rebalance=number, attempt=attempt, assignment=share,
                      strategy="range")
            if attempt <= conflicts:
                t += 1
                topic, part = owned[0].rsplit("-", 1)
                self.emit(consumer, t, "claim_conflict", rebalance=number, attempt=attempt, path="/x",
                          topic=topic, partition=int(part), thread=f"{consumer}-0", holder="other-0")
        self.emit(consumer, t, "claimed", rebalance=number, attempt=conflicts + 1,
                  partitions={p: f"{consumer}-0" for p in owned})
        self.emit(consumer, done_ts or t + 1, "rebalance_done", rebalance=number, attempts=conflicts + 1,
                  duration_ms=(done_ts or t + 1) - ts, owned=owned)


@pytest.fixture
def trace_builder(tmp_path: Path) -> TraceBuilder:
    return TraceBuilder(tmp_path / "traces")


@pytest.fixture(scope="session")
def trace_builder_class() -> type[TraceBuilder]:
    return TraceBuilder


def pytest_configure(config: pytest.Config) -> None:
    # pyspark's Arrow conversion still passes copy= to pandas 3; harmless, and not ours
    config.addinivalue_line("filterwarnings", "ignore:The copy keyword is deprecated")
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas")
