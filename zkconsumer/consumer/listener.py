"""Kafka's ``ConsumerRebalanceListener``: the caller's hooks around a rebalance, called on the rebalance thread."""

from __future__ import annotations

from collections.abc import Mapping


class RebalanceListener:
    """Override what you need; both hooks run on the rebalance thread and should return quickly."""

    def before_releasing_partitions(self, partitions: Mapping[str, set[int]]) -> None:
        """Before owner nodes are deleted (offsets of consumed records are already committed)."""

    def before_starting_fetchers(self, consumer_id: str, assignment: Mapping[str, Mapping[int, str]]) -> None:
        """After the new share was claimed, before records flow: topic → partition → thread id."""
