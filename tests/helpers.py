"""Test helpers: consumers against a real ZooKeeper, and awaiting conditions with a deadline (no blind sleeps)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zkconsumer.config import ConsumerConfig
from zkconsumer.connector import ZookeeperConsumerConnector


def wait_until(condition: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
               message: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail with ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value: {last!r})")


def consumer(zk_connect: str, group: str, consumer_id: str | None = None, fetch: bool = False,
             **props: Any) -> ZookeeperConsumerConnector:
    settings = {"group.id": group, "zookeeper.connect": zk_connect, "zkconsumer.fetch.enable": fetch,
                "zookeeper.session.timeout.ms": 4000, "rebalance.backoff.ms": 300, "auto.commit.enable": False}
    if consumer_id:
        settings["consumer.id"] = consumer_id
    settings.update({k.replace("_", "."): v for k, v in props.items()})
    return ZookeeperConsumerConnector(ConsumerConfig.from_properties(settings))
