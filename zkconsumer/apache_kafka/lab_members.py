"""Kafka 0.8.2.2's own consumers as members of a lab's group: one JVM per member, and the trace it does not write.

The lab starts each member as it starts a ``zkconsumer consume`` process (its backend runs the command and delivers
SIGTERM or SIGKILL); this module builds the command and, from what the member's JVM writes (its log4j file and the
harness's record lines, which the backend collects as the member's output), writes the member's trace with
:class:`~zkconsumer.apache_kafka.consumer_trace.KafkaMemberTrace`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from zkconsumer.apache_kafka.consumer_trace import KafkaMemberTrace
from zkconsumer.apache_kafka.jars import DEFAULT_VERSION, KafkaDist, fetch
from zkconsumer.apache_kafka.processes import harness_command, write_log4j

#: What ``zkconsumer lab``/``compare`` call this client (``RunPlan.client``).
CLIENT = "kafka-0.8.2.2"


class KafkaLabMembers:
    """Commands and traces of the Kafka members of one lab group. A member's stdout (the harness's JSON lines) is
    where the lab's backend writes it, ``<logs_dir>/<member>.log``."""

    def __init__(self, zk_connect: str, group: str, topics: Iterable[str], trace_dir: Path, logs_dir: Path,
                 strategy: str = "range",
                 properties: Mapping[str, object] | None = None, streams: int = 1,
                 version: str = DEFAULT_VERSION) -> None:
        self.zk_connect, self.group = zk_connect, group
        self.topics = list(topics)
        self.trace_dir, self.logs_dir = trace_dir, logs_dir
        self.strategy, self.streams = strategy, streams
        self.properties = dict(properties or {})
        self.version = version
        self._dist: KafkaDist | None = None
        self.traces: dict[str, KafkaMemberTrace] = {}

    def command(self, member: str, topics: Iterable[str] | None = None) -> list[str]:
        """The member's command line (a JVM that starts it and runs until signalled); its trace starts here.
        ``topics``: the member's own subscription, where it is not the group's :attr:`topics`."""
        topics = list(topics) if topics is not None else self.topics
        if self._dist is None:
            self._dist = fetch(self.version)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        log_file = self.logs_dir / f"{member}.kafka.log"
        log4j = write_log4j(self.logs_dir / f"{member}.log4j.properties", log_file, level="WARN")
        if member not in self.traces:
            auto_commit = str(self.properties.get("auto.commit.enable", "true")).lower() == "true"
            self.traces[member] = KafkaMemberTrace(self.trace_dir, self.group, member,
                                                   {t: self.streams for t in topics}, log_file,
                                                   self.logs_dir / f"{member}.log", auto_commit=auto_commit)
        # UTC: the trace reads the log's timestamps (log4j writes local time) as UTC
        return harness_command(self._dist, self.zk_connect, self.group, topics, streams=self.streams,
                               strategy=self.strategy, properties=self.properties, report_records=True,
                               start=[member], log4j=log4j, jvm_options=["-Duser.timezone=UTC"], until_signal=True)

    def poll(self, final: bool = False) -> None:
        for trace in self.traces.values():
            trace.poll(final)

    def close(self) -> None:
        for trace in self.traces.values():
            trace.close()
