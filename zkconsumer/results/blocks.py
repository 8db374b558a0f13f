"""Marked blocks in Markdown: the text between two comments is rendered from a result record, never typed.

A table (or any block a view makes), with the record's provenance under it::

    <!-- result sim-variants-200 sim-rates -->
    | world | verdict | ... |
    ...
    *From results/sim-variants-200.json: `zkconsumer sim ...`, 2026-12-07, commit 58bf1af, 2 cores ...*
    <!-- /result 3f9a0c1d2e4b -->

and a single figure inside a sentence: ``<!-- result sim-variants-200 figure coordinator.runs -->200<!-- /result
8d2c.. -->``. The closing comment carries a hash of what was rendered: :func:`check` tells a block edited by hand
(its text no longer matches its hash) from one whose record changed (its text no longer matches the record). A
record older than the code it measured is *marked* in the text (``<span class="stale">``), not failed: the mark is
left out of the hash and of the comparison, so the code moving on never fails the check, and ``render`` (or the
docs site's build) writes the mark a reader sees.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from zkconsumer.errors import IllegalArgument
from zkconsumer.results import record as records
from zkconsumer.results.views import VIEWS, render_view

BLOCK = re.compile(r"<!-- result (?P<name>[\w.\-]+(?:\+[\w.\-]+)*) (?P<view>[\w\-]+)(?: (?P<arg>[^\s>]+))? -->"
                   r"(?P<body>.*?)<!-- /result(?: (?P<hash>[0-9a-f]+))? -->", re.S)
STALE = re.compile(r' ?<span class="stale">.*?</span>', re.S)


class State(Enum):
    """What :func:`check` finds of a block."""

    CURRENT = "current"
    STALE = "stale"  # agrees with its record, and the code it measured has changed since: marked, not failed
    EDITED = "edited by hand"  # its text is not what was rendered
    OUTDATED = "disagrees with its record"  # rendered from an older record: render again
    BROKEN = "broken"  # its record or figure is missing, or its view unknown

    @property
    def fails(self) -> bool:
        return self in (State.EDITED, State.OUTDATED, State.BROKEN)


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int
    name: str
    view: str
    state: State
    detail: str = ""

    def __str__(self) -> str:
        return (f"{self.path}:{self.line}: results/{self.name}.json ({self.view}): {self.state.value}"
                + (f": {self.detail}" if self.detail else ""))


def digest(body: str) -> str:
    return hashlib.sha256(STALE.sub("", body).encode()).hexdigest()[:12]


def provenance(rec: records.Record) -> str:
    """The line under a block: which record, the command, the date, the commit and the machine."""
    m = rec.data.get("machine", {})
    where = f"{m.get('cores', '?')} cores" + (f", {m['cpu']}" if m.get("cpu") else "")
    return (f"*From results/{rec.name}.json: `{rec.data['command']}`, {rec.date}, commit {rec.commit}, "
            f"{where}.*")


def stale_mark(since: str, inline: bool = False) -> str:
    if inline:
        return f'<span class="stale">(measured before {since})</span>'
    return f'<span class="stale">Measured before {since}: the code it measures has changed since.</span>'


def _inline(view: str) -> bool:
    return VIEWS[view].inline


def render_body(recs: list[records.Record], view: str, arg: str | None, stale: str | None) -> str:
    """A block's text: the view of its records, each record's provenance under it (a block may set two runs side
    by side, ``a+b``), the stale mark when one of them is older than its code."""
    text = render_view(recs, view, arg)
    if _inline(view):
        return text + (f" {stale_mark(stale, inline=True)}" if stale else "")
    mark = f" {stale_mark(stale)}" if stale else ""
    return f"\n{text}\n\n" + "\n\n".join(provenance(r) for r in recs) + f"{mark}\n"


FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)


def _blocks(text: str) -> list[re.Match[str]]:
    """The blocks of ``text``, but those inside fenced code (a page showing how to write one)."""
    fenced = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    return [m for m in BLOCK.finditer(text) if not any(a <= m.start() < b for a, b in fenced)]


@dataclass
class Pass:
    """One render or check: each record is read, and its code compared with the tree, once however many blocks
    (and files) quote it; a page quoting one record in ten sentences does not fingerprint the source ten times."""

    loader: Callable[[str], records.Record] = records.load
    _records: dict[str, records.Record] = field(default_factory=dict)
    _stale: dict[str, str | None] = field(default_factory=dict)

    def record(self, name: str) -> records.Record:
        if name not in self._records:
            self._records[name] = self.loader(name)
        return self._records[name]

    def stale_since(self, rec: records.Record) -> str | None:
        if rec.name not in self._stale:
            self._stale[rec.name] = rec.stale_since()
        return self._stale[rec.name]

    def records(self, names: str) -> list[records.Record]:
        """A block's records: ``a+b`` names two."""
        return [self.record(n) for n in names.split("+")]

    def first_stale(self, recs: list[records.Record]) -> str | None:
        return next((s for s in map(self.stale_since, recs) if s), None)


