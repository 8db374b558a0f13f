"""The state file a broker started by ``zkconsumer broker start`` leaves in its data directory: its pid, port
and bootstrap address, read by ``broker stop``/``status``, the lab's backends and the fault matrix."""

from __future__ import annotations

import json
import os
from pathlib import Path

STATE_FILE = "zkconsumer-broker.json"


def read_state(data_dir: Path) -> dict | None:
    """The state of the broker in ``data_dir`` (None: none written yet, or half written)."""
    try:
        return json.loads((Path(data_dir) / STATE_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_state(data_dir: Path, state: dict) -> None:
    """Replace the state atomically (a reader never sees half a file)."""
    tmp = Path(data_dir) / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, Path(data_dir) / STATE_FILE)
