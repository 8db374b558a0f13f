"""The settings map, regenerated (issue 41 item 4): ``zkconsumer sim --grid`` and its table against Kafka's defaults.

Runs the grid (``rebalance.max.retries`` × ``rebalance.backoff.ms`` × ``zookeeper.session.timeout.ms``, both
profiles, ``--seeds`` nemesis schedules per point, as Spark tasks) into ``--out`` (Parquet, heatmaps, report), then
prints per profile and point the share of seeds breaking an invariant, its ratio to the same profile's share at
Kafka 0.8's defaults (4 retries, 2,000 ms, 6,000 ms sessions: the baseline, measured in the same run), rebalances
given up per seed, and the median settle time; and the run's speed (seeds a minute). ``--from DIR`` prints the
table of a grid already run.

``--point R,B,S`` also runs one point of its own for ``kafka-0.8`` (retries, backoff ms, session ms; the settings
docs/simulation.md recommends are ``10,1000,6000``) on the same seeds, into ``--out``/point, and records its row beside
the grid's.

Run: .venv/bin/python benchmarks/settings_grid.py --out grid/ [--seeds 150] [--master local[2]] [--point 10,1000,6000]
                                                  [--record FILE]
     .venv/bin/python benchmarks/settings_grid.py --from grid/
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd
from records import write_record
from rich.table import Table

from zkconsumer.cli import main as cli
from zkconsumer.consoles import make_console
from zkconsumer.results.record import Scope

#: Kafka 0.8's defaults: the baseline point
KAFKA_DEFAULTS = {"retries": 4, "backoff_ms": 2000, "session_timeout_ms": 6000}


def at_defaults(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows at Kafka's defaults (:data:`KAFKA_DEFAULTS`): each profile's baseline."""
    return rows[(rows["retries"] == KAFKA_DEFAULTS["retries"]) & (rows["backoff_ms"] == KAFKA_DEFAULTS["backoff_ms"])
                & (rows["session_timeout_ms"] == KAFKA_DEFAULTS["session_timeout_ms"])]


def table(points: pd.DataFrame) -> Table:
    t = Table(title="The settings map: seeds breaking an invariant, by point (÷ the profile's at Kafka's defaults)")
    for col in ("profile", "session ms", "retries", "backoff ms", "FAQ rule", "breaking", "÷ defaults",
                "invariants broken (seeds)", "given up / seed", "settle p50 / p95 (s)"):
        t.add_column(col)
    inv = [c for c in points.columns if c.startswith("breaks_")]
    for profile, rows in points.groupby("profile", sort=False):
        base = at_defaults(rows)
        base_rate = float(base["breach_rate"].iloc[0]) if len(base) else None
        for r in rows.itertuples(index=False):
            ratio = "–" if not base_rate else f"{r.breach_rate / base_rate:.2f}"
            broken = ", ".join(f"{c.removeprefix('breaks_')} {getattr(r, c)}" for c in inv if getattr(r, c))
            settle = "–" if pd.isna(r.settle_p50_ms) else f"{r.settle_p50_ms / 1000:.1f} / {r.settle_p95_ms / 1000:.1f}"
            t.add_row(profile, f"{r.session_timeout_ms:,}", str(r.retries), f"{r.backoff_ms:,}",
                      "yes" if r.faq_rule else "no", f"{r.breaking} of {r.seeds}", ratio, broken,
                      f"{r.given_up / max(1, r.seeds):.2f}", settle)
    return t


def record_rows(points: pd.DataFrame) -> list[dict]:
    """The table's figures for the result record: every column of ``grid_by_point`` (the seeds breaking each
    invariant as ``breaks_<invariant>``), the breach rate's ratio to the profile's at Kafka's defaults, rebalances
    given up per seed and the settle times in seconds."""
    out = []
    for _, rows in points.groupby("profile", sort=False):
        base = at_defaults(rows)
        base_rate = float(base["breach_rate"].iloc[0]) if len(base) else None
        for r in json.loads(rows.to_json(orient="records")):  # plain JSON values, NaN as null
            p50, p95 = r.get("settle_p50_ms"), r.get("settle_p95_ms")
            out.append({**r, "breach_rate_vs_defaults": r["breach_rate"] / base_rate if base_rate else None,
                        "given_up_per_seed": r["given_up"] / max(1, r["seeds"]),
                        "settle_p50_s": None if p50 is None else p50 / 1000,
                        "settle_p95_s": None if p95 is None else p95 / 1000})
    return out


