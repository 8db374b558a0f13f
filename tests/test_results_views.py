"""The result views (zkconsumer/results/views.py) that render the migration matrix, the catalogue's cells, the herd's
agreement, the compaction of `__consumer_offsets` and KIP-848's zombie window: each from a small record."""

from __future__ import annotations

from typing import Any

import pytest

from zkconsumer.errors import IllegalArgument
from zkconsumer.results import blocks
from zkconsumer.results.record import Record
from zkconsumer.results.views import render_view


def _rec(figures: dict[str, Any]) -> Record:
    return Record("r", {"command": "c", "date": "2026-12-07T12:00:00+00:00", "commit": "abc1234", "figures": figures})


def test_ratio_divides_two_figures_and_needs_two_paths() -> None:
    rec = _rec({"rows": [{"a": 1914233, "b": 5481000}]})
    assert render_view(rec, "ratio", "rows.0.a,rows.0.b") == "0.349"
    with pytest.raises(IllegalArgument, match="two paths"):
        render_view(rec, "ratio", "rows.0.a")


def test_k_of_n_inside_a_sentence() -> None:
    rec = _rec({"real": {"old": {"runs": 10, "breaking": 2}}})
    text = blocks.render_text("broke in <!-- result r k-of-n real.old.breaking,real.old.runs --><!-- /result --> runs",
                              lambda name: rec, with_stale=False)
    assert "-->2 of 10<!-- /result " in text


def _run(unowned: int, longest: int, duplicates: int = 0, overlaps: int = 0) -> dict[str, Any]:
    return {"lost": 0, "unread_at_end": 0, "overlaps": overlaps, "duplicates": duplicates,
            "unowned_ms_total": unowned, "unowned_ms_max": longest, "failed_rebalances": 0, "claim_conflicts": None}


CELLS = {"cells": [
    {"mode": "k", "scenario": "broker-kill", "variant": "coordinator", "not_applicable": None,
     "verdict": "holds in 2 of 2 runs", "rate": {"headline": "holds in 2 of 2 runs"},
     "runs": [_run(36132, 6023), _run(36222, 6040)]},
    {"mode": "k", "scenario": "broker-kill", "variant": "static", "not_applicable": None,
     "verdict": "holds in 2 of 2 runs", "rate": {"headline": "holds in 2 of 2 runs"},
     "runs": [_run(36150, 6026, duplicates=3), _run(36150, 6026, duplicates=3)]},
    {"mode": "k", "scenario": "broker-kill", "variant": "kafka-4", "not_applicable": "not our broker",
     "verdict": "n/a", "rate": None, "runs": []}]}


def test_catalogue_rows_as_the_catalogue_writes_them() -> None:
    text = render_view(_rec(CELLS), "catalogue", None)
    assert "| k | `broker-kill` | `coordinator` | holds in 2 of 2 runs | 0 | 0 | 0 | 0 | 36,132–36,222 (6,023–6,040) " \
           "| 0 | - |" in text
    assert "| k | `broker-kill` | `static` | holds in 2 of 2 runs | 0 | 0 | 0 | 3 | 36,150 (6,026) | 0 | - |" in text
    assert "| k | `broker-kill` | `kafka-4` | n/a: not our broker |" + "  |" * 7 in text
    one = render_view(_rec(CELLS), "catalogue", "static").splitlines()
    assert len(one) == 3 and "`static`" in one[2]


def test_catalogue_verdict_says_each_when_the_cells_agree_and_names_them_when_not() -> None:
    assert render_view(_rec(CELLS), "catalogue-verdict", None) == \
        "`coordinator` holds in 2 of 2 runs, `static` holds in 2 of 2 runs, `kafka-4` n/a"
    alike = _rec({"cells": CELLS["cells"][:2]})
    assert render_view(alike, "catalogue-verdict", None) == "holds in 2 of 2 runs each"
    assert render_view(_rec(CELLS), "catalogue-verdict", "broker-kill/static") == "holds in 2 of 2 runs"
    assert render_view(_rec(CELLS), "catalogue-verdict", "static,kafka-4") == \
        "`static` holds in 2 of 2 runs, `kafka-4` n/a"
    with pytest.raises(IllegalArgument, match="no catalogue cell"):
        render_view(_rec(CELLS), "catalogue-verdict", "gc-pause")


