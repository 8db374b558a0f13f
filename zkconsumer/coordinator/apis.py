"""The group APIs in the broker's ApiTable: wire requests → GroupCoordinator calls → wire responses.

Versions are those a Kafka 2.8 broker offers for each API: kafka-python 3.0 and librdkafka 2.x negotiate within
them. FindCoordinator v0 is Kafka 0.8.2's ConsumerMetadata request (same key, same layout); OffsetCommit and
OffsetFetch v0 read and write ZooKeeper's ``/consumers/<g>/offsets/<t>/<p>``, as the 0.8.2 broker did (and 2.x
still does), v1 and later the group's offsets in ``__consumer_offsets`` (pykafka's BalancedConsumer uses v1).
kafka-python's protocol classes decode and encode the old versions too, though their schemas start later.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from zkconsumer.assignment.assignors import TopicPartition
from zkconsumer.coordinator import kip848
from zkconsumer.coordinator.manager import OFFSETS_TOPIC, GroupCoordinator, now_ms, partition_for
from zkconsumer.coordinator.offsets_log import OFFSETS_TOPIC_CONFIG
from zkconsumer.coordinator.store import CommittedOffset
from zkconsumer.errors import KafkaCode
from zkconsumer.wire.protocol import ApiTable, MalformedRequest, RequestContext
from zkconsumer.zk.cluster import ClusterView
from zkconsumer.zk.registry import Registry, TopicExistsError
from zkconsumer.zk.topics import create_topic


class BrokerHost(Protocol):
    """What the group APIs need of the broker that hosts them (zkconsumer.broker.broker.Broker): its id and its
    view of the cluster. A protocol, so the coordinator does not import the broker that builds it."""

    broker_id: int
    cluster: ClusterView | None

    def advertised(self, listener: str | None) -> tuple[str, int] | None:
        """This broker's address to the clients of a further listener (None: its registration's)."""
        ...


log = logging.getLogger(__name__)

#: API → (request class, min version, max version).
VERSIONS = {
    "FindCoordinator": (FindCoordinatorRequest, 0, 3),
    "JoinGroup": (JoinGroupRequest, 0, 7),
    "SyncGroup": (SyncGroupRequest, 0, 5),
    "Heartbeat": (HeartbeatRequest, 0, 4),
    "LeaveGroup": (LeaveGroupRequest, 0, 4),
    "OffsetCommit": (OffsetCommitRequest, 0, 8),
    "OffsetFetch": (OffsetFetchRequest, 0, 7),
    "DescribeGroups": (DescribeGroupsRequest, 0, 5),
    "ListGroups": (ListGroupsRequest, 0, 4),
    "DeleteGroups": (DeleteGroupsRequest, 0, 2),
}
GROUP_KEY, TRANSACTION_KEY = 0, 1

#: Test-only: set (to anything but ``""``/``0``) in a broker's environment, its DescribeGroups answers carry only what
#: Kafka's protocol requires a coordinator to fill (see :attr:`GroupApis.describe_required_only`).
DESCRIBE_REQUIRED_ONLY_ENV = "ZKCONSUMER_TEST_DESCRIBE_GROUPS_REQUIRED_ONLY"


class GroupApis:
    """Request handlers; the broker gives them its cluster view (who leads which partition) and the coordinator."""

    def __init__(self, broker: BrokerHost, coordinator: GroupCoordinator, describe_required_only: bool = False
                 ) -> None:
        self.broker = broker
        self.coordinator = coordinator
        #: TEST-ONLY. DescribeGroups answers each member with its ``member_id`` (and the group with its state and
        #: protocol) and leaves ``client_id``, ``client_host``, ``member_metadata`` and ``member_assignment`` empty,
        #: as a Kafka-compatible coordinator written independently of Kafka did (issue 38): the protocol names those
        #: fields but does not promise what they carry, and ``zkconsumer migrate``'s checks must hold without them.
        self.describe_required_only = describe_required_only
        self._refused: set[tuple[str, str]] = set()  # (peer host, group) told about KIP-848 already

    def install(self, table: ApiTable) -> None:
        for name, (request_class, lo, hi) in VERSIONS.items():
            handle = getattr(self, _snake(name))
            error = getattr(self, _snake(name) + "_error")
            table.register(request_class, lo, hi, handle, error)
        table.register_raw(kip848.API_KEY, kip848.NAME, kip848.MIN_VERSION, kip848.MAX_VERSION,
                           self.consumer_group_heartbeat)

    def consumer_group_heartbeat(self, frame: bytes, peer: str) -> bytes:
        """KIP-848's heartbeat: refused with UNSUPPORTED_VERSION and a message the client reports (kip848.py)."""
        try:
            request = kip848.decode_request(frame)
        except kip848.Kip848DecodeError as e:
            raise MalformedRequest(str(e)) from None
        key = (peer.rpartition(":")[0] or peer, request.group_id)
        if key not in self._refused:
            self._refused.add(key)
            log.warning("%s (client %s, group %s) asked for the consumer group protocol (KIP-848, "
                        "group.protocol=consumer); refused: this broker has the classic protocol only",
                        peer or "a client", request.client_id, request.group_id)
        self.coordinator.count(request.group_id, kip848.NAME)
        return kip848.encode_error_response(request.correlation_id, member_id=request.member_id or None)

    # ---------------------------------------------------------------------------------- who coordinates
    def coordinator_node(self, group_id: str, listener: str | None = None) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the group's coordinator: the leader of its ``__consumer_offsets``
        partition, this broker while the topic does not exist yet (Kafka creates it on this first request). This
        broker is named by the address of the ``listener`` the request came through."""
        snap = self.broker.cluster.snapshot()
        partitions = self.coordinator.config.offsets_topic_num_partitions
        partition = partition_for(group_id, partitions)
        if OFFSETS_TOPIC not in snap.topics:
            self._create_offsets_topic(partitions)
        leader = snap.leader(OFFSETS_TOPIC, partition) if OFFSETS_TOPIC in snap.topics else snap.broker_id
        if leader < 0:
            return KafkaCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        info = snap.brokers.get(leader)
        if info is None:
            return KafkaCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        advertised = self.broker.advertised(listener) if leader == snap.broker_id else None
        host, port = advertised or info.plaintext_address()
        return KafkaCode.NONE, leader, host, port

    def _create_offsets_topic(self, partitions: int) -> None:
        """Kafka creates ``__consumer_offsets`` when a group first asks for its coordinator."""
        try:
            create_topic(Registry(self.broker.cluster.zk), OFFSETS_TOPIC, partitions, config=OFFSETS_TOPIC_CONFIG)
            log.info("created %s with %d partitions", OFFSETS_TOPIC, partitions)
        except TopicExistsError:
            pass
        except Exception:  # noqa: BLE001 - this broker coordinates meanwhile; the next request tries again
            log.warning("could not create %s", OFFSETS_TOPIC, exc_info=True)

    def _not_mine(self, group_id: str) -> int | None:
        error, node, _, _ = self.coordinator_node(group_id)
        if error != KafkaCode.NONE:
            return error
        return None if node == self.broker.broker_id else KafkaCode.NOT_COORDINATOR

    # ----------------------------------------------------------------------------------- FindCoordinator
    def find_coordinator(self, ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
        keys = list(req.coordinator_keys or []) if ctx.api_version >= 4 else [req.key]
        key_type = req.key_type if ctx.api_version >= 1 else GROUP_KEY
        answers = []
        for key in keys:
            if key_type != GROUP_KEY:  # no transactions here
                answers.append((key, KafkaCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1))
            else:
                self.coordinator.count(key, "FindCoordinator")
                answers.append((key, *self.coordinator_node(key, ctx.listener)))
        if ctx.api_version >= 4:
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
                FindCoordinatorResponse.Coordinator(key=k, node_id=n, host=h, port=p, error_code=e,
                                                    error_message=None) for k, e, n, h, p in answers])
        _, error, node, host, port = answers[0]
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=None, node_id=node,
                                       host=host, port=port)

    def find_coordinator_error(self, ctx, req, code: int):
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=None, node_id=-1,
                                       host="", port=-1, coordinators=[])

    # ----------------------------------------------------------------------------------------- JoinGroup
    def join_group(self, ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
        not_mine = self._not_mine(req.group_id)
        if not_mine is not None:
            return self.join_group_error(ctx, req, not_mine)
        rebalance_timeout = req.rebalance_timeout_ms if ctx.api_version >= 1 else req.session_timeout_ms
        instance = req.group_instance_id if ctx.api_version >= 5 else None
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        result = self.coordinator.join(req.group_id, req.member_id, instance, ctx.client_id or "",
                                       _host(ctx.peer), req.session_timeout_ms, rebalance_timeout,
                                       req.protocol_type, protocols, require_known_member_id=ctx.api_version >= 4)
        Member = JoinGroupResponse.JoinGroupResponseMember
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=result.error, generation_id=result.generation,
            protocol_type=result.protocol_type, protocol_name=result.protocol_name or "",
            leader=result.leader, skip_assignment=False, member_id=result.member_id,
            members=[Member(member_id=m, group_instance_id=i, metadata=d) for m, i, d in result.members])

    def join_group_error(self, ctx, req, code: int):
        return JoinGroupResponse(throttle_time_ms=0, error_code=code, generation_id=-1, protocol_type=None,
                                 protocol_name="", leader="", skip_assignment=False,
                                 member_id=getattr(req, "member_id", ""), members=[])

    # ----------------------------------------------------------------------------------------- SyncGroup
    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
        not_mine = self._not_mine(req.group_id)
        if not_mine is not None:
            return self.sync_group_error(ctx, req, not_mine)
        assignments = {a.member_id: bytes(a.assignment) for a in req.assignments}
        result = self.coordinator.sync(
            req.group_id, req.generation_id, req.member_id, req.group_instance_id if ctx.api_version >= 3 else None,
            req.protocol_type if ctx.api_version >= 5 else None, req.protocol_name if ctx.api_version >= 5 else None,
            assignments)
        return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                                 protocol_name=result.protocol_name, assignment=result.assignment)

    def sync_group_error(self, ctx, req, code: int):
        return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None,
                                 assignment=b"")

    # ----------------------------------------------------------------------------------------- Heartbeat
    def heartbeat(self, ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
        not_mine = self._not_mine(req.group_id)
        instance = req.group_instance_id if ctx.api_version >= 3 else None
        code = not_mine if not_mine is not None else self.coordinator.heartbeat(req.group_id, req.generation_id,
                                                                                 req.member_id, instance)
        return HeartbeatResponse(throttle_time_ms=0, error_code=code)

    def heartbeat_error(self, ctx, req, code: int):
        return HeartbeatResponse(throttle_time_ms=0, error_code=code)

    # ---------------------------------------------------------------------------------------- LeaveGroup
    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
        not_mine = self._not_mine(req.group_id)
        if not_mine is not None:
            return self.leave_group_error(ctx, req, not_mine)
        if ctx.api_version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in req.members]
        else:
            members = [(req.member_id, None)]
        error, results = self.coordinator.leave(req.group_id, members)
        if ctx.api_version < 3 and error == KafkaCode.NONE and results:
            error = results[0][2]
        Resp = LeaveGroupResponse.MemberResponse
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[
            Resp(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results])

    def leave_group_error(self, ctx, req, code: int):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])

    # -------------------------------------------------------------------------------------- OffsetCommit
    def offset_commit(self, ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
        not_mine = self._not_mine(req.group_id)
        if not_mine is not None:
            return self.offset_commit_error(ctx, req, not_mine)
        v = ctx.api_version
        now = now_ms()
        retention = req.retention_time_ms if 2 <= v <= 4 else -1
        offsets = {}
        for t in req.topics:
            for p in t.partitions:
                epoch = p.committed_leader_epoch if v >= 6 else -1
                # v1 carries a commit timestamp per partition (-1: now); Kafka 2.x expires such an offset from it
                stamp = p.commit_timestamp if v == 1 and p.commit_timestamp != -1 else now
                expire = (stamp + self.coordinator.config.offsets_retention_minutes * 60_000 if v == 1 and
                          p.commit_timestamp != -1 else (now + retention if retention is not None and retention >= 0
                                                         else -1))
                offsets[TopicPartition(t.name, p.partition_index)] = CommittedOffset(
                    p.committed_offset, p.committed_metadata or "", stamp, expire, epoch)
        if v == 0:
            return self._commit_answer(req, self._commit_to_zookeeper(req.group_id, offsets))
        instance = req.group_instance_id if v >= 7 else None
        code = self.coordinator.commit_offsets(req.group_id, req.generation_id_or_member_epoch, req.member_id,
                                               offsets, instance)
        return self._commit_answer(req, code)

    def _commit_to_zookeeper(self, group_id: str, offsets) -> int:
        """OffsetCommit v0: the broker writes ZooKeeper's offset nodes, no group checks (0.8.2's KafkaApis)."""
        if not group_id:
            return KafkaCode.INVALID_GROUP_ID
        self.coordinator.count(group_id, "OffsetCommit")
        registry = Registry(self.broker.cluster.zk)
        for tp, c in offsets.items():
            registry.write_offset(group_id, tp.topic, tp.partition, c.offset)
        return KafkaCode.NONE

    def _commit_answer(self, req, code: int) -> OffsetCommitResponse:
        Topic = OffsetCommitResponse.OffsetCommitResponseTopic
        Partition = Topic.OffsetCommitResponsePartition
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index, error_code=code)
                                           for p in t.partitions]) for t in req.topics])

    def offset_commit_error(self, ctx, req, code: int):
        return self._commit_answer(req, code)

    # --------------------------------------------------------------------------------------- OffsetFetch
    def offset_fetch(self, ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
        not_mine = self._not_mine(req.group_id)
        if not_mine is not None:
            return self.offset_fetch_error(ctx, req, not_mine)
        wanted = None if req.topics is None else [TopicPartition(t.name, p) for t in req.topics
                                                  for p in t.partition_indexes]
        if ctx.api_version == 0:
            return self._fetch_from_zookeeper(req.group_id, wanted or [])
        error, found = self.coordinator.fetch_offsets(req.group_id, wanted)
        if error != KafkaCode.NONE:
            return self.offset_fetch_error(ctx, req, error)
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        by_topic: dict[str, list] = {}
        for tp in (wanted if wanted is not None else sorted(found)):
            c = found.get(tp)
            by_topic.setdefault(tp.topic, []).append(Partition(
                partition_index=tp.partition, committed_offset=c.offset if c else -1,
                committed_leader_epoch=c.leader_epoch if c else -1, metadata=c.metadata if c else "",
                error_code=KafkaCode.NONE))
        return OffsetFetchResponse(throttle_time_ms=0, error_code=KafkaCode.NONE, topics=[
            Topic(name=name, partitions=parts) for name, parts in by_topic.items()])

    def _fetch_from_zookeeper(self, group_id: str, wanted: list[TopicPartition]) -> OffsetFetchResponse:
        """OffsetFetch v0: from ZooKeeper; a partition without an offset node is -1 with UNKNOWN_TOPIC_OR_PARTITION
        (3), as the 0.8.2 broker answered."""
        self.coordinator.count(group_id, "OffsetFetch")
        registry = Registry(self.broker.cluster.zk)
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        by_topic: dict[str, list] = {}
        for tp in wanted:
            try:
                offset = registry.offset(group_id, tp.topic, tp.partition)
            except Exception:  # noqa: BLE001 - a malformed node: answered as absent (logged by the registry)
                offset = None
            by_topic.setdefault(tp.topic, []).append(Partition(
                partition_index=tp.partition, committed_offset=-1 if offset is None else offset,
                committed_leader_epoch=-1, metadata="",
                error_code=KafkaCode.UNKNOWN_TOPIC_OR_PARTITION if offset is None else KafkaCode.NONE))
        return OffsetFetchResponse(throttle_time_ms=0, error_code=KafkaCode.NONE, topics=[
            Topic(name=name, partitions=parts) for name, parts in by_topic.items()])

    def offset_fetch_error(self, ctx, req, code: int):
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        topics = [Topic(name=t.name, partitions=[
            Partition(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata="",
                      error_code=code) for p in t.partition_indexes]) for t in (req.topics or [])]
        return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=topics)

    # ------------------------------------------------------------------------------------ DescribeGroups
    def describe_groups(self, ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
        Group = DescribeGroupsResponse.DescribedGroup
        Member = Group.DescribedGroupMember
        groups = []
        for gid in req.groups:
            not_mine = self._not_mine(gid)
            if not_mine is not None:
                groups.append(Group(error_code=not_mine, error_message=None, group_id=gid, group_state="",
                                    protocol_type="", protocol_data="", members=[],
                                    authorized_operations=None))
                continue
            self.coordinator.count(gid, "DescribeGroups")
            d = self.coordinator.describe(gid)
            groups.append(Group(
                error_code=d.error, error_message=None, group_id=gid, group_state=d.state,
                protocol_type=d.protocol_type, protocol_data=d.protocol, authorized_operations=None,
                members=[self._described_member(Member, m) for m in d.members]))
        return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)

    def _described_member(self, member_class: type, m) -> object:
        """One member of a DescribeGroups answer: all of it, or (test-only) only what the protocol requires."""
        if self.describe_required_only:
            return member_class(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id="",
                                client_host="", member_metadata=b"", member_assignment=b"")
        return member_class(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                            client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)

    def describe_groups_error(self, ctx, req, code: int):
        Group = DescribeGroupsResponse.DescribedGroup
        return DescribeGroupsResponse(throttle_time_ms=0, groups=[
            Group(error_code=code, error_message=None, group_id=g, group_state="", protocol_type="",
                  protocol_data="", members=[], authorized_operations=None) for g in req.groups])

    # ---------------------------------------------------------------------------------------- ListGroups
    def list_groups(self, ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
        states = req.states_filter if ctx.api_version >= 4 else None
        error, groups = self.coordinator.list_groups(states or None)
        Listed = ListGroupsResponse.ListedGroup
        return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
            Listed(group_id=g, protocol_type=t, group_state=s, group_type="classic") for g, t, s in groups])

    def list_groups_error(self, ctx, req, code: int):
        return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])

    # -------------------------------------------------------------------------------------- DeleteGroups
    def delete_groups(self, ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
        mine = [g for g in req.groups_names if self._not_mine(g) is None]
        results = self.coordinator.delete_groups(mine)
        Result = DeleteGroupsResponse.DeletableGroupResult
        return DeleteGroupsResponse(throttle_time_ms=0, results=[
            Result(group_id=g, error_code=results.get(g, KafkaCode.NOT_COORDINATOR)) for g in req.groups_names])

    def delete_groups_error(self, ctx, req, code: int):
        Result = DeleteGroupsResponse.DeletableGroupResult
        return DeleteGroupsResponse(throttle_time_ms=0, results=[Result(group_id=g, error_code=code)
                                                                 for g in req.groups_names])


def _snake(name: str) -> str:
    out = "".join("_" + c.lower() if c.isupper() else c for c in name)
    return out.lstrip("_")


def _host(peer: str) -> str:
    """Kafka's client_host: ``/`` + the client's address."""
    return "/" + peer.rsplit(":", 1)[0] if peer else ""
