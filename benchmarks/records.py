"""A benchmark's run as a result record (results/README.md, ``zkconsumer.results.record``): what ran, when, on
which commit, machine and versions, the fingerprint of the source it measured, its settings and its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from zkconsumer.results.record import Recorder, Scope

# the code a run measures is the code it imported: commit and fingerprints are read when the benchmark starts, not
# when it writes (an hour-long run outlives commits made meanwhile)
_RECORDER = Recorder()


def write_record(path: Path, settings: dict[str, Any], figures: dict[str, Any],
                 scope: Scope = Scope.SIM_AND_LAB) -> None:
    """Write ``figures`` as a result record at ``path``; ``settings`` may be a run's ``vars(args)`` (its paths are
    written as strings); ``scope``: the code they measure (the simulator's, the real lab's, or both)."""
    _RECORDER.write(path, settings, figures, scope)
