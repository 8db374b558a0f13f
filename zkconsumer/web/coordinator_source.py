"""A coordinator group as a live source: state, protocol, members (member id, client id, host) with their decoded
assignments, committed offsets and lag, polled through the Kafka admin API every ``poll`` seconds; its generation,
leader and last rebalance read from ``__consumer_offsets``.

No request a non-member can send carries a classic group's generation: DescribeGroups (v0-v5) answers the state,
protocol type, protocol and members but not the generation; OffsetFetch answers offsets only; a Heartbeat or
OffsetCommit with a made-up generation answers ILLEGAL_GENERATION without saying which one is right (Kafka's
ConsumerGroupDescribe, KIP-848, has a group epoch, but only for groups of the new protocol). The coordinator
writes it down, though: at every completed rebalance a GroupMetadata record (generation, protocol, leader, state
timestamp, members) goes to the group's partition of ``__consumer_offsets``, in ours as in Kafka's, as Burrow
reads it. :class:`~zkconsumer.web.offsets_topic_reader.OffsetsTopicReader` follows that partition; when it
cannot (no topic yet, not authorized, a broker that refuses), the generation shows "n/a" with the reason in its
tooltip, and the group's own status stays what DescribeGroups says.

Partitions: those assigned to a member, those with a committed offset, and every partition of the topics the
members subscribe to (so a partition nobody owns shows as such). A broker that goes away never stops the source:
the status says so and since when, the last data stays, and the next poll that answers brings it back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka.errors import KafkaError

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.kafka_admin import AdminClient
from zkconsumer.tools.groups import read_log_ends
from zkconsumer.types import tp_str
from zkconsumer.web.group_metadata import View
from zkconsumer.web.live_group import LiveGroup, Read, WatchedGroup
from zkconsumer.web.offsets_topic_reader import OffsetsTopicReader
from zkconsumer.web.snapshot import GroupInfo, Member, SourceKind

log = logging.getLogger(__name__)


def assigned(member: dict[str, Any]) -> list[tuple[str, int]]:
    """A described member's partitions, from kafka-python's decoded consumer-protocol assignment (a member
    between a join and its sync has none; an assignment that is not the consumer protocol's stays undecoded)."""
    assignment = member.get("member_assignment")
    if not isinstance(assignment, dict):
        return []
    return sorted((a["topic"], p) for a in assignment.get("assigned_partitions") or [] for p in a["partitions"])


def subscription(member: dict[str, Any]) -> dict[str, int]:
    """A described member's topics. The snapshot's subscription counts streams per topic; a coordinator member
    subscribes to topics, not streams, so each count is 0 (the page shows the topic alone)."""
    metadata = member.get("member_metadata")
    return {t: 0 for t in metadata.get("topics") or []} if isinstance(metadata, dict) else {}


def members_of(description: dict[str, Any]) -> list[Member]:
    """The described members, with the client id and host the coordinator has for each (``/127.0.0.1``: the
    address it saw the member's JoinGroup from)."""
    return [Member(m["member_id"], description.get("group_state") or "", subscription(m),
                   [tp_str((t, p)) for t, p in assigned(m)], client_id=m.get("client_id") or None,
                   host=(m.get("client_host") or "").lstrip("/") or None)
            for m in sorted(description.get("members") or [], key=lambda m: m["member_id"])]


def group_info(group: str, description: dict[str, Any], view: View) -> GroupInfo:
    """The header: state and protocol as described, generation, leader and last rebalance as the latest
    GroupMetadata record has them (None while there is none, or after a tombstone)."""
    snapshot = view.latest.snapshot
    return GroupInfo(group, description.get("group_state") or None, description.get("protocol_data") or None,
                     None if snapshot is None else snapshot.generation, None if snapshot is None else snapshot.leader,
                     None if snapshot is None else view.latest.at_ms, view.note())


class CoordinatorGroupSource(WatchedGroup):
    """The :class:`~zkconsumer.web.snapshot.LiveSource` of coordinator group ``group`` at ``bootstrap``; its
    thread starts at once (the broker need not be up yet), as does its reader of ``__consumer_offsets``.
    ``admin_options``: extra kafka-python settings (security) for both clients."""

    def __init__(self, bootstrap: str, group: str, *, poll: float = 1.0, lag_every: float = 2.0,
                 admin_options: dict[str, Any] | None = None, now: Callable[[], float] = time.time) -> None:
        self.bootstrap, self.group = bootstrap, group
        self._poll, self._lag_every = poll, lag_every
        self._admin_options = admin_options or {}
        self.live = LiveGroup(f"group {group} (coordinator at {bootstrap})", SourceKind.COORDINATOR, group,
                              f"broker {bootstrap}", now)
        self._admin: AdminClient | None = None
        self._offsets_topic = OffsetsTopicReader(bootstrap, group, options=self._admin_options)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"watch {group}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        self._offsets_topic.close()
        # the poller closes its client as it ends; one blocked on a broker that went away ends within its
        # request timeout, not worth waiting for
        self._thread.join(1)

    # ------------------------------------------------------------------------------------------------ polling
    def _loop(self) -> None:
        ends_at = 0.0
        while not self._closed.is_set():
            try:
                tps = self._read()
                if time.monotonic() >= ends_at:
                    ends_at = time.monotonic() + self._lag_every
                    self._read_ends(tps)
                self.live.up()
            except (KafkaError, OSError) as e:  # the broker went away (or never came): say so, keep the data
                log.debug("watch: %s", e)
                self.live.down("broker unreachable")
                self._drop_admin()
            self._closed.wait(self._poll)
        self._drop_admin()

    def _client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(bootstrap_servers=self.bootstrap, client_id="zkconsumer-watch",
                                      request_timeout_ms=3000, bootstrap_timeout_ms=2000, **self._admin_options)
        return self._admin

    def _drop_admin(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except (KafkaError, OSError) as e:
                log.debug("watch: closing the admin client: %s", e)

    def _read(self) -> list[tuple[str, int]]:
        admin = self._client()
        description = admin.describe_groups([self.group])[self.group]
        if description.get("error"):
            raise KafkaError(description["error"])
        committed = admin.list_group_offsets({self.group: None}).get(self.group, {})
        members = members_of(description)
        owners = {tp: m["member_id"] for m in description.get("members") or [] for tp in assigned(m)}
        offsets = {(tp.topic, tp.partition): meta.offset for tp, meta in committed.items() if meta.offset >= 0}
        topics = sorted({t for m in members for t in m.subscription})
        tps = sorted(set(owners) | set(offsets) | set(self._partitions_of(admin, topics)))
        group = group_info(self.group, description, self._offsets_topic.view())
        self.live.update(members, [Read(t, p, owners.get((t, p)), offsets.get((t, p))) for t, p in tps], group,
                         membership="members changed", settled=group.state == "Stable")
        return tps

    @staticmethod
    def _partitions_of(admin: AdminClient, topics: list[str]) -> Iterable[tuple[str, int]]:
        if not topics:
            return []
        return [(t["name"], p["partition_index"]) for t in admin.describe_topics(topics) if not t["error_code"]
                for p in t["partitions"]]

    def _read_ends(self, tps: list[tuple[str, int]]) -> None:
        ends = read_log_ends(self.bootstrap, [TopicPartition(t, p) for t, p in tps], timeout_ms=2000).offsets
        self.live.set_ends({(tp.topic, tp.partition): end for tp, end in ends.items()})

