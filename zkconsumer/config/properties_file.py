"""Java ``.properties`` files, as Kafka's tools read ``consumer.properties``."""

from __future__ import annotations

import re
from pathlib import Path

from zkconsumer.config.properties import ConfigError


def read_properties(path: str | Path) -> dict[str, str]:
    """A Java ``.properties`` file: ``key=value`` / ``key: value`` / ``key value``, ``#``/``!`` comments,
    backslash line continuations and escapes. Missing file → ConfigError."""
    try:
        text = Path(path).read_text(encoding="latin-1")
    except OSError as e:
        raise ConfigError(f"cannot read properties file {path}: {e.strerror}") from None
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()  # a continuation line loses its leading blanks too
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical.append(line[:-1])
            continue
        logical.append(line)
        entry = "".join(logical)
        logical = []
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$", entry)
        if not m:
            continue
        key = _unescape(m.group(1))
        if key:
            out[key] = _unescape(m.group(2))
    return out


def _unescape(s: str) -> str:
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u"
                  and len(m.group(1)) == 5 else {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(m.group(1),
                                                                                                 m.group(1)), s)
