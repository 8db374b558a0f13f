"""Randomized fault schedules and their shrinking (issue 31 item 3): ``zkconsumer lab --nemesis``.

Pure (no I/O, no clock, no ZooKeeper): this module draws a schedule of actions from ``random.Random(seed)``, lists
the smaller schedules to try once a schedule breached an invariant, and drives the minimisation through a
``judge`` it is given. Why pure: the drawing rules and the shrinking are where such a tool goes subtly wrong (a
schedule acting on a member that is not running, a shrink that loops or misses the minimum), and a judge that is a
plain function over the schedule tests them in milliseconds; the judge that runs a lab and Spark is
zkconsumer/lab/nemesis_run.py.

A schedule is a :class:`~zkconsumer.scenario.model.Scenario` with absolute times and named members (never ``new`` or
``each``): dropping one action then leaves the others' meaning unchanged, and the file written at the end reads as
what happened.

How each action kind is drawn, checked and shortened is one :class:`KindRule` in :data:`RULES`: an action kind added
to scenario.py is drawable once it has a rule there, and ``--actions`` accepts exactly the kinds that have one. The
member actions, pause, and the faults on a member's ZooKeeper link or session (cut-zk, slow-zk, expire), on the
ensemble (kill-zk, quorum-loss) and on the broker (kill-broker) have one. The topic actions (create-topic,
add-partitions) have none: the world would have to know the run's topics and their sizes, which a schedule leaves
to the lab's defaults; a created topic is consumed only by members subscribed by a whitelist, set for the whole run,
so a shrink that drops the creation would still run another group than the schedule without it; and on a
coordinator variant new partitions reach the classic members only at their next metadata refresh (minutes), so
their records would count as lost, a breach of the run's length rather than of the rebalance. restart-zk and
restart-broker have none either: a drawn kill carries its restart (``seconds``), so every fault heals by itself and
a dropped kill leaves no restart behind.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.errors import IllegalArgument
from zkconsumer.scenario.model import FOLLOWER, LEADER, Action, ActionKind, Scenario
from zkconsumer.scenario.writer import dumps
from zkconsumer.types import LabelledStrEnum


class Invariant(LabelledStrEnum):
    """The analysis' five invariants (zkconsumer/analysis/invariants.py), as a breach names them. The value is the
    name used in summaries and in ``nemesis.json``; :attr:`claim` (the label) is what the invariant says."""

    ZERO_LOST = "zero-lost", "zero lost"
    ONE_LIVE_OWNER = "one-live-owner", "never two live owners"
    DUPLICATES_UNCOMMITTED = "duplicates-uncommitted", "duplicates only inside uncommitted windows"
    COMMITS_FORWARD = "commits-forward", "commits never backwards"
    REOWNED_AFTER_HEAL = "reowned-after-heal", "re-owned within session timeout + 1 s of the heal"

    @property
    def claim(self) -> str:
        return self.label


#: The invariants judged from the members' commits: not judged where a member's commits are not in its trace.
COMMIT_INVARIANTS = (Invariant.DUPLICATES_UNCOMMITTED, Invariant.COMMITS_FORWARD)


def invariant_counts(counts: Any) -> dict[Invariant, int]:
    """Per invariant, how many violations an analysis found (``analysis.invariants.InvariantCounts``; 0: it
    holds): lost records, times two live owners, duplicates of committed records, commits moving back,
    partitions unowned at a heal's deadline."""
    return {Invariant.ZERO_LOST: counts.lost, Invariant.ONE_LIVE_OWNER: counts.overlaps,
            Invariant.DUPLICATES_UNCOMMITTED: counts.duplicates_committed,
            Invariant.COMMITS_FORWARD: counts.commits_backwards,
            Invariant.REOWNED_AFTER_HEAL: counts.unowned_after_heal}


@dataclass(frozen=True)
class Breach:
    """What a judged run broke: the invariants, and the figures in words (``"3 times two live owners"``)."""

    invariants: frozenset[Invariant]
    detail: str = ""

    def __post_init__(self) -> None:
        if not self.invariants:
            raise IllegalArgument("a breach breaks at least one invariant")
        object.__setattr__(self, "invariants", frozenset(Invariant(i) for i in self.invariants))

    @property
    def first(self) -> Invariant:
        """The invariant a shrink keeps breaching: the first broken one, in the analysis' order."""
        return next(i for i in Invariant if i in self.invariants)