def test_migration_matrix_shows_the_world_the_record_ran() -> None:
    empty_real = {"k": 0, "n": 0, "runs": []}
    sim = _rec({"cells": [{"scenario": "migration-driver-kill", "fault": "migrate-kill", "real": empty_real,
                           "simulated": {"k": 1, "n": 40, "breaches": {}, "wall_s": 501.4,
                                         "schedules_per_minute": 4.8,
                                         "migrations": {"migration killed; then done": 39, "done": 1}}}]})
    text = render_view(sim, "migration-matrix", None)
    assert "| scenario | fault | simulated | how the migration ended | wall s | schedules a minute |" in text
    assert "| `migration-driver-kill` | `migrate-kill` | breaks in 1 of 40 | 1 done, 39 migration killed; then done " \
           "| 501.4 | 4.8 |" in text
    runs = [{"migration": "done", "duplicates": 4}, {"migration": "done", "duplicates": 6}]
    real = _rec({"cells": [{"scenario": "migration-member-kill", "fault": "member-kill-switching",
                            "simulated": {"k": 0, "n": 0, "migrations": {}}, "real": {"k": 0, "n": 2, "runs": runs}}]})
    text = render_view(real, "migration-matrix", None)
    assert "| `migration-member-kill` | `member-kill-switching` | holds in 2 of 2 | 2 done | 4, 6 |" in text
    assert "simulated" not in text


def _side(join: float, leave: float, join_ms: float, leave_ms: float, **rounds: list[int]) -> dict[str, Any]:
    return {"join_ms": join_ms, "leave_ms": leave_ms,
            "join_requests": {"JoinGroup": join, "SyncGroup": join - 1, "Heartbeat": 10.0},
            "leave_requests": {"JoinGroup": leave, "SyncGroup": leave, "Heartbeat": 10.0}, **rounds}


def test_herd_agreement_per_action_with_ratios_and_gaps() -> None:
    rec = _rec({"rows": [{"protocol": "range", "size": 50, "real": _side(80.0, 133.6, 2226.53, 3128.1),
                          "simulated": _side(61.0, 70.6, 600.0, 660.0),
                          "gaps_us": {"n": 10, "median": 4744, "p90": 33886}}]})
    text = render_view(rec, "herd-agreement", None)
    assert "| `range` | 50 | join | 80.0 / 61.0 | 79.0 / 60.0 | 10.0 / 10.0 | 0.76 | 0.76 | 2,227 / 600 " \
           "| 4,744, 33,886 |" in text
    assert "| `range` | 50 | leave | 133.6 / 70.6 | 133.6 / 70.6 | 10.0 / 10.0 | 0.53 | 0.53 | 3,128 / 660 |  |" in text


def test_herd_rounds_each_rounds_joingroups_and_the_ratio_of_means() -> None:
    real = _side(13.0, 11.0, 0, 0, join_joingroups=[14, 12], leave_joingroups=[12, 10])
    sim = _side(12.0, 10.0, 0, 0, join_joingroups=[12, 12], leave_joingroups=[10, 10])
    text = render_view(_rec({"rows": [{"protocol": "range", "size": 10, "real": real, "simulated": sim}]}),
                       "herd-rounds", None)
    assert "| `range` | join | 14 12 | 12 12 | 13.00 / 12.00 | 0.92 |" in text
    assert "| `range` | leave | 12 10 | 10 10 | 11.00 / 10.00 | 0.91 |" in text


def test_offsets_compaction_sizes_reloads_and_ratios() -> None:
    row = {"minute": 60, "compacted_bytes": 2006283, "compacted_segments": 135, "compacted_reload_s": 0.0548,
           "plain_bytes": 21924000, "plain_segments": 350, "plain_reload_s": 0.5594}
    text = render_view(_rec({"rows": [row]}), "offsets-compaction", None)
    assert "| 60 | 2.01 (135) | 21.92 (350) | 0.092 | 55 ms | 559 ms | 0.098 |" in text


