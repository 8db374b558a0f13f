"""A local Kafka-protocol broker that registers in ZooKeeper like a 0.8+ broker and keeps its data on disk.

``Broker(zk_connect).start()`` gives the ZooKeeper consumers something real to consume from: kafka-python and
librdkafka clients produce and fetch against it, and it serves the topics ``zkconsumer topics create`` writes
to ZooKeeper. See ``docs/broker.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zkconsumer.broker.broker import Broker
    from zkconsumer.broker.storage import LogConfig

__all__ = ["Broker", "LogConfig"]


def __getattr__(name: str) -> object:
    """``Broker`` and ``LogConfig`` on first use (PEP 562): the package's lower modules (record batches, logs) are
    the group coordinator's library too, and the server on top of them (broker.py) builds that coordinator; an
    eager import here would make ``zkconsumer.coordinator`` and ``zkconsumer.broker`` import each other."""
    if name == "Broker":
        from zkconsumer.broker.broker import Broker  # lazy: see above

        return Broker
    if name == "LogConfig":
        from zkconsumer.broker.storage import LogConfig  # lazy: see above

        return LogConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