#: What judges a schedule: None when every invariant held.
Judge = Callable[[Scenario], "Breach | None"]


# ------------------------------------------------------------------------------------------------- settings
#: The kinds drawn when ``--actions`` is not given: every member action there is today.
DEFAULT_KINDS = (ActionKind.JOIN, ActionKind.STOP, ActionKind.KILL, ActionKind.RESTART, ActionKind.BOUNCE,
                 ActionKind.PAUSE)


@dataclass(frozen=True)
class NemesisSettings:
    """The shape of a drawn run and the rules its actions obey."""

    duration: float = 30.0
    members: int = 3
    session_timeout_ms: int = 4000
    #: at most this many actions in a run (a run draws 1..max_actions)
    max_actions: int = 4
    kinds: tuple[ActionKind, ...] = DEFAULT_KINDS
    #: no action before this: the group's first rebalance is done (the coordinator's waits 3 s for joins)
    first_at: float = 8.0
    #: every action, a pause's end included, ends this long before the run does: the group settles before the lab
    #: stops producing and checks that everything was consumed
    settle: float = 8.0
    #: joins stop at this many members alive
    max_members: int = 6
    #: a stopped or killed member is started again no sooner than this after: its process has exited by then (the
    #: lab skips a restart of a process that still runs)
    exit_grace: float = 4.0
    #: a bounced member is left alone this long (stop, wait for the exit, start)
    bounce_busy: float = 6.0
    #: pauses are drawn between these shares of the session timeout: both sides of it; so are the other faults'
    #: lengths (a link cut or slowed, a ZooKeeper server or the quorum or the broker down)
    pause_range: tuple[float, float] = (0.25, 2.5)
    #: a slowed ZooKeeper link's latency (each way) is a multiple of this, from one step to ``latency_max_share``
    #: of the session timeout: both sides of the client's read timeout (2/3 of the session), past which a round
    #: trip of twice the latency drops the connection
    latency_step_ms: int = 100
    latency_max_share: float = 2 / 3
    #: a member whose session was expired from outside is left alone this long (the expire itself, a twin client
    #: opened and closed, then the member's new session and registration)
    expire_busy: float = 6.0
    #: a member started (a join, a restart), or one whose session may have ended (after a pause, a cut, a slowed
    #: link, a bounce), is registered again this long after: an expire, which needs its registration, waits
    rejoin_grace: float = 4.0
    #: a ZooKeeper server or the broker started again serves this long after its fault's end: the next fault on
    #: the servers (or on the broker) comes no sooner
    restart_grace: float = 4.0
    #: times and pause lengths are multiples of this
    resolution: float = 0.5
    #: the name the run's scenario takes (``nemesis-<seed>``)
    name: str = "nemesis"

    def __post_init__(self) -> None:
        if self.max_actions < 1 or self.members < 1:
            raise IllegalArgument("max_actions and members must be >= 1")
        if self.duration - self.settle <= self.first_at:
            raise IllegalArgument(f"a run of {self.duration:g} s leaves no time for actions between "
                                  f"{self.first_at:g} s and {self.settle:g} s before its end")
        missing = [k for k in self.kinds if k not in RULES]
        if missing:
            raise IllegalArgument(f"no drawing rule for {', '.join(map(str, missing))}; "
                                  f"drawable: {', '.join(drawable())}")

    @property
    def session(self) -> float:
        return self.session_timeout_ms / 1000.0

    @property
    def last_end(self) -> float:
        """No action may still be under way after this (seconds into the run)."""
        return self.duration - self.settle


# ------------------------------------------------------------------------------------------------ the world
#: ZooKeeper servers of a schedule that stops one: a schedule leaves ``zookeeper_nodes`` unset, and
#: ``Scenario.ensemble`` is then 3 when an action stops a node; a quorum survives one server down
ENSEMBLE = 3
QUORUM = ENSEMBLE // 2 + 1


