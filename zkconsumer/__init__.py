"""zkconsumer: the Kafka 0.8 ZooKeeper-coordinated consumer group, reimplemented in Python.

The package is split into small modules with one job each: ``layout`` owns every ZooKeeper path and node
codec, ``assignors`` holds the pure partition assignment strategies, ``zkserver`` starts real ZooKeeper
servers, ``registry`` is the single place that talks to ZooKeeper, ``topics`` is Kafka's AdminUtils.
"""

__version__ = "0.1.0"
