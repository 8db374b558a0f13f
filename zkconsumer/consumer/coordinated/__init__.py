"""Coordinator mode: the ZooKeeper connector's streams on Kafka 0.9+'s group coordinator (JoinGroup, SyncGroup,
Heartbeat), through kafka-python's group machinery.

- ``connector``: ``CoordinatorConsumerConnector``: the rebalance callbacks, ownership, delivery gates, commits,
  the migration's handover.
- ``poller``: the one thread that owns kafka-python's client.
- ``join_watch``: says so when a join does not complete within the rebalance timeout.
"""
