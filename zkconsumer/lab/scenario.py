"""A lab run as data: a scenario file (TOML) says what runs, for how long, and what happens when (docs/scenarios.md).

Pure: parsing, checking and expanding a scenario into timed :class:`Step` objects does no I/O beyond reading the
file, so every rule is unit-tested alone; the lab (runner.py) carries the steps out. The built-in workloads
(``churn``, ``rolling-restart``, ``scale-out``, ``migration``) are scenario files shipped in the package
(zkconsumer/lab/scenarios/), read the same way as a user's.

A malformed file raises one :class:`ScenarioError` naming the file, the line and the key, e.g.
``churn.toml:14: actions[2].do: unknown action 'kil'; one of: join, stop, kill, ...``.

Times: ``at`` is seconds after the members started (``at = 4.5``) or a share of the run (``at = "15%"``), so a
workload keeps its shape when ``--duration`` changes. A member is named (``"c2"``), or ``"new"`` (the next name not
used yet: a join), or ``"each"`` (every member started at the beginning, one after the other, spread evenly from
``at`` to ``until``). ``count`` repeats a join (``"to-partitions"``: until there are as many members as the
largest topic has partitions), spread the same way.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from zkconsumer.errors import ZkConsumerError


class ActionKind(StrEnum):
    """What a step does. Member actions name a member; the others act on the group's topics or on the run."""

    JOIN = "join"  # start a member (a new one, or one that left, under its old id)
    STOP = "stop"  # SIGTERM: a graceful leave
    KILL = "kill"  # SIGKILL: a crash, healed by the session's expiry
    RESTART = "restart"  # start a stopped or killed member again under the same id
    BOUNCE = "bounce"  # stop, wait for the exit, start again: one member's deploy
    PAUSE = "pause"  # SIGSTOP for ``seconds``, then SIGCONT: a long garbage-collection pause
    MIGRATE = "migrate"  # ``zkconsumer migrate`` on the whole group (lab mode migrate)
    ROLLBACK = "rollback"  # ``zkconsumer migrate --rollback``

    @property
    def on_member(self) -> bool:
        return self in _MEMBER_ACTIONS


_MEMBER_ACTIONS = {ActionKind.JOIN, ActionKind.STOP, ActionKind.KILL, ActionKind.RESTART, ActionKind.BOUNCE,
                   ActionKind.PAUSE}
#: A member reference that names no member by itself.
NEW, EACH = "new", "each"
#: ``count`` for a join: as many members as the largest topic has partitions.
TO_PARTITIONS = "to-partitions"


class ScenarioError(ZkConsumerError, ValueError):
    """A scenario file that cannot be run as written; the message names the file, the line and the key."""

    def __init__(self, source: str, line: int | None, key: str, problem: str) -> None:
        self.source, self.line, self.key, self.problem = source, line, key, problem
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {key}: {problem}" if key else f"{where}: {problem}")


@dataclass(frozen=True)
class Step:
    """One timed action, as the lab carries it out: ``at`` seconds after the members started."""

    at: float
    action: ActionKind
    consumer: str = ""
    seconds: float = 0.0  # pause: how long

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", ActionKind(self.action))


@dataclass(frozen=True)
class Action:
    """One ``[[actions]]`` entry as written (before expansion)."""

    at: float | str  # seconds, or "15%"
    kind: ActionKind
    member: str = ""
    until: float | str | None = None
    count: int | str = 1
    seconds: float = 0.0
    line: int | None = None  # where it is written, for errors found when it is expanded


