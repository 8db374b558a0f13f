"""A local Kafka-protocol broker that registers in ZooKeeper like a 0.8+ broker and keeps its data on disk.

``Broker(zk_connect).start()`` gives the ZooKeeper consumers something real to consume from: kafka-python and
librdkafka clients produce and fetch against it, and it serves the topics ``zkconsumer topics create`` writes
to ZooKeeper. See ``docs/broker.md``.
"""

from __future__ import annotations

from zkconsumer.broker.broker import Broker
from zkconsumer.log.storage import LogConfig  # what Broker(log_config=...) takes

__all__ = ["Broker", "LogConfig"]
