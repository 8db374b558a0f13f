"""Kafka 0.9+'s group coordinator inside the local broker (docs/coordinator.md).

The broker routes the group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups) here; committed offsets go through an ``OffsetStore`` (store.py), which the
``__consumer_offsets`` topic implements.
"""
