"""Apache Kafka's own jars: where they come from, where they are cached, and the harness compiled against them.

Kafka is the judge of zkconsumer's exactness, so its published artifacts are run as they are: the setup asks Maven
for ``org.apache.kafka:kafka_2.10:0.8.2.2`` and its dependencies (the descriptor is ``poms/kafka-<version>.xml``
beside this module) and copies them into a cache that outlives a checkout. Nothing fetched is committed.

Where a distribution is found, in this order:

1. ``ZKCONSUMER_KAFKA_HOME``: your own Kafka installation (a release directory with ``libs/*.jar``, as the
   ``kafka_2.10-0.8.2.2.tgz`` release unpacks); its version is read from its ``kafka_*.jar``;
2. the cache, ``$ZKCONSUMER_KAFKA_CACHE/<version>/libs`` (default ``~/.cache/zkconsumer/kafka``), filled by
   ``mvn dependency:copy-dependencies`` on first use (``zkconsumer kafka fetch``; ``make setup`` does it).

The one piece of Java the project keeps, ``java/HighLevelConsumers.java`` (several of Kafka's own high-level
consumers in one JVM, driven on stdin), is compiled with ``javac`` against the distribution's jars into the cache,
keyed by the source's hash, so a changed harness is rebuilt and an unchanged one never is.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from glob import glob
from pathlib import Path

from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.server import find_java

#: The Kafka versions a descriptor is kept for.
KNOWN_VERSIONS = ("0.8.2.2", "3.9.1", "4.1.1")
DEFAULT_VERSION = "0.8.2.2"
HERE = Path(__file__).resolve().parent
HARNESS_SOURCE = HERE / "java" / "HighLevelConsumers.java"
_KAFKA_JAR = re.compile(r"kafka_(\d+\.\d+)-(\d+(?:\.\d+)+)\.jar$")


class KafkaDistError(ZkConsumerError, RuntimeError):
    """Kafka's jars could not be found, fetched or compiled against; the message says what to do."""


def cache_root() -> Path:
    root = os.environ.get("ZKCONSUMER_KAFKA_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "zkconsumer" / "kafka"


def descriptor(version: str) -> Path:
    """The Maven descriptor naming this version's artifacts."""
    path = HERE / "poms" / f"kafka-{version}.xml"
    if not path.exists():
        raise KafkaDistError(f"no descriptor for Kafka {version}: known versions are {', '.join(KNOWN_VERSIONS)}")
    return path


@dataclass(frozen=True)
class KafkaDist:
    """One Kafka distribution's jars on this machine."""

    version: str
    libs: Path
    source: str  # "ZKCONSUMER_KAFKA_HOME (...)" or "cache (...)"

    @property
    def jars(self) -> list[str]:
        return sorted(glob(str(self.libs / "*.jar")))

    @property
    def classpath(self) -> str:
        return os.pathsep.join(self.jars)

    def harness_classes(self) -> Path:
        """The compiled harness for this distribution (compiled now if missing or stale)."""
        return compile_harness(self)


def _version_of(libs: Path) -> str | None:
    for jar in glob(str(libs / "kafka_*.jar")):
        m = _KAFKA_JAR.search(os.path.basename(jar))
        if m:
            return m.group(2)
    return None


def _from_home(version: str) -> KafkaDist | None:
    home = os.environ.get("ZKCONSUMER_KAFKA_HOME")
    if not home:
        return None
    libs = Path(home).expanduser() / "libs"
    found = _version_of(libs)
    if found is None:
        raise KafkaDistError(f"ZKCONSUMER_KAFKA_HOME={home} holds no libs/kafka_<scala>-<version>.jar: point it at an "
                             "unpacked Kafka release (the directory with bin/ and libs/)")
    if found != version:
        return None  # another version: this one comes from the cache
    return KafkaDist(version, libs.resolve(), f"ZKCONSUMER_KAFKA_HOME ({home})")


def cached(version: str = DEFAULT_VERSION) -> KafkaDist | None:
    """The distribution if it is on this machine already (nothing is fetched)."""
    dist = _from_home(version)
    if dist is not None:
        return dist
    libs = cache_root() / version / "libs"
    complete = libs.parent / ".complete"
    # the marker holds the descriptor it was fetched with: a changed descriptor (another logging jar, a fixed
    # dependency) is fetched again instead of running a stale set of jars
    if complete.exists() and complete.read_text() == descriptor(version).read_text() and _version_of(libs) == version:
        return KafkaDist(version, libs, f"cache ({libs})")
    return None


def find_mvn() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise KafkaDistError("Maven ('mvn') is needed to fetch Kafka's jars: 'sudo apt-get install -y maven', or "
                             "point ZKCONSUMER_KAFKA_HOME at an unpacked Kafka release")
    return mvn


def fetch(version: str = DEFAULT_VERSION, quiet: bool = True) -> KafkaDist:
    """The distribution, fetched with Maven into the cache first if it is not there.

    The copy lands in a temporary directory beside the cache's and is renamed into place, so an interrupted
    fetch never leaves a half-filled ``libs/`` that a later run would take for complete.
    """
    dist = cached(version)
    if dist is not None:
        return dist
    pom = descriptor(version)
    target = cache_root() / version
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=target.parent))
    cmd = [find_mvn(), "-B", *(["-q"] if quiet else []), "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={staging / 'libs'}", "-DincludeScope=runtime"]
    try:
        done = subprocess.run(cmd, capture_output=quiet, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            out = ((done.stdout or "") + (done.stderr or "")).strip().splitlines()
            raise KafkaDistError(f"Maven could not fetch Kafka {version} ({' '.join(cmd)}):\n" + "\n".join(out[-15:]))
        if _version_of(staging / "libs") != version:
            raise KafkaDistError(f"Maven's copy for Kafka {version} holds no kafka_*-{version}.jar ({staging})")
        (staging / ".complete").write_text(pom.read_text())
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    dist = cached(version)
    assert dist is not None
    return dist


def find_javac() -> str:
    """``javac`` beside the ``java`` that runs Kafka (a JDK, not only a runtime), else the one on PATH."""
    java = Path(find_java()).resolve()
    javac = java.parent / "javac"
    if javac.exists():
        return str(javac)
    found = shutil.which("javac")
    if not found:
        raise KafkaDistError("a JDK's javac is needed to compile the Kafka consumer harness: "
                             "'sudo apt-get install -y default-jdk-headless', or set JAVA_HOME to a JDK")
    return found


def compile_harness(dist: KafkaDist) -> Path:
    """Compile ``HighLevelConsumers.java`` against ``dist`` unless a build of this exact source is cached."""
    source = HARNESS_SOURCE.read_bytes()
    key = hashlib.sha256(source + dist.classpath.encode()).hexdigest()[:16]
    out = cache_root() / "harness" / f"{dist.version}-{key}"
    if (out / "HighLevelConsumers.class").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=out.parent))
    try:
        # --release 11: the harness uses ProcessHandle (Java 9) and Charset-taking streams (Java 10)
        cmd = [find_javac(), "-nowarn", "-Xlint:-options", "--release", "11", "-encoding", "UTF-8",
               "-cp", dist.classpath, "-d", str(staging), str(HARNESS_SOURCE)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise KafkaDistError(f"javac could not compile the Kafka {dist.version} harness:\n"
                                 f"{done.stdout}{done.stderr}")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out