Loader = Callable[[str], records.Record] | Pass


def _pass(loader: Loader) -> Pass:
    return loader if isinstance(loader, Pass) else Pass(loader)


def render_text(text: str, loader: Loader = records.load, with_stale: bool = True) -> str:
    """``text`` with every block rendered from its record (and marked where its record is older than its code)."""
    run = _pass(loader)

    def one(m: re.Match[str]) -> str:
        recs = run.records(m["name"])
        if m["view"] not in VIEWS:
            raise IllegalArgument(f"unknown view {m['view']!r} (known: {', '.join(sorted(VIEWS))})")
        body = render_body(recs, m["view"], m["arg"], run.first_stale(recs) if with_stale else None)
        head = f"<!-- result {m['name']} {m['view']}" + (f" {m['arg']}" if m["arg"] else "") + " -->"
        return f"{head}{body}<!-- /result {digest(body)} -->"

    out, at = [], 0
    for m in _blocks(text):
        out += [text[at:m.start()], one(m)]
        at = m.end()
    return "".join(out) + text[at:]


def check_text(path: Path, text: str, loader: Loader = records.load) -> list[Finding]:
    """Each block of ``text`` judged against its record."""
    run = _pass(loader)
    out = []
    for m in _blocks(text):
        line = text.count("\n", 0, m.start()) + 1
        body = m["body"]
        name, view = m["name"], m["view"]

        def finding(state: State, detail: str = "") -> Finding:
            return Finding(path, line, name, view, state, detail)  # noqa: B023 - used at once

        if m["hash"] is None or digest(body) != m["hash"]:
            out.append(finding(State.EDITED, "its text is not what `zkconsumer results render` wrote; change the "
                                             "record (or the view), not the text"))
            continue
        try:
            recs = run.records(name)
            if view not in VIEWS:
                raise IllegalArgument(f"unknown view {view!r}")
            wanted = render_body(recs, view, m["arg"], None)
        except IllegalArgument as e:
            out.append(finding(State.BROKEN, str(e)))
            continue
        if STALE.sub("", body) != wanted:
            out.append(finding(State.OUTDATED, "run `zkconsumer results render`"))
            continue
        since = run.first_stale(recs)
        out.append(finding(State.STALE, f"measured before {since}") if since else finding(State.CURRENT))
    return out


#: the documents whose measured numbers are rendered (README, docs/, benchmarks/README.md)
def documents(root: Path = records.ROOT) -> list[Path]:
    return [root / "README.md", root / "benchmarks" / "README.md", *sorted((root / "docs").rglob("*.md"))]


def check(paths: list[Path] | None = None) -> list[Finding]:
    run = Pass()
    return [f for p in (paths or documents()) for f in check_text(p, p.read_text(), run)]


def render(paths: list[Path] | None = None, with_stale: bool = True) -> list[Path]:
    """Render every block of ``paths`` in place; returns the files that changed."""
    changed, run = [], Pass()
    for p in paths or documents():
        text = p.read_text()
        new = render_text(text, run, with_stale=with_stale)
        if new != text:
            p.write_text(new)
            changed.append(p)
    return changed
