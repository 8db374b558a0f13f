"""When a rebalancing group's join completes: Kafka's DelayedJoin and InitialDelayedJoin.

A group in PreparingRebalance completes its join (a new generation, or Empty) once every member has rejoined, or
at the latest when the rebalance timeout (its members' largest) has passed; members that did not rejoin by then
are dropped. A group starting from Empty first waits ``group.initial.rebalance.delay.ms``, and once more each
time a member joined meanwhile, within the rebalance timeout: a group starting up settles in one generation
rather than one per member. During that delay only the deadline completes the join.

Each group's current phase lives here, not in :class:`~.group.Group` (which stays the pure state machine), and
its deadline is a keyed timer: a new phase replaces it, an early completion cancels it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from zkconsumer.coordinator.group import Group, GroupState
from zkconsumer.coordinator.timer import KeyedTimer


@dataclass
class JoinPhase:
    """A PreparingRebalance group's wait for its members."""

    deadline_ms: int
    #: In the initial rebalance delay (InitialDelayedJoin), not the rebalance timeout (DelayedJoin).
    initial: bool
    #: What is left of the rebalance timeout for further initial delays.
    remaining_ms: int = 0
    #: A member joined since this initial delay started: the group waits another delay.
    new_member_added: bool = False


class DelayedJoins:
    """The join phases of the groups in PreparingRebalance; ``complete`` runs a join that is due (the manager's
    onCompleteJoin). Called with the coordinator's lock held, as are the timers it schedules."""

    def __init__(self, timer: KeyedTimer, initial_delay_ms: int, complete: Callable[[Group, int], None]) -> None:
        self._timer = timer
        self._initial_delay_ms = initial_delay_ms
        self._complete = complete
        self._phases: dict[str, JoinPhase] = {}

    def begin(self, group: Group, now: int, from_empty: bool) -> None:
        """The group just went to PreparingRebalance: wait the initial delay if it comes from Empty, else its
        rebalance timeout."""
        timeout = group.max_rebalance_timeout_ms()
        if from_empty and self._initial_delay_ms > 0:
            phase = JoinPhase(now + min(self._initial_delay_ms, timeout), initial=True,
                              remaining_ms=max(timeout - self._initial_delay_ms, 0))
        else:
            phase = JoinPhase(now + timeout, initial=False)
        self._phases[group.group_id] = phase
        self._schedule(group, phase)

    def member_added(self, group_id: str) -> None:
        """A new member joined: within an initial delay, it earns the group another one."""
        phase = self._phases.get(group_id)
        if phase is not None:
            phase.new_member_added = True

    def deadline_ms(self, group_id: str) -> int | None:
        """When the group's join completes at the latest, as it stands (None: no join under way)."""
        phase = self._phases.get(group_id)
        return None if phase is None else phase.deadline_ms

    def try_complete(self, group: Group, now: int) -> None:
        """Complete the group's join if it is due: everyone is back, or its deadline passed (Kafka's
        tryCompleteJoin and onExpireJoin)."""
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        phase = self._phases.get(group.group_id)
        if phase is not None and phase.initial:
            if now < phase.deadline_ms:
                return
            if phase.new_member_added and phase.remaining_ms > 0:  # members still arriving: another delay
                phase.deadline_ms = now + min(self._initial_delay_ms, phase.remaining_ms)
                phase.remaining_ms = max(phase.remaining_ms - self._initial_delay_ms, 0)
                phase.new_member_added = False
                self._schedule(group, phase)
                return
        elif phase is not None and not group.all_joined() and now < phase.deadline_ms:
            return
        self._phases.pop(group.group_id, None)
        self._timer.cancel(("join", group.group_id))
        self._complete(group, now)

    def _schedule(self, group: Group, phase: JoinPhase) -> None:
        self._timer.schedule(("join", group.group_id), phase.deadline_ms, lambda now: self.try_complete(group, now))