def test_zombie_window_run_by_run() -> None:
    runs = [{"run": "run-1", "target": "lab_c1", "overlaps": 2, "overlap_ms": [555, 56], "delivered_after_wake": 129,
             "fetched_after_wake": 106, "learned_after_ms": 10, "commit_refused": True},
            {"run": "run-2", "target": "lab_c1", "overlaps": 0, "overlap_ms": [], "delivered_after_wake": 0,
             "fetched_after_wake": 0, "learned_after_ms": None, "commit_refused": False}]
    text = render_view(_rec({"runs": runs}), "zombie-window", None)
    assert "| run-1 | `lab_c1` | 2 | 555, 56 | 129 | 106 | 10 | yes |" in text
    assert "| run-2 | `lab_c1` | 0 | - | 0 | 0 | - | no |" in text


def _lab(mode: str, scenario: str, variant: str, k: int, n: int, overlaps: int = 0) -> dict[str, Any]:
    invariants = {"zero-lost": {"broken": 0, "judged": n}, "one-live-owner": {"broken": overlaps, "judged": n}}
    return {"mode": mode, "scenario": scenario, "variant": variant, "not_applicable": None,
            "rate": {"k": k, "n": n, "invariants": invariants}, "runs": []}


def test_catalogue_agreement_sets_two_records_side_by_side_and_counts_the_verdicts_they_share() -> None:
    """A block naming ``sim+real`` reads both records; each gets its provenance line, and a disagreement is shown."""
    sim = Record("sim", {"command": "python benchmarks/sim_catalogue.py", "date": "2026-12-07T12:00:00+00:00",
                         "commit": "abc1234", "figures": {"cells": [
                             {"mode": "a", "scenario": "gc-pause", "default": {"k": 0, "n": 200, "breaches": {}},
                              "kafka-0.8": {"k": 200, "n": 200, "breaches": {"overlaps": 200}}},
                             {"mode": "j", "scenario": "partitions-added",
                              "default": {"k": 0, "n": 200, "breaches": {}},
                              "kafka-0.8": {"k": 8, "n": 200, "breaches": {"duplicates_committed": 8}}},
                             {"mode": "k", "scenario": "coordinator-kill", "default": {"refused": "no coordinator"},
                              "kafka-0.8": {"refused": "no coordinator"}}]}})
    real = Record("real", {"command": "zkconsumer catalogue --record F", "date": "2026-12-07T13:00:00+00:00",
                           "commit": "def5678", "figures": {"cells": [
                               _lab("a", "gc-pause", "zookeeper-default", 0, 1),
                               _lab("a", "gc-pause", "zookeeper-kafka-0.8", 1, 1, overlaps=1),
                               _lab("j", "partitions-added", "zookeeper-default", 0, 1),
                               _lab("j", "partitions-added", "zookeeper-kafka-0.8", 1, 1, overlaps=1)]}})
    doc = ("<!-- result sim+real catalogue-agreement default=zookeeper-default,kafka-0.8=zookeeper-kafka-0.8 -->"
           "<!-- /result -->")
    text = blocks.render_text(doc, {"sim": sim, "real": real}.__getitem__, with_stale=False)
    assert "| a | `gc-pause` | holds 200/200 | holds 1/1 | breaks 200/200: two live owners 200 | breaks 1/1: two " \
           "live owners 1 | yes, yes |" in text
    assert "| j | `partitions-added` | holds 200/200 | holds 1/1 | breaks 8/200: duplicates of committed 8 | " \
           "breaks 1/1: two live owners 1 | yes, **no** |" in text
    assert "| k | `coordinator-kill` | refused | - | refused | - | -, - |" in text
    assert "The same verdict (by majority of runs) in 3 of 4 cells run in both worlds." in text
    assert "*From results/sim.json: `python benchmarks/sim_catalogue.py`" in text
    assert "*From results/real.json: `zkconsumer catalogue --record F`" in text
    assert [f.state for f in blocks.check_text(None, text, {"sim": sim, "real": real}.__getitem__)] == \
        [blocks.State.CURRENT]
    with pytest.raises(IllegalArgument, match="reads 2 record"):
        render_view(sim, "catalogue-agreement", "default=zookeeper-default")


