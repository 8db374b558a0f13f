"""Tables printed off a terminal (a pipe, a log file) keep their full column names and cells."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from rich.table import Table

from zkconsumer.consoles import RULE_WIDTH, make_console

TOPIC = "a-topic-whose-name-is-long-enough-to-overflow-eighty-columns"


def test_cli_table_through_a_pipe_is_not_truncated() -> None:
    members = [f"--member=consumer-with-a-rather-long-name-{i}:{TOPIC}=2" for i in range(3)]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run([sys.executable, "-m", "zkconsumer", "assign", "--strategy", "range",
                          "--topic", f"{TOPIC}:12", *members],
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    assert "…" not in out.stdout
    assert "consumer thread id" in out.stdout
    # each row holds the whole partition list on one line
    assert f"consumer-with-a-rather-long-name-0-0 │     2 │ {TOPIC}-0 {TOPIC}-1" in out.stdout


def test_many_wide_columns_in_a_log_file() -> None:
    buf = io.StringIO()
    console = make_console(file=buf)
    table = Table(title="bench")
    names = [f"{word} p50 (ms)" for word in ("profile", "consumers", "cold start", "join", "crash", "conflicts",
                                               "failed attempts", "failed rebalances", "watch delivery", "claim")]
    for name in names:
        table.add_column(name)
    table.add_row(*("kafka-0.8" for _ in names))
    console.print(table)
    console.rule("a rule")
    text = buf.getvalue()
    assert "…" not in text
    assert all(name in text for name in names)
    assert max(len(line) for line in text.splitlines() if "a rule" in line) <= RULE_WIDTH


def test_explicit_width_wins() -> None:
    assert make_console(file=io.StringIO(), width=50).width == 50