@dataclass
class World:
    """The members and servers as a schedule leaves them at each moment, simulated from the actions so far: who
    runs, who is paused, cut off or being bounced until when, who is registered from when, who has left (and since
    when); which ZooKeeper servers are down until when, and the broker."""

    settings: NemesisSettings
    running: set[str] = field(default_factory=set)
    busy_until: dict[str, float] = field(default_factory=dict)
    gone_since: dict[str, float] = field(default_factory=dict)
    next_new: int = 1
    #: per member, from when it is surely registered (the members started at the beginning: from the start)
    registered_from: dict[str, float] = field(default_factory=dict)
    #: per ZooKeeper server down (a kill-zk's node, each of a quorum loss's majority), when it is started again
    zk_down_until: list[float] = field(default_factory=list)
    #: when the broker killed last is started again
    broker_down_until: float | None = None
    #: when the last expire is over (it needs every ZooKeeper server up until then)
    expiring_until: float = 0.0

    @classmethod
    def start(cls, settings: NemesisSettings) -> World:
        """c1..cN running, as a lab starts them."""
        n = settings.members
        return cls(settings, running={f"c{i}" for i in range(1, n + 1)}, next_new=n + 1)

    def idle(self, at: float) -> list[str]:
        """Members running at ``at`` and free to act on (not paused, not being bounced), by number."""
        return _by_number(m for m in self.running if self.busy_until.get(m, 0.0) <= at)

    def left(self, at: float) -> list[str]:
        """Members that left long enough before ``at`` to be started again."""
        return _by_number(m for m, since in self.gone_since.items() if since + self.settings.exit_grace <= at)

    def alive(self) -> int:
        return len(self.running)

    def others_idle(self, member: str, at: float) -> bool:
        """Another member consumes at ``at``: the run never leaves the group without one (the records produced
        meanwhile would then wait for the end, and a lab run that ends unconsumed reads as records lost)."""
        return any(m != member for m in self.idle(at))

    def registered(self, member: str, at: float) -> bool:
        return self.registered_from.get(member, 0.0) <= at

    def servers_down(self, at: float) -> int:
        """ZooKeeper servers down at ``at``, or started again less than ``restart_grace`` before."""
        return sum(1 for until in self.zk_down_until if until + self.settings.restart_grace > at)

    def broker_down(self, at: float) -> bool:
        """The broker is down at ``at``, or started again less than ``restart_grace`` before."""
        return self.broker_down_until is not None and self.broker_down_until + self.settings.restart_grace > at

    def apply(self, action: Action) -> None:
        rule = RULES.get(action.kind)
        if rule is not None:
            rule.effect(self, action)


def _by_number(names: Iterator[str] | set[str] | list[str]) -> list[str]:
    return sorted(names, key=lambda n: (len(n), n))


# ------------------------------------------------------------------------------------------------ the rules
@dataclass(frozen=True)
class KindRule:
    """How the nemesis treats one action kind: ``draw`` one at ``at`` (None: none is possible then), whether a
    given one ``applies`` at its time (a shrunk schedule must still make sense), its ``effect`` on the world, the
    shorter ``variants`` of it a shrink tries (a shorter pause), and how long it ``lasts`` (it ends before the run
    settles)."""

    draw: Callable[[random.Random, World, float], Action | None]
    applies: Callable[[World, Action], bool]
    effect: Callable[[World, Action], None]
    variants: Callable[[Action, NemesisSettings], list[Action]] = lambda action, settings: []
    lasts: Callable[[Action, NemesisSettings], float] = lambda action, settings: 0.0


def _snap(x: float, resolution: float) -> float:
    return round(round(x / resolution) * resolution, 6)


def _running_action(kind: ActionKind) -> Callable[[random.Random, World, float], Action | None]:
    """Stop, kill or bounce an idle member, as long as another one keeps consuming; a bounce must end in time."""

    def draw(rng: random.Random, world: World, at: float) -> Action | None:
        if kind is ActionKind.BOUNCE and at + world.settings.bounce_busy > world.settings.last_end:
            return None
        choices = [m for m in world.idle(at) if world.others_idle(m, at)]
        return Action(at=at, kind=kind, member=rng.choice(choices)) if choices else None

    return draw


def _applies_running(world: World, action: Action) -> bool:
    if action.kind is ActionKind.BOUNCE and action.at + world.settings.bounce_busy > world.settings.last_end:
        return False
    return action.member in world.idle(action.at) and world.others_idle(action.member, action.at)


