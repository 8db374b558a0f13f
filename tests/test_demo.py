"""`make demo` runs this: it must end with every partition owned after the visible rebalance."""

from __future__ import annotations

import io

from rich.console import Console

from zkconsumer.lab.demo import run


def test_demo_runs_end_to_end() -> None:
    out = io.StringIO()
    assert run(Console(file=out, width=200)) == 0
    text = out.getvalue()
    assert '"pattern":"static"' in text
    assert "every partition owned: True" in text
    assert "ZooKeeper stopped" in text
