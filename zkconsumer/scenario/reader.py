"""Reading scenario files (TOML) into :class:`~zkconsumer.scenario.model.Scenario` objects, and the shipped ones.

Every problem is one :class:`~zkconsumer.scenario.model.ScenarioError` naming the file, the line and the key (tomllib
keeps no lines: :class:`_Locator` finds them in the text). The shipped scenarios (zkconsumer/scenario/shipped/) are
read the same way as a user's.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from zkconsumer.config import ConfigError, ConsumerConfig, property_kind, property_names
from zkconsumer.scenario.model import (
    EACH,
    FOLLOWER,
    LEADER,
    NEW,
    NODE_ACTIONS,
    OPTIONALLY_TIMED,
    TIMED,
    TO_PARTITIONS,
    TOPIC_NAME,
    ZOOKEEPER_NODES,
    Action,
    ActionKind,
    MemberKind,
    Scenario,
    ScenarioError,
    key_name,
)
from zkconsumer.zk.layout import LayoutError, whitelist

# ---------------------------------------------------------------------------------------------- reading
_TOP = {"name": str, "description": str, "duration": (int, float), "members": int, "rate": (int, float),
        "initial_records": int, "session_timeout_ms": int, "commit_interval_ms": int, "strategy": str,
        "topics": dict, "whitelist": str, "zookeeper_nodes": int, "actions": list, "properties": dict,
        "subscriptions": dict, "kinds": dict}
_ACTION_KEYS = {"at", "do", "member", "until", "count", "seconds", "node", "topic", "partitions", "latency_ms"}
_STRATEGIES = ("range", "roundrobin", "roundrobin-relaxed")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def builtin(name: str) -> Scenario:
    """A scenario shipped in the package (zkconsumer/scenario/shipped/NAME.toml)."""
    files = resources.files("zkconsumer.scenario") / "shipped"
    path = files / f"{name}.toml"
    if not path.is_file():
        raise ScenarioError(f"{name}.toml", None, "", f"no built-in scenario {name!r}; built in: "
                                                      f"{', '.join(builtin_names()) or 'none in this installation'}")
    return dataclasses.replace(loads(path.read_text(), f"scenarios/{name}.toml"), strict=False)


def builtin_names() -> list[str]:
    """The shipped scenarios' names; none where the package came without its data (a zip of .py files only): the
    CLI, which lists them in its help, must still start there."""
    files = resources.files("zkconsumer.scenario") / "shipped"
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
    nodes = data.get("zookeeper_nodes")
    if nodes is not None and nodes not in ZOOKEEPER_NODES:
        where.fail(("zookeeper_nodes",), f"an ensemble has an odd number of servers: one of "
                                         f"{', '.join(map(str, ZOOKEEPER_NODES))}, got {nodes!r}")
    raw_whitelist = data.get("whitelist")
    if raw_whitelist is not None:
        try:
            allows = whitelist(raw_whitelist).allows
        except LayoutError as e:
            where.fail(("whitelist",), str(e))
        for topic in topics:
            if not allows(topic):
                where.fail(("topics", topic), f"does not match the whitelist {raw_whitelist!r}: no member would "
                                              "consume it")
    raw_actions = data.get("actions") or []
    ensemble = nodes if nodes is not None else (
        3 if any(isinstance(a, dict) and a.get("do") in NODE_ACTIONS for a in raw_actions) else 1)
    actions = tuple(_action(where, i, a, ensemble, nodes is not None, raw_whitelist)
                    for i, a in enumerate(raw_actions))
    properties = _properties(where, data.get("properties") or {})
    subscriptions = _subscriptions(where, data.get("subscriptions") or {}, topics, raw_whitelist)
    kinds = _kinds(where, data.get("kinds") or {}, raw_whitelist)
    lines = {"subscriptions": where.line(("subscriptions",)),
             **{f"subscriptions.{m}": where.line(("subscriptions", m)) for m in subscriptions},
             **{f"kinds.{m}": where.line(("kinds", m)) for m in kinds}}
    return Scenario(name=name, description=data.get("description", ""), source=source,
                    duration=float(duration) if duration is not None else None, members=members,
                    rate=float(data["rate"]) if "rate" in data else None,
                    initial_records=data.get("initial_records"), session_timeout_ms=data.get("session_timeout_ms"),
                    commit_interval_ms=data.get("commit_interval_ms"), strategy=strategy, topics=topics,
                    whitelist=raw_whitelist, zookeeper_nodes=nodes, actions=actions, properties=properties,
                    subscriptions=subscriptions, kinds=kinds, lines=lines)


#: Properties the lab sets for each member itself, and what to write instead.
_SET_BY_THE_LAB = {
    "group.id": "the lab names the group", "consumer.id": "each member's id is its name",
    "zookeeper.connect": "the lab's ZooKeeper", "bootstrap.servers": "the lab's broker",
    "zkconsumer.trace.dir": "the run directory's traces/", "zkconsumer.profile": "--profile, or compare's variant",
    "group.instance.id": "compare's static variant, one per member", "partition.assignment.strategy": "use strategy",
    "zookeeper.session.timeout.ms": "use session_timeout_ms", "session.timeout.ms": "use session_timeout_ms",
    "auto.commit.interval.ms": "use commit_interval_ms",
    "auto.offset.reset": "smallest: the lab checks that every record produced is consumed",
}


def _properties(where: _Locator, raw: dict) -> dict[str, int | bool | str]:
    """``[properties]``: Kafka consumer properties by Kafka's names (config/properties.py knows them), each value of its
    property's type and accepted by the consumer's own checks (ConsumerConfig.validate)."""
    for name, value in raw.items():
        key = ("properties", name)
        kind = property_kind(name)
        if kind is None:
            close = difflib.get_close_matches(name, property_names(), n=1)
            where.fail(key, "not a consumer property" + (f"; did you mean {close[0]!r}?" if close else
                                                         " (docs/profiles.md lists them)"))
        if name in _SET_BY_THE_LAB:
            where.fail(key, f"set by the lab for each member ({_SET_BY_THE_LAB[name]})")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            where.fail(key, f"expected {_type_name(kind)}, got {value!r}")
    try:
        ConsumerConfig.from_properties({"group.id": "lab", **raw})
    except ConfigError as whole:  # the property to blame: the first one refused alone, else the table
        for name, value in raw.items():
            try:
                ConsumerConfig.from_properties({"group.id": "lab", name: value})
            except ConfigError as e:
                where.fail(("properties", name), str(e))
        where.fail(("properties",), str(whole))
    return dict(raw)


def _subscriptions(where: _Locator, raw: dict, topics: Mapping[str, int],
                   topic_filter: str | None) -> dict[str, tuple[str, ...]]:
    """``[subscriptions]``: a member's name and the topics of ``[topics]`` it consumes (the names are checked
    against the run's members when it is expanded: :meth:`Scenario.steps`)."""
    if raw and topic_filter is not None:
        where.fail(("subscriptions",), "the members subscribe by the whitelist regex here: a list of topics per "
                                       "member needs the topics named in [topics] and no whitelist")
    if raw and not topics:
        where.fail(("subscriptions",), "name the run's topics in [topics]: a subscription is a list of some of them")
    out = {}
    for name, value in raw.items():
        key = ("subscriptions", name)
        if name in (NEW, EACH):
            where.fail(key, f"a member's name such as 'c3' ({name!r} names no member by itself)")
        if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
            where.fail(key, f"expected an array of topic names (at least one), got {value!r}")
        for topic in value:
            if topic not in topics:
                where.fail(key, f"no topic {topic!r} in [topics] ({', '.join(topics)})")
        if len(set(value)) != len(value):
            where.fail(key, f"a topic named twice: {value!r}")
        out[name] = tuple(value)
    return out


