"""Typed figures: the measured numbers a document still states by hand, outside its rendered blocks.

Issue 55's end state is none: every measured number in README.md, docs/ and benchmarks/README.md rendered from a
record (:mod:`.blocks`). Getting there takes re-measuring runs of hours, so the way there is a ratchet: a heuristic
finds the typed figures, ``results/audit/typed-figures.json`` holds each document's count, and the audit fails when a
document *gains* typed figures (a new number typed instead of rendered) and lowers the baseline when asked once
a document lost some. The heuristic over-counts on purpose (a setting such as "6 s sessions" looks like a
measurement), which is why it is a ratchet and not a verdict; code, fenced or inline, and rendered blocks are not
read.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from zkconsumer.results import record as records
from zkconsumer.results.blocks import BLOCK, FENCE, documents

BASELINE = records.RESULTS / "audit" / "typed-figures.json"  # beside the records, not one of them

_NUM = r"\d(?:[\d,]*\d)?(?:\.\d+)?"
#: a number with a unit of time, size or rate, a ratio, a percentage, or a rate of runs
FIGURE = re.compile(
    rf"(?<![\w.\-/]){_NUM}\s?(?:ms|µs|us|s|min|h|MB/s|GiB|MiB|KiB|%)(?![\w/])"  # 1.34 s, 370 ms, 4%
    rf"|(?<![\w.\-/]){_NUM}\s?[x×](?!\w)"  # 0.58x, 161×
    rf"|(?<![\w.\-/]){_NUM} (?:of|in) {_NUM}(?!\w|\.\d)"  # 8 of 200, 9 in 20
    rf"|(?<![\w.\-/]){_NUM}/{_NUM}(?![\w/]|\.\d)"  # 200/200
    rf"|(?<![\w.\-/]){_NUM} (?:a|per) (?:minute|second|run|rebalance|seed)s?\b"  # 215 a minute
)
#: a duration followed by the setting it is: the session timeout, a fault's pause, a retry's backoff, a schedule's
#: length, a checkpoint's or a tick's period ("4 s sessions", "a 2 s pause", "6 s session timeout")
SETTING = re.compile(
    rf"(?<![\w.\-/]){_NUM}\s?(?:ms|s|min)[ -](?:sessions?|session timeouts?|pauses?|backoffs?|schedules?"
    rf"|checkpoints?|ticks?)\b"
)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_HEADING = re.compile(r"^(#{1,6}) (.*)$", re.M)


@dataclass(frozen=True)
class Typed:
    """One typed figure: where it is and the text it matched."""

    path: str
    line: int
    section: str
    text: str


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by spaces, newlines kept, so offsets and line numbers hold."""
    chars = list(text)
    for a, b in spans:
        for i in range(a, b):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def readable(text: str) -> str:
    """The prose and tables a reader sees as typed: fenced and inline code, rendered blocks, other comments and
    settings (:data:`SETTING`) blanked out."""
    text = _blank(text, [m.span() for m in FENCE.finditer(text)])
    text = _blank(text, [m.span() for m in BLOCK.finditer(text)])
    text = _blank(text, [m.span() for m in _COMMENT.finditer(text)])
    text = _blank(text, [m.span() for m in _INLINE_CODE.finditer(text)])
    return _blank(text, [m.span() for m in SETTING.finditer(text)])


def typed_figures(path: str, text: str) -> list[Typed]:
    """Every typed figure of one document, with the heading it sits under (headings are not read for figures:
    a section named after its run's date and scale is a title, not a claim)."""
    plain = readable(text)
    headings = [(m.start(), m.group(2).strip()) for m in _HEADING.finditer(plain)]
    found = []
    for m in FIGURE.finditer(plain):
        line_start = plain.rfind("\n", 0, m.start()) + 1
        if plain.startswith("#", line_start):
            continue
        section = next((h for at, h in reversed(headings) if at <= m.start()), "")
        found.append(Typed(path, plain.count("\n", 0, m.start()) + 1, section, m.group(0)))
    return found


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(records.ROOT))
    except ValueError:
        return str(path)


def audit(paths: list[Path] | None = None) -> dict[str, list[Typed]]:
    """Each document's typed figures."""
    return {_rel(p): typed_figures(_rel(p), p.read_text()) for p in (paths or documents())}


def load_baseline(path: Path = BASELINE) -> dict[str, int]:
    return json.loads(path.read_text())["typed_figures"] if path.exists() else {}


def write_baseline(counts: dict[str, int], path: Path = BASELINE) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"about": "typed figures a document may still hold (zkconsumer results audit); "
                                         "a ratchet: it only goes down",
                                "typed_figures": dict(sorted(counts.items()))}, indent=2) + "\n")


def regressions(found: dict[str, list[Typed]], baseline: dict[str, int]) -> dict[str, tuple[int, int]]:
    """Documents holding more typed figures than the baseline allows: (now, allowed). A document the baseline
    does not name is allowed none."""
    return {doc: (len(figs), baseline.get(doc, 0)) for doc, figs in found.items()
            if len(figs) > baseline.get(doc, 0)}


def by_section(figs: list[Typed]) -> list[tuple[str, int]]:
    """Sections by typed figures, most first: where converting pays most."""
    return Counter(f.section for f in figs).most_common()
