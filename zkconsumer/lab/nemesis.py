"""Randomized fault schedules and their shrinking (issue 31 item 3): ``zkconsumer lab --nemesis``.

Pure (no I/O, no clock, no ZooKeeper): this module draws a schedule of actions from ``random.Random(seed)``, lists
the smaller schedules to try once a schedule breached an invariant, and drives the minimisation through a
``judge`` it is given. Why pure: the drawing rules and the shrinking are where such a tool goes subtly wrong (a
schedule acting on a member that is not running, a shrink that loops or misses the minimum), and a judge that is a
plain function over the schedule tests them in milliseconds; the judge that runs a lab and Spark is
zkconsumer/lab/nemesis_run.py.

A schedule is a :class:`~zkconsumer.lab.scenario.Scenario` with absolute times and named members (never ``new`` or
``each``): dropping one action then leaves the others' meaning unchanged, and the file written at the end reads as
what happened.

How each action kind is drawn, checked and shortened is one :class:`KindRule` in :data:`RULES`: an action kind added
to scenario.py (a ZooKeeper node killed, a link cut) is drawable once it has a rule there, and ``--actions``
accepts exactly the kinds that have one.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from zkconsumer.lab.scenario import Action, ActionKind, Scenario
from zkconsumer.lab.scenario_toml import dumps


class Invariant(StrEnum):
    """The analysis' five invariants (zkconsumer/analysis/invariants.py), as a breach names them. The value is the
    name used in summaries and in ``nemesis.json``; :attr:`claim` is what the invariant says."""

    ZERO_LOST = "zero-lost"
    ONE_LIVE_OWNER = "one-live-owner"
    DUPLICATES_UNCOMMITTED = "duplicates-uncommitted"
    COMMITS_FORWARD = "commits-forward"
    REOWNED_AFTER_HEAL = "reowned-after-heal"

    @property
    def claim(self) -> str:
        return _CLAIMS[self]


_CLAIMS = {
    Invariant.ZERO_LOST: "zero lost",
    Invariant.ONE_LIVE_OWNER: "never two live owners",
    Invariant.DUPLICATES_UNCOMMITTED: "duplicates only inside uncommitted windows",
    Invariant.COMMITS_FORWARD: "commits never backwards",
    Invariant.REOWNED_AFTER_HEAL: "re-owned within session timeout + 1 s of the heal",
}


@dataclass(frozen=True)
class Breach:
    """What a judged run broke: the invariants, and the figures in words (``"3 times two live owners"``)."""

    invariants: frozenset[Invariant]
    detail: str = ""

    def __post_init__(self) -> None:
        if not self.invariants:
            raise ValueError("a breach breaks at least one invariant")
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
    #: pauses are drawn between these shares of the session timeout: both sides of it
    pause_range: tuple[float, float] = (0.25, 2.5)
    #: times and pause lengths are multiples of this
    resolution: float = 0.5
    #: the name the run's scenario takes (``nemesis-<seed>``)
    name: str = "nemesis"

    def __post_init__(self) -> None:
        if self.max_actions < 1 or self.members < 1:
            raise ValueError("max_actions and members must be >= 1")
        if self.duration - self.settle <= self.first_at:
            raise ValueError(f"a run of {self.duration:g} s leaves no time for actions between {self.first_at:g} s "
                             f"and {self.settle:g} s before its end")
        missing = [k for k in self.kinds if k not in RULES]
        if missing:
            raise ValueError(f"no drawing rule for {', '.join(map(str, missing))}; drawable: {', '.join(drawable())}")

    @property
    def session(self) -> float:
        return self.session_timeout_ms / 1000.0

    @property
    def last_end(self) -> float:
        """No action may still be under way after this (seconds into the run)."""
        return self.duration - self.settle


# ------------------------------------------------------------------------------------------------ the world
@dataclass
class World:
    """The members as a schedule leaves them at each moment, simulated from the actions so far: who runs, who is
    paused or being bounced until when, who has left (and since when)."""

    settings: NemesisSettings
    running: set[str] = field(default_factory=set)
    busy_until: dict[str, float] = field(default_factory=dict)
    gone_since: dict[str, float] = field(default_factory=dict)
    next_new: int = 1

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
    given one ``applies`` at its time (a shrunk schedule must still make sense), its ``effect`` on the world, and
    the shorter ``variants`` of it a shrink tries (a shorter pause)."""

    draw: Callable[[random.Random, World, float], Action | None]
    applies: Callable[[World, Action], bool]
    effect: Callable[[World, Action], None]
    variants: Callable[[Action, NemesisSettings], list[Action]] = lambda action, settings: []


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


