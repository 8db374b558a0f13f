"""The rich consoles every command and benchmark prints through.

Rich sizes tables to the terminal, and when stdout is a pipe or a log file it assumes 80 columns and cuts column
names ("prof…", "cons…"). A log is read later, by people and by tools, so off a terminal we give rich a very
wide page instead: tables take the width their contents need (they never expand to the page) and nothing is cut.
Rules (horizontal lines) are the one thing that would stretch to the page, so they keep a normal width.
"""

from __future__ import annotations

import os
from typing import IO, Any

from rich.console import Console
from rich.rule import Rule

#: Columns given to rich when the output is not a terminal (and ``COLUMNS`` is not set): wide enough for any
#: table we print, so none is ever truncated.
OFF_TERMINAL_WIDTH = 1000
#: Width of a rule off a terminal.
RULE_WIDTH = 100


class WideConsole(Console):
    """A :class:`rich.console.Console` that does not truncate off a terminal (see the module docstring)."""

    def rule(self, title: Any = "", **kwargs: Any) -> None:
        if self.is_terminal or self.width <= RULE_WIDTH:
            super().rule(title, **kwargs)
        else:
            self.print(Rule(title, **kwargs), width=RULE_WIDTH)


def make_console(*, stderr: bool = False, file: IO[str] | None = None, **kwargs: Any) -> Console:
    """A console on stdout (or stderr, or ``file``): rich's defaults on a terminal, full width elsewhere.

    An explicit ``width`` or a ``COLUMNS`` environment variable wins, as with rich itself.
    """
    console = WideConsole(stderr=stderr, file=file, **kwargs)
    if "width" not in kwargs and not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = OFF_TERMINAL_WIDTH
    return console