def _leave(world: World, action: Action) -> None:
    world.running.discard(action.member)
    world.gone_since[action.member] = action.at


def _draw_join(rng: random.Random, world: World, at: float) -> Action | None:
    """A new member (the next name), or one that left, under its old id (a join after a stop)."""
    if world.alive() >= world.settings.max_members:
        return None
    return Action(at=at, kind=ActionKind.JOIN, member=rng.choice([*world.left(at), f"c{world.next_new}"]))


def _applies_join(world: World, action: Action) -> bool:
    if world.alive() >= world.settings.max_members or action.member in world.running:
        return False
    return action.member in world.left(action.at) or action.member not in world.gone_since


def _start(world: World, action: Action) -> None:
    world.running.add(action.member)
    world.gone_since.pop(action.member, None)
    world.busy_until.pop(action.member, None)
    world.registered_from[action.member] = action.at + world.settings.rejoin_grace
    number = int(action.member[1:]) if action.member[1:].isdigit() else 0
    world.next_new = max(world.next_new, number + 1)


def _draw_restart(rng: random.Random, world: World, at: float) -> Action | None:
    choices = world.left(at)
    return Action(at=at, kind=ActionKind.RESTART, member=rng.choice(choices)) if choices else None


def _applies_restart(world: World, action: Action) -> bool:
    return action.member in world.left(action.at)


def _pause_bounds(settings: NemesisSettings) -> tuple[float, float]:
    lo, hi = settings.pause_range
    return (max(settings.resolution, _snap(settings.session * lo, settings.resolution)),
            _snap(settings.session * hi, settings.resolution))


def _seconds_bounds(settings: NemesisSettings, at: float) -> tuple[float, float]:
    """A fault's length at ``at``: on both sides of the session timeout, ending before the run settles (lo > hi:
    none fits)."""
    lo, hi = _pause_bounds(settings)
    return lo, min(hi, _snap(settings.last_end - at, settings.resolution))


def _draw_seconds(rng: random.Random, settings: NemesisSettings, at: float) -> float:
    lo, hi = _seconds_bounds(settings, at)
    return min(max(_snap(rng.uniform(lo, hi), settings.resolution), lo), hi)


def _latency_steps(settings: NemesisSettings) -> int:
    return max(1, math.floor(settings.session_timeout_ms * settings.latency_max_share / settings.latency_step_ms))


#: The held faults that slow a link rather than stop it: they carry a latency, drawn and shrunk as well.
_SLOWED = (ActionKind.SLOW_ZK, ActionKind.SLOW_BROKER)


def _draw_held(kind: ActionKind) -> Callable[[random.Random, World, float], Action | None]:
    """A pause, cut or slowed link of an idle member, its length drawn on both sides of the session timeout (one
    shorter is a fault the group should not even notice; one longer is the 0.8 zombie), ending before the run
    settles; a slowed link's latency drawn on a step, up to ``latency_max_share`` of the session."""

    def draw(rng: random.Random, world: World, at: float) -> Action | None:
        lo, hi = _seconds_bounds(world.settings, at)
        choices = [m for m in world.idle(at) if world.others_idle(m, at)]
        if hi < lo or not choices:
            return None
        seconds = _draw_seconds(rng, world.settings, at)
        action = Action(at=at, kind=kind, member=rng.choice(choices), seconds=seconds)
        if kind in _SLOWED:
            step = world.settings.latency_step_ms
            action = dataclasses.replace(action, latency_ms=float(rng.randint(1, _latency_steps(world.settings))
                                                                  * step))
        return action

    return draw


def _applies_held(world: World, action: Action) -> bool:
    return (action.seconds > 0 and action.at + action.seconds <= world.settings.last_end
            and (action.kind not in _SLOWED or action.latency_ms > 0)
            and _applies_running(world, action))


def _held(world: World, action: Action) -> None:
    """Busy while the fault lasts (a bounce: while it stops and starts), registered again ``rejoin_grace`` after
    (its session may have ended meanwhile)."""
    end = action.at + RULES[action.kind].lasts(action, world.settings)
    world.busy_until[action.member] = end
    world.registered_from[action.member] = end + world.settings.rejoin_grace


