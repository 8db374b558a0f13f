"""ZooKeeper's data tree and watch tables (``DataTree``, ``WatchManager``), pure: nodes with their stat, and the
one-shot watches a change triggers.

Two facts of the real server that a naive tree gets wrong, both checked against a real server by
tests/test_sim_zookeeper_agreement.py:

- A node stores how many children were ever *created* under it (``creates``), and a create of a sequential node
  takes that count as its suffix. The ``cversion`` a client sees is ``2 * creates - numChildren``, which is
  the number of creates plus deletes (``DataNode.copyStat``: "translate from the count of the creates to the
  count of the changes"). So after create, delete, create the next sequential suffix is 2 while cversion is 3.
- Watches are sets per path: a session watching one path twice is notified once. A delete notifies a session
  that holds both a data and a child watch on the path once (``NodeDeleted``), then the parent's child watchers.

Mutations here apply at once and record how to undo themselves, so that a failed ``multi`` can be rolled back;
watch triggers are collected, not fired, until the server decides the transaction stands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from zkconsumer.sim.zk_codes import EventType


@dataclass(frozen=True)
class Stat:
    """The ``Stat`` a reply carries, field for field."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


@dataclass
class Node:
    """A stored node (``DataNode`` with its ``StatPersisted``)."""

    data: bytes
    czxid: int
    ctime: int
    ephemeral_owner: int = 0
    mzxid: int = 0
    mtime: int = 0
    pzxid: int = 0
    version: int = 0
    creates: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> Stat:
        return Stat(czxid=self.czxid, mzxid=self.mzxid, ctime=self.ctime, mtime=self.mtime, version=self.version,
                    cversion=2 * self.creates - len(self.children), aversion=0,
                    ephemeral_owner=self.ephemeral_owner, data_length=len(self.data),
                    num_children=len(self.children), pzxid=self.pzxid)


@dataclass(frozen=True)
class WatchEvent:
    """A watch notification, addressed to the session whose watch fired."""

    session_id: int
    type: EventType
    path: str


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def child_name(path: str) -> str:
    return path.rsplit("/", 1)[1]


@dataclass
class Change:
    """What one transaction did so far: how to undo it, and which watches it triggers if it stands."""

    undo: list[Callable[[], None]] = field(default_factory=list)
    triggers: list[tuple[EventType, str]] = field(default_factory=list)

    def rollback(self) -> None:
        for step in reversed(self.undo):
            step()
        self.undo.clear()
        self.triggers.clear()


class DataTree:
    """Nodes by absolute path, the ephemerals of each session, and the data and child watches."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {"/": Node(b"", czxid=0, ctime=0)}
        self.ephemerals: dict[int, set[str]] = {}
        self.data_watches: dict[str, set[int]] = {}
        self.child_watches: dict[str, set[int]] = {}

    # ------------------------------------------------------------------------------------------- mutations
    def create(self, change: Change, path: str, data: bytes, owner: int, zxid: int, now_ms: int) -> None:
        """Add a node (the caller checked the parent exists and the name is free); the parent's create count and
        pzxid move, and the node's data watchers and the parent's child watchers are due."""
        parent_path = parent_of(path)
        parent = self.nodes[parent_path]
        node = Node(data, czxid=zxid, ctime=now_ms, ephemeral_owner=owner, mzxid=zxid, mtime=now_ms, pzxid=zxid)
        before = (parent.creates, parent.pzxid)
        self.nodes[path] = node
        parent.children.add(child_name(path))
        parent.creates += 1
        parent.pzxid = zxid
        if owner:
            self.ephemerals.setdefault(owner, set()).add(path)

        def undo() -> None:
            del self.nodes[path]
            parent.children.discard(child_name(path))
            parent.creates, parent.pzxid = before
            if owner:
                self.ephemerals[owner].discard(path)

        change.undo.append(undo)
        change.triggers += [(EventType.NODE_CREATED, path), (EventType.NODE_CHILDREN_CHANGED, parent_path)]

    def delete(self, change: Change, path: str, zxid: int) -> None:
        """Remove a childless node; its parent's pzxid moves (not its create count)."""
        parent_path = parent_of(path)
        parent = self.nodes[parent_path]
        node = self.nodes.pop(path)
        before = parent.pzxid
        parent.children.discard(child_name(path))
        parent.pzxid = zxid
        if node.ephemeral_owner:
            self.ephemerals.get(node.ephemeral_owner, set()).discard(path)

        def undo() -> None:
            self.nodes[path] = node
            parent.children.add(child_name(path))
            parent.pzxid = before
            if node.ephemeral_owner:
                self.ephemerals.setdefault(node.ephemeral_owner, set()).add(path)

        change.undo.append(undo)
        change.triggers += [(EventType.NODE_DELETED, path), (EventType.NODE_CHILDREN_CHANGED, parent_path)]

    def set_data(self, change: Change, path: str, data: bytes, zxid: int, now_ms: int) -> None:
        node = self.nodes[path]
        before = (node.data, node.version, node.mzxid, node.mtime)
        node.data, node.version, node.mzxid, node.mtime = data, node.version + 1, zxid, now_ms

        def undo() -> None:
            node.data, node.version, node.mzxid, node.mtime = before

        change.undo.append(undo)
        change.triggers.append((EventType.NODE_DATA_CHANGED, path))

    # ------------------------------------------------------------------------------------------- watches
    def watch_data(self, session_id: int, path: str) -> None:
        self.data_watches.setdefault(path, set()).add(session_id)

    def watch_children(self, session_id: int, path: str) -> None:
        self.child_watches.setdefault(path, set()).add(session_id)

    def fire(self, triggers: list[tuple[EventType, str]],
             order: Callable[[set[int]], list[int]] = sorted) -> list[WatchEvent]:
        """The notifications a transaction's changes send, in ZooKeeper's order, each watch removed as it fires.

        Created and data-changed events go to the path's data watchers; children-changed to its child watchers;
        deleted to both, a session holding both notified once. ``order`` lists the sessions of one watch set (the
        server's iteration order over a hash set: free, so the caller may shuffle it)."""
        events: list[WatchEvent] = []
        for kind, path in triggers:
            if kind is EventType.NODE_CHILDREN_CHANGED:
                sessions = order(self.child_watches.pop(path, set()))
            elif kind is EventType.NODE_DELETED:
                data = order(self.data_watches.pop(path, set()))
                sessions = data + order(self.child_watches.pop(path, set()) - set(data))
            else:
                sessions = order(self.data_watches.pop(path, set()))
            events += [WatchEvent(s, kind, path) for s in sessions]
        return events

    def drop_watches(self, session_id: int) -> None:
        """Forget every watch of one session (its connection closed, or it expired)."""
        for table in (self.data_watches, self.child_watches):
            for path in [p for p, ids in table.items() if session_id in ids]:
                table[path].discard(session_id)
                if not table[path]:
                    del table[path]