def test_date_is_the_day_the_run_ended() -> None:
    assert render_view(_rec({}), "date", None) == "2026-12-07"


def test_a_figure_may_be_formatted_and_a_bad_format_is_a_clear_error() -> None:
    rec = _rec({"rows": [{"speedup": 109.34567, "n": 10000}]})
    assert render_view(rec, "figure", "rows.0.speedup:.1f") == "109.3"
    assert render_view(rec, "figure", "rows.0.n") == "10,000"
    with pytest.raises(IllegalArgument, match="cannot be formatted"):
        render_view(rec, "figure", "rows.0.n:q")


def test_a_simulated_catalogue_in_a_sentence_names_the_cells_that_broke() -> None:
    rec = _rec({"cells": [
        {"mode": "a", "scenario": "gc-pause", "default": {"k": 0, "n": 200}, "kafka-0.8": {"k": 200, "n": 200}},
        {"mode": "j", "scenario": "partitions-added", "default": {"k": 0, "n": 200}, "kafka-0.8": {"k": 0, "n": 200}},
        {"mode": "k", "scenario": "coordinator-kill", "default": {"refused": "x"}, "kafka-0.8": {"refused": "x"}}]})
    assert render_view(rec, "sim-catalogue-summary", None) == (
        "`default` holds in all 2 cells (200 seeds each); `kafka-0.8` breaks in a (gc-pause) 200/200 and holds in "
        "the other 1")


def test_rebalance_rows_and_each_join_against_zookeepers_floor() -> None:
    run = {"profile": "kafka-0.8", "size": 200, "cold_s": 9.123, "join_p50_ms": 3988.4, "join_max_ms": 4100.0,
           "crash_p50_ms": 3500.0, "crash_max_ms": 3600.0, "zk_requests": 43012.0, "cpu_ms": {"consumers": 812.3},
           "failed_attempts": 0, "claim_conflicts": 12, "failed_rebalances": 0}
    text = render_view(_rec({"floor_ms": {"rebalance chain": 4.0}, "runs": [run]}), "rebalance", None)
    assert "| `kafka-0.8` | 200 | 9.12 | 3,988 / 4,100 | 3,500 / 3,600 | 997.1x | 43,012 | 812 | 0 | 12 | 0 |" in text
    assert "rebalance chain alone in the same run: 4.00 ms" in text


def test_rows_renders_any_recorded_table_with_units_from_its_keys() -> None:
    rec = _rec({"rows": [{"strategy": "range", "zkconsumer_s": 0.2071, "speedup": 109.34, "note": None},
                         {"strategy": "roundrobin-relaxed", "zkconsumer_s": 0.5771, "speedup": 11.81, "note": None}],
                "by": {"x": [{"n": 1200}]}})
    text = render_view(rec, "rows", "strategy,zkconsumer_s:.3f,speedup:.1f,note")
    assert render_view(rec, "rows", "by.x;n:,.0f").splitlines()[2] == "| 1,200 |"
    assert text.splitlines()[0] == "| strategy | zkconsumer (s) | speedup | note |"
    assert "| range | 0.207 | 109.3 | - |" in text and "| `roundrobin-relaxed` | 0.577 | 11.8 | - |" in text
    assert render_view(rec, "rows", "by.x;n").splitlines()[2] == "| 1,200 |"
    with pytest.raises(IllegalArgument, match="no figure"):
        render_view(rec, "rows", "strategy,missing")


def test_migration_agreement_sets_both_worlds_matrices_side_by_side() -> None:
    def cell(world: str, k: int, n: int, ended: str) -> dict[str, Any]:
        other = "real" if world == "simulated" else "simulated"
        inner = ({"k": k, "n": n, "migrations": {ended: n}} if world == "simulated"
                 else {"k": k, "n": n, "runs": [{"migration": ended, "duplicates": 0}] * n})
        return {"scenario": "migration-driver-kill", "fault": "migrate-kill", world: inner,
                other: {"k": 0, "n": 0, "runs": [], "migrations": {}}}
    sim = Record("s", {"figures": {"cells": [cell("simulated", 0, 40, "done")]}})
    real = Record("r", {"figures": {"cells": [cell("real", 1, 2, "done")]}})
    text = render_view([sim, real], "migration-agreement", None)
    row = "| `migration-driver-kill` | `migrate-kill` | holds in 40 of 40 | done | breaks in 1 of 2 | done | **no** |"
    assert row in text
    assert text.endswith("The same verdict and ending in 0 of 1 scenarios run in both worlds.")