def _kinds(where: _Locator, raw: dict, topic_filter: str | None) -> dict[str, MemberKind]:
    """``[kinds]``: a member's name and what it runs (the names are checked against the run's members when it is
    expanded: :meth:`Scenario.steps`)."""
    out = {}
    for name, value in raw.items():
        key = ("kinds", name)
        if name in (NEW, EACH):
            where.fail(key, f"a member's name such as 'c3' ({name!r} names no member by itself)")
        try:
            out[name] = MemberKind(value)
        except ValueError:
            where.fail(key, f"unknown kind {value!r}; one of: {', '.join(k.value for k in MemberKind)}")
        if out[name] is MemberKind.KAFKA_0822 and topic_filter is not None:
            where.fail(key, "Kafka 0.8.2.2's consumer names its topics as the lab runs it: not in a run whose "
                            "members subscribe by the whitelist")
    return out


def _action(where: _Locator, i: int, raw: Any, ensemble: int = 1, ensemble_set: bool = False,
            topic_filter: str | None = None) -> Action:
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
    if kind in TIMED or (kind in OPTIONALLY_TIMED and "seconds" in raw):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
            where.fail(("actions", i, "seconds"), f"'{kind}' lasts a number of seconds > 0, got {seconds!r}")
    elif "seconds" in raw:
        where.fail(("actions", i, "seconds"), f"only {_names(TIMED | OPTIONALLY_TIMED)} have seconds, not "
                                              f"'{kind}'")
    if kind.on_zookeeper_nodes and ensemble_set and ensemble == 1:
        where.fail(("actions", i, "do"), f"'{kind}' needs a ZooKeeper ensemble: this run has zookeeper_nodes = 1 "
                                         "(leave it out, or 3)")
    node = _node(where, i, kind, raw, ensemble)
    topic, partitions = _topic_change(where, i, kind, raw, topic_filter)
    latency = raw.get("latency_ms", 0)
    if kind in (ActionKind.SLOW_ZK, ActionKind.SLOW_BROKER):
        if isinstance(latency, bool) or not isinstance(latency, int | float) or latency <= 0:
            where.fail(("actions", i, "latency_ms"), f"a slowed link adds a number of milliseconds > 0, got "
                                                     f"{latency!r}")
    elif "latency_ms" in raw:
        where.fail(("actions", i, "latency_ms"), f"only 'slow-zk' and 'slow-broker' have latency_ms, not '{kind}'")
    return Action(at=at, kind=kind, member=member, until=until, count=count, seconds=float(seconds), node=node,
                  topic=topic, partitions=partitions, latency_ms=float(latency), line=where.line(("actions", i)))