def _point(text: str) -> dict[str, int]:
    try:
        retries, backoff, session = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give retries,backoff_ms,session_timeout_ms (10,1000,6000)") from None
    return {"retries": retries, "backoff_ms": backoff, "session_timeout_ms": session}


def run_point(point: dict[str, int], seeds: int, out: Path, master: str) -> pd.DataFrame:
    """One point of its own for ``kafka-0.8``, on the grid's seeds (a seed draws the same schedule at every point of
    one session timeout), as ``zkconsumer sim --grid`` runs it."""
    code = cli(["sim", "--grid", "--profiles", "kafka-0.8", "--retries", str(point["retries"]),
                "--backoff-ms", str(point["backoff_ms"]), "--session-timeouts-ms", str(point["session_timeout_ms"]),
                "--seeds", str(seeds), "--out", str(out), "--master", master])
    if code:
        raise SystemExit(code)
    return pd.read_csv(out / "tables" / "grid_by_point.csv")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="where the grid goes (Parquet, heatmaps, report)")
    ap.add_argument("--from", dest="source", type=Path, help="print the table of a grid already run there")
    ap.add_argument("--seeds", type=int, default=150)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--point", metavar="R,B,S", type=_point,
                    help="also run kafka-0.8 at one point of its own: retries, backoff ms, session timeout ms")
    ap.add_argument("--record", type=Path, metavar="FILE",
                    help="write the result record (results/README.md) there (a grid run now: not with --from)")
    args = ap.parse_args()
    if args.record and args.source is not None:
        ap.error("--record records a grid run now; --from's grid ran on code this run cannot vouch for")
    console = make_console()
    if args.source is None:
        if args.out is None:
            ap.error("give --out DIR (run the grid) or --from DIR (a grid already run)")
        # the point of its own first: it takes a minute, so a mistake in it shows before the grid's long run
        extra = run_point(args.point, args.seeds, args.out / "point", args.master) if args.point else None
        started = time.perf_counter()
        code = cli(["sim", "--grid", "--seeds", str(args.seeds), "--out", str(args.out), "--master", args.master])
        if code:
            raise SystemExit(code)
        took = time.perf_counter() - started
        source = args.out
    else:
        source, took, extra = args.source, None, None
    points = pd.read_csv(source / "tables" / "grid_by_point.csv")
    order = {"kafka-0.8": 0, "default": 1}
    points = points.sort_values(["profile", "session_timeout_ms", "retries", "backoff_ms"],
                                key=lambda s: s.map(order) if s.name == "profile" else s)
    console.print(table(points))
    seeds = int(points["seeds"].sum())
    simulated = pd.read_parquet(source / "tables" / "grid_results.parquet", columns=["wall_s"])["wall_s"].sum()
    speed = f"{seeds:,} seeds, {simulated / 60:,.1f} core-minutes of simulation"
    if took is not None:
        speed += f", {took / 60:,.1f} min of wall: {60 * seeds / took:,.0f} seeds a minute"
    console.print(speed, highlight=False)
    if extra is not None:
        baseline = at_defaults(points[points["profile"] == "kafka-0.8"])
        console.print(table(pd.concat([baseline, extra])))
    if args.record:
        figures = {"baseline": KAFKA_DEFAULTS, "rows": record_rows(points), "seeds": seeds,
                   "simulated_core_minutes": float(simulated) / 60, "wall_min": took / 60,
                   "seeds_per_minute": 60 * seeds / took}
        if extra is not None:
            figures["point"] = record_rows(pd.concat([baseline, extra]))[-1]
        write_record(args.record, vars(args), figures, Scope.SIM)


if __name__ == "__main__":
    main()
