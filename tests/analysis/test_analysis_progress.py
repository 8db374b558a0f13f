"""Live status of long Spark stages: task counts read from Spark's own status tracker."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from helpers import wait_until
from rich.console import Console

from zkconsumer.analysis.progress import Stages, status_text, task_progress


def _job_held_until(spark, marker: Path, partitions: int = 4):
    """A job whose partition 0 finishes at once and whose other tasks wait for ``marker`` to exist."""
    marker_s = str(marker)

    def hold(index, rows):
        import os
        import time as _time

        if index:
            while not os.path.exists(marker_s):  # the test creates it once it has seen the progress
                _time.sleep(0.02)
        yield sum(1 for _ in rows)

    return lambda: spark.sparkContext.parallelize(range(partitions * 10), partitions).mapPartitionsWithIndex(
        hold).collect()


def test_task_progress_follows_a_running_job(spark, tmp_path):
    tracker = spark.sparkContext.statusTracker()
    assert task_progress(tracker) is None  # nothing running
    result: list = []
    job = threading.Thread(target=lambda: result.append(_job_held_until(spark, tmp_path / "go")()))
    job.start()
    try:
        # local[2]: task 0 ends, two more run held, one waits for a slot
        assert wait_until(lambda: task_progress(tracker) == (1, 4), message="1 of 4 tasks done")
    finally:
        (tmp_path / "go").touch()
        job.join(60)
    assert result == [[10, 10, 10, 10]]
    assert wait_until(lambda: task_progress(tracker) is None, message="no active stage")


def test_status_text() -> None:
    assert status_text("assign scenarios", 3.25, None) == "[bold]assign scenarios[/]… 3.2s"
    assert status_text("assign scenarios", 72, (4, 16)) == (
        "[bold]assign scenarios[/]… 4/16 tasks (25%) · 1m 12s · ~3m 36s left")
    assert status_text("x", 5, (0, 8)).endswith("0/8 tasks (0%) · 5.0s")  # no estimate before a task ends


def test_stage_with_spark_reports_and_records(spark, tmp_path):
    buf = io.StringIO()
    st = Stages(Console(file=buf, width=120), spark)
    t0 = time.perf_counter()
    with st.stage("count") as note:
        note.append(f"{spark.range(100).count()} rows")
    assert st.timings[0][0] == "count" and 0 < st.timings[0][1] <= time.perf_counter() - t0
    assert "✓ count" in buf.getvalue() and "100 rows" in buf.getvalue()
    assert not any(t.name.startswith("progress-") for t in threading.enumerate())  # watcher stopped
