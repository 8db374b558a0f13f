"""ZooKeeper, as Kafka 0.8 laid it out: the layout and its codecs (pure), the one typed access layer, and servers.

- ``layout``: every path and node format of the 0.8 tree, ids and thread ids, topic filters; pure.
- ``registry``: typed reads and writes through kazoo; the place that talks to ZooKeeper (docs/architecture.md
  lists the few modules that watch or claim nodes themselves, and why).
- ``handler``: kazoo's threading handler, cheaper per event for many clients in one process.
- ``security``: ``zookeeper.set.acl`` and the SASL / digest identities; pure.
- ``topics``: Kafka's AdminUtils (replica assignment, create, grow).
- ``server``: real ZooKeeper servers (standalone or a 3-node ensemble) started by the project.
- ``cluster``: a broker's view of the cluster (its registration, live brokers, topics, the controller), which the
  broker's APIs and the group coordinator's both read; ``partition_state``: the controller's state nodes, pure.
"""