def test_catalogue_verdict_names_modes_and_broken_invariants_when_one_variant_differs() -> None:
    def cell(mode: str, scenario: str, overlaps: int) -> dict[str, Any]:
        return {"mode": mode, "scenario": scenario, "variant": "zookeeper-kafka-0.8", "verdict": "",
                "rate": {"headline": f"breaks in {overlaps} of 5 runs",
                         "invariants": {"one-live-owner": {"broken": overlaps, "judged": 5},
                                        "commits-forward": {"broken": 0, "judged": 5}}}}
    text = render_view(_rec({"cells": [cell("e", "session-expiry", 5), cell("f", "zk-cut", 4)]}),
                       "catalogue-verdict", None)
    assert text == ("e (`session-expiry`) breaks in 5 of 5 runs (two live owners in 5), "
                    "f (`zk-cut`) breaks in 4 of 5 runs (two live owners in 4)")


def test_a_real_catalogue_in_a_sentence_names_the_cells_that_broke_by_majority() -> None:
    cells = [_lab("a", "gc-pause", "zookeeper-default", 0, 1), _lab("a", "gc-pause", "zookeeper-kafka-0.8", 1, 1, 1),
             _lab("j", "partitions-added", "zookeeper-kafka-0.8", 1, 3, 1),
             {"mode": "k", "scenario": "coordinator-kill", "variant": "zookeeper-default", "rate": None}]
    assert render_view(_rec({"cells": cells}), "catalogue-summary", None) == (
        "`zookeeper-default` holds in all 1 cells (1 run each); `zookeeper-kafka-0.8` breaks in a (gc-pause) 1/1 and "
        "holds in the other 1")


def test_rows_headers_name_rates_as_rates() -> None:
    rec = _rec({"rows": [{"records_per_s": 65735.2, "mb_per_s": 6.57}]})
    assert render_view(rec, "rows", "records_per_s:,.0f,mb_per_s").splitlines()[:3] == [
        "| records/s | MB/s |", "|---|---|", "| 65,735 | 6.57 |"]


def test_a_list_figure_reads_as_a_list() -> None:
    rec = _rec({"seeds": [3, 6, 1000], "none": []})
    assert render_view(rec, "figure", "seeds") == "3, 6, 1,000"
    assert render_view(rec, "figure", "none") == "none"


def test_mixed_groups_sets_each_group_in_a_column_and_each_change_in_a_row() -> None:
    def group(name: str, kind: str, ms: float, total: float, ratio: float) -> dict[str, Any]:
        return {"group": name, "steps": [{"step": "start m1", "member_kind": kind, "converged_ms": ms}],
                "total_s": total, "ratio_to_baseline": ratio, "failed_attempts_kafka": 0,
                "failed_attempts_zkconsumer": 2.0,
                "joins": [{"join": "start m2", "member_kind": kind, "first_claim_ms": 251.4, "last_release_ms": None}]}
    rec = _rec({"baseline": "all Kafka", "rows": [group("all Kafka", "kafka-0.8.2.2", 131.2, 1.89, 1.0),
                                                   group("all default", "zkconsumer", 4.0, 0.3, 0.16)]})
    text = render_view(rec, "mixed-groups", None)
    assert "| start m1 | 131 (k) | 4 (z) |" in text and "| ratio to all Kafka | 1.00x | 0.16x |" in text
    assert "| failed attempts: Kafka / zkconsumer | 0 / 2 | 0 / 2 |" in text
    assert "| start m2 | 251 / - (k) | 251 / - (z) |" in render_view(rec, "mixed-groups", "joins")


