"""What ``zkconsumer migrate`` checks on the coordinator before it calls a step done.

A step holds when the coordinator's own view of the group says so, not when the members say they switched:
DescribeGroups shows the group ``Stable``, every member the plan puts in coordinator mode is in it, no partition is
assigned to two members, and once the migration is done every partition of the subscribed topics is assigned to
exactly one member; and the committed offsets of partitions that have records waiting move within a bound (a group
can be Stable and consume nothing).

Only what the protocol makes a coordinator return is relied on (issue 38: a Kafka-compatible coordinator written
independently of Kafka answered DescribeGroups with ``member_id`` and the group's state, and ``client_id``,
``client_host``, ``member_metadata`` and ``member_assignment`` empty). So a member is found by its **member id**,
which every coordinator-mode member publishes in its acknowledgement under the plan node (with its generation and
the partitions the coordinator assigned it, :class:`ReportedMember`); the consumer id in the bridge's subscription
data, or the client id, identify only members that publish no member id (older members). Assignments are read from
DescribeGroups when it carries any, else from the members' acknowledgements (every reporting member on the same
generation); the verdict names the evidence (:class:`AssignmentEvidence`).

:func:`judge`, :func:`reported_member` and :func:`stalled_partitions` are pure; :func:`describe` and
:func:`committed` ask the cluster through kafka-python's admin client.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from zkconsumer.kafka_admin import AdminClient
from zkconsumer.types import tp_str

TP = tuple[str, int]


class AssignmentEvidence(StrEnum):
    """Where a verdict read the members' assignments from; its value is how the verdict says so."""

    #: DescribeGroups carried member assignments (Kafka's coordinator fills them; the protocol does not promise it).
    DESCRIBE_GROUPS = "from DescribeGroups"
    #: DescribeGroups carried none: the partitions each member says the coordinator assigned it, for the member id
    #: DescribeGroups lists.
    ACKNOWLEDGEMENTS = "from the members' acknowledgements"
    #: Neither: no assignment is known (older members publish none), so neither coverage nor double assignment
    #: could be judged.
    NONE = "none known"


@dataclass(frozen=True)
class DescribedMember:
    """One member as DescribeGroups reports it."""

    member_id: str
    client_id: str
    consumer_id: str | None  # from the zkconsumer bridge's subscription user data, when it carries one
    partitions: tuple[TP, ...] = ()

    @property
    def name(self) -> str:
        return self.consumer_id or self.client_id or self.member_id


@dataclass(frozen=True)
class DescribedGroup:
    state: str
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class ReportedMember:
    """What a coordinator-mode member says of itself in its acknowledgement ``/consumers/<g>/migration/<consumer
    id>``: the member id and generation of its last SyncGroup (None: it has not joined yet) and the partitions the
    coordinator assigned it then. The member id is what DescribeGroups must return, so it is what ties a
    DescribeGroups member to a consumer id."""

    consumer_id: str
    member_id: str | None
    generation: int | None = None
    partitions: tuple[TP, ...] = ()


def reported_member(consumer_id: str, ack: Mapping) -> ReportedMember | None:
    """The report in an acknowledgement's JSON; None when it carries no ``member_id`` key (a ZooKeeper-mode member,
    or an older member that does not publish one: identified by the old fields then)."""
    if "member_id" not in ack:
        return None
    member_id = ack.get("member_id")
    generation = ack.get("generation")
    tps: list[TP] = []
    raw = ack.get("partitions")
    if isinstance(raw, Mapping):
        for topic, parts in raw.items():
            tps += [(str(topic), int(p)) for p in parts or () if isinstance(p, int)]
    return ReportedMember(consumer_id, member_id if isinstance(member_id, str) and member_id else None,
                          generation if isinstance(generation, int) else None, tuple(sorted(tps)))


@dataclass(frozen=True)
class GroupCheck:
    """The verdict on one look at the group; ``problems`` name the member or partition and the reason."""

    state: str
    members: dict[str, list[str]]  # member name (its consumer id when known) → "topic-partition" list
    problems: list[str] = field(default_factory=list)
    evidence: AssignmentEvidence = AssignmentEvidence.NONE

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        said = f"assignments {self.evidence}"
        if self.ok:
            return f"coordinator: {self.state}, {len(self.members)} members, every check holds ({said})"
        return f"coordinator: {self.state}; " + "; ".join(self.problems) + f" ({said})"