def _shorter_pauses(action: Action, settings: NemesisSettings) -> list[Action]:
    """Half the pause (or cut, or outage), three quarters, then one step less: a breach that needs a pause past the
    session shrinks to one just past it."""
    step = settings.resolution
    values = sorted({_snap(action.seconds * 0.5, step), _snap(action.seconds * 0.75, step),
                     _snap(action.seconds - step, step)})
    return [dataclasses.replace(action, seconds=v) for v in values if step <= v < action.seconds]


def _shorter_and_slower(action: Action, settings: NemesisSettings) -> list[Action]:
    """A slowed link: shorter (as a pause), then less latency (half, three quarters, one step less)."""
    step = settings.latency_step_ms
    values = sorted({_snap(action.latency_ms * 0.5, step), _snap(action.latency_ms * 0.75, step),
                     _snap(action.latency_ms - step, step)})
    return [*_shorter_pauses(action, settings),
            *(dataclasses.replace(action, latency_ms=float(v)) for v in values if step <= v < action.latency_ms)]


def _seconds_of(action: Action, settings: NemesisSettings) -> float:
    return action.seconds


def _draw_expire(rng: random.Random, world: World, at: float) -> Action | None:
    """An idle member's session expired from outside: a member registered (the expire needs its session id), with
    another one consuming, every ZooKeeper server up (the expire reads the member's registration and opens a twin
    session), and time for it to register again before the run settles."""
    if not _expire_fits(world, at):
        return None
    choices = [m for m in world.idle(at) if world.others_idle(m, at) and world.registered(m, at)]
    return Action(at=at, kind=ActionKind.EXPIRE, member=rng.choice(choices)) if choices else None


def _expire_fits(world: World, at: float) -> bool:
    return at + world.settings.expire_busy <= world.settings.last_end and world.servers_down(at) == 0


def _applies_expire(world: World, action: Action) -> bool:
    return (_expire_fits(world, action.at) and world.registered(action.member, action.at)
            and _applies_running(world, action))


def _expired(world: World, action: Action) -> None:
    end = action.at + world.settings.expire_busy
    world.busy_until[action.member] = end
    world.registered_from[action.member] = end
    world.expiring_until = max(world.expiring_until, end)


def _server_fault_fits(world: World, action_at: float, seconds: float, kind: ActionKind) -> bool:
    """Ends before the run settles; a kill-zk leaves a quorum up (no other server down, nor restarted less than
    ``restart_grace`` before), a quorum loss strikes a whole ensemble, neither while an expire is under way; a
    broker kill strikes a broker that runs."""
    if seconds <= 0 or action_at + seconds > world.settings.last_end:
        return False
    if kind is ActionKind.KILL_BROKER:
        return not world.broker_down(action_at)
    if action_at < world.expiring_until:
        return False
    if kind is ActionKind.KILL_ZK:
        return world.servers_down(action_at) + 1 < QUORUM
    return world.servers_down(action_at) == 0


def _draw_server_fault(kind: ActionKind) -> Callable[[random.Random, World, float], Action | None]:
    """A ZooKeeper server (the leader or a follower, as the step finds them) killed, a quorum lost, or the broker
    killed, for a length drawn as a pause's, then started again (``seconds``: the fault heals by itself)."""

    def draw(rng: random.Random, world: World, at: float) -> Action | None:
        lo, hi = _seconds_bounds(world.settings, at)
        if hi < lo or not _server_fault_fits(world, at, lo, kind):
            return None
        action = Action(at=at, kind=kind, seconds=_draw_seconds(rng, world.settings, at))
        if kind is ActionKind.KILL_ZK:
            action = dataclasses.replace(action, node=rng.choice([LEADER, FOLLOWER]))
        return action

    return draw


def _applies_server_fault(world: World, action: Action) -> bool:
    if action.kind is ActionKind.KILL_ZK and action.node not in (LEADER, FOLLOWER):
        return False
    return _server_fault_fits(world, action.at, action.seconds, action.kind)


def _server_down(world: World, action: Action) -> None:
    until = action.at + action.seconds
    if action.kind is ActionKind.KILL_BROKER:
        world.broker_down_until = until
    else:
        world.zk_down_until += [until] * (1 if action.kind is ActionKind.KILL_ZK else QUORUM)


