"""Partition state nodes, as Kafka's controller writes them — pure: paths, codec and the next state.

``/brokers/topics/<t>/partitions/<p>/state`` holds Kafka 0.8.2.2's ``ZkUtils.leaderAndIsrZkData``:
``{"controller_epoch":N,"leader":L,"version":1,"leader_epoch":E,"isr":[...]}`` — that key order is what
Scala's ``Json.encode`` of its five-entry map printed, and what 0.8-era clients and tools (pykafka, Kafka's
own ``ZkUtils.getLeaderAndIsrForPartition``) read. ``/controller_epoch`` holds the bare epoch (``"1"``).

There are no followers here, so the ISR is the leader alone (empty when no replica is live) and the leader
epoch grows by one whenever the leader changes, as an election would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

CONTROLLER_EPOCH_PATH = "/controller_epoch"


def partitions_path(topic: str) -> str:
    return f"/brokers/topics/{topic}/partitions"


def state_path(topic: str, partition: int) -> str:
    return f"{partitions_path(topic)}/{partition}/state"


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def encode(self) -> bytes:
        isr = ",".join(str(b) for b in self.isr)
        return (f'{{"controller_epoch":{self.controller_epoch},"leader":{self.leader},"version":1,'
                f'"leader_epoch":{self.leader_epoch},"isr":[{isr}]}}').encode()

    @classmethod
    def decode(cls, data: bytes | None) -> PartitionState | None:
        """None for anything that is not a state node (a foreign writer's junk is overwritten, not fatal)."""
        try:
            obj = json.loads(data.decode()) if data else None
            return cls(int(obj["leader"]), int(obj["leader_epoch"]), tuple(int(b) for b in obj["isr"]),
                       int(obj["controller_epoch"]))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            return None


def next_state(current: PartitionState | None, leader: int, controller_epoch: int) -> PartitionState | None:
    """The state to write for ``leader``, or None when ``current`` already says it (no write, no epoch bump)."""
    isr = (leader,) if leader >= 0 else ()
    if current is None:
        return PartitionState(leader, 0, isr, controller_epoch)
    if current.leader == leader and current.isr == isr:
        return None
    return PartitionState(leader, current.leader_epoch + 1, isr, controller_epoch)


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int(data.decode()) if data else 0
    except (UnicodeDecodeError, ValueError):
        return 0
