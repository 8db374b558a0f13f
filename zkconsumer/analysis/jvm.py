"""JVM start options for a one-shot ``zkconsumer analyze`` of a small trace (a lab run's: ``traces.SMALL_TRACE_BYTES``).

A cold driver JVM spends most of a small analysis loading classes and JIT-compiling Spark, not analysing: the
C2 compiler alone burnt ~25 s of CPU on a 3,000-line trace. For a JVM that lives for one small analysis:

* ``-XX:TieredStopAtLevel=1`` (C1 only): the code never runs long enough for C2 to pay off. Not for long-lived
  sessions (tests, benchmarks, compare): C1 code is slower and filled the code cache by the third analysis;
* ``-XX:+UseSerialGC``: a small heap, one thread to spare for work on a 2-core machine;
* a CDS archive of the classes Spark loads (``-XX:SharedArchiveFile``), kept in a per-user cache and keyed by
  the JVM, the Spark jars and these options: session start 6-9 → ~3 s, and less class loading later. The first
  such run asks the JVM to write it at its normal exit (``-XX:ArchiveClassesAtExit``: ~190 MB, tens of seconds
  after the command has returned, since the JVM exits when the Python driver does); a later run moves the
  finished file into place, or leaves it while its JVM is still writing. A stale or unusable archive is
  ignored by the JVM (``-Xshare:auto``, the default), never fatal. ``ZKCONSUMER_CDS=0`` turns the archive off;
  ``ZKCONSUMER_CACHE_DIR`` moves the cache.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ONE_SHOT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
#: CDS says nothing on success; a mismatched or unreadable archive would print warnings (the run goes on).
QUIET_CDS = ("-Xlog:cds=off", "-Xlog:class+path=off")
CDS_ENV = "ZKCONSUMER_CDS"
CACHE_ENV = "ZKCONSUMER_CACHE_DIR"
#: Where /proc cannot say whether a partial archive's JVM is alive: after this long it is taken as finished.
PARTIAL_SECONDS = 600
#: A dynamic CDS archive's first four bytes (JDK 17+, little-endian). The JVM writes its header last, so a dump
#: cut short (the JVM killed) leaves a file without it.
DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")


@dataclass
class JvmPlan:
    """What to pass to the driver JVM, and where a new archive lands once the JVM has exited."""

    options: list[str]
    archive: Path | None = None  # the archive this run maps, or its JVM will write (``partial``, then renamed)
    partial: Path | None = None  # set when this run's JVM writes the archive at its exit

    @property
    def java_options(self) -> str:
        return " ".join(self.options)


def cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "zkconsumer")
    return Path(base) / "jvm"


def cds_enabled() -> bool:
    return os.environ.get(CDS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def java_binary() -> Path | None:
    """The java spark-class runs: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return Path(found).resolve() if found and os.path.exists(found) else None


def spark_jars() -> Path:
    """The driver's classpath: ``$SPARK_HOME/jars``, or pyspark's own when SPARK_HOME is unset (as pyspark)."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        import pyspark

        home = os.path.dirname(pyspark.__file__)
    return Path(home) / "jars"


def archive_key(java: Path, jars: Path, options: Iterable[str]) -> str:
    """Changes whenever the archive could not be used: another JVM build, other jars, other JVM options.

    The JVM is identified by its files (libjvm's size and time, the ``release`` file) rather than by running
    ``java -version``: no extra process per run."""
    h = hashlib.sha256()
    home = java.parent.parent
    h.update(str(java).encode())
    for f in (home / "release", *sorted(home.glob("lib/server/libjvm.*"))):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(str(jars.resolve()).encode())
    for jar in sorted(jars.glob("*.jar")):
        h.update(f"{jar.name}:{jar.stat().st_size}".encode())
    h.update(" ".join(options).encode())
    return h.hexdigest()[:16]


def plan_one_shot(cache: Path | None = None, cds: bool | None = None) -> JvmPlan:
    """Options for a JVM that analyses one small trace: C1 only, serial GC, and the cached CDS archive, or an
    order to write it at exit. Without a java, the jars or a writable cache the archive is left out."""
    options = list(ONE_SHOT_OPTIONS)
    if not (cds_enabled() if cds is None else cds):
        return JvmPlan(options)
    java, jars = java_binary(), spark_jars()
    if java is None or not jars.is_dir():
        return JvmPlan(options)
    cache = cache or cache_dir()
    archive = cache / f"spark-{archive_key(java, jars, options)}.jsa"
    try:
        writing = _settle(cache, archive)
        if archive.is_file():
            return JvmPlan([*options, f"-XX:SharedArchiveFile={archive}", *QUIET_CDS], archive)
        if writing:  # another run's JVM is writing it: this run goes without
            return JvmPlan(options)
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return JvmPlan(options)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    return JvmPlan([*options, f"-XX:ArchiveClassesAtExit={partial}", *QUIET_CDS], archive, partial)


def _settle(cache: Path, archive: Path) -> bool:
    """Move a finished partial archive into place; delete failed ones and other keys' archives (an older JVM or
    Spark: never used again). True while a JVM is still writing one for ``archive``."""
    writing = False
    for f in sorted(cache.glob("spark-*.jsa*")):
        if f == archive:
            continue
        if not f.name.endswith(".partial"):
            if not f.name.startswith(archive.name):
                f.unlink(missing_ok=True)
            continue
        if _writer_alive(f):
            writing = writing or f.name.startswith(archive.name)
        elif f.name.startswith(archive.name) and _complete(f):
            os.replace(f, archive)
        else:
            f.unlink(missing_ok=True)
    return writing


def _writer_alive(partial: Path) -> bool:
    """Whether the JVM told to write ``partial`` still runs: its command line names the file."""
    proc = Path("/proc")
    if not proc.is_dir():
        return time.time() - partial.stat().st_mtime < PARTIAL_SECONDS
    needle = f"-XX:ArchiveClassesAtExit={partial}".encode()
    for pid in proc.iterdir():
        if pid.name.isdigit():
            try:
                if needle in (pid / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def _complete(partial: Path) -> bool:
    try:
        with open(partial, "rb") as f:
            return f.read(len(DYNAMIC_MAGIC)) == DYNAMIC_MAGIC
    except OSError:
        return False