@dataclass(frozen=True)
class Scenario:
    """A whole run. Unset settings keep the lab's defaults (``None``)."""

    name: str
    description: str = ""
    source: str = "<scenario>"
    duration: float | None = None
    members: int | None = None
    rate: float | None = None
    initial_records: int | None = None
    session_timeout_ms: int | None = None
    commit_interval_ms: int | None = None
    strategy: str | None = None
    topics: dict[str, int] = field(default_factory=dict)
    actions: tuple[Action, ...] = ()
    #: a member action on a member not running by then is an error (a user's file); the built-in workloads are
    #: written for three members and adapt to fewer: such a step is skipped by the lab, which says so
    strict: bool = True

    def steps(self, duration: float, members: int, topics: Mapping[str, int]) -> list[Step]:
        """The actions as timed steps for a run of ``duration`` seconds that starts ``members`` members (c1..cN)
        on ``topics``, in time order (the file's order among equal times)."""
        return expand(self.actions, duration, members, topics, self.source, self.strict)


# ---------------------------------------------------------------------------------------------- reading
_TOP = {"name": str, "description": str, "duration": (int, float), "members": int, "rate": (int, float),
        "initial_records": int, "session_timeout_ms": int, "commit_interval_ms": int, "strategy": str,
        "topics": dict, "actions": list}
_ACTION_KEYS = {"at", "do", "member", "until", "count", "seconds"}
_STRATEGIES = ("range", "roundrobin", "roundrobin-relaxed")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def builtin(name: str) -> Scenario:
    """A scenario shipped in the package (zkconsumer/lab/scenarios/NAME.toml)."""
    files = resources.files("zkconsumer.lab") / "scenarios"
    path = files / f"{name}.toml"
    if not path.is_file():
        raise ScenarioError(f"{name}.toml", None, "", f"no built-in scenario {name!r}; built in: "
                                                      f"{', '.join(builtin_names()) or 'none in this installation'}")
    return dataclasses.replace(loads(path.read_text(), f"scenarios/{name}.toml"), strict=False)


def builtin_names() -> list[str]:
    """The shipped scenarios' names; none where the package came without its data (a zip of .py files only): the
    CLI, which lists them in its help, must still start there."""
    files = resources.files("zkconsumer.lab") / "scenarios"
    if not files.is_dir():
        return []
    return sorted(p.name.removesuffix(".toml") for p in files.iterdir() if p.name.endswith(".toml"))