def judge(group: DescribedGroup, expected: Iterable[str], partitions: Mapping[str, Iterable[int]] | None,
          reported: Iterable[ReportedMember] = ()) -> GroupCheck:
    """``expected``: the consumer ids that must be members; ``partitions``: topic → partitions that must each be
    assigned to exactly one member (None: no coverage check, as in the mixed phase, where the ZooKeeper half owns
    the rest); ``reported``: what the coordinator-mode members acknowledge (:class:`ReportedMember`)."""
    problems: list[str] = []
    expected = set(expected)
    if group.error:
        problems.append(f"DescribeGroups failed: {group.error}")
    # no member expected (every member moved so far is gone) and no coverage asked (mixed: ZooKeeper owns the rest):
    # a group without members is what the coordinator should show (found by zkconsumer sim --mode migrate: the first
    # member moved was stopped mid-step, and the step waited 60 s for an Empty group to be Stable, then rolled back)
    nobody = not expected and partitions is None and group.state in ("Empty", "Dead") and not group.members
    if group.state != "Stable" and not nobody:
        problems.append(f"the group is {group.state or 'unknown'}, not Stable")
    reports = {r.consumer_id: r for r in reported}
    by_member_id = {r.member_id: r for r in reports.values() if r.member_id}
    described_ids = {m.member_id for m in group.members}

    def name(m: DescribedMember) -> str:
        r = by_member_id.get(m.member_id)
        return r.consumer_id if r is not None else m.name

    old_names = {m.name for m in group.members}
    for cid in sorted(set(expected)):
        r = reports.get(cid)
        if r is None:  # an older member: no member id published, found by its bridge data or client id
            if cid not in old_names:
                problems.append(f"{cid} is not a member of the coordinator group")
        elif r.member_id is None:
            problems.append(f"{cid} is not a member of the coordinator group (it has not joined: no member id "
                            "in its acknowledgement)")
        elif r.member_id not in described_ids:
            problems.append(f"{cid} is not a member of the coordinator group (its member id {r.member_id} is not "
                            "in DescribeGroups)")
    assigned: dict[str, tuple[TP, ...]] = {name(m): () for m in group.members}
    if any(m.partitions for m in group.members):
        evidence = AssignmentEvidence.DESCRIBE_GROUPS
        assigned.update({name(m): m.partitions for m in group.members})
    elif any(m.member_id in by_member_id for m in group.members):
        evidence = AssignmentEvidence.ACKNOWLEDGEMENTS
        reporting = [by_member_id[m.member_id] for m in group.members if m.member_id in by_member_id]
        assigned.update({r.consumer_id: r.partitions for r in reporting})
        generations = {r.consumer_id: r.generation for r in reporting}
        if len(set(generations.values())) > 1:
            shown = ", ".join(f"{cid} {g}" for cid, g in sorted(generations.items()))
            problems.append(f"the members acknowledge different generations ({shown}): not every one has its "
                            "assignment of the current generation yet")
        unknown = sorted(m.member_id for m in group.members if m.member_id not in by_member_id)
        if unknown:
            problems.append(f"the assignment of {len(unknown)} members is unknown (DescribeGroups returned none and "
                            f"they acknowledge none): {', '.join(unknown)}")
    else:
        evidence = AssignmentEvidence.NONE
        if partitions is not None and group.members:
            problems.append("no member's assignment is known: DescribeGroups returned none and no member "
                            "acknowledges its own")
    holders: dict[TP, list[str]] = {}
    for who, tps in assigned.items():
        for tp in tps:
            holders.setdefault(tp, []).append(who)
    for (t, p), who in sorted(holders.items()):
        if len(who) > 1:
            problems.append(f"{t}-{p} is assigned to {len(who)} members ({', '.join(sorted(who))})")
    if partitions is not None and evidence is not AssignmentEvidence.NONE:
        missing = [f"{t}-{p}" for t, ps in sorted(partitions.items()) for p in sorted(ps) if (t, p) not in holders]
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            problems.append(f"{len(missing)} partitions are assigned to nobody: {shown}")
    members = {who: [tp_str(tp) for tp in sorted(tps)] for who, tps in assigned.items()}
    return GroupCheck(group.state, members, problems, evidence)