RULES: dict[ActionKind, KindRule] = {
    ActionKind.JOIN: KindRule(_draw_join, _applies_join, _start),
    ActionKind.STOP: KindRule(_running_action(ActionKind.STOP), _applies_running, _leave),
    ActionKind.KILL: KindRule(_running_action(ActionKind.KILL), _applies_running, _leave),
    ActionKind.RESTART: KindRule(_draw_restart, _applies_restart, _start),
    ActionKind.BOUNCE: KindRule(_running_action(ActionKind.BOUNCE), _applies_running, _held,
                                lasts=lambda action, settings: settings.bounce_busy),
    ActionKind.PAUSE: KindRule(_draw_held(ActionKind.PAUSE), _applies_held, _held, _shorter_pauses, _seconds_of),
    ActionKind.CUT_ZK: KindRule(_draw_held(ActionKind.CUT_ZK), _applies_held, _held, _shorter_pauses, _seconds_of),
    ActionKind.SLOW_ZK: KindRule(_draw_held(ActionKind.SLOW_ZK), _applies_held, _held, _shorter_and_slower,
                                 _seconds_of),
    ActionKind.CUT_BROKER: KindRule(_draw_held(ActionKind.CUT_BROKER), _applies_held, _held, _shorter_pauses,
                                    _seconds_of),
    ActionKind.SLOW_BROKER: KindRule(_draw_held(ActionKind.SLOW_BROKER), _applies_held, _held, _shorter_and_slower,
                                     _seconds_of),
    ActionKind.EXPIRE: KindRule(_draw_expire, _applies_expire, _expired,
                                lasts=lambda action, settings: settings.expire_busy),
    ActionKind.KILL_ZK: KindRule(_draw_server_fault(ActionKind.KILL_ZK), _applies_server_fault, _server_down,
                                 _shorter_pauses, _seconds_of),
    ActionKind.QUORUM_LOSS: KindRule(_draw_server_fault(ActionKind.QUORUM_LOSS), _applies_server_fault,
                                     _server_down, _shorter_pauses, _seconds_of),
    ActionKind.KILL_BROKER: KindRule(_draw_server_fault(ActionKind.KILL_BROKER), _applies_server_fault,
                                     _server_down, _shorter_pauses, _seconds_of),
}


def drawable() -> list[str]:
    """The kinds ``--actions`` accepts: those with a rule."""
    return [k.value for k in ActionKind if k in RULES]


def parse_kinds(text: str) -> tuple[ActionKind, ...]:
    """``--actions kill,pause``: the kinds, each with a rule; one error naming the ones that are not."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise IllegalArgument(f"--actions names no action; drawable: {', '.join(drawable())}")
    unknown = [n for n in names if n not in {k.value for k in ActionKind}]
    undrawable = [n for n in names if n not in unknown and ActionKind(n) not in RULES]
    if unknown or undrawable:
        raise IllegalArgument("; ".join(filter(None, [
            f"unknown action(s) {', '.join(unknown)}" if unknown else "",
            f"no drawing rule yet for {', '.join(undrawable)}" if undrawable else ""]))
            + f"; drawable: {', '.join(drawable())}")
    return tuple(k for k in ActionKind if k.value in names)  # in one order: the set, not its spelling, draws


# ------------------------------------------------------------------------------------------------- drawing
def draw(seed: int, settings: NemesisSettings | None = None) -> Scenario:
    """The schedule of ``seed``: 1..max_actions actions at times drawn between ``first_at`` and the settling
    before the end, each of a kind drawn among the allowed ones that can act then (a kind with nobody to act on
    is passed over). The same seed and settings give the same schedule, on any machine (``random.Random`` is
    specified to)."""
    settings = settings or NemesisSettings()
    rng = random.Random(seed)
    n = rng.randint(1, settings.max_actions)
    times = sorted(_snap(rng.uniform(settings.first_at, settings.last_end), settings.resolution) for _ in range(n))
    world = World.start(settings)
    actions: list[Action] = []
    for at in times:
        kinds = list(settings.kinds)
        rng.shuffle(kinds)
        for kind in kinds:
            action = RULES[kind].draw(rng, world, at)
            if action is not None:
                world.apply(action)
                actions.append(action)
                break
    return schedule(settings, actions, seed)


def schedule(settings: NemesisSettings, actions: Sequence[Action], seed: int | None = None,
             duration: float | None = None, members: int | None = None) -> Scenario:
    """A scenario running ``actions`` with the settings' shape."""
    kinds = ",".join(k.value for k in settings.kinds)
    about = (f"drawn by zkconsumer lab --nemesis --seed {seed} --actions {kinds} --max-actions "
             f"{settings.max_actions} --duration {settings.duration:g} --consumers {settings.members}"
             if seed is not None else "a nemesis schedule")
    return Scenario(name=f"{settings.name}-{seed}" if seed is not None else settings.name, description=about,
                    duration=float(settings.duration if duration is None else duration),
                    members=settings.members if members is None else members,
                    session_timeout_ms=settings.session_timeout_ms, actions=tuple(actions))


