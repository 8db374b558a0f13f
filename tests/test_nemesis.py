"""Randomized fault schedules (scenario/nemesis.py, issue 31 item 3), pure: the draw's determinism and rules, the shrink
reaching a known minimum under a judge that is a plain function of the schedule, and scenario files written back
(scenario/writer.py) reading to the same scenario. Milliseconds each; the lab runs are in
tests/test_nemesis_lab.py."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from zkconsumer.lab.nemesis_run import replay_command
from zkconsumer.scenario.model import (
    EACH,
    FOLLOWER,
    LEADER,
    NEW,
    TO_PARTITIONS,
    Action,
    ActionKind,
    MemberKind,
    Scenario,
)
from zkconsumer.scenario.nemesis import (
    DEFAULT_KINDS,
    QUORUM,
    RULES,
    Breach,
    Invariant,
    NemesisSettings,
    candidates,
    draw,
    drawable,
    minimise,
    parse_kinds,
    schedule,
    violations,
)
from zkconsumer.scenario.reader import builtin, builtin_names, loads
from zkconsumer.scenario.writer import dumps

SETTINGS = NemesisSettings()
#: the fault kinds with a drawing rule, drawn only when --actions names them
FAULTS = parse_kinds("pause,cut-zk,slow-zk,cut-broker,slow-broker,expire,kill-zk,quorum-loss,kill-broker")
#: what the lab's default topics are, for the strict expansion
TOPICS = {"orders": 8, "payments": 4}
#: faults that last ``seconds`` drawn as a pause's
HELD = {ActionKind.PAUSE, ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.CUT_BROKER, ActionKind.SLOW_BROKER,
        ActionKind.KILL_ZK, ActionKind.QUORUM_LOSS, ActionKind.KILL_BROKER}


def loads_strictly(s: Scenario) -> Scenario:
    """``s`` written as a file and read again, every check of scenario.py passed (the strict expansion included:
    members running, servers down, heals before the end), reading to the same steps."""
    back = loads(dumps(s), f"{s.name}.toml")
    assert back.strict and back.ensemble == s.ensemble
    assert back.steps(s.duration, s.members, TOPICS) == s.steps(s.duration, s.members, TOPICS)
    return back


# -------------------------------------------------------------------------------------------------- drawing
def test_the_same_seed_draws_the_same_schedule_and_others_differ() -> None:
    assert draw(7, SETTINGS) == draw(7, SETTINGS)
    assert dumps(draw(7, SETTINGS)) == dumps(draw(7, SETTINGS))
    assert len({dumps(draw(seed, SETTINGS)) for seed in range(50)}) > 40


def test_a_schedule_is_the_same_across_spellings_of_the_action_set() -> None:
    a = NemesisSettings(kinds=parse_kinds("pause,kill"))
    b = NemesisSettings(kinds=parse_kinds("kill, pause,kill"))
    assert draw(3, a) == draw(3, b)


@pytest.mark.parametrize("kinds", [DEFAULT_KINDS, (ActionKind.PAUSE,), (ActionKind.KILL, ActionKind.RESTART),
                                   (ActionKind.STOP, ActionKind.JOIN), (ActionKind.BOUNCE, ActionKind.PAUSE),
                                   FAULTS, (*DEFAULT_KINDS, *FAULTS), (ActionKind.KILL_ZK, ActionKind.QUORUM_LOSS),
                                   (ActionKind.KILL_BROKER,), (ActionKind.EXPIRE, ActionKind.JOIN, ActionKind.KILL,
                                                               ActionKind.RESTART, ActionKind.BOUNCE),
                                   (ActionKind.CUT_ZK, ActionKind.SLOW_ZK)])
def test_every_drawn_schedule_keeps_the_rules(kinds: tuple[ActionKind, ...]) -> None:
    rules = NemesisSettings(kinds=kinds, max_actions=6)
    session = rules.session
    empty = 0
    for seed in range(300):
        s = draw(seed, rules)
        assert len(s.actions) <= rules.max_actions
        empty += not s.actions  # every time drawn had nobody to act on (a pause drawn too late to fit): rare
        assert violations(s, rules) == [], (seed, dumps(s))
        assert {a.kind for a in s.actions} <= set(kinds)
        # what the scenario reader says of it: every member acted on is running by then, no second server down
        # where that loses the quorum, every fault healed before the end (strict expansion), after a round trip
        loads_strictly(s)
        assert s.ensemble == (3 if any(a.kind.on_zookeeper_nodes for a in s.actions) else 1)
        for a in s.actions:
            assert rules.first_at <= a.at <= rules.last_end and a.at % rules.resolution == 0
            if a.kind in HELD:
                assert session * 0.25 <= a.seconds <= session * 2.5 and a.at + a.seconds <= rules.last_end
                assert a.seconds % rules.resolution == 0
            if a.kind is ActionKind.SLOW_ZK:
                assert 100 <= a.latency_ms <= 2 * rules.session_timeout_ms / 3 and a.latency_ms % 100 == 0
            if a.kind is ActionKind.KILL_ZK:
                assert a.node in (LEADER, FOLLOWER)
            if a.kind is ActionKind.EXPIRE:
                assert a.at + rules.expire_busy <= rules.last_end
    assert empty < 300 * 0.05


def test_the_fault_kinds_are_drawn_only_when_asked_for() -> None:
    assert DEFAULT_KINDS == (ActionKind.JOIN, ActionKind.STOP, ActionKind.KILL, ActionKind.RESTART,
                             ActionKind.BOUNCE, ActionKind.PAUSE)
    assert all(not a.kind.needs_fault_lab for seed in range(200) for a in draw(seed, SETTINGS).actions)
    rules = NemesisSettings(kinds=FAULTS, max_actions=5)
    drawn = [a for seed in range(300) for a in draw(seed, rules).actions]
    assert {a.kind for a in drawn} == set(FAULTS)  # each kind drawn
    assert {a.node for a in drawn if a.kind is ActionKind.KILL_ZK} == {LEADER, FOLLOWER}
    # a slowed link's round trip on both sides of the client's read timeout (2/3 of the session)
    latencies = [a.latency_ms for a in drawn if a.kind is ActionKind.SLOW_ZK]
    read_timeout = 2 * rules.session_timeout_ms / 3
    assert any(2 * x < read_timeout for x in latencies) and any(2 * x > read_timeout for x in latencies)
    cuts = [a.seconds for a in drawn if a.kind is ActionKind.CUT_ZK]
    assert min(cuts) < rules.session < max(cuts)


def test_the_fault_rules_hold_fault_by_fault() -> None:
    """Simulated by hand: a ZooKeeper server fault only with every server up and restarted restart_grace before
    (one server down at a time: a 3-node quorum survives one), no quorum loss or kill during an expire, which needs
    every server; the broker killed only while it runs and restarted restart_grace before; a cut, slowed or
    expired member idle with another consuming, an expired one registered; every fault healed before the run
    settles."""
    rules = NemesisSettings(kinds=(*DEFAULT_KINDS, *FAULTS), max_actions=8, duration=60)
    grace = rules.restart_grace
    for seed in range(400):
        s = draw(seed, rules)
        running = {f"c{i}" for i in range(1, rules.members + 1)}
        busy: dict[str, float] = {}
        registered: dict[str, float] = {}
        zk_up_at = broker_up_at = expired_until = 0.0
        for a in s.actions:
            idle = {m for m in running if busy.get(m, 0) <= a.at}
            ends = a.at + (a.seconds if a.kind in HELD else 0.0)
            assert ends <= rules.last_end, (seed, a)
            if a.kind in (ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.EXPIRE, ActionKind.PAUSE,
                          ActionKind.STOP, ActionKind.KILL, ActionKind.BOUNCE):
                assert a.member in idle and idle - {a.member}, (seed, a)
            if a.kind in (ActionKind.KILL_ZK, ActionKind.QUORUM_LOSS):
                assert a.at >= zk_up_at + grace and a.at >= expired_until, (seed, a)
                zk_up_at = ends
            if a.kind is ActionKind.KILL_BROKER:
                assert a.at >= broker_up_at + grace, (seed, a)
                broker_up_at = ends
            if a.kind is ActionKind.EXPIRE:
                assert a.at >= zk_up_at + grace and registered.get(a.member, 0.0) <= a.at, (seed, a)
                busy[a.member] = registered[a.member] = expired_until = a.at + rules.expire_busy
            if a.kind in (ActionKind.JOIN, ActionKind.RESTART):
                running.add(a.member)
                busy.pop(a.member, None)
                registered[a.member] = a.at + rules.rejoin_grace
            if a.kind in (ActionKind.STOP, ActionKind.KILL):
                running.discard(a.member)
            if a.kind in (ActionKind.PAUSE, ActionKind.CUT_ZK, ActionKind.SLOW_ZK, ActionKind.BOUNCE):
                busy[a.member] = a.at + (rules.bounce_busy if a.kind is ActionKind.BOUNCE else a.seconds)
                registered[a.member] = busy[a.member] + rules.rejoin_grace
        loads_strictly(s)


def test_the_rules_hold_member_by_member() -> None:
    """Simulated by hand: nobody is stopped, killed, paused or bounced unless running and idle with another member
    consuming; a restart or join of an old name only after the member left and its process had time to exit."""
    rules = NemesisSettings(max_actions=8, kinds=DEFAULT_KINDS)
    for seed in range(300):
        s = draw(seed, rules)
        running = {f"c{i}" for i in range(1, rules.members + 1)}
        busy: dict[str, float] = {}
        left: dict[str, float] = {}
        for a in s.actions:
            idle = {m for m in running if busy.get(m, 0) <= a.at}
            if a.kind in (ActionKind.STOP, ActionKind.KILL, ActionKind.PAUSE, ActionKind.BOUNCE):
                assert a.member in idle and idle - {a.member}, (seed, a)
            if a.kind in (ActionKind.RESTART, ActionKind.JOIN):
                assert a.member not in running, (seed, a)
                if a.member in left:
                    assert a.at >= left[a.member] + rules.exit_grace, (seed, a)
                else:
                    assert a.kind is ActionKind.JOIN, (seed, a)
                running.add(a.member)
                left.pop(a.member, None)
                assert len(running) <= rules.max_members
            if a.kind in (ActionKind.STOP, ActionKind.KILL):
                running.discard(a.member)
                left[a.member] = a.at
            if a.kind is ActionKind.PAUSE:
                busy[a.member] = a.at + a.seconds
            if a.kind is ActionKind.BOUNCE:
                busy[a.member] = a.at + rules.bounce_busy
                assert busy[a.member] <= rules.last_end


def test_pauses_straddle_the_session_timeout() -> None:
    rules = NemesisSettings(kinds=(ActionKind.PAUSE,), max_actions=3, session_timeout_ms=4000)
    lengths = [a.seconds for seed in range(200) for a in draw(seed, rules).actions]
    assert min(lengths) < 4.0 < max(lengths)
    assert sum(x > 4.0 for x in lengths) > len(lengths) / 4 and sum(x < 4.0 for x in lengths) > len(lengths) / 4


def test_actions_names_only_kinds_with_a_rule() -> None:
    assert set(drawable()) == {k.value for k in RULES}
    assert parse_kinds("kill,pause") == (ActionKind.KILL, ActionKind.PAUSE)
    assert parse_kinds("quorum-loss,kill-broker,cut-zk") == (ActionKind.CUT_ZK, ActionKind.QUORUM_LOSS,
                                                            ActionKind.KILL_BROKER)
    for topic_action in ("create-topic", "add-partitions", "restart-zk", "restart-broker"):
        with pytest.raises(ValueError, match=f"no drawing rule yet for {topic_action}"):
            parse_kinds(f"pause,{topic_action}")
    with pytest.raises(ValueError, match="unknown action.*kil.*drawable: join"):
        parse_kinds("kil,pause")
    with pytest.raises(ValueError, match="no drawing rule yet for migrate"):
        parse_kinds("migrate")
    with pytest.raises(ValueError, match="no drawing rule"):
        NemesisSettings(kinds=(ActionKind.ROLLBACK,))
    with pytest.raises(ValueError, match="leaves no time"):
        NemesisSettings(duration=15)


# ------------------------------------------------------------------------------------------------ shrinking
def pause_judge(session: float) -> tuple[list[Scenario], object]:
    """A pure stand-in for the lab: a pause longer than the session breaks "never two live owners", whatever else
    happens; a kill of c1 breaks "commits never backwards" (so that not every breach is the target)."""
    seen: list[Scenario] = []

    def judge(s: Scenario) -> Breach | None:
        seen.append(s)
        broken = set()
        if any(a.kind is ActionKind.PAUSE and a.seconds > session for a in s.actions):
            broken.add(Invariant.ONE_LIVE_OWNER)
        if any(a.kind is ActionKind.KILL and a.member == "c1" for a in s.actions):
            broken.add(Invariant.COMMITS_FORWARD)
        return Breach(frozenset(broken), "stand-in") if broken else None

    return seen, judge


def busy_schedule() -> Scenario:
    actions = [Action(at=9.0, kind=ActionKind.JOIN, member="c4"),
               Action(at=10.0, kind=ActionKind.KILL, member="c1"),
               Action(at=11.0, kind=ActionKind.PAUSE, member="c2", seconds=9.5),
               Action(at=12.0, kind=ActionKind.STOP, member="c3"),
               Action(at=17.0, kind=ActionKind.RESTART, member="c3"),
               Action(at=18.0, kind=ActionKind.BOUNCE, member="c4")]
    s = schedule(SETTINGS, actions, seed=99, duration=40.0)
    assert violations(s, SETTINGS) == []
    return s


def test_shrinking_reaches_the_known_minimum() -> None:
    seen, judge = pause_judge(SETTINGS.session)
    start = busy_schedule()
    shrunk = minimise(start, judge(start), judge, SETTINGS)
    assert shrunk.minimal and shrunk.target is Invariant.ONE_LIVE_OWNER  # the first broken, in the analysis' order
    # one pause, one step past the session, on the fewest members, in the shortest run that fits it
    assert shrunk.scenario.actions == (Action(at=11.0, kind=ActionKind.PAUSE, member="c2", seconds=4.5),)
    assert shrunk.scenario.members == 2 and shrunk.scenario.duration == 11.0 + 4.5 + SETTINGS.settle
    assert shrunk.breach.invariants == {Invariant.ONE_LIVE_OWNER}
    assert shrunk.tried == len(seen) - 1 and len({dumps(s) for s in seen}) == len(seen)  # nothing judged twice
    assert all(violations(s, SETTINGS) == [] for s in seen)
    assert shrunk.steps[0] == "actions 4-6 dropped"  # halves first: the pause and the kill are in the first


def test_a_candidate_breaching_another_invariant_is_not_kept() -> None:
    _, judge = pause_judge(SETTINGS.session)
    start = busy_schedule()
    shrunk = minimise(start, judge(start), judge, SETTINGS, target=Invariant.COMMITS_FORWARD)
    assert [(a.kind, a.member) for a in shrunk.scenario.actions] == [(ActionKind.KILL, "c1")]


def test_shrinking_stops_at_its_budget_and_says_so() -> None:
    seen, judge = pause_judge(SETTINGS.session)
    start = busy_schedule()
    shrunk = minimise(start, judge(start), judge, SETTINGS, budget=3)
    assert shrunk.tried == 3 == len(seen) - 1 and not shrunk.minimal  # the first judgement was the run's own


def test_a_kept_candidate_breaches_every_time_it_is_confirmed() -> None:
    """A flaky judge: a pause under 6 s breaches only on every other call; with confirm=2 such a pause is not
    kept, so the minimum is the shortest pause that breaches every time."""
    calls = {"n": 0}

    def judge(s: Scenario) -> Breach | None:
        calls["n"] += 1
        pauses = [a.seconds for a in s.actions if a.kind is ActionKind.PAUSE]
        if pauses and (pauses[0] >= 6.0 or pauses[0] > SETTINGS.session and calls["n"] % 2):
            return Breach(frozenset({Invariant.ONE_LIVE_OWNER}))
        return None

    start = schedule(SETTINGS, [Action(at=9.0, kind=ActionKind.PAUSE, member="c1", seconds=10.0)], seed=1)
    steady = minimise(start, Breach(frozenset({Invariant.ONE_LIVE_OWNER})), judge, SETTINGS, confirm=2)
    assert [a.seconds for a in steady.scenario.actions] == [6.0]


def test_candidates_are_deterministic_smallest_first_and_keep_the_rules() -> None:
    s = busy_schedule()
    first = [(c.change, dumps(c.scenario)) for c in candidates(s, SETTINGS)]
    assert first == [(c.change, dumps(c.scenario)) for c in candidates(s, SETTINGS)]
    sizes = [len(c.scenario.actions) for c in candidates(s, SETTINGS)]
    assert sizes[0] == 0 and sizes[1] <= 3
    assert all(violations(c.scenario, SETTINGS) == [] for c in candidates(s, SETTINGS))
    # dropping the stop of c3 takes its restart with it: a restart of a member still running breaks the rules
    changes = dict(first)
    assert "action 4 dropped (and 1 that needed them)" in changes
    assert "action 3 (pause c2) 9.5 s -> 5 s" in changes


def fault_schedule() -> Scenario:
    actions = [Action(at=9.0, kind=ActionKind.KILL_ZK, node=LEADER, seconds=5.0),
               Action(at=10.0, kind=ActionKind.SLOW_ZK, member="c1", seconds=6.0, latency_ms=2400.0),
               Action(at=12.0, kind=ActionKind.KILL_BROKER, seconds=3.0),
               Action(at=18.5, kind=ActionKind.EXPIRE, member="c2"),  # every server up for 4 s
               Action(at=19.0, kind=ActionKind.CUT_ZK, member="c3", seconds=4.0),
               Action(at=25.0, kind=ActionKind.QUORUM_LOSS, seconds=5.0)]  # the expire over
    s = schedule(dataclasses.replace(SETTINGS, kinds=FAULTS), actions, seed=98, duration=40.0)
    assert violations(s, SETTINGS) == []
    return s


def test_a_server_fault_that_overlaps_another_breaks_the_rules() -> None:
    s = fault_schedule()
    for bad in (Action(at=12.0, kind=ActionKind.KILL_ZK, node=FOLLOWER, seconds=1.0),  # a second node down
                Action(at=16.0, kind=ActionKind.QUORUM_LOSS, seconds=1.0),  # the node killed at 9 s back at 14 s
                Action(at=15.0, kind=ActionKind.KILL_BROKER, seconds=1.0),  # killed at 12 s, back at 15 s
                Action(at=14.0, kind=ActionKind.EXPIRE, member="c3"),  # a node down
                Action(at=31.0, kind=ActionKind.KILL_BROKER, seconds=2.0),  # heals after the run settles
                Action(at=10.5, kind=ActionKind.CUT_ZK, member="c1", seconds=1.0)):  # c1 slowed already
        actions = sorted([*s.actions, bad], key=lambda a: a.at)
        found = violations(dataclasses.replace(s, actions=tuple(actions)), SETTINGS)
        assert len(found) == 1 and found[0].startswith(f"actions[{actions.index(bad)}]: "), (bad, found)
    # a second node down where that loses the quorum: what the format refuses as well
    overlapping = dataclasses.replace(s, actions=(*s.actions[:1], Action(at=10.0, kind=ActionKind.KILL_ZK,
                                                                         node=FOLLOWER, seconds=1.0)))
    with pytest.raises(ValueError, match="another loses the quorum"):
        loads(dumps(overlapping)).steps(40.0, 3, TOPICS)
    assert QUORUM == 2


def test_fault_schedules_shrink_to_candidates_that_load() -> None:
    s = fault_schedule()
    changes = []
    for c in candidates(s, SETTINGS):
        assert violations(c.scenario, SETTINGS) == [], c.change
        loads_strictly(c.scenario)
        changes.append(c.change)
    assert "action 2 (slow-zk c1) 2400 ms -> 1200 ms of latency" in changes
    assert "action 2 (slow-zk c1) 6 s -> 3 s" in changes
    assert "action 1 (kill-zk leader) 5 s -> 2.5 s" in changes
    assert "action 6 (quorum-loss) 5 s -> 4.5 s" in changes
    rules = NemesisSettings(kinds=(*DEFAULT_KINDS, *FAULTS), max_actions=6)
    for seed in range(60):  # and those of drawn schedules
        for c in candidates(draw(seed, rules), rules):
            loads_strictly(c.scenario)


def test_a_slowed_link_shrinks_to_the_least_latency_and_time_that_breach() -> None:
    """A stand-in judge: a link slowed past 1 s each way for more than 2 s breaks "re-owned after the heal"."""

    def judge(s: Scenario) -> Breach | None:
        slow = any(a.kind is ActionKind.SLOW_ZK and a.latency_ms > 1000 and a.seconds > 2 for a in s.actions)
        return Breach(frozenset({Invariant.REOWNED_AFTER_HEAL})) if slow else None

    start = fault_schedule()
    shrunk = minimise(start, judge(start), judge, SETTINGS)
    assert shrunk.minimal
    assert shrunk.scenario.actions == (Action(at=10.0, kind=ActionKind.SLOW_ZK, member="c1", seconds=2.5,
                                              latency_ms=1100.0),)
    assert shrunk.scenario.members == 2 and shrunk.scenario.duration == 10.0 + 2.5 + SETTINGS.settle


def test_a_schedule_with_no_action_shrinks_without_failing() -> None:
    s = schedule(SETTINGS, [], seed=5)
    assert [c.change for c in candidates(s, SETTINGS)] == ["2 members at the start", "run of 16.5 s"]


def test_a_schedule_with_no_breach_to_find_is_left_as_it_is() -> None:
    s = draw(1, SETTINGS)
    shrunk = minimise(s, Breach(frozenset({Invariant.COMMITS_FORWARD})), lambda _: None, SETTINGS)
    assert shrunk.scenario == s and shrunk.minimal and shrunk.steps == []


def test_the_replay_command_names_the_profile_or_the_variant(tmp_path) -> None:
    path = tmp_path / "minimal.toml"
    assert replay_command(path, "zookeeper-kafka-0.8", {"strategy": "roundrobin"}) == (
        f"zkconsumer lab --scenario {path} --profile kafka-0.8 --strategy roundrobin --analyze")
    assert replay_command(path, "kafka-0.8.2.2", {}) == (
        f"zkconsumer compare --scenario {path} --variants kafka-0.8.2.2")


# ---------------------------------------------------------------------------------------- TOML round trip
def without_positions(s: Scenario) -> Scenario:
    """Where a scenario was written (its file, each action's line) is not part of what it says."""
    return dataclasses.replace(s, source="", actions=tuple(dataclasses.replace(a, line=None) for a in s.actions))


text = st.text(st.characters(codec="utf-8"), max_size=20)
seconds_or_share = st.one_of(st.floats(0, 1e6, allow_nan=False, allow_infinity=False),
                             st.integers(0, 1000).map(lambda n: f"{n / 10}%"))
member = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(lambda m: m not in (NEW, EACH))
positive = st.floats(0.001, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def actions(draw_) -> Action:  # noqa: ANN001 - hypothesis' draw
    kind = draw_(st.sampled_from([ActionKind(k) for k in ("join", "stop", "kill", "restart", "bounce", "pause",
                                                          "migrate", "rollback")]))
    at = draw_(seconds_or_share)
    if not kind.on_member:
        return Action(at=at, kind=kind)
    if kind is ActionKind.JOIN:
        name = draw_(st.one_of(member, st.just(NEW)))
    else:
        name = draw_(st.one_of(member, st.just(EACH)))
    count: int | str = 1
    if name == NEW:
        count = draw_(st.one_of(st.integers(1, 50), st.just(TO_PARTITIONS)))
    until = draw_(st.one_of(st.none(), seconds_or_share)) if name == EACH or count != 1 else None
    pause = draw_(positive) if kind is ActionKind.PAUSE else 0.0
    return Action(at=at, kind=kind, member=name, until=until, count=count, seconds=pause)


scenarios = st.builds(
    Scenario,
    name=st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
    description=text,
    duration=st.one_of(st.none(), positive),
    members=st.one_of(st.none(), st.integers(1, 1000)),
    rate=st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False, allow_infinity=False)),
    initial_records=st.one_of(st.none(), st.integers(0, 2**40)),
    session_timeout_ms=st.one_of(st.none(), st.integers(1, 2**31)),
    commit_interval_ms=st.one_of(st.none(), st.integers(1, 2**31)),
    strategy=st.one_of(st.none(), st.sampled_from(["range", "roundrobin", "roundrobin-relaxed"])),
    topics=st.dictionaries(st.text(st.characters(codec="utf-8"), min_size=1, max_size=10), st.integers(1, 10_000),
                           max_size=4),
    actions=st.lists(actions(), max_size=6).map(tuple),
    kinds=st.dictionaries(member, st.sampled_from(list(MemberKind)), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(scenarios)
@example(Scenario(name="0", topics={"0\n": 1}))  # a key ending in a newline is quoted, not written bare
def test_a_scenario_written_back_reads_to_the_same_scenario(s: Scenario) -> None:
    assert without_positions(loads(dumps(s), "x.toml")) == without_positions(s)


def test_every_drawn_schedule_reads_back_the_same() -> None:
    for seed in range(100):
        s = draw(seed, SETTINGS)
        assert without_positions(loads(dumps(s))) == without_positions(s)


def test_a_written_scenario_reads_as_a_person_would_write_it() -> None:
    s = busy_schedule()
    out = dumps(s)
    assert out.startswith('name = "nemesis-99"\n')
    assert '[[actions]]\nat = 11.0\ndo = "pause"\nmember = "c2"\nseconds = 9.5\n' in out
    assert "line" not in out and "source" not in out and "count" not in out


@pytest.mark.parametrize("name", builtin_names())
def test_every_shipped_scenario_reads_back_the_same(name: str) -> None:
    """Every kind and field the format has today, the fault and topic actions included (written under their own
    keys: nothing in scenario/writer.py names them)."""
    s = dataclasses.replace(builtin(name), strict=True)  # strict is the reader's, not the file's
    assert without_positions(loads(dumps(s), f"{name}.toml")) == without_positions(s)


def test_a_breach_names_the_invariants_the_analysis_counted() -> None:
    from zkconsumer.analysis.invariants import InvariantCounts
    from zkconsumer.lab.nemesis_run import breach_of

    assert breach_of(InvariantCounts(duplicates=40)) is None  # duplicates inside uncommitted windows: allowed
    breach = breach_of(InvariantCounts(overlaps=7, duplicates=600, duplicates_committed=572))
    assert breach is not None and breach.invariants == {Invariant.ONE_LIVE_OWNER, Invariant.DUPLICATES_UNCOMMITTED}
    assert breach.first is Invariant.ONE_LIVE_OWNER
    assert breach.detail == "7 times two live owners; 572 duplicates of committed records"
    # members whose commits the traces lack (Kafka 0.8.2.2's own): nothing about commits is a breach
    untraced = breach_of(InvariantCounts(overlaps=7, duplicates_committed=572), judge_commits=False)
    assert untraced is not None and untraced.invariants == {Invariant.ONE_LIVE_OWNER}
    assert breach_of(InvariantCounts(commits_backwards=3), judge_commits=False) is None


@pytest.mark.parametrize(("argv", "says"), [
    (["--actions", "kil,pause"], "unknown action(s) kil"),
    (["--actions", "migrate"], "no drawing rule yet for migrate"),
    (["--scenario", "gc-pause"], "--nemesis draws its own schedule"),
    (["--runs", "0"], "--runs, --shrink-confirm and --consumers must be >= 1"),
    (["--duration", "12"], "leaves no time for actions"),
])
def test_the_cli_refuses_a_nemesis_it_cannot_run_before_starting_anything(argv: list[str], says: str, tmp_path,
                                                                          capsys) -> None:
    from zkconsumer.cli import main

    assert main(["lab", "--nemesis", "--out", str(tmp_path / "n"), *argv]) == 1
    assert says in capsys.readouterr().err.replace("\n", " ")
    assert not (tmp_path / "n").exists()