def load(path: str | Path) -> Scenario:
    """Read a scenario file; any problem is one :class:`ScenarioError` naming the file, line and key."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ScenarioError(str(path), None, "", f"cannot read it: {e.strerror or e}") from None
    return loads(text, str(path))


def loads(text: str, source: str = "<scenario>") -> Scenario:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = getattr(e, "lineno", None) or _line_of_decode_error(str(e), text)
        problem = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)$", "", getattr(e, "msg", None) or str(e))
        raise ScenarioError(source, line, "", f"not valid TOML: {problem}") from None
    where = _Locator(text, source)
    for key, value in data.items():
        if key not in _TOP:
            where.fail((key,), f"unknown key; expected one of: {', '.join(_TOP)}")
        if not isinstance(value, _TOP[key]) or isinstance(value, bool):
            where.fail((key,), f"expected {_type_name(_TOP[key])}, got {value!r}")
    name = data.get("name") or Path(source).stem
    duration = data.get("duration")
    if duration is not None and duration <= 0:
        where.fail(("duration",), "must be > 0 seconds")
    members = data.get("members")
    if members is not None and members < 1:
        where.fail(("members",), "must be at least 1")
    for key in ("rate",):
        if key in data and data[key] < 0:
            where.fail((key,), "must be >= 0")
    for key in ("initial_records", "session_timeout_ms", "commit_interval_ms"):
        if key in data and data[key] < (0 if key == "initial_records" else 1):
            where.fail((key,), "must be positive")
    strategy = data.get("strategy")
    if strategy is not None and strategy not in _STRATEGIES:
        where.fail(("strategy",), f"unknown strategy {strategy!r}; one of: {', '.join(_STRATEGIES)}")
    topics = {}
    for topic, n in (data.get("topics") or {}).items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            where.fail(("topics", topic), f"partitions must be an integer >= 1, got {n!r}")
        topics[topic] = n
    actions = tuple(_action(where, i, a) for i, a in enumerate(data.get("actions") or []))
    return Scenario(name=name, description=data.get("description", ""), source=source,
                    duration=float(duration) if duration is not None else None, members=members,
                    rate=float(data["rate"]) if "rate" in data else None,
                    initial_records=data.get("initial_records"), session_timeout_ms=data.get("session_timeout_ms"),
                    commit_interval_ms=data.get("commit_interval_ms"), strategy=strategy, topics=topics,
                    actions=actions)


def _action(where: _Locator, i: int, raw: Any) -> Action:
    if not isinstance(raw, dict):
        where.fail(("actions", i), "each action is a table: [[actions]] with at = ..., do = ...")
    for key in raw:
        if key not in _ACTION_KEYS:
            where.fail(("actions", i, key), f"unknown key; an action has: {', '.join(sorted(_ACTION_KEYS))}")
    for key in ("at", "do"):
        if key not in raw:
            where.fail(("actions", i, key), "missing")
    try:
        kind = ActionKind(raw["do"])
    except ValueError:
        where.fail(("actions", i, "do"), f"unknown action {raw['do']!r}; one of: "
                                         f"{', '.join(k.value for k in ActionKind)}")
    at = _time(where, ("actions", i, "at"), raw["at"])
    until = _time(where, ("actions", i, "until"), raw["until"]) if "until" in raw else None
    member = raw.get("member", "")
    if not isinstance(member, str):
        where.fail(("actions", i, "member"), f"expected a member name, {NEW!r} or {EACH!r}, got {member!r}")
    if kind.on_member and not member:
        where.fail(("actions", i, "member"), f"'{kind}' needs a member (a name, {NEW!r} or {EACH!r})")
    if not kind.on_member and member:
        where.fail(("actions", i, "member"), f"'{kind}' acts on the whole group, not on a member")
    if member == NEW and kind is not ActionKind.JOIN:
        where.fail(("actions", i, "member"), f"{NEW!r} names the next member to join: only with do = 'join'")
    if member == EACH and kind is ActionKind.JOIN:
        where.fail(("actions", i, "member"), f"{EACH!r} names the members started at the beginning, which have "
                                             "joined already; use 'new' with count")
    count = raw.get("count", 1)
    if count != TO_PARTITIONS and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        where.fail(("actions", i, "count"), f"expected a number >= 1 or {TO_PARTITIONS!r}, got {count!r}")
    if count != 1 and member != NEW:
        where.fail(("actions", i, "count"), "repeats a join of new members only (member = 'new')")
    if until is not None and member != EACH and count == 1:
        where.fail(("actions", i, "until"), "spreads repeated actions (member = 'each', or count); here there is "
                                            "one")
    seconds = raw.get("seconds", 0)
    if kind is ActionKind.PAUSE:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            where.fail(("actions", i, "seconds"), f"a pause lasts a number of seconds > 0, got {seconds!r}")
    elif "seconds" in raw:
        where.fail(("actions", i, "seconds"), f"only a pause has seconds, not '{kind}'")
    return Action(at=at, kind=kind, member=member, until=until, count=count, seconds=float(seconds),
                  line=where.line(("actions", i)))


def _time(where: _Locator, key: tuple, value: Any) -> float | str:
    if isinstance(value, bool):
        where.fail(key, f"expected seconds or a share such as '15%', got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            where.fail(key, "must be >= 0 seconds")
        return float(value)
    if isinstance(value, str):
        m = _PERCENT.match(value)
        if m and float(m.group(1)) <= 100:
            return f"{float(m.group(1))}%"
    where.fail(key, f"expected seconds (a number) or a share of the run such as '15%', got {value!r}")
    raise AssertionError  # unreachable: fail raises


# ------------------------------------------------------------------------------------------- expanding
def expand(actions: Iterable[Action], duration: float, members: int, topics: Mapping[str, int],
           source: str = "<scenario>", strict: bool = True) -> list[Step]:
    """Resolve shares of the run, ``new``, ``each`` and ``count`` into steps, sorted by time (stable; ``new``
    numbers the joins in the file's order). A member action on a name not running by then (not started at the
    beginning, not joined before) is an error: the lab would otherwise skip it without a word."""
    actions = list(actions)
    timed: list[tuple[Step, int]] = []
    next_member = members + 1
    for i, action in enumerate(actions):
        start = _seconds(action.at, duration)
        end = _seconds(action.until, duration) if action.until is not None else None
        if action.member == EACH:
            names = [f"c{n}" for n in range(1, members + 1)]
        elif action.member == NEW:
            n = max(0, max(topics.values(), default=0) - (next_member - 1)) if action.count == TO_PARTITIONS \
                else int(action.count)
            names = [f"c{next_member + k}" for k in range(n)]
            next_member += n
        else:
            names = [action.member]
        span = (end - start) if end is not None else 0.0
        for k, name in enumerate(names):
            at = start + span * k / max(1, len(names))
            timed.append((Step(at, action.kind, name, action.seconds), i))
    timed.sort(key=lambda pair: pair[0].at)
    known = _first(members)
    for step, i in timed:
        if step.action is ActionKind.JOIN:
            known.add(step.consumer)
        elif strict and step.action.on_member and step.consumer not in known:
            raise ScenarioError(source, actions[i].line, f"actions[{i}].member",
                                f"{step.consumer!r} is not running at {step.at:.1f} s: the run starts "
                                f"c1..c{members} and joins {', '.join(sorted(known - _first(members))) or 'nobody'}"
                                " before then")
    return [step for step, _ in timed]


def _first(members: int) -> set[str]:
    return {f"c{n}" for n in range(1, members + 1)}


def _seconds(value: float | str, duration: float) -> float:
    if isinstance(value, str):
        return duration * float(value.rstrip("%")) / 100.0
    return float(value)


# ------------------------------------------------------------------------------------- error locations
def _type_name(t: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", dict: "a table", list: "an array of tables"}
    types = t if isinstance(t, tuple) else (t,)
    return names[float] if float in types else names[types[0]]


def _line_of_decode_error(message: str, text: str) -> int | None:
    """tomllib before Python 3.14 says where only in its message: "(at line 3, column 5)" or "(at end of
    document)"."""
    m = re.search(r"line (\d+)", message)
    if m:
        return int(m.group(1))
    return max(1, len(text.splitlines())) if "end of document" in message else None


