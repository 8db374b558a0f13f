"""The request handlers of the data plane: ApiVersions, Metadata, Produce, Fetch, ListOffsets, InitProducerId.

Version ranges are those a Kafka 2.8 broker offers (with ApiVersions, Metadata and Fetch up to the last
versions that still name topics rather than topic ids), which is what kafka-python and librdkafka negotiate
down to. Each handler reads one :class:`ClusterSnapshot`, so one answer never mixes two states of ZooKeeper.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse

from zkconsumer import runtime
from zkconsumer.broker import legacy
from zkconsumer.errors import KafkaCode
from zkconsumer.log import batches as B
from zkconsumer.log.storage import LogManager, OffsetOutOfRange, StorageError
from zkconsumer.wire.protocol import ApiTable, RequestContext, api_versions_response
from zkconsumer.zk import layout
from zkconsumer.zk.cluster import ClusterSnapshot, ClusterView
from zkconsumer.zk.registry import Registry, TopicExistsError
from zkconsumer.zk.topics import create_topic

log = logging.getLogger(__name__)

# Kafka error codes used here (kafka.errors has them as classes; plain ints keep the answers readable).

LATEST, EARLIEST = -1, -2

#: (request class, min version, max version) served by :class:`CoreApis`.
VERSIONS = {
    "ApiVersions": (ApiVersionsRequest, 0, 3),
    "Metadata": (MetadataRequest, 0, 12),
    "Produce": (ProduceRequest, 0, 9),  # v0-v2: message format v0/v1, up-converted (legacy.py)
    "Fetch": (FetchRequest, 0, 12),  # v0-v3: answered in message format v0/v1, down-converted (legacy.py)
    "ListOffsets": (ListOffsetsRequest, 0, 6),
    "InitProducerId": (InitProducerIdRequest, 0, 4),
}


@dataclass(frozen=True)
class BrokerOptions:
    auto_create_topics: bool = False
    num_partitions: int = 1


class BrokerState(Protocol):
    """What handlers need from the broker; the group coordinator will get the same object."""

    logs: LogManager
    cluster: ClusterView
    options: BrokerOptions
    apis: ApiTable

    def advertised(self, listener: str | None) -> tuple[str, int] | None:
        """This broker's address to the clients of a further listener (None: its registration's)."""
        ...


def _partition_error(snap: ClusterSnapshot, topic: str, partition: int) -> int:
    ta = snap.topics.get(topic)
    if ta is None or partition not in ta.partitions:
        return KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
    leader = snap.leader(topic, partition)
    if leader == snap.broker_id:
        return KafkaCode.NONE
    return KafkaCode.LEADER_NOT_AVAILABLE if leader < 0 else KafkaCode.NOT_LEADER_OR_FOLLOWER


class CoreApis:
    def __init__(self, broker: BrokerState) -> None:
        self.broker = broker

    def install(self, table: ApiTable) -> None:
        handlers = {
            "ApiVersions": (self.api_versions, None),
            "Metadata": (self.metadata, self.metadata_error),
            "Produce": (self.produce, self.produce_error),
            "Fetch": (self.fetch, self.fetch_error),
            "ListOffsets": (self.list_offsets, self.list_offsets_error),
            "InitProducerId": (self.init_producer_id, self.init_producer_id_error),
        }
        for name, (request_class, lo, hi) in VERSIONS.items():
            handle, error_answer = handlers[name]
            table.register(request_class, lo, hi, handle, error_answer)

    # ---------------------------------------------------------------------------------------- ApiVersions
    def api_versions(self, ctx: RequestContext, req: ApiVersionsRequest):
        return api_versions_response(self.broker.apis)

    # ------------------------------------------------------------------------------------------- Metadata
    def metadata(self, ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
        snap = self.broker.cluster.snapshot()
        if req.topics is None or (ctx.api_version == 0 and not req.topics):
            names = sorted(snap.topics)
        else:
            names = [t.name for t in req.topics]
        allow_create = self.broker.options.auto_create_topics and (
            ctx.api_version < 4 or req.allow_auto_topic_creation)
        topics = [self._topic_metadata(snap, name, allow_create) for name in names]
        advertised = self.broker.advertised(ctx.listener)  # this broker as the listener the request came by
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
                   for b in snap.broker_list()
                   for host, port in [advertised if advertised and b.broker_id == snap.broker_id
                                      else b.plaintext_address()]]
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=snap.cluster_id,
                                controller_id=snap.controller_id, topics=topics, error_code=KafkaCode.NONE)

    def _topic_metadata(self, snap: ClusterSnapshot, name: str | None, allow_create: bool):
        Topic = MetadataResponse.MetadataResponseTopic
        Partition = Topic.MetadataResponsePartition
        ta = snap.topics.get(name) if name else None
        if ta is None:
            return Topic(error_code=self._maybe_create(name, allow_create), name=name, is_internal=False,
                         partitions=[])
        partitions = []
        live = snap.live_ids
        for p in ta.partition_ids:
            leader = snap.leader(name, p)
            replicas = list(ta.partitions[p])
            partitions.append(Partition(
                error_code=KafkaCode.NONE if leader >= 0 else KafkaCode.LEADER_NOT_AVAILABLE, partition_index=p,
                leader_id=leader,
                replica_nodes=replicas, isr_nodes=[leader] if leader >= 0 else [],
                offline_replicas=[r for r in replicas if r not in live]))
        return Topic(error_code=KafkaCode.NONE, name=name, is_internal=name in layout.INTERNAL_TOPICS,
                     partitions=partitions)

    def _maybe_create(self, name: str | None, allow_create: bool) -> int:
        if not allow_create or not name:
            return KafkaCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            layout.validate_topic(name)
            create_topic(Registry(self.broker.cluster.zk), name, self.broker.options.num_partitions)
            log.info("auto-created topic %s with %d partitions", name, self.broker.options.num_partitions)
        except layout.InvalidTopicError:
            return KafkaCode.INVALID_TOPIC_EXCEPTION
        except TopicExistsError:
            pass
        return KafkaCode.LEADER_NOT_AVAILABLE  # as Kafka answers while a new topic's leaders are being elected

    def metadata_error(self, ctx: RequestContext, req: MetadataRequest, code: int) -> MetadataResponse:
        topics = [MetadataResponse.MetadataResponseTopic(error_code=code, name=t.name, partitions=[])
                  for t in (req.topics or [])]
        return MetadataResponse(brokers=[], topics=topics, error_code=code)

    # -------------------------------------------------------------------------------------------- Produce
    def produce(self, ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
        snap = self.broker.cluster.snapshot()
        Topic = ProduceResponse.TopicProduceResponse
        responses = [Topic(name=t.name, partition_responses=[self._produced(ctx, snap, req, t.name, pd)
                                                             for pd in t.partition_data])
                     for t in req.topic_data]
        if req.acks == 0:
            return None
        return ProduceResponse(responses=responses, throttle_time_ms=0)

    def _produced(self, ctx: RequestContext, snap: ClusterSnapshot, req: ProduceRequest, topic: str, pd):
        """One partition's answer to a produce request."""
        code, base, start, message = self._append(ctx, snap, req, topic, pd.index, pd.records)
        return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
            index=pd.index, error_code=code, base_offset=base, log_append_time_ms=-1, log_start_offset=start,
            record_errors=[], error_message=message)

    def _append(self, ctx: RequestContext, snap: ClusterSnapshot, req: ProduceRequest, topic: str, partition: int,
                records) -> tuple[int, int, int, str | None]:
        """(error code, base offset, log start offset, error message) for one partition."""
        if req.acks not in (0, 1, -1):
            return KafkaCode.INVALID_REQUIRED_ACKS, -1, -1, None
        if req.transactional_id is not None:
            return KafkaCode.INVALID_REQUEST, -1, -1, "transactions are not supported by this broker"
        if topic in layout.INTERNAL_TOPICS:  # Kafka: only the group coordinator appends to __consumer_offsets
            return KafkaCode.INVALID_TOPIC_EXCEPTION, -1, -1, f"Cannot append to internal topic {topic}"
        code = _partition_error(snap, topic, partition)
        if code != KafkaCode.NONE:
            return code, -1, -1, None
        plog = self.broker.logs.get_or_create(topic, partition)
        cfg = self.broker.logs.config
        try:
            if ctx.api_version < 3:  # message format v0/v1 (Kafka 0.8-0.10 producers): stored as a v2 batch
                records = legacy.up_convert(records)
            batches = B.parse_produced(records, cfg.max_batch_bytes, cfg.verify_crc)
            result = plog.append(batches)
        except B.InvalidBatchError as e:
            log.info("%s: rejected produce to %s-%d: %s", ctx.peer, topic, partition, e)
            return e.code, -1, -1, str(e)
        except (OSError, StorageError) as e:
            log.error("append to %s-%d failed: %s", topic, partition, e)
            return KafkaCode.KAFKA_STORAGE_ERROR, -1, -1, str(e)
        return result.error, result.base_offset if result.error == KafkaCode.NONE else -1, plog.log_start_offset, None

    def produce_error(self, ctx: RequestContext, req: ProduceRequest, code: int) -> ProduceResponse:
        Topic = ProduceResponse.TopicProduceResponse
        Partition = Topic.PartitionProduceResponse
        return ProduceResponse(responses=[
            Topic(name=t.name, partition_responses=[Partition(index=p.index, error_code=code, base_offset=-1)
                                                    for p in t.partition_data])
            for t in req.topic_data])

    # ---------------------------------------------------------------------------------------------- Fetch
    def fetch(self, ctx: RequestContext, req: FetchRequest) -> FetchResponse:
        """Long poll: answer once ``min_bytes`` are available, an error occurs, or ``max_wait_ms`` passes."""
        logs = self.broker.logs
        deadline = runtime.monotonic() + max(0, req.max_wait_ms) / 1000.0
        while True:
            seen = logs.append_count
            responses, total, errors = self._read(req, self.broker.cluster.snapshot(), ctx.api_version)
            remaining = deadline - runtime.monotonic()
            if total >= req.min_bytes or errors or remaining <= 0 or logs.closed:
                break
            logs.wait_for_append(seen, remaining)
        return FetchResponse(throttle_time_ms=0, error_code=KafkaCode.NONE, session_id=0, responses=responses)

    def _read(self, req: FetchRequest, snap: ClusterSnapshot, version: int):
        Topic = FetchResponse.FetchableTopicResponse
        Partition = Topic.PartitionData
        budget = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
        total = errors = 0
        aborted = None if req.isolation_level == 0 else []
        responses = []
        for topic in req.topics:
            parts = []
            for fp in topic.partitions:
                code = _partition_error(snap, topic.topic, fp.partition)
                data, hw, start = b"", -1, -1
                if code == KafkaCode.NONE:
                    plog = self.broker.logs.get_or_create(topic.topic, fp.partition)
                    hw, start = plog.log_end_offset, plog.log_start_offset
                    limit = min(fp.partition_max_bytes, budget - total)
                    if limit > 0 or total == 0:
                        try:
                            data = plog.read(fp.fetch_offset, max(limit, 0), min_one=total == 0)
                            if version < 4:  # an old consumer reads message format v0/v1 only
                                data = legacy.down_convert(data, legacy.message_format_for_fetch(version),
                                                           fp.fetch_offset, max(limit, 0), min_one=total == 0)
                        except OffsetOutOfRange:
                            code = KafkaCode.OFFSET_OUT_OF_RANGE
                total += len(data)
                errors += code != KafkaCode.NONE
                parts.append(Partition(partition_index=fp.partition, error_code=code, high_watermark=hw,
                                       last_stable_offset=hw, log_start_offset=start,
                                       aborted_transactions=aborted, preferred_read_replica=-1, records=data))
            responses.append(Topic(topic=topic.topic, partitions=parts))
        return responses, total, errors

    def fetch_error(self, ctx: RequestContext, req: FetchRequest, code: int) -> FetchResponse:
        Topic = FetchResponse.FetchableTopicResponse
        Partition = Topic.PartitionData
        return FetchResponse(error_code=code, session_id=0, responses=[
            Topic(topic=t.topic, partitions=[Partition(partition_index=p.partition, error_code=code,
                                                       high_watermark=-1, records=b"") for p in t.partitions])
            for t in req.topics])

    # ---------------------------------------------------------------------------------------- ListOffsets
    def list_offsets(self, ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
        snap = self.broker.cluster.snapshot()
        Topic = ListOffsetsResponse.ListOffsetsTopicResponse
        topics = [Topic(name=t.name, partitions=[self._listed(ctx, snap, t.name, p) for p in t.partitions])
                  for t in req.topics]
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    def _listed(self, ctx: RequestContext, snap: ClusterSnapshot, topic: str, p):
        """One partition's answer to a ListOffsets request."""
        code, offset, ts = self._offset_for(snap, topic, p.partition_index, p.timestamp)
        old_style = []
        if ctx.api_version == 0 and code == KafkaCode.NONE:
            old_style = self._old_style_offsets(topic, p.partition_index, p.timestamp, offset, p.max_num_offsets)
        return ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
            partition_index=p.partition_index, error_code=code, timestamp=ts, offset=offset, leader_epoch=-1,
            old_style_offsets=old_style)

    def _offset_for(self, snap: ClusterSnapshot, topic: str, partition: int, timestamp: int):
        """(error, offset, timestamp): latest and earliest carry timestamp -1, as in Kafka."""
        code = _partition_error(snap, topic, partition)
        if code != KafkaCode.NONE:
            return code, -1, -1
        plog = self.broker.logs.get_or_create(topic, partition)
        if timestamp == LATEST:
            return KafkaCode.NONE, plog.log_end_offset, -1
        if timestamp == EARLIEST:
            return KafkaCode.NONE, plog.log_start_offset, -1
        if timestamp < 0:
            return KafkaCode.INVALID_REQUEST, -1, -1
        found = plog.offset_for_timestamp(timestamp)
        return (KafkaCode.NONE, found[0], found[1]) if found else (KafkaCode.NONE, -1, -1)

    def _old_style_offsets(self, topic: str, partition: int, timestamp: int, offset: int,
                           max_num_offsets: int) -> list[int]:
        """ListOffsets v0's list, as Kafka 0.8's ``fetchOffsetsBefore``: for latest the log end offset and then
        every segment's base offset, newest first; for earliest the log start offset; at most
        ``max_num_offsets``. By timestamp it is the offset ListOffsets v1 finds (Kafka 0.8 went by segment
        modification times, which a restored or copied log does not keep)."""
        if timestamp == LATEST:
            plog = self.broker.logs.get_or_create(topic, partition)
            offsets = [plog.log_end_offset]
            offsets += [s.base_offset for s in reversed(list(plog.segments)) if s.base_offset != offsets[0]]
        else:
            offsets = [offset] if offset >= 0 else []
        return offsets[:max(0, max_num_offsets)]

    def list_offsets_error(self, ctx: RequestContext, req: ListOffsetsRequest, code: int):
        Topic = ListOffsetsResponse.ListOffsetsTopicResponse
        Partition = Topic.ListOffsetsPartitionResponse
        return ListOffsetsResponse(topics=[
            Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index, error_code=code,
                                                     old_style_offsets=[]) for p in t.partitions])
            for t in req.topics])

    # ------------------------------------------------------------------------------------- InitProducerId
    def init_producer_id(self, ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
        if req.transactional_id is not None:
            log.info("%s asked for transactional id %r: transactions are not supported", ctx.peer,
                     req.transactional_id)
            return InitProducerIdResponse(throttle_time_ms=0, error_code=KafkaCode.INVALID_REQUEST, producer_id=-1,
                                          producer_epoch=-1)
        if req.producer_id >= 0 and 0 <= req.producer_epoch < 32766:
            # KIP-360: an idempotent producer bumps its epoch to reset its sequences after an error.
            return InitProducerIdResponse(throttle_time_ms=0, error_code=KafkaCode.NONE, producer_id=req.producer_id,
                                          producer_epoch=req.producer_epoch + 1)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=KafkaCode.NONE,
                                      producer_id=self.broker.cluster.next_producer_id(), producer_epoch=0)

    def init_producer_id_error(self, ctx: RequestContext, req: InitProducerIdRequest, code: int):
        return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)