def _names(kinds: Iterable[ActionKind]) -> str:
    ordered = [k for k in ActionKind if k in set(kinds)]
    return ", ".join(f"'{k}'" for k in ordered[:-1]) + f" and '{ordered[-1]}'" if len(ordered) > 1 else \
        f"'{ordered[0]}'"


def _node(where: _Locator, i: int, kind: ActionKind, raw: dict, ensemble: int) -> int | str | None:
    """``node`` of kill-zk (required: a server id or a role) and restart-zk (a server id; none: every node down)."""
    key = ("actions", i, "node")
    if kind not in (ActionKind.KILL_ZK, ActionKind.RESTART_ZK):
        if "node" in raw:
            where.fail(key, f"only 'kill-zk' and 'restart-zk' name a ZooKeeper node, not '{kind}'")
        return None
    if "node" not in raw:
        if kind is ActionKind.KILL_ZK:
            where.fail(key, f"'kill-zk' needs a node: 1..{ensemble}, {LEADER!r} or {FOLLOWER!r}")
        return None
    node = raw["node"]
    roles = (LEADER, FOLLOWER) if kind is ActionKind.KILL_ZK else ()
    if isinstance(node, str) and node in roles:
        return node
    if isinstance(node, bool) or not isinstance(node, int) or not 1 <= node <= ensemble:
        choices = f"1..{ensemble}" + (f", {LEADER!r} or {FOLLOWER!r}" if roles else
                                      " (a killed node is neither leader nor follower; leave node out to restart "
                                      "every node down)")
        where.fail(key, f"unknown node {node!r}: the ensemble's servers are {choices}")
    return node