def stalled_partitions(before: Mapping[TP, int], after: Mapping[TP, int], log_ends: Mapping[TP, int]) -> list[TP]:
    """Partitions that had records waiting when the look began (committed < log end; never committed counts as 0)
    and whose committed offset did not move by the end of it."""
    stalled = []
    for tp, end in sorted(log_ends.items()):
        start = before.get(tp, -1)
        if end > max(start, 0) and after.get(tp, -1) <= start:
            stalled.append(tp)
    return stalled


# ------------------------------------------------------------------------------------------------------ I/O
#: How long one look at the coordinator may take (connecting included) before it counts as a failed check.
TIMEOUT_MS = 5000


def _admin(bootstrap: str, api_version: tuple[int, ...] | None):
    extra = {"api_version": api_version} if api_version else {}
    return AdminClient(bootstrap_servers=bootstrap, client_id="zkconsumer-migrate", request_timeout_ms=TIMEOUT_MS,
                       bootstrap_timeout_ms=TIMEOUT_MS, **extra)


def _field(obj, name: str):
    """kafka-python hands DescribeGroups' decoded structs back as dicts (``to_dict``) or as objects."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _consumer_id(metadata) -> str | None:
    user = _field(metadata, "user_data") if metadata is not None else None
    if not user:
        return None
    try:
        value = json.loads(user if isinstance(user, str) else bytes(user)).get("consumer")
    except (ValueError, AttributeError, TypeError):
        return None
    return value if isinstance(value, str) else None


def _partitions(assignment) -> list[TP]:
    tps: list[TP] = []
    for entry in (_field(assignment, "assigned_partitions") if assignment is not None else None) or ():
        if isinstance(entry, tuple | list):
            topic, parts = entry
        else:
            topic, parts = _field(entry, "topic"), _field(entry, "partitions")
        tps += [(str(topic), int(p)) for p in parts or ()]
    return tps


def describe(bootstrap: str, group: str, api_version: tuple[int, ...] | None = None) -> DescribedGroup:
    """DescribeGroups through the group's coordinator; an unreachable cluster is a described error, not a raise."""
    try:
        admin = _admin(bootstrap, api_version)
    except Exception as e:  # noqa: BLE001 - said in the verdict
        return DescribedGroup("unknown", error=f"cannot reach {bootstrap}: {e}")
    try:
        found = admin.describe_groups([group]).get(group)
    except Exception as e:  # noqa: BLE001 - said in the verdict
        return DescribedGroup("unknown", error=str(e))
    finally:
        admin.close()
    if not found:
        return DescribedGroup("Dead", error="the coordinator does not know the group")
    members = []
    for m in found.get("members") or ():
        members.append(DescribedMember(m.get("member_id", ""), m.get("client_id", ""),
                                       _consumer_id(m.get("member_metadata")),
                                       tuple(sorted(_partitions(m.get("member_assignment"))))))
    return DescribedGroup(found.get("group_state") or found.get("state") or "unknown",
                          found.get("protocol_data") or found.get("protocol") or "", tuple(members),
                          found.get("error"))


def committed(bootstrap: str, group: str, api_version: tuple[int, ...] | None = None) -> dict[TP, int]:
    """The group's committed offsets in the broker (OffsetFetch); empty when none or unreachable."""
    try:
        admin = _admin(bootstrap, api_version)
    except Exception:  # noqa: BLE001 - nothing read: every partition with records waiting looks stalled
        return {}
    try:
        offsets = admin.list_group_offsets(group).get(group) or {}
    except Exception:  # noqa: BLE001
        return {}
    finally:
        admin.close()
    return {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()
            if om.offset is not None and om.offset >= 0}
