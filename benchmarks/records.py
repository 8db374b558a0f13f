"""A benchmark's run as a result record (results/README.md): what ran, when, on which commit and machine, its
settings and its figures, one JSON file a document can quote."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()


def _commit() -> str:
    return _git("rev-parse", "--short", "HEAD") + ("-dirty" if _git("status", "--porcelain", "zkconsumer") else "")


# the code a run measures is the code it imported: the commit is read when the benchmark starts, not when it writes
# (an hour-long run outlives commits made meanwhile)
_STARTED = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
_STARTED_COMMIT = _commit()


def write_record(path: Path, settings: dict[str, Any], figures: dict[str, Any]) -> None:
    """Write ``figures`` with the command, the UTC dates it started and ended, the commit it started on (``-dirty``
    when ``zkconsumer/`` had uncommitted changes), the machine and the Python version."""
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    record = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "started": _STARTED,
        "commit": _STARTED_COMMIT,
        "machine": {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": round(os.sysconf("SC_PAGE_SIZE")
                                                                             * os.sysconf("SC_PHYS_PAGES") / 2**30)},
        "versions": {"python": platform.python_version()},
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()},
        "figures": figures,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
