"""One scripted conversation with a group coordinator, request by request, to hold two coordinators side by side.

Real clients retry, back off and hide the coordinator's answers. To compare zkconsumer's coordinator with Kafka's
own (3.9's ``GroupCoordinator``), :func:`run_script` sends exactly the same requests at exactly the same versions
to a broker and writes down what came back: the error's name, the generation, who leads, the members, the
assignment, the group's state. Member ids are random on both sides, so each observation names members by the
alias the script gave them (``a``, ``b``, ``c``). Two transcripts of the same script are then equal line by line,
or the difference is a fact about the two coordinators (docs/coordinator.md lists the ones that remain).

The script covers the classic protocol's paths:

* a dynamic member's two-step join (MEMBER_ID_REQUIRED, KIP-394);
* the first generation after the initial rebalance delay, and SyncGroup from the leader;
* Heartbeat, OffsetCommit and SyncGroup with a stale generation or an unknown member;
* a second member joining: REBALANCE_IN_PROGRESS, then both rejoin;
* a follower syncing before the leader, and the leader leaving;
* a static member (``group.instance.id``, KIP-345) joining, then restarting with a new member id and being handed
  its assignment without a rebalance, the old member id fenced (FENCED_INSTANCE_ID);
* a member that stops heartbeating and is expired after its session timeout;
* DescribeGroups and OffsetFetch.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field

from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from zkconsumer.broker.client import RawClient
from zkconsumer.errors import KafkaCode, OperationTimedOut, code_name

#: The versions the script speaks: the newest both coordinators answer (zkconsumer's: JoinGroup ≤ 7, SyncGroup ≤ 5,
#: Heartbeat ≤ 4, LeaveGroup ≤ 4, DescribeGroups ≤ 5), and old enough that the answers carry no field only one
#: side fills in.
V_FIND, V_JOIN, V_SYNC, V_HEARTBEAT, V_LEAVE, V_COMMIT, V_FETCH, V_DESCRIBE = 1, 5, 3, 3, 3, 7, 5, 4


def subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: Kafka's coordinator parses it for a ``consumer`` group."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(parts: dict[str, Sequence[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(parts))
    for t, ps in sorted(parts.items()):
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps)) + b"".join(
            struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


@dataclass(frozen=True)
class Observation:
    """One answer, with member ids replaced by the script's aliases."""

    step: str
    api: str
    error: str
    generation: int | None = None
    detail: tuple = ()

    def line(self) -> str:
        gen = "" if self.generation is None else f" gen={self.generation}"
        detail = "".join(f" {k}={v}" for k, v in self.detail)
        return f"{self.step:<34} {self.api:<14} {self.error}{gen}{detail}"


@dataclass
class _Member:
    alias: str
    client: RawClient
    instance_id: str | None = None
    member_id: str = ""
    generation: int = -1


@dataclass
class Transcript:
    observations: list[Observation] = field(default_factory=list)
    #: member id → the script's alias, known once the script is over (a member's id may show up in another
    #: member's answer before its own answer tells which alias it is)
    aliases: dict[str, str] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [self._resolve(o.line()) for o in self.observations]

    def _resolve(self, line: str) -> str:
        for member_id, alias in sorted(self.aliases.items(), key=lambda kv: -len(kv[0])):
            line = line.replace(f"<{member_id}>", alias)
        line = re.sub(r"<[^<>]*>", "?", line)
        # member lists in the coordinator's own order (a hash map's, in Kafka): compared as sets
        return re.sub(r"members=(\S+)", lambda m: "members=" + ",".join(sorted(m.group(1).split(","))), line)


