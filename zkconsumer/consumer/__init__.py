"""The consumer: one streams surface (``base``, ``streams``, ``progress``, ``listener``, ``fetcher``) and two
drivers of it, side by side and never importing each other.

- ``zookeeper/``: Kafka 0.8's ``ZookeeperConsumerConnector`` (the group in ZooKeeper, each member rebalancing on
  its own).
- ``coordinated/``: the same streams on Kafka 0.9+'s broker-side group coordinator.
"""