def _topic_change(where: _Locator, i: int, kind: ActionKind, raw: dict, topic_filter: str | None) -> tuple[str, int]:
    """``topic`` and ``partitions`` of create-topic and add-partitions (both required there, refused elsewhere)."""
    if not kind.on_topics:
        for key in ("topic", "partitions"):
            if key in raw:
                where.fail(("actions", i, key), f"only 'create-topic' and 'add-partitions' have {key}, not '{kind}'")
        return "", 0
    for key in ("topic", "partitions"):
        if key not in raw:
            where.fail(("actions", i, key), "missing" + (": the new total" if kind is ActionKind.ADD_PARTITIONS and
                                                          key == "partitions" else ""))
    topic, partitions = raw["topic"], raw["partitions"]
    if not isinstance(topic, str) or not TOPIC_NAME.match(topic) or topic in (".", ".."):
        where.fail(("actions", i, "topic"), f"not a topic name (letters, digits, '.', '_', '-'): {topic!r}")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        where.fail(("actions", i, "partitions"), f"expected an integer >= 1, got {partitions!r}")
    if kind is ActionKind.CREATE_TOPIC:
        if topic_filter is None:
            where.fail(("actions", i, "do"), "a created topic is consumed only by members subscribed by a regex: "
                                             "set whitelist (top level) to one the new topic matches")
        if not whitelist(topic_filter).allows(topic):
            where.fail(("actions", i, "topic"), f"does not match the whitelist {topic_filter!r}: no member would "
                                                "consume it")
    return topic, partitions


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


# ------------------------------------------------------------------------------------------- expanding
def _type_name(t: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", dict: "a table", list: "an array of tables",
             bool: "a boolean (true or false)"}
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
    _KEY = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)\s*=")  # bare, or quoted (dots and all)

    def __init__(self, text: str, source: str) -> None:
        self.source = source
        self._found, self._headers = self._index(text.splitlines())

    def fail(self, key: tuple, problem: str) -> NoReturn:
        raise ScenarioError(self.source, self.line(key), self._name(key), problem)

    _name = staticmethod(key_name)

    @classmethod
    def _index(cls, lines: list[str]) -> tuple[dict[tuple[str | None, int, str], int], dict[tuple[str, int], int]]:
        """One pass over the file: the line of each key, by (table, n-th table of that name, key), and of each
        table header, by (table, n)."""
        table: str | None = None  # None: top level
        seen: dict[str, int] = {}
        headers: dict[tuple[str, int], int] = {}
        found: dict[tuple[str | None, int, str], int] = {}
        for number, text in enumerate(lines, start=1):
            m = cls._HEADER.match(text)
            if m:
                table = m.group(2).strip("\"'")
                seen[table] = seen.get(table, -1) + 1 if m.group(1) == "[[" else 0
                headers[(table, seen[table])] = number
                continue
            k = cls._KEY.match(text)
            if k:
                found.setdefault((table, seen.get(table, 0) if table else 0, k.group(1).strip("\"'")), number)
        return found, headers

    def line(self, key: tuple) -> int | None:
        found, headers = self._found, self._headers
        if len(key) == 1:
            return found.get((None, 0, key[0])) or headers.get((key[0], 0))
        table_name, rest = key[0], key[1:]
        index = rest[0] if isinstance(rest[0], int) else 0
        leaf = rest[-1] if not isinstance(rest[-1], int) else None
        if leaf is not None and (line := found.get((table_name, index, leaf))):
            return line
        return headers.get((table_name, index)) or found.get((None, 0, table_name))

