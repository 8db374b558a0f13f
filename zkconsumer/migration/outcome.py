"""How a run's ``zkconsumer migrate`` invocations ended, in one line: the lab's summary ``migration`` and the
simulator's ``MigrationOutcome.result`` write it the same way, so one scenario reads the same in both worlds.

Pure: the lab and the simulator each learn how their driver ended (an exit code and its output, a task's exception)
and say it here."""

from __future__ import annotations

from enum import StrEnum

THEN = "; then "


class DriverEnd(StrEnum):
    """How one ``zkconsumer migrate`` ended."""

    DONE = "done"  # the forward migration is done
    ROLLED_BACK = "rolled back"  # the rollback is done
    TAKEN_OVER = "taken over"  # a rollback took its lease (the driver stopped without writing the plan again)
    KILLED = "killed"  # SIGKILL (a scenario's ``kill-driver``): the plan stays where it was, a later run resumes
    FAILED = "failed"  # a step did not hold, or the driver could not run


def result_text(rollback: bool, end: DriverEnd, why: str = "") -> str:
    """``done``, ``rolled back``, or ``migration killed``, ``rollback failed: why``…"""
    if end in (DriverEnd.DONE, DriverEnd.ROLLED_BACK):
        return str(end)
    what = "rollback" if rollback else "migration"
    return f"{what} {end}: {why}" if why and end is DriverEnd.FAILED else f"{what} {end}"


def combined(previous: str | None, result: str) -> str:
    """The run's line after one more driver ended: an earlier failure, kill or takeover stays visible."""
    if previous and any(f" {end}" in previous for end in (DriverEnd.FAILED, DriverEnd.KILLED, DriverEnd.TAKEN_OVER)):
        return f"{previous}{THEN}{result}"
    return result


def settled(result: str | None) -> bool:
    """The run's migration ended as asked: its last driver finished (done or rolled back) and none failed; a driver
    killed or taken over on the way and resumed by a later one is the scenario's doing, not a failure."""
    if not result:
        return False
    last = result.rsplit(THEN, 1)[-1]
    return last in (DriverEnd.DONE, DriverEnd.ROLLED_BACK) and f" {DriverEnd.FAILED}" not in result