def test_oracle_agreement_sets_a_profile_beside_kafkas_consumer_with_the_claims_timing() -> None:
    """One real catalogue and the claims' timing read from its runs: verdicts side by side, a disagreement shown,
    the waits' medians (the later registrations' where there are any) and the conflicts' range."""
    ours, theirs = "zookeeper-kafka-0.8", "kafka-0.8.2.2"
    cat = Record("cat", {"command": "zkconsumer catalogue --runs 3", "date": "2026-12-07T12:00:00+00:00",
                         "commit": "abc1234", "figures": {"cells": [
                             _lab("a", "gc-pause", ours, 3, 3, overlaps=3), _lab("a", "gc-pause", theirs, 3, 3, 3),
                             _lab("d", "stale-view", ours, 0, 3), _lab("d", "stale-view", theirs, 2, 3, overlaps=2)]}})
    timing = Record("timing", {"command": "python benchmarks/claim_timing.py DIR", "date": "2026-12-07T13:00:00+00:00",
                               "commit": "abc1234", "figures": {"baseline": theirs, "rows": [
                                   {"scenario": "gc-pause", "variant": ours, "to_claim_p50_ms": 44.2,
                                    "later_registrations": 3, "later_to_claim_p50_ms": 47.0,
                                    "claim_conflicts_per_run": [4, 13, 9]},
                                   {"scenario": "gc-pause", "variant": theirs, "to_claim_p50_ms": 435.0,
                                    "later_registrations": 3, "later_to_claim_p50_ms": 121.0,
                                    "claim_conflicts_per_run": [0, 0, 0]}]}})
    text = render_view([cat, timing], "oracle-agreement", f"{ours}={theirs}")
    assert "| a `gc-pause` | breaks 3/3: two live owners 3 | breaks 3/3: two live owners 3 | yes | 44 / 435 " \
           "(later: 47 / 121) | 4–13 / 0 |" in text
    assert "| d `stale-view` | holds 3/3 | breaks 2/3: two live owners 2 | **no** | - / - | - / - |" in text
    assert "The same verdict (by majority of runs) in 1 of 2 modes run on both." in text
    with pytest.raises(IllegalArgument, match="profile=kafka"):
        render_view([cat, timing], "oracle-agreement", None)


def test_pause_delta_puts_each_batch_real_beside_simulated() -> None:
    def world(runs: int, past: int, dropped: int, lost: int, kept: int, shortest: int | None) -> dict[str, Any]:
        return {"runs": runs, "delta_past_drop": past, "dropped": dropped, "expired_of_delta_past_drop": lost,
                "longest_kept_ms": kept, "shortest_lost_ms": shortest}

    first = Record("first", {"command": "c", "date": "2026-12-07T12:00:00+00:00", "commit": "abc1234", "figures": {
        "real": world(16, 3, 3, 0, 4303, None), "simulated": world(160, 54, 53, 27, 4294, 4272)}})
    second = Record("second", {"command": "c", "date": "2026-12-07T12:00:00+00:00", "commit": "abc1234", "figures": {
        "real": world(32, 10, 9, 4, 4344, 4182), "simulated": world(160, 54, 53, 27, 4294, 4272)}})
    text = render_view([first, second], "pause-delta", None)
    assert "| real, batch 1 (first) | 16 | 3 | 3 | 0 of 3 | 4.303 s, - |" in text
    assert "| real, batch 2 (second) | 32 | 10 | 9 | 4 of 10 | 4.344 s, 4.182 s |" in text
    assert "| simulated, batch 2 (second) | 160 | 54 | 53 | 27 of 54 | 4.294 s, 4.272 s |" in text


def test_replay_sim_without_the_schedules_or_the_real_half_leaves_their_columns_out() -> None:
    rows = [{"reproducer": "seed6-sim-kafka-0.8-6.toml", "simulated_k": 20, "simulated_n": 20,
             "simulated_invariants": {"overlaps": 20}}]
    text = render_view(_rec({"rows": rows}), "replay-sim", None)
    assert text.splitlines()[0] == "| reproducer | simulated | how (simulated) |"
    assert "| seed6 | 20/20 | two live owners 20 |" in text