class _Run:
    def __init__(self, bootstrap: str, group: str, topic: str, session_timeout_ms: int,
                 stack: ExitStack) -> None:
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.session_timeout_ms = session_timeout_ms
        self.stack = stack
        self.members: dict[str, _Member] = {}
        self.out = Transcript()
        self._pending: dict[str, object] = {}

    # ---------------------------------------------------------------------------------------------- helpers
    def member(self, alias: str, instance_id: str | None = None) -> _Member:
        if alias not in self.members:
            client = self.stack.enter_context(RawClient.to(self.bootstrap, timeout=60.0, client_id=f"script-{alias}"))
            self.members[alias] = _Member(alias, client, instance_id)
        return self.members[alias]

    def alias_of(self, member_id: str) -> str:
        """A placeholder the transcript resolves to the member's alias at the end (``''``: no member id)."""
        return f"<{member_id}>" if member_id else "''"

    def learn(self, m: _Member) -> None:
        if m.member_id:
            self.out.aliases[m.member_id] = m.alias

    def note(self, step: str, api: str, error: int, generation: int | None = None, **detail: object) -> None:
        self.out.observations.append(Observation(step, api, code_name(error), generation,
                                                 tuple(sorted(detail.items()))))

    # ------------------------------------------------------------------------------------------- requests
    def find_coordinator(self, step: str, alias: str, timeout: float = 60.0) -> None:
        """FindCoordinator until it answers, then a probe until the coordinator has loaded the group's partition
        of ``__consumer_offsets`` (Kafka creates the topic on the first FindCoordinator, then loads it)."""
        m = self.members[alias]
        deadline = time.monotonic() + timeout
        while True:
            r = m.client.call(FindCoordinatorRequest(key=self.group), V_FIND)
            if r.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.note(step, "FindCoordinator", r.error_code)
        loading = (KafkaCode.COORDINATOR_LOAD_IN_PROGRESS, KafkaCode.COORDINATOR_NOT_AVAILABLE,
                   KafkaCode.NOT_COORDINATOR)
        while time.monotonic() < deadline:  # a probe nobody is asked about: an unknown member's heartbeat
            probe = m.client.call(HeartbeatRequest(group_id=self.group, generation_id=-1, member_id="probe"),
                                  V_HEARTBEAT)
            if probe.error_code not in loading:
                return
            time.sleep(0.2)

    def join_request(self, m: _Member) -> JoinGroupRequest:
        protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription([self.topic]))
        return JoinGroupRequest(group_id=self.group, session_timeout_ms=self.session_timeout_ms,
                                rebalance_timeout_ms=30000, member_id=m.member_id, group_instance_id=m.instance_id,
                                protocol_type="consumer", protocols=[protocol])

    def send_join(self, alias: str) -> None:
        m = self.members[alias]
        request = self.join_request(m)
        m.client.send(request, V_JOIN)
        self._pending[alias] = request

    def receive_join(self, step: str, alias: str) -> int:
        m = self.members[alias]
        r = m.client.receive(self._pending.pop(alias), V_JOIN)
        if r.member_id:
            m.member_id = r.member_id
            self.learn(m)
        if r.error_code == 0:
            m.generation = r.generation_id
        members = sorted(self.alias_of(x.member_id) for x in r.members)
        self.note(step, "JoinGroup", r.error_code, r.generation_id if r.error_code == 0 else None,
                  leader=self.alias_of(r.leader) if r.error_code == 0 else "-", members=",".join(members) or "-",
                  protocol=r.protocol_name or "-")
        return r.error_code

    def join(self, step: str, alias: str) -> int:
        self.send_join(alias)
        return self.receive_join(step, alias)

    def send_sync(self, alias: str, assignments: dict[str, dict[str, Sequence[int]]] | None = None,
                  generation: int | None = None) -> None:
        m = self.members[alias]
        items = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=self.members[a].member_id,
                                                             assignment=assignment(p))
                 for a, p in sorted((assignments or {}).items())]
        request = SyncGroupRequest(group_id=self.group, generation_id=m.generation if generation is None
                                   else generation, member_id=m.member_id, group_instance_id=m.instance_id,
                                   assignments=items)
        m.client.send(request, V_SYNC)
        self._pending[alias] = request

    def receive_sync(self, step: str, alias: str) -> int:
        m = self.members[alias]
        r = m.client.receive(self._pending.pop(alias), V_SYNC)
        self.note(step, "SyncGroup", r.error_code, assignment=_parts(r.assignment) if r.error_code == 0 else "-")
        return r.error_code

    def sync(self, step: str, alias: str, assignments=None, generation: int | None = None) -> int:
        self.send_sync(alias, assignments, generation)
        return self.receive_sync(step, alias)

    def heartbeat(self, step: str, alias: str, generation: int | None = None, member_id: str | None = None) -> int:
        m = self.members[alias]
        r = m.client.call(HeartbeatRequest(group_id=self.group, generation_id=m.generation if generation is None
                                           else generation, member_id=m.member_id if member_id is None
                                           else member_id, group_instance_id=m.instance_id), V_HEARTBEAT)
        self.note(step, "Heartbeat", r.error_code)
        return r.error_code

    def commit(self, step: str, alias: str, offset: int, generation: int | None = None,
               member_id: str | None = None) -> int:
        m = self.members[alias]
        topic = OffsetCommitRequest.OffsetCommitRequestTopic
        part = topic.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                  committed_metadata="")
        r = m.client.call(OffsetCommitRequest(
            group_id=self.group, generation_id_or_member_epoch=m.generation if generation is None else generation,
            member_id=m.member_id if member_id is None else member_id, group_instance_id=m.instance_id,
            topics=[topic(name=self.topic, partitions=[part])]), V_COMMIT)
        error = r.topics[0].partitions[0].error_code
        self.note(step, "OffsetCommit", error)
        return error

    def fetch_offsets(self, step: str, alias: str) -> None:
        m = self.members[alias]
        topic = OffsetFetchRequest.OffsetFetchRequestTopic(name=self.topic, partition_indexes=[0, 1])
        r = m.client.call(OffsetFetchRequest(group_id=self.group, topics=[topic]), V_FETCH)
        offsets = ",".join(str(p.committed_offset) for t in r.topics for p in t.partitions) or "-"
        self.note(step, "OffsetFetch", r.error_code, offsets=offsets)

    def leave(self, step: str, alias: str) -> int:
        m = self.members[alias]
        who = LeaveGroupRequest.MemberIdentity(member_id=m.member_id, group_instance_id=m.instance_id)
        r = m.client.call(LeaveGroupRequest(group_id=self.group, members=[who]), V_LEAVE)
        self.note(step, "LeaveGroup", r.error_code,
                  member_errors=",".join(code_name(x.error_code) for x in r.members) or "-")
        return r.error_code

    def await_state(self, alias: str, state: str, timeout: float = 30.0) -> None:
        """Until DescribeGroups says the group is in ``state`` (a parked join has started a rebalance); not
        written down, it only orders the next request after the coordinator's change."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.members[alias].client.call(DescribeGroupsRequest(groups=[self.group]), V_DESCRIBE)
            if r.groups and r.groups[0].group_state == state:
                return
            time.sleep(0.02)
        raise OperationTimedOut(f"group {self.group} did not reach {state} within {timeout:.0f}s")

    def describe(self, step: str, alias: str) -> None:
        r = self.members[alias].client.call(DescribeGroupsRequest(groups=[self.group]), V_DESCRIBE)
        g = r.groups[0]
        members = ",".join(sorted(self.alias_of(x.member_id) + (f"({x.group_instance_id})" if x.group_instance_id
                                                                   else "") for x in g.members)) or "-"
        self.note(step, "DescribeGroups", g.error_code, state=g.group_state, protocol=g.protocol_data or "-",
                  members=members)


def _parts(raw: bytes | None) -> str:
    """ConsumerProtocolAssignment v0 → ``t:0+1`` (what the leader sent, as the member got it back)."""
    if not raw:
        return "none"
    pos = 2
    (n,) = struct.unpack_from(">i", raw, pos)
    pos += 4
    out = []
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", raw, pos)
        pos += 2
        t = raw[pos:pos + ln].decode()
        pos += ln
        (k,) = struct.unpack_from(">i", raw, pos)
        pos += 4
        ps = struct.unpack_from(f">{k}i", raw, pos)
        pos += 4 * k
        out.append(f"{t}:{'+'.join(map(str, ps))}")
    return ";".join(out) or "none"


def run_script(bootstrap: str, group: str, topic: str, session_timeout_ms: int = 6000,
               wait: Callable[[float], None] = time.sleep) -> Transcript:
    """Run the script against the group coordinator at ``bootstrap`` (a one-broker cluster: that broker is every
    group's coordinator). ``topic`` must exist with at least two partitions. Takes the initial rebalance delay
    twice and one session timeout."""
    with ExitStack() as stack:
        s = _Run(bootstrap, group, topic, session_timeout_ms, stack)
        t = topic
        a, b = s.member("a"), s.member("b")
        s.find_coordinator("find the coordinator", "a")
        # a dynamic member's two-step join, then the first generation
        s.join("a joins without a member id", "a")
        s.join("a joins with its member id", "a")
        s.sync("a (leader) syncs", "a", {"a": {t: [0, 1]}})
        s.heartbeat("a heartbeats", "a")
        s.heartbeat("a heartbeats, stale generation", "a", generation=a.generation - 1)
        s.heartbeat("an unknown member heartbeats", "a", member_id="nobody")
        s.commit("a commits", "a", 10)
        s.commit("a commits, stale generation", "a", 11, generation=a.generation + 5)
        s.commit("an unknown member commits", "a", 12, member_id="nobody")
        s.sync("a syncs, stale generation", "a", {}, generation=a.generation + 5)
        # b joins: a learns of the rebalance through its heartbeat and rejoins; a stays leader
        s.join("b joins without a member id", "b")
        s.send_join("b")
        s.await_state("a", "PreparingRebalance")  # b's join is parked at the coordinator now
        s.heartbeat("a heartbeats during the rebalance", "a")
        s.send_join("a")
        s.receive_join("a rejoins", "a")
        s.receive_join("b's join completes", "b")
        s.send_sync("b")  # the follower first: parked until the leader's assignment
        s.sync("a (leader) syncs", "a", {"a": {t: [0]}, "b": {t: [1]}})
        s.receive_sync("b's sync completes", "b")
        s.commit("a commits, previous generation", "a", 13, generation=a.generation - 1)
        s.describe("describe a stable group", "a")
        # the leader leaves: b rejoins alone and leads
        s.leave("a leaves", "a")
        s.heartbeat("b heartbeats after a left", "b")
        s.join("b rejoins", "b")
        s.sync("b (leader) syncs", "b", {"b": {t: [0, 1]}})
        # a static member joins: one step, a rebalance
        c = s.member("c", instance_id="c-static")
        s.send_join("c")
        s.await_state("b", "PreparingRebalance")
        s.heartbeat("b heartbeats while c joins", "b")
        s.send_join("b")
        s.receive_join("b rejoins for c", "b")
        s.receive_join("c (static) joins", "c")
        s.send_sync("c")
        s.sync("b (leader) syncs", "b", {"b": {t: [0]}, "c": {t: [1]}})
        s.receive_sync("c's sync completes", "c")
        # c restarts: same instance id, no member id: the coordinator hands it its assignment, no rebalance
        old_c = c.member_id
        c.member_id = ""
        s.join("c restarts (same instance id)", "c")
        s.sync("c syncs after restarting", "c")
        s.heartbeat("c's old member id heartbeats", "c", member_id=old_c)
        s.heartbeat("b heartbeats after c restarted", "b")
        s.describe("describe after the restart", "b")
        # b stops heartbeating: expired after its session timeout; c learns of it and rejoins alone
        deadline = time.monotonic() + session_timeout_ms / 1000.0 * 3
        error = 0
        while time.monotonic() < deadline:
            wait(1.0)
            error = s.members["c"].client.call(HeartbeatRequest(
                group_id=group, generation_id=c.generation, member_id=c.member_id,
                group_instance_id=c.instance_id), V_HEARTBEAT).error_code
            if error:
                break
        s.note("c heartbeats until b expires", "Heartbeat", error)
        s.join("c rejoins alone", "c")
        s.sync("c (leader) syncs", "c", {"c": {t: [0, 1]}})
        s.heartbeat("b heartbeats after expiring", "b")
        s.fetch_offsets("fetch the committed offsets", "c")
        s.leave("c leaves", "c")
        s.describe("describe the empty group", "c")
        del b
        return s.out
