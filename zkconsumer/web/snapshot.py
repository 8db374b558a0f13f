"""What the live view shows, as plain data: one :class:`Snapshot` of a group, whoever produced it.

Three sources fill it (a ZooKeeper group read by watches, a coordinator group described through the broker, a lab
that runs the members), and one page draws it, so the page never knows where a group lives. Everything here is
pure (no I/O) and JSON-shaped (:meth:`Snapshot.to_json`): the server sends it as it is, over server-sent events.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class SourceKind(StrEnum):
    """Where the group lives, which decides the page's labels (owner nodes or assignments, ids or member ids)."""

    ZOOKEEPER = "zookeeper"
    COORDINATOR = "coordinator"
    LAB = "lab"


@dataclass(frozen=True)
class Status:
    """Whether the source can see its group now; ``message`` says what is wrong (and since when) when not ``ok``:
    the page shows it as a banner and keeps the last data it had."""

    ok: bool = True
    message: str = ""


@dataclass(frozen=True)
class GroupInfo:
    """The group's own fields: a coordinator group's state, protocol and generation (None where a ZooKeeper group
    has no such thing, or where they are not known); a watched coordinator group's ``leader`` (member id) and
    ``rebalanced_at`` (epoch ms of its last state change) come with the generation, and ``generation_note`` says
    where the generation comes from or why it is unknown."""

    id: str
    state: str | None = None
    protocol: str | None = None
    generation: int | None = None
    leader: str | None = None
    rebalanced_at: int | None = None
    generation_note: str = ""


@dataclass(frozen=True)
class Member:
    """A member: a ZooKeeper consumer id (``group_host-...``), a coordinator member id, or a lab member (``c1``).

    ``state``: ``registered`` (ZooKeeper), the coordinator's view, or a lab process state (``running``,
    ``paused``, ``stopped``, ``killed``); ``owned``: ``"topic-partition"`` names; ``actions``: the names of the
    :class:`Action` buttons this member takes now.

    The rest is what one kind of source has, empty ("" or None) where it has not, and the page shows a column
    only when some member fills it: ``client``, the client a lab member runs (``kafka-python``, a profile);
    ``client_id`` and ``host``, a coordinator member's as the coordinator has them; a 0.8 id's ``host``, the host
    part of an id Kafka generated (``<group>_<host>-<ms>-<uuid>``, none when ``consumer.id`` named it), and its
    registration's ``version``, ``pattern`` (``static``, ``white_list``, ``black_list``) and ``registered_at``
    (its ``timestamp``, epoch ms)."""

    id: str
    state: str = ""
    subscription: dict[str, int] = field(default_factory=dict)
    owned: list[str] = field(default_factory=list)
    client: str = ""
    actions: list[str] = field(default_factory=list)
    client_id: str | None = None
    host: str | None = None
    version: int | None = None
    pattern: str | None = None
    registered_at: int | None = None


@dataclass(frozen=True)
class PartitionRow:
    """One partition: its owner (a consumer thread id, a member id; None when no one owns it), committed offset,
    log end offset and lag (None where not known, e.g. a broker that does not answer)."""

    topic: str
    partition: int
    owner: str | None = None
    offset: int | None = None
    end: int | None = None
    lag: int | None = None


@dataclass(frozen=True)
class Change:
    """A partition changed hands at ``ts`` (epoch ms): ``owner`` None means it became unowned. The page draws the
    ownership timeline from these."""

    ts: int
    partition: str
    owner: str | None


@dataclass(frozen=True)
class Event:
    """A line in the page's event log: a rebalance (``rebalance``), a member's step or fault (``action``), the
    source itself (``source``: ZooKeeper lost or back)."""

    ts: int
    kind: str
    text: str


@dataclass(frozen=True)
class Action:
    """A button: ``name`` is what :meth:`LiveSource.act` takes; ``member`` True when it acts on one member."""

    name: str
    label: str
    member: bool = True


@dataclass(frozen=True)
class Snapshot:
    """The whole page's data at ``ts`` (epoch ms); ``since``: when the source began to keep its history (epoch
    ms; None: not said), the start of what ``changes`` and ``events`` can have seen."""

    title: str
    kind: SourceKind
    ts: int
    group: GroupInfo
    status: Status = Status()
    members: list[Member] = field(default_factory=list)
    partitions: list[PartitionRow] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    since: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class LiveSource(Protocol):
    """What the server serves: a snapshot whenever asked (cheap: the source keeps it current itself, from watches
    or a poll of its own) and, for a lab, actions. A source never raises from :meth:`snapshot`: it reports what is
    wrong in ``status`` and keeps the last data it had."""

    def snapshot(self) -> Snapshot: ...

    def act(self, action: str, member: str | None) -> str:
        """Carry out ``action`` (on ``member``) and say what was done; a source without actions, or an action it
        cannot take now, raises :class:`zkconsumer.errors.IllegalArgument` with the reason."""
        ...

    def close(self) -> None: ...