def violations(scenario: Scenario, settings: NemesisSettings) -> list[str]:
    """Why ``scenario`` breaks the drawing rules (empty: it keeps them), simulated action by action in time order:
    a shrink offers only schedules a draw could have produced."""
    if scenario.duration is None or scenario.members is None:
        return ["a nemesis schedule sets its duration and members"]
    rules = dataclasses.replace(settings, duration=scenario.duration, members=scenario.members)
    world = World.start(rules)
    out = []
    previous = -1.0
    for i, action in enumerate(scenario.actions):
        if isinstance(action.at, str):
            out.append(f"actions[{i}]: a share of the run, not seconds")
            continue
        if action.at < previous:
            out.append(f"actions[{i}]: out of time order")
        previous = action.at
        rule = RULES.get(action.kind)
        if rule is None:
            out.append(f"actions[{i}]: no rule for {action.kind}")
        elif action.at < rules.first_at or not rule.applies(world, action):
            out.append(f"actions[{i}]: {_what(action)} does not apply at {action.at:g} s")
        else:
            world.apply(action)
    return out


# ------------------------------------------------------------------------------------------------ shrinking
@dataclass(frozen=True)
class Candidate:
    """A smaller schedule to try, and what was taken away, in words."""

    scenario: Scenario
    change: str


def candidates(scenario: Scenario, settings: NemesisSettings) -> Iterator[Candidate]:
    """The smaller schedules of ``scenario`` that keep the drawing rules, roughly smallest first, in a fixed order:
    no action at all; then chunks of actions dropped, halves before quarters before single actions (with the
    actions that needed a dropped one, such as a restart of a member whose stop was dropped); then each action's
    shorter variants (a shorter pause); then one member fewer at the start; then a shorter run (ending
    ``settle`` after the last action does). A rule-breaking candidate is never offered."""
    actions = list(scenario.actions)
    seen = {_key(scenario)}

    def offer(new: Scenario, change: str) -> Iterator[Candidate]:
        k = _key(new)
        if k not in seen and not violations(new, settings):
            seen.add(k)
            yield Candidate(new, change)

    if actions:
        yield from offer(dataclasses.replace(scenario, actions=()), "every action dropped")
    size = len(actions) // 2
    while size >= 1:
        for start in range(0, len(actions), size):
            dropped = list(range(start, min(start + size, len(actions))))
            kept = _repair(scenario, [a for i, a in enumerate(actions) if i not in dropped], settings)
            what = (f"action {dropped[0] + 1} dropped" if len(dropped) == 1 else
                    f"actions {dropped[0] + 1}-{dropped[-1] + 1} dropped")
            yield from offer(dataclasses.replace(scenario, actions=tuple(kept)),
                             what + _describe_extra(actions, dropped, kept))
        size //= 2
    for i, action in enumerate(actions):
        rule = RULES.get(action.kind)
        for shorter in (rule.variants(action, settings) if rule else []):
            new = [*actions[:i], shorter, *actions[i + 1:]]
            yield from offer(dataclasses.replace(scenario, actions=tuple(new)),
                             f"action {i + 1} ({_what(action)}) {_shortened(action, shorter)}")
    if scenario.members is not None and scenario.members > 1:
        yield from offer(dataclasses.replace(scenario, members=scenario.members - 1),
                         f"{scenario.members - 1} members at the start")
    if scenario.duration is not None:
        ends = [a.at + _lasts(a, settings) for a in actions if isinstance(a.at, float | int)]
        shortest = max([settings.first_at + settings.resolution, *ends]) + settings.settle  # ends: maybe none
        shortest = round(math.ceil(shortest / settings.resolution - 1e-9) * settings.resolution, 6)  # rounded up
        if shortest < scenario.duration:
            yield from offer(dataclasses.replace(scenario, duration=shortest), f"run of {shortest:g} s")


