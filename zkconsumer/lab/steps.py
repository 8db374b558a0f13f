"""The real lab's handler of each action kind: one table, keyed by the scenario model's enum.

The simulated world's table is ``sim/world.py``'s ``STEP_HANDLERS``; a new action kind is added to the model
(scenario/model.py), then a handler here and one there, or a reason the simulator refuses it
(tests/test_fault_vocabulary.py fails until both worlds have one or the other). A member step is carried out by a
:class:`~zkconsumer.lab.runner.Lab` on its loop's thread; a fault or topic step by a
:class:`~zkconsumer.lab.faults.scenario_lab.ScenarioLab` on a thread of its own, since a fault lasts seconds. The
handlers take the lab as ``Any``: this table sits below both classes, which import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkconsumer.scenario.model import ActionKind, Step

Handler = Callable[[Any, Step], None]


def _restart_zk(lab: Any, step: Step) -> None:
    lab._restart_zk([step.node] if isinstance(step.node, int) else list(lab.down))


STEP_HANDLERS: dict[ActionKind, Handler] = {
    # member steps (Lab, runner.py)
    ActionKind.JOIN: lambda lab, step: lab.members.start(step.consumer),
    ActionKind.STOP: lambda lab, step: lab.members.stop(step.consumer, kill=False),
    ActionKind.KILL: lambda lab, step: lab.members.stop(step.consumer, kill=True),
    ActionKind.RESTART: lambda lab, step: lab.members.restart(step.consumer),
    ActionKind.BOUNCE: lambda lab, step: lab.members.bounce(step.consumer),
    ActionKind.PAUSE: lambda lab, step: lab.pause(step.consumer, step.seconds),
    ActionKind.MIGRATE: lambda lab, step: lab.migrate(rollback=False),
    ActionKind.ROLLBACK: lambda lab, step: lab.migrate(rollback=True),
    ActionKind.KILL_DRIVER: lambda lab, step: lab.kill_driver(),
    ActionKind.JOIN_STRANGER: lambda lab, step: lab.join_stranger(step.consumer),
    # faults and topic changes (ScenarioLab, faults/scenario_lab.py)
    ActionKind.CUT_ZK: lambda lab, step: lab._cut(step.consumer, step.seconds),
    ActionKind.SLOW_ZK: lambda lab, step: lab._slow(step.consumer, step.seconds, step.latency_ms),
    ActionKind.EXPIRE: lambda lab, step: lab._expire(step.consumer),
    ActionKind.CUT_BROKER: lambda lab, step: lab._cut_broker(step.consumer, step.seconds),
    ActionKind.SLOW_BROKER: lambda lab, step: lab._slow_broker(step.consumer, step.seconds, step.latency_ms),
    ActionKind.KILL_ZK: lambda lab, step: lab._kill_zk(step.node, step.seconds),
    ActionKind.RESTART_ZK: _restart_zk,
    ActionKind.QUORUM_LOSS: lambda lab, step: lab._quorum_loss(step.seconds),
    ActionKind.KILL_BROKER: lambda lab, step: lab._kill_broker(step.seconds),
    ActionKind.RESTART_BROKER: lambda lab, step: lab._restart_broker(),
    ActionKind.KILL_COORDINATOR: lambda lab, step: lab._kill_coordinator(step.seconds),
    ActionKind.CREATE_TOPIC: lambda lab, step: lab._create_topic(step.topic, step.partitions),
    ActionKind.ADD_PARTITIONS: lambda lab, step: lab._add_partitions(step.topic, step.partitions),
}
