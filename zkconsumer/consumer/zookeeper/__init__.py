"""ZooKeeper mode: the Kafka 0.8 consumer group, each member rebalancing on its own.

- ``connector``: ``ZookeeperConsumerConnector``: registration, streams, ownership state, commits, shutdown.
- ``rebalance``: the watches, the watcher-executor thread and the attempts (a driver with an explicit lifecycle
  state, :class:`~zkconsumer.consumer.zookeeper.rebalance.RebalancerState`).
- ``plan``: an attempt's decision as a pure step: release, keep, claim, hold.
- ``group_view``: what an attempt reads of the group (the ``reads`` phase).
- ``claims``: the owner nodes: claims, releases and the watches guarding them.
- ``offsets`` / ``kafka_offsets``: committed offsets in ZooKeeper, or in the broker (0.8.2's dual commit).
- ``phases``: where a rebalance's time goes.
"""
