"""The settings grid's points and tasks (sim/grid.py): pure rules, and one seed at two points showing that the
settings reach the simulated members."""

from __future__ import annotations

import pytest

from zkconsumer.errors import IllegalArgument
from zkconsumer.sim import grid
from zkconsumer.sim.grid import GridPoint


def test_the_faq_rule_is_retries_times_backoff_past_the_session() -> None:
    assert GridPoint(6000, 4, 2000).faq_rule  # Kafka 0.8's defaults keep it: 8,000 > 6,000
    assert not GridPoint(6000, 3, 2000).faq_rule  # 6,000 is not past 6,000
    assert not GridPoint(30000, 10, 2000).faq_rule
    assert GridPoint(2000, 1, 5000).properties == (("rebalance.max.retries", "1"), ("rebalance.backoff.ms", "5000"))


def test_points_are_every_combination_once_in_order_and_nonsense_is_refused() -> None:
    pts = grid.points((4, 1, 4), (250,), (6000, 2000))
    assert pts == [GridPoint(2000, 1, 250), GridPoint(2000, 4, 250), GridPoint(6000, 1, 250), GridPoint(6000, 4, 250)]
    with pytest.raises(IllegalArgument, match="rebalance.max.retries=0"):
        GridPoint(6000, 0, 250)
    with pytest.raises(IllegalArgument, match="sessions from 1,000 ms"):
        GridPoint(500, 1, 250)


def test_a_schedule_is_long_enough_for_its_longest_pause() -> None:
    short, long_ = grid.nemesis_settings(2000), grid.nemesis_settings(30000)
    assert short.duration == 30.0 and short.session_timeout_ms == 2000  # the nemesis's own shape
    assert long_.duration == 121.0
    assert long_.last_end - long_.first_at >= long_.pause_range[1] * 30.0
    assert long_.duration - long_.last_end > 30.0 + 1.0  # the last heal's deadline, before the members stop


def test_tasks_cover_every_seed_of_every_point_longest_sessions_first() -> None:
    pts = grid.points((1, 4), (250,), (2000, 30000))
    work = grid.grid_tasks(["kafka-0.8", "default"], pts, list(range(25)), per_task=10)
    assert len(work) == 2 * 4 * 3
    assert [t.point.session_timeout_ms for t in work[:12]] == [30000] * 12
    covered = sorted((t.profile, t.point, s) for t in work for s in t.seeds)
    assert covered == sorted((p, pt, s) for p in ("kafka-0.8", "default") for pt in pts for s in range(25))


def test_the_points_settings_reach_the_members() -> None:
    """Seed 0 of kafka-0.8 at 2 s sessions: one attempt of 250 ms gives rebalances up ("can't rebalance after 1
    retries"); ten of 5 s never do. Same schedule, same interleaving seed: only the settings differ."""
    few = grid.run_row("kafka-0.8", GridPoint(2000, 1, 250), 0)
    many = grid.run_row("kafka-0.8", GridPoint(2000, 10, 5000), 0)
    assert few["rebalances_given_up"] > 0
    assert many["rebalances_given_up"] == 0
    assert set(few) == set(many) == {name for name, _ in grid.COLUMNS}
    assert few["faq_rule"] is False and many["faq_rule"] is True


def test_the_cli_offers_the_grids_own_defaults() -> None:
    """cli/sim.py names them without importing the simulator (greenlet) at start: the two lists are kept equal."""
    from zkconsumer.cli import sim as cli_sim
    from zkconsumer.sim import herd_scale

    assert (cli_sim.GRID_RETRIES, cli_sim.GRID_BACKOFF_MS, cli_sim.GRID_SESSION_TIMEOUT_MS, cli_sim.GRID_PROFILES) == \
        (grid.RETRIES, grid.BACKOFF_MS, grid.SESSION_TIMEOUT_MS, grid.PROFILES)
    assert set(cli_sim.HERD_DESIGNS) <= set(herd_scale.DESIGNS)
