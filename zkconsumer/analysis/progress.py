"""One progress line per pipeline stage: a live status while it runs, then ``✓ stage  1.2 s  detail``.

With a Spark session the live status also shows the running Spark stages' tasks (done / total), polled from
Spark's status tracker, so a ten-minute sweep says how far it is rather than only spinning. Timings are kept so
the report can say where the time went.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

POLL_SECONDS = 0.5


def task_progress(tracker: Any) -> tuple[int, int] | None:
    """(completed, total) tasks over Spark's active stages, or None when no stage is running."""
    done = total = 0
    for stage_id in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            done += info.numCompletedTasks
            total += info.numTasks
    return (done, total) if total else None


def status_text(name: str, elapsed: float, progress: tuple[int, int] | None) -> str:
    """``assign scenarios… 5/16 tasks (31%) · 1m 12s · ~2m 38s left`` (the estimate once a task has finished)."""
    if progress is None:
        return f"[bold]{name}[/]… {_clock(elapsed)}"
    done, total = progress
    text = f"[bold]{name}[/]… {done}/{total} tasks ({100 * done // total}%) · {_clock(elapsed)}"
    if 0 < done < total:
        text += f" · ~{_clock(elapsed * (total - done) / done)} left"
    return text


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{seconds:.1f}s"


@dataclass
class Stages:
    console: Console
    spark: Any = None
    timings: list[tuple[str, float, str]] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[list[str]]:
        """Yields a list; append a short detail (``"1,234 lines"``) to show on the finished line."""
        detail: list[str] = []
        t0 = time.perf_counter()
        stop = threading.Event()
        with self.console.status(f"[bold]{name}[/]…") as status:
            watcher = None
            if self.spark is not None:
                watcher = threading.Thread(target=self._watch, args=(name, status, t0, stop), daemon=True,
                                           name=f"progress-{name}")
                watcher.start()
            try:
                yield detail
            finally:
                stop.set()
                if watcher is not None:
                    watcher.join()
        took = time.perf_counter() - t0
        note = "; ".join(detail)
        self.timings.append((name, took, note))
        self.console.print(f"[green]✓[/] {name:<26} {took:7.2f} s  {note}", highlight=False)

    def _watch(self, name: str, status: Any, t0: float, stop: threading.Event) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not stop.wait(POLL_SECONDS):
            try:
                progress = task_progress(tracker)
            except Exception:  # noqa: BLE001 - a status line must never break the job (e.g. JVM going down)
                return
            status.update(status_text(name, time.perf_counter() - t0, progress))

    @property
    def total(self) -> float:
        return sum(t for _, t, _ in self.timings)
