"""How a run's ``zkconsumer migrate`` runs ended, worded once for the lab and the simulator (migration/outcome.py)."""

from __future__ import annotations

from zkconsumer.migration.outcome import DriverEnd, combined, result_text, settled


def test_each_end_is_worded_as_the_lab_summary_says_it() -> None:
    assert result_text(False, DriverEnd.DONE) == "done"
    assert result_text(True, DriverEnd.ROLLED_BACK) == "rolled back"
    assert result_text(False, DriverEnd.KILLED) == "migration killed"
    assert result_text(False, DriverEnd.TAKEN_OVER) == "migration taken over"
    assert result_text(True, DriverEnd.FAILED, "c2 did not acknowledge") == "rollback failed: c2 did not acknowledge"


def test_a_kill_or_failure_stays_visible_and_only_a_failure_unsettles_the_run() -> None:
    killed_then_done = combined(combined(None, "migration killed"), "done")
    assert killed_then_done == "migration killed; then done" and settled(killed_then_done)
    assert combined("done", "rolled back") == "rolled back" and settled("rolled back")
    failed = combined("migration failed: step 2 did not hold", "rolled back")
    assert failed == "migration failed: step 2 did not hold; then rolled back" and not settled(failed)
    assert not settled("migration killed") and not settled(None) and not settled("unfinished")
