"""Where a member's connections come from: real sockets live, the simulator's network in a simulation.

A member talks to two servers, ZooKeeper (through kazoo) and the broker (through the fetcher's client). Both
clients already take their I/O from outside: kazoo from its *handler* (threads, sockets, ``select``), the fetcher
from a client factory. :class:`MemberIO` carries the two, so that ``ZookeeperConsumerConnector(config,
io=world.member_io("c1"))`` runs the connector's own code, unchanged, on the simulator (zkconsumer/sim/), while
every caller that passes nothing gets the live defaults. Time, threads and chance come from the runtime seam
(zkconsumer/runtime.py); this is its counterpart for the network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zkconsumer.consumer.fetcher import ClientFactory


@dataclass(frozen=True)
class MemberIO:
    """``zk_handler``: makes a kazoo handler for each ZooKeeper client (None: zk/handler.py's ``PollHandler``);
    ``kafka_client``: makes the fetcher's broker client (None: kafka-python's ``KafkaConsumer``)."""

    zk_handler: Callable[[], object] | None = None
    kafka_client: ClientFactory | None = None


#: Real sockets: what every caller that names no I/O gets.
LIVE = MemberIO()
