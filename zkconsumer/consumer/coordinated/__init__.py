"""Coordinator mode: the ZooKeeper connector's streams on Kafka 0.9+'s group coordinator (JoinGroup, SyncGroup,
Heartbeat), through kafka-python's group machinery.

- ``connector``: ``CoordinatorConsumerConnector``: the rebalance callbacks, ownership, delivery gates, commits.
- ``holds``: where each new partition starts, which ones wait (held), and the one hook, the migration's handover.
- ``backlog``: records polled and not yet queued to their stream.
- ``poller``: the one thread that owns kafka-python's client.
- ``join_watch``: says so when a join does not complete within the rebalance timeout.
"""
