"""``zkconsumer results``: the recorded results the documents quote, and the documents' rendered blocks.

- ``list``: every record in ``results/``: what ran, when, on which commit, and whether its code changed since;
- ``page [--out FILE]``: one offline page with the headline figures across the recorded runs;
- ``render [FILE ...]``: write each marked block from its record (docs/results.md says how to mark one);
- ``check [FILE ...]``: fail when a block was edited by hand or disagrees with its record; mark (not fail) a block
  whose record is older than the code it measured. ``make test`` runs it (tests/test_results.py);
- ``audit [--update] [--sections N]``: the measured numbers still typed by hand outside rendered blocks, a document
  and its sections at a time; fails when a document holds more than results/audit/typed-figures.json allows (a ratchet:
  ``--update`` lowers it once figures were converted, and refuses to raise it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from zkconsumer.cli.output import CliError, as_cli_error, console
from zkconsumer.errors import IllegalArgument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("results", help="the recorded results behind the documents' figures: list, render, check",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("list", help="every record: command, date, commit, and whether its code changed since"
                       ).set_defaults(func=cmd_list)
    pg = actions.add_parser("page", help="results.html: the headline figures across the recorded runs")
    pg.add_argument("--out", type=Path, default=Path("results.html"), help="where to write it (default "
                                                                           "results.html)")
    pg.set_defaults(func=cmd_page)
    au = actions.add_parser("audit", help="the measured numbers still typed by hand, against the allowed counts")
    au.add_argument("--update", action="store_true",
                    help="lower results/audit/typed-figures.json to today's counts (never raises one)")
    au.add_argument("--sections", type=int, default=0, metavar="N",
                    help="also list each document's N sections with the most typed figures")
    au.set_defaults(func=cmd_audit)
    for name, func, text in (("render", cmd_render, "render every marked block from its record"),
                             ("check", cmd_check, "fail on a block edited by hand or disagreeing with its record")):
        a = actions.add_parser(name, help=text)
        a.add_argument("files", nargs="*", type=Path, metavar="FILE",
                       help="Markdown files (default: README.md, benchmarks/README.md, docs/**/*.md)")
        a.set_defaults(func=func)


def cmd_list(args: argparse.Namespace) -> int:
    from zkconsumer.results import record

    with as_cli_error(IllegalArgument):
        records = record.load_all()
    table = Table(title=f"{len(records)} result records in {record.RESULTS}")
    for col in ("record", "date", "commit", "code since", "command"):
        table.add_column(col, overflow="fold")
    for r in records:
        since = r.stale_since()
        known = "source" in r.data
        table.add_row(r.name, r.date, r.commit, f"changed in {since}" if since else ("same" if known else "?"),
                      r.data["command"])
    console.print(table)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from zkconsumer.results import blocks

    with as_cli_error(IllegalArgument):
        changed = blocks.render(args.files or None)
    console.print(f"rendered {len(changed)} file(s)" + (": " + ", ".join(map(str, changed)) if changed else ""),
                  highlight=False)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from zkconsumer.results import blocks

    findings = blocks.check(args.files or None)
    failing = [f for f in findings if f.state.fails]
    stale = [f for f in findings if f.state is blocks.State.STALE]
    for f in stale:
        console.print(f"[yellow]marked[/] {f}", highlight=False)
    for f in failing:
        console.print(f"[red]failed[/] {f}", highlight=False)
    console.print(f"{len(findings)} rendered blocks: {len(failing)} failing, {len(stale)} older than their code",
                  highlight=False)
    if failing:
        raise CliError(f"{len(failing)} rendered block(s) do not match their records", code=1)
    return 0


def cmd_page(args: argparse.Namespace) -> int:
    from zkconsumer.results import page, record

    with as_cli_error(IllegalArgument):
        records = record.load_all()
    args.out.write_text(page.page(records), encoding="utf-8")
    console.print(f"wrote {args.out} ({len(records)} records)", highlight=False)
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from zkconsumer.results import audit

    found = audit.audit()
    counts = {doc: len(figs) for doc, figs in found.items() if figs}
    # with no baseline yet, --update sets the ratchet's first notch at today's counts
    baseline = counts if args.update and not audit.BASELINE.exists() else audit.load_baseline()
    worse = audit.regressions(found, baseline)
    table = Table(title="measured numbers typed by hand (outside rendered blocks)")
    for col in ("document", "typed", "allowed"):
        table.add_column(col, justify="left" if col == "document" else "right")
    for doc, figs in found.items():
        if figs or baseline.get(doc):
            mark = "[red]" if doc in worse else ""
            table.add_row(doc, f"{mark}{len(figs):,}", f"{baseline.get(doc, 0):,}")
    console.print(table)
    if args.sections:
        for doc, figs in found.items():
            for section, n in audit.by_section(figs)[:args.sections]:
                console.print(f"  {doc}: {n:4} in \"{section}\"", highlight=False)
    if worse:
        for doc, (now, allowed) in worse.items():
            first = found[doc][allowed] if allowed < len(found[doc]) else found[doc][-1]
            console.print(f"[red]{doc}[/]: {now} typed figures, {allowed} allowed (e.g. line {first.line}: "
                          f"{first.text!r}); render them from a record (docs/results.md)", highlight=False)
        raise CliError(f"{len(worse)} document(s) gained typed figures", code=1)
    if args.update:  # no document gained any (above): today's counts only lower the allowances
        audit.write_baseline(counts)
        console.print(f"wrote {audit.BASELINE}: {sum(counts.values()):,} allowed (was "
                      f"{sum(baseline.values()):,})", highlight=False)
    console.print(f"{sum(counts.values()):,} typed figures in {len(found)} documents", highlight=False)
    return 0
