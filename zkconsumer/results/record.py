"""A result record: one measured run as a small JSON file in ``results/`` (results/README.md).

Its fields: ``command`` (what ran, exactly), ``started`` and ``date`` (UTC), ``commit`` (the code it started on;
``-dirty`` when ``zkconsumer/`` had uncommitted changes), ``machine`` (cores, CPU model, memory), ``versions`` (of
the parts: Python, kazoo, kafka-python, PySpark, ZooKeeper's and Kafka's jars), ``source`` (the paths the result
depends on and their fingerprint, :mod:`.fingerprint`), ``settings`` and ``figures`` (what it measured, as the tool
wrote it). Plain JSON: ``json.load`` reads it, and so does Spark (``spark.read.json(path, multiLine=True)``).
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any

from zkconsumer.apache_kafka.jars import DEFAULT_VERSION
from zkconsumer.errors import IllegalArgument
from zkconsumer.results import fingerprint
from zkconsumer.zk.server import find_classpath

#: the checkout this package belongs to (records, documents and source are read relative to it)
ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"

#: the code every kind of result measures: the consumer and what it stands on
_CORE = ["zkconsumer/consumer", "zkconsumer/zk", "zkconsumer/assignment", "zkconsumer/coordinator",
         "zkconsumer/broker", "zkconsumer/migration", "zkconsumer/scenario", "zkconsumer/log", "zkconsumer/wire",
         "zkconsumer/config", "zkconsumer/errors.py", "zkconsumer/types.py", "zkconsumer/records.py",
         "zkconsumer/trace.py", "zkconsumer/runtime.py", "zkconsumer/broker_version.py"]


class Scope(Enum):
    """Which code a result measures, so a change elsewhere (the CLI, the docs, the other world) does not mark it
    older than its code."""

    SIM = "sim"  # the simulator running our code
    LAB = "lab"  # real processes: the lab, its analysis, Apache Kafka's harness
    SIM_AND_LAB = "sim+lab"  # both worlds side by side

    @property
    def paths(self) -> list[str]:
        sim = ["zkconsumer/sim"]
        lab = ["zkconsumer/lab", "zkconsumer/analysis", "zkconsumer/apache_kafka", "zkconsumer/kafka_admin.py"]
        return _CORE + {Scope.SIM: sim, Scope.LAB: lab, Scope.SIM_AND_LAB: sim + lab}[self]


def _git(*args: str) -> str:
    return (fingerprint.git(ROOT, *args) or b"").decode().strip()


def current_commit() -> str:
    """HEAD's short id, ``-dirty`` when ``zkconsumer/`` has uncommitted changes."""
    return _git("rev-parse", "--short", "HEAD") + ("-dirty" if _git("status", "--porcelain", "zkconsumer") else "")


def machine() -> dict[str, Any]:
    cpu = ""
    if os.path.exists("/proc/cpuinfo"):
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                    if line.startswith("model name")), "")
    memory = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": memory}


def _package(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _zookeeper_jar() -> str | None:
    try:
        classpath, _ = find_classpath()
    except Exception:  # noqa: BLE001 - no ZooKeeper here: the record says so
        return None
    for entry in classpath.split(os.pathsep):
        for jar in glob.glob(os.path.join(os.path.dirname(entry), "zookeeper-[0-9]*.jar")) or [entry]:
            name = os.path.basename(jar)
            if name.startswith("zookeeper-") and name[10:11].isdigit():
                return name.removeprefix("zookeeper-").removesuffix(".jar")
    return None


def versions() -> dict[str, str | None]:
    """The versions of the parts a run used: Python, the client libraries, Spark, ZooKeeper's server jar and the
    Apache Kafka jars the project fetches (the version of Kafka's own code it judges against)."""
    return {"python": platform.python_version(), "kazoo": _package("kazoo"),
            "kafka-python": _package("kafka-python"), "pyspark": _package("pyspark"),
            "zookeeper": _zookeeper_jar(), "kafka": DEFAULT_VERSION}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


@dataclass
class Recorder:
    """What a run knows when it starts (the commit and the source it imported, the time, its command): a benchmark
    makes one at import and writes its record at the end, so an hour-long run is not stamped with commits made
    meanwhile."""

    started: str = field(default_factory=_now)
    commit: str = field(default_factory=current_commit)
    command: str = field(default_factory=lambda: " ".join([Path(sys.executable).name, *sys.argv]))
    #: each scope's fingerprint as the run imported it
    fingerprints: dict[Scope, str] = field(default_factory=lambda: {
        s: fingerprint.of_tree(ROOT, s.paths) for s in Scope})

    def write(self, path: Path, settings: dict[str, Any], figures: dict[str, Any], scope: Scope) -> Path:
        """Write the record of this run's ``figures`` to ``path`` (a JSON file, normally in ``results/``);
        ``scope`` is the code the figures measure."""
        record = {
            "command": self.command, "date": _now(), "started": self.started, "commit": self.commit,
            "machine": machine(), "versions": versions(),
            "source": {"scope": scope.value, "paths": scope.paths, "fingerprint": self.fingerprints[scope],
                       "kind": fingerprint.KIND},
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()},
            "figures": figures,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        return path


@dataclass(frozen=True)
class Record:
    """A record as read back: its file name (how documents name it) and its fields."""

    name: str
    data: dict[str, Any]

    @property
    def figures(self) -> Any:
        return self.data["figures"]

    @property
    def commit(self) -> str:
        return self.data.get("commit", "?")

    @property
    def date(self) -> str:
        return self.data.get("date", "")[:10]

    def figure(self, dotted: str) -> Any:
        """The figure at a dotted path (``coordinator.verdict``; a number indexes a list); with a ``/`` in it the
        path is split on ``/`` instead, for keys that hold dots (``kafka-0.8/verdict``)."""
        value: Any = self.figures
        for part in dotted.split("/" if "/" in dotted else "."):
            try:
                value = value[int(part)] if isinstance(value, list) else value[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise IllegalArgument(f"results/{self.name}.json has no figure {dotted!r} "
                                      f"(no {part!r} there)") from None
        return value

    def stale_since(self) -> str | None:
        """When the code this record measured has changed since: the first commit that changed it (or
        ``"a later change"`` when git cannot say which); None when the code is as it was measured. A record with no
        ``source`` (written before fingerprints) is judged by its commit alone."""
        source = self.data.get("source")
        commit = self.commit.removesuffix("-dirty")
        if source is None:
            return None
        if source.get("kind") != fingerprint.KIND:
            return None  # computed another way: not comparable (results/README.md says how to add it again)
        if fingerprint.of_tree(ROOT, source["paths"]) == source["fingerprint"]:
            return None
        return (fingerprint.first_change_after(ROOT, commit, source["paths"], source["fingerprint"])
                or "uncommitted changes")


def load(name: str, results: Path = RESULTS) -> Record:
    """The record ``results/<name>.json`` (a clear error when there is none or it is not a record)."""
    path = results / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise IllegalArgument(f"no result record {path}") from None
    except json.JSONDecodeError as e:
        raise IllegalArgument(f"{path} is not JSON: {e}") from None
    missing = [k for k in ("command", "date", "commit", "figures") if k not in data]
    if missing:
        raise IllegalArgument(f"{path} is not a result record: no {', '.join(missing)}")
    return Record(name, data)


def load_all(results: Path = RESULTS) -> list[Record]:
    return [load(p.stem, results) for p in sorted(results.glob("*.json"))]
