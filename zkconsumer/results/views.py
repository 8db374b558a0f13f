"""How a record becomes Markdown: one named view per kind of table, and ``figure`` for one number in a sentence.

A view reads only its record's figures; it never computes a figure the run did not write (a ratio of two recorded
figures at most), so a rendered number is always one a run measured.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zkconsumer.errors import IllegalArgument
from zkconsumer.lab.variants import Measure
from zkconsumer.results.history import nemesis_summaries
from zkconsumer.results.record import Record
from zkconsumer.scenario.nemesis import Invariant as LabInvariant
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
#: the real lab's invariants in the same words: a breach of "never two live owners" is a run with two live owners
LAB_BREACHES: dict[str, str] = {
    LabInvariant.ZERO_LOST: "lost records", LabInvariant.ONE_LIVE_OWNER: "two live owners",
    LabInvariant.DUPLICATES_UNCOMMITTED: "duplicates of committed", LabInvariant.COMMITS_FORWARD: "commits moving back",
    LabInvariant.REOWNED_AFTER_HEAL: "unowned after the heal",
}


@dataclass(frozen=True)
class View:
    """``render`` reads one record, or, with ``records`` > 1, that many (a block naming ``a+b``: one world's run
    beside the other's)."""

    render: Callable[..., str]
    inline: bool = False
    records: int = 1


def number(value: Any) -> str:
    """A figure as the documents write numbers: thousands separated, floats as recorded."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):  # the seeds that broke, say
        return ", ".join(map(number, value)) or "none"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def figure(rec: Record, arg: str | None) -> str:
    """One recorded figure inside a sentence; ``path:spec`` formats it (``rows.0.speedup:.1f``, ``n:,``), as the
    record keeps figures unrounded."""
    if not arg:
        raise IllegalArgument(f"results/{rec.name}.json: the figure view needs a dotted path")
    path, _, spec = arg.partition(":")
    return _formatted(rec, path, rec.figure(path), spec)


def _formatted(rec: Record, path: str, value: Any, spec: str) -> str:
    """A figure as ``spec`` says (a format spec), or as :func:`number` writes it without one."""
    if not spec:
        return number(value)
    try:
        return format(value, spec)
    except (ValueError, TypeError):
        raise IllegalArgument(f"results/{rec.name}.json: {path} ({value!r}) cannot be formatted as {spec!r}") from None


def run_date(rec: Record, arg: str | None) -> str:
    """The day the run ended, inside a sentence or a table's "run of" column."""
    return rec.date


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
    actions = any("actions" in r for r in rows)  # the simulated-only half of a replay records no schedule
    header = (["reproducer"] + (["actions"] if actions else []) + ["simulated", "how (simulated)"]
              + (["real", "how (real)"] if real else []))
    body = []
    for r in rows:
        how = ", ".join(f"{BREACH_COLUMNS.get(k, k)} {v}" for k, v in sorted(r["simulated_invariants"].items()))
        row = ([r["reproducer"].split("-")[0]] + ([r.get("actions", "-")] if actions else [])
               + [f"{r['simulated_k']}/{r['simulated_n']}", how or "-"])
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
    by_mode = _by_mode(rec.figures["cells"])
    variants = _variants(rec, by_mode, arg)
    rows = [[mode, f"`{scenario}`", *(_cell_text(cells[v]) if v in cells else "-" for v in variants)]
            for (mode, scenario), cells in by_mode.items()]
    return _table(["mode", "scenario", *(f"`{v}`" for v in variants)], rows)


def _variants(rec: Record, by_mode: dict[tuple[str, str], dict[str, Any]], arg: str | None) -> list[str]:
    """The variants a view shows: ``arg``'s (comma-separated), or every one the record ran, in its order."""
    known = list(dict.fromkeys(v for cells in by_mode.values() for v in cells))
    variants = arg.split(",") if arg else known
    missing = [v for v in variants if v not in known]
    if missing:
        raise IllegalArgument(f"results/{rec.name}.json has no variant {', '.join(missing)}")
    return variants


def _breaks(k: int, n: int) -> bool:
    """A cell's verdict over its runs: it breaks when more than half of them broke."""
    return 2 * k > n


def _in_a_sentence(variant: str, cells: list[tuple[str, int, int]], broke: list[str], unit: str) -> str:
    """One variant's catalogue: the cells that broke ("a (gc-pause) 200/200"), or that all of them held."""
    if broke:
        return f"`{variant}` breaks in {', '.join(broke)} and holds in the other {len(cells) - len(broke)}"
    runs = "/".join(map(str, sorted({n for _, _, n in cells})))
    return f"`{variant}` holds in all {len(cells)} cells ({runs} {unit}{'' if runs == '1' else 's'} each)"


def sim_catalogue_summary(rec: Record, arg: str | None) -> str:
    """A simulated catalogue in a sentence: per variant, the cells that broke ("a 200/200") and that every other
    cell held; ``arg``: the variants (default: every one the record ran)."""
    by_mode = _by_mode(rec.figures["cells"])
    parts = []
    for v in _variants(rec, by_mode, arg):
        ran = [(f"{mode} ({scenario})", c["k"], c["n"]) for (mode, scenario), cells in by_mode.items()
               if (c := cells.get(v)) and "k" in c]
        parts.append(_in_a_sentence(v, ran, [f"{name} {k}/{n}" for name, k, n in ran if k], "seed"))
    return "; ".join(parts)


#: a figure's key ends in its unit (the benchmarks' convention): the header says the unit
_UNITS = (("_mb_s", "MB/s"), ("_ms", "ms"), ("_us", "µs"), ("_s", "s"))


def _header(key: str) -> str:
    if key.endswith("_per_s"):  # a rate: records/s, MB/s
        base = key.removesuffix("_per_s").replace("_", " ")
        return "MB/s" if base == "mb" else f"{base}/s"
    for suffix, unit in _UNITS:
        if key.endswith(suffix):
            return f"{key.removesuffix(suffix).replace('_', ' ')} ({unit})"
    return key.replace("_", " ")


def _cell(rec: Record, key: str, value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):  # a name with a hyphen (a profile, a variant) reads as code
        return f"`{value}`" if "-" in value and " " not in value else value
    return _formatted(rec, key, value, spec)


def rows_table(rec: Record, arg: str | None) -> str:
    """Any recorded list of rows as a table: ``arg`` is ``[path;]key[:spec],...`` (the list at ``path``, default
    ``rows``; each column's key and its format), headers named from the keys, their unit suffix (``_s``, ``_ms``,
    ``_per_s``...) as the unit."""
    if not arg:
        raise IllegalArgument(f"results/{rec.name}.json: the rows view needs its columns, key[:spec],...")
    path, _, cols = arg.rpartition(";")
    columns = [c.partition(":")[::2] for c in re.split(r",(?=[A-Za-z_])", cols)]  # a spec may hold a comma (:,.0f)
    rows = rec.figure(path or "rows")
    missing = sorted({k for row in rows for k, _ in columns if k not in row})
    if missing:
        raise IllegalArgument(f"results/{rec.name}.json has no figure {missing[0]!r} in its {path or 'rows'}")
    return _table([_header(k) for k, _ in columns],
                  [[_cell(rec, k, row[k], spec) for k, spec in columns] for row in rows])


def _ms(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def rebalance(rec: Record, arg: str | None) -> str:
    """``benchmarks/rebalance.py``: per implementation and group size, the cold start, join and crash convergence
    (p50 and slowest), ZooKeeper requests and consumer CPU per rebalance, the attempts that failed, and each join's
    p50 as a multiple of ZooKeeper's own rebalance chain measured alone in the same run (the floor)."""
    floor = (rec.figures.get("floor_ms") or {}).get("rebalance chain")
    rows = []
    for r in rec.figures["runs"]:
        vs_floor = f"{r['join_p50_ms'] / floor:.1f}x" if floor and r.get("join_p50_ms") is not None else "-"
        rows.append([f"`{r['profile']}`", number(r["size"]), _ms(r.get("cold_s"), 2),
                     f"{_ms(r.get('join_p50_ms'))} / {_ms(r.get('join_max_ms'))}",
                     f"{_ms(r.get('crash_p50_ms'))} / {_ms(r.get('crash_max_ms'))}", vs_floor,
                     _ms(r.get("zk_requests")), _ms((r.get("cpu_ms") or {}).get("consumers")),
                     *(number(r[k]) if r.get(k) is not None else "-"
                       for k in ("failed_attempts", "claim_conflicts", "failed_rebalances"))])
    table = _table(["implementation", "consumers", "cold start (s)", "join p50 / max (ms)", "crash p50 / max (ms)",
                    "join p50 ÷ floor", "ZooKeeper requests a rebalance", "consumer CPU a rebalance (ms)",
                    "failed attempts", "claim conflicts", "rebalances given up"], rows)
    return table + (f"\n\nZooKeeper's floor, its rebalance chain alone in the same run: {floor:.2f} ms." if floor
                    else "")


def mixed_groups(rec: Record, arg: str | None) -> str:
    """``benchmarks/mixed_groups.py``: one column per group, one row per membership change (ms to converge, median
    over rounds, (k)/(z) the kind of member that changed), then the total, its ratio to the baseline group and the
    failed attempts; ``arg`` ``joins``: instead each join's race, the joiner's first claim / the holders' last
    release, ms after its registration."""
    groups = rec.figures["rows"]
    header = ["step", *(g["group"] for g in groups)]

    def kind(k: str) -> str:
        return "(k)" if k.startswith("kafka") else "(z)"

    if arg == "joins":
        rows = [[j["join"], *(f"{_ms(g['joins'][i]['first_claim_ms'])} / {_ms(g['joins'][i]['last_release_ms'])} "
                              f"{kind(g['joins'][i]['member_kind'])}" for g in groups)]
                for i, j in enumerate(groups[0].get("joins", []))]
        return _table(["join: first claim / holders' last release (ms)", *header[1:]], rows)
    rows = [[st["step"], *(f"{_ms(g['steps'][i]['converged_ms'])} {kind(g['steps'][i]['member_kind'])}"
                           for g in groups)] for i, st in enumerate(groups[0]["steps"])]
    rows.append(["total (s)", *(f"{g['total_s']:.2f}" for g in groups)])
    rows.append([f"ratio to {rec.figures['baseline']}",
                 *("-" if g["ratio_to_baseline"] is None else f"{g['ratio_to_baseline']:.2f}x" for g in groups)])
    rows.append(["failed attempts: Kafka / zkconsumer",
                 *(f"{g['failed_attempts_kafka']:.0f} / {g['failed_attempts_zkconsumer']:.0f}" for g in groups)])
    return _table(header, rows)


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



def ratio(rec: Record, arg: str | None) -> str:
    """One recorded figure divided by another, inside a sentence: ``arg`` is two paths as ``figure`` takes them,
    comma-separated (``rows.2.compacted_bytes,rows.2.plain_bytes``); three significant digits."""
    paths = (arg or "").split(",")
    if len(paths) != 2:
        raise IllegalArgument(f"results/{rec.name}.json: the ratio view needs two paths, comma-separated")
    return f"{rec.figure(paths[0]) / rec.figure(paths[1]):.3g}"


def k_of_n(rec: Record, arg: str | None) -> str:
    """Two recorded figures as "k of n" inside a sentence (runs that broke of runs made): ``arg`` is their two paths
    as ``figure`` takes them, comma-separated."""
    paths = (arg or "").split(",")
    if len(paths) != 2:
        raise IllegalArgument(f"results/{rec.name}.json: the k-of-n view needs two paths, comma-separated")
    return f"{number(rec.figure(paths[0]))} of {number(rec.figure(paths[1]))}"


def _verdict(k: int, n: int) -> str:
    return f"breaks in {k:,} of {n:,}" if k else f"holds in {n:,} of {n:,}"


def _span(values: list[Any]) -> str:
    """Figures over runs as ``zkconsumer catalogue`` writes them: the value, ``lo–hi`` where runs differ, ``-``
    where none measured it."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    lo, hi = min(known), max(known)
    return number(lo) if lo == hi else f"{number(lo)}–{number(hi)}"


def _named_cells(rec: Record, arg: str | None) -> list[dict[str, Any]]:
    """A real catalogue's cells, or those ``arg`` names: comma-separated scenarios, variants or
    ``scenario/variant`` pairs (a cell is kept when one names it)."""
    cells = rec.figures["cells"]
    if not arg:
        return cells
    wanted = set(arg.split(","))
    cells = [c for c in cells if wanted & {c["scenario"], c["variant"], f"{c['scenario']}/{c['variant']}"}]
    if not cells:
        raise IllegalArgument(f"results/{rec.name}.json has no catalogue cell named by {arg!r}")
    return cells


def catalogue(rec: Record, arg: str | None) -> str:
    """``zkconsumer catalogue``'s cells (its catalogue.json): one row per mode and variant as its catalogue.md
    writes them, a figure that differs between the runs as its range; ``arg`` keeps the cells it names, as
    ``catalogue-verdict`` does."""
    rows = []
    for c in _named_cells(rec, arg):
        head = [c["mode"], f"`{c['scenario']}`", f"`{c['variant']}`"]
        if c["not_applicable"]:
            rows.append([*head, f"n/a: {c['not_applicable']}", *[""] * 7])
            continue
        runs = c["runs"]
        figs = [_span([r[f] for r in runs]) for f in ("lost", "unread_at_end", "overlaps", "duplicates")]
        unowned = f"{_span([r['unowned_ms_total'] for r in runs])} ({_span([r['unowned_ms_max'] for r in runs])})"
        rows.append([*head, c["verdict"], *figs, unowned, _span([r["failed_rebalances"] for r in runs]),
                     _span([r["claim_conflicts"] for r in runs])])
    return _table(["mode", "scenario", "variant", "invariants", "records lost (never readable)",
                   "unread when the run ended", "two live owners", "duplicates", "partition-time unowned (ms, longest)",
                   "rebalances given up", "claim conflicts"], rows)


def _by_mode(cells: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Cells keyed by (mode, scenario), each variant's cell under its name: both records' layouts (one cell per
    mode with the variants in it, or one per mode and variant)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for c in cells:
        row = out.setdefault((c["mode"], c["scenario"]), {})
        if "variant" in c:
            row[c["variant"]] = c
        else:
            row.update({k: v for k, v in c.items() if k not in ("mode", "scenario")})
    return out


def _lab_cell(c: dict[str, Any] | None) -> tuple[str, bool | None]:
    """A real catalogue cell as "holds n/n" or "breaks k/n: how", and whether it breaks (by majority of runs);
    None: not run, or no counterpart."""
    if c is None:
        return "-", None
    if c.get("not_applicable"):
        return "n/a", None
    rate = c["rate"]
    k, n = rate["k"], rate["n"]
    if not k:
        return f"holds {n}/{n}", False
    how = ", ".join(f"{LAB_BREACHES.get(name, name)} {v['broken']}" for name, v in rate["invariants"].items()
                    if v["broken"])
    return f"breaks {k}/{n}: {how}", _breaks(k, n)


def _sim_breaks(c: dict[str, Any] | None) -> bool | None:
    if c is None or "n/a" in c or "refused" in c:
        return None
    return _breaks(c["k"], c["n"])


def catalogue_agreement(recs: list[Record], arg: str | None) -> str:
    """The catalogue in both worlds: a simulated run (``benchmarks/sim_catalogue.py``) beside a real one
    (``zkconsumer catalogue --record``), ``sim+real`` in the block. ``arg``: the pairs compared,
    ``simvariant=realvariant`` comma-separated. A cell's verdict is its majority ("breaks" when more than half its
    runs broke); the last column says whether the worlds' verdicts agree, and the line under the table counts
    the cells where they do."""
    sim, real = recs
    if not arg:
        raise IllegalArgument("the catalogue-agreement view needs its pairs: sim=real,sim=real")
    pairs = [tuple(p.split("=", 1)) for p in arg.split(",")]
    sims, reals = _by_mode(sim.figures["cells"]), _by_mode(real.figures["cells"])
    rows, agree, compared = [], 0, 0
    for key in [*sims, *(k for k in reals if k not in sims)]:
        row, verdicts = [key[0], f"`{key[1]}`"], []
        for s, r in pairs:
            sc = sims.get(key, {}).get(s)
            rc = reals.get(key, {}).get(r)
            lab_text, lab_breaks = _lab_cell(rc)
            row += [_cell_text(sc) if sc is not None else "-", lab_text]
            sim_breaks = _sim_breaks(sc)
            if sim_breaks is None or lab_breaks is None:
                verdicts.append("-")
                continue
            compared += 1
            agree += sim_breaks == lab_breaks
            verdicts.append("yes" if sim_breaks == lab_breaks else "**no**")
        rows.append([*row, ", ".join(verdicts)])
    header = ["mode", "scenario"]
    for s, r in pairs:
        header += [f"`{s}`: simulated", f"`{r}`: real"]
    table = _table([*header, "same verdict"], rows)
    return f"{table}\n\nThe same verdict (by majority of runs) in {agree} of {compared} cells run in both worlds."


def oracle_agreement(recs: list[Record], arg: str | None) -> str:
    """A profile beside Kafka's own consumer in one real catalogue (``zkconsumer catalogue --record``), with the
    claims' timing read from the same runs (``benchmarks/claim_timing.py DIR --record``): ``catalogue+timing``
    in the block, ``arg`` the pair ``profile=kafka``. Per mode: each side's verdict over its runs, whether they
    agree (by majority), each side's median wait from registering to the first claim (and of the later
    registrations, a member's return on a new session), and the claim conflicts a run."""
    cat, timing = recs
    if not arg or "=" not in arg:
        raise IllegalArgument("the oracle-agreement view needs its pair: profile=kafka")
    ours, theirs = arg.split("=", 1)
    waits = {(r["scenario"], r["variant"]): r for r in timing.figures["rows"]}
    rows, agree, compared = [], 0, 0
    for (mode, scenario), cells in _by_mode(cat.figures["cells"]).items():
        (a_text, a_breaks), (b_text, b_breaks) = _lab_cell(cells.get(ours)), _lab_cell(cells.get(theirs))
        if a_breaks is None or b_breaks is None:
            same = "-"
        else:
            compared += 1
            agree += a_breaks == b_breaks
            same = "yes" if a_breaks == b_breaks else "**no**"
        wa, wb = waits.get((scenario, ours), {}), waits.get((scenario, theirs), {})
        wait = f"{_ms(wa.get('to_claim_p50_ms'))} / {_ms(wb.get('to_claim_p50_ms'))}"
        if wa.get("later_registrations") or wb.get("later_registrations"):
            wait += f" (later: {_ms(wa.get('later_to_claim_p50_ms'))} / {_ms(wb.get('later_to_claim_p50_ms'))})"
        conflicts = " / ".join(_span(w.get("claim_conflicts_per_run") or []) for w in (wa, wb))
        rows.append([f"{mode} `{scenario}`", a_text, b_text, same, wait, conflicts])
    pair = f"{ours} / {theirs}"
    table = _table(["mode", f"`{ours}`", f"`{theirs}`", "same verdict",
                    f"registration → first claim, ms, median ({pair})", f"claim conflicts a run ({pair})"], rows)
    return f"{table}\n\nThe same verdict (by majority of runs) in {agree} of {compared} modes run on both."


def _nemesis_words(key: str) -> str:
    """An invariant as ``benchmarks/nemesis.py`` keys it (``one_live_owner``), in the tables' words."""
    return LAB_BREACHES.get(key.replace("_", "-"), key)


def _nemesis_breaches(row: dict[str, Any]) -> str:
    """A nemesis row's seeds that broke, each invariant with its seeds ("two live owners 8")."""
    return ", ".join(f"{_nemesis_words(k)} {v}" for k, v in row["seeds_by_invariant"].items() if v) or "-"


def _nemesis_seed(s: dict[str, Any] | None) -> str:
    """One seed of a nemesis row: its runs that broke of those judged, and how ("1/1: two live owners")."""
    if s is None:
        return "-"
    how = ", ".join(map(_nemesis_words, s["broken"]))
    return f"{s['breaking_runs']}/{s['judged_runs']}" + (f": {how}" if how else "")


def nemesis(rec: Record, arg: str | None) -> str:
    """``benchmarks/nemesis.py``: per variant, the seeds run, the seeds that broke and which (a seed breaks when one
    of its runs broke), the invariants broken with their seeds, and the run's wall time."""
    rows = []
    for r in rec.figures["rows"]:
        broke = [str(s["seed"]) for s in r["per_seed"] if s["breaking_runs"]]
        p50 = r["run_wall_p50_s"]
        rows.append([f"`{r['variant']}`", number(r["seeds"]), f"{r['breaching_seeds']} of {r['seeds']}",
                     ", ".join(broke) or "none", _nemesis_breaches(r), number(r["failed_to_run_seeds"]),
                     "-" if p50 is None else f"{p50:.0f}", f"{r['total_s'] / 60:.1f}"])
    return _table(["variant", "seeds", "breaking seeds", "which", "seeds breaking each invariant",
                   "failed to run", "run wall p50 (s)", "total (min)"], rows)


def nemesis_seeds(rec: Record, arg: str | None) -> str:
    """``benchmarks/nemesis.py`` seed by seed, for the seeds where some variant broke: each variant's runs that
    broke and the invariants, and whether all variants reach the same verdict (a seed breaks when more than half
    of its runs broke); the line under the table counts the seeds of the whole run with the same verdict."""
    rows_in = rec.figures["rows"]
    per = [{s["seed"]: s for s in r["per_seed"]} for r in rows_in]
    seeds = sorted(set().union(*per)) if per else []
    rows, same = [], 0
    for seed in seeds:
        cells = [p.get(seed) for p in per]
        verdicts = {None if c is None or not c["judged_runs"] else _breaks(c["breaking_runs"], c["judged_runs"])
                    for c in cells}
        agrees = len(verdicts) == 1 and None not in verdicts
        same += agrees
        if not any(c and c["breaking_runs"] for c in cells):
            continue
        rows.append([str(seed), *map(_nemesis_seed, cells), "yes" if agrees else "**no**"])
    table = _table(["seed", *(f"`{r['variant']}`" for r in rows_in), "same verdict"], rows)
    return (f"{table}\n\nThe seeds where no variant broke are not shown. The same verdict on {same} of {len(seeds)} "
            "seeds.")


def nemesis_agreement(recs: list[Record], arg: str | None) -> str:
    """The nemesis's schedules in both worlds: each seed's rate over simulated interleavings
    (``benchmarks/sim_nemesis_rates.py``) beside the real runs of the same seeds (``benchmarks/nemesis.py``),
    ``sim+real`` in the block. ``arg``: ``profile=variant``, the simulated profile and the real variant it is
    compared with; the real record's other variants (Kafka's own consumer) get a column each. Only the seeds where
    something broke are shown; the line under the table counts the real breaks the simulator also found."""
    sim, real = recs
    if not arg or "=" not in arg:
        raise IllegalArgument("the nemesis-agreement view needs its pair: profile=variant")
    profile, variant = arg.split("=", 1)
    per_sim = {r["seed"]: r for r in sim.figures["rows"] if r["profile"] == profile}
    n_sim = sim.figures["interleavings_per_seed"]
    reals = [(r["variant"], {s["seed"]: s for s in r["per_seed"]}) for r in real.figures["rows"]]
    ours = dict(reals).get(variant)
    if ours is None:
        raise IllegalArgument(f"results/{real.name}.json has no variant {variant!r}")
    reals.sort(key=lambda vr: vr[0] != variant)

    rows = []
    for seed in sorted(set(per_sim) | set(ours)):
        sc = per_sim.get(seed)
        broke = (sc and sc["breaking_interleavings"]) or any(r.get(seed, {}).get("breaking_runs") for _, r in reals)
        if not broke:
            continue
        sim_text = "-" if sc is None else f"{sc['breaking_interleavings']}/{n_sim}" + (
            ": " + ", ".join(f"{BREACH_COLUMNS.get(k, k)} {v}" for k, v in sorted(sc["per_invariant"].items()))
            if sc["per_invariant"] else "")
        rows.append([str(seed), sim_text, *(_nemesis_seed(r.get(seed)) for _, r in reals)])
    table = _table(["seed", f"`{profile}`: simulated", *(f"`{v}`: real" for v, _ in reals)], rows)
    real_broke = {s for s, c in ours.items() if c["breaking_runs"]}
    sim_some = {s for s, c in per_sim.items() if c["breaking_interleavings"]}
    return (f"{table}\n\nThe real `{variant}` runs broke on {len(real_broke)} of {len(ours)} seeds, "
            f"{len(real_broke & sim_some)} of them breaking in simulation too; the simulator broke at some rate on "
            f"{len(sim_some - real_broke)} seeds where the real runs held.")


def compare(rec: Record, arg: str | None) -> str:
    """``benchmarks/compare.py``: every measure of one workload, variants in columns as ``zkconsumer compare`` prints
    them ("n/a" where the measure means nothing for a variant, "-" where it was not counted), then each variant's
    ratio to the baseline on the measures ``arg`` names (comma-separated keys; none: no ratio rows)."""
    rows_in = rec.figures["rows"]
    body = []
    for m in Measure:
        cells = []
        for r in rows_in:
            v = r.get(m.value)
            if isinstance(v, float):  # medians and means: whole ones as integers, others to a tenth
                v = int(v) if v.is_integer() else f"{v:,.1f}"
            cells.append("n/a" if m.value in r.get("not_applicable", []) else "-" if v is None else number(v))
        body.append([m.label, *cells])
    for key in (arg.split(",") if arg else []):
        label = Measure(key).label
        body.append([f"{label}, ÷ `{rec.figures['baseline']}`", *(
            "1" if r["variant"] == rec.figures["baseline"] else
            "-" if (r.get("ratio_to_baseline") or {}).get(key) is None else f"{r['ratio_to_baseline'][key]:.2f}"
            for r in rows_in)])
    return _table(["measure", *(f"`{r['variant']}`" for r in rows_in)], body)


def catalogue_verdict(rec: Record, arg: str | None) -> str:
    """``zkconsumer catalogue``'s cells' verdicts inside a sentence: the one headline ("holds in 5 of 5 runs"),
    with "each" when several cells share it; else each cell's, named by its variant (by its mode when the cells
    are one variant's), a breaking cell with the invariants it broke and in how many runs. ``arg`` keeps some
    cells: comma-separated scenarios, variants or ``scenario/variant`` pairs (a cell is kept when one names it)."""
    cells = _named_cells(rec, arg)

    def head(c: dict[str, Any]) -> str:
        if not c["rate"]:
            return c["verdict"]
        broken = [f"{LAB_BREACHES.get(name, name)} in {v['broken']}" for name, v in
                  c["rate"].get("invariants", {}).items() if v["broken"]]
        return c["rate"]["headline"] + (f" ({', '.join(broken)})" if broken else "")

    heads = [head(c) for c in cells]
    if len(set(heads)) == 1:
        return heads[0] + (" each" if len(cells) > 1 else "")
    one_variant = len({c["variant"] for c in cells}) == 1
    return ", ".join((f"{c['mode']} (`{c['scenario']}`) " if one_variant else f"`{c['variant']}` ") + h
                     for c, h in zip(cells, heads, strict=True))


def catalogue_summary(rec: Record, arg: str | None) -> str:
    """A real catalogue (``zkconsumer catalogue --record``) in a sentence: per variant, the cells that broke (by
    majority of their runs) and that the others held."""
    parts = []
    for v in dict.fromkeys(c["variant"] for c in rec.figures["cells"]):
        ran = [(f"{c['mode']} ({c['scenario']})", c["rate"]["k"], c["rate"]["n"]) for c in rec.figures["cells"]
               if c["variant"] == v and c["rate"]]
        parts.append(_in_a_sentence(v, ran, [f"{name} {k}/{n}" for name, k, n in ran if _breaks(k, n)], "run"))
    return "; ".join(parts)


def migration_matrix(rec: Record, arg: str | None) -> str:
    """``benchmarks/sim_migration_matrix.py``: each fault of the migration's matrix as a scenario, in the world the
    record ran it (simulated seeds, or real lab runs): the verdict and how the migration ended; simulated, the
    speed; real, each run's duplicates (all inside uncommitted windows where the verdict holds)."""
    cells = rec.figures["cells"]
    worlds = [w for w in ("simulated", "real") if any(c[w]["n"] for c in cells)]
    header = ["scenario", "fault"]
    for w in worlds:
        header += [w, "how the migration ended"]
        header += ["wall s", "schedules a minute"] if w == "simulated" else ["duplicates, run by run"]
    rows = []
    for c in cells:
        row = [f"`{c['scenario']}`", f"`{c['fault']}`"]
        for w in worlds:
            x = c[w]
            ends = x["migrations"] if w == "simulated" else Counter(r["migration"] for r in x["runs"])
            row += [_verdict(x["k"], x["n"]), ", ".join(f"{v} {k}" for k, v in sorted(ends.items())) or "-"]
            row += ([number(x["wall_s"]), number(x["schedules_per_minute"])] if w == "simulated"
                    else [", ".join(number(r["duplicates"]) for r in x["runs"])])
        rows.append(row)
    return _table(header, rows)


def migration_agreement(recs: list[Record], arg: str | None) -> str:
    """The migration's fault matrix in both worlds (``sim+real``: two ``benchmarks/sim_migration_matrix.py``
    records, one simulated, one on the real lab): per scenario the two verdicts, how each world's migrations ended,
    and whether the verdicts and the endings agree; the line under it counts them."""
    sim, real = recs
    reals = {c["scenario"]: c["real"] for c in real.figures["cells"]}
    rows, same, both = [], 0, 0
    for c in sim.figures["cells"]:
        s_cell, r_cell = c["simulated"], reals.get(c["scenario"])
        s_ends = set(s_cell["migrations"])
        row = [f"`{c['scenario']}`", f"`{c['fault']}`", _verdict(s_cell["k"], s_cell["n"]),
               ", ".join(sorted(s_ends)) or "-"]
        if not r_cell or not r_cell["n"]:
            rows.append([*row, "-", "-", "-"])
            continue
        r_ends = {r["migration"] for r in r_cell["runs"]}
        agree = (s_cell["k"] > 0) == (r_cell["k"] > 0) and s_ends == r_ends
        both += 1
        same += agree
        rows.append([*row, _verdict(r_cell["k"], r_cell["n"]), ", ".join(sorted(r_ends)) or "-",
                     "yes" if agree else "**no**"])
    table = _table(["scenario", "fault", "simulated", "ended (simulated)", "real", "ended (real)",
                    "same verdict and ending"], rows)
    return f"{table}\n\nThe same verdict and ending in {same} of {both} scenarios run in both worlds."


def herd_agreement(rec: Record, arg: str | None) -> str:
    """``benchmarks/herd_agreement.py``: the coordinator's herd, real members against simulated ones, per protocol,
    size and action: group requests a change (real / simulated, means over the rounds), the simulated ÷ real ratios,
    p50 ms to converge and the real members' gaps between polls (median and p90 µs) the simulated ones replayed."""
    apis = ("JoinGroup", "SyncGroup", "Heartbeat")
    rows = []
    for r in rec.figures["rows"]:
        for action in ("join", "leave"):
            real, sim = r["real"][f"{action}_requests"], r["simulated"][f"{action}_requests"]
            gaps = f"{r['gaps_us']['median']:,.0f}, {r['gaps_us']['p90']:,.0f}" if action == "join" else ""
            rows.append([f"`{r['protocol']}`", number(r["size"]), action,
                         *(f"{real[a]:.1f} / {sim[a]:.1f}" for a in apis),
                         *(f"{sim[a] / real[a]:.2f}" for a in ("JoinGroup", "SyncGroup")),
                         f"{r['real'][f'{action}_ms']:,.0f} / {r['simulated'][f'{action}_ms']:,.0f}", gaps])
    return _table(["protocol", "N", "action", *(f"{a} real / sim" for a in apis), "JoinGroup ratio",
                   "SyncGroup ratio", "p50 ms real / sim", "gaps: median, p90 µs"], rows)


def herd_rounds(rec: Record, arg: str | None) -> str:
    """``benchmarks/herd_agreement.py --rounds N``: each round's JoinGroups, real and simulated, per protocol and
    action; their means and the ratio of the means (simulated ÷ real)."""
    rows = []
    for r in rec.figures["rows"]:
        for action in ("join", "leave"):
            real, sim = r["real"], r["simulated"]
            mean_real, mean_sim = real[f"{action}_requests"]["JoinGroup"], sim[f"{action}_requests"]["JoinGroup"]
            rows.append([f"`{r['protocol']}`", action, " ".join(map(str, real[f"{action}_joingroups"])),
                         " ".join(map(str, sim[f"{action}_joingroups"])), f"{mean_real:.2f} / {mean_sim:.2f}",
                         f"{mean_sim / mean_real:.2f}"])
    return _table(["protocol", "action", "real, a round", "simulated, a round", "mean real / sim", "mean ratio"], rows)


def offsets_compaction(rec: Record, arg: str | None) -> str:
    """``benchmarks/offsets_compaction.py``: ``__consumer_offsets`` compacted against not at each checkpoint of
    the time-compressed hour: size in MB (segments), reload time (median of its loads), compacted ÷ not."""
    rows = [[number(r["minute"]), f"{r['compacted_bytes'] / 1e6:.2f} ({r['compacted_segments']:,})",
             f"{r['plain_bytes'] / 1e6:.2f} ({r['plain_segments']:,})",
             f"{r['compacted_bytes'] / r['plain_bytes']:.3f}", f"{1000 * r['compacted_reload_s']:,.0f} ms",
             f"{1000 * r['plain_reload_s']:,.0f} ms", f"{r['compacted_reload_s'] / r['plain_reload_s']:.3f}"]
            for r in rec.figures["rows"]]
    return _table(["simulated minutes", "compacted: MB (segments)", "not compacted: MB (segments)", "size ratio",
                   "reload compacted", "reload not compacted", "reload ratio"], rows)


def zombie_window(rec: Record, arg: str | None) -> str:
    """``benchmarks/zombie_window.py``: per run, what the paused member did between waking and learning it was
    fenced: the overlaps found (each one's ms), the records it handed out and how many of them were fetched after
    the wake, the ms from its wake until it learned, and whether its offset commit was refused."""
    rows = [[w["run"], f"`{w['target']}`", number(w["overlaps"]), ", ".join(map(number, w["overlap_ms"])) or "-",
             number(w["delivered_after_wake"]), number(w["fetched_after_wake"]),
             "-" if w["learned_after_ms"] is None else number(w["learned_after_ms"]), number(w["commit_refused"])]
            for w in rec.figures["runs"]]
    return _table(["run", "paused", "two live owners", "overlap ms", "handed out after waking",
                   "of them fetched after waking", "learned it was fenced after (ms)", "commit refused"], rows)


def pause_delta(recs: list[Record], arg: str | None) -> str:
    """``benchmarks/pause_delta.py``: per batch of runs (one record each, ``a+b``), the real runs and the simulated
    interleavings of the same files read run by run: δ (the last answer's age at the pause) past the read timeout's
    share, the connection dropped on waking, the session lost, and the longest kept and shortest lost stretch from
    the last answer to the reconnect."""
    rows = []
    for i, rec in enumerate(recs, 1):
        for world in ("real", "simulated"):
            w = rec.figures[world]
            kept_lost = ", ".join("-" if v is None else f"{v / 1000:.3f} s"
                                  for v in (w["longest_kept_ms"], w["shortest_lost_ms"]))
            rows.append([f"{world}, batch {i} ({rec.name})", number(w["runs"]), number(w["delta_past_drop"]),
                         number(w["dropped"]), f"{w['expired_of_delta_past_drop']} of {w['delta_past_drop']}",
                         kept_lost])
    return _table(["world", "runs", "δ past the drop", "dropped on waking", "session lost, of δ past the drop",
                   "last heard → reconnected: longest kept, shortest lost"], rows)


def herd_scale(rec: Record, arg: str | None) -> str:
    """``benchmarks/herd_scale.py``: per design and size, the server's requests per change (a join or a leave) and
    their ratio to the default profile's at the same size in the same run, the simulated time to a settled group
    after a join and a leave, attempts (0.8) or generations (the coordinator) per change, the bytes from the server,
    the rebalances given up and the wall of the cold start, a join and a leave; a size over the run's budget as
    skipped, with the wall it would have taken."""
    rows = []
    for r in rec.figures["rows"]:
        head = [f"`{r['design']}`" if "-" in r["design"] else r["design"], number(r["size"])]
        if "skipped_estimate_s" in r:
            rows.append([*head, f"skipped: about {r['skipped_estimate_s']:,} s of wall", *[""] * 8])
            continue
        vs = r.get("requests_vs_default")
        join_vs = r.get("join_ms_vs_default")
        rows.append([*head, f"{r['requests_per_action']:,.1f}", "-" if vs is None else f"{vs:.2f}",
                     f"{_ms(r['join_ms'])} / {_ms(r['leave_ms'])}", "-" if join_vs is None else f"{join_vs:.1f}",
                     f"{r['attempts_per_action']:,.2f}", f"{r['kb_from_server_per_action']:,.1f}",
                     number(r["given_up"]),
                     f"{r['wall_cold_s']:.1f} / {_ms(r['wall_join_s'], 1)} / {r['wall_leave_s']:.1f}"])
    return _table(["design", "members", "requests / change", "÷ default", "join / leave settled (ms, sim)",
                   "join ÷ default", "attempts or generations / change", "KB from server / change", "given up",
                   "wall: cold / join / leave (s)"], rows)


#: the settings grid's point, as ``benchmarks/settings_grid.py`` records each row
GRID_AXES = ("profile", "session_timeout_ms", "retries", "backoff_ms")


def _grid_row(r: dict[str, Any]) -> list[str]:
    settle = "-" if r.get("settle_p50_s") is None else f"{r['settle_p50_s']:.1f} / {r['settle_p95_s']:.1f}"
    ratio = r.get("breach_rate_vs_defaults")
    return [number(r["session_timeout_ms"]), number(r["retries"]), number(r["backoff_ms"]), number(r["faq_rule"]),
            f"{r['breaking']:,} of {r['seeds']:,}", "-" if ratio is None else f"{ratio:.2f}",
            *(number(r[f"breaks_{k}"]) for k in ("overlaps", "duplicates_committed", "unowned_after_heal")),
            f"{r['given_up_per_seed']:.2f}", settle]


def settings_map(rec: Record, arg: str | None) -> str:
    """``benchmarks/settings_grid.py``: one profile's points (``arg``, default ``kafka-0.8``), the seeds breaking
    any invariant and the main ones, the rate as a multiple of the profile's at Kafka's defaults, rebalances given
    up a seed and the settle time; ``arg`` ``point``: the point run on its own (``--point``) beside the defaults."""
    if arg == "point":
        base = rec.figures["baseline"]
        rows = [r for r in rec.figures["rows"] if r["profile"] == "kafka-0.8"
                and all(r[k] == v for k, v in base.items())] + [rec.figure("point")]
    else:
        rows = [r for r in rec.figures["rows"] if r["profile"] == (arg or "kafka-0.8")]
    if not rows:
        raise IllegalArgument(f"results/{rec.name}.json has no settings-grid rows for {arg!r}")
    return _table(["session (ms)", "retries", "backoff (ms)", "FAQ rule", "breaking", "÷ Kafka's defaults",
                   "two live owners", "duplicates of committed", "unowned after heal", "given up / seed",
                   "settle p50 / p95 (s)"], [_grid_row(r) for r in rows])


def settings_span(rec: Record, arg: str | None) -> str:
    """A figure of the settings grid in a sentence, over the points ``arg`` names: ``profile,session,retries,
    backoff,key[:spec]``, each axis a value, values joined by ``|``, or ``*``; one value, or ``lo–hi`` where the
    points differ."""
    parts = (arg or "").split(",")
    if len(parts) != 5:
        raise IllegalArgument(f"results/{rec.name}.json: settings-span needs profile,session,retries,backoff,key")
    key, _, spec = parts[4].partition(":")
    try:
        axes = [None if p == "*" else {(v if i == 0 else int(v)) for v in p.split("|")}
                for i, p in enumerate(parts[:4])]
    except ValueError:
        raise IllegalArgument(f"results/{rec.name}.json: settings-span {arg!r}: the session, retries and backoff are "
                              "numbers, values joined by |, or *") from None
    points = [r for r in rec.figures["rows"]
              if all(want is None or r[name] in want for name, want in zip(GRID_AXES, axes, strict=True))]
    if points and key not in points[0]:
        raise IllegalArgument(f"results/{rec.name}.json has no settings-grid figure {key!r}")
    values = [r[key] for r in points if r[key] is not None]  # a point with no settle has none to show
    if not values:
        raise IllegalArgument(f"results/{rec.name}.json has no settings-grid point {arg!r} with {key!r}")
    lo, hi = min(values), max(values)
    one = _formatted(rec, key, lo, spec)
    return one if lo == hi else f"{one}–{_formatted(rec, key, hi, spec)}"


VIEWS: dict[str, View] = {
    "before-after": View(before_after),
    "sim-profile": View(sim_profile),
    "sim-catalogue": View(sim_catalogue),
    "rebalance": View(rebalance),
    "mixed-groups": View(mixed_groups),
    "rows": View(rows_table),
    "migration-agreement": View(migration_agreement, records=2),
    "sim-catalogue-summary": View(sim_catalogue_summary, inline=True),
    "figure": View(figure, inline=True),
    "date": View(run_date, inline=True),
    "sim-rates": View(sim_rates),
    "replay-sim": View(replay_sim),
    "ratio": View(ratio, inline=True),
    "k-of-n": View(k_of_n, inline=True),
    "catalogue": View(catalogue),
    "catalogue-verdict": View(catalogue_verdict, inline=True),
    "catalogue-summary": View(catalogue_summary, inline=True),
    "catalogue-agreement": View(catalogue_agreement, records=2),
    "migration-matrix": View(migration_matrix),
    "herd-agreement": View(herd_agreement),
    "herd-rounds": View(herd_rounds),
    "offsets-compaction": View(offsets_compaction),
    "zombie-window": View(zombie_window),
    "pause-delta": View(pause_delta, records=2),
    "oracle-agreement": View(oracle_agreement, records=2),
    "nemesis": View(nemesis),
    "compare": View(compare),
    "nemesis-agreement": View(nemesis_agreement, records=2),
    "nemesis-seeds": View(nemesis_seeds),
    "settings-map": View(settings_map),
    "herd-scale": View(herd_scale),
    "settings-span": View(settings_span, inline=True),
}


def render_view(rec: Record | list[Record], view: str, arg: str | None) -> str:
    recs = [rec] if isinstance(rec, Record) else rec
    wanted = VIEWS[view].records
    if len(recs) != wanted:
        raise IllegalArgument(f"view {view!r} reads {wanted} record(s) (a block names them joined by +), "
                              f"not {len(recs)}")
    try:
        return VIEWS[view].render(*recs, arg) if wanted == 1 else VIEWS[view].render(recs, arg)
    except KeyError as e:
        names = "+".join(r.name for r in recs)
        raise IllegalArgument(f"results/{names}.json: view {view!r} found no figure {e}") from None