class _Locator:
    """Finds the line of a key in the file's text (tomllib keeps none): top-level keys, ``[table]`` keys and keys
    of the n-th ``[[array]]`` table; a missing key points at its table's header."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"']+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"']+)\s*=")

    def __init__(self, text: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source

    def fail(self, key: tuple, problem: str):  # noqa: ANN201 - never returns
        raise ScenarioError(self.source, self.line(key), self._name(key), problem)

    @staticmethod
    def _name(key: tuple) -> str:
        out = ""
        for part in key:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
        return out

    def line(self, key: tuple) -> int | None:
        table: str | None = None  # None: top level
        seen: dict[str, int] = {}
        header_line: dict[tuple[str, int], int] = {}
        found: dict[tuple[str | None, int, str], int] = {}
        for number, text in enumerate(self.lines, start=1):
            m = self._HEADER.match(text)
            if m:
                table = m.group(2).strip("\"'")
                seen[table] = seen.get(table, -1) + 1 if m.group(1) == "[[" else 0
                header_line[(table, seen[table])] = number
                continue
            k = self._KEY.match(text)
            if k:
                found.setdefault((table, seen.get(table, 0) if table else 0, k.group(1).strip("\"'")), number)
        if len(key) == 1:
            return found.get((None, 0, key[0])) or header_line.get((key[0], 0))
        table_name, rest = key[0], key[1:]
        index = rest[0] if isinstance(rest[0], int) else 0
        leaf = rest[-1] if not isinstance(rest[-1], int) else None
        if leaf is not None and (line := found.get((table_name, index, leaf))):
            return line
        return header_line.get((table_name, index)) or found.get((None, 0, table_name))