def _key(scenario: Scenario) -> str:
    return dumps(dataclasses.replace(scenario, name="", description=""))


def _lasts(action: Action, settings: NemesisSettings) -> float:
    rule = RULES.get(action.kind)
    return rule.lasts(action, settings) if rule is not None else 0.0


def _what(action: Action) -> str:
    """``pause c2``, ``kill-zk leader``, ``quorum-loss``."""
    return " ".join(str(x) for x in (action.kind, action.member or action.node) if x)


def _shortened(before: Action, after: Action) -> str:
    if before.seconds != after.seconds:
        return f"{before.seconds:g} s -> {after.seconds:g} s"
    if before.latency_ms != after.latency_ms:
        return f"{before.latency_ms:g} ms -> {after.latency_ms:g} ms of latency"
    return "shortened"


def _describe_extra(actions: list[Action], dropped: list[int], kept: list[Action]) -> str:
    extra = len(actions) - len(dropped) - len(kept)
    return f" (and {extra} that needed them)" if extra else ""


def _repair(scenario: Scenario, actions: list[Action], settings: NemesisSettings) -> list[Action]:
    """Drop, in time order, every action that no longer applies once others were dropped."""
    rules = dataclasses.replace(settings, duration=scenario.duration or settings.duration,
                                members=scenario.members or settings.members)
    world = World.start(rules)
    kept = []
    for action in actions:
        rule = RULES.get(action.kind)
        if rule is not None and isinstance(action.at, float | int) and action.at >= rules.first_at \
                and rule.applies(world, action):
            world.apply(action)
            kept.append(action)
    return kept


@dataclass
class Shrunk:
    """The end of a minimisation: the smallest schedule found that still breaches ``target``."""

    scenario: Scenario
    breach: Breach
    target: Invariant
    #: judgements spent (each a lab run, in the real thing)
    tried: int = 0
    #: what each accepted step took away, in order
    steps: list[str] = field(default_factory=list)
    #: True: no candidate of the result breaches (a local minimum); False: the budget ran out first
    minimal: bool = True


def minimise(scenario: Scenario, breach: Breach, judge: Judge, settings: NemesisSettings,
             target: Invariant | None = None, budget: int | None = None, confirm: int = 1,
             on_try: Callable[[int, Candidate, Breach | None], None] | None = None) -> Shrunk:
    """Greedy shrinking: judge :func:`candidates` in order, move to the first that still breaches ``target``
    (default: the breach's first invariant) and start over from it, until no candidate does or ``budget``
    judgements were spent. A candidate is kept only if ``confirm`` judgements in a row breach ``target`` (a lab
    run is not deterministic: near the edge, a pause just past the session, a breach may come one run in two, and
    a reproducer should reproduce); it is never judged again either way."""
    target = target or breach.first
    result = Shrunk(scenario, breach, target)
    judged: set[str] = {_key(scenario)}
    progress = True
    while progress:
        progress = False
        for candidate in candidates(result.scenario, settings):
            k = _key(candidate.scenario)
            if k in judged:
                continue
            judged.add(k)
            verdict: Breach | None = None
            for _ in range(max(1, confirm)):
                if budget is not None and result.tried >= budget:
                    result.minimal = False
                    return result
                result.tried += 1
                verdict = judge(candidate.scenario)
                if verdict is None or target not in verdict.invariants:
                    break
            if on_try is not None:
                on_try(result.tried, candidate, verdict)
            if verdict is not None and target in verdict.invariants:
                result.scenario, result.breach = candidate.scenario, verdict
                result.steps.append(candidate.change)
                progress = True
                break
    return result


def minimal_name(scenario: Scenario) -> Scenario:
    """The shrunk schedule named as such, so a replay's summary says what it runs."""
    return dataclasses.replace(scenario, name=f"{scenario.name}-minimal",
                               description=f"{scenario.description}; shrunk to a minimal breaching schedule")
