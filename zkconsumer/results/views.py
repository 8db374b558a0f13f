"""How a record becomes Markdown: one named view per kind of table, and ``figure`` for one number in a sentence.

A view reads only its record's figures; it never computes a figure the run did not write (a ratio of two recorded
figures at most), so a rendered number is always one a run measured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkconsumer.errors import IllegalArgument
from zkconsumer.results.history import nemesis_summaries
from zkconsumer.results.record import Record
from zkconsumer.sim.checkers import Invariant
from zkconsumer.sim.runs import MigrationBreach

#: a breaking run's kinds as a column says them (counts are of runs that broke that way)
BREACH_COLUMNS: dict[str, str] = {
    Invariant.OVERLAPS: "two live owners", Invariant.LOST: "lost records",
    Invariant.DUPLICATES_COMMITTED: "duplicates of committed", Invariant.COMMITS_BACKWARDS: "commits moving back",
    Invariant.UNOWNED_AFTER_HEAL: "unowned after the heal", Invariant.ZOMBIE_DELIVERIES: "zombie deliveries",
    Invariant.POLL_SKIPS: "poll skips", Invariant.NONMONOTONIC_POLLS: "nonmonotonic polls",
    MigrationBreach.LEFT_MIXED: "left mixed", MigrationBreach.NOT_OWNED: "not owned at the end",
}


@dataclass(frozen=True)
class View:
    render: Callable[[Record, str | None], str]
    inline: bool = False


def number(value: Any) -> str:
    """A figure as the documents write numbers: thousands separated, floats as recorded."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def figure(rec: Record, arg: str | None) -> str:
    if not arg:
        raise IllegalArgument(f"results/{rec.name}.json: the figure view needs a dotted path")
    return number(rec.figure(arg))


def sim_rates(rec: Record, arg: str | None) -> str:
    """Nemesis rates per simulated world (``benchmarks/sim_rates.py``: a results.json per world; or one
    ``zkconsumer sim --out`` results.json): the verdict as a rate, the runs that broke each way (only the kinds some
    world broke), how migrations ended, the speed."""
    by_world = dict(nemesis_summaries(rec))
    worlds = arg.split(",") if arg else list(by_world)
    missing = [w for w in worlds if w not in by_world]
    if missing:
        raise IllegalArgument(f"results/{rec.name}.json has no world {', '.join(missing)}")
    rows = [by_world[w] for w in worlds]
    kinds = [k for k in BREACH_COLUMNS if any(r.get("breaches", {}).get(k) for r in rows)]
    migrating = any("migration_results" in r for r in rows)
    header = ["world", "verdict", *(BREACH_COLUMNS[k] for k in kinds)]
    header += ["migrations ended"] if migrating else []
    header += ["schedules a minute"]
    body = []
    for w, r in zip(worlds, rows, strict=True):
        broke, runs = r["breaking_runs"], r["runs"]
        verdict = f"breaks in {broke:,} of {runs:,}" if broke else f"holds in {runs:,} of {runs:,}"
        row = [f"`{w}`", verdict, *(number(r["breaches"].get(k, 0)) for k in kinds)]
        if migrating:
            ends = r.get("migration_results", {})
            row.append(", ".join(f"{v} {k}" for k, v in sorted(ends.items())) or "-")
        row.append(number(r["schedules_per_minute"]))
        body.append(row)
    return _table(header, body)


def replay_sim(rec: Record, arg: str | None) -> str:
    """``benchmarks/sim_replay.py``: each shrunk reproducer, how often it breaks in simulation and how (and on the
    real lab, where the record has real runs)."""
    rows = rec.figures["rows"]
    real = any("real_n" in r for r in rows)
    header = ["reproducer", "actions", "simulated", "how (simulated)"] + (["real", "how (real)"] if real else [])
    body = []
    for r in rows:
        how = ", ".join(f"{BREACH_COLUMNS.get(k, k)} {v}" for k, v in sorted(r["simulated_invariants"].items()))
        row = [r["reproducer"].split("-")[0], r["actions"], f"{r['simulated_k']}/{r['simulated_n']}", how or "-"]
        if real:
            row += [f"{r['real_k']}/{r['real_n']}", r.get("real_broken") or "-"]
        body.append(row)
    return _table(header, body)


