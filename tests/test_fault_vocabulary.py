"""One vocabulary of faults (issue 53 item 2): every action kind of the scenario model has one handler in each world's
table, or, in the simulator, a reason it is refused; a kind added to the model fails here until both worlds say."""

from __future__ import annotations

from zkconsumer.lab.steps import STEP_HANDLERS as LAB
from zkconsumer.scenario.model import ActionKind, LabMode, Step
from zkconsumer.scenario.plan import RunPlan
from zkconsumer.sim.world import NOT_SIMULATED, unsupported
from zkconsumer.sim.world import STEP_HANDLERS as SIM


def test_the_lab_has_a_handler_for_every_action_kind() -> None:
    assert set(LAB) == set(ActionKind)


def test_the_simulator_handles_or_refuses_each_kind_with_a_reason() -> None:
    assert set(SIM) | set(NOT_SIMULATED) == set(ActionKind)
    assert set(SIM) & set(NOT_SIMULATED) == set()
    assert all(reason.strip() for reason in NOT_SIMULATED.values())


def test_a_plan_with_a_refused_kind_is_refused_by_name_and_reason() -> None:
    for kind, reason in NOT_SIMULATED.items():
        plan = RunPlan(steps=[Step(1.0, kind)], consumers=2)
        assert any(str(kind) in line and reason in line for line in unsupported(plan)), kind
    migration = {k for k in ActionKind if k.on_migration}  # the lab's migrate mode only, as the lab refuses them
    assert unsupported(RunPlan(steps=[Step(1.0, k, "c1") for k in SIM if k not in migration], consumers=2)) == []
    assert unsupported(RunPlan(steps=[Step(1.0, k) for k in migration], consumers=2, mode=LabMode.MIGRATE)) == []
    assert all("need mode migrate" in line for line in unsupported(RunPlan(steps=[Step(1.0, ActionKind.MIGRATE)])))
