"""The one Kafka admin client zkconsumer uses: kafka-python's ``KafkaAdminClient``, lenient about what it never reads.

Why a subclass: kafka-python 3 asks DescribeGroups for the caller's authorized operations on every call (its
``include_authorized_operations=False`` argument is not passed on to the request) and maps every bit of the answer
to its ``ACLOperation`` enum, which stops at DESCRIBE_TOKENS (14). A coordinator that answers a bit past it (Kafka
4's TWO_PHASE_COMMIT is 15, KIP-939; Kafka-compatible brokers add their own) makes the whole call raise
``ValueError: 15 is not a valid ACLOperation``. No caller here reads authorized operations, yet a migration failed
every check on it and was rolled back. This client does not ask for them in DescribeGroups, and keeps those it is
sent anyway (in a DescribeGroups or Metadata answer) instead of raising: a known operation by its name, an unknown
one by its number.

What the other admin calls do with values they do not know (audited; nothing to change):

* OffsetFetch (``list_group_offsets``): an error code kafka-python does not know becomes UnrecognizedBrokerError, and a
  partition-level error raises for the whole group. That is kept on purpose: a partition read as "no commit" would
  be reset by ``auto.offset.reset``, so a reader retries (consumer/zookeeper/kafka_offsets.py) or reports the check
  as failed (migration/verify.py) instead.
* ListGroups (``list_groups``): plain fields (``to_dict``), no enum.
* ListOffsets: read through ``KafkaConsumer.end_offsets`` (tools/groups.py), whose Metadata asks for no authorized
  operations; no admin call.
* Metadata (``list_topics``): asks for topic and cluster authorized operations; kept as above.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import ACLOperation
from kafka.protocol.admin import DescribeGroupsRequest

#: Bits 0-2 (UNKNOWN, ANY, ALL) mean something in an ACL filter only; an answer's set of operations never holds
#: them (Kafka's AclOperation), so they are dropped here as kafka-python drops them.
_FILTER_ONLY = {ACLOperation.UNKNOWN.value, ACLOperation.ANY.value, ACLOperation.ALL.value}
_NAMES = {op.value: op.name for op in ACLOperation}


def operation_names(bits: Iterable[int]) -> list[str | int]:
    """Authorized-operation bits as kafka-python would name them, but an operation it does not know is kept as its
    number instead of failing the call."""
    return [_NAMES.get(bit, bit) for bit in sorted(set(bits) - _FILTER_ONLY)]


class AdminClient(KafkaAdminClient):
    """``KafkaAdminClient`` that never asks for authorized operations in DescribeGroups and never fails on an
    operation it does not know. Everything else (coordinator discovery, version negotiation, security) is
    kafka-python's."""

    def _describe_groups_request(self, group_ids: Iterable[str]) -> DescribeGroupsRequest:
        # Kafka answers INT_MIN (decoded as None) when not asked: nothing left to map
        return DescribeGroupsRequest(groups=list(group_ids), include_authorized_operations=False)

    def _process_acl_operations(self, obj: dict[str, Any]) -> dict[str, Any]:
        bits = obj.get("authorized_operations")
        if bits is not None:
            obj["authorized_operations"] = operation_names(bits)
        return obj
