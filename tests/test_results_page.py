"""results.html (zkconsumer/results/page.py): the headline figures across recorded runs, in a real Chromium."""

from __future__ import annotations

from zkconsumer.results.history import HEADLINES
from zkconsumer.results.page import page
from zkconsumer.results.record import Record


def _rec(name: str, date: str, commit: str, figures: dict) -> Record:
    return Record(name, {"command": f"cmd {name}", "date": date, "commit": commit,
                         "machine": {"cores": 2}, "figures": figures})


def _nemesis(world: str, runs: int, breaking: int, speed: float) -> dict:
    key = "variant" if world == "coordinator" else "profile"
    return {key: world, "source": "nemesis", "runs": runs, "breaking_runs": breaking, "schedules_per_minute": speed,
            "verdict": f"breaks in {breaking} of {runs} runs"}


RECORDS = [
    _rec("k08-a", "2026-12-06T10:00:00+00:00", "aaa1111", _nemesis("kafka-0.8", 10000, 2232, 155.8)),
    _rec("k08-b", "2026-12-07T10:00:00+00:00", "bbb2222", _nemesis("kafka-0.8", 2000, 441, 219.2)),
    _rec("rates", "2026-12-07T12:00:00+00:00", "ccc3333", {"coordinator": _nemesis("coordinator", 200, 0, 14.7)}),
    _rec("ci", "2026-12-07T13:00:00+00:00", "ccc3333", {"make_test_seconds": 746.0, "tests": "1,090 passed"}),
]


def test_each_headline_follows_its_figure_across_records_in_date_order() -> None:
    speed = {h.key: h for h in HEADLINES}["speed"].series(list(reversed(RECORDS)))
    assert [(s.label, [p.value for p in s.points]) for s in speed] == [("kafka-0.8", [155.8, 219.2]),
                                                                        ("coordinator", [14.7])]
    breaks = {h.key: h for h in HEADLINES}["breaks"].series(RECORDS)
    assert [round(p.value, 1) for p in breaks[0].points] == [223.2, 220.5]


def test_the_page_opens_in_chromium_with_a_chart_per_recorded_headline(tmp_path) -> None:
    from browser import chromium, open_page

    path = tmp_path / "results.html"
    path.write_text(page(RECORDS), encoding="utf-8")
    with chromium() as browser, open_page(browser, path.as_uri()) as (pg, log):
        pg.wait_for_selector("#plot-speed .scatterlayer")
        assert pg.locator("#plot-speed .scatterlayer .trace").count() == 2  # kafka-0.8 and coordinator
        assert pg.locator("#plot-tests .scatterlayer .trace").count() == 1
        # a headline no record has says what to run, instead of an empty chart
        assert "No record has this figure yet" in pg.locator("#h-rebalance").inner_text()
        assert pg.locator("#records tbody tr").count() == len(RECORDS)
        assert pg.locator("script").count() >= 1 and log.errors == [] and log.remote == []


def test_the_oracle_headlines_read_the_nemesis_and_rebalance_records() -> None:
    from zkconsumer.results.record import Record

    def seeds(*breaking: int) -> list[dict]:
        return [{"seed": i, "breaking_runs": b} for i, b in enumerate(breaking)]

    nemesis = Record("n", {"date": "2026-12-07", "figures": {"rows": [
        {"variant": "zookeeper-kafka-0.8", "per_seed": seeds(1, 0, 2, 0)},
        {"variant": "kafka-0.8.2.2", "per_seed": seeds(1, 0, 0, 0)}]}})
    rebalance = Record("r", {"date": "2026-12-07", "figures": {"runs": [
        {"profile": "kafka-0.8.2.2", "size": 50, "join_p50_ms": 600.0},
        {"profile": "kafka-0.8", "size": 50, "join_p50_ms": 360.0}]}})
    by_key = {h.key: h for h in HEADLINES}
    (agree,) = by_key["oracle"].series([nemesis, rebalance])
    assert [p.value for p in agree.points] == [75.0] and agree.points[0].detail == "3 of 4 seeds"
    (time,) = by_key["oracle-time"].series([nemesis, rebalance])
    assert time.label == "join at 50" and time.points[0].value == 0.6


def test_every_headline_reads_every_record_in_results_without_failing() -> None:
    """The page is built from whatever results/ holds: a headline skips records of other kinds (a nemesis summary's
    ``runs`` is a count, a rebalance record's a list)."""
    from zkconsumer.results import record

    records = record.load_all()
    for h in HEADLINES:
        h.series(records)