def _busy_for(seconds: Callable[[Action, NemesisSettings], float]) -> Callable[[World, Action], None]:
    def effect(world: World, action: Action) -> None:
        world.busy_until[action.member] = action.at + seconds(action, world.settings)

    return effect


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


def _draw_pause(rng: random.Random, world: World, at: float) -> Action | None:
    """A pause of an idle member, its length drawn on both sides of the session timeout (one shorter is a pause
    the group should not even notice; one longer is the 0.8 zombie), ending before the run settles."""
    lo, hi = _pause_bounds(world.settings)
    hi = min(hi, _snap(world.settings.last_end - at, world.settings.resolution))
    choices = [m for m in world.idle(at) if world.others_idle(m, at)]
    if hi < lo or not choices:
        return None
    seconds = _snap(rng.uniform(lo, hi), world.settings.resolution)
    return Action(at=at, kind=ActionKind.PAUSE, member=rng.choice(choices), seconds=min(max(seconds, lo), hi))


def _applies_pause(world: World, action: Action) -> bool:
    return (action.seconds > 0 and action.at + action.seconds <= world.settings.last_end
            and _applies_running(world, action))


def _shorter_pauses(action: Action, settings: NemesisSettings) -> list[Action]:
    """Half the pause, three quarters, then one step less: a breach that needs a pause past the session shrinks
    to one just past it."""
    step = settings.resolution
    values = sorted({_snap(action.seconds * 0.5, step), _snap(action.seconds * 0.75, step),
                     _snap(action.seconds - step, step)})
    return [dataclasses.replace(action, seconds=v) for v in values if step <= v < action.seconds]


RULES: dict[ActionKind, KindRule] = {
    ActionKind.JOIN: KindRule(_draw_join, _applies_join, _start),
    ActionKind.STOP: KindRule(_running_action(ActionKind.STOP), _applies_running, _leave),
    ActionKind.KILL: KindRule(_running_action(ActionKind.KILL), _applies_running, _leave),
    ActionKind.RESTART: KindRule(_draw_restart, _applies_restart, _start),
    ActionKind.BOUNCE: KindRule(_running_action(ActionKind.BOUNCE), _applies_running,
                                _busy_for(lambda action, settings: settings.bounce_busy)),
    ActionKind.PAUSE: KindRule(_draw_pause, _applies_pause, _busy_for(lambda action, settings: action.seconds),
                               _shorter_pauses),
}


def drawable() -> list[str]:
    """The kinds ``--actions`` accepts: those with a rule."""
    return [k.value for k in ActionKind if k in RULES]


def parse_kinds(text: str) -> tuple[ActionKind, ...]:
    """``--actions kill,pause``: the kinds, each with a rule; one error naming the ones that are not."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"--actions names no action; drawable: {', '.join(drawable())}")
    unknown = [n for n in names if n not in {k.value for k in ActionKind}]
    undrawable = [n for n in names if n not in unknown and ActionKind(n) not in RULES]
    if unknown or undrawable:
        raise ValueError("; ".join(filter(None, [
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
            out.append(f"actions[{i}]: {action.kind} {action.member} does not apply at {action.at:g} s")
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
                             f"action {i + 1} ({action.kind} {action.member}) {_shortened(action, shorter)}")
    if scenario.members is not None and scenario.members > 1:
        yield from offer(dataclasses.replace(scenario, members=scenario.members - 1),
                         f"{scenario.members - 1} members at the start")
    if scenario.duration is not None:
        ends = [a.at + _lasts(a, settings) for a in actions if isinstance(a.at, float | int)]
        shortest = max(settings.first_at + settings.resolution, *ends) + settings.settle
        shortest = round(math.ceil(shortest / settings.resolution - 1e-9) * settings.resolution, 6)  # rounded up
        if shortest < scenario.duration:
            yield from offer(dataclasses.replace(scenario, duration=shortest), f"run of {shortest:g} s")


def _key(scenario: Scenario) -> str:
    return dumps(dataclasses.replace(scenario, name="", description=""))


def _lasts(action: Action, settings: NemesisSettings) -> float:
    if action.kind is ActionKind.PAUSE:
        return action.seconds
    if action.kind is ActionKind.BOUNCE:
        return settings.bounce_busy
    return 0.0


def _shortened(before: Action, after: Action) -> str:
    if before.seconds != after.seconds:
        return f"{before.seconds:g} s -> {after.seconds:g} s"
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