def _nemesis_row(variant: str, broke: dict[int, list[str]], seeds: int = 4) -> dict[str, Any]:
    per_seed = [{"seed": s, "breaking_runs": 1 if s in broke else 0, "judged_runs": 1, "broken": broke.get(s, [])}
                for s in range(seeds)]
    by_inv = {k: sum(1 for b in broke.values() if k in b) for k in ("zero_lost", "one_live_owner")}
    return {"variant": variant, "seeds": seeds, "breaching_seeds": len(broke), "seeds_by_invariant": by_inv,
            "failed_to_run_seeds": 0, "run_wall_p50_s": 33.4, "total_s": 1074.0, "per_seed": per_seed}


def test_nemesis_per_variant_and_seed_by_seed() -> None:
    rec = _rec({"rows": [_nemesis_row("zookeeper-kafka-0.8", {1: ["one_live_owner"], 3: ["one_live_owner"]}),
                         _nemesis_row("kafka-0.8.2.2", {1: ["one_live_owner"], 2: ["one_live_owner"]})]})
    text = render_view(rec, "nemesis", None)
    assert "| `zookeeper-kafka-0.8` | 4 | 2 of 4 | 1, 3 | two live owners 2 | 0 | 33 | 17.9 |" in text
    seeds = render_view(rec, "nemesis-seeds", None)
    assert "| 1 | 1/1: two live owners | 1/1: two live owners | yes |" in seeds
    assert "| 2 | 0/1 | 1/1: two live owners | **no** |" in seeds
    assert "| 0 |" not in seeds
    assert "The same verdict on 2 of 4 seeds." in seeds


def test_compare_measures_in_rows_variants_in_columns_with_ratios() -> None:
    base = {"variant": "zookeeper-default", "unowned_ms_total": 3029, "rebalance_ms_p50": 2110.5, "verify_ok": True,
            "not_applicable": [], "ratio_to_baseline": None}
    base["group_requests_per_rebalance"] = 0.0
    other = {"variant": "cooperative-sticky", "unowned_ms_total": 16780, "rebalance_ms_p50": 3, "verify_ok": True,
             "not_applicable": ["rebalance_ms_p50"], "ratio_to_baseline": {"unowned_ms_total": 5.54,
                                                                           "rebalance_ms_p50": None}}
    text = render_view(_rec({"baseline": "zookeeper-default", "rows": [base, other]}), "compare", "unowned_ms_total")
    assert "| partition-time unowned (ms, sum) | 3,029 | 16,780 |" in text
    assert "| rebalance latency p50 (ms) | 2,110.5 | n/a |" in text
    assert "| group rebalances | - | - |" in text
    assert "| broker group requests per rebalance | 0 | - |" in text
    assert "| every partition owned once at the end | yes | yes |" in text
    assert "| partition-time unowned (ms, sum), ÷ `zookeeper-default` | 1 | 5.54 |" in text


def test_nemesis_agreement_sets_simulated_rates_beside_real_runs_seed_by_seed() -> None:
    sim = Record("sim", {"command": "c", "date": "2026-12-07T12:00:00+00:00", "commit": "abc1234", "figures": {
        "interleavings_per_seed": 20, "rows": [
            {"profile": "kafka-0.8", "seed": 0, "breaking_interleavings": 1, "per_invariant": {"overlaps": 1}},
            {"profile": "kafka-0.8", "seed": 1, "breaking_interleavings": 0, "per_invariant": {}},
            {"profile": "kafka-0.8", "seed": 2, "breaking_interleavings": 20, "per_invariant": {"overlaps": 20}},
            {"profile": "kafka-0.8", "seed": 3, "breaking_interleavings": 0, "per_invariant": {}},
            {"profile": "default", "seed": 0, "breaking_interleavings": 0, "per_invariant": {}}]}})
    real = _rec({"rows": [_nemesis_row("kafka-0.8.2.2", {2: ["one_live_owner"], 3: ["one_live_owner"]}),
                          _nemesis_row("zookeeper-kafka-0.8", {2: ["one_live_owner"]})]})
    text = render_view([sim, real], "nemesis-agreement", "kafka-0.8=zookeeper-kafka-0.8")
    assert text.splitlines()[0] == ("| seed | `kafka-0.8`: simulated | `zookeeper-kafka-0.8`: real "
                                     "| `kafka-0.8.2.2`: real |")
    assert "| 0 | 1/20: two live owners 1 | 0/1 | 0/1 |" in text
    assert "| 2 | 20/20: two live owners 20 | 1/1: two live owners | 1/1: two live owners |" in text
    assert "| 3 | 0/20 | 0/1 | 1/1: two live owners |" in text
    assert "| 1 |" not in text
    assert "broke on 1 of 4 seeds, 1 of them breaking in simulation too; the simulator broke at some rate on 1 " \
           "seeds where the real runs held." in text