def _cell_text(c: dict[str, Any]) -> str:
    if "n/a" in c:
        return "n/a"
    if "refused" in c:
        return "refused"
    if not c["k"]:
        return f"holds {c['n']}/{c['n']}"
    how = ", ".join(f"{BREACH_COLUMNS.get(k, k)} {number(v)}" for k, v in c["breaches"].items())
    return f"breaks {c['k']}/{c['n']}: {how}"


def sim_catalogue(rec: Record, arg: str | None) -> str:
    """``benchmarks/sim_catalogue.py``: each catalogue mode's scenario over many interleavings, per variant, as
    "holds n/n" or "breaks k/n" with the runs that broke each way. ``arg``: the variants, comma-separated (default:
    every one the record ran)."""
    cells: list[dict[str, Any]] = rec.figures["cells"]
    if cells and "variant" in cells[0]:  # one row per (mode, variant): grouped by mode
        grouped: dict[tuple[str, str], dict[str, Any]] = {}
        for c in cells:
            key = (c["mode"], c["scenario"])  # a mode may have several scenarios (k: quorum-loss, broker-kill)
            grouped.setdefault(key, {"mode": c["mode"], "scenario": c["scenario"]})[c["variant"]] = c
        cells = list(grouped.values())
    known = [k for k in dict.fromkeys(k for c in cells for k in c) if k not in ("mode", "scenario")]
    variants = arg.split(",") if arg else known
    missing = [v for v in variants if v not in known]
    if missing:
        raise IllegalArgument(f"results/{rec.name}.json has no variant {', '.join(missing)}")
    rows = [[c["mode"], f"`{c['scenario']}`", *(_cell_text(c[v]) if v in c else "-" for v in variants)]
            for c in cells]
    return _table(["mode", "scenario", *(f"`{v}`" for v in variants)], rows)


def sim_profile(rec: Record, arg: str | None) -> str:
    """``benchmarks/sim_profile.py``: where a simulated schedule's time goes, per world: each part's share of the
    functions' own time under cProfile, and the simulated seconds a wall second gives."""
    worlds = list(rec.figures)
    parts = list(dict.fromkeys(p for w in worlds for p in rec.figures[w]["shares"]))
    rows = [[part, *(f"{100 * rec.figures[w]['shares'].get(part, 0):.1f}%" for w in worlds)] for part in parts]
    rows.append(["simulated seconds per wall second (profiled)",
                 *(number(rec.figures[w]["simulated_per_wall"]) for w in worlds)])
    return _table(["part", *worlds], rows)


def before_after(rec: Record, arg: str | None) -> str:
    """A nemesis run after a fix beside the same seeds before it (the record's ``before_the_fix_same_seeds``):
    one row each, the runs that broke each way."""
    after = rec.figures
    before = after["before_the_fix_same_seeds"]
    kinds = [k for k in BREACH_COLUMNS if after["breaches"].get(k) or before["breaches"].get(k)]
    rows = [[f"before (commit {before['commit']})", f"{before['breaking_runs']:,} of {after['runs']:,}",
             *(number(before["breaches"].get(k, 0)) for k in kinds)],
            [f"after (commit {rec.commit})", f"{after['breaking_runs']:,} of {after['runs']:,}",
             *(number(after["breaches"].get(k, 0)) for k in kinds)]]
    return _table(["code", "breaking seeds", *(BREACH_COLUMNS[k] for k in kinds)], rows)


VIEWS: dict[str, View] = {
    "before-after": View(before_after),
    "sim-profile": View(sim_profile),
    "sim-catalogue": View(sim_catalogue),
    "figure": View(figure, inline=True),
    "sim-rates": View(sim_rates),
    "replay-sim": View(replay_sim),
}


def render_view(rec: Record, view: str, arg: str | None) -> str:
    try:
        return VIEWS[view].render(rec, arg)
    except KeyError as e:
        raise IllegalArgument(f"results/{rec.name}.json: view {view!r} found no figure {e}") from None
