"""One progress line per pipeline stage: a spinner while it runs, then ``✓ stage  1.2 s  detail``.

Timings are kept so the report can say where the time went.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console


@dataclass
class Stages:
    console: Console
    timings: list[tuple[str, float, str]] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[list[str]]:
        """Yields a list; append a short detail (``"1,234 lines"``) to show on the finished line."""
        detail: list[str] = []
        t0 = time.perf_counter()
        with self.console.status(f"[bold]{name}[/]…"):
            yield detail
        took = time.perf_counter() - t0
        note = "; ".join(detail)
        self.timings.append((name, took, note))
        self.console.print(f"[green]✓[/] {name:<26} {took:7.2f} s  {note}", highlight=False)

    @property
    def total(self) -> float:
        return sum(t for _, t, _ in self.timings)