def _grid_point(profile: str, session: int, retries: int, backoff: int, breaking: int) -> dict[str, Any]:
    return {"profile": profile, "session_timeout_ms": session, "retries": retries, "backoff_ms": backoff,
            "faq_rule": retries * backoff > session, "seeds": 80, "breaking": breaking,
            "breaks_overlaps": breaking, "breaks_duplicates_committed": 1, "breaks_unowned_after_heal": 0,
            "breach_rate_vs_defaults": breaking / 19, "given_up_per_seed": 0.05, "settle_p50_s": 2.6,
            "settle_p95_s": 7.0}


def test_settings_map_renders_a_profile_the_point_beside_the_defaults_and_spans() -> None:
    rec = _rec({"baseline": {"retries": 4, "backoff_ms": 2000, "session_timeout_ms": 6000},
                "rows": [_grid_point("kafka-0.8", 6000, 4, 2000, 19), _grid_point("kafka-0.8", 2000, 4, 250, 26),
                         _grid_point("kafka-0.8", 2000, 10, 250, 30), _grid_point("default", 6000, 4, 2000, 0)],
                "point": _grid_point("kafka-0.8", 6000, 10, 1000, 20)})
    table = render_view(rec, "settings-map", None)
    assert "| 6,000 | 4 | 2,000 | yes | 19 of 80 | 1.00 |" in table
    assert len(table.splitlines()) == 2 + 3  # kafka-0.8's three points, not the default profile's
    point = render_view(rec, "settings-map", "point").splitlines()
    assert point[2].startswith("| 6,000 | 4 | 2,000 |") and point[3].startswith("| 6,000 | 10 | 1,000 |")
    assert render_view(rec, "settings-span", "kafka-0.8,2000,4|10,*,breaking") == "26–30"
    assert render_view(rec, "settings-span", "default,*,*,*,breaking") == "0"
    assert render_view(rec, "settings-span", "kafka-0.8,6000,4,2000,settle_p50_s:.1f") == "2.6"
    with pytest.raises(IllegalArgument, match="no settings-grid point"):
        render_view(rec, "settings-span", "kafka-0.8,30000,*,*,breaking")
    with pytest.raises(IllegalArgument, match="are numbers"):
        render_view(rec, "settings-span", "kafka-0.8,6s,*,*,breaking")
    with pytest.raises(IllegalArgument, match="no settings-grid figure"):
        render_view(rec, "settings-span", "kafka-0.8,*,*,*,brekaing")


def test_herd_scale_rows_and_a_skipped_size() -> None:
    row = {"design": "kafka-0.8", "size": 200, "requests_per_action": 43010.0, "requests_vs_default": 47.5,
           "join_ms": 3871.0, "leave_ms": 3832.0, "join_ms_vs_default": 80.6, "attempts_per_action": 200.5,
           "kb_from_server_per_action": 8779.2, "given_up": 0, "wall_cold_s": 11.1, "wall_join_s": 11.4,
           "wall_leave_s": 11.6}
    text = render_view(_rec({"rows": [row, {"design": "eager", "size": 1000, "skipped_estimate_s": 714725}]}),
                       "herd-scale", None)
    assert ("| `kafka-0.8` | 200 | 43,010.0 | 47.50 | 3,871 / 3,832 | 80.6 | 200.50 | 8,779.2 | 0 "
            "| 11.1 / 11.4 / 11.6 |") in text
    assert "| eager | 1,000 | skipped: about 714,725 s of wall |" in text
