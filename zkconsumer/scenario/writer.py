"""A :class:`~zkconsumer.scenario.model.Scenario` written back as a scenario file: the inverse of ``reader.loads``.

Why: a schedule nobody wrote down (``zkconsumer lab --nemesis`` draws one from a seed, then shrinks it) must end up
as a file a person can read, edit and replay with ``zkconsumer lab --scenario FILE``. ``loads(dumps(s))`` equals
``s`` up to where things were written (``Scenario.source``, ``Action.line``): tests/test_nemesis.py checks that
with hypothesis.

Kept apart from scenario.py, which reads; and generic over the dataclasses' fields (an ``Action`` field is written
under its own name, ``kind`` as ``do``), so an action kind with new fields is written without a change here.
Standard library only (``tomllib`` reads TOML but does not write it).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from zkconsumer.errors import NotEncodable
from zkconsumer.scenario.model import Action, Scenario

#: Scenario fields not written as top-level keys: where it came from, its tables, and a flag of the built-ins.
_NOT_TOP = {"source", "topics", "actions", "strict", "properties", "subscriptions", "kinds", "lines"}
#: The tables of names and values, in the order they are written (before the actions).
_TABLES = ("topics", "properties", "subscriptions", "kinds")
#: Action fields not written: where it was written.
_NOT_WRITTEN = {"line"}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dumps(scenario: Scenario) -> str:
    """The scenario as TOML that ``reader.loads`` reads back to an equal scenario (a setting left unset, ``None``,
    is left out: the lab's default applies, as it did)."""
    lines: list[str] = []
    for f in dataclasses.fields(Scenario):
        if f.name in _NOT_TOP:
            continue
        value = getattr(scenario, f.name)
        if value is None or (f.name == "description" and not value):
            continue
        lines.append(f"{key(f.name)} = {value_toml(value)}")
    for table in _TABLES:
        entries = getattr(scenario, table)
        if entries:
            lines += ["", f"[{table}]"]
            lines += [f"{key(name)} = {value_toml(value)}" for name, value in entries.items()]
    for action in scenario.actions:
        lines += ["", "[[actions]]"]
        lines += [f"{key(k)} = {value_toml(v)}" for k, v in action_items(action)]
    return "\n".join(lines) + "\n"


def action_items(action: Action) -> list[tuple[str, Any]]:
    """An action's keys as written in a file, ``at`` and ``do`` first; a field at its default is left out."""
    items: list[tuple[str, Any]] = [("at", action.at), ("do", action.kind.value)]
    for f in dataclasses.fields(Action):
        if f.name in {"at", "kind"} | _NOT_WRITTEN:
            continue
        value = getattr(action, f.name)
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if value is None or value == default:
            continue
        items.append((f.name, value))
    return items


def key(name: str) -> str:
    """A TOML key: bare where it may be, else a quoted string."""
    return name if _BARE_KEY.fullmatch(name) else string_toml(name)  # fullmatch: "$" also matches before "\n"


def value_toml(value: Any) -> str:
    """One TOML value: a string, a boolean, an integer, a float, an array or an inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)  # shortest round-tripping form; TOML needs a dot or an exponent to read a float back
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, str):
        return string_toml(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key(str(k))} = {value_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value_toml(v) for v in value) + "]"
    raise NotEncodable(f"no TOML form for {type(value).__name__} {value!r}")


def string_toml(text: str) -> str:
    """A TOML basic string. TOML forbids control characters (but tab) and DEL raw in one, and has no surrogate
    escapes, so JSON's quoting does not do: every control character becomes ``\\uXXXX``."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
